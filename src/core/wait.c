/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "core/wait.h"

#include <errno.h>
#include <time.h>

#include "core/fiber.h"
#include "core/util.h"

static _Thread_local void (*close_fn)(void *ud, int fd);
static _Thread_local void (*notify_fn)(void *ud, const void *key);
static _Thread_local void *hooks_ud;

/* Parks the running fiber on pfd until deadline_ns; the loop fills
 * revents. Returns how many entries are ready. */
static int park(redlock__fiber *f, struct pollfd *pfd, size_t n, int64_t deadline_ns, int idle,
                const void *key)
{
    redlock__park *p = redlock__fiber_park(f);
    size_t i;
    int ready = 0;

    for (i = 0; i < n; i++)
        pfd[i].revents = 0;
    p->pfd = n ? pfd : NULL;
    p->n = n;
    p->deadline_ns = deadline_ns;
    p->kicked = 0;
    p->notified = 0;
    p->idle = idle;
    p->key = key;
    redlock__fiber_yield();
    p->idle = 0;
    p->key = NULL;
    p->pfd = NULL;
    p->n = 0;
    p->deadline_ns = INT64_MAX;
    for (i = 0; i < n; i++)
        ready += pfd[i].revents != 0;
    /* Woken by the clock: a reply may be waiting in a socket the loop has
     * not reported yet (it reports one fd at a time, or ran its timers
     * first after a stall). ppoll() would see it; so must this, or the
     * reply counts as a timeout. */
    if (ready == 0 && n > 0 && !p->kicked && !p->notified) {
        int r = poll(pfd, n, 0);

        ready = r > 0 ? r : 0;
    }
    return ready;
}

int redlock__wait_poll(struct pollfd *pfd, size_t n, int64_t deadline_ns)
{
    redlock__fiber *f = redlock__fiber_current();
    struct timespec ts;
    int64_t now;

    if (f)
        return park(f, pfd, n, deadline_ns, 0, NULL);
    now = redlock__now_ns();
    ts = redlock__timespec(deadline_ns > now ? deadline_ns - now : 0);
    return ppoll(pfd, n, &ts, NULL);
}

int redlock__wait_poll_key(struct pollfd *pfd, size_t n, int64_t deadline_ns, const void *key)
{
    redlock__fiber *f = redlock__fiber_current();

    if (!f)
        return redlock__wait_poll(pfd, n, deadline_ns);
    return park(f, pfd, n, deadline_ns, 0, key);
}

void redlock__wait_until(int64_t deadline_ns)
{
    redlock__fiber *f = redlock__fiber_current();
    int64_t now = redlock__now_ns();
    struct timespec ts;

    if (f) {
        park(f, NULL, 0, deadline_ns, 1, NULL);
        return;
    }
    if (deadline_ns <= now)
        return;
    ts = redlock__timespec(deadline_ns - now);
    nanosleep(&ts, NULL);
}

void redlock__wait_cond(pthread_cond_t *cond, pthread_mutex_t *mu)
{
    redlock__fiber *f = redlock__fiber_current();

    if (!f) {
        pthread_cond_wait(cond, mu);
        return;
    }
    pthread_mutex_unlock(mu);
    park(f, NULL, 0, redlock__now_ns() + REDLOCK__NS_PER_MS, 0, NULL);
    pthread_mutex_lock(mu);
}

int redlock__wait_cond_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline_ns,
                             int between_steps)
{
    redlock__fiber *f = redlock__fiber_current();
    struct timespec ts;

    if (redlock__now_ns() >= deadline_ns)
        return ETIMEDOUT;
    if (!f) {
        ts = redlock__timespec(deadline_ns);
        return pthread_cond_timedwait(cond, mu, &ts);
    }
    pthread_mutex_unlock(mu);
    park(f, NULL, 0, deadline_ns, between_steps, cond);
    pthread_mutex_lock(mu);
    return redlock__now_ns() >= deadline_ns ? ETIMEDOUT : 0;
}

void redlock__wait_notify(const void *key)
{
    if (notify_fn)
        notify_fn(hooks_ud, key);
}

int redlock__wait_parks(void)
{
    return redlock__fiber_current() != NULL;
}

const void *redlock__wait_runner(void)
{
    return redlock__fiber_current() ? hooks_ud : NULL;
}

void redlock__wait_fd_closing(int fd)
{
    if (close_fn && fd >= 0)
        close_fn(hooks_ud, fd);
}

void redlock__wait_hooks(void (*on_close)(void *ud, int fd),
                         void (*on_notify)(void *ud, const void *key), void *ud)
{
    close_fn = on_close;
    notify_fn = on_notify;
    hooks_ud = ud;
}
