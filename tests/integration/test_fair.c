/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration tests of fair locks (redlock_lock_options.kind FAIR) on the
 * fixture's plain redis-server processes: grants in arrival order at
 * N = 1 and N = 5 (one client and two), woken by messages; no deadlock
 * when every node's queue list is in a different order; a SIGKILLed
 * waiter at the head; waiters that give up (deadline, cancel) leave every
 * queue at once; a lost wake-up; re-entry and fencing tokens. Redisson's
 * RFairLock scripts against ours are in test_fair_redisson.c.
 *
 * What the nodes store is read with hiredis connections of the test's own
 * (redis-cli would be too slow for the "at once" checks). Each case is its
 * own TCase whose unchecked fixture thaws and restarts nodes.
 */
#include "redlock/redlock.h"
#include "rig_env.h"
#include "rw_support.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOLDER 1
#define WAITER_BASE 100
/* A short place: a dead waiter's lapses soon, and a waiter renews (and so
 * notices a lost wake-up) every third of it. */
#define SHORT_PLACE_MS 1500

static redlock_lock *fair_handle(redlock_client *c, const char *name, int place_ms, int fencing)
{
    redlock_lock_options lo;
    redlock_lock *l = NULL;
    int rc;

    memset(&lo, 0, sizeof(lo));
    lo.kind = REDLOCK_LOCK_FAIR;
    lo.fair_wait_lease_ms = place_ms;
    lo.fencing = fencing;
    rc = redlock_lock_new(c, name, &lo, &l);
    ck_assert_msg(rc == REDLOCK_OK, "lock_new(fair): %s", redlock_last_error());
    return l;
}

/* ------------------------------------------------------------------------ */
/* What the first n nodes store for one fair lock. */

typedef struct probe {
    redisContext *ctx[N_NODES];
    size_t n;
    char name[64], queue[96], timeouts[96], tickets[96], lapses[96], channel[96];
} probe;

static void probe_open(probe *p, size_t n, const char *name)
{
    size_t i;

    memset(p, 0, sizeof(*p));
    p->n = n;
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->queue, sizeof(p->queue), "redisson_lock_queue:{%s}", name);
    snprintf(p->timeouts, sizeof(p->timeouts), "redisson_lock_timeout:{%s}", name);
    snprintf(p->tickets, sizeof(p->tickets), "redlock_fair:{%s}", name);
    snprintf(p->lapses, sizeof(p->lapses), "redlock_fairlapse:{%s}", name);
    snprintf(p->channel, sizeof(p->channel), "redisson_lock__channel:{%s}", name);
    for (i = 0; i < n; i++)
        p->ctx[i] = node_conn(i);
}

static void probe_close(probe *p)
{
    size_t i;

    for (i = 0; i < p->n; i++)
        redisFree(p->ctx[i]);
}

static redisReply *ask(probe *p, size_t node, const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = redisvCommand(p->ctx[node], fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "node %zu: %s", node, p->ctx[node]->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "node %zu: %s", node, r->str);
    return r;
}

static long long ask_int(probe *p, size_t node, const char *fmt, const char *a, const char *b)
{
    redisReply *r = ask(p, node, fmt, a, b);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;

    freeReplyObject(r);
    return v;
}

/* Whether key's sorted set has no member named member on node. */
static int no_member(probe *p, size_t node, const char *key, const char *member)
{
    redisReply *r = ask(p, node, "ZSCORE %s %s", key, member);
    int none = r->type == REDIS_REPLY_NIL;

    freeReplyObject(r);
    return none;
}

/* Whether node's queue list has *(long long *)len entries. */
static int queue_has_len(probe *p, size_t node, const void *len)
{
    return ask_int(p, node, "LLEN %s", p->queue, NULL) == *(const long long *)len;
}

/* Whether field has nothing on node: no place in the list, no timeout,
 * no ticket. */
static int no_trace(probe *p, size_t node, const void *field)
{
    redisReply *pos = ask(p, node, "LPOS %s %s", p->queue, field);
    redisReply *lapse = ask(p, node, "ZSCORE %s %s", p->timeouts, field);
    redisReply *ticket = ask(p, node, "ZSCORE %s %s", p->tickets, field);
    int none = pos->type == REDIS_REPLY_NIL && lapse->type == REDIS_REPLY_NIL &&
               ticket->type == REDIS_REPLY_NIL;

    freeReplyObject(pos);
    freeReplyObject(lapse);
    freeReplyObject(ticket);
    return none;
}

/* Whether node has none of the lock, its list and its sorted sets. */
static int nothing_left(probe *p, size_t node, const void *unused)
{
    redisReply *r = ask(p, node, "EXISTS %s %s %s %s", p->name, p->queue, p->timeouts,
                        p->tickets);
    int none = r->integer == 0;

    (void)unused;
    freeReplyObject(r);
    return none;
}

/* Polls until ok holds on every node; ms it took, or -1 after timeout_ms. */
static int64_t wait_every_node(probe *p, int (*ok)(probe *, size_t, const void *),
                               const void *arg, int64_t timeout_ms)
{
    int64_t t0 = rig_now_ms();
    size_t i;

    for (;;) {
        for (i = 0; i < p->n && ok(p, i, arg); i++)
            ;
        if (i == p->n)
            return rig_now_ms() - t0;
        if (rig_now_ms() - t0 > timeout_ms)
            return -1;
        rig_sleep_ms(2);
    }
}

static int64_t wait_queue_len(probe *p, long long len, int64_t timeout_ms)
{
    return wait_every_node(p, queue_has_len, &len, timeout_ms);
}

static int64_t wait_traces_gone(probe *p, const char *field, int64_t timeout_ms)
{
    return wait_every_node(p, no_trace, field, timeout_ms);
}

/* Which nodes' lock hash holds field; how many do. */
static int held_on(probe *p, const char *field, unsigned char *held)
{
    int count = 0;
    size_t i;

    for (i = 0; i < p->n; i++) {
        held[i] = ask_int(p, i, "HEXISTS %s %s", p->name, field) == 1;
        count += held[i];
    }
    return count;
}

/* Sleeps until field's place has lapsed on every node that still has one
 * (by each node's own clock, as the scripts judge it). */
static void sleep_past_lapse(probe *p, const char *field)
{
    int64_t longest_ms = 0;
    size_t i;

    for (i = 0; i < p->n; i++) {
        redisReply *score = ask(p, i, "ZSCORE %s %s", p->lapses, field);
        redisReply *now = ask(p, i, "TIME");
        int64_t now_ms = atoll(now->element[0]->str) * 1000 + atoll(now->element[1]->str) / 1000;

        if (score->type == REDIS_REPLY_STRING && atoll(score->str) - now_ms > longest_ms)
            longest_ms = atoll(score->str) - now_ms;
        freeReplyObject(score);
        freeReplyObject(now);
    }
    ck_assert_int_le(longest_ms, SHORT_PLACE_MS);
    rig_sleep_ms(longest_ms + 2);
}

/* Polls until no node has anything of the lock; prints what is left
 * after timeout_ms, and returns -1 then. */
static int64_t wait_all_empty(probe *p, int64_t timeout_ms)
{
    int64_t took = wait_every_node(p, nothing_left, NULL, timeout_ms);
    size_t i, k;

    for (i = 0; took < 0 && i < p->n; i++) {
        redisReply *h = ask(p, i, "HGETALL %s", p->name);
        redisReply *q = ask(p, i, "LRANGE %s 0 -1", p->queue);
        redisReply *t = ask(p, i, "ZRANGE %s 0 -1 WITHSCORES", p->timeouts);
        redisReply *f = ask(p, i, "ZRANGE %s 0 -1 WITHSCORES", p->tickets);

        fprintf(stderr, "node %zu left:", i);
        for (k = 0; k < h->elements; k++)
            fprintf(stderr, " hash %s", h->element[k]->str);
        for (k = 0; k < q->elements; k++)
            fprintf(stderr, " queue %s", q->element[k]->str);
        for (k = 0; k < t->elements; k++)
            fprintf(stderr, " timeout %s", t->element[k]->str);
        for (k = 0; k < f->elements; k++)
            fprintf(stderr, " ticket %s", f->element[k]->str);
        fprintf(stderr, "\n");
        freeReplyObject(h);
        freeReplyObject(q);
        freeReplyObject(t);
        freeReplyObject(f);
    }
    return took;
}

/* ------------------------------------------------------------------------ */
/* Waiters that hold briefly and record the order they were granted in. */

#define MAX_WAITERS 8
#define HOLD_MS 50

typedef struct grant_log {
    atomic_int next;              /* the next grant position */
    atomic_int inside, overlaps;  /* holders at once; more than one is a bug */
    int order[MAX_WAITERS];       /* waiter index by grant position */
    uint64_t tokens[MAX_WAITERS]; /* fencing token by grant position */
    int64_t granted_us[MAX_WAITERS];
} grant_log;

typedef struct waiter {
    grant_log *log;
    redlock_lock *l;
    int idx, fencing;
    int64_t wait_ms, lease_ms;
    int rc, token_rc, unlock_rc;
    pthread_t th;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    uint64_t owner = WAITER_BASE + (uint64_t)w->idx;
    int pos;

    w->rc = redlock_acquire_as(w->l, owner, w->wait_ms, w->lease_ms);
    if (w->rc != REDLOCK_OK)
        return NULL;
    if (atomic_fetch_add(&w->log->inside, 1) != 0)
        atomic_fetch_add(&w->log->overlaps, 1);
    pos = atomic_fetch_add(&w->log->next, 1);
    w->log->order[pos] = w->idx;
    w->log->granted_us[pos] = rig_now_us();
    if (w->fencing)
        w->token_rc = redlock_lock_token_as(w->l, owner, &w->log->tokens[pos]);
    rig_sleep_ms(HOLD_MS);
    atomic_fetch_sub(&w->log->inside, 1);
    w->unlock_rc = redlock_unlock_as(w->l, owner);
    return NULL;
}

