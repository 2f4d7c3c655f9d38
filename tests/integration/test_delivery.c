/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Nothing left behind: every abort and release reaches its node, whatever
 * the node's script cache holds, in whatever order the node reads its
 * sockets, and after the client is freed. Real redis-server processes of
 * the fixture, real SIGSTOP/SIGCONT, caches emptied with SCRIPT FLUSH.
 *
 * The script cases run the embedded scripts with EVAL to set up exactly the
 * interleavings a frozen node produces (a leftover grant, a release that
 * arrives before the acquire it cancels); the client cases check the same
 * through the public API.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redlock/redlock.h"
#include "resp/script.h"
#include "resp/scripts.h"
#include "rig_env.h"

#define N_NODES 5
#define LEASE "30000"

/* ------------------------------------------------------------------------ */
/* Helpers: a blocking connection to plain node i, and commands on it. */

static redisContext *node_conn(size_t i)
{
    struct timeval tv = {5, 0};
    redisContext *ctx = redisConnectWithTimeout(
        "127.0.0.1", rig_get_int("PLAIN_BASE_PORT") + (int)i, tv);

    ck_assert_msg(ctx && !ctx->err, "connect to node %zu: %s", i, ctx ? ctx->errstr : "?");
    redisSetTimeout(ctx, tv);
    return ctx;
}

static redisReply *cmd(redisContext *ctx, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);

    ck_assert_msg(r != NULL, "command %s failed: %s", argv[0], ctx->errstr);
    return r;
}

/* EVAL of a call built by the library's own builders (resp/script.h). */
static redisReply *eval(redisContext *ctx, redlock__script_call sc, const char **args)
{
    const char *argv[REDLOCK__MAX_CALL_ARGS + 3];
    char n[8];
    int i;

    snprintf(n, sizeof(n), "%d", sc.nkeys);
    argv[0] = "EVAL";
    argv[1] = redlock__scripts[sc.script].body;
    argv[2] = n;
    for (i = 0; i < sc.argc; i++)
        argv[3 + i] = args[i];
    return cmd(ctx, 3 + sc.argc, argv);
}

static long long int_reply(redisReply *r)
{
    long long v;

    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "not an integer (type %d: %s)", r->type,
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    v = r->integer;
    freeReplyObject(r);
    return v;
}

static long long hget_count(redisContext *ctx, const char *key, const char *field)
{
    const char *argv[3] = {"HGET", key, field};
    redisReply *r = cmd(ctx, 3, argv);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;

    freeReplyObject(r);
    return v;
}

