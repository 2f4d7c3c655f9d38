/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A Sentinel-managed member (redis-sentinel://...#MASTER) against a real
 * topology: scripts/rig start --sentinel 1 (a master, a replica and 3
 * sentinels with down-after-milliseconds 1000) on free ports of its own,
 * in $SENTINEL_RIG_DIR if set, else the SENTINEL_RIG_DIR the build
 * defines, stopped when the run ends. The client acquires and releases on
 * the master the sentinels name; after SIGKILL of that master and the
 * sentinels' failover, the same client (never recreated) acquires again,
 * on the promoted replica, within a bounded wait.
 *
 * With SENTINEL_TLS=1 the same cases run over TLS: the rig is started with
 * --tls (nodes and sentinels TLS only, replication over TLS), the members
 * are rediss-sentinel:// URIs, the client trusts the rig's CA (RIG_CA of
 * `rig env`) and verifies each server's host, and every redis-cli the test
 * runs uses TLS too.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <poll.h>

#include "config/uri.h"
#include "redlock/redlock.h"
#include "transport/conn.h"
#include "transport/resolve.h"
#include "transport/sentinel.h"
#include "transport/tls.h"

#define FAILOVER_MAX_MS 30000

static char rig_uri[512];
static int rig_up;
static pid_t rig_owner; /* Check forks each test; only this one stops */
/* Set in main, before Check forks the cases. */
static int use_tls;          /* SENTINEL_TLS=1 */
static const char *rig_dir;  /* $SENTINEL_RIG_DIR or the build's default */
static char rig_ca[512];     /* TLS: RIG_CA of `rig env` */
static char cli[600];        /* "timeout 5 redis-cli -h 127.0.0.1" (+ TLS) */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs a shell command and returns its first output line (trimmed), or
 * "" when it printed nothing; *status gets its exit status. */
static const char *run(const char *cmd, int *status)
{
    static char line[1024];
    FILE *f = popen(cmd, "r");
    int st;

    line[0] = '\0';
    if (!f) {
        *status = -1;
        return line;
    }
    if (fgets(line, sizeof(line), f))
        line[strcspn(line, "\r\n")] = '\0';
    while (fgetc(f) != EOF) {
    }
    st = pclose(f);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return line;
}

static int rig_verb(const char *verb, int *status)
{
    char cmd[1024];
    const char *out;

    /* "pid I" is a question: its "not running" is an answer, not noise. */
    snprintf(cmd, sizeof(cmd), "timeout 60 '%s/scripts/rig' %s --dir '%s'%s", REDLOCK_SOURCE_DIR,
             verb, rig_dir, strncmp(verb, "pid ", 4) == 0 ? " 2>/dev/null" : "");
    out = run(cmd, status);
    return atoi(out);
}

/* EXISTS key on 127.0.0.1:port (bounded): 1, 0, or -1 on failure. */
static int exists_on(int port, const char *key)
{
    char cmd[1024];
    const char *out;
    int st;

    snprintf(cmd, sizeof(cmd), "%s -p %d EXISTS '%s'", cli, port, key);
    out = run(cmd, &st);
    return st == 0 && *out ? atoi(out) : -1;
}

static void rig_stop(void)
{
    int st;

    if (!rig_up || getpid() != rig_owner)
        return;
    rig_verb("stop", &st);
    rig_up = 0;
}

/* One variable of `rig env` into out (empty if it has none). */
static void rig_env_var(const char *name, char *out, size_t cap)
{
    char cmd[1024];
    int st;

    snprintf(cmd, sizeof(cmd), "'%s/scripts/rig' env --dir '%s' | sed -n 's/^%s=//p'",
             REDLOCK_SOURCE_DIR, rig_dir, name);
    snprintf(out, cap, "%s", run(cmd, &st));
}

/* The scheme of the rig's members and of URIs made here for a sentinel. */
static const char *sentinel_scheme(void)
{
    return use_tls ? "rediss-sentinel" : "redis-sentinel";
}

/* The port of the first sentinel of rig_uri (scheme://host:port,...). */
static int first_sentinel_port(void)
{
    const char *hostport = strstr(rig_uri, "://");

    ck_assert_ptr_nonnull(hostport);
    hostport = strchr(hostport + 3, ':');
    ck_assert_ptr_nonnull(hostport);
    return atoi(hostport + 1);
}

