/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Redisson's RPermitExpirableSemaphore scripts against our permits (N = 1),
 * on the fixture's plain redis-server processes. Copied verbatim from
 * RedissonPermitExpirableSemaphore.java: tryAcquireAsync(List<String> ids,
 * long timeoutDate), tryReleaseAsync(String permitId) and
 * availablePermitsAsync(); KEYS and ARGV as Redisson passes them, permit
 * ids as 16 raw bytes. The rest of the semaphore suite is
 * test_semaphore.c.
 *
 * The case is its own TCase whose unchecked fixture thaws and restarts
 * nodes, so a failed case never leaves a frozen node behind.
 */
#include "redlock/redlock.h"
#include "rig_env.h"
#include "rw_support.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char REDISSON_SEM_ACQUIRE[] =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); "
    "if #expiredIds > 0 then "
        "redis.call('zrem', KEYS[2], unpack(expiredIds)); "
        "local value = redis.call('incrby', KEYS[1], #expiredIds); "
        "if tonumber(value) > 0 then "
            "redis.call(ARGV[5], KEYS[3], value); "
        "end;"
    "end; "
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
        "redis.call('decrby', KEYS[1], ARGV[1]); "
        "for i = 6, #ARGV, 1 do "
            "redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); "
        "end; "
        "local ttl = redis.call('pttl', KEYS[1]); "
        "if ttl > 0 then "
            "redis.call('pexpire', KEYS[2], ttl); "
        "end; "
        "return 'OK'; "
    "end; "
    "local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); "
    "if v[1] ~= nil and v[2] ~= ARGV[4] then "
        "return ':' .. tostring(v[2]); "
    "end "
    "return nil;";

static const char REDISSON_SEM_RELEASE[] =
    "local expire = redis.call('zscore', KEYS[3], ARGV[1]);"
    "local removed = redis.call('zrem', KEYS[3], ARGV[1]);"
    "if tonumber(removed) ~= 1 then "
        "return 0;"
    "end;"
    "local value = redis.call('incrby', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[4], KEYS[2], value); "
    "if tonumber(expire) <= tonumber(ARGV[3]) then "
        "return 0;"
    "end;"
    "return 1;";

static const char REDISSON_SEM_AVAILABLE[] =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1); "
    "if #expiredIds > 0 then "
        "redis.call('zrem', KEYS[2], unpack(expiredIds)); "
        "local value = redis.call('incrby', KEYS[1], #expiredIds); "
        "if tonumber(value) > 0 then "
            "redis.call(ARGV[2], KEYS[3], value); "
        "end;"
        "return value; "
    "end; "
    "local ret = redis.call('get', KEYS[1]); "
    "return ret == false and 0 or ret;";

