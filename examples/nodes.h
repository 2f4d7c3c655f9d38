/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the examples: the node URIs come from the command line
 * (one URI per argument) or, without arguments, from $REDLOCK_NODES
 * (comma-separated), e.g.
 *   REDLOCK_NODES=redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003
 */
#ifndef REDLOCK_EXAMPLES_NODES_H
#define REDLOCK_EXAMPLES_NODES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXAMPLE_MAX_NODES 64

/* Fills uris (pointing into argv or into a static copy of $REDLOCK_NODES)
 * and returns how many; 0 if none were given or the list is too long. */
static size_t example_nodes(int argc, char **argv, const char **uris)
{
    static char env_copy[8192];
    size_t n = 0;
    char *tok, *save = NULL;
    const char *env;

    if (argc > 1) {
        for (n = 0; n + 1 < (size_t)argc && n < EXAMPLE_MAX_NODES; n++)
            uris[n] = argv[n + 1];
        return n;
    }
    env = getenv("REDLOCK_NODES");
    if (!env || !*env || strlen(env) >= sizeof(env_copy))
        return 0;
    memcpy(env_copy, env, strlen(env) + 1);
    for (tok = strtok_r(env_copy, ",", &save); tok && n < EXAMPLE_MAX_NODES;
         tok = strtok_r(NULL, ",", &save))
        uris[n++] = tok;
    return n;
}

static void example_usage(const char *prog)
{
    fprintf(stderr, "usage: %s URI [URI...]   (or set REDLOCK_NODES=URI,URI,...)\n", prog);
}

#endif
