/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every part of the lock core shares through the client: logging,
 * statistics, per-request timeouts, owner fields, request ids, the cancel
 * flag, and the calling thread's per-member report. Below every other
 * lock module; depends on the client's fields only.
 */
#define _GNU_SOURCE
#include "lock/context.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"

void redlock__stat_add(uint64_t *counter, uint64_t n)
{
    __atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

void redlock__log(redlock_client *c, redlock_log_level level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (!c->log_fn || level > c->log_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->log_fn(c->log_userdata, level, msg);
}

int64_t redlock__node_timeout_ns(const redlock_client *c, int64_t lease_ms)
{
    int64_t ms = c->node_timeout_ms;

    /* Far below the lease, so one slow node costs little validity, but not
     * so small that a busy machine turns every request into a timeout. */
    if (ms <= 0) {
        ms = lease_ms / 100;
        if (ms > 50)
            ms = 50;
        if (ms < 10)
            ms = 10;
    }
    return ms * REDLOCK__NS_PER_MS;
}

void redlock__owner_field(const redlock_client *c, uint64_t owner, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%llu", c->id, (unsigned long long)owner);
}

void redlock__request_id(redlock_client *c, char *out)
{
    uint64_t seq = __atomic_add_fetch(&c->request_seq, 1, __ATOMIC_RELAXED);

    snprintf(out, 13, "%012llx", (unsigned long long)(seq & 0xffffffffffffULL));
    redlock__rand_hex(out + 12, 10);
}

int redlock__canceled(const redlock_client *c)
{
    return __atomic_load_n(&c->canceled, __ATOMIC_ACQUIRE);
}

/* Reports live in thread-local storage: two threads using one handle
 * never see (or race on) each other's outcomes, and recording costs no
 * lock. A thread keeps the report of its most recent call only. */
static _Thread_local struct {
    const redlock_lock *lock;
    redlock_member_report members[REDLOCK__MAX_NODES];
} thread_report;

redlock_member_report *redlock__report_begin(redlock_lock *l)
{
    size_t i;

    thread_report.lock = l;
    for (i = 0; i < l->n; i++) {
        memset(&thread_report.members[i], 0, sizeof(thread_report.members[i]));
        thread_report.members[i].latency_us = -1;
    }
    return thread_report.members;
}

const redlock_member_report *redlock__report_of(const redlock_lock *l)
{
    return thread_report.lock == l ? thread_report.members : NULL;
}

/* The first member failure of the calling thread's last attempt through l,
 * so a "no quorum" message also says why (e.g. "-LOADING"); "" if none. */
const char *redlock__first_failure(const redlock_lock *l)
{
    const redlock_member_report *report = redlock__report_of(l);
    size_t i;

    for (i = 0; report && i < l->n; i++) {
        const redlock_member_report *r = &report[i];

        if ((r->outcome == REDLOCK_MEMBER_ERROR || r->outcome == REDLOCK_MEMBER_TIMEOUT) &&
            r->message[0])
            return r->message;
    }
    return "";
}
