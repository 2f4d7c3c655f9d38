/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A client with options.io_thread, against the fixture's real
 * redis-server processes: many threads' blocking calls go through one
 * thread and its pipelined connections, with the blocking calls'
 * semantics: mutual exclusion and fencing, errors and member reports on
 * the caller's thread, cancels from another thread, the watchdog and
 * on_lost, and a clean end.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/adapters/poll.h"
#include "redlock/redlock.h"
#include "rig_env.h"

#define N_NODES 5
#define N_THREADS 16

static redlock_client *io_client(int watchdog_lease_ms)
{
    redlock_options o = {0};
    redlock_client *c = NULL;

    o.io_thread = 1;
    o.node_timeout_ms = 500;
    o.watchdog_lease_ms = watchdog_lease_ms;
    ck_assert_int_eq(redlock_client_new(&c, rig_plain_uris(), N_NODES, &o), REDLOCK_OK);
    return c;
}

static long connected_clients(size_t node)
{
    const char *info = rig_cli(node, "INFO clients");
    const char *p = strstr(info, "connected_clients:");

    ck_assert_ptr_nonnull(p);
    return atol(p + strlen("connected_clients:"));
}

typedef struct worker {
    redlock_client *c;
    const char *name;
    int cycles, failures;
    int *inside;             /* threads in the critical section, shared name */
    int overlaps;
    uint64_t *last_token;    /* the last fencing token seen on the name */
    int token_regressions;
    pthread_mutex_t *mu;
    long peak_connections;   /* node 0, sampled inside the critical section */
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    redlock_lock_options lo = {0};
    redlock_lock *l = NULL;
    int i;

    lo.fencing = 1;
    if (redlock_lock_new(w->c, w->name, &lo, &l) != REDLOCK_OK) {
        w->failures = w->cycles;
        return NULL;
    }
    for (i = 0; i < w->cycles; i++) {
        uint64_t token = 0;

        if (redlock_try_lock_for(l, 10000, 5000) != REDLOCK_OK) {
            w->failures++;
            continue;
        }
        if (redlock_lock_token(l, &token) != REDLOCK_OK)
            w->failures++;
        pthread_mutex_lock(w->mu);
        if (++*w->inside > 1)
            w->overlaps++;
        if (token <= *w->last_token)
            w->token_regressions++;
        *w->last_token = token;
        pthread_mutex_unlock(w->mu);
        pthread_mutex_lock(w->mu);
        --*w->inside;
        pthread_mutex_unlock(w->mu);
        if (redlock_unlock(l) != REDLOCK_OK)
            w->failures++;
    }
    redlock_lock_free(l);
    return NULL;
}

/* Sixteen threads on sixteen names: every call goes through the I/O
 * thread, so node 0 sees a few connections of the client's, not one set
 * per thread (a blocking client opens at least sixteen). */
START_TEST(test_threads_share_connections)
{
    redlock_client *c = io_client(0);
    pthread_t th[N_THREADS];
    worker w[N_THREADS];
    char names[N_THREADS][128];
    int inside[N_THREADS] = {0};
    uint64_t tokens[N_THREADS] = {0};
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    long before = connected_clients(0), during = 0;
    int i, k;

    for (i = 0; i < N_THREADS; i++) {
        rig_unique_name(names[i], sizeof(names[i]), "io", "share");
        w[i] = (worker){.c = c, .name = names[i], .cycles = 40, .inside = &inside[i],
                        .last_token = &tokens[i], .mu = &mu};
        ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (k = 0; k < 20; k++) {
        long now = connected_clients(0);

        if (now > during)
            during = now;
        rig_sleep_ms(10);
    }
    for (i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].failures, 0);
        ck_assert_int_eq(w[i].token_regressions, 0);
    }
    /* The mux connection, the subscriber, and perhaps one pooled set. */
    ck_assert_msg(during - before <= 4, "node 0 had %ld connections more during the run",
                  during - before);
    redlock_client_free(c);
}
END_TEST