static void waiter_start(waiter *w, grant_log *log, redlock_lock *l, int idx, int64_t wait_ms,
                         int64_t lease_ms, int fencing)
{
    *w = (waiter){.log = log, .l = l, .idx = idx, .fencing = fencing, .wait_ms = wait_ms,
                  .lease_ms = lease_ms};
    ck_assert_int_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

static void waiter_join_ok(waiter *w)
{
    pthread_join(w->th, NULL);
    ck_assert_msg(w->rc == REDLOCK_OK, "waiter %d: %s", w->idx, redlock_err_name(w->rc));
    ck_assert_msg(w->token_rc == REDLOCK_OK, "waiter %d: token: %s", w->idx,
                  redlock_err_name(w->token_rc));
    ck_assert_msg(w->unlock_rc == REDLOCK_OK, "waiter %d: unlock: %s", w->idx,
                  redlock_err_name(w->unlock_rc));
}

/* ------------------------------------------------------------------------ */
/* 1. First come, first served, handed over by messages; fencing tokens
 *    grow from holder to holder. */

#define K_WAITERS 6
/* A long place: a waiter renews only every 10 s and the leases are as
 * long, so only a release message can hand the lock over within the
 * bound below. */
#define FIFO_PLACE_MS 30000
#define FIFO_LEASE_MS 30000

static void fifo(size_t n, int n_clients, int fencing)
{
    redlock_client *c[2];
    redlock_lock *holder, *l[K_WAITERS];
    waiter w[K_WAITERS];
    grant_log *log = calloc(1, sizeof(*log));
    uint64_t holder_token = 0;
    char name[64];
    probe p;
    int64_t released_us, total_ms, bound_ms = FIFO_PLACE_MS / 3 / 2;
    int i;

    ck_assert_ptr_nonnull(log);
    rig_unique_name(name, sizeof(name), "fair", n == 1 ? "fifo1" : "fifo5");
    probe_open(&p, n, name);
    for (i = 0; i < n_clients; i++)
        c[i] = client_over(n);
    holder = fair_handle(c[0], name, FIFO_PLACE_MS, fencing);
    acquire_ok(holder, HOLDER, 0, FIFO_LEASE_MS);
    if (fencing)
        ck_assert_int_eq(redlock_lock_token_as(holder, HOLDER, &holder_token), REDLOCK_OK);
    /* Each waiter starts once the previous one is queued everywhere, so
     * the arrival order is known. */
    for (i = 0; i < K_WAITERS; i++) {
        l[i] = fair_handle(c[i % n_clients], name, FIFO_PLACE_MS, fencing);
        waiter_start(&w[i], log, l[i], i, 20000, FIFO_LEASE_MS, fencing);
        ck_assert_msg(wait_queue_len(&p, i + 1, 5000) >= 0, "waiter %d never queued", i);
    }
    released_us = rig_now_us();
    unlock_ok(holder, HOLDER);
    for (i = 0; i < K_WAITERS; i++)
        waiter_join_ok(&w[i]);

    ck_assert_int_eq(atomic_load(&log->next), K_WAITERS);
    ck_assert_int_eq(atomic_load(&log->overlaps), 0);
    for (i = 0; i < K_WAITERS; i++)
        fprintf(stderr, "fifo n=%zu clients=%d: grant %d to waiter %d, %lld ms after the "
                        "previous one\n", n, n_clients, i, log->order[i],
                (long long)(log->granted_us[i] - (i ? log->granted_us[i - 1] : released_us)) /
                    1000);
    for (i = 0; i < K_WAITERS; i++)
        ck_assert_msg(log->order[i] == i, "grant %d went to waiter %d", i, log->order[i]);
    if (fencing) {
        ck_assert_msg(log->tokens[0] > holder_token, "token %llu after the holder's %llu",
                      (unsigned long long)log->tokens[0], (unsigned long long)holder_token);
        for (i = 1; i < K_WAITERS; i++)
            ck_assert_msg(log->tokens[i] > log->tokens[i - 1], "token %d: %llu after %llu", i,
                          (unsigned long long)log->tokens[i],
                          (unsigned long long)log->tokens[i - 1]);
    }
    /* A waiter that missed its message would sleep ~10 s (its renewal or
     * the previous holder's lease): the whole hand-off chain must take
     * far less than one renewal period. */
    total_ms = (log->granted_us[K_WAITERS - 1] - released_us) / 1000;
    fprintf(stderr, "fifo n=%zu clients=%d: %d hand-offs in %lld ms\n", n, n_clients,
            K_WAITERS, (long long)total_ms);
    ck_assert_msg(total_ms < bound_ms, "%d hand-offs took %lld ms (renewals every %d ms)",
                  K_WAITERS, (long long)total_ms, FIFO_PLACE_MS / 3);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    for (i = 0; i < K_WAITERS; i++)
        redlock_lock_free(l[i]);
    redlock_lock_free(holder);
    for (i = 0; i < n_clients; i++)
        redlock_client_free(c[i]);
    probe_close(&p);
    free(log);
}

START_TEST(test_fifo_single)
{
    fifo(1, 1, 0);
}
END_TEST

START_TEST(test_fifo_quorum_fenced)
{
    fifo(N_NODES, 1, 1);
}
END_TEST

START_TEST(test_fifo_single_two_clients_fenced)
{
    fifo(1, 2, 1);
}
END_TEST

START_TEST(test_fifo_quorum_two_clients)
{
    fifo(N_NODES, 2, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 2. Every node's list in a different order: the ticket order decides. */

/* Moves field to the head of the queue list on one node. */
static void move_to_head(probe *p, size_t node, const char *field)
{
    freeReplyObject(ask(p, node,
                        "EVAL %s 1 %s %s",
                        "redis.call('lrem', KEYS[1], 0, ARGV[1]) "
                        "return redis.call('lpush', KEYS[1], ARGV[1])",
                        p->queue, field));
}

START_TEST(test_disordered_lists_no_deadlock)
{
    redlock_client *c = client_over(N_NODES);
    redlock_lock *holder, *l[3];
    waiter w[3];
    grant_log *log = calloc(1, sizeof(*log));
    /* Node i's head: A on nodes 0-1, B on 2-3, C on 4; none a majority. */
    const int head_of[N_NODES] = {0, 0, 1, 1, 2};
    char name[64], field[3][FIELD_CAP];
    int64_t released_us, took_ms;
    probe p;
    size_t i;
    int k;

    ck_assert_ptr_nonnull(log);
    rig_unique_name(name, sizeof(name), "fair", "disorder");
    probe_open(&p, N_NODES, name);
    holder = fair_handle(c, name, 0, 0);
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    for (k = 0; k < 3; k++) {
        l[k] = fair_handle(c, name, 0, 0);
        rig_field_of(c, WAITER_BASE + (uint64_t)k, field[k], sizeof(field[k]));
        waiter_start(&w[k], log, l[k], k, 15000, LEASE_MS, 0);
        ck_assert_msg(wait_queue_len(&p, k + 1, 5000) >= 0, "waiter %d never queued", k);
    }
    for (i = 0; i < N_NODES; i++) {
        redisReply *r;

        move_to_head(&p, i, field[head_of[i]]);
        r = ask(&p, i, "LINDEX %s %s", p.queue, "0");
        ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
        ck_assert_str_eq(r->str, field[head_of[i]]);
        freeReplyObject(r);
        ck_assert_int_eq(ask_int(&p, i, "LLEN %s", p.queue, NULL), 3);
    }
    released_us = rig_now_us();
    unlock_ok(holder, HOLDER);
    for (k = 0; k < 3; k++)
        waiter_join_ok(&w[k]);
    took_ms = (log->granted_us[2] - released_us) / 1000;
    fprintf(stderr, "disordered lists: all three granted %lld ms after the release, order "
                    "%d %d %d\n", (long long)took_ms, log->order[0], log->order[1],
            log->order[2]);
    ck_assert_int_eq(atomic_load(&log->overlaps), 0);
    ck_assert_msg(took_ms < 5000, "the three grants took %lld ms", (long long)took_ms);
    for (k = 0; k < 3; k++)
        ck_assert_msg(log->order[k] == k, "grant %d went to waiter %d (tickets A < B < C)", k,
                      log->order[k]);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    for (k = 0; k < 3; k++)
        redlock_lock_free(l[k]);
    redlock_lock_free(holder);
    redlock_client_free(c);
    probe_close(&p);
    free(log);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 3. A waiter SIGKILLed at the head of the queue. */

#define CHILD_OWNER 77 /* its field ends in ":77" */

/* The child: its own client over every node; waits for the go, then for
 * the lock until it is killed. */
static void child_queue_up(const char *name, int rfd)
{
    redlock_options o = {.node_timeout_ms = NODE_TIMEOUT_MS};
    redlock_client *c = NULL;
    redlock_lock *l = NULL;
    redlock_lock_options lo = {.kind = REDLOCK_LOCK_FAIR, .fair_wait_lease_ms = SHORT_PLACE_MS};
    struct pollfd pfd = {.fd = rfd, .events = POLLIN};
    char go;

    if (redlock_client_new(&c, rig_plain_uris(), N_NODES, &o) != REDLOCK_OK ||
        redlock_lock_new(c, name, &lo, &l) != REDLOCK_OK)
        _exit(3);
    if (poll(&pfd, 1, 10000) != 1 || read(rfd, &go, 1) != 1)
        _exit(4);
    /* Killed long before this returns; a grant would be a bug. */
    _exit(redlock_acquire_as(l, CHILD_OWNER, 30000, LEASE_MS) == REDLOCK_OK ? 5 : 0);
}

/* The field at the head of node 0's queue, which must end in suffix (a
 * child's owner id: its client id is its own). */
static void head_field(probe *p, char *out, size_t cap, const char *suffix)
{
    redisReply *r = ask(p, 0, "LINDEX %s %s", p->queue, "0");

    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    snprintf(out, cap, "%s", r->str);
    freeReplyObject(r);
    ck_assert_str_eq(strrchr(out, ':'), suffix);
}

/* Forks a child that runs body(name, read end of a pipe) and never
 * returns; *go gets the write end, on which one byte starts it. Forked
 * before this process has a client (and its threads). */
static pid_t fork_child(void (*body)(const char *, int), const char *name, int *go)
{
    int fds[2];
    pid_t pid;

    rig_plain_uris(); /* read the rig file before forking */
    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[1]);
        body(name, fds[0]);
        _exit(6);
    }
    close(fds[0]);
    *go = fds[1];
    return pid;
}

START_TEST(test_dead_waiter_at_head)
{
    redlock_client *c;
    redlock_lock *holder, *second;
    char name[64], child_field[FIELD_CAP], second_field[FIELD_CAP];
    int to_child[2], status = 0;
    unsigned char held[N_NODES];
    size_t i;
    bg_acquire b;
    int64_t killed_us, released_us, after_release_ms, after_kill_ms;
    redisReply *r;
    probe p;
    pid_t pid;

    rig_unique_name(name, sizeof(name), "fair", "dead");
    pid = fork_child(child_queue_up, name, &to_child[1]);
    probe_open(&p, N_NODES, name);
    c = client_over(N_NODES);
    holder = fair_handle(c, name, SHORT_PLACE_MS, 0);
    second = fair_handle(c, name, SHORT_PLACE_MS, 0);
    rig_field_of(c, W1, second_field, sizeof(second_field));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    ck_assert_int_eq(write(to_child[1], "g", 1), 1);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the child never queued");
    head_field(&p, child_field, sizeof(child_field), ":77");
    bg_start(&b, second, W1, 15000);
    ck_assert_msg(wait_queue_len(&p, 2, 5000) >= 0, "the second waiter never queued");
    r = ask(&p, 0, "LINDEX %s %s", p.queue, "0");
    ck_assert_str_eq(r->str, child_field); /* the dead waiter is first */
    freeReplyObject(r);

    killed_us = rig_now_us();
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(to_child[1]);
    released_us = rig_now_us();
    unlock_ok(holder, HOLDER);
    pthread_join(b.th, NULL);
    after_release_ms = (b.done_us - released_us) / 1000;
    after_kill_ms = (b.done_us - killed_us) / 1000;
    fprintf(stderr, "dead head: the second waiter got it %lld ms after the release, %lld ms "
                    "after the kill\n", (long long)after_release_ms, (long long)after_kill_ms);
    ck_assert_msg(b.rc == REDLOCK_OK, "second waiter: %s", redlock_err_name(b.rc));
    ck_assert_msg(after_release_ms <= SHORT_PLACE_MS + 1000, "granted %lld ms after the release",
                  (long long)after_release_ms);
    /* Not before the dead waiter's place lapsed: it was renewed at most a
     * third of a place (500 ms) before the kill, so it lasted at least
     * 1000 ms more; 500 ms leaves room for a slow renewal. */
    ck_assert_msg(after_kill_ms >= SHORT_PLACE_MS / 3, "granted %lld ms after the kill: the "
                  "dead waiter's place had not lapsed", (long long)after_kill_ms);
    /* Where the second waiter holds, its grant dropped the dead one and
     * its own place. A member that refused it (the dead waiter's last
     * renewal reached it later than the others) keeps both until the
     * next script there after its place lapsed: the release below. */
    ck_assert_int_ge(held_on(&p, second_field, held), N_NODES / 2 + 1);
    for (i = 0; i < N_NODES; i++) {
        if (!held[i])
            continue;
        ck_assert_msg(no_trace(&p, i, child_field),
                      "node %zu granted, but the dead waiter is still in its queue, its timeouts "
                      "or its tickets", i);
        ck_assert_msg(no_trace(&p, i, second_field),
                      "node %zu granted, but the granted waiter is still queued there", i);
    }
    sleep_past_lapse(&p, child_field);
    unlock_ok(second, W1);
    ck_assert_msg(wait_traces_gone(&p, child_field, 2000) >= 0,
                  "after the release, the dead waiter is still in a queue, a timeout or a "
                  "ticket set");
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(second);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* redlock_force_unlock() on a fair lock wakes the first waiter on its own
 * channel, as Redisson's RFairLock.forceUnlock does, also through a plain
 * handle (`redlock unlock --force` uses one). It used to publish on the
 * bare prefix, where no fair waiter listens: the waiter learned of it at
 * its next renewal, a third of its place (1 s here) after it queued. */
#define FORCE_WAKE_WITHIN_MS 300

START_TEST(test_force_unlock_wakes_first_waiter)
{
    redlock_client *c = client_over(N_NODES);
    redlock_lock *holder, *queued, *forcer;
    char name[64];
    int64_t forced_us, after_ms;
    int round;
    probe p;

    rig_unique_name(name, sizeof(name), "fair", "force");
    probe_open(&p, N_NODES, name);
    holder = fair_handle(c, name, 3000, 0);
    queued = fair_handle(c, name, 3000, 0);
    for (round = 0; round < 2; round++) {
        size_t released = 0;
        bg_acquire b;

        forcer = round == 0 ? holder : handle(c, name, REDLOCK_LOCK_MUTEX);
        acquire_ok(holder, HOLDER, 0, 30000);
        bg_start(&b, queued, W1, 10000);
        ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued");
        rig_sleep_ms(50); /* queued and asleep: its next renewal is ~950 ms away */
        forced_us = rig_now_us();
        ck_assert_int_eq(redlock_force_unlock(forcer, &released), REDLOCK_OK);
        ck_assert_uint_ge(released, N_NODES / 2 + 1);
        pthread_join(b.th, NULL);
        after_ms = (b.done_us - forced_us) / 1000;
        fprintf(stderr, "force unlock (%s handle): the waiter granted %lld ms after it\n",
                round == 0 ? "fair" : "plain", (long long)after_ms);
        ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
        ck_assert_msg(after_ms <= FORCE_WAKE_WITHIN_MS, "%s handle: granted %lld ms after the "
                      "force unlock: nobody woke it", round == 0 ? "fair" : "plain",
                      (long long)after_ms);
        unlock_ok(queued, W1);
        if (forcer != holder)
            redlock_lock_free(forcer);
        /* The forced hold is gone: its handle releases nothing. */
        ck_assert_int_ne(redlock_unlock_as(holder, HOLDER), REDLOCK_OK);
    }
    redlock_lock_free(holder);
    redlock_lock_free(queued);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 4. A waiter that gives up leaves every queue at once. */

#define LEFT_WITHIN_MS 200

/* Polls until field's traces are gone from every node; fails the test if
 * that is more than LEFT_WITHIN_MS after the acquire returned. */
static void assert_left_at_once(probe *p, const char *field, const bg_acquire *b,
                                const char *how)
{
    int64_t gone_ms = wait_traces_gone(p, field, 3000);
    int64_t after_ms = (rig_now_us() - b->done_us) / 1000;

    fprintf(stderr, "%s: left every queue %lld ms after the acquire returned\n", how,
            (long long)after_ms);
    ck_assert_msg(gone_ms >= 0, "%s: the waiter is still queued 3 s later", how);
    ck_assert_msg(after_ms <= LEFT_WITHIN_MS, "%s: left %lld ms after the acquire returned",
                  how, (long long)after_ms);
}

START_TEST(test_give_up_leaves_at_once)
{
    redlock_client *c = client_over(N_NODES);
    redlock_lock *holder, *quitter;
    char name[64], field[FIELD_CAP];
    int seen_queued = 0;
    int64_t canceled_us;
    bg_acquire b;
    probe p;
    size_t i;

    rig_unique_name(name, sizeof(name), "fair", "giveup");
    probe_open(&p, N_NODES, name);
    holder = fair_handle(c, name, 0, 0);
    quitter = fair_handle(c, name, 0, 0);
    rig_field_of(c, W1, field, sizeof(field));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);

    /* Its deadline: it must have queued while it waited. */
    bg_start(&b, quitter, W1, 300);
    while (!atomic_load(&b.finished)) {
        seen_queued = seen_queued || !no_trace(&p, 0, field);
        rig_sleep_ms(1);
    }
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_ETIMEOUT, "wait 300 ms: %s", redlock_err_name(b.rc));
    ck_assert_msg(seen_queued, "the waiter never queued on node 0");
    assert_left_at_once(&p, field, &b, "deadline");

    /* Cancelled from another thread while queued everywhere: the cancel
     * interrupts the wait itself, not the next renewal (a third of the
     * default 3 s place). */
    bg_start(&b, quitter, W1, 10000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued");
    rig_sleep_ms(20);
    canceled_us = rig_now_us();
    redlock_acquire_cancel(quitter);
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_ECANCELED, "cancel: %s", redlock_err_name(b.rc));
    fprintf(stderr, "cancel: returned %lld ms after redlock_acquire_cancel\n",
            (long long)((b.done_us - canceled_us) / 1000));
    ck_assert_msg(b.done_us - canceled_us <= 500 * 1000, "cancel: returned %lld ms later",
                  (long long)((b.done_us - canceled_us) / 1000));
    assert_left_at_once(&p, field, &b, "cancel");

    /* The holder is untouched, and nobody is left waiting. */
    for (i = 0; i < N_NODES; i++)
        ck_assert_int_eq(ask_int(&p, i, "EXISTS %s", name, NULL), 1);
    unlock_ok(holder, HOLDER);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(quitter);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5. A lost wake-up costs at most a third of a place. */

START_TEST(test_lost_wakeup)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder, *w;
    char name[64], a[ARGS_CAP], wf[FIELD_CAP];
    int64_t deleted_us, took_ms;
    bg_acquire b;
    probe p;
    int rc;

    rig_unique_name(name, sizeof(name), "fair", "lostwake");
    probe_open(&p, 1, name);
    holder = fair_handle(c, name, SHORT_PLACE_MS, 0);
    w = fair_handle(c, name, SHORT_PLACE_MS, 0);
    rig_field_of(c, W1, wf, sizeof(wf));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b, w, W1, 10000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued");
    /* The hold vanishes without a release message (as if it were lost). */
    deleted_us = rig_now_us();
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "DEL '%s'", name)), "1");
    pthread_join(b.th, NULL);
    took_ms = (b.done_us - deleted_us) / 1000;
    fprintf(stderr, "lost wake-up: granted %lld ms after the silent delete\n",
            (long long)took_ms);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    ck_assert_msg(took_ms <= SHORT_PLACE_MS / 3 + 500, "granted %lld ms after the delete",
                  (long long)took_ms);
    /* The old holder's release cannot touch the new hold. */
    rc = redlock_unlock_as(holder, HOLDER);
    ck_assert_msg(rc == REDLOCK_ENOT_OWNER || rc == REDLOCK_ELOST, "old holder's unlock: %s",
                  redlock_err_name(rc));
    ck_assert_int_eq(ask_int(&p, 0, "HEXISTS %s %s", name, wf), 1);
    unlock_ok(w, W1);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5b. A refused waiter queues with its second attempt: the refusal by a
 *     quorum brought its ticket, so there is no ticket round and no try
 *     between subscribing and queueing. */

