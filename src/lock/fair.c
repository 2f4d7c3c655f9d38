/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fair lock tickets: a waiter's place in every member's queue. The order
 * must be the same on every node, or three waiters could each be first on
 * a different third of the nodes and none reach a quorum. A ticket is the
 * largest of a quorum's candidates (fair_ticket.lua), so all nodes order
 * waiters by the same number, and a waiter that asks after another queued
 * meets one of its nodes and gets a larger one.
 */
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "lock/context.h"
#include "lock/fair.h"
#include "lock/health.h"
#include "lock/plan.h"

typedef struct ticket_ctx {
    redlock_lock *l;
    const redlock__plan *plan;
    int answered;
    unsigned long long best;
} ticket_ctx;

static int fill_ticket(void *ud, size_t m, const char **argv, char **owned,
                       redlock__script_call *out)
{
    ticket_ctx *t = ud;

    (void)owned;
    *out = redlock__script_fair_ticket(argv, redlock__key(&t->l->members[m], REDLOCK__KEY_AUX3));
    return 0;
}

static int on_ticket(void *ud, size_t batch, size_t call, int err, const char *msg,
                     redisReply *r)
{
    ticket_ctx *t = ud;
    unsigned long long v;
    char *end;

    (void)batch;
    (void)call;
    (void)msg;
    if (err || r->type != REDIS_REPLY_STRING)
        return 0;
    v = strtoull(r->str, &end, 10);
    if (end == r->str || *end)
        return 0;
    t->answered++;
    if (v > t->best)
        t->best = v;
    /* A quorum's answers are enough (any later waiter's quorum meets it),
     * so a frozen minority does not hold the waiter up. */
    return t->answered >= t->l->quorum;
}

int redlock__fair_ticket(redlock_lock *l, int64_t lease_ms, char out[24])
{
    redlock_client *c = l->client;
    ticket_ctx t = {l, NULL, 0, 0};
    redlock__plan p;
    int rc;

    rc = redlock__plan_build(&p, l, NULL, fill_ticket, &t,
                             c->tp.ops->now_ns(c->tp.ctx) + redlock__node_timeout_ns(c, lease_ms));
    if (rc)
        return rc;
    t.plan = &p;
    redlock__fanout(c, p.batches, p.nb, on_ticket, &t);
    redlock__plan_free(&p);
    if (t.answered < l->quorum)
        return redlock__fail(REDLOCK_ENO_QUORUM,
                             "lock '%s': a waiter's ticket needs %d answers, %d came",
                             l->members[0].name, l->quorum, t.answered);
    redlock__fmt_u64(out, 24, t.best);
    return REDLOCK_OK;
}
