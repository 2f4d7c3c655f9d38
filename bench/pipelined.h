/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared floor, measured by `bench_server --pipelined` beside the
 * library (with and without options.io_thread) and the Redisson floor
 * (server.c's "16 threads on 16 names"): Redisson's lock and unlock
 * scripts from every thread over ONE connection per node. A thread writes
 * its request under the connection's mutex and queues a waiter; whoever
 * waits and finds no reader reads (leader/follower), hands each reply to
 * its waiter in order and wakes it. Requests of several threads reach a
 * node in one read, and their replies leave in one write. It says what
 * pipelining alone buys the floor, against what the library's I/O thread
 * buys the library.
 */
#ifndef REDLOCK_BENCH_PIPELINED_H
#define REDLOCK_BENCH_PIPELINED_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "redlock/redlock.h"

/* ---- the shared floor ---- */

typedef struct shared_floor shared_floor;

/* One connection per node to the first n nodes; loads Redisson's scripts. */
shared_floor *shared_floor_new(const bench_args *a, size_t n, int64_t lease_ms);
void shared_floor_free(shared_floor *f);
/* One lock + unlock cycle of name on every node, from any thread; exits
 * unless every node granted and released. */
void shared_floor_cycle(shared_floor *f, const char *name);

#endif
