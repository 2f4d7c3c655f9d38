/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fastclock: an LD_PRELOAD shim that makes the clocks of one process run
 * FASTCLOCK_RATE times as fast as the machine's (e.g. 4 = four seconds per
 * real second), from the moment it is loaded. Used to give one Redis node
 * a fast clock, so its keys expire early.
 *
 * libfaketime does the same in general but deadlocks with jemalloc, which
 * Debian's redis-server uses: jemalloc calls clock_gettime() while
 * libfaketime is still initialising through malloc(). This shim never
 * allocates and reads the real clocks with the raw system call, so it can
 * be called at any point of a process's start-up.
 *
 * Scaled: CLOCK_REALTIME, CLOCK_MONOTONIC and their variants,
 * gettimeofday(), time(). Not scaled: CPU-time clocks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The build hides symbols by default; these must interpose. */
#define INTERPOSE __attribute__((visibility("default")))

#define N_CLOCKS 12
#define NS 1000000000LL

static double rate = 1.0;
static int ready;
static int64_t base_ns[N_CLOCKS];

static int64_t real_ns(clockid_t id, int *ok)
{
    struct timespec ts;

    *ok = syscall(SYS_clock_gettime, id, &ts) == 0;
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

__attribute__((constructor)) static void fastclock_init(void)
{
    const char *r = getenv("FASTCLOCK_RATE");
    int id, ok;

    if (r) {
        char *end;
        double v = strtod(r, &end);

        if (end != r && v > 0)
            rate = v;
    }
    for (id = 0; id < N_CLOCKS; id++)
        base_ns[id] = real_ns(id, &ok);
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

static int scaled(clockid_t id)
{
    return id >= 0 && id < N_CLOCKS && id != CLOCK_PROCESS_CPUTIME_ID &&
           id != CLOCK_THREAD_CPUTIME_ID && __atomic_load_n(&ready, __ATOMIC_ACQUIRE);
}

INTERPOSE int clock_gettime(clockid_t id, struct timespec *ts)
{
    int ok;
    int64_t now = real_ns(id, &ok);

    if (!ok)
        return -1; /* errno set by syscall() */
    if (scaled(id))
        now = base_ns[id] + (int64_t)((double)(now - base_ns[id]) * rate);
    ts->tv_sec = (time_t)(now / NS);
    ts->tv_nsec = (long)(now % NS);
    return 0;
}

INTERPOSE int gettimeofday(struct timeval *tv, void *tz)
{
    struct timespec ts;

    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec; /* glibc declares tv nonnull */
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

INTERPOSE time_t time(time_t *out)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
