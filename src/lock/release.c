/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fan-outs whose answers are "done", "another hold remains" or "not
 * held": releases, the abort of a failed attempt, and fencing phase 2.
 * None of them waits on a silent node: what does not answer in time is
 * retried in the background.
 */
#include "lock/release.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "lock/context.h"
#include "lock/decide.h"
#include "lock/health.h"
#include "lock/hold.h"
#include "lock/plan.h"
#include "lock/retry.h"
#include "resp/script.h"

void redlock__note_failure(redlock_member_report *r, int err, const char *msg)
{
    r->outcome = err == REDLOCK_ETIMEOUT ? REDLOCK_MEMBER_TIMEOUT : REDLOCK_MEMBER_ERROR;
    r->err = err;
    redlock__copy_msg(r->message, sizeof(r->message), msg);
}

typedef struct simple_ctx {
    redlock_lock *l;
    const char *field;
    const char *request_id;
    const char *token;
    const char *ticket;         /* abort of a fair waiter that goes on waiting */
    char lease[24];
    const char *drop_all;
    redlock__gens_text *gens;   /* release: per member, NULL when unknown */
    const redlock__plan *plan;
    int ok, other, not_held, failed;
    unsigned char *answered;    /* per member: a simple_answer */
    redlock_member_report *rep;
    int stop_at;                /* > 0: end once this many confirm (or cannot) */
    int pending;                /* calls not answered yet, with stop_at */
    int release_at;             /* > 0: end once this many released */
    int parked;                 /* calls left in flight (release_at) */
    int64_t give_up_ns;         /* for parked calls */
    uint64_t *tokens;           /* release at quorum: per call (settle_at_quorum) */
    /* Where a release of a lock with a few members keeps the three arrays
     * above, instead of allocating them on every release. */
    unsigned char answered_own[8];
    redlock__gens_text gens_own[5];
    uint64_t tokens_own[8];
    /* The first members' latch keys (redlock__latch_key_in); last, so a
     * release need not clear them: each is written before it is used. */
    char latch_room[REDLOCK__LATCH_ROOMS][REDLOCK__LATCH_ROOM_BYTES];
} simple_ctx;

/* request id's latch key on member m, in s when it fits. */
static const char *latch_key(simple_ctx *s, size_t m, char **owned)
{
    return redlock__latch_key_in(&s->l->members[m], s->request_id,
                                 m < REDLOCK__LATCH_ROOMS ? s->latch_room[m] : NULL,
                                 sizeof(s->latch_room[0]), owned);
}

/* How a member answered a release, an abort or a fence store. */
typedef enum simple_answer {
    SIMPLE_NONE = 0,            /* not heard from */
    SIMPLE_DONE,                /* our hold changed */
    SIMPLE_FAILED,              /* no definitive answer: retried */
    SIMPLE_OTHER,               /* another hold (or count) remains */
    SIMPLE_PARKED               /* sent, answer not awaited: parked */
} simple_answer;

/* Abort and release share their keys and first arguments; a release adds
 * what to drop and the generation of the hold it drops. */
static redlock__script_call build_release(const simple_ctx *s, size_t m, const char **argv,
                                          const char *mark_key, int abort)
{
    const redlock__lock_member *mem = &s->l->members[m];
    int kind = s->l->kind;
    redlock__release_args r = {.name = mem->name,
                               .channel = redlock__channel(mem, kind),
                               .kind = kind,
                               .aux_key = kind == REDLOCK__KIND_SEMAPHORE ||
                                                  kind == REDLOCK__KIND_FAIR
                                              ? redlock__key(mem, REDLOCK__KEY_AUX)
                                          : kind != REDLOCK__KIND_MUTEX
                                              ? redlock__key(mem, REDLOCK__KEY_CHANNEL)
                                              : NULL,
                               .aux2_key = kind == REDLOCK__KIND_FAIR
                                               ? redlock__key(mem, REDLOCK__KEY_AUX2) : NULL,
                               .aux3_key = kind == REDLOCK__KIND_FAIR
                                               ? redlock__key(mem, REDLOCK__KEY_AUX3) : NULL,
                               .aux4_key = kind == REDLOCK__KIND_FAIR
                                               ? redlock__key(mem, REDLOCK__KEY_AUX4) : NULL,
                               .permits = s->l->permits,
                               .ticket = s->ticket,
                               .mark_key = mark_key,
                               .message = REDLOCK__RELEASE_MSG,
                               .lease_ms = s->lease,
                               .field = s->field,
                               .drop_all = s->drop_all,
                               .gens = s->gens ? s->gens[m] : ""};

    return abort ? redlock__script_abort(argv, &r) : redlock__script_release(argv, &r);
}

