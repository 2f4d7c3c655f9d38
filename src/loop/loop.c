/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scheduler's tasks: resuming them when the program's loop reports
 * their fds or their deadline (sched.h), admitting at most MAX_ACTIVE to
 * the network at once, the watchdog's ticks when due, and the done
 * callbacks, always run from the thread's own stack.
 */
#define _GNU_SOURCE
#include "loop/sched.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "core/wait.h"
#include "lock/context.h"
#include "lock/watchdog.h"
#include "transport/mux.h"
#include "transport/pubsub.h"


/* A watchdog tick parked in its fiber uses l: freeing l would wait for
 * that tick, which only this thread can run. */
int redlock__loop_pinned(const redlock_lock *l)
{
    return __atomic_load_n(&l->wd_pins, __ATOMIC_ACQUIRE) > 0;
}

void redlock__loop_make_runnable(redlock__loop *loop, redlock__task *t)
{
    /* The running task itself (it canceled or freed its own lock, from a
     * log callback say) needs no queueing: it runs. */
    if (t->queued || t->finished || t->admitting || redlock__fiber_current() == t->fiber)
        return;
    t->queued = 1;
    t->run_next = NULL;
    if (loop->run_tail)
        loop->run_tail->run_next = t;
    else
        loop->run_head = t;
    loop->run_tail = t;
}

/* A condition some fibers may be parked on changed (core/wait.h). */
void redlock__loop_notify(redlock__loop *loop, const void *key)
{
    redlock__task *t;

    for (t = loop->tasks; t; t = t->next)
        if (!t->finished && redlock__fiber_park(t->fiber)->key == key) {
            redlock__fiber_park(t->fiber)->notified = 1;
            redlock__loop_make_runnable(loop, t);
        }
}

static void on_notify(void *ud, const void *key)
{
    redlock__loop_notify(ud, key);
}

/* Runs t until it parks or ends, with its own fiber-locals. */
static void resume(redlock__loop *loop, redlock__task *t)
{
    char *error = redlock__error_swap(t->error);
    void *report = redlock__report_swap(t->report);
    int in_tick = redlock__watchdog_in_tick_swap(t->in_tick);

    redlock__heap_remove(loop, t);
    redlock__wait_hooks(redlock__fds_on_close, on_notify, loop);
    t->finished = redlock__fiber_resume(t->fiber);
    redlock__wait_hooks(NULL, NULL, NULL);
    if (t->finished) {
        t->done_next = loop->done_head;
        loop->done_head = t;
    } else {
        redlock__heap_add(loop, t);
    }
    t->in_tick = redlock__watchdog_in_tick_swap(in_tick);
    redlock__report_swap(report);
    redlock__error_swap(error);
    redlock__fds_update(loop, t);
}

/* Whether t may run now: it is inside a step already, is the watchdog's
 * tick or was kicked (a cancel ends it quickly), or there is room. */
static int admit(redlock__loop *loop, redlock__task *t)
{
    if (t->active)
        return 1;
    if (t->lock && loop->active >= MAX_ACTIVE && !redlock__fiber_park(t->fiber)->kicked) {
        redlock__heap_remove(loop, t);
        t->admitting = 1;
        t->admit_next = NULL;
        if (loop->admit_tail)
            loop->admit_tail->admit_next = t;
        else
            loop->admit_head = t;
        loop->admit_tail = t;
        return 0;
    }
    t->active = 1;
    loop->active++;
    return 1;
}

/* A step ended (t sleeps between steps, or is done): the next waiting
 * task gets its room. */
static void step_ended(redlock__loop *loop, redlock__task *t)
{
    redlock__task *next = loop->admit_head;

    if (!t->active)
        return;
    t->active = 0;
    loop->active--;
    if (!next)
        return;
    loop->admit_head = next->admit_next;
    if (!loop->admit_head)
        loop->admit_tail = NULL;
    next->admitting = 0;
    redlock__loop_make_runnable(loop, next);
}

/* Takes a kicked task out of the admission queue. */
static void unadmit(redlock__loop *loop, redlock__task *t)
{
    redlock__task **pp = &loop->admit_head, *last = NULL;

    for (; *pp; last = *pp, pp = &(*pp)->admit_next)
        if (*pp == t) {
            *pp = t->admit_next;
            if (loop->admit_tail == t)
                loop->admit_tail = last;
            t->admitting = 0;
            return;
        }
}

