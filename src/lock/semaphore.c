/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Semaphores with expiring permits. A permit is a lock handle of kind
 * REDLOCK__KIND_SEMAPHORE with an owner of its own, so the quorum, the
 * wait, the watchdog, on_lost and the delivery of releases are the plain
 * lock's; only the scripts (sem_*.lua) differ.
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

#define INSPECT_TIMEOUT_MS 1000

struct redlock_semaphore {
    redlock_client *client;
    redlock_lock *probe;          /* the name's keys, for inspection */
    redlock_member members[REDLOCK__MAX_NODES];
    size_t n;
    int limit;
    redlock_lock_options opts;    /* holder_command dropped: refused anyway */
    pthread_mutex_t mu;           /* guards on_lost */
    redlock_on_lost_fn on_lost;
    void *on_lost_ud;
};

struct redlock_permit {
    redlock_lock *lock;
    uint64_t owner;
    char id[64];                  /* the field: "<client-id>:<owner>" */
};

/*
 * The smallest quorum that keeps at most `limit` permits valid at once on
 * n nodes. Each node lets at most limit permits out, so h holders with q
 * grants each need h * q <= limit * n; h = limit + 1 must be impossible:
 * q > limit * n / (limit + 1). For limit 1 that is the majority (any two
 * quorums meet), but not beyond: with 5 nodes and limit 2, three holders
 * can each hold 3 nodes ({1,2,3}, {3,4,5}, {1,2,4}) while no node has
 * more than 2 permits out.
 */
static int safe_quorum(int limit, size_t n)
{
    return (int)(((uint64_t)limit * n) / ((uint64_t)limit + 1)) + 1;
}

