/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Drives a loop-driven client (options.event_loop) from a libevent base.
 *
 *     redlock_libevent *ad;
 *     redlock_libevent_attach(client, base, &ad);
 *     redlock_acquire_async(lock, owner, 1000, 10000, on_done, ctx);
 *     event_base_dispatch(base);        (until event_base_loopbreak())
 *     ...
 *     redlock_client_free(client);     (not from inside a callback)
 *     redlock_libevent_detach(ad);      (right after it)
 *     event_base_free(base);
 *
 * Header-only, like hiredis's adapters. Each fd the library asks for gets
 * a persistent struct event of its own, made when it is first asked for
 * and freed as soon as the library asks for nothing on it (events == 0):
 * the library says so before it closes the fd, and libevent must not keep
 * an event on a closed fd (its per-fd bookkeeping would swallow the
 * registration of the next socket that gets the number). One evtimer
 * carries the library's timer.
 *
 * event_base_dispatch() does not return for lack of events while the
 * client is attached: the library keeps its idle connections and a wake
 * descriptor watched. Break the loop when the program is done
 * (event_base_loopbreak(), as the examples do), then free and detach.
 *
 * Ownership: attach allocates the adapter (*out); redlock_libevent_detach()
 * frees its events and itself at once. Call it after redlock_client_free()
 * (which calls no hook while it frees, and closes the fds the events still
 * watch), before this thread opens other descriptors, and before
 * event_base_free().
 *
 * Threads: everything (attach, the loop, detach, and every call on the
 * client) happens on the thread that runs the base, as the client
 * requires; the base needs no locking of its own for this.
 */
#ifndef REDLOCK_ADAPTERS_LIBEVENT_H
#define REDLOCK_ADAPTERS_LIBEVENT_H

#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/redlock.h"

typedef struct redlock_libevent {
    redlock_client *client;
    struct event_base *base;
    struct event *timer;
    struct event **watches; /* per fd number; NULL: not watched */
    short *events;          /* per fd number: EV_READ | EV_WRITE asked for */
    size_t cap;
} redlock_libevent;

static void redlock_libevent__io_cb(evutil_socket_t fd, short what, void *ud)
{
    redlock_libevent *ad = (redlock_libevent *)ud;

    /* libevent turns an error or hang-up (EPOLLERR/EPOLLHUP) into the
     * events registered, so the library sees it on its next read or
     * write; nothing else tells them apart here. */
    redlock_loop_action(ad->client, (int)fd,
                        (what & EV_READ ? REDLOCK_EV_READ : 0) |
                            (what & EV_WRITE ? REDLOCK_EV_WRITE : 0));
}

static void redlock_libevent__timer_cb(evutil_socket_t fd, short what, void *ud)
{
    redlock_libevent *ad = (redlock_libevent *)ud;

    (void)fd, (void)what;
    redlock_loop_action(ad->client, REDLOCK_EV_TIMEOUT, 0);
}

static void redlock_libevent__unwatch(redlock_libevent *ad, int fd)
{
    /* event_free() deletes it first, also from inside its own callback. */
    if (ad->watches[fd])
        event_free(ad->watches[fd]);
    ad->watches[fd] = NULL;
    ad->events[fd] = 0;
}

static void redlock_libevent__socket(void *ud, int fd, int events)
{
    redlock_libevent *ad = (redlock_libevent *)ud;
    short want = (short)((events & REDLOCK_EV_READ ? EV_READ : 0) |
                         (events & REDLOCK_EV_WRITE ? EV_WRITE : 0));
    struct event *ev;

    if (fd < 0)
        return;
    if ((size_t)fd >= ad->cap) {
        size_t cap = ad->cap ? ad->cap : 64;
        struct event **w;
        short *e;

        if (!want)
            return; /* never watched */
        while (cap <= (size_t)fd)
            cap *= 2;
        w = (struct event **)realloc(ad->watches, cap * sizeof(*w));
        if (!w)
            return; /* the operation's own deadline still ends it */
        ad->watches = w;
        e = (short *)realloc(ad->events, cap * sizeof(*e));
        if (!e)
            return; /* watches grew, cap did not: still consistent */
        ad->events = e;
        memset(w + ad->cap, 0, (cap - ad->cap) * sizeof(*w));
        memset(e + ad->cap, 0, (cap - ad->cap) * sizeof(*e));
        ad->cap = cap;
    }
    if (!want) {
        redlock_libevent__unwatch(ad, fd);
        return;
    }
    if (ad->watches[fd] && ad->events[fd] == want)
        return;
    /* A struct event's events are fixed at creation: a change makes a new
     * one (the old one is deleted first, so libevent never sees two events
     * for the same fd from us). */
    redlock_libevent__unwatch(ad, fd);
    ev = event_new(ad->base, fd, (short)(want | EV_PERSIST), redlock_libevent__io_cb, ad);
    if (!ev)
        return; /* the operation's own deadline still ends it */
    if (event_add(ev, NULL) != 0) {
        event_free(ev);
        return;
    }
    ad->watches[fd] = ev;
    ad->events[fd] = want;
}

static void redlock_libevent__timer(void *ud, int64_t timeout_ms)
{
    redlock_libevent *ad = (redlock_libevent *)ud;
    struct timeval tv;

    if (timeout_ms < 0) {
        evtimer_del(ad->timer);
        return;
    }
    tv.tv_sec = (time_t)(timeout_ms / 1000);
    tv.tv_usec = (int)(timeout_ms % 1000) * 1000;
    /* Inside a callback libevent counts from the time cached when the
     * callbacks began; after a long one that is in the past and the timer
     * would fire early, only to be asked for again. */
    event_base_update_cache_time(ad->base);
    evtimer_add(ad->timer, &tv); /* re-adding replaces the timeout */
}

/*
 * Attaches client (made with options.event_loop) to base; *out gets the
 * adapter, for redlock_libevent_detach(). Returns what
 * redlock_loop_attach() returns, or REDLOCK_ENOMEM / REDLOCK_EINVAL (NULL
 * argument) before trying; on failure *out is NULL and nothing is left.
 */
static inline int redlock_libevent_attach(redlock_client *client, struct event_base *base,
                                          redlock_libevent **out)
{
    redlock_libevent *ad;
    int rc;

    if (!out)
        return REDLOCK_EINVAL;
    *out = NULL;
    if (!client || !base)
        return REDLOCK_EINVAL;
    ad = (redlock_libevent *)calloc(1, sizeof(*ad));
    if (!ad)
        return REDLOCK_ENOMEM;
    ad->client = client;
    ad->base = base;
    ad->timer = evtimer_new(base, redlock_libevent__timer_cb, ad);
    if (!ad->timer) {
        free(ad);
        return REDLOCK_ENOMEM;
    }
    rc = redlock_loop_attach(client, redlock_libevent__socket, redlock_libevent__timer, ad);
    if (rc != REDLOCK_OK) {
        event_free(ad->timer);
        free(ad);
        return rc;
    }
    *out = ad;
    return REDLOCK_OK;
}

/* Frees the adapter's events and the adapter (after redlock_client_free(),
 * see above). NULL is allowed. */
static inline void redlock_libevent_detach(redlock_libevent *ad)
{
    size_t fd;

    if (!ad)
        return;
    for (fd = 0; fd < ad->cap; fd++)
        redlock_libevent__unwatch(ad, (int)fd);
    event_free(ad->timer);
    free(ad->watches);
    free(ad->events);
    free(ad);
}

#endif
