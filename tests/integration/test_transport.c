/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration tests of the transport against real redis-server processes
 * from the rig fixture: plain TCP, TLS (verification, SNI, mutual TLS),
 * ACL authentication, SELECT, the script cache, deadlines against a node
 * that never answers or is not there, bad input, and the mapping of server
 * error replies to error codes.
 *
 * Connections are opened lazily, so most failures surface on the first
 * request. Where the exact error code matters the tests send a request
 * through the client's own fan-out (what every lock operation uses) and
 * read the code it reports; the public per-member report is checked too.
 */
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "lock/hold.h"
#include "lock/internal.h"
#include "lock/watchdog.h"
#include "redlock/redlock.h"
#include "resp/scripts.h"
#include "rig_env.h"

/* ------------------------------------------------------------------------ */
/* Helpers. */

/* A lock name no other test (or earlier run) uses. */
static const char *unique_name(const char *what)
{
    static char buf[128];

    snprintf(buf, sizeof(buf), "transport:%s:%d", what, (int)getpid());
    return buf;
}

static redlock_client *client_for(const char *uri, const redlock_options *opts)
{
    redlock_client *c = NULL;
    const char *uris[1] = {uri};
    int rc = redlock_client_new(&c, uris, 1, opts);

    ck_assert_msg(rc == REDLOCK_OK, "client for %s: %s (%s)", uri, redlock_err_name(rc),
                  redlock_last_error());
    return c;
}

static const char *tls_uri(const char *port_key)
{
    static char buf[2][64];
    static int k;

    k ^= 1;
    snprintf(buf[k], sizeof(buf[k]), "rediss://127.0.0.1:%d", rig_get_int(port_key));
    return buf[k];
}

/* What one request through the client's fan-out produced. */
typedef struct outcome {
    int called;
    int err;                  /* transport error, or 0 with a reply */
    int type;                 /* REDIS_REPLY_* when err == 0 */
    long long integer;
    char text[256];           /* error message, or the reply's string */
} outcome;

static int record_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                        redisReply *r)
{
    outcome *o = ud;

    (void)batch, (void)call;
    o->called++;
    o->err = err;
    if (err) {
        snprintf(o->text, sizeof(o->text), "%s", msg ? msg : "");
        return 0;
    }
    o->type = r->type;
    o->integer = r->integer;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR)
        snprintf(o->text, sizeof(o->text), "%s", r->str);
    return 0;
}

/* Sends one plain command (argv[0] is its name) or script call to node 0
 * of c with the given deadline and returns what came back. */
static outcome request(redlock_client *c, int script, int nkeys, int argc,
                       const char *const *argv, const size_t *lens, int timeout_ms)
{
    redlock__call call = {script, nkeys, argc, argv, lens};
    redlock__batch b = {.node = 0, .calls = &call, .ncalls = 1,
                        .deadline_ns = redlock__now_ns() + (int64_t)timeout_ms * REDLOCK__NS_PER_MS};
    outcome o;

    memset(&o, 0, sizeof(o));
    ck_assert_int_eq(c->tp.ops->fanout(c->tp.ctx, &b, 1, record_reply, &o), REDLOCK_OK);
    ck_assert_msg(o.called == 1, "the fan-out called back %d times", o.called);
    return o;
}

static outcome command(redlock_client *c, int argc, const char *const *argv)
{
    return request(c, -1, 0, argc, argv, NULL, 2000);
}

static outcome ping(redlock_client *c)
{
    return command(c, 1, (const char *const[]){"PING"});
}

#define ASSERT_PONG(o)                                                                 \
    do {                                                                               \
        outcome o_ = (o);                                                              \
        ck_assert_msg(o_.err == 0, "PING failed: %s: %s", redlock_err_name(o_.err),    \
                      o_.text);                                                        \
        ck_assert_int_eq(o_.type, REDIS_REPLY_STATUS);                                 \
        ck_assert_str_eq(o_.text, "PONG");                                             \
    } while (0)

#define ASSERT_FAILS(o, code, needle)                                                  \
    do {                                                                               \
        outcome o_ = (o);                                                              \
        ck_assert_msg(o_.err == (code), "want %s, got %s: '%s'", redlock_err_name(code), \
                      redlock_err_name(o_.err), o_.text);                              \
        ck_assert_msg(strstr(o_.text, (needle)) != NULL, "message '%s' lacks '%s'",    \
                      o_.text, (needle));                                              \
    } while (0)

/* One try_lock through the public API on a one-node client; returns its
 * code and fills *rep with member 0's report. */
static int try_once(redlock_client *c, const char *name, redlock_member_report *rep)
{
    redlock_lock *l = NULL;
    int rc;

    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    rc = redlock_try_lock(l);
    ck_assert_int_eq(redlock_lock_report(l, 0, rep), REDLOCK_OK);
    if (rc == REDLOCK_OK)
        ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    return rc;
}

