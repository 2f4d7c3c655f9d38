/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The acquire and its wait: attempts, release messages, the holder's TTL,
 * jittered back-off after a lost race, cancel and the unavailable timeout,
 * each a named step over one small state struct.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "core/wait.h"
#include "lock/context.h"
#include "lock/decide.h"
#include "lock/fair.h"
#include "lock/facts.h"
#include "lock/hold.h"
#include "lock/keys.h"
#include "lock/quorum.h"
#include "lock/release.h"
#include "lock/watchdog.h"
#include "lock/internal.h"

/* Records a granted attempt; 0 when it was a re-entry of a hold that
 * ended while the attempt was in flight (lost to the watchdog): its
 * grants are not a hold of their own, and the clean-up of the lost hold
 * may already have dropped them. */
static int hold_acquired(redlock_lock *l, uint64_t owner, const char *field,
                         int64_t lease_ms, int watchdog,
                         const redlock__attempt_result *res)
{
    redlock_client *c = l->client;
    int listed;

    pthread_mutex_lock(&l->mu);
    if (!res->fresh && !(l->state == REDLOCK__HELD && l->owner == owner)) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    listed = redlock__hold_record(l, owner, field, lease_ms, watchdog, res,
                                  c->tp.ops->now_ns(c->tp.ctx));
    pthread_mutex_unlock(&l->mu);
    if (listed)
        redlock__watchdog_add(l);
    redlock__stat_add(&c->stats.acquired, 1);
    return 1;
}

/* Waiting is bounded by the caller's deadline; between attempts a waiter
 * sleeps until a release message, the holder's TTL, or a random delay. */
static int64_t next_try(redlock_client *c, int rc, const redlock__attempt_result *res,
                        int64_t now)
{
    int64_t delay_ms = 1 + (int64_t)redlock__rand_below((uint64_t)c->retry_delay_ms);

    if (rc == REDLOCK_EBUSY && res->min_pttl_ms >= 0) {
        /* The holder's TTL: a release message usually comes first. */
        int64_t ttl = res->min_pttl_ms + 1;

        if (c->disable_pubsub || ttl < delay_ms)
            return now + (c->disable_pubsub && ttl > delay_ms ? delay_ms : ttl) *
                             REDLOCK__NS_PER_MS;
        return now + ttl * REDLOCK__NS_PER_MS;
    }
    return now + delay_ms * REDLOCK__NS_PER_MS;
}

/*
 * A fair waiter's channels are its own, so the handle keeps the last
 * waiter's subscription for that owner's next wait: a worker that asks
 * again and again subscribes once, not per wait. What a kept channel
 * heard between waits is skipped (redlock_acquire_as).
 */
