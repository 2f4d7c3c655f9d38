/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A loop's life: attaching a client to the program's loop, driving it
 * with the library's own poll() when the program's loop cannot run (a
 * blocking call on its thread, the client being freed), and the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/util.h"
#include "core/wait.h"
#include "lock/context.h"
#include "loop/sched.h"
#include "transport/mux.h"
#include "transport/pubsub.h"

/* Frees a loop that never ran a task (attach failed). */
static void free_unused(redlock__loop *loop)
{
    if (loop->wake_fd >= 0)
        close(loop->wake_fd);
    free(loop->fd_events);
    free(loop->fd_owner);
    free(loop);
}

static int busy(void *ud)
{
    const redlock__loop *loop = ud;

    return loop->in_action || redlock__wait_parks();
}

/* One turn of the library's own loop, for when the program's cannot run
 * (a blocking call, the client being freed): poll() on every fd a task
 * parked on, until the next deadline or give_up, then what is due. */
static void drive_round(redlock__loop *loop, int64_t give_up)
{
    struct pollfd *pfd = malloc(loop->fd_cap * sizeof(*pfd));
    size_t n = 0, i;
    int64_t next = redlock__loop_next_deadline(loop);

    if (!pfd) {
        /* Out of memory: the deadlines still move every task on. */
        redlock__wait_until(next < give_up ? next : give_up);
        redlock__loop_wake_due(loop, redlock__now_ns());
        return;
    }
    pfd[n].fd = loop->wake_fd;
    pfd[n].events = POLLIN;
    pfd[n].revents = 0;
    n++;
    for (i = 0; i < loop->fd_cap && n < loop->fd_cap; i++)
        if (loop->fd_owner[i]) {
            pfd[n].fd = (int)i;
            pfd[n].events = (short)((loop->fd_events[i] & REDLOCK_EV_READ ? POLLIN : 0) |
                                    (loop->fd_events[i] & REDLOCK_EV_WRITE ? POLLOUT : 0));
            pfd[n].revents = 0;
            n++;
        }
    if (redlock__wait_poll(pfd, n, next < give_up ? next : give_up) > 0) {
        for (i = 1; i < n; i++)
            if (pfd[i].revents)
                redlock__loop_fd_ready(loop, pfd[i].fd, pfd[i].revents);
        if (pfd[0].revents)
            redlock__loop_woken(loop);
    }
    free(pfd);
    redlock__loop_wake_due(loop, redlock__now_ns());
}

int redlock__loop_run(redlock__loop *loop, redlock__task *t)
{
    int was = loop->in_action, rc;

    loop->in_action = 1;
    for (;;) {
        redlock__loop_run_queue(loop);
        redlock__loop_deliver(loop);
        if (t->finished)
            break;
        drive_round(loop, INT64_MAX);
    }
    redlock__fds_flush_stale(loop);
    loop->in_action = was;
    if (!was)
        redlock__loop_update_timer(loop);
    rc = t->rc;
    if (rc != REDLOCK_OK)
        redlock__fail(rc, "%s", t->error);
    /* The caller's redlock_lock_report() tells of this call, as usual. */
    redlock__report_adopt(t->report);
    redlock__loop_task_free(loop, t);
    return rc;
}

/* The operations' shared connections (transport/mux.h), read by a task of
 * their own. Without them (out of memory) the operations borrow pool
 * connections as blocking calls do: slower, not wrong. */
static void start_mux(redlock__loop *loop)
{
    redlock__net *net = &loop->c->net;
    redlock__mux *mux;

    if (loop->c->tp.ops != &redlock__net_ops ||
        redlock__mux_new(net->nodes, net->n_nodes, &net->hook, net->node_failures, &mux) !=
            REDLOCK_OK)
        return;
    __atomic_store_n(&net->mux, mux, __ATOMIC_RELEASE);
    if (redlock__task_start(loop->c, NULL, redlock__loop_mux_fn, NULL, 0, 0, 0, NULL, NULL) !=
        REDLOCK_OK) {
        __atomic_store_n(&net->mux, NULL, __ATOMIC_RELEASE);
        redlock__mux_free(mux);
    }
}

/* After the tasks ended: the reader has closed the connections. One
 * still running (past destroy's bound, a bug) keeps its memory. */
static void free_mux(redlock__loop *loop)
{
    redlock__net *net = &loop->c->net;
    redlock__mux *mux = __atomic_load_n(&net->mux, __ATOMIC_ACQUIRE);

    if (!mux || redlock__mux_running(mux))
        return;
    __atomic_store_n(&net->mux, NULL, __ATOMIC_RELEASE);
    redlock__mux_free(mux);
}

/* redlock_client_free(): what is in flight ends (canceled acquires end
 * within about a node timeout, unlocks and ticks within theirs), driven
 * by poll() here, the program's loop no longer being asked anything. */
