/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The watchdog's thread: it sleeps until the next renewal or background
 * call is due (or it is woken), then runs one tick (watchdog.c).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/error.h"
#include "core/util.h"
#include "lock/health.h"
#include "lock/internal.h"
#include "lock/retry.h"
#include "lock/watchdog.h"

/* The retry queue tells the watchdog thread a call was queued or a node
 * is back. It may run inside a fan-out's reply callback, so it takes no
 * mutex (a transport may hold its own while calling back, and the watchdog
 * thread reads the transport's clock under wd.mu). A wake-up lost to the
 * race costs at most the sleep the thread had planned, one back-off. */
static void wake_watchdog(void *ud)
{
    redlock__watchdog *wd = ud;
    redlock_client *c = (redlock_client *)((char *)wd - offsetof(redlock_client, wd));

    pthread_cond_broadcast(&wd->cond);
    if (c->io.wake && redlock__io_elsewhere(c))
        c->io.wake(c->io.io);
}

/* The next moment anything is due. Called with wd->mu held. */
static int64_t next_due(redlock_client *c)
{
    int64_t next = INT64_MAX;
    int64_t retry = redlock__retry_next_due(&c->retry);
    redlock_lock *l;

    for (l = c->wd.holds; l; l = l->wd_next) {
        pthread_mutex_lock(&l->mu);
        if (l->state == REDLOCK__HELD && l->watchdog && l->next_renew_ns < next)
            next = l->next_renew_ns;
        pthread_mutex_unlock(&l->mu);
    }
    return retry < next ? retry : next;
}

static void *watchdog_main(void *arg)
{
    redlock_client *c = arg;
    redlock__watchdog *wd = &c->wd;

    pthread_mutex_lock(&wd->mu);
    while (!wd->closing) {
        int64_t next, now;

        /* Whoever parks a call meanwhile wakes this thread (see
         * redlock__retry_park); then it says when it would wake anyway. */
        redlock__retry_sender_wakes_at(&c->retry, INT64_MAX);
        next = next_due(c);
        now = c->tp.ops->now_ns(c->tp.ctx);
        redlock__retry_sender_wakes_at(&c->retry, next);

        if (next <= now) {
            pthread_mutex_unlock(&wd->mu);
            redlock__watchdog_tick(c);
            pthread_mutex_lock(&wd->mu);
            continue;
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&wd->cond, &wd->mu);
        } else {
            struct timespec ts;

            /* The fake transport's clock is virtual; the real one is
             * CLOCK_MONOTONIC, which the condition variable uses too. */
            if (c->tp.ops->now_ns != redlock__net_ops.now_ns)
                next = redlock__now_ns() + (next - now);
            ts = redlock__timespec(next);
            pthread_cond_timedwait(&wd->cond, &wd->mu, &ts);
        }
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

int64_t redlock__watchdog_next_due(redlock_client *c)
{
    int64_t next;

    pthread_mutex_lock(&c->wd.mu);
    next = next_due(c);
    pthread_mutex_unlock(&c->wd.mu);
    return next;
}

int redlock__watchdog_start(redlock_client *c, int with_thread)
{
    redlock__watchdog *wd = &c->wd;
    pthread_condattr_t ca;

    pthread_mutex_init(&wd->mu, NULL);
    pthread_mutex_init(&wd->run_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd->cond, &ca);
    pthread_condattr_destroy(&ca);
    redlock__retry_init(&c->retry, wake_watchdog, wd);
    /* The transport settles the calls releases leave in flight here. */
    if (c->tp.ops->set_settle)
        c->tp.ops->set_settle(c->tp.ctx, redlock__ledger_settled, c);
    wd->ready = 1;
    if (!with_thread)
        return REDLOCK_OK;
    if (pthread_create(&wd->thread, NULL, watchdog_main, c) != 0) {
        redlock__retry_destroy(&c->retry);
        pthread_mutex_destroy(&wd->mu);
        pthread_mutex_destroy(&wd->run_mu);
        pthread_cond_destroy(&wd->cond);
        wd->ready = 0;
        return redlock__fail(REDLOCK_ENOMEM, "cannot start the watchdog thread");
    }
    wd->running = 1;
    return REDLOCK_OK;
}

void redlock__watchdog_stop(redlock_client *c)
{
    redlock__watchdog *wd = &c->wd;

    if (!wd->ready)
        return;
    pthread_mutex_lock(&wd->mu);
    wd->closing = 1;
    pthread_cond_broadcast(&wd->cond);
    pthread_mutex_unlock(&wd->mu);
    if (wd->running)
        pthread_join(wd->thread, NULL);
    wd->running = 0;
    wd->ready = 0;
    /* Nothing is sent in the background any more: what is queued now is
     * only flushed (redlock_client_free) or dropped. */
    pthread_mutex_lock(&c->retry.mu);
    c->retry.wake = NULL;
    pthread_mutex_unlock(&c->retry.mu);
    pthread_mutex_destroy(&wd->mu);
    pthread_mutex_destroy(&wd->run_mu);
    pthread_cond_destroy(&wd->cond);
}