/* Eight threads on one name: one holder at a time, tokens rising. */
START_TEST(test_contended_mutual_exclusion)
{
    redlock_client *c = io_client(0);
    pthread_t th[8];
    worker w[8];
    char name[128];
    int inside = 0, i;
    uint64_t last = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

    rig_unique_name(name, sizeof(name), "io", "contended");
    for (i = 0; i < 8; i++) {
        w[i] = (worker){.c = c, .name = name, .cycles = 25, .inside = &inside,
                        .last_token = &last, .mu = &mu};
        ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].failures, 0);
        ck_assert_int_eq(w[i].overlaps, 0);
        ck_assert_int_eq(w[i].token_regressions, 0);
    }
    ck_assert_uint_gt(last, 0);
    redlock_client_free(c);
}
END_TEST

/* Members of the calling thread's last report through l with outcome
 * (an attempt decides at a quorum, so the slowest may say NONE); *pttl:
 * the smallest holder TTL among HELD_ELSEWHERE members. */
static int members_with(redlock_lock *l, int outcome, int64_t *pttl)
{
    redlock_member_report m;
    size_t i;
    int n = 0;

    for (i = 0; i < N_NODES; i++) {
        ck_assert_int_eq(redlock_lock_report(l, i, &m), REDLOCK_OK);
        if ((int)m.outcome != outcome)
            continue;
        if (pttl && (n == 0 || m.pttl_ms < *pttl))
            *pttl = m.pttl_ms;
        n++;
    }
    return n;
}

typedef struct try_result {
    redlock_lock *l;
    int rc;
    char message[256];
    int held_elsewhere, granted;
    int64_t pttl_ms;
} try_result;

static void *try_once(void *arg)
{
    try_result *r = arg;

    r->rc = redlock_acquire_as(r->l, 77, 0, 5000);
    snprintf(r->message, sizeof(r->message), "%s", redlock_last_error());
    r->held_elsewhere = members_with(r->l, REDLOCK_MEMBER_HELD_ELSEWHERE, &r->pttl_ms);
    r->granted = members_with(r->l, REDLOCK_MEMBER_GRANTED, NULL);
    return NULL;
}

/* A refusal's code, message and member report reach the thread that
 * called, not the I/O thread or another caller. */
