/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The loop-driven client's test harness on the fixture's real nodes: the
 * test's own poll() loop over the raw hooks (so it can time every
 * redlock_loop_action() call), and the helpers the loop suites share.
 * One client at a time, in L.
 */
#ifndef REDLOCK_TESTS_LOOP_HARNESS_H
#define REDLOCK_TESTS_LOOP_HARNESS_H

#include <poll.h>
#include <stdint.h>

#include "redlock/redlock.h"

#define N_NODES 5
#define MAX_FDS 512

typedef struct loop {
    redlock_client *c;
    struct pollfd fds[MAX_FDS];
    size_t n;
    int64_t timer_at_ms;    /* -1: none */
    int64_t longest_action_us;
    int in_start;           /* inside a call that starts an operation */
    int socket_calls;
} loop;

typedef struct result {
    int done, rc, lock_was_null, called_in_start;
    int64_t at_ms;
    char msg[256];
} result;

extern loop L;

/* The socket_fn and timer_fn that L's loop attaches (ud: &L). */
void on_socket(void *ud, int fd, int events);
void on_timer(void *ud, int64_t ms);
/* One round of the loop: poll (at most max_ms), then report what is
 * ready and a due timer. */
void turn(int max_ms);
/* Runs the loop until *flag is set or ms passed; returns whether it was. */
int run_until(const int *flag, int64_t ms);
/* A redlock_done_fn filling the result it is given. */
void on_done(void *ud, redlock_lock *l, int rc, const char *msg);
/* A loop-driven client on the rig's plain nodes, attached to L. */
redlock_client *loop_client(int node_timeout_ms, int watchdog_lease_ms);
redlock_lock *new_lock(const char *name);
void start_acquire(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms,
                   result *r);
void start_unlock(redlock_lock *l, uint64_t owner, result *r);
/* How many nodes have the key (EXISTS on each). */
int nodes_with(const char *name);

#endif
