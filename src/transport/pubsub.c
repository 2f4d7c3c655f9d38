/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "transport/pubsub.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/util.h"
#include "core/wait.h"
#include "transport/transport.h"

#define RECONNECT_MIN_MS 50
#define RECONNECT_MAX_MS 1000

typedef struct channel {
    struct channel *next;
    char *name;              /* full channel name */
    uint64_t gen;            /* bumped by every message */
    unsigned *refs;          /* per node: watches that need it */
    unsigned char *asked;    /* per node: SUBSCRIBE sent, no UNSUBSCRIBE */
    unsigned char *live;     /* per node: subscription confirmed */
} channel;

/* One (channel, node) pair per lock member. */
struct redlock__watch {
    size_t n;
    uint64_t start_gen;      /* sum of generations when watching began */
    struct {
        channel *ch;
        size_t node;
    } pairs[];
};

typedef struct sub_node {
    redlock__conn conn;
    int64_t retry_at;        /* when to reconnect after a failure */
    /* When the connection must be up and every SUBSCRIBE asked on it
     * confirmed (0: nothing outstanding). A node that accepts and never
     * answers would otherwise hold its waiters on TTL polling forever. */
    int64_t confirm_by;
    int backoff_ms;
    int failed;              /* the last connection attempt failed */
} sub_node;

struct redlock__pubsub {
    pthread_mutex_t mu;
    pthread_cond_t cond;     /* waiters: messages and confirmations */
    pthread_t thread;
    int threaded;            /* the thread runs (else a loop's fiber) */
    int wake[2];             /* pipe: tells the thread to reconcile */
    int closing;
    uint64_t kicks;          /* redlock__pubsub_kick() calls */
    size_t n_nodes;
    int connect_timeout_ms;
    channel *channels;
    sub_node nodes[];
};

static void poke(redlock__pubsub *ps)
{
    char c = 1;
    ssize_t r = write(ps->wake[1], &c, 1);

    (void)r; /* a full pipe already guarantees a wake-up */
}

/* Waiters wait on ps->cond: threads, or fibers parked on it. */
static void wake_waiters(redlock__pubsub *ps)
{
    pthread_cond_broadcast(&ps->cond);
    redlock__wait_notify(&ps->cond);
}

static channel *find_channel(redlock__pubsub *ps, const char *name)
{
    channel *ch;

    for (ch = ps->channels; ch; ch = ch->next)
        if (strcmp(ch->name, name) == 0)
            return ch;
    return NULL;
}

static void free_channel(channel *ch)
{
    free(ch->name);
    free(ch->refs);
    free(ch->asked);
    free(ch->live);
    free(ch);
}

static channel *new_channel(redlock__pubsub *ps, const char *name)
{
    channel *ch = calloc(1, sizeof(*ch));

    if (!ch)
        return NULL;
    ch->name = strdup(name);
    ch->refs = calloc(ps->n_nodes, sizeof(unsigned));
    ch->asked = calloc(ps->n_nodes, 1);
    ch->live = calloc(ps->n_nodes, 1);
    if (!ch->name || !ch->refs || !ch->asked || !ch->live) {
        free_channel(ch);
        return NULL;
    }
    ch->next = ps->channels;
    ps->channels = ch;
    return ch;
}

static int send_cmd(sub_node *sn, const char *verb, const char *chan)
{
    redlock__call call = {-1, 0, 2, (const char *[]){verb, chan}, NULL};

    return redlock__queue_call(&sn->conn, &call, 0);
}

/* Whether a waiter needs node i's connection (or it still has to take a
 * subscription back). Called with ps->mu held. */
static int node_wanted(const redlock__pubsub *ps, size_t i)
{
    const channel *ch;

    for (ch = ps->channels; ch; ch = ch->next)
        if (ch->refs[i] > 0 || ch->asked[i])
            return 1;
    return 0;
}

/* Brings each node's subscriptions in line with the waiters' needs and
 * drops channels nobody needs any more. Called with ps->mu held. */