START_TEST(test_errors_and_reports_on_caller_thread)
{
    redlock_client *c = io_client(0);
    redlock_lock *l = NULL;
    char name[128];
    pthread_t th;
    try_result r = {0};
    int quorum, granted;

    rig_unique_name(name, sizeof(name), "io", "busy");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    quorum = redlock_lock_quorum(l);
    ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 10000), REDLOCK_OK);
    granted = members_with(l, REDLOCK_MEMBER_GRANTED, NULL);
    ck_assert_int_ge(granted, quorum);
    r.l = l;
    ck_assert_int_eq(pthread_create(&th, NULL, try_once, &r), 0);
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, REDLOCK_EBUSY);
    ck_assert_msg(strstr(r.message, name) != NULL, "message: %s", r.message);
    /* Refused by enough members that no quorum was left. */
    ck_assert_int_ge(r.held_elsewhere, N_NODES - quorum + 1);
    ck_assert_int_eq(r.granted, 0);
    ck_assert_int_gt(r.pttl_ms, 0);
    /* This thread's own report is untouched. */
    ck_assert_int_eq(members_with(l, REDLOCK_MEMBER_GRANTED, NULL), granted);
    ck_assert_int_eq(members_with(l, REDLOCK_MEMBER_HELD_ELSEWHERE, NULL), 0);
    ck_assert_int_eq(redlock_unlock_as(l, 2), REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

typedef struct waiter {
    redlock_lock *l;
    int64_t wait_ms; /* 0: 20 s */
    int rc;
    int64_t took_ms;
} waiter;

static void *wait_long(void *arg)
{
    waiter *w = arg;
    int64_t start = rig_now_ms();

    w->rc = redlock_acquire_as(w->l, 9, w->wait_ms ? w->wait_ms : 20000, 5000);
    w->took_ms = rig_now_ms() - start;
    return NULL;
}

/* A cancel from another thread ends a relayed wait. */
START_TEST(test_cancel_from_other_thread)
{
    redlock_client *c = io_client(0);
    redlock_lock *l = NULL;
    char name[128];
    pthread_t th;
    waiter w = {0};

    rig_unique_name(name, sizeof(name), "io", "cancel");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 30000), REDLOCK_OK);
    w.l = l;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_long, &w), 0);
    rig_sleep_ms(300);
    redlock_acquire_cancel(l);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    ck_assert_int_lt(w.took_ms, 3000);
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* A cancel from another thread ends only the cancelled lock's calls: a
 * waiter on another lock makes no extra attempt (it used to try again at
 * once for every such cancel, past the loop's cap on operations at once). */
START_TEST(test_cancel_spares_other_locks)
{
    redlock_client *c = io_client(0);
    redlock_lock *l = NULL, *other = NULL;
    char name[128], other_name[128];
    redlock_stats before, after;
    pthread_t th, other_th;
    waiter w = {0}, other_w = {0};
    int i;

    rig_unique_name(name, sizeof(name), "io", "cancel-one");
    rig_unique_name(other_name, sizeof(other_name), "io", "cancel-other");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, other_name, NULL, &other), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 30000), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(other, 1, 0, 30000), REDLOCK_OK);
    w.l = l;
    other_w.l = other;
    other_w.wait_ms = 2000;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_long, &w), 0);
    ck_assert_int_eq(pthread_create(&other_th, NULL, wait_long, &other_w), 0);
    /* Both waiters have subscribed and sleep until a release message or
     * the holder's 30 s TTL. */
    rig_sleep_ms(300);
    ck_assert_int_eq(redlock_client_stats(c, &before), REDLOCK_OK);
    for (i = 0; i < 10; i++) {
        redlock_acquire_cancel(l);
        rig_sleep_ms(20);
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    ck_assert_int_eq(redlock_client_stats(c, &after), REDLOCK_OK);
    ck_assert_msg(after.attempts == before.attempts,
                  "10 cancels of another lock made %llu attempts",
                  (unsigned long long)(after.attempts - before.attempts));
    pthread_join(other_th, NULL);
    ck_assert_int_eq(other_w.rc, REDLOCK_ETIMEOUT);
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(other, 1), REDLOCK_OK);
    redlock_lock_free(other);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

typedef struct loss {
    pthread_mutex_t mu;
    int calls;
    pthread_t thread;
} loss;

static void on_lost(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    loss *x = ud;

    (void)l;
    (void)owner;
    (void)reason;
    pthread_mutex_lock(&x->mu);
    x->calls++;
    x->thread = pthread_self();
    pthread_mutex_unlock(&x->mu);
}

/* The watchdog renews from the I/O thread, and a loss is reported there
 * at once. */
