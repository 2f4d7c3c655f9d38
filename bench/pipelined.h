/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two ways T blocking threads could share pipelined connections, measured
 * by `bench_server --pipelined` beside the library and the Redisson floor
 * (server.c's "16 threads on 16 names"):
 *
 *   - the shared floor: Redisson's lock and unlock scripts from every
 *     thread over ONE connection per node. A thread writes its request
 *     under the connection's mutex and queues a waiter; whoever waits and
 *     finds no reader reads (leader/follower), hands each reply to its
 *     waiter in order and wakes it. Requests of several threads reach a
 *     node in one read, and their replies leave in one write.
 *   - the relay: every acquire and unlock of the library is handed to ONE
 *     thread that drives a loop-driven client (redlock_acquire_async,
 *     redlock_unlock_async over its pipelined connections) and wakes the
 *     calling thread when done: blocking calls run on an internal loop
 *     thread.
 *
 * Neither is part of the library; they say what such a design could buy
 * before anyone builds it.
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

/* ---- the relay ---- */

typedef struct relay relay;

/* Starts the loop thread and its loop-driven client over the first n
 * nodes (node timeout node_timeout_ms). */
relay *relay_new(const bench_args *a, size_t n, int node_timeout_ms);
/* Ends what is in flight, frees the client, stops the thread. */
void relay_free(relay *r);
/* On the loop's thread, as its rules ask: a handle for name, and its
 * release. */
redlock_lock *relay_lock_new(relay *r, const char *name);
void relay_lock_free(relay *r, redlock_lock *l);
/* redlock_acquire_as(l, owner, 0, lease_ms) and redlock_unlock_as(l, owner)
 * run on the loop's thread; the calling thread waits for the outcome. */
int relay_try_lock(relay *r, redlock_lock *l, uint64_t owner, int64_t lease_ms);
int relay_unlock(relay *r, redlock_lock *l, uint64_t owner);

#endif
