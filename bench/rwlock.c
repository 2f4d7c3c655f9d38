/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "rwlock": read-write locks and expiring semaphores against the
 * plain lock (the mutex), at N = 5 and N = 1, every baseline in the same
 * run and in alternating chunks, so that a machine slowing down for a while
 * slows both sides alike.
 *
 *   rwlock_readers: T = 16 threads, each with its own client (as separate
 *     processes would), cycling acquire (waiting), fixed lease, release, at
 *     once again: read holds on ONE name, against the mutex on one name
 *     (which serialises the threads) and the mutex on T names (one each:
 *     nothing to wait for). Acquisitions/s of each and the ratios. Readers
 *     may overlap (the most holders seen at once is reported: with no hold
 *     time the window is short) and mutex holders must not (overlaps must
 *     be 0).
 *   rwlock_handoff: K = 4 workers (own clients) on a semaphore of 2 permits,
 *     and on a mutex, holding ~1 ms and "thinking" as long before asking
 *     again, as in contention.c. Hand-off: from the moment a holder starts
 *     its release to the moment a worker that was already waiting then gets
 *     its grant. Since permits are interchangeable, each grant is matched
 *     with the oldest permit freed and not yet taken again; a grant whose
 *     permit was freed before its worker asked is an "immediate grant", not
 *     a hand-off. The mutex is measured by the same code (one permit), so
 *     the two distributions compare like with like. More than 2 permit
 *     holders (or 2 mutex holders) at once would be counted as over_limit.
 *   Both also report the servers' script time, scripts and other commands
 *   per grant under contention (INFO commandstats of every node around
 *   each chunk, once the nodes caught up): more than 2 x N scripts per
 *   grant are attempts that did not grant, and their aborts.
 *   rwlock_server_cost (rwlock_cost.c): one thread, uncontended cycles of
 *     a read hold, a permit and the mutex, alternating chunks: server time,
 *     scripts and other commands per cycle.
 *
 * Acquires wait up to 10 s: in practice "forever" (a healthy run never
 * reaches it), but a lost wake-up shows as a counted timeout, not a hang.
 *
 * Options: --parts readers,handoff,cost (all), --seconds S per variant and
 * N (3, scaled, at least 0.5), --rounds R chunks per variant (2),
 * --threads T (16), --workers K (4), --hold-us U (1000, hand-off only),
 * --think-us U (= hold), --cycles C per variant and N for the cost
 * (2000, scaled, at least 200).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"

const char *bench_name = "rwlock";

#define MAX_WORKERS 64
#define WAIT_MS 10000
#define PERMITS 2
/* 16 threads and 5 servers on 2 cores: the default 50 ms node timeout is
 * for production latencies (see server.c); the lease must exceed two node
 * timeouts. */
#define READERS_NODE_TIMEOUT_MS 2000
#define READERS_LEASE_MS 10000
#define HANDOFF_LEASE_MS 5000
#define FREED_CAP 64
#define COST_ROUNDS 4
#define FLUSH_MS 10000

typedef enum variant { V_READ, V_MUTEX_SAME, V_MUTEX_OWN, V_PERMIT, V_COUNT } variant;

static const char *const variant_key[V_COUNT] = {"read_same_name", "mutex_same_name",
                                                 "mutex_distinct_names", "permit"};

typedef struct crew crew;

typedef struct worker {
    crew *cr;
    pthread_t th;
    int index;
    redlock_client *c;
    redlock_lock *read, *mutex_same, *mutex_own;
    redlock_semaphore *sem;
    /* This phase's results, read by the controller between phases. */
    long acquisitions, timeouts, handoffs, immediate, unmatched, unconfirmed;
    long grants;                /* the drain's included */
    bench_samples handoff, acquire;
} worker;