void redlock__loop_run_queue(redlock__loop *loop)
{
    redlock__task *t;

    while ((t = loop->run_head) != NULL) {
        loop->run_head = t->run_next;
        if (!loop->run_head)
            loop->run_tail = NULL;
        t->queued = 0;
        if (t->finished || !admit(loop, t))
            continue;
        resume(loop, t);
        if (t->finished || redlock__fiber_park(t->fiber)->idle)
            step_ended(loop, t);
    }
}

static void unlink_task(redlock__loop *loop, redlock__task *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        loop->tasks = t->next;
    if (t->next)
        t->next->prev = t->prev;
    loop->n_ops -= t->lock != NULL;
}

/* Spare tasks kept: enough for the operations a loop usually has on the
 * network at once (MAX_ACTIVE). */
#define SPARE_TASKS 64

void redlock__loop_task_destroy(redlock__task *t)
{
    redlock__fiber_free(t->fiber);
    free(t->report);
    free(t);
}

void redlock__loop_task_free(redlock__loop *loop, redlock__task *t)
{
    if (loop->n_spare >= SPARE_TASKS || loop->destroying) {
        redlock__loop_task_destroy(t);
        return;
    }
    t->next = loop->spare;
    loop->spare = t;
    loop->n_spare++;
}

/* Frees the locks whose last operation has ended. */
static void free_released_locks(redlock__loop *loop)
{
    freeing **pp = &loop->freeing;

    while (*pp) {
        freeing *f = *pp;

        if (redlock__loop_has_tasks(loop, f->lock) ||
            (redlock__loop_pinned(f->lock) && !loop->c->event_loop_watchdog_thread)) {
            pp = &f->next;
            continue;
        }
        *pp = f->next;
        redlock_lock_free(f->lock);
        free(f);
    }
}

static int tick_fn(redlock__task *t)
{
    redlock__watchdog_tick(t->loop->c);
    return REDLOCK_OK;
}

/* The subscriber's loop, for as long as the client lives. */
int redlock__loop_subscriber_fn(redlock__task *t)
{
    redlock__pubsub_run(t->loop->c->net.pubsub);
    return REDLOCK_OK;
}

int redlock__loop_mux_fn(redlock__task *t)
{
    redlock__mux_run(t->loop->c->net.mux);
    return REDLOCK_OK;
}

/* The done callbacks of every finished task, from the thread's stack. */
void redlock__loop_deliver(redlock__loop *loop)
{
    redlock__task *t;
    int any = 0;

    while ((t = loop->done_head) != NULL) {
        loop->done_head = t->done_next;
        any = 1;
        unlink_task(loop, t);
        /* A blocking call's task: the call reads and frees it. */
        if (t->sync)
            continue;
        if (t->fn == tick_fn)
            loop->ticking = 0;
        if (t->done) {
            /* Inside done, redlock_lock_report() tells of this operation. */
            void *report = redlock__report_swap(t->report);

            t->done(t->userdata, redlock__loop_freeing(loop, t->lock) ? NULL : t->lock, t->rc,
                    t->rc == REDLOCK_OK ? "" : t->error);
            redlock__report_swap(report);
        }
        redlock__loop_task_free(loop, t);
    }
    free_released_locks(loop);
    /* Holds come and go, and background calls are queued, only as
     * operations and ticks end: then the next tick may have moved. */
    if (any)
        loop->wd_due = redlock__watchdog_next_due(loop->c);
}

/* The next tick on this clock: wd_due is on the transport's, which a
 * test's fake transport runs virtually. */
static int64_t tick_due(const redlock__loop *loop, int64_t now)
{
    const redlock__transport *tp = &loop->c->tp;

    if (loop->wd_due == INT64_MAX)
        return INT64_MAX;
    return now + (loop->wd_due - tp->ops->now_ns(tp->ctx));
}