START_TEST(test_queues_on_second_attempt)
{
    redlock_client *c = client_over(N_NODES), *wc = client_over(N_NODES);
    redlock_lock *holder, *w;
    redlock_stats st;
    char name[64];
    bg_acquire b;
    probe p;

    rig_unique_name(name, sizeof(name), "fair", "twotries");
    probe_open(&p, N_NODES, name);
    holder = fair_handle(c, name, SHORT_PLACE_MS, 0);
    w = fair_handle(wc, name, SHORT_PLACE_MS, 0);
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b, w, W1, 10000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued");
    /* Well before its first renewal (a third of the place). */
    ck_assert_int_eq(redlock_client_stats(wc, &st), REDLOCK_OK);
    ck_assert_msg(st.attempts == 2, "queued after %llu attempts",
                  (unsigned long long)st.attempts);
    unlock_ok(holder, HOLDER);
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    unlock_ok(w, W1);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
    redlock_client_free(wc);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5c. A handle keeps its waiter's subscription for the owner's next wait;
 *     what was published on it between waits wakes nobody; freeing the
 *     handle unsubscribes. */

static long long subscribers(probe *p, size_t node, const char *channel)
{
    redisReply *r = ask(p, node, "PUBSUB NUMSUB %s", channel);
    long long n = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? r->element[1]->integer : -1;

    freeReplyObject(r);
    return n;
}

/* One wait of owner W1 on w behind holder: queued, then granted. */
static void wait_behind(redlock_lock *holder, redlock_lock *w, probe *p)
{
    bg_acquire b;

    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b, w, W1, 10000);
    ck_assert_msg(wait_queue_len(p, 1, 5000) >= 0, "the waiter never queued");
    unlock_ok(holder, HOLDER);
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    unlock_ok(w, W1);
}