struct crew {
    size_t n;
    int k;
    long hold_us, think_us, lease_ms;
    int track;                  /* hand-off bookkeeping (bounded holders) */
    pthread_barrier_t start, end;
    int quit;                   /* set before a start barrier: leave */
    variant v;
    int stop;
    int inside, max_inside, overlaps;
    /* When each permit not taken again yet was freed (0: free from the
     * start), oldest first. */
    pthread_mutex_t mu;
    int64_t freed[FREED_CAP];
    size_t head, count;
    worker w[MAX_WORKERS];
};

/* What one variant added up to over its chunks. */
typedef struct tally {
    bench_meter m;
    long acquisitions, timeouts, handoffs, immediate, unmatched, unconfirmed;
    long grants;
    long long usec, scripts, calls; /* server side, every node, drain included */
    int64_t catch_up_ns;        /* after each chunk, until every node answered */
    int max_inside, overlaps;
    long per_worker[MAX_WORKERS];
    bench_samples handoff, acquire;
} tally;

/* Defined in rwlock_cost.c. INFO commandstats of every node in conns:
 * script (EVAL/EVALSHA) usec, scripts run, and every other command. */
void rwlock_server_now(raw_conn *conns, size_t n, long long *usec, long long *scripts,
                       long long *calls);
/* Scenario rwlock_server_cost at N = nodes; conns: every node, for INFO. */
void rwlock_server_cost(const bench_args *a, raw_conn *conns, size_t n_conns, size_t nodes,
                        int permits, long cycles, int rounds);

/* Connections of their own to every node, for INFO commandstats. */
typedef struct probe {
    raw_conn conns[BENCH_MAX_NODES];
    size_t n;
} probe;

/* ---- Workers ----------------------------------------------------------- */

static int holder_limit(const crew *cr)
{
    switch (cr->v) {
    case V_MUTEX_SAME:
        return 1;
    case V_PERMIT:
        return PERMITS;
    default:
        return INT_MAX;  /* readers share; distinct names never meet */
    }
}

static int acquire(worker *w, redlock_permit **p)
{
    long lease = w->cr->lease_ms;

    switch (w->cr->v) {
    case V_READ:
        return redlock_try_lock_for(w->read, WAIT_MS, lease);
    case V_MUTEX_SAME:
        return redlock_try_lock_for(w->mutex_same, WAIT_MS, lease);
    case V_MUTEX_OWN:
        return redlock_try_lock_for(w->mutex_own, WAIT_MS, lease);
    default:
        return redlock_semaphore_acquire(w->sem, 1, WAIT_MS, lease, p);
    }
}

static int release(worker *w, redlock_permit *p)
{
    switch (w->cr->v) {
    case V_READ:
        return redlock_unlock(w->read);
    case V_MUTEX_SAME:
        return redlock_unlock(w->mutex_same);
    case V_MUTEX_OWN:
        return redlock_unlock(w->mutex_own);
    default:
        return redlock_semaphore_release(p);
    }
}

/* Takes the oldest freed permit for a grant at t1 of an acquire begun at
 * t0: a hand-off when it was freed after the worker asked. */
static void match_grant(worker *w, int64_t t0, int64_t t1, int counted)
{
    crew *cr = w->cr;
    int64_t at;

    pthread_mutex_lock(&cr->mu);
    if (cr->count == 0) {
        pthread_mutex_unlock(&cr->mu);
        w->unmatched += counted;
        return;
    }
    at = cr->freed[cr->head];
    cr->head = (cr->head + 1) % FREED_CAP;
    cr->count--;
    pthread_mutex_unlock(&cr->mu);
    if (!counted)
        return;
    if (at > t0) {
        w->handoffs++;
        bench_samples_add(&w->handoff, t1 - at);
    } else {
        w->immediate++;
    }
}

static void note_freed(crew *cr, int64_t at)
{
    pthread_mutex_lock(&cr->mu);
    if (cr->count < FREED_CAP) {
        cr->freed[(cr->head + cr->count) % FREED_CAP] = at;
        cr->count++;
    }
    pthread_mutex_unlock(&cr->mu);
}