/* A full round trip through the public API: take, check, release. */
static void lock_round_trip(redlock_client *c, const char *name)
{
    redlock_lock *l = NULL;
    int locked = 0;
    int rc;

    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    rc = redlock_try_lock(l);
    ck_assert_msg(rc == REDLOCK_OK, "try_lock: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_int_eq(redlock_is_locked(l, &locked), REDLOCK_OK);
    ck_assert_int_eq(locked, 1);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_eq(redlock_is_locked(l, &locked), REDLOCK_OK);
    ck_assert_int_eq(locked, 0);
    redlock_lock_free(l);
}

/* ------------------------------------------------------------------------ */
/* Plain TCP. */

START_TEST(test_plain_round_trip)
{
    redlock_client *c = client_for(rig_plain_uri(0), NULL);
    const char *name = unique_name("plain");
    char cmd[256];

    ASSERT_PONG(ping(c));
    /* A second request reuses the pooled connection. */
    ASSERT_PONG(ping(c));
    lock_round_trip(c, name);
    snprintf(cmd, sizeof(cmd), "EXISTS '%s'", name);
    ck_assert_str_eq(rig_cli(0, cmd), "0");
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* TLS. */

START_TEST(test_tls_verified)
{
    redlock_options o;
    redlock_client *c;

    memset(&o, 0, sizeof(o));
    o.tls.ca_file = rig_get("TLS_CA");
    c = client_for(tls_uri("TLS_PORT"), &o);
    ASSERT_PONG(ping(c));
    lock_round_trip(c, unique_name("tls"));
    redlock_client_free(c);
}
END_TEST

/* A passphrase-protected client key is refused with ETLS: the library
 * never asks for a passphrase on the terminal. */
START_TEST(test_tls_encrypted_key_refused)
{
    char path[256], command[700];
    const char *uri = tls_uri("MTLS_PORT");
    redlock_options o;
    redlock_client *c = NULL;

    snprintf(path, sizeof(path), "%s.enc.%d", rig_get("TLS_KEY"), (int)getpid());
    snprintf(command, sizeof(command),
             "openssl pkey -in '%s' -aes256 -passout pass:secret -out '%s' 2>/dev/null",
             rig_get("TLS_KEY"), path);
    ck_assert_int_eq(system(command), 0);
    memset(&o, 0, sizeof(o));
    o.tls.ca_file = rig_get("TLS_CA");
    o.tls.cert_file = rig_get("TLS_CERT");
    o.tls.key_file = path;
    ck_assert_int_eq(redlock_client_new(&c, &uri, 1, &o), REDLOCK_ETLS);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "client certificate"));
    unlink(path);
}
END_TEST

START_TEST(test_tls_wrong_ca)
{
    redlock_options o;
    redlock_member_report rep;
    redlock_client *c;

    memset(&o, 0, sizeof(o));
    o.tls.ca_file = rig_get("TLS_WRONG_CA");
    c = client_for(tls_uri("TLS_PORT"), &o);
    ASSERT_FAILS(ping(c), REDLOCK_ETLS, "certificate verify failed");
    /* The same through the public API: a refusal that waiting cannot fix
     * ends the acquire with its own code, and the report says why. */
    ck_assert_int_eq(try_once(c, unique_name("wrongca"), &rep), REDLOCK_ETLS);
    ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_ERROR);
    ck_assert_int_eq(rep.err, REDLOCK_ETLS);
    ck_assert_msg(strstr(rep.message, "certificate verify failed") != NULL, "report: '%s'",
                  rep.message);
    redlock_client_free(c);
}
END_TEST

START_TEST(test_tls_wrong_server_name)
{
    redlock_options o;
    redlock_client *c;

    memset(&o, 0, sizeof(o));
    o.tls.ca_file = rig_get("TLS_CA");
    o.tls.server_name = "wrong.example";
    c = client_for(tls_uri("TLS_PORT"), &o);
    /* The chain is trusted; only the name does not match. */
    ASSERT_FAILS(ping(c), REDLOCK_ETLS, "hostname mismatch");
    redlock_client_free(c);
}
END_TEST

static void log_collect(void *ud, redlock_log_level level, const char *message)
{
    char *buf = ud;

    if (level == REDLOCK_LOG_WARN && strlen(buf) + strlen(message) + 2 < 1024) {
        strcat(buf, message);
        strcat(buf, "\n");
    }
}