START_TEST(test_subscription_kept_between_waits)
{
    redlock_client *c = client_over(N_NODES), *wc = client_over(N_NODES);
    redlock_lock *holder, *w;
    char name[64], wf[FIELD_CAP], chan[256];
    redlock_stats before, after;
    bg_acquire b;
    probe p;
    size_t i;

    rig_unique_name(name, sizeof(name), "fair", "keepsub");
    probe_open(&p, N_NODES, name);
    holder = fair_handle(c, name, SHORT_PLACE_MS, 0);
    w = fair_handle(wc, name, SHORT_PLACE_MS, 0);
    rig_field_of(wc, W1, wf, sizeof(wf));
    snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}:%s", name, wf);
    wait_behind(holder, w, &p);
    for (i = 0; i < N_NODES; i++)
        ck_assert_int_eq(subscribers(&p, i, chan), 1);
    /* Stale messages on the kept channel, as a straggler's release sends. */
    for (i = 0; i < N_NODES; i++)
        freeReplyObject(ask(&p, i, "PUBLISH %s 0", chan));
    rig_sleep_ms(50);
    /* The next wait queues with its second attempt and sleeps: a stale
     * message waking it would show as a third attempt. */
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    ck_assert_int_eq(redlock_client_stats(wc, &before), REDLOCK_OK);
    bg_start(&b, w, W1, 10000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued again");
    rig_sleep_ms(100); /* well before its renewal, a third of the place */
    ck_assert_int_eq(redlock_client_stats(wc, &after), REDLOCK_OK);
    ck_assert_msg(after.attempts - before.attempts == 2, "%llu attempts before the release",
                  (unsigned long long)(after.attempts - before.attempts));
    unlock_ok(holder, HOLDER);
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    unlock_ok(w, W1);
    redlock_lock_free(w);
    for (i = 0; i < N_NODES; i++) {
        int64_t t0 = rig_now_ms();

        while (subscribers(&p, i, chan) != 0 && rig_now_ms() - t0 < 2000)
            rig_sleep_ms(5);
        ck_assert_int_eq(subscribers(&p, i, chan), 0);
    }
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_client_free(c);
    redlock_client_free(wc);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5d. A waiter whose subscriber connections were all killed while it
 *     waited is still woken by the next release, long before its renewal:
 *     the client subscribes again by itself. */

/* SCRIPT LOAD commands node i has run. */
static long long script_calls(probe *p, size_t node)
{
    static const char stat[] = "cmdstat_script|load:calls=";
    redisReply *r = ask(p, node, "INFO commandstats");
    const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, stat) : NULL;
    long long n = at ? atoll(at + strlen(stat)) : 0;

    freeReplyObject(r);
    return n;
}

START_TEST(test_subscriber_killed_while_waiting)
{
    redlock_client *c = client_over(N_NODES), *wc = client_over(N_NODES);
    redlock_lock *holder, *w;
    char name[64], chan[256], wf[FIELD_CAP];
    long long loads[N_NODES];
    int64_t released_us;
    bg_acquire b;
    probe p;
    size_t i;

    rig_unique_name(name, sizeof(name), "fair", "subkill");
    probe_open(&p, N_NODES, name);
    /* A long place: a renewal comes only every 10 s. */
    holder = fair_handle(c, name, 30000, 0);
    w = fair_handle(wc, name, 30000, 0);
    rig_field_of(wc, W1, wf, sizeof(wf));
    snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}:%s", name, wf);
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b, w, W1, 8000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued");

    /* Every subscriber connection killed (the server's side of a broken
     * link): the waiter's client subscribes again by itself, on new
     * connections that load no scripts (they never run one). */
    for (i = 0; i < N_NODES; i++) {
        loads[i] = script_calls(&p, i);
        freeReplyObject(ask(&p, i, "CLIENT KILL TYPE pubsub"));
    }
    for (i = 0; i < N_NODES; i++) {
        int64_t t0 = rig_now_ms();

        while (subscribers(&p, i, chan) != 1 && rig_now_ms() - t0 < 3000)
            rig_sleep_ms(5);
        ck_assert_msg(subscribers(&p, i, chan) == 1, "node %zu: the waiter did not subscribe again",
                      i);
        ck_assert_msg(script_calls(&p, i) == loads[i],
                      "node %zu: %lld SCRIPT LOADs while resubscribing", i,
                      script_calls(&p, i) - loads[i]);
    }
    released_us = rig_now_us();
    unlock_ok(holder, HOLDER);
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    fprintf(stderr, "subscriber killed: the waiter granted %lld ms after the release\n",
            (long long)((b.done_us - released_us) / 1000));
    ck_assert_msg(b.done_us - released_us <= 1000 * 1000,
                  "the waiter granted %lld ms after the release (its renewal is every 10 s)",
                  (long long)((b.done_us - released_us) / 1000));
    unlock_ok(w, W1);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
    redlock_client_free(wc);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5e. A Redisson client's scripts drop a waiter's list entry and timeout
 *     (its stale-waiter loop, once its own grants took their wait off
 *     every timeout): our waiter's next renewal puts its place back in the
 *     list, so Redisson's later arrivals queue behind it again. */

START_TEST(test_place_restored_after_redisson_drops_it)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder, *w;
    char name[64], wf[FIELD_CAP];
    int64_t t0;
    bg_acquire b;
    probe p;
    redisReply *pos = NULL;

    rig_unique_name(name, sizeof(name), "fair", "redissondrop");
    probe_open(&p, 1, name);
    holder = fair_handle(c, name, SHORT_PLACE_MS, 0);
    w = fair_handle(c, name, SHORT_PLACE_MS, 0);
    rig_field_of(c, W1, wf, sizeof(wf));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b, w, W1, 10000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued");
    /* What Redisson's stale-waiter loop removes; our lapse and ticket stay. */
    freeReplyObject(ask(&p, 0, "LREM %s 0 %s", p.queue, wf));
    freeReplyObject(ask(&p, 0, "ZREM %s %s", p.timeouts, wf));
    t0 = rig_now_ms();
    while (rig_now_ms() - t0 < SHORT_PLACE_MS) {
        freeReplyObject(pos);
        pos = ask(&p, 0, "LPOS %s %s", p.queue, wf);
        if (pos->type != REDIS_REPLY_NIL)
            break;
        rig_sleep_ms(10);
    }
    fprintf(stderr, "redisson drop: back in the list after %lld ms\n",
            (long long)(rig_now_ms() - t0));
    ck_assert_msg(pos->type != REDIS_REPLY_NIL,
                  "the waiter's place is not back in the list after its renewals");
    freeReplyObject(pos);
    unlock_ok(holder, HOLDER);
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    unlock_ok(w, W1);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5f. The head of the queue dies after a release woke it: the next waiter
 *     is woken by whichever script finds the lock free and drops the dead
 *     place (another owner's try, or a waiter behind it leaving), not left to sleep until its renewal (a Redisson waiter would
 *     sleep out the dead place's timeout, about 10 minutes). The dead head
 *     is written by hand, ticket 1, lapsing DEAD_HEAD_MS after the start. */

#define DEAD_HEAD_MS 1500

/* Queues a waiter of another client by hand on node 0, at the tail:
 * ticket, and a place lapsing lapse_in_ms from now by the node's clock. */
static void queue_by_hand(probe *p, const char *field, const char *ticket, long long lapse_in_ms)
{
    char lapse[32], timeout[32];
    redisReply *t = ask(p, 0, "TIME");
    long long now_ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;

    freeReplyObject(t);
    snprintf(lapse, sizeof(lapse), "%lld", now_ms + lapse_in_ms);
    snprintf(timeout, sizeof(timeout), "%lld", now_ms + lapse_in_ms + 600000);
    freeReplyObject(ask(p, 0, "RPUSH %s %s", p->queue, field));
    freeReplyObject(ask(p, 0, "ZADD %s %s %s", p->tickets, ticket, field));
    freeReplyObject(ask(p, 0, "ZADD %s %s %s", p->lapses, lapse, field));
    freeReplyObject(ask(p, 0, "ZADD %s %s %s", p->timeouts, timeout, field));
}

/* Joins b, which must have been granted within ms of since_us (what
 * happened then: `event`). */
static void joined_granted_within(bg_acquire *b, int64_t since_us, int64_t ms, const char *event)
{
    pthread_join(b->th, NULL);
    fprintf(stderr, "%s: the waiter granted %lld ms after it\n", event,
            (long long)((b->done_us - since_us) / 1000));
    ck_assert_msg(b->rc == REDLOCK_OK, "%s: waiter: %s", event, redlock_err_name(b->rc));
    ck_assert_msg(b->done_us - since_us <= ms * 1000, "%s: the waiter was granted %lld ms after it",
                  event, (long long)((b->done_us - since_us) / 1000));
}

/* What drops the lapsed dead head while the lock is free: another
 * owner's try (fair_acquire.lua), or a waiter queued behind the first one
 * giving up (fair_leave.lua). */
enum dead_head_dropper { DROPPED_BY_TRY, DROPPED_BY_LEAVE };

static void dead_head_dropped(enum dead_head_dropper by)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder, *w, *late;
    char name[64], wf[FIELD_CAP];
    const char *dead = "dead-head-of-the-queue";
    int64_t start_ms = rig_now_ms();
    int64_t tried_us;
    bg_acquire b, behind;
    probe p;

    rig_unique_name(name, sizeof(name), "fair", "deadhead");
    probe_open(&p, 1, name);
    /* A long place: the waiter's own renewal comes every 10 s. */
    holder = fair_handle(c, name, 30000, 0);
    w = fair_handle(c, name, 30000, 0);
    late = fair_handle(c, name, 30000, 0);
    rig_field_of(c, W1, wf, sizeof(wf));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    queue_by_hand(&p, dead, "1", DEAD_HEAD_MS);
    bg_start(&b, w, W1, 20000);
    ck_assert_msg(wait_queue_len(&p, 2, 5000) >= 0, "the waiter never queued");
    if (by == DROPPED_BY_LEAVE) {
        bg_start(&behind, late, W2, 20000);
        ck_assert_msg(wait_queue_len(&p, 3, 5000) >= 0, "the second waiter never queued");
    }
    /* The release wakes the dead head, which never comes. */
    unlock_ok(holder, HOLDER);
    while (rig_now_ms() < start_ms + DEAD_HEAD_MS + 200)
        rig_sleep_ms(10);
    tried_us = rig_now_us();
    if (by == DROPPED_BY_TRY) {
        /* Another owner's try finds the lock free and the dead head
         * lapsed. */
        acquire_busy(late, W2);
        joined_granted_within(&b, tried_us, 1000, "dead head: the try that dropped it");
    } else {
        /* The waiter behind gives up: a cancel makes no further attempt,
         * so only its leave runs, and finds the dead head lapsed. */
        redlock_acquire_cancel(late);
        pthread_join(behind.th, NULL);
        ck_assert_msg(behind.rc == REDLOCK_ECANCELED, "the waiter behind: %s",
                      redlock_err_name(behind.rc));
        joined_granted_within(&b, tried_us, 1000, "dead head: the leave that dropped it");
    }
    unlock_ok(w, W1);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_lock_free(late);
    redlock_client_free(c);
    probe_close(&p);
}