/* The client options every case starts from: short timeouts, and over
 * TLS the rig's CA (verification stays on: the rig's certificates name
 * 127.0.0.1, the address the sentinels announce). */
static void base_options(redlock_options *o)
{
    memset(o, 0, sizeof(*o));
    o->connect_timeout_ms = 500;
    o->unavailable_timeout_ms = 3000;
    if (use_tls)
        o->tls.ca_file = rig_ca;
}

/* Starts the topology on free ports (retrying other ports if a start
 * races with another process), and reads the node URI from `rig env`. */
static void rig_start(void)
{
    char cmd[2048], want[32];
    int attempt, st;

    for (attempt = 0; attempt < 3 && !rig_up; attempt++) {
        int base;

        /* free_base needs bash ($RANDOM); popen runs sh. */
        snprintf(cmd, sizeof(cmd), "bash -c '. \"%s/tests/fixture/ports.sh\" && free_base 5'",
                 REDLOCK_SOURCE_DIR);
        base = atoi(run(cmd, &st));
        if (st != 0 || base <= 0)
            continue;
        snprintf(cmd, sizeof(cmd),
                 "timeout 120 '%s/scripts/rig' stop --dir '%s' >/dev/null 2>&1; "
                 "timeout 120 '%s/scripts/rig' start --sentinel 1%s --base-port %d "
                 "--dir '%s' >&2",
                 REDLOCK_SOURCE_DIR, rig_dir, REDLOCK_SOURCE_DIR, use_tls ? " --tls" : "",
                 base, rig_dir);
        run(cmd, &st);
        if (st == 0)
            rig_up = 1;
    }
    if (!rig_up) {
        fprintf(stderr, "test_sentinel: could not start the sentinel rig\n");
        exit(EXIT_FAILURE); /* never a silent skip */
    }
    rig_env_var("RIG_URIS", rig_uri, sizeof(rig_uri));
    snprintf(want, sizeof(want), "%s://", sentinel_scheme());
    if (strncmp(rig_uri, want, strlen(want)) != 0) {
        fprintf(stderr, "test_sentinel: no %s URI in `rig env` (RIG_URIS='%s')\n", want,
                rig_uri);
        rig_stop();
        exit(EXIT_FAILURE);
    }
    snprintf(cli, sizeof(cli), "timeout 5 redis-cli -h 127.0.0.1");
    if (use_tls) {
        rig_env_var("RIG_CA", rig_ca, sizeof(rig_ca));
        if (!rig_ca[0] || access(rig_ca, R_OK) != 0) {
            fprintf(stderr, "test_sentinel: no readable RIG_CA in `rig env` (got '%s')\n",
                    rig_ca);
            rig_stop();
            exit(EXIT_FAILURE);
        }
        snprintf(cli, sizeof(cli), "timeout 5 redis-cli -h 127.0.0.1 --tls --cacert '%s'",
                 rig_ca);
    }
}

static redlock_client *new_client(const char *uri)
{
    const char *uris[1] = {uri};
    redlock_options o;
    redlock_client *c = NULL;

    base_options(&o);
    ck_assert_msg(redlock_client_new(&c, uris, 1, &o) == REDLOCK_OK, "client: %s",
                  redlock_last_error());
    return c;
}