int redlock_semaphore_new(redlock_client *c, const char *name, int limit,
                          const redlock_lock_options *opts, redlock_semaphore **out)
{
    redlock_semaphore *s;
    size_t i;
    int rc;

    if (!out)
        return redlock__fail(REDLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (!c)
        return redlock__fail(REDLOCK_EINVAL, "client is NULL");
    if ((rc = redlock__check_name(name)) != REDLOCK_OK)
        return rc;
    if (limit < 1)
        return redlock__fail(REDLOCK_EINVAL, "a semaphore needs at least 1 permit, not %d",
                             limit);
    if (limit > REDLOCK_SEMAPHORE_MAX_LIMIT)
        return redlock__fail(REDLOCK_EINVAL, "a semaphore has at most %d permits, not %d",
                             REDLOCK_SEMAPHORE_MAX_LIMIT, limit);
    if (opts && opts->kind != 0)
        return redlock__fail(REDLOCK_EINVAL, "a semaphore's options take no kind");
    if (opts && opts->quorum > 0 && c->n_nodes > 1 &&
        opts->quorum < safe_quorum(limit, c->n_nodes))
        return redlock__fail(REDLOCK_EINVAL,
                             "semaphore '%s': quorum %d of %zu nodes could let more than %d "
                             "permits out at once; it needs at least %d",
                             name, opts->quorum, c->n_nodes, limit,
                             safe_quorum(limit, c->n_nodes));
    if (!(s = calloc(1, sizeof(*s))))
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    s->client = c;
    s->limit = limit;
    s->n = c->n_nodes;
    if (opts)
        s->opts = *opts;
    s->opts.holder_command = NULL;
    if (s->opts.quorum == 0)
        s->opts.quorum = safe_quorum(limit, c->n_nodes);
    for (i = 0; i < s->n; i++) {
        s->members[i].node = i;
        s->members[i].name = name;
    }
    rc = redlock__lock_create(c, s->members, s->n, &s->opts, REDLOCK__KIND_SEMAPHORE, &s->probe);
    if (rc != REDLOCK_OK) {
        free(s);
        return rc;
    }
    /* The members' names now point into the probe's key blocks, which
     * live as long as the semaphore. */
    for (i = 0; i < s->n; i++)
        s->members[i].name = s->probe->members[i].name;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return REDLOCK_OK;
}

void redlock_semaphore_free(redlock_semaphore *s)
{
    if (!s)
        return;
    redlock_lock_free(s->probe);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

const char *redlock_semaphore_name(const redlock_semaphore *s)
{
    return s ? s->probe->members[0].name : "";
}

int redlock_semaphore_limit(const redlock_semaphore *s)
{
    return s ? s->limit : 0;
}

int redlock_semaphore_quorum(const redlock_semaphore *s)
{
    return s ? s->probe->quorum : 0;
}

void redlock_semaphore_set_on_lost(redlock_semaphore *s, redlock_on_lost_fn fn, void *ud)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->on_lost = fn;
    s->on_lost_ud = ud;
    pthread_mutex_unlock(&s->mu);
}

/* An owner no other permit of this client has: 63 random bits, never 0. */
static uint64_t permit_owner(void)
{
    return 1 + redlock__rand_below(UINT64_MAX >> 1);
}

int redlock_semaphore_acquire(redlock_semaphore *s, int permits, int64_t wait_ms,
                              int64_t lease_ms, redlock_permit **out)
{
    redlock_permit *p;
    redlock_lock *l;
    int rc;

    if (!out)
        return redlock__fail(REDLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (!s)
        return redlock__fail(REDLOCK_EINVAL, "semaphore is NULL");
    if (permits < 1 || permits > s->limit)
        return redlock__fail(REDLOCK_EINVAL,
                             "semaphore '%s': %d permits asked, the semaphore has %d",
                             redlock_semaphore_name(s), permits, s->limit);
    rc = redlock__lock_create(s->client, s->members, s->n, &s->opts, REDLOCK__KIND_SEMAPHORE, &l);
    if (rc != REDLOCK_OK)
        return rc;
    if (!(p = calloc(1, sizeof(*p)))) {
        redlock_lock_free(l);
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    }
    snprintf(l->permits, sizeof(l->permits), "%d", permits);
    snprintf(l->limit, sizeof(l->limit), "%d", s->limit);
    pthread_mutex_lock(&s->mu);
    l->on_lost = s->on_lost;
    l->on_lost_ud = s->on_lost_ud;
    pthread_mutex_unlock(&s->mu);
    p->lock = l;
    p->owner = permit_owner();
    redlock__owner_field(s->client, p->owner, p->id, sizeof(p->id));
    rc = redlock_acquire_as(l, p->owner, wait_ms, lease_ms);
    if (rc != REDLOCK_OK) {
        /* Keep the acquire's reason past the free. */
        char why[256];

        redlock__copy_msg(why, sizeof(why), redlock_last_error());
        redlock_lock_free(l);
        free(p);
        return redlock__fail(rc, "%s", why);
    }
    *out = p;
    return REDLOCK_OK;
}

int redlock_semaphore_release(redlock_permit *p)
{
    int rc;

    if (!p)
        return redlock__fail(REDLOCK_EINVAL, "permit is NULL");
    rc = redlock_unlock_as(p->lock, p->owner);
    {
        char why[256];

        redlock__copy_msg(why, sizeof(why), redlock_last_error());
        redlock_lock_free(p->lock);
        free(p);
        return rc == REDLOCK_OK ? REDLOCK_OK : redlock__fail(rc, "%s", why);
    }
}

const char *redlock_permit_id(const redlock_permit *p)
{
    return p ? p->id : "";
}

redlock_lock *redlock_permit_lock(const redlock_permit *p)
{
    return p ? p->lock : NULL;
}

int redlock_permit_remaining_ttl(redlock_permit *p, int64_t *ms)
{
    if (!p || !ms)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument");
    return redlock_remaining_ttl_as(p->lock, p->owner, ms);
}

/* ---- inspection ---- */

typedef struct sem_inspect_ctx {
    const redlock_lock *l;
    const redlock__plan *plan;
    redlock_semaphore_state *state;
    redlock_permit_info *holders;
    size_t cap;
} sem_inspect_ctx;

static int fill_sem_inspect(void *ud, size_t m, const char **argv, char **owned,
                            redlock__script_call *out)
{
    sem_inspect_ctx *x = ud;

    (void)owned;
    *out = redlock__script_sem_inspect(
        argv, &(redlock__sem_inspect_args){
                  .name = x->l->members[m].name,
                  .permits_key = redlock__key(&x->l->members[m], REDLOCK__KEY_AUX)});
    return 0;
}

static int on_sem_inspect(void *ud, size_t batch, size_t call, int err, const char *msg,
                          redisReply *r)
{
    sem_inspect_ctx *x = ud;
    redlock_semaphore_state *st = x->state;
    size_t i;

    (void)batch;
    (void)call;
    if (!err && r->type == REDIS_REPLY_ERROR) {
        err = redlock__server_error_code(r->str);
        msg = r->str;
    }
    if (!err && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->elements % 3 != 1)) {
        err = REDLOCK_EPROTO;
        msg = "sem_inspect.lua: unexpected reply";
    }
    if (err) {
        st->err = err;
        redlock__copy_msg(st->message, sizeof(st->message), msg);
        return 0;
    }
    st->reachable = 1;
    st->available = redlock__reply_i64(r->element[0]);
    for (i = 1; i + 2 < r->elements; i += 3) {
        const redisReply *id = r->element[i];
        int64_t permits = redlock__reply_i64(r->element[i + 1]);

        st->permits_taken += permits > 0 ? (size_t)permits : 0;
        if (st->holders < x->cap && id->type == REDIS_REPLY_STRING) {
            redlock_permit_info *h = &x->holders[st->holders];
            size_t len = id->len < sizeof(h->id) - 1 ? id->len : sizeof(h->id) - 1;

            memcpy(h->id, id->str, len);
            h->id[len] = '\0';
            h->permits = (int)permits;
            h->ms_left = redlock__reply_i64(r->element[i + 2]);
        }
        st->holders++;
    }
    return 0;
}

int redlock_semaphore_inspect(redlock_semaphore *s, size_t member,
                              redlock_semaphore_state *out, redlock_permit_info *holders,
                              size_t cap)
{
    unsigned char include[REDLOCK__MAX_NODES] = {0};
    sem_inspect_ctx x;
    redlock_client *c;
    redlock__plan p;
    int64_t timeout_ns;
    int rc;

    if (!s || !out || (cap && !holders) || member >= s->n)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument or member out of range");
    c = s->client;
    memset(out, 0, sizeof(*out));
    out->available = -1;
    include[member] = 1;
    x = (sem_inspect_ctx){s->probe, NULL, out, holders, cap};
    timeout_ns = (c->node_timeout_ms > 0 ? c->node_timeout_ms : INSPECT_TIMEOUT_MS) *
                 REDLOCK__NS_PER_MS;
    rc = redlock__plan_build(&p, s->probe, include, fill_sem_inspect, &x,
                             c->tp.ops->now_ns(c->tp.ctx) + timeout_ns);
    if (rc)
        return rc;
    x.plan = &p;
    redlock__fanout(c, p.batches, p.nb, on_sem_inspect, &x);
    redlock__plan_free(&p);
    if (!out->reachable)
        return redlock__fail(out->err ? out->err : REDLOCK_ETIMEOUT, "semaphore '%s': %s",
                             redlock_semaphore_name(s),
                             out->message[0] ? out->message : "no answer");
    return REDLOCK_OK;
}
