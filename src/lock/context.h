/* SPDX-License-Identifier: BSD-3-Clause */
/* What the lock core shares through the client (context.c). */
#ifndef REDLOCK_LOCK_CONTEXT_H
#define REDLOCK_LOCK_CONTEXT_H

#include "lock/internal.h"

void redlock__log(redlock_client *c, redlock_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whether level would be logged: callers test it before building a long
 * message nobody reads. */
static inline int redlock__log_on(const redlock_client *c, redlock_log_level level)
{
    return c->log_fn && level <= c->log_level;
}
void redlock__stat_add(uint64_t *counter, uint64_t n);
/* The histograms (see redlock_histogram in the public header); ns < 0
 * counts as 0. Lock-free (atomics): any thread, any mutex held. */
/* redlock_acquire_as(), counting as its own every cancel of l after the
 * count cancels_seen: a loop task's caller read it when it made the call,
 * and a cancel since must not be lost between that and the task's start. */
int redlock__acquire_seen(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms,
                          uint64_t cancels_seen);
/* A successful acquire, from the call to the grant. */
void redlock__stats_observe_acquire(redlock_client *c, int64_t ns);
/* A hand-off: the grant of an acquire that found the lock busy, measured
 * from when it last learned the lock may be free. */
void redlock__stats_observe_handoff(redlock_client *c, int64_t ns);
/* A hold's renewal: how late its tick started against its schedule. */
void redlock__stats_observe_renewal_lag(redlock_client *c, int64_t ns);
/* A request id, also the generation of the hold a fresh grant makes: 12
 * hex digits of a per-client sequence (so acquire.lua can tell a leftover
 * of ours from a newer hold), then 20 random ones. out gets 33 bytes. */
void redlock__request_id(redlock_client *c, char *out);
/* Nonzero once redlock_client_cancel() was called. */
int redlock__canceled(const redlock_client *c);
/* The per-request timeout for a lease (see redlock_options). */
int64_t redlock__node_timeout_ns(const redlock_client *c, int64_t lease_ms);
void redlock__owner_field(const redlock_client *c, uint64_t owner, char *out, size_t cap);
/* The field owner's hold through l has: the owner field, with ":write"
 * appended for a write hold (cap 64 always fits). */
void redlock__hold_field(const redlock_lock *l, uint64_t owner, char *out, size_t cap);

/* Starts the calling thread's per-member report for a call through l:
 * every member's outcome NONE, no latency. Returns the report to fill. */
redlock_member_report *redlock__report_begin(redlock_lock *l);
/* A fiber's own report (loop/): storage of redlock__report_store_size()
 * zeroed bytes, used by this thread from now on (NULL: the thread's own);
 * returns what was used before. */
size_t redlock__report_store_size(void);
/* Copies a fiber's report into what this thread uses now. */
void redlock__report_adopt(const void *store);
/* A report as a thread or a fiber keeps it; visible so that a call
 * relayed to another thread (loop/io_thread.c) can carry one back. */
typedef struct redlock__report_store {
    const redlock_lock *lock;
    size_t n;                   /* the lock's members: what is kept */
    redlock_member_report members[REDLOCK__MAX_NODES];
} redlock__report_store;
/* Copies what this thread (or the fiber running) uses now into out. */
void redlock__report_export(redlock__report_store *out);
/* Makes a store fit for a new fiber (it reports on no lock yet). */
void redlock__report_store_clear(void *store);
void *redlock__report_swap(void *store);
/* The calling thread's report if its last call went through l, or NULL. */
const redlock_member_report *redlock__report_of(const redlock_lock *l);

/* The first member failure of the calling thread's last call through l,
 * so a "no quorum" message also says why (e.g. "-LOADING"); "" if none. */
const char *redlock__first_failure(const redlock_lock *l);

#endif
