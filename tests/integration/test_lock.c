/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration tests of the single-node reentrant lock (N = 1) against the
 * fixture's first plain redis-server: Redisson's data layout and release
 * message, the whole RLock-style API, reentrancy, explicit owners, waiting
 * on release messages and on the holder's TTL, the shared subscriber
 * connection, the watchdog (renewal, loss, hold cap), idempotent retries
 * across a frozen node, SCRIPT FLUSH, and ACL / TLS / mutual-TLS nodes.
 *
 * Every case checks what Redis stores (HGETALL, PTTL, PUBSUB, CLIENT LIST)
 * as well as return codes. Each case is its own TCase whose unchecked
 * fixture thaws or restarts node 0 in the parent process, so a failed case
 * never leaves a frozen node behind.
 */
#include "core/util.h"
#include "lock/hold.h"
#include "lock/internal.h"
#include "lock/watchdog.h"
#include "redlock/redlock.h"
#include "rig_env.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIELD_CAP 96
#define NAME_CAP 96
#define CHANNEL_PREFIX "redisson_lock__channel:{"

/* ------------------------------------------------------------------------ */
/* Helpers. */

/* redis-cli against node 0 with a printf-style argument string; returns
 * its trimmed output (static buffer, valid until the next call). */
static const char *cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *cli(const char *fmt, ...)
{
    char args[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    return rig_cli(0, args);
}

static long long cli_int(const char *fmt, const char *arg)
{
    return atoll(cli(fmt, arg));
}

static int key_exists(const char *name)
{
    return cli_int("EXISTS '%s'", name) == 1;
}

static long long key_pttl(const char *name)
{
    return cli_int("PTTL '%s'", name);
}

/* The count stored in field, or -1 if the field is absent. */
static long long field_count(const char *name, const char *field)
{
    const char *out = cli("HGET '%s' '%s'", name, field);

    return *out ? atoll(out) : -1;
}


/* Polls until name is gone; ms it took, or -1 after timeout_ms. */
static int64_t wait_gone(const char *name, int64_t timeout_ms)
{
    int64_t t0 = rig_now_ms();

    for (;;) {
        if (!key_exists(name))
            return rig_now_ms() - t0;
        if (rig_now_ms() - t0 > timeout_ms)
            return -1;
        rig_sleep_ms(10);
    }
}

/* Writes a hold exactly as a Redisson client would: hash field
 * "<uuid>:<thread-id>" = 1 and the lease as PEXPIRE. */
#define REDISSON_FIELD "6f1c2a4e-93b7-4d1a-8a0e-2b5c7d9e1f30:57"

static void hold_redisson(const char *name, int lease_ms)
{
    char lease[24];

    ck_assert_str_eq(cli("HSET '%s' " REDISSON_FIELD " 1", name), "1");
    snprintf(lease, sizeof(lease), "%d", lease_ms);
    ck_assert_str_eq(cli("PEXPIRE '%s' %s", name, lease), "1");
}

static void assert_redisson_only(const char *name)
{
    ck_assert_str_eq(cli("HGETALL '%s'", name), REDISSON_FIELD "\n1");
}

/* A hold of ours, as HGETALL shows it: Redisson's "<field>" = count, then
 * "<field>:gen" = the generation (32 hex digits), then the sequence
 * numbers of recent re-entries and releases (acquire.lua). */
static void assert_our_hold(const char *all, const char *field, int count)
{
    char want[512];
    const char *gen;

    snprintf(want, sizeof(want), "%s\n%d\n%s:gen\n", field, count, field);
    ck_assert_msg(strncmp(all, want, strlen(want)) == 0, "layout: %s", all);
    gen = all + strlen(want);
    ck_assert_msg(strspn(gen, "0123456789abcdef") == 32 && (gen[32] == '\0' || gen[32] == ','),
                  "generation: %s", gen);
}

/* The derived per-request timeout (lease / 100, 10..50 ms) is tuned for
 * production latencies; on a loaded shared test machine it would turn a
 * slow reply into a spurious failure in cases that test something else.
 * Cases about timeouts set their own. */
#define TEST_NODE_TIMEOUT_MS 400

static redlock_client *client_opts(const char *uri, const redlock_options *opts)
{
    const char *uris[1] = {uri};
    redlock_client *c = NULL;
    redlock_options o;
    int rc;

    if (opts)
        o = *opts;
    else
        memset(&o, 0, sizeof(o));
    if (o.node_timeout_ms == 0)
        o.node_timeout_ms = TEST_NODE_TIMEOUT_MS;
    rc = redlock_client_new(&c, uris, 1, &o);

    ck_assert_msg(rc == REDLOCK_OK, "client_new(%s): %s", uri, redlock_last_error());
    ck_assert_uint_eq(redlock_client_node_count(c), 1);
    return c;
}

static redlock_client *client_with(int node_timeout_ms, int watchdog_lease_ms)
{
    redlock_options o;

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = node_timeout_ms;
    o.watchdog_lease_ms = watchdog_lease_ms;
    return client_opts(rig_plain_uri(0), &o);
}

static redlock_client *client_default(void)
{
    return client_opts(rig_plain_uri(0), NULL);
}

static redlock_lock *new_lock(redlock_client *c, const char *name)
{
    redlock_lock *l = NULL;
    int rc = redlock_lock_new(c, name, NULL, &l);

    ck_assert_msg(rc == REDLOCK_OK, "lock_new: %s", redlock_last_error());
    ck_assert_uint_eq(redlock_lock_member_count(l), 1);
    ck_assert_int_eq(redlock_lock_quorum(l), 1);
    return l;
}


/* Subscribers on the lock's release channel on node 0. */
static long long numsub(const char *name)
{
    const char *out = cli("PUBSUB NUMSUB '" CHANNEL_PREFIX "%s}'", name);
    const char *nl = strrchr(out, '\n');

    return nl ? atoll(nl + 1) : -1;
}

static void wait_numsub(const char *name, long long want)
{
    int64_t t0 = rig_now_ms();

    while (numsub(name) != want) {
        ck_assert_msg(rig_now_ms() - t0 < 5000, "channel of %s: %lld subscribers, want %lld",
                      name, numsub(name), want);
        rig_sleep_ms(10);
    }
}

/* Connections of type pubsub on node 0, and how many of them are
 * subscribed to exactly `subs` channels. */
static void pubsub_clients(int *total, int *with_subs, int subs, const char *user)
{
    char want[32];
    const char *p = cli("CLIENT LIST TYPE pubsub");

    snprintf(want, sizeof(want), " sub=%d ", subs);
    *total = *with_subs = 0;
    while (p && *p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[1024];

        if (len >= sizeof(line))
            len = sizeof(line) - 1;
        memcpy(line, p, len);
        line[len] = '\0';
        if (strstr(line, "id=")) {
            (*total)++;
            if (strstr(line, want) && (!user || strstr(line, user)))
                (*with_subs)++;
        }
        p = end ? end + 1 : NULL;
    }
}

/* A raw subscriber on node 0 (hiredis' own blocking client), standing in
 * for a Redisson process listening for release messages. */
static redisContext *raw_subscribe(const char *name)
{
    struct timeval tv = {3, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1",
                                                rig_get_int("PLAIN_BASE_PORT"), tv);
    char chan[NAME_CAP + 32];
    redisReply *r;

    ck_assert_msg(ctx && !ctx->err, "subscriber connect: %s", ctx ? ctx->errstr : "oom");
    ck_assert_int_eq(redisSetTimeout(ctx, tv), REDIS_OK);
    snprintf(chan, sizeof(chan), CHANNEL_PREFIX "%s}", name);
    r = redisCommand(ctx, "SUBSCRIBE %s", chan);
    ck_assert_msg(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                      strcmp(r->element[0]->str, "subscribe") == 0,
                  "SUBSCRIBE %s failed", chan);
    freeReplyObject(r);
    return ctx;
}

/* The next message within timeout_ms: 1 with its channel and payload
 * copied out, 0 if none came. Never blocks past the timeout. */
static int raw_next_message(redisContext *ctx, int timeout_ms, char *chan, size_t chan_cap,
                            char *payload, size_t cap)
{
    int64_t deadline = rig_now_ms() + timeout_ms;

    for (;;) {
        void *reply = NULL;
        redisReply *r;
        int64_t left;
        struct pollfd p;

        ck_assert_int_eq(redisGetReplyFromReader(ctx, &reply), REDIS_OK);
        r = reply;
        if (r) {
            ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                              strcmp(r->element[0]->str, "message") == 0,
                          "unexpected push on the subscriber");
            snprintf(chan, chan_cap, "%s", r->element[1]->str);
            snprintf(payload, cap, "%.*s", (int)r->element[2]->len, r->element[2]->str);
            freeReplyObject(r);
            return 1;
        }
        left = deadline - rig_now_ms();
        if (left <= 0)
            return 0;
        p.fd = ctx->fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, (int)left) > 0)
            ck_assert_int_eq(redisBufferRead(ctx), REDIS_OK);
    }
}

