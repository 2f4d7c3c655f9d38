/*
 * Lock handles: the Redisson-compatible API over the quorum coordinator,
 * the waiting loop (release messages, holder TTL, jittered retry) and the
 * bookkeeping of the current hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "lock/context.h"
#include "lock/decide.h"
#include "lock/hold.h"
#include "lock/keys.h"
#include "lock/quorum.h"
#include "lock/watchdog.h"
#include "lock/internal.h"

static void lock_destroy(redlock_lock *l)
{
    redlock__watchdog_remove(l);
    redlock__hold_free_handle(l);
}

void redlock_lock_free(redlock_lock *l)
{
    if (!l)
        return;
    /* Freed by its own on_lost callback (or another's) inside the watchdog
     * tick that is still using it: the tick frees it when it is done, as
     * libuv's uv_close defers a handle's end. */
    if (redlock__watchdog_free_later(l))
        return;
    lock_destroy(l);
}


int redlock_multilock_new(redlock_client *c, const redlock_member *members, size_t n,
                          const redlock_lock_options *opts, redlock_lock **out)
{
    redlock_lock *l;
    int quorum = opts ? opts->quorum : 0;
    size_t i;
    int rc;

    if (!out)
        return redlock__fail(REDLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (!c || !members || n == 0)
        return redlock__fail(REDLOCK_EINVAL, "a lock needs at least one member");
    if (n > REDLOCK__MAX_NODES)
        return redlock__fail(REDLOCK_EINVAL, "at most %d members", REDLOCK__MAX_NODES);
    if (quorum == REDLOCK_QUORUM_ALL)
        quorum = (int)n;
    else if (quorum == 0)
        quorum = (int)n / 2 + 1;
    if (n == 1)
        quorum = 1;
    if (quorum < 1 || quorum > (int)n)
        return redlock__fail(REDLOCK_EINVAL, "quorum %d out of range 1..%zu",
                             opts ? opts->quorum : 0, n);
    for (i = 0; i < n; i++) {
        if (members[i].node >= c->n_nodes)
            return redlock__fail(REDLOCK_EINVAL, "member %zu: node %zu out of range (%zu nodes)",
                                 i, members[i].node, c->n_nodes);
        if ((rc = redlock__check_name(members[i].name)) != REDLOCK_OK)
            return rc;
    }
    l = calloc(1, sizeof(*l));
    if (!l || !(l->members = calloc(n, sizeof(*l->members)))) {
        free(l);
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&l->mu, NULL);
    l->client = c;
    l->n = n;
    l->quorum = quorum;
    l->fencing = opts ? opts->fencing : 0;
    for (i = 0; i < n; i++) {
        redlock__lock_member *m = &l->members[i];
        size_t j;

        m->node = members[i].node;
        for (j = 0; j < i; j++)
            if (strcmp(l->members[j].name, members[i].name) == 0)
                break;
        if (j < i) {
            redlock__share_keys(m, &l->members[j]);
        } else if (redlock__member_keys(m, members[i].name) != REDLOCK_OK) {
            redlock_lock_free(l);
            return redlock__fail(REDLOCK_ENOMEM, "out of memory");
        }
    }
    *out = l;
    return REDLOCK_OK;
}

int redlock_lock_new(redlock_client *c, const char *name, const redlock_lock_options *opts,
                     redlock_lock **out)
{
    redlock_member members[REDLOCK__MAX_NODES];
    size_t i;
    int rc;

    if (!out)
        return redlock__fail(REDLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (!c)
        return redlock__fail(REDLOCK_EINVAL, "client is NULL");
    if ((rc = redlock__check_name(name)) != REDLOCK_OK)
        return rc;
    for (i = 0; i < c->n_nodes; i++) {
        members[i].node = i;
        members[i].name = name;
    }
    return redlock_multilock_new(c, members, c->n_nodes, opts, out);
}

const char *redlock_lock_name(const redlock_lock *l)
{
    return l ? l->members[0].name : "";
}

size_t redlock_lock_member_count(const redlock_lock *l)
{
    return l ? l->n : 0;
}

int redlock_lock_quorum(const redlock_lock *l)
{
    return l ? l->quorum : 0;
}

void redlock_lock_set_on_lost(redlock_lock *l, redlock_on_lost_fn fn, void *ud)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->on_lost = fn;
    l->on_lost_ud = ud;
    pthread_mutex_unlock(&l->mu);
}

int redlock_lock_report(redlock_lock *l, size_t member, redlock_member_report *out)
{
    if (!l || !out || member >= l->n)
        return redlock__fail(REDLOCK_EINVAL, "member index out of range");
    memset(out, 0, sizeof(*out));
    out->latency_us = -1;
    if (redlock__report_of(l))
        *out = redlock__report_of(l)[member];
    return REDLOCK_OK;
}

/* The first member failure of the calling thread's last attempt through l,
 * so a "no quorum" message also says why (e.g. "-LOADING"); "" if none. */
static const char *first_failure(const redlock_lock *l)
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

static void record_latency(redlock_client *c, int64_t ns)
{
    int64_t us = ns / 1000;
    int b = 0;

    while (us > 1 && b < REDLOCK_LATENCY_BUCKETS - 1) {
        us >>= 1;
        b++;
    }
    redlock__stat_add(&c->stats.acquire_latency_us[b], 1);
}

static void hold_acquired(redlock_lock *l, uint64_t owner, const char *field,
                          int64_t lease_ms, int watchdog,
                          const redlock__attempt_result *res)
{
    redlock_client *c = l->client;
    int listed;

    pthread_mutex_lock(&l->mu);
    listed = redlock__hold_record(l, owner, field, lease_ms, watchdog, res,
                                  c->tp.ops->now_ns(c->tp.ctx));
    pthread_mutex_unlock(&l->mu);
    if (listed)
        redlock__watchdog_add(l);
    redlock__stat_add(&c->stats.acquired, 1);
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

static void *watch_members(redlock_lock *l, int64_t deadline)
{
    const char *names[REDLOCK__MAX_NODES];
    size_t nodes[REDLOCK__MAX_NODES], i;

    for (i = 0; i < l->n; i++) {
        names[i] = l->members[i].name;
        nodes[i] = l->members[i].node;
    }
    return l->client->tp.ops->watch(l->client->tp.ctx, names, nodes, l->n, deadline);
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
    redlock__attempt_result res; /* the last attempt's */
    int64_t attempt_ns;      /* how long it took */
    void *watch;             /* release messages, once subscribed */
    int watched;             /* subscribing was tried (once) */
    uint64_t seen;
    int woken;               /* the last wait ended on a release message */
    int losses;              /* races lost in a row (see backoff_until) */
    int unavailable;         /* ended on the unavailable timeout */
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
    int reentry, settle, rc;
    int64_t before;

    pthread_mutex_lock(&l->mu);
    reentry = l->state == REDLOCK__HELD && l->owner == a->owner;
    settle = l->state != REDLOCK__HELD;
    pthread_mutex_unlock(&l->mu);
    if (settle)
        redlock__watchdog_settle(l);
    before = now_of(a);
    rc = redlock__attempt(l, a->field, a->lease_ms, reentry, &a->res);
    a->attempt_ns = now_of(a) - before;
    if (rc == REDLOCK_OK) {
        hold_acquired(l, a->owner, a->field, a->lease_ms, a->watchdog, &a->res);
        record_latency(a->c, now_of(a) - a->start_ns);
    } else if (rc == REDLOCK_EBUSY) {
        redlock__stat_add(&a->c->stats.busy, 1);
    } else if (rc == REDLOCK_ENO_QUORUM) {
        redlock__stat_add(&a->c->stats.no_quorum, 1);
    }
    return rc;
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
    if (redlock__canceled(a->c)) {
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

/* Step: sleep until the next attempt is worth making: a release message,
 * the holder's TTL, a random delay, or a back-off after a lost race.
 * Returns REDLOCK_ECLOSED if the client is closing. */
static int sleep_until_next(acquire *a, int rc)
{
    const redlock__transport_ops *ops = a->c->tp.ops;
    int64_t now = now_of(a), until = next_try(a->c, rc, &a->res, now);

    if (until > a->deadline_ns)
        until = a->deadline_ns;
    /* A grant that came back too late to be valid backs off like a lost
     * race: its own abort's release message would wake it. */
    if (rc == REDLOCK_ETIMEOUT) {
        a->losses++;
        a->woken = 0;
        return ops->wait(a->c->tp.ctx, a->watch, &a->seen,
                         backoff_until(now, a->attempt_ns, a->losses, a->deadline_ns));
    }
    a->losses = a->woken && rc == REDLOCK_EBUSY && a->l->n > 1 ? a->losses + 1 : 0;
    rc = ops->wait(a->c->tp.ctx, a->watch, &a->seen, until);
    a->woken = rc == REDLOCK_OK;
    if (a->woken && a->losses > 0)
        rc = ops->wait(a->c->tp.ctx, a->watch, &a->seen,
                       backoff_until(now_of(a), a->attempt_ns, a->losses, a->deadline_ns));
    return rc;
}

/* Step: the caller's answer, with its message. */
static int finish(acquire *a, int rc)
{
    redlock_lock *l = a->l;
    const redlock__attempt_result *res = &a->res;
    const char *why = first_failure(l), *sep = *why ? "; " : "";

    if (a->watch)
        a->c->tp.ops->unwatch(a->c->tp.ctx, a->watch);
    switch (rc) {
    case REDLOCK_OK:
        return REDLOCK_OK;
    case REDLOCK_EBUSY:
        return redlock__fail(rc, "lock '%s' is held by another owner", l->members[0].name);
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

/* attempt -> (over? finish) -> subscribe once, then attempt at once ->
 * sleep until the next attempt -> attempt ... */
int redlock_acquire_as(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms)
{
    acquire a;
    int rc;

    if (!l)
        return redlock__fail(REDLOCK_EINVAL, "lock is NULL");
    if (owner == 0)
        return redlock__fail(REDLOCK_EINVAL, "owner id 0 is reserved");
    memset(&a, 0, sizeof(a));
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
    redlock__owner_field(a.c, owner, a.field, sizeof(a.field));
    a.start_ns = now_of(&a);
    a.deadline_ns = wait_ms < 0 ? INT64_MAX : a.start_ns + wait_ms * REDLOCK__NS_PER_MS;
    for (;;) {
        rc = attempt_once(&a);
        if (rc == REDLOCK_OK || wait_is_over(&a, &rc))
            break;
        if (!a.watched && !a.c->disable_pubsub) {
            /* Subscribe first, then try again at once: a release between
             * the failed attempt and the subscription is then not missed. */
            a.watched = 1;
            a.watch = watch_members(l, now_of(&a) + redlock__node_timeout_ns(a.c, a.lease_ms));
            continue;
        }
        if (sleep_until_next(&a, rc) == REDLOCK_ECLOSED) {
            rc = REDLOCK_ECLOSED;
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

/* What an unlock knows before it sends anything, read under l->mu. */
typedef struct unlock_snapshot {
    int ours;          /* this handle records a hold of the owner */
    int final;         /* and this unlock drops its last count */
    int expired;       /* its validity ended before the unlock */
    int64_t lease_ms;
    int64_t give_up_ns; /* background releases stop here */
    redlock__gens gens[REDLOCK__MAX_NODES];
} unlock_snapshot;

/* Nonzero (and the loss forgotten, its reason in *reason) when owner's
 * hold through l was lost: the unlock then only reports it. */
static int take_loss(redlock_lock *l, uint64_t owner, int *reason)
{
    int lost_here = l->state == REDLOCK__LOST && l->owner == owner;
    int remembered = redlock__hold_forget_lost(l, owner);

    if (!lost_here && !remembered)
        return 0;
    *reason = l->lost_reason;
    if (lost_here)
        l->state = REDLOCK__FREE;
    return 1;
}

static void snapshot(redlock_lock *l, uint64_t owner, unlock_snapshot *s)
{
    redlock_client *c = l->client;
    int64_t now = c->tp.ops->now_ns(c->tp.ctx);

    s->ours = l->state == REDLOCK__HELD && l->owner == owner;
    s->final = s->ours && l->count == 1;
    s->lease_ms = s->ours ? l->lease_ms : c->watchdog_lease_ms;
    /* Validity ran out before anyone noticed (a fixed lease held too long,
     * or a watchdog tick still pending): the caller must hear of it, even
     * if some members still had the key to release. */
    s->expired = s->ours && now >= l->validity_end_ns;
    s->give_up_ns = s->ours && !l->watchdog && l->validity_end_ns > now
                        ? l->validity_end_ns
                        : now + s->lease_ms * REDLOCK__NS_PER_MS;
}

/* Sends the release (and, after a last release that some member only
 * decremented, a drop-all there); fills the tally. */
static int release(redlock_lock *l, uint64_t owner, unlock_snapshot *s,
                   redlock__unlock_tally *t)
{
    redlock_client *c = l->client;
    char field[64];
    size_t m;
    int rc;

    /* The watchdog stops before the last release goes out, so no renewal
     * can outlive or re-create a released lock. */
    if (s->final)
        redlock__watchdog_remove(l);
    /* Read after the watchdog stopped: a restore it made carries its own
     * generation. Without a hold here the generation is unknown, and any
     * hold of this owner is released. */
    pthread_mutex_lock(&l->mu);
    for (m = 0; m < l->n; m++)
        s->gens[m] = l->members[m].gens;
    pthread_mutex_unlock(&l->mu);
    redlock__owner_field(c, owner, field, sizeof(field));
    rc = redlock__release_members(l, field, s->ours ? (const redlock__gens *)s->gens : NULL,
                                  s->lease_ms, 0, s->give_up_ns, &t->released,
                                  &t->decremented, &t->not_held);
    if (rc)
        return rc;
    pthread_mutex_lock(&l->mu);
    if (s->ours && l->state == REDLOCK__HELD && l->owner == owner && --l->count == 0)
        l->state = REDLOCK__FREE;
    pthread_mutex_unlock(&l->mu);
    if (s->final && t->decremented > 0) {
        /* A member that was re-acquired by the watchdog has a lower count
         * than the others... or a higher one here: drop our field there. */
        int a = 0, b = 0, d = 0;

        redlock__release_members(l, field, (const redlock__gens *)s->gens, s->lease_ms, 1,
                                 s->give_up_ns, &a, &b, &d);
    }
    return REDLOCK_OK;
}

/* The caller's answer, with its message. */
static int settle(redlock_lock *l, const unlock_snapshot *s, redlock__unlock_tally *t)
{
    t->quorum = l->quorum;
    t->ours = s->ours;
    t->expired = s->expired;
    switch (redlock__unlock_outcome(t)) {
    case REDLOCK_OK:
        redlock__stat_add(&l->client->stats.released, 1);
        return REDLOCK_OK;
    case REDLOCK_ELOST:
        return redlock__fail(REDLOCK_ELOST, s->expired ? "lock '%s': validity ended before unlock"
                                                       : "lock '%s' expired before unlock",
                             l->members[0].name);
    case REDLOCK_ENO_QUORUM:
        return redlock__fail(REDLOCK_ENO_QUORUM, "lock '%s': no member answered the release%s%s",
                             l->members[0].name, *first_failure(l) ? "; " : "",
                             first_failure(l));
    default:
        /* Without a hold recorded in this handle, only a quorum of our
         * fields proves ownership: fragments left by a lost or failed hold
         * are cleaned up, but do not make the caller an owner. */
        return redlock__fail(REDLOCK_ENOT_OWNER, "lock '%s' is not held by this owner",
                             l->members[0].name);
    }
}

/* snapshot -> release -> settle. */
int redlock_unlock_as(redlock_lock *l, uint64_t owner)
{
    redlock__unlock_tally tally;
    unlock_snapshot s;
    int lost, reason = 0, rc;

    if (!l)
        return redlock__fail(REDLOCK_EINVAL, "lock is NULL");
    memset(&tally, 0, sizeof(tally));
    memset(&s, 0, sizeof(s));
    pthread_mutex_lock(&l->mu);
    lost = take_loss(l, owner, &reason);
    if (!lost)
        snapshot(l, owner, &s);
    pthread_mutex_unlock(&l->mu);
    if (lost)
        return redlock__fail(REDLOCK_ELOST, "lock '%s' was lost before unlock (%s)",
                             l->members[0].name, redlock_strerror(reason));
    if ((rc = release(l, owner, &s, &tally)) != REDLOCK_OK)
        return rc;
    return settle(l, &s, &tally);
}

int redlock_unlock(redlock_lock *l)
{
    return redlock_unlock_as(l, redlock__gettid());
}

int redlock_lock_token_as(redlock_lock *l, uint64_t owner, uint64_t *token)
{
    int rc = REDLOCK_OK;

    if (!l || !token)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument");
    pthread_mutex_lock(&l->mu);
    if (l->state == REDLOCK__HELD && l->owner == owner && l->fencing)
        *token = l->token;
    else
        rc = REDLOCK_ENOT_OWNER;
    pthread_mutex_unlock(&l->mu);
    if (rc)
        return redlock__fail(rc, "no fenced hold of '%s' by this owner", l->members[0].name);
    return REDLOCK_OK;
}

int redlock_lock_token(redlock_lock *l, uint64_t *token)
{
    return redlock_lock_token_as(l, redlock__gettid(), token);
}