static void reconcile(redlock__pubsub *ps, int64_t now)
{
    channel **pp = &ps->channels;
    size_t i;

    for (i = 0; i < ps->n_nodes; i++) {
        sub_node *sn = &ps->nodes[i];

        if (!node_wanted(ps, i) || sn->conn.state != REDLOCK__CONN_CLOSED ||
            now < sn->retry_at)
            continue;
        sn->confirm_by = now + (int64_t)ps->connect_timeout_ms * REDLOCK__NS_PER_MS;
        if (redlock__conn_open(&sn->conn) != REDLOCK_OK) {
            sn->failed = 1;
            sn->retry_at = now + (int64_t)sn->backoff_ms * REDLOCK__NS_PER_MS;
            sn->backoff_ms = sn->backoff_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS
                                                                   : sn->backoff_ms * 2;
            wake_waiters(ps);
        }
    }
    for (i = 0; i < ps->n_nodes; i++) {
        sub_node *sn = &ps->nodes[i];
        channel *ch;

        if (sn->conn.state == REDLOCK__CONN_CLOSED)
            continue;
        for (ch = ps->channels; ch; ch = ch->next) {
            if (ch->refs[i] && !ch->asked[i]) {
                if (send_cmd(sn, "SUBSCRIBE", ch->name) == REDLOCK_OK) {
                    ch->asked[i] = 1;
                    if (!sn->confirm_by)
                        sn->confirm_by =
                            now + (int64_t)ps->connect_timeout_ms * REDLOCK__NS_PER_MS;
                }
            } else if (!ch->refs[i] && ch->asked[i]) {
                if (send_cmd(sn, "UNSUBSCRIBE", ch->name) == REDLOCK_OK)
                    ch->asked[i] = ch->live[i] = 0;
            }
        }
    }
    while (*pp) {
        channel *ch = *pp;
        int used = 0;

        for (i = 0; i < ps->n_nodes; i++)
            used |= ch->refs[i] || ch->asked[i];
        if (!used) {
            *pp = ch->next;
            free_channel(ch);
        } else {
            pp = &ch->next;
        }
    }
}

/* A broken subscriber connection may have swallowed release messages:
 * forget its subscriptions and wake every waiter so each retries. */
static void node_failed(redlock__pubsub *ps, size_t i, int64_t now)
{
    sub_node *sn = &ps->nodes[i];
    channel *ch;

    redlock__conn_close(&sn->conn);
    sn->failed = 1;
    sn->confirm_by = 0;
    sn->retry_at = now + (int64_t)sn->backoff_ms * REDLOCK__NS_PER_MS;
    sn->backoff_ms = sn->backoff_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS
                                                           : sn->backoff_ms * 2;
    for (ch = ps->channels; ch; ch = ch->next) {
        ch->asked[i] = ch->live[i] = 0;
        ch->gen++;
    }
    wake_waiters(ps);
}

static void handle_push(redlock__pubsub *ps, size_t i, redisReply *r)
{
    channel *ch;
    const char *kind;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    kind = r->element[0]->str;
    ch = find_channel(ps, r->element[1]->str);
    if (!ch)
        return;
    if (strcmp(kind, "message") == 0) {
        ch->gen++;
        wake_waiters(ps);
    } else if (strcmp(kind, "subscribe") == 0 && ch->asked[i]) {
        channel *other;
        int outstanding = 0;

        ch->live[i] = 1;
        ps->nodes[i].failed = 0;
        ps->nodes[i].backoff_ms = RECONNECT_MIN_MS;
        for (other = ps->channels; other; other = other->next)
            outstanding |= other->asked[i] && !other->live[i];
        if (!outstanding)
            ps->nodes[i].confirm_by = 0;
        wake_waiters(ps);
    }
}

void redlock__pubsub_feed(redlock__pubsub *ps, size_t node, struct redisReply *r)
{
    if (node >= ps->n_nodes || !r)
        return;
    pthread_mutex_lock(&ps->mu);
    handle_push(ps, node, r);
    pthread_mutex_unlock(&ps->mu);
}

