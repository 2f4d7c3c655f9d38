/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared connections and their reader (see mux.h); the fan-out over
 * them is in mux_fanout.c. */
#define _GNU_SOURCE
#include "transport/mux_impl.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "core/wait.h"
#include "transport/fanout.h"

int redlock__mux_new(const redlock__node *nodes, size_t n_nodes,
                     const redlock__settle_hook *hook, uint64_t *failures, redlock__mux **out)
{
    redlock__mux *m = calloc(1, sizeof(*m));
    size_t i;

    *out = NULL;
    if (!m || !(m->nodes = calloc(n_nodes, sizeof(*m->nodes)))) {
        free(m);
        return REDLOCK_ENOMEM;
    }
    m->n_nodes = n_nodes;
    m->hook = hook;
    m->failures = failures;
    for (i = 0; i < n_nodes; i++) {
        redlock__conn_init(&m->nodes[i].conn, &nodes[i]);
        m->nodes[i].conn.hook = hook;
    }
    *out = m;
    return REDLOCK_OK;
}

int redlock__mux_push(redlock__mux_node *mn, redlock__mux_slot *owner)
{
    if (mn->tail == mn->cap) {
        size_t live = mn->tail - mn->head, cap = mn->cap ? mn->cap : 64;
        redlock__mux_entry *q;

        if (mn->head > 0 && live < mn->cap / 2) {
            memmove(mn->q, mn->q + mn->head, live * sizeof(*q));
        } else {
            while (cap <= live)
                cap *= 2;
            if (!(q = realloc(mn->q, cap * sizeof(*q))))
                return REDLOCK_ENOMEM;
            memmove(q, q + mn->head, live * sizeof(*q));
            mn->q = q;
            mn->cap = cap;
        }
        mn->head = 0;
        mn->tail = live;
    }
    mn->q[mn->tail].owner = owner;
    mn->q[mn->tail++].token = 0;
    return REDLOCK_OK;
}

/*
 * The node's connection is gone (or out of step): every request on it is
 * lost. Waiting operations hear the error; ledger entries are settled
 * "lost", as a pool connection settles them when it closes.
 */
void redlock__mux_node_failed(redlock__mux *m, redlock__mux_node *mn, int err, const char *msg)
{
    size_t i;

    /* The loop stops watching the fd before its number can be reused,
     * whether or not the pool's closing hook is set. */
    if (mn->conn.state != REDLOCK__CONN_CLOSED)
        redlock__wait_fd_closing(mn->conn.fd);
    redlock__conn_close(&mn->conn);
    for (i = mn->head; i < mn->tail; i++) {
        redlock__mux_entry *e = &mn->q[i];

        if (e->owner && !e->owner->err) {
            e->owner->err = err;
            snprintf(e->owner->errmsg, sizeof(e->owner->errmsg), "%s",
                     msg && *msg ? msg : "connection lost");
            redlock__wait_notify(e->owner->key);
        } else if (!e->owner && e->token && m->hook && m->hook->fn) {
            m->hook->fn(m->hook->ud, e->token, 0, NULL);
        }
    }
    mn->head = mn->tail = 0;
}

/* Hands every complete reply to whoever waits for it, in order. */
static void dispatch(redlock__mux *m, redlock__mux_node *mn)
{
    redisReply *r;
    int got;

    while ((got = redlock__conn_next_reply(&mn->conn, &r)) != 0) {
        redlock__mux_entry e;

        if (got < 0) {
            redlock__mux_node_failed(m, mn, -got, mn->conn.errmsg);
            return;
        }
        if (mn->head == mn->tail) {
            /* A reply nobody asked for: the stream is out of step. */
            freeReplyObject(r);
            redlock__mux_node_failed(m, mn, REDLOCK_EPROTO, "unexpected extra reply");
            return;
        }
        e = mn->q[mn->head++];
        if (mn->head == mn->tail)
            mn->head = mn->tail = 0;
        if (e.owner) {
            e.owner->inbox[e.owner->got++] = r;
            redlock__wait_notify(e.owner->key);
            continue;
        }
        /* Any answer means the call ran (the scripts are idempotent),
         * except NOSCRIPT: that one did not, and counts as lost. */
        if (e.token && m->hook && m->hook->fn)
            m->hook->fn(m->hook->ud, e.token, !redlock__is_noscript(r),
                        r->type == REDIS_REPLY_ERROR ? r->str : NULL);
        freeReplyObject(r);
    }
}

void redlock__mux_pump(redlock__mux *m, redlock__mux_node *mn)
{
    int rc;

    if (mn->conn.state != REDLOCK__CONN_READY)
        return;
    rc = redlock__conn_io(&mn->conn, POLLIN);
    if (rc != REDLOCK_OK)
        redlock__mux_node_failed(m, mn, rc, mn->conn.errmsg);
    else
        dispatch(m, mn);
}

static int waited_on(const redlock__mux_node *mn)
{
    size_t i;

    for (i = mn->head; i < mn->tail; i++)
        if (mn->q[i].owner)
            return 1;
    return 0;
}

