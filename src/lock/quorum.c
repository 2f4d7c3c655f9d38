/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quorum coordinator: one acquire attempt fanned out to every member
 * at once, decided the moment the outcome is certain, and the release.
 * With one member this is exactly the single-node lock.
 */
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
#include "lock/internal.h"
#include "resp/scripts.h"

typedef enum answer {
    ANSWER_NONE = 0,
    ANSWER_GRANTED,
    ANSWER_BUSY,
    ANSWER_FAILED
} answer;

typedef struct acquire_ctx {
    redlock_lock *l;
    const char *field;
    const char *request_id;
    const char *fresh_only;     /* "1": the client holds nothing (acquire.lua) */
    char lease[24];
    char latch_ms[24];
    redlock_member_report *rep;
    unsigned char *answer;      /* per member */
    int granted, busy, failed, pending;
    int64_t min_pttl_ms;
    uint64_t token;
    int fresh;                  /* some member granted a fresh hold */
    int64_t sent_ns;
    const redlock__plan *plan;
    redlock__attempt_result *res; /* gets each member's generation */
} acquire_ctx;

static int fill_acquire(void *ud, size_t m, const char **argv, char **owned)
{
    acquire_ctx *a = ud;
    const redlock__lock_member *mem = &a->l->members[m];

    *owned = redlock__latch_key(mem, a->request_id);
    argv[0] = mem->name;
    argv[1] = *owned;
    argv[2] = redlock__key(mem, REDLOCK__KEY_GEN);
    argv[3] = redlock__key(mem, REDLOCK__KEY_TOKEN); /* only read when nkeys is 4 */
    argv[a->l->fencing ? 4 : 3] = a->lease;
    argv[a->l->fencing ? 5 : 4] = a->field;
    argv[a->l->fencing ? 6 : 5] = a->latch_ms;
    argv[a->l->fencing ? 7 : 6] = a->request_id;
    argv[a->l->fencing ? 8 : 7] = a->fresh_only;
    return *owned ? 0 : -1;
}

static void note_failure(redlock_member_report *r, int err, const char *msg,
                         const redisReply *reply)
{
    r->outcome = err == REDLOCK_ETIMEOUT ? REDLOCK_MEMBER_TIMEOUT : REDLOCK_MEMBER_ERROR;
    r->err = err;
    redlock__copy_msg(r->message, sizeof(r->message), reply ? reply->str : msg);
}

static answer failed_for(acquire_ctx *a, size_t m, int err)
{
    (void)m;
    if (redlock__refuses_for_good(err) && a->res) {
        a->res->permanent++;
        a->res->permanent_err = err;
    }
    return ANSWER_FAILED;
}

/* Reads one acquire reply into the member's answer. */
static answer classify_acquire(acquire_ctx *a, size_t m, int err, const char *msg,
                               redisReply *r)
{
    redlock_member_report *rep = &a->rep[m];

    if (err) {
        note_failure(rep, err, msg, NULL);
        return failed_for(a, m, err);
    }
    /* nil: a grant without a generation (an acquire script that reports
     * none); the hold's generation is then this request's, as if fresh. */
    if (r->type == REDIS_REPLY_NIL && !a->l->fencing)
        return ANSWER_GRANTED;
    if (r->type == REDIS_REPLY_ARRAY && (r->elements == 1 || r->elements == 2) &&
        r->element[0]->type == REDIS_REPLY_INTEGER &&
        (a->l->fencing || r->element[0]->integer == 0)) {
        long long t = r->element[0]->integer;

        if (r->elements == 2) {
            const redisReply *g = r->element[1];

            if (g->type != REDIS_REPLY_STRING || g->len >= sizeof(redlock__gen) ||
                (g->len > 0 && !redlock__gen_valid(g->str))) {
                note_failure(rep, REDLOCK_EPROTO, "unexpected generation in an acquire reply",
                             NULL);
                return ANSWER_FAILED;
            }
            if (a->res) {
                memcpy(a->res->gens[m], g->str, g->len);
                a->res->gens[m][g->len] = '\0';
                a->res->gen_reported[m] = 1;
            }
        }
        if (t > 0) {
            a->fresh = 1;
            if ((uint64_t)t > a->token)
                a->token = (uint64_t)t;
        }
        return ANSWER_GRANTED;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= -1) {
        rep->outcome = REDLOCK_MEMBER_HELD_ELSEWHERE;
        rep->pttl_ms = r->integer;
        if (r->integer >= 0 && (a->min_pttl_ms < 0 || r->integer < a->min_pttl_ms))
            a->min_pttl_ms = r->integer;
        return ANSWER_BUSY;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        note_failure(rep, redlock__server_error_code(r->str), NULL, r);
        return failed_for(a, m, rep->err);
    }
    note_failure(rep, REDLOCK_EPROTO, "unexpected reply to acquire", NULL);
    return ANSWER_FAILED;
}

