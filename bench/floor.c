/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "floor": the acquire and release scripts sent by hand over
 * blocking sockets to N nodes in parallel (send to all, then read all),
 * for N = 1 and N = 5. This is what a lock cycle costs with no library at
 * all; the other scenarios divide by it.
 *
 * Baseline in the same run: a PING round to the same N nodes, so the
 * ratio separates script work on the server from the network and
 * syscalls.
 *
 * Options: --cycles C (default 4000), --rounds R (10).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"

const char *bench_name = "floor";

#define LEASE_MS 10000

static void run(const bench_args *a, size_t n, long cycles, long rounds)
{
    raw_floor *f = malloc(sizeof(*f));
    bench_samples ping = {0}, acq = {0}, rel = {0}, cyc = {0};
    bench_meter m_cycle = {0}, m_ping = {0};
    bench_stats s_ping, s_acq, s_rel, s_cyc;
    char name[96], file[64];
    long r, i, per = cycles / rounds;
    bench_json j;

    if (!f)
        bench_die("out of memory");
    snprintf(name, sizeof(name), "bench:floor:%d:%zu", (int)getpid(), n);
    raw_floor_init(f, a, n, name, LEASE_MS);
    for (i = 0; i < 200; i++) {
        raw_floor_acquire(f);
        raw_floor_release(f);
        raw_floor_ping(f);
    }
    /* Alternating chunks: a machine that slows down for a while slows
     * both modes alike. */
    for (r = 0; r < rounds; r++) {
        bench_meter_start(&m_ping);
        for (i = 0; i < per; i++)
            bench_samples_add(&ping, raw_floor_ping(f));
        bench_meter_stop(&m_ping);
        bench_meter_start(&m_cycle);
        for (i = 0; i < per; i++) {
            int64_t ta = raw_floor_acquire(f), tr = raw_floor_release(f);

            bench_samples_add(&acq, ta);
            bench_samples_add(&rel, tr);
            bench_samples_add(&cyc, ta + tr);
        }
        bench_meter_stop(&m_cycle);
    }
    raw_floor_free(f);
    free(f);

    s_ping = bench_stats_of(&ping);
    s_acq = bench_stats_of(&acq);
    s_rel = bench_stats_of(&rel);
    s_cyc = bench_stats_of(&cyc);
    snprintf(file, sizeof(file), "floor_n%zu_cycle", n);
    bench_write_cdf(a, file, &cyc);
    snprintf(file, sizeof(file), "floor_n%zu_acquire", n);
    bench_write_cdf(a, file, &acq);
    snprintf(file, sizeof(file), "floor_n%zu_ping", n);
    bench_write_cdf(a, file, &ping);

    bench_json_begin(&j, "floor");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)n);
    bench_json_int(&j, "cycles", (long long)cyc.n);
    bench_json_int(&j, "lease_ms", LEASE_MS);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "cycles", (long long)cyc.n);
    bench_json_int(&j, "pings", (long long)ping.n);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &s_cyc);
    bench_json_stats(&j, "acquire_round_us", &s_acq);
    bench_json_stats(&j, "release_round_us", &s_rel);
    bench_json_num(&j, "ops_per_s", (double)cyc.n / ((double)m_cycle.wall_ns / 1e9));
    bench_json_cpu(&j, m_cycle.user_s, m_cycle.sys_s);
    bench_json_num(&j, "cpu_us_per_cycle",
                   (m_cycle.user_s + m_cycle.sys_s) * 1e6 / (double)cyc.n);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "PING round to the same nodes");
    bench_json_stats(&j, "latency_us", &s_ping);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "acquire_round_p50_over_ping_p50", s_acq.p50 / s_ping.p50);
    bench_json_num(&j, "cycle_p50_over_ping_p50", s_cyc.p50 / s_ping.p50);
    bench_json_end_obj(&j);
    bench_json_print(&j);

    bench_samples_free(&ping);
    bench_samples_free(&acq);
    bench_samples_free(&rel);
    bench_samples_free(&cyc);
}

int main(int argc, char **argv)
{
    bench_args a;
    long cycles, rounds;

    bench_parse_args(&a, argc, argv);
    cycles = bench_opt_long(argc, argv, "--cycles", bench_scaled(&a, 4000, 100));
    rounds = bench_opt_long(argc, argv, "--rounds", 10);
    if (rounds < 1 || cycles < rounds)
        bench_die("--cycles must be >= --rounds >= 1");
    if (a.n_nodes < 5)
        bench_die("needs 5 nodes (--nodes), %zu given", a.n_nodes);
    run(&a, 1, cycles, rounds);
    run(&a, 5, cycles, rounds);
    return 0;
}