/* Resumes what the clock woke, and starts a tick if one is due. */
void redlock__loop_wake_due(redlock__loop *loop, int64_t now)
{
    redlock_client *c = loop->c;

    while (loop->heap_n > 0 && redlock__heap_deadline(loop->heap[0]) <= now) {
        redlock__task *t = loop->heap[0];

        redlock__heap_remove(loop, t);
        redlock__loop_make_runnable(loop, t);
    }
    if (!loop->ticking && !c->event_loop_watchdog_thread && !loop->destroying &&
        tick_due(loop, now) <= now) {
        loop->ticking = 1;
        if (redlock__task_start(c, NULL, tick_fn, NULL, 0, 0, 0, NULL, NULL) != REDLOCK_OK)
            loop->ticking = 0;
    }
}

int64_t redlock__loop_next_deadline(redlock__loop *loop)
{
    int64_t next = loop->heap_n > 0 ? redlock__heap_deadline(loop->heap[0]) : INT64_MAX;

    if (loop->run_head || loop->done_head)
        return 0;
    if (!loop->ticking && !loop->c->event_loop_watchdog_thread) {
        int64_t due = tick_due(loop, redlock__now_ns());

        if (due < next)
            next = due;
    }
    return next;
}

/* Asks the program's loop for the timer the tasks need now. */
void redlock__loop_update_timer(redlock__loop *loop)
{
    int64_t next = redlock__loop_next_deadline(loop), now, ms;

    if (loop->destroying || next == loop->timer_at)
        return;
    loop->timer_at = next;
    if (next == INT64_MAX) {
        loop->timer_fn(loop->userdata, -1);
        return;
    }
    now = redlock__now_ns();
    ms = next <= now ? 0 : (next - now + REDLOCK__NS_PER_MS - 1) / REDLOCK__NS_PER_MS;
    loop->timer_fn(loop->userdata, ms);
}

/* A kicked task runs at once, past the MAX_ACTIVE cap: a cancel ends it
 * quickly. */
static void kick_task(redlock__loop *loop, redlock__task *t)
{
    redlock__fiber_park(t->fiber)->kicked = 1;
    if (t->admitting)
        unadmit(loop, t);
    redlock__loop_make_runnable(loop, t);
}

/* Kicks the unfinished operations of l (every lock when NULL); with
 * moved_only, only those a cancel made since they began is for: the
 * client's, or their lock's cancel count moved. Kicking every task would
 * make each waiting one try again at once for nothing, and let all of them
 * past the MAX_ACTIVE cap together. */
static void kick_tasks(redlock__loop *loop, const redlock_lock *l, int moved_only)
{
    redlock__task *t;

    for (t = loop->tasks; t; t = t->next)
        if (t->lock && (!l || t->lock == l) && !t->finished &&
            (!moved_only || redlock__canceled(t->lock->client) ||
             __atomic_load_n(&t->lock->cancels, __ATOMIC_ACQUIRE) != t->cancels))
            kick_task(loop, t);
    if (!loop->in_action)
        redlock__loop_update_timer(loop);
}

void redlock__loop_kick(void *ud, redlock_lock *l)
{
    redlock__loop *loop = ud;

    /* A cancel from another thread (a signal-handling thread, say) must
     * not touch the loop's lists: it wakes the loop, which then kicks the
     * operations whose cancel flags changed (redlock__loop_woken). */
    if (!pthread_equal(pthread_self(), loop->thread)) {
        uint64_t one = 1;
        ssize_t w = write(loop->wake_fd, &one, sizeof(one));

        (void)w; /* a full counter already means a wake-up is due */
        return;
    }
    kick_tasks(loop, l, 0);
}

/* The wake-up of cancels made on other threads. */
void redlock__loop_woken(redlock__loop *loop)
{
    uint64_t count;
    ssize_t r = read(loop->wake_fd, &count, sizeof(count));

    (void)r; /* nothing to read: a wake-up already taken */
    kick_tasks(loop, NULL, 1);
}

void redlock__loop_fd_ready(redlock__loop *loop, int fd, short revents)
{
    redlock__task *t = fd >= 0 && (size_t)fd < loop->fd_cap ? loop->fd_owner[fd] : NULL;
    redlock__park *p;
    size_t k;

    if (!t)
        return; /* not watched for a task any more */
    p = redlock__fiber_park(t->fiber);
    for (k = 0; k < p->n; k++) {
        short got = (short)(revents & (p->pfd[k].events | POLLERR | POLLHUP | POLLNVAL));

        if (p->pfd[k].fd == fd && got) {
            p->pfd[k].revents = got;
            redlock__loop_make_runnable(loop, t);
        }
    }
}

