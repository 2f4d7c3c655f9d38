/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The smallest quorum lock: take "example:quorum" on a majority of the
 * given nodes, work while holding it, release it.
 *
 *   ./quorum_lock redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
 *
 * Exit status: 0 done, 1 lock not acquired or not released, 2 usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <redlock/redlock.h>

#include "nodes.h"

int main(int argc, char **argv)
{
    redlock_client *client = NULL;
    redlock_lock *lock = NULL;
    int rc;

    /* NULL options: every default (quorum N/2+1, 30 s watchdog lease). */
    if (example_client(argc, argv, NULL, &client) != REDLOCK_OK)
        return 2;
    if ((rc = redlock_lock_new(client, "example:quorum", NULL, &lock)) != REDLOCK_OK) {
        fprintf(stderr, "quorum_lock: %s\n", redlock_last_error());
        redlock_client_free(client);
        return 2;
    }

    /* Wait up to 5 s; lease 0 = the watchdog renews it until unlock. */
    rc = redlock_try_lock_for(lock, 5000, 0);
    if (rc != REDLOCK_OK) {
        fprintf(stderr, "quorum_lock: not acquired: %s (%s)\n", redlock_last_error(),
                redlock_err_name(rc));
    } else {
        printf("holding example:quorum (quorum %d of %zu nodes)\n", redlock_lock_quorum(lock),
               redlock_client_node_count(client));
        /* ... the critical section ... */
        rc = redlock_unlock(lock);
        if (rc != REDLOCK_OK)
            fprintf(stderr, "quorum_lock: unlock: %s\n", redlock_last_error());
    }
    redlock_lock_free(lock);
    redlock_client_free(client);
    return rc == REDLOCK_OK ? 0 : 1;
}
