/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The watchdog's list of holds to renew, and how a hold leaves it: the
 * mutex a tick holds while it walks the list, and the pins a tick puts on
 * the holds it works on (see THREADS.md). The ticks are in watchdog.c.
 */
#include <pthread.h>

#include "core/wait.h"
#include "lock/internal.h"
#include "lock/watchdog.h"

void redlock__watchdog_add(redlock_lock *l)
{
    redlock__watchdog *wd = &l->client->wd;

    pthread_mutex_lock(&wd->mu);
    if (!l->wd_listed) {
        __atomic_store_n(&l->wd_listed, 1, __ATOMIC_RELEASE);
        l->wd_next = wd->holds;
        wd->holds = l;
    }
    pthread_cond_broadcast(&wd->cond);
    pthread_mutex_unlock(&wd->mu);
    /* A hold listed from a thread other than its client's I/O thread (a
     * fiber of another client's loop making a call inline): that thread's
     * timer must learn of the renewal due. */
    if (l->client->io.wake && redlock__io_elsewhere(l->client))
        l->client->io.wake(l->client->io.io);
}

static void unlist(redlock__watchdog *wd, redlock_lock *l)
{
    redlock_lock **pp = &wd->holds;

    if (!l->wd_listed)
        return;
    while (*pp && *pp != l)
        pp = &(*pp)->wd_next;
    if (*pp)
        *pp = l->wd_next;
    __atomic_store_n(&l->wd_listed, 0, __ATOMIC_RELEASE);
    l->wd_next = NULL;
}

static void wait_unpinned(redlock__watchdog *wd, redlock_lock *l)
{
    while (l->wd_pins > 0)
        redlock__wait_cond(&wd->cond, &wd->mu);
}

void redlock__watchdog_remove(redlock_lock *l)
{
    redlock__watchdog *wd = &l->client->wd;

    /* A fixed-lease hold is neither listed nor pinned: its release does not
     * take the client-wide mutex a tick holds while it walks every hold.
     * Only this handle's own acquire lists it, which cannot race the
     * release of the hold it holds; a tick pins only listed holds. */
    if (!__atomic_load_n(&l->wd_listed, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&l->wd_pins, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&wd->mu);
    unlist(wd, l);
    /* A tick in flight may still restore a member of this lock; the
     * caller's release must come after it on every node. */
    wait_unpinned(wd, l);
    pthread_mutex_unlock(&wd->mu);
}

/* Set while this thread runs a tick: its on_lost callbacks may acquire
 * other locks the same tick pins, and must not wait for the tick itself. */
static _Thread_local int in_tick;

void redlock__watchdog_settle(redlock_lock *l)
{
    redlock__watchdog *wd = &l->client->wd;

    /* Almost always unpinned: then the client-wide mutex, which a tick
     * holds while it walks every hold, is not touched. A pin taken before
     * the hold was found lost is visible here: the caller saw that verdict
     * under l->mu, which the tick took after pinning. */
    if (in_tick || __atomic_load_n(&l->wd_pins, __ATOMIC_ACQUIRE) == 0)
        return;
    pthread_mutex_lock(&wd->mu);
    wait_unpinned(wd, l);
    pthread_mutex_unlock(&wd->mu);
}

int redlock__watchdog_free_later(redlock_lock *l)
{
    redlock__watchdog *wd = &l->client->wd;
    int later;

    if (!in_tick)
        return 0;
    pthread_mutex_lock(&wd->mu);
    unlist(wd, l);
    later = l->wd_pins > 0;
    l->wd_free_later = later;
    pthread_mutex_unlock(&wd->mu);
    return later;
}

void redlock__watchdog_drop(redlock_lock *l)
{
    redlock__watchdog *wd = &l->client->wd;

    pthread_mutex_lock(&wd->mu);
    unlist(wd, l);
    pthread_mutex_unlock(&wd->mu);
}

void redlock__watchdog_in_tick(int running)
{
    in_tick = running;
}

int redlock__watchdog_ticking_here(void)
{
    return in_tick;
}

int redlock__watchdog_in_tick_swap(int running)
{
    int before = in_tick;

    in_tick = running;
    return before;
}
