/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "pipelined.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "raw.h"
#include "redisson.h"
#include "redlock/adapters/poll.h"

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

/* ---- the relay --------------------------------------------------------- */

enum relay_op { OP_NEW, OP_FREE, OP_ACQUIRE, OP_UNLOCK };

/* One call handed to the loop's thread; lives on the caller's stack. */
typedef struct relay_req {
    enum relay_op op;
    const char *name;
    redlock_lock *lock;
    uint64_t owner;
    int64_t lease_ms;
    int rc, done;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct relay_req *next;
} relay_req;

struct relay {
    const bench_args *a;
    size_t n;
    int node_timeout_ms;
    pthread_t th;
    int efd;                  /* wakes the loop when a call is queued */
    pthread_mutex_t mu;
    relay_req *head, *tail;   /* calls not yet started */
    int quit, started;
    pthread_cond_t ready;
};

static void finish(relay_req *q, int rc)
{
    pthread_mutex_lock(&q->mu);
    q->rc = rc;
    q->done = 1;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->mu);
}

static void on_done(void *ud, redlock_lock *l, int rc, const char *message)
{
    (void)l;
    (void)message;
    finish(ud, rc);
}

/* Starts the calls queued since the last turn. */
static void start_queued(relay *r, redlock_client *c)
{
    relay_req *q, *next;

    pthread_mutex_lock(&r->mu);
    q = r->head;
    r->head = r->tail = NULL;
    pthread_mutex_unlock(&r->mu);
    for (; q; q = next) {
        int rc;

        next = q->next;
        switch (q->op) {
        case OP_NEW:
            rc = redlock_lock_new(c, q->name, NULL, &q->lock);
            finish(q, rc);
            break;
        case OP_FREE:
            redlock_lock_free(q->lock);
            finish(q, REDLOCK_OK);
            break;
        case OP_ACQUIRE:
            rc = redlock_acquire_async(q->lock, q->owner, 0, q->lease_ms, on_done, q);
            if (rc != REDLOCK_OK)
                finish(q, rc);
            break;
        case OP_UNLOCK:
            rc = redlock_unlock_async(q->lock, q->owner, on_done, q);
            if (rc != REDLOCK_OK)
                finish(q, rc);
            break;
        }
    }
}