static void *take_kept_watch(redlock_lock *l, const char *field)
{
    void *w = NULL;

    pthread_mutex_lock(&l->mu);
    if (l->fair_watch && strcmp(l->fair_watch_field, field) == 0) {
        w = l->fair_watch;
        l->fair_watch = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    return w;
}

static void keep_or_unwatch(redlock_lock *l, const char *field, void *w)
{
    pthread_mutex_lock(&l->mu);
    if (!l->fair_watch) {
        l->fair_watch = w;
        snprintf(l->fair_watch_field, sizeof(l->fair_watch_field), "%s", field);
        w = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    if (w)
        l->client->tp.ops->unwatch(l->client->tp.ctx, w);
}

/* A read-write lock's waiter also listens on the plain lock's channel: a
 * plain lock of the same name excludes it, and publishes only there. A
 * fair lock's waiter listens only on its own channel: a release wakes the
 * next waiter, not everyone. *kept says the watch is the handle's kept
 * one. */
static void *watch_members(redlock_lock *l, const char *field, int64_t deadline, int *kept)
{
    const char *channels[2 * REDLOCK__MAX_NODES];
    char *own[REDLOCK__MAX_NODES] = {0};
    size_t nodes[2 * REDLOCK__MAX_NODES], i, n = 0;
    void *w;

    *kept = 0;
    if (l->kind == REDLOCK__KIND_FAIR && (w = take_kept_watch(l, field))) {
        *kept = 1;
        return w;
    }
    for (i = 0; i < l->n; i++) {
        if (l->kind == REDLOCK__KIND_FAIR) {
            if (!(own[i] = redlock__waiter_channel(&l->members[i], field)))
                break;
            channels[n] = own[i];
        } else {
            channels[n] = redlock__channel(&l->members[i], l->kind);
        }
        nodes[n++] = l->members[i].node;
        if (l->kind == REDLOCK__KIND_READ || l->kind == REDLOCK__KIND_WRITE) {
            channels[n] = redlock__key(&l->members[i], REDLOCK__KEY_CHANNEL);
            nodes[n++] = l->members[i].node;
        }
    }
    w = i == l->n ? l->client->tp.ops->watch(l->client->tp.ctx, channels, nodes, n, deadline)
                  : NULL;
    for (i = 0; i < l->n; i++)
        free(own[i]);
    return w;
}

/*
 * Losing the race that a release started means other waiters were woken by
 * the same release (and with several members the vote may have split); all
 * of them going again at once loses again. After such a loss a waiter backs
 * off a random slice of a few attempt durations, doubling per loss in a
 * row, so one of them goes first. A lone waiter never loses that race and
 * never waits.
 */
static int64_t backoff_until(int64_t now, int64_t attempt_ns, int losses, int64_t deadline)
{
    int64_t span = attempt_ns << (losses < 6 ? losses : 6);
    int64_t until = now + (int64_t)redlock__rand_below((uint64_t)(span > 0 ? span : 1));

    return until < deadline ? until : deadline;
}

/*
 * A lease must outlast the drift plus two node timeouts: otherwise no grant
 * can come back valid, and every attempt would be granted, aborted (its
 * release message waking the same waiter) and tried again at once.
 */
static int check_lease(const redlock_client *c, int64_t lease_ms)
{
    int64_t timeout_ms = redlock__node_timeout_ns(c, lease_ms) / REDLOCK__NS_PER_MS;

    if (redlock__lease_too_short(lease_ms, c->drift_factor, timeout_ms))
        return redlock__fail(REDLOCK_EINVAL,
                             "lease of %lld ms is too short: it must exceed the drift "
                             "(%lld ms) plus two node timeouts (%lld ms)",
                             (long long)lease_ms,
                             (long long)redlock__drift_ms(lease_ms, c->drift_factor),
                             (long long)(2 * timeout_ms));
    return REDLOCK_OK;
}

/* Whether no quorum of this lock's members has been reachable for the
 * client's unavailable timeout. The clock is the handle's, kept across
 * calls, so an acquire that waits forever (or a caller that waits in
 * slices) still ends on a broken node list; other locks, with other
 * members, do not reset it. */
static int unavailable_too_long(redlock_lock *l, int rc, int64_t now)
{
    int64_t since;

    if (rc != REDLOCK_ENO_QUORUM) {
        __atomic_store_n(&l->unavailable_since_ns, 0, __ATOMIC_RELAXED);
        return 0;
    }
    since = __atomic_load_n(&l->unavailable_since_ns, __ATOMIC_RELAXED);
    if (since == 0) {
        __atomic_compare_exchange_n(&l->unavailable_since_ns, &since, now, 0,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        return 0;
    }
    return now - since >= l->client->unavailable_timeout_ms * REDLOCK__NS_PER_MS;
}

/* One acquire with its wait: the state its named steps share. */
typedef struct acquire {
    redlock_lock *l;
    redlock_client *c;
    uint64_t owner;
    char field[64];
    int64_t wait_ms, lease_ms;
    int watchdog;            /* the lease is the watchdog's, renewed */
    int64_t start_ns, deadline_ns;
    int64_t attempt_ns;      /* how long it took */
    void *watch;             /* release messages, once subscribed */
    int watched;             /* subscribing was tried (once) */
    uint64_t seen;
    int woken;               /* the last wait ended on a release message */
    int losses;              /* races lost in a row (see backoff_until) */
    int unavailable;         /* ended on the unavailable timeout */
    uint64_t cancels;        /* the lock's cancel count when this began */
    /* Hand-off latency: from when a waiter last learned the lock may be
     * free (a release message, the holder's TTL, a retry delay) to its
     * grant. A flag, not a zero time: a fake transport's clock starts at 0. */
    int busy_seen;
    int64_t handoff_from_ns;
    /* Fair locks: the waiter's ticket, once taken (after subscribing, so
     * a release between queueing and listening cannot be missed). */
    int ticketed;
    char ticket[24];
    redlock__attempt_result res; /* the last attempt's; last: not cleared whole */
} acquire;

static int64_t now_of(const acquire *a)
{
    return a->c->tp.ops->now_ns(a->c->tp.ctx);
}

/* Step: one attempt. A fresh acquire first waits for a tick cleaning up a
 * lost hold of this lock, so the new hold comes after that clean-up. */
static int attempt_once(acquire *a)
{
    redlock_lock *l = a->l;
    int reentry, settle, lost, reason, rc;
    int64_t before;

    pthread_mutex_lock(&l->mu);
    reentry = l->state == REDLOCK__HELD && l->owner == a->owner;
    settle = l->state != REDLOCK__HELD;
    /* This owner still holds, as far as it knows: an acquire now is a
     * re-entry of a lost hold, not a fresh one, which would give nested
     * code a new hold and leave the outer unlock nothing to report. */
    lost = l->state == REDLOCK__LOST && l->owner == a->owner;
    reason = l->lost_reason;
    pthread_mutex_unlock(&l->mu);
    if (lost)
        return redlock__fail(REDLOCK_ELOST,
                             "lock '%s': this owner's hold was lost (%s); redlock_unlock() "
                             "reports and clears that before the lock can be taken again",
                             redlock_lock_name(l), redlock_strerror(reason));
    if (settle)
        redlock__watchdog_settle(l);
    before = now_of(a);
    rc = redlock__attempt(l, a->field, a->lease_ms, reentry,
                          a->deadline_ns == INT64_MAX ? -1
                          : a->deadline_ns > before ? (a->deadline_ns - before) / REDLOCK__NS_PER_MS
                                                    : 0,
                          a->ticketed ? a->ticket : NULL, &a->res);
    a->attempt_ns = now_of(a) - before;
    if (rc == REDLOCK_OK &&
        !hold_acquired(l, a->owner, a->field, a->lease_ms, a->watchdog, &a->res)) {
        unsigned char every[REDLOCK__MAX_NODES];

        /* Undone wherever the clean-up has not dropped it already. */
        memset(every, 1, sizeof(every));
        redlock__abort_members(l, a->field, a->res.request_id, a->lease_ms, NULL, every);
        return redlock__fail(REDLOCK_ELOST,
                             "lock '%s': the hold being re-entered was lost meanwhile",
                             redlock_lock_name(l));
    }
    if (rc == REDLOCK_OK) {
        redlock__stats_observe_acquire(a->c, now_of(a) - a->start_ns);
        if (a->busy_seen)
            redlock__stats_observe_handoff(a->c, now_of(a) - a->handoff_from_ns);
        if (!reentry) /* after the latencies: the facts are not the acquire's */
            redlock__facts_after_grant(l, a->field, a->lease_ms, &a->res);
    } else if (rc == REDLOCK_EBUSY) {
        redlock__stat_add(&a->c->stats.busy, 1);
        if (!a->busy_seen) {
            a->busy_seen = 1;
            a->handoff_from_ns = now_of(a);
        }
    } else if (rc == REDLOCK_ENO_QUORUM) {
        redlock__stat_add(&a->c->stats.no_quorum, 1);
    }
    return rc;
}

/* Whether the client, or this lock since the acquire began, was canceled. */
static int canceled(const acquire *a)
{
    return redlock__canceled(a->c) ||
           __atomic_load_n(&a->l->cancels, __ATOMIC_ACQUIRE) != a->cancels;
}

/* Step: after a failed attempt, whether the wait is over; *rc becomes the
 * caller's answer if it is. */
static int wait_is_over(acquire *a, int *rc)
{
    int64_t now = now_of(a);

    /* Refusals for good (auth, TLS, config) that leave no quorum end
     * here: the attempt already returned their code. */
    if (!redlock__attempt_retryable(*rc))
        return 1;
    if (canceled(a)) {
        *rc = REDLOCK_ECANCELED;
        return 1;
    }
    if (unavailable_too_long(a->l, *rc, now)) {
        a->unavailable = 1;
        return 1;
    }
    if (a->wait_ms == 0 || now >= a->deadline_ns) {
        *rc = redlock__wait_outcome(*rc, a->wait_ms);
        return 1;
    }
    return 0;
}

static int stop_if_canceled(void *a)
{
    return canceled(a);
}

/* Waits on the watch until `until`, a release message, or this acquire's
 * cancel. A cancel kicks every waiter of the client (the subscriber cannot
 * tell whose it was); the wait tests this acquire's cancel at each kick,
 * so a cancel of another handle does not end it (an attempt then would be
 * one for nothing, made by every waiter of the client for each cancel
 * anywhere), and one of this acquire is not missed however it lands. */
static int wait_for(acquire *a, int64_t until)
{
    int rc;

    do
        rc = a->c->tp.ops->wait(a->c->tp.ctx, a->watch, &a->seen, until, stop_if_canceled, a);
    while (rc == REDLOCK_ETIMEOUT && now_of(a) < until && !canceled(a));
    return rc;
}

/* Step: sleep until the next attempt is worth making: a release message,
 * the holder's TTL, a random delay, or a back-off after a lost race.
 * Returns REDLOCK_ECLOSED if the client is closing. */
static int sleep_until_next(acquire *a, int rc)
{
    int64_t now = now_of(a), until = next_try(a->c, rc, &a->res, now);

    /* A fair waiter renews its place in the queue with every attempt, and
     * a lost wake-up costs it at most this long. */
    if (a->l->kind == REDLOCK__KIND_FAIR) {
        int64_t renew_at = now + atoll(a->l->wait_lease) / 3 * REDLOCK__NS_PER_MS;

        if (until > renew_at)
            until = renew_at;
    }
    if (until > a->deadline_ns)
        until = a->deadline_ns;
    /* A grant that came back too late to be valid backs off like a lost
     * race: a plain lock's own abort publishes the release that wakes it.
     * A fair waiter's abort wakes the next waiter instead, so its back-off
     * ends in time to renew its places. */
    if (rc == REDLOCK_ETIMEOUT) {
        int64_t back = backoff_until(now, a->attempt_ns, ++a->losses, a->deadline_ns);

        a->woken = 0;
        if (a->l->kind == REDLOCK__KIND_FAIR && back > until)
            back = until;
        return wait_for(a, back);
    }
    /* A fair lock wakes only the waiter that is first: it lost no race. */
    a->losses = a->woken && rc == REDLOCK_EBUSY && a->l->n > 1 &&
                        a->l->kind != REDLOCK__KIND_FAIR
                    ? a->losses + 1
                    : 0;
    rc = wait_for(a, until);
    if (a->busy_seen)
        a->handoff_from_ns = now_of(a);
    a->woken = rc == REDLOCK_OK;
    if (a->woken && a->losses > 0)
        rc = wait_for(a, backoff_until(now_of(a), a->attempt_ns, a->losses, a->deadline_ns));
    return rc;
}

/* A fair waiter that ends its wait leaves every member's queue at once. A
 * granted one does not wait for that: where its grant did not take its
 * place out, the release does (fair_release.lua), and until then the lock
 * is its own anyway. */
static void leave_queue(acquire *a, int rc)
{
    unsigned char include[REDLOCK__MAX_NODES];

    if (rc == REDLOCK_OK)
        return;
    memset(include, 1, sizeof(include));
    redlock__leave_members(a->l, a->field, a->ticket, include);
}

/* Step: the caller's answer, with its message. */
static int finish(acquire *a, int rc)
{
    redlock_lock *l = a->l;
    const redlock__attempt_result *res = &a->res;
    const char *why = redlock__first_failure(l), *sep = *why ? "; " : "";

    if (a->watch && l->kind == REDLOCK__KIND_FAIR)
        keep_or_unwatch(l, a->field, a->watch);
    else if (a->watch)
        a->c->tp.ops->unwatch(a->c->tp.ctx, a->watch);
    if (a->ticketed)
        leave_queue(a, rc);
    switch (rc) {
    case REDLOCK_OK:
        return REDLOCK_OK;
    case REDLOCK_EBUSY:
        if (l->kind == REDLOCK__KIND_SEMAPHORE)
            return redlock__fail(rc, "semaphore '%s': too few permits free (%s asked)",
                                 l->members[0].name, l->permits);
        return redlock__fail(rc, "lock '%s' is held by another owner", l->members[0].name);
    case REDLOCK_EUPGRADE:
        return redlock__fail(rc, "lock '%s': this owner holds a read hold, which cannot be "
                             "upgraded to a write hold (release it first)",
                             l->members[0].name);
    case REDLOCK_ETIMEOUT:
        return redlock__fail(rc, "lock '%s' not acquired within %lld ms", l->members[0].name,
                             (long long)a->wait_ms);
    case REDLOCK_ECANCELED:
        return redlock__fail(rc, "acquire of '%s' canceled", l->members[0].name);
    case REDLOCK_EAUTH:
    case REDLOCK_ETLS:
    case REDLOCK_ECONFIG:
        return redlock__fail(rc, "lock '%s': %d of %zu members refuse for good, quorum is %d%s%s",
                             l->members[0].name, res->permanent, l->n, l->quorum, sep, why);
    case REDLOCK_ENO_QUORUM:
        if (res->granted >= l->quorum && l->fencing)
            return redlock__fail(rc, "lock '%s': granted, but too few members stored the "
                                 "fencing token (%d confirmed of %zu, quorum is %d)%s%s",
                                 l->members[0].name, res->fence_confirmed, l->n, l->quorum,
                                 sep, why);
        if (a->unavailable)
            return redlock__fail(rc, "lock '%s': no quorum of nodes reachable for %lld ms: "
                                 "%d of %zu members failed, quorum is %d%s%s",
                                 l->members[0].name, (long long)a->c->unavailable_timeout_ms,
                                 res->failed, l->n, l->quorum, sep, why);
        /* The attempt stops as soon as Q is out of reach, so members that
         * had not answered yet are neither reachable nor failed: say what
         * is known. */
        return redlock__fail(rc,
                             "lock '%s': no quorum: %d of %zu members failed, quorum is %d%s%s",
                             l->members[0].name, res->failed, l->n, l->quorum, sep, why);
    default:
        return rc;
    }
}

int redlock_acquire_as(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms)
{
    if (!l)
        return redlock__fail(REDLOCK_EINVAL, "lock is NULL");
    return redlock__acquire_seen(l, owner, wait_ms, lease_ms,
                                 __atomic_load_n(&l->cancels, __ATOMIC_ACQUIRE));
}

/* attempt -> (over? finish) -> subscribe once, then attempt at once ->
 * sleep until the next attempt -> attempt ... */
int redlock__acquire_seen(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms,
                          uint64_t cancels_seen)
{
    acquire a;
    int rc;

    if (owner == 0)
        return redlock__fail(REDLOCK_EINVAL, "owner id 0 is reserved");
    /* On a loop-driven client's thread, outside its fibers: the loop is
     * driven until this call is done (a renewal parked in it may be what
     * the call waits for). */
    if (redlock__loop_runs_call(l->client, redlock__wait_parks()))
        return l->client->loop.run_sync(l->client->loop.loop, l, 0, owner, wait_ms, lease_ms);
    /* Nothing would renew a watchdog lease: no thread, no loop yet. */
    if (l->client->event_loop && !l->client->loop.loop && lease_ms <= 0 &&
        !l->client->event_loop_watchdog_thread)
        return redlock__fail(REDLOCK_EINVAL, "lock '%s': a watchdog lease on a loop-driven client "
                             "needs the loop (redlock_loop_attach) first",
                             l->members[0].name);
    memset(&a, 0, offsetof(acquire, res));
    redlock__attempt_result_clear(&a.res);
    a.l = l;
    a.c = l->client;
    a.owner = owner;
    a.wait_ms = wait_ms;
    a.watchdog = lease_ms <= 0;
    a.lease_ms = a.watchdog ? a.c->watchdog_lease_ms : lease_ms;
    if ((rc = check_lease(a.c, a.lease_ms)) != REDLOCK_OK)
        return rc;
    if (redlock__canceled(a.c))
        return redlock__fail(REDLOCK_ECANCELED, "lock '%s': the client was canceled",
                             l->members[0].name);
    a.cancels = cancels_seen;
    redlock__hold_field(l, owner, a.field, sizeof(a.field));
    a.start_ns = now_of(&a);
    a.deadline_ns = wait_ms < 0 ? INT64_MAX : a.start_ns + wait_ms * REDLOCK__NS_PER_MS;
    for (;;) {
        rc = attempt_once(&a);
        if (rc == REDLOCK_OK || wait_is_over(&a, &rc))
            break;
        /* A fair try without a ticket that a quorum refused brought their
         * candidates: the ticket, without a round of its own. It queues
         * with the next attempt, made at once (after subscribing): a
         * release wakes only waiters in the queue, so sleeping first would
         * wait out a third of its place for nothing. */
        if (l->kind == REDLOCK__KIND_FAIR && !a.ticketed &&
            a.res.ticket_answers >= l->quorum) {
            redlock__fmt_u64(a.ticket, sizeof(a.ticket), a.res.ticket_best);
            a.ticketed = 1;
            if (a.watched || a.c->disable_pubsub)
                continue;
        }
        if (!a.watched && !a.c->disable_pubsub) {
            /* Subscribe first, then try again at once: a release between
             * the failed attempt and the subscription is then not missed. */
            int kept;

            a.watched = 1;
            a.watch = watch_members(l, a.field,
                                    now_of(&a) + redlock__node_timeout_ns(a.c, a.lease_ms),
                                    &kept);
            /* A kept subscription starts from what it has heard so far:
             * messages of the last wait (late releases of stragglers)
             * must not wake this one. Nothing was queued since, so
             * nothing for this wait is among them. */
            if (kept)
                a.c->tp.ops->wait(a.c->tp.ctx, a.watch, &a.seen, 0, NULL, NULL);
            continue;
        }
        /* Else a fair waiter takes a ticket in a round of its own (after
         * subscribing; without release messages it queues all the same
         * and learns of its turn at its next renewal). */
        if (l->kind == REDLOCK__KIND_FAIR && !a.ticketed && (a.watched || a.c->disable_pubsub) &&
            redlock__fair_ticket(l, a.lease_ms, a.ticket) == REDLOCK_OK) {
            a.ticketed = 1;
            continue;
        }
        if (sleep_until_next(&a, rc) == REDLOCK_ECLOSED) {
            rc = REDLOCK_ECLOSED;
            break;
        }
        /* Woken by a cancel: no further attempt, so nothing more is
         * granted (the failed attempts were aborted as they failed). */
        if (canceled(&a)) {
            rc = REDLOCK_ECANCELED;
            break;
        }
    }
    return finish(&a, rc);
}

int redlock_lock_acquire(redlock_lock *l)
{
    return redlock_acquire_as(l, redlock__gettid(), -1, 0);
}

int redlock_lock_acquire_lease(redlock_lock *l, int64_t lease_ms)
{
    if (lease_ms <= 0)
        return redlock__fail(REDLOCK_EINVAL, "lease_ms must be > 0");
    return redlock_acquire_as(l, redlock__gettid(), -1, lease_ms);
}

int redlock_try_lock(redlock_lock *l)
{
    return redlock_acquire_as(l, redlock__gettid(), 0, 0);
}

int redlock_try_lock_for(redlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    if (wait_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "wait_ms must be >= 0");
    return redlock_acquire_as(l, redlock__gettid(), wait_ms, lease_ms);
}

