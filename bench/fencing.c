/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "fencing": the cost of a fencing token. One thread cycles
 * acquire + release on two locks over the same N nodes, one with fencing
 * and one without, in alternating chunks, for N = 1 and N = 5. A fenced
 * acquisition adds the write-back round trip (phase 2), so the expected
 * ratio is about 2 for the acquire and below that for the whole cycle.
 *
 * Also checked in passing: tokens strictly increase across acquisitions
 * (a decrease is reported in the JSON and fails the run).
 *
 * Options: --cycles C (3000 per mode and N, scaled), --rounds R (10),
 * --lease MS (10000).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

const char *bench_name = "fencing";

static void run(const bench_args *a, size_t n, long cycles, long rounds, long lease_ms)
{
    redlock_client *c = bench_client(a, n, NULL);
    redlock_lock_options fenced_opts = {.fencing = 1};
    redlock_lock *plain, *fenced;
    bench_samples acq[2] = {{0}}, cyc[2] = {{0}};
    bench_stats s_acq[2], s_cyc[2];
    bench_meter meter[2] = {{0}};
    uint64_t last = 0;
    long r, i, per = cycles / rounds, decreases = 0, failed = 0;
    char name[96], file[64];
    bench_json j;
    int m;

    snprintf(name, sizeof(name), "bench:fencing:%d:%zu:plain", (int)getpid(), n);
    bench_check(redlock_lock_new(c, name, NULL, &plain), "lock_new");
    snprintf(name, sizeof(name), "bench:fencing:%d:%zu:fenced", (int)getpid(), n);
    bench_check(redlock_lock_new(c, name, &fenced_opts, &fenced), "lock_new (fencing)");
    for (i = 0; i < 200; i++)
        for (m = 0; m < 2; m++) {
            redlock_lock *l = m ? fenced : plain;

            if (redlock_try_lock_for(l, 0, lease_ms) == REDLOCK_OK)
                (void)redlock_unlock(l);
        }
    for (r = 0; r < rounds; r++)
        for (m = 0; m < 2; m++) {
            redlock_lock *l = m ? fenced : plain;

            bench_meter_start(&meter[m]);
            for (i = 0; i < per; i++) {
                int64_t t0 = bench_now_ns(), t1;
                uint64_t token;

                if (redlock_try_lock_for(l, 0, lease_ms) != REDLOCK_OK) {
                    failed++; /* overload past the node timeout: counted */
                    continue;
                }
                t1 = bench_now_ns();
                if (m) {
                    bench_check(redlock_lock_token(l, &token), "token");
                    if (token <= last)
                        decreases++;
                    last = token;
                }
                if (redlock_unlock(l) != REDLOCK_OK)
                    failed++;
                bench_samples_add(&acq[m], t1 - t0);
                bench_samples_add(&cyc[m], bench_now_ns() - t0);
            }
            bench_meter_stop(&meter[m]);
        }
    redlock_lock_free(plain);
    redlock_lock_free(fenced);
    redlock_client_free(c);

    for (m = 0; m < 2; m++) {
        s_acq[m] = bench_stats_of(&acq[m]);
        s_cyc[m] = bench_stats_of(&cyc[m]);
        snprintf(file, sizeof(file), "fencing_n%zu_%s_acquire", n, m ? "fenced" : "plain");
        bench_write_cdf(a, file, &acq[m]);
    }
    bench_json_begin(&j, "fencing");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)n);
    bench_json_int(&j, "lease_ms", lease_ms);
    bench_json_int(&j, "rounds", rounds);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "fenced_cycles", (long long)cyc[1].n);
    bench_json_int(&j, "plain_cycles", (long long)cyc[0].n);
    bench_json_int(&j, "token_not_increasing", decreases);
    bench_json_int(&j, "failed", failed);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &s_acq[1]);
    bench_json_stats(&j, "cycle_us", &s_cyc[1]);
    bench_json_num(&j, "ops_per_s", (double)cyc[1].n / ((double)meter[1].wall_ns / 1e9));
    bench_json_cpu(&j, meter[1].user_s, meter[1].sys_s);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "same client and nodes, lock without fencing, same run");
    bench_json_stats(&j, "latency_us", &s_acq[0]);
    bench_json_stats(&j, "cycle_us", &s_cyc[0]);
    bench_json_num(&j, "ops_per_s", (double)cyc[0].n / ((double)meter[0].wall_ns / 1e9));
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "acquire_p50_fenced_over_plain", s_acq[1].p50 / s_acq[0].p50);
    bench_json_num(&j, "acquire_p99_fenced_over_plain", s_acq[1].p99 / s_acq[0].p99);
    bench_json_num(&j, "cycle_p50_fenced_over_plain", s_cyc[1].p50 / s_cyc[0].p50);
    bench_json_end_obj(&j);
    bench_json_print(&j);
    for (m = 0; m < 2; m++) {
        bench_samples_free(&acq[m]);
        bench_samples_free(&cyc[m]);
    }
    if (decreases)
        bench_die("fencing tokens did not increase %ld time(s)", decreases);
}

int main(int argc, char **argv)
{
    bench_args a;
    long cycles, rounds, lease_ms;

    bench_parse_args(&a, argc, argv);
    cycles = bench_opt_long(argc, argv, "--cycles", bench_scaled(&a, 3000, 100));
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