static void enter(crew *cr)
{
    int now = __atomic_add_fetch(&cr->inside, 1, __ATOMIC_SEQ_CST);
    int seen = __atomic_load_n(&cr->max_inside, __ATOMIC_SEQ_CST);

    if (now > holder_limit(cr))
        __atomic_fetch_add(&cr->overlaps, 1, __ATOMIC_SEQ_CST);
    while (now > seen && !__atomic_compare_exchange_n(&cr->max_inside, &seen, now, 0,
                                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
}

static void run_phase(worker *w)
{
    crew *cr = w->cr;

    while (!__atomic_load_n(&cr->stop, __ATOMIC_SEQ_CST)) {
        redlock_permit *p = NULL;
        int64_t t0 = bench_now_ns(), t1;
        int rc = acquire(w, &p), counted;

        t1 = bench_now_ns();
        if (rc == REDLOCK_ETIMEOUT || rc == REDLOCK_ENO_QUORUM) {
            w->timeouts++;
            continue;
        }
        bench_check(rc, variant_key[cr->v]);
        /* Grants after the stop are the drain, not the measurement. */
        counted = !__atomic_load_n(&cr->stop, __ATOMIC_SEQ_CST);
        enter(cr);
        w->grants++;
        if (cr->track)
            match_grant(w, t0, t1, counted);
        if (counted) {
            w->acquisitions++;
            bench_samples_add(&w->acquire, t1 - t0);
        }
        bench_sleep_ns(cr->hold_us * 1000);
        __atomic_fetch_sub(&cr->inside, 1, __ATOMIC_SEQ_CST);
        if (cr->track)
            note_freed(cr, bench_now_ns());
        rc = release(w, p);
        /* No member answered in time: the release goes on in the
         * background (a loaded machine, not a failure of the lock). */
        if (rc == REDLOCK_ENO_QUORUM)
            w->unconfirmed++;
        else
            bench_check(rc, "release");
        bench_sleep_ns(cr->think_us * 1000);
    }
}

static void *work(void *arg)
{
    worker *w = arg;
    crew *cr = w->cr;

    for (;;) {
        pthread_barrier_wait(&cr->start);
        if (__atomic_load_n(&cr->quit, __ATOMIC_SEQ_CST))
            return NULL;
        run_phase(w);
        pthread_barrier_wait(&cr->end);
    }
}

/* ---- The crew and its phases ------------------------------------------ */

static crew *crew_start(const bench_args *a, size_t n, int k, const char *tag,
                        const redlock_options *o, long lease_ms, long hold_us,
                        long think_us, int track)
{
    crew *cr = calloc(1, sizeof(*cr));
    redlock_lock_options ro = {0};
    char name[128];
    int i, locked;

    if (!cr)
        bench_die("out of memory");
    cr->n = n;
    cr->k = k;
    cr->lease_ms = lease_ms;
    cr->hold_us = hold_us;
    cr->think_us = think_us;
    cr->track = track;
    pthread_mutex_init(&cr->mu, NULL);
    pthread_barrier_init(&cr->start, NULL, (unsigned)k + 1);
    pthread_barrier_init(&cr->end, NULL, (unsigned)k + 1);
    for (i = 0; i < k; i++) {
        worker *w = &cr->w[i];

        w->cr = cr;
        w->index = i;
        w->c = bench_client(a, n, o);
        /* A plain lock and a read-write lock of one name exclude each
         * other: each variant gets a name of its own. */
        ro.kind = REDLOCK_LOCK_READ;
        snprintf(name, sizeof(name), "bench:rwlock:%d:%s:n%zu:read", (int)getpid(), tag, n);
        bench_check(redlock_lock_new(w->c, name, &ro, &w->read), "lock_new read");
        snprintf(name, sizeof(name), "bench:rwlock:%d:%s:n%zu:mutex", (int)getpid(), tag, n);
        bench_check(redlock_lock_new(w->c, name, NULL, &w->mutex_same), "lock_new");
        snprintf(name, sizeof(name), "bench:rwlock:%d:%s:n%zu:own%d", (int)getpid(), tag, n, i);
        bench_check(redlock_lock_new(w->c, name, NULL, &w->mutex_own), "lock_new");
        snprintf(name, sizeof(name), "bench:rwlock:%d:%s:n%zu:sem", (int)getpid(), tag, n);
        bench_check(redlock_semaphore_new(w->c, name, PERMITS, NULL, &w->sem), "semaphore_new");
        /* Opens the connections before any clock starts. */
        bench_check(redlock_is_locked(w->mutex_own, &locked), "is_locked");
        if (pthread_create(&w->th, NULL, work, w) != 0)
            bench_die("cannot start worker %d", i);
    }
    return cr;
}

static void crew_stop(crew *cr)
{
    int i;

    __atomic_store_n(&cr->quit, 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&cr->start);
    for (i = 0; i < cr->k; i++) {
        worker *w = &cr->w[i];

        pthread_join(w->th, NULL);
        redlock_semaphore_free(w->sem);
        redlock_lock_free(w->read);
        redlock_lock_free(w->mutex_same);
        redlock_lock_free(w->mutex_own);
        redlock_client_free(w->c);
    }
    pthread_barrier_destroy(&cr->start);
    pthread_barrier_destroy(&cr->end);
    pthread_mutex_destroy(&cr->mu);
    free(cr);
}

/* One chunk of variant v; its results are added to t. */
static void phase(crew *cr, probe *p, variant v, double seconds, tally *t)
{
    long long u0, k0, c0, u1, k1, c1;
    int64_t t0;
    int i, free_at_start;

    /* The workers wait at the start barrier: nothing runs meanwhile. */
    cr->v = v;
    free_at_start = holder_limit(cr) < FREED_CAP ? holder_limit(cr) : 0;
    cr->stop = 0;
    cr->inside = cr->max_inside = cr->overlaps = 0;
    cr->head = 0;
    cr->count = (size_t)free_at_start;
    memset(cr->freed, 0, sizeof(cr->freed));
    rwlock_server_now(p->conns, p->n, &u0, &k0, &c0);
    pthread_barrier_wait(&cr->start);
    bench_meter_start(&t->m);
    bench_sleep_ns((int64_t)(seconds * 1e9));
    __atomic_store_n(&cr->stop, 1, __ATOMIC_SEQ_CST);
    bench_meter_stop(&t->m);
    pthread_barrier_wait(&cr->end);
    /* Once a quorum answered, a client moves on and the slower nodes may
     * lag behind with queued scripts; the chunk's server time is only
     * complete once they caught up. How long that takes is reported. */
    t0 = bench_now_ns();
    for (i = 0; i < cr->k; i++)
        if (redlock_client_flush(cr->w[i].c, FLUSH_MS) != REDLOCK_OK)
            bench_log("N = %zu: the nodes did not catch up within %d ms", cr->n, FLUSH_MS);
    t->catch_up_ns += bench_now_ns() - t0;
    rwlock_server_now(p->conns, p->n, &u1, &k1, &c1);
    t->usec += u1 - u0;
    t->scripts += k1 - k0;
    t->calls += c1 - c0;

    if (cr->max_inside > t->max_inside)
        t->max_inside = cr->max_inside;
    t->overlaps += cr->overlaps;
    for (i = 0; i < cr->k; i++) {
        worker *w = &cr->w[i];

        t->acquisitions += w->acquisitions;
        t->grants += w->grants;
        t->per_worker[i] += w->acquisitions;
        t->timeouts += w->timeouts;
        t->handoffs += w->handoffs;
        t->immediate += w->immediate;
        t->unmatched += w->unmatched;
        t->unconfirmed += w->unconfirmed;
        bench_samples_merge(&t->handoff, &w->handoff);
        bench_samples_merge(&t->acquire, &w->acquire);
        bench_samples_free(&w->handoff);
        bench_samples_free(&w->acquire);
        w->acquisitions = w->grants = w->timeouts = w->handoffs = w->immediate = 0;
        w->unmatched = w->unconfirmed = 0;
    }
}

static double ops_per_s(const tally *t)
{
    return (double)t->acquisitions / ((double)t->m.wall_ns / 1e9);
}

static void put_counts(bench_json *j, const tally *t, int track)
{
    bench_json_obj(j, "counts");
    bench_json_int(j, "acquisitions", t->acquisitions);
    if (track) {
        bench_json_int(j, "handoffs_to_waiting_worker", t->handoffs);
        bench_json_int(j, "immediate_grants", t->immediate);
        bench_json_int(j, "unmatched_grants", t->unmatched);
        bench_json_int(j, "over_limit", t->overlaps);
    } else {
        bench_json_int(j, "overlaps", t->overlaps);
    }
    bench_json_int(j, "max_concurrent_holders", t->max_inside);
    bench_json_int(j, "wait_timeouts", t->timeouts);
    bench_json_int(j, "releases_unconfirmed", t->unconfirmed);
    bench_json_end_obj(j);
    /* Scripts per grant above 2 x N are attempts that did not grant
     * (refused, split or aborted) and their aborts. */
    bench_json_obj(j, "server");
    bench_json_num(j, "server_us_per_grant", (double)t->usec / (double)t->grants);
    bench_json_num(j, "scripts_per_grant", (double)t->scripts / (double)t->grants);
    bench_json_num(j, "commands_per_grant", (double)t->calls / (double)t->grants);
    bench_json_num(j, "catch_up_ms", (double)t->catch_up_ns / 1e6);
    bench_json_end_obj(j);
}

static void put_fairness(bench_json *j, const tally *t, int k)
{
    long mx = 0, mn = -1;
    int i;

    for (i = 0; i < k; i++) {
        if (t->per_worker[i] > mx)
            mx = t->per_worker[i];
        if (mn < 0 || t->per_worker[i] < mn)
            mn = t->per_worker[i];
    }
    bench_json_obj(j, "fairness");
    bench_json_int(j, "max_per_worker", mx);
    bench_json_int(j, "min_per_worker", mn);
    bench_json_num(j, "max_over_min", mn > 0 ? (double)mx / (double)mn : (double)NAN);
    bench_json_end_obj(j);
}

/* A variant's numbers as a nested object (the baselines). */
static void put_variant(bench_json *j, const char *key, tally *t, int k, int track)
{
    bench_stats st = bench_stats_of(&t->acquire);

    bench_json_obj(j, key);
    bench_json_num(j, "ops_per_s", ops_per_s(t));
    put_counts(j, t, track);
    if (track) {
        bench_stats h = bench_stats_of(&t->handoff);

        bench_json_stats(j, "latency_us", &h);
        bench_json_stats(j, "acquire_wait_us", &st);
    } else {
        bench_json_stats(j, "acquire_us", &st);
    }
    bench_json_cpu(j, t->m.user_s, t->m.sys_s);
    put_fairness(j, t, k);
    bench_json_end_obj(j);
}

/* A benchmark asserts nothing, but a broken exclusion must not pass
 * unnoticed in a column of numbers. */
static void warn_if_unsafe(size_t n, const char *what, const tally *t)
{
    if (t->overlaps > 0 || t->unmatched > 0)
        bench_log("WARNING: N = %zu, %s: %d times more holders than allowed, %ld grants "
                  "beyond the permits freed", n, what, t->overlaps, t->unmatched);
}

static void tally_free(tally *t)
{
    bench_samples_free(&t->handoff);
    bench_samples_free(&t->acquire);
}

/* ---- rwlock_readers ----------------------------------------------------- */

static void readers(const bench_args *a, probe *p, size_t n, int threads, double seconds,
                    int rounds)
{
    static const variant order[] = {V_READ, V_MUTEX_SAME, V_MUTEX_OWN};
    redlock_options o = {0};
    tally *t = calloc(V_COUNT, sizeof(*t));
    bench_stats st;
    crew *cr;
    bench_json j;
    int r;
    size_t i;

    if (!t)
        bench_die("out of memory");
    o.node_timeout_ms = READERS_NODE_TIMEOUT_MS;
    cr = crew_start(a, n, threads, "readers", &o, READERS_LEASE_MS, 0, 0, 0);
    for (r = 0; r < rounds; r++)
        for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
            phase(cr, p, order[i], seconds / rounds, &t[order[i]]);
    crew_stop(cr);
    warn_if_unsafe(n, "mutex on one name", &t[V_MUTEX_SAME]);

    st = bench_stats_of(&t[V_READ].acquire);
    bench_json_begin(&j, "rwlock_readers");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)n);
    bench_json_int(&j, "threads", threads);
    bench_json_int(&j, "names", 1);
    bench_json_num(&j, "seconds", seconds);
    bench_json_int(&j, "rounds", rounds);
    bench_json_int(&j, "hold_us", 0);
    bench_json_int(&j, "lease_ms", READERS_LEASE_MS);
    bench_json_int(&j, "node_timeout_ms", READERS_NODE_TIMEOUT_MS);
    bench_json_end_obj(&j);
    put_counts(&j, &t[V_READ], 0);
    bench_json_stats(&j, "latency_us", &st);
    bench_json_num(&j, "ops_per_s", ops_per_s(&t[V_READ]));
    bench_json_cpu(&j, t[V_READ].m.user_s, t[V_READ].m.sys_s);
    put_fairness(&j, &t[V_READ], threads);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "mutex, same threads and clients, on one name and on one name "
                               "per thread; same run, alternating chunks");
    put_variant(&j, variant_key[V_MUTEX_SAME], &t[V_MUTEX_SAME], threads, 0);
    put_variant(&j, variant_key[V_MUTEX_OWN], &t[V_MUTEX_OWN], threads, 0);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "read_over_mutex_same_name",
                   ops_per_s(&t[V_READ]) / ops_per_s(&t[V_MUTEX_SAME]));
    bench_json_num(&j, "read_over_mutex_distinct_names",
                   ops_per_s(&t[V_READ]) / ops_per_s(&t[V_MUTEX_OWN]));
    bench_json_end_obj(&j);
    bench_json_print(&j);
    for (i = 0; i < V_COUNT; i++)
        tally_free(&t[i]);
    free(t);
}