static int fill_abort(void *ud, size_t m, const char **argv, char **owned,
                      redlock__script_call *out)
{
    simple_ctx *s = ud;
    const char *latch = latch_key(s, m, owned);

    *out = build_release(s, m, argv, latch, 1);
    return latch ? 0 : -1;
}

static int fill_release(void *ud, size_t m, const char **argv, char **owned,
                        redlock__script_call *out)
{
    simple_ctx *s = ud;
    const char *latch = latch_key(s, m, owned);

    *out = build_release(s, m, argv, latch, 0);
    return latch ? 0 : -1;
}

static int fill_fence(void *ud, size_t m, const char **argv, char **owned,
                      redlock__script_call *out)
{
    simple_ctx *s = ud;

    (void)owned;
    *out = redlock__script_fence_store(
        argv, &(redlock__fence_store_args){
                  .name = s->l->members[m].name,
                  .token_key = redlock__key(&s->l->members[m], REDLOCK__KEY_TOKEN),
                  .field = s->field,
                  .token = s->token});
    return 0;
}

/* Release, abort and fence-store replies. */
static int on_simple_reply(void *ud, size_t batch, size_t call, int err,
                           const char *msg, redisReply *r)
{
    simple_ctx *s = ud;
    size_t m = redlock__plan_member(s->plan, batch, call);
    redlock_member_report *rep = s->rep ? &s->rep[m] : NULL;
    redlock__script_reply sr;

    if (err == REDLOCK__IN_FLIGHT) {
        /* Written to a live connection after the quorum released: not
         * sent again unless the transport says it was lost. (Neither a
         * reply nor a failure: the member's report stays "not heard".) */
        const redlock__call *k = &s->plan->calls[s->plan->batch_start[batch] + call];
        redlock_client *c = s->l->client;

        redlock__retry_park(&c->retry, c->tp.ops->now_ns(c->tp.ctx), s->l->members[m].node,
                            k->script, k->nkeys, k->argc, k->argv, s->give_up_ns,
                            s->plan->batches[batch].tokens[call]);
        s->answered[m] = SIMPLE_PARKED;
        s->parked++;
        return 0;
    }
    if (err) {
        sr.kind = REDLOCK__REPLY_ERROR;
        sr.err = err;
        sr.message = msg;
    } else {
        redlock__parse_release(r, &sr);
    }
    switch (sr.kind) {
    case REDLOCK__REPLY_DONE:
        s->answered[m] = SIMPLE_DONE;
        s->ok++;
        break;
    case REDLOCK__REPLY_OTHER:
        s->answered[m] = SIMPLE_OTHER;
        s->other++;
        break;
    case REDLOCK__REPLY_NOT_HELD:
        s->answered[m] = SIMPLE_DONE;
        s->not_held++;
        break;
    default:
        s->answered[m] = SIMPLE_FAILED;
        s->failed++;
        break;
    }
    if (rep)
        switch (s->answered[m]) {
        case SIMPLE_FAILED:
            redlock__note_failure(rep, sr.err, sr.message);
            break;
        default:
            rep->outcome = sr.kind == REDLOCK__REPLY_NOT_HELD ? REDLOCK_MEMBER_NOT_HELD
                                                              : REDLOCK_MEMBER_GRANTED;
        }
    s->pending--;
    if (s->release_at > 0)
        return s->ok >= s->release_at;
    return s->stop_at > 0 && redlock__fanout_settled(s->ok, s->pending, s->stop_at);
}

/* Hands members that did not answer to the background, so the caller
 * never waits on a dead node. */
static size_t defer_unanswered(redlock_lock *l, const redlock__plan *p,
                               const unsigned char *answered, int64_t not_before_ns,
                               int64_t give_up_ns)
{
    size_t k, deferred = 0;

    for (k = 0; k < p->n; k++) {
        size_t m = p->member[k];

        if (answered[m] == SIMPLE_DONE || answered[m] == SIMPLE_OTHER ||
            answered[m] == SIMPLE_PARKED)
            continue;
        redlock__retry_queue(&l->client->retry, l->client->tp.ops->now_ns(l->client->tp.ctx),
                             l->members[m].node, p->calls[k].script, p->calls[k].nkeys,
                             p->calls[k].argc, p->calls[k].argv, not_before_ns, give_up_ns);
        deferred++;
    }
    return deferred;
}