/* Asserts that exactly one release message "0" arrives for name. */
static void assert_release_message(redisContext *sub, const char *name)
{
    char chan[NAME_CAP + 32], want[NAME_CAP + 32], payload[32];

    snprintf(want, sizeof(want), CHANNEL_PREFIX "%s}", name);
    ck_assert_msg(raw_next_message(sub, 2000, chan, sizeof(chan), payload, sizeof(payload)),
                  "no release message for %s", name);
    ck_assert_str_eq(chan, want);
    ck_assert_str_eq(payload, "0");
}

static void assert_no_message(redisContext *sub, int quiet_ms)
{
    char chan[NAME_CAP + 32], payload[32];

    ck_assert_msg(!raw_next_message(sub, quiet_ms, chan, sizeof(chan), payload,
                                    sizeof(payload)),
                  "unexpected message on %s: '%s'", chan, payload);
}

/* A thread that acquires (and optionally releases) one lock. */
typedef struct waiter {
    redlock_lock *l;
    uint64_t owner;        /* 0: the thread's own id */
    int64_t wait_ms;       /* < 0: lock() / lock(lease), which block */
    int64_t lease_ms;
    int unlock;            /* release right after acquiring */
    int rc, unlock_rc;
    atomic_llong done_us;  /* when the acquire returned */
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;

    if (w->owner)
        w->rc = redlock_acquire_as(w->l, w->owner, w->wait_ms, w->lease_ms);
    else if (w->wait_ms < 0 && w->lease_ms > 0)
        w->rc = redlock_lock_acquire_lease(w->l, w->lease_ms);
    else if (w->wait_ms < 0)
        w->rc = redlock_lock_acquire(w->l);
    else
        w->rc = redlock_try_lock_for(w->l, w->wait_ms, w->lease_ms);
    atomic_store(&w->done_us, (long long)rig_now_us());
    if (w->rc == REDLOCK_OK && w->unlock)
        w->unlock_rc = w->owner ? redlock_unlock_as(w->l, w->owner) : redlock_unlock(w->l);
    return NULL;
}

static void waiter_start(pthread_t *th, waiter *w, redlock_lock *l, int64_t wait_ms,
                         int64_t lease_ms, int unlock)
{
    memset(w, 0, sizeof(*w));
    w->l = l;
    w->wait_ms = wait_ms;
    w->lease_ms = lease_ms;
    w->unlock = unlock;
    ck_assert_int_eq(pthread_create(th, NULL, waiter_main, w), 0);
}

/* Records on_lost calls (they run on the watchdog thread). */
typedef struct lost_probe {
    atomic_int calls;
    atomic_int reason;
    atomic_llong at_ms;
    _Atomic uint64_t owner;
    redlock_lock *_Atomic lock;
} lost_probe;

static void on_lost(void *ud, redlock_lock *lock, uint64_t owner, int reason)
{
    lost_probe *p = ud;

    atomic_store(&p->reason, reason);
    atomic_store(&p->owner, owner);
    atomic_store(&p->lock, lock);
    atomic_store(&p->at_ms, (long long)rig_now_ms());
    atomic_fetch_add(&p->calls, 1);
}

static int64_t wait_lost(lost_probe *p, int64_t timeout_ms)
{
    int64_t t0 = rig_now_ms();

    while (atomic_load(&p->calls) == 0 && rig_now_ms() - t0 < timeout_ms)
        rig_sleep_ms(5);
    return atomic_load(&p->calls);
}

/* Returns once the watchdog finished a tick, so a change made now is seen
 * by the next tick rather than one already under way. */
static void wait_next_tick(redlock_client *c, int64_t timeout_ms)
{
    uint64_t ticks = rig_stats(c).watchdog_ticks;
    int64_t t0 = rig_now_ms();

    while (rig_stats(c).watchdog_ticks == ticks && rig_now_ms() - t0 < timeout_ms)
        rig_sleep_ms(1);
    ck_assert_msg(rig_stats(c).watchdog_ticks > ticks, "no watchdog tick in %lld ms",
                  (long long)timeout_ms);
}

/* ------------------------------------------------------------------------ */
/* 1. Redisson's data layout and release message. */

/* Each case starts on a healthy rig (node 0 thawed or restarted). */
static void heal(void)
{
    rig_heal(1);
}

START_TEST(test_redisson_layout)
{
    redlock_client *c = client_default();
    char name[NAME_CAP], field[FIELD_CAP];
    redisContext *sub;
    redlock_lock *l;
    long long pttl;
    size_t released = 99;

    rig_unique_name(name, sizeof(name), "lock", "layout");
    l = new_lock(c, name);
    ck_assert_str_eq(redlock_lock_name(l), name);
    ck_assert_uint_eq(strlen(redlock_client_id(c)), 36);
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    sub = raw_subscribe(name);

    /* A fixed lease: a hash at NAME with one field counting the hold, its
     * generation beside it, and the lease as the key's PEXPIRE. */
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 20000), REDLOCK_OK);
    ck_assert_str_eq(cli("TYPE '%s'", name), "hash");
    assert_our_hold(cli("HGETALL '%s'", name), field, 1);
    pttl = key_pttl(name);
    ck_assert_msg(pttl > 15000 && pttl <= 20000, "pttl %lld", pttl);

    /* Re-entry: same field, count 2, lease reset; no message. */
    rig_sleep_ms(300);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 20000), REDLOCK_OK);
    assert_our_hold(cli("HGETALL '%s'", name), field, 2);
    ck_assert_int_gt(key_pttl(name), 19000);

    /* Dropping one of two holds keeps the key and publishes nothing. */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 1);
    assert_no_message(sub, 200);

    /* The last release deletes the key and publishes "0" once. */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert(!key_exists(name));
    assert_release_message(sub, name);
    assert_no_message(sub, 200);

    /* The watchdog lease is the default 30 s. */
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    pttl = key_pttl(name);
    ck_assert_msg(pttl > 25000 && pttl <= 30000, "watchdog pttl %lld", pttl);

    /* force_unlock deletes and publishes too. */
    ck_assert_int_eq(redlock_force_unlock(l, &released), REDLOCK_OK);
    ck_assert_uint_eq(released, 1);
    ck_assert(!key_exists(name));
    assert_release_message(sub, name);
    ck_assert_int_eq(redlock_force_unlock(l, &released), REDLOCK_OK);
    ck_assert_uint_eq(released, 0);
    assert_no_message(sub, 200);
    /* The hold was removed behind the holder's back: it is lost. */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);

    redisFree(sub);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 2. A Redisson holder excludes us, and we exclude Redisson. */

/* Redisson's own RLock scripts (RedissonLock.tryLockInnerAsync and
 * unlockInnerAsync), as a Java process would run them. */
#define REDISSON_TRY_LOCK                                                      \
    "if ((redis.call('exists', KEYS[1]) == 0) or "                             \
    "(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "                    \
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "                             \
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "               \
    "return redis.call('pttl', KEYS[1]);"
#define REDISSON_UNLOCK                                                        \
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; " \
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "            \
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "          \
    "return 0; else redis.call('del', KEYS[1]); "                              \
    "redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;"

