/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Redisson's RFairLock scripts against our fair lock waiters and back
 * (N = 1), on the fixture's plain redis-server processes. The scripts are
 * copied verbatim from RedissonFairLock.java (tryLockInnerAsync, both its
 * EVAL_LONG and EVAL_NULL_BOOLEAN variants, and unlockInnerAsync), with
 * KEYS and ARGV as Redisson passes them; Redisson's currentTime is the
 * node's TIME in ms, so its timeouts and ours are on one clock. The rest
 * of the fair lock suite is test_fair.c.
 *
 * The case is its own TCase whose unchecked fixture thaws and restarts
 * nodes, so a failed case never leaves a frozen node behind.
 */
#include "redlock/redlock.h"
#include "rig_env.h"
#include "rw_support.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tryLockInnerAsync, command == EVAL_LONG (a tryLock that waits). */
static const char REDISSON_FAIR_LOCK_WAIT[] =
    "while true do "
        "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
        "if firstThreadId2 == false then "
            "break;"
        "end;"

        "local timeout = redis.call('zscore', KEYS[3], firstThreadId2);"
        "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "
            "redis.call('zrem', KEYS[3], firstThreadId2);"
            "redis.call('lpop', KEYS[2]);"
        "else "
            "break;"
        "end;"
    "end;"

    "if (redis.call('exists', KEYS[1]) == 0) "
        "and ((redis.call('exists', KEYS[2]) == 0) "
            "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then "

        "redis.call('lpop', KEYS[2]);"
        "redis.call('zrem', KEYS[3], ARGV[2]);"

        "local keys = redis.call('zrange', KEYS[3], 0, -1);"
        "for i = 1, #keys, 1 do "
            "redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);"
        "end;"

        "redis.call('hset', KEYS[1], ARGV[2], 1);"
        "redis.call('pexpire', KEYS[1], ARGV[1]);"
        "return nil;"
    "end;"

    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
        "redis.call('hincrby', KEYS[1], ARGV[2],1);"
        "redis.call('pexpire', KEYS[1], ARGV[1]);"
        "return nil;"
    "end;"

    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]);"
    "if timeout ~= false then "
            "local ttl = redis.call('pttl', KEYS[1]);"
            "return math.max(0, ttl); "
    "end;"

    "local lastThreadId = redis.call('lindex', KEYS[2], -1);"
    "local ttl;"
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then "
        "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);"
    "else "
        "ttl = redis.call('pttl', KEYS[1]);"
    "end;"
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);"
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then "
        "redis.call('rpush', KEYS[2], ARGV[2]);"
    "end;"
    "return ttl;";

/* tryLockInnerAsync, command == EVAL_NULL_BOOLEAN (a tryLock that does not
 * wait). */
static const char REDISSON_FAIR_LOCK_NOWAIT[] =
    "while true do "
        "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
        "if firstThreadId2 == false then "
            "break;"
        "end;"
        "local timeout = redis.call('zscore', KEYS[3], firstThreadId2);"
        "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[3]) then "
            "redis.call('zrem', KEYS[3], firstThreadId2);"
            "redis.call('lpop', KEYS[2]);"
        "else "
            "break;"
        "end;"
    "end;"

    "if (redis.call('exists', KEYS[1]) == 0) "
        "and ((redis.call('exists', KEYS[2]) == 0) "
            "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then "
        "redis.call('lpop', KEYS[2]);"
        "redis.call('zrem', KEYS[3], ARGV[2]);"

        "local keys = redis.call('zrange', KEYS[3], 0, -1);"
        "for i = 1, #keys, 1 do "
            "redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), keys[i]);"
        "end;"

        "redis.call('hset', KEYS[1], ARGV[2], 1);"
        "redis.call('pexpire', KEYS[1], ARGV[1]);"
        "return nil;"
    "end;"
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
        "redis.call('hincrby', KEYS[1], ARGV[2], 1);"
        "redis.call('pexpire', KEYS[1], ARGV[1]);"
        "return nil;"
    "end;"
    "return 1;";

