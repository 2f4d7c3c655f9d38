/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scheduler of a loop-driven client: operations run as fibers
 * (core/fiber.h) that park where the blocking core would wait
 * (core/wait.h); the program's event loop watches what they parked on and
 * reports it with redlock_loop_action(), which resumes them (loop.c). The
 * public operations that become such tasks are in ops.c.
 */
#ifndef REDLOCK_LOOP_LOOP_H
#define REDLOCK_LOOP_LOOP_H

#include "core/error.h"
#include "core/fiber.h"
#include "lock/internal.h"

typedef struct redlock__loop redlock__loop;
typedef struct redlock__task redlock__task;

/* Runs inside the task's fiber; its answer goes to the done callback. */
typedef int (*redlock__task_fn)(redlock__task *t);

struct redlock__task {
    redlock__task *next, *prev; /* every task of the loop */
    redlock__task *run_next;    /* the runnable queue */
    redlock__loop *loop;
    redlock__fiber *fiber;
    redlock__task_fn fn;
    /* Undoes a successful fn whose handle is freed before done ran (an
     * acquire's unlock); NULL: nothing to undo. */
    redlock__task_fn undo;
    redlock_lock *lock;         /* NULL: the watchdog's tick */
    /* The lock's cancel count when the task was started: a cancel made
     * before its fiber first runs (queued behind the cap, or started from
     * another fiber) still ends it. */
    uint64_t cancels;
    uint64_t owner;
    int64_t wait_ms, lease_ms;
    redlock_done_fn done;
    void *userdata;
    int queued, finished, rc;
    int sync;                   /* a blocking call's: it reads and frees it */
    int active;                 /* inside a step: counts against the cap */
    int admitting;              /* waits for room under the cap */
    redlock__task *admit_next;
    redlock__task *done_next;   /* finished, done not yet run */
    size_t heap_idx;            /* its place in the deadline heap + 1 */
    /* What the fiber keeps of its own (see core/error.h, lock/context.h,
     * lock/watchdog.h). */
    char error[REDLOCK__ERROR_LEN];
    void *report;
    int in_tick;
    /* The fds this task asked the loop to watch, as last reported. */
    int regs[REDLOCK__MAX_NODES + 8]; /* a fan-out's, or the subscriber's */
    size_t n_regs;
};

/* A new task for fn on l (NULL for the tick), started at once unless the
 * caller is itself a fiber (then at the next action). On failure nothing
 * is started and the code is returned. */
int redlock__task_start(redlock_client *c, redlock_lock *l, redlock__task_fn fn,
                        redlock__task_fn undo, uint64_t owner, int64_t wait_ms,
                        int64_t lease_ms, redlock_done_fn done, void *userdata);

/* The same; with sync, *sync gets the task, which a blocking call then
 * drives to its end with redlock__loop_run(). cancels_seen: the lock's
 * cancel count when the call began, if that was before now (a call
 * relayed from another thread); NULL: now. */
int redlock__task_start_ex(redlock_client *c, redlock_lock *l, redlock__task_fn fn,
                           redlock__task_fn undo, uint64_t owner, int64_t wait_ms,
                           int64_t lease_ms, redlock_done_fn done, void *userdata,
                           redlock__task **sync, const uint64_t *cancels_seen);

/* A blocking acquire (unlock == 0) or unlock relayed from another thread
 * by the I/O thread (io_thread.c), started as a task whose outcome goes
 * to done; cancels_seen as above. */
int redlock__loop_start_relayed(redlock_client *c, redlock_lock *l, int unlock, uint64_t owner,
                                int64_t wait_ms, int64_t lease_ms, uint64_t cancels_seen,
                                redlock_done_fn done, void *userdata);

/* Runs the loop itself (poll()) until the sync task t has ended; every
 * other operation makes progress meanwhile. Returns t's answer (its
 * message in the last error) and frees t. */
int redlock__loop_run(redlock__loop *loop, redlock__task *t);

/* The run_sync hook (lock/internal.h), in ops.c. */
int redlock__loop_run_sync(void *loop, redlock_lock *l, int unlock, uint64_t owner,
                           int64_t wait_ms, int64_t lease_ms);

/* Whether redlock_lock_free(l) was called while l's operations were in
 * flight. */
int redlock__loop_freeing(const redlock__loop *loop, const redlock_lock *l);

/* Tasks started between the two run together at the end, from the loop's
 * thread outside its fibers: their requests to a node leave in one write
 * (the I/O thread starts what other threads handed it that way). */
void redlock__loop_batch_begin(redlock__loop *loop);
void redlock__loop_batch_end(redlock__loop *loop);

/* Looks again when the watchdog's next tick is due (holds listed or
 * background calls queued from another thread) and sets the timer. */
void redlock__loop_refresh_tick(redlock__loop *loop);

/* What the loop asks its program to watch, by fd: entry fd < *cap holds
 * REDLOCK_EV_READ / REDLOCK_EV_WRITE among other bits. A driver of the
 * loop's own (the I/O thread) polls from it, on the loop's thread, so its
 * view cannot part from the loop's: the table only grows where the loop
 * could register the fd (socket_fn's calls cannot report a failure). */
const unsigned char *redlock__loop_fd_table(const redlock__loop *loop, size_t *cap);

/* The loop of a client, or NULL with the reason in the last error. */
redlock__loop *redlock__loop_of(redlock_client *c);

#endif
