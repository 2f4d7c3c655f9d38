/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "contention": K workers (2, 4, 16) on one name over N nodes,
 * each holding the lock for about 1 ms, then releasing and asking again at
 * once. Every worker has its own client, as separate processes would.
 *
 * Measured: acquisitions/s; hand-off latency, from the moment a holder
 * starts its release to the moment a *different* worker's acquire
 * returns; fairness as max/min acquisitions per worker. Each K runs twice:
 * with release messages (pub/sub wake-up) and with pub/sub disabled (pure
 * retry after the default random delay), to show what the wake-up path
 * is worth. Mutual exclusion is checked in passing (overlaps must be 0).
 *
 * Baseline in the same run: the floor's single acquire round trip to the
 * same N nodes, measured right before each point.
 * Target: hand-off p50 <= 3 x floor round trip p50.
 *
 * Between holds a worker "thinks" for --think-us (default: the hold time)
 * before asking again; without it the releaser nearly always takes the
 * lock back itself in the retry-only mode and no hand-off is measured.
 *
 * Options: --workers 2,4,16, --seconds S per point (3, scaled),
 * --hold-us U (1000), --think-us U (= hold), --n N nodes (5).
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"

const char *bench_name = "contention";

#define MAX_WORKERS 64
#define LEASE_MS 5000

typedef struct shared {
    const bench_args *a;
    size_t n;
    int pubsub;
    long hold_us, think_us;
    char name[96];
    pthread_barrier_t ready;
    int stop;
    int64_t last_release_ns;    /* when the last holder began releasing */
    int last_holder;
    int inside, overlaps;
} shared;

typedef struct worker {
    shared *s;
    int index;
    long acquisitions, self_handoffs, timeouts;
    bench_samples handoff, gap, acquire;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    shared *s = w->s;
    redlock_options o;
    redlock_client *c;
    redlock_lock *l;

    memset(&o, 0, sizeof(o));
    o.disable_pubsub = !s->pubsub;
    c = bench_client(s->a, s->n, &o);
    bench_check(redlock_lock_new(c, s->name, NULL, &l), "lock_new");
    /* Opens the connections before the clock starts. */
    {
        int locked;

        bench_check(redlock_is_locked(l, &locked), "is_locked");
    }
    pthread_barrier_wait(&s->ready);
    while (!__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST)) {
        int64_t t0 = bench_now_ns(), t1, rel;
        int prev, rc = redlock_try_lock_for(l, 2000, LEASE_MS);

        t1 = bench_now_ns();
        if (rc == REDLOCK_ETIMEOUT || rc == REDLOCK_ENO_QUORUM) {
            w->timeouts++;
            continue;
        }
        bench_check(rc, "acquire");
        if (__atomic_fetch_add(&s->inside, 1, __ATOMIC_SEQ_CST) != 0)
            __atomic_fetch_add(&s->overlaps, 1, __ATOMIC_SEQ_CST);
        w->acquisitions++;
        bench_samples_add(&w->acquire, t1 - t0);
        rel = __atomic_load_n(&s->last_release_ns, __ATOMIC_SEQ_CST);
        prev = __atomic_load_n(&s->last_holder, __ATOMIC_SEQ_CST);
        if (rel > 0)
            bench_samples_add(&w->gap, t1 - rel);
        if (rel > 0 && prev != w->index)
            bench_samples_add(&w->handoff, t1 - rel);
        else if (rel > 0)
            w->self_handoffs++;
        bench_sleep_ns(s->hold_us * 1000);
        __atomic_fetch_sub(&s->inside, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&s->last_holder, w->index, __ATOMIC_SEQ_CST);
        __atomic_store_n(&s->last_release_ns, bench_now_ns(), __ATOMIC_SEQ_CST);
        bench_check(redlock_unlock(l), "release");
        bench_sleep_ns(s->think_us * 1000);
    }
    redlock_lock_free(l);
    redlock_client_free(c);
    return NULL;
}

static bench_stats floor_rtt(const bench_args *a, size_t n)
{
    raw_floor *f = malloc(sizeof(*f));
    bench_samples s = {0};
    bench_stats st;
    char name[96];
    int i;

    if (!f)
        bench_die("out of memory");
    snprintf(name, sizeof(name), "bench:contention-floor:%d", (int)getpid());
    raw_floor_init(f, a, n, name, LEASE_MS);
    for (i = 0; i < 1100; i++) {
        int64_t t = raw_floor_acquire(f);

        raw_floor_release(f);
        if (i >= 100)
            bench_samples_add(&s, t);
    }
    raw_floor_free(f);
    free(f);
    st = bench_stats_of(&s);
    bench_samples_free(&s);
    return st;
}

