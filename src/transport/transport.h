/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport seen by the lock logic: a fan-out of small pipelines to
 * several nodes under per-node deadlines, plus release notifications.
 * It is a function table so the quorum decisions can be unit-tested over
 * a scripted fake (tests/unit/fake_transport.c) with a virtual clock.
 */
#ifndef REDLOCK_TRANSPORT_TRANSPORT_H
#define REDLOCK_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "resp/script.h" /* REDLOCK__MAX_CALL_ARGS */

struct redisReply;

/* One command: a script call (EVALSHA, falling back to EVAL on NOSCRIPT)
 * or, with script < 0, a plain command whose argv[0] is its name. */
typedef struct redlock__call {
    int script;              /* redlock__script_id or -1 */
    int nkeys;               /* script calls: how many argv are KEYS */
    int argc;
    const char *const *argv; /* keys, then arguments */
    const size_t *argvlen;   /* NULL: strlen of each */
} redlock__call;

/* A pipeline of calls to one node, answered before deadline_ns. A new
 * connection still being set up (connect, TLS, AUTH) normally gets the
 * connect timeout instead; a strict batch does not (its calls are retried
 * in the background if they time out, so waiting longer buys nothing). */
typedef struct redlock__batch {
    size_t node;
    const redlock__call *calls;
    size_t ncalls;
    int64_t deadline_ns;
    int strict;
    /* When the caller stops the fan-out, calls of this batch already
     * written to a connection that stays open are reported to the callback
     * with REDLOCK__IN_FLIGHT instead of vanishing, and the transport keeps
     * a ledger entry for each (tokens[call], nonzero, chosen by the caller):
     * when its reply arrives in a later fan-out, or the connection closes
     * first, the settle hook hears of it. Calls abandoned without a live
     * connection get no callback, as in any batch. */
    int report_in_flight;
    const uint64_t *tokens;
} redlock__batch;

/* The err of a report for a call abandoned in flight (report_in_flight):
 * neither a reply nor a failure, and the callback's answer is ignored. */
#define REDLOCK__IN_FLIGHT (-1)
/* The same, on a connection whose output the node has not taken yet (it
 * stopped reading): the call goes out when it reads again. */
#define REDLOCK__IN_FLIGHT_BLOCKED (-2)

/* Hears how a ledger entry ended: delivered != 0 when the node answered
 * (the call ran; error is the text of an error reply, else NULL), 0 when
 * its connection closed first (it may never have been read). Runs on
 * whichever thread reads or closes the connection, possibly inside another
 * fan-out: it must not call the transport. */
typedef void (*redlock__settle_fn)(void *ud, uint64_t token, int delivered, const char *error);

/*
 * Receives every call's outcome as soon as it is known: err == 0 with the
 * reply (freed after the callback returns; server error replies arrive
 * here too, as REDIS_REPLY_ERROR) or err != 0 (timeout, connection or TLS
 * failure) with a message. Returning nonzero ends the whole fan-out at
 * once: calls still outstanding are abandoned, get no callback (but see
 * report_in_flight), and their late replies are discarded.
 */
typedef int (*redlock__reply_fn)(void *ud, size_t batch, size_t call, int err,
                                 const char *errmsg, struct redisReply *reply);

/* A reply_fn's answer: the outcome is decided, but the calls still
 * outstanding are worth hearing for a little while (their answers spare
 * the caller undoing them). The fan-out goes on for at most as long again
 * as it has run so far, then ends as for any nonzero answer; a later
 * nonzero answer ends it at once. A transport may take it as 1. */
#define REDLOCK__FANOUT_LINGER 2

typedef struct redlock__transport_ops {
    int (*fanout)(void *ctx, const redlock__batch *batches, size_t n,
                  redlock__reply_fn fn, void *ud);
    int64_t (*now_ns)(void *ctx);
    /* Release notifications. watch subscribes to release channels (full
     * channel names, one per node given) and returns once the subscriptions are confirmed (or
     * deadline_ns passed); wait blocks until a release message arrives
     * after *seen (updating it), deadline_ns, or stop(stop_ud) holds;
     * unwatch drops it. A kick (a cancel anywhere in the client) makes the
     * wait test stop again, under the lock the kick takes, so a cancel
     * made before its kick is never slept through. Without stop (NULL)
     * any kick ends the wait. */
    void *(*watch)(void *ctx, const char *const *channels, const size_t *nodes, size_t n,
                   int64_t deadline_ns);
    int (*wait)(void *ctx, void *watch, uint64_t *seen, int64_t deadline_ns,
                int (*stop)(void *), void *stop_ud);
    void (*unwatch)(void *ctx, void *watch);
    /* Ledger of calls abandoned in flight (see report_in_flight).
     * set_settle is called once, before any fan-out; drain reads the
     * replies idle connections have received for their ledger entries until
     * none is left or deadline_ns, and returns how many remain. Both may be
     * NULL (a transport without a ledger reports nothing in flight). */
    void (*set_settle)(void *ctx, redlock__settle_fn fn, void *ud);
    size_t (*drain)(void *ctx, int64_t deadline_ns);
} redlock__transport_ops;

typedef struct redlock__transport {
    const redlock__transport_ops *ops;
    void *ctx;
} redlock__transport;

#endif
