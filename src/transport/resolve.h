/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host names resolved once, when the client is made, and again in the
 * background when connecting to a node fails (resolve.c). Connecting never
 * calls getaddrinfo: one slow DNS lookup must not hold up a fan-out, a
 * watchdog tick, or the subscriber thread (which connects under its mutex).
 */
#ifndef REDLOCK_TRANSPORT_RESOLVE_H
#define REDLOCK_TRANSPORT_RESOLVE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#define REDLOCK__RESOLVE_MAX_ADDRS 4

/* One node's addresses. Thread-safe: its own mutex. */
typedef struct redlock__addrs {
    pthread_mutex_t mu;
    const char *host;    /* owned by the node's URI */
    int port;
    struct sockaddr_storage addr[REDLOCK__RESOLVE_MAX_ADDRS];
    socklen_t len[REDLOCK__RESOLVE_MAX_ADDRS];
    int n;
    int gai_err;         /* the last lookup's error (0: none) */
    int wanted;          /* a background lookup is asked for */
    int64_t last_ns;     /* when the last lookup finished */
} redlock__addrs;

/* The client's resolver: the background thread starts on the first
 * request, and is joined by redlock__resolver_free. */
typedef struct redlock__resolver {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t thread;
    int started, closing;
    redlock__addrs *addrs;   /* one per node */
    size_t n;
} redlock__resolver;

/* Sets up addrs for n nodes (hosts[i] NULL for a node without a host, e.g.
 * a Unix socket) and resolves each host now, on the calling thread. A host
 * that does not resolve yet is not an error: connecting to it fails, and
 * asks for another lookup. Returns 0, or -1 when out of memory. */
int redlock__resolver_init(redlock__resolver *r, const char *const *hosts, const int *ports,
                           size_t n);
void redlock__resolver_free(redlock__resolver *r);

/* Copies a node's addresses (at most REDLOCK__RESOLVE_MAX_ADDRS); returns
 * how many, 0 if none yet (*gai_err says why, if a lookup failed). */
int redlock__addrs_get(redlock__addrs *a, struct sockaddr_storage *addr, socklen_t *len,
                       int *gai_err);

/* Asks for a background lookup of a node (after a failed connect): at
 * most one a second per node, never on the calling thread. */
void redlock__addrs_refresh(redlock__resolver *r, redlock__addrs *a);

#endif
