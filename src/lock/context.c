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
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/prom.h"
#include "core/util.h"

void redlock__stat_add(uint64_t *counter, uint64_t n)
{
    __atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

/* Bucket i holds [2^i, 2^(i+1)) us; 0 also below 1 us; the last, the rest. */
static void observe(uint64_t *buckets, uint64_t *sum_us, int64_t ns)
{
    uint64_t us = ns > 0 ? (uint64_t)ns / 1000 : 0, v = us;
    int b = 0;

    while (v > 1 && b < REDLOCK_LATENCY_BUCKETS - 1) {
        v >>= 1;
        b++;
    }
    redlock__stat_add(&buckets[b], 1);
    redlock__stat_add(sum_us, us);
}

void redlock__stats_observe_acquire(redlock_client *c, int64_t ns)
{
    observe(c->stats.acquire_latency_us, &c->acquire_sum_us, ns);
}

void redlock__stats_observe_handoff(redlock_client *c, int64_t ns)
{
    observe(c->handoff.buckets, &c->handoff.sum_us, ns);
}

void redlock__stats_observe_renewal_lag(redlock_client *c, int64_t ns)
{
    observe(c->renewal_lag.buckets, &c->renewal_lag.sum_us, ns);
}

int redlock_client_histogram(redlock_client *c, int which,
                             uint64_t out[REDLOCK_LATENCY_BUCKETS], uint64_t *sum_us)
{
    const uint64_t *buckets, *sum;
    size_t i;

    if (!c || !out)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument");
    if (which == REDLOCK_HIST_ACQUIRE) {
        /* Its buckets are redlock_stats', kept where they always were. */
        buckets = c->stats.acquire_latency_us;
        sum = &c->acquire_sum_us;
    } else if (which == REDLOCK_HIST_HANDOFF || which == REDLOCK_HIST_RENEWAL_LAG) {
        const redlock__histogram *h =
            which == REDLOCK_HIST_HANDOFF ? &c->handoff : &c->renewal_lag;

        buckets = h->buckets;
        sum = &h->sum_us;
    } else {
        return redlock__fail(REDLOCK_EINVAL, "unknown histogram %d", which);
    }
    for (i = 0; i < REDLOCK_LATENCY_BUCKETS; i++)
        out[i] = __atomic_load_n(&buckets[i], __ATOMIC_RELAXED);
    if (sum_us)
        *sum_us = __atomic_load_n(sum, __ATOMIC_RELAXED);
    return REDLOCK_OK;
}

/* The names are the exposition's interface: dashboards depend on them. */
static const struct {
    size_t offset;
    const char *name, *help;
} prom_counters[] = {
#define C_(field, name, help) {offsetof(redlock_stats, field), name, help}
    C_(attempts, "redlock_acquire_attempts_total", "Acquire attempts, each retry counted."),
    C_(acquired, "redlock_acquired_total", "Successful acquisitions."),
    C_(busy, "redlock_acquire_busy_total",
       "Acquire attempts refused because another owner held the lock."),
    C_(no_quorum, "redlock_acquire_no_quorum_total",
       "Acquire attempts without a quorum of nodes answering."),
    C_(released, "redlock_released_total", "Holds released."),
    C_(lost, "redlock_lost_total", "Holds reported lost."),
    C_(renewals, "redlock_renewals_total", "Watchdog renewal requests sent."),
    C_(watchdog_ticks, "redlock_watchdog_ticks_total", "Watchdog ticks that renewed something."),
    C_(watchdog_batches, "redlock_watchdog_batches_total",
       "Pipelined watchdog batches, one per node and tick."),
    C_(background_releases, "redlock_background_releases_total",
       "Releases retried in the background after a timeout."),
#undef C_
};

static const struct {
    int which;
    const char *name, *help;
} prom_histograms[] = {
    {REDLOCK_HIST_ACQUIRE, "redlock_acquire_duration_seconds",
     "Successful acquires, from the call to the grant, waiting included."},
    {REDLOCK_HIST_HANDOFF, "redlock_handoff_duration_seconds",
     "Acquires that found the lock busy: from learning it may be free to the grant."},
    {REDLOCK_HIST_RENEWAL_LAG, "redlock_renewal_lag_seconds",
     "How late watchdog ticks renewed holds compared with their schedule."},
};

int redlock_stats_format_prometheus(redlock_client *c, char *buf, size_t len, size_t *needed)
{
    redlock__prom p = {buf, len, 0};
    redlock_stats st;
    uint64_t buckets[REDLOCK_LATENCY_BUCKETS], sum, failures;
    size_t i;

    if (!c || (!buf && len > 0))
        return redlock__fail(REDLOCK_EINVAL, "client is NULL, or buf is NULL with len > 0");
    redlock_client_stats(c, &st);
    for (i = 0; i < sizeof(prom_counters) / sizeof(prom_counters[0]); i++)
        redlock__prom_counter(&p, prom_counters[i].name, prom_counters[i].help,
                              *(const uint64_t *)((const char *)&st + prom_counters[i].offset));
    redlock__prom_header(&p, "redlock_node_failures_total", "counter",
                         "Timeouts, connection and server errors, per node.");
    for (i = 0; i < c->n_nodes; i++) {
        const char *node = redlock_client_node_name(c, i);

        failures = 0;
        redlock_client_node_failures(c, i, &failures);
        redlock__prom_labeled(&p, "redlock_node_failures_total", "node", node ? node : "",
                              failures);
    }
    for (i = 0; i < sizeof(prom_histograms) / sizeof(prom_histograms[0]); i++) {
        redlock_client_histogram(c, prom_histograms[i].which, buckets, &sum);
        redlock__prom_histogram_us(&p, prom_histograms[i].name, prom_histograms[i].help,
                                   buckets, REDLOCK_LATENCY_BUCKETS, sum);
    }
    if (needed)
        *needed = p.len;
    if (redlock__prom_finish(&p) != 0)
        return redlock__fail(REDLOCK_ERANGE, "metrics need %zu bytes, the buffer has %zu",
                             p.len + 1, len);
    return REDLOCK_OK;
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
    size_t n = strlen(c->id);

    /* By hand, as it runs on every call (see redlock__fmt_u64). */
    if (cap < n + 2) {
        snprintf(out, cap, "%s:%llu", c->id, (unsigned long long)owner);
        return;
    }
    memcpy(out, c->id, n);
    out[n] = ':';
    redlock__fmt_u64(out + n + 1, cap - n - 1, owner);
}

void redlock__hold_field(const redlock_lock *l, uint64_t owner, char *out, size_t cap)
{
    redlock__owner_field(l->client, owner, out, cap);
    /* Redisson names a write hold's field this way (RedissonWriteLock). */
    if (l->kind == REDLOCK__KIND_WRITE) {
        size_t n = strlen(out);

        if (n + sizeof(":write") <= cap)
            memcpy(out + n, ":write", sizeof(":write"));
    }
}

void redlock__request_id(redlock_client *c, char *out)
{
    uint64_t seq = __atomic_add_fetch(&c->request_seq, 1, __ATOMIC_RELAXED);

    int i;

    for (i = 11; i >= 0; i--, seq >>= 4)
        out[i] = "0123456789abcdef"[seq & 0xf];
    redlock__rand_hex(out + 12, 10);
}

int redlock__canceled(const redlock_client *c)
{
    return __atomic_load_n(&c->canceled, __ATOMIC_ACQUIRE);
}

/* Reports live in thread-local storage: two threads using one handle
 * never see (or race on) each other's outcomes, and recording costs no
 * lock. A thread keeps the report of its most recent call only. */
typedef redlock__report_store report_store;

static _Thread_local report_store own_report;
/* A fiber brings its own (redlock__report_swap). */
static _Thread_local report_store *report_of;

#define thread_report (*(report_of ? report_of : &own_report))

size_t redlock__report_store_size(void)
{
    return sizeof(report_store);
}

/* A store is 64 members long; a report is only read for its lock's
 * members, so only those are copied. */
static void copy_report(report_store *dst, const report_store *src)
{
    dst->lock = src->lock;
    dst->n = src->n;
    if (src->lock)
        memcpy(dst->members, src->members, src->n * sizeof(src->members[0]));
}

void redlock__report_adopt(const void *store)
{
    copy_report(report_of ? report_of : &own_report, store);
}

void redlock__report_export(redlock__report_store *out)
{
    copy_report(out, &thread_report);
}

void redlock__report_store_clear(void *store)
{
    ((report_store *)store)->lock = NULL;
}

void *redlock__report_swap(void *store)
{
    void *before = report_of;

    report_of = store;
    return before;
}

redlock_member_report *redlock__report_begin(redlock_lock *l)
{
    size_t i;

    thread_report.lock = l;
    thread_report.n = l->n;
    for (i = 0; i < l->n; i++) {
        memset(&thread_report.members[i], 0, sizeof(thread_report.members[i]));
        thread_report.members[i].latency_us = -1;
        thread_report.members[i].replicas_acked = -1;
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
