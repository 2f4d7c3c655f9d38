/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "transport/net.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/wait.h"
#include "resp/scripts.h"
#include "transport/fanout.h"
#include "transport/mux.h"
#include "transport/pubsub.h"

#define MAX_BATCHES REDLOCK__MAX_BATCHES
/* Calls per batch kept on the stack; watchdog batches can be far larger
 * (one renewal per held lock) and go to the heap. */
#define INLINE_CALLS 8

typedef struct redlock__connset {
    struct redlock__connset *next;
    redlock__conn conns[];
} redlock__connset;

/* Per-batch progress. Replies come back in the order requests were sent,
 * so the calls awaiting an answer form a FIFO; a NOSCRIPT answer re-queues
 * its call as EVAL at the tail. */
typedef struct slot {
    redlock__conn *conn;
    const redlock__batch *batch;
    size_t *queue;       /* call indices, in send order (2 x ncalls) */
    unsigned char *eval; /* whether that send was the EVAL fallback */
    size_t head, tail;
    int64_t started;
    int done;
    /* Storage for small batches; must stay last (see the memset). */
    size_t fifo[INLINE_CALLS];
    unsigned char fell_back[INLINE_CALLS];
} slot;

static size_t slot_pending(const slot *s)
{
    return s->tail - s->head;
}

static void free_slot(slot *s)
{
    if (s->queue != s->fifo)
        free(s->queue);
    if (s->eval != s->fell_back)
        free(s->eval);
}

static int report(slot *s, size_t bi, int err, const char *msg, redisReply *r,
                  redlock__reply_fn fn, void *ud)
{
    size_t call = s->queue[s->head++];

    return fn(ud, bi, call, err, msg, r);
}

/* Fails every outstanding call of a slot with err. */
static int fail_slot(slot *s, size_t bi, int err, const char *msg,
                     redlock__reply_fn fn, void *ud, uint64_t *failures)
{
    unsigned left = (unsigned)slot_pending(s);
    int stop = 0;

    if (failures)
        __atomic_add_fetch(&failures[s->batch->node], 1, __ATOMIC_RELAXED);
    /* Once the caller says stop, the rest are abandoned without a call,
     * as the transport promises. */
    while (slot_pending(s) && !stop)
        stop |= report(s, bi, err, msg, NULL, fn, ud);
    s->head = s->tail;
    s->done = 1;
    /* Keeps the reply stream in step (or closes the connection). */
    redlock__conn_abandon(s->conn, left, NULL);
    return stop;
}

int redlock__is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Hands every complete reply of a slot to the caller. */
static int drain_replies(slot *s, size_t bi, redlock__reply_fn fn, void *ud,
                         uint64_t *failures)
{
    redisReply *r;
    int got, stop = 0;

    while (!s->done && (got = redlock__conn_next_reply(s->conn, &r)) != 0) {
        size_t call;

        if (got < 0)
            return fail_slot(s, bi, -got, s->conn->errmsg, fn, ud, failures);
        if (!slot_pending(s)) {
            /* A reply nobody asked for: the stream is out of step. */
            freeReplyObject(r);
            redlock__conn_close(s->conn);
            return fail_slot(s, bi, REDLOCK_EPROTO, "unexpected extra reply", fn, ud,
                             failures);
        }
        call = s->queue[s->head];
        if (redlock__is_noscript(r) && s->batch->calls[call].script >= 0 && !s->eval[s->head]) {
            /* The node lost its script cache (restart, SCRIPT FLUSH):
             * resend the body once; the EVAL also reloads the cache. */
            freeReplyObject(r);
            s->head++;
            s->eval[s->tail] = 1;
            s->queue[s->tail++] = call;
            if (redlock__queue_call(s->conn, &s->batch->calls[call], 1) != REDLOCK_OK) {
                /* The call still gets its outcome; the resend never went
                 * out, so no reply of it may be skipped. */
                redlock__conn_close(s->conn);
                return fail_slot(s, bi, REDLOCK_ENOMEM, "out of memory", fn, ud, NULL);
            }
            if (redlock__conn_io(s->conn, POLLOUT) != REDLOCK_OK)
                return fail_slot(s, bi, REDLOCK_EIO, s->conn->errmsg, fn, ud, failures);
            continue;
        }
        stop |= report(s, bi, 0, NULL, r, fn, ud);
        freeReplyObject(r);
        if (!slot_pending(s))
            s->done = 1;
        if (stop)
            return stop;
    }
    return stop;
}