static int on_acquire_reply(void *ud, size_t batch, size_t call, int err,
                            const char *msg, redisReply *r)
{
    acquire_ctx *a = ud;
    size_t m = redlock__plan_member(a->plan, batch, call);
    answer ans = classify_acquire(a, m, err, msg, r);
    int q = a->l->quorum;

    a->answer[m] = (unsigned char)ans;
    a->rep[m].latency_us = err ? -1 : (redlock__now_ns() - a->sent_ns) / 1000;
    if (ans == ANSWER_GRANTED) {
        a->rep[m].outcome = REDLOCK_MEMBER_GRANTED;
        a->granted++;
    } else if (ans == ANSWER_BUSY) {
        a->busy++;
    } else {
        a->failed++;
    }
    a->pending--;
    /* Decide as soon as the outcome is certain: a quorum of grants, or too
     * few members left to reach one. Stragglers are abandoned. */
    return redlock__fanout_settled(a->granted, a->pending, q);
}

typedef struct simple_ctx {
    redlock_lock *l;
    const char *field;
    const char *request_id;
    const char *token;
    char lease[24];
    char latch_ms[24];
    const char *drop_all;
    redlock__gens_text *gens;   /* release: per member, NULL when unknown */
    const redlock__plan *plan;
    int ok, other, not_held, failed;
    unsigned char *answered;
    redlock_member_report *rep;
    int stop_at;                /* > 0: end once this many confirm (or cannot) */
    int pending;                /* calls not answered yet, with stop_at */
} simple_ctx;

/* Abort and release share their keys and first arguments; a release adds
 * what to drop and the generation of the hold it drops. */
static int fill_abort(void *ud, size_t m, const char **argv, char **owned)
{
    simple_ctx *s = ud;
    const redlock__lock_member *mem = &s->l->members[m];

    *owned = redlock__latch_key(mem, s->request_id);
    argv[0] = mem->name;
    argv[1] = redlock__key(mem, REDLOCK__KEY_CHANNEL);
    argv[2] = *owned;
    argv[3] = redlock__key(mem, REDLOCK__KEY_GEN);
    argv[4] = REDLOCK__RELEASE_MSG;
    argv[5] = s->lease;
    argv[6] = s->field;
    argv[7] = s->latch_ms;
    argv[8] = s->drop_all;
    argv[9] = s->gens ? s->gens[m] : "";
    return *owned ? 0 : -1;
}

static int fill_fence(void *ud, size_t m, const char **argv, char **owned)
{
    simple_ctx *s = ud;

    (void)owned;
    argv[0] = s->l->members[m].name;
    argv[1] = redlock__key(&s->l->members[m], REDLOCK__KEY_TOKEN);
    argv[2] = s->field;
    argv[3] = s->token;
    return 0;
}

/* Release, abort and fence-store replies: integer 1 / 0, nil, or error. */
static int on_simple_reply(void *ud, size_t batch, size_t call, int err,
                           const char *msg, redisReply *r)
{
    simple_ctx *s = ud;
    size_t m = redlock__plan_member(s->plan, batch, call);
    redlock_member_report *rep = s->rep ? &s->rep[m] : NULL;

    s->answered[m] = 1;
    if (err || r->type == REDIS_REPLY_ERROR) {
        s->answered[m] = 2;
        s->failed++;
        if (rep)
            note_failure(rep, err ? err : redlock__server_error_code(r->str), msg,
                         err ? NULL : r);
    } else if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        s->ok++;
        if (rep)
            rep->outcome = REDLOCK_MEMBER_GRANTED;
    } else if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
        s->other++;
        s->answered[m] = 3;
        if (rep)
            rep->outcome = REDLOCK_MEMBER_GRANTED;
    } else if (r->type == REDIS_REPLY_NIL) {
        s->not_held++;
        if (rep)
            rep->outcome = REDLOCK_MEMBER_NOT_HELD;
    } else {
        /* No script answers this way: the node's state is unknown, so it
         * counts as a failure (and is retried), never as "not held". */
        s->answered[m] = 2;
        s->failed++;
        if (rep)
            note_failure(rep, REDLOCK_EPROTO, "unexpected reply to a release", NULL);
    }
    s->pending--;
    return s->stop_at > 0 && redlock__fanout_settled(s->ok, s->pending, s->stop_at);
}

