/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A tiny poll() loop for a loop-driven client (options.event_loop): for
 * tests, tools and programs that have no event loop of their own but want
 * many operations in flight on one thread.
 *
 *     redlock_poll_loop pl;
 *     redlock_poll_attach(&pl, client);
 *     redlock_acquire_async(lock, owner, 1000, 10000, on_done, ctx);
 *     while (redlock_loop_pending(client) > 0)
 *         redlock_poll_run_once(&pl, -1);
 *     ...
 *     redlock_client_free(client);
 *     redlock_poll_free(&pl);
 *
 * Header-only, like hiredis's adapters; the struct is the caller's (on the
 * stack or inside its own), used by one thread, and must outlive the
 * client's operations.
 */
#ifndef REDLOCK_ADAPTERS_POLL_H
#define REDLOCK_ADAPTERS_POLL_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redlock/redlock.h"

typedef struct redlock_poll_loop {
    redlock_client *client;
    struct pollfd *fds;  /* the fds the client asked for */
    size_t n, cap;
    size_t *pos;         /* per fd number: its index in fds + 1, 0: none */
    size_t pos_cap;
    struct pollfd *ready; /* what one round reports (a report may change fds) */
    size_t ready_cap;
    int64_t timer_ns;    /* CLOCK_MONOTONIC; -1: no timer */
} redlock_poll_loop;

static inline int64_t redlock_poll__now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void redlock_poll__socket(void *ud, int fd, int events)
{
    redlock_poll_loop *pl = (redlock_poll_loop *)ud;
    short want = (short)((events & REDLOCK_EV_READ ? POLLIN : 0) |
                         (events & REDLOCK_EV_WRITE ? POLLOUT : 0));
    size_t i;

    if ((size_t)fd >= pl->pos_cap) {
        size_t cap = pl->pos_cap ? pl->pos_cap : 64;
        size_t *p;

        while (cap <= (size_t)fd)
            cap *= 2;
        p = (size_t *)realloc(pl->pos, cap * sizeof(*p));
        if (!p)
            return; /* the operation's own deadline still ends it */
        memset(p + pl->pos_cap, 0, (cap - pl->pos_cap) * sizeof(*p));
        pl->pos = p;
        pl->pos_cap = cap;
    }
    i = pl->pos[fd] ? pl->pos[fd] - 1 : pl->n;
    if (!want) {
        if (i < pl->n) {
            pl->fds[i] = pl->fds[--pl->n];
            if (i < pl->n)
                pl->pos[pl->fds[i].fd] = i + 1;
            pl->pos[fd] = 0;
        }
        return;
    }
    if (i == pl->n) {
        if (pl->n == pl->cap) {
            size_t cap = pl->cap ? 2 * pl->cap : 16;
            struct pollfd *f = (struct pollfd *)realloc(pl->fds, cap * sizeof(*f));

            if (!f)
                return; /* the operation's own deadline still ends it */
            pl->fds = f;
            pl->cap = cap;
        }
        pl->fds[pl->n++].fd = fd;
        pl->pos[fd] = pl->n;
    }
    pl->fds[i].events = want;
    pl->fds[i].revents = 0;
}

static void redlock_poll__timer(void *ud, int64_t timeout_ms)
{
    redlock_poll_loop *pl = (redlock_poll_loop *)ud;

    pl->timer_ns = timeout_ms < 0 ? -1 : redlock_poll__now() + timeout_ms * 1000000LL;
}

/* Attaches client (made with options.event_loop) to pl. Returns what
 * redlock_loop_attach() returns. */
static inline int redlock_poll_attach(redlock_poll_loop *pl, redlock_client *client)
{
    memset(pl, 0, sizeof(*pl));
    pl->client = client;
    pl->timer_ns = -1;
    return redlock_loop_attach(client, redlock_poll__socket, redlock_poll__timer, pl);
}

/*
 * One round: waits up to max_wait_ms (-1: until the client's next
 * deadline, or for ever if it has none) for the client's fds, then reports
 * what is ready and an expired timer. Returns the number of fds reported,
 * or -1 with errno if poll() failed (EINTR included: call again).
 */
static inline int redlock_poll_run_once(redlock_poll_loop *pl, int max_wait_ms)
{
    int64_t now = redlock_poll__now(), wait_ms = max_wait_ms;
    size_t i, n;
    int r, reported = 0;
    struct pollfd *ready;

    if (pl->timer_ns >= 0) {
        int64_t t = pl->timer_ns <= now ? 0 : (pl->timer_ns - now + 999999) / 1000000;

        if (wait_ms < 0 || t < wait_ms)
            wait_ms = t;
    }
    r = poll(pl->fds, (nfds_t)pl->n, wait_ms > 0x7fffffff ? 0x7fffffff : (int)wait_ms);
    if (r < 0)
        return -1;
    /* A report may change the set: work from a copy. */
    n = pl->n;
    if (n > pl->ready_cap) {
        ready = (struct pollfd *)realloc(pl->ready, n * sizeof(*ready));
        if (!ready) {
            errno = ENOMEM;
            return -1;
        }
        pl->ready = ready;
        pl->ready_cap = n;
    }
    ready = pl->ready;
    if (n)
        memcpy(ready, pl->fds, n * sizeof(*ready));
    for (i = 0; r > 0 && i < n; i++) {
        short ev = ready[i].revents;
        int what;

        if (!ev)
            continue;
        what = (ev & (POLLIN | POLLERR | POLLHUP | POLLNVAL) ? REDLOCK_EV_READ : 0) |
               (ev & (POLLOUT | POLLERR | POLLHUP | POLLNVAL) ? REDLOCK_EV_WRITE : 0);
        redlock_loop_action(pl->client, ready[i].fd, what);
        reported++;
    }
    if (pl->timer_ns >= 0 && redlock_poll__now() >= pl->timer_ns) {
        pl->timer_ns = -1;
        redlock_loop_action(pl->client, REDLOCK_EV_TIMEOUT, 0);
    }
    return reported;
}

/* Frees pl's own memory (after redlock_client_free()). */
static inline void redlock_poll_free(redlock_poll_loop *pl)
{
    free(pl->fds);
    free(pl->pos);
    free(pl->ready);
    memset(pl, 0, sizeof(*pl));
}

#endif
