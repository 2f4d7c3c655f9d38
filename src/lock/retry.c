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
#define PENDING_MAX_BACKOFF_MS 3200

static void free_pending(redlock__pending *p)
{
    int i;

    for (i = 0; i < p->argc; i++)
        free(p->argv[i]);
    free(p);
}

void redlock__retry_init(redlock__retry *r, void (*wake)(void *), void *wake_ud)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->wake = wake;
    r->wake_ud = wake_ud;
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

void redlock__retry_queue(redlock__retry *r, int64_t now, size_t node, int script, int nkeys,
                          int argc, const char *const *argv, int64_t give_up_ns)
{
    void (*wake)(void *);
    void *wake_ud;
    redlock__pending *p;
    int i;

    if (argc > REDLOCK__MAX_CALL_ARGS || node >= REDLOCK__RETRY_MAX_NODES || !r->enabled)
        return;
    p = calloc(1, sizeof(*p));
    if (!p)
        return;
    p->node = node;
    p->script = script;
    p->nkeys = nkeys;
    p->argc = argc;
    p->give_up_ns = give_up_ns;
    p->next_try_ns = now + PENDING_RETRY_MS * REDLOCK__NS_PER_MS;
    for (i = 0; i < argc; i++) {
        p->argv[i] = strdup(argv[i] ? argv[i] : "");
        if (!p->argv[i]) {
            p->argc = i;
            free_pending(p);
            return;
        }
    }
    pthread_mutex_lock(&r->mu);
    p->next = r->pending;
    r->pending = p;
    wake = r->wake;
    wake_ud = r->wake_ud;
    pthread_mutex_unlock(&r->mu);
    if (wake)
        wake(wake_ud);
}

size_t redlock__retry_take(redlock__retry *r, int64_t now, int all,
                           int (*silent)(void *ud, size_t node), void *silent_ud,
                           redlock__pending **out)
{
    unsigned char taken[REDLOCK__RETRY_MAX_NODES] = {0};
    redlock__pending **pp;
    size_t n = 0;

    *out = NULL;
    pthread_mutex_lock(&r->mu);
    for (pp = &r->pending; *pp;) {
        redlock__pending *p = *pp;
        /* A node that did not answer last time gets one call, a probe,
         * until it answers: everything sent to it waits in its socket. */
        int probe_only = r->backoff_ms[p->node] > 0 || (silent && silent(silent_ud, p->node));

        if (now >= p->give_up_ns) {
            /* The lease could have run out there: nothing left to undo. */
            *pp = p->next;
            free_pending(p);
            continue;
        }
        if (all || (p->next_try_ns <= now && r->next_try_ns[p->node] <= now &&
                    !(probe_only && taken[p->node]))) {
            taken[p->node] = 1;
            *pp = p->next;
            p->next = *out;
            *out = p;
            n++;
        } else {
            pp = &p->next;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

size_t redlock__retry_settle(redlock__retry *r, redlock__pending *taken,
                             const unsigned char *answered, int64_t now)
{
    unsigned char heard[REDLOCK__RETRY_MAX_NODES] = {0}, tried[REDLOCK__RETRY_MAX_NODES] = {0};
    redlock__pending *p, *next;
    size_t i, node, left = 0;

    for (p = taken, i = 0; p; p = p->next, i++) {
        tried[p->node] = 1;
        heard[p->node] |= answered[i];
    }
    pthread_mutex_lock(&r->mu);
    for (node = 0; node < REDLOCK__RETRY_MAX_NODES; node++) {
        int64_t b;

        if (!tried[node])
            continue;
        if (heard[node]) {
            r->backoff_ms[node] = 0;
            r->next_try_ns[node] = now;
            continue;
        }
        b = r->backoff_ms[node] ? 2 * r->backoff_ms[node] : PENDING_RETRY_MS;
        if (b > PENDING_MAX_BACKOFF_MS)
            b = PENDING_MAX_BACKOFF_MS;
        r->backoff_ms[node] = (int)b;
        r->next_try_ns[node] =
            now + (b + (int64_t)redlock__rand_below((uint64_t)b / 2 + 1)) * REDLOCK__NS_PER_MS;
    }
    for (p = taken, i = 0; p; p = next, i++) {
        next = p->next;
        if (answered[i] || now >= p->give_up_ns) {
            free_pending(p);
            continue;
        }
        p->next = r->pending;
        r->pending = p;
        left++;
    }
    for (p = r->pending; p; p = p->next)
        if (p->next_try_ns < r->next_try_ns[p->node])
            p->next_try_ns = r->next_try_ns[p->node];
    pthread_mutex_unlock(&r->mu);
    return left;
}

int64_t redlock__retry_next_due(redlock__retry *r)
{
    int64_t next = INT64_MAX;
    redlock__pending *p;

    pthread_mutex_lock(&r->mu);
    for (p = r->pending; p; p = p->next) {
        int64_t due = p->next_try_ns > r->next_try_ns[p->node] ? p->next_try_ns
                                                               : r->next_try_ns[p->node];
        if (due < next)
            next = due;
    }
    pthread_mutex_unlock(&r->mu);
    return next;
}