static void run_point(const bench_args *a, size_t n, int k, int pubsub, double seconds,
                      long hold_us, long think_us)
{
    shared *s = calloc(1, sizeof(*s));
    worker *w = calloc((size_t)k, sizeof(*w));
    pthread_t tid[MAX_WORKERS];
    bench_samples handoff = {0}, gap = {0}, acquire = {0};
    bench_stats st_h, st_g, st_a, st_floor = floor_rtt(a, n);
    bench_meter meter = {0};
    long total = 0, mx = 0, mn = -1, self = 0, timeouts = 0;
    char file[64];
    bench_json j;
    int i;

    if (!s || !w)
        bench_die("out of memory");
    s->a = a;
    s->n = n;
    s->pubsub = pubsub;
    s->hold_us = hold_us;
    s->think_us = think_us;
    snprintf(s->name, sizeof(s->name), "bench:contention:%d:%d:%d", (int)getpid(), k,
             pubsub);
    pthread_barrier_init(&s->ready, NULL, (unsigned)k + 1);
    for (i = 0; i < k; i++) {
        w[i].s = s;
        w[i].index = i;
        if (pthread_create(&tid[i], NULL, work, &w[i]) != 0)
            bench_die("cannot start worker %d", i);
    }
    pthread_barrier_wait(&s->ready);
    bench_meter_start(&meter);
    bench_sleep_ns((int64_t)(seconds * 1e9));
    __atomic_store_n(&s->stop, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < k; i++)
        pthread_join(tid[i], NULL);
    bench_meter_stop(&meter);
    pthread_barrier_destroy(&s->ready);

    for (i = 0; i < k; i++) {
        bench_samples_merge(&handoff, &w[i].handoff);
        bench_samples_merge(&acquire, &w[i].acquire);
        bench_samples_merge(&gap, &w[i].gap);
        bench_samples_free(&w[i].gap);
        bench_samples_free(&w[i].handoff);
        bench_samples_free(&w[i].acquire);
        total += w[i].acquisitions;
        self += w[i].self_handoffs;
        timeouts += w[i].timeouts;
        if (w[i].acquisitions > mx)
            mx = w[i].acquisitions;
        if (mn < 0 || w[i].acquisitions < mn)
            mn = w[i].acquisitions;
    }
    st_h = bench_stats_of(&handoff);
    st_a = bench_stats_of(&acquire);
    st_g = bench_stats_of(&gap);
    snprintf(file, sizeof(file), "contention_k%d_%s_handoff", k, pubsub ? "pubsub" : "retry");
    bench_write_cdf(a, file, &handoff);

    bench_json_begin(&j, "contention");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)n);
    bench_json_int(&j, "workers", k);
    bench_json_str(&j, "wake", pubsub ? "pubsub" : "retry_only");
    bench_json_int(&j, "hold_us", hold_us);
    bench_json_int(&j, "think_us", think_us);
    bench_json_num(&j, "seconds", seconds);
    bench_json_int(&j, "lease_ms", LEASE_MS);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "acquisitions", total);
    bench_json_int(&j, "handoffs_to_other_worker", (long long)handoff.n);
    bench_json_int(&j, "reacquired_by_same_worker", self);
    bench_json_int(&j, "wait_timeouts", timeouts);
    bench_json_int(&j, "overlaps", s->overlaps);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &st_h);
    /* Release to the next acquisition by anyone, the releaser included
     * (whose own gap contains its think time). */
    bench_json_stats(&j, "release_to_next_acquire_us", &st_g);
    bench_json_stats(&j, "acquire_wait_us", &st_a);
    bench_json_num(&j, "ops_per_s", (double)total / ((double)meter.wall_ns / 1e9));
    bench_json_cpu(&j, meter.user_s, meter.sys_s);
    bench_json_obj(&j, "fairness");
    bench_json_int(&j, "max_per_worker", mx);
    bench_json_int(&j, "min_per_worker", mn);
    bench_json_num(&j, "max_over_min", mn > 0 ? (double)mx / (double)mn : (double)NAN);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "floor acquire round trip, same nodes, same run");
    bench_json_stats(&j, "latency_us", &st_floor);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "handoff_p50_over_floor_rtt_p50", st_h.p50 / st_floor.p50);
    bench_json_end_obj(&j);
    bench_json_target(&j, "handoff_p50 / floor round trip p50", st_h.p50 / st_floor.p50,
                      3.0);
    bench_json_print(&j);

    bench_samples_free(&handoff);
    bench_samples_free(&gap);
    bench_samples_free(&acquire);
    free(w);
    free(s);
}

int main(int argc, char **argv)
{
    bench_args a;
    const char *list;
    char *copy, *tok, *save = NULL;
    double seconds;
    long hold_us, think_us, n;

    bench_parse_args(&a, argc, argv);
    list = bench_opt(argc, argv, "--workers", "2,4,16");
    seconds = strtod(bench_opt(argc, argv, "--seconds", "3"), NULL) * a.scale;
    if (seconds < 0.5)
        seconds = 0.5;
    hold_us = bench_opt_long(argc, argv, "--hold-us", 1000);
    think_us = bench_opt_long(argc, argv, "--think-us", hold_us);
    n = bench_opt_long(argc, argv, "--n", 5);
    if (n < 1 || (size_t)n > a.n_nodes)
        bench_die("--n %ld: %zu nodes given", n, a.n_nodes);
    copy = strdup(list);
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int k = atoi(tok);

        if (k < 2 || k > MAX_WORKERS)
            bench_die("--workers: %s out of range 2..%d", tok, MAX_WORKERS);
        bench_log("%d workers, pub/sub", k);
        run_point(&a, (size_t)n, k, 1, seconds, hold_us, think_us);
        bench_log("%d workers, retry only", k);
        run_point(&a, (size_t)n, k, 0, seconds, hold_us, think_us);
    }
    free(copy);
    return 0;
}
