/* SPDX-License-Identifier: BSD-3-Clause */
#include "loop_harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rig_env.h"

loop L;

void on_socket(void *ud, int fd, int events)
{
    loop *lp = ud;
    size_t i;

    lp->socket_calls++;
    for (i = 0; i < lp->n && lp->fds[i].fd != fd; i++)
        ;
    if (events == 0) {
        if (i < lp->n)
            lp->fds[i] = lp->fds[--lp->n];
        return;
    }
    if (i == lp->n) {
        ck_assert_int_lt(lp->n, MAX_FDS);
        lp->fds[lp->n++].fd = fd;
    }
    lp->fds[i].events = (short)((events & REDLOCK_EV_READ ? POLLIN : 0) |
                                (events & REDLOCK_EV_WRITE ? POLLOUT : 0));
}

void on_timer(void *ud, int64_t ms)
{
    loop *lp = ud;

    lp->timer_at_ms = ms < 0 ? -1 : rig_now_ms() + ms;
}

static void timed_action(int fd, int events)
{
    int64_t t0 = rig_now_us(), took;

    ck_assert_int_eq(redlock_loop_action(L.c, fd, events), REDLOCK_OK);
    took = rig_now_us() - t0;
    if (took > L.longest_action_us)
        L.longest_action_us = took;
}

/* One round of the loop: poll, then report what is ready. */
void turn(int max_ms)
{
    struct pollfd ready[MAX_FDS];
    int64_t wait = max_ms, now = rig_now_ms();
    size_t i, n = L.n;
    int r;

    if (L.timer_at_ms >= 0 && (L.timer_at_ms - now < wait))
        wait = L.timer_at_ms > now ? L.timer_at_ms - now : 0;
    r = poll(L.fds, L.n, (int)wait);
    memcpy(ready, L.fds, n * sizeof(ready[0]));
    for (i = 0; r > 0 && i < n; i++)
        if (ready[i].revents)
            timed_action(ready[i].fd,
                         (ready[i].revents & (POLLIN | POLLERR | POLLHUP) ? REDLOCK_EV_READ : 0) |
                         (ready[i].revents & (POLLOUT | POLLERR | POLLHUP) ? REDLOCK_EV_WRITE : 0));
    if (L.timer_at_ms >= 0 && rig_now_ms() >= L.timer_at_ms) {
        L.timer_at_ms = -1;
        timed_action(REDLOCK_EV_TIMEOUT, 0);
    }
}

int run_until(const int *flag, int64_t ms)
{
    int64_t end = rig_now_ms() + ms;

    while (!*flag && rig_now_ms() < end)
        turn(10);
    return *flag;
}

void on_done(void *ud, redlock_lock *l, int rc, const char *msg)
{
    result *r = ud;

    r->done++;
    r->rc = rc;
    r->lock_was_null = l == NULL;
    r->called_in_start = L.in_start;
    r->at_ms = rig_now_ms();
    snprintf(r->msg, sizeof(r->msg), "%s", msg);
}

redlock_client *loop_client(int node_timeout_ms, int watchdog_lease_ms)
{
    redlock_options o = {0};

    memset(&L, 0, sizeof(L));
    L.timer_at_ms = -1;
    o.event_loop = 1;
    o.node_timeout_ms = node_timeout_ms;
    o.watchdog_lease_ms = watchdog_lease_ms;
    ck_assert_msg(redlock_client_new(&L.c, rig_plain_uris(), N_NODES, &o) == REDLOCK_OK, "%s",
                  redlock_last_error());
    ck_assert_int_eq(redlock_loop_attach(L.c, on_socket, on_timer, &L), REDLOCK_OK);
    return L.c;
}

redlock_lock *new_lock(const char *name)
{
    redlock_lock *l = NULL;

    ck_assert_int_eq(redlock_lock_new(L.c, name, NULL, &l), REDLOCK_OK);
    return l;
}

void start_acquire(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms,
                   result *r)
{
    memset(r, 0, sizeof(*r));
    L.in_start = 1;
    ck_assert_msg(redlock_acquire_async(l, owner, wait_ms, lease_ms, on_done, r) == REDLOCK_OK,
                  "%s", redlock_last_error());
    L.in_start = 0;
}

void start_unlock(redlock_lock *l, uint64_t owner, result *r)
{
    memset(r, 0, sizeof(*r));
    L.in_start = 1;
    ck_assert_msg(redlock_unlock_async(l, owner, on_done, r) == REDLOCK_OK, "%s",
                  redlock_last_error());
    L.in_start = 0;
}

int nodes_with(const char *name)
{
    char args[128];
    int n = 0;
    size_t i;

    snprintf(args, sizeof(args), "EXISTS %s", name);
    for (i = 0; i < N_NODES; i++)
        n += atoi(rig_cli(i, args));
    return n;
}

