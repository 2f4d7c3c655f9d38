/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The watchdog: one thread per client renews every watchdog-leased hold
 * with one pipelined batch per node per tick, decides per lock whether a
 * quorum was genuinely renewed within validity, reports losses at once,
 * and retries releases that could not be delivered.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/util.h"
#include "core/wait.h"
#include "lock/context.h"
#include "lock/decide.h"
#include "lock/facts.h"
#include "lock/health.h"
#include "lock/hold.h"
#include "lock/quorum.h"
#include "lock/replicas.h"
#include "lock/retry.h"
#include "lock/internal.h"
#include "lock/watchdog.h"
#include "resp/script.h"

#define PENDING_RETRY_MS 100
#define PENDING_MAX_BACKOFF_MS 3200


/* A member's answer to its renewal. */
typedef enum renew_answer {
    ANSWER_NONE = 0,
    ANSWER_RENEWED,  /* our field was there */
    ANSWER_UNACKED,  /* renewed, the replicas' acknowledgement awaited */
    ANSWER_OTHER,    /* someone else holds the key */
    ANSWER_VANISHED, /* the key is gone */
    ANSWER_FAILED    /* no usable answer */
} renew_answer;

typedef struct held {
    redlock_lock *l;
    char field[64];
    char lease[24];
    int64_t lease_ms;
    int64_t validity_end_ns;
    int64_t acquired_ns;
    int64_t lag_ns;               /* how late the tick came for it */
    int free_later;               /* an on_lost callback freed it meanwhile */
    int genuine, other, vanished, failed;
    int facts;                    /* keep its holder facts alive too */
    unsigned char *member_answer; /* renew_answer per member */
} held;

typedef struct tick_call {
    held *h;                  /* renewal, or */
    redlock__pending *p;      /* background call, or */
    int probe;                /* a PING to see whether the node is back */
    int facts;                /* a holder facts PEXPIRE (answer ignored) */
    int wait;                 /* the node's WAIT behind acknowledged renewals */
    size_t member;
} tick_call;

typedef struct tick {
    held *held;
    size_t n_held;
    redlock__pending *pending;  /* taken off the client's list */
    redlock__batch *batches;
    size_t nb;
    redlock__call *calls;
    tick_call *tags;
    size_t *batch_start;
    const char **argv;
    unsigned char *pending_done;
    size_t n_pending;
    redlock__replica_wait *waits; /* per node, for holds with replica_acks */
    /* PING probes to nodes whose calls wait for them to answer. */
    unsigned char probe[REDLOCK__MAX_NODES];
    unsigned char probe_heard[REDLOCK__MAX_NODES];
    size_t n_probes;
} tick;

static int node_silent(void *ud, size_t node)
{
    return redlock__node_silent(ud, node);
}

/* Takes the holds due for renewal (and those due within the next sixth of
 * a lease, so renewals bunch into few ticks) and the background calls due
 * now. Called with wd->mu held. */
static int collect(redlock_client *c, tick *t, int64_t now)
{
    redlock__watchdog *wd = &c->wd;
    redlock_lock *l;
    size_t n = 0;

    for (l = wd->holds; l; l = l->wd_next)
        n++;
    t->held = calloc(n ? n : 1, sizeof(held));
    if (!t->held)
        return -1;
    for (l = wd->holds; l; l = l->wd_next) {
        held *h = &t->held[t->n_held];
        int due;

        pthread_mutex_lock(&l->mu);
        due = l->state == REDLOCK__HELD && l->watchdog &&
              l->next_renew_ns <= now + l->lease_ms * REDLOCK__NS_PER_MS / 6;
        if (due) {
            h->l = l;
            memcpy(h->field, l->field, sizeof(h->field));
            h->lease_ms = l->lease_ms;
            h->validity_end_ns = l->validity_end_ns;
            h->acquired_ns = l->acquired_ns;
            h->lag_ns = now > l->next_renew_ns ? now - l->next_renew_ns : 0;
            redlock__fmt_i64(h->lease, sizeof(h->lease), l->lease_ms);
        }
        pthread_mutex_unlock(&l->mu);
        if (due) {
            h->member_answer = calloc(l->n, 1);
            if (!h->member_answer)
                continue;
            h->facts = redlock__facts_wanted(l);
            __atomic_add_fetch(&l->wd_pins, 1, __ATOMIC_RELEASE);
            t->n_held++;
        }
    }
    return 0;
}