/*
 * The caller stopped with this slot's calls unanswered. Their replies are
 * discarded when they come; for a batch that asked, each call still on a
 * live connection becomes a ledger entry and is reported in flight, so
 * its owner knows it went out and hears later whether it landed.
 */
static void abandon_slot(slot *s, size_t bi, redlock__reply_fn fn, void *ud)
{
    unsigned left = (unsigned)slot_pending(s);
    uint64_t inline_tokens[2 * INLINE_CALLS];
    uint64_t *tokens = NULL;
    size_t j;
    /* Output the node has not taken: it is not reading its socket. */
    int blocked = s->conn->state == REDLOCK__CONN_READY && redlock__buf_pending(&s->conn->out);

    if (s->batch->report_in_flight && s->batch->tokens && left > 0)
        tokens = left <= 2 * INLINE_CALLS ? inline_tokens : malloc(left * sizeof(*tokens));
    for (j = 0; tokens && j < left; j++)
        tokens[j] = s->batch->tokens[s->queue[s->head + j]];
    /* Without tokens (out of memory) the calls are abandoned as usual and
     * their owner, hearing nothing, hands them to the background. */
    if (redlock__conn_abandon(s->conn, left, tokens) && tokens)
        for (j = 0; j < left; j++)
            fn(ud, bi, s->queue[s->head + j],
               blocked ? REDLOCK__IN_FLIGHT_BLOCKED : REDLOCK__IN_FLIGHT, NULL, NULL);
    if (tokens != inline_tokens)
        free(tokens);
    s->head = s->tail;
}

static int start_slot(slot *s, size_t bi, redlock__reply_fn fn, void *ud,
                      uint64_t *failures)
{
    size_t i;
    int rc;

    for (i = 0; i < s->batch->ncalls; i++) {
        s->eval[s->tail] = 0;
        s->queue[s->tail++] = i;
    }
    if ((rc = redlock__conn_open(s->conn)) != REDLOCK_OK)
        return fail_slot(s, bi, rc, s->conn->errmsg, fn, ud, failures);
    for (i = 0; i < s->batch->ncalls; i++)
        if ((rc = redlock__queue_call(s->conn, &s->batch->calls[i], 0)) != REDLOCK_OK) {
            /* Nothing of the batch went out: skipping its replies would
             * hand the next user's replies to the wrong calls. */
            redlock__conn_close(s->conn);
            return fail_slot(s, bi, rc, "cannot encode command", fn, ud, NULL);
        }
    /* Write at once on a ready connection: saves a poll() per request. */
    if ((rc = redlock__conn_io(s->conn, POLLOUT)) != REDLOCK_OK)
        return fail_slot(s, bi, rc, s->conn->errmsg, fn, ud, failures);
    return 0;
}

/* A batch the caller does not wait for at all (a call to a silent node)
 * gets no set-up allowance, nor does a strict one (an abort or release):
 * a node whose handshake stalls must not cost a second connect timeout. */
int redlock__batch_allows_setup(const redlock__batch *b, int64_t started)
{
    return b->deadline_ns > started && !b->strict;
}

/* While a connection is still being set up (connect, TLS, AUTH/SELECT)
 * it gets the connect timeout; once ready, the caller's (much shorter)
 * request deadline applies. The script preloads do not count as set-up:
 * they cost the server well under a millisecond, and a node that accepts
 * and never answers must still fail within the request deadline. */
int64_t redlock__batch_deadline(const redlock__batch *b, int conn_setting_up,
                                int64_t started, int connect_timeout_ms)
{
    int64_t d = b->deadline_ns;

    if (!redlock__batch_allows_setup(b, started))
        return d;
    if (conn_setting_up) {
        int64_t c = started + (int64_t)connect_timeout_ms * REDLOCK__NS_PER_MS;
        if (c > d)
            d = c;
    }
    return d;
}

static int64_t slot_deadline(const slot *s, int connect_timeout_ms)
{
    return redlock__batch_deadline(
        s->batch, s->conn->state != REDLOCK__CONN_READY || s->conn->handshake != 0, s->started,
        connect_timeout_ms);
}

int redlock__linger_fn(void *ud, size_t batch, size_t call, int err, const char *msg,
                       redisReply *r)
{
    redlock__lingering *lg = ud;
    int ret = lg->fn(lg->ud, batch, call, err, msg, r);

    if (ret != REDLOCK__FANOUT_LINGER)
        return ret;
    if (lg->until == INT64_MAX) {
        int64_t now = redlock__now_ns();

        lg->until = now + (now - lg->started);
    }
    return 0;
}

