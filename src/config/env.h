/* SPDX-License-Identifier: BSD-3-Clause */
/* The node list and password from the environment (REDLOCK_NODES,
 * REDLOCK_PASSWORD), read as the redlock tool reads them. No I/O. */
#ifndef REDLOCK_CONFIG_ENV_H
#define REDLOCK_CONFIG_ENV_H

#include <stddef.h>

#include "redlock/redlock.h"

typedef struct redlock__env {
    char *list;                           /* owned copy, split in place */
    size_t list_len;
    const char *uris[REDLOCK_MAX_NODES];  /* point into list */
    size_t n;
    redlock_options opts;                 /* the caller's, plus the password */
} redlock__env;

/*
 * Reads REDLOCK_NODES into env->uris (split by redlock__nodelist_split:
 * at each ',' before a scheme, nothing trimmed)
 * and fills env->opts from opts (NULL: defaults) with REDLOCK_PASSWORD as
 * the password unless opts has one. Returns REDLOCK_OK, or REDLOCK_ENONODES,
 * REDLOCK_EURI, REDLOCK_EINVAL, REDLOCK_ENOMEM with redlock_last_error() set;
 * env needs redlock__env_clear() either way.
 */
int redlock__env_read(redlock__env *env, const redlock_options *opts);
void redlock__env_clear(redlock__env *env);

#endif
