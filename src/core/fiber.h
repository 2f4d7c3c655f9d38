/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fibers: a function run on a stack of its own, which the thread that runs
 * it can leave (yield) and come back to (resume). They let one thread
 * drive many blocking operations of the lock core at once: where the core
 * would wait (poll, sleep), a fiber parks and hands the thread back to the
 * event loop that resumes it (core/wait.h, loop/). No thread is started.
 *
 * A fiber is resumed only from the thread's own stack, never from inside
 * another fiber, and always on the thread that created it.
 */
#ifndef REDLOCK_CORE_FIBER_H
#define REDLOCK_CORE_FIBER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

/* Why a fiber parked, and what wakes it: readiness on one of its fds
 * (the loop fills revents), its deadline, or a kick. */
typedef struct redlock__park {
    struct pollfd *pfd;  /* on the fiber's own stack; NULL: none */
    size_t n;
    int64_t deadline_ns; /* monotonic; INT64_MAX: none */
    int kicked;          /* woken early (a cancel, a condition to look at) */
    int idle;            /* parked between steps (a sleep), not in one */
    const void *key;     /* parked on a condition: redlock__wait_notify(key) */
    int notified;        /* woken by redlock__wait_notify(key) */
} redlock__park;

typedef struct redlock__fiber redlock__fiber;
typedef void (*redlock__fiber_fn)(void *arg);

/* A fiber that will run fn(arg) when first resumed. REDLOCK_OK or
 * REDLOCK_ENOMEM. */
int redlock__fiber_new(redlock__fiber **out, redlock__fiber_fn fn, void *arg);

/* Makes a fiber whose fn has returned (or that never ran) run fn(arg) at
 * its next resume, on the same stack: a loop reuses fibers rather than
 * allocate one per operation. */
void redlock__fiber_reset(redlock__fiber *f, redlock__fiber_fn fn, void *arg);

/* Runs f until it parks or fn returns; returns 1 once fn has returned. */
int redlock__fiber_resume(redlock__fiber *f);

/* Inside a fiber: gives the thread back to whoever resumed it. */
void redlock__fiber_yield(void);

/* The fiber running on this thread, or NULL on the thread's own stack. */
redlock__fiber *redlock__fiber_current(void);

redlock__park *redlock__fiber_park(redlock__fiber *f);

/* Frees a fiber whose fn has returned (or that never ran). NULL is
 * allowed. */
void redlock__fiber_free(redlock__fiber *f);

#endif