START_TEST(test_redisson_excludes_and_is_excluded)
{
    redlock_client *c = client_default();
    char name[NAME_CAP], field[FIELD_CAP];
    redlock_lock *l;
    int64_t t0, took, ttl;
    int locked = -1, held = -1, count = -1;
    long long pttl;

    rig_unique_name(name, sizeof(name), "lock", "interop");
    l = new_lock(c, name);
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));

    /* Held by Redisson: every way in is refused, nothing is written. */
    hold_redisson(name, 30000);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_EBUSY);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 5000), REDLOCK_EBUSY);
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_try_lock_for(l, 300, 5000), REDLOCK_ETIMEOUT);
    took = rig_now_ms() - t0;
    ck_assert_msg(took >= 290 && took < 3000, "try_lock_for(300) took %lld ms",
                  (long long)took);
    assert_redisson_only(name);
    ck_assert_int_eq(redlock_is_locked(l, &locked), REDLOCK_OK);
    ck_assert_int_eq(locked, 1);
    ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);
    ck_assert_int_eq(redlock_hold_count(l, &count), REDLOCK_OK);
    ck_assert_int_eq(count, 0);
    /* Not ours: remaining_ttl is the holder's PTTL. */
    ck_assert_int_eq(redlock_remaining_ttl(l, &ttl), REDLOCK_OK);
    ck_assert_msg(ttl > 25000 && ttl <= 30000, "foreign ttl %lld", (long long)ttl);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENOT_OWNER);
    assert_redisson_only(name);
    ck_assert_str_eq(cli("DEL '%s'", name), "1");

    /* Held by us: Redisson's tryLock gets our PTTL and changes nothing;
     * its unlock (wrong owner) gets nil. */
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 20000), REDLOCK_OK);
    pttl = atoll(cli("EVAL \"%s\" 1 '%s' 30000 " REDISSON_FIELD, REDISSON_TRY_LOCK, name));
    ck_assert_msg(pttl > 15000 && pttl <= 20000, "Redisson's tryLock returned %lld", pttl);
    ck_assert_str_eq(cli("EVAL \"%s\" 2 '%s' '" CHANNEL_PREFIX "%s}' 0 30000 " REDISSON_FIELD,
                         REDISSON_UNLOCK, name, name),
                     "");
    assert_our_hold(cli("HGETALL '%s'", name), field, 1);
    /* What Redisson's isLocked (EXISTS) and getHoldCount (HGET of its own
     * field) see on a hold of ours: locked, not by this Java thread. */
    ck_assert_str_eq(cli("EXISTS '%s'", name), "1");
    ck_assert_str_eq(cli("HGET '%s' " REDISSON_FIELD, name), "");
    /* After our release, Redisson's tryLock gets it (nil = acquired). */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_str_eq(cli("EVAL \"%s\" 1 '%s' 30000 " REDISSON_FIELD, REDISSON_TRY_LOCK, name),
                     "");
    assert_redisson_only(name);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_EBUSY);
    /* Redisson's unlock releases it and we get it. */
    ck_assert_str_eq(cli("EVAL \"%s\" 2 '%s' '" CHANNEL_PREFIX "%s}' 0 30000 " REDISSON_FIELD,
                         REDISSON_UNLOCK, name, name),
                     "1");
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert(!key_exists(name));

    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* A waiter blocked in lock() is woken by a Redisson-style release message
 * alone: deleting the key silently does not wake it (no polling). */