START_TEST(test_watchdog_and_on_lost)
{
    redlock_client *c = io_client(1500);
    redlock_lock *l = NULL;
    char name[128], cmd[256];
    loss x = {.mu = PTHREAD_MUTEX_INITIALIZER};
    int64_t deadline;
    size_t i;
    int calls;

    rig_unique_name(name, sizeof(name), "io", "watchdog");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    redlock_lock_set_on_lost(l, on_lost, &x);
    ck_assert_int_eq(redlock_lock_acquire(l), REDLOCK_OK);
    /* Two leases: held only if renewed. */
    rig_sleep_ms(3000);
    snprintf(cmd, sizeof(cmd), "PTTL %s", name);
    ck_assert_int_gt(atol(rig_cli(0, cmd)), 0);
    snprintf(cmd, sizeof(cmd), "DEL %s", name);
    for (i = 0; i < N_NODES; i++)
        rig_cli(i, cmd);
    deadline = rig_now_ms() + 3000;
    do {
        rig_sleep_ms(20);
        pthread_mutex_lock(&x.mu);
        calls = x.calls;
        pthread_mutex_unlock(&x.mu);
    } while (calls == 0 && rig_now_ms() < deadline);
    ck_assert_int_eq(calls, 1);
    ck_assert(!pthread_equal(x.thread, pthread_self()));
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

static redlock_lock *kind_lock(redlock_client *c, const char *name, int kind)
{
    redlock_lock_options lo = {0};
    redlock_lock *l = NULL;

    lo.kind = kind;
    ck_assert_int_eq(redlock_lock_new(c, name, &lo, &l), REDLOCK_OK);
    return l;
}

typedef struct fair_waiter {
    redlock_lock *l;
    uint64_t owner;
    int rc;
    int *order, *next;
    pthread_mutex_t *mu;
} fair_waiter;

static void *wait_fair(void *arg)
{
    fair_waiter *w = arg;

    w->rc = redlock_acquire_as(w->l, w->owner, 10000, 5000);
    pthread_mutex_lock(w->mu);
    *w->order = (*w->next)++;
    pthread_mutex_unlock(w->mu);
    if (w->rc == REDLOCK_OK)
        w->rc = redlock_unlock_as(w->l, w->owner);
    return NULL;
}

/* Read-write locks, semaphore permits and the fair lock's queue go through
 * the I/O thread with their own semantics. */
START_TEST(test_every_kind)
{
    redlock_client *c = io_client(0);
    char name[128], fname[128];
    redlock_lock *rd, *wr, *fair;
    redlock_semaphore *sem = NULL;
    redlock_permit *p1 = NULL, *p2 = NULL, *p3 = NULL;
    fair_waiter w[2];
    pthread_t th[2];
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int order[2] = {-1, -1}, next = 0, i;

    rig_unique_name(name, sizeof(name), "io", "rw");
    rd = kind_lock(c, name, REDLOCK_LOCK_READ);
    wr = kind_lock(c, name, REDLOCK_LOCK_WRITE);
    ck_assert_int_eq(redlock_acquire_as(rd, 1, 0, 5000), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(rd, 2, 0, 5000), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(wr, 3, 0, 5000), REDLOCK_EBUSY);
    ck_assert_int_eq(redlock_unlock_as(rd, 1), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(rd, 2), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(wr, 3, 0, 5000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(wr, 3), REDLOCK_OK);
    redlock_lock_free(rd);
    redlock_lock_free(wr);

    rig_unique_name(name, sizeof(name), "io", "sem");
    ck_assert_int_eq(redlock_semaphore_new(c, name, 2, NULL, &sem), REDLOCK_OK);
    ck_assert_int_eq(redlock_semaphore_acquire(sem, 1, 0, 5000, &p1), REDLOCK_OK);
    ck_assert_int_eq(redlock_semaphore_acquire(sem, 1, 0, 5000, &p2), REDLOCK_OK);
    ck_assert_int_eq(redlock_semaphore_acquire(sem, 1, 0, 5000, &p3), REDLOCK_EBUSY);
    ck_assert_ptr_null(p3);
    ck_assert_int_eq(redlock_semaphore_release(p1), REDLOCK_OK);
    ck_assert_int_eq(redlock_semaphore_acquire(sem, 1, 0, 5000, &p3), REDLOCK_OK);
    ck_assert_int_eq(redlock_semaphore_release(p2), REDLOCK_OK);
    ck_assert_int_eq(redlock_semaphore_release(p3), REDLOCK_OK);
    redlock_semaphore_free(sem);

    /* Two waiters queue 300 ms apart behind a holder: the first comes
     * first, woken by the release through the loop's subscriber. */
    rig_unique_name(fname, sizeof(fname), "io", "fair");
    fair = kind_lock(c, fname, REDLOCK_LOCK_FAIR);
    ck_assert_int_eq(redlock_acquire_as(fair, 1, 0, 10000), REDLOCK_OK);
    for (i = 0; i < 2; i++) {
        w[i] = (fair_waiter){.l = fair, .owner = (uint64_t)i + 10, .order = &order[i],
                             .next = &next, .mu = &mu};
        ck_assert_int_eq(pthread_create(&th[i], NULL, wait_fair, &w[i]), 0);
        rig_sleep_ms(300);
    }
    ck_assert_int_eq(redlock_unlock_as(fair, 1), REDLOCK_OK);
    for (i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].rc, REDLOCK_OK);
    }
    ck_assert_int_eq(order[0], 0);
    ck_assert_int_eq(order[1], 1);
    redlock_lock_free(fair);
    redlock_client_free(c);
}
END_TEST