START_TEST(test_tls_insecure_skip_verify)
{
    static char logged[1024];
    redlock_options o;
    redlock_client *c;

    logged[0] = '\0';
    memset(&o, 0, sizeof(o));
    o.tls.ca_file = rig_get("TLS_WRONG_CA");
    o.tls.insecure_skip_verify = 1;
    o.log_fn = log_collect;
    o.log_userdata = logged;
    c = client_for(tls_uri("TLS_PORT"), &o);
    /* Turning verification off is loud, not silent. */
    ck_assert_msg(strstr(logged, "verification is OFF") != NULL, "log: '%s'", logged);
    ASSERT_PONG(ping(c));
    lock_round_trip(c, unique_name("insecure"));
    redlock_client_free(c);
}
END_TEST

START_TEST(test_mtls_without_client_cert)
{
    redlock_options o;
    redlock_member_report rep;
    redlock_client *c;
    outcome r;

    memset(&o, 0, sizeof(o));
    o.tls.ca_file = rig_get("TLS_CA");
    c = client_for(tls_uri("MTLS_PORT"), &o);
    /* With TLS 1.3 the server's refusal arrives after the client's side
     * of the handshake completed, as an alert on the first read. */
    r = ping(c);
    ck_assert_msg(r.err == REDLOCK_ETLS, "want ETLS, got %s: '%s'", redlock_err_name(r.err),
                  r.text);
    ck_assert_msg(strstr(r.text, "certificate required") != NULL ||
                      strstr(r.text, "handshake failure") != NULL,
                  "message does not say a certificate is missing: '%s'", r.text);
    ck_assert_int_eq(try_once(c, unique_name("mtls-nocert"), &rep), REDLOCK_ETLS);
    ck_assert_int_eq(rep.err, REDLOCK_ETLS);
    redlock_client_free(c);
}
END_TEST

START_TEST(test_mtls_with_client_cert)
{
    redlock_options o;
    redlock_client *c;

    memset(&o, 0, sizeof(o));
    o.tls.ca_file = rig_get("TLS_CA");
    o.tls.cert_file = rig_get("TLS_CERT");
    o.tls.key_file = rig_get("TLS_KEY");
    c = client_for(tls_uri("MTLS_PORT"), &o);
    ASSERT_PONG(ping(c));
    lock_round_trip(c, unique_name("mtls"));
    redlock_client_free(c);
}
END_TEST

START_TEST(test_tls_unusable_ca_file)
{
    redlock_client *c = NULL;
    redlock_options o;
    const char *uris[1];

    memset(&o, 0, sizeof(o));
    o.tls.ca_file = "/nonexistent/ca.pem";
    uris[0] = tls_uri("TLS_PORT");
    ck_assert_int_eq(redlock_client_new(&c, uris, 1, &o), REDLOCK_ETLS);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(redlock_last_error(), "/nonexistent/ca.pem") != NULL, "'%s'",
                  redlock_last_error());
}
END_TEST

/* ------------------------------------------------------------------------ */
/* ACL authentication and SELECT. */


static void assert_whoami(redlock_client *c, const char *user)
{
    outcome r = command(c, 2, (const char *const[]){"ACL", "WHOAMI"});

    ck_assert_msg(r.err == 0, "ACL WHOAMI: %s", r.text);
    ck_assert_str_eq(r.text, user);
}

START_TEST(test_acl_user_in_uri)
{
    redlock_client *c = client_for(rig_acl_uri(rig_get("ACL_USER"), rig_get("ACL_PASS")), NULL);

    assert_whoami(c, rig_get("ACL_USER"));
    lock_round_trip(c, unique_name("acl"));
    redlock_client_free(c);
}
END_TEST

START_TEST(test_acl_wrong_password)
{
    redlock_member_report rep;
    redlock_client *c = client_for(rig_acl_uri(rig_get("ACL_USER"), "not-the-password"), NULL);

    ASSERT_FAILS(ping(c), REDLOCK_EAUTH, "WRONGPASS");
    ck_assert_int_eq(try_once(c, unique_name("wrongpass"), &rep), REDLOCK_EAUTH);
    ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_ERROR);
    ck_assert_int_eq(rep.err, REDLOCK_EAUTH);
    ck_assert_msg(strstr(rep.message, "WRONGPASS") != NULL, "report: '%s'", rep.message);
    redlock_client_free(c);
}
END_TEST

START_TEST(test_acl_options_override_uri)
{
    redlock_options o;
    redlock_client *c;

    /* Wrong credentials in the URI, right ones in the options: works. */
    memset(&o, 0, sizeof(o));
    o.username = rig_get("ACL_USER");
    o.password = rig_get("ACL_PASS");
    c = client_for(rig_acl_uri("nobody", "wrong"), &o);
    assert_whoami(c, rig_get("ACL_USER"));
    lock_round_trip(c, unique_name("override"));
    redlock_client_free(c);

    /* And the other way round: the options win, so this fails. */
    o.password = "wrong";
    c = client_for(rig_acl_uri(rig_get("ACL_USER"), rig_get("ACL_PASS")), &o);
    ASSERT_FAILS(ping(c), REDLOCK_EAUTH, "WRONGPASS");
    redlock_client_free(c);
}
END_TEST