int redlock__fanout_conns(redlock__conn *conns, const redlock__batch *batches,
                          size_t n, int connect_timeout_ms, uint64_t *failures,
                          redlock__reply_fn caller_fn, void *caller_ud)
{
    int64_t now = redlock__now_ns();
    redlock__lingering lg = {caller_fn, caller_ud, now, INT64_MAX};
    redlock__reply_fn fn = redlock__linger_fn;
    void *ud = &lg;
    slot slots[MAX_BATCHES];
    struct pollfd pfd[MAX_BATCHES];
    size_t idx[MAX_BATCHES];
    int stop = 0;
    size_t i, active;

    if (n > MAX_BATCHES)
        return REDLOCK_EINVAL;
    for (i = 0; i < n; i++) {
        slot *s = &slots[i];

        memset(s, 0, offsetof(slot, fifo));
        s->conn = &conns[batches[i].node];
        s->batch = &batches[i];
        s->queue = s->fifo;
        s->eval = s->fell_back;
        s->started = now;
        if (2 * batches[i].ncalls > INLINE_CALLS) {
            s->queue = malloc(2 * batches[i].ncalls * sizeof(size_t));
            s->eval = malloc(2 * batches[i].ncalls);
            if (!s->queue || !s->eval) {
                free(s->queue);
                free(s->eval);
                s->queue = s->fifo;
                s->eval = s->fell_back;
                s->batch = NULL;
                while (i-- > 0)
                    free_slot(&slots[i]);
                return redlock__fail(REDLOCK_ENOMEM, "out of memory");
            }
        }
        if (batches[i].ncalls == 0) {
            s->done = 1;
            continue;
        }
        if (!stop)
            stop |= start_slot(s, i, fn, ud, failures);
        if (!stop && !s->done)
            stop |= drain_replies(s, i, fn, ud, failures);
    }
    while (!stop) {
        int64_t next = INT64_MAX;
        int r;

        now = redlock__now_ns();
        if (now >= lg.until)
            break;
        next = lg.until;
        active = 0;
        for (i = 0; i < n && !stop; i++) {
            slot *s = &slots[i];
            int64_t d;

            if (s->done || s->batch->ncalls == 0)
                continue;
            d = slot_deadline(s, connect_timeout_ms);
            if (now >= d) {
                /* Only a connect that had its whole allowance says
                 * anything about its address. */
                if (redlock__batch_allows_setup(s->batch, s->started))
                    redlock__conn_connect_given_up(s->conn);
                stop |= fail_slot(s, i, REDLOCK_ETIMEOUT, "no reply before the deadline",
                                  fn, ud, failures);
                continue;
            }
            if (d < next)
                next = d;
            pfd[active].fd = s->conn->fd;
            pfd[active].events = redlock__conn_events(s->conn);
            pfd[active].revents = 0;
            idx[active++] = i;
        }
        if (stop || active == 0)
            break;
        /* One connection to wait for (N = 1, or the last member): wait in
         * recv itself, a system call less than ppoll and then recv. */
        if (active == 1 && !redlock__wait_parks() &&
            redlock__conn_can_wait_read(slots[idx[0]].conn, next - now)) {
            slot *s = &slots[idx[0]];
            int rc = redlock__conn_wait_read(s->conn, next - now);

            if (rc == REDLOCK_OK)
                stop |= drain_replies(s, idx[0], fn, ud, failures);
            else if (!s->done)
                stop |= fail_slot(s, idx[0], rc, s->conn->errmsg, fn, ud, failures);
            continue;
        }
        r = redlock__wait_poll(pfd, active, next);
        if (r < 0 && errno != EINTR) {
            int saved = errno;

            for (i = 0; i < n && !stop; i++)
                if (!slots[i].done)
                    stop |= fail_slot(&slots[i], i, REDLOCK_EIO, strerror(saved), fn, ud,
                                      NULL);
            break;
        }
        for (i = 0; r > 0 && i < active && !stop; i++) {
            slot *s = &slots[idx[i]];
            int rc;

            if (!pfd[i].revents)
                continue;
            rc = redlock__conn_io(s->conn, pfd[i].revents);
            if (rc == REDLOCK_OK)
                stop |= drain_replies(s, idx[i], fn, ud, failures);
            if (rc != REDLOCK_OK && !s->done)
                stop |= fail_slot(s, idx[i], rc, s->conn->errmsg, fn, ud, failures);
        }
    }
    for (i = 0; i < n; i++) {
        if (!slots[i].done)
            abandon_slot(&slots[i], i, fn, ud);
        free_slot(&slots[i]);
    }
    return REDLOCK_OK;
}