/* unlockInnerAsync. */
static const char REDISSON_FAIR_UNLOCK[] =
    "local val = redis.call('get', KEYS[5]); "
    "if val ~= false then "
        "return tonumber(val);"
    "end; "

    "while true do "
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
    "if firstThreadId2 == false then "
        "break;"
    "end; "
    "local timeout = redis.call('zscore', KEYS[3], firstThreadId2);"
    "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "
        "redis.call('zrem', KEYS[3], firstThreadId2); "
        "redis.call('lpop', KEYS[2]); "
    "else "
        "break;"
    "end; "
  "end;"

  "if (redis.call('exists', KEYS[1]) == 0) then "
        "local nextThreadId = redis.call('lindex', KEYS[2], 0); "
        "if nextThreadId ~= false then "
            "redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); "
        "end; "
        "redis.call('set', KEYS[5], 1, 'px', ARGV[6]); "
        "return 1; "
    "end;"
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then "
        "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
        "redis.call('pexpire', KEYS[1], ARGV[2]); "
        "redis.call('set', KEYS[5], 0, 'px', ARGV[6]); "
        "return 0; "
    "end; "

    "redis.call('del', KEYS[1]); "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[6]); "
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then "
        "redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); "
    "end; "
    "return 1; ";

/* A Redisson client's thread: getLockName(threadId). */
#define RS_FIELD "rs-uuid:1"
/* Redisson's wait for this thread (tryLock's waitTime, in ms), and its
 * lease (internalLockLeaseTime). */
#define RS_WAIT "5000"
#define RS_LEASE "30000"
/* Our waiters' place: longer than Redisson's wait, which its grant takes
 * off every other waiter's timeout, and renewed only every 6.7 s, so a
 * waiter granted within a second was woken by a message. */
#define OUR_PLACE_MS 20000
#define HOLDER 1
#define WOKEN_WITHIN_MS 1000

typedef struct rs_node {
    redisContext *ctx;
    char name[64], queue[96], timeouts[96], tickets[96], channel[96];
    int unlocks; /* each unlock has a latch of its own */
} rs_node;

static redisReply *cmd(rs_node *rs, const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = redisvCommand(rs->ctx, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "%s", rs->ctx->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s", r->str);
    return r;
}

/* Redisson's currentTime: the node's clock in ms. */
static void node_time_ms(rs_node *rs, char out[24])
{
    redisReply *r = cmd(rs, "TIME");

    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    snprintf(out, 24, "%lld", atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000);
    freeReplyObject(r);
}

/* Redisson's tryLock for RS_FIELD. nil: granted (returns 1); an integer:
 * refused (returns 0). */
static int rs_try_lock(rs_node *rs, int wait)
{
    char now[24];
    redisReply *r;
    int granted;

    node_time_ms(rs, now);
    if (wait)
        r = cmd(rs, "EVAL %s 3 %s %s %s %s %s %s %s", REDISSON_FAIR_LOCK_WAIT, rs->name,
                rs->queue, rs->timeouts, RS_LEASE, RS_FIELD, RS_WAIT, now);
    else
        r = cmd(rs, "EVAL %s 3 %s %s %s %s %s %s %s", REDISSON_FAIR_LOCK_NOWAIT, rs->name,
                rs->queue, rs->timeouts, RS_LEASE, RS_FIELD, now, RS_WAIT);
    granted = r->type == REDIS_REPLY_NIL;
    ck_assert_msg(granted || r->type == REDIS_REPLY_INTEGER, "reply type %d", r->type);
    freeReplyObject(r);
    return granted;
}

/* Redisson's unlock for RS_FIELD: 1 released (or the lock was gone), 0
 * still held, -1 not held (nil). */
static long long rs_unlock(rs_node *rs)
{
    char now[24], latch[128];
    redisReply *r;
    long long v;

    node_time_ms(rs, now);
    snprintf(latch, sizeof(latch), "redisson_unlock_latch:{%s}:req%d", rs->name, ++rs->unlocks);
    r = cmd(rs, "EVAL %s 5 %s %s %s %s %s %s %s %s %s %s %s", REDISSON_FAIR_UNLOCK, rs->name,
            rs->queue, rs->timeouts, rs->channel, latch, "0", RS_LEASE, RS_FIELD, now,
            "publish", "10000");
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER || r->type == REDIS_REPLY_NIL, "type %d",
                  r->type);
    v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

static void expect_str(rs_node *rs, const char *want, const char *fmt, const char *a,
                       const char *b)
{
    redisReply *r = cmd(rs, fmt, a, b);

    ck_assert_msg(r->type == REDIS_REPLY_STRING, "%s %s: reply type %d", fmt, a, r->type);
    ck_assert_str_eq(r->str, want);
    freeReplyObject(r);
}

static long long int_of(rs_node *rs, const char *fmt, const char *a, const char *b)
{
    redisReply *r = cmd(rs, fmt, a, b);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
                  : r->type == REDIS_REPLY_STRING ? atoll(r->str)
                                                  : -1;

    freeReplyObject(r);
    return v;
}

/* A connection subscribed to one waiter's channel. */
static redisContext *listen_to(const char *channel)
{
    redisContext *s = node_conn(0);
    redisReply *r = redisCommand(s, "SUBSCRIBE %s", channel);

    ck_assert_msg(r && r->type == REDIS_REPLY_ARRAY, "subscribe: %s", s->errstr);
    freeReplyObject(r);
    return s;
}

/* Whether a message came on s within timeout_ms (s is not usable after a
 * timeout). */
static int message_within(redisContext *s, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisReply *r = NULL;
    int ok;

    redisSetTimeout(s, tv);
    if (redisGetReply(s, (void **)&r) != REDIS_OK || !r)
        return 0;
    ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
         r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "message") == 0;
    freeReplyObject(r);
    return ok;
}

