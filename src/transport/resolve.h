/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host names resolved once, when the client is made, and again in the
 * background when connecting to a node fails (resolve.c). Connecting never
 * calls getaddrinfo: one slow DNS lookup must not hold up a fan-out, a
 * watchdog tick, or the subscriber thread (which connects under its mutex).
 *
 * A Sentinel-managed node (redis-sentinel://) is "looked up" by asking
 * its sentinels for the master's address (transport/sentinel.h), at the
 * same moments: once at client creation, then in the background after a
 * failed connect, a -READONLY reply (the master was demoted), or a
 * +switch-master message heard on a sentinel (one watcher thread per such
 * node). Its addresses are then the master's, and its generation counter
 * moves whenever the master does, so connections to the old one are
 * dropped at their next use (conn.c).
 */
#ifndef REDLOCK_TRANSPORT_RESOLVE_H
#define REDLOCK_TRANSPORT_RESOLVE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/sentinel.h"

#define REDLOCK__RESOLVE_MAX_ADDRS 4
/* A master's host as a sentinel announces it (an address or a name). */
#define REDLOCK__MASTER_HOST_MAX 256

/* One node's addresses. Thread-safe: its own mutex. */
typedef struct redlock__addrs {
    pthread_mutex_t mu;
    const char *host;    /* owned by the node's URI */
    int port;
    struct sockaddr_storage addr[REDLOCK__RESOLVE_MAX_ADDRS];
    socklen_t len[REDLOCK__RESOLVE_MAX_ADDRS];
    int n;
    int first;           /* connecting starts here: moved past one that failed */
    int gai_err;         /* the last lookup's error (0: none) */
    int wanted;          /* a background lookup is asked for */
    int64_t last_ns;     /* when the last lookup finished */
    /* Sentinel nodes only (redlock__resolver_watch_sentinel). */
    int is_sentinel;
    redlock__sentinel_cfg sentinel;
    uint64_t gen;        /* moves whenever the master does */
    char master[REDLOCK__MASTER_HOST_MAX]; /* "" until one is known */
    int master_port;
    char why[160];       /* why the last sentinel lookup failed ("" if not) */
    pthread_t watcher;   /* the +switch-master subscription */
    int watching;
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

/* Copies a node's addresses (at most REDLOCK__RESOLVE_MAX_ADDRS), the
 * one to try first first; returns how many, 0 if none yet (*gai_err says
 * why, if a lookup failed). */
int redlock__addrs_get(redlock__addrs *a, struct sockaddr_storage *addr, socklen_t *len,
                       int *gai_err);

/* A connection to addr failed. If it was the address tried first, the
 * next one is tried first from now on: a refusal that comes after
 * connect() returned (non-blocking) is only known once the connection is
 * given up, so the other addresses would never be reached. */
void redlock__addrs_failed(redlock__addrs *a, const struct sockaddr_storage *addr,
                           socklen_t len);

/* Asks for a background lookup of a node (after a failed connect, or a
 * -READONLY reply from a sentinel node): at most one a second per node,
 * never on the calling thread. */
void redlock__addrs_refresh(redlock__resolver *r, redlock__addrs *a);

/*
 * Makes a a Sentinel-managed node: forgets the addresses looked up so far
 * (the first sentinel's, which redlock__resolver_init saw as the host),
 * asks the sentinels for the master now, on the calling thread (client
 * creation, like the first getaddrinfo: bounded by cfg->timeout_ms per
 * server), and starts the node's +switch-master watcher. cfg is copied;
 * what it points to must outlive r. A master not found yet is not an
 * error: connecting fails and asks again. Returns 0, or -1 when no thread
 * could be started (the node then still follows failovers on connection
 * errors and -READONLY).
 */
int redlock__resolver_watch_sentinel(redlock__resolver *r, redlock__addrs *a,
                                     const redlock__sentinel_cfg *cfg);

/* For a sentinel node: the current master's host (copied into host, ""
 * if none known), the generation, and why the last lookup failed (into
 * why, "" if it did not). Any out pointer may be NULL. */
void redlock__addrs_master(redlock__addrs *a, char *host, size_t host_cap, uint64_t *gen,
                           char *why, size_t why_cap);

#endif