/* ---- rwlock_handoff ----------------------------------------------------- */

static void handoff(const bench_args *a, probe *p, size_t n, int k, double seconds, int rounds,
                    long hold_us, long think_us)
{
    tally *t = calloc(V_COUNT, sizeof(*t));
    bench_stats sp, sm, sa;
    char file[64];
    crew *cr;
    bench_json j;
    int r;
    size_t i;

    if (!t)
        bench_die("out of memory");
    cr = crew_start(a, n, k, "handoff", NULL, HANDOFF_LEASE_MS, hold_us, think_us, 1);
    for (r = 0; r < rounds; r++) {
        phase(cr, p, V_PERMIT, seconds / rounds, &t[V_PERMIT]);
        phase(cr, p, V_MUTEX_SAME, seconds / rounds, &t[V_MUTEX_SAME]);
    }
    crew_stop(cr);
    warn_if_unsafe(n, "semaphore", &t[V_PERMIT]);
    warn_if_unsafe(n, "mutex", &t[V_MUTEX_SAME]);

    sp = bench_stats_of(&t[V_PERMIT].handoff);
    sm = bench_stats_of(&t[V_MUTEX_SAME].handoff);
    sa = bench_stats_of(&t[V_PERMIT].acquire);
    snprintf(file, sizeof(file), "rwlock_n%zu_permit_handoff", n);
    bench_write_cdf(a, file, &t[V_PERMIT].handoff);
    snprintf(file, sizeof(file), "rwlock_n%zu_mutex_handoff", n);
    bench_write_cdf(a, file, &t[V_MUTEX_SAME].handoff);

    bench_json_begin(&j, "rwlock_handoff");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)n);
    bench_json_int(&j, "workers", k);
    bench_json_int(&j, "permits", PERMITS);
    bench_json_int(&j, "hold_us", hold_us);
    bench_json_int(&j, "think_us", think_us);
    bench_json_num(&j, "seconds", seconds);
    bench_json_int(&j, "rounds", rounds);
    bench_json_int(&j, "lease_ms", HANDOFF_LEASE_MS);
    bench_json_end_obj(&j);
    put_counts(&j, &t[V_PERMIT], 1);
    bench_json_stats(&j, "latency_us", &sp);
    bench_json_stats(&j, "acquire_wait_us", &sa);
    bench_json_num(&j, "ops_per_s", ops_per_s(&t[V_PERMIT]));
    bench_json_cpu(&j, t[V_PERMIT].m.user_s, t[V_PERMIT].m.sys_s);
    put_fairness(&j, &t[V_PERMIT], k);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "mutex, same workers and clients, one name; same run, "
                               "alternating chunks, hand-off measured alike");
    put_variant(&j, "mutex", &t[V_MUTEX_SAME], k, 1);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "handoff_p50_permit_over_mutex", sp.p50 / sm.p50);
    bench_json_num(&j, "handoff_p99_permit_over_mutex", sp.p99 / sm.p99);
    bench_json_num(&j, "ops_per_s_permit_over_mutex",
                   ops_per_s(&t[V_PERMIT]) / ops_per_s(&t[V_MUTEX_SAME]));
    bench_json_end_obj(&j);
    bench_json_print(&j);
    for (i = 0; i < V_COUNT; i++)
        tally_free(&t[i]);
    free(t);
}

