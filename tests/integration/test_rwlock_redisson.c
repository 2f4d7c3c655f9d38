/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Redisson's RReadWriteLock scripts against our read-write lock holds, and
 * ours against theirs (N = 1), on the fixture's plain redis-server
 * processes. Copied verbatim from RedissonReadLock.java,
 * RedissonWriteLock.java (tryLockInnerAsync, unlockInnerAsync) and
 * renewal/ReadLockTask.java; KEYS and ARGV as Redisson passes them. The
 * rest of the read-write lock suite is test_rwlock.c.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char REDISSON_READ_LOCK[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
      "redis.call('hset', KEYS[1], 'mode', 'read'); "
      "redis.call('hset', KEYS[1], ARGV[2], 1); "
      "redis.call('set', KEYS[2] .. ':1', 1); "
      "redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); "
      "redis.call('pexpire', KEYS[1], ARGV[1]); "
      "return nil; "
    "end; "
    "if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then "
      "local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
      "local key = KEYS[2] .. ':' .. ind;"
      "redis.call('set', key, 1); "
      "redis.call('pexpire', key, ARGV[1]); "
      "local remainTime = redis.call('pttl', KEYS[1]); "
      "redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); "
      "return nil; "
    "end;"
    "return redis.call('pttl', KEYS[1]);";

static const char REDISSON_READ_UNLOCK[] =
    "local val = redis.call('get', KEYS[5]); "
    "if val ~= false then "
        "return tonumber(val);"
    "end; "
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
        "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
        "redis.call('set', KEYS[5], 1, 'px', ARGV[4]); "
        "return nil; "
    "end; "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); "
    "if (lockExists == 0) then "
        "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); "
    "if (counter == 0) then "
        "redis.call('hdel', KEYS[1], ARGV[2]); "
    "end;"
    "redis.call('del', KEYS[3] .. ':' .. (counter+1)); "
    "if (redis.call('hlen', KEYS[1]) > 1) then "
        "local maxRemainTime = -3; "
        "local keys = redis.call('hkeys', KEYS[1]); "
        "for n, key in ipairs(keys) do "
            "counter = tonumber(redis.call('hget', KEYS[1], key)); "
            "if type(counter) == 'number' then "
                "for i=counter, 1, -1 do "
                    "local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); "
                    "maxRemainTime = math.max(remainTime, maxRemainTime);"
                "end; "
            "end; "
        "end; "
        "if maxRemainTime > 0 then "
            "redis.call('pexpire', KEYS[1], maxRemainTime); "
            "redis.call('set', KEYS[5], 0, 'px', ARGV[4]); "
            "return 0; "
        "end;"
        "if mode == 'write' then "
            "redis.call('set', KEYS[5], 0, 'px', ARGV[4]); "
            "return 0;"
        "end; "
    "end; "
    "redis.call('del', KEYS[1]); "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[4]); "
    "return 1; ";

