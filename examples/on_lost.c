/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reacting to a lost lock. The watchdog renews the lock while the work
 * runs; if a quorum of nodes stops confirming it (keys deleted, nodes
 * restarted empty or unreachable for longer than the validity), on_lost
 * runs on the watchdog thread. It only raises a flag: the worker checks
 * the flag between steps and stops, because past that point another
 * process may hold the lock.
 *
 *   ./on_lost redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
 *   (meanwhile, to see a loss: redis-cli -p 700X DEL example:on_lost on 2 of 3 nodes)
 *
 * Exit status: 0 work finished under the lock, 3 the lock was lost and the
 * work stopped, 1 not acquired, 2 usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <redlock/redlock.h>

#include <stdatomic.h>
#include <time.h>

#include "nodes.h"

#define STEPS 50
#define STEP_MS 100

static atomic_int lost_reason;

static void on_lost(void *userdata, redlock_lock *lock, uint64_t owner, int reason)
{
    (void)userdata, (void)lock, (void)owner;
    atomic_store(&lost_reason, reason);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    redlock_options opts = {0};
    redlock_client *client = NULL;
    redlock_lock *lock = NULL;
    int rc, step, reason;

    /* A short lease, so a loss is noticed within about a second. */
    opts.watchdog_lease_ms = 3000;
    if (example_client(argc, argv, &opts, &client) != REDLOCK_OK)
        return 2;
    if (redlock_lock_new(client, "example:on_lost", NULL, &lock) != REDLOCK_OK) {
        fprintf(stderr, "on_lost: %s\n", redlock_last_error());
        redlock_client_free(client);
        return 2;
    }
    redlock_lock_set_on_lost(lock, on_lost, NULL);
    if ((rc = redlock_try_lock_for(lock, 5000, 0)) != REDLOCK_OK) {
        fprintf(stderr, "on_lost: not acquired: %s\n", redlock_last_error());
        redlock_lock_free(lock);
        redlock_client_free(client);
        return 1;
    }

    for (step = 0; step < STEPS && !atomic_load(&lost_reason); step++)
        sleep_ms(STEP_MS); /* one step of work that must not run twice */

    reason = atomic_load(&lost_reason);
    if (reason)
        printf("lock lost after %d of %d steps (%s); stopped\n", step, STEPS,
               redlock_err_name(reason));
    else
        printf("all %d steps done under the lock\n", STEPS);
    /* After a loss unlock() reports REDLOCK_ELOST and releases what is left. */
    rc = redlock_unlock(lock);
    if (!reason && rc != REDLOCK_OK)
        fprintf(stderr, "on_lost: unlock: %s\n", redlock_last_error());
    redlock_lock_free(lock);
    redlock_client_free(client);
    if (reason)
        return rc == REDLOCK_ELOST ? 3 : 1;
    return rc == REDLOCK_OK ? 0 : 1;
}
