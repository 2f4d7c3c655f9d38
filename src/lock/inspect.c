/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Read-only questions about a lock (is it locked, by whom, for how long)
 * answered by a quorum of members, plus force_unlock and fenced writes.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "lock/context.h"
#include "lock/health.h"
#include "lock/plan.h"
#include "lock/internal.h"
#include "resp/scripts.h"

#define INSPECT_TIMEOUT_MS 1000

typedef struct inspect_ctx {
    const redlock_lock *l;
    const redlock__plan *plan;
    redlock_member_state *states;
    const char *field;          /* owner field to count, or NULL */
    int64_t *owner_count;       /* per member: holds of field */
    redlock_holder_info *list;  /* the one member's holder fields, or NULL */
    size_t cap;
} inspect_ctx;

static int fill_inspect(void *ud, size_t m, const char **argv, char **owned,
                        redlock__script_call *out)
{
    inspect_ctx *x = ud;

    (void)owned;
    *out = redlock__script_inspect(
        argv, &(redlock__inspect_args){
                  .name = x->l->members[m].name,
                  .token_key = redlock__key(&x->l->members[m], REDLOCK__KEY_TOKEN)});
    return 0;
}

static void read_state(inspect_ctx *x, size_t m, const redisReply *r)
{
    redlock_member_state *st = &x->states[m];
    redlock__inspect_reply ir;
    size_t i;

    redlock__parse_inspect(r, &ir);
    if (ir.kind != REDLOCK__REPLY_DONE) {
        st->err = ir.err;
        redlock__copy_msg(st->message, sizeof(st->message), ir.message);
        return;
    }
    st->reachable = 1;
    st->pttl_ms = ir.pttl_ms;
    st->exists = st->pttl_ms != -2;
    st->token = ir.token;
    st->holders = ir.holders;
    for (i = 0; i < ir.holders; i++) {
        const redisReply *f = ir.pairs[2 * i];

        if (f->type != REDIS_REPLY_STRING)
            continue;
        if (i == 0) {
            redlock__copy_msg(st->holder, sizeof(st->holder), f->str);
            st->hold_count = redlock__reply_i64(ir.pairs[2 * i + 1]);
        }
        if (x->list && i < x->cap) {
            redlock__copy_msg(x->list[i].field, sizeof(x->list[i].field), f->str);
            x->list[i].count = redlock__reply_i64(ir.pairs[2 * i + 1]);
        }
        if (x->field && strcmp(f->str, x->field) == 0)
            x->owner_count[m] = redlock__reply_i64(ir.pairs[2 * i + 1]);
    }
}

static int on_inspect_reply(void *ud, size_t batch, size_t call, int err,
                            const char *msg, redisReply *r)
{
    inspect_ctx *x = ud;
    size_t m = redlock__plan_member(x->plan, batch, call);

    if (err) {
        x->states[m].err = err;
        redlock__copy_msg(x->states[m].message, sizeof(x->states[m].message), msg);
        return 0;
    }
    read_state(x, m, r);
    return 0;
}

static int64_t inspect_timeout_ns(const redlock_client *c)
{
    return (c->node_timeout_ms > 0 ? c->node_timeout_ms : INSPECT_TIMEOUT_MS) *
           REDLOCK__NS_PER_MS;
}

/* Reads every member (or only `only` when it is < n), listing the holder
 * fields of `only` into list (cap entries) when list is not NULL. */
static int inspect_members_as(redlock_lock *l, size_t only, const char *field,
                              redlock_member_state *states, int64_t *owner_count,
                              redlock_holder_info *list, size_t cap)
{
    redlock_client *c = l->client;
    unsigned char include[REDLOCK__MAX_NODES];
    inspect_ctx x = {l, NULL, states, field, owner_count, list, cap};
    redlock__plan p;
    size_t m;
    int rc;

    for (m = 0; m < l->n; m++) {
        include[m] = only >= l->n || only == m;
        memset(&states[m], 0, sizeof(states[m]));
        states[m].pttl_ms = -2;
        if (owner_count)
            owner_count[m] = 0;
    }
    rc = redlock__plan_build(&p, l, include, fill_inspect, &x,
                             c->tp.ops->now_ns(c->tp.ctx) + inspect_timeout_ns(c));
    if (rc)
        return rc;
    x.plan = &p;
    redlock__fanout(c, p.batches, p.nb, on_inspect_reply, &x);
    redlock__plan_free(&p);
    return REDLOCK_OK;
}