START_TEST(test_next_waiter_woken_when_dead_head_dropped)
{
    dead_head_dropped(DROPPED_BY_TRY);
}
END_TEST

START_TEST(test_next_waiter_woken_when_leave_drops_dead_head)
{
    dead_head_dropped(DROPPED_BY_LEAVE);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5g. A waiter's attempt granted by a minority is undone, and the waiter
 *     keeps its places there: the grants had taken them out of the queue,
 *     and without them the next waiter would be first on those nodes (and
 *     woken by the undo) while the first one still waits. Long places: the
 *     waiters renew only every 10 s. */

START_TEST(test_failed_attempt_keeps_place)
{
    redlock_client *c = client_over(N_NODES);
    redlock_lock *holder, *w1, *w2;
    char name[64], f1[FIELD_CAP], f2[FIELD_CAP], channel[192];
    bg_acquire b1, b2;
    probe p;
    size_t i;

    rig_unique_name(name, sizeof(name), "fair", "minority");
    probe_open(&p, N_NODES, name);
    holder = fair_handle(c, name, 30000, 0);
    w1 = fair_handle(c, name, 30000, 0);
    w2 = fair_handle(c, name, 30000, 0);
    rig_field_of(c, W1, f1, sizeof(f1));
    rig_field_of(c, W2, f2, sizeof(f2));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b1, w1, W1, 20000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the first waiter never queued");
    bg_start(&b2, w2, W2, 20000);
    ck_assert_msg(wait_queue_len(&p, 2, 5000) >= 0, "the second waiter never queued");
    /* The hold vanishes on two nodes and the first waiter is woken there:
     * its attempt is granted by those two and refused by the other three. */
    for (i = 0; i < 2; i++)
        freeReplyObject(ask(&p, i, "DEL %s", name));
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}:%s", name, f1);
    freeReplyObject(ask(&p, 0, "PUBLISH %s 0", channel));
    rig_sleep_ms(500);
    for (i = 0; i < 2; i++) {
        redisReply *pos = ask(&p, i, "LPOS %s %s", p.queue, f1);

        ck_assert_msg(pos->type == REDIS_REPLY_INTEGER && pos->integer == 0,
                      "node %zu: the first waiter is not at the head of the queue after its "
                      "undone grant", i);
        freeReplyObject(pos);
        ck_assert_msg(ask_int(&p, i, "HEXISTS %s %s", name, f2) == 0,
                      "node %zu: the second waiter was granted while the first waits", i);
    }
    ck_assert_int_eq(atomic_load(&b1.finished), 0);
    ck_assert_int_eq(atomic_load(&b2.finished), 0);
    /* The release on the other three hands the lock on in order. */
    unlock_ok(holder, HOLDER);
    pthread_join(b1.th, NULL);
    ck_assert_msg(b1.rc == REDLOCK_OK, "first waiter: %s", redlock_err_name(b1.rc));
    ck_assert_int_eq(atomic_load(&b2.finished), 0);
    unlock_ok(w1, W1);
    pthread_join(b2.th, NULL);
    ck_assert_msg(b2.rc == REDLOCK_OK, "second waiter: %s", redlock_err_name(b2.rc));
    unlock_ok(w2, W2);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w1);
    redlock_lock_free(w2);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5h. An abort that lands after its waiter left gives no place back. A
 *     waiter on another client (written here with the library's own
 *     scripts, by EVAL, in the order a frozen node or the background queue
 *     may deliver them) queues ahead of a real one; the holder's release
 *     wakes only it; then its late grant lands, then its leave, then the
 *     grant's abort, owed since the attempt failed elsewhere and still
 *     carrying the ticket. The real waiter must be woken by that abort
 *     and granted, not left behind a place for nobody until it lapses.
 *     Long places: the real waiter renews only every 10 s. */

#define GONE_FIELD "gone-client:7"
#define GONE_TICKET "1"
#define GONE_PLACE "30000"

/* One of the gone waiter's messages: lua/<file> by EVAL on node 0. */
static long long gone_says(const char *file, int nkeys, int argc, const char *const *argv)
{
    redisReply *r = eval_file(0, file, nkeys, argc, argv);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
                  : r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                          r->element[0]->type == REDIS_REPLY_INTEGER
                      ? r->element[0]->integer
                      : -100;

    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s: %s", file, r->str);
    freeReplyObject(r);
    return v;
}

/* The gone waiter's fair_acquire.lua with its ticket and request id (32
 * hex, sequence first). */
static long long gone_acquire_with(probe *p, const char *id, const char *ticket)
{
    char latch[192];
    const char *argv[] = {p->name, latch, p->queue, p->timeouts, p->tickets, p->lapses,
                          "10000", GONE_FIELD, id, "1", ticket, GONE_PLACE};

    snprintf(latch, sizeof(latch), "redlock_latch:{%s}:%s", p->name, id);
    return gone_says("fair_acquire.lua", 6, 12, argv);
}

static long long gone_acquire(probe *p, const char *id)
{
    return gone_acquire_with(p, id, GONE_TICKET);
}

START_TEST(test_late_abort_after_leave_no_ghost)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder, *w;
    char name[64], latch[192], wf[FIELD_CAP];
    const char *queued_id = "000000000001aaaaaaaaaaaaaaaaaaaa";
    const char *late_id = "000000000002bbbbbbbbbbbbbbbbbbbb";
    int64_t aborted_us;
    redisReply *r;
    bg_acquire b;
    probe p;

    rig_unique_name(name, sizeof(name), "fair", "lateabort");
    probe_open(&p, 1, name);
    snprintf(latch, sizeof(latch), "redlock_latch:{%s}:%s", name, late_id);
    holder = fair_handle(c, name, 30000, 0);
    w = fair_handle(c, name, 30000, 0);
    rig_field_of(c, W1, wf, sizeof(wf));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    /* The gone waiter queues first (refused: held), then the real one. */
    ck_assert_int_gt(gone_acquire(&p, queued_id), 0);
    bg_start(&b, w, W1, 8000);
    ck_assert_msg(wait_queue_len(&p, 2, 5000) >= 0, "the real waiter never queued");
    r = ask(&p, 0, "LINDEX %s %s", p.queue, "0");
    ck_assert_str_eq(r->str, GONE_FIELD);
    freeReplyObject(r);
    /* The release wakes the gone waiter only. */
    unlock_ok(holder, HOLDER);
    /* Its late grant: first, and the lock is free. */
    ck_assert_int_eq(gone_acquire(&p, late_id), 0);
    ck_assert_int_eq(ask_int(&p, 0, "HEXISTS %s %s", name, GONE_FIELD), 1);
    /* Its leave: it ended its wait (the attempt failed on a quorum). */
    {
        const char *argv[] = {name, p.channel, p.queue, p.timeouts, p.tickets, p.lapses, "0",
                              GONE_FIELD, GONE_TICKET};

        gone_says("fair_leave.lua", 6, 9, argv);
    }
    /* The abort of the late grant, sent while it still waited. */
    {
        const char *argv[] = {name,     p.channel, latch,   p.queue,    p.timeouts, p.tickets,
                              p.lapses, "0",       "10000", GONE_FIELD, GONE_TICKET};

        aborted_us = rig_now_us();
        ck_assert_int_eq(gone_says("fair_abort.lua", 7, 11, argv), 1);
    }
    ck_assert_msg(no_trace(&p, 0, GONE_FIELD),
                  "the late abort gave the gone waiter a place (list, timeout or ticket)");
    ck_assert_msg(no_member(&p, 0, p.lapses, GONE_FIELD), "the gone waiter has a lapse left");
    joined_granted_within(&b, aborted_us, 1000, "late abort: the abort landing");
    unlock_ok(w, W1);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    ck_assert_int_eq(ask_int(&p, 0, "EXISTS %s", p.lapses, NULL), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5j. A leave of an earlier wait does not take the owner's next place. A
 *     leave sent to a silent node is sent and also queued for the
 *     background, so a node that wakes may run it twice, the second time
 *     after the same owner (same field) queued again for its next wait.
 *     That copy, written here by EVAL with an older ticket, must leave the
 *     new place alone; the waiter's own leave (its cancel) must not. */

START_TEST(test_late_leave_keeps_next_place)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder, *w;
    char name[64], wf[FIELD_CAP], ticket[32];
    redisReply *r;
    bg_acquire b;
    probe p;

    rig_unique_name(name, sizeof(name), "fair", "lateleave");
    probe_open(&p, 1, name);
    holder = fair_handle(c, name, 30000, 0);
    w = fair_handle(c, name, 30000, 0);
    rig_field_of(c, W1, wf, sizeof(wf));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b, w, W1, 20000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued");
    r = ask(&p, 0, "ZSCORE %s %s", p.tickets, wf);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    snprintf(ticket, sizeof(ticket), "%s", r->str);
    freeReplyObject(r);
    ck_assert_str_ne(ticket, "1");
    {
        const char *argv[] = {name, p.channel, p.queue, p.timeouts, p.tickets, p.lapses, "0",
                              wf,   "1"};

        ck_assert_int_eq(gone_says("fair_leave.lua", 6, 9, argv), 0);
    }
    ck_assert_msg(!no_trace(&p, 0, wf), "an earlier wait's leave took the waiter's place");
    ck_assert_int_eq(ask_int(&p, 0, "LLEN %s", p.queue, NULL), 1);
    r = ask(&p, 0, "ZSCORE %s %s", p.tickets, wf);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, ticket) == 0,
                  "the waiter's ticket is gone or changed");
    freeReplyObject(r);
    r = ask(&p, 0, "ZSCORE %s %s", p.lapses, wf);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && atof(r->str) > 0,
                  "the waiter's place has no lapse time");
    freeReplyObject(r);
    /* Its own leave, with its own ticket, takes it out. */
    redlock_acquire_cancel(w);
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_ECANCELED, "cancel: %s", redlock_err_name(b.rc));
    assert_left_at_once(&p, wf, &b, "cancel after the late leave");
    unlock_ok(holder, HOLDER);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* A fair lock on node 0 held by the test's holder, a probe on it, and a
 * place of the gone waiter's earlier wait (GONE_TICKET) in its queue. */