static redlock_lock *fair_handle(redlock_client *c, const char *name, int place_ms)
{
    redlock_lock_options lo;
    redlock_lock *l = NULL;

    memset(&lo, 0, sizeof(lo));
    lo.kind = REDLOCK_LOCK_FAIR;
    lo.fair_wait_lease_ms = place_ms;
    ck_assert_msg(redlock_lock_new(c, name, &lo, &l) == REDLOCK_OK, "%s", redlock_last_error());
    return l;
}

static void rs_open(rs_node *rs, const char *name)
{
    memset(rs, 0, sizeof(*rs));
    rs->ctx = node_conn(0);
    snprintf(rs->name, sizeof(rs->name), "%s", name);
    snprintf(rs->queue, sizeof(rs->queue), "redisson_lock_queue:{%s}", name);
    snprintf(rs->timeouts, sizeof(rs->timeouts), "redisson_lock_timeout:{%s}", name);
    snprintf(rs->tickets, sizeof(rs->tickets), "redlock_fair:{%s}", name);
    snprintf(rs->channel, sizeof(rs->channel), "redisson_lock__channel:{%s}", name);
}

/* Polls until node 0's queue list has len entries (bounded). */
static void wait_len(rs_node *rs, long long len)
{
    int i;

    for (i = 0; i < 2500 && int_of(rs, "LLEN %s", rs->queue, NULL) != len; i++)
        rig_sleep_ms(2);
    ck_assert_int_eq(int_of(rs, "LLEN %s", rs->queue, NULL), len);
}

static void assert_empty(rs_node *rs)
{
    redisReply *r = cmd(rs, "EXISTS %s %s %s %s", rs->name, rs->queue, rs->timeouts,
                        rs->tickets);

    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
}

/* (a) A Redisson waiter queued first is served first; Redisson's unlock
 * wakes our waiter behind it. */