static void str_of(redisContext *ctx, const char *key, char *out, size_t cap)
{
    const char *argv[2] = {"GET", key};
    redisReply *r = cmd(ctx, 2, argv);

    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* A lock name's keys, as the library derives them. */
typedef struct keys {
    char name[96], token[128], channel[128], prefix[128];
} keys;

static void keys_of(keys *k, const char *tag)
{
    rig_unique_name(k->name, sizeof(k->name), "deliv", tag);
    snprintf(k->token, sizeof(k->token), "redisson_lock_token:{%s}", k->name);
    snprintf(k->channel, sizeof(k->channel), "redisson_lock__channel:{%s}", k->name);
    snprintf(k->prefix, sizeof(k->prefix), "redlock_latch:{%s}:", k->name);
}

/* A request id as the client makes them: 12 hex digits of sequence. */
static void request_id(char out[33], unsigned seq, char fill)
{
    snprintf(out, 13, "%012x", seq);
    memset(out + 12, fill, 20);
    out[32] = '\0';
}

/* Runs acquire.lua (fenced) for field with request id and fresh flag. */
static redisReply *acquire(redisContext *ctx, const keys *k, const char *field, const char *id,
                           const char *fresh)
{
    char mark[200];
    const char *args[REDLOCK__SCRIPT_MAX_ARGS];
    redlock__script_call sc;

    snprintf(mark, sizeof(mark), "%s%s", k->prefix, id);
    sc = redlock__script_acquire(args, &(redlock__acquire_args){.name = k->name,
                                                               .mark_key = mark,
                                                               .token_key = k->token,
                                                               .lease_ms = LEASE,
                                                               .field = field,
                                                               .request_id = id,
                                                               .fresh_only = fresh});
    return eval(ctx, sc, args);
}

static long long abort_request(redisContext *ctx, const keys *k, const char *field,
                               const char *id)
{
    char mark[200];
    const char *args[REDLOCK__SCRIPT_MAX_ARGS];
    redlock__script_call sc;

    snprintf(mark, sizeof(mark), "%s%s", k->prefix, id);
    sc = redlock__script_abort(args, &(redlock__release_args){.name = k->name,
                                                             .channel = k->channel,
                                                             .mark_key = mark,
                                                             .message = "0",
                                                             .lease_ms = LEASE,
                                                             .field = field});
    return int_reply(eval(ctx, sc, args));
}

static uint64_t token_of(redisReply *r)
{
    uint64_t t;

    /* A grant without a token is its bare generation. */
    ck_assert_msg((r->type == REDIS_REPLY_ARRAY && r->elements == 2) ||
                      r->type == REDIS_REPLY_STRING,
                  "acquire did not grant (type %d, %lld)", r->type,
                  r->type == REDIS_REPLY_INTEGER ? r->integer : 0);
    t = r->type == REDIS_REPLY_ARRAY ? (uint64_t)r->element[0]->integer : 0;
    freeReplyObject(r);
    return t;
}

static void del_keys(redisContext *ctx, const keys *k)
{
    const char *argv[3] = {"DEL", k->name, k->token};

    freeReplyObject(cmd(ctx, 3, argv));
}

/* ------------------------------------------------------------------------ */
/* Scripts. */

/*
 * safety_freeze3's failure: an attempt granted here but its abort was not
 * applied, and the owner's next, fresh acquire arrives. It must replace
 * the leftover with a new hold (count 1, a new token), where it used to
 * re-enter it (count 2, token 0). The leftover's abort, arriving late,
 * must spare the new hold.
 */
START_TEST(test_fresh_acquire_replaces_leftover)
{
    redisContext *ctx = node_conn(0);
    const char *field = "00000000-0000-4000-8000-000000000001:7";
    char old_id[33], new_id[33];
    uint64_t t1, t2;
    keys k;

    keys_of(&k, "leftover");
    request_id(old_id, 1, 'a');
    request_id(new_id, 2, 'b');
    t1 = token_of(acquire(ctx, &k, field, old_id, "1"));
    ck_assert_uint_gt(t1, 0);
    t2 = token_of(acquire(ctx, &k, field, new_id, "1"));
    ck_assert_uint_gt(t2, t1);
    ck_assert_int_eq(hget_count(ctx, k.name, field), 1);

    /* The late abort of the first request finds another generation. */
    ck_assert_int_eq(abort_request(ctx, &k, field, old_id), 0);
    ck_assert_int_eq(hget_count(ctx, k.name, field), 1);
    /* A re-entry is still a re-entry. */
    request_id(old_id, 3, 'c');
    ck_assert_uint_eq(token_of(acquire(ctx, &k, field, old_id, "0")), 0);
    ck_assert_int_eq(hget_count(ctx, k.name, field), 2);
    del_keys(ctx, &k);
    redisFree(ctx);
}
END_TEST

/* A fresh acquire older than the hold now there is a late copy (it sat in
 * a frozen node's socket while the owner took the lock again): it must not
 * replace the newer hold. */
START_TEST(test_late_fresh_copy_is_refused)
{
    redisContext *ctx = node_conn(0);
    const char *field = "00000000-0000-4000-8000-000000000002:7";
    char newer[33], older[33];
    keys k;

    keys_of(&k, "latecopy");
    request_id(newer, 9, 'a');
    request_id(older, 4, 'b');
    token_of(acquire(ctx, &k, field, newer, "1"));
    ck_assert_int_eq(int_reply(acquire(ctx, &k, field, older, "1")), -3);
    ck_assert_int_eq(hget_count(ctx, k.name, field), 1);
    del_keys(ctx, &k);
    redisFree(ctx);
}
END_TEST

/* A release (or abort) that a node runs before the late acquire it
 * cancels leaves a tombstone: the acquire then does not grant. */
START_TEST(test_release_before_late_acquire)
{
    redisContext *ctx = node_conn(1);
    const char *field = "00000000-0000-4000-8000-000000000003:7";
    char acq[33], rel[33], latch[200], mark[8];
    const char *args[REDLOCK__SCRIPT_MAX_ARGS];
    redisReply *r;
    keys k;

    keys_of(&k, "tombstone");
    request_id(acq, 5, 'a');
    request_id(rel, 6, 'b');
    snprintf(latch, sizeof(latch), "%s%s", k.prefix, rel);
    r = eval(ctx,
             redlock__script_release(args, &(redlock__release_args){.name = k.name,
                                                                    .channel = k.channel,
                                                                    .mark_key = latch,
                                                                    .message = "0",
                                                                    .lease_ms = LEASE,
                                                                    .field = field,
                                                                    .drop_all = "0",
                                                                    .gens = acq}),
             args);
    ck_assert_int_eq(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    snprintf(latch, sizeof(latch), "%s%s", k.prefix, acq);
    str_of(ctx, latch, mark, sizeof(mark));
    ck_assert_str_eq(mark, "x");
    ck_assert_int_eq(int_reply(acquire(ctx, &k, field, acq, "1")), -3);
    ck_assert_int_eq(hget_count(ctx, k.name, field), 0);

    /* The same for an abort. */
    request_id(acq, 7, 'c');
    ck_assert_int_eq(abort_request(ctx, &k, field, acq), 0);
    ck_assert_int_eq(int_reply(acquire(ctx, &k, field, acq, "1")), -3);
    ck_assert_int_eq(hget_count(ctx, k.name, field), 0);
    del_keys(ctx, &k);
    redisFree(ctx);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Through the client. */

static long long info_field(size_t node, const char *section, const char *name)
{
    redisContext *ctx = node_conn(node);
    const char *argv[2] = {"INFO", section};
    redisReply *r = cmd(ctx, 2, argv);
    const char *p = strstr(r->str, name);
    long long v = -1;

    if (p)
        v = atoll(p + strlen(name));
    freeReplyObject(r);
    redisFree(ctx);
    return v;
}

/* Scripts the node has run (EVALSHA and EVAL calls). */
static long long scripts_run(size_t node)
{
    long long sha = info_field(node, "commandstats", "cmdstat_evalsha:calls=");
    long long ev = info_field(node, "commandstats", "cmdstat_eval:calls=");

    return (sha > 0 ? sha : 0) + (ev > 0 ? ev : 0);
}

static int exists_on(size_t node, const char *key)
{
    redisContext *ctx = node_conn(node);
    const char *argv[2] = {"EXISTS", key};
    long long v = int_reply(cmd(ctx, 2, argv));

    redisFree(ctx);
    return (int)v;
}

/* Waits up to ms for key to be gone from node; the time it took, or -1. */
static long long wait_gone(size_t node, const char *key, long long ms)
{
    int64_t t0 = rig_now_ms();

    while (rig_now_ms() - t0 <= ms) {
        if (!exists_on(node, key))
            return rig_now_ms() - t0;
        rig_sleep_ms(20);
    }
    return -1;
}

static void flush_scripts(void)
{
    size_t i;

    for (i = 0; i < N_NODES; i++) {
        redisContext *ctx = node_conn(i);
        const char *argv[2] = {"SCRIPT", "FLUSH"};

        freeReplyObject(cmd(ctx, 2, argv));
        redisFree(ctx);
    }
}

static redlock_client *client_new(int node_timeout_ms)
{
    redlock_options o;
    redlock_client *c = NULL;

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = node_timeout_ms;
    ck_assert_msg(redlock_client_new(&c, rig_plain_uris(), N_NODES, &o) == REDLOCK_OK, "%s",
                  redlock_last_error());
    return c;
}

/*
 * Unlock and free within a few ms while two nodes are frozen and no node
 * has the release script cached: once thawed, both nodes must run the
 * release. It used to go out as EVALSHA only, answered NOSCRIPT to nobody,
 * and the lock stayed there for the whole lease.
 */
START_TEST(test_unlock_then_free_cold_caches)
{
    redlock_client *c;
    redlock_lock *l;
    char name[96];
    int64_t t0;
    size_t i;

    flush_scripts();
    rig_unique_name(name, sizeof(name), "deliv", "coldfree");
    c = client_new(50);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 30000), REDLOCK_OK);
    ck_assert_int_eq(rig_node("freeze", 3), 0);
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
    fprintf(stderr, "unlock + free with 2 of 5 frozen: %lld ms\n",
            (long long)(rig_now_ms() - t0));
    rig_sleep_ms(300);
    ck_assert_int_eq(rig_node("thaw", 3), 0);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    for (i = 0; i < N_NODES; i++)
        ck_assert_msg(wait_gone(i, name, 2000) >= 0, "node %zu still holds '%s'", i, name);
}
END_TEST

/*
 * A failed attempt whose aborts could not be answered (a majority frozen),
 * then the client freed at once, as `redlock exec --wait 0` does: after the
 * thaw nothing of the lock is left anywhere.
 */
START_TEST(test_failed_attempt_then_free)
{
    redlock_client *c;
    redlock_lock *l;
    char name[96];
    size_t i;

    flush_scripts();
    rig_unique_name(name, sizeof(name), "deliv", "abortfree");
    c = client_new(50);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    /* Connections warm and the acquire script cached on every node, as in
     * a busy client; the abort script has never run. */
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 30000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    for (i = 2; i < N_NODES; i++)
        ck_assert_int_eq(rig_node("freeze", i), 0);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 30000), REDLOCK_ENO_QUORUM);
    redlock_lock_free(l);
    redlock_client_free(c);
    rig_sleep_ms(200);
    for (i = 2; i < N_NODES; i++)
        ck_assert_int_eq(rig_node("thaw", i), 0);
    for (i = 0; i < N_NODES; i++)
        ck_assert_msg(wait_gone(i, name, 2000) >= 0, "node %zu still holds '%s'", i, name);
}
END_TEST