static redlock_lock *held_with_earlier_place(redlock_client *c, probe *p, char *name,
                                             size_t cap, const char *tag, const char *wait1_id)
{
    redlock_lock *holder;

    rig_unique_name(name, cap, "fair", tag);
    probe_open(p, 1, name);
    holder = fair_handle(c, name, 30000, 0);
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    ck_assert_int_gt(gone_acquire_with(p, wait1_id, GONE_TICKET), 0);
    return holder;
}

/* The other order: the owner's next wait reaches the node before the
 * late copy of the last wait's leave. Its attempt finds the last wait's
 * place still there, and must queue by its own ticket, so that the late
 * leave spares it and its own leave takes it. Written by EVAL for a
 * waiter of another client, the lock held by the test's holder. */
START_TEST(test_next_wait_replaces_earlier_place)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder;
    char name[64];
    const char *wait1_id = "000000000001cccccccccccccccccccc";
    const char *wait2_id = "000000000002dddddddddddddddddddd";
    const char *wait2_ticket = "5";
    redisReply *r;
    probe p;

    holder = held_with_earlier_place(c, &p, name, sizeof(name), "nextwait", wait1_id);
    ck_assert_int_gt(gone_acquire_with(&p, wait2_id, wait2_ticket), 0);
    r = ask(&p, 0, "ZSCORE %s %s", p.tickets, GONE_FIELD);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, wait2_ticket) == 0,
                  "the next wait kept the last wait's ticket %s", r->str ? r->str : "(none)");
    freeReplyObject(r);
    ck_assert_int_eq(ask_int(&p, 0, "LLEN %s", p.queue, NULL), 1);
    {
        const char *late[] = {name, p.channel, p.queue, p.timeouts, p.tickets, p.lapses, "0",
                              GONE_FIELD, GONE_TICKET};
        const char *own[] = {name, p.channel, p.queue, p.timeouts, p.tickets, p.lapses, "0",
                             GONE_FIELD, wait2_ticket};

        ck_assert_int_eq(gone_says("fair_leave.lua", 6, 9, late), 0);
        ck_assert_msg(!no_trace(&p, 0, GONE_FIELD), "the late leave took the next wait's place");
        ck_assert_int_eq(gone_says("fair_leave.lua", 6, 9, own), 1);
    }
    ck_assert_msg(no_trace(&p, 0, GONE_FIELD), "the next wait's own leave left a place behind");
    unlock_ok(holder, HOLDER);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* The same with the lock free: the earlier wait's place (ticket 1) is
 * first, but the next wait goes by its own ticket (5), behind a waiter
 * with ticket 3, so it is refused and queues behind it; a fresh try
 * without a ticket is refused and does not queue. Either way the place
 * goes, and the waiter now first (whom the release did not wake: it woke
 * the earlier place's owner) is woken. */
static void earlier_place_first(const char *next_ticket, const char *tag)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder;
    redisContext *sub;
    char name[64];
    const char *other = "other-client:3";
    const char *wait2_id = "000000000002eeeeeeeeeeeeeeeeeeee";
    struct timeval two_s = {2, 0};
    long long got;
    redisReply *r;
    void *msg = NULL;
    probe p;

    holder = held_with_earlier_place(c, &p, name, sizeof(name), tag,
                                     "000000000001ffffffffffffffffffff");
    queue_by_hand(&p, other, "3", 30000);
    unlock_ok(holder, HOLDER);
    sub = node_conn(0);
    freeReplyObject(redisCommand(sub, "SUBSCRIBE %s:%s", p.channel, other));
    got = gone_acquire_with(&p, wait2_id, next_ticket);
    ck_assert_msg(ask_int(&p, 0, "HEXISTS %s %s", name, GONE_FIELD) == 0,
                  "the next wait was granted by its earlier wait's place (reply %lld)", got);
    ck_assert_int_ge(got, 0);
    r = ask(&p, 0, "LRANGE %s 0 -1", p.queue);
    ck_assert_uint_eq(r->elements, *next_ticket ? 2 : 1);
    ck_assert_str_eq(r->element[0]->str, other);
    if (*next_ticket)
        ck_assert_str_eq(r->element[1]->str, GONE_FIELD);
    freeReplyObject(r);
    if (*next_ticket) {
        r = ask(&p, 0, "ZSCORE %s %s", p.tickets, GONE_FIELD);
        ck_assert_str_eq(r->str, next_ticket);
        freeReplyObject(r);
    } else {
        ck_assert_msg(no_trace(&p, 0, GONE_FIELD), "the earlier place is still there");
    }
    redisSetTimeout(sub, two_s);
    ck_assert_msg(redisGetReply(sub, &msg) == REDIS_OK && msg &&
                      ((redisReply *)msg)->type == REDIS_REPLY_ARRAY &&
                      strcmp(((redisReply *)msg)->element[0]->str, "message") == 0,
                  "the waiter now first was not woken");
    freeReplyObject(msg);
    redisFree(sub);
    freeReplyObject(ask(&p, 0, "DEL %s %s %s %s", p.queue, p.tickets, p.lapses, p.timeouts));
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_client_free(c);
    probe_close(&p);
}

START_TEST(test_earlier_place_does_not_grant_next_wait)
{
    earlier_place_first("5", "earlierplace");
}
END_TEST

START_TEST(test_earlier_place_does_not_grant_fresh_try)
{
    earlier_place_first("", "earlierfresh");
}
END_TEST

/* A place of ours whose ticket was lost (its set evicted, say) is listed
 * once when it is put back, not twice. */
START_TEST(test_entry_without_ticket_not_listed_twice)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder;
    char name[64];
    redisReply *r;
    probe p;

    holder = held_with_earlier_place(c, &p, name, sizeof(name), "lostticket",
                                     "000000000001abababababababababab");
    freeReplyObject(ask(&p, 0, "ZREM %s %s", p.tickets, GONE_FIELD));
    ck_assert_int_gt(gone_acquire_with(&p, "000000000002abababababababababab", GONE_TICKET), 0);
    r = ask(&p, 0, "LRANGE %s 0 -1", p.queue);
    ck_assert_msg(r->elements == 1, "the waiter is listed %zu times", r->elements);
    freeReplyObject(r);
    unlock_ok(holder, HOLDER);
    freeReplyObject(ask(&p, 0, "DEL %s %s %s %s", p.queue, p.tickets, p.lapses, p.timeouts));
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5k. A late leave of an earlier wait keeps the receipt of the next wait's
 *     grant. The gone waiter's first wait (ticket 1) queued, its second
 *     (ticket 5) took that place over, another waiter (ticket 7) queued
 *     behind, and the second wait was granted here; then the first wait's
 *     leave lands late (a background copy). When the grant is undone (its
 *     attempt failed on a quorum and the waiter goes on waiting), the abort
 *     must give the second wait its place back, ahead of ticket 7. A leave
 *     of the second wait itself (or of any wait) still drops the receipt,
 *     so the abort then gives nothing back. Written by EVAL on node 0. */

#define RECEIPT_OTHER "other-client:9"
#define RECEIPT_GRANT_ID "000000000003abababababababababab"

/* The state above, up to the grant; the caller's test holder is freed by
 * the caller. */
static redlock_lock *second_wait_granted(redlock_client *c, probe *p, char *name, size_t cap,
                                         const char *tag)
{
    redlock_lock *holder = held_with_earlier_place(c, p, name, cap, tag,
                                                   "000000000001abababababababababab");

    ck_assert_int_gt(gone_acquire_with(p, "000000000002abababababababababab", "5"), 0);
    queue_by_hand(p, RECEIPT_OTHER, "7", 30000);
    unlock_ok(holder, HOLDER);
    ck_assert_int_eq(gone_acquire_with(p, RECEIPT_GRANT_ID, "5"), 0);
    ck_assert_int_eq(ask_int(p, 0, "HEXISTS %s %s", name, GONE_FIELD), 1);
    ck_assert_int_eq(ask_int(p, 0, "LLEN %s", p->queue, NULL), 1);
    return holder;
}

static long long gone_leaves(probe *p, const char *ticket)
{
    const char *argv[] = {p->name,    p->channel, p->queue, p->timeouts, p->tickets,
                          p->lapses,  "0",        GONE_FIELD, ticket};

    return gone_says("fair_leave.lua", 6, 9, argv);
}

/* The abort of the grant, by a waiter that goes on waiting (ticket 5). */
static long long gone_grant_aborted(probe *p)
{
    char latch[192];
    const char *argv[] = {p->name,     p->channel, latch,   p->queue,   p->timeouts, p->tickets,
                          p->lapses,   "0",        "10000", GONE_FIELD, "5"};

    snprintf(latch, sizeof(latch), "redlock_latch:{%s}:%s", p->name, RECEIPT_GRANT_ID);
    return gone_says("fair_abort.lua", 7, 11, argv);
}

/* Both waiters leave; nothing of the lock is left, receipts included. */
static void receipt_cleanup(redlock_client *c, redlock_lock *holder, probe *p)
{
    const char *other[] = {p->name,   p->channel, p->queue, p->timeouts, p->tickets,
                           p->lapses, "0",        RECEIPT_OTHER, "7"};

    gone_leaves(p, "");
    gone_says("fair_leave.lua", 6, 9, other);
    freeReplyObject(ask(p, 0, "HDEL %s %s", p->name, GONE_FIELD));
    ck_assert_int_ge(wait_all_empty(p, 3000), 0);
    ck_assert_int_eq(ask_int(p, 0, "EXISTS %s", p->lapses, NULL), 0);
    redlock_lock_free(holder);
    redlock_client_free(c);
    probe_close(p);
}

