/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quorum coordinator: one acquire attempt fanned out to every member
 * at once, decided the moment the outcome is certain (its release, abort
 * and fence store are in release.c).
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
#include "lock/replicas.h"
#include "lock/retry.h"
#include "lock/internal.h"
#include "lock/release.h"
#include "resp/script.h"

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
    char writer_wait[24];       /* WRITE: the waiting-writer mark's cap */
    const char *ticket;         /* FAIR: the waiter's ticket, or NULL */
    redlock_member_report *rep;
    unsigned char *answer;      /* per member */
    unsigned char *may_hold;    /* per member: granted, or not heard from */
    int granted, busy, failed, pending;
    int64_t min_pttl_ms;
    uint64_t token;
    int fresh;                  /* some member granted a fresh hold */
    int64_t sent_ns;
    const redlock__plan *plan;
    redlock__attempt_result *res; /* gets each member's generation */
    /* replica_acks > 0: the batch's WAIT trailer, and the members granted
     * but not yet acknowledged (counted only when it answers). */
    const redlock__replica_wait *wait;
    unsigned char *unacked;
    /* The first members' latch keys (redlock__latch_key_in); last, and not
     * cleared: each is written before it is used. */
    char latch_room[REDLOCK__LATCH_ROOMS][REDLOCK__LATCH_ROOM_BYTES];
} acquire_ctx;

static int fill_acquire(void *ud, size_t m, const char **argv, char **owned,
                        redlock__script_call *out)
{
    acquire_ctx *a = ud;
    const redlock__lock_member *mem = &a->l->members[m];
    const char *latch = redlock__latch_key_in(mem, a->request_id,
                                              m < REDLOCK__LATCH_ROOMS ? a->latch_room[m] : NULL,
                                              sizeof(a->latch_room[0]), owned);

    *out = redlock__script_acquire(
        argv, &(redlock__acquire_args){
                  .name = mem->name,
                  .mark_key = latch,
                  .token_key = a->l->fencing ? redlock__key(mem, REDLOCK__KEY_TOKEN) : NULL,
                  .lease_ms = a->lease,
                  .field = a->field,
                  .request_id = a->request_id,
                  .fresh_only = a->fresh_only,
                  .kind = a->l->kind,
                  .aux_key = a->l->kind != REDLOCK__KIND_MUTEX
                                 ? redlock__key(mem, REDLOCK__KEY_AUX) : NULL,
                  .aux2_key = a->l->kind == REDLOCK__KIND_FAIR
                                  ? redlock__key(mem, REDLOCK__KEY_AUX2) : NULL,
                  .aux3_key = a->l->kind == REDLOCK__KIND_FAIR
                                  ? redlock__key(mem, REDLOCK__KEY_AUX3) : NULL,
                  .aux4_key = a->l->kind == REDLOCK__KIND_FAIR
                                  ? redlock__key(mem, REDLOCK__KEY_AUX4) : NULL,
                  .ticket = a->ticket ? a->ticket : "",
                  .wait_lease_ms = a->l->wait_lease,
                  .channel = redlock__channel(mem, a->l->kind),
                  .writer_wait_ms = a->writer_wait[0] ? a->writer_wait : "0",
                  .permits = a->l->permits,
                  .limit = a->l->limit});
    return latch ? 0 : -1;
}