START_TEST(test_acquire_release_then_failover)
{
    redlock_client *c = new_client(rig_uri);
    redlock_lock *lock = NULL;
    char name[64], verb[64];
    int st, old_port, new_port, rc = -1;
    int64_t t0, took;

    snprintf(name, sizeof(name), "sentinel:failover:%d", (int)getpid());
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &lock), REDLOCK_OK);
    old_port = rig_verb("master-of 1", &st);
    ck_assert_int_eq(st, 0);

    /* On the master the sentinels name. */
    ck_assert_msg(redlock_try_lock_for(lock, 5000, 20000) == REDLOCK_OK, "acquire: %s",
                  redlock_last_error());
    ck_assert_int_eq(exists_on(old_port, name), 1);
    ck_assert_int_eq(redlock_unlock(lock), REDLOCK_OK);
    ck_assert_int_eq(exists_on(old_port, name), 0);

    /* SIGKILL the master; the same client must follow the failover by
     * itself (no wait-failover first: it finds the new master alone). */
    ck_assert_int_eq(rig_verb("kill-master 1", &st), old_port);
    ck_assert_int_eq(st, 0);
    t0 = now_ms();
    while (now_ms() - t0 < FAILOVER_MAX_MS) {
        rc = redlock_try_lock_for(lock, 1000, 20000);
        if (rc == REDLOCK_OK)
            break;
        usleep(100 * 1000);
    }
    took = now_ms() - t0;
    ck_assert_msg(rc == REDLOCK_OK, "no acquire %lld ms after the kill: %s (%s)",
                  (long long)took, redlock_err_name(rc), redlock_last_error());
    fprintf(stderr, "test_sentinel: acquired on the new master %lld ms after the kill\n",
            (long long)took);
    /* The client followed the sentinel that switched first; the one the
     * rig asks may not have heard yet (their views converge within a
     * couple of seconds), so wait for all of them to name the new master
     * before looking for the key there. */
    snprintf(verb, sizeof(verb), "wait-failover 1 %d 15", old_port);
    new_port = rig_verb(verb, &st);
    ck_assert_msg(st == 0, "the sentinels did not agree on a new master within 15 s");
    ck_assert_int_ne(new_port, old_port);
    ck_assert_int_eq(exists_on(new_port, name), 1);
    ck_assert_int_eq(redlock_unlock(lock), REDLOCK_OK);
    ck_assert_int_eq(exists_on(new_port, name), 0);

    redlock_lock_free(lock);
    redlock_client_free(c);
}
END_TEST

/* A graceful failover (SENTINEL FAILOVER): the old master lives on as a
 * replica, so the client hears of it through +switch-master or a
 * -READONLY reply, not through a broken connection. */