/*
 * 2000 locks released while one node is frozen for 8 s: the node gets one
 * connection and one probe at a time, not a storm, and after the thaw runs
 * about one script per lock. It used to see ~7500 requests/s, 12-13 new
 * connections/s, and ran 15 536 scripts for 2000 locks.
 */
START_TEST(test_bulk_release_frozen_node)
{
    enum { LOCKS = 2000 };
    static redlock_lock *locks[LOCKS];
    redlock_client *c = client_new(50);
    long long conns0, scripts0, conns, scripts;
    char name[96];
    size_t k;

    for (k = 0; k < LOCKS; k++) {
        rig_unique_name(name, sizeof(name), "deliv", "bulk");
        ck_assert_int_eq(redlock_lock_new(c, name, NULL, &locks[k]), REDLOCK_OK);
        ck_assert_int_eq(redlock_try_lock_for(locks[k], 0, 60000), REDLOCK_OK);
    }
    scripts0 = scripts_run(4);
    conns0 = info_field(4, "stats", "total_connections_received:");
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    for (k = 0; k < LOCKS; k++)
        ck_assert_int_eq(redlock_unlock(locks[k]), REDLOCK_OK);
    rig_sleep_ms(8000);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    /* Less the connection that asks (INFO counts its own). */
    conns = info_field(4, "stats", "total_connections_received:") - conns0 - 1;
    for (k = 0; k < LOCKS; k += LOCKS / 8)
        ck_assert_msg(wait_gone(4, redlock_lock_name(locks[k]), 10000) >= 0,
                      "node 4 still holds lock %zu", k);
    ck_assert_msg(wait_gone(4, redlock_lock_name(locks[LOCKS - 1]), 1000) >= 0,
                  "node 4 still holds the last lock");
    rig_sleep_ms(300);
    scripts = scripts_run(4) - scripts0;
    fprintf(stderr, "frozen node: %lld connections opened, %lld scripts for %d locks "
                    "(%.2f per lock)\n", conns, scripts, LOCKS, (double)scripts / LOCKS);
    ck_assert_int_le(conns, 2);
    ck_assert_int_le(scripts, LOCKS * 12 / 10);
    for (k = 0; k < LOCKS; k++)
        redlock_lock_free(locks[k]);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Waiting ends on what waiting cannot fix, and on request. */

typedef struct waiter {
    redlock_lock *l;
    uint64_t owner;  /* 0: 77 */
    int rc;
    int64_t done_ms;
} waiter;

static void *wait_forever(void *arg)
{
    waiter *w = arg;

    w->rc = redlock_acquire_as(w->l, w->owner ? w->owner : 77, -1, 30000);
    w->done_ms = rig_now_ms();
    return NULL;
}

/* No member holds name for owner of client c: nothing was left behind. */
static void assert_owner_holds_nothing(redlock_client *c, uint64_t owner, const char *name)
{
    char field[128];
    size_t i;

    snprintf(field, sizeof(field), "%s:%llu", redlock_client_id(c), (unsigned long long)owner);
    for (i = 0; i < N_NODES; i++) {
        redisContext *ctx = node_conn(i);

        ck_assert_int_eq(hget_count(ctx, name, field), 0);
        redisFree(ctx);
    }
}

/* redlock_client_cancel() ends a waiter blocked on a held lock at once,
 * and its attempts leave nothing behind. */
START_TEST(test_cancel_ends_a_waiter)
{
    redlock_client *holder = client_new(50), *c = client_new(50);
    redlock_lock *hl, *l;
    char name[96];
    pthread_t th;
    waiter w;
    int64_t t0;

    rig_unique_name(name, sizeof(name), "deliv", "cancel");
    ck_assert_int_eq(redlock_lock_new(holder, name, NULL, &hl), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock_for(hl, 0, 30000), REDLOCK_OK);
    memset(&w, 0, sizeof(w));
    w.l = l;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_forever, &w), 0);
    rig_sleep_ms(300);
    t0 = rig_now_ms();
    redlock_client_cancel(c);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    fprintf(stderr, "cancel ended the waiter after %lld ms\n", (long long)(w.done_ms - t0));
    ck_assert_int_lt(w.done_ms - t0, 1000);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 30000), REDLOCK_ECANCELED);
    assert_owner_holds_nothing(c, 77, name);
    ck_assert_int_eq(redlock_unlock(hl), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_lock_free(hl);
    redlock_client_free(c);
    redlock_client_free(holder);
}
END_TEST