static const char REDISSON_WRITE_LOCK[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
          "redis.call('hset', KEYS[1], 'mode', 'write'); "
          "redis.call('hset', KEYS[1], ARGV[2], 1); "
          "redis.call('pexpire', KEYS[1], ARGV[1]); "
          "return nil; "
      "end; "
      "if (mode == 'write') then "
          "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
              "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
              "local currentExpire = redis.call('pttl', KEYS[1]); "
              "redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); "
              "return nil; "
          "end; "
        "end;"
        "return redis.call('pttl', KEYS[1]);";

static const char REDISSON_WRITE_UNLOCK[] =
    "local val = redis.call('get', KEYS[3]); "
    "if val ~= false then "
        "return tonumber(val);"
    "end; "
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
        "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
        "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
        "return nil; "
    "end;"
    "if (mode == 'write') then "
        "local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); "
        "if (lockExists == 0) then "
            "return nil;"
        "else "
            "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
            "if (counter > 0) then "
                "redis.call('pexpire', KEYS[1], ARGV[2]); "
                "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
                "return 0; "
            "else "
                "redis.call('hdel', KEYS[1], ARGV[3]); "
                "if (redis.call('hlen', KEYS[1]) == 1) then "
                    "redis.call('del', KEYS[1]); "
                    "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
                "else "
                    "redis.call('hset', KEYS[1], 'mode', 'read'); "
                "end; "
                "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
                "return 1; "
            "end; "
        "end; "
    "end; "
    "return nil;";

/* ReadLockTask's renewal, for one lock name with one holder. */
static const char REDISSON_READ_RENEW[] =
    "local result = {} "
    "local argIdx = 2 "
    "for i = 1, #KEYS, 2 do "
        "local anyAlive = false; "
        "local lockNamesCount = tonumber(ARGV[argIdx]); "
        "argIdx = argIdx + 1; "
        "for k = 1, lockNamesCount do "
            "local counter = redis.call('hget', KEYS[i], ARGV[argIdx]); "
            "if (counter ~= false) then "
                "anyAlive = true; "
                "for c=counter, 1, -1 do "
                    "redis.call('pexpire', KEYS[i+1] .. ':' .. ARGV[argIdx] .. ':rwlock_timeout:' .. c, ARGV[1]); "
                "end; "
            "end; "
            "argIdx = argIdx + 1; "
        "end; "
        "if (anyAlive) then "
            "redis.call('pexpire', KEYS[i], ARGV[1]); "
            "table.insert(result, 1); "
        "else "
            "table.insert(result, 0); "
        "end; "
    "end; "
    "return result;";

/* A Redisson client: its UUID and thread id make its fields. */
#define RS_FIELD "0b7e5a1c-3d2f-4e6a-9c8b-7a6f5e4d3c2b:77"

typedef struct redisson {
    redisContext *ctx;
    const char *name;
    int unlocks; /* each unlock has a latch of its own */
} redisson;

/* EVAL script nkeys keys... args... (a NULL-terminated list of strings). */
static redisReply *rs_eval(redisson *rs, const char *script, int nkeys, ...)
{
    const char *argv[16];
    char nk[8];
    int argc = 3;
    va_list ap;
    redisReply *r;

    snprintf(nk, sizeof(nk), "%d", nkeys);
    argv[0] = "EVAL";
    argv[1] = script;
    argv[2] = nk;
    va_start(ap, nkeys);
    while (argc < 16 && (argv[argc] = va_arg(ap, const char *)) != NULL)
        argc++;
    va_end(ap);
    r = redisCommandArgv(rs->ctx, argc, argv, NULL);
    ck_assert_msg(r != NULL, "EVAL: %s", rs->ctx->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "Redisson's script failed: %s", r->str);
    return r;
}

/* nil: granted; an integer (the holder's PTTL): refused. Returns 1 if
 * granted. */
static int granted(redisReply *r)
{
    int g = r->type == REDIS_REPLY_NIL;

    ck_assert_msg(g || r->type == REDIS_REPLY_INTEGER, "reply type %d", r->type);
    freeReplyObject(r);
    return g;
}

static int rs_read_lock(redisson *rs)
{
    char prefix[ARGS_CAP];

    fmt_args(prefix, "{%s}:" RS_FIELD ":rwlock_timeout", rs->name);
    return granted(rs_eval(rs, REDISSON_READ_LOCK, 2, rs->name, prefix, "30000", RS_FIELD,
                           RS_FIELD ":write", NULL));
}

static int rs_write_lock(redisson *rs)
{
    return granted(rs_eval(rs, REDISSON_WRITE_LOCK, 1, rs->name, "30000", RS_FIELD ":write",
                           NULL));
}

/* The unlock's integer result (0 still held, 1 released); -1 for nil. */
static long long unlock_result(redisReply *r)
{
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;

    ck_assert_msg(r->type == REDIS_REPLY_INTEGER || r->type == REDIS_REPLY_NIL, "type %d",
                  r->type);
    freeReplyObject(r);
    return v;
}

static long long rs_read_unlock(redisson *rs)
{
    char chan[ARGS_CAP], prefix[ARGS_CAP], tag[ARGS_CAP], latch[ARGS_CAP];

    fmt_args(chan, "redisson_rwlock:{%s}", rs->name);
    fmt_args(prefix, "{%s}:" RS_FIELD ":rwlock_timeout", rs->name);
    fmt_args(tag, "{%s}", rs->name);
    fmt_args(latch, "redisson_unlock_latch:{%s}:%d", rs->name, ++rs->unlocks);
    return unlock_result(rs_eval(rs, REDISSON_READ_UNLOCK, 5, rs->name, chan, prefix, tag,
                                 latch, "0", RS_FIELD, "publish", "10000", NULL));
}

static long long rs_write_unlock(redisson *rs)
{
    char chan[ARGS_CAP], latch[ARGS_CAP];

    fmt_args(chan, "redisson_rwlock:{%s}", rs->name);
    fmt_args(latch, "redisson_unlock_latch:{%s}:%d", rs->name, ++rs->unlocks);
    return unlock_result(rs_eval(rs, REDISSON_WRITE_UNLOCK, 3, rs->name, chan, latch, "1",
                                 "30000", RS_FIELD ":write", "publish", "10000", NULL));
}

START_TEST(test_redisson_interop)
{
    redlock_client *c = client_over(1);
    char name[64], f[FIELD_CAP], a[ARGS_CAP], k[ARGS_CAP], tag[ARGS_CAP];
    struct timeval tv = {5, 0};
    redlock_lock *r, *w;
    redisson rs;
    redisReply *rep;
    int held = 0;

    rig_unique_name(name, sizeof(name), "rw", "redisson");
    memset(&rs, 0, sizeof(rs));
    rs.name = name;
    rs.ctx = redisConnectWithTimeout("127.0.0.1", rig_get_int("PLAIN_BASE_PORT"), tv);
    ck_assert_msg(rs.ctx && !rs.ctx->err, "connect: %s", rs.ctx ? rs.ctx->errstr : "?");
    r = handle(c, name, REDLOCK_LOCK_READ);
    w = handle(c, name, REDLOCK_LOCK_WRITE);
    rig_field_of(c, R1, f, sizeof(f));
    timeout_key(k, name, f, 1);

    /* (a) A Redisson reader holds: our reader joins, our writer is kept
     * out; Redisson's read unlock leaves our hold, ours deletes the key. */
    ck_assert(rs_read_lock(&rs));
    acquire_ok(r, R1, 0, LEASE_MS);
    acquire_busy(w, W1);
    ck_assert_int_eq(rs_read_unlock(&rs), 0);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, f)), "1");
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HEXISTS '%s' '%s'", name, RS_FIELD)), "0");
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "EXISTS '%s'", k)), "1");
    ck_assert_int_gt(atoll(rig_cli(0, fmt_args(a, "PTTL '%s'", name))), 0);
    ck_assert_int_eq(redlock_is_held_as(r, R1, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    unlock_ok(r, R1);
    ck_assert_int_ge(wait_all_gone(1, name, 0), 0);

    /* (b) Our writer holds: Redisson's read and write tryLock get the
     * PTTL; after our release its write tryLock is granted. */
    acquire_ok(w, W1, 0, LEASE_MS);
    ck_assert(!rs_read_lock(&rs));
    ck_assert(!rs_write_lock(&rs));
    unlock_ok(w, W1);
    ck_assert(rs_write_lock(&rs));

    /* (c) A Redisson writer holds: ours are kept out; its unlock deletes
     * the key. */
    acquire_busy(r, R1);
    acquire_busy(w, W1);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' mode", name)), "write");
    ck_assert_int_eq(rs_write_unlock(&rs), 1);
    ck_assert_int_ge(wait_all_gone(1, name, 0), 0);

    /* (d) Our reader holds: Redisson's writer is refused, its reader
     * joins; its renewal and its unlock leave our hold as it was. */
    acquire_ok(r, R1, 0, LEASE_MS);
    ck_assert(!rs_write_lock(&rs));
    ck_assert(rs_read_lock(&rs));
    fmt_args(tag, "{%s}", name);
    rep = rs_eval(&rs, REDISSON_READ_RENEW, 2, name, tag, "30000", "1", RS_FIELD, NULL);
    ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(rep->elements, 1);
    ck_assert_int_eq(rep->element[0]->integer, 1);
    freeReplyObject(rep);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, f)), "1");
    ck_assert_int_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s:gen'", name, f))[0], 'g');
    ck_assert_int_gt(atoll(rig_cli(0, fmt_args(a, "PTTL '%s'", k))), 0);
    ck_assert_int_eq(rs_read_unlock(&rs), 0);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, f)), "1");
    /* The watchdog-free hold still re-enters and releases normally. */
    acquire_ok(r, R1, 0, LEASE_MS);
    unlock_ok(r, R1);
    unlock_ok(r, R1);
    ck_assert_int_ge(wait_all_gone(1, name, 0), 0);
    redisFree(rs.ctx);
    redlock_lock_free(r);
    redlock_lock_free(w);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */

int main(void)
{
    Suite *s = suite_create("rwlock_redisson");

    RIG_ADD_CASE(s, test_redisson_interop, 60);
    return run_suite(s);
}
