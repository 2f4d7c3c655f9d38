/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fan-out over the mux's shared connections (mux.h): each batch queues
 * its calls on its node's connection and the fiber parks until the reader
 * has handed it replies, the connection failed, or a deadline passed.
 * Outcomes, deadlines, lingering and abandoning follow net.c's fan-out.
 */
#define _GNU_SOURCE
#include "transport/mux_impl.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/wait.h"
#include "transport/fanout.h"

/* Beyond this many replies owed on one connection (a node that stopped
 * answering while operations kept timing out on it) it is closed: the
 * same bound as a pool connection's discarded replies would be, smaller. */
#define MAX_OWED (1u << 16)

static size_t pending(const redlock__mux_slot *s)
{
    return s->tail - s->head;
}

/* Takes this slot's owed replies off its node: dropped when they come,
 * or (tokens, in send order from position got) kept as ledger entries. */
static void detach(redlock__mux_slot *s, const uint64_t *tokens)
{
    redlock__mux_node *mn = s->mn;
    size_t i, k = 0;

    for (i = mn->head; i < mn->tail; i++)
        if (mn->q[i].owner == s) {
            mn->q[i].owner = NULL;
            mn->q[i].token = tokens ? tokens[k++] : 0;
        }
}

static void drop_inbox(redlock__mux_slot *s)
{
    size_t k;

    for (k = s->head; k < s->got; k++)
        freeReplyObject(s->inbox[k]);
    s->head = s->got;
}

static void free_slot(redlock__mux_slot *s)
{
    if (s->queue != s->inline_queue)
        free(s->queue);
    if (s->eval != s->inline_eval)
        free(s->eval);
    if (s->inbox != s->inline_inbox)
        free(s->inbox);
}

/* Fails every outstanding call of a slot with err. */
static int fail_slot(redlock__mux *m, redlock__mux_slot *s, size_t bi, int err, const char *msg,
                     redlock__reply_fn fn, void *ud)
{
    size_t k;
    int stop = 0;

    __atomic_add_fetch(&m->failures[s->batch->node], 1, __ATOMIC_RELAXED);
    for (k = s->head; k < s->got; k++)
        freeReplyObject(s->inbox[k]);
    detach(s, NULL);
    /* Once the caller says stop, the rest are abandoned without a call,
     * as the transport promises. */
    while (pending(s) && !stop)
        stop |= fn(ud, bi, s->queue[s->head++], err, msg, NULL);
    s->head = s->got = s->tail;
    s->done = 1;
    return stop;
}

/* Queues call (as EVAL with fallback) on the slot's connection. */
static int send_call(redlock__mux_slot *s, size_t call, int fallback)
{
    if (redlock__queue_call(&s->mn->conn, &s->batch->calls[call], fallback) != REDLOCK_OK)
        return REDLOCK_ENOMEM;
    if (redlock__mux_push(s->mn, s) != REDLOCK_OK)
        return REDLOCK_ENOMEM;
    s->eval[s->tail] = (unsigned char)fallback;
    s->queue[s->tail++] = call;
    return REDLOCK_OK;
}

/* The node's connection, ready to take calls. A Sentinel node's
 * connection to a former master goes first (what others wait for on it is
 * lost); only a closed connection is opened, so redlock__conn_open never
 * closes one behind the replies the mux expects on it. */
static int open_node(redlock__mux *m, redlock__mux_node *mn)
{
    redlock__conn *c = &mn->conn;

    if (c->state != REDLOCK__CONN_CLOSED && redlock__conn_outdated(c))
        redlock__mux_node_failed(m, mn, REDLOCK_EIO, "the node's master changed");
    if (c->state != REDLOCK__CONN_CLOSED)
        return REDLOCK_OK;
    return redlock__conn_open(c);
}

/* Whether an operation other than s waits for a reply on mn. */
static int others_wait(const redlock__mux_node *mn, const redlock__mux_slot *s)
{
    size_t i;

    for (i = mn->head; i < mn->tail; i++)
        if (mn->q[i].owner && mn->q[i].owner != s)
            return 1;
    return 0;
}

/*
 * Slot s let go of calls without their answers (a deadline, or the caller
 * stopped); `unanswered`: it had calls on the connection as it is now. As
 * with a pool connection (skip.c): one still being set up, or holding
 * output the node has not taken that nobody tracks, is closed, so that
 * what was never sent never goes out later; a late acquire sent after its
 * abort was decided is what that prevents. Unlike a pool connection this
 * one is shared: while another operation waits on a connection being set
 * up, it stays (that operation has its own allowance for the set-up), and
 * s's calls go out after the set-up, before anything s sends next (an
 * abort among it), and with the cancel marks a late acquire finds. Returns
 * whether output the node has not taken is still queued (it stopped
 * reading).
 */