/* redlock_acquire_cancel() ends the acquires of one handle in progress, at
 * once and leaving nothing behind; another handle's waiter, and later
 * acquires of the same handle, go on. */
START_TEST(test_acquire_cancel_ends_one_handles_waiters)
{
    redlock_client *holder = client_new(50), *c = client_new(50);
    redlock_lock *hl, *l, *other;
    char name[96];
    pthread_t th, th_other;
    redlock_stats before, after;
    waiter w, w_other;
    int64_t t0;
    int i;

    rig_unique_name(name, sizeof(name), "deliv", "lockcancel");
    ck_assert_int_eq(redlock_lock_new(holder, name, NULL, &hl), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &other), REDLOCK_OK);
    /* Nothing in progress: a cancel changes nothing for later acquires. */
    redlock_acquire_cancel(l);
    redlock_acquire_cancel(NULL);
    ck_assert_int_eq(redlock_try_lock_for(hl, 0, 30000), REDLOCK_OK);
    memset(&w, 0, sizeof(w));
    memset(&w_other, 0, sizeof(w_other));
    w.l = l;
    w_other.l = other;
    w_other.owner = 78;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_forever, &w), 0);
    ck_assert_int_eq(pthread_create(&th_other, NULL, wait_forever, &w_other), 0);
    rig_sleep_ms(300);
    before = rig_stats(c);
    t0 = rig_now_ms();
    redlock_acquire_cancel(l);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    fprintf(stderr, "acquire_cancel ended the waiter after %lld ms\n",
            (long long)(w.done_ms - t0));
    ck_assert_int_lt(w.done_ms - t0, 1000);
    /* The other handle still waits, and gets the lock once it is free.
     * Until then it sleeps through cancels that are not its own: no
     * attempt for them. */
    for (i = 0; i < 5; i++) {
        redlock_acquire_cancel(l);
        rig_sleep_ms(40);
    }
    ck_assert_int_eq(w_other.done_ms, 0);
    after = rig_stats(c);
    ck_assert_msg(after.attempts == before.attempts,
                  "6 cancels of another handle made %llu attempts",
                  (unsigned long long)(after.attempts - before.attempts));
    assert_owner_holds_nothing(c, 77, name);
    ck_assert_int_eq(redlock_unlock(hl), REDLOCK_OK);
    pthread_join(th_other, NULL);
    ck_assert_int_eq(w_other.rc, REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(other, 78), REDLOCK_OK);
    /* Not sticky: the canceled handle acquires again. */
    ck_assert_int_eq(redlock_acquire_as(l, 77, 0, 30000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(l, 77), REDLOCK_OK);
    redlock_lock_free(other);
    redlock_lock_free(l);
    redlock_lock_free(hl);
    redlock_client_free(c);
    redlock_client_free(holder);
}
END_TEST

