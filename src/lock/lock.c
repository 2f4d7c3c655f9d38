/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lock handles: creation, the per-member report, unlock and the fencing
 * token. The acquire and its wait are in acquire.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "core/wait.h"
#include "lock/context.h"
#include "lock/decide.h"
#include "lock/facts.h"
#include "lock/hold.h"
#include "lock/keys.h"
#include "lock/quorum.h"
#include "lock/watchdog.h"
#include "lock/internal.h"

static void lock_destroy(redlock_lock *l)
{
    if (l->fair_watch)
        l->client->tp.ops->unwatch(l->client->tp.ctx, l->fair_watch);
    redlock__watchdog_remove(l);
    redlock__facts_forget(l);
    redlock__hold_free_handle(l);
}

void redlock_lock_free(redlock_lock *l)
{
    if (!l)
        return;
    /* Its operations, and the loop that runs them, are the I/O thread's. */
    if (l->client->io.free_lock && redlock__io_elsewhere(l->client)) {
        l->client->io.free_lock(l->client->io.io, l);
        return;
    }
    /* Freed by its own on_lost callback (or another's) inside the watchdog
     * tick that is still using it: the tick frees it when it is done, as
     * libuv's uv_close defers a handle's end. */
    if (redlock__watchdog_free_later(l))
        return;
    /* Operations in flight on the loop still use it: they are canceled
     * and the loop frees it after the last. */
    if (l->client->loop.lock_freeing && l->client->loop.lock_freeing(l->client->loop.loop, l))
        return;
    lock_destroy(l);
}


/* What a kind refuses, with the reason a caller needs to hear. */
static int check_kind(int kind)
{
    if (kind < REDLOCK__KIND_MUTEX || kind > REDLOCK__KIND_FAIR)
        return redlock__fail(REDLOCK_EINVAL,
                             "kind %d is not a lock kind (semaphores are made by "
                             "redlock_semaphore_new)", kind);
    return REDLOCK_OK;
}