static int inspect_members(redlock_lock *l, size_t only, const char *field,
                           redlock_member_state *states, int64_t *owner_count)
{
    return inspect_members_as(l, only, field, states, owner_count, NULL, 0);
}

static int inspect_members_listing(redlock_lock *l, size_t member, redlock_member_state *states,
                                   redlock_holder_info *list, size_t cap)
{
    return inspect_members_as(l, member, NULL, states, NULL, list, cap);
}

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* The quorum-th largest of the answering members' values: what a quorum
 * agrees on at least. Fails when fewer than a quorum answered. */
static int quorum_value(redlock_lock *l, const redlock_member_state *st,
                        const int64_t *values, int64_t *out)
{
    int64_t v[REDLOCK__MAX_NODES];
    const char *why = "";
    size_t m, n = 0;

    for (m = 0; m < l->n; m++) {
        if (st[m].reachable)
            v[n++] = values[m];
        else if (!*why)
            why = st[m].message; /* says why, e.g. "-LOADING" */
    }
    if ((int)n < l->quorum)
        return redlock__fail(REDLOCK_ENO_QUORUM,
                             "lock '%s': %zu of %zu members answered, quorum is %d%s%s",
                             l->members[0].name, n, l->n, l->quorum, *why ? "; " : "", why);
    qsort(v, n, sizeof(v[0]), cmp_desc);
    *out = v[l->quorum - 1];
    return REDLOCK_OK;
}

int redlock_is_locked(redlock_lock *l, int *locked)
{
    redlock_member_state st[REDLOCK__MAX_NODES];
    int64_t exists[REDLOCK__MAX_NODES], v;
    size_t m;
    int rc;

    if (!l || !locked)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument");
    if ((rc = inspect_members(l, l->n, NULL, st, NULL)) != REDLOCK_OK)
        return rc;
    for (m = 0; m < l->n; m++)
        exists[m] = st[m].exists;
    if ((rc = quorum_value(l, st, exists, &v)) != REDLOCK_OK)
        return rc;
    *locked = v > 0;
    return REDLOCK_OK;
}

int redlock_hold_count_as(redlock_lock *l, uint64_t owner, int *count)
{
    redlock_member_state st[REDLOCK__MAX_NODES];
    int64_t counts[REDLOCK__MAX_NODES], v;
    char field[64];
    int rc;

    if (!l || !count)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument");
    redlock__hold_field(l, owner, field, sizeof(field));
    if ((rc = inspect_members(l, l->n, field, st, counts)) != REDLOCK_OK)
        return rc;
    if ((rc = quorum_value(l, st, counts, &v)) != REDLOCK_OK)
        return rc;
    *count = (int)v;
    return REDLOCK_OK;
}

int redlock_hold_count(redlock_lock *l, int *count)
{
    return redlock_hold_count_as(l, redlock__gettid(), count);
}

int redlock_is_held_as(redlock_lock *l, uint64_t owner, int *held)
{
    int count = 0, rc, lost;

    if (!l || !held)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument");
    pthread_mutex_lock(&l->mu);
    lost = l->state == REDLOCK__LOST && l->owner == owner;
    pthread_mutex_unlock(&l->mu);
    if (lost) {
        *held = 0;
        return REDLOCK_OK;
    }
    if ((rc = redlock_hold_count_as(l, owner, &count)) != REDLOCK_OK)
        return rc;
    *held = count > 0;
    return REDLOCK_OK;
}

int redlock_is_held_by_current_thread(redlock_lock *l, int *held)
{
    return redlock_is_held_as(l, redlock__gettid(), held);
}

