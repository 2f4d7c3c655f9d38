/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * REDLOCK_NODES and REDLOCK_PASSWORD, for redlock_client_new_from_env().
 * The list is split exactly as the redlock tool splits --nodes (one
 * function, config/nodelist.c: at a ',' before a scheme, since sentinel
 * URIs hold commas), so a value that works for one works for the other. Messages name the variable and
 * an entry's index, never an entry: its user info may hold a password.
 */
#define _GNU_SOURCE
#include "config/env.h"

#include <stdlib.h>
#include <string.h>

#include "config/nodelist.h"
#include "core/error.h"

int redlock__env_read(redlock__env *env, const redlock_options *opts)
{
    const char *nodes = getenv("REDLOCK_NODES"), *password = getenv("REDLOCK_PASSWORD");
    char why[128];
    int rc;

    memset(env, 0, sizeof(*env));
    if (opts)
        env->opts = *opts;
    if (!env->opts.password && password && *password)
        env->opts.password = password;
    if (!nodes || !*nodes)
        return redlock__fail(REDLOCK_ENONODES, "REDLOCK_NODES is %s: set it to the node URIs, "
                                               "separated by ','",
                             nodes ? "empty" : "not set");
    if (!(env->list = strdup(nodes)))
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    env->list_len = strlen(nodes);
    rc = redlock__nodelist_split(env->list, env->uris, REDLOCK_MAX_NODES, &env->n, why,
                                 sizeof(why));
    if (rc != REDLOCK_OK)
        return redlock__fail(rc, "REDLOCK_NODES: %s", why);
    return REDLOCK_OK;
}

void redlock__env_clear(redlock__env *env)
{
    /* The list may hold passwords (user info). */
    if (env->list) {
        explicit_bzero(env->list, env->list_len);
        free(env->list);
    }
    memset(env, 0, sizeof(*env));
}
