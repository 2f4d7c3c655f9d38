/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "redisson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Redisson 3.x RedissonLock scripts, byte for byte as a Java client sends
 * them (KEYS[1] lock, ARGV[1] lease, ARGV[2] field; unlock: KEYS[2] the
 * channel, ARGV[1] the message, ARGV[2] lease, ARGV[3] field). */
static const char REDISSON_LOCK[] =
    "if ((redis.call('exists', KEYS[1]) == 0) or "
    "(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "return redis.call('pttl', KEYS[1]);";
static const char REDISSON_UNLOCK[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "
    "return 0; else redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";

static void load(raw_conn *c, const char *body, char sha[41])
{
    raw_reply r;

    raw_command(c, 3, (const char *[]){"SCRIPT", "LOAD", body}, &r);
    if (r.type != '$' || strlen(r.text) != 40)
        bench_die("SCRIPT LOAD of a Redisson script: %s", r.text);
    memcpy(sha, r.text, 41);
}

void redisson_floor_init(redisson_floor *f, const bench_args *a, size_t n, const char *name,
                         int64_t lease_ms)
{
    size_t i;

    memset(f, 0, sizeof(*f));
    if (n > a->n_nodes)
        bench_die("the Redisson floor needs %zu nodes, %zu given", n, a->n_nodes);
    f->n = n;
    snprintf(f->name, sizeof(f->name), "%s", name);
    snprintf(f->channel, sizeof(f->channel), "redisson_lock__channel:{%s}", name);
    /* Redisson's field: "<connection manager uuid>:<thread id>". */
    snprintf(f->field, sizeof(f->field), "7d3e5b1a-0c2f-4e8d-9a6b-%012x:%d",
             (unsigned)getpid(), (int)gettid());
    snprintf(f->lease, sizeof(f->lease), "%lld", (long long)lease_ms);
    for (i = 0; i < n; i++) {
        raw_connect(&f->conns[i], a->hosts[i], a->ports[i], a->user, a->pass);
        load(&f->conns[i], REDISSON_LOCK, f->lock_sha);
        load(&f->conns[i], REDISSON_UNLOCK, f->unlock_sha);
    }
}

static void send_all(redisson_floor *f, size_t len)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        raw_send(&f->conns[i], f->cmd, len);
}

int64_t redisson_floor_lock(redisson_floor *f)
{
    int64_t t0 = bench_now_ns();
    raw_reply r;
    size_t i;

    send_all(f, raw_format(f->cmd, sizeof(f->cmd), 6,
                           (const char *[]){"EVALSHA", f->lock_sha, "1", f->name, f->lease,
                                            f->field}));
    for (i = 0; i < f->n; i++) {
        raw_read(&f->conns[i], &r);
        if (r.type != 'n')
            bench_die("Redisson lock on node %zu: not granted (%c %lld %s)", i, r.type,
                      r.integer, r.text);
    }
    return bench_now_ns() - t0;
}

int64_t redisson_floor_unlock(redisson_floor *f)
{
    int64_t t0 = bench_now_ns();
    raw_reply r;
    size_t i;

    send_all(f, raw_format(f->cmd, sizeof(f->cmd), 8,
                           (const char *[]){"EVALSHA", f->unlock_sha, "2", f->name, f->channel,
                                            "0", f->lease, f->field}));
    for (i = 0; i < f->n; i++) {
        raw_read(&f->conns[i], &r);
        if (r.type != ':' || r.integer != 1)
            bench_die("Redisson unlock on node %zu: unexpected reply (%c %lld %s)", i, r.type,
                      r.integer, r.text);
    }
    return bench_now_ns() - t0;
}

void redisson_floor_free(redisson_floor *f)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        raw_close(&f->conns[i]);
}

/* Commands a lock cycle does not make: the measurement's own, and the
 * connection set-up. */
static int not_a_lock_command(const char *name, size_t len)
{
    static const char *const skip[] = {"info", "script", "ping", "client", "hello",
                                       "auth", "select", "config", "command"};
    size_t i;

    for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
        if (strlen(skip[i]) == len && strncmp(name, skip[i], len) == 0)
            return 1;
    return 0;
}

double bench_server_cpu_s(raw_conn *c)
{
    char info[4000];
    const char *sys, *user;

    /* The whole process: scripts, and also parsing, replies and the
     * system calls of its event loop, which commandstats leaves out. */
    raw_command_bulk(c, 2, (const char *[]){"INFO", "cpu"}, info, sizeof(info));
    sys = strstr(info, "used_cpu_sys:");
    user = strstr(info, "used_cpu_user:");
    if (!sys || !user)
        return 0;
    return strtod(sys + 13, NULL) + strtod(user + 14, NULL);
}

void bench_server_usec(raw_conn *c, long long *usec, long long *calls)
{
    char info[16000];
    const char *p = info;

    *usec = *calls = 0;
    raw_command_bulk(c, 2, (const char *[]){"INFO", "commandstats"}, info, sizeof(info));
    /* "cmdstat_<name>:calls=N,usec=U,...", one line per command. Redis
     * counts a command a script runs under its own name too, and inside
     * the script's usec: the time is the scripts' (EVAL/EVALSHA), the
     * calls are everything else. */
    while ((p = strstr(p, "cmdstat_")) != NULL) {
        const char *name = p + 8, *colon = strchr(p, ':'), *c_at, *u_at;
        size_t len;

        if (!colon)
            break;
        len = (size_t)(colon - name);
        c_at = strstr(colon, "calls=");
        u_at = strstr(colon, "usec=");
        if (c_at && u_at) {
            if ((len == 4 && strncmp(name, "eval", 4) == 0) ||
                (len == 7 && strncmp(name, "evalsha", 7) == 0))
                *usec += strtoll(u_at + 5, NULL, 10);
            else if (!not_a_lock_command(name, len))
                *calls += strtoll(c_at + 6, NULL, 10);
        }
        p = colon;
    }
}
