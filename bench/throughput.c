/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "throughput": T threads (1, 2, 4, 8, 16, 32) each cycling
 * acquire + release on its own name over N = 5 nodes, in two layouts:
 * every thread sharing one client object, and one client per thread.
 *
 * Baseline in the same run: T threads running the floor (the scripts by
 * hand, one set of sockets per thread). Results are cycles/s, latency
 * percentiles and the ratio to the floor at the same T; the scaling curve
 * is cycles/s against T.
 *
 * Options: --threads 1,2,4,... (default 1,2,4,8,16,32), --seconds S per
 * point (default 2, scaled), --lease MS (10000).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"

const char *bench_name = "throughput";

#define NODES 5
#define MAX_THREADS 64

typedef enum mode { MODE_FLOOR, MODE_SHARED, MODE_PER_THREAD } mode;

static const char *mode_name[] = {"floor", "shared_client", "client_per_thread"};

typedef struct worker {
    const bench_args *a;
    mode m;
    int index;
    long lease_ms;
    redlock_client *shared;
    pthread_barrier_t *ready;
    volatile int *stop;
    bench_samples lat;
    long cycles, failed;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    redlock_client *c = NULL;
    redlock_lock *l = NULL;
    raw_floor *f = NULL;
    char name[96];
    int i;

    snprintf(name, sizeof(name), "bench:tp:%d:%s:%d", (int)getpid(), mode_name[w->m],
             w->index);
    if (w->m == MODE_FLOOR) {
        if (!(f = malloc(sizeof(*f))))
            bench_die("out of memory");
        raw_floor_init(f, w->a, NODES, name, w->lease_ms);
    } else {
        c = w->m == MODE_SHARED ? w->shared : bench_client(w->a, NODES, NULL);
        bench_check(redlock_lock_new(c, name, NULL, &l), "lock_new");
    }
    /* Warm-up: every thread has its connections before the clock starts. */
    for (i = 0; i < 20; i++) {
        if (f) {
            raw_floor_acquire(f);
            raw_floor_release(f);
        } else if (redlock_try_lock_for(l, 0, w->lease_ms) == REDLOCK_OK) {
            (void)redlock_unlock(l);
        }
    }
    pthread_barrier_wait(w->ready);
    while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
        int64_t t0 = bench_now_ns();

        if (f) {
            raw_floor_acquire(f);
            raw_floor_release(f);
        } else {
            /* An overloaded machine can push a whole attempt past the node
             * timeout: counted, not fatal. */
            int rc = redlock_try_lock_for(l, 0, w->lease_ms);

            if (rc != REDLOCK_OK || redlock_unlock(l) != REDLOCK_OK) {
                w->failed++;
                continue;
            }
        }
        bench_samples_add(&w->lat, bench_now_ns() - t0);
        w->cycles++;
    }
    pthread_barrier_wait(w->ready);
    if (f) {
        raw_floor_free(f);
        free(f);
    } else {
        redlock_lock_free(l);
        if (w->m != MODE_SHARED)
            redlock_client_free(c);
    }
    return NULL;
}

typedef struct point {
    double ops;
    bench_stats st;
} point;

static point run_point(const bench_args *a, mode m, int threads, double seconds,
                       long lease_ms)
{
    worker w[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    pthread_barrier_t ready;
    volatile int stop = 0;
    redlock_client *shared = m == MODE_SHARED ? bench_client(a, NODES, NULL) : NULL;
    bench_samples all = {0};
    bench_meter meter = {0};
    bench_json j;
    point p;
    long total = 0, failed = 0;
    char file[64];
    int i;

    pthread_barrier_init(&ready, NULL, (unsigned)threads + 1);
    for (i = 0; i < threads; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].a = a;
        w[i].m = m;
        w[i].index = i;
        w[i].lease_ms = lease_ms;
        w[i].shared = shared;
        w[i].ready = &ready;
        w[i].stop = &stop;
        if (pthread_create(&tid[i], NULL, work, &w[i]) != 0)
            bench_die("cannot start thread %d", i);
    }
    pthread_barrier_wait(&ready);
    bench_meter_start(&meter);
    bench_sleep_ns((int64_t)(seconds * 1e9));
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_barrier_wait(&ready);
    bench_meter_stop(&meter);
    for (i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        bench_samples_merge(&all, &w[i].lat);
        bench_samples_free(&w[i].lat);
        total += w[i].cycles;
        failed += w[i].failed;
    }
    pthread_barrier_destroy(&ready);
    redlock_client_free(shared);

    p.st = bench_stats_of(&all);
    p.ops = (double)total / ((double)meter.wall_ns / 1e9);
    snprintf(file, sizeof(file), "throughput_%s_t%d", mode_name[m], threads);
    bench_write_cdf(a, file, &all);

    bench_json_begin(&j, "throughput");
    bench_json_obj(&j, "params");
    bench_json_str(&j, "mode", mode_name[m]);
    bench_json_int(&j, "nodes", NODES);
    bench_json_int(&j, "threads", threads);
    bench_json_num(&j, "seconds", seconds);
    bench_json_int(&j, "lease_ms", lease_ms);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "cycles", total);
    bench_json_int(&j, "failed", failed);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &p.st);
    bench_json_num(&j, "ops_per_s", p.ops);
    bench_json_cpu(&j, meter.user_s, meter.sys_s);
    bench_json_num(&j, "cpu_us_per_cycle",
                   total ? (meter.user_s + meter.sys_s) * 1e6 / (double)total : 0);
    bench_json_print(&j);
    bench_samples_free(&all);
    return p;
}