int redlock_remaining_ttl_as(redlock_lock *l, uint64_t owner, int64_t *ttl_ms)
{
    redlock_member_state st[REDLOCK__MAX_NODES];
    int64_t ttls[REDLOCK__MAX_NODES], v;
    size_t m;
    int rc;

    if (!l || !ttl_ms)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument");
    pthread_mutex_lock(&l->mu);
    if (l->state == REDLOCK__HELD && l->owner == owner) {
        int64_t left = l->validity_end_ns - l->client->tp.ops->now_ns(l->client->tp.ctx);

        pthread_mutex_unlock(&l->mu);
        *ttl_ms = left > 0 ? left / REDLOCK__NS_PER_MS : 0;
        return REDLOCK_OK;
    }
    pthread_mutex_unlock(&l->mu);
    if ((rc = inspect_members(l, l->n, NULL, st, NULL)) != REDLOCK_OK)
        return rc;
    /* No expiry sorts above every TTL; absent below every one. */
    for (m = 0; m < l->n; m++)
        ttls[m] = st[m].pttl_ms == -1 ? INT64_MAX : st[m].pttl_ms;
    if ((rc = quorum_value(l, st, ttls, &v)) != REDLOCK_OK)
        return rc;
    *ttl_ms = v == INT64_MAX ? -1 : v;
    return REDLOCK_OK;
}

int redlock_remaining_ttl(redlock_lock *l, int64_t *ttl_ms)
{
    return redlock_remaining_ttl_as(l, redlock__gettid(), ttl_ms);
}

int redlock_lock_inspect_holders(redlock_lock *l, size_t member, redlock_member_state *out,
                                 redlock_holder_info *holders, size_t cap)
{
    redlock_member_state st[REDLOCK__MAX_NODES];
    int rc;

    if (!l || !out || member >= l->n || (cap && !holders))
        return redlock__fail(REDLOCK_EINVAL, "member index out of range or NULL holders");
    if ((rc = inspect_members_listing(l, member, st, holders, cap)) != REDLOCK_OK)
        return rc;
    *out = st[member];
    return REDLOCK_OK;
}

int redlock_lock_inspect(redlock_lock *l, size_t member, redlock_member_state *out)
{
    return redlock_lock_inspect_holders(l, member, out, NULL, 0);
}

typedef struct force_ctx {
    const redlock_lock *l;
    int answered, deleted;
    int refused;                /* members that refuse for good */
    int refusal;                /* the first such refusal's code */
    char why[128];              /* the first failure, for the message */
} force_ctx;

static int fill_force(void *ud, size_t m, const char **argv, char **owned,
                      redlock__script_call *out)
{
    force_ctx *f = ud;
    const redlock__lock_member *mem = &f->l->members[m], *fair = mem;
    redlock__lock_member fair_keys = {0};
    redlock__force_release_args a = {.name = mem->name,
                                     .channel = redlock__channel(mem, f->l->kind),
                                     .message = REDLOCK__RELEASE_MSG};

    /* Fair waiters listen on channels of their own: the first is woken,
     * also when a plain handle forces the lock (the CLI's does). */
    if (f->l->kind == REDLOCK__KIND_MUTEX) {
        if (redlock__member_keys(&fair_keys, mem->name, REDLOCK__KIND_FAIR) != REDLOCK_OK)
            return -1;
        *owned = fair_keys.name; /* the block the keys below point into */
        fair = &fair_keys;
    }
    if (f->l->kind == REDLOCK__KIND_MUTEX || f->l->kind == REDLOCK__KIND_FAIR) {
        a.queue_key = redlock__key(fair, REDLOCK__KEY_AUX);
        a.timeouts_key = redlock__key(fair, REDLOCK__KEY_AUX2);
        a.tickets_key = redlock__key(fair, REDLOCK__KEY_AUX3);
        a.lapses_key = redlock__key(fair, REDLOCK__KEY_AUX4);
    }
    *out = redlock__script_force_release(argv, &a);
    return 0;
}