int redlock__loop_has_tasks(const redlock__loop *loop, const redlock_lock *l)
{
    const redlock__task *t;

    for (t = loop->tasks; t; t = t->next)
        if (t->lock == l)
            return 1;
    return 0;
}

/* Acquires of l that were granted but not yet told: nobody can release
 * those holds once l is freed, so each is released by a task of its own
 * and reported canceled. */
static void undo_granted(redlock__loop *loop, redlock_lock *l)
{
    redlock__task *t;

    for (t = loop->tasks; t; t = t->next) {
        if (t->lock != l || !t->finished || t->rc != REDLOCK_OK || !t->undo)
            continue;
        t->rc = REDLOCK_ECANCELED;
        snprintf(t->error, sizeof(t->error), "lock '%s' was freed while being acquired",
                 redlock_lock_name(l));
        (void)redlock__task_start(loop->c, l, t->undo, NULL, t->owner, 0, 0, NULL, NULL);
    }
}

int redlock__loop_lock_freeing(void *ud, redlock_lock *l)
{
    redlock__loop *loop = ud;
    freeing *f;

    /* A pin of the watchdog's own thread is waited for as usual. */
    if (!redlock__loop_has_tasks(loop, l) &&
        (!redlock__loop_pinned(l) || redlock__wait_parks() || loop->c->event_loop_watchdog_thread))
        return 0;
    if (redlock__loop_freeing(loop, l))
        return 1;
    f = calloc(1, sizeof(*f));
    if (!f)
        return 1; /* the handle leaks rather than be freed under a task */
    f->lock = l;
    f->next = loop->freeing;
    loop->freeing = f;
    redlock_acquire_cancel(l);
    undo_granted(loop, l);
    return 1;
}

int redlock__loop_freeing(const redlock__loop *loop, const redlock_lock *l)
{
    const freeing *f;

    for (f = loop->freeing; f; f = f->next)
        if (f->lock == l)
            return 1;
    return 0;
}

redlock__loop *redlock__loop_of(redlock_client *c)
{
    if (!c || !c->event_loop || redlock__io_elsewhere(c)) {
        redlock__fail(REDLOCK_EINVAL, c && c->io_thread
                                          ? "the client's I/O thread runs its loop "
                                            "(options.io_thread)"
                                          : "not a loop-driven client (options.event_loop)");
        return NULL;
    }
    if (!c->loop.loop) {
        redlock__fail(REDLOCK_EINVAL, "the client is not attached to a loop "
                                      "(redlock_loop_attach)");
        return NULL;
    }
    return c->loop.loop;
}

int redlock_loop_action(redlock_client *c, int fd, int events)
{
    redlock__loop *loop = redlock__loop_of(c);

    if (!loop)
        return REDLOCK_EINVAL;
    if (loop->in_action || redlock__wait_parks())
        return redlock__fail(REDLOCK_EINVAL, "redlock_loop_action() called from a callback");
    loop->in_action = 1;
    if (fd == REDLOCK_EV_TIMEOUT) {
        loop->timer_at = INT64_MAX; /* the timer fired: none is set now */
    } else if (fd == loop->wake_fd) {
        redlock__loop_woken(loop);
    } else if (fd >= 0 && (size_t)fd < loop->fd_cap && !loop->fd_owner[fd] &&
               (loop->fd_events[fd] & EV_MASK)) {
        /* An idle connection turned ready: whatever came is read by the
         * next operation that takes it; until then it is not watched, or
         * a level-triggered loop would report it again and again. */
        loop->fd_events[fd] &= STALE_LISTED;
        redlock__fds_tell(loop, fd, 0);
    } else {
        redlock__loop_fd_ready(loop, fd,
                               (short)((events & REDLOCK_EV_READ ? POLLIN : 0) |
                                       (events & REDLOCK_EV_WRITE ? POLLOUT : 0)));
    }
    redlock__loop_wake_due(loop, redlock__now_ns());
    redlock__loop_run_queue(loop);
    redlock__loop_deliver(loop);
    redlock__loop_run_queue(loop);
    redlock__fds_flush_stale(loop);
    loop->in_action = 0;
    redlock__loop_update_timer(loop);
    return REDLOCK_OK;
}