static void redisson_first(redlock_client *c, const char *name)
{
    char wf[FIELD_CAP], chan[160], now[24];
    redlock_lock *holder = fair_handle(c, name, OUR_PLACE_MS);
    redlock_lock *w = fair_handle(c, name, OUR_PLACE_MS);
    redisContext *sub;
    long long before, after;
    int i;
    int64_t unlocked_us, took_ms;
    bg_acquire b;
    rs_node rs;

    rs_open(&rs, name);
    rig_field_of(c, W1, wf, sizeof(wf));
    snprintf(chan, sizeof(chan), "%s:%s", rs.channel, RS_FIELD);
    sub = listen_to(chan);
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    ck_assert(!rs_try_lock(&rs, 1)); /* queued: the head, without a ticket */
    bg_start(&b, w, W1, 15000);
    wait_len(&rs, 2);
    expect_str(&rs, RS_FIELD, "LINDEX %s %s", rs.queue, "0");
    expect_str(&rs, wf, "LINDEX %s %s", rs.queue, "1");

    /* Our release wakes the Redisson waiter, the first. */
    unlock_ok(holder, HOLDER);
    ck_assert_msg(message_within(sub, WOKEN_WITHIN_MS), "no release message for Redisson's "
                  "waiter");
    /* Our waiter, woken by hand, tries and is refused: its attempt renews
     * its place, but the free lock is not granted past the head. */
    before = int_of(&rs, "ZSCORE %s %s", rs.timeouts, wf);
    rig_sleep_ms(5);
    freeReplyObject(cmd(&rs, "PUBLISH %s:%s 0", rs.channel, wf));
    for (after = before, i = 0; i < 1000 && after == before && !atomic_load(&b.finished); i++) {
        rig_sleep_ms(1);
        after = int_of(&rs, "ZSCORE %s %s", rs.timeouts, wf);
    }
    rig_sleep_ms(200);
    ck_assert_msg(!atomic_load(&b.finished), "our waiter was granted past Redisson's, the head");
    ck_assert_msg(after > before, "our waiter made no attempt (%lld, %lld)", before, after);
    ck_assert_int_eq(int_of(&rs, "EXISTS %s", rs.name, NULL), 0);

    /* Redisson's thread takes it; ours goes on waiting. */
    ck_assert(rs_try_lock(&rs, 1));
    expect_str(&rs, "1", "HGET %s %s", rs.name, RS_FIELD);
    node_time_ms(&rs, now);
    ck_assert_msg(int_of(&rs, "ZSCORE %s %s", rs.timeouts, wf) > atoll(now),
                  "our waiter's place lapsed at Redisson's grant");
    rig_sleep_ms(300);
    ck_assert_msg(!atomic_load(&b.finished), "our waiter ended its wait while Redisson's held");

    /* Redisson's unlock publishes to our waiter, now first. */
    unlocked_us = rig_now_us();
    ck_assert_int_eq(rs_unlock(&rs), 1);
    pthread_join(b.th, NULL);
    took_ms = (b.done_us - unlocked_us) / 1000;
    fprintf(stderr, "redisson first: our waiter granted %lld ms after Redisson's unlock\n",
            (long long)took_ms);
    ck_assert_msg(b.rc == REDLOCK_OK, "our waiter: %s", redlock_err_name(b.rc));
    ck_assert_msg(took_ms < WOKEN_WITHIN_MS, "granted %lld ms after Redisson's unlock",
                  (long long)took_ms);
    unlock_ok(w, W1);
    assert_empty(&rs);
    redisFree(sub);
    redisFree(rs.ctx);
    redlock_lock_free(holder);
    redlock_lock_free(w);
}

/* (b) Our waiter queued first: Redisson's tryLock is refused while ours
 * is first, even with the lock free; ours is woken by Redisson's unlock
 * and its release wakes Redisson's waiter. */
static void ours_first(redlock_client *c, const char *name)
{
    char wf[FIELD_CAP], chan[160];
    redlock_lock *holder = fair_handle(c, name, OUR_PLACE_MS);
    redlock_lock *w = fair_handle(c, name, OUR_PLACE_MS);
    redisContext *sub;
    int64_t woken_us, took_ms;
    bg_acquire b;
    rs_node rs;

    rs_open(&rs, name);
    rig_field_of(c, W1, wf, sizeof(wf));
    snprintf(chan, sizeof(chan), "%s:%s", rs.channel, RS_FIELD);
    sub = listen_to(chan);
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b, w, W1, 15000);
    wait_len(&rs, 1);
    ck_assert(!rs_try_lock(&rs, 1));
    expect_str(&rs, wf, "LINDEX %s %s", rs.queue, "0");
    expect_str(&rs, RS_FIELD, "LINDEX %s %s", rs.queue, "1");

    /* The hold vanishes silently: the lock is free, ours is first and
     * does not know yet. Redisson's tryLock (both kinds) stays out. */
    ck_assert_int_eq(int_of(&rs, "DEL %s", rs.name, NULL), 1);
    ck_assert(!rs_try_lock(&rs, 1));
    ck_assert(!rs_try_lock(&rs, 0));
    ck_assert_int_eq(int_of(&rs, "EXISTS %s", rs.name, NULL), 0);
    ck_assert_msg(!atomic_load(&b.finished), "our waiter woke without a message");

    /* Redisson's unlock of a free lock publishes to the head: ours. */
    woken_us = rig_now_us();
    ck_assert_int_eq(rs_unlock(&rs), 1);
    pthread_join(b.th, NULL);
    took_ms = (b.done_us - woken_us) / 1000;
    fprintf(stderr, "ours first: granted %lld ms after Redisson's unlock published\n",
            (long long)took_ms);
    ck_assert_msg(b.rc == REDLOCK_OK, "our waiter: %s", redlock_err_name(b.rc));
    ck_assert_msg(took_ms < WOKEN_WITHIN_MS, "granted %lld ms after the message",
                  (long long)took_ms);
    ck_assert(!rs_try_lock(&rs, 1));
    /* Our release wakes Redisson's waiter, which then gets it. */
    unlock_ok(w, W1);
    ck_assert_msg(message_within(sub, WOKEN_WITHIN_MS), "no release message for Redisson's "
                  "waiter");
    ck_assert(rs_try_lock(&rs, 1));
    ck_assert_int_eq(int_of(&rs, "LLEN %s", rs.queue, NULL), 0);
    ck_assert_int_eq(rs_unlock(&rs), 1);
    assert_empty(&rs);
    redisFree(sub);
    redisFree(rs.ctx);
    redlock_lock_free(holder);
    redlock_lock_free(w);
}