START_TEST(test_graceful_failover)
{
    redlock_client *c = new_client(rig_uri);
    redlock_lock *lock = NULL;
    char name[64], cmd[1024];
    int st, old_port, new_port, sentinel_port, rc = -1;
    int64_t t0, took;

    /* A node killed by the previous case comes back (as a replica, once
     * the sentinels reconfigure it), so there is one to promote. */
    for (st = 1; st <= 2; st++) {
        char verb[32];
        int pst;

        snprintf(verb, sizeof(verb), "pid %d", st);
        rig_verb(verb, &pst);
        if (pst != 0) {
            snprintf(verb, sizeof(verb), "restart %d", st);
            rig_verb(verb, &pst);
            ck_assert_int_eq(pst, 0);
        }
    }
    snprintf(name, sizeof(name), "sentinel:graceful:%d", (int)getpid());
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &lock), REDLOCK_OK);
    old_port = rig_verb("master-of 1", &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(redlock_try_lock_for(lock, 5000, 20000) == REDLOCK_OK, "acquire: %s",
                  redlock_last_error());
    ck_assert_int_eq(redlock_unlock(lock), REDLOCK_OK);

    sentinel_port = first_sentinel_port();
    snprintf(cmd, sizeof(cmd), "%s -p %d SENTINEL FAILOVER group1", cli, sentinel_port);
    /* -NOGOODSLAVE until the sentinels see the restarted replica in sync. */
    t0 = now_ms();
    while (strcmp(run(cmd, &st), "OK") != 0 && now_ms() - t0 < 2 * FAILOVER_MAX_MS)
        usleep(500 * 1000);
    ck_assert_msg(now_ms() - t0 < 2 * FAILOVER_MAX_MS, "SENTINEL FAILOVER never accepted");
    t0 = now_ms();
    /* Bounded: until the sentinels name another master, then until the
     * client acquires there. */
    while (now_ms() - t0 < FAILOVER_MAX_MS &&
           ((new_port = rig_verb("master-of 1", &st)) == old_port || st != 0))
        usleep(200 * 1000);
    ck_assert_int_ne(new_port, old_port);
    while (now_ms() - t0 < FAILOVER_MAX_MS) {
        rc = redlock_try_lock_for(lock, 1000, 20000);
        if (rc == REDLOCK_OK && exists_on(new_port, name) == 1)
            break;
        if (rc == REDLOCK_OK) {
            /* Granted by the old master just before it was demoted: its
             * resync from the new master may already have dropped the
             * hold (the hazard replica_acks exists for). */
            int urc = redlock_unlock(lock);

            ck_assert_msg(urc == REDLOCK_OK || urc == REDLOCK_ENOT_OWNER || urc == REDLOCK_ELOST,
                          "unlock: %s (%s)",
                          redlock_err_name(urc), redlock_last_error());
        }
        rc = -1;
        usleep(100 * 1000);
    }
    took = now_ms() - t0;
    ck_assert_msg(rc == REDLOCK_OK, "no acquire on the new master %lld ms after FAILOVER: %s",
                  (long long)took, redlock_last_error());
    fprintf(stderr, "test_sentinel: graceful failover: acquired on the new master %lld ms "
                    "after SENTINEL FAILOVER\n", (long long)took);
    ck_assert_int_eq(redlock_unlock(lock), REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_client_free(c);
}
END_TEST

/* The sentinel lookup itself, with sentinel credentials (an ACL user
 * made on the first sentinel): the right password finds the master the
 * rig names, a wrong one fails with a reason that never quotes it. */
START_TEST(test_lookup_with_sentinel_auth)
{
    redlock__sentinel_cfg cfg;
    redlock__node_uri u;
    redlock_options o;
    struct ssl_ctx_st *ssl_ctx = NULL;
    char one[128], host[256], err[256], cmd[1024];
    int port = 0, st, sentinel_port;

    sentinel_port = first_sentinel_port();
    snprintf(cmd, sizeof(cmd), "%s -p %d ACL SETUSER sentry on '>hunter2' '+@all' '&*'", cli,
             sentinel_port);
    ck_assert_str_eq(run(cmd, &st), "OK");
    snprintf(one, sizeof(one), "%s://127.0.0.1:%d#group1", sentinel_scheme(), sentinel_port);
    memset(&u, 0, sizeof(u));
    ck_assert_int_eq(redlock__uri_parse(one, &u, err, sizeof(err)), REDLOCK_OK);
    memset(&cfg, 0, sizeof(cfg));
    cfg.uri = &u;
    cfg.timeout_ms = 1000;
    if (use_tls) {
        /* As a client sets it up for rediss-sentinel://: its context for
         * the sentinels and the master, each verified by its own host. */
        base_options(&o);
        ck_assert_int_eq(redlock__tls_ctx_new(&o.tls, &ssl_ctx), REDLOCK_OK);
        cfg.ssl_ctx = ssl_ctx;
        cfg.tls_verify = 1;
    }
    cfg.sentinel_username = "sentry";
    cfg.sentinel_password = "hunter2";
    ck_assert_msg(redlock__sentinel_master(&cfg, host, sizeof(host), &port, err,
                                           sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_int_eq(port, rig_verb("master-of 1", &st));

    cfg.sentinel_password = "hunter3";
    ck_assert_int_eq(redlock__sentinel_master(&cfg, host, sizeof(host), &port, err,
                                              sizeof(err)), -1);
    ck_assert_msg(strstr(err, "WRONGPASS") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "hunter") == NULL, "%s", err);
    redlock__uri_clear(&u);
    redlock__tls_ctx_free(ssl_ctx);
}
END_TEST

/* Drives c until a reply arrives (bounded): 1 and *r, or 0. */
static int next_reply(redlock__conn *c, redisReply **r)
{
    int64_t until = now_ms() + 5000;

    while (now_ms() < until) {
        struct pollfd p = {c->fd, redlock__conn_events(c), 0};
        int got = redlock__conn_next_reply(c, r);

        if (got != 0)
            return got > 0;
        if (poll(&p, 1, 100) > 0 && redlock__conn_io(c, p.revents) != REDLOCK_OK)
            return 0;
    }
    return 0;
}

/* -READONLY on a sentinel node's connection (a demoted master that kept
 * its connections): the connection is marked stale, the resolver is asked
 * for the master again, and the next use reopens the connection. Driven at
 * the transport level against the group's replica, which answers a write
 * with -READONLY. */
START_TEST(test_readonly_reopens)
{
    static const char set[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
    char uri[64], err[128];
    const char *host;
    redlock_options o;
    struct ssl_ctx_st *ssl_ctx = NULL;
    redlock__resolver r;
    redlock__node node;
    redlock__conn c;
    redisReply *reply = NULL;
    int st, port;

    port = rig_verb("replica-of 1", &st);
    ck_assert_int_eq(st, 0);
    snprintf(uri, sizeof(uri), "%s://127.0.0.1:%d", use_tls ? "rediss" : "redis", port);
    memset(&node, 0, sizeof(node));
    ck_assert_int_eq(redlock__uri_parse(uri, &node.uri, err, sizeof(err)), REDLOCK_OK);
    if (use_tls) {
        /* What client.c gives a TLS node: the client's context, verified
         * against the URI's host. */
        base_options(&o);
        ck_assert_int_eq(redlock__tls_ctx_new(&o.tls, &ssl_ctx), REDLOCK_OK);
        node.ssl_ctx = ssl_ctx;
        node.tls_server_name = node.uri.host;
        node.tls_verify = 1;
    }
    /* A sentinel node as far as conn.c can tell, without a watcher: its
     * refresh is then a plain lookup of the same address. */
    node.uri.master_name = strdup("group1");
    node.max_reply_bytes = 1 << 20;
    host = node.uri.host;
    ck_assert_int_eq(redlock__resolver_init(&r, &host, &node.uri.port, 1), 0);
    node.addrs = &r.addrs[0];
    node.resolver = &r;
    /* The refresh is rate-limited to one a second after the last lookup. */
    usleep(1100 * 1000);

    redlock__conn_init(&c, &node);
    ck_assert_int_eq(redlock__conn_open(&c), REDLOCK_OK);
    ck_assert_int_eq(redlock__conn_queue(&c, set, sizeof(set) - 1), REDLOCK_OK);
    ck_assert_msg(next_reply(&c, &reply), "no reply: %s", c.errmsg);
    ck_assert_int_eq(reply->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strncmp(reply->str, "READONLY", 8) == 0, "%s", reply->str);
    freeReplyObject(reply);
    ck_assert_int_eq(c.stale, 1);
    ck_assert_int_eq(c.state, REDLOCK__CONN_READY);
    /* A lookup was asked for, in the background. */
    pthread_mutex_lock(&r.mu);
    ck_assert_int_eq(r.started, 1);
    pthread_mutex_unlock(&r.mu);
    /* The next use reopens it: a fresh connection, not the stale one. */
    ck_assert_int_eq(redlock__conn_open(&c), REDLOCK_OK);
    ck_assert_int_eq(c.stale, 0);
    ck_assert_int_ne(c.state, REDLOCK__CONN_READY);

    redlock__conn_close(&c);
    redlock__resolver_free(&r);
    redlock__uri_clear(&node.uri);
    redlock__tls_ctx_free(ssl_ctx);
}
END_TEST

/* options.sentinel_username/sentinel_password reach the sentinels: a wrong
 * password leaves the node without a master (and the reason says why,
 * never quoting it); the right one finds it. Needs the ACL user that
 * test_lookup_with_sentinel_auth made on the first sentinel. */
START_TEST(test_sentinel_credentials_from_options)
{
    const char *uris[1];
    char one[128];
    redlock_options o;
    redlock_client *c = NULL;
    redlock_lock *lock = NULL;
    int sentinel_port, rc;

    sentinel_port = first_sentinel_port();
    snprintf(one, sizeof(one), "%s://127.0.0.1:%d#group1", sentinel_scheme(), sentinel_port);
    uris[0] = one;
    base_options(&o);
    o.sentinel_username = "sentry";
    o.sentinel_password = "hunter3";
    ck_assert_int_eq(redlock_client_new(&c, uris, 1, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "sentinel:creds", NULL, &lock), REDLOCK_OK);
    rc = redlock_try_lock_for(lock, 0, 5000);
    ck_assert_int_ne(rc, REDLOCK_OK);
    ck_assert_msg(strstr(redlock_last_error(), "WRONGPASS") != NULL, "%s", redlock_last_error());
    ck_assert_msg(strstr(redlock_last_error(), "hunter") == NULL, "%s", redlock_last_error());
    redlock_lock_free(lock);
    redlock_client_free(c);

    o.sentinel_password = "hunter2";
    ck_assert_int_eq(redlock_client_new(&c, uris, 1, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "sentinel:creds", NULL, &lock), REDLOCK_OK);
    ck_assert_msg(redlock_try_lock_for(lock, 5000, 5000) == REDLOCK_OK, "%s",
                  redlock_last_error());
    ck_assert_int_eq(redlock_unlock(lock), REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_client_free(c);

    /* A sentinel user without a password is refused, as for data nodes. */
    o.sentinel_password = NULL;
    ck_assert_int_eq(redlock_client_new(&c, uris, 1, &o), REDLOCK_EINVAL);
}
END_TEST

START_TEST(test_unknown_master_name)
{
    char uri[600], *hash;
    redlock_client *c;
    redlock_lock *lock = NULL;
    int rc;

    /* The same sentinels, a master name they do not monitor. */
    snprintf(uri, sizeof(uri), "%s", rig_uri);
    hash = strrchr(uri, '#');
    ck_assert_ptr_nonnull(hash);
    strcpy(hash, "#nosuchmaster");
    c = new_client(uri);
    ck_assert_int_eq(redlock_lock_new(c, "sentinel:nosuch", NULL, &lock), REDLOCK_OK);
    rc = redlock_try_lock_for(lock, 0, 5000);
    ck_assert_int_ne(rc, REDLOCK_OK);
    ck_assert_msg(strstr(redlock_last_error(), "no master known") != NULL,
                  "%s: %s", redlock_err_name(rc), redlock_last_error());
    redlock_lock_free(lock);
    redlock_client_free(c);
}
END_TEST

/* ---- replica acknowledgement (options.replica_acks) ---------------- */

static redlock_lock *acked_lock(redlock_client *c, const char *tag, int acks, int aof)
{
    redlock_lock_options lo;
    redlock_lock *lock = NULL;
    char name[64];

    memset(&lo, 0, sizeof(lo));
    lo.replica_acks = acks;
    lo.replica_timeout_ms = 200;
    lo.replica_wait_aof = aof;
    snprintf(name, sizeof(name), "sentinel:acks:%s:%d", tag, (int)getpid());
    ck_assert_int_eq(redlock_lock_new(c, name, &lo, &lock), REDLOCK_OK);
    return lock;
}

/* Granted once the replica has it; a count no group can reach, or a
 * frozen replica, fails the member (EREPLICAS) and leaves nothing on the
 * master. */
START_TEST(test_replica_acks_on_grants)
{
    redlock_client *c = new_client(rig_uri);
    redlock_lock *one = acked_lock(c, "one", 1, 0), *two = acked_lock(c, "two", 2, 0);
    redlock_member_report rep;
    int st, master = rig_verb("master-of 1", &st), rc;
    int64_t t0;

    ck_assert_int_eq(st, 0);
    ck_assert_msg(redlock_try_lock_for(one, 0, 20000) == REDLOCK_OK, "acks 1: %s",
                  redlock_last_error());
    ck_assert_int_eq(redlock_lock_report(one, 0, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_GRANTED);
    ck_assert_int_eq(rep.replicas_acked, 1);
    ck_assert_int_eq(redlock_unlock(one), REDLOCK_OK);

    /* Two replicas asked of a group that has one. */
    rc = redlock_try_lock_for(two, 0, 20000);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "acks 2: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_int_eq(redlock_lock_report(two, 0, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.err, REDLOCK_EREPLICAS);
    ck_assert_int_eq(rep.replicas_acked, 1);
    ck_assert_msg(strstr(rep.message, "1 of 2 replicas") != NULL, "%s", rep.message);
    ck_assert_int_eq(exists_on(master, redlock_lock_name(two)), 0);

    /* The replica frozen: WAIT times out with none, nothing is granted. */
    rig_verb("freeze 2", &st);
    ck_assert_int_eq(st, 0);
    t0 = now_ms();
    rc = redlock_try_lock_for(one, 0, 20000);
    rig_verb("thaw 2", &st);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "frozen replica: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_int_lt(now_ms() - t0, 3000);
    ck_assert_int_eq(redlock_lock_report(one, 0, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.err, REDLOCK_EREPLICAS);
    ck_assert_int_eq(rep.replicas_acked, 0);
    ck_assert_int_eq(exists_on(master, redlock_lock_name(one)), 0);
    redlock_lock_free(two);
    redlock_lock_free(one);
    redlock_client_free(c);
}
END_TEST

/* WAITAOF needs Redis 7.2: an older server's refusal is for good. */
START_TEST(test_replica_wait_aof)
{
    redlock_client *c = new_client(rig_uri);
    redlock_lock *lock = acked_lock(c, "aof", 1, 1);
    char cmd[1024];
    int st, master = rig_verb("master-of 1", &st), major = 0, minor = 0, rc;

    snprintf(cmd, sizeof(cmd), "%s -p %d INFO server | sed -n 's/^redis_version://p'", cli,
             master);
    ck_assert_int_eq(sscanf(run(cmd, &st), "%d.%d", &major, &minor), 2);
    rc = redlock_try_lock_for(lock, 0, 20000);
    if (major > 7 || (major == 7 && minor >= 2)) {
        ck_assert_msg(rc == REDLOCK_OK, "WAITAOF on %d.%d: %s", major, minor,
                      redlock_last_error());
        ck_assert_int_eq(redlock_unlock(lock), REDLOCK_OK);
    } else {
        ck_assert_msg(rc == REDLOCK_ECONFIG, "WAITAOF on %d.%d: %s (%s)", major, minor,
                      redlock_err_name(rc), redlock_last_error());
        ck_assert_msg(strstr(redlock_last_error(), "WAITAOF needs Redis 7.2") != NULL, "%s",
                      redlock_last_error());
        ck_assert_int_eq(exists_on(master, redlock_lock_name(lock)), 0);
    }
    redlock_lock_free(lock);
    redlock_client_free(c);
}
END_TEST

static void on_lost_flag(void *ud, redlock_lock *lock, uint64_t owner, int reason)
{
    (void)lock, (void)owner;
    __atomic_store_n((int *)ud, reason, __ATOMIC_RELEASE);
}

/* Renewals follow the same rule: acknowledged ones keep the hold; with
 * the replica frozen they are not genuine, and the hold is lost. */
START_TEST(test_replica_acks_on_renewals)
{
    const char *uris[1] = {rig_uri};
    redlock_options o;
    redlock_client *c = NULL;
    redlock_lock *lock;
    int lost = 0, st;
    int64_t t0;

    base_options(&o);
    o.watchdog_lease_ms = 1500;
    ck_assert_int_eq(redlock_client_new(&c, uris, 1, &o), REDLOCK_OK);
    lock = acked_lock(c, "renew", 1, 0);
    redlock_lock_set_on_lost(lock, on_lost_flag, &lost);
    ck_assert_msg(redlock_try_lock_for(lock, 0, 0) == REDLOCK_OK, "%s", redlock_last_error());
    usleep(2500 * 1000); /* several renewals (every 500 ms) */
    ck_assert_int_eq(__atomic_load_n(&lost, __ATOMIC_ACQUIRE), 0);
    rig_verb("freeze 2", &st);
    ck_assert_int_eq(st, 0);
    t0 = now_ms();
    while (!__atomic_load_n(&lost, __ATOMIC_ACQUIRE) && now_ms() - t0 < 10000)
        usleep(20 * 1000);
    rig_verb("thaw 2", &st);
    ck_assert_msg(__atomic_load_n(&lost, __ATOMIC_ACQUIRE) != 0,
                  "still held 10 s after the replica froze");
    fprintf(stderr, "test_sentinel: unacknowledged renewals lost the hold after %lld ms\n",
            (long long)(now_ms() - t0));
    ck_assert_int_eq(redlock_unlock(lock), REDLOCK_ELOST);
    redlock_lock_free(lock);
    redlock_client_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel");
    TCase *tc = tcase_create("failover");
    SRunner *sr;
    int failed;

    rig_owner = getpid();
    rig_dir = getenv("SENTINEL_RIG_DIR");
    if (!rig_dir || !*rig_dir)
        rig_dir = SENTINEL_RIG_DIR;
    use_tls = getenv("SENTINEL_TLS") && strcmp(getenv("SENTINEL_TLS"), "1") == 0;
    rig_start();
    atexit(rig_stop);
    /* The unknown name first: the failover case changes the topology. */
    tcase_add_test(tc, test_unknown_master_name);
    tcase_add_test(tc, test_lookup_with_sentinel_auth);
    tcase_add_test(tc, test_sentinel_credentials_from_options);
    tcase_add_test(tc, test_readonly_reopens);
    /* Before any failover: node 2 is group 1's replica. */
    tcase_add_test(tc, test_replica_acks_on_grants);
    tcase_add_test(tc, test_replica_wait_aof);
    tcase_add_test(tc, test_replica_acks_on_renewals);
    tcase_add_test(tc, test_acquire_release_then_failover);
    /* After the kill the group has one node left until the rig restarts
     * it, so the graceful case restarts the killed node first. */
    tcase_add_test(tc, test_graceful_failover);
    tcase_set_timeout(tc, 90);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