/* A cancel that lands while a waiter is between waits (woken by another
 * handle's cancel, it found its own count unchanged and is about to sleep
 * again) ends it all the same: the wait tests the count under the lock
 * the cancel's kick takes. It used to be slept through until the holder's
 * TTL (30 s here). The delay between the two cancels sweeps that moment. */
#define SWEEP_TRIALS 40
#define SWEEP_STEP_US 50

START_TEST(test_cancel_between_waits_not_missed)
{
    redlock_client *holder = client_new(50), *c = client_new(50);
    redlock_lock *hl, *l, *bystander;
    char name[96];
    int64_t t0, slowest = 0;
    int i;

    rig_unique_name(name, sizeof(name), "deliv", "cancelsweep");
    ck_assert_int_eq(redlock_lock_new(holder, name, NULL, &hl), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "deliv:bystander", NULL, &bystander), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock_for(hl, 0, 30000), REDLOCK_OK);
    for (i = 0; i < SWEEP_TRIALS; i++) {
        waiter w = {.l = l};
        pthread_t th;

        ck_assert_int_eq(pthread_create(&th, NULL, wait_forever, &w), 0);
        rig_sleep_ms(30); /* refused, subscribed, asleep on the holder's TTL */
        redlock_acquire_cancel(bystander); /* wakes it: not its cancel */
        usleep((useconds_t)(i * SWEEP_STEP_US));
        t0 = rig_now_ms();
        redlock_acquire_cancel(l);
        pthread_join(th, NULL);
        ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
        ck_assert_msg(w.done_ms - t0 < 1000, "trial %d (%d us between the cancels): the "
                      "waiter's own cancel ended it only after %lld ms", i, i * SWEEP_STEP_US,
                      (long long)(w.done_ms - t0));
        if (w.done_ms - t0 > slowest)
            slowest = w.done_ms - t0;
    }
    fprintf(stderr, "cancel between waits: %d trials, slowest %lld ms\n", SWEEP_TRIALS,
            (long long)slowest);
    ck_assert_int_eq(redlock_unlock(hl), REDLOCK_OK);
    redlock_lock_free(bystander);
    redlock_lock_free(l);
    redlock_lock_free(hl);
    redlock_client_free(c);
    redlock_client_free(holder);
}
END_TEST

