/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "transport/resolve.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define REFRESH_MIN_NS (1000 * REDLOCK__NS_PER_MS)

/* getaddrinfo, with no mutex held; then the result in a's slots. */
static void lookup(redlock__addrs *a)
{
    struct addrinfo hints, *res = NULL, *ai;
    struct sockaddr_storage addr[REDLOCK__RESOLVE_MAX_ADDRS];
    socklen_t len[REDLOCK__RESOLVE_MAX_ADDRS];
    char port[8];
    int rc, n = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%d", a->port);
    rc = getaddrinfo(a->host, port, &hints, &res);
    for (ai = rc == 0 ? res : NULL; ai && n < REDLOCK__RESOLVE_MAX_ADDRS; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(addr[0]))
            continue;
        memcpy(&addr[n], ai->ai_addr, ai->ai_addrlen);
        len[n++] = ai->ai_addrlen;
    }
    if (res)
        freeaddrinfo(res);
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
    pthread_cond_init(&r->cond, NULL);
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
        pthread_mutex_destroy(&r->addrs[i].mu);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    free(r->addrs);
    r->addrs = NULL;
}

int redlock__addrs_get(redlock__addrs *a, struct sockaddr_storage *addr, socklen_t *len,
                       int *gai_err)
{
    int n;

    pthread_mutex_lock(&a->mu);
    n = a->n;
    memcpy(addr, a->addr, sizeof(a->addr[0]) * (size_t)n);
    memcpy(len, a->len, sizeof(a->len[0]) * (size_t)n);
    *gai_err = a->gai_err;
    pthread_mutex_unlock(&a->mu);
    return n;
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
