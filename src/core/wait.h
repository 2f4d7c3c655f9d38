/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every place the library waits, in one place. On a thread's own stack a
 * wait blocks as usual (ppoll, nanosleep, a condition variable). Inside a
 * fiber (core/fiber.h) it parks the fiber instead: the event loop that
 * drives it watches the fds and the deadline and resumes it (loop/), so
 * the same lock core serves the blocking API and the loop-driven one.
 */
#ifndef REDLOCK_CORE_WAIT_H
#define REDLOCK_CORE_WAIT_H

#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Like ppoll() until deadline_ns (monotonic): the number of entries with
 * revents set, 0 at the deadline (or when a parked fiber is kicked), -1
 * with errno on failure. */
int redlock__wait_poll(struct pollfd *pfd, size_t n, int64_t deadline_ns);

/* The same, and inside a fiber also woken by redlock__wait_notify(key)
 * (returning 0 unless an fd is ready); on a thread's stack, key is not
 * heard. n may be 0: then a wait for key or the deadline. */
int redlock__wait_poll_key(struct pollfd *pfd, size_t n, int64_t deadline_ns, const void *key);

/* Sleeps until deadline_ns; a parked fiber may be kicked awake earlier.
 * Only for waits between steps (an acquire's wait for its next attempt):
 * a loop may hold a fiber back after such a sleep until it has room for
 * another operation on the network. */
void redlock__wait_until(int64_t deadline_ns);

/* pthread_cond_wait(cond, mu). Inside a fiber the thread must not block
 * (whoever would signal may be another fiber of the same thread): it
 * unlocks mu, parks for a millisecond and locks mu again, so the caller's
 * usual loop around the wait looks at its condition again. */
void redlock__wait_cond(pthread_cond_t *cond, pthread_mutex_t *mu);

/* pthread_cond_timedwait(cond, mu, deadline_ns) on a CLOCK_MONOTONIC
 * condition variable; returns 0, or ETIMEDOUT once deadline_ns passed.
 * Inside a fiber it unlocks mu and parks until redlock__wait_notify(cond)
 * on this thread, a kick or the deadline, then locks mu again. Whoever
 * broadcasts cond also calls redlock__wait_notify(cond). between_steps:
 * the wait is one between steps, as for redlock__wait_until(). */
int redlock__wait_cond_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline_ns,
                             int between_steps);

/* Wakes the fibers of this thread parked on key (see above); a no-op
 * where no loop drives fibers. */
void redlock__wait_notify(const void *key);

/* Nonzero inside a fiber: waits park instead of blocking. */
int redlock__wait_parks(void);

/* Inside a fiber, the ud its loop set with redlock__wait_hooks (the loop
 * that runs it); NULL outside fibers. Two loops may share a thread. */
const void *redlock__wait_runner(void);

/* Says an fd is about to be closed. An event loop watching it on this
 * thread stops first (epoll forgets a closed fd by itself, but libuv and
 * libevent must be told before its number can be reused). */
void redlock__wait_fd_closing(int fd);
/* The loop driving fibers on this thread hears of closing fds and of
 * notifications here; NULLs: none. */
void redlock__wait_hooks(void (*on_close)(void *ud, int fd),
                         void (*on_notify)(void *ud, const void *key), void *ud);

#endif