void redlock__pubsub_run(redlock__pubsub *ps)
{
    struct pollfd *pfd = calloc(ps->n_nodes + 1, sizeof(*pfd));
    size_t *idx = calloc(ps->n_nodes + 1, sizeof(size_t));

    if (!pfd || !idx) {
        free(pfd);
        free(idx);
        return;
    }
    pthread_mutex_lock(&ps->mu);
    while (!ps->closing) {
        int64_t now = redlock__now_ns(), next = INT64_MAX;
        size_t i, n = 1;
        int r;
        char drain[64];

        reconcile(ps, now);
        pfd[0].fd = ps->wake[0];
        pfd[0].events = POLLIN;
        for (i = 0; i < ps->n_nodes; i++) {
            sub_node *sn = &ps->nodes[i];

            if (sn->conn.state != REDLOCK__CONN_CLOSED && sn->confirm_by && now >= sn->confirm_by)
                node_failed(ps, i, now);
            if (sn->conn.state == REDLOCK__CONN_CLOSED) {
                /* A failed node nobody needs any more is not retried:
                 * its past retry time must not make the poll return at
                 * once, over and over. */
                if (sn->failed && sn->retry_at < next && node_wanted(ps, i))
                    next = sn->retry_at;
                continue;
            }
            if (sn->confirm_by && sn->confirm_by < next)
                next = sn->confirm_by;
            pfd[n].fd = sn->conn.fd;
            pfd[n].events = redlock__conn_events(&sn->conn);
            pfd[n].revents = 0;
            idx[n++] = i;
        }
        pthread_mutex_unlock(&ps->mu);
        r = redlock__wait_poll(pfd, n, next == INT64_MAX ? INT64_MAX : next + REDLOCK__NS_PER_MS);
        pthread_mutex_lock(&ps->mu);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (pfd[0].revents)
            while (read(ps->wake[0], drain, sizeof(drain)) > 0)
                ;
        now = redlock__now_ns();
        for (i = 1; i < n; i++) {
            sub_node *sn = &ps->nodes[idx[i]];
            redisReply *reply;
            int got;

            if (!pfd[i].revents)
                continue;
            if (redlock__conn_io(&sn->conn, pfd[i].revents) != REDLOCK_OK) {
                node_failed(ps, idx[i], now);
                continue;
            }
            while ((got = redlock__conn_next_reply(&sn->conn, &reply)) > 0) {
                handle_push(ps, idx[i], reply);
                freeReplyObject(reply);
            }
            if (got < 0)
                node_failed(ps, idx[i], now);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    free(pfd);
    free(idx);
}

static void *listener(void *arg)
{
    redlock__pubsub_run(arg);
    return NULL;
}

int redlock__pubsub_new(const redlock__node *nodes, size_t n_nodes,
                        int connect_timeout_ms, int with_thread, redlock__pubsub **out)
{
    redlock__pubsub *ps = calloc(1, sizeof(*ps) + n_nodes * sizeof(sub_node));
    size_t i;

    *out = NULL;
    if (!ps)
        return REDLOCK_ENOMEM;
    ps->n_nodes = n_nodes;
    ps->connect_timeout_ms = connect_timeout_ms;
    for (i = 0; i < n_nodes; i++) {
        redlock__conn_init(&ps->nodes[i].conn, &nodes[i]);
        ps->nodes[i].conn.subscriber = 1;
        ps->nodes[i].backoff_ms = RECONNECT_MIN_MS;
    }
    if (pipe2(ps->wake, O_NONBLOCK | O_CLOEXEC) < 0) {
        free(ps);
        return redlock__fail(REDLOCK_ENOMEM, "pipe: %s", strerror(errno));
    }
    pthread_mutex_init(&ps->mu, NULL);
    {
        pthread_condattr_t ca;

        /* Waits use CLOCK_MONOTONIC deadlines like everything else. */
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&ps->cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (with_thread && pthread_create(&ps->thread, NULL, listener, ps) != 0) {
        close(ps->wake[0]);
        close(ps->wake[1]);
        pthread_mutex_destroy(&ps->mu);
        pthread_cond_destroy(&ps->cond);
        free(ps);
        return redlock__fail(REDLOCK_ENOMEM, "cannot start the subscriber thread");
    }
    ps->threaded = with_thread;
    *out = ps;
    return REDLOCK_OK;
}

void redlock__pubsub_close(redlock__pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    ps->closing = 1;
    wake_waiters(ps);
    pthread_mutex_unlock(&ps->mu);
    poke(ps);
}

void redlock__pubsub_free(redlock__pubsub *ps)
{
    size_t i;

    if (!ps)
        return;
    redlock__pubsub_close(ps);
    if (ps->threaded)
        pthread_join(ps->thread, NULL);
    while (ps->channels) {
        channel *next = ps->channels->next;

        free_channel(ps->channels);
        ps->channels = next;
    }
    for (i = 0; i < ps->n_nodes; i++)
        redlock__conn_close(&ps->nodes[i].conn);
    close(ps->wake[0]);
    close(ps->wake[1]);
    pthread_mutex_destroy(&ps->mu);
    pthread_cond_destroy(&ps->cond);
    free(ps);
}

static int settled(redlock__pubsub *ps, redlock__watch *w)
{
    size_t i;

    for (i = 0; i < w->n; i++) {
        size_t node = w->pairs[i].node;

        if (!w->pairs[i].ch->live[node] && !ps->nodes[node].failed)
            return 0;
    }
    return 1;
}

static uint64_t watch_gen(const redlock__watch *w)
{
    uint64_t sum = 0;
    size_t i;

    for (i = 0; i < w->n; i++)
        sum += w->pairs[i].ch->gen;
    return sum;
}

redlock__watch *redlock__pubsub_watch(redlock__pubsub *ps,
                                      const char *const *channels,
                                      const size_t *nodes, size_t n,
                                      int64_t deadline_ns)
{
    redlock__watch *w = calloc(1, sizeof(*w) + n * sizeof(w->pairs[0]));
    size_t i;

    if (!w)
        return NULL;
    pthread_mutex_lock(&ps->mu);
    for (i = 0; i < n; i++) {
        channel *ch = find_channel(ps, channels[i]);

        if (!ch)
            ch = new_channel(ps, channels[i]);
        if (!ch) {
            pthread_mutex_unlock(&ps->mu);
            w->n = i;
            redlock__pubsub_unwatch(ps, w);
            return NULL;
        }
        w->pairs[i].ch = ch;
        w->pairs[i].node = nodes[i];
        ch->refs[nodes[i]]++;
    }
    w->n = n;
    w->start_gen = watch_gen(w);
    poke(ps);
    while (!ps->closing && !settled(ps, w) && redlock__now_ns() < deadline_ns)
        if (redlock__wait_cond_until(&ps->cond, &ps->mu, deadline_ns, 0) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&ps->mu);
    return w;
}

int redlock__pubsub_wait(redlock__pubsub *ps, redlock__watch *w, uint64_t *seen,
                         int64_t deadline_ns, int (*stop)(void *), void *stop_ud)
{
    int rc = REDLOCK_ETIMEOUT;
    uint64_t kicks;

    if (!ps || !w) {
        /* Without notifications a waiter just sleeps until its deadline. */
        if (!stop || !stop(stop_ud))
            redlock__wait_until(deadline_ns);
        return REDLOCK_ETIMEOUT;
    }
    pthread_mutex_lock(&ps->mu);
    if (*seen == 0)
        *seen = w->start_gen;
    kicks = ps->kicks;
    for (;;) {
        /* A canceler counts its cancel, then kicks under this lock: the
         * test below, made under it after each kick seen, cannot miss one. */
        if (ps->kicks != kicks) {
            if (!stop)
                break;
            kicks = ps->kicks;
        }
        if (stop && stop(stop_ud))
            break;
        if (ps->closing) {
            rc = REDLOCK_ECLOSED;
            break;
        }
        if (watch_gen(w) != *seen) {
            *seen = watch_gen(w);
            rc = REDLOCK_OK;
            break;
        }
        if (redlock__now_ns() >= deadline_ns ||
            redlock__wait_cond_until(&ps->cond, &ps->mu, deadline_ns, 1) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&ps->mu);
    return rc;
}

void redlock__pubsub_kick(redlock__pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    ps->kicks++;
    wake_waiters(ps);
    pthread_mutex_unlock(&ps->mu);
}

void redlock__pubsub_unwatch(redlock__pubsub *ps, redlock__watch *w)
{
    size_t i;

    pthread_mutex_lock(&ps->mu);
    for (i = 0; i < w->n; i++)
        w->pairs[i].ch->refs[w->pairs[i].node]--;
    pthread_mutex_unlock(&ps->mu);
    poke(ps);
    free(w);
}