void redlock__mux_run(redlock__mux *m)
{
    struct pollfd *pfd = calloc(m->n_nodes, sizeof(*pfd));
    size_t *idx = calloc(m->n_nodes, sizeof(*idx));
    size_t i;

    m->thread = pthread_self();
    m->runner = redlock__wait_runner();
    __atomic_store_n(&m->running, pfd && idx, __ATOMIC_RELEASE);
    while (pfd && idx) {
        size_t n = 0;
        int closing = __atomic_load_n(&m->closing, __ATOMIC_ACQUIRE), busy = 0;
        int r;

        for (i = 0; i < m->n_nodes; i++) {
            redlock__mux_node *mn = &m->nodes[i];
            redlock__conn *c = &mn->conn;

            /* What the loop's operations queued since the reader last ran
             * goes out now, together: one write for all of them. */
            if (c->state == REDLOCK__CONN_READY && redlock__buf_pending(&c->out) &&
                redlock__conn_io(c, 0) != REDLOCK_OK)
                redlock__mux_node_failed(m, mn, REDLOCK_EIO, c->errmsg);
            if (c->state == REDLOCK__CONN_CLOSED)
                continue;
            if (closing)
                busy |= waited_on(mn);
            pfd[n].fd = c->fd;
            pfd[n].events = redlock__conn_events(c);
            /* A ready connection with nothing to write waits to read: a
             * TLS read that wanted a write retries on the next bytes in,
             * rather than wake the reader on a writable socket for ever. */
            if (c->state == REDLOCK__CONN_READY && !redlock__buf_pending(&c->out))
                pfd[n].events = POLLIN;
            pfd[n].revents = 0;
            idx[n++] = i;
        }
        if (closing && !busy)
            break;
        r = redlock__wait_poll_key(pfd, n, INT64_MAX, m);
        if (r < 0 && errno != EINTR)
            break;
        for (i = 0; r > 0 && i < n; i++) {
            redlock__mux_node *mn = &m->nodes[idx[i]];
            int rc;

            if (!pfd[i].revents)
                continue;
            rc = redlock__conn_io(&mn->conn, pfd[i].revents);
            if (rc != REDLOCK_OK)
                redlock__mux_node_failed(m, mn, rc, mn->conn.errmsg);
            else
                dispatch(m, mn);
        }
    }
    __atomic_store_n(&m->running, 0, __ATOMIC_RELEASE);
    for (i = 0; i < m->n_nodes; i++)
        redlock__mux_node_failed(m, &m->nodes[i], REDLOCK_ECANCELED, "client closing");
    free(pfd);
    free(idx);
}

static size_t ledger_entries(const redlock__mux_node *mn)
{
    size_t i, n = 0;

    for (i = mn->head; i < mn->tail; i++)
        n += mn->q[i].owner == NULL && mn->q[i].token != 0;
    return n;
}

size_t redlock__mux_drain(redlock__mux *m, int64_t deadline_ns)
{
    struct pollfd pfd[REDLOCK__MAX_BATCHES];
    redlock__mux_node *who[REDLOCK__MAX_BATCHES];
    size_t i, n, left;

    /* A fiber leaves it to the reader; another thread may not touch it. */
    if (!m || !redlock__mux_running(m) || redlock__wait_parks() ||
        !pthread_equal(m->thread, pthread_self()))
        return 0;
    for (;;) {
        left = n = 0;
        for (i = 0; i < m->n_nodes && n < REDLOCK__MAX_BATCHES; i++) {
            redlock__mux_node *mn = &m->nodes[i];
            size_t k = ledger_entries(mn);

            if (k == 0 || mn->conn.state == REDLOCK__CONN_CLOSED)
                continue;
            left += k;
            pfd[n].fd = mn->conn.fd;
            pfd[n].events = redlock__conn_events(&mn->conn);
            pfd[n].revents = 0;
            who[n++] = mn;
        }
        if (left == 0 || redlock__now_ns() >= deadline_ns)
            return left;
        if (redlock__wait_poll(pfd, n, deadline_ns) < 0 && errno != EINTR)
            return left;
        for (i = 0; i < n; i++) {
            int rc;

            if (!pfd[i].revents)
                continue;
            rc = redlock__conn_io(&who[i]->conn, pfd[i].revents);
            if (rc != REDLOCK_OK)
                redlock__mux_node_failed(m, who[i], rc, who[i]->conn.errmsg);
            else
                dispatch(m, who[i]);
        }
    }
}

void redlock__mux_close(redlock__mux *m)
{
    __atomic_store_n(&m->closing, 1, __ATOMIC_RELEASE);
}

void redlock__mux_free(redlock__mux *m)
{
    size_t i;

    if (!m)
        return;
    for (i = 0; i < m->n_nodes; i++) {
        redlock__mux_node_failed(m, &m->nodes[i], REDLOCK_ECANCELED, "client closing");
        free(m->nodes[i].q);
    }
    free(m->nodes);
    free(m);
}

int redlock__mux_running(const redlock__mux *m)
{
    return __atomic_load_n(&m->running, __ATOMIC_ACQUIRE);
}

int redlock__mux_usable(const redlock__mux *m)
{
    /* Only a fiber of the reader's own loop: a fiber of another client's
     * loop on this thread (its on_lost calling this client) would wait
     * for a wake-up the reader never sends it. */
    return m && __atomic_load_n(&m->running, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&m->closing, __ATOMIC_ACQUIRE) && redlock__wait_parks() &&
           pthread_equal(m->thread, pthread_self()) && redlock__wait_runner() == m->runner;
}
