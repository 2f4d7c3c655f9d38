/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scheduler's state and its parts, shared by the files of src/loop/:
 * loop.c (tasks: running, admitting, delivering), fds.c (what the
 * program's loop is asked to watch), heap.c (deadlines), attach.c (a
 * loop's life, and driving it from a blocking call). Nothing here is
 * seen outside src/loop/.
 */
#ifndef REDLOCK_LOOP_SCHED_H
#define REDLOCK_LOOP_SCHED_H

#include <pthread.h>

#include "loop/loop.h"

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
    size_t n_ops;               /* tasks of operations (redlock_loop_pending) */
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
    int batching;               /* tasks started now run at the batch's end */
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

/* Whether threads other than the loop's use the pooled connections and
 * may close them where no hook of the loop hears of it: the watchdog's
 * own thread, or the callers of an I/O thread's client (their inspection
 * calls). */
static inline int redlock__loop_pool_shared(const redlock__loop *loop)
{
    return loop->c->event_loop_watchdog_thread || loop->c->io_thread;
}

/* What fd_events holds besides the REDLOCK_EV_* asked for. */
#define EV_MASK (REDLOCK_EV_READ | REDLOCK_EV_WRITE)
#define STALE_LISTED 0x80 /* on the stale list (fds.c) */

/* fds.c */
void redlock__fds_tell(redlock__loop *loop, int fd, int events);
int redlock__fds_grow(redlock__loop *loop, int fd);
void redlock__fds_update(redlock__loop *loop, redlock__task *t);
void redlock__fds_flush_stale(redlock__loop *loop);
void redlock__fds_on_close(void *ud, int fd);

/* heap.c */
int64_t redlock__heap_deadline(const redlock__task *t);
void redlock__heap_add(redlock__loop *loop, redlock__task *t);
void redlock__heap_remove(redlock__loop *loop, redlock__task *t);

/* loop.c */
void redlock__loop_make_runnable(redlock__loop *loop, redlock__task *t);
void redlock__loop_run_queue(redlock__loop *loop);
void redlock__loop_deliver(redlock__loop *loop);
void redlock__loop_wake_due(redlock__loop *loop, int64_t now);
int64_t redlock__loop_next_deadline(redlock__loop *loop);
void redlock__loop_update_timer(redlock__loop *loop);
void redlock__loop_kick(void *ud, redlock_lock *l);
/* The wake-up eventfd turned readable: a cancel from another thread. */
void redlock__loop_woken(redlock__loop *loop);
/* fd turned ready (POLLIN/POLLOUT, or an error): its task runs next. */
void redlock__loop_fd_ready(redlock__loop *loop, int fd, short revents);
int redlock__loop_lock_freeing(void *ud, redlock_lock *l);
int redlock__loop_has_tasks(const redlock__loop *loop, const redlock_lock *l);
int redlock__loop_pinned(const redlock_lock *l);
void redlock__loop_task_destroy(redlock__task *t);
/* Keeps an ended task for the next one, or destroys it. */
void redlock__loop_task_free(redlock__loop *loop, redlock__task *t);
int redlock__loop_subscriber_fn(redlock__task *t);
/* The reader of the operations' shared connections (transport/mux.h). */
int redlock__loop_mux_fn(redlock__task *t);
/* Wakes the tasks parked on key (core/wait.h), from the loop's code. */
void redlock__loop_notify(redlock__loop *loop, const void *key);

#endif
