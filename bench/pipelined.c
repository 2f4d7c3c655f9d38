/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "pipelined.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raw.h"
#include "redisson.h"

/* ---- the shared floor -------------------------------------------------- */

/* A thread waiting for one reply on one connection. */
typedef struct waiter {
    raw_reply reply;
    int done;
    pthread_cond_t cond;
    struct waiter *next;
} waiter;

typedef struct shared_conn {
    raw_conn conn;
    pthread_mutex_t mu;
    waiter *head, *tail; /* replies expected, in request order */
    int reading;         /* a thread reads for everyone */
} shared_conn;

struct shared_floor {
    shared_conn conns[BENCH_MAX_NODES];
    size_t n;
    char lock_sha[41], unlock_sha[41];
    char lease[24];
};

/* Writes one request and queues its waiter, in one order on the wire and
 * in the queue. */
static void shared_send(shared_conn *sc, waiter *w, const char *cmd, size_t len)
{
    w->done = 0;
    w->next = NULL;
    pthread_mutex_lock(&sc->mu);
    if (sc->tail)
        sc->tail->next = w;
    else
        sc->head = w;
    sc->tail = w;
    raw_send(&sc->conn, cmd, len);
    pthread_mutex_unlock(&sc->mu);
}

/* Waits for w's reply, reading for everyone while nobody else does. */
static void shared_wait(shared_conn *sc, waiter *w)
{
    pthread_mutex_lock(&sc->mu);
    while (!w->done) {
        if (sc->reading) {
            pthread_cond_wait(&w->cond, &sc->mu);
            continue;
        }
        raw_reply r;
        waiter *first;

        sc->reading = 1;
        pthread_mutex_unlock(&sc->mu);
        raw_read(&sc->conn, &r); /* one recv brings every reply that arrived */
        pthread_mutex_lock(&sc->mu);
        first = sc->head;
        sc->head = first->next;
        if (!sc->head)
            sc->tail = NULL;
        first->reply = r;
        first->done = 1;
        sc->reading = 0;
        if (first != w)
            pthread_cond_signal(&first->cond);
    }
    /* Hand the reading on to the next thread that waits here. */
    if (!sc->reading && sc->head)
        pthread_cond_signal(&sc->head->cond);
    pthread_mutex_unlock(&sc->mu);
}

shared_floor *shared_floor_new(const bench_args *a, size_t n, int64_t lease_ms)
{
    shared_floor *f = calloc(1, sizeof(*f));
    redisson_floor scripts;
    size_t i;

    if (!f)
        bench_die("out of memory");
    /* Loads Redisson's two scripts on every node, for their digests. */
    redisson_floor_init(&scripts, a, n, "bench:pipelined:load", lease_ms);
    memcpy(f->lock_sha, scripts.lock_sha, sizeof(f->lock_sha));
    memcpy(f->unlock_sha, scripts.unlock_sha, sizeof(f->unlock_sha));
    redisson_floor_free(&scripts);
    f->n = n;
    snprintf(f->lease, sizeof(f->lease), "%lld", (long long)lease_ms);
    for (i = 0; i < n; i++) {
        raw_connect(&f->conns[i].conn, a->hosts[i], a->ports[i], a->user, a->pass);
        pthread_mutex_init(&f->conns[i].mu, NULL);
    }
    return f;
}

void shared_floor_free(shared_floor *f)
{
    size_t i;

    for (i = 0; i < f->n; i++) {
        raw_close(&f->conns[i].conn);
        pthread_mutex_destroy(&f->conns[i].mu);
    }
    free(f);
}

/* A thread's own waiters, one per node, made at its first cycle. */
static _Thread_local waiter own_waiters[BENCH_MAX_NODES];
static _Thread_local int own_ready;

/* Sends cmd to every node, then waits for each reply in turn. */
static void shared_round(shared_floor *f, const char *cmd, size_t len, char want,
                         const char *what)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        shared_send(&f->conns[i], &own_waiters[i], cmd, len);
    for (i = 0; i < f->n; i++) {
        shared_wait(&f->conns[i], &own_waiters[i]);
        if (own_waiters[i].reply.type != want)
            bench_die("shared floor %s on node %zu: unexpected reply (%c %lld %s)", what, i,
                      own_waiters[i].reply.type, own_waiters[i].reply.integer,
                      own_waiters[i].reply.text);
    }
}

void shared_floor_cycle(shared_floor *f, const char *name)
{
    char cmd[1024], channel[192], field[64];
    size_t i;

    if (!own_ready) {
        for (i = 0; i < BENCH_MAX_NODES; i++)
            pthread_cond_init(&own_waiters[i].cond, NULL);
        own_ready = 1;
    }
    /* Redisson's field, "<connection manager uuid>:<thread id>". */
    snprintf(field, sizeof(field), "7d3e5b1a-0c2f-4e8d-9a6b-%012x:%d", (unsigned)getpid(),
             (int)gettid());
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
    shared_round(f, cmd,
                 raw_format(cmd, sizeof(cmd), 6,
                            (const char *[]){"EVALSHA", f->lock_sha, "1", name, f->lease, field}),
                 'n', "lock");
    shared_round(f, cmd,
                 raw_format(cmd, sizeof(cmd), 8,
                            (const char *[]){"EVALSHA", f->unlock_sha, "2", name, channel, "0",
                                             f->lease, field}),
                 ':', "unlock");
}
