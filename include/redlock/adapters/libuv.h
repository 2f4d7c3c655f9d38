/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Drives a loop-driven client (options.event_loop) from a libuv loop.
 *
 *     redlock_libuv *ad;
 *     redlock_libuv_attach(client, loop, &ad);
 *     redlock_acquire_async(lock, owner, 1000, 10000, on_done, ctx);
 *     uv_run(loop, UV_RUN_DEFAULT);    (until the program calls uv_stop())
 *     ...
 *     redlock_client_free(client);     (not from inside a callback)
 *     redlock_libuv_detach(ad);         (right after it)
 *     uv_run(loop, UV_RUN_DEFAULT);     (lets libuv run the close callbacks)
 *
 * Header-only, like hiredis's adapters. Each fd number the library asks
 * for gets a uv_poll_t of its own, made when it is first asked for and
 * closed as soon as the library asks for nothing on it (events == 0). The
 * library says so before it closes the fd, and the handle must go while
 * the fd is still open: uv_close() of a poll handle removes its fd number
 * from epoll, and done later it would remove whatever descriptor of the
 * program has that number by then. (The library keeps idle connections
 * watched, so this is rare: mostly a connection about to close.) One
 * uv_timer_t carries the library's timer.
 *
 * uv_run(loop, UV_RUN_DEFAULT) does not return for lack of work while the
 * client is attached: the library keeps its idle connections and a wake
 * descriptor watched. Stop the loop when the program is done (uv_stop(),
 * as the examples do), then free the client and detach.
 *
 * Ownership: attach allocates the adapter (*out); redlock_libuv_detach()
 * frees it and closes its handles, whose memory libuv gives back in their
 * close callbacks, i.e. on the loop's next run. Call detach right after
 * redlock_client_free() (which calls no hook while it frees, and closes
 * the fds the handles still watch), before this thread opens other
 * descriptors: a handle left on a closed fd would meet the next socket
 * that gets its number.
 *
 * Threads: everything (attach, the loop, detach, and every call on the
 * client) happens on the thread that runs the loop, as the client
 * requires.
 *
 * uv.h needs POSIX declarations: under strict C11 define _POSIX_C_SOURCE
 * 200809L (or _GNU_SOURCE) before including it or this header.
 */
#ifndef REDLOCK_ADAPTERS_LIBUV_H
#define REDLOCK_ADAPTERS_LIBUV_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "redlock/redlock.h"

typedef struct redlock_libuv redlock_libuv;

/* One watched fd. The uv_poll_t comes first so that the handle pointer
 * libuv gives back is the watch itself. */
typedef struct redlock_libuv__watch {
    uv_poll_t poll;
    redlock_libuv *ad;
    int fd;
    int events; /* UV_READABLE | UV_WRITABLE asked for */
} redlock_libuv__watch;

struct redlock_libuv {
    redlock_client *client;
    uv_loop_t *loop;
    uv_timer_t *timer;              /* heap: it outlives detach until closed */
    redlock_libuv__watch **watches; /* per fd number; NULL: not watched */
    size_t cap;
};

/* The handles' memory is freed here, not at uv_close(): libuv still uses
 * it until the close callback runs. */
static void redlock_libuv__free_handle(uv_handle_t *h)
{
    free(h);
}

static void redlock_libuv__close(redlock_libuv *ad, int fd)
{
    redlock_libuv__watch *w = ad->watches[fd];

    if (!w)
        return;
    ad->watches[fd] = NULL;
    /* uv_close() stops it at once; its memory goes in the callback. */
    uv_close((uv_handle_t *)&w->poll, redlock_libuv__free_handle);
}

static void redlock_libuv__poll_cb(uv_poll_t *h, int status, int events)
{
    redlock_libuv__watch *w = (redlock_libuv__watch *)h;
    redlock_libuv *ad = w->ad;
    int fd = w->fd, what;

    /* An error (status < 0, e.g. EPOLLERR) counts as both, as the library
     * asks; a hang-up libuv already reports as the events asked for. */
    if (status < 0)
        what = REDLOCK_EV_READ | REDLOCK_EV_WRITE;
    else
        what = (events & UV_READABLE ? REDLOCK_EV_READ : 0) |
               (events & UV_WRITABLE ? REDLOCK_EV_WRITE : 0);
    if (what)
        redlock_loop_action(ad->client, fd, what);
    /* On an error libuv stops the handle by itself. If the library still
     * wants the fd and asked for the same events again it said nothing
     * (it only reports changes), so start it again, or the operation
     * would sit until its deadline. w is still valid even if the call
     * closed it: libuv frees nothing before the close callback. */
    if (status < 0 && (size_t)fd < ad->cap && ad->watches[fd] == w && w->events &&
        !uv_is_active((uv_handle_t *)h))
        uv_poll_start(h, w->events, redlock_libuv__poll_cb);
}