START_TEST(test_redisson_release_wakes_waiter)
{
    redlock_client *c = client_default();
    char name[NAME_CAP];
    redlock_lock *l;
    pthread_t th;
    waiter w;
    int64_t t_pub, woke;

    rig_unique_name(name, sizeof(name), "lock", "interop-wake");
    l = new_lock(c, name);
    hold_redisson(name, 30000);
    waiter_start(&th, &w, l, -1, 0, 1);
    wait_numsub(name, 1);
    rig_sleep_ms(100);
    ck_assert_str_eq(cli("DEL '%s'", name), "1");
    rig_sleep_ms(400);
    ck_assert_msg(atomic_load(&w.done_us) == 0, "the waiter polled instead of waiting");
    t_pub = rig_now_us();
    ck_assert_str_eq(cli("PUBLISH '" CHANNEL_PREFIX "%s}' 0", name), "1");
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_OK);
    ck_assert_int_eq(w.unlock_rc, REDLOCK_OK);
    woke = (atomic_load(&w.done_us) - t_pub) / 1000;
    fprintf(stderr, "lock: waiter acquired %lld ms after a Redisson-style release message\n",
            (long long)woke);
    ck_assert_msg(woke < 1000, "waiter took %lld ms (holder's lease 30000 ms)", (long long)woke);
    ck_assert(!key_exists(name));
    wait_numsub(name, 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 3. The API: lock / lock(lease) / try_lock / try_lock(wait, lease) /
 * unlock / force_unlock / is_locked / is_held / hold_count / remaining_ttl. */

/* What another thread of the same client sees and may do. */
typedef struct probe_thread {
    redlock_lock *l;
    int held, count, try_rc, unlock_rc;
} probe_thread;

static void *probe_main(void *arg)
{
    probe_thread *p = arg;

    p->held = p->count = -1;
    if (redlock_is_held_by_current_thread(p->l, &p->held) != REDLOCK_OK ||
        redlock_hold_count(p->l, &p->count) != REDLOCK_OK)
        p->held = p->count = -2;
    p->try_rc = redlock_try_lock(p->l);
    p->unlock_rc = redlock_unlock(p->l);
    return NULL;
}

START_TEST(test_api_and_reentrancy)
{
    redlock_client *c = client_default(), *other = client_default();
    char name[NAME_CAP], field[FIELD_CAP];
    redlock_lock *l, *lo;
    probe_thread probe;
    pthread_t th;
    int locked = -1, held = -1, count = -1, i;
    int64_t ttl = 0;
    size_t released = 0;

    rig_unique_name(name, sizeof(name), "lock", "api");
    l = new_lock(c, name);
    lo = new_lock(other, name);
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));

    /* Free: nobody holds it. */
    ck_assert_int_eq(redlock_is_locked(l, &locked), REDLOCK_OK);
    ck_assert_int_eq(locked, 0);
    ck_assert_int_eq(redlock_hold_count(l, &count), REDLOCK_OK);
    ck_assert_int_eq(count, 0);
    ck_assert_int_eq(redlock_remaining_ttl(l, &ttl), REDLOCK_OK);
    ck_assert_int_eq(ttl, -2);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENOT_OWNER);

    /* Bad arguments get EINVAL, and change nothing. */
    ck_assert_int_eq(redlock_lock_acquire_lease(l, 0), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_lock_acquire_lease(l, -5), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_try_lock_for(l, -1, 1000), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_acquire_as(l, 0, 0, 1000), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_acquire_as(NULL, 1, 0, 1000), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_unlock(NULL), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_is_locked(l, NULL), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_hold_count(NULL, &count), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_remaining_ttl(l, NULL), REDLOCK_EINVAL);
    ck_assert(!key_exists(name));

    /* lock(): blocks, watchdog lease. Re-entered with every other call. */
    ck_assert_int_eq(redlock_lock_acquire(l), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 1);
    ck_assert_int_gt(key_pttl(name), 25000);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 2);
    ck_assert_int_eq(redlock_lock_acquire_lease(l, 15000), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 3);
    /* The latest acquire set the lease. */
    ck_assert_msg(key_pttl(name) <= 15000, "pttl %lld after lock(15000)", key_pttl(name));
    ck_assert_int_eq(redlock_hold_count(l, &count), REDLOCK_OK);
    ck_assert_int_eq(count, 3);
    ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    ck_assert_int_eq(redlock_is_locked(l, &locked), REDLOCK_OK);
    ck_assert_int_eq(locked, 1);
    ck_assert_int_eq(redlock_remaining_ttl(l, &ttl), REDLOCK_OK);
    ck_assert_msg(ttl > 10000 && ttl <= 15000, "remaining_ttl %lld", (long long)ttl);

    /* Another client, and another thread of this client, are refused and
     * cannot release it: the distinct not-owner error, nothing changed. */
    ck_assert_int_eq(redlock_try_lock(lo), REDLOCK_EBUSY);
    ck_assert_int_eq(redlock_try_lock_for(lo, 200, 1000), REDLOCK_ETIMEOUT);
    ck_assert_int_eq(redlock_unlock(lo), REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(redlock_is_held_by_current_thread(lo, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);
    memset(&probe, 0, sizeof(probe));
    probe.l = l;
    ck_assert_int_eq(pthread_create(&th, NULL, probe_main, &probe), 0);
    pthread_join(th, NULL);
    ck_assert_int_eq(probe.held, 0);
    ck_assert_int_eq(probe.count, 0);
    ck_assert_int_eq(probe.try_rc, REDLOCK_EBUSY);
    ck_assert_int_eq(probe.unlock_rc, REDLOCK_ENOT_OWNER);
    ck_assert_str_eq(redlock_err_name(probe.unlock_rc), "REDLOCK_ENOT_OWNER");
    ck_assert_int_eq(field_count(name, field), 3);
    ck_assert_int_eq(cli_int("HLEN '%s'", name), 2); /* the count and its generation */

    /* Released after as many unlocks as locks. */
    for (i = 2; i >= 0; i--) {
        ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
        ck_assert_int_eq(redlock_hold_count(l, &count), REDLOCK_OK);
        ck_assert_int_eq(count, i);
        ck_assert_int_eq(field_count(name, field), i ? i : -1);
        ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
        ck_assert_int_eq(held, i > 0);
    }
    ck_assert(!key_exists(name));
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(redlock_is_locked(l, &locked), REDLOCK_OK);
    ck_assert_int_eq(locked, 0);

    /* try_lock_for with a fixed lease; the other client's force_unlock
     * takes it away, and our unlock then reports the loss. */
    ck_assert_int_eq(redlock_try_lock_for(l, 1000, 8000), REDLOCK_OK);
    ck_assert_msg(key_pttl(name) <= 8000 && key_pttl(name) > 5000, "pttl %lld",
                  key_pttl(name));
    ck_assert_int_eq(redlock_force_unlock(lo, &released), REDLOCK_OK);
    ck_assert_uint_eq(released, 1);
    ck_assert(!key_exists(name));
    ck_assert_int_eq(redlock_try_lock(lo), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    ck_assert_int_eq(cli_int("HLEN '%s'", name), 2); /* lo's count and generation */
    ck_assert_int_eq(redlock_unlock(lo), REDLOCK_OK);
    ck_assert(!key_exists(name));

    redlock_lock_free(lo);
    redlock_lock_free(l);
    redlock_client_free(other);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 4. A fixed lease expires, is never renewed, and unlock then says lost. */

START_TEST(test_fixed_lease_expires)
{
    /* A short watchdog lease, so a wrongly renewed fixed lease would show. */
    redlock_client *c = client_with(0, 600);
    char name[NAME_CAP], field[FIELD_CAP];
    redlock_lock *l;
    long long pttl;
    int64_t t0, gone;
    int held = -1;

    rig_unique_name(name, sizeof(name), "lock", "fixed");
    l = new_lock(c, name);
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 1500), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 1);
    if (rig_now_ms() - t0 < 1000)
        rig_sleep_ms(1000 - (rig_now_ms() - t0));
    pttl = key_pttl(name);
    ck_assert_msg(pttl > 0 && pttl <= 550, "pttl %lld 1000 ms into a 1500 ms lease", pttl);
    gone = wait_gone(name, 3000);
    ck_assert_msg(gone >= 0, "the fixed lease was renewed past its expiry");
    ck_assert_msg(rig_now_ms() - t0 >= 1400, "gone after %lld ms", (long long)(rig_now_ms() - t0));
    ck_assert_uint_eq(rig_stats(c).renewals, 0);
    rig_sleep_ms(400);
    ck_assert(!key_exists(name));

    /* The key expired while we thought we held it: a distinct error. */
    ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    ck_assert_str_eq(redlock_err_name(REDLOCK_ELOST), "REDLOCK_ELOST");
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENOT_OWNER);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5. Explicit owner ids: work that moves between threads. */

#define OWNER_A 0x0123456789abULL
#define OWNER_B 42ULL

typedef struct owner_call {
    redlock_lock *l;
    uint64_t owner;
    int op;           /* 0 acquire, 1 unlock, 2 query */
    int rc, held, count;
} owner_call;

static void *owner_main(void *arg)
{
    owner_call *o = arg;

    if (o->op == 0) {
        o->rc = redlock_acquire_as(o->l, o->owner, 0, 20000);
    } else if (o->op == 1) {
        o->rc = redlock_unlock_as(o->l, o->owner);
    } else {
        o->rc = redlock_is_held_as(o->l, o->owner, &o->held);
        if (o->rc == REDLOCK_OK)
            o->rc = redlock_hold_count_as(o->l, o->owner, &o->count);
    }
    return NULL;
}

static owner_call on_thread(redlock_lock *l, uint64_t owner, int op)
{
    owner_call o;
    pthread_t th;

    memset(&o, 0, sizeof(o));
    o.l = l;
    o.owner = owner;
    o.op = op;
    ck_assert_int_eq(pthread_create(&th, NULL, owner_main, &o), 0);
    pthread_join(th, NULL);
    return o;
}

START_TEST(test_explicit_owner)
{
    redlock_client *c = client_default();
    char name[NAME_CAP], field[FIELD_CAP];
    redlock_lock *l;
    owner_call o;
    int held = -1, count = -1;
    int64_t ttl = -5;

    rig_unique_name(name, sizeof(name), "lock", "owner");
    l = new_lock(c, name);
    rig_field_of(c, OWNER_A, field, sizeof(field));

    /* Acquired twice on two different threads by one owner. */
    ck_assert_int_eq(on_thread(l, OWNER_A, 0).rc, REDLOCK_OK);
    ck_assert_int_eq(on_thread(l, OWNER_A, 0).rc, REDLOCK_OK);
    assert_our_hold(cli("HGETALL '%s'", name), field, 2);
    o = on_thread(l, OWNER_A, 2);
    ck_assert_int_eq(o.rc, REDLOCK_OK);
    ck_assert_int_eq(o.held, 1);
    ck_assert_int_eq(o.count, 2);
    ck_assert_int_eq(redlock_remaining_ttl_as(l, OWNER_A, &ttl), REDLOCK_OK);
    ck_assert_msg(ttl > 15000 && ttl <= 20000, "ttl %lld", (long long)ttl);

    /* Neither this thread's default owner nor another id owns it. */
    ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(on_thread(l, OWNER_B, 1).rc, REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(on_thread(l, OWNER_B, 0).rc, REDLOCK_EBUSY);
    ck_assert_int_eq(field_count(name, field), 2);

    /* Released on yet other threads, one hold each. */
    ck_assert_int_eq(on_thread(l, OWNER_A, 1).rc, REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 1);
    ck_assert_int_eq(redlock_hold_count_as(l, OWNER_A, &count), REDLOCK_OK);
    ck_assert_int_eq(count, 1);
    ck_assert_int_eq(redlock_unlock_as(l, OWNER_A), REDLOCK_OK);
    ck_assert(!key_exists(name));
    ck_assert_int_eq(on_thread(l, OWNER_A, 1).rc, REDLOCK_ENOT_OWNER);
    o = on_thread(l, OWNER_A, 2);
    ck_assert_int_eq(o.held, 0);
    ck_assert_int_eq(o.count, 0);

    /* Now the other owner can have it. */
    ck_assert_int_eq(on_thread(l, OWNER_B, 0).rc, REDLOCK_OK);
    rig_field_of(c, OWNER_B, field, sizeof(field));
    ck_assert_int_eq(field_count(name, field), 1);
    ck_assert_int_eq(redlock_unlock_as(l, OWNER_B), REDLOCK_OK);
    ck_assert(!key_exists(name));
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 6. Waiting without polling. */

#define WAKE_ROUNDS 5
#define WAKE_BOUND_MS 1000 /* the holder's lease is 30 000 ms */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

START_TEST(test_waiter_wakes_on_release)
{
    redlock_client *ca = client_default(), *cb = client_default();
    char name[NAME_CAP];
    redlock_lock *la, *lb;
    int64_t lat[WAKE_ROUNDS];
    size_t i;

    rig_unique_name(name, sizeof(name), "lock", "wake");
    la = new_lock(ca, name);
    lb = new_lock(cb, name);
    for (i = 0; i < WAKE_ROUNDS; i++) {
        pthread_t th;
        waiter w;
        int64_t t_rel;

        ck_assert_int_eq(redlock_try_lock_for(la, 0, 30000), REDLOCK_OK);
        /* Blocked in lock() on another client object. */
        waiter_start(&th, &w, lb, -1, 0, 1);
        wait_numsub(name, 1);
        rig_sleep_ms(50);
        ck_assert_int_eq(atomic_load(&w.done_us), 0);
        t_rel = rig_now_us();
        ck_assert_int_eq(redlock_unlock(la), REDLOCK_OK);
        pthread_join(th, NULL);
        ck_assert_int_eq(w.rc, REDLOCK_OK);
        ck_assert_int_eq(w.unlock_rc, REDLOCK_OK);
        lat[i] = (atomic_load(&w.done_us) - t_rel) / 1000;
        ck_assert_msg(lat[i] < WAKE_BOUND_MS, "round %zu: waiter took %lld ms", i,
                      (long long)lat[i]);
        /* The waiter's subscription is dropped once nobody waits. */
        wait_numsub(name, 0);
    }
    qsort(lat, WAKE_ROUNDS, sizeof(lat[0]), cmp_i64);
    fprintf(stderr, "lock: waiter acquired after release: median %lld ms, max %lld ms "
                    "(lease 30000 ms)\n",
            (long long)lat[WAKE_ROUNDS / 2], (long long)lat[WAKE_ROUNDS - 1]);
    ck_assert(!key_exists(name));
    redlock_lock_free(lb);
    redlock_lock_free(la);
    redlock_client_free(cb);
    redlock_client_free(ca);
}
END_TEST

/* The holder vanishes without a release message (its lease runs out): the
 * waiter retries when the PTTL it was told runs out. */
START_TEST(test_waiter_wakes_on_expiry)
{
    redlock_client *c = client_default();
    char name[NAME_CAP];
    redlock_lock *l;
    pthread_t th;
    waiter w;
    int64_t t0, took;
    redlock_stats s;

    rig_unique_name(name, sizeof(name), "lock", "expiry");
    l = new_lock(c, name);
    hold_redisson(name, 1500);
    t0 = rig_now_us();
    waiter_start(&th, &w, l, 10000, 5000, 1);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_OK);
    ck_assert_int_eq(w.unlock_rc, REDLOCK_OK);
    took = (atomic_load(&w.done_us) - t0) / 1000;
    fprintf(stderr, "lock: waiter acquired %lld ms after a 1500 ms foreign lease began\n",
            (long long)took);
    ck_assert_msg(took >= 1300, "acquired after %lld ms, before the holder expired",
                  (long long)took);
    ck_assert_msg(took < 3000, "waiter took %lld ms for a 1500 ms lease", (long long)took);
    /* It slept on the TTL instead of retrying every few ms. */
    s = rig_stats(c);
    ck_assert_msg(s.attempts <= 6, "%llu attempts while waiting 1.5 s",
                  (unsigned long long)s.attempts);
    ck_assert(!key_exists(name));
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(test_wait_times_out)
{
    redlock_client *c = client_default();
    char name[NAME_CAP];
    redlock_lock *l;
    int64_t t0, took;
    size_t i;
    static const int64_t waits[] = {250, 1200};

    rig_unique_name(name, sizeof(name), "lock", "timeout");
    l = new_lock(c, name);
    hold_redisson(name, 30000);
    for (i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
        t0 = rig_now_ms();
        ck_assert_int_eq(redlock_try_lock_for(l, waits[i], 0), REDLOCK_ETIMEOUT);
        took = rig_now_ms() - t0;
        fprintf(stderr, "lock: try_lock_for(%lld) timed out after %lld ms\n",
                (long long)waits[i], (long long)took);
        ck_assert_msg(took >= waits[i] - 5 && took < waits[i] + 1500,
                      "try_lock_for(%lld) returned after %lld ms", (long long)waits[i],
                      (long long)took);
        assert_redisson_only(name);
    }
    ck_assert_str_eq(redlock_err_name(REDLOCK_ETIMEOUT), "REDLOCK_ETIMEOUT");
    wait_numsub(name, 0);
    ck_assert_str_eq(cli("DEL '%s'", name), "1");
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* One subscriber connection per node serves every waiter of every lock,
 * with one subscription per channel however many wait on it. */
#define SUB_NAMES 6
#define SAME_NAME_WAITERS 4

START_TEST(test_one_subscriber_connection)
{
    redlock_client *c = client_default();
    char names[SUB_NAMES][NAME_CAP];
    redlock_lock *locks[SUB_NAMES + SAME_NAME_WAITERS - 1];
    waiter w[SUB_NAMES + SAME_NAME_WAITERS - 1];
    pthread_t th[SUB_NAMES + SAME_NAME_WAITERS - 1];
    size_t i, n = SUB_NAMES + SAME_NAME_WAITERS - 1;
    int before, after, ours;

    pubsub_clients(&before, &ours, SUB_NAMES, NULL);
    for (i = 0; i < SUB_NAMES; i++) {
        rig_unique_name(names[i], sizeof(names[i]), "lock", "sub");
        hold_redisson(names[i], 30000);
    }
    /* Every lock has one waiter; the first has SAME_NAME_WAITERS. */
    for (i = 0; i < n; i++) {
        locks[i] = new_lock(c, names[i < SUB_NAMES ? i : 0]);
        waiter_start(&th[i], &w[i], locks[i], 20000, 10000, 1);
    }
    for (i = 0; i < SUB_NAMES; i++)
        wait_numsub(names[i], 1);
    rig_sleep_ms(300);
    for (i = 0; i < n; i++)
        ck_assert_int_eq(atomic_load(&w[i].done_us), 0);
    pubsub_clients(&after, &ours, SUB_NAMES, NULL);
    fprintf(stderr, "lock: %zu waiters on %d locks: %d pubsub connection(s) before, %d "
                    "during\n",
            n, SUB_NAMES, before, after);
    ck_assert_int_eq(after, before + 1);
    ck_assert_int_eq(ours, 1);
    ck_assert_int_eq(numsub(names[0]), 1);

    /* Released the Redisson way: every waiter gets its lock in turn. */
    for (i = 0; i < SUB_NAMES; i++) {
        ck_assert_str_eq(cli("DEL '%s'", names[i]), "1");
        ck_assert_str_eq(cli("PUBLISH '" CHANNEL_PREFIX "%s}' 0", names[i]), "1");
    }
    for (i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(w[i].rc == REDLOCK_OK, "waiter %zu: %s", i, redlock_err_name(w[i].rc));
        ck_assert_int_eq(w[i].unlock_rc, REDLOCK_OK);
    }
    /* Unsubscribed once the last waiter of each channel left. */
    for (i = 0; i < SUB_NAMES; i++) {
        wait_numsub(names[i], 0);
        ck_assert(!key_exists(names[i]));
    }
    for (i = 0; i < n; i++)
        redlock_lock_free(locks[i]);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 7. The watchdog. */

#define WD_LEASE_MS 1000

START_TEST(test_watchdog_renews)
{
    redlock_client *c = client_with(0, WD_LEASE_MS);
    char name[NAME_CAP], field[FIELD_CAP];
    redlock_lock *l;
    lost_probe probe;
    redlock_stats s1, s2;
    long long pttl, min_pttl = WD_LEASE_MS, prev = WD_LEASE_MS;
    int64_t t0;
    int samples = 0, rises = 0;

    memset(&probe, 0, sizeof(probe));
    rig_unique_name(name, sizeof(name), "lock", "renew");
    l = new_lock(c, name);
    redlock_lock_set_on_lost(l, on_lost, &probe);
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    ck_assert_int_eq(redlock_lock_acquire(l), REDLOCK_OK);
    ck_assert_msg(key_pttl(name) <= WD_LEASE_MS, "pttl %lld", key_pttl(name));

    /* Five leases long, the key never goes away. */
    t0 = rig_now_ms();
    while (rig_now_ms() - t0 < 5 * WD_LEASE_MS) {
        ck_assert_int_eq(field_count(name, field), 1);
        pttl = key_pttl(name);
        ck_assert_msg(pttl > 0, "key gone %lld ms into the hold",
                      (long long)(rig_now_ms() - t0));
        if (pttl < min_pttl)
            min_pttl = pttl;
        if (pttl > prev)
            rises++;
        prev = pttl;
        samples++;
        rig_sleep_ms(50);
    }
    s1 = rig_stats(c);
    fprintf(stderr, "lock: watchdog held a %d ms lease for 5 s: %d samples, lowest pttl "
                    "%lld ms, %d renewals seen, %llu sent, %llu ticks, %llu batches\n",
            WD_LEASE_MS, samples, min_pttl, rises, (unsigned long long)s1.renewals,
            (unsigned long long)s1.watchdog_ticks, (unsigned long long)s1.watchdog_batches);
    ck_assert_int_ge(rises, 5);
    ck_assert_uint_ge(s1.renewals, 5);
    /* One lock, one node: one batch per tick. */
    ck_assert_uint_eq(s1.watchdog_batches, s1.watchdog_ticks);
    ck_assert_int_eq(atomic_load(&probe.calls), 0);

    /* Renewal stops with the release and nothing re-creates the key. */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert(!key_exists(name));
    s1 = rig_stats(c);
    rig_sleep_ms(2 * WD_LEASE_MS);
    s2 = rig_stats(c);
    ck_assert(!key_exists(name));
    ck_assert_uint_eq(s2.renewals, s1.renewals);
    ck_assert_uint_eq(s2.watchdog_ticks, s1.watchdog_ticks);
    ck_assert_int_eq(atomic_load(&probe.calls), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* Every watchdog-leased hold of a client is renewed in one pipelined batch
 * per node per tick, not one round trip per lock. */
#define BATCH_LOCKS 5

START_TEST(test_watchdog_one_batch_per_tick)
{
    redlock_client *c = client_with(0, 900);
    char names[BATCH_LOCKS][NAME_CAP];
    redlock_lock *locks[BATCH_LOCKS];
    redlock_stats s0, s1;
    uint64_t ticks, renewals;
    size_t i;

    for (i = 0; i < BATCH_LOCKS; i++) {
        rig_unique_name(names[i], sizeof(names[i]), "lock", "batch");
        locks[i] = new_lock(c, names[i]);
        ck_assert_int_eq(redlock_lock_acquire(locks[i]), REDLOCK_OK);
    }
    s0 = rig_stats(c);
    rig_sleep_ms(3000);
    s1 = rig_stats(c);
    ticks = s1.watchdog_ticks - s0.watchdog_ticks;
    renewals = s1.renewals - s0.renewals;
    fprintf(stderr, "lock: %d held locks, 3 s: %llu ticks, %llu batches, %llu renewals\n",
            BATCH_LOCKS, (unsigned long long)ticks,
            (unsigned long long)(s1.watchdog_batches - s0.watchdog_batches),
            (unsigned long long)renewals);
    ck_assert_uint_ge(ticks, 3);
    ck_assert_uint_eq(s1.watchdog_batches - s0.watchdog_batches, ticks);
    /* The holds share ticks (at least 4 of 5 per tick on average). */
    ck_assert_msg(renewals * 10 >= ticks * BATCH_LOCKS * 8,
                  "%llu renewals in %llu ticks for %d locks", (unsigned long long)renewals,
                  (unsigned long long)ticks, BATCH_LOCKS);
    for (i = 0; i < BATCH_LOCKS; i++) {
        ck_assert_int_gt(key_pttl(names[i]), 0);
        ck_assert_int_eq(redlock_unlock(locks[i]), REDLOCK_OK);
        ck_assert(!key_exists(names[i]));
        redlock_lock_free(locks[i]);
    }
    redlock_client_free(c);
}
END_TEST

#define LOSS_LEASE_MS 1200
#define LOSS_BOUND_MS 1500 /* one tick is LOSS_LEASE_MS / 3 */

/* The key vanishes (how = 0) or another owner takes it (how = 1) behind the
 * holder's back: on_lost runs within about a tick and unlock says lost. */
static void check_loss(int how)
{
    redlock_client *c = client_with(0, LOSS_LEASE_MS);
    char name[NAME_CAP];
    redlock_lock *l;
    lost_probe probe;
    int64_t t_del, detect;
    int held = -1;

    memset(&probe, 0, sizeof(probe));
    rig_unique_name(name, sizeof(name), "lock", how ? "stolen" : "deleted");
    l = new_lock(c, name);
    redlock_lock_set_on_lost(l, on_lost, &probe);
    ck_assert_int_eq(redlock_lock_acquire(l), REDLOCK_OK);
    wait_next_tick(c, 2 * LOSS_LEASE_MS);
    t_del = rig_now_ms();
    if (how)
        /* In one step, so the watchdog sees a foreign holder, never a gap. */
        ck_assert_str_eq(cli("EVAL \"redis.call('del', KEYS[1]); "
                             "redis.call('hset', KEYS[1], ARGV[1], 1); "
                             "return redis.call('pexpire', KEYS[1], 30000)\" 1 '%s' "
                             REDISSON_FIELD, name),
                         "1");
    else
        ck_assert_str_eq(cli("DEL '%s'", name), "1");
    ck_assert_int_eq(wait_lost(&probe, 3 * LOSS_LEASE_MS), 1);
    detect = atomic_load(&probe.at_ms) - t_del;
    fprintf(stderr, "lock: loss (%s) reported %lld ms after it happened (tick every %d ms)\n",
            how ? "other owner" : "key deleted", (long long)detect, LOSS_LEASE_MS / 3);
    ck_assert_msg(detect <= LOSS_BOUND_MS, "loss reported after %lld ms", (long long)detect);
    ck_assert_int_eq(atomic_load(&probe.reason), REDLOCK_ENOT_OWNER);
    ck_assert_uint_eq(atomic_load(&probe.owner), redlock_thread_owner());
    ck_assert_ptr_eq(atomic_load(&probe.lock), l);
    ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);

    /* Nothing is renewed or re-created afterwards; a new holder is left
     * alone. */
    rig_sleep_ms(LOSS_LEASE_MS);
    if (how) {
        assert_redisson_only(name);
        ck_assert_int_gt(key_pttl(name), 25000);
    } else {
        ck_assert(!key_exists(name));
    }
    ck_assert_int_eq(atomic_load(&probe.calls), 1);
    ck_assert_uint_eq(rig_stats(c).lost, 1);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENOT_OWNER);
    if (how) {
        assert_redisson_only(name);
        ck_assert_str_eq(cli("DEL '%s'", name), "1");
    }
    /* The handle is usable again. */
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 5000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert(!key_exists(name));
    redlock_lock_free(l);
    redlock_client_free(c);
}

START_TEST(test_watchdog_loss_deleted)
{
    check_loss(0);
}
END_TEST

START_TEST(test_watchdog_loss_other_owner)
{
    check_loss(1);
}
END_TEST

START_TEST(test_watchdog_max_hold)
{
    redlock_options o;
    redlock_client *c;
    char name[NAME_CAP];
    redlock_lock *l;
    lost_probe probe;
    int64_t t0, after;

    memset(&o, 0, sizeof(o));
    o.watchdog_lease_ms = 600;
    o.watchdog_max_hold_ms = 1500;
    o.node_timeout_ms = 200; /* the lease must exceed two node timeouts */
    c = client_opts(rig_plain_uri(0), &o);
    memset(&probe, 0, sizeof(probe));
    rig_unique_name(name, sizeof(name), "lock", "cap");
    l = new_lock(c, name);
    redlock_lock_set_on_lost(l, on_lost, &probe);
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_lock_acquire(l), REDLOCK_OK);
    ck_assert_int_eq(wait_lost(&probe, 5000), 1);
    after = atomic_load(&probe.at_ms) - t0;
    fprintf(stderr, "lock: 1500 ms hold cap reached after %lld ms\n", (long long)after);
    ck_assert_msg(after >= 1450 && after < 3500, "cap reported after %lld ms",
                  (long long)after);
    ck_assert_int_eq(atomic_load(&probe.reason), REDLOCK_ETIMEOUT);
    /* Released at once rather than left to expire. */
    ck_assert_msg(wait_gone(name, 1000) >= 0, "capped hold was not released");
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 8. 32 threads on two client objects, one name, a counter protected only
 * by the lock: no lost update, never two holders at once. */

#define STRESS_THREADS 32
#define STRESS_CYCLES 200

typedef struct stress_shared {
    atomic_long counter;      /* read and written separately, never RMW */
    atomic_int inside;
    atomic_int overlaps;
} stress_shared;

typedef struct stress_arg {
    redlock_lock *l;
    stress_shared *sh;
    int fixed_lease;
    int done, failed_rc, unlock_failed, unlock_rc;
} stress_arg;

static void *stress_main(void *arg)
{
    stress_arg *a = arg;
    int i;

    for (i = 0; i < STRESS_CYCLES; i++) {
        int rc = redlock_try_lock_for(a->l, 120000, a->fixed_lease ? 10000 : 0);
        long v;

        if (rc != REDLOCK_OK) {
            a->failed_rc = rc;
            break;
        }
        if (atomic_fetch_add(&a->sh->inside, 1) != 0)
            atomic_fetch_add(&a->sh->overlaps, 1);
        /* A non-atomic increment: only mutual exclusion keeps it exact. */
        v = atomic_load_explicit(&a->sh->counter, memory_order_relaxed);
        sched_yield();
        atomic_store_explicit(&a->sh->counter, v + 1, memory_order_relaxed);
        atomic_fetch_sub(&a->sh->inside, 1);
        rc = redlock_unlock(a->l);
        if (rc != REDLOCK_OK) {
            a->unlock_failed++;
            a->unlock_rc = rc;
        }
        a->done++;
    }
    return NULL;
}

START_TEST(test_contention_32_threads)
{
    /* A generous node timeout: this case is about mutual exclusion, and a
     * busy 2-core machine running 32 threads stalls replies for tens of ms
     * (an unanswered release is deferred, see test_release_retry_idempotent). */
    redlock_client *c[2] = {client_with(2000, 0), client_with(2000, 0)};
    stress_arg args[STRESS_THREADS];
    pthread_t th[STRESS_THREADS];
    stress_shared sh;
    char name[NAME_CAP];
    redlock_stats s0, s1;
    int64_t t0, took;
    size_t i;

    rig_unique_name(name, sizeof(name), "lock", "stress");
    atomic_init(&sh.counter, 0);
    atomic_init(&sh.inside, 0);
    atomic_init(&sh.overlaps, 0);
    t0 = rig_now_ms();
    for (i = 0; i < STRESS_THREADS; i++) {
        memset(&args[i], 0, sizeof(args[i]));
        args[i].l = new_lock(c[i % 2], name);
        args[i].sh = &sh;
        args[i].fixed_lease = (i / 2) % 2;
        ck_assert_int_eq(pthread_create(&th[i], NULL, stress_main, &args[i]), 0);
    }
    for (i = 0; i < STRESS_THREADS; i++)
        pthread_join(th[i], NULL);
    took = rig_now_ms() - t0;
    s0 = rig_stats(c[0]);
    s1 = rig_stats(c[1]);
    fprintf(stderr, "lock: %d threads x %d cycles in %lld ms; counter %ld; attempts %llu "
                    "(%llu busy)\n",
            STRESS_THREADS, STRESS_CYCLES, (long long)took, atomic_load(&sh.counter),
            (unsigned long long)(s0.attempts + s1.attempts),
            (unsigned long long)(s0.busy + s1.busy));
    for (i = 0; i < STRESS_THREADS; i++) {
        ck_assert_msg(args[i].failed_rc == 0, "thread %zu: acquire returned %s", i,
                      redlock_err_name(args[i].failed_rc));
        ck_assert_int_eq(args[i].done, STRESS_CYCLES);
        ck_assert_msg(args[i].unlock_failed == 0, "thread %zu: %d unlocks failed (%s)", i,
                      args[i].unlock_failed, redlock_err_name(args[i].unlock_rc));
    }
    ck_assert_int_eq(atomic_load(&sh.overlaps), 0);
    ck_assert_int_eq(atomic_load(&sh.counter), (long)STRESS_THREADS * STRESS_CYCLES);
    ck_assert_uint_eq(s0.acquired + s1.acquired, (uint64_t)STRESS_THREADS * STRESS_CYCLES);
    ck_assert(!key_exists(name));
    wait_numsub(name, 0);
    for (i = 0; i < STRESS_THREADS; i++)
        redlock_lock_free(args[i].l);
    redlock_client_free(c[1]);
    redlock_client_free(c[0]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 9. Idempotent release and acquire when a reply is lost: the node is
 * frozen (SIGSTOP) around the call, so the request times out on our side
 * but runs when the node resumes, and the retries replay it. */

#define FREEZE_NODE_TIMEOUT_MS 100
#define FREEZE_MS 400
#define OWNER_R 9001ULL

/* Waits for the background retries to settle: the field's count stays at
 * want for settle_ms in a row. Returns the last count seen. */
static long long settled_count(const char *name, const char *field, long long want,
                               int64_t settle_ms, int64_t timeout_ms)
{
    int64_t t0 = rig_now_ms(), stable_since = -1;
    long long n = -2;

    while (rig_now_ms() - t0 < timeout_ms) {
        n = field_count(name, field);
        if (n != want)
            stable_since = -1;
        else if (stable_since < 0)
            stable_since = rig_now_ms();
        else if (rig_now_ms() - stable_since >= settle_ms)
            return n;
        rig_sleep_ms(20);
    }
    return n;
}

START_TEST(test_release_retry_idempotent)
{
    redlock_client *c = client_with(FREEZE_NODE_TIMEOUT_MS, 0);
    char name[NAME_CAP], field[FIELD_CAP], pattern[NAME_CAP + 32];
    redlock_lock *l;
    int64_t t0, took;
    int rc;
    long long n;
    const char *latches;

    rig_unique_name(name, sizeof(name), "lock", "rel-retry");
    l = new_lock(c, name);
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 20000), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 20000), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 2);

    ck_assert_int_eq(rig_node("freeze", 0), 0);
    t0 = rig_now_ms();
    rc = redlock_unlock(l);
    took = rig_now_ms() - t0;
    rig_sleep_ms(FREEZE_MS);
    ck_assert_int_eq(rig_node("thaw", 0), 0);
    fprintf(stderr, "lock: unlock against a frozen node returned %s after %lld ms\n",
            redlock_err_name(rc), (long long)took);
    /* Never "not held": the release is only undelivered. */
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM || rc == REDLOCK_OK, "unlock: %s",
                  redlock_err_name(rc));
    ck_assert_msg(took < 1000, "unlock hung %lld ms on a frozen node", (long long)took);
    ck_assert_uint_ge(rig_stats(c).background_releases, 1);

    /* The release ran once although it was sent more than once. */
    n = settled_count(name, field, 1, 1000, 6000);
    ck_assert_msg(n == 1, "count %lld after one retried release of two holds", n);
    ck_assert_int_gt(key_pttl(name), 10000);
    /* Remembered in the hold itself (its sequence number after the
     * generation), not in a key per request: nothing else is written. */
    ck_assert_msg(strchr(cli("HGET '%s' '%s:gen'", name, field), ','),
                  "the release is not remembered in the hold");
    snprintf(pattern, sizeof(pattern), "redlock_latch:{%s}:*", name);
    latches = cli("KEYS '%s'", pattern);
    ck_assert_msg(!*latches, "keys written per request: %s", latches);

    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert(!key_exists(name));
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(test_acquire_retry_idempotent)
{
    redlock_client *c = client_with(FREEZE_NODE_TIMEOUT_MS, 0);
    char name[NAME_CAP], field[FIELD_CAP];
    redlock_lock *l;
    pthread_t th;
    waiter w;
    redlock_stats s;
    long long n;
    int count = -1;

    rig_unique_name(name, sizeof(name), "lock", "acq-retry");
    l = new_lock(c, name);
    rig_field_of(c, OWNER_R, field, sizeof(field));
    ck_assert_int_eq(redlock_acquire_as(l, OWNER_R, 0, 20000), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 1);

    /* Re-enter while the node is frozen: attempts time out and are retried
     * (and undone) until it thaws. */
    ck_assert_int_eq(rig_node("freeze", 0), 0);
    memset(&w, 0, sizeof(w));
    w.l = l;
    w.owner = OWNER_R;
    w.wait_ms = 10000;
    w.lease_ms = 20000;
    ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
    rig_sleep_ms(FREEZE_MS);
    ck_assert_int_eq(rig_node("thaw", 0), 0);
    pthread_join(th, NULL);
    ck_assert_msg(w.rc == REDLOCK_OK, "re-entry across the freeze: %s",
                  redlock_err_name(w.rc));
    s = rig_stats(c);
    fprintf(stderr, "lock: re-entry across a %d ms freeze took %llu attempts\n", FREEZE_MS,
            (unsigned long long)s.attempts - 1);
    ck_assert_uint_ge(s.attempts, 3);

    /* Exactly one more hold, however many attempts reached the node. */
    n = settled_count(name, field, 2, 1000, 6000);
    ck_assert_msg(n == 2, "count %lld after one re-entry", n);
    ck_assert_int_eq(redlock_hold_count_as(l, OWNER_R, &count), REDLOCK_OK);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq(redlock_unlock_as(l, OWNER_R), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 1);
    ck_assert_int_eq(redlock_unlock_as(l, OWNER_R), REDLOCK_OK);
    ck_assert(!key_exists(name));
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 10. SCRIPT FLUSH while locks are held: every script call reloads. */

START_TEST(test_script_flush_while_held)
{
    redlock_client *c = client_with(0, 900);
    char name[NAME_CAP], field[FIELD_CAP];
    redlock_lock *l;
    lost_probe probe;
    uint64_t renewals;

    memset(&probe, 0, sizeof(probe));
    rig_unique_name(name, sizeof(name), "lock", "flush");
    l = new_lock(c, name);
    redlock_lock_set_on_lost(l, on_lost, &probe);
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    ck_assert_int_eq(redlock_lock_acquire(l), REDLOCK_OK);

    /* Renewals after a flush. */
    ck_assert_str_eq(cli("SCRIPT FLUSH"), "OK");
    renewals = rig_stats(c).renewals;
    rig_sleep_ms(2000);
    ck_assert_uint_ge(rig_stats(c).renewals, renewals + 3);
    ck_assert_int_eq(atomic_load(&probe.calls), 0);
    ck_assert_int_eq(field_count(name, field), 1);
    ck_assert_int_gt(key_pttl(name), 0);

    /* Re-entry, inspection and release after a flush. */
    ck_assert_str_eq(cli("SCRIPT FLUSH"), "OK");
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 2);
    ck_assert_str_eq(cli("SCRIPT FLUSH"), "OK");
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_eq(field_count(name, field), 1);
    ck_assert_str_eq(cli("SCRIPT FLUSH"), "OK");
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert(!key_exists(name));
    ck_assert_int_eq(atomic_load(&probe.calls), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 11. ACL user/password and TLS nodes. */


START_TEST(test_acl_user)
{
    redlock_client *ca = client_opts(rig_acl_uri(rig_get("ACL_USER"), rig_get("ACL_PASS")), NULL);
    redlock_client *cb, *bad;
    redlock_options o;
    char name[NAME_CAP], field[FIELD_CAP], user[64];
    redlock_lock *la, *lb, *lbad;
    redlock_member_report rep;
    pthread_t th;
    waiter w;
    int64_t t_rel, woke;
    int total, ours, rc;

    memset(&o, 0, sizeof(o));
    o.username = rig_get("ACL_USER");
    o.password = rig_get("ACL_PASS");
    cb = client_opts(rig_plain_uri(0), &o);
    rig_unique_name(name, sizeof(name), "lock", "acl");
    la = new_lock(ca, name);
    lb = new_lock(cb, name);
    rig_field_of(ca, redlock_thread_owner(), field, sizeof(field));

    ck_assert_int_eq(redlock_try_lock_for(la, 0, 30000), REDLOCK_OK);
    assert_our_hold(cli("HGETALL '%s'", name), field, 1);
    /* The waiter's subscriber connection authenticates as the user too. */
    waiter_start(&th, &w, lb, 10000, 5000, 1);
    wait_numsub(name, 1);
    snprintf(user, sizeof(user), "user=%s ", rig_get("ACL_USER"));
    pubsub_clients(&total, &ours, 1, user);
    ck_assert_int_eq(ours, 1);
    rig_sleep_ms(50);
    t_rel = rig_now_us();
    ck_assert_int_eq(redlock_unlock(la), REDLOCK_OK);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_OK);
    ck_assert_int_eq(w.unlock_rc, REDLOCK_OK);
    woke = (atomic_load(&w.done_us) - t_rel) / 1000;
    ck_assert_msg(woke < WAKE_BOUND_MS, "ACL waiter took %lld ms", (long long)woke);
    ck_assert(!key_exists(name));

    /* A wrong password fails with the authentication error, not a hang. */
    bad = client_opts(rig_acl_uri(rig_get("ACL_USER"), "wrong-password"), NULL);
    lbad = new_lock(bad, name);
    rc = redlock_try_lock(lbad);
    ck_assert_msg(rc != REDLOCK_OK && rc != REDLOCK_EBUSY, "acquire with a wrong password: %s",
                  redlock_err_name(rc));
    ck_assert_int_eq(redlock_lock_report(lbad, 0, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_ERROR);
    ck_assert_msg(rep.err == REDLOCK_EAUTH, "member error %s: %s", redlock_err_name(rep.err),
                  rep.message);
    ck_assert(!key_exists(name));

    redlock_lock_free(lbad);
    redlock_lock_free(lb);
    redlock_lock_free(la);
    redlock_client_free(bad);
    redlock_client_free(cb);
    redlock_client_free(ca);
}
END_TEST

/* redis-cli against a TLS node of the fixture. */
static const char *tls_cli(const char *port_key, int client_cert, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static const char *tls_cli(const char *port_key, int client_cert, const char *fmt, ...)
{
    static char out[4096];
    char args[1024], cmd[3072];
    va_list ap;
    size_t n;
    FILE *p;

    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "redis-cli --tls --cacert '%s' %s%s%s%s%s -p %d %s",
             rig_get("TLS_CA"), client_cert ? "--cert '" : "",
             client_cert ? rig_get("TLS_CERT") : "", client_cert ? "' --key '" : "",
             client_cert ? rig_get("TLS_KEY") : "", client_cert ? "'" : "",
             rig_get_int(port_key), args);
    out[0] = '\0';
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    return out;
}

static void check_tls_node(const char *port_key, int client_cert)
{
    redlock_options o;
    redlock_client *ca, *cb;
    char uri[64], name[NAME_CAP], field[FIELD_CAP];
    redlock_lock *la, *lb;
    redlock_member_state st;
    pthread_t th;
    waiter w;
    int64_t t_rel, woke;
    long long pttl;

    memset(&o, 0, sizeof(o));
    o.tls.ca_file = rig_get("TLS_CA");
    if (client_cert) {
        o.tls.cert_file = rig_get("TLS_CERT");
        o.tls.key_file = rig_get("TLS_KEY");
    }
    snprintf(uri, sizeof(uri), "rediss://127.0.0.1:%d", rig_get_int(port_key));
    ca = client_opts(uri, &o);
    cb = client_opts(uri, &o);
    rig_unique_name(name, sizeof(name), "lock", client_cert ? "mtls" : "tls");
    la = new_lock(ca, name);
    lb = new_lock(cb, name);
    rig_field_of(ca, redlock_thread_owner(), field, sizeof(field));

    ck_assert_int_eq(redlock_try_lock_for(la, 0, 20000), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock(la), REDLOCK_OK);
    assert_our_hold(tls_cli(port_key, client_cert, "HGETALL '%s'", name), field, 2);
    pttl = atoll(tls_cli(port_key, client_cert, "PTTL '%s'", name));
    ck_assert_msg(pttl > 25000 && pttl <= 30000, "pttl %lld", pttl);
    ck_assert_int_eq(redlock_lock_inspect(la, 0, &st), REDLOCK_OK);
    ck_assert_int_eq(st.reachable, 1);
    ck_assert_str_eq(st.holder, field);
    ck_assert_int_eq(st.hold_count, 2);
    ck_assert_int_eq(redlock_unlock(la), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock(lb), REDLOCK_EBUSY);

    /* A waiter on the other client, woken over its TLS subscriber. */
    waiter_start(&th, &w, lb, 10000, 5000, 1);
    t_rel = rig_now_us();
    for (;;) {
        const char *out = tls_cli(port_key, client_cert,
                                  "PUBSUB NUMSUB '" CHANNEL_PREFIX "%s}'", name);
        const char *nl = strrchr(out, '\n');

        if (nl && atoll(nl + 1) == 1)
            break;
        ck_assert_msg(atomic_load(&w.done_us) == 0, "waiter returned early: %s",
                      redlock_err_name(w.rc));
        ck_assert_msg(rig_now_us() - t_rel < 5000000, "no subscriber on the TLS node");
        rig_sleep_ms(20);
    }
    rig_sleep_ms(50);
    t_rel = rig_now_us();
    ck_assert_int_eq(redlock_unlock(la), REDLOCK_OK);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_OK);
    ck_assert_int_eq(w.unlock_rc, REDLOCK_OK);
    woke = (atomic_load(&w.done_us) - t_rel) / 1000;
    fprintf(stderr, "lock: %s waiter acquired %lld ms after the release\n",
            client_cert ? "mutual-TLS" : "TLS", (long long)woke);
    ck_assert_msg(woke < WAKE_BOUND_MS, "TLS waiter took %lld ms", (long long)woke);
    ck_assert_str_eq(tls_cli(port_key, client_cert, "EXISTS '%s'", name), "0");
    redlock_lock_free(lb);
    redlock_lock_free(la);
    redlock_client_free(cb);
    redlock_client_free(ca);
}

START_TEST(test_tls_node)
{
    check_tls_node("TLS_PORT", 0);
}
END_TEST

START_TEST(test_mtls_node)
{
    check_tls_node("MTLS_PORT", 1);
}
END_TEST

/* ------------------------------------------------------------------------ */

/* One TCase per case: its unchecked fixture heals node 0 around it. */
#define ADD_CASE(s, test, timeout)                                             \
    do {                                                                       \
        TCase *tc_ = tcase_create(#test);                                      \
        tcase_add_unchecked_fixture(tc_, heal, heal);                          \
        tcase_set_timeout(tc_, (timeout));                                     \
        tcase_add_test(tc_, test);                                             \
        suite_add_tcase((s), tc_);                                             \
    } while (0)

int main(void)
{
    Suite *s = suite_create("lock");
    SRunner *sr;
    int failed;

    ADD_CASE(s, test_redisson_layout, 30);
    ADD_CASE(s, test_redisson_excludes_and_is_excluded, 30);
    ADD_CASE(s, test_redisson_release_wakes_waiter, 30);
    ADD_CASE(s, test_api_and_reentrancy, 30);
    ADD_CASE(s, test_fixed_lease_expires, 30);
    ADD_CASE(s, test_explicit_owner, 30);
    ADD_CASE(s, test_waiter_wakes_on_release, 60);
    ADD_CASE(s, test_waiter_wakes_on_expiry, 30);
    ADD_CASE(s, test_wait_times_out, 30);
    ADD_CASE(s, test_one_subscriber_connection, 60);
    ADD_CASE(s, test_watchdog_renews, 30);
    ADD_CASE(s, test_watchdog_one_batch_per_tick, 30);
    ADD_CASE(s, test_watchdog_loss_deleted, 30);
    ADD_CASE(s, test_watchdog_loss_other_owner, 30);
    ADD_CASE(s, test_watchdog_max_hold, 30);
    ADD_CASE(s, test_contention_32_threads, 240);
    ADD_CASE(s, test_release_retry_idempotent, 30);
    ADD_CASE(s, test_acquire_retry_idempotent, 30);
    ADD_CASE(s, test_script_flush_while_held, 30);
    ADD_CASE(s, test_acl_user, 30);
    ADD_CASE(s, test_tls_node, 30);
    ADD_CASE(s, test_mtls_node, 30);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