START_TEST(test_select_db)
{
    char uri[128], cmd[256];
    const char *name = unique_name("select");
    redlock_client *c;
    redlock_lock *l = NULL;

    snprintf(uri, sizeof(uri), "redis://127.0.0.1:%d/3", rig_get_int("PLAIN_BASE_PORT"));
    c = client_for(uri, NULL);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    snprintf(cmd, sizeof(cmd), "-n 3 EXISTS '%s'", name);
    ck_assert_str_eq(rig_cli(0, cmd), "1");
    snprintf(cmd, sizeof(cmd), "-n 0 EXISTS '%s'", name);
    ck_assert_str_eq(rig_cli(0, cmd), "0");
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    snprintf(cmd, sizeof(cmd), "-n 3 EXISTS '%s'", name);
    ck_assert_str_eq(rig_cli(0, cmd), "0");
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Scripts. */

START_TEST(test_noscript_recovery)
{
    redlock_client *c = client_for(rig_plain_uri(0), NULL);
    const char *name = unique_name("noscript");
    char cmd[128];

    lock_round_trip(c, name);
    ck_assert_str_eq(rig_cli(0, "SCRIPT FLUSH"), "OK");
    snprintf(cmd, sizeof(cmd), "SCRIPT EXISTS %s",
             redlock__scripts[REDLOCK__SCRIPT_ACQUIRE].sha1);
    ck_assert_str_eq(rig_cli(0, cmd), "0");
    /* EVALSHA now answers NOSCRIPT; the client falls back to EVAL. */
    lock_round_trip(c, name);
    /* ...which also put the scripts back into the cache. */
    ck_assert_str_eq(rig_cli(0, cmd), "1");
    snprintf(cmd, sizeof(cmd), "SCRIPT EXISTS %s",
             redlock__scripts[REDLOCK__SCRIPT_RELEASE].sha1);
    ck_assert_str_eq(rig_cli(0, cmd), "1");
    redlock_client_free(c);
}
END_TEST

START_TEST(test_script_digests)
{
    redlock_client *c = client_for(rig_plain_uri(0), NULL);
    size_t i;

    for (i = 0; i < REDLOCK__SCRIPT_COUNT; i++) {
        const redlock__script *s = &redlock__scripts[i];
        const char *argv[3] = {"SCRIPT", "LOAD", s->body};
        size_t lens[3] = {6, 4, s->len};
        unsigned char md[SHA_DIGEST_LENGTH];
        char hex[2 * SHA_DIGEST_LENGTH + 1];
        outcome r;
        int k;

        /* The embedded digest is the SHA1 of exactly the embedded bytes... */
        SHA1((const unsigned char *)s->body, s->len, md);
        for (k = 0; k < SHA_DIGEST_LENGTH; k++)
            snprintf(hex + 2 * k, 3, "%02x", md[k]);
        ck_assert_msg(strcmp(hex, s->sha1) == 0, "%s: embedded sha1 %s, body hashes to %s",
                      s->name, s->sha1, hex);
        ck_assert_uint_eq(strlen(s->body), s->len);
        /* ...and the server, which compiles the script, agrees. */
        r = request(c, -1, 0, 3, argv, lens, 2000);
        ck_assert_msg(r.err == 0 && r.type == REDIS_REPLY_STRING, "%s: SCRIPT LOAD: %s (%s)",
                      s->name, redlock_err_name(r.err), r.text);
        ck_assert_msg(strcmp(r.text, s->sha1) == 0, "%s: server says %s, embedded %s",
                      s->name, r.text, s->sha1);
    }
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Deadlines: a node that never answers, a port nobody listens on. */

/* A TCP socket bound to an ephemeral port on 127.0.0.1; listening or not.
 * Returns the fd and sets *port. */
static int local_socket(int do_listen, int *port)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    if (do_listen)
        ck_assert_int_eq(listen(fd, 16), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

START_TEST(test_silent_listener_deadline)
{
    redlock_options o;
    redlock_member_report rep;
    redlock_client *c;
    char uri[64];
    int port, fd = local_socket(1, &port);
    int64_t t0, elapsed;
    outcome r;
    int rc;

    /* The kernel completes the handshake from the backlog; nobody ever
     * accepts or reads. */
    snprintf(uri, sizeof(uri), "redis://127.0.0.1:%d", port);
    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = 100;
    c = client_for(uri, &o);

    t0 = rig_now_ms();
    r = request(c, -1, 0, 1, (const char *const[]){"PING"}, NULL, 100);
    elapsed = rig_now_ms() - t0;
    ASSERT_FAILS(r, REDLOCK_ETIMEOUT, "no reply before the deadline");
    ck_assert_msg(elapsed >= 90 && elapsed < 100 + 150, "one request took %lld ms",
                  (long long)elapsed);

    /* A lock attempt: the acquire times out after one node timeout, then
     * the attempt is undone on the node (it may have been applied), which
     * costs at most one more. */
    t0 = rig_now_ms();
    rc = try_once(c, unique_name("silent"), &rep);
    elapsed = rig_now_ms() - t0;
    ck_assert_int_eq(rc, REDLOCK_ENO_QUORUM);
    ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_TIMEOUT);
    ck_assert_int_eq(rep.err, REDLOCK_ETIMEOUT);
    ck_assert_int_eq(rep.latency_us, -1);
    ck_assert_msg(elapsed < 2 * 100 + 150, "try_lock took %lld ms", (long long)elapsed);
    redlock_client_free(c);
    close(fd);
}
END_TEST

START_TEST(test_connection_refused)
{
    redlock_member_report rep;
    redlock_client *c;
    char uri[64];
    int port, fd = local_socket(0, &port); /* bound, so nobody else gets it */
    int64_t t0, elapsed;
    int rc;

    snprintf(uri, sizeof(uri), "redis://127.0.0.1:%d", port);
    c = client_for(uri, NULL);
    t0 = rig_now_ms();
    ASSERT_FAILS(ping(c), REDLOCK_ECONNECT, "Connection refused");
    elapsed = rig_now_ms() - t0;
    ck_assert_msg(elapsed < 200, "refusal took %lld ms", (long long)elapsed);

    t0 = rig_now_ms();
    rc = try_once(c, unique_name("refused"), &rep);
    elapsed = rig_now_ms() - t0;
    ck_assert_int_eq(rc, REDLOCK_ENO_QUORUM);
    ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_ERROR);
    ck_assert_int_eq(rep.err, REDLOCK_ECONNECT);
    ck_assert_msg(strstr(rep.message, "Connection refused") != NULL, "report: '%s'",
                  rep.message);
    ck_assert_msg(strstr(rep.message, uri + strlen("redis://")) != NULL,
                  "report does not name the node: '%s'", rep.message);
    ck_assert_msg(elapsed < 200, "try_lock took %lld ms", (long long)elapsed);
    redlock_client_free(c);
    close(fd);
}
END_TEST

/* A waiter whose wait ended after its subscription to an unreachable node
 * failed leaves the subscriber thread idle: nobody needs that node's
 * connection any more, so its past retry time must not wake the thread
 * over and over (it spun at 100 % of a core until some later wait). */
static double process_cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

START_TEST(test_subscriber_idle_after_dead_node)
{
    redlock_client *c = NULL;
    redlock_lock *l = NULL;
    char a[64], b[64], dead[64];
    const char *uris[3] = {a, b, dead};
    int base = rig_get_int("PLAIN_BASE_PORT"), port, fd = local_socket(0, &port);
    double cpu0, cpu;

    snprintf(a, sizeof(a), "redis://127.0.0.1:%d", base);
    snprintf(b, sizeof(b), "redis://127.0.0.1:%d", base + 1);
    snprintf(dead, sizeof(dead), "redis://127.0.0.1:%d", port);
    ck_assert_int_eq(redlock_client_new(&c, uris, 3, NULL), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, unique_name("subidle"), NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 10000), REDLOCK_OK);
    /* Another owner waits (and subscribes, failing on the dead node). */
    ck_assert_int_eq(redlock_acquire_as(l, 2, 300, 10000), REDLOCK_ETIMEOUT);
    cpu0 = process_cpu_s();
    rig_sleep_ms(500);
    cpu = process_cpu_s() - cpu0;
    fprintf(stderr, "subscriber after the wait: %.0f ms of CPU in 500 ms\n", cpu * 1e3);
    ck_assert_msg(cpu < 0.1, "%.0f ms of CPU in 500 ms of idling", cpu * 1e3);
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
    close(fd);
}
END_TEST