START_TEST(test_redisson_fair_interop)
{
    redlock_client *c = client_over(1);
    char name[64];

    rig_unique_name(name, sizeof(name), "fair", "rsfirst");
    redisson_first(c, name);
    rig_unique_name(name, sizeof(name), "fair", "oursfirst");
    ours_first(c, name);
    redlock_client_free(c);
}
END_TEST


static int rs2_try_lock(rs_node *rs, const char *field)
{
    char now[24];
    redisReply *r;
    int granted;

    node_time_ms(rs, now);
    r = cmd(rs, "EVAL %s 3 %s %s %s %s %s %s %s", REDISSON_FAIR_LOCK_WAIT, rs->name,
            rs->queue, rs->timeouts, RS_LEASE, field, RS_WAIT, now);
    granted = r->type == REDIS_REPLY_NIL;
    freeReplyObject(r);
    return granted;
}

/* A Redisson grant takes its wait off every place in Redisson's timeout set
 * (ZINCRBY). Our waiter's place must survive that: R2, queued after it,
 * must not be served first once R's unlock prunes what looks lapsed. */
START_TEST(test_redisson_grant_keeps_our_place)
{
    redlock_client *c = client_over(1);
    char name[64], wf[FIELD_CAP];
    redlock_lock *holder, *w;
    bg_acquire b;
    rs_node rs;
    int r2_granted;

    rig_unique_name(name, sizeof(name), "fair", "repro");
    rs_open(&rs, name);
    holder = fair_handle(c, name, 0);
    w = fair_handle(c, name, 0); /* default place: 3000 ms */
    rig_field_of(c, W1, wf, sizeof(wf));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    ck_assert(!rs_try_lock(&rs, 1));              /* R (rs-uuid:1) queues first */
    bg_start(&b, w, W1, 15000);                    /* then ours, W */
    wait_len(&rs, 2);
    ck_assert(!rs2_try_lock(&rs, "rs-uuid:2"));   /* then R2 */
    wait_len(&rs, 3);
    unlock_ok(holder, HOLDER);                     /* wakes R */
    rig_sleep_ms(100);
    ck_assert(rs_try_lock(&rs, 1));               /* R granted: its wait off W's and R2's */
    fprintf(stderr, "after R's grant: W's place %lld, R2's %lld (ms, node clock)\n",
            int_of(&rs, "ZSCORE %s %s", rs.timeouts, wf),
            int_of(&rs, "ZSCORE %s %s", rs.timeouts, "rs-uuid:2"));
    ck_assert_int_eq(rs_unlock(&rs), 1);          /* drops W as stale, wakes R2 */
    r2_granted = rs2_try_lock(&rs, "rs-uuid:2");
    fprintf(stderr, "R2 granted right after R's unlock: %d; W still waiting: %d\n", r2_granted,
            !atomic_load(&b.finished));
    ck_assert_msg(!r2_granted, "R2, queued after our waiter, was served first");
    /* Our waiter is first now: R's unlock woke it. */
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_OK, "our waiter: %s", redlock_err_name(b.rc));
    unlock_ok(w, W1);
    redisFree(rs.ctx);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fair_redisson");

    RIG_ADD_CASE(s, test_redisson_fair_interop, 60);
    RIG_ADD_CASE(s, test_redisson_grant_keeps_our_place, 60);
    return run_suite(s);
}