/*
 * An abort to a silent node (see health.c) is sent but not waited for:
 * waiting would add a node timeout to every failed attempt while a node is
 * down. It goes out on the same connection as the acquire it undoes, so
 * the node runs the two in order even if this process exits first; if no
 * answer comes, the background retries it like any unanswered release. Members
 * merely not heard from when an early decision was taken are healthy as far
 * as anyone knows, and are waited for as usual, so a failed attempt leaves
 * nothing behind on them.
 */
static void skip_waiting_for_silent(redlock_client *c, redlock__plan *p, int64_t now)
{
    size_t b;

    for (b = 0; b < p->nb; b++)
        if (redlock__node_silent(c, p->batches[b].node))
            p->batches[b].deadline_ns = now;
}

/*
 * A release for a silent node is not sent by the caller at all, only
 * queued for the background, which sends one probe at a time until the
 * node answers and then everything once: sending it here too would make
 * the woken node run every release twice. It may now reach the node
 * before an acquire of the same hold still waiting in another socket
 * there; release.lua leaves a tombstone for that acquire. Moves the
 * silent nodes' batches behind the others and returns how many batches
 * remain to send.
 */
static size_t leave_silent_to_background(redlock_client *c, redlock__plan *p,
                                         redlock_member_report *rep)
{
    size_t b, k, keep = p->nb;

    for (b = 0; b < keep;) {
        if (!redlock__node_silent(c, p->batches[b].node)) {
            b++;
            continue;
        }
        keep--;
        redlock__batch tb = p->batches[b];
        size_t ts = p->batch_start[b];

        p->batches[b] = p->batches[keep];
        p->batch_start[b] = p->batch_start[keep];
        p->batches[keep] = tb;
        p->batch_start[keep] = ts;
    }
    for (b = keep; rep && b < p->nb; b++)
        for (k = 0; k < p->batches[b].ncalls; k++)
            redlock__note_failure(&rep[redlock__plan_member(p, b, k)], REDLOCK_ETIMEOUT,
                         "node silent since a request timed out; released in the background");
    return keep;
}

/* Aborts and releases never wait for a connection's set-up beyond the
 * node timeout: what does not answer in time is retried in the
 * background. */
static void make_strict(redlock__plan *p)
{
    size_t b;

    for (b = 0; b < p->nb; b++)
        p->batches[b].strict = 1;
}

/* Sends s's calls (made by fill) to the included members without waiting
 * on silent nodes, and hands what did not answer to the background until
 * give_up_ms from now: the shape of an abort and of a waiter leaving.
 * s->answered must hold l->n bytes. Returns the calls deferred, or
 * (size_t)-1 when nothing could be planned. */
static size_t send_or_defer(redlock_lock *l, simple_ctx *s, redlock__plan_fill fill,
                            const unsigned char *include, int64_t give_up_ms)
{
    redlock_client *c = l->client;
    int64_t now = c->tp.ops->now_ns(c->tp.ctx);
    redlock__plan p;
    size_t deferred;

    redlock__fmt_i64(s->lease, sizeof(s->lease), give_up_ms);
    if (redlock__plan_build(&p, l, include, fill, s,
                            now + redlock__node_timeout_ns(c, give_up_ms)) != REDLOCK_OK)
        return (size_t)-1;
    skip_waiting_for_silent(c, &p, now);
    make_strict(&p);
    s->plan = &p;
    redlock__fanout(c, p.batches, p.nb, on_simple_reply, s);
    deferred =
        defer_unanswered(l, &p, s->answered, 0, now + give_up_ms * REDLOCK__NS_PER_MS);
    redlock__plan_free(&p);
    return deferred;
}