/* A call that cannot be encoded (more arguments than a call takes) fails,
 * and the pooled connection it was meant for stays in step: nothing of it
 * went out, so the next user's replies are its own. It used to skip one
 * reply for the call never sent, and hand the next user nothing. */
typedef struct heard {
    int calls, err;
    char text[32];
} heard;

static int note_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                      redisReply *r)
{
    heard *h = ud;

    (void)batch, (void)call, (void)msg;
    h->calls++;
    h->err = err;
    if (!err && r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
        snprintf(h->text, sizeof(h->text), "%s", r->str);
    return 0;
}

static heard fan_one(redlock_client *c, int argc, const char *const *argv)
{
    redlock__call call = {-1, 0, argc, argv, NULL};
    redlock__batch b;
    heard h;

    memset(&b, 0, sizeof(b));
    memset(&h, 0, sizeof(h));
    b.node = 0;
    b.calls = &call;
    b.ncalls = 1;
    b.deadline_ns = redlock__now_ns() + 500 * REDLOCK__NS_PER_MS;
    ck_assert_int_eq(c->tp.ops->fanout(c->tp.ctx, &b, 1, note_reply, &h), REDLOCK_OK);
    return h;
}

START_TEST(test_unencodable_call_keeps_stream_in_step)
{
    const char *too_many[REDLOCK__MAX_CALL_ARGS + 1];
    redlock_client *c = client_for(rig_plain_uri(0), NULL);
    const char *ping[2] = {"PING", "first"}, *again[2] = {"PING", "second"};
    heard h;
    size_t i;

    h = fan_one(c, 2, ping);
    ck_assert_str_eq(h.text, "first");
    too_many[0] = "PING";
    for (i = 1; i < REDLOCK__MAX_CALL_ARGS + 1; i++)
        too_many[i] = "x";
    h = fan_one(c, REDLOCK__MAX_CALL_ARGS + 1, too_many);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_int_ne(h.err, 0);
    h = fan_one(c, 2, again);
    ck_assert_msg(h.calls == 1 && h.err == 0 && strcmp(h.text, "second") == 0,
                  "the next call heard %d replies (err %d, '%s')", h.calls, h.err, h.text);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bad input. */

START_TEST(test_malformed_uris)
{
    static const char *const bad[] = {
        "", "http://127.0.0.1:6379", "127.0.0.1:6379", "redis://", "redis://:6379",
        "redis://h:0", "redis://h:65536", "redis://h:-1", "redis://h:abc", "redis://h:",
        "redis://h/x", "redis://h/-1", "redis://h/0/1", "redis://h?db=1", "redis://[::1",
        "redis://[]", "redis://ho_st", "redis://:p%zz@h", "rediss://",
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        redlock_client *c = (redlock_client *)&c; /* must be reset to NULL */
        const char *uris[2] = {rig_plain_uri(0), bad[i]};
        int rc = redlock_client_new(&c, uris, 2, NULL);

        ck_assert_msg(rc == REDLOCK_EURI, "'%s' gave %s", bad[i], redlock_err_name(rc));
        ck_assert_ptr_null(c);
        /* The message names the offending node and says why. */
        ck_assert_msg(strncmp(redlock_last_error(), "node 1", 6) == 0 &&
                          strlen(redlock_last_error()) > 12,
                      "'%s': message '%s'", bad[i], redlock_last_error());
    }
    {
        redlock_client *c = NULL;
        const char *uris[1] = {NULL};

        ck_assert_int_eq(redlock_client_new(&c, uris, 1, NULL), REDLOCK_EURI);
        ck_assert_ptr_null(c);
    }
}
END_TEST

START_TEST(test_bad_client_arguments)
{
    redlock_client *c = NULL;
    redlock_options o;
    const char *many[65];
    size_t i;

    ck_assert_int_eq(redlock_client_new(&c, rig_plain_uris(), 0, NULL), REDLOCK_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(redlock_client_new(&c, NULL, 1, NULL), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_client_new(NULL, rig_plain_uris(), 1, NULL), REDLOCK_EINVAL);
    for (i = 0; i < 65; i++)
        many[i] = rig_plain_uri(0);
    ck_assert_int_eq(redlock_client_new(&c, many, 65, NULL), REDLOCK_EINVAL);
    ck_assert_ptr_null(c);

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = -1;
    ck_assert_int_eq(redlock_client_new(&c, rig_plain_uris(), 1, &o), REDLOCK_EINVAL);
    memset(&o, 0, sizeof(o));
    o.drift_factor = 0.7;
    ck_assert_int_eq(redlock_client_new(&c, rig_plain_uris(), 1, &o), REDLOCK_EINVAL);
    memset(&o, 0, sizeof(o));
    o.tls.cert_file = rig_get("TLS_CERT"); /* without key_file */
    {
        const char *uris[1] = {tls_uri("TLS_PORT")};

        ck_assert_int_eq(redlock_client_new(&c, uris, 1, &o), REDLOCK_EINVAL);
    }
    ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_bad_lock_arguments)
{
    redlock_client *one = client_for(rig_plain_uri(0), NULL), *five = NULL;
    redlock_lock_options lo;
    redlock_lock *l = NULL;
    char *name;

    ck_assert_int_eq(redlock_client_new(&five, rig_plain_uris(), 5, NULL), REDLOCK_OK);

    ck_assert_int_eq(redlock_lock_new(one, "", NULL, &l), REDLOCK_EINVAL);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(redlock_lock_new(one, NULL, NULL, &l), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_lock_new(NULL, "x", NULL, &l), REDLOCK_EINVAL);

    /* 64 KiB is the longest name; one byte more is refused. */
    name = malloc(65536 + 2);
    ck_assert_ptr_nonnull(name);
    memset(name, 'n', 65536 + 1);
    name[65536 + 1] = '\0';
    ck_assert_int_eq(redlock_lock_new(one, name, NULL, &l), REDLOCK_EINVAL);
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(redlock_last_error(), "65536") != NULL, "'%s'", redlock_last_error());
    name[65536] = '\0';
    ck_assert_int_eq(redlock_lock_new(one, name, NULL, &l), REDLOCK_OK);
    redlock_lock_free(l);
    l = NULL;
    free(name);

    /* A fair waiter's place must outlast three renewals' node timeouts
     * (50 ms when derived): it renews every third of it. */
    memset(&lo, 0, sizeof(lo));
    lo.kind = REDLOCK_LOCK_FAIR;
    lo.fair_wait_lease_ms = 2;
    ck_assert_int_eq(redlock_lock_new(one, "fairplace", &lo, &l), REDLOCK_EINVAL);
    ck_assert_ptr_null(l);
    lo.fair_wait_lease_ms = 149;
    ck_assert_int_eq(redlock_lock_new(one, "fairplace", &lo, &l), REDLOCK_EINVAL);
    ck_assert_msg(strstr(redlock_last_error(), "at least 150 ms") != NULL, "'%s'",
                  redlock_last_error());
    lo.fair_wait_lease_ms = 150;
    ck_assert_int_eq(redlock_lock_new(one, "fairplace", &lo, &l), REDLOCK_OK);
    redlock_lock_free(l);
    l = NULL;

    /* Quorum: any value means 1 with one node... */
    memset(&lo, 0, sizeof(lo));
    ck_assert_int_eq(redlock_lock_new(one, "q", &lo, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_quorum(l), 1);
    redlock_lock_free(l);
    /* ...and must lie in 1..N with five. */
    lo.quorum = 9;
    ck_assert_int_eq(redlock_lock_new(five, "q", &lo, &l), REDLOCK_EINVAL);
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(redlock_last_error(), "quorum") != NULL, "'%s'",
                  redlock_last_error());
    lo.quorum = 6;
    ck_assert_int_eq(redlock_lock_new(five, "q", &lo, &l), REDLOCK_EINVAL);
    lo.quorum = -2;
    ck_assert_int_eq(redlock_lock_new(five, "q", &lo, &l), REDLOCK_EINVAL);
    lo.quorum = 0;
    ck_assert_int_eq(redlock_lock_new(five, "q", &lo, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_quorum(l), 3);
    redlock_lock_free(l);
    lo.quorum = REDLOCK_QUORUM_ALL;
    ck_assert_int_eq(redlock_lock_new(five, "q", &lo, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_quorum(l), 5);
    redlock_lock_free(l);

    /* Lease and wait arguments. */
    ck_assert_int_eq(redlock_lock_new(one, unique_name("args"), NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_acquire_lease(l, 0), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_lock_acquire_lease(l, -5), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_try_lock_for(l, -1, 1000), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_acquire_as(l, 0, 0, 1000), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_acquire_as(NULL, 1, 0, 1000), REDLOCK_EINVAL);
    redlock_lock_free(l);

    redlock_client_free(five);
    redlock_client_free(one);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Server error replies, from a tiny fake server that answers every
 * command with one fixed error. */

typedef struct fake_server {
    int fd;
    int port;
    const char *reply;
    pthread_t thread;
    int stop;                 /* atomic */
    int commands;             /* atomic: commands answered */
} fake_server;

static void *fake_main(void *arg)
{
    fake_server *fs = arg;
    int conns[8], nconns = 0, polled, i;
    redisReader *readers[8];
    int64_t end = rig_now_ms() + 30000; /* bounded even if never stopped */

    while (!__atomic_load_n(&fs->stop, __ATOMIC_ACQUIRE) && rig_now_ms() < end) {
        struct pollfd pfd[9];

        pfd[0].fd = fs->fd;
        pfd[0].events = POLLIN;
        for (i = 0; i < nconns; i++) {
            pfd[i + 1].fd = conns[i];
            pfd[i + 1].events = POLLIN;
        }
        if (poll(pfd, (nfds_t)nconns + 1, 20) <= 0)
            continue;
        /* A connection accepted below was not polled this round. */
        polled = nconns;
        if ((pfd[0].revents & POLLIN) && nconns < 8) {
            int cfd = accept(fs->fd, NULL, NULL);

            if (cfd >= 0) {
                conns[nconns] = cfd;
                readers[nconns++] = redisReaderCreate();
            }
        }
        for (i = 0; i < polled; i++) {
            char buf[4096];
            ssize_t n;
            void *cmd;

            if (!(pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            n = read(conns[i], buf, sizeof(buf));
            if (n <= 0)
                continue;
            redisReaderFeed(readers[i], buf, (size_t)n);
            /* One error reply per complete command, in order. */
            while (redisReaderGetReply(readers[i], &cmd) == REDIS_OK && cmd) {
                ssize_t w = write(conns[i], fs->reply, strlen(fs->reply));

                (void)w;
                freeReplyObject(cmd);
                __atomic_add_fetch(&fs->commands, 1, __ATOMIC_RELAXED);
            }
        }
    }
    for (i = 0; i < nconns; i++) {
        close(conns[i]);
        redisReaderFree(readers[i]);
    }
    return NULL;
}

static void fake_start(fake_server *fs, const char *reply)
{
    memset(fs, 0, sizeof(*fs));
    fs->reply = reply;
    fs->fd = local_socket(1, &fs->port);
    ck_assert_int_eq(pthread_create(&fs->thread, NULL, fake_main, fs), 0);
}

static void fake_stop(fake_server *fs)
{
    __atomic_store_n(&fs->stop, 1, __ATOMIC_RELEASE);
    pthread_join(fs->thread, NULL);
    close(fs->fd);
}

START_TEST(test_server_error_replies)
{
    static const struct {
        const char *reply;
        int code;
        const char *needle;
    } cases[] = {
        {"-LOADING Redis is loading the dataset in memory\r\n", REDLOCK_ELOADING, "LOADING"},
        {"-READONLY You can't write against a read only replica.\r\n", REDLOCK_EREADONLY,
         "READONLY"},
        {"-OOM command not allowed when used memory > 'maxmemory'.\r\n", REDLOCK_EOOM, "OOM"},
        {"-NOAUTH Authentication required.\r\n", REDLOCK_EAUTH, "NOAUTH"},
        {"-ERR something else\r\n", REDLOCK_ESERVER, "ERR something else"},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fake_server fs;
        redlock_member_report rep;
        redlock_client *c;
        redlock_options o;
        char uri[64];
        int rc;

        fake_start(&fs, cases[i].reply);
        snprintf(uri, sizeof(uri), "redis://127.0.0.1:%d", fs.port);
        memset(&o, 0, sizeof(o));
        o.node_timeout_ms = 500;
        c = client_for(uri, &o);
        rc = try_once(c, unique_name("fake"), &rep);
        /* Authentication and configuration refusals end the acquire with
         * their own code; the rest may pass, so they are "no quorum". */
        ck_assert_msg(rc == (cases[i].code == REDLOCK_EAUTH || cases[i].code == REDLOCK_ECONFIG
                                 ? cases[i].code
                                 : REDLOCK_ENO_QUORUM),
                      "%s: try_lock gave %s", cases[i].needle, redlock_err_name(rc));
        ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_ERROR);
        ck_assert_msg(rep.err == cases[i].code, "%s: report err %s, want %s",
                      cases[i].needle, redlock_err_name(rep.err),
                      redlock_err_name(cases[i].code));
        ck_assert_msg(strstr(rep.message, cases[i].needle) != NULL, "report: '%s'",
                      rep.message);
        redlock_client_free(c);
        fake_stop(&fs);
        /* The acquire reached the server (not a connection failure). */
        ck_assert_int_ge(fs.commands, 1);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *transport_suite(void)
{
    Suite *s = suite_create("transport");
    TCase *tc;

    tc = tcase_create("plain");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_plain_round_trip);
    tcase_add_test(tc, test_select_db);
    tcase_add_test(tc, test_noscript_recovery);
    tcase_add_test(tc, test_script_digests);
    suite_add_tcase(s, tc);

    tc = tcase_create("tls");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_tls_verified);
    tcase_add_test(tc, test_tls_wrong_ca);
    tcase_add_test(tc, test_tls_encrypted_key_refused);
    tcase_add_test(tc, test_tls_wrong_server_name);
    tcase_add_test(tc, test_tls_insecure_skip_verify);
    tcase_add_test(tc, test_mtls_without_client_cert);
    tcase_add_test(tc, test_mtls_with_client_cert);
    tcase_add_test(tc, test_tls_unusable_ca_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("acl");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_acl_user_in_uri);
    tcase_add_test(tc, test_acl_wrong_password);
    tcase_add_test(tc, test_acl_options_override_uri);
    suite_add_tcase(s, tc);

    tc = tcase_create("deadlines");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_silent_listener_deadline);
    tcase_add_test(tc, test_connection_refused);
    tcase_add_test(tc, test_subscriber_idle_after_dead_node);
    tcase_add_test(tc, test_unencodable_call_keeps_stream_in_step);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_malformed_uris);
    tcase_add_test(tc, test_bad_client_arguments);
    tcase_add_test(tc, test_bad_lock_arguments);
    tcase_add_test(tc, test_server_error_replies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(transport_suite());
    int failed;

    /* Fail fast, before forking a test, if the rig is not there. */
    (void)rig_get("PLAIN_BASE_PORT");
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