int main(int argc, char **argv)
{
    static const size_t ns[] = {5, 1};
    bench_args a;
    const char *parts;
    double seconds;
    long threads, workers, hold_us, think_us, cycles, rounds;
    probe p;
    size_t i;

    bench_parse_args(&a, argc, argv);
    parts = bench_opt(argc, argv, "--parts", "readers,handoff,cost");
    seconds = strtod(bench_opt(argc, argv, "--seconds", "3"), NULL) * a.scale;
    if (seconds < 0.5)
        seconds = 0.5;
    rounds = bench_opt_long(argc, argv, "--rounds", 2);
    threads = bench_opt_long(argc, argv, "--threads", 16);
    workers = bench_opt_long(argc, argv, "--workers", 4);
    hold_us = bench_opt_long(argc, argv, "--hold-us", 1000);
    think_us = bench_opt_long(argc, argv, "--think-us", hold_us);
    cycles = bench_opt_long(argc, argv, "--cycles", bench_scaled(&a, 2000, 200));
    if (rounds < 1 || threads < 1 || threads > MAX_WORKERS || workers < 2 ||
        workers > MAX_WORKERS || hold_us < 0 || think_us < 0 || cycles < COST_ROUNDS)
        bench_die("bad --rounds/--threads/--workers/--hold-us/--think-us/--cycles");
    if (a.n_nodes < 5)
        bench_die("needs 5 nodes (--nodes), %zu given", a.n_nodes);
    memset(&p, 0, sizeof(p));
    p.n = 5;
    for (i = 0; i < p.n; i++)
        raw_connect(&p.conns[i], a.hosts[i], a.ports[i], a.user, a.pass);

    for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        if (bench_has_part(parts, "readers")) {
            bench_log("N = %zu: %ld threads, read / mutex one name / mutex own names", ns[i],
                      threads);
            readers(&a, &p, ns[i], (int)threads, seconds, (int)rounds);
        }
        if (bench_has_part(parts, "handoff")) {
            bench_log("N = %zu: %ld workers, semaphore of %d permits / mutex", ns[i], workers,
                      PERMITS);
            handoff(&a, &p, ns[i], (int)workers, seconds, (int)rounds, hold_us, think_us);
        }
    }
    if (bench_has_part(parts, "cost"))
        for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
            bench_log("N = %zu: server cost per cycle, read / permit / mutex", ns[i]);
            rwlock_server_cost(&a, p.conns, p.n, ns[i], PERMITS, cycles, COST_ROUNDS);
        }
    for (i = 0; i < p.n; i++)
        raw_close(&p.conns[i]);
    return 0;
}
