/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Calls the client still owes a node (releases and aborts nobody waited
 * for), delivered in the background with a back-off per node (retry.c).
 * The watchdog thread sends them with its ticks; redlock_client_flush()
 * sends them at once. Thread-safe: one mutex, a leaf.
 */
#ifndef REDLOCK_LOCK_RETRY_H
#define REDLOCK_LOCK_RETRY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "redlock/redlock.h"
#include "transport/transport.h"

#define REDLOCK__RETRY_MAX_NODES REDLOCK_MAX_NODES

typedef struct redlock__pending {
    struct redlock__pending *next;
    size_t node;
    int script, nkeys, argc;
    char *argv[REDLOCK__MAX_CALL_ARGS];
    int64_t give_up_ns;
    int64_t next_try_ns;
    int64_t not_before_ns;      /* never sent before (0: any time) */
    /* Parked: written to a live connection by a fan-out that did not wait
     * for the answer (a release settled at quorum). Not sent: kept until
     * the transport settles `token` (delivered: dropped; lost: an ordinary
     * pending call) or the give-up time passes. */
    uint64_t token;
    int parked;
} redlock__pending;

typedef struct redlock__retry {
    pthread_mutex_t mu;             /* guards everything below */
    redlock__pending *pending;
    /* Per node: back-off after unanswered calls, and when the next may go. */
    int backoff_ms[REDLOCK__RETRY_MAX_NODES];
    int64_t next_try_ns[REDLOCK__RETRY_MAX_NODES];
    int enabled;
    size_t nparked;                 /* parked calls; read atomically too */
    size_t taken;                   /* taken by a sender, not settled yet */
    uint64_t next_token;            /* atomic */
    uint64_t lost;                  /* parked calls settled lost; atomic */
    /* Told (without the mutex) when a call is queued: wakes the sender. */
    void (*wake)(void *ud);
    void *wake_ud;
    /* When the sender plans to wake by itself (INT64_MAX: not before it is
     * woken); atomic. A parked call due later needs no wake-up. */
    int64_t sender_wakes_at;
} redlock__retry;

void redlock__retry_init(redlock__retry *r, void (*wake)(void *), void *wake_ud);
/* Drops what is still owed and stops accepting calls. */
void redlock__retry_destroy(redlock__retry *r);

/* Queues a script call to send until give_up_ns (the strings are copied);
 * its first try is after PENDING_RETRY_MS at the earliest, and never
 * before not_before_ns (0: no such limit), not even by a flush. */
void redlock__retry_queue(redlock__retry *r, int64_t now, size_t node, int script, int nkeys,
                          int argc, const char *const *argv, int64_t not_before_ns,
                          int64_t give_up_ns);

/* The sender (the watchdog thread) says when it will next look at the
 * queue by itself: before computing that (INT64_MAX), then the time. */
void redlock__retry_sender_wakes_at(redlock__retry *r, int64_t at_ns);

/* A fresh nonzero token for a ledger entry. */
uint64_t redlock__retry_token(redlock__retry *r);

/* Parks a call in flight under token until the transport settles it
 * (redlock__retry_settle_token) or give_up_ns; the strings are copied. */
void redlock__retry_park(redlock__retry *r, int64_t now, size_t node, int script, int nkeys,
                         int argc, const char *const *argv, int64_t give_up_ns,
                         uint64_t token);

/* Settles the parked call of token (the transport's settle hook, through
 * health.c): a delivered call is dropped, a lost one becomes owed (due
 * within PENDING_RETRY_MS, then with the node's back-off). Returns its
 * node, or SIZE_MAX for an unknown token (given up, or never parked).
 * Takes the mutex; calls wake. */
size_t redlock__retry_settle_token(redlock__retry *r, uint64_t token, int delivered);

/* Parked calls not settled yet; how many were ever settled lost. */
size_t redlock__retry_parked(redlock__retry *r);
uint64_t redlock__retry_lost(redlock__retry *r);

/*
 * Takes the calls due at now, or every call with all != 0, into *out (a
 * list the caller owns until it settles it); drops calls past their give-up
 * time. Parked calls are never taken; each falls due every PENDING_RETRY_MS
 * only so the sender drains their connections (redlock__retry_parked). A node that did not answer last time (or is silent) gets none of
 * its calls: probe[node] (REDLOCK__RETRY_MAX_NODES entries, may be NULL)
 * says a PING should go to it instead, when its back-off allows. Returns
 * how many calls were taken.
 */
size_t redlock__retry_take(redlock__retry *r, int64_t now, int all,
                           int (*silent)(void *ud, size_t node), void *silent_ud,
                           redlock__pending **out, unsigned char *probe);

/* Calls a sender has taken and not settled yet: a flush that finds the
 * queue empty while a tick has them in flight waits for that tick. */
size_t redlock__retry_in_flight(redlock__retry *r);

/*
 * Settles a taken list (every list taken must be settled, answered or
 * not): answered[i] != 0 for the i-th call answered, and
 * the probes (probed[node], probe_heard[node]; both may be NULL). Puts back
 * the rest; a node that answered anything may go again at once, one that
 * did not backs off (100 ms doubling to 800 ms, with jitter). Returns how
 * many calls are still owed from this list.
 */
size_t redlock__retry_settle(redlock__retry *r, redlock__pending *taken,
                             const unsigned char *answered, const unsigned char *probed,
                             const unsigned char *probe_heard, int64_t now);

/* Something came back from node: its back-off ends and what is owed to it
 * may go at once. Cheap when the node was not backing off. */
void redlock__retry_heard(redlock__retry *r, size_t node);

/* The earliest not_before_ns still ahead of now among queued calls
 * (INT64_MAX: none), and in *count how many such calls there are: a flush
 * waits for them rather than send them early. */
int64_t redlock__retry_held_back_until(redlock__retry *r, int64_t now, size_t *count);

/* Makes every held-back call due at now: for the client's end, when no
 * holder of its locks can still be acting. */
void redlock__retry_lift_holds(redlock__retry *r, int64_t now);

/* The next moment a queued call falls due (INT64_MAX: none). */
int64_t redlock__retry_next_due(redlock__retry *r);

#endif
