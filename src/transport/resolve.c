/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "transport/resolve.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"

#define REFRESH_MIN_NS (1000 * REDLOCK__NS_PER_MS)
/* How often a watcher checks for closing while its subscription is quiet,
 * and waits before subscribing again when no sentinel answered. */
#define WATCH_POLL_MS 200
#define WATCH_RETRY_MS 1000

static void lookup_sentinel(redlock__addrs *a);

/* getaddrinfo of host:port into addr/len (at most the slots); returns how
 * many, with getaddrinfo's code in *gai_rc. No mutex is held. */
static int addrs_of(const char *host, int port, struct sockaddr_storage *addr, socklen_t *len,
                    int *gai_rc)
{
    struct addrinfo hints, *res = NULL, *ai;
    char port_s[8];
    int n = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port_s, sizeof(port_s), "%d", port);
    *gai_rc = getaddrinfo(host, port_s, &hints, &res);
    for (ai = *gai_rc == 0 ? res : NULL; ai && n < REDLOCK__RESOLVE_MAX_ADDRS; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(addr[0]))
            continue;
        memcpy(&addr[n], ai->ai_addr, ai->ai_addrlen);
        len[n++] = ai->ai_addrlen;
    }
    if (res)
        freeaddrinfo(res);
    return n;
}

/* getaddrinfo, with no mutex held; then the result in a's slots. */
static void lookup(redlock__addrs *a)
{
    struct sockaddr_storage addr[REDLOCK__RESOLVE_MAX_ADDRS];
    socklen_t len[REDLOCK__RESOLVE_MAX_ADDRS];
    int rc, n;

    if (a->is_sentinel) {
        lookup_sentinel(a);
        return;
    }
    n = addrs_of(a->host, a->port, addr, len, &rc);
    pthread_mutex_lock(&a->mu);
    /* A failed lookup keeps the addresses that worked before. */
    if (n > 0) {
        memcpy(a->addr, addr, sizeof(addr[0]) * (size_t)n);
        memcpy(a->len, len, sizeof(len[0]) * (size_t)n);
        a->n = n;
    }
    a->gai_err = rc;
    a->last_ns = redlock__now_ns();
    pthread_mutex_unlock(&a->mu);
}

/* The sentinels' answer, then getaddrinfo on it, with no mutex held. */
static void lookup_sentinel(redlock__addrs *a)
{
    struct sockaddr_storage addr[REDLOCK__RESOLVE_MAX_ADDRS];
    socklen_t len[REDLOCK__RESOLVE_MAX_ADDRS];
    char host[REDLOCK__MASTER_HOST_MAX], why[sizeof(a->why)] = "";
    int port = 0, rc = 0, n = 0;

    if (redlock__sentinel_master(&a->sentinel, host, sizeof(host), &port, why,
                                 sizeof(why)) == 0) {
        n = addrs_of(host, port, addr, len, &rc);
        if (n == 0)
            snprintf(why, sizeof(why), "master %.100s: %s", host,
                     rc ? gai_strerror(rc) : "no address");
    }
    pthread_mutex_lock(&a->mu);
    /* A failed lookup keeps the master known before: during a failover
     * the sentinels name the old one until a replica is promoted. */
    if (n > 0) {
        if (strcmp(a->master, host) != 0 || a->master_port != port) {
            a->gen++;
            snprintf(a->master, sizeof(a->master), "%s", host);
            a->master_port = port;
        }
        memcpy(a->addr, addr, sizeof(addr[0]) * (size_t)n);
        memcpy(a->len, len, sizeof(len[0]) * (size_t)n);
        a->n = n;
    }
    snprintf(a->why, sizeof(a->why), "%s", why);
    a->gai_err = 0;
    a->last_ns = redlock__now_ns();
    pthread_mutex_unlock(&a->mu);
}