static int let_go(redlock__mux *m, redlock__mux_slot *s, int tracked, int unanswered)
{
    redlock__mux_node *mn = s->mn;
    redlock__conn *c = &mn->conn;

    if (c->state == REDLOCK__CONN_CLOSED || !unanswered)
        return 0;
    /* Output queued since the reader last ran is normal: try it first. */
    if (c->state == REDLOCK__CONN_READY && redlock__buf_pending(&c->out) &&
        redlock__conn_io(c, 0) != REDLOCK_OK) {
        redlock__mux_node_failed(m, mn, REDLOCK_EIO, c->errmsg);
        return 0;
    }
    if ((c->state != REDLOCK__CONN_READY || c->handshake) && others_wait(mn, s))
        return 0;
    if (c->state != REDLOCK__CONN_READY || c->handshake ||
        (!tracked && (redlock__buf_pending(&c->out) || c->tls_want_write))) {
        redlock__mux_node_failed(m, mn, REDLOCK_ETIMEOUT,
                                 "node not set up or not reading before the deadline");
        return 0;
    }
    return redlock__buf_pending(&c->out) != 0;
}

/* Calls from `from` on that never went out still get their outcome from
 * fail_slot, as net.c reports every call of a batch. */
static void count_unsent(redlock__mux_slot *s, size_t from)
{
    size_t i;

    for (i = from; i < s->batch->ncalls; i++) {
        s->eval[s->tail] = 0;
        s->queue[s->tail++] = i;
    }
}

static int start_slot(redlock__mux *m, redlock__mux_slot *s, size_t bi, redlock__reply_fn fn,
                      void *ud)
{
    redlock__conn *c = &s->mn->conn;
    size_t i;
    int rc;

    if ((rc = open_node(m, s->mn)) != REDLOCK_OK) {
        count_unsent(s, 0);
        return fail_slot(m, s, bi, rc, c->errmsg, fn, ud);
    }
    for (i = 0; i < s->batch->ncalls; i++)
        if (send_call(s, i, 0) != REDLOCK_OK) {
            /* Output queued without a reply owner would put the stream
             * out of step: the connection goes, with this slot's calls. */
            redlock__mux_node_failed(m, s->mn, REDLOCK_ENOMEM, "out of memory");
            count_unsent(s, i);
            return fail_slot(m, s, bi, REDLOCK_ENOMEM, "out of memory", fn, ud);
        }
    return 0;
}

/* Hands the caller every reply the reader gave this slot. */
static int drain(redlock__mux *m, redlock__mux_slot *s, size_t bi, redlock__reply_fn fn,
                 void *ud)
{
    int stop = 0;

    while (!s->done && s->head < s->got) {
        redisReply *r = s->inbox[s->head];
        size_t call = s->queue[s->head];

        if (redlock__is_noscript(r) && s->batch->calls[call].script >= 0 && !s->eval[s->head]) {
            int rc;

            /* The node lost its script cache (restart, SCRIPT FLUSH):
             * resend the body once; the EVAL also reloads the cache. Not
             * on a connection that failed meanwhile: the call fails. */
            if (s->err)
                break;
            if ((rc = open_node(m, s->mn)) != REDLOCK_OK)
                return fail_slot(m, s, bi, rc, s->mn->conn.errmsg, fn, ud);
            freeReplyObject(r);
            s->head++;
            if (send_call(s, call, 1) != REDLOCK_OK) {
                redlock__mux_node_failed(m, s->mn, REDLOCK_ENOMEM, "out of memory");
                return fail_slot(m, s, bi, REDLOCK_ENOMEM, "out of memory", fn, ud);
            }
            redlock__wait_notify(m);
            continue;
        }
        s->head++;
        stop |= fn(ud, bi, call, 0, NULL, r);
        freeReplyObject(r);
        if (!pending(s))
            s->done = 1;
        if (stop)
            return stop;
    }
    if (!s->done && s->err)
        return fail_slot(m, s, bi, s->err, s->errmsg, fn, ud);
    return 0;
}

/*
 * The caller stopped with this slot's calls unanswered. For a batch that
 * asked, each becomes a ledger entry and is reported in flight: those the
 * reader already received settle at once, the rest when their replies
 * come (or the connection fails first).
 */