/* redlock_poll_run_once with the relay's eventfd among the fds. */
static void turn(relay *r, redlock_poll_loop *pl, struct pollfd **fds, size_t *cap)
{
    int64_t now = redlock_poll__now(), wait_ms = 100;
    size_t n = pl->n, i;

    if (pl->timer_ns >= 0) {
        int64_t t = pl->timer_ns <= now ? 0 : (pl->timer_ns - now + 999999) / 1000000;

        if (t < wait_ms)
            wait_ms = t;
    }
    if (n + 1 > *cap) {
        *cap = 2 * (n + 1);
        if (!(*fds = realloc(*fds, *cap * sizeof(**fds))))
            bench_die("out of memory");
    }
    memcpy(*fds, pl->fds, n * sizeof(**fds));
    (*fds)[n] = (struct pollfd){.fd = r->efd, .events = POLLIN};
    if (poll(*fds, (nfds_t)n + 1, (int)wait_ms) < 0 && errno != EINTR)
        bench_die("poll: %s", strerror(errno));
    for (i = 0; i < n; i++) {
        short ev = (*fds)[i].revents;

        if (ev)
            redlock_loop_action(
                pl->client, (*fds)[i].fd,
                (ev & (POLLIN | POLLERR | POLLHUP | POLLNVAL) ? REDLOCK_EV_READ : 0) |
                    (ev & (POLLOUT | POLLERR | POLLHUP | POLLNVAL) ? REDLOCK_EV_WRITE : 0));
    }
    if (pl->timer_ns >= 0 && redlock_poll__now() >= pl->timer_ns) {
        pl->timer_ns = -1;
        redlock_loop_action(pl->client, REDLOCK_EV_TIMEOUT, 0);
    }
    if ((*fds)[n].revents) {
        uint64_t v;

        if (read(r->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            bench_die("eventfd: %s", strerror(errno));
    }
}

static void *relay_main(void *arg)
{
    relay *r = arg;
    redlock_options o = {0};
    redlock_client *c;
    redlock_poll_loop pl;
    struct pollfd *fds = NULL;
    size_t cap = 0;

    /* The client belongs to the thread that attaches it: this one. */
    o.event_loop = 1;
    o.node_timeout_ms = r->node_timeout_ms;
    c = bench_client(r->a, r->n, &o);
    bench_check(redlock_poll_attach(&pl, c), "poll_attach");
    pthread_mutex_lock(&r->mu);
    r->started = 1;
    pthread_cond_signal(&r->ready);
    pthread_mutex_unlock(&r->mu);
    for (;;) {
        int quit;

        start_queued(r, c);
        pthread_mutex_lock(&r->mu);
        quit = r->quit && !r->head;
        pthread_mutex_unlock(&r->mu);
        if (quit && redlock_loop_pending(c) == 0)
            break;
        turn(r, &pl, &fds, &cap);
    }
    redlock_client_free(c);
    redlock_poll_free(&pl);
    free(fds);
    return NULL;
}

relay *relay_new(const bench_args *a, size_t n, int node_timeout_ms)
{
    relay *r = calloc(1, sizeof(*r));

    if (!r)
        bench_die("out of memory");
    r->a = a;
    r->n = n;
    r->node_timeout_ms = node_timeout_ms;
    if ((r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        bench_die("eventfd: %s", strerror(errno));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->ready, NULL);
    if (pthread_create(&r->th, NULL, relay_main, r) != 0)
        bench_die("pthread_create");
    pthread_mutex_lock(&r->mu);
    while (!r->started)
        pthread_cond_wait(&r->ready, &r->mu);
    pthread_mutex_unlock(&r->mu);
    return r;
}

void relay_free(relay *r)
{
    uint64_t one = 1;

    pthread_mutex_lock(&r->mu);
    r->quit = 1;
    pthread_mutex_unlock(&r->mu);
    if (write(r->efd, &one, sizeof(one)) < 0)
        bench_die("eventfd: %s", strerror(errno));
    pthread_join(r->th, NULL);
    close(r->efd);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->ready);
    free(r);
}

/* Queues q, wakes the loop if it may sleep, and waits for q's outcome. */
static int relay_call(relay *r, relay_req *q)
{
    uint64_t one = 1;
    int was_empty;

    q->done = 0;
    q->next = NULL;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cond, NULL);
    pthread_mutex_lock(&r->mu);
    was_empty = r->head == NULL;
    if (r->tail)
        r->tail->next = q;
    else
        r->head = q;
    r->tail = q;
    pthread_mutex_unlock(&r->mu);
    /* A queue that was not empty has a wake-up on its way already. */
    if (was_empty && write(r->efd, &one, sizeof(one)) < 0)
        bench_die("eventfd: %s", strerror(errno));
    pthread_mutex_lock(&q->mu);
    while (!q->done)
        pthread_cond_wait(&q->cond, &q->mu);
    pthread_mutex_unlock(&q->mu);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cond);
    return q->rc;
}

redlock_lock *relay_lock_new(relay *r, const char *name)
{
    relay_req q = {.op = OP_NEW, .name = name};

    bench_check(relay_call(r, &q), "lock_new (relayed)");
    return q.lock;
}

void relay_lock_free(relay *r, redlock_lock *l)
{
    relay_req q = {.op = OP_FREE, .lock = l};

    relay_call(r, &q);
}

int relay_try_lock(relay *r, redlock_lock *l, uint64_t owner, int64_t lease_ms)
{
    relay_req q = {.op = OP_ACQUIRE, .lock = l, .owner = owner, .lease_ms = lease_ms};

    return relay_call(r, &q);
}

int relay_unlock(relay *r, redlock_lock *l, uint64_t owner)
{
    relay_req q = {.op = OP_UNLOCK, .lock = l, .owner = owner};

    return relay_call(r, &q);
}
