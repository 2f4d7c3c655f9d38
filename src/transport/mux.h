/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pipelined connections for a loop-driven client: one connection per node,
 * shared by every operation the loop runs. A blocking call borrows a whole
 * connection set for one fan-out (net.c), which costs each request a write
 * and a read on both ends. Under a loop many operations are in flight on
 * one thread, so their requests to a node can travel together: each
 * operation queues its calls on the node's shared connection, and a reader
 * fiber writes whatever was queued since it last ran in one write, reads
 * the replies in one read and hands each to the operation that waits for
 * it, in the order the requests were queued (Redis answers in order).
 *
 * Only fibers of the loop's own thread use it (redlock__mux_usable); the
 * watchdog's own thread and blocking threads keep the pool.
 */
#ifndef REDLOCK_TRANSPORT_MUX_H
#define REDLOCK_TRANSPORT_MUX_H

#include <stddef.h>
#include <stdint.h>

#include "transport/conn.h"
#include "transport/transport.h"

typedef struct redlock__mux redlock__mux;

/* A mux over nodes (one connection each, opened at first use); ledger
 * settlements and closing fds go to hook (the pool's, set once). failures:
 * the pool's per-node failure counters. REDLOCK_OK or REDLOCK_ENOMEM. */
int redlock__mux_new(const redlock__node *nodes, size_t n_nodes,
                     const redlock__settle_hook *hook, uint64_t *failures,
                     redlock__mux **out);

/* The reader: runs in a fiber of the loop's thread until
 * redlock__mux_close() was called and no fan-out waits on it any more;
 * then closes the connections. */
void redlock__mux_run(redlock__mux *m);

/* Asks the reader to end (the fiber that runs it must then be resumed). */
void redlock__mux_close(redlock__mux *m);

/* Whether the reader is running (started and not yet returned). */
int redlock__mux_running(const redlock__mux *m);

/* After the reader returned (or never ran). NULL: nothing. */
void redlock__mux_free(redlock__mux *m);

/* Whether the calling code may fan out through m: a fiber of the loop
 * whose fiber the reader is, before redlock__mux_close(). */
int redlock__mux_usable(const redlock__mux *m);

/* Reads the replies that settle the mux's ledger entries until none is
 * left or deadline_ns, and returns how many are left; for the loop's
 * thread outside its fibers (redlock_client_flush()). Elsewhere it does
 * nothing (the reader settles them) and returns 0. */
size_t redlock__mux_drain(redlock__mux *m, int64_t deadline_ns);

/* A fan-out with the semantics of redlock__fanout_conns (transport.h),
 * over m's shared connections. */
int redlock__fanout_mux(redlock__mux *m, const redlock__batch *batches, size_t n,
                        int connect_timeout_ms, redlock__reply_fn fn, void *ud);

#endif
