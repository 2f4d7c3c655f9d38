/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "uncontended": one thread, one name, acquire + release cycles
 * through the library, for N = 1 and N = 5.
 *
 * Baseline in the same run: the floor (the same two scripts sent by hand
 * over blocking sockets, see raw.c) on the same nodes, in alternating
 * chunks, so a machine that slows down for a while slows both alike.
 * Target: library cycle p50 <= 1.15 x floor cycle p50.
 *
 * Options: --cycles C (default 4000 per mode and N), --rounds R (10),
 * --lease MS (10000; a fixed lease, as the floor uses).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"

const char *bench_name = "uncontended";

static void run(const bench_args *a, size_t n, long cycles, long rounds, long lease_ms)
{
    raw_floor *f = malloc(sizeof(*f));
    bench_samples lib_acq = {0}, lib_rel = {0}, lib_cyc = {0};
    bench_samples fl_acq = {0}, fl_cyc = {0};
    bench_meter m_lib = {0}, m_floor = {0};
    bench_stats s_acq, s_rel, s_cyc, s_facq, s_fcyc;
    redlock_client *c;
    redlock_lock *l;
    char name[96], fname[96], file[64];
    long r, i, per = cycles / rounds, failed = 0;
    bench_json j;

    if (!f)
        bench_die("out of memory");
    snprintf(name, sizeof(name), "bench:uncontended:%d:%zu", (int)getpid(), n);
    snprintf(fname, sizeof(fname), "bench:uncontended-floor:%d:%zu", (int)getpid(), n);
    raw_floor_init(f, a, n, fname, lease_ms);
    c = bench_client(a, n, NULL);
    bench_check(redlock_lock_new(c, name, NULL, &l), "lock_new");

    /* Warm-up: connections open, scripts cached, caches hot. */
    for (i = 0; i < 200; i++) {
        if (redlock_try_lock_for(l, 0, lease_ms) == REDLOCK_OK)
            (void)redlock_unlock(l);
        raw_floor_acquire(f);
        raw_floor_release(f);
    }
    for (r = 0; r < rounds; r++) {
        bench_meter_start(&m_floor);
        for (i = 0; i < per; i++) {
            int64_t ta = raw_floor_acquire(f), tr = raw_floor_release(f);

            bench_samples_add(&fl_acq, ta);
            bench_samples_add(&fl_cyc, ta + tr);
        }
        bench_meter_stop(&m_floor);
        bench_meter_start(&m_lib);
        for (i = 0; i < per; i++) {
            int64_t t0 = bench_now_ns(), t1, t2;
            int rc = redlock_try_lock_for(l, 0, lease_ms);

            /* A machine overloaded past the node timeout fails an attempt:
             * counted in the JSON, not fatal. */
            if (rc != REDLOCK_OK) {
                failed++;
                continue;
            }
            t1 = bench_now_ns();
            if (redlock_unlock(l) != REDLOCK_OK)
                failed++;
            t2 = bench_now_ns();
            bench_samples_add(&lib_acq, t1 - t0);
            bench_samples_add(&lib_rel, t2 - t1);
            bench_samples_add(&lib_cyc, t2 - t0);
        }
        bench_meter_stop(&m_lib);
    }
    redlock_lock_free(l);
    redlock_client_free(c);
    raw_floor_free(f);
    free(f);

    s_acq = bench_stats_of(&lib_acq);
    s_rel = bench_stats_of(&lib_rel);
    s_cyc = bench_stats_of(&lib_cyc);
    s_facq = bench_stats_of(&fl_acq);
    s_fcyc = bench_stats_of(&fl_cyc);
    snprintf(file, sizeof(file), "uncontended_n%zu_cycle", n);
    bench_write_cdf(a, file, &lib_cyc);
    snprintf(file, sizeof(file), "uncontended_n%zu_floor_cycle", n);
    bench_write_cdf(a, file, &fl_cyc);

    bench_json_begin(&j, "uncontended");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)n);
    bench_json_int(&j, "threads", 1);
    bench_json_int(&j, "lease_ms", lease_ms);
    bench_json_int(&j, "rounds", rounds);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "cycles", (long long)lib_cyc.n);
    bench_json_int(&j, "floor_cycles", (long long)fl_cyc.n);
    bench_json_int(&j, "failed", failed);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &s_cyc);
    bench_json_stats(&j, "acquire_us", &s_acq);
    bench_json_stats(&j, "release_us", &s_rel);
    bench_json_num(&j, "ops_per_s", (double)lib_cyc.n / ((double)m_lib.wall_ns / 1e9));
    bench_json_cpu(&j, m_lib.user_s, m_lib.sys_s);
    bench_json_num(&j, "cpu_us_per_cycle",
                   (m_lib.user_s + m_lib.sys_s) * 1e6 / (double)lib_cyc.n);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "floor: same scripts by hand, same nodes, same run");
    bench_json_stats(&j, "latency_us", &s_fcyc);
    bench_json_stats(&j, "acquire_us", &s_facq);
    bench_json_num(&j, "ops_per_s", (double)fl_cyc.n / ((double)m_floor.wall_ns / 1e9));
    bench_json_num(&j, "cpu_us_per_cycle",
                   (m_floor.user_s + m_floor.sys_s) * 1e6 / (double)fl_cyc.n);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "cycle_p50", s_cyc.p50 / s_fcyc.p50);
    bench_json_num(&j, "cycle_p99", s_cyc.p99 / s_fcyc.p99);
    bench_json_num(&j, "acquire_p50", s_acq.p50 / s_facq.p50);
    bench_json_end_obj(&j);
    bench_json_target(&j, "cycle_p50 / floor cycle_p50", s_cyc.p50 / s_fcyc.p50, 1.15);
    bench_json_print(&j);

    bench_samples_free(&lib_acq);
    bench_samples_free(&lib_rel);
    bench_samples_free(&lib_cyc);
    bench_samples_free(&fl_acq);
    bench_samples_free(&fl_cyc);
}

int main(int argc, char **argv)
{
    bench_args a;
    long cycles, rounds, lease_ms;

    bench_parse_args(&a, argc, argv);
    cycles = bench_opt_long(argc, argv, "--cycles", bench_scaled(&a, 4000, 100));
    rounds = bench_opt_long(argc, argv, "--rounds", 10);
    lease_ms = bench_opt_long(argc, argv, "--lease", 10000);
    if (rounds < 1 || cycles < rounds || lease_ms < 100)
        bench_die("need --cycles >= --rounds >= 1 and --lease >= 100");
    if (a.n_nodes < 5)
        bench_die("needs 5 nodes (--nodes), %zu given", a.n_nodes);
    run(&a, 1, cycles, rounds, lease_ms);
    run(&a, 5, cycles, rounds, lease_ms);
    return 0;
}