/* Runs what was just started, from outside the loop's fibers: its
 * requests go out now; outside an action the fds and timer follow. */
static void run_started(redlock__loop *loop)
{
    int was = loop->in_action;

    loop->in_action = 1;
    redlock__loop_run_queue(loop);
    loop->in_action = was;
    if (!was) {
        redlock__fds_flush_stale(loop);
        redlock__loop_update_timer(loop);
    }
}

void redlock__loop_batch_begin(redlock__loop *loop)
{
    loop->batching = 1;
}

void redlock__loop_batch_end(redlock__loop *loop)
{
    loop->batching = 0;
    run_started(loop);
}

void redlock__loop_refresh_tick(redlock__loop *loop)
{
    loop->wd_due = redlock__watchdog_next_due(loop->c);
    redlock__loop_update_timer(loop);
}

size_t redlock_loop_pending(const redlock_client *c)
{
    /* The count is the loop thread's; elsewhere it could be torn. */
    const redlock__loop *loop = c && !redlock__io_elsewhere(c) ? c->loop.loop : NULL;

    return loop ? loop->n_ops : 0;
}

static void task_main(void *arg)
{
    redlock__task *t = arg;

    t->rc = t->fn(t);
}

int redlock__task_start(redlock_client *c, redlock_lock *l, redlock__task_fn fn,
                        redlock__task_fn undo, uint64_t owner, int64_t wait_ms,
                        int64_t lease_ms, redlock_done_fn done, void *userdata)
{
    return redlock__task_start_ex(c, l, fn, undo, owner, wait_ms, lease_ms, done, userdata,
                                  NULL, NULL);
}

int redlock__task_start_ex(redlock_client *c, redlock_lock *l, redlock__task_fn fn,
                           redlock__task_fn undo, uint64_t owner, int64_t wait_ms,
                           int64_t lease_ms, redlock_done_fn done, void *userdata,
                           redlock__task **sync, const uint64_t *cancels_seen)
{
    redlock__loop *loop = c->loop.loop;
    redlock__task *t = loop->spare;
    int rc;

    if (t) {
        redlock__fiber *fiber = t->fiber;
        void *report = t->report;

        loop->spare = t->next;
        loop->n_spare--;
        memset(t, 0, sizeof(*t));
        t->fiber = fiber;
        t->report = report;
        redlock__report_store_clear(report);
        redlock__fiber_reset(fiber, task_main, t);
    } else {
        t = calloc(1, sizeof(*t));
        if (!t || !(t->report = calloc(1, redlock__report_store_size()))) {
            free(t);
            return redlock__fail(REDLOCK_ENOMEM, "out of memory");
        }
        if ((rc = redlock__fiber_new(&t->fiber, task_main, t)) != REDLOCK_OK) {
            free(t->report);
            free(t);
            return rc;
        }
    }
    t->loop = loop;
    t->fn = fn;
    t->undo = undo;
    t->lock = l;
    t->cancels = cancels_seen ? *cancels_seen
                              : l ? __atomic_load_n(&l->cancels, __ATOMIC_ACQUIRE) : 0;
    t->owner = owner;
    t->wait_ms = wait_ms;
    t->lease_ms = lease_ms;
    t->done = done;
    t->userdata = userdata;
    if (sync) {
        t->sync = 1;
        *sync = t;
    }
    t->next = loop->tasks;
    if (loop->tasks)
        loop->tasks->prev = t;
    loop->tasks = t;
    loop->n_ops += l != NULL;
    /* Started at once if there is room: its requests go out now. From
     * inside a fiber (an on_lost callback in a tick) it waits for the
     * queue that fiber runs in; from a fiber of another client's loop on
     * this thread (its callback), this loop is not being driven, and its
     * timer brings it back at once. */
    redlock__loop_make_runnable(loop, t);
    if (loop->batching)
        return REDLOCK_OK;
    if (redlock__wait_parks()) {
        if (redlock__wait_runner() != loop)
            redlock__loop_update_timer(loop);
        return REDLOCK_OK;
    }
    run_started(loop);
    return REDLOCK_OK;
}
