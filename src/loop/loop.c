/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scheduler: which fds and which deadline the parked tasks need (told
 * to the program's loop through socket_fn and timer_fn), resuming them
 * when the loop reports them, the watchdog's ticks when due, and the done
 * callbacks, always run from the thread's own stack.
 */
#define _GNU_SOURCE
#include "loop/loop.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/util.h"
#include "core/wait.h"
#include "lock/context.h"
#include "lock/watchdog.h"
#include "transport/pubsub.h"

/* A lock freed while its operations were in flight, freed after them. */
typedef struct freeing {
    struct freeing *next;
    redlock_lock *lock;
} freeing;

struct redlock__loop {
    redlock_client *c;
    redlock_socket_fn socket_fn;
    redlock_timer_fn timer_fn;
    void *userdata;
    redlock__task *tasks;       /* every task, doubly linked */
    size_t n_tasks;
    redlock__task *run_head, *run_tail;
    /* Tasks that finished a sleep but wait for room: at most MAX_ACTIVE
     * are inside a step (on the network) at once. */
    redlock__task *admit_head, *admit_tail;
    size_t active;
    /* Parked tasks with a deadline, soonest first; finished tasks whose
     * done has not run. */
    redlock__task **heap;
    size_t heap_n, heap_cap;
    redlock__task *done_head;
    /* Ended tasks kept with their fiber and report, for the next ones. */
    redlock__task *spare;
    size_t n_spare;
    freeing *freeing;
    /* Per fd: what the program's loop was asked to watch (REDLOCK_EV_*,
     * plus STALE_LISTED), and for whom. An fd its task no longer needs
     * (an idle connection) stays watched: the next operation takes the
     * same connections, and a libuv or libevent loop pays system calls
     * for every change. Only if it turns ready while idle (a late reply,
     * the server closing) does the loop stop watching it. With the
     * watchdog on a thread of its own, which may close idle connections
     * where no hook hears of it, idle fds are let go at the end of each
     * call instead (flush_stale). */
    unsigned char *fd_events;
    redlock__task **fd_owner;
    size_t fd_cap;
    int *stale;
    size_t n_stale, stale_cap;
    int in_action;              /* resuming tasks or running callbacks */
    int destroying;             /* redlock_client_free: hooks are off */
    int ticking;                /* a watchdog tick is in flight */
    int64_t wd_due;             /* the next tick, as of the last change */
    int64_t timer_at;           /* the timer asked for; INT64_MAX: none */
    pthread_t thread;           /* the loop's (the one that attached) */
    int wake_fd;                /* eventfd: a cancel from another thread */
};

/*
 * Operations inside a step at once. Each one on the network has a
 * connection per node and a node timeout of ~50 ms; a burst of a thousand
 * would open thousands of connections and miss their own deadlines. The
 * rest wait between steps (before an attempt, where no deadline runs).
 */
#define MAX_ACTIVE 64

static int task_freed(const redlock__loop *loop, const redlock_lock *l);

/* A watchdog tick parked in its fiber uses l: freeing l would wait for
 * that tick, which only this thread can run. */
static int pinned(const redlock_lock *l)
{
    return __atomic_load_n(&l->wd_pins, __ATOMIC_ACQUIRE) > 0;
}

static void tell_socket(redlock__loop *loop, int fd, int events)
{
    if (!loop->destroying)
        loop->socket_fn(loop->userdata, fd, events);
}

static int grow_fds(redlock__loop *loop, int fd)
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

#define EV_MASK (REDLOCK_EV_READ | REDLOCK_EV_WRITE)
#define STALE_LISTED 0x80

/* fd's task is done with it; the loop stops watching it at the end of
 * the call unless another task takes it first. */
static void mark_stale(redlock__loop *loop, int fd)
{
    loop->fd_owner[fd] = NULL;
    if (loop->fd_events[fd] & STALE_LISTED)
        return;
    if (loop->n_stale == loop->stale_cap) {
        size_t cap = loop->stale_cap ? 2 * loop->stale_cap : 64;
        int *s = realloc(loop->stale, cap * sizeof(*s));

        if (!s) { /* no room to defer: stop watching it now */
            loop->fd_events[fd] = 0;
            tell_socket(loop, fd, 0);
            return;
        }
        loop->stale = s;
        loop->stale_cap = cap;
    }
    loop->stale[loop->n_stale++] = fd;
    loop->fd_events[fd] |= STALE_LISTED;
}

static void flush_stale(redlock__loop *loop)
{
    size_t i;

    if (!loop->c->event_loop_watchdog_thread) {
        for (i = 0; i < loop->n_stale; i++)
            loop->fd_events[loop->stale[i]] &= (unsigned char)~STALE_LISTED;
        loop->n_stale = 0;
        return;
    }
    for (i = 0; i < loop->n_stale; i++) {
        int fd = loop->stale[i];

        loop->fd_events[fd] &= (unsigned char)~STALE_LISTED;
        if (!loop->fd_owner[fd] && (loop->fd_events[fd] & EV_MASK)) {
            loop->fd_events[fd] = 0;
            tell_socket(loop, fd, 0);
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
static void update_fds(redlock__loop *loop, redlock__task *t)
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

        if (fd < 0 || grow_fds(loop, fd) != 0)
            continue; /* out of memory: the task's deadline still ends it */
        loop->fd_owner[fd] = t;
        if ((loop->fd_events[fd] & EV_MASK) != ev) {
            loop->fd_events[fd] = (unsigned char)((loop->fd_events[fd] & STALE_LISTED) | ev);
            tell_socket(loop, fd, ev);
        }
        t->regs[t->n_regs++] = fd;
    }
}

/* The core closes an fd: the program's loop stops watching it first. */
static void on_close(void *ud, int fd)
{
    redlock__loop *loop = ud;

    if ((size_t)fd < loop->fd_cap && (loop->fd_events[fd] & EV_MASK)) {
        loop->fd_owner[fd] = NULL;
        loop->fd_events[fd] &= STALE_LISTED;
        tell_socket(loop, fd, 0);
    }
}

static int64_t deadline_of(const redlock__task *t)
{
    return redlock__fiber_park(t->fiber)->deadline_ns;
}

static void heap_set(redlock__loop *loop, size_t i, redlock__task *t)
{
    loop->heap[i] = t;
    t->heap_idx = i + 1;
}

static void heap_up(redlock__loop *loop, size_t i)
{
    redlock__task *t = loop->heap[i];

    while (i > 0 && deadline_of(loop->heap[(i - 1) / 2]) > deadline_of(t)) {
        heap_set(loop, i, loop->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(loop, i, t);
}

static void heap_down(redlock__loop *loop, size_t i)
{
    redlock__task *t = loop->heap[i];

    for (;;) {
        size_t c = 2 * i + 1;

        if (c >= loop->heap_n)
            break;
        if (c + 1 < loop->heap_n && deadline_of(loop->heap[c + 1]) < deadline_of(loop->heap[c]))
            c++;
        if (deadline_of(loop->heap[c]) >= deadline_of(t))
            break;
        heap_set(loop, i, loop->heap[c]);
        i = c;
    }
    heap_set(loop, i, t);
}

static void heap_remove(redlock__loop *loop, redlock__task *t)
{
    size_t i = t->heap_idx - 1;

    if (!t->heap_idx)
        return;
    t->heap_idx = 0;
    if (--loop->heap_n == i)
        return;
    heap_set(loop, i, loop->heap[loop->heap_n]);
    heap_up(loop, i);
    heap_down(loop, loop->heap[i]->heap_idx - 1);
}

/* A parked task with a deadline is woken by the clock. Out of memory it
 * is not, and ends when a kick or its fds wake it. */
static void heap_add(redlock__loop *loop, redlock__task *t)
{
    if (t->heap_idx || deadline_of(t) == INT64_MAX)
        return;
    if (loop->heap_n == loop->heap_cap) {
        size_t cap = loop->heap_cap ? 2 * loop->heap_cap : 64;
        redlock__task **h = realloc(loop->heap, cap * sizeof(*h));

        if (!h)
            return;
        loop->heap = h;
        loop->heap_cap = cap;
    }
    heap_set(loop, loop->heap_n++, t);
    heap_up(loop, loop->heap_n - 1);
}

static void make_runnable(redlock__loop *loop, redlock__task *t)
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
static void on_notify(void *ud, const void *key)
{
    redlock__loop *loop = ud;
    redlock__task *t;

    for (t = loop->tasks; t; t = t->next)
        if (!t->finished && redlock__fiber_park(t->fiber)->key == key)
            make_runnable(loop, t);
}

/* Runs t until it parks or ends, with its own fiber-locals. */
static void resume(redlock__loop *loop, redlock__task *t)
{
    char *error = redlock__error_swap(t->error);
    void *report = redlock__report_swap(t->report);
    int in_tick = redlock__watchdog_in_tick_swap(t->in_tick);

    heap_remove(loop, t);
    redlock__wait_hooks(on_close, on_notify, loop);
    t->finished = redlock__fiber_resume(t->fiber);
    redlock__wait_hooks(NULL, NULL, NULL);
    if (t->finished) {
        t->done_next = loop->done_head;
        loop->done_head = t;
    } else {
        heap_add(loop, t);
    }
    t->in_tick = redlock__watchdog_in_tick_swap(in_tick);
    redlock__report_swap(report);
    redlock__error_swap(error);
    update_fds(loop, t);
}

/* Whether t may run now: it is inside a step already, is the watchdog's
 * tick or was kicked (a cancel ends it quickly), or there is room. */
static int admit(redlock__loop *loop, redlock__task *t)
{
    if (t->active)
        return 1;
    if (t->lock && loop->active >= MAX_ACTIVE && !redlock__fiber_park(t->fiber)->kicked) {
        heap_remove(loop, t);
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
    make_runnable(loop, next);
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

static void run_queue(redlock__loop *loop)
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
    loop->n_tasks--;
}

/* Spare tasks kept: enough for the operations a loop usually has on the
 * network at once (MAX_ACTIVE). */
#define SPARE_TASKS 64

static void task_destroy(redlock__task *t)
{
    redlock__fiber_free(t->fiber);
    free(t->report);
    free(t);
}

static void task_free(redlock__loop *loop, redlock__task *t)
{
    if (loop->n_spare >= SPARE_TASKS || loop->destroying) {
        task_destroy(t);
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

        if (task_freed(loop, f->lock) ||
            (pinned(f->lock) && !loop->c->event_loop_watchdog_thread)) {
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
static int subscriber_fn(redlock__task *t)
{
    redlock__pubsub_run(t->loop->c->net.pubsub);
    return REDLOCK_OK;
}

/* The done callbacks of every finished task, from the thread's stack. */
static void deliver(redlock__loop *loop)
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
        task_free(loop, t);
    }
    free_released_locks(loop);
    /* Holds come and go, and background calls are queued, only as
     * operations and ticks end: then the next tick may have moved. */
    if (any)
        loop->wd_due = redlock__watchdog_next_due(loop->c);
}


/* Resumes what the clock woke, and starts a tick if one is due. */
/* The next tick on this clock: wd_due is on the transport's, which a
 * test's fake transport runs virtually. */
static int64_t tick_due(const redlock__loop *loop, int64_t now)
{
    const redlock__transport *tp = &loop->c->tp;

    if (loop->wd_due == INT64_MAX)
        return INT64_MAX;
    return now + (loop->wd_due - tp->ops->now_ns(tp->ctx));
}

static void wake_due(redlock__loop *loop, int64_t now)
{
    redlock_client *c = loop->c;
    while (loop->heap_n > 0 && deadline_of(loop->heap[0]) <= now) {
        redlock__task *t = loop->heap[0];

        heap_remove(loop, t);
        make_runnable(loop, t);
    }
    if (!loop->ticking && !c->event_loop_watchdog_thread && !loop->destroying &&
        tick_due(loop, now) <= now) {
        loop->ticking = 1;
        if (redlock__task_start(c, NULL, tick_fn, NULL, 0, 0, 0, NULL, NULL) != REDLOCK_OK)
            loop->ticking = 0;
    }
}

static int64_t next_deadline(redlock__loop *loop)
{
    int64_t next = loop->heap_n > 0 ? deadline_of(loop->heap[0]) : INT64_MAX;

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
static void update_timer(redlock__loop *loop)
{
    int64_t next = next_deadline(loop), now, ms;

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

static void kick(void *ud, redlock_lock *l)
{
    redlock__loop *loop = ud;
    redlock__task *t;

    /* A cancel from another thread (a signal-handling thread, say) must
     * not touch the loop's lists: it wakes the loop, which then wakes
     * every operation to look at the cancel flags. */
    if (!pthread_equal(pthread_self(), loop->thread)) {
        uint64_t one = 1;
        ssize_t w = write(loop->wake_fd, &one, sizeof(one));

        (void)w; /* a full counter already means a wake-up is due */
        return;
    }
    for (t = loop->tasks; t; t = t->next)
        if (t->lock && (!l || t->lock == l) && !t->finished) {
            redlock__fiber_park(t->fiber)->kicked = 1;
            if (t->admitting)
                unadmit(loop, t);
            make_runnable(loop, t);
        }
    if (!loop->in_action)
        update_timer(loop);
}

static int task_freed(const redlock__loop *loop, const redlock_lock *l)
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

static int lock_freeing(void *ud, redlock_lock *l)
{
    redlock__loop *loop = ud;
    freeing *f;

    /* A pin of the watchdog's own thread is waited for as usual. */
    if (!task_freed(loop, l) &&
        (!pinned(l) || redlock__wait_parks() || loop->c->event_loop_watchdog_thread))
        return 0;
    for (f = loop->freeing; f; f = f->next)
        if (f->lock == l)
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
    redlock__task **who = malloc(loop->fd_cap * sizeof(*who));
    size_t n = 0, i, k;
    int64_t next = next_deadline(loop);

    if (!pfd || !who) {
        /* Out of memory: the deadlines still move every task on. */
        free(pfd);
        free(who);
        redlock__wait_until(next < give_up ? next : give_up);
        wake_due(loop, redlock__now_ns());
        return;
    }
    pfd[n].fd = loop->wake_fd;
    pfd[n].events = POLLIN;
    pfd[n].revents = 0;
    who[n++] = NULL;
    for (i = 0; i < loop->fd_cap && n < loop->fd_cap; i++)
        if (loop->fd_owner[i]) {
            pfd[n].fd = (int)i;
            pfd[n].events = (short)((loop->fd_events[i] & REDLOCK_EV_READ ? POLLIN : 0) |
                                    (loop->fd_events[i] & REDLOCK_EV_WRITE ? POLLOUT : 0));
            pfd[n].revents = 0;
            who[n++] = loop->fd_owner[i];
        }
    if (redlock__wait_poll(pfd, n, next < give_up ? next : give_up) > 0) {
        for (i = 1; i < n; i++) {
            redlock__park *p = redlock__fiber_park(who[i]->fiber);

            for (k = 0; pfd[i].revents && k < p->n; k++)
                if (p->pfd[k].fd == pfd[i].fd) {
                    p->pfd[k].revents = pfd[i].revents;
                    make_runnable(loop, who[i]);
                }
        }
        if (pfd[0].revents) {
            uint64_t count;
            ssize_t r = read(loop->wake_fd, &count, sizeof(count));

            (void)r;
            kick(loop, NULL);
        }
    }
    free(pfd);
    free(who);
    wake_due(loop, redlock__now_ns());
}

int redlock__loop_run(redlock__loop *loop, redlock__task *t)
{
    int was = loop->in_action, rc;

    loop->in_action = 1;
    for (;;) {
        run_queue(loop);
        deliver(loop);
        if (t->finished)
            break;
        drive_round(loop, INT64_MAX);
    }
    flush_stale(loop);
    loop->in_action = was;
    if (!was)
        update_timer(loop);
    rc = t->rc;
    if (rc != REDLOCK_OK)
        redlock__fail(rc, "%s", t->error);
    /* The caller's redlock_lock_report() tells of this call, as usual. */
    redlock__report_adopt(t->report);
    task_free(loop, t);
    return rc;
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
    while (loop->tasks && redlock__now_ns() < give_up) {
        run_queue(loop);
        deliver(loop);
        if (!loop->tasks)
            break;
        drive_round(loop, give_up);
    }
    /* Handles freed while in use, whose last task has ended: freed now
     * (without the hooks, so as usual). Past the bound (a bug) the rest
     * leak rather than free what live stacks use. */
    loop->c->loop = (redlock__loop_hooks){0};
    if (loop->c->tp.ops == &redlock__net_ops)
        redlock__net_on_fd_closing(&loop->c->net, NULL, NULL);
    while (loop->freeing) {
        freeing *f = loop->freeing;

        loop->freeing = f->next;
        if (!task_freed(loop, f->lock) && !pinned(f->lock))
            redlock_lock_free(f->lock);
        free(f);
    }
    while (loop->spare) {
        redlock__task *t = loop->spare;

        loop->spare = t->next;
        task_destroy(t);
    }
    close(loop->wake_fd);
    free(loop->fd_events);
    free(loop->fd_owner);
    free(loop->stale);
    free(loop->heap);
    free(loop);
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
    if (!c || !c->event_loop) {
        redlock__fail(REDLOCK_EINVAL, "not a loop-driven client (options.event_loop)");
        return NULL;
    }
    if (!c->loop.loop) {
        redlock__fail(REDLOCK_EINVAL, "the client is not attached to a loop "
                                      "(redlock_loop_attach)");
        return NULL;
    }
    return c->loop.loop;
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
    if (loop->wake_fd < 0 || grow_fds(loop, loop->wake_fd) != 0) {
        int saved = errno;

        if (loop->wake_fd >= 0)
            close(loop->wake_fd);
        free(loop->fd_events);
        free(loop->fd_owner);
        free(loop);
        return redlock__fail(REDLOCK_ENOMEM, "eventfd: %s", strerror(saved));
    }
    c->loop.loop = loop;
    c->loop.kick = kick;
    c->loop.lock_freeing = lock_freeing;
    c->loop.destroy = destroy;
    c->loop.run_sync = redlock__loop_run_sync;
    c->loop.busy = busy;
    /* Release messages: the subscriber runs as a task of its own. */
    if (c->net.pubsub && redlock__task_start(c, NULL, subscriber_fn, NULL, 0, 0, 0, NULL, NULL) !=
                             REDLOCK_OK) {
        c->loop = (redlock__loop_hooks){0};
        close(loop->wake_fd);
        free(loop->fd_events);
        free(loop->fd_owner);
        free(loop);
        return REDLOCK_ENOMEM;
    }
    loop->fd_events[loop->wake_fd] = REDLOCK_EV_READ;
    socket_fn(userdata, loop->wake_fd, REDLOCK_EV_READ);
    /* A pooled connection may also close outside a fiber (a blocking
     * inspect on this thread): the loop must hear of it all the same. With
     * the watchdog's own thread closing some, idle fds are not kept
     * watched instead (flush_stale), and this hook, which is not for
     * other threads, stays unset. */
    if (c->tp.ops == &redlock__net_ops && !c->event_loop_watchdog_thread)
        redlock__net_on_fd_closing(&c->net, on_close, loop);
    return REDLOCK_OK;
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
        uint64_t n;
        ssize_t r = read(loop->wake_fd, &n, sizeof(n));

        (void)r;
        kick(loop, NULL);
    } else if (fd >= 0 && (size_t)fd < loop->fd_cap && !loop->fd_owner[fd] &&
               (loop->fd_events[fd] & EV_MASK)) {
        /* An idle connection turned ready: whatever came is read by the
         * next operation that takes it; until then it is not watched, or
         * a level-triggered loop would report it again and again. */
        loop->fd_events[fd] &= STALE_LISTED;
        tell_socket(loop, fd, 0);
    } else if (fd >= 0 && (size_t)fd < loop->fd_cap && loop->fd_owner[fd]) {
        redlock__task *t = loop->fd_owner[fd];
        redlock__park *p = redlock__fiber_park(t->fiber);
        short got = (short)((events & REDLOCK_EV_READ ? POLLIN : 0) |
                            (events & REDLOCK_EV_WRITE ? POLLOUT : 0));
        size_t k;

        for (k = 0; k < p->n; k++)
            if (p->pfd[k].fd == fd && (p->pfd[k].events & got)) {
                p->pfd[k].revents = (short)(p->pfd[k].events & got);
                make_runnable(loop, t);
            }
    }
    wake_due(loop, redlock__now_ns());
    run_queue(loop);
    deliver(loop);
    run_queue(loop);
    flush_stale(loop);
    loop->in_action = 0;
    update_timer(loop);
    return REDLOCK_OK;
}

size_t redlock_loop_pending(const redlock_client *c)
{
    const redlock__loop *loop = c ? c->loop.loop : NULL;
    const redlock__task *t;
    size_t n = 0;

    for (t = loop ? loop->tasks : NULL; t; t = t->next)
        n += t->lock != NULL;
    return n;
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
                                  NULL);
}

int redlock__task_start_ex(redlock_client *c, redlock_lock *l, redlock__task_fn fn,
                           redlock__task_fn undo, uint64_t owner, int64_t wait_ms,
                           int64_t lease_ms, redlock_done_fn done, void *userdata,
                           redlock__task **sync)
{
    redlock__loop *loop = c->loop.loop;
    redlock__task *t = loop->spare;
    int rc, was;

    if (t) {
        redlock__fiber *fiber = t->fiber;
        void *report = t->report;

        loop->spare = t->next;
        loop->n_spare--;
        memset(t, 0, sizeof(*t));
        t->fiber = fiber;
        t->report = report;
        redlock__report_store_clear(report);
        if ((rc = redlock__fiber_reset(fiber, task_main, t)) != REDLOCK_OK) {
            task_destroy(t);
            return rc;
        }
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
    loop->n_tasks++;
    /* Started at once if there is room: its requests go out now. From
     * inside a fiber (an on_lost callback in a tick) it waits for the
     * queue that fiber runs in. */
    make_runnable(loop, t);
    if (redlock__wait_parks())
        return REDLOCK_OK;
    was = loop->in_action;
    loop->in_action = 1;
    run_queue(loop);
    loop->in_action = was;
    if (!was) {
        flush_stale(loop);
        update_timer(loop);
    }
    return REDLOCK_OK;
}