static int build(redlock_client *c, tick *t, int64_t deadline)
{
    static const char *const ping[] = {"PING"};
    size_t total = t->n_pending + 2 * REDLOCK__MAX_NODES, i, k = 0, node;
    redlock__pending *p;

    for (i = 0; i < t->n_held; i++)
        total += t->held[i].l->n * (t->held[i].facts ? 2 : 1);
    t->calls = calloc(total ? total : 1, sizeof(redlock__call));
    t->tags = calloc(total ? total : 1, sizeof(tick_call));
    t->argv = calloc((total ? total : 1) * REDLOCK__SCRIPT_MAX_ARGS, sizeof(char *));
    t->batches = calloc(c->n_nodes, sizeof(redlock__batch));
    t->batch_start = calloc(c->n_nodes, sizeof(size_t));
    t->pending_done = calloc(t->n_pending ? t->n_pending : 1, 1);
    t->waits = calloc(c->n_nodes, sizeof(*t->waits));
    if (!t->calls || !t->tags || !t->argv || !t->batches || !t->batch_start ||
        !t->pending_done || !t->waits)
        return -1;
    for (node = 0; node < c->n_nodes; node++) {
        size_t first = k, pi = 0;
        int acks = 0, wait_ms = 0, aof = 0;

        for (i = 0; i < t->n_held; i++) {
            held *h = &t->held[i];
            size_t m;

            for (m = 0; m < h->l->n; m++) {
                const char **argv = &t->argv[k * REDLOCK__SCRIPT_MAX_ARGS];

                if (h->l->members[m].node != node)
                    continue;
                redlock__script_call sc = redlock__script_renew(
                    argv, &(redlock__renew_args){
                              .name = h->l->members[m].name,
                              .lease_ms = h->lease,
                              .field = h->field,
                              .kind = h->l->kind,
                              .aux_key = h->l->kind == REDLOCK__KIND_SEMAPHORE
                                             ? redlock__key(&h->l->members[m], REDLOCK__KEY_AUX)
                                             : NULL});

                t->calls[k] = (redlock__call){sc.script, sc.nkeys, sc.argc, argv, NULL};
                t->tags[k].h = h;
                t->tags[k].member = m;
                k++;
                if (h->l->replica_acks > acks)
                    acks = h->l->replica_acks;
                if (h->l->replica_acks > 0 && h->l->replica_timeout_ms > wait_ms)
                    wait_ms = h->l->replica_timeout_ms;
                aof |= h->l->replica_acks > 0 && h->l->replica_wait_aof;
                if (h->facts) {
                    /* Plain PEXPIRE: facts are advisory, so a renewed hold
                     * whose facts are gone is still renewed. */
                    argv = &t->argv[k * REDLOCK__SCRIPT_MAX_ARGS];
                    argv[0] = "PEXPIRE";
                    argv[1] = redlock__key(&h->l->members[m], REDLOCK__KEY_FACTS);
                    argv[2] = h->lease;
                    t->calls[k] = (redlock__call){-1, 0, 3, argv, NULL};
                    t->tags[k].facts = 1;
                    k++;
                }
            }
        }
        if (node < REDLOCK__MAX_NODES && t->probe[node]) {
            t->calls[k] = (redlock__call){-1, 0, 1, ping, NULL};
            t->tags[k].probe = 1;
            t->tags[k].member = node;
            k++;
        }
        for (p = t->pending; p; p = p->next, pi++) {
            if (p->node != node)
                continue;
            t->calls[k] = (redlock__call){p->script, p->nkeys, p->argc,
                                          (const char *const *)p->argv, NULL};
            t->tags[k].p = p;
            t->tags[k].member = pi;
            k++;
        }
        /* Last, so it delays nothing else: one WAIT covers every renewal
         * before it on the connection, for the most replicas any of them
         * asks (each hold then compares with its own count). */
        if (acks > 0) {
            redlock__replica_wait_init(&t->waits[node], acks, wait_ms, aof);
            t->calls[k] = t->waits[node].call;
            t->tags[k].wait = 1;
            t->tags[k].member = node;
            k++;
        }
        if (k > first) {
            t->batch_start[t->nb] = first;
            t->batches[t->nb] = (redlock__batch){
                .node = node, .calls = &t->calls[first], .ncalls = k - first,
                .deadline_ns = deadline + (acks > 0 ? REDLOCK__REPLICA_WAIT_NS(wait_ms) : 0)};
            t->nb++;
        }
    }
    return 0;
}

