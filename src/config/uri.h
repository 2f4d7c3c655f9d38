/* SPDX-License-Identifier: BSD-3-Clause */
/* Node URIs: redis://, rediss://, unix://, and Sentinel-managed groups
 * (redis-sentinel://, rediss-sentinel://). Pure parsing, no I/O. */
#ifndef REDLOCK_CONFIG_URI_H
#define REDLOCK_CONFIG_URI_H

#include <stddef.h>

typedef enum redlock__node_kind {
    REDLOCK__NODE_TCP = 1,
    REDLOCK__NODE_TLS,
    REDLOCK__NODE_UNIX
} redlock__node_kind;

/* At most this many sentinels in one redis-sentinel:// URI. */
#define REDLOCK__MAX_SENTINELS 16
#define REDLOCK__SENTINEL_DEFAULT_PORT 26379

/* One sentinel of a Sentinel-managed node. */
typedef struct redlock__sentinel_addr {
    char *host;      /* name or address, IPv6 without [] */
    int port;        /* 1..65535, default 26379 */
} redlock__sentinel_addr;

typedef struct redlock__node_uri {
    /* A sentinel URI is REDLOCK__NODE_TCP (redis-sentinel://) or
     * REDLOCK__NODE_TLS (rediss-sentinel://) with master_name set: the
     * data node's address is whatever the sentinels name as that master's,
     * and it changes on failover. host and port then hold the first
     * sentinel's, so code that only knows plain nodes still sees a valid
     * host (it is also the default TLS name, see transport/resolve.h). */
    redlock__node_kind kind;
    char *host;      /* TCP/TLS: host name or address, IPv6 without [] */
    int port;        /* TCP/TLS: 1..65535, default 6379 */
    char *path;      /* UNIX: socket path */
    char *username;  /* percent-decoded; NULL if absent */
    char *password;  /* percent-decoded; NULL if absent */
    int db;          /* 0 if absent */
    char *display;   /* "host:port", "[::1]:port" or the path; never NULL;
                      * a sentinel node: "MASTER@host:port[,host:port...]" */
    char *master_name;                 /* sentinel nodes only; else NULL */
    redlock__sentinel_addr *sentinels; /* sentinel nodes: n_sentinels of them */
    int n_sentinels;
} redlock__node_uri;

/* Parses uri into *out (which the caller zeroes or clears first).
 * Returns REDLOCK_OK, REDLOCK_EURI with a reason in err (e.g. "port 0 out of
 * range 1..65535"), or REDLOCK_ENOMEM. On failure *out holds nothing. */
int redlock__uri_parse(const char *uri, redlock__node_uri *out, char *err,
                       size_t err_cap);

/* Frees the strings of u and zeroes it; safe on a zeroed struct. */
void redlock__uri_clear(redlock__node_uri *u);

#endif