START_TEST(test_late_leave_keeps_next_receipt)
{
    redlock_client *c = client_over(1);
    char name[64];
    redisReply *r;
    probe p;
    redlock_lock *holder = second_wait_granted(c, &p, name, sizeof(name), "receiptkept");

    ck_assert_int_eq(gone_leaves(&p, GONE_TICKET), 0);
    ck_assert_int_eq(gone_grant_aborted(&p), 1);
    ck_assert_int_eq(ask_int(&p, 0, "HEXISTS %s %s", name, GONE_FIELD), 0);
    r = ask(&p, 0, "ZSCORE %s %s", p.tickets, GONE_FIELD);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "5") == 0,
                  "the undone grant's waiter has no place back (ticket %s): the late leave of "
                  "its earlier wait dropped the grant's receipt",
                  r->str ? r->str : "(none)");
    freeReplyObject(r);
    r = ask(&p, 0, "LINDEX %s %s", p.queue, "0");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, GONE_FIELD) == 0,
                  "the undone grant's waiter is not first again");
    freeReplyObject(r);
    receipt_cleanup(c, holder, &p);
}
END_TEST

/* The converse: the second wait's own leave, or one naming no wait. */
static void own_leave_drops_receipt(const char *ticket, const char *tag)
{
    redlock_client *c = client_over(1);
    char name[64];
    probe p;
    redlock_lock *holder = second_wait_granted(c, &p, name, sizeof(name), tag);

    ck_assert_msg(!no_member(&p, 0, p.lapses, GONE_FIELD) &&
                      !no_member(&p, 0, p.lapses, GONE_FIELD "#5"),
                  "the grant left no receipt naming its wait");
    gone_leaves(&p, ticket);
    ck_assert_msg(no_member(&p, 0, p.lapses, GONE_FIELD) &&
                      no_member(&p, 0, p.lapses, GONE_FIELD "#5"),
                  "the waiter's own leave (ticket '%s') left its receipt", ticket);
    ck_assert_int_eq(gone_grant_aborted(&p), 1);
    ck_assert_msg(no_trace(&p, 0, GONE_FIELD),
                  "an abort after the waiter's own leave (ticket '%s') gave it a place", ticket);
    receipt_cleanup(c, holder, &p);
}

START_TEST(test_own_leave_drops_receipt)
{
    own_leave_drops_receipt("5", "receiptown");
    own_leave_drops_receipt("", "receiptany");
}
END_TEST

/* A receipt whose release never came (the hold's lease ran out) is
 * replaced when its owner queues again: nothing of it stays behind once
 * that wait ends. */
START_TEST(test_new_place_replaces_stale_receipt)
{
    redlock_client *c = client_over(1);
    char name[64];
    probe p;
    redlock_lock *holder = second_wait_granted(c, &p, name, sizeof(name), "receiptstale");

    freeReplyObject(ask(&p, 0, "DEL %s", name, NULL));
    /* Refused: the other waiter (ticket 7) is first; it queues by 9. */
    ck_assert_int_gt(gone_acquire_with(&p, "000000000004abababababababababab", "9"), 0);
    ck_assert_msg(no_member(&p, 0, p.lapses, GONE_FIELD "#5"),
                  "the stale receipt's ticket member outlived the new place");
    receipt_cleanup(c, holder, &p);
}
END_TEST

/* A holder that never releases (it died, or its releases never landed)
 * leaves its grant's receipt in the lapses set, and a waiter that died
 * leaves its place. Nothing of ours may stay for ever: the set outlives
 * the lapse of every place written to it by the 600 s that Redisson's
 * timeout entries of ours add (fair_acquire.lua) and a second, whether the
 * holder was the only waiter, another waiter was queued at the grant and
 * left later, or another queued after the grant with a longer place. */
typedef enum { HOLDER_ALONE, OTHER_QUEUED_BEFORE, OTHER_QUEUES_AFTER } dead_holder_case;

/* The lapses set's TTL covers a place lapsing lapse_ms after it was
 * written, by 600 to 601 s (allowing 5 s since). */
static void assert_lapses_outlive(probe *p, long long lapse_ms, const char *when)
{
    long long ttl = ask_int(p, 0, "PTTL %s", p->lapses, NULL);

    ck_assert_msg(ttl > lapse_ms + 596000 && ttl <= lapse_ms + 601000,
                  "%s: %s has TTL %lld ms, for a place of %lld ms", when, p->lapses, ttl,
                  lapse_ms);
}

static void other_says(probe *p, const char *script)
{
    const char *leave[] = {p->name, p->channel, p->queue, p->timeouts, p->tickets, p->lapses,
                           "0", RECEIPT_OTHER, "7"};
    char latch[192];
    const char *acquire[] = {p->name, latch, p->queue, p->timeouts, p->tickets, p->lapses,
                             "800", RECEIPT_OTHER, "000000000009efefefefefefefefefef", "1", "7",
                             "30000"};

    snprintf(latch, sizeof(latch), "redlock_latch:{%s}:%s", p->name, acquire[8]);
    if (strcmp(script, "fair_leave.lua") == 0)
        ck_assert_int_eq(gone_says(script, 6, 9, leave), 1);
    else
        ck_assert_int_gt(gone_says(script, 6, 12, acquire), 0);
}

static void check_dead_holder_leaves_nothing(const char *tag, dead_holder_case how)
{
    redlock_client *c = client_over(1);
    redlock_lock *holder;
    char name[64], latch[2][192];
    const char *ids[2] = {"000000000001cdcdcdcdcdcdcdcdcdcd", "000000000002cdcdcdcdcdcdcdcdcd"};
    probe p;
    int k;

    rig_unique_name(name, sizeof(name), "fair", tag);
    probe_open(&p, 1, name);
    holder = fair_handle(c, name, 30000, 0);
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    /* The gone waiter queues (place 1.5 s), then is granted (lease 0.8 s)
     * once the holder released: a receipt with the place's lapse. */
    for (k = 0; k < 2; k++) {
        const char *argv[] = {name, latch[k], p.queue, p.timeouts, p.tickets, p.lapses,
                              "800", GONE_FIELD, ids[k], "1", GONE_TICKET, "1500"};

        snprintf(latch[k], sizeof(latch[k]), "redlock_latch:{%s}:%s", name, ids[k]);
        if (k == 0 && how == OTHER_QUEUED_BEFORE)
            queue_by_hand(&p, RECEIPT_OTHER, "7", 30000);
        if (k == 1)
            unlock_ok(holder, HOLDER);
        ck_assert_int_eq(gone_says("fair_acquire.lua", 6, 12, argv) == 0, k == 1);
        if (k == 0)
            assert_lapses_outlive(&p, 1500, "a place written");
    }
    ck_assert_msg(!no_member(&p, 0, p.lapses, GONE_FIELD), "the grant left no receipt");
    if (how == OTHER_QUEUES_AFTER) {
        /* Refused (held), it queues for 30 s: the set lives on for it. */
        other_says(&p, "fair_acquire.lua");
        assert_lapses_outlive(&p, 30000, "a longer place written after the grant");
    }
    if (how != HOLDER_ALONE)
        other_says(&p, "fair_leave.lua");
    /* The hold ends with its lease, the queue with the leave; the receipt
     * (and the set) by the TTL, past the lapses written. */
    ck_assert_int_ge(wait_all_empty(&p, 5000), 0);
    ck_assert_int_gt(ask_int(&p, 0, "PTTL %s", p.lapses, NULL), 0);
    assert_lapses_outlive(&p, how == OTHER_QUEUES_AFTER ? 30000 : 1500, "nothing queued");
    redlock_lock_free(holder);
    redlock_client_free(c);
    probe_close(&p);
}

START_TEST(test_dead_holder_leaves_nothing)
{
    check_dead_holder_leaves_nothing("deadholder", HOLDER_ALONE);
    check_dead_holder_leaves_nothing("deadholderq", OTHER_QUEUED_BEFORE);
    check_dead_holder_leaves_nothing("deadholdera", OTHER_QUEUES_AFTER);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5i. A waiter whose quorum of grants always comes back too late does not
 *     keep the head of the queue. The late waiter is a child process over
 *     two nodes (quorum 2) with a 1 s lease and drift factor 0.4, so a
 *     grant is valid only if the attempt took less than about 600 ms.
 *     Node 1 stays frozen while it waits, so each of its attempts hangs
 *     there with node 0's grant in hand; then the child is stopped (a
 *     pause like a long GC), node 1 thawed so that it grants too, frozen
 *     again, and the child resumed 800 ms after its attempt began: a
 *     quorum, too late. The real waiter behind it must get the lock. */

#define LATE_OWNER 78 /* its field ends in ":78" */
#define LATE_LEASE_MS 1000
#define LATE_RESUME_MS 800

/* The child: waits for the go, then takes the lock again and again. */
static void child_always_late(const char *name, int rfd)
{
    redlock_options o = {.node_timeout_ms = 250, .drift_factor = 0.4};
    redlock_client *c = NULL;
    redlock_lock *l = NULL;
    redlock_lock_options lo = {.kind = REDLOCK_LOCK_FAIR, .fair_wait_lease_ms = 30000};
    struct pollfd pfd = {.fd = rfd, .events = POLLIN};
    char go;

    if (redlock_client_new(&c, rig_plain_uris(), 2, &o) != REDLOCK_OK ||
        redlock_lock_new(c, name, &lo, &l) != REDLOCK_OK)
        _exit(3);
    if (poll(&pfd, 1, 10000) != 1 || read(rfd, &go, 1) != 1)
        _exit(4);
    for (;;)
        if (redlock_acquire_as(l, LATE_OWNER, 30000, LATE_LEASE_MS) == REDLOCK_OK)
            redlock_unlock_as(l, LATE_OWNER);
}

/* Whether node 0 holds the lock for field. */
static int granted_on_0(probe *p, const char *field)
{
    return ask_int(p, 0, "HEXISTS %s %s", p->name, field) == 1;
}

