/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The "Redisson floor": Redisson's own RLock lock and unlock scripts
 * (RedissonLock.tryLockInnerAsync and unlockInnerAsync, the form without
 * an unlock latch, which is the cheaper one), sent by hand over the same
 * blocking sockets as raw.h to N nodes in parallel. This is the minimal
 * protocol a lock library in any language speaks; the library's server
 * time and throughput are compared against it.
 */
#ifndef REDLOCK_BENCH_REDISSON_H
#define REDLOCK_BENCH_REDISSON_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "raw.h"

typedef struct redisson_floor {
    raw_conn conns[BENCH_MAX_NODES];
    size_t n;
    char name[128];
    char channel[160];
    char field[64];
    char lease[24];
    char lock_sha[41], unlock_sha[41];
    char cmd[1024];
} redisson_floor;

/* Connects to the first n nodes and loads Redisson's two scripts. */
void redisson_floor_init(redisson_floor *f, const bench_args *a, size_t n, const char *name,
                         int64_t lease_ms);
/* One lock round on every node; exits unless every node granted. Returns
 * its duration in ns. */
int64_t redisson_floor_lock(redisson_floor *f);
/* One unlock round; exits unless every node released. */
int64_t redisson_floor_unlock(redisson_floor *f);
void redisson_floor_free(redisson_floor *f);

/* From INFO commandstats: the server time spent in scripts so far
 * (EVAL and EVALSHA), in microseconds, and the commands run (inside
 * scripts or not, set-up and measurement excluded). */
void bench_server_usec(raw_conn *c, long long *usec, long long *calls);
/* CPU seconds (user + system) the server process has used (INFO cpu). */
double bench_server_cpu_s(raw_conn *c);

#endif