static void *thaw_later(void *arg)
{
    rig_sleep_ms(200);
    rig_node("thaw", *(size_t *)arg);
    return NULL;
}

/* A release settled at a quorum leaves the frozen node's answer owed on
 * the I/O thread's shared connection; a flush from another thread waits
 * until that thread has read it. */
START_TEST(test_flush_waits_for_owed_release)
{
    redlock_client *c = io_client(0);
    redlock_lock *l = NULL;
    char name[128], cmd[256];
    size_t frozen = 4;
    pthread_t th;
    int rc;

    rig_unique_name(name, sizeof(name), "io", "flush");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 10000), REDLOCK_OK);
    rig_node("freeze", frozen);
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    ck_assert_int_eq(pthread_create(&th, NULL, thaw_later, &frozen), 0);
    rc = redlock_client_flush(c, 3000);
    pthread_join(th, NULL);
    ck_assert_msg(rc == REDLOCK_OK, "flush: %s", redlock_last_error());
    snprintf(cmd, sizeof(cmd), "EXISTS %s", name);
    ck_assert_str_eq(rig_cli(frozen, cmd), "0");
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

typedef struct from_callback {
    redlock_lock *io_lock;
    int called, rc;
} from_callback;

static void acquire_io_lock(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    from_callback *f = ud;

    (void)l;
    (void)owner;
    (void)reason;
    f->rc = redlock_acquire_as(f->io_lock, 5, 0, 0);
    f->called++;
}

static void loop_done(void *ud, redlock_lock *l, int rc, const char *message)
{
    (void)l;
    (void)message;
    *(int *)ud = rc == REDLOCK_OK ? 1 : -1;
}

/* A blocking call on an io_thread client from another client's loop
 * callback (its on_lost, in a fiber on the program's thread) is handed to
 * the I/O thread like any other: the hold it takes is renewed there. It
 * used to run inline, and the idle I/O thread never learnt of the hold. */