void redlock__abort_members(redlock_lock *l, const char *field, const char *request_id,
                            int64_t lease_ms, const char *ticket, const unsigned char *include)
{
    simple_ctx s;
    size_t deferred;

    memset(&s, 0, sizeof(s));
    if (!(s.answered = calloc(l->n, 1)))
        return;
    s.l = l;
    s.field = field;
    s.request_id = request_id;
    s.ticket = ticket;
    s.drop_all = "0";
    deferred = send_or_defer(l, &s, fill_abort, include, lease_ms);
    if (deferred != (size_t)-1)
        redlock__log(l->client, REDLOCK_LOG_DEBUG,
                     "lock '%.200s' abort %.12s: %d undone, %d not held, %zu left to the "
                     "background", l->members[0].name, request_id, s.ok, s.not_held, deferred);
    free(s.answered);
}

static int fill_leave(void *ud, size_t m, const char **argv, char **owned,
                      redlock__script_call *out)
{
    simple_ctx *s = ud;
    const redlock__lock_member *mem = &s->l->members[m];

    (void)owned;
    *out = redlock__script_fair_leave(
        argv, &(redlock__fair_leave_args){
                  .name = mem->name,
                  .channel = redlock__key(mem, REDLOCK__KEY_KIND_CHANNEL),
                  .queue_key = redlock__key(mem, REDLOCK__KEY_AUX),
                  .timeouts_key = redlock__key(mem, REDLOCK__KEY_AUX2),
                  .tickets_key = redlock__key(mem, REDLOCK__KEY_AUX3),
                  .lapses_key = redlock__key(mem, REDLOCK__KEY_AUX4),
                  .message = REDLOCK__RELEASE_MSG,
                  .field = s->field,
                  .ticket = s->ticket});
    return 0;
}

void redlock__leave_members(redlock_lock *l, const char *field, const char *ticket,
                            const unsigned char *include)
{
    simple_ctx s;
    size_t deferred;

    memset(&s, 0, sizeof(s));
    if (!(s.answered = calloc(l->n, 1)))
        return;
    s.l = l;
    s.field = field;
    s.ticket = ticket;
    /* A place not taken back lapses by itself within the wait lease. */
    deferred = send_or_defer(l, &s, fill_leave, include, atoll(l->wait_lease));
    if (deferred != (size_t)-1)
        redlock__log(l->client, REDLOCK_LOG_DEBUG,
                     "lock '%.200s': waiter left the queue on %d members, %zu left to the "
                     "background", l->members[0].name, s.ok, deferred);
    free(s.answered);
}

int redlock__fence_store(redlock_lock *l, const char *field, uint64_t token,
                         const unsigned char *include, int64_t lease_ms, int64_t valid_until_ns)
{
    redlock_client *c = l->client;
    simple_ctx s;
    redlock__plan p;
    char tok[24];
    unsigned char *answered = calloc(l->n, 1);
    int64_t deadline_ns = c->tp.ops->now_ns(c->tp.ctx) + redlock__node_timeout_ns(c, lease_ms);
    int confirmed = 0;

    if (!answered)
        return 0;
    memset(&s, 0, sizeof(s));
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    s.l = l;
    s.field = field;
    s.token = tok;
    s.answered = answered;
    s.stop_at = l->quorum;
    if (deadline_ns > valid_until_ns)
        deadline_ns = valid_until_ns;
    if (redlock__plan_build(&p, l, include, fill_fence, &s, deadline_ns) != REDLOCK_OK)
        goto out;
    s.plan = &p;
    s.pending = (int)p.n;
    redlock__fanout(c, p.batches, p.nb, on_simple_reply, &s);
    confirmed = s.ok;
    redlock__plan_free(&p);
out:
    free(answered);
    return confirmed;
}


/*
 * A release that settles at quorum stops once that many members released;
 * the others' calls are already written. Each batch reports what it left
 * in flight, under a token per call, so those are parked in the background
 * queue instead of being sent twice (retry.h).
 */
static void settle_at_quorum(redlock_lock *l, simple_ctx *s, redlock__plan *p)
{
    size_t k, b;

    s->tokens = redlock__scratch(s->tokens_own, sizeof(s->tokens_own),
                                 (p->n ? p->n : 1) * sizeof(*s->tokens));
    if (!s->tokens)
        return; /* waits for every member, as before */
    for (k = 0; k < p->n; k++)
        s->tokens[k] = redlock__retry_token(&l->client->retry);
    for (b = 0; b < p->nb; b++) {
        p->batches[b].report_in_flight = 1;
        p->batches[b].tokens = &s->tokens[p->batch_start[b]];
    }
    s->release_at = l->quorum;
}

