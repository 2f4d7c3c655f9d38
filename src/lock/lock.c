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

int redlock_acquire_as(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms)
{
    redlock_client *c;
    const redlock__transport_ops *ops;
    redlock__attempt_result res;
    char field[64];
    int64_t deadline, start;
    void *watch = NULL;
    uint64_t seen = 0;
    int watchdog = lease_ms <= 0, rc, watched = 0, woken = 0, losses = 0, settle, reentry;
    int unavailable = 0;
    int64_t attempt_ns = 0;

    if (!l)
        return redlock__fail(REDLOCK_EINVAL, "lock is NULL");
    if (owner == 0)
        return redlock__fail(REDLOCK_EINVAL, "owner id 0 is reserved");
    c = l->client;
    ops = c->tp.ops;
    if (watchdog)
        lease_ms = c->watchdog_lease_ms;
    if ((rc = check_lease(c, lease_ms)) != REDLOCK_OK)
        return rc;
    if (redlock__canceled(c))
        return redlock__fail(REDLOCK_ECANCELED, "lock '%s': the client was canceled",
                             l->members[0].name);
    redlock__owner_field(c, owner, field, sizeof(field));
    memset(&res, 0, sizeof(res));
    start = ops->now_ns(c->tp.ctx);
    deadline = wait_ms < 0 ? INT64_MAX : start + wait_ms * REDLOCK__NS_PER_MS;
    for (;;) {
        int64_t now, until, before;

        /* Only a tick that is cleaning up a lost hold pins a lock that is
         * not held; a hold taken now must come after that clean-up. */
        pthread_mutex_lock(&l->mu);
        reentry = l->state == REDLOCK__HELD && l->owner == owner;
        settle = l->state != REDLOCK__HELD;
        pthread_mutex_unlock(&l->mu);
        if (settle)
            redlock__watchdog_settle(l);
        before = ops->now_ns(c->tp.ctx);
        rc = redlock__attempt(l, field, lease_ms, reentry, &res);
        attempt_ns = ops->now_ns(c->tp.ctx) - before;
        if (rc == REDLOCK_OK) {
            hold_acquired(l, owner, field, lease_ms, watchdog, &res);
            record_latency(c, ops->now_ns(c->tp.ctx) - start);
            break;
        }
        if (rc == REDLOCK_EBUSY)
            redlock__stat_add(&c->stats.busy, 1);
        else if (rc == REDLOCK_ENO_QUORUM)
            redlock__stat_add(&c->stats.no_quorum, 1);
        /* Refusals for good (auth, TLS, config) that leave no quorum end
         * here: the attempt already returned their code. */
        if (!redlock__attempt_retryable(rc))
            break;
        now = ops->now_ns(c->tp.ctx);
        if (redlock__canceled(c)) {
            rc = REDLOCK_ECANCELED;
            break;
        }
        if (unavailable_too_long(l, rc, now)) {
            unavailable = 1;
            break;
        }
        if (wait_ms == 0 || now >= deadline) {
            rc = redlock__wait_outcome(rc, wait_ms);
            break;
        }
        if (!watched && !c->disable_pubsub) {
            /* Subscribe first, then try again at once: a release between
             * the failed attempt and the subscription is then not missed. */
            watched = 1;
            watch = watch_members(l, now + redlock__node_timeout_ns(c, lease_ms));
            continue;
        }
        until = next_try(c, rc, &res, now);
        if (until > deadline)
            until = deadline;
        /* A grant that came back too late to be valid backs off like a
         * lost race: its own abort's release message would wake it. */
        if (rc == REDLOCK_ETIMEOUT)
            losses++;
        else
            losses = woken && rc == REDLOCK_EBUSY && l->n > 1 ? losses + 1 : 0;
        if (rc == REDLOCK_ETIMEOUT) {
            rc = ops->wait(c->tp.ctx, watch, &seen,
                           backoff_until(now, attempt_ns, losses, deadline));
            woken = 0;
        } else {
            rc = ops->wait(c->tp.ctx, watch, &seen, until);
            woken = rc == REDLOCK_OK;
            if (woken && losses > 0)
                rc = ops->wait(c->tp.ctx, watch, &seen,
                               backoff_until(ops->now_ns(c->tp.ctx), attempt_ns, losses,
                                             deadline));
        }
        if (rc == REDLOCK_ECLOSED)
            break;
    }
    if (watch)
        ops->unwatch(c->tp.ctx, watch);
    switch (rc) {
    case REDLOCK_OK:
        return REDLOCK_OK;
    case REDLOCK_EBUSY:
        return redlock__fail(rc, "lock '%s' is held by another owner", l->members[0].name);
    case REDLOCK_ETIMEOUT:
        return redlock__fail(rc, "lock '%s' not acquired within %lld ms", l->members[0].name,
                             (long long)wait_ms);
    case REDLOCK_ECANCELED:
        return redlock__fail(rc, "acquire of '%s' canceled", l->members[0].name);
    case REDLOCK_EAUTH:
    case REDLOCK_ETLS:
    case REDLOCK_ECONFIG:
        return redlock__fail(rc, "lock '%s': %d of %zu members refuse for good, quorum is %d%s%s",
                             l->members[0].name, res.permanent, l->n, l->quorum,
                             *first_failure(l) ? "; " : "", first_failure(l));
    case REDLOCK_ENO_QUORUM:
        if (res.granted >= l->quorum && l->fencing)
            return redlock__fail(rc, "lock '%s': granted, but too few members stored the "
                                 "fencing token (%d confirmed of %zu, quorum is %d)%s%s",
                                 l->members[0].name, res.fence_confirmed, l->n, l->quorum,
                                 *first_failure(l) ? "; " : "", first_failure(l));
        if (unavailable)
            return redlock__fail(rc, "lock '%s': no quorum of nodes reachable for %lld ms: "
                                 "%d of %zu members failed, quorum is %d%s%s",
                                 l->members[0].name, (long long)c->unavailable_timeout_ms,
                                 res.failed, l->n, l->quorum,
                                 *first_failure(l) ? "; " : "", first_failure(l));
        /* The attempt stops as soon as Q is out of reach, so members that
         * had not answered yet are neither reachable nor failed: say what
         * is known. */
        return redlock__fail(rc,
                             "lock '%s': no quorum: %d of %zu members failed, quorum is %d%s%s",
                             l->members[0].name, res.failed, l->n, l->quorum,
                             *first_failure(l) ? "; " : "", first_failure(l));
    default:
        return rc;
    }
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

int redlock_unlock_as(redlock_lock *l, uint64_t owner)
{
    redlock__unlock_tally outcome;
    redlock_client *c;
    char field[64];
    redlock__gens gens[REDLOCK__MAX_NODES];
    int64_t lease_ms, give_up, now;
    int ours, final, expired, released = 0, decremented = 0, not_held = 0, rc;
    size_t m;

    if (!l)
        return redlock__fail(REDLOCK_EINVAL, "lock is NULL");
    c = l->client;
    pthread_mutex_lock(&l->mu);
    if ((l->state == REDLOCK__LOST && l->owner == owner) || redlock__hold_forget_lost(l, owner)) {
        int reason = l->lost_reason;

        if (l->state == REDLOCK__LOST && l->owner == owner)
            l->state = REDLOCK__FREE;
        redlock__hold_forget_lost(l, owner);
        pthread_mutex_unlock(&l->mu);
        return redlock__fail(REDLOCK_ELOST, "lock '%s' was lost before unlock (%s)",
                             l->members[0].name, redlock_strerror(reason));
    }
    ours = l->state == REDLOCK__HELD && l->owner == owner;
    final = ours && l->count == 1;
    lease_ms = ours ? l->lease_ms : c->watchdog_lease_ms;
    now = c->tp.ops->now_ns(c->tp.ctx);
    /* Validity ran out before anyone noticed (a fixed lease held too long,
     * or a watchdog tick still pending): the caller must hear of it, even
     * if some members still had the key to release. */
    expired = ours && now >= l->validity_end_ns;
    give_up = ours && l->validity_end_ns > now ? l->validity_end_ns
                                               : now + lease_ms * REDLOCK__NS_PER_MS;
    if (ours && l->watchdog)
        give_up = now + lease_ms * REDLOCK__NS_PER_MS;
    pthread_mutex_unlock(&l->mu);

    /* The watchdog stops before the last release goes out, so no renewal
     * can outlive or re-create a released lock. */
    if (final)
        redlock__watchdog_remove(l);
    /* Read after the watchdog stopped: a restore it made carries its own
     * generation. Without a hold here the generation is unknown, and any
     * hold of this owner is released. */
    pthread_mutex_lock(&l->mu);
    for (m = 0; m < l->n; m++)
        gens[m] = l->members[m].gens;
    pthread_mutex_unlock(&l->mu);
    redlock__owner_field(c, owner, field, sizeof(field));
    rc = redlock__release_members(l, field, ours ? (const redlock__gens *)gens : NULL, lease_ms,
                                  0, give_up, &released, &decremented, &not_held);
    if (rc)
        return rc;

    pthread_mutex_lock(&l->mu);
    if (ours && l->state == REDLOCK__HELD && l->owner == owner) {
        if (--l->count == 0)
            l->state = REDLOCK__FREE;
    }
    pthread_mutex_unlock(&l->mu);
    if (final && decremented > 0) {
        /* A member that was re-acquired by the watchdog has a lower count
         * than the others... or a higher one here: drop our field there. */
        int a = 0, b = 0, d = 0;

        redlock__release_members(l, field, (const redlock__gens *)gens, lease_ms, 1, give_up,
                                 &a, &b, &d);
    }
    /* Without a hold recorded in this handle, only a quorum of our fields
     * proves ownership: fragments left by a lost or failed hold are cleaned
     * up above, but do not make the caller an owner. */
    outcome.quorum = l->quorum;
    outcome.ours = ours;
    outcome.expired = expired;
    outcome.released = released;
    outcome.decremented = decremented;
    outcome.not_held = not_held;
    switch (redlock__unlock_outcome(&outcome)) {
    case REDLOCK_OK:
        redlock__stat_add(&c->stats.released, 1);
        return REDLOCK_OK;
    case REDLOCK_ELOST:
        return redlock__fail(REDLOCK_ELOST, expired ? "lock '%s': validity ended before unlock"
                                                    : "lock '%s' expired before unlock",
                             l->members[0].name);
    case REDLOCK_ENO_QUORUM:
        return redlock__fail(REDLOCK_ENO_QUORUM, "lock '%s': no member answered the release%s%s",
                             l->members[0].name, *first_failure(l) ? "; " : "",
                             first_failure(l));
    default:
        return redlock__fail(REDLOCK_ENOT_OWNER, "lock '%s' is not held by this owner",
                             l->members[0].name);
    }
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
