/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The background queue: calls owed to nodes, with a back-off per node so
 * a silent node gets one probe at a time instead of a storm, and
 * everything owed once it answers again.
 */
#define _GNU_SOURCE
#include "lock/retry.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define PENDING_RETRY_MS 100
/* Probes are PINGs that wait in a frozen node's socket, not scripts, so
 * they can come often enough that a thawed node gets its backlog within
 * about a second. */
#define PENDING_MAX_BACKOFF_MS 800

/* The strings live in the same allocation (see new_pending). */
static void free_pending(redlock__pending *p)
{
    free(p);
}

void redlock__retry_init(redlock__retry *r, void (*wake)(void *), void *wake_ud)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->wake = wake;
    r->wake_ud = wake_ud;
    r->sender_wakes_at = INT64_MAX;
    r->enabled = 1;
}

void redlock__retry_destroy(redlock__retry *r)
{
    redlock__pending *p;

    if (!r->enabled)
        return;
    while ((p = r->pending) != NULL) {
        r->pending = p->next;
        free_pending(p);
    }
    r->enabled = 0;
    pthread_mutex_destroy(&r->mu);
}

static redlock__pending *new_pending(redlock__retry *r, int64_t now, size_t node, int script,
                                     int nkeys, int argc, const char *const *argv,
                                     int64_t give_up_ns)
{
    redlock__pending *p;
    size_t len[REDLOCK__MAX_CALL_ARGS], total = 0;
    char *store;
    int i;

    if (argc < 0 || argc > REDLOCK__MAX_CALL_ARGS || node >= REDLOCK__RETRY_MAX_NODES ||
        !r->enabled)
        return NULL;
    /* One allocation for the call and its strings: a release settled at
     * quorum parks calls on every cycle. */
    for (i = 0; i < argc; i++) {
        len[i] = strlen(argv[i] ? argv[i] : "") + 1;
        total += len[i];
    }
    p = calloc(1, sizeof(*p) + total);
    if (!p)
        return NULL;
    store = (char *)(p + 1);
    p->node = node;
    p->script = script;
    p->nkeys = nkeys;
    p->argc = argc;
    p->give_up_ns = give_up_ns;
    p->next_try_ns = now + PENDING_RETRY_MS * REDLOCK__NS_PER_MS;
    for (i = 0; i < argc; i++) {
        p->argv[i] = store;
        memcpy(store, argv[i] ? argv[i] : "", len[i]);
        store += len[i];
    }
    return p;
}

void redlock__retry_queue(redlock__retry *r, int64_t now, size_t node, int script, int nkeys,
                          int argc, const char *const *argv, int64_t not_before_ns,
                          int64_t give_up_ns)
{
    void (*wake)(void *);
    void *wake_ud;
    redlock__pending *p = new_pending(r, now, node, script, nkeys, argc, argv, give_up_ns);

    if (!p)
        return;
    p->not_before_ns = not_before_ns;
    if (p->next_try_ns < not_before_ns)
        p->next_try_ns = not_before_ns;
    pthread_mutex_lock(&r->mu);
    p->next = r->pending;
    r->pending = p;
    wake = r->wake;
    wake_ud = r->wake_ud;
    pthread_mutex_unlock(&r->mu);
    if (wake)
        wake(wake_ud);
}

uint64_t redlock__retry_token(redlock__retry *r)
{
    return __atomic_add_fetch(&r->next_token, 1, __ATOMIC_RELAXED);
}

void redlock__retry_park(redlock__retry *r, int64_t now, size_t node, int script, int nkeys,
                         int argc, const char *const *argv, int64_t give_up_ns,
                         uint64_t token)
{
    redlock__pending *p = new_pending(r, now, node, script, nkeys, argc, argv, give_up_ns);
    void (*wake)(void *);
    void *wake_ud;
    int64_t due;

    /* Out of memory: the call is still in flight, only its loss would go
     * unnoticed, as for any call nobody waits for. */
    if (!p)
        return;
    p->token = token;
    p->parked = 1;
    due = p->next_try_ns; /* p may be settled and freed once it is listed */
    pthread_mutex_lock(&r->mu);
    p->next = r->pending;
    r->pending = p;
    __atomic_add_fetch(&r->nparked, 1, __ATOMIC_RELAXED);
    wake = r->wake;
    wake_ud = r->wake_ud;
    pthread_mutex_unlock(&r->mu);
    /* The sender drains its connection from now on (a reset is noticed
     * within a tick, not at the connection's next use). Unless it already
     * plans to look by the time this call is due: a release settled at
     * quorum parks calls on every cycle, and waking a thread for each
     * would cost more than the release. */
    if (wake && __atomic_load_n(&r->sender_wakes_at, __ATOMIC_ACQUIRE) > due)
        wake(wake_ud);
}