/* Frees what plan_release() and settle_at_quorum() took for s. */
static void release_ctx_free(simple_ctx *s)
{
    redlock__scratch_free(s->answered, s->answered_own);
    redlock__scratch_free(s->gens, s->gens_own);
    redlock__scratch_free(s->tokens, s->tokens_own);
}

/* Plans a release of field on every member into *s and *p (request_id:
 * 33 bytes of the caller's). On success the caller frees p, and s with
 * release_ctx_free(). */
static int plan_release(simple_ctx *s, redlock__plan *p, redlock_lock *l, const char *field,
                        const redlock__gens *gens, int64_t lease_ms, int drop_all,
                        char *request_id, int64_t now)
{
    redlock_client *c = l->client;
    size_t m;
    int rc;

    memset(s, 0, offsetof(simple_ctx, latch_room));
    redlock__request_id(c, request_id);
    s->l = l;
    s->field = field;
    s->request_id = request_id;
    s->drop_all = drop_all ? "1" : "0";
    s->answered = redlock__scratch(s->answered_own, sizeof(s->answered_own), l->n);
    if (gens)
        s->gens = redlock__scratch(s->gens_own, sizeof(s->gens_own), l->n * sizeof(*s->gens));
    if (!s->answered || (gens && !s->gens)) {
        release_ctx_free(s);
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    }
    for (m = 0; gens && m < l->n; m++)
        redlock__gens_format(&gens[m], s->gens[m]);
    redlock__fmt_i64(s->lease, sizeof(s->lease), lease_ms);
    rc = redlock__plan_build(p, l, NULL, fill_release, s,
                             now + redlock__node_timeout_ns(c, lease_ms));
    if (rc) {
        release_ctx_free(s);
        return rc;
    }
    s->plan = p;
    return REDLOCK_OK;
}

int redlock__release_members(redlock_lock *l, const char *field, const redlock__gens *gens,
                             int64_t lease_ms, int drop_all, int at_quorum, int64_t give_up_ns,
                             int *released, int *decremented, int *not_held)
{
    redlock_client *c = l->client;
    simple_ctx s;
    redlock__plan p;
    char request_id[33];
    int64_t now = c->tp.ops->now_ns(c->tp.ctx);
    size_t deferred;
    int rc;

    rc = plan_release(&s, &p, l, field, gens, lease_ms, drop_all, request_id, now);
    if (rc)
        return rc;
    s.rep = redlock__report_begin(l);
    s.give_up_ns = give_up_ns;
    make_strict(&p);
    if (at_quorum)
        settle_at_quorum(l, &s, &p);
    redlock__fanout(c, p.batches, leave_silent_to_background(c, &p, s.rep), on_simple_reply, &s);
    deferred = defer_unanswered(l, &p, s.answered, 0, give_up_ns);
    redlock__stat_add(&c->stats.background_releases, deferred);
    redlock__log(c, REDLOCK_LOG_DEBUG,
                 "lock '%.200s' release: %d released, %d still held (re-entered), %d not held, "
                 "%d in flight, %zu left to the background",
                 l->members[0].name, s.ok, s.other, s.not_held, s.parked, deferred);
    redlock__plan_free(&p);
    release_ctx_free(&s);
    *released = s.ok;
    *decremented = s.other;
    *not_held = s.not_held;
    return REDLOCK_OK;
}

int redlock__release_members_after(redlock_lock *l, const char *field,
                                   const redlock__gens *gens, int64_t lease_ms,
                                   int64_t not_before_ns, int64_t give_up_ns)
{
    redlock_client *c = l->client;
    simple_ctx s;
    redlock__plan p;
    char request_id[33];
    int64_t now = c->tp.ops->now_ns(c->tp.ctx);
    size_t deferred;
    int rc;

    rc = plan_release(&s, &p, l, field, gens, lease_ms, 1, request_id, now);
    if (rc)
        return rc;
    deferred = defer_unanswered(l, &p, s.answered, not_before_ns, give_up_ns);
    redlock__stat_add(&c->stats.background_releases, deferred);
    redlock__log(c, REDLOCK_LOG_DEBUG,
                 "lock '%.200s' release held back %lld ms, until its validity ends",
                 l->members[0].name, (long long)((not_before_ns - now) / REDLOCK__NS_PER_MS));
    redlock__plan_free(&p);
    release_ctx_free(&s);
    return REDLOCK_OK;
}