int redlock__resolver_init(redlock__resolver *r, const char *const *hosts, const int *ports,
                           size_t n)
{
    size_t i;

    memset(r, 0, sizeof(*r));
    r->addrs = calloc(n ? n : 1, sizeof(*r->addrs));
    if (!r->addrs)
        return -1;
    r->n = n;
    pthread_mutex_init(&r->mu, NULL);
    {
        /* The watchers' timed waits run on CLOCK_MONOTONIC, as every
         * deadline in the library does. */
        pthread_condattr_t ca;

        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&r->cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    for (i = 0; i < n; i++) {
        pthread_mutex_init(&r->addrs[i].mu, NULL);
        r->addrs[i].host = hosts[i];
        r->addrs[i].port = ports[i];
        if (hosts[i])
            lookup(&r->addrs[i]);
    }
    return 0;
}

void redlock__resolver_free(redlock__resolver *r)
{
    size_t i;

    if (!r->addrs)
        return;
    pthread_mutex_lock(&r->mu);
    r->closing = 1;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
    if (r->started)
        pthread_join(r->thread, NULL);
    for (i = 0; i < r->n; i++)
        if (r->addrs[i].watching)
            pthread_join(r->addrs[i].watcher, NULL);
    for (i = 0; i < r->n; i++)
        pthread_mutex_destroy(&r->addrs[i].mu);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    free(r->addrs);
    r->addrs = NULL;
}

int redlock__addrs_get(redlock__addrs *a, struct sockaddr_storage *addr, socklen_t *len,
                       int *gai_err)
{
    int n, i;

    pthread_mutex_lock(&a->mu);
    n = a->n;
    for (i = 0; i < n; i++) {
        addr[i] = a->addr[(a->first + i) % n];
        len[i] = a->len[(a->first + i) % n];
    }
    *gai_err = a->gai_err;
    pthread_mutex_unlock(&a->mu);
    return n;
}

void redlock__addrs_failed(redlock__addrs *a, const struct sockaddr_storage *addr,
                           socklen_t len)
{
    pthread_mutex_lock(&a->mu);
    if (a->n > 1) {
        int k = a->first % a->n;

        if (a->len[k] == len && memcmp(&a->addr[k], addr, len) == 0)
            a->first = (k + 1) % a->n;
    }
    pthread_mutex_unlock(&a->mu);
}

/* Takes the next node asked for, or NULL when closing. */
static redlock__addrs *next_wanted(redlock__resolver *r)
{
    size_t i;

    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->closing) {
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        for (i = 0; i < r->n; i++) {
            if (r->addrs[i].wanted) {
                r->addrs[i].wanted = 0;
                pthread_mutex_unlock(&r->mu);
                return &r->addrs[i];
            }
        }
        pthread_cond_wait(&r->cond, &r->mu);
    }
}

static void *resolver_main(void *arg)
{
    redlock__resolver *r = arg;
    redlock__addrs *a;

    while ((a = next_wanted(r)) != NULL)
        lookup(a);
    return NULL;
}

/* Hands a to the resolver thread, starting it on first use. */
static void request(redlock__resolver *r, redlock__addrs *a)
{
    pthread_mutex_lock(&r->mu);
    if (!r->closing) {
        if (!r->started && pthread_create(&r->thread, NULL, resolver_main, r) == 0)
            r->started = 1;
        if (r->started) {
            a->wanted = 1;
            pthread_cond_broadcast(&r->cond);
        }
    }
    pthread_mutex_unlock(&r->mu);
}

void redlock__addrs_refresh(redlock__resolver *r, redlock__addrs *a)
{
    int64_t last;

    if (!a->host)
        return;
    pthread_mutex_lock(&a->mu);
    last = a->last_ns;
    pthread_mutex_unlock(&a->mu);
    if (redlock__now_ns() - last < REFRESH_MIN_NS)
        return;
    request(r, a);
}

typedef struct watch_arg {
    redlock__resolver *r;
    redlock__addrs *a;
} watch_arg;

/* Whether r is closing; else waits up to ms for it (0: no wait). */
static int closing_after(redlock__resolver *r, int ms)
{
    struct timespec until;
    int closing;

    pthread_mutex_lock(&r->mu);
    if (ms > 0 && !r->closing) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += ms / 1000;
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cond, &r->mu, &until);
    }
    closing = r->closing;
    pthread_mutex_unlock(&r->mu);
    return closing;
}

/* One sentinel node's +switch-master subscription: a switch of its
 * master asks for a lookup at once, past the rate limit, so the node
 * follows a failover before any request of a caller fails on it. */
static void *watcher_main(void *arg)
{
    redlock__resolver *r = ((watch_arg *)arg)->r;
    redlock__addrs *a = ((watch_arg *)arg)->a;
    redlock__sentinel_watch *w = NULL;

    free(arg);
    while (!closing_after(r, 0)) {
        int got;

        if (!w && !(w = redlock__sentinel_watch_open(&a->sentinel))) {
            closing_after(r, WATCH_RETRY_MS);
            continue;
        }
        got = redlock__sentinel_watch_wait(w, WATCH_POLL_MS);
        if (got < 0) {
            redlock__sentinel_watch_close(w);
            w = NULL;
        } else if (got > 0) {
            request(r, a);
        }
    }
    redlock__sentinel_watch_close(w);
    return NULL;
}

int redlock__resolver_watch_sentinel(redlock__resolver *r, redlock__addrs *a,
                                     const redlock__sentinel_cfg *cfg)
{
    watch_arg *arg;

    pthread_mutex_lock(&a->mu);
    a->is_sentinel = 1;
    a->sentinel = *cfg;
    a->n = 0; /* the first sentinel's addresses, not a master's */
    pthread_mutex_unlock(&a->mu);
    lookup_sentinel(a);
    if (!(arg = malloc(sizeof(*arg))))
        return -1;
    arg->r = r;
    arg->a = a;
    if (pthread_create(&a->watcher, NULL, watcher_main, arg) != 0) {
        free(arg);
        return -1;
    }
    a->watching = 1;
    return 0;
}

void redlock__addrs_master(redlock__addrs *a, char *host, size_t host_cap, uint64_t *gen,
                           char *why, size_t why_cap)
{
    pthread_mutex_lock(&a->mu);
    if (host)
        snprintf(host, host_cap, "%s", a->master);
    if (gen)
        *gen = a->gen;
    if (why)
        snprintf(why, why_cap, "%s", a->why);
    pthread_mutex_unlock(&a->mu);
}
