/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asking Redis Sentinel where a master is: a small blocking client, used
 * only off the hot path (at client creation, and on the resolver's
 * background thread), never by a caller's fan-out.
 */
#ifndef REDLOCK_TRANSPORT_SENTINEL_H
#define REDLOCK_TRANSPORT_SENTINEL_H

#include <stddef.h>

#include "config/uri.h"

struct ssl_ctx_st;

/* What a lookup needs; every pointer is borrowed from the node, which
 * outlives the resolver. */
typedef struct redlock__sentinel_cfg {
    const redlock__node_uri *uri;   /* master_name and sentinels */
    /* The sentinels' credentials (options, never the URI); NULL: none. */
    const char *sentinel_username;
    const char *sentinel_password;
    /* The data node's, for ROLE on the master named. */
    const char *username;
    const char *password;
    /* rediss-sentinel://: the client's TLS context serves the sentinels
     * and the data nodes alike. tls_name overrides the name verified (the
     * client's tls.server_name); NULL: each server's own host, i.e. the
     * sentinel's as listed and the master's as the sentinels announce it. */
    struct ssl_ctx_st *ssl_ctx;
    const char *tls_name;
    int tls_verify;
    int timeout_ms;                 /* per server contacted */
} redlock__sentinel_cfg;

/*
 * Asks each sentinel in turn SENTINEL GET-MASTER-ADDR-BY-NAME (after AUTH
 * when sentinel credentials are set) and checks the answer with ROLE on
 * that address, which must say "master" (a sentinel may lag a failover).
 * The first confirmed answer wins: host (at most host_cap - 1 bytes) and
 * *port. Returns 0, or -1 with the reason in err (never a password).
 * Blocks for at most about 2 * timeout_ms per sentinel.
 */
int redlock__sentinel_master(const redlock__sentinel_cfg *cfg, char *host, size_t host_cap,
                             int *port, char *err, size_t err_cap);

/*
 * A subscription to "+switch-master" on one of the sentinels, so a
 * failover is heard of when it happens rather than at the next failed
 * connect. redlock__sentinel_watch_open tries the sentinels in turn and
 * returns a handle, or NULL (none reachable; try again later).
 * redlock__sentinel_watch_wait waits up to wait_ms for a message: 1 when
 * the master named in cfg switched, 0 when nothing relevant arrived, -1
 * when the subscription broke (close it and open another).
 */
typedef struct redlock__sentinel_watch redlock__sentinel_watch;
redlock__sentinel_watch *redlock__sentinel_watch_open(const redlock__sentinel_cfg *cfg);
int redlock__sentinel_watch_wait(redlock__sentinel_watch *w, int wait_ms);
void redlock__sentinel_watch_close(redlock__sentinel_watch *w);

#endif
