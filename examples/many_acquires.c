/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Many operations in flight on one thread: a loop-driven client
 * (options.event_loop) driven by the poll() adapter starts 1000 acquires
 * at once, ten owners on each of 100 names, and releases each lock as
 * soon as it is granted. No thread is started for any of it.
 *
 * It checks what the lock promises: every acquire is granted, every
 * release succeeds, and no two owners of one name ever hold it at once
 * (a hold is counted from its grant to the moment its release is
 * started, before the release has even gone out). Each hold lasts a
 * couple of milliseconds, across rounds of the loop, so that a grant that
 * came while another owner still held the name would be seen.
 *
 *   ./many_acquires redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
 *
 * Exit status: 0 all granted and released exclusively, 1 failure, 2 usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <redlock/adapters/poll.h>
#include <redlock/redlock.h>

#include <stdio.h>
#include <time.h>

#include "nodes.h"

#define NAMES 100
#define OWNERS 10 /* per name: acquires = NAMES * OWNERS */
#define LEASE_MS 10000
#define WAIT_MS 20000
#define HOLD_MS 2
#define DEADLINE_MS 50000 /* the whole run, so it never hangs */

typedef struct name_state {
    redlock_lock *lock;
    int holders;   /* holds granted and not yet being released */
} name_state;

/* One acquire and, after its grant, its release. */
typedef struct request {
    name_state *name;
    uint64_t owner;
    int64_t release_at; /* while held */
} request;

static name_state names[NAMES];
static request requests[NAMES * OWNERS];
static int granted, unlocked, failed, overlaps;
/* Holds in grant order, which with one hold time is release order. */
static request *held[NAMES * OWNERS];
static size_t held_head, held_n;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_unlocked(void *userdata, redlock_lock *lock, int rc, const char *message)
{
    request *r = userdata;

    (void)lock;
    if (rc == REDLOCK_OK) {
        unlocked++;
    } else {
        failed++;
        fprintf(stderr, "many_acquires: unlock %s/%llu: %s (%s)\n",
                redlock_lock_name(r->name->lock), (unsigned long long)r->owner,
                redlock_err_name(rc), message);
    }
}

static void on_acquired(void *userdata, redlock_lock *lock, int rc, const char *message)
{
    request *r = userdata;

    if (rc != REDLOCK_OK) {
        failed++;
        fprintf(stderr, "many_acquires: acquire %s/%llu: %s (%s)\n",
                redlock_lock_name(r->name->lock), (unsigned long long)r->owner,
                redlock_err_name(rc), message);
        return;
    }
    granted++;
    if (++r->name->holders > 1) {
        overlaps++;
        fprintf(stderr, "many_acquires: %s held by %d owners at once\n",
                redlock_lock_name(lock), r->name->holders);
    }
    r->release_at = now_ms() + HOLD_MS;
    held[(held_head + held_n++) % (NAMES * OWNERS)] = r;
}

/* Releases the holds whose time is up; returns the ms until the next. */
static int release_due(void)
{
    int64_t now = now_ms();

    while (held_n > 0) {
        request *r = held[held_head];

        if (r->release_at > now)
            return (int)(r->release_at - now);
        held_head = (held_head + 1) % (NAMES * OWNERS);
        held_n--;
        /* The hold ends here, as far as this program is concerned: the
         * next grant of the name may only come after this release. */
        r->name->holders--;
        if (redlock_unlock_async(r->name->lock, r->owner, on_unlocked, r) != REDLOCK_OK) {
            failed++;
            fprintf(stderr, "many_acquires: unlock_async: %s\n", redlock_last_error());
        }
    }
    return 100;
}

int main(int argc, char **argv)
{
    redlock_options opts = {0};
    redlock_client *client = NULL;
    redlock_poll_loop pl;
    int64_t start, deadline;
    int i, j, rc = 0, n = NAMES * OWNERS;

    opts.event_loop = 1;
    if (example_client(argc, argv, &opts, &client) != REDLOCK_OK)
        return 2;
    if (redlock_poll_attach(&pl, client) != REDLOCK_OK) {
        fprintf(stderr, "many_acquires: attach: %s\n", redlock_last_error());
        redlock_client_free(client);
        return 2;
    }
    for (i = 0; i < NAMES; i++) {
        char name[64];

        snprintf(name, sizeof(name), "example:many:%d", i);
        if (redlock_lock_new(client, name, NULL, &names[i].lock) != REDLOCK_OK) {
            fprintf(stderr, "many_acquires: %s\n", redlock_last_error());
            rc = 2;
            goto out;
        }
    }

    start = now_ms();
    deadline = start + DEADLINE_MS;
    /* Ten owners on one handle: in flight together only for distinct
     * owners, which is what they are. */
    for (j = 0; j < OWNERS; j++)
        for (i = 0; i < NAMES; i++) {
            request *r = &requests[j * NAMES + i];

            r->name = &names[i];
            r->owner = (uint64_t)j + 1;
            if (redlock_acquire_async(r->name->lock, r->owner, WAIT_MS, LEASE_MS, on_acquired,
                                      r) != REDLOCK_OK) {
                failed++;
                fprintf(stderr, "many_acquires: acquire_async: %s\n", redlock_last_error());
            }
        }
    while ((redlock_loop_pending(client) > 0 || held_n > 0) && now_ms() < deadline)
        redlock_poll_run_once(&pl, release_due());

    if (redlock_loop_pending(client) > 0)
        fprintf(stderr, "many_acquires: %zu operations still in flight after %d ms\n",
                redlock_loop_pending(client), DEADLINE_MS);
    printf("many_acquires: %d of %d granted, %d released, %d overlaps, %d failures "
           "in %lld ms\n",
           granted, n, unlocked, overlaps, failed, (long long)(now_ms() - start));
    if (failed) {
        /* Timeouts and errors per node: whether the nodes, or the loop's
         * own latency, made requests miss their node timeout. */
        size_t k;

        fprintf(stderr, "many_acquires: failures seen per node:");
        for (k = 0; k < redlock_client_node_count(client); k++) {
            uint64_t f = 0;

            redlock_client_node_failures(client, k, &f);
            fprintf(stderr, " %s=%llu", redlock_client_node_name(client, k),
                    (unsigned long long)f);
        }
        fprintf(stderr, "\n");
    }
    rc = granted == n && unlocked == n && !overlaps && !failed &&
                 redlock_loop_pending(client) == 0
             ? 0
             : 1;
out:
    /* Freeing a handle with operations in flight (only after the
     * deadline) cancels them; the client's free waits for them to end. */
    for (i = 0; i < NAMES; i++)
        redlock_lock_free(names[i].lock);
    redlock_client_free(client);
    redlock_poll_free(&pl);
    return rc;
}