static void abandon(redlock__mux *m, redlock__mux_slot *s, size_t bi, redlock__reply_fn fn,
                    void *ud)
{
    size_t left = pending(s), k;
    uint64_t inline_tokens[2 * REDLOCK__MUX_INLINE];
    uint64_t *tokens = NULL;
    const uint64_t *later = NULL;
    int tracked = s->batch->report_in_flight && s->batch->tokens && left > 0;
    /* Output the node has not taken: it is not reading its socket. */
    int blocked = let_go(m, s, tracked, left > 0 && !s->err);

    if (tracked && !s->err)
        tokens = left <= 2 * REDLOCK__MUX_INLINE ? inline_tokens
                                                 : malloc(left * sizeof(*tokens));
    for (k = 0; tokens && k < left; k++)
        tokens[k] = s->batch->tokens[s->queue[s->head + k]];
    for (k = 0; tokens && k < left; k++)
        fn(ud, bi, s->queue[s->head + k],
           blocked ? REDLOCK__IN_FLIGHT_BLOCKED : REDLOCK__IN_FLIGHT, NULL, NULL);
    if (tokens)
        later = tokens + (s->got - s->head);
    for (k = s->head; tokens && k < s->got; k++) {
        redisReply *r = s->inbox[k];

        if (m->hook && m->hook->fn)
            m->hook->fn(m->hook->ud, tokens[k - s->head], !redlock__is_noscript(r),
                        r->type == REDIS_REPLY_ERROR ? r->str : NULL);
    }
    drop_inbox(s);
    detach(s, later);
    if (tokens != inline_tokens)
        free(tokens);
    s->head = s->got = s->tail;
    if (s->mn->tail - s->mn->head > MAX_OWED)
        redlock__mux_node_failed(m, s->mn, REDLOCK_ETIMEOUT, "node too far behind");
}

static int init_slot(redlock__mux *m, redlock__mux_slot *s, const redlock__batch *b,
                     const void *key, int64_t now)
{
    size_t cap = 2 * b->ncalls;

    memset(s, 0, offsetof(redlock__mux_slot, inline_queue));
    s->mn = &m->nodes[b->node];
    s->batch = b;
    s->key = key;
    s->started = now;
    s->queue = s->inline_queue;
    s->eval = s->inline_eval;
    s->inbox = s->inline_inbox;
    if (cap > 2 * REDLOCK__MUX_INLINE) {
        s->queue = malloc(cap * sizeof(*s->queue));
        s->eval = malloc(cap);
        s->inbox = malloc(cap * sizeof(*s->inbox));
        if (!s->queue || !s->eval || !s->inbox) {
            free_slot(s);
            return -1;
        }
    }
    return 0;
}

int redlock__fanout_mux(redlock__mux *m, const redlock__batch *batches, size_t n,
                        int connect_timeout_ms, redlock__reply_fn caller_fn, void *caller_ud)
{
    int64_t now = redlock__now_ns();
    redlock__lingering lg = {caller_fn, caller_ud, now, INT64_MAX};
    redlock__reply_fn fn = redlock__linger_fn;
    void *ud = &lg;
    redlock__mux_slot slots[REDLOCK__MAX_BATCHES];
    int stop = 0;
    size_t i;

    if (n > REDLOCK__MAX_BATCHES)
        return REDLOCK_EINVAL;
    for (i = 0; i < n; i++) {
        if (batches[i].node >= m->n_nodes || init_slot(m, &slots[i], &batches[i], slots, now)) {
            while (i-- > 0)
                free_slot(&slots[i]);
            return redlock__fail(REDLOCK_ENOMEM, "out of memory");
        }
    }
    for (i = 0; i < n; i++) {
        if (batches[i].ncalls == 0)
            slots[i].done = 1;
        else if (!stop)
            stop |= start_slot(m, &slots[i], i, fn, ud);
    }
    /* The reader writes for every operation that queued meanwhile. */
    redlock__wait_notify(m);
    while (!stop) {
        int64_t next;
        size_t active = 0;

        for (i = 0; i < n && !stop; i++)
            if (!slots[i].done)
                stop |= drain(m, &slots[i], i, fn, ud);
        now = redlock__now_ns();
        if (stop || now >= lg.until)
            break;
        next = lg.until;
        for (i = 0; i < n && !stop; i++) {
            redlock__mux_slot *s = &slots[i];
            const redlock__conn *c = &s->mn->conn;
            int64_t d;

            if (s->done)
                continue;
            d = redlock__batch_deadline(s->batch,
                                        c->state != REDLOCK__CONN_READY || c->handshake != 0,
                                        s->started, connect_timeout_ms);
            if (now >= d) {
                /* The reply may be in the socket, not yet read: the reader
                 * runs after every fiber woken with it. */
                redlock__mux_pump(m, s->mn);
                stop |= drain(m, s, i, fn, ud);
                if (!s->done && !stop) {
                    int unanswered = pending(s) > 0 && !s->err;

                    if (redlock__batch_allows_setup(s->batch, s->started))
                        redlock__conn_connect_given_up(&s->mn->conn);
                    stop |= fail_slot(m, s, i, REDLOCK_ETIMEOUT, "no reply before the deadline",
                                      fn, ud);
                    let_go(m, s, 0, unanswered);
                }
                continue;
            }
            if (d < next)
                next = d;
            active++;
        }
        if (stop || active == 0)
            break;
        redlock__wait_poll_key(NULL, 0, next, slots);
    }
    for (i = 0; i < n; i++) {
        if (!slots[i].done)
            abandon(m, &slots[i], i, fn, ud);
        free_slot(&slots[i]);
    }
    /* A closing reader waits for the last operation to let go. */
    if (__atomic_load_n(&m->closing, __ATOMIC_ACQUIRE))
        redlock__wait_notify(m);
    return REDLOCK_OK;
}