int main(int argc, char **argv)
{
    bench_args a;
    const char *list;
    int threads[16], nt = 0, i, m;
    double seconds;
    long lease_ms;
    point pts[3][16];
    char *copy, *tok, *save = NULL;
    FILE *curve;

    bench_parse_args(&a, argc, argv);
    list = bench_opt(argc, argv, "--threads", "1,2,4,8,16,32");
    seconds = strtod(bench_opt(argc, argv, "--seconds", "2"), NULL) * a.scale;
    if (seconds < 0.2)
        seconds = 0.2;
    lease_ms = bench_opt_long(argc, argv, "--lease", 10000);
    if (a.n_nodes < NODES)
        bench_die("needs %d nodes (--nodes), %zu given", NODES, a.n_nodes);
    copy = strdup(list);
    for (tok = strtok_r(copy, ",", &save); tok && nt < 16; tok = strtok_r(NULL, ",", &save)) {
        threads[nt] = atoi(tok);
        if (threads[nt] < 1 || threads[nt] > MAX_THREADS)
            bench_die("--threads: %s out of range 1..%d", tok, MAX_THREADS);
        nt++;
    }
    free(copy);

    /* For each T the three modes run back to back, so they see the same
     * machine. */
    for (i = 0; i < nt; i++)
        for (m = 0; m < 3; m++) {
            bench_log("%s, %d thread(s)", mode_name[m], threads[i]);
            pts[m][i] = run_point(&a, (mode)m, threads[i], seconds, lease_ms);
        }

    curve = bench_data_file(&a, "throughput_scaling.dat");
    if (curve)
        fprintf(curve, "# threads floor_ops shared_ops per_thread_ops floor_p99_us "
                       "shared_p99_us per_thread_p99_us\n");
    for (i = 0; i < nt; i++) {
        bench_json j;

        if (curve)
            fprintf(curve, "%d %.1f %.1f %.1f %.1f %.1f %.1f\n", threads[i], pts[0][i].ops,
                    pts[1][i].ops, pts[2][i].ops, pts[0][i].st.p99, pts[1][i].st.p99,
                    pts[2][i].st.p99);
        bench_json_begin(&j, "throughput_summary");
        bench_json_obj(&j, "params");
        bench_json_int(&j, "nodes", NODES);
        bench_json_int(&j, "threads", threads[i]);
        bench_json_end_obj(&j);
        bench_json_obj(&j, "ops_per_s");
        for (m = 0; m < 3; m++)
            bench_json_num(&j, mode_name[m], pts[m][i].ops);
        bench_json_end_obj(&j);
        bench_json_obj(&j, "p99_us");
        for (m = 0; m < 3; m++)
            bench_json_num(&j, mode_name[m], pts[m][i].st.p99);
        bench_json_end_obj(&j);
        bench_json_obj(&j, "ratio");
        bench_json_num(&j, "shared_ops_over_floor", pts[1][i].ops / pts[0][i].ops);
        bench_json_num(&j, "per_thread_ops_over_floor", pts[2][i].ops / pts[0][i].ops);
        bench_json_num(&j, "shared_ops_over_per_thread", pts[1][i].ops / pts[2][i].ops);
        bench_json_num(&j, "shared_scaling_vs_first", pts[1][i].ops / pts[1][0].ops);
        bench_json_end_obj(&j);
        bench_json_print(&j);
    }
    if (curve)
        fclose(curve);
    return 0;
}