void redlock__retry_sender_wakes_at(redlock__retry *r, int64_t at_ns)
{
    __atomic_store_n(&r->sender_wakes_at, at_ns, __ATOMIC_RELEASE);
}

size_t redlock__retry_settle_token(redlock__retry *r, uint64_t token, int delivered)
{
    redlock__pending **pp, *found = NULL;
    void (*wake)(void *) = NULL;
    void *wake_ud = NULL;
    size_t node = SIZE_MAX;

    if (!r->enabled)
        return node;
    pthread_mutex_lock(&r->mu);
    for (pp = &r->pending; *pp; pp = &(*pp)->next)
        if ((*pp)->parked && (*pp)->token == token) {
            found = *pp;
            break;
        }
    if (found) {
        node = found->node;
        __atomic_sub_fetch(&r->nparked, 1, __ATOMIC_RELAXED);
        if (delivered) {
            *pp = found->next;
        } else {
            /* Maybe never read by the node: owed like any unanswered call,
             * due at its next drain time (parked calls fall due every
             * PENDING_RETRY_MS), then with the node's back-off. */
            found->parked = 0;
            __atomic_add_fetch(&r->lost, 1, __ATOMIC_RELAXED);
            wake = r->wake;
            wake_ud = r->wake_ud;
            found = NULL;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (found)
        free_pending(found);
    if (wake)
        wake(wake_ud);
    return node;
}

size_t redlock__retry_in_flight(redlock__retry *r)
{
    size_t n;

    pthread_mutex_lock(&r->mu);
    n = r->taken;
    pthread_mutex_unlock(&r->mu);
    return n;
}

size_t redlock__retry_parked(redlock__retry *r)
{
    return __atomic_load_n(&r->nparked, __ATOMIC_RELAXED);
}

uint64_t redlock__retry_lost(redlock__retry *r)
{
    return __atomic_load_n(&r->lost, __ATOMIC_RELAXED);
}

size_t redlock__retry_take(redlock__retry *r, int64_t now, int all,
                           int (*silent)(void *ud, size_t node), void *silent_ud,
                           redlock__pending **out, unsigned char *probe)
{
    redlock__pending **pp;
    size_t n = 0;

    *out = NULL;
    if (probe)
        memset(probe, 0, REDLOCK__RETRY_MAX_NODES);
    pthread_mutex_lock(&r->mu);
    for (pp = &r->pending; *pp;) {
        redlock__pending *p = *pp;
        /* A node that did not answer last time gets a probe (a PING) when
         * its back-off allows, and its calls only once it answers: the
         * probes wait in its socket, the calls are sent once. */
        int probe_only = r->backoff_ms[p->node] > 0 || (silent && silent(silent_ud, p->node));
        int due = p->next_try_ns <= now && r->next_try_ns[p->node] <= now;

        if (now >= p->give_up_ns) {
            /* The lease could have run out there: nothing left to undo. */
            *pp = p->next;
            if (p->parked)
                __atomic_sub_fetch(&r->nparked, 1, __ATOMIC_RELAXED);
            free_pending(p);
            continue;
        }
        if (p->parked) {
            if (p->next_try_ns <= now)
                p->next_try_ns = now + PENDING_RETRY_MS * REDLOCK__NS_PER_MS;
            pp = &p->next;
            continue;
        }
        if (p->not_before_ns > now) {
            pp = &p->next;
            continue;
        }
        if (!all && probe_only) {
            if (due && probe)
                probe[p->node] = 1;
            pp = &p->next;
            continue;
        }
        if (all || due) {
            *pp = p->next;
            p->next = *out;
            *out = p;
            n++;
        } else {
            pp = &p->next;
        }
    }
    r->taken += n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

size_t redlock__retry_settle(redlock__retry *r, redlock__pending *taken,
                             const unsigned char *answered, const unsigned char *probed,
                             const unsigned char *probe_heard, int64_t now)
{
    unsigned char heard[REDLOCK__RETRY_MAX_NODES] = {0}, tried[REDLOCK__RETRY_MAX_NODES] = {0};
    redlock__pending *p, *next;
    size_t i, node, left = 0;

    for (p = taken, i = 0; p; p = p->next, i++) {
        tried[p->node] = 1;
        heard[p->node] |= answered && answered[i];
    }
    for (node = 0; probed && node < REDLOCK__RETRY_MAX_NODES; node++) {
        tried[node] |= probed[node];
        heard[node] |= probe_heard && probe_heard[node];
    }
    pthread_mutex_lock(&r->mu);
    for (node = 0; node < REDLOCK__RETRY_MAX_NODES; node++) {
        int64_t b;

        if (!tried[node])
            continue;
        if (heard[node]) {
            __atomic_store_n(&r->backoff_ms[node], 0, __ATOMIC_RELAXED);
            r->next_try_ns[node] = now;
            continue;
        }
        b = r->backoff_ms[node] ? 2 * r->backoff_ms[node] : PENDING_RETRY_MS;
        if (b > PENDING_MAX_BACKOFF_MS)
            b = PENDING_MAX_BACKOFF_MS;
        __atomic_store_n(&r->backoff_ms[node], (int)b, __ATOMIC_RELAXED);
        r->next_try_ns[node] =
            now + (b + (int64_t)redlock__rand_below((uint64_t)b / 2 + 1)) * REDLOCK__NS_PER_MS;
    }
    r->taken -= i;
    for (p = taken, i = 0; p; p = next, i++) {
        next = p->next;
        if ((answered && answered[i]) || now >= p->give_up_ns) {
            free_pending(p);
            continue;
        }
        p->next = r->pending;
        r->pending = p;
        left++;
    }
    for (p = r->pending; p; p = p->next)
        if (!p->parked && p->next_try_ns < r->next_try_ns[p->node])
            p->next_try_ns = r->next_try_ns[p->node];
    pthread_mutex_unlock(&r->mu);
    return left;
}

void redlock__retry_heard(redlock__retry *r, size_t node)
{
    void (*wake)(void *) = NULL;
    void *wake_ud = NULL;

    if (node >= REDLOCK__RETRY_MAX_NODES || !r->enabled ||
        __atomic_load_n(&r->backoff_ms[node], __ATOMIC_RELAXED) == 0)
        return;
    pthread_mutex_lock(&r->mu);
    if (r->backoff_ms[node] > 0) {
        __atomic_store_n(&r->backoff_ms[node], 0, __ATOMIC_RELAXED);
        r->next_try_ns[node] = 0; /* due at once */
        wake = r->wake;
        wake_ud = r->wake_ud;
    }
    pthread_mutex_unlock(&r->mu);
    if (wake)
        wake(wake_ud);
}

int64_t redlock__retry_held_back_until(redlock__retry *r, int64_t now, size_t *count)
{
    int64_t until = INT64_MAX;
    redlock__pending *p;

    *count = 0;
    pthread_mutex_lock(&r->mu);
    for (p = r->pending; p; p = p->next) {
        if (p->not_before_ns <= now)
            continue;
        (*count)++;
        if (p->not_before_ns < until)
            until = p->not_before_ns;
    }
    pthread_mutex_unlock(&r->mu);
    return until;
}

void redlock__retry_lift_holds(redlock__retry *r, int64_t now)
{
    redlock__pending *p;

    pthread_mutex_lock(&r->mu);
    for (p = r->pending; p; p = p->next) {
        if (p->not_before_ns <= now)
            continue;
        p->not_before_ns = 0;
        p->next_try_ns = now;
    }
    pthread_mutex_unlock(&r->mu);
}

int64_t redlock__retry_next_due(redlock__retry *r)
{
    int64_t next = INT64_MAX;
    redlock__pending *p;

    pthread_mutex_lock(&r->mu);
    for (p = r->pending; p; p = p->next) {
        int64_t due = p->next_try_ns > r->next_try_ns[p->node] || p->parked
                          ? p->next_try_ns
                          : r->next_try_ns[p->node];
        if (due < next)
            next = due;
    }
    pthread_mutex_unlock(&r->mu);
    return next;
}
