/* SPDX-License-Identifier: BSD-3-Clause */
/* What the program's loop is asked to watch, per fd, and when it stops. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "loop/sched.h"

const unsigned char *redlock__loop_fd_table(const redlock__loop *loop, size_t *cap)
{
    *cap = loop->fd_cap;
    return loop->fd_events;
}

void redlock__fds_tell(redlock__loop *loop, int fd, int events)
{
    if (!loop->destroying)
        loop->socket_fn(loop->userdata, fd, events);
}

int redlock__fds_grow(redlock__loop *loop, int fd)
{
    size_t cap = loop->fd_cap ? loop->fd_cap : 64;
    unsigned char *ev;
    redlock__task **own;

    while (cap <= (size_t)fd)
        cap *= 2;
    if (cap == loop->fd_cap)
        return 0;
    ev = realloc(loop->fd_events, cap);
    if (!ev)
        return -1;
    loop->fd_events = ev;
    own = realloc(loop->fd_owner, cap * sizeof(*own));
    if (!own)
        return -1;
    loop->fd_owner = own;
    memset(ev + loop->fd_cap, 0, cap - loop->fd_cap);
    memset(own + loop->fd_cap, 0, (cap - loop->fd_cap) * sizeof(*own));
    loop->fd_cap = cap;
    return 0;
}

/* fd's task is done with it. It stays watched (sched.h), except where
 * other threads share the pool (redlock__loop_pool_shared): then the loop stops watching it at the end
 * of the call unless another task takes it first. */
static void mark_stale(redlock__loop *loop, int fd)
{
    loop->fd_owner[fd] = NULL;
    if (!redlock__loop_pool_shared(loop) || (loop->fd_events[fd] & STALE_LISTED))
        return;
    if (loop->n_stale == loop->stale_cap) {
        size_t cap = loop->stale_cap ? 2 * loop->stale_cap : 64;
        int *s = realloc(loop->stale, cap * sizeof(*s));

        if (!s) { /* no room to defer: stop watching it now */
            loop->fd_events[fd] = 0;
            redlock__fds_tell(loop, fd, 0);
            return;
        }
        loop->stale = s;
        loop->stale_cap = cap;
    }
    loop->stale[loop->n_stale++] = fd;
    loop->fd_events[fd] |= STALE_LISTED;
}

void redlock__fds_flush_stale(redlock__loop *loop)
{
    size_t i;

    for (i = 0; i < loop->n_stale; i++) {
        int fd = loop->stale[i];

        loop->fd_events[fd] &= (unsigned char)~STALE_LISTED;
        if (!loop->fd_owner[fd] && (loop->fd_events[fd] & EV_MASK)) {
            loop->fd_events[fd] = 0;
            redlock__fds_tell(loop, fd, 0);
        }
    }
    loop->n_stale = 0;
}

static int events_of(short poll_events)
{
    return (poll_events & POLLIN ? REDLOCK_EV_READ : 0) |
           (poll_events & POLLOUT ? REDLOCK_EV_WRITE : 0);
}

/* After a task ran: the loop watches the fds it parked on now, and no
 * longer those it parked on before. */
void redlock__fds_update(redlock__loop *loop, redlock__task *t)
{
    redlock__park *p = redlock__fiber_park(t->fiber);
    size_t n = t->finished ? 0 : p->n, i, j;

    for (i = 0; i < t->n_regs; i++) {
        int fd = t->regs[i], kept = 0;

        for (j = 0; j < n && !kept; j++)
            kept = p->pfd[j].fd == fd;
        if (!kept && (size_t)fd < loop->fd_cap && loop->fd_owner[fd] == t)
            mark_stale(loop, fd);
    }
    t->n_regs = 0;
    for (j = 0; j < n && t->n_regs < sizeof(t->regs) / sizeof(t->regs[0]); j++) {
        int fd = p->pfd[j].fd, ev = events_of(p->pfd[j].events);

        if (fd < 0 || redlock__fds_grow(loop, fd) != 0)
            continue; /* out of memory: the task's deadline still ends it */
        loop->fd_owner[fd] = t;
        if ((loop->fd_events[fd] & EV_MASK) != ev) {
            loop->fd_events[fd] = (unsigned char)((loop->fd_events[fd] & STALE_LISTED) | ev);
            redlock__fds_tell(loop, fd, ev);
        }
        t->regs[t->n_regs++] = fd;
    }
}

/* The core closes an fd: the program's loop stops watching it first. */
void redlock__fds_on_close(void *ud, int fd)
{
    redlock__loop *loop = ud;

    if ((size_t)fd < loop->fd_cap && (loop->fd_events[fd] & EV_MASK)) {
        loop->fd_owner[fd] = NULL;
        loop->fd_events[fd] &= STALE_LISTED;
        redlock__fds_tell(loop, fd, 0);
    }
}

