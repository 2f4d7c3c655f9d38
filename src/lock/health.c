/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which nodes are silent, as the lock layer sees them: a node whose last
 * request timed out is silent until any reply comes from it again.
 *
 * A release sends its call to a silent node but does not wait for the
 * answer (the background retries it until it lands or the lease could
 * have expired there), so while a node is frozen or cut off, unlock costs
 * a round trip to the others instead of a node timeout every time. Only
 * releases use it: an acquire decides on the first quorum anyway, and a
 * watchdog tick needs every answer it can get.
 */
#include <hiredis/hiredis.h>

#include "core/error.h"
#include "core/util.h"
#include "lock/context.h"
#include "lock/health.h"
#include "lock/internal.h"

typedef struct observed {
    redlock_client *c;
    const redlock__batch *batches;
    redlock__reply_fn fn;
    void *ud;
} observed;

int redlock__refuses_for_good(int err)
{
    return err == REDLOCK_EAUTH || err == REDLOCK_ETLS || err == REDLOCK_ECONFIG;
}

/* A node that refuses for good among enough healthy ones keeps the lock
 * working, so nothing fails: say so once, or nobody will notice. */
static void warn_refusal(redlock_client *c, size_t node, int code, const char *why)
{
    char text[100];

    if (node >= REDLOCK__MAX_NODES ||
        __atomic_exchange_n(&c->node_warned[node], 1, __ATOMIC_RELAXED))
        return;
    redlock__copy_msg(text, sizeof(text), why ? why : "");
    redlock__log(c, REDLOCK_LOG_WARN, "%s refuses requests for good (%s: %s); check its "
                 "configuration", c->nodes ? c->nodes[node].uri.display : "node",
                 redlock_strerror(code), text);
}

static const char *node_name(const redlock_client *c, size_t node)
{
    return c->nodes ? c->nodes[node].uri.display : "node";
}

/*
 * A node without replies (timeouts, refused connections) is logged at
 * DEBUG when it starts and when it ends, and once as a warning when it
 * lasts REDLOCK__DOWN_WARN_MS: that is when an operator should look. The
 * clock is CLOCK_MONOTONIC, never the transport's (a transport may hold
 * its own mutex while it calls back).
 */
#define REDLOCK__DOWN_WARN_MS 10000

static void note_no_reply(redlock_client *c, size_t node, int err, const char *msg)
{
    int64_t now = redlock__now_ns(), zero = 0;

    if (node >= REDLOCK__MAX_NODES)
        return;
    if (__atomic_compare_exchange_n(&c->node_down_since_ns[node], &zero, now, 0,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        redlock__log(c, REDLOCK_LOG_DEBUG, "%s gives no reply (%s: %s)", node_name(c, node),
                     redlock_strerror(err), msg ? msg : "");
        return;
    }
    if (now - zero >= REDLOCK__DOWN_WARN_MS * REDLOCK__NS_PER_MS &&
        !__atomic_exchange_n(&c->node_down_warned[node], 1, __ATOMIC_RELAXED))
        redlock__log(c, REDLOCK_LOG_WARN, "%s has given no reply for %lld s (%s: %s)",
                     node_name(c, node), (long long)((now - zero) / 1000000000),
                     redlock_strerror(err), msg ? msg : "");
}

static void note_reply(redlock_client *c, size_t node)
{
    int64_t since;

    if (node >= REDLOCK__MAX_NODES ||
        !(since = __atomic_exchange_n(&c->node_down_since_ns[node], 0, __ATOMIC_RELAXED)))
        return;
    if (__atomic_exchange_n(&c->node_down_warned[node], 0, __ATOMIC_RELAXED))
        redlock__log(c, REDLOCK_LOG_INFO, "%s answers again after %lld ms", node_name(c, node),
                     (long long)((redlock__now_ns() - since) / REDLOCK__NS_PER_MS));
    else
        redlock__log(c, REDLOCK_LOG_DEBUG, "%s answers again after %lld ms", node_name(c, node),
                     (long long)((redlock__now_ns() - since) / REDLOCK__NS_PER_MS));
}

static int observe(void *ud, size_t batch, size_t call, int err, const char *msg,
                   struct redisReply *r)
{
    observed *o = ud;
    size_t node = o->batches[batch].node;

    /* A call left in flight says nothing of its node: it was written to a
     * live connection and simply not waited for. Unless the node did not
     * even take it: then it is silent, and the next releases go to the
     * background's probes instead of piling up in its socket. */
    if (err == REDLOCK__IN_FLIGHT_BLOCKED) {
        redlock__node_went_silent(o->c, node);
        err = REDLOCK__IN_FLIGHT;
    }
    if (err == REDLOCK__IN_FLIGHT)
        return o->fn(o->ud, batch, call, err, msg, r);
    if (err == REDLOCK_ETIMEOUT) {
        redlock__node_went_silent(o->c, node);
    } else if (!err) {
        __atomic_store_n(&o->c->node_silent[node], 0, __ATOMIC_RELAXED);
        /* Whatever call heard the node, what it is owed may go now. (No
         * clock read here: a transport may hold its own mutex while it
         * calls back.) */
        redlock__retry_heard(&o->c->retry, node);
    }
    if (err && !redlock__refuses_for_good(err) && err != REDLOCK_ECANCELED)
        note_no_reply(o->c, node, err, msg);
    else if (!err)
        note_reply(o->c, node);
    if (err && redlock__refuses_for_good(err))
        warn_refusal(o->c, node, err, msg);
    else if (!err && r->type == REDIS_REPLY_ERROR &&
             redlock__refuses_for_good(redlock__server_error_code(r->str)))
        warn_refusal(o->c, node, redlock__server_error_code(r->str), r->str);
    return o->fn(o->ud, batch, call, err, msg, r);
}

void redlock__ledger_settled(void *ud, uint64_t token, int delivered, const char *error)
{
    redlock_client *c = ud;
    size_t node = redlock__retry_settle_token(&c->retry, token, delivered);

    /* A refusal nobody waited for must still be heard of, once. */
    if (error && node < REDLOCK__MAX_NODES &&
        redlock__refuses_for_good(redlock__server_error_code(error)))
        warn_refusal(c, node, redlock__server_error_code(error), error);
}

int redlock__fanout(redlock_client *c, const redlock__batch *batches, size_t n,
                    redlock__reply_fn fn, void *ud)
{
    observed o = {c, batches, fn, ud};

    return c->tp.ops->fanout(c->tp.ctx, batches, n, observe, &o);
}

void redlock__node_went_silent(redlock_client *c, size_t node)
{
    if (node < REDLOCK__MAX_NODES)
        __atomic_store_n(&c->node_silent[node], 1, __ATOMIC_RELAXED);
}

int redlock__node_silent(const redlock_client *c, size_t node)
{
    return node < REDLOCK__MAX_NODES &&
           __atomic_load_n(&c->node_silent[node], __ATOMIC_RELAXED);
}
