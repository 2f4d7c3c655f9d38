/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one node-list splitter, shared by REDLOCK_NODES (env.c) and the
 * redlock tool's --nodes and "nodes =", so a list that works for one works
 * for the other. A sentinel URI lists its sentinels with commas
 * ("redis-sentinel://s1,s2:26380#mymaster"), so a ',' cannot simply end an
 * item: only a ',' that starts a new URI (a scheme and "://" follow) does.
 * A ',' before another ',' or at the end still splits, so an empty item
 * is reported as one ("node 1: empty URI") rather than as a stray ','
 * inside the previous URI.
 */
#include "config/nodelist.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether s starts with "scheme://" (RFC 3986: a letter, then letters,
 * digits, '+', '-' or '.'). */
static int starts_uri(const char *s)
{
    const char *e = s;

    if (!is_alpha(*e))
        return 0;
    while (is_alpha(*e) || (*e >= '0' && *e <= '9') || *e == '+' || *e == '-' || *e == '.')
        e++;
    return strncmp(e, "://", 3) == 0;
}

const char *redlock__nodelist_item_end(const char *p)
{
    for (; *p; p++)
        if (*p == ',' && (p[1] == ',' || p[1] == '\0' || starts_uri(p + 1)))
            break;
    return p;
}

int redlock__nodelist_split(char *list, const char **uris, size_t cap, size_t *n, char *err,
                            size_t err_cap)
{
    char *p = list, *q;

    if (err && err_cap)
        err[0] = '\0';
    for (;;) {
        q = p + (redlock__nodelist_item_end(p) - p);
        if (q == p) {
            if (err)
                snprintf(err, err_cap, "node %zu: empty URI", *n);
            return REDLOCK_EURI;
        }
        if (*n == cap) {
            if (err)
                snprintf(err, err_cap, "more than %zu nodes", cap);
            return REDLOCK_EINVAL;
        }
        uris[(*n)++] = p;
        if (!*q)
            return REDLOCK_OK;
        *q = '\0';
        p = q + 1;
    }
}