static answer failed_for(acquire_ctx *a, size_t m, int err)
{
    (void)m;
    /* A refused upgrade is the caller's mistake, not the node's: it ends
     * the acquire like a refusal for good, without a warning about the
     * node. */
    if ((redlock__refuses_for_good(err) || err == REDLOCK_EUPGRADE) && a->res) {
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
    redlock__script_reply sr;

    if (err) {
        redlock__note_failure(rep, err, msg);
        return failed_for(a, m, err);
    }
    redlock__parse_acquire(r, a->l->fencing, &sr);
    switch (sr.kind) {
    case REDLOCK__REPLY_GRANTED:
        if (sr.gen && a->res) {
            memcpy(a->res->gens[m], sr.gen, sr.gen_len);
            a->res->gens[m][sr.gen_len] = '\0';
            a->res->gen_reported[m] = 1;
        }
        if (sr.token > 0) {
            a->fresh = 1;
            if ((uint64_t)sr.token > a->token)
                a->token = (uint64_t)sr.token;
        }
        return ANSWER_GRANTED;
    case REDLOCK__REPLY_BUSY:
        rep->outcome = REDLOCK_MEMBER_HELD_ELSEWHERE;
        rep->pttl_ms = sr.pttl_ms;
        if (sr.pttl_ms >= 0 && (a->min_pttl_ms < 0 || sr.pttl_ms < a->min_pttl_ms))
            a->min_pttl_ms = sr.pttl_ms;
        if (sr.ticket && a->res) {
            a->res->ticket_answers++;
            if (sr.ticket > a->res->ticket_best)
                a->res->ticket_best = sr.ticket;
        }
        return ANSWER_BUSY;
    case REDLOCK__REPLY_ERROR:
        redlock__note_failure(rep, sr.err, sr.message);
        return failed_for(a, m, sr.err);
    default:
        redlock__note_failure(rep, sr.err, sr.message);
        return ANSWER_FAILED;
    }
}

/* A batch's WAIT answered: its members' grants count now, or fail. */
static void on_wait_reply(acquire_ctx *a, size_t batch, int err, const char *msg,
                          redisReply *r)
{
    const redlock__plan *p = a->plan;
    size_t k, end = batch + 1 < p->nb ? p->batch_start[batch + 1] : p->n;
    char why[128];
    int code = REDLOCK_OK;
    int acked = redlock__replica_acks_of(a->wait, err, msg, r, &code, why, sizeof(why));

    if (acked >= 0 && acked < a->l->replica_acks) {
        code = REDLOCK_EREPLICAS;
        snprintf(why, sizeof(why), "%s: %d of %d replicas acknowledged within %d ms",
                 a->wait->argv[0], acked, a->l->replica_acks, a->l->replica_timeout_ms);
    }
    for (k = p->batch_start[batch]; k < end; k++) {
        size_t m = p->member[k];

        if (m == REDLOCK__PLAN_TRAILER || !a->unacked[m])
            continue;
        a->unacked[m] = 0;
        a->rep[m].replicas_acked = acked;
        a->pending--;
        if (code == REDLOCK_OK) {
            a->rep[m].outcome = REDLOCK_MEMBER_GRANTED;
            a->granted++;
        } else {
            /* Granted on the master only: undone like any failed member's. */
            redlock__note_failure(&a->rep[m], code, why);
            a->answer[m] = (unsigned char)failed_for(a, m, code);
            a->failed++;
        }
    }
}

static int on_acquire_reply(void *ud, size_t batch, size_t call, int err,
                            const char *msg, redisReply *r)
{
    acquire_ctx *a = ud;
    size_t m = redlock__plan_member(a->plan, batch, call);
    answer ans;
    int q = a->l->quorum;

    if (m == REDLOCK__PLAN_TRAILER) {
        on_wait_reply(a, batch, err, msg, r);
        return redlock__fanout_settled(a->granted, a->pending, q);
    }
    ans = classify_acquire(a, m, err, msg, r);
    a->answer[m] = (unsigned char)ans;
    a->rep[m].latency_us = err ? -1 : (redlock__now_ns() - a->sent_ns) / 1000;
    if (ans == ANSWER_GRANTED && a->wait) {
        /* Counts once the replicas acknowledged it (on_wait_reply). */
        a->unacked[m] = 1;
        return 0;
    }
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
     * few members left to reach one. A grant's stragglers are abandoned
     * (they are part of the hold). A refusal's are heard for a little
     * longer: each one that answers is a member that needs no abort (and
     * a fair waiter stays queued there). */
    if (!redlock__fanout_settled(a->granted, a->pending, q))
        return 0;
    return a->granted < q && a->pending > 0 ? REDLOCK__FANOUT_LINGER : 1;
}



/* Phase "send": the acquire script to every member at once, decided as
 * soon as the outcome is certain. Fills a's counts. */
static int send_acquire(redlock_lock *l, acquire_ctx *a, int64_t t0, int64_t deadline)
{
    redlock_client *c = l->client;
    redlock__plan p;
    int rc;

    rc = redlock__plan_build_trailed(&p, l, NULL, fill_acquire, a, deadline,
                                     a->wait ? &a->wait->call : NULL);
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
        redlock__fence_store(l, field, a->token, a->may_hold, lease_ms, res->valid_until_ns);
    if (res->fence_confirmed < l->quorum)
        return REDLOCK__FENCE_SHORT;
    res->token = a->token;
    res->validity_ms = lease_ms - (c->tp.ops->now_ns(c->tp.ctx) - t0) / REDLOCK__NS_PER_MS -
                       redlock__drift_ms(lease_ms, c->drift_factor);
    return REDLOCK__FENCE_CONFIRMED;
}

/* One member's part of an attempt, for the DEBUG line. */
static int describe_member(char *out, size_t cap, const redlock_member_report *r)
{
    switch (r->outcome) {
    case REDLOCK_MEMBER_GRANTED:
        return snprintf(out, cap, "granted in %lld us", (long long)r->latency_us);
    case REDLOCK_MEMBER_HELD_ELSEWHERE:
        return snprintf(out, cap, "held elsewhere (ttl %lld ms)", (long long)r->pttl_ms);
    case REDLOCK_MEMBER_TIMEOUT:
        return snprintf(out, cap, "timeout");
    case REDLOCK_MEMBER_ERROR:
        return snprintf(out, cap, "%s: %s", redlock_strerror(r->err), r->message);
    default:
        return snprintf(out, cap, "not waited for");
    }
}

/* DEBUG: one line per attempt, with every member's answer. */
static void log_attempt(redlock_lock *l, const acquire_ctx *a, const redlock__attempt_result *res,
                        int rc)
{
    redlock_client *c = l->client;
    char members[400];
    size_t m, off = 0;

    if (!redlock__log_on(c, REDLOCK_LOG_DEBUG))
        return;
    members[0] = '\0';
    for (m = 0; m < l->n && off + 1 < sizeof(members); m++) {
        int w = snprintf(members + off, sizeof(members) - off, "%s%s ", m ? "; " : "",
                         c->nodes ? c->nodes[l->members[m].node].uri.display : "node");

        if (w < 0 || (size_t)w >= sizeof(members) - off)
            break;
        off += (size_t)w;
        w = describe_member(members + off, sizeof(members) - off, &a->rep[m]);
        if (w < 0 || (size_t)w >= sizeof(members) - off)
            break;
        off += (size_t)w;
    }
    redlock__log(c, REDLOCK_LOG_DEBUG,
                 "lock '%.200s' attempt %.12s: %d granted, %d busy, %d failed of %zu (quorum %d), "
                 "validity %lld ms: %s [%s]",
                 l->members[0].name, res->request_id, a->granted, a->busy, a->failed, l->n,
                 l->quorum, (long long)res->validity_ms, rc ? redlock_strerror(rc) : "acquired",
                 members);
}

/* send -> decide -> fence -> (abort on failure). */
int redlock__attempt(redlock_lock *l, const char *field, int64_t lease_ms, int reentry,
                     int64_t wait_left_ms, const char *ticket, redlock__attempt_result *res)
{
    redlock_client *c = l->client;
    acquire_ctx a;
    redlock__tally tally;
    redlock__fence fence;
    redlock__replica_wait wait;
    char request_id[33];
    unsigned char answers[3 * 16]; /* answer, may_hold, unacked for up to 16 members */
    int64_t t0, deadline;
    int rc;

    redlock__attempt_result_clear(res);
    memset(&a, 0, offsetof(acquire_ctx, latch_room));
    redlock__request_id(c, request_id);
    memcpy(res->request_id, request_id, sizeof(res->request_id));
    a.l = l;
    a.field = field;
    a.request_id = request_id;
    a.fresh_only = reentry ? "0" : "1";
    res->fresh = !reentry;
    a.res = res;
    a.min_pttl_ms = -1;
    redlock__fmt_i64(a.lease, sizeof(a.lease), lease_ms);
    redlock__fmt_i64(a.writer_wait, sizeof(a.writer_wait), wait_left_ms);
    a.ticket = ticket;
    a.rep = redlock__report_begin(l);
    a.answer = redlock__scratch(answers, sizeof(answers), 3 * l->n);
    if (!a.answer)
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    a.may_hold = a.answer + l->n;
    a.unacked = a.answer + 2 * l->n;
    redlock__stat_add(&c->stats.attempts, 1);

    t0 = c->tp.ops->now_ns(c->tp.ctx);
    deadline = t0 + redlock__node_timeout_ns(c, lease_ms);
    if (l->replica_acks > 0) {
        redlock__replica_wait_init(&wait, l->replica_acks, l->replica_timeout_ms,
                                   l->replica_wait_aof);
        a.wait = &wait;
        deadline += REDLOCK__REPLICA_WAIT_NS(l->replica_timeout_ms);
    }
    if ((rc = send_acquire(l, &a, t0, deadline)) != REDLOCK_OK) {
        redlock__scratch_free(a.answer, answers);
        return rc;
    }
    /* A member that refused holds nothing of ours; any other may. */
    for (size_t m = 0; m < l->n; m++)
        a.may_hold[m] = a.answer[m] != ANSWER_BUSY;
    decide_attempt(l, &a, lease_ms, t0, res, &tally);
    fence = fence_phase(l, field, &a, lease_ms, t0, res);
    rc = redlock__attempt_outcome(&tally, res->validity_ms, fence);
    if (rc != REDLOCK_OK)
        /* Failed: undo on every member that may have granted, including
         * those that timed out or were never heard from. A fair waiter
         * with time left that lost a race gets back the places its grants
         * took. One that won a quorum too late (validity gone, fence
         * short) does not: it was first and served, and keeping the head
         * for a waiter whose grants keep coming back too late would starve
         * everyone behind it. Its ticket still ranks it on its next try. */
        redlock__abort_members(l, field, request_id, lease_ms,
                               wait_left_ms != 0 && tally.granted < l->quorum ? ticket : NULL,
                               a.may_hold);
    log_attempt(l, &a, res, rc);
    redlock__scratch_free(a.answer, answers);
    return rc;
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
    a.fresh_only = "0"; /* our hold lives on; only vanished members get it */
    if (redlock__plan_build(&p, l, include, fill_acquire, &a, deadline_ns) != REDLOCK_OK)
        return;
    /* The outcome is read by the next tick's renewal, never counted now. */
    redlock__fanout(c, p.batches, p.nb, on_restore_reply, NULL);
    redlock__plan_free(&p);
}