START_TEST(test_call_from_other_loop_callback)
{
    redlock_client *c = io_client(1500), *other = NULL;
    redlock_options o = {0};
    redlock_poll_loop pl;
    redlock_lock *l = NULL, *ol = NULL;
    char name[128], oname[128], cmd[256];
    from_callback f = {0};
    int held = 0;
    int64_t end;
    size_t i;

    rig_unique_name(name, sizeof(name), "io", "fromloop");
    rig_unique_name(oname, sizeof(oname), "io", "fromloop-other");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    o.event_loop = 1;
    o.watchdog_lease_ms = 1500;
    ck_assert_int_eq(redlock_client_new(&other, rig_plain_uris(), N_NODES, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_poll_attach(&pl, other), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(other, oname, NULL, &ol), REDLOCK_OK);
    f.io_lock = l;
    redlock_lock_set_on_lost(ol, acquire_io_lock, &f);
    ck_assert_int_eq(redlock_acquire_async(ol, 1, 0, 0, loop_done, &held), REDLOCK_OK);
    for (end = rig_now_ms() + 3000; !held && rig_now_ms() < end;)
        redlock_poll_run_once(&pl, 10);
    ck_assert_int_eq(held, 1);
    snprintf(cmd, sizeof(cmd), "DEL %s", oname);
    for (i = 0; i < N_NODES; i++)
        rig_cli(i, cmd);
    for (end = rig_now_ms() + 3000; !f.called && rig_now_ms() < end;)
        redlock_poll_run_once(&pl, 10);
    ck_assert_int_eq(f.called, 1);
    ck_assert_int_eq(f.rc, REDLOCK_OK);
    /* Two of its leases, the other loop still driven: held only if the
     * I/O thread renews it. */
    for (end = rig_now_ms() + 3200; rig_now_ms() < end;)
        redlock_poll_run_once(&pl, 10);
    snprintf(cmd, sizeof(cmd), "PTTL %s", name);
    ck_assert_msg(atol(rig_cli(0, cmd)) > 0, "the hold was not renewed: PTTL %s",
                  rig_cli(0, cmd));
    ck_assert_int_eq(redlock_unlock_as(l, 5), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(ol, 1), REDLOCK_ELOST);
    redlock_lock_free(ol);
    redlock_client_free(other);
    redlock_poll_free(&pl);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

static void never_done(void *ud, redlock_lock *l, int rc, const char *message)
{
    (void)ud;
    (void)l;
    (void)rc;
    (void)message;
}

static void no_socket(void *ud, int fd, int events)
{
    (void)ud;
    (void)fd;
    (void)events;
}

static void no_timer(void *ud, int64_t ms)
{
    (void)ud;
    (void)ms;
}

/* The loop belongs to the I/O thread: the event-loop calls are refused
 * elsewhere, and the option excludes event_loop. */
START_TEST(test_loop_api_refused)
{
    redlock_client *c = io_client(0), *bad = NULL;
    redlock_options o = {0};
    redlock_lock *l = NULL;
    char name[128];

    rig_unique_name(name, sizeof(name), "io", "refused");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_async(l, 1, 0, 1000, never_done, NULL), REDLOCK_EINVAL);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "io_thread"));
    ck_assert_int_eq(redlock_loop_action(c, REDLOCK_EV_TIMEOUT, 0), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_loop_attach(c, no_socket, no_timer, NULL), REDLOCK_EINVAL);
    o.io_thread = 1;
    o.event_loop = 1;
    ck_assert_int_eq(redlock_client_new(&bad, rig_plain_uris(), N_NODES, &o), REDLOCK_EINVAL);
    ck_assert_ptr_null(bad);
    o.event_loop = 0;
    o.event_loop_watchdog_thread = 1;
    ck_assert_int_eq(redlock_client_new(&bad, rig_plain_uris(), N_NODES, &o), REDLOCK_EINVAL);
    ck_assert_ptr_null(bad);
    ck_assert_uint_eq(redlock_loop_pending(c), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* Freeing the client with a hold and a handle still live ends cleanly:
 * the I/O thread is joined and nothing of the client's is left running. */
START_TEST(test_free_ends_thread)
{
    int round;

    for (round = 0; round < 20; round++) {
        redlock_client *c = io_client(0);
        redlock_lock *l = NULL;
        char name[128];

        rig_unique_name(name, sizeof(name), "io", "free");
        ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
        ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 2000), REDLOCK_OK);
        ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
        redlock_lock_free(l);
        redlock_client_free(c);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("io_thread");
    SRunner *sr;
    int failed;

    RIG_ADD_CASE(s, test_threads_share_connections, 120);
    RIG_ADD_CASE(s, test_contended_mutual_exclusion, 120);
    RIG_ADD_CASE(s, test_errors_and_reports_on_caller_thread, 60);
    RIG_ADD_CASE(s, test_cancel_from_other_thread, 60);
    RIG_ADD_CASE(s, test_cancel_spares_other_locks, 60);
    RIG_ADD_CASE(s, test_watchdog_and_on_lost, 60);
    RIG_ADD_CASE(s, test_every_kind, 60);
    RIG_ADD_CASE(s, test_flush_waits_for_owed_release, 60);
    RIG_ADD_CASE(s, test_call_from_other_loop_callback, 60);
    RIG_ADD_CASE(s, test_loop_api_refused, 60);
    RIG_ADD_CASE(s, test_free_ends_thread, 60);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