START_TEST(test_always_late_waiter_yields_head)
{
    redlock_client *c;
    redlock_lock *holder, *w;
    char name[64], late[FIELD_CAP], wf[FIELD_CAP];
    int to_child[2], late_rounds = 0, w_in_flight = 0;
    int64_t released_us, deadline_ms;
    bg_acquire b;
    probe p;
    pid_t pid;

    rig_unique_name(name, sizeof(name), "fair", "late");
    pid = fork_child(child_always_late, name, &to_child[1]);
    probe_open(&p, 2, name);
    c = client_over(2);
    holder = fair_handle(c, name, 30000, 0);
    w = fair_handle(c, name, 30000, 0);
    rig_field_of(c, W1, wf, sizeof(wf));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    ck_assert_int_eq(write(to_child[1], "g", 1), 1);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the late waiter never queued");
    head_field(&p, late, sizeof(late), ":78");
    bg_start(&b, w, W1, 15000);
    ck_assert_msg(wait_queue_len(&p, 2, 5000) >= 0, "the real waiter never queued");

    /* Node 1 is free and frozen; the release on node 0 wakes the late
     * waiter, first in the queue. */
    freeReplyObject(ask(&p, 1, "DEL %s", name));
    ck_assert_int_eq(rig_node("freeze", 1), 0);
    released_us = rig_now_us();
    unlock_ok(holder, HOLDER);
    deadline_ms = rig_now_ms() + 12000;
    while (!atomic_load(&b.finished) && rig_now_ms() < deadline_ms) {
        int64_t began_ms = rig_now_ms();

        if (granted_on_0(&p, wf)) {
            /* The real waiter's attempt waits on node 1: let it through. */
            ck_assert_int_eq(rig_node("thaw", 1), 0);
            break;
        }
        if (!granted_on_0(&p, late)) {
            rig_sleep_ms(1);
            continue;
        }
        /* The late waiter's attempt hangs on node 1 with node 0's grant. */
        w_in_flight = 1;
        ck_assert_int_eq(kill(pid, SIGSTOP), 0);
        ck_assert_int_eq(rig_node("thaw", 1), 0);
        while (ask_int(&p, 1, "HEXISTS %s %s", name, late) != 1 &&
               rig_now_ms() - began_ms < LATE_RESUME_MS - 100)
            rig_sleep_ms(2);
        late_rounds += ask_int(&p, 1, "HEXISTS %s %s", name, late) == 1;
        ck_assert_int_eq(rig_node("freeze", 1), 0);
        while (rig_now_ms() - began_ms < LATE_RESUME_MS)
            rig_sleep_ms(1);
        ck_assert_int_eq(kill(pid, SIGCONT), 0);
        /* Its abort leaves node 0 before anything else is decided. */
        while (granted_on_0(&p, late) && rig_now_ms() - began_ms < LATE_LEASE_MS + 500)
            rig_sleep_ms(1);
    }
    rig_heal(2);
    pthread_join(b.th, NULL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(to_child[1]);
    fprintf(stderr, "always late: %d late quorums; the real waiter %s %lld ms after the "
                    "release\n", late_rounds, b.rc == REDLOCK_OK ? "granted" : "gave up",
            (long long)((b.done_us - released_us) / 1000));
    ck_assert_msg(w_in_flight && late_rounds >= 1,
                  "the late waiter's attempt never hung on node 1 with a grant there");
    ck_assert_msg(b.rc == REDLOCK_OK, "the real waiter behind an always-late one: %s",
                  redlock_err_name(b.rc));
    ck_assert_msg(b.done_us - released_us <= 6000 * 1000,
                  "the real waiter was granted %lld ms after the release",
                  (long long)((b.done_us - released_us) / 1000));
    unlock_ok(w, W1);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A retried re-entry or release of a fair hold reaches a node twice: the
 * hold's generation record (lua/lib/gens.lua) remembers the request, and
 * the second copy changes nothing. By EVAL on one node. */
START_TEST(test_fair_replays_apply_once)
{
    const char *ids[4] = {"00000000000100000000000000000011", "00000000000200000000000000000012",
                          "00000000000300000000000000000013", "00000000000400000000000000000014"};
    char name[64], latch[4][192];
    probe p;
    int k, copy;

    rig_unique_name(name, sizeof(name), "fair", "replay");
    probe_open(&p, 1, name);
    for (k = 0; k < 4; k++)
        snprintf(latch[k], sizeof(latch[k]), "redlock_latch:{%s}:%s", name, ids[k]);
    /* A fresh grant (ids[0], no ticket), then a re-entry (ids[1]) twice. */
    for (k = 0; k < 2; k++)
        for (copy = 0; copy < 1 + k; copy++) {
            const char *argv[] = {name,  latch[k],   p.queue, p.timeouts,      p.tickets, p.lapses,
                                  "10000", GONE_FIELD, ids[k], k == 0 ? "1" : "0", "",       "3000"};

            ck_assert_int_eq(gone_says("fair_acquire.lua", 6, 12, argv), 0);
        }
    {
        redisReply *r = ask(&p, 0, "HGET %s %s", name, GONE_FIELD);

        ck_assert_str_eq(r->str, "2");
        freeReplyObject(r);
    }
    /* A release (ids[2]) twice leaves one hold; the last one (ids[3]) ends it. */
    for (k = 2; k < 4; k++)
        for (copy = 0; copy < (k == 2 ? 2 : 1); copy++) {
            const char *argv[] = {name,     p.channel, latch[k], p.queue, p.timeouts, p.tickets,
                                  p.lapses, "0",       "10000",  GONE_FIELD, "0",     ids[0]};
            redisReply *r = eval_file(0, "fair_release.lua", 7, 12, argv);

            ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == (k == 2 ? 0 : 1),
                          "fair_release of request %d, copy %d: %lld", k, copy + 1,
                          r->type == REDIS_REPLY_INTEGER ? r->integer : -100);
            freeReplyObject(r);
            if (k == 2) {
                redisReply *h = ask(&p, 0, "HGET %s %s", name, GONE_FIELD);

                ck_assert_str_eq(h->str, "1");
                freeReplyObject(h);
            }
        }
    ck_assert_int_eq(ask_int(&p, 0, "EXISTS %s", name, NULL), 0);
    probe_close(&p);
}
END_TEST

/* 6. Re-entry counts, also while others wait; a fenced re-entry keeps its
 *    token. */

START_TEST(test_reentry_and_fencing)
{
    redlock_client *c = client_over(N_NODES);
    redlock_lock *holder, *w;
    char name[64], hf[FIELD_CAP], wf[FIELD_CAP], a[ARGS_CAP];
    uint64_t first = 0, again = 0, theirs = 0;
    int count = 0, i;
    bg_acquire b;
    probe p;

    rig_unique_name(name, sizeof(name), "fair", "reentry");
    probe_open(&p, N_NODES, name);
    holder = fair_handle(c, name, 0, 1);
    w = fair_handle(c, name, 0, 1);
    rig_field_of(c, HOLDER, hf, sizeof(hf));
    rig_field_of(c, W1, wf, sizeof(wf));
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    ck_assert_int_eq(redlock_lock_token_as(holder, HOLDER, &first), REDLOCK_OK);
    ck_assert_uint_gt(first, 0);
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    bg_start(&b, w, W1, 15000);
    ck_assert_msg(wait_queue_len(&p, 1, 5000) >= 0, "the waiter never queued");
    /* Re-entry is granted though someone is queued. */
    acquire_ok(holder, HOLDER, 0, LEASE_MS);
    ck_assert_int_eq(redlock_lock_token_as(holder, HOLDER, &again), REDLOCK_OK);
    ck_assert_uint_eq(again, first);
    ck_assert_int_eq(redlock_hold_count_as(holder, HOLDER, &count), REDLOCK_OK);
    ck_assert_int_eq(count, 3);
    ck_assert_uint_eq(nodes_saying(N_NODES, N_NODES, "3", fmt_args(a, "HGET '%s' '%s'", name, hf)),
                      N_NODES);
    for (i = 2; i >= 1; i--) {
        unlock_ok(holder, HOLDER);
        ck_assert_int_eq(redlock_hold_count_as(holder, HOLDER, &count), REDLOCK_OK);
        ck_assert_int_eq(count, i);
    }
    rig_sleep_ms(200);
    ck_assert_msg(!atomic_load(&b.finished), "the waiter ended its wait while a hold is left");
    ck_assert_int_eq(ask_int(&p, 0, "LLEN %s", p.queue, NULL), 1);
    unlock_ok(holder, HOLDER);
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    ck_assert_int_eq(redlock_lock_token_as(w, W1, &theirs), REDLOCK_OK);
    ck_assert_msg(theirs > first, "the next holder's token %llu after %llu",
                  (unsigned long long)theirs, (unsigned long long)first);
    ck_assert_int_eq(redlock_unlock_as(holder, HOLDER), REDLOCK_ENOT_OWNER);
    ck_assert_uint_eq(nodes_saying(N_NODES, N_NODES, "1", fmt_args(a, "HGET '%s' '%s'", name, wf)),
                      N_NODES);
    unlock_ok(w, W1);
    ck_assert_int_ge(wait_all_empty(&p, 3000), 0);
    redlock_lock_free(holder);
    redlock_lock_free(w);
    redlock_client_free(c);
    probe_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */

int main(void)
{
    Suite *s = suite_create("fair");

    RIG_ADD_CASE(s, test_fifo_single, 60);
    RIG_ADD_CASE(s, test_fifo_quorum_fenced, 60);
    RIG_ADD_CASE(s, test_fifo_single_two_clients_fenced, 60);
    RIG_ADD_CASE(s, test_fifo_quorum_two_clients, 60);
    RIG_ADD_CASE(s, test_disordered_lists_no_deadlock, 60);
    RIG_ADD_CASE(s, test_dead_waiter_at_head, 60);
    RIG_ADD_CASE(s, test_force_unlock_wakes_first_waiter, 60);
    RIG_ADD_CASE(s, test_give_up_leaves_at_once, 60);
    RIG_ADD_CASE(s, test_lost_wakeup, 60);
    RIG_ADD_CASE(s, test_queues_on_second_attempt, 60);
    RIG_ADD_CASE(s, test_subscription_kept_between_waits, 60);
    RIG_ADD_CASE(s, test_subscriber_killed_while_waiting, 60);
    RIG_ADD_CASE(s, test_place_restored_after_redisson_drops_it, 60);
    RIG_ADD_CASE(s, test_next_waiter_woken_when_dead_head_dropped, 60);
    RIG_ADD_CASE(s, test_next_waiter_woken_when_leave_drops_dead_head, 60);
    RIG_ADD_CASE(s, test_failed_attempt_keeps_place, 60);
    RIG_ADD_CASE(s, test_late_abort_after_leave_no_ghost, 60);
    RIG_ADD_CASE(s, test_late_leave_keeps_next_place, 60);
    RIG_ADD_CASE(s, test_next_wait_replaces_earlier_place, 60);
    RIG_ADD_CASE(s, test_late_leave_keeps_next_receipt, 60);
    RIG_ADD_CASE(s, test_own_leave_drops_receipt, 60);
    RIG_ADD_CASE(s, test_new_place_replaces_stale_receipt, 60);
    RIG_ADD_CASE(s, test_dead_holder_leaves_nothing, 60);
    RIG_ADD_CASE(s, test_earlier_place_does_not_grant_next_wait, 60);
    RIG_ADD_CASE(s, test_earlier_place_does_not_grant_fresh_try, 60);
    RIG_ADD_CASE(s, test_entry_without_ticket_not_listed_twice, 60);
    RIG_ADD_CASE(s, test_always_late_waiter_yields_head, 60);
    RIG_ADD_CASE(s, test_reentry_and_fencing, 60);
    RIG_ADD_CASE(s, test_fair_replays_apply_once, 60);
    return run_suite(s);
}
