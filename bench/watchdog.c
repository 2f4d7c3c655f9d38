/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "watchdog": 10 000 locks held through one client with the
 * watchdog over N = 5 nodes, then a measured window of several renewal
 * intervals in which the process does nothing but renew.
 *
 * Measured over the window: ticks, pipelined batches (the library's own
 * counters) and EVALSHA calls seen by each server (INFO commandstats), so
 * "round trips per tick per node" is checked from both ends; process CPU
 * per tick and per renewal, as a share of one core at the lease used and
 * projected to the default 30 s lease; resident memory per held lock
 * (VmRSS growth from before the handles existed, tick buffers included).
 *
 * Baseline in the same run: the CPU the process uses in an equally long
 * window with the same client and no locks held (threads idle).
 * Targets: <= 5 % of one core and <= 1 KiB of client memory per lock.
 *
 * Options: --locks L (10000, scaled), --lease MS (6000: renew every 2 s),
 * --intervals K (3 renewal intervals measured), --acquirers T (4).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"

const char *bench_name = "watchdog";

#define NODES 5
#define OWNER 4242 /* one explicit owner, so any thread may release */

typedef struct job {
    redlock_lock **locks;
    long from, to;
    int release;
    long failed;
} job;

static void *acquire_slice(void *arg)
{
    job *jb = arg;
    long i;

    for (i = jb->from; i < jb->to; i++) {
        int rc = jb->release ? redlock_unlock_as(jb->locks[i], OWNER)
                             : redlock_acquire_as(jb->locks[i], OWNER, 1000, 0);

        if (rc != REDLOCK_OK) {
            jb->failed++;
            if (jb->failed <= 3)
                bench_log("%s %ld: %s: %s", jb->release ? "release" : "acquire", i,
                          redlock_err_name(rc), redlock_last_error());
        }
    }
    return NULL;
}

static long run_slices(redlock_lock **locks, long n, int threads, int release)
{
    pthread_t tid[64];
    job jobs[64];
    long failed = 0;
    int t;

    for (t = 0; t < threads; t++) {
        jobs[t] = (job){locks, n * t / threads, n * (t + 1) / threads, release, 0};
        if (pthread_create(&tid[t], NULL, acquire_slice, &jobs[t]) != 0)
            bench_die("cannot start thread");
    }
    for (t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        failed += jobs[t].failed;
    }
    return failed;
}

static void server_calls(raw_conn *raw, long long *out)
{
    int i;

    for (i = 0; i < NODES; i++)
        out[i] = raw_command_calls(&raw[i], "evalsha") + raw_command_calls(&raw[i], "eval");
}