#define RS_ID_LEN 16
static const unsigned char RS_ID1[RS_ID_LEN] = {0x3f, 0xa9, 0xc1, 0xd2, 0xe4, 0xb5, 0xa6, 0x97,
                                                0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
static const unsigned char RS_ID2[RS_ID_LEN] = {0x00, 0x0a, 0x3a, 0x7b, 0xff, 0x10, 0x2c, 0x5e,
                                                0x91, 0x13, 0x3f, 0x00, 0x08, 0xc7, 0xe2, 0x64};

typedef struct rs_sem {
    redisContext *ctx;
    char name[64], timeout[96], channel[96];
} rs_sem;

/* EVAL with binary-safe arguments; argv[0..2] are filled here. */
static redisReply *rs_eval(rs_sem *rs, const char *script, int argc, const char **argv,
                           size_t *lens)
{
    redisReply *r;
    int i;

    argv[0] = "EVAL";
    argv[1] = script;
    argv[2] = "3";
    for (i = 0; i < argc; i++)
        if (!lens[i])
            lens[i] = strlen(argv[i]);
    r = redisCommandArgv(rs->ctx, argc, argv, lens);
    ck_assert_msg(r != NULL, "EVAL: %s", rs->ctx->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "Redisson's script failed: %s", r->str);
    return r;
}

/* The node's clock in ms (Redisson uses its client's; we build its
 * arguments from the node's, which is what our scores are on). */
static long long node_now_ms(rs_sem *rs)
{
    redisReply *r = redisCommand(rs->ctx, "TIME");
    long long ms;

    ck_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* Redisson's tryAcquire of n ids (from RS_ID1, RS_ID2) with lease_ms:
 * returns the reply ("OK", ":<score>" or nil); the caller frees it. */
static redisReply *rs_acquire(rs_sem *rs, int n, long long lease_ms)
{
    const char *argv[13];
    size_t lens[13] = {0};
    char count[8], until[24], now[24];
    long long t = node_now_ms(rs);
    int i;

    snprintf(count, sizeof(count), "%d", n);
    snprintf(until, sizeof(until), "%lld", t + lease_ms);
    snprintf(now, sizeof(now), "%lld", t);
    argv[3] = rs->name;
    argv[4] = rs->timeout;
    argv[5] = rs->channel;
    argv[6] = count;
    argv[7] = until;
    argv[8] = now;
    argv[9] = "922337203685477";
    argv[10] = "publish";
    for (i = 0; i < n; i++) {
        argv[11 + i] = (const char *)(i == 0 ? RS_ID1 : RS_ID2);
        lens[11 + i] = RS_ID_LEN;
    }
    return rs_eval(rs, REDISSON_SEM_ACQUIRE, 11 + n, argv, lens);
}

static long long rs_release(rs_sem *rs, const unsigned char *id)
{
    const char *argv[10];
    size_t lens[10] = {0};
    char now[24];
    redisReply *r;
    long long v;

    snprintf(now, sizeof(now), "%lld", node_now_ms(rs));
    argv[3] = rs->name;
    argv[4] = rs->channel;
    argv[5] = rs->timeout;
    argv[6] = (const char *)id;
    lens[6] = RS_ID_LEN;
    argv[7] = "1";
    argv[8] = now;
    argv[9] = "publish";
    r = rs_eval(rs, REDISSON_SEM_RELEASE, 10, argv, lens);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

static long long rs_available(rs_sem *rs)
{
    const char *argv[8];
    size_t lens[8] = {0};
    char now[24];
    redisReply *r;
    long long v;

    snprintf(now, sizeof(now), "%lld", node_now_ms(rs));
    argv[3] = rs->name;
    argv[4] = rs->timeout;
    argv[5] = rs->channel;
    argv[6] = now;
    argv[7] = "publish";
    r = rs_eval(rs, REDISSON_SEM_AVAILABLE, 8, argv, lens);
    /* An integer, or the count as a bulk string (GET's reply). */
    ck_assert(r->type == REDIS_REPLY_INTEGER || r->type == REDIS_REPLY_STRING);
    v = r->type == REDIS_REPLY_INTEGER ? r->integer : atoll(r->str);
    freeReplyObject(r);
    return v;
}

START_TEST(test_redisson_interop)
{
    redlock_client *c = client_with(1, NODE_TIMEOUT_MS, 0);
    redlock_permit_info h[4];
    redlock_semaphore_state st;
    redlock_semaphore *s;
    redlock_permit *ours, *second, *pair;
    redisReply *r;
    rs_sem rs;
    long long t;
    int64_t t0, took;
    size_t i, found_ours = 0, found_theirs = 0;

    memset(&rs, 0, sizeof(rs));
    rig_unique_name(rs.name, sizeof(rs.name), "sem", "redisson");
    snprintf(rs.timeout, sizeof(rs.timeout), "{%s}:timeout", rs.name);
    snprintf(rs.channel, sizeof(rs.channel), "redisson_sc:{%s}", rs.name);
    rs.ctx = node_conn(0);
    s = sem_new(c, rs.name, 2);

    /* We hold 1 of 2: Redisson takes the other, and then we get none. */
    ours = take(s, 1, 0, 20000);
    r = rs_acquire(&rs, 1, 20000);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "OK") == 0,
                  "Redisson's tryAcquire: type %d %s", r->type, r->str ? r->str : "");
    freeReplyObject(r);
    take_busy(s, 1);
    ck_assert_int_eq(rs_available(&rs), 0);
    st = inspect0(s, h, 4);
    ck_assert_int_eq(st.available, 0);
    ck_assert_uint_eq(st.permits_taken, 2);
    ck_assert_uint_eq(st.holders, 2);
    for (i = 0; i < 2; i++) {
        ck_assert_msg(h[i].ms_left > 0 && h[i].ms_left <= 20000, "ms_left %lld",
                      (long long)h[i].ms_left);
        found_ours += strcmp(h[i].id, redlock_permit_id(ours)) == 0;
        found_theirs += memcmp(h[i].id, RS_ID1, RS_ID_LEN) == 0;
    }
    ck_assert_uint_eq(found_ours, 1);
    ck_assert_uint_eq(found_theirs, 1);
    /* Redisson gives it back; we get it. */
    ck_assert_int_eq(rs_release(&rs, RS_ID1), 1);
    ck_assert_int_eq(rs_available(&rs), 1);
    second = take(s, 1, 0, 20000);
    ck_assert_int_eq(rs_available(&rs), 0);
    /* Both are ours: Redisson is refused and told when the first of our
     * leases ends, on its own scale (ms of the epoch). */
    t = node_now_ms(&rs);
    r = rs_acquire(&rs, 1, 20000);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->str[0] == ':', "reply type %d",
                  r->type);
    ck_assert_msg(atoll(r->str + 1) > t && atoll(r->str + 1) <= t + 20000, "%s, now %lld",
                  r->str, t);
    freeReplyObject(r);
    give_back(ours);
    give_back(second);
    ck_assert_int_eq(rs_available(&rs), 2);

    /* Redisson's permits whose lease ended are taken back by our acquire:
     * our waiter retries when the first lease ends on the node's clock. */
    r = rs_acquire(&rs, 2, 300);
    ck_assert_str_eq(r->str, "OK");
    freeReplyObject(r);
    take_busy(s, 1);
    t0 = rig_now_ms();
    pair = take(s, 2, 3000, LEASE_MS);
    took = rig_now_ms() - t0;
    fprintf(stderr, "Redisson's expired permits taken back after %lld ms\n", (long long)took);
    ck_assert_msg(took < 2000, "took %lld ms for a 300 ms lease", (long long)took);
    ck_assert_str_eq(cli(0, "ZCARD '%s'", rs.timeout), "2");
    ck_assert_int_eq(rs_release(&rs, RS_ID2), 0); /* Redisson's are gone */
    give_back(pair);
    ck_assert_int_eq(rs_available(&rs), 2);
    redisFree(rs.ctx);
    redlock_semaphore_free(s);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */

int main(void)
{
    Suite *s = suite_create("semaphore_redisson");

    RIG_ADD_CASE(s, test_redisson_interop, 60);
    return run_suite(s);
}