static int on_force_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                          redisReply *r)
{
    force_ctx *f = ud;
    redlock__script_reply sr;

    (void)batch, (void)call;
    if (err) {
        sr.kind = REDLOCK__REPLY_ERROR;
        sr.message = msg;
        if (redlock__refuses_for_good(err) && !f->refused++)
            f->refusal = err;
    } else {
        redlock__parse_force_release(r, &sr);
    }
    if (sr.kind == REDLOCK__REPLY_DONE) {
        f->answered++;
        f->deleted += sr.deleted;
    } else if (!f->why[0]) {
        redlock__copy_msg(f->why, sizeof(f->why), sr.message);
    }
    return 0;
}

int redlock_force_unlock(redlock_lock *l, size_t *released)
{
    redlock_client *c;
    force_ctx f;
    redlock__plan p;
    int rc;

    if (!l)
        return redlock__fail(REDLOCK_EINVAL, "lock is NULL");
    c = l->client;
    f.l = l;
    f.answered = f.deleted = f.refused = f.refusal = 0;
    f.why[0] = '\0';
    rc = redlock__plan_build(&p, l, NULL, fill_force, &f,
                             c->tp.ops->now_ns(c->tp.ctx) + inspect_timeout_ns(c));
    if (rc)
        return rc;
    redlock__fanout(c, p.batches, p.nb, on_force_reply, &f);
    redlock__plan_free(&p);
    if (released)
        *released = (size_t)f.deleted;
    /* As an acquire says it: refusals for good (credentials, a database
     * the server lacks) that alone leave no quorum are not an outage. */
    if (f.answered < l->quorum)
        return redlock__fail((int)l->n - f.refused < l->quorum ? f.refusal : REDLOCK_ENO_QUORUM,
                             "lock '%s': %d of %zu members answered%s%s", l->members[0].name,
                             f.answered, l->n, f.why[0] ? "; " : "", f.why);
    return REDLOCK_OK;
}

typedef struct fenced_ctx {
    int rc;
    char msg[128];
} fenced_ctx;

static int on_fenced_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                           redisReply *r)
{
    fenced_ctx *f = ud;
    redlock__script_reply sr;

    (void)batch, (void)call;
    if (err) {
        f->rc = err;
        redlock__copy_msg(f->msg, sizeof(f->msg), msg);
        return 0;
    }
    redlock__parse_fenced_set(r, &sr);
    if (sr.kind == REDLOCK__REPLY_DONE) {
        f->rc = REDLOCK_OK;
    } else if (sr.kind == REDLOCK__REPLY_STALE) {
        f->rc = REDLOCK_ESTALE_TOKEN;
        snprintf(f->msg, sizeof(f->msg), "token is older than %s", sr.message);
    } else {
        f->rc = sr.err;
        redlock__copy_msg(f->msg, sizeof(f->msg), sr.message);
    }
    return 0;
}

int redlock_fenced_set(redlock_client *c, size_t node, const char *key, const char *value,
                       size_t value_len, uint64_t token)
{
    char tok[24];
    const char *argv[REDLOCK__SCRIPT_MAX_ARGS];
    size_t lens[REDLOCK__SCRIPT_MAX_ARGS];
    redlock__script_call sc;
    redlock__call call;
    redlock__batch b;
    fenced_ctx f = {REDLOCK_ETIMEOUT, "no reply"};

    if (!c || !key || !*key || (!value && value_len))
        return redlock__fail(REDLOCK_EINVAL, "NULL or empty argument");
    if (node >= c->n_nodes)
        return redlock__fail(REDLOCK_EINVAL, "node %zu out of range", node);
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    sc = redlock__script_fenced_set(
        argv, &(redlock__fenced_set_args){.key = key, .value = value ? value : "", .token = tok});
    /* The value is binary: its length is given, not found by strlen. */
    lens[0] = strlen(key);
    lens[1] = value_len;
    lens[2] = strlen(tok);
    call = (redlock__call){sc.script, sc.nkeys, sc.argc, argv, lens};
    b = (redlock__batch){.node = node, .calls = &call, .ncalls = 1,
                         .deadline_ns = c->tp.ops->now_ns(c->tp.ctx) + inspect_timeout_ns(c)};
    redlock__fanout(c, &b, 1, on_fenced_reply, &f);
    if (f.rc)
        return redlock__fail(f.rc, "fenced_set '%s': %s", key, f.msg);
    return REDLOCK_OK;
}
