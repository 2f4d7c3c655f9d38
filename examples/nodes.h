/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the examples: the node URIs come from the command line
 * (one URI per argument) or, without arguments, from $REDLOCK_NODES
 * (comma-separated, read by redlock_client_new_from_env()), e.g.
 *   REDLOCK_NODES=redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003
 * $REDLOCK_PASSWORD, if set, is the password for every node.
 */
#ifndef REDLOCK_EXAMPLES_NODES_H
#define REDLOCK_EXAMPLES_NODES_H

#include <redlock/redlock.h>
#include <stdio.h>

/* Creates the client (opts may be NULL); on failure prints why, with a
 * usage line when no nodes were given at all, and returns the error. */
static int example_client(int argc, char **argv, const redlock_options *opts,
                          redlock_client **out)
{
    int rc;

    if (argc > 1)
        rc = redlock_client_new(out, (const char *const *)argv + 1, (size_t)argc - 1, opts);
    else
        rc = redlock_client_new_from_env(out, opts);
    if (rc != REDLOCK_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], redlock_last_error());
        if (rc == REDLOCK_ENONODES)
            fprintf(stderr, "usage: %s URI [URI...]   (or set REDLOCK_NODES=URI,URI,...)\n",
                    argv[0]);
    }
    return rc;
}

#endif