/* A node's WAIT answered: the renewals before it in its batch that await
 * an acknowledgement become genuine, or fail. */
static void on_wait_reply(tick *t, size_t batch, const tick_call *wait, int err,
                          const char *msg, redisReply *r)
{
    size_t k, first = t->batch_start[batch], end = first + t->batches[batch].ncalls;
    char why[128];
    int code = REDLOCK_OK;
    int acked = redlock__replica_acks_of(&t->waits[wait->member], err, msg, r, &code, why,
                                         sizeof(why));

    for (k = first; k < end; k++) {
        tick_call *tag = &t->tags[k];

        if (!tag->h || tag->h->member_answer[tag->member] != ANSWER_UNACKED)
            continue;
        if (acked >= tag->h->l->replica_acks) {
            tag->h->member_answer[tag->member] = ANSWER_RENEWED;
            tag->h->genuine++;
        } else {
            tag->h->member_answer[tag->member] = ANSWER_FAILED;
            tag->h->failed++;
        }
    }
}

static int on_tick_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                         redisReply *r)
{
    tick *t = ud;
    tick_call *tag = &t->tags[t->batch_start[batch] + call];
    redlock__script_reply sr;

    if (tag->facts)
        return 0;
    if (tag->wait) {
        on_wait_reply(t, batch, tag, err, msg, r);
        return 0;
    }
    if (tag->probe) {
        if (!err && r->type != REDIS_REPLY_ERROR)
            t->probe_heard[tag->member] = 1;
        return 0;
    }
    if (tag->p) {
        /* Any definitive answer settles a background release, and so does
         * a refusal for good (a wrong type, no permission): sending it
         * again until it gives up would only hear the same refusal, and
         * keep a flush waiting. health.c has warned of it once. */
        if (!err && (r->type != REDIS_REPLY_ERROR ||
                     redlock__refuses_for_good(redlock__server_error_code(r->str))))
            t->pending_done[tag->member] = 1;
        return 0;
    }
    if (err)
        sr.kind = REDLOCK__REPLY_ERROR;
    else
        redlock__parse_renew(r, &sr);
    switch (sr.kind) {
    case REDLOCK__REPLY_RENEWED:
        /* Genuine only once its node's WAIT says the replicas have it. */
        if (tag->h->l->replica_acks > 0) {
            tag->h->member_answer[tag->member] = ANSWER_UNACKED;
            break;
        }
        tag->h->member_answer[tag->member] = ANSWER_RENEWED;
        tag->h->genuine++;
        break;
    case REDLOCK__REPLY_VANISHED:
        tag->h->member_answer[tag->member] = ANSWER_VANISHED;
        tag->h->vanished++;
        break;
    case REDLOCK__REPLY_OTHER:
        tag->h->member_answer[tag->member] = ANSWER_OTHER;
        tag->h->other++;
        break;
    default:
        tag->h->member_answer[tag->member] = ANSWER_FAILED;
        tag->h->failed++;
    }
    return 0;
}

/* Whom to tell of a loss: told by the tick, outside the lock's mutex, so
 * callbacks may use the lock. */
typedef struct lost_notice {
    redlock_on_lost_fn fn;
    void *ud;
    uint64_t owner;
    int64_t valid_until;
} lost_notice;

/* Decides one hold after its renewals. Returns the loss reason, or 0; on
 * a loss, gens gets the hold's generations per member, taken with the
 * verdict so the clean-up release can only drop this hold, and *notice
 * whom to tell. */