int redlock_multilock_new(redlock_client *c, const redlock_member *members, size_t n,
                          const redlock_lock_options *opts, redlock_lock **out)
{
    int kind = opts ? opts->kind : REDLOCK__KIND_MUTEX;
    int rc;

    if (!out)
        return redlock__fail(REDLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if ((rc = check_kind(kind)) != REDLOCK_OK)
        return rc;
    return redlock__lock_create(c, members, n, opts, kind, out);
}

/* The longest a fair waiter's renewal may take: the node timeout the
 * longest lease derives (redlock__node_timeout_ns caps it). */
static int renewal_bound_ms(const redlock_client *c)
{
    return (int)(redlock__node_timeout_ns(c, INT32_MAX) / REDLOCK__NS_PER_MS);
}

int redlock__lock_create(redlock_client *c, const redlock_member *members, size_t n,
                         const redlock_lock_options *opts, int kind, redlock_lock **out)
{
    redlock_lock *l;
    int quorum = opts ? opts->quorum : 0;
    size_t i;
    int rc;

    if (!out)
        return redlock__fail(REDLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (opts && opts->fencing &&
        (kind == REDLOCK__KIND_READ || kind == REDLOCK__KIND_SEMAPHORE))
        return redlock__fail(REDLOCK_EINVAL,
                             "fencing needs one holder at a time: read holds and permits "
                             "are shared, so they take no token");
    if (opts && opts->holder_facts &&
        (kind == REDLOCK__KIND_READ || kind == REDLOCK__KIND_SEMAPHORE))
        return redlock__fail(REDLOCK_EINVAL,
                             "holder facts record one holder per name: read holds and "
                             "permits are shared (their holders are listed by status)");
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
    if (opts && opts->fair_wait_lease_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "fair_wait_lease_ms must be >= 0");
    /* A waiter renews its place every third of it, and a renewal may take
     * a node timeout: any shorter and places lapse while their waiters
     * live (and below 3 ms the renewals come without pause). */
    if (opts && opts->fair_wait_lease_ms > 0 &&
        opts->fair_wait_lease_ms < 3 * renewal_bound_ms(c))
        return redlock__fail(REDLOCK_EINVAL,
                             "fair_wait_lease_ms of %d ms is too short: a waiter renews its "
                             "place every third of it, each renewal may take a node timeout "
                             "(%d ms), so at least %d ms",
                             opts->fair_wait_lease_ms, renewal_bound_ms(c),
                             3 * renewal_bound_ms(c));
    if (opts && (opts->replica_acks < 0 || opts->replica_acks > REDLOCK__MAX_REPLICA_ACKS ||
                 opts->replica_timeout_ms < 0))
        return redlock__fail(REDLOCK_EINVAL,
                             "replica_acks must be 0..%d and replica_timeout_ms >= 0",
                             REDLOCK__MAX_REPLICA_ACKS);
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
    if (redlock__facts_configure(l, opts) != REDLOCK_OK) {
        free(l->members);
        free(l);
        return REDLOCK_ENOMEM;
    }
    pthread_mutex_init(&l->mu, NULL);
    l->client = c;
    l->n = n;
    l->quorum = quorum;
    l->fencing = opts ? opts->fencing : 0;
    l->kind = kind;
    redlock__fmt_i64(l->wait_lease, sizeof(l->wait_lease),
                     opts && opts->fair_wait_lease_ms > 0 ? opts->fair_wait_lease_ms
                                                          : REDLOCK__FAIR_WAIT_LEASE_MS);
    if (kind != REDLOCK__KIND_MUTEX)
        for (i = 0; i < n; i++)
            __atomic_or_fetch(&c->nodes[members[i].node].preload_families,
                              kind == REDLOCK__KIND_SEMAPHORE ? REDLOCK__PRELOAD_SEMAPHORE
                              : kind == REDLOCK__KIND_FAIR    ? REDLOCK__PRELOAD_FAIR
                                                              : REDLOCK__PRELOAD_RWLOCK,
                              __ATOMIC_RELAXED);
    if (opts && opts->replica_acks > 0) {
        l->replica_acks = opts->replica_acks;
        l->replica_wait_aof = opts->replica_wait_aof != 0;
        l->replica_timeout_ms = opts->replica_timeout_ms > 0 ? opts->replica_timeout_ms
                                : c->node_timeout_ms > 0   ? c->node_timeout_ms
                                                           : REDLOCK__DEFAULT_REPLICA_TIMEOUT_MS;
    }
    for (i = 0; i < n; i++) {
        redlock__lock_member *m = &l->members[i];
        size_t j;

        m->node = members[i].node;
        for (j = 0; j < i; j++)
            if (strcmp(l->members[j].name, members[i].name) == 0)
                break;
        if (j < i) {
            redlock__share_keys(m, &l->members[j]);
        } else if (redlock__member_keys(m, members[i].name, kind) != REDLOCK_OK) {
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

/* Sends the release; fills the tally. The last hold's release drops our
 * field whatever its count (a member the watchdog restored may count
 * differently) and returns once a quorum released it: the other members'
 * calls are already written and settle in the background (retry.h). */
static int release(redlock_lock *l, uint64_t owner, unlock_snapshot *s,
                   redlock__unlock_tally *t)
{
    char field[sizeof(l->field)];
    size_t m;
    int known, rc;

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
    /* The hold's own field when it is this owner's: formatting it again
     * is a measurable part of a short cycle. */
    known = l->state == REDLOCK__HELD && l->owner == owner;
    if (known)
        memcpy(field, l->field, sizeof(field));
    pthread_mutex_unlock(&l->mu);
    if (!known)
        redlock__hold_field(l, owner, field, sizeof(field));
    rc = redlock__release_members(l, field, s->ours ? (const redlock__gens *)s->gens : NULL,
                                  s->lease_ms, s->final, s->final, s->give_up_ns,
                                  &t->released, &t->decremented, &t->not_held);
    if (rc)
        return rc;
    pthread_mutex_lock(&l->mu);
    if (s->ours && l->state == REDLOCK__HELD && l->owner == owner && --l->count == 0)
        l->state = REDLOCK__FREE;
    pthread_mutex_unlock(&l->mu);
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
                             l->members[0].name, *redlock__first_failure(l) ? "; " : "",
                             redlock__first_failure(l));
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
    /* See redlock_acquire_as(). */
    if (redlock__loop_runs_call(l->client, redlock__wait_parks()))
        return l->client->loop.run_sync(l->client->loop.loop, l, 1, owner, 0, 0);
    memset(&tally, 0, sizeof(tally));
    /* Not the generations: release() copies the members' own (clearing
     * room for every possible member cost more than a short cycle's
     * encoding). */
    memset(&s, 0, offsetof(unlock_snapshot, gens));
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
