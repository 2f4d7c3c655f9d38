/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Explicit owner ids for work that moves between threads. A lock's owner
 * is normally the calling thread, so it must be released on the thread
 * that took it. In a thread pool a job may be picked up by one worker and
 * finished by another: the job then carries its own owner id and uses the
 * *_as calls.
 *
 * Every job takes "example:pool" in one step (without blocking a worker:
 * a busy lock sends the job back to the queue), and releases it in a
 * later step on whichever worker picks that up. A counter checks that no
 * two jobs were ever inside at once.
 *
 * The workers share one client made with options.io_thread: their
 * blocking calls are handed to the client's own I/O thread, which sends
 * what they ask of a node together over one connection per node. That is
 * what a pool of threads locking at once should use (README, "Many
 * threads, one client"); the calls and their results are the same either
 * way.
 *
 *   ./thread_pool redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
 *
 * Exit status: 0 all jobs done exclusively, 1 failure, 2 usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <redlock/redlock.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "nodes.h"

#define WORKERS 4
#define JOBS 12
#define MAX_STEPS 100000 /* bounds the run even if the lock never frees */
#define MAX_NO_QUORUM 20  /* per job: attempts that found no quorum */

typedef struct job {
    uint64_t owner;       /* this job's owner id, whatever thread runs it */
    int holding;          /* next step releases */
    pthread_t locked_on;
    int moved;            /* released on another thread than locked on */
    int no_quorum;        /* attempts that found no quorum */
} job;

static redlock_lock *lock;
static job jobs[JOBS];
static atomic_int inside, overlaps, failures, done_jobs, moved_jobs, steps;

/* The run queue: a ring of job indices guarded by one mutex. */
static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static int queue[JOBS], head, count;

static void push(int j)
{
    pthread_mutex_lock(&queue_mu);
    queue[(head + count++) % JOBS] = j;
    pthread_mutex_unlock(&queue_mu);
}

static int pop(void)
{
    int j = -1;

    pthread_mutex_lock(&queue_mu);
    if (count > 0) {
        j = queue[head];
        head = (head + 1) % JOBS;
        count--;
    }
    pthread_mutex_unlock(&queue_mu);
    return j;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* One step of job j on the calling worker. */
static void run_step(int j)
{
    job *jb = &jobs[j];
    int rc;

    if (!jb->holding) {
        /* wait 0: one attempt; a fixed 10 s lease, no watchdog. */
        rc = redlock_acquire_as(lock, jb->owner, 0, 10000);
        if (rc == REDLOCK_EBUSY) {
            push(j); /* try again later; the worker stays free */
            return;
        }
        /* Too few members answered in time (a busy machine, a node
         * restarting): nothing is held, so this too is tried again later,
         * a bounded number of times. */
        if (rc == REDLOCK_ENO_QUORUM && ++jb->no_quorum <= MAX_NO_QUORUM) {
            push(j);
            return;
        }
        if (rc != REDLOCK_OK) {
            fprintf(stderr, "job %d: %s\n", j, redlock_last_error());
            atomic_fetch_add(&failures, 1);
            atomic_fetch_add(&done_jobs, 1);
            return;
        }
        if (atomic_fetch_add(&inside, 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        jb->holding = 1;
        jb->locked_on = pthread_self();
        sleep_ms(5); /* the first half of the work */
        push(j);     /* the second half may run on any worker */
        return;
    }
    sleep_ms(5);
    atomic_fetch_sub(&inside, 1);
    jb->moved = !pthread_equal(jb->locked_on, pthread_self());
    rc = redlock_unlock_as(lock, jb->owner);
    jb->holding = 0;
    if (rc != REDLOCK_OK) {
        fprintf(stderr, "job %d: unlock: %s\n", j, redlock_last_error());
        atomic_fetch_add(&failures, 1);
    }
    atomic_fetch_add(&moved_jobs, jb->moved);
    atomic_fetch_add(&done_jobs, 1);
}

static void *worker(void *arg)
{
    (void)arg;
    while (atomic_load(&done_jobs) < JOBS && atomic_fetch_add(&steps, 1) < MAX_STEPS) {
        int j = pop();

        if (j < 0)
            sleep_ms(1);
        else
            run_step(j);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    redlock_client *client = NULL;
    redlock_options o = {0};
    pthread_t th[WORKERS];
    int i, started = 0, ok;

    o.io_thread = 1;
    if (example_client(argc, argv, &o, &client) != REDLOCK_OK)
        return 2;
    if (redlock_lock_new(client, "example:pool", NULL, &lock) != REDLOCK_OK) {
        fprintf(stderr, "thread_pool: %s\n", redlock_last_error());
        redlock_client_free(client);
        return 2;
    }
    for (i = 0; i < JOBS; i++) {
        jobs[i].owner = 1000 + (uint64_t)i; /* any nonzero id unique per job */
        push(i);
    }
    for (i = 0; i < WORKERS; i++)
        started += pthread_create(&th[i], NULL, worker, NULL) == 0;
    for (i = 0; i < started; i++)
        pthread_join(th[i], NULL);

    ok = started == WORKERS && atomic_load(&done_jobs) == JOBS &&
         atomic_load(&failures) == 0 && atomic_load(&overlaps) == 0;
    printf("%d jobs done, %d released on another worker than locked on, %d overlaps\n",
           atomic_load(&done_jobs), atomic_load(&moved_jobs), atomic_load(&overlaps));
    /* A job cut off by MAX_STEPS while holding is released here. */
    for (i = 0; i < JOBS; i++) {
        if (jobs[i].holding) {
            ok = 0;
            if (redlock_unlock_as(lock, jobs[i].owner) != REDLOCK_OK)
                fprintf(stderr, "job %d: unlock: %s\n", i, redlock_last_error());
        }
    }
    redlock_lock_free(lock);
    redlock_client_free(client);
    return ok ? 0 : 1;
}