int redlock__net_init(redlock__net *net, const redlock__node *nodes, size_t n_nodes,
                      int connect_timeout_ms)
{
    size_t i;

    memset(net, 0, sizeof(*net));
    net->nodes = nodes;
    net->n_nodes = n_nodes;
    net->connect_timeout_ms = connect_timeout_ms;
    net->node_failures = calloc(n_nodes, sizeof(uint64_t));
    if (!net->node_failures)
        return REDLOCK_ENOMEM;
    pthread_mutex_init(&net->mu, NULL);
    {
        pthread_condattr_t ca;

        /* Waits on it have CLOCK_MONOTONIC deadlines (checkout). */
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&net->drained, &ca);
        pthread_condattr_destroy(&ca);
    }
    /* Sentinel nodes learn their master here, the one transport call made
     * with every node at client creation, before any connection opens. */
    for (i = 0; i < n_nodes; i++)
        if (redlock__node_watch_sentinel(&nodes[i], connect_timeout_ms) != REDLOCK_OK)
            return REDLOCK_ENOMEM;
    return REDLOCK_OK;
}

void redlock__net_destroy(redlock__net *net)
{
    redlock__connset *s = net->free_sets;

    while (s) {
        redlock__connset *next = s->next;
        size_t i;

        for (i = 0; i < net->n_nodes; i++)
            redlock__conn_close(&s->conns[i]);
        free(s);
        s = next;
    }
    free(net->node_failures);
    pthread_cond_destroy(&net->drained);
    pthread_mutex_destroy(&net->mu);
    memset(net, 0, sizeof(*net));
}

/* Rounds of at most this long, between which the idle sets go back to
 * the pool: a fan-out waits for them at most that long. */
#define DRAIN_ROUND_NS (10 * REDLOCK__NS_PER_MS)

/* Each calling thread borrows a whole set for one fan-out, so connections
 * are never shared and no lock is held while waiting on the network. */
static redlock__connset *checkout(redlock__net *net)
{
    redlock__connset *s;
    size_t i;

    pthread_mutex_lock(&net->mu);
    /* A drain round holds the idle sets for a few milliseconds at most.
     * Not much longer, though: on a loop-driven client's thread the round
     * may be parked in a watchdog fiber that only this thread can resume,
     * and a new set is then the way out. The clock is read only when
     * there is something to wait for. */
    if (!net->free_sets && net->draining) {
        int64_t give_up = redlock__now_ns() + 5 * DRAIN_ROUND_NS;

        while (!net->free_sets && net->draining &&
               redlock__wait_cond_until(&net->drained, &net->mu, give_up, 0) != ETIMEDOUT)
            ;
    }
    s = net->free_sets;
    if (s)
        net->free_sets = s->next;
    pthread_mutex_unlock(&net->mu);
    if (s)
        return s;
    s = calloc(1, sizeof(*s) + net->n_nodes * sizeof(redlock__conn));
    if (!s)
        return NULL;
    for (i = 0; i < net->n_nodes; i++) {
        redlock__conn_init(&s->conns[i], &net->nodes[i]);
        s->conns[i].hook = &net->hook;
    }
    return s;
}

static void checkin(redlock__net *net, redlock__connset *s)
{
    pthread_mutex_lock(&net->mu);
    s->next = net->free_sets;
    net->free_sets = s;
    pthread_mutex_unlock(&net->mu);
}

static int net_fanout(void *ctx, const redlock__batch *batches, size_t n,
                      redlock__reply_fn fn, void *ud)
{
    redlock__net *net = ctx;
    struct redlock__mux *mux = __atomic_load_n(&net->mux, __ATOMIC_ACQUIRE);
    redlock__connset *set;
    int rc;

    if (mux && redlock__mux_usable(mux))
        return redlock__fanout_mux(mux, batches, n, net->connect_timeout_ms, fn, ud);
    if (!(set = checkout(net)))
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    rc = redlock__fanout_conns(set->conns, batches, n, net->connect_timeout_ms,
                               net->node_failures, fn, ud);
    checkin(net, set);
    return rc;
}

static int64_t net_now(void *ctx)
{
    (void)ctx;
    return redlock__now_ns();
}

static void *net_watch(void *ctx, const char *const *channels, const size_t *nodes, size_t n,
                       int64_t deadline_ns)
{
    redlock__net *net = ctx;

    return net->pubsub ? redlock__pubsub_watch(net->pubsub, channels, nodes, n, deadline_ns)
                       : NULL;
}

static int net_wait(void *ctx, void *watch, uint64_t *seen, int64_t deadline_ns,
                    int (*stop)(void *), void *stop_ud)
{
    redlock__net *net = ctx;

    return redlock__pubsub_wait(net->pubsub, watch, seen, deadline_ns, stop, stop_ud);
}