/* Nothing listening anywhere: an acquire that would wait forever ends with
 * ENO_QUORUM after the unavailable timeout. It used to retry forever. */
START_TEST(test_unavailable_quorum_ends_forever_wait)
{
    const char *uris[3];
    char u[3][64];
    redlock_options o;
    redlock_client *c = NULL;
    redlock_lock *l;
    int64_t t0, took;
    int i, rc;

    for (i = 0; i < 3; i++) {
        /* The fixture's ports below the plain nodes are free by design. */
        snprintf(u[i], sizeof(u[i]), "redis://127.0.0.1:%d",
                 rig_get_int("PLAIN_BASE_PORT") - 3 + i);
        uris[i] = u[i];
    }
    memset(&o, 0, sizeof(o));
    o.unavailable_timeout_ms = 700;
    ck_assert_int_eq(redlock_client_new(&c, uris, 3, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "deliv:unavailable", NULL, &l), REDLOCK_OK);
    t0 = rig_now_ms();
    rc = redlock_acquire_as(l, 7, -1, 30000);
    took = rig_now_ms() - t0;
    ck_assert_int_eq(rc, REDLOCK_ENO_QUORUM);
    ck_assert_msg(strstr(redlock_last_error(), "reachable for 700 ms") != NULL, "%s",
                  redlock_last_error());
    ck_assert_int_ge(took, 700);
    ck_assert_int_lt(took, 3000);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

typedef struct log_capture {
    int warnings;
    char last[512];
} log_capture;

static void capture(void *ud, redlock_log_level level, const char *msg)
{
    log_capture *lc = ud;

    if (level == REDLOCK_LOG_WARN && strstr(msg, "for good")) {
        lc->warnings++;
        snprintf(lc->last, sizeof(lc->last), "%s", msg);
    }
}

static void set_string_on(size_t node, const char *key)
{
    redisContext *ctx = node_conn(node);
    const char *argv[3] = {"SET", key, "not-a-lock"};

    freeReplyObject(cmd(ctx, 3, argv));
    redisFree(ctx);
}

/* A member the attempt decided without still gets its grant when its
 * script cache was emptied: the acquire is loaded on every new connection,
 * so its EVALSHA is not answered with a NOSCRIPT nobody reads. */
START_TEST(test_straggler_acquire_after_script_flush)
{
    redlock_client *c = NULL;
    redlock_lock *l;
    char name[96];
    const char *kill[4] = {"CLIENT", "KILL", "TYPE", "normal"};
    redisContext *ctx;
    int64_t end;
    int round;

    ck_assert_int_eq(redlock_client_new(&c, rig_plain_uris(), N_NODES, NULL), REDLOCK_OK);
    rig_unique_name(name, sizeof(name), "deliv", "straggler");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    for (round = 0; round < 10; round++) {
        ck_assert_int_eq(redlock_acquire_as(l, 7, 0, 30000), REDLOCK_OK);
        ck_assert_int_eq(redlock_unlock_as(l, 7), REDLOCK_OK);
        ck_assert_int_eq(redlock_client_flush(c, 5000), REDLOCK_OK);
        /* Node 5 forgets its scripts and drops our connections, as after
         * a restart. The next cycle finds the connection closed, and its
         * release opens a new one; on it, the acquire after that may be
         * decided before node 5 answers. */
        ctx = node_conn(4);
        freeReplyObject(cmd(ctx, 2, (const char *[]){"SCRIPT", "FLUSH"}));
        freeReplyObject(cmd(ctx, 4, kill));
        redisFree(ctx);
        ck_assert_int_eq(redlock_acquire_as(l, 7, 0, 30000), REDLOCK_OK);
        ck_assert_int_eq(redlock_unlock_as(l, 7), REDLOCK_OK);
        ck_assert_int_eq(redlock_client_flush(c, 5000), REDLOCK_OK);
        ck_assert_int_eq(redlock_acquire_as(l, 7, 0, 30000), REDLOCK_OK);
        end = rig_now_ms() + 2000;
        while (exists_on(4, name) != 1 && rig_now_ms() < end)
            rig_sleep_ms(10);
        ck_assert_msg(exists_on(4, name) == 1, "round %d: node 5 never got its grant", round);
        ck_assert_int_eq(redlock_unlock_as(l, 7), REDLOCK_OK);
    }
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* A lock name that holds a string on a majority: ECONFIG at once, not an
 * endless wait. On one node only: a single warning, and the lock works. */
START_TEST(test_wrong_type_fails_fast)
{
    redlock_options o;
    redlock_client *c = NULL;
    redlock_lock *l;
    log_capture lc;
    char name[96];
    int64_t t0;
    size_t i;
    int warned;

    memset(&lc, 0, sizeof(lc));
    memset(&o, 0, sizeof(o));
    o.log_fn = capture;
    o.log_userdata = &lc;
    ck_assert_int_eq(redlock_client_new(&c, rig_plain_uris(), N_NODES, &o), REDLOCK_OK);

    rig_unique_name(name, sizeof(name), "deliv", "wrongtype");
    for (i = 0; i < 3; i++)
        set_string_on(i, name);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_acquire_as(l, 7, -1, 30000), REDLOCK_ECONFIG);
    ck_assert_int_lt(rig_now_ms() - t0, 1000);
    ck_assert_msg(strstr(redlock_last_error(), "WRONGTYPE") != NULL, "%s", redlock_last_error());
    redlock_lock_free(l);
    warned = lc.warnings; /* once per refusing node met so far */
    ck_assert_int_ge(warned, 1);
    ck_assert_int_le(warned, 3);

    rig_unique_name(name, sizeof(name), "deliv", "wrongtype1");
    set_string_on(4, name);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(redlock_acquire_as(l, 7, 0, 30000), REDLOCK_OK);
        ck_assert_int_eq(redlock_unlock_as(l, 7), REDLOCK_OK);
    }
    /* A release settles at a quorum, so node 4's refusal may still be in
     * a parked or queued call: the flush waits for it, and must end, since
     * a refusal for good is not sent again. */
    ck_assert_int_eq(redlock_client_flush(c, 5000), REDLOCK_OK);
    ck_assert_int_eq(lc.warnings, warned + 1);
    ck_assert_msg(strstr(lc.last, "WRONGTYPE") != NULL, "%s", lc.last);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("delivery");
    SRunner *sr;
    int failed;

    RIG_ADD_CASE(s, test_fresh_acquire_replaces_leftover, 30);
    RIG_ADD_CASE(s, test_late_fresh_copy_is_refused, 30);
    RIG_ADD_CASE(s, test_release_before_late_acquire, 30);
    RIG_ADD_CASE(s, test_unlock_then_free_cold_caches, 60);
    RIG_ADD_CASE(s, test_failed_attempt_then_free, 60);
    RIG_ADD_CASE(s, test_bulk_release_frozen_node, 120);
    RIG_ADD_CASE(s, test_cancel_ends_a_waiter, 30);
    RIG_ADD_CASE(s, test_acquire_cancel_ends_one_handles_waiters, 30);
    RIG_ADD_CASE(s, test_cancel_between_waits_not_missed, 60);
    RIG_ADD_CASE(s, test_unavailable_quorum_ends_forever_wait, 30);
    RIG_ADD_CASE(s, test_wrong_type_fails_fast, 30);
    RIG_ADD_CASE(s, test_straggler_acquire_after_script_flush, 60);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
