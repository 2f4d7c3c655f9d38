/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kinds of hold a safety worker takes, through the public API only:
 * the plain lock (fencing), the two sides of a read-write lock (--kind:
 * the write side fencing, the read side without tokens, which the library
 * refuses for readers), the fair lock (--kind fair: the plain lock
 * granted in ticket order, fencing as the plain lock) and one permit of a
 * semaphore (--permits K, no tokens either: permits are shared).
 *
 * Each hold's critical section ends at the latest validity end the worker
 * itself confirmed (vend), so the confirmation must never report a
 * validity that is not this hold's own: see hold_confirm().
 */
#include <stdio.h>
#include <string.h>

#include "worker.h"

static void on_lost(void *ud, redlock_lock *lock, uint64_t owner, int reason)
{
    slot *s = ud;

    (void)lock, (void)owner;
    atomic_store(&s->lost_reason, reason);
    atomic_store(&s->lost_ns, now_ns());
}

int slot_open(worker *w, slot *s, const redlock_lock_options *lo)
{
    const config *c = &w->cfg;
    redlock_lock_options o = *lo;
    const char *what = "lock";
    int rc;

    if (c->permits > 0) {
        /* Permits are shared: the library refuses tokens for them. */
        o.fencing = 0;
        what = "semaphore";
        rc = redlock_semaphore_new(w->client, s->name, c->permits, &o, &s->sem);
        if (rc == REDLOCK_OK)
            redlock_semaphore_set_on_lost(s->sem, on_lost, s);
    } else if (c->rw != RW_NONE) {
        o.kind = REDLOCK_LOCK_WRITE;
        rc = redlock_lock_new(w->client, s->name, &o, &s->lock);
        if (rc == REDLOCK_OK) {
            o.kind = REDLOCK_LOCK_READ;
            o.fencing = 0; /* refused for readers */
            what = "read lock";
            rc = redlock_lock_new(w->client, s->name, &o, &s->read_lock);
        }
    } else {
        /* A fair hold is a plain hold granted in queue order: same hash,
         * same fencing, so the checker judges it as one. */
        if (c->fair) {
            o.kind = REDLOCK_LOCK_FAIR;
            what = "fair lock";
        }
        rc = redlock_lock_new(w->client, s->name, &o, &s->lock);
    }
    if (rc != REDLOCK_OK) {
        fprintf(stderr, "safety_worker: %s %s: %s\n", what, s->name, redlock_last_error());
        return -1;
    }
    if (s->lock)
        redlock_lock_set_on_lost(s->lock, on_lost, s);
    if (s->read_lock)
        redlock_lock_set_on_lost(s->read_lock, on_lost, s);
    return 0;
}

void slot_close(slot *s)
{
    redlock_lock_free(s->lock);
    redlock_lock_free(s->read_lock);
    redlock_semaphore_free(s->sem);
}

/* What each member answered to the last attempt, one letter per member:
 * G granted, B held elsewhere, T timeout, E error, - not heard. */
static void members_outcome(redlock_lock *lock, char *out, size_t cap)
{
    size_t i, n = redlock_lock_member_count(lock);

    for (i = 0; i < n && i + 1 < cap; i++) {
        redlock_member_report r;

        out[i] = '?';
        if (redlock_lock_report(lock, i, &r) != REDLOCK_OK)
            continue;
        switch (r.outcome) {
        case REDLOCK_MEMBER_GRANTED: out[i] = 'G'; break;
        case REDLOCK_MEMBER_HELD_ELSEWHERE: out[i] = 'B'; break;
        case REDLOCK_MEMBER_TIMEOUT: out[i] = 'T'; break;
        case REDLOCK_MEMBER_ERROR: out[i] = 'E'; break;
        default: out[i] = '-'; break;
        }
    }
    out[i] = '\0';
}

/* The replicas that acknowledged each member's grant, comma-separated
 * ("-" for a member without a report of them). */
static void members_acks(redlock_lock *lock, char *out, size_t cap)
{
    size_t i, n = redlock_lock_member_count(lock), len = 0;

    out[0] = '\0';
    for (i = 0; i < n && len + 16 < cap; i++) {
        redlock_member_report r;
        int k = -1;

        if (redlock_lock_report(lock, i, &r) == REDLOCK_OK)
            k = r.replicas_acked;
        len += (size_t)(k >= 0 ? snprintf(out + len, cap - len, "%s%d", i ? "," : "", k)
                               : snprintf(out + len, cap - len, "%s-", i ? "," : ""));
    }
    if (!out[0])
        snprintf(out, cap, "-");
}

