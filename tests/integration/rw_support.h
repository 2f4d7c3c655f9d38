/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the read-write lock suites (test_rwlock.c,
 * test_rwlock_redisson.c) and the semaphore suites (test_semaphore.c,
 * test_semaphore_redisson.c): clients and handles over the fixture's plain
 * nodes, acquires and releases that fail the running Check test when they
 * do not give what the case expects, and reads of what the nodes store.
 * Every helper asserts with ck_assert, so call them from a test only.
 */
#ifndef REDLOCK_TESTS_RW_SUPPORT_H
#define REDLOCK_TESTS_RW_SUPPORT_H

#include <check.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "redlock/redlock.h"

#define N_NODES 5
#define LEASE_MS 10000
/* Patient: these cases are about exclusion and counts, not latency, and
 * the default per-request timeout (lease / 100, at most 50 ms) turns a
 * slow reply on a loaded machine into a spurious failure. */
#define NODE_TIMEOUT_MS 400
#define FIELD_CAP 96
#define ARGS_CAP 512

/* ------------------------------------------------------------------------ */
/* Both kinds. */

/* Runs every case of s (added with RIG_ADD_CASE), frees it, and gives
 * main's exit status. */
int run_suite(Suite *s);

redlock_client *client_with(size_t n, int node_timeout_ms, int watchdog_lease_ms);

/* ------------------------------------------------------------------------ */
/* Read-write locks. Owners are explicit (redlock_acquire_as). */

#define R1 11
#define R2 12
#define W1 21
#define W2 22

/* A client over the first n nodes with NODE_TIMEOUT_MS, no watchdog. */
redlock_client *client_over(size_t n);
/* A lock handle of the given redlock_lock_options.kind. */
redlock_lock *handle(redlock_client *c, const char *name, int kind);
void acquire_ok(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms);
/* An acquire with no wait (lease LEASE_MS) that must give REDLOCK_EBUSY. */
void acquire_busy(redlock_lock *l, uint64_t owner);
void unlock_ok(redlock_lock *l, uint64_t owner);

/* printf-style redis-cli arguments, written to buf (ARGS_CAP bytes). */
const char *fmt_args(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "{NAME}:<field>:rwlock_timeout:<n>": read hold n's timeout key. */
const char *timeout_key(char *buf, const char *name, const char *field, int n);

/*
 * Nodes among the first n where redis-cli `args` prints `want`. Polled for
 * up to 2 s until at least `need` do: a call returns at a quorum, and the
 * other members' requests may still be on their way.
 */
size_t nodes_saying(size_t n, size_t need, const char *want, const char *args);

/* Polls until no node among the first n has NAME or any "{NAME}:*" key
 * (rwlock_timeout keys); ms it took, or -1 after timeout_ms. */
int64_t wait_all_gone(size_t n, const char *name, int64_t timeout_ms);

/* Runs one acquire on a thread of its own, timed. */
typedef struct bg_acquire {
    redlock_lock *l;
    uint64_t owner;
    int64_t wait_ms, lease_ms;
    int rc;
    int64_t started_us, done_us;
    atomic_int finished; /* done_us and rc are set */
    pthread_t th;
} bg_acquire;

/* Starts b: an acquire of l by owner waiting up to wait_ms, lease
 * LEASE_MS. Join b->th before reading rc or the times. */
void bg_start(bg_acquire *b, redlock_lock *l, uint64_t owner, int64_t wait_ms);

/* How long the acquire took, in ms (after pthread_join). */
int64_t bg_took_ms(const bg_acquire *b);

/* ------------------------------------------------------------------------ */
/* Semaphores. */

redlock_semaphore *sem_new(redlock_client *c, const char *name, int limit);
/* An acquire that must succeed; the permit it gave. */
redlock_permit *take(redlock_semaphore *s, int permits, int64_t wait_ms, int64_t lease_ms);
/* An acquire with no wait (lease LEASE_MS) that must give REDLOCK_EBUSY. */
void take_busy(redlock_semaphore *s, int permits);
/* A release that must succeed (it frees p). */
void give_back(redlock_permit *p);

/* printf-style redis-cli against node i. */
const char *cli(size_t node, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A hiredis connection of its own to plain node i. */
redisContext *node_conn(size_t i);

/* Runs lua/<file> as the library embeds it (includes expanded) by EVAL on plain node i with
 * nkeys keys then the other arguments of argv (argc in all); returns the
 * reply, which the caller frees with freeReplyObject(). */
redisReply *eval_file(size_t i, const char *file, int nkeys, int argc, const char *const *argv);

/* Node 0's view: available count, live permits, and holders (listed). */
redlock_semaphore_state inspect0(redlock_semaphore *s, redlock_permit_info *h, size_t cap);

#endif