int main(int argc, char **argv)
{
    bench_args a;
    redlock_options o;
    redlock_client *c;
    redlock_lock **locks;
    redlock_stats s0, s1;
    raw_conn raw[NODES];
    long long calls0[NODES], calls1[NODES];
    long n_locks, lease_ms, intervals, i, failed, rss0, rss_h, rss1, rss2;
    long long heap0, heap_h, heap1, heap2, heap_min, heap_max;
    int64_t t_end;
    int acquirers, k;
    double u0, y0, u1, y1, ib_u0, ib_y0, ib_u1, ib_y1, window_s, cpu_s, idle_cpu_s;
    double ticks, batches, renewals, per_tick_node, max_calls_per_node_tick = 0;
    int64_t t0, t1;
    bench_json j;

    bench_parse_args(&a, argc, argv);
    n_locks = bench_opt_long(argc, argv, "--locks", bench_scaled(&a, 10000, 500));
    lease_ms = bench_opt_long(argc, argv, "--lease", 6000);
    intervals = bench_opt_long(argc, argv, "--intervals", 3);
    acquirers = (int)bench_opt_long(argc, argv, "--acquirers", 4);
    if (a.n_nodes < NODES)
        bench_die("needs %d nodes (--nodes), %zu given", NODES, a.n_nodes);
    if (n_locks < 1 || lease_ms < 300 || intervals < 1 || acquirers < 1 || acquirers > 64)
        bench_die("bad --locks/--lease/--intervals/--acquirers");
    window_s = (double)intervals * (double)lease_ms / 3000.0;

    for (i = 0; i < NODES; i++)
        raw_connect(&raw[i], a.hosts[i], a.ports[i], a.user, a.pass);
    memset(&o, 0, sizeof(o));
    o.watchdog_lease_ms = (int)lease_ms;
    c = bench_client(&a, NODES, &o);
    locks = calloc((size_t)n_locks, sizeof(*locks));
    if (!locks)
        bench_die("out of memory");
    /* Connections of every acquiring thread open before the baseline. */
    {
        redlock_lock *l;
        char name[96];

        snprintf(name, sizeof(name), "bench:wd:%d:warm", (int)getpid());
        bench_check(redlock_lock_new(c, name, NULL, &l), "lock_new");
        bench_check(redlock_acquire_as(l, OWNER, 1000, 10000), "warm-up acquire");
        bench_check(redlock_unlock_as(l, OWNER), "warm-up release");
        redlock_lock_free(l);
    }

    /* Baseline: the same client, nothing held, for a shorter window. */
    bench_cpu(&ib_u0, &ib_y0);
    bench_sleep_ns((int64_t)(window_s / 3 * 1e9));
    bench_cpu(&ib_u1, &ib_y1);
    idle_cpu_s = (ib_u1 - ib_u0 + ib_y1 - ib_y0) * 3;
    rss0 = bench_rss_kib();
    heap0 = bench_heap_in_use();

    bench_log("acquiring %ld locks with the watchdog (lease %ld ms)", n_locks, lease_ms);
    for (i = 0; i < n_locks; i++) {
        char name[96];

        snprintf(name, sizeof(name), "bench:wd:%d:%ld", (int)getpid(), i);
        bench_check(redlock_lock_new(c, name, NULL, &locks[i]), "lock_new");
    }
    rss_h = bench_rss_kib();
    heap_h = bench_heap_in_use();
    t0 = bench_now_ns();
    failed = run_slices(locks, n_locks, acquirers, 0);
    t1 = bench_now_ns();
    if (failed)
        bench_die("%ld of %ld acquisitions failed", failed, n_locks);
    rss1 = bench_rss_kib();
    heap1 = bench_heap_in_use();
    bench_log("held %ld locks in %.1f s; measuring %.1f s of renewals", n_locks,
              (double)(t1 - t0) / 1e9, window_s);

    /* Let the renewals of the acquisition phase settle into their rhythm. */
    bench_sleep_ns((int64_t)lease_ms * 1000000 / 3);
    bench_check(redlock_client_stats(c, &s0), "stats");
    server_calls(raw, calls0);
    bench_cpu(&u0, &y0);
    /* Live heap is sampled through the window: between ticks it is what
     * the held locks cost; during a tick it also has the tick's batch. */
    heap_min = heap_max = bench_heap_in_use();
    for (t_end = bench_now_ns() + (int64_t)(window_s * 1e9); bench_now_ns() < t_end;) {
        long long h;

        bench_sleep_ns(200000000);
        h = bench_heap_in_use();
        heap_min = h < heap_min ? h : heap_min;
        heap_max = h > heap_max ? h : heap_max;
    }
    bench_cpu(&u1, &y1);
    server_calls(raw, calls1);
    bench_check(redlock_client_stats(c, &s1), "stats");
    rss2 = bench_rss_kib();
    heap2 = bench_heap_in_use();
    cpu_s = u1 - u0 + y1 - y0;

    bench_log("releasing");
    failed = run_slices(locks, n_locks, acquirers, 1);
    for (i = 0; i < n_locks; i++)
        redlock_lock_free(locks[i]);
    free(locks);
    redlock_client_free(c);
    for (i = 0; i < NODES; i++)
        raw_close(&raw[i]);

    ticks = (double)(s1.watchdog_ticks - s0.watchdog_ticks);
    batches = (double)(s1.watchdog_batches - s0.watchdog_batches);
    renewals = (double)(s1.renewals - s0.renewals);
    per_tick_node = ticks > 0 ? batches / ticks / NODES : 0;
    for (k = 0; k < NODES; k++) {
        double per = ticks > 0 ? (double)(calls1[k] - calls0[k]) / ticks : 0;

        if (per > max_calls_per_node_tick)
            max_calls_per_node_tick = per;
    }

    bench_json_begin(&j, "watchdog");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", NODES);
    bench_json_int(&j, "locks", n_locks);
    bench_json_int(&j, "watchdog_lease_ms", lease_ms);
    bench_json_int(&j, "renew_interval_ms", lease_ms / 3);
    bench_json_num(&j, "window_s", window_s);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_num(&j, "ticks", ticks);
    bench_json_num(&j, "batches", batches);
    bench_json_num(&j, "renewals", renewals);
    bench_json_int(&j, "lost", (long long)(s1.lost - s0.lost));
    bench_json_int(&j, "release_failures", failed);
    bench_json_num(&j, "acquire_all_s", (double)(t1 - t0) / 1e9);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "round_trips");
    bench_json_num(&j, "batches_per_tick_per_node", per_tick_node);
    bench_json_num(&j, "renewals_per_tick", ticks > 0 ? renewals / ticks : 0);
    bench_json_num(&j, "server_script_calls_per_tick_max_node", max_calls_per_node_tick);
    bench_json_end_obj(&j);
    bench_json_cpu(&j, u1 - u0, y1 - y0);
    bench_json_num(&j, "cpu_ms_per_tick", ticks > 0 ? cpu_s * 1e3 / ticks : 0);
    bench_json_num(&j, "cpu_us_per_renewal", renewals > 0 ? cpu_s * 1e6 / renewals : 0);
    bench_json_num(&j, "core_share_at_lease", cpu_s / window_s);
    /* Renewal work scales with renewals per second: lease/3 apart. */
    bench_json_num(&j, "core_share_at_default_30s_lease",
                   renewals > 0 ? cpu_s / renewals * (double)n_locks / 10.0 : 0);
    bench_json_obj(&j, "memory_kib");
    bench_json_int(&j, "rss_before", rss0);
    bench_json_int(&j, "rss_handles_made", rss_h);
    bench_json_int(&j, "rss_held", rss1);
    bench_json_int(&j, "rss_after_window", rss2);
    bench_json_num(&j, "per_lock_bytes", (double)(rss2 - rss0) * 1024.0 / (double)n_locks);
    bench_json_num(&j, "handle_bytes", (double)(rss_h - rss0) * 1024.0 / (double)n_locks);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "heap_in_use_bytes");
    bench_json_int(&j, "before", heap0);
    bench_json_int(&j, "handles_made", heap_h);
    bench_json_int(&j, "held", heap1);
    bench_json_int(&j, "after_window", heap2);
    bench_json_int(&j, "window_min", heap_min);
    bench_json_int(&j, "window_max", heap_max);
    bench_json_num(&j, "per_lock_bytes", (double)(heap_min - heap0) / (double)n_locks);
    bench_json_num(&j, "per_lock_peak_bytes", (double)(heap_max - heap0) / (double)n_locks);
    bench_json_num(&j, "handle_bytes", (double)(heap_h - heap0) / (double)n_locks);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "same client, no locks held, same window length");
    bench_json_num(&j, "core_share", idle_cpu_s / window_s);
    bench_json_end_obj(&j);
    bench_json_target(&j, "core share at the measured lease", cpu_s / window_s, 0.05);
    bench_json_print(&j);

    bench_json_begin(&j, "watchdog_memory");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "locks", n_locks);
    bench_json_end_obj(&j);
    bench_json_num(&j, "per_lock_bytes", (double)(heap_min - heap0) / (double)n_locks);
    bench_json_num(&j, "per_lock_peak_bytes", (double)(heap_max - heap0) / (double)n_locks);
    bench_json_num(&j, "rss_per_lock_bytes", (double)(rss2 - rss0) * 1024.0 / (double)n_locks);
    /* The steady cost of a held lock is the live heap between ticks; the
     * peak adds a tick's batch of 10 000 renewals, and RSS also counts what
     * malloc keeps cached after that peak. All three are reported. */
    bench_json_target(&j, "client memory (live heap between ticks) per held lock, bytes",
                      (double)(heap_min - heap0) / (double)n_locks, 1024);
    bench_json_print(&j);

    bench_json_begin(&j, "watchdog_round_trips");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "locks", n_locks);
    bench_json_end_obj(&j);
    bench_json_num(&j, "batches_per_tick_per_node", per_tick_node);
    bench_json_target(&j, "pipelined batches per tick per node", per_tick_node, 1.0);
    bench_json_print(&j);
    return 0;
}