/* How many holds the client's watchdog has marked lost so far. */
static uint64_t lost_count(worker *w)
{
    redlock_stats st;

    if (redlock_client_stats(w->client, &st) != REDLOCK_OK)
        return UINT64_MAX;
    return st.lost;
}

int hold_acquire(worker *w, slot *s, hold_kind kind, int64_t wait_ms, int64_t lease_ms,
                 holding *h)
{
    int rc;

    *h = (holding){.kind = kind, .owner = w->owner};
    h->lost_before = lost_count(w);
    if (kind == KIND_PERMIT) {
        rc = redlock_semaphore_acquire(s->sem, 1, wait_ms, lease_ms, &h->permit);
        if (rc == REDLOCK_OK)
            h->lock = redlock_permit_lock(h->permit);
        return rc;
    }
    h->lock = kind == KIND_READ ? s->read_lock : s->lock;
    return redlock_acquire_as(h->lock, w->owner, wait_ms, lease_ms);
}

int hold_fenced(const holding *h)
{
    return h->kind == KIND_MUTEX || h->kind == KIND_WRITE || h->kind == KIND_FAIR;
}

int hold_token(const holding *h, uint64_t *token)
{
    return redlock_lock_token_as(h->lock, h->owner, token);
}

/*
 * Whether the hold is still ours, checked locally. remaining_ttl answers
 * from the handle while it holds, but once the hold is lost it asks the
 * nodes how long anyone holds the name: for a read hold or a permit that
 * is the other readers' or holders' time, which would overstate ours.
 * A fencing kind's token query is local and fails once the hold is lost.
 * The other kinds have no token: the client's lost count stands in. Only
 * the watchdog marks a hold lost, and it counts the loss under the
 * handle's mutex in the same step, a mutex remaining_ttl takes too; so a
 * ttl that came from the nodes because of a loss is always followed by a
 * changed count. The worker has one hold at a time, and the watchdog of
 * an unlocked hold is stopped, so a change is this hold's loss.
 */
static int still_ours(worker *w, const holding *h)
{
    uint64_t token;

    if (hold_fenced(h))
        return redlock_lock_token_as(h->lock, h->owner, &token) == REDLOCK_OK;
    return h->lost_before != UINT64_MAX && lost_count(w) == h->lost_before;
}

int hold_confirm(worker *w, const holding *h, int64_t *vend)
{
    int64_t ttl = 0, t0;
    int rc;

    if (!still_ours(w, h))
        return 0;
    t0 = now_ns();
    rc = h->permit ? redlock_permit_remaining_ttl(h->permit, &ttl)
                   : redlock_remaining_ttl_as(h->lock, h->owner, &ttl);
    if (rc != REDLOCK_OK || !still_ours(w, h))
        return 0;
    /* The library computed ttl after t0, so t0 + ttl never overstates it. */
    if (ttl > 0 && t0 + ttl * NS_PER_MS > *vend)
        *vend = t0 + ttl * NS_PER_MS;
    return ttl > 0;
}

int hold_release(holding *h, char *released, size_t cap)
{
    int rc;

    if (h->permit) {
        /* Frees the permit and its handle, reports and all. */
        rc = redlock_semaphore_release(h->permit);
        h->permit = NULL;
        h->lock = NULL;
        snprintf(released, cap, "?");
        return rc;
    }
    rc = redlock_unlock_as(h->lock, h->owner);
    members_outcome(h->lock, released, cap);
    return rc;
}

void hold_grants(const holding *h, char *grants, size_t gcap, char *acks, size_t acap)
{
    members_outcome(h->lock, grants, gcap);
    members_acks(h->lock, acks, acap);
}

void kind_tag(const worker *w, hold_kind kind, char *out, size_t cap)
{
    switch (kind) {
    case KIND_READ: snprintf(out, cap, "R"); break;
    case KIND_WRITE: snprintf(out, cap, "W"); break;
    case KIND_PERMIT: snprintf(out, cap, "P%d", w->cfg.permits); break;
    case KIND_FAIR: snprintf(out, cap, "F"); break;
    default: snprintf(out, cap, "%s", ""); break;
    }
}