static void net_unwatch(void *ctx, void *watch)
{
    redlock__net *net = ctx;

    if (net->pubsub && watch)
        redlock__pubsub_unwatch(net->pubsub, watch);
}

void redlock__net_on_fd_closing(redlock__net *net, void (*fn)(void *ud, int fd), void *ud)
{
    net->hook.fd_closing = fn;
    net->hook.fd_ud = ud;
}

static void net_set_settle(void *ctx, redlock__settle_fn fn, void *ud)
{
    redlock__net *net = ctx;

    net->hook.fn = fn;
    net->hook.ud = ud;
}

/* Reads what idle connections received for their ledger entries. An idle
 * connection has no caller, so any reply beyond its abandoned ones puts the
 * stream out of step: it is closed (settling the rest "lost"). */
static void drain_conn(redlock__conn *c)
{
    redisReply *r;
    int got;

    while (c->ledger > 0 && (got = redlock__conn_next_reply(c, &r)) != 0) {
        if (got > 0) {
            freeReplyObject(r);
            redlock__conn_close(c);
        }
    }
}


/* One round over the idle sets: returns the ledger entries left, or
 * SIZE_MAX when another drain is under way. */
static size_t drain_round(redlock__net *net, int64_t until_ns)
{
    redlock__connset *sets, *s, *last = NULL;
    struct pollfd pfd[MAX_BATCHES];
    redlock__conn *who[MAX_BATCHES];
    size_t i, active = 0, left = 0;
    int64_t now = redlock__now_ns();
    int r;

    pthread_mutex_lock(&net->mu);
    if (net->draining) {
        pthread_mutex_unlock(&net->mu);
        return SIZE_MAX;
    }
    sets = net->free_sets;
    net->free_sets = NULL;
    net->draining = 1;
    pthread_mutex_unlock(&net->mu);
    /* Replies a fan-out read along with the ones it waited for (the same
     * read) are already here: no poll would report them. */
    for (s = sets; s; s = s->next)
        for (i = 0; i < net->n_nodes; i++)
            if (s->conns[i].ledger > 0)
                drain_conn(&s->conns[i]);
    for (s = sets; s; s = s->next)
        for (i = 0; i < net->n_nodes && active < MAX_BATCHES; i++)
            if (s->conns[i].ledger > 0) {
                pfd[active].fd = s->conns[i].fd;
                pfd[active].events = redlock__conn_events(&s->conns[i]);
                pfd[active].revents = 0;
                who[active++] = &s->conns[i];
            }
    if (active > 0) {
        r = redlock__wait_poll(pfd, active, until_ns > now ? until_ns : now);
        for (i = 0; r > 0 && i < active; i++)
            if (pfd[i].revents && redlock__conn_io(who[i], pfd[i].revents) == REDLOCK_OK)
                drain_conn(who[i]);
    }
    for (s = sets; s; s = s->next) {
        for (i = 0; i < net->n_nodes; i++)
            left += s->conns[i].ledger;
        last = s;
    }
    pthread_mutex_lock(&net->mu);
    if (last) {
        last->next = net->free_sets;
        net->free_sets = sets;
    }
    net->draining = 0;
    pthread_cond_broadcast(&net->drained);
    redlock__wait_notify(&net->drained);
    pthread_mutex_unlock(&net->mu);
    return left;
}

/* The idle sets are borrowed for short rounds: a fan-out that finds the
 * pool empty meanwhile waits for them (checkout) rather than opening a
 * set of new connections, which a frozen node would pile up. */
static size_t net_drain(void *ctx, int64_t deadline_ns)
{
    redlock__net *net = ctx;
    size_t left;
    int64_t now;

    do {
        now = redlock__now_ns();
        left = drain_round(net, deadline_ns - now > DRAIN_ROUND_NS ? now + DRAIN_ROUND_NS
                                                                   : deadline_ns);
    } while (left > 0 && left != SIZE_MAX && redlock__now_ns() < deadline_ns);
    if (left == SIZE_MAX)
        left = 0;
    /* A loop-driven client's calls left in flight wait on its shared
     * connections instead. */
    return left + redlock__mux_drain(__atomic_load_n(&net->mux, __ATOMIC_ACQUIRE), deadline_ns);
}

const redlock__transport_ops redlock__net_ops = {
    .fanout = net_fanout,
    .now_ns = net_now,
    .watch = net_watch,
    .wait = net_wait,
    .unwatch = net_unwatch,
    .set_settle = net_set_settle,
    .drain = net_drain,
};