static void destroy(void *ud)
{
    redlock__loop *loop = ud;
    int64_t give_up = redlock__now_ns() + 30000 * REDLOCK__NS_PER_MS;
    size_t fd;

    /* The program's loop stops watching now: its hooks are not called
     * again, and its watchers must not outlive the fds. */
    for (fd = 0; fd < loop->fd_cap; fd++)
        if (loop->fd_events[fd] & EV_MASK)
            loop->socket_fn(loop->userdata, (int)fd, 0);
    if (loop->timer_at != INT64_MAX)
        loop->timer_fn(loop->userdata, -1);
    loop->destroying = 1;
    loop->in_action = 1;
    redlock_client_cancel(loop->c);
    if (loop->c->net.pubsub)
        redlock__pubsub_close(loop->c->net.pubsub);
    if (loop->c->net.mux) {
        redlock__mux_close(loop->c->net.mux);
        redlock__loop_notify(loop, loop->c->net.mux);
    }
    while (loop->tasks && redlock__now_ns() < give_up) {
        redlock__loop_run_queue(loop);
        redlock__loop_deliver(loop);
        if (!loop->tasks)
            break;
        drive_round(loop, give_up);
    }
    /* Handles freed while in use, whose last task has ended: freed now
     * (without the hooks, so as usual). Past the bound (a bug) the rest
     * leak rather than free what live stacks use. */
    loop->c->loop = (redlock__loop_hooks){0};
    free_mux(loop);
    if (loop->c->tp.ops == &redlock__net_ops)
        redlock__net_on_fd_closing(&loop->c->net, NULL, NULL);
    while (loop->freeing) {
        freeing *f = loop->freeing;

        loop->freeing = f->next;
        if (!redlock__loop_has_tasks(loop, f->lock) && !redlock__loop_pinned(f->lock))
            redlock_lock_free(f->lock);
        free(f);
    }
    while (loop->spare) {
        redlock__task *t = loop->spare;

        loop->spare = t->next;
        redlock__loop_task_destroy(t);
    }
    close(loop->wake_fd);
    free(loop->fd_events);
    free(loop->fd_owner);
    free(loop->stale);
    free(loop->heap);
    free(loop);
}

int redlock_loop_attach(redlock_client *c, redlock_socket_fn socket_fn,
                        redlock_timer_fn timer_fn, void *userdata)
{
    redlock__loop *loop;

    if (!c || !socket_fn || !timer_fn)
        return redlock__fail(REDLOCK_EINVAL, "client, socket_fn and timer_fn are required");
    if (!c->event_loop)
        return redlock__fail(REDLOCK_EINVAL, "not a loop-driven client (options.event_loop)");
    if (c->loop.loop)
        return redlock__fail(REDLOCK_EINVAL, "the client is already attached to a loop");
    loop = calloc(1, sizeof(*loop));
    if (!loop)
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    loop->c = c;
    loop->socket_fn = socket_fn;
    loop->timer_fn = timer_fn;
    loop->userdata = userdata;
    loop->timer_at = INT64_MAX;
    loop->wd_due = INT64_MAX;
    loop->thread = pthread_self();
    loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop->wake_fd < 0 || redlock__fds_grow(loop, loop->wake_fd) != 0) {
        int saved = errno;

        free_unused(loop);
        return redlock__fail(REDLOCK_ENOMEM, "eventfd: %s", strerror(saved));
    }
    c->loop.loop = loop;
    c->loop.kick = redlock__loop_kick;
    c->loop.lock_freeing = redlock__loop_lock_freeing;
    c->loop.destroy = destroy;
    c->loop.run_sync = redlock__loop_run_sync;
    c->loop.busy = busy;
    /* Release messages: the subscriber runs as a task of its own. */
    if (c->net.pubsub && redlock__task_start(c, NULL, redlock__loop_subscriber_fn, NULL, 0, 0, 0,
                                             NULL, NULL) != REDLOCK_OK) {
        c->loop = (redlock__loop_hooks){0};
        free_unused(loop);
        return REDLOCK_ENOMEM;
    }
    /* Last: attach cannot fail after it. */
    start_mux(loop);
    loop->fd_events[loop->wake_fd] = REDLOCK_EV_READ;
    socket_fn(userdata, loop->wake_fd, REDLOCK_EV_READ);
    /* A pooled connection may also close outside a fiber (a blocking
     * inspect on this thread): the loop must hear of it all the same. With
     * the watchdog's own thread closing some, idle fds are not kept
     * watched instead (flush_stale), and this hook, which is not for
     * other threads, stays unset. */
    if (c->tp.ops == &redlock__net_ops && !redlock__loop_pool_shared(loop))
        redlock__net_on_fd_closing(&c->net, redlock__fds_on_close, loop);
    return REDLOCK_OK;
}

