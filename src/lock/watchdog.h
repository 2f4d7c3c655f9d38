/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog: renewals, loss verdicts, background delivery (watchdog.c),
 * run by its thread (watchdog_thread.c). */
#ifndef REDLOCK_LOCK_WATCHDOG_H
#define REDLOCK_LOCK_WATCHDOG_H

#include "lock/internal.h"

/* Sets the watchdog up; with_thread: also starts its thread (a
 * loop-driven client runs its ticks from the loop instead, loop/). */
int redlock__watchdog_start(redlock_client *c, int with_thread);
/* When the next tick is due (INT64_MAX: nothing to do), on the
 * transport's clock. */
int64_t redlock__watchdog_next_due(redlock_client *c);
void redlock__watchdog_stop(redlock_client *c);
void redlock__watchdog_add(redlock_lock *l);
/* Removes l and waits until no tick is using it. */
void redlock__watchdog_remove(redlock_lock *l);
/* Called by redlock_lock_free: nonzero when the calling thread is the tick
 * that is using l (an on_lost callback freeing a lock); l is then unlisted
 * and the tick frees it when it is done with it. */
int redlock__watchdog_free_later(redlock_lock *l);
/* Waits until no watchdog tick is working on l. A tick that found l's hold
 * lost still releases what is left of it after telling the holder; a new
 * hold of the same owner taken meanwhile would re-enter those leftovers
 * and then lose them to that release (and be unlisted with the old one). */
void redlock__watchdog_settle(redlock_lock *l);
/* Unlists a lost hold from inside a tick (which pins it, so
 * redlock__watchdog_remove would wait for itself). */
void redlock__watchdog_drop(redlock_lock *l);
/* Marks the calling thread as running a tick (1) or not (0): its on_lost
 * callbacks then neither wait for that tick nor free a lock it uses. */
void redlock__watchdog_in_tick(int running);
/* Sets whether this thread runs a tick and returns what it was: a fiber
 * keeps its own (loop/), so a tick parked in a fiber does not make other
 * fibers of the thread look inside it. */
int redlock__watchdog_in_tick_swap(int running);
/* Whether the calling thread (or fiber) runs a tick: on_lost is running. */
int redlock__watchdog_ticking_here(void);
/* Sends every queued background call once and waits up to timeout_ms for
 * the answers (redlock_client_flush). */
int redlock__watchdog_flush(redlock_client *c, int timeout_ms);
/* Runs one watchdog tick now (tests). */
void redlock__watchdog_tick(redlock_client *c);

#endif