static void redlock_libuv__socket(void *ud, int fd, int events)
{
    redlock_libuv *ad = (redlock_libuv *)ud;
    int want = (events & REDLOCK_EV_READ ? UV_READABLE : 0) |
               (events & REDLOCK_EV_WRITE ? UV_WRITABLE : 0);
    redlock_libuv__watch *w;

    if (fd < 0)
        return;
    if ((size_t)fd >= ad->cap) {
        size_t cap = ad->cap ? ad->cap : 64;
        redlock_libuv__watch **p;

        if (!want)
            return; /* never watched */
        while (cap <= (size_t)fd)
            cap *= 2;
        p = (redlock_libuv__watch **)realloc(ad->watches, cap * sizeof(*p));
        if (!p)
            return; /* the operation's own deadline still ends it */
        memset(p + ad->cap, 0, (cap - ad->cap) * sizeof(*p));
        ad->watches = p;
        ad->cap = cap;
    }
    if (!want) {
        /* The fd may be closed next: the handle goes while it is open. */
        redlock_libuv__close(ad, fd);
        return;
    }
    w = ad->watches[fd];
    if (!w) {
        w = (redlock_libuv__watch *)calloc(1, sizeof(*w));
        if (!w)
            return; /* the operation's own deadline still ends it */
        if (uv_poll_init(ad->loop, &w->poll, fd) != 0) {
            free(w); /* not registered with the loop: nothing to close */
            return;
        }
        w->ad = ad;
        w->fd = fd;
        ad->watches[fd] = w;
    }
    w->events = want;
    /* uv_poll_start() on an active handle just changes its events. */
    if (uv_poll_start(&w->poll, want, redlock_libuv__poll_cb) != 0)
        redlock_libuv__close(ad, fd);
}

static void redlock_libuv__timer_cb(uv_timer_t *t)
{
    redlock_libuv *ad = (redlock_libuv *)t->data;

    redlock_loop_action(ad->client, REDLOCK_EV_TIMEOUT, 0);
}

static void redlock_libuv__timer(void *ud, int64_t timeout_ms)
{
    redlock_libuv *ad = (redlock_libuv *)ud;

    if (timeout_ms < 0) {
        uv_timer_stop(ad->timer);
        return;
    }
    /* libuv counts from the time cached at the start of the iteration;
     * after a long callback that is in the past and the timer would fire
     * early, only to be asked for again. */
    uv_update_time(ad->loop);
    uv_timer_start(ad->timer, redlock_libuv__timer_cb, (uint64_t)timeout_ms, 0);
}

/*
 * Attaches client (made with options.event_loop) to loop; *out gets the
 * adapter, for redlock_libuv_detach(). Returns what redlock_loop_attach()
 * returns, or REDLOCK_ENOMEM / REDLOCK_EINVAL (NULL argument) before
 * trying; on failure *out is NULL and nothing is left to free.
 */
static inline int redlock_libuv_attach(redlock_client *client, uv_loop_t *loop,
                                       redlock_libuv **out)
{
    redlock_libuv *ad;
    int rc;

    if (!out)
        return REDLOCK_EINVAL;
    *out = NULL;
    if (!client || !loop)
        return REDLOCK_EINVAL;
    ad = (redlock_libuv *)calloc(1, sizeof(*ad));
    if (!ad)
        return REDLOCK_ENOMEM;
    ad->timer = (uv_timer_t *)calloc(1, sizeof(*ad->timer));
    if (!ad->timer) {
        free(ad);
        return REDLOCK_ENOMEM;
    }
    ad->client = client;
    ad->loop = loop;
    uv_timer_init(loop, ad->timer);
    ad->timer->data = ad;
    /* The timer stays referenced: while it is set (an operation sleeps
     * between attempts, a watchdog hold waits for its next renewal) there
     * is work due, and uv_run() must not return for lack of other handles. */
    rc = redlock_loop_attach(client, redlock_libuv__socket, redlock_libuv__timer, ad);
    if (rc != REDLOCK_OK) {
        /* The timer is known to the loop: only its close callback frees it. */
        uv_close((uv_handle_t *)ad->timer, redlock_libuv__free_handle);
        free(ad);
        return rc;
    }
    *out = ad;
    return REDLOCK_OK;
}

/* Closes the adapter's handles and frees it (after redlock_client_free(),
 * see above). The handles' memory is freed by the loop's next run. NULL
 * is allowed. */
static inline void redlock_libuv_detach(redlock_libuv *ad)
{
    size_t fd;

    if (!ad)
        return;
    for (fd = 0; fd < ad->cap; fd++)
        redlock_libuv__close(ad, (int)fd);
    uv_close((uv_handle_t *)ad->timer, redlock_libuv__free_handle);
    free(ad->watches);
    free(ad);
}

#endif