/* Hands members that did not answer to the background, so the caller
 * never waits on a dead node. */
static size_t defer_unanswered(redlock_lock *l, const redlock__plan *p,
                               const unsigned char *answered, int64_t give_up_ns)
{
    size_t k, deferred = 0;

    for (k = 0; k < p->n; k++) {
        size_t m = p->member[k];

        if (answered[m] == 1 || answered[m] == 3)
            continue;
        redlock__retry_queue(&l->client->retry, l->client->tp.ops->now_ns(l->client->tp.ctx),
                             l->members[m].node, p->calls[k].script, p->calls[k].nkeys,
                             p->calls[k].argc, p->calls[k].argv, give_up_ns);
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
            note_failure(&rep[redlock__plan_member(p, b, k)], REDLOCK_ETIMEOUT,
                         "node silent since a request timed out; released in the background",
                         NULL);
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

/* Undoes this request on every member whose answer was not a refusal. */
static void abort_attempt(redlock_lock *l, const char *field, const char *request_id,
                          int64_t lease_ms, const unsigned char *answers)
{
    redlock_client *c = l->client;
    simple_ctx s;
    redlock__plan p;
    unsigned char *include = calloc(l->n, 1), *answered = calloc(l->n, 1);
    int64_t now = c->tp.ops->now_ns(c->tp.ctx);
    size_t m;

    if (!include || !answered)
        goto out;
    memset(&s, 0, sizeof(s));
    s.l = l;
    s.field = field;
    s.request_id = request_id;
    s.drop_all = "0";
    s.answered = answered;
    redlock__fmt_i64(s.lease, sizeof(s.lease), lease_ms);
    redlock__fmt_i64(s.latch_ms, sizeof(s.latch_ms), lease_ms);
    for (m = 0; m < l->n; m++)
        include[m] = answers[m] != ANSWER_BUSY;
    if (redlock__plan_build(&p, l, include, REDLOCK__SCRIPT_ABORT, 4, 8, fill_abort, &s,
                            now + redlock__node_timeout_ns(c, lease_ms)) != REDLOCK_OK)
        goto out;
    skip_waiting_for_silent(c, &p, now);
    make_strict(&p);
    s.plan = &p;
    redlock__fanout(c, p.batches, p.nb, on_simple_reply, &s);
    defer_unanswered(l, &p, answered, now + lease_ms * REDLOCK__NS_PER_MS);
    redlock__plan_free(&p);
out:
    free(include);
    free(answered);
}

/* Fencing phase 2: store T on every member that did not refuse (a
 * straggler may hold it too; the script checks that we still hold it),
 * deciding like phase 1 as soon as a quorum confirmed or no longer can.
 * Returns the number of confirmations. */
static int fence_store(redlock_lock *l, const char *field, uint64_t token,
                       const unsigned char *answers, int64_t lease_ms,
                       int64_t valid_until_ns)
{
    redlock_client *c = l->client;
    simple_ctx s;
    redlock__plan p;
    char tok[24];
    unsigned char *include = calloc(l->n, 1), *answered = calloc(l->n, 1);
    int64_t deadline_ns = c->tp.ops->now_ns(c->tp.ctx) + redlock__node_timeout_ns(c, lease_ms);
    size_t m;
    int confirmed = 0;

    if (!include || !answered)
        goto out;
    memset(&s, 0, sizeof(s));
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    s.l = l;
    s.field = field;
    s.token = tok;
    s.answered = answered;
    s.stop_at = l->quorum;
    for (m = 0; m < l->n; m++)
        include[m] = answers[m] != ANSWER_BUSY;
    if (deadline_ns > valid_until_ns)
        deadline_ns = valid_until_ns;
    if (redlock__plan_build(&p, l, include, REDLOCK__SCRIPT_FENCE_STORE, 2, 4, fill_fence,
                            &s, deadline_ns) != REDLOCK_OK)
        goto out;
    s.plan = &p;
    s.pending = (int)p.n;
    redlock__fanout(c, p.batches, p.nb, on_simple_reply, &s);
    confirmed = s.ok;
    redlock__plan_free(&p);
out:
    free(include);
    free(answered);
    return confirmed;
}

/* Phase "send": the acquire script to every member at once, decided as
 * soon as the outcome is certain. Fills a's counts. */
static int send_acquire(redlock_lock *l, acquire_ctx *a, int64_t t0, int64_t deadline)
{
    redlock_client *c = l->client;
    redlock__plan p;
    int rc;

    rc = redlock__plan_build(&p, l, NULL, REDLOCK__SCRIPT_ACQUIRE, l->fencing ? 4 : 3,
                             l->fencing ? 9 : 8, fill_acquire, a, deadline);
    if (rc)
        return rc;
    a->plan = &p;
    a->pending = (int)l->n;
    a->sent_ns = t0;
    redlock__fanout(c, p.batches, p.nb, on_acquire_reply, a);
    a->plan = NULL;
    redlock__plan_free(&p);
    if (c->tp.ops->now_ns(c->tp.ctx) >= deadline) {
        size_t m;

        /* Ran to the deadline: members not heard from were abandoned when
         * the first timeout decided, but were silent just as long. */
        for (m = 0; m < l->n; m++)
            if (a->answer[m] == ANSWER_NONE)
                redlock__node_went_silent(c, l->members[m].node);
    }
    return REDLOCK_OK;
}

/* Phase "decide": counts and validity into res and the tally. */
static void decide_attempt(redlock_lock *l, const acquire_ctx *a, int64_t lease_ms, int64_t t0,
                           redlock__attempt_result *res, redlock__tally *tally)
{
    redlock_client *c = l->client;
    int64_t elapsed_ms = (c->tp.ops->now_ns(c->tp.ctx) - t0) / REDLOCK__NS_PER_MS;
    int64_t drift_ms = redlock__drift_ms(lease_ms, c->drift_factor);

    res->granted = a->granted;
    res->busy = a->busy;
    res->failed = a->failed;
    res->min_pttl_ms = a->min_pttl_ms;
    res->validity_ms = lease_ms - elapsed_ms - drift_ms;
    res->valid_until_ns = t0 + (lease_ms - drift_ms) * REDLOCK__NS_PER_MS;
    tally->n = (int)l->n;
    tally->quorum = l->quorum;
    tally->granted = a->granted;
    tally->busy = a->busy;
    tally->failed = a->failed;
    tally->permanent = res->permanent;
    tally->permanent_err = res->permanent_err;
}

/* Phase "fence": a fresh fenced grant stores T = max(candidates) on a
 * quorum before it counts; validity is then measured again. */
static redlock__fence fence_phase(redlock_lock *l, const char *field, const acquire_ctx *a,
                                  int64_t lease_ms, int64_t t0, redlock__attempt_result *res)
{
    redlock_client *c = l->client;

    if (a->granted < l->quorum || res->validity_ms <= 0 || !l->fencing || !a->fresh)
        return REDLOCK__FENCE_NONE;
    res->fence_confirmed =
        fence_store(l, field, a->token, a->answer, lease_ms, res->valid_until_ns);
    if (res->fence_confirmed < l->quorum)
        return REDLOCK__FENCE_SHORT;
    res->token = a->token;
    res->validity_ms = lease_ms - (c->tp.ops->now_ns(c->tp.ctx) - t0) / REDLOCK__NS_PER_MS -
                       redlock__drift_ms(lease_ms, c->drift_factor);
    return REDLOCK__FENCE_CONFIRMED;
}

/* send -> decide -> fence -> (abort on failure). */
int redlock__attempt(redlock_lock *l, const char *field, int64_t lease_ms, int reentry,
                     redlock__attempt_result *res)
{
    redlock_client *c = l->client;
    acquire_ctx a;
    redlock__tally tally;
    redlock__fence fence;
    char request_id[33];
    int64_t t0;
    int rc;

    memset(res, 0, sizeof(*res));
    memset(&a, 0, sizeof(a));
    redlock__request_id(c, request_id);
    memcpy(res->request_id, request_id, sizeof(res->request_id));
    a.l = l;
    a.field = field;
    a.request_id = request_id;
    a.fresh_only = reentry ? "0" : "1";
    a.res = res;
    a.min_pttl_ms = -1;
    redlock__fmt_i64(a.lease, sizeof(a.lease), lease_ms);
    /* The latch must outlive any late copy of the request, which can only
     * matter while a grant it made could still be alive. */
    redlock__fmt_i64(a.latch_ms, sizeof(a.latch_ms), lease_ms);
    a.rep = redlock__report_begin(l);
    a.answer = calloc(l->n, 1);
    if (!a.answer)
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    redlock__stat_add(&c->stats.attempts, 1);

    t0 = c->tp.ops->now_ns(c->tp.ctx);
    if ((rc = send_acquire(l, &a, t0, t0 + redlock__node_timeout_ns(c, lease_ms))) != REDLOCK_OK) {
        free(a.answer);
        return rc;
    }
    decide_attempt(l, &a, lease_ms, t0, res, &tally);
    fence = fence_phase(l, field, &a, lease_ms, t0, res);
    rc = redlock__attempt_outcome(&tally, res->validity_ms, fence);
    if (rc != REDLOCK_OK)
        /* Failed: undo on every member that may have granted, including
         * those that timed out or were never heard from. */
        abort_attempt(l, field, request_id, lease_ms, a.answer);
    free(a.answer);
    return rc;
}

int redlock__release_members(redlock_lock *l, const char *field, const redlock__gens *gens,
                             int64_t lease_ms, int drop_all, int64_t give_up_ns,
                             int *released, int *decremented, int *not_held)
{
    redlock_client *c = l->client;
    simple_ctx s;
    redlock__plan p;
    char request_id[33];
    int64_t now = c->tp.ops->now_ns(c->tp.ctx);
    size_t m;
    int rc;

    memset(&s, 0, sizeof(s));
    redlock__request_id(c, request_id);
    s.l = l;
    s.field = field;
    s.request_id = request_id;
    s.drop_all = drop_all ? "1" : "0";
    s.rep = redlock__report_begin(l);
    s.answered = calloc(l->n, 1);
    if (gens)
        s.gens = calloc(l->n, sizeof(*s.gens));
    if (!s.answered || (gens && !s.gens)) {
        free(s.answered);
        free(s.gens);
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    }
    for (m = 0; gens && m < l->n; m++)
        redlock__gens_format(&gens[m], s.gens[m]);
    redlock__fmt_i64(s.lease, sizeof(s.lease), lease_ms);
    /* A retried release must find its latch for as long as retries run. */
    redlock__fmt_i64(s.latch_ms, sizeof(s.latch_ms),
            (give_up_ns - now) / REDLOCK__NS_PER_MS + 1000);
    rc = redlock__plan_build(&p, l, NULL, REDLOCK__SCRIPT_RELEASE, 4, 10, fill_abort, &s,
                             now + redlock__node_timeout_ns(c, lease_ms));
    if (rc) {
        free(s.answered);
        free(s.gens);
        return rc;
    }
    s.plan = &p;
    make_strict(&p);
    redlock__fanout(c, p.batches, leave_silent_to_background(c, &p, s.rep), on_simple_reply, &s);
    redlock__stat_add(&c->stats.background_releases,
                      defer_unanswered(l, &p, s.answered, give_up_ns));
    redlock__plan_free(&p);
    free(s.answered);
    free(s.gens);
    *released = s.ok;
    *decremented = s.other;
    *not_held = s.not_held;
    return REDLOCK_OK;
}


static int on_restore_reply(void *ud, size_t batch, size_t call, int err,
                            const char *msg, redisReply *r)
{
    (void)ud, (void)batch, (void)call, (void)err, (void)msg, (void)r;
    return 0;
}

void redlock__restore_members(redlock_lock *l, const char *field, int64_t lease_ms,
                              const unsigned char *include, int64_t deadline_ns)
{
    redlock_client *c = l->client;
    acquire_ctx a;
    redlock__plan p;
    char request_id[33];
    size_t m;

    memset(&a, 0, sizeof(a));
    redlock__request_id(c, request_id);
    /* A member restored now holds a fresh grant of this request: its
     * release must carry this generation (the hold's earlier ones would be
     * refused there and leave the member held until its lease ran out). */
    pthread_mutex_lock(&l->mu);
    if (l->state == REDLOCK__HELD && strcmp(l->field, field) == 0)
        for (m = 0; m < l->n; m++)
            if (include[m])
                redlock__gens_add(&l->members[m].gens, request_id);
    pthread_mutex_unlock(&l->mu);
    a.l = l;
    a.field = field;
    a.request_id = request_id;
    redlock__fmt_i64(a.lease, sizeof(a.lease), lease_ms);
    redlock__fmt_i64(a.latch_ms, sizeof(a.latch_ms), lease_ms);
    a.fresh_only = "0"; /* our hold lives on; only vanished members get it */
    if (redlock__plan_build(&p, l, include, REDLOCK__SCRIPT_ACQUIRE, l->fencing ? 4 : 3,
                            l->fencing ? 9 : 8, fill_acquire, &a, deadline_ns) != REDLOCK_OK)
        return;
    /* The outcome is read by the next tick's renewal, never counted now. */
    redlock__fanout(c, p.batches, p.nb, on_restore_reply, NULL);
    redlock__plan_free(&p);
}