static int judge(redlock_client *c, held *h, int64_t t_tick, int64_t now,
                 unsigned char *restore, redlock__gens *gens, lost_notice *notice)
{
    redlock_lock *l = h->l;
    int64_t lease_ns = h->lease_ms * REDLOCK__NS_PER_MS;
    int64_t drift_ns = redlock__drift_ms(h->lease_ms, c->drift_factor) * REDLOCK__NS_PER_MS;
    int64_t retry = lease_ns / 10 < 500 * REDLOCK__NS_PER_MS ? lease_ns / 10
                                                               : 500 * REDLOCK__NS_PER_MS;
    redlock__renewal r;
    int reason = 0, margin_change = 0;
    size_t m;

    pthread_mutex_lock(&l->mu);
    if (l->state != REDLOCK__HELD || strcmp(l->field, h->field) != 0 ||
        l->acquired_ns != h->acquired_ns) {
        /* Unlocked (and perhaps locked again) since the renewals went out:
         * their answers are about a hold that is gone. */
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    memset(&r, 0, sizeof(r));
    r.n = (int)l->n;
    r.quorum = l->quorum;
    r.genuine = h->genuine;
    r.other = h->other;
    r.vanished = h->vanished;
    r.tick_ns = t_tick;
    r.now_ns = now;
    r.lease_ms = h->lease_ms;
    r.drift_ms = drift_ns / REDLOCK__NS_PER_MS;
    r.validity_end_ns = l->validity_end_ns;
    r.retry_ns = retry;
    r.held_ns = now - h->acquired_ns;
    r.max_hold_ns = c->max_hold_ms * REDLOCK__NS_PER_MS;
    switch (redlock__renewal_verdict(&r, &reason)) {
    case REDLOCK__VERDICT_RENEWED:
        l->validity_end_ns = t_tick + lease_ns - drift_ns;
        l->next_renew_ns = t_tick + lease_ns / 3;
        for (m = 0; m < l->n; m++)
            restore[m] = h->member_answer[m] == ANSWER_VANISHED;
        /* On exactly a quorum, one more failure loses the lock: worth an
         * operator's eye, once, and once more when the margin is back. */
        if ((h->genuine <= l->quorum && l->quorum < (int)l->n) != l->margin_lost) {
            l->margin_lost = !l->margin_lost;
            margin_change = l->margin_lost ? 1 : -1;
        }
        break;
    case REDLOCK__VERDICT_RETRY:
        l->next_renew_ns = now + retry;
        break;
    case REDLOCK__VERDICT_LOST:
        break;
    }
    if (reason) {
        for (m = 0; m < l->n; m++)
            gens[m] = l->members[m].gens;
        notice->owner = l->owner;
        notice->valid_until = l->validity_end_ns;
        notice->fn = l->state == REDLOCK__HELD ? l->on_lost : NULL;
        notice->ud = l->on_lost_ud;
        redlock__hold_mark_lost(l, reason);
    }
    pthread_mutex_unlock(&l->mu);
    /* Logged outside l->mu, like the notice. */
    if (margin_change > 0)
        redlock__log(c, REDLOCK_LOG_INFO,
                     "lock '%.200s' renewed on only %d of %zu members: one more failure and "
                     "it is lost", l->members[0].name, h->genuine, l->n);
    else if (margin_change < 0)
        redlock__log(c, REDLOCK_LOG_INFO, "lock '%.200s' renewed on %d of %zu members again",
                     l->members[0].name, h->genuine, l->n);
    return reason;
}

/*
 * Whether the clean-up release of a lost hold must wait for the end of
 * the validity its holder was given. Until then the holder may still act:
 * a loss for want of a quorum is declared up to a retry early so it can
 * stop in time, and a loss to vanished or foreign keys is seen at a tick,
 * up to two thirds of a lease early. Releasing at once would let another
 * owner in meanwhile unless others can take a quorum anyway (enough members
 * lost our key). The hold cap is the user's order to end the hold now.
 */
static int holder_still_excludes(const held *h, int reason)
{
    if (reason == REDLOCK_ENO_QUORUM)
        return 1;
    return reason == REDLOCK_ENOT_OWNER && h->other + h->vanished < h->l->quorum;
}

static void tick_free(tick *t)
{
    size_t i;

    for (i = 0; t->held && i < t->n_held; i++) {
        free(t->held[i].member_answer);
    }
    free(t->held);
    free(t->calls);
    free(t->tags);
    free(t->argv);
    free(t->batches);
    free(t->batch_start);
    free(t->pending_done);
    free(t->waits);
}

/* A batch of thousands of renewals keeps a server busy for milliseconds,
 * while the node timeout is sized for one script. Each batch gets an
 * allowance per call on top, capped at a third of the lease so a slow tick
 * still ends well inside validity (judge() counts from the tick's start);
 * without it every renewal of a large batch timed out and every hold was
 * reported lost. */
#define CALL_ALLOWANCE_NS 50000

static void stretch_deadlines(tick *t, int64_t t_tick, int64_t lease_ms)
{
    int64_t cap = t_tick + lease_ms * REDLOCK__NS_PER_MS / 3;
    size_t i;

    for (i = 0; i < t->nb; i++) {
        redlock__batch *b = &t->batches[i];
        int64_t d = b->deadline_ns + (int64_t)b->ncalls * CALL_ALLOWANCE_NS;

        if (d > cap)
            d = cap;
        if (d > b->deadline_ns)
            b->deadline_ns = d;
    }
}

/* Renewal lag into the histogram; one DEBUG line per tick that did anything. */
static void log_tick(redlock_client *c, const tick *t, size_t pending_left, int64_t took_ns)
{
    int64_t max_lag = 0;
    size_t i, probes = 0;

    for (i = 0; i < t->n_held; i++) {
        redlock__stats_observe_renewal_lag(c, t->held[i].lag_ns);
        if (t->held[i].lag_ns > max_lag)
            max_lag = t->held[i].lag_ns;
    }
    for (i = 0; i < REDLOCK__MAX_NODES; i++)
        probes += t->probe[i];
    if (t->n_held + t->n_pending + probes == 0)
        return;
    redlock__log(c, REDLOCK_LOG_DEBUG,
                 "watchdog tick: %zu holds renewed (max lag %lld ms), %zu background calls "
                 "(%zu still owed), %zu probes, %zu batches, %lld ms",
                 t->n_held, (long long)(max_lag / REDLOCK__NS_PER_MS), t->n_pending,
                 pending_left, probes, t->nb, (long long)(took_ns / REDLOCK__NS_PER_MS));
}

void redlock__watchdog_tick(redlock_client *c)
{
    const redlock__transport_ops *ops = c->tp.ops;
    int64_t t_tick = ops->now_ns(c->tp.ctx), now, deadline;
    int64_t lease_ms = c->watchdog_lease_ms;
    tick t;
    size_t i, left;

    memset(&t, 0, sizeof(t));
    pthread_mutex_lock(&c->wd.run_mu);
    redlock__watchdog_in_tick(1);
    pthread_mutex_lock(&c->wd.mu);
    if (collect(c, &t, t_tick) != 0) {
        pthread_mutex_unlock(&c->wd.mu);
        redlock__watchdog_in_tick(0);
        pthread_mutex_unlock(&c->wd.run_mu);
        return;
    }
    pthread_mutex_unlock(&c->wd.mu);
    /* Replies to calls left in flight wait in idle connections: read them
     * (without waiting), so a lost one is owed again within a tick. */
    if (redlock__retry_parked(&c->retry) && ops->drain)
        ops->drain(c->tp.ctx, t_tick);
    t.n_pending =
        redlock__retry_take(&c->retry, t_tick, 0, node_silent, c, &t.pending, t.probe);
    for (i = 0; i < t.n_held; i++)
        if (t.held[i].lease_ms < lease_ms)
            lease_ms = t.held[i].lease_ms;
    deadline = t_tick + redlock__node_timeout_ns(c, lease_ms);
    if (build(c, &t, deadline) == 0 && t.nb > 0) {
        stretch_deadlines(&t, t_tick, lease_ms);
        redlock__fanout(c, t.batches, t.nb, on_tick_reply, &t);
        redlock__stat_add(&c->stats.watchdog_ticks, 1);
        redlock__stat_add(&c->stats.watchdog_batches, t.nb);
        redlock__stat_add(&c->stats.renewals, t.n_held);
    }
    now = ops->now_ns(c->tp.ctx);
    for (i = 0; i < t.n_held; i++) {
        held *h = &t.held[i];
        unsigned char restore[REDLOCK__MAX_NODES] = {0};
        redlock__gens gens[REDLOCK__MAX_NODES];
        lost_notice notice = {0};
        int reason = judge(c, h, t_tick, now, restore, gens, &notice);
        size_t m;
        int any = 0;

        if (reason) {
            int64_t give_up = now + h->lease_ms * REDLOCK__NS_PER_MS;
            int a, b, d;

            redlock__watchdog_drop(h->l);
            /* Release what is left so others need not wait for the lease,
             * but not before the validity the holder was given ends, while
             * what is left still keeps others out (see above). That
             * release is only queued, so the holder hears after it is owed
             * (a flush from on_lost counts it); a release sent now waits
             * for the nodes, so the holder hears first. */
            if (holder_still_excludes(h, reason) && notice.valid_until > now) {
                redlock__release_members_after(h->l, h->field, (const redlock__gens *)gens,
                                               h->lease_ms, notice.valid_until, give_up);
                if (notice.fn)
                    notice.fn(notice.ud, h->l, notice.owner, reason);
            } else {
                if (notice.fn)
                    notice.fn(notice.ud, h->l, notice.owner, reason);
                redlock__release_members(h->l, h->field, (const redlock__gens *)gens,
                                         h->lease_ms, 1, 0, give_up, &a, &b, &d);
            }
            continue;
        }
        for (m = 0; m < h->l->n; m++)
            any |= restore[m];
        /* Restore the fault margin only while the lock is valid and the
         * genuine renewals alone reach the quorum (judge checked both). */
        if (any)
            redlock__restore_members(h->l, h->field, h->lease_ms, restore,
                                     now + redlock__node_timeout_ns(c, h->lease_ms));
    }
    left = redlock__retry_settle(&c->retry, t.pending, t.pending_done, t.probe, t.probe_heard,
                                 now);
    t.pending = NULL;
    log_tick(c, &t, left, now - t_tick);
    /* Read while still pinned: once unpinned, a handle not freed from a
     * callback may be freed by its owner at any moment (its release does
     * not wait for the mutex when nothing pins it). */
    for (i = 0; i < t.n_held; i++)
        t.held[i].free_later = t.held[i].l->wd_free_later;
    pthread_mutex_lock(&c->wd.mu);
    for (i = 0; i < t.n_held; i++)
        __atomic_sub_fetch(&t.held[i].l->wd_pins, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&c->wd.cond);
    pthread_mutex_unlock(&c->wd.mu);
    /* Only this tick pinned them (one tick at a time), so they are free
     * of every tick now: the handle's own free runs now, the whole of it
     * (its subscriptions, its facts, and on a loop the operations still
     * in flight on it, which end canceled before the loop frees it). */
    for (i = 0; i < t.n_held; i++)
        if (t.held[i].free_later)
            redlock_lock_free(t.held[i].l);
    tick_free(&t);
    redlock__watchdog_in_tick(0);
    pthread_mutex_unlock(&c->wd.run_mu);
}

/* Sends everything owed, whatever the back-off, and settles it; what a
 * tick has in flight right now it settles itself. Returns what is left. */
static size_t flush_pending(redlock_client *c, int64_t now, int64_t deadline)
{
    size_t left;
    tick t;

    memset(&t, 0, sizeof(t));
    t.n_pending = redlock__retry_take(&c->retry, now, 1, NULL, NULL, &t.pending, NULL);
    if (t.n_pending > 0 && build(c, &t, deadline) == 0 && t.nb > 0)
        redlock__fanout(c, t.batches, t.nb, on_tick_reply, &t);
    /* Settled even when nothing could be sent (out of memory): the calls
     * go back to the queue rather than vanish. */
    left = t.pending ? redlock__retry_settle(&c->retry, t.pending, t.pending_done, NULL, NULL,
                                             c->tp.ops->now_ns(c->tp.ctx))
                     : 0;
    tick_free(&t);
    return left;
}

/* Sleeps until the transport's clock reaches until_ns (a signal or a
 * kick may end one sleep early). 0 when it did, -1 when the real clock
 * got there and the transport's did not (a clock of its own, as in the
 * unit tests' fake transport). */
static int sleep_until(redlock_client *c, int64_t until_ns)
{
    const redlock__transport_ops *ops = c->tp.ops;
    int64_t now = ops->now_ns(c->tp.ctx);
    int64_t real_end = redlock__now_ns() + (until_ns - now);

    while (now < until_ns) {
        if (redlock__now_ns() >= real_end)
            return -1;
        redlock__wait_until(real_end);
        now = ops->now_ns(c->tp.ctx);
    }
    return 0;
}

/* Calls a tick on the watchdog's thread (or the I/O thread) took and has
 * not settled: they are in flight there, and may come back owed. Waits
 * for them in short naps, up to deadline, and returns whether there were
 * any. Not inside the tick (a flush from on_lost: the tick waits for it),
 * and not where the tick is a fiber of this thread's loop, which waiting
 * here stops. */
static int wait_tick_in_flight(redlock_client *c, int64_t deadline)
{
    const redlock__transport_ops *ops = c->tp.ops;
    int waited = 0;

    if (redlock__watchdog_ticking_here() ||
        (c->event_loop && !c->event_loop_watchdog_thread && !redlock__io_elsewhere(c)))
        return 0;
    while (redlock__retry_in_flight(&c->retry) > 0 && ops->now_ns(c->tp.ctx) < deadline) {
        waited = 1;
        if (sleep_until(c, ops->now_ns(c->tp.ctx) + REDLOCK__NS_PER_MS) != 0)
            break;
    }
    return waited;
}

/* Releases parked on an I/O thread's shared connections: only that
 * thread reads them, so another thread's flush waits for it to settle
 * them, in short naps, up to deadline. */
static void wait_io_parked(redlock_client *c, int64_t deadline)
{
    const redlock__transport_ops *ops = c->tp.ops;

    while (redlock__io_elsewhere(c) && redlock__retry_parked(&c->retry) > 0 &&
           ops->now_ns(c->tp.ctx) < deadline)
        if (sleep_until(c, ops->now_ns(c->tp.ctx) + REDLOCK__NS_PER_MS) != 0)
            break;
}

/* The owed calls go first; then the calls left in flight wait for their
 * answers. One whose connection closed first is owed: sent in what time
 * remains (with what the first round left, but only then). */
int redlock__watchdog_flush(redlock_client *c, int timeout_ms)
{
    const redlock__transport_ops *ops = c->tp.ops;
    int64_t now = ops->now_ns(c->tp.ctx);
    int64_t deadline = now + (int64_t)timeout_ms * REDLOCK__NS_PER_MS;
    size_t left = flush_pending(c, now, deadline), held_back;
    int64_t next_held;
    uint64_t lost = redlock__retry_lost(&c->retry);

    /* A clean-up release held back to the end of a lost hold's validity
     * is worth waiting for while the deadline allows: it goes with the
     * rest, never before its time. Not from on_lost: the tick, and every
     * other hold's renewal, would wait with it. The watchdog's own tick
     * may take it at that same moment; then it is waited for there. */
    while (!redlock__watchdog_ticking_here() &&
           (next_held = redlock__retry_held_back_until(&c->retry, now, &held_back)) <= deadline) {
        if (sleep_until(c, next_held) != 0)
            break;
        wait_tick_in_flight(c, deadline);
        now = ops->now_ns(c->tp.ctx);
        left = flush_pending(c, now, deadline);
    }
    if (redlock__retry_parked(&c->retry) && ops->drain) {
        ops->drain(c->tp.ctx, deadline);
        wait_io_parked(c, deadline);
        if (redlock__retry_lost(&c->retry) != lost && ops->now_ns(c->tp.ctx) < deadline)
            left = flush_pending(c, ops->now_ns(c->tp.ctx), deadline);
    }
    /* What a tick had in flight and could not deliver is owed again: it
     * goes once more in what time remains. */
    if (wait_tick_in_flight(c, deadline) && ops->now_ns(c->tp.ctx) < deadline)
        left = flush_pending(c, ops->now_ns(c->tp.ctx), deadline);
    redlock__retry_held_back_until(&c->retry, ops->now_ns(c->tp.ctx), &held_back);
    left += redlock__retry_parked(&c->retry) + redlock__retry_in_flight(&c->retry) + held_back;
    if (left)
        return redlock__fail(REDLOCK_ETIMEOUT, "%zu calls still unanswered after %d ms", left,
                             timeout_ms);
    return REDLOCK_OK;
}
