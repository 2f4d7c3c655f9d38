/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "failover", N = 5, with real faults (SIGSTOP through the rig):
 *
 * 1. timeline: acquire + release cycles while the rig goes healthy ->
 *    1 node frozen -> 2 nodes frozen -> thawed. The healthy phase is the
 *    baseline of the same run. Target: acquire p50 with 2 of 5 frozen
 *    <= 1.5 x healthy (the early quorum decision: a frozen minority must
 *    not delay a success that a quorum already gave).
 * 2. time to fail with 3 of 5 frozen: one attempt (wait 0) cannot reach a
 *    quorum; how long until it says so.
 * 3. time until on_lost fires after the lock's keys are deleted behind a
 *    held watchdog lock (bounded by the renewal interval, lease/3).
 * 4. thaw-time cost: K locks (2000) released while node 5 is frozen for a
 *    few seconds, then thawed; until every key is gone from it: the
 *    scripts node 5 ran per released lock (INFO commandstats: evalsha +
 *    eval calls) and the connections opened to it (INFO stats:
 *    total_connections_received), and how long after the thaw the last key
 *    went. The design asks for one connection and one probe at a time while
 *    it is silent, and about one script per lock once it answers.
 * 5. lockout after a thaw: a holder releases while a majority (nodes 3-5)
 *    is frozen and a waiter (another client) waits; the time from the thaw
 *    until the waiter holds the lock. The lease (10 s) outlasts the freeze,
 *    so only the delivery of the release can end the lockout. Target: about
 *    the waiter's own wake-up, one node timeout plus the retry delay, not a
 *    lease. Measured with the contested release alone in the holder's
 *    background queue, and behind a backlog of other releases to the same
 *    frozen nodes (--thaw-backlog), as in a busy client.
 *
 * Pacing: with a frozen member every release waits the node timeout
 * (50 ms) for it before handing it to the background, so the frozen
 * phases cannot run cycles back to back. Every phase therefore starts one
 * cycle per --pace-ms (60), healthy ones included: the servers and the
 * client then idle alike between acquires, and the ratio compares like
 * with like (back to back, hot caches make a healthy acquire ~3x faster
 * than one after 60 ms of idling on this machine).
 *
 * Options: --phase-seconds S (4, scaled), --pace-ms P (60), --fail-attempts A
 * (20), --lost-reps R (6), --lost-lease MS (3000), --thaw-locks K (2000,
 * scaled), --thaw-rounds R (3, scaled), --thaw-freeze-ms F (4000),
 * --lockout-reps R (5, scaled), --lockout-freeze-ms F (3000), --thaw-backlog M
 * (200), --parts P (timeline,fail,lost,thaw,lockout: which of 1-5 to run).
 * Needs --rig and --rig-dir.
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

const char *bench_name = "failover";

#define NODES 5
#define LEASE_MS 10000

static const bench_args *g_args;
static int frozen[NODES + 1];

static void freeze(int node)
{
    bench_rig(g_args, "freeze", node);
    frozen[node] = 1;
}

static void thaw(int node)
{
    bench_rig(g_args, "thaw", node);
    frozen[node] = 0;
}

/* A failure anywhere must not leave nodes stopped for the next scenario. */
static void thaw_all(void)
{
    int i;

    for (i = 1; i <= NODES; i++)
        if (frozen[i]) {
            frozen[i] = 0;
            bench_rig(g_args, "thaw", i);
        }
}

/* ---- 1. Timeline -------------------------------------------------------- */

typedef struct phase {
    const char *label;
    int freeze_nodes;          /* how many of nodes 5, 4, ... are frozen */
    bench_samples acq, rel;
    long ok, failed;
    double t_start, t_end;
} phase;

static void timeline(const bench_args *a, double phase_s, long pace_ms)
{
    static const char *labels[4] = {"healthy", "1 of 5 frozen", "2 of 5 frozen", "thawed"};
    static const int frozen_in[4] = {0, 1, 2, 0};
    phase ph[4];
    redlock_client *c = bench_client(a, NODES, NULL);
    redlock_lock *l;
    FILE *tl = bench_data_file(a, "failover_timeline.dat");
    FILE *pf = bench_data_file(a, "failover_phases.dat");
    int64_t start;
    bench_stats st_acq[4], st_rel[4];
    char name[96];
    bench_json j;
    int p, i;

    memset(ph, 0, sizeof(ph));
    for (p = 0; p < 4; p++) {
        ph[p].label = labels[p];
        ph[p].freeze_nodes = frozen_in[p];
    }
    snprintf(name, sizeof(name), "bench:failover:%d", (int)getpid());
    bench_check(redlock_lock_new(c, name, NULL, &l), "lock_new");
    for (i = 0; i < 100; i++) {
        bench_check(redlock_try_lock_for(l, 0, LEASE_MS), "warm-up acquire");
        bench_check(redlock_unlock(l), "warm-up release");
    }
    if (tl)
        fprintf(tl, "# t_s acquire_ms release_ms ok phase\n");
    start = bench_now_ns();
    for (p = 0; p < 4; p++) {
        int64_t end;

        bench_log("phase: %s", ph[p].label);
        if (p == 1)
            freeze(5);
        if (p == 2)
            freeze(4);
        if (p == 3) {
            thaw(4);
            thaw(5);
        }
        ph[p].t_start = (double)(bench_now_ns() - start) / 1e9;
        end = bench_now_ns() + (int64_t)(phase_s * 1e9);
        while (bench_now_ns() < end) {
            int64_t t0 = bench_now_ns(), t1, t2;
            int64_t next = t0 + pace_ms * 1000000LL;
            int rc = redlock_try_lock_for(l, 0, LEASE_MS), urc = REDLOCK_OK;

            t1 = bench_now_ns();
            if (rc == REDLOCK_OK)
                urc = redlock_unlock(l);
            t2 = bench_now_ns();
            if (rc == REDLOCK_OK && urc == REDLOCK_OK) {
                ph[p].ok++;
                bench_samples_add(&ph[p].acq, t1 - t0);
                bench_samples_add(&ph[p].rel, t2 - t1);
            } else {
                ph[p].failed++;
                bench_log("%s: %s / %s: %s", ph[p].label, redlock_err_name(rc),
                          redlock_err_name(urc), redlock_last_error());
            }
            if (tl)
                fprintf(tl, "%.4f %.4f %.4f %d %d\n", (double)(t0 - start) / 1e9,
                        (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
                        rc == REDLOCK_OK && urc == REDLOCK_OK, p);
            bench_sleep_ns(next - bench_now_ns());
        }
        ph[p].t_end = (double)(bench_now_ns() - start) / 1e9;
        if (pf)
            fprintf(pf, "%.4f %.4f \"%s\"\n", ph[p].t_start, ph[p].t_end, ph[p].label);
    }
    if (tl)
        fclose(tl);
    if (pf)
        fclose(pf);
    redlock_lock_free(l);
    redlock_client_free(c);

    for (p = 0; p < 4; p++) {
        char file[64];

        st_acq[p] = bench_stats_of(&ph[p].acq);
        st_rel[p] = bench_stats_of(&ph[p].rel);
        snprintf(file, sizeof(file), "failover_acquire_frozen%d%s", ph[p].freeze_nodes,
                 p == 3 ? "_thawed" : "");
        bench_write_cdf(a, file, &ph[p].acq);
    }
    for (p = 0; p < 4; p++) {
        bench_json_begin(&j, "failover_phase");
        bench_json_obj(&j, "params");
        bench_json_int(&j, "nodes", NODES);
        bench_json_str(&j, "phase", ph[p].label);
        bench_json_int(&j, "frozen", ph[p].freeze_nodes);
        bench_json_num(&j, "seconds", ph[p].t_end - ph[p].t_start);
        bench_json_int(&j, "lease_ms", LEASE_MS);
        bench_json_int(&j, "pace_ms", pace_ms);
        bench_json_end_obj(&j);
        bench_json_obj(&j, "counts");
        bench_json_int(&j, "cycles_ok", ph[p].ok);
        bench_json_int(&j, "cycles_failed", ph[p].failed);
        bench_json_end_obj(&j);
        bench_json_stats(&j, "latency_us", &st_acq[p]);
        bench_json_stats(&j, "release_us", &st_rel[p]);
        bench_json_num(&j, "ops_per_s",
                       (double)(ph[p].ok + ph[p].failed) / (ph[p].t_end - ph[p].t_start));
        bench_json_obj(&j, "baseline");
        bench_json_str(&j, "name", "healthy phase of the same run");
        bench_json_stats(&j, "latency_us", &st_acq[0]);
        bench_json_end_obj(&j);
        bench_json_obj(&j, "ratio");
        bench_json_num(&j, "acquire_p50_over_healthy", st_acq[p].p50 / st_acq[0].p50);
        bench_json_num(&j, "release_p50_over_healthy", st_rel[p].p50 / st_rel[0].p50);
        bench_json_end_obj(&j);
        if (ph[p].freeze_nodes == 2)
            bench_json_target(&j, "acquire_p50 (2 of 5 frozen) / healthy",
                              st_acq[p].p50 / st_acq[0].p50, 1.5);
        bench_json_print(&j);
        bench_samples_free(&ph[p].acq);
        bench_samples_free(&ph[p].rel);
    }
}

/* ---- 2. Time to fail without a quorum ---------------------------------- */

static void time_to_fail(const bench_args *a, long attempts)
{
    redlock_client *c = bench_client(a, NODES, NULL);
    redlock_lock *l;
    bench_samples s = {0};
    bench_stats st;
    char name[96];
    long i, no_quorum = 0, other = 0;
    int64_t t0, waited_ns;
    int rc_wait;
    bench_json j;

    snprintf(name, sizeof(name), "bench:failover-noquorum:%d", (int)getpid());
    bench_check(redlock_lock_new(c, name, NULL, &l), "lock_new");
    bench_check(redlock_try_lock_for(l, 0, LEASE_MS), "warm-up acquire");
    bench_check(redlock_unlock(l), "warm-up release");
    freeze(5);
    freeze(4);
    freeze(3);
    for (i = 0; i < attempts; i++) {
        int64_t t = bench_now_ns();
        int rc = redlock_try_lock_for(l, 0, LEASE_MS);

        bench_samples_add(&s, bench_now_ns() - t);
        if (rc == REDLOCK_ENO_QUORUM)
            no_quorum++;
        else
            other++;
        if (rc == REDLOCK_OK)
            bench_die("acquired with 3 of 5 nodes frozen");
    }
    /* A waiting acquire must give up at its deadline, not later. */
    t0 = bench_now_ns();
    rc_wait = redlock_try_lock_for(l, 500, LEASE_MS);
    waited_ns = bench_now_ns() - t0;
    thaw(3);
    thaw(4);
    thaw(5);
    redlock_lock_free(l);
    redlock_client_free(c);

    st = bench_stats_of(&s);
    bench_json_begin(&j, "failover_no_quorum");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", NODES);
    bench_json_int(&j, "frozen", 3);
    bench_json_int(&j, "lease_ms", LEASE_MS);
    bench_json_int(&j, "node_timeout_ms", 50);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "attempts", attempts);
    bench_json_int(&j, "no_quorum", no_quorum);
    bench_json_int(&j, "other", other);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &st);
    bench_json_obj(&j, "wait_500ms");
    bench_json_str(&j, "result", redlock_err_name(rc_wait));
    bench_json_num(&j, "returned_after_ms", (double)waited_ns / 1e6);
    bench_json_end_obj(&j);
    bench_json_print(&j);
    bench_samples_free(&s);
}

/* ---- 3. on_lost after the keys vanish ----------------------------------- */

typedef struct lost_probe {
    int64_t at_ns;
    int reason;
} lost_probe;

static void on_lost(void *ud, redlock_lock *lock, uint64_t owner, int reason)
{
    lost_probe *p = ud;

    (void)lock, (void)owner;
    p->reason = reason;
    __atomic_store_n(&p->at_ns, bench_now_ns(), __ATOMIC_SEQ_CST);
}

static void lost_detection(const bench_args *a, long reps, long lease_ms)
{
    redlock_options o;
    redlock_client *c;
    redlock_lock *l;
    raw_conn raw[NODES];
    bench_samples s = {0};
    bench_stats st;
    lost_probe probe;
    char name[96];
    long r, missed = 0, unlock_lost = 0;
    int i;
    bench_json j;

    memset(&o, 0, sizeof(o));
    o.watchdog_lease_ms = (int)lease_ms;
    c = bench_client(a, NODES, &o);
    snprintf(name, sizeof(name), "bench:failover-lost:%d", (int)getpid());
    bench_check(redlock_lock_new(c, name, NULL, &l), "lock_new");
    redlock_lock_set_on_lost(l, on_lost, &probe);
    for (i = 0; i < NODES; i++)
        raw_connect(&raw[i], a->hosts[i], a->ports[i], a->user, a->pass);
    for (r = 0; r < reps; r++) {
        int64_t t_del, deadline;
        int rc;

        memset(&probe, 0, sizeof(probe));
        bench_check(redlock_try_lock_for(l, 0, 0), "acquire (watchdog lease)");
        /* Delete at a random point of the renewal interval. */
        bench_sleep_ns((int64_t)(rand() % (lease_ms / 3 + 1)) * 1000000);
        for (i = 0; i < NODES; i++)
            raw_del(&raw[i], name);
        t_del = bench_now_ns();
        deadline = t_del + 2 * lease_ms * 1000000LL;
        while (!__atomic_load_n(&probe.at_ns, __ATOMIC_SEQ_CST) && bench_now_ns() < deadline)
            bench_sleep_ns(1000000);
        if (probe.at_ns)
            bench_samples_add(&s, probe.at_ns - t_del);
        else
            missed++;
        rc = redlock_unlock(l);
        if (rc == REDLOCK_ELOST)
            unlock_lost++;
    }
    for (i = 0; i < NODES; i++)
        raw_close(&raw[i]);
    redlock_lock_free(l);
    redlock_client_free(c);

    st = bench_stats_of(&s);
    bench_json_begin(&j, "failover_on_lost");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", NODES);
    bench_json_int(&j, "watchdog_lease_ms", lease_ms);
    bench_json_int(&j, "renew_interval_ms", lease_ms / 3);
    bench_json_str(&j, "fault", "DEL of the lock key on all 5 nodes behind a held lock");
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "reps", reps);
    bench_json_int(&j, "on_lost_fired", (long long)s.n);
    bench_json_int(&j, "on_lost_missed", missed);
    bench_json_int(&j, "unlock_returned_elost", unlock_lost);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &st);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "max_over_renew_interval", st.max / 1000.0 / (double)(lease_ms / 3));
    bench_json_end_obj(&j);
    bench_json_print(&j);
    bench_samples_free(&s);
}

/* ---- 4. What a thaw costs the thawed node ------------------------------- */

#define THAW_LEASE_MS 60000
#define NODE_TIMEOUT_MS 50 /* the library's default for these leases */
#define RETRY_DELAY_MS 50  /* ditto: the upper bound of the random retry delay */

/* Scripts a node has run: EVALSHA and EVAL calls. */
static long long scripts_run(raw_conn *c)
{
    return raw_command_calls(c, "evalsha") + raw_command_calls(c, "eval");
}

/* One round: K locks taken, node 5 frozen, all released, thawed after
 * freeze_ms; adds to the totals. */
typedef struct thaw_totals {
    bench_samples rel, gone;
    long released_ok, release_other, left;
    long long scripts, conns, max_conns;
    double frozen_ms, release_all_ms, rig_thaw_ms;
} thaw_totals;

static void thaw_round(const bench_args *a, long k, long freeze_ms, long round, thaw_totals *tt)
{
    redlock_client *c = bench_client(a, NODES, NULL);
    redlock_lock **locks = calloc((size_t)k, sizeof(*locks));
    raw_conn raw;
    long i;
    long long scripts0, conns0, conns;
    int64_t t_freeze, t_released, t_thaw, t_thawed, t_gone, deadline;

    if (!locks)
        bench_die("out of memory");
    for (i = 0; i < k; i++) {
        char name[96];

        snprintf(name, sizeof(name), "bench:failover-thaw:%d:%ld:%ld", (int)getpid(), round, i);
        bench_check(redlock_lock_new(c, name, NULL, &locks[i]), "lock_new");
        bench_check(redlock_try_lock_for(locks[i], 0, THAW_LEASE_MS), "acquire");
    }
    /* One connection for INFO and EXISTS, opened before the baseline: it
     * is not among the connections counted. */
    raw_connect(&raw, a->hosts[4], a->ports[4], a->user, a->pass);
    scripts0 = scripts_run(&raw);
    conns0 = raw_info_int(&raw, "stats", "total_connections_received");
    freeze(5);
    t_freeze = bench_now_ns();
    for (i = 0; i < k; i++) {
        int64_t t = bench_now_ns();
        int rc = redlock_unlock(locks[i]);

        bench_samples_add(&tt->rel, bench_now_ns() - t);
        if (rc == REDLOCK_OK)
            tt->released_ok++;
        else
            tt->release_other++;
    }
    t_released = bench_now_ns();
    bench_sleep_ns(t_freeze + freeze_ms * 1000000LL - bench_now_ns());
    t_thaw = bench_now_ns();
    thaw(5);
    t_thawed = bench_now_ns();
    /* Until every key is gone (the lease is far longer). */
    deadline = t_thaw + 30000 * 1000000LL;
    for (i = 0; i < k; i++) {
        const char *name = redlock_lock_name(locks[i]);

        while (raw_exists(&raw, name) && bench_now_ns() < deadline)
            bench_sleep_ns(2000000);
        if (bench_now_ns() >= deadline && raw_exists(&raw, name))
            tt->left++;
    }
    t_gone = bench_now_ns();
    /* Late duplicates, if any, are counted too. */
    bench_sleep_ns(500 * 1000000LL);
    tt->scripts += scripts_run(&raw) - scripts0;
    conns = raw_info_int(&raw, "stats", "total_connections_received") - conns0;
    tt->conns += conns;
    if (conns > tt->max_conns)
        tt->max_conns = conns;
    bench_samples_add(&tt->gone, t_gone - t_thaw);
    tt->frozen_ms += (double)(t_thaw - t_freeze) / 1e6;
    tt->release_all_ms += (double)(t_released - t_freeze) / 1e6;
    tt->rig_thaw_ms += (double)(t_thawed - t_thaw) / 1e6;
    bench_log("thaw cost round %ld: %ld locks, all gone %.0f ms after the thaw began", round, k,
              (double)(t_gone - t_thaw) / 1e6);
    raw_close(&raw);
    for (i = 0; i < k; i++)
        redlock_lock_free(locks[i]);
    free(locks);
    redlock_client_free(c);
}

static void thaw_cost(const bench_args *a, long k, long freeze_ms, long rounds)
{
    thaw_totals tt;
    bench_stats st, st_gone;
    bench_json j;
    long r;

    memset(&tt, 0, sizeof(tt));
    for (r = 0; r < rounds; r++)
        thaw_round(a, k, freeze_ms, r, &tt);
    st = bench_stats_of(&tt.rel);
    st_gone = bench_stats_of(&tt.gone);
    bench_json_begin(&j, "failover_thaw_cost");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", NODES);
    bench_json_int(&j, "frozen_node", 5);
    bench_json_int(&j, "locks", k);
    bench_json_int(&j, "rounds", rounds);
    bench_json_int(&j, "lease_ms", THAW_LEASE_MS);
    bench_json_int(&j, "node_timeout_ms", NODE_TIMEOUT_MS);
    bench_json_num(&j, "frozen_ms", tt.frozen_ms / (double)rounds);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "released_ok", tt.released_ok);
    bench_json_int(&j, "release_other", tt.release_other);
    bench_json_int(&j, "keys_left_after_30s", tt.left);
    bench_json_int(&j, "scripts_on_node", tt.scripts);
    bench_json_int(&j, "connections_opened", tt.conns);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "release_us", &st);
    bench_json_num(&j, "release_all_ms", tt.release_all_ms / (double)rounds);
    bench_json_num(&j, "scripts_per_lock", (double)tt.scripts / (double)(k * rounds));
    bench_json_num(&j, "connections_per_round", (double)tt.conns / (double)rounds);
    bench_json_int(&j, "connections_max_round", tt.max_conns);
    /* From the thaw command until EXISTS is 0 for every lock on node 5. */
    bench_json_stats(&j, "all_gone_after_thaw_us", &st_gone);
    bench_json_num(&j, "rig_thaw_call_ms", tt.rig_thaw_ms / (double)rounds);
    bench_json_print(&j);
    bench_samples_free(&tt.rel);
    bench_samples_free(&tt.gone);
}

/* ---- 5. Lockout after a thaw -------------------------------------------- */

typedef struct waiter {
    redlock_lock *l;
    int64_t wait_ms;
    int64_t got_ns;
    int rc;
} waiter;

static void *waiter_main(void *ud)
{
    waiter *w = ud;

    w->rc = redlock_try_lock_for(w->l, w->wait_ms, LEASE_MS);
    w->got_ns = bench_now_ns();
    /* Locks belong to the thread that took them. */
    if (w->rc == REDLOCK_OK && redlock_unlock(w->l) != REDLOCK_OK)
        bench_log("waiter unlock: %s", redlock_last_error());
    return NULL;
}

static void thaw_lockout(const bench_args *a, long reps, long freeze_ms, long backlog)
{
    redlock_client *hc = bench_client(a, NODES, NULL), *wc = bench_client(a, NODES, NULL);
    redlock_lock **others = calloc((size_t)(backlog ? backlog : 1), sizeof(*others));
    bench_samples lockout = {0}, rel = {0};
    bench_stats st, st_rel;
    long r, i, failed = 0;
    int64_t rig_thaw_ns = 0;
    bench_json j;

    if (!others)
        bench_die("out of memory");
    for (r = 0; r < reps; r++) {
        redlock_lock *hl, *wl;
        waiter w;
        pthread_t tid;
        char name[96];
        int64_t t_freeze, t_thaw, t0;
        int rc;

        snprintf(name, sizeof(name), "bench:failover-lockout:%d:%ld:%ld", (int)getpid(),
                 backlog, r);
        bench_check(redlock_lock_new(hc, name, NULL, &hl), "lock_new");
        bench_check(redlock_lock_new(wc, name, NULL, &wl), "lock_new");
        for (i = 0; i < backlog; i++) {
            char other[160];

            snprintf(other, sizeof(other), "%s:other:%ld", name, i);
            bench_check(redlock_lock_new(hc, other, NULL, &others[i]), "lock_new");
            bench_check(redlock_try_lock_for(others[i], 0, LEASE_MS), "acquire (backlog)");
        }
        bench_check(redlock_try_lock_for(hl, 0, LEASE_MS), "holder acquire");
        memset(&w, 0, sizeof(w));
        w.l = wl;
        w.wait_ms = freeze_ms + 8000;
        if (pthread_create(&tid, NULL, waiter_main, &w) != 0)
            bench_die("pthread_create failed");
        bench_sleep_ns(100 * 1000000LL);
        freeze(3);
        freeze(4);
        freeze(5);
        t_freeze = bench_now_ns();
        bench_sleep_ns(200 * 1000000LL);
        /* The backlog goes first: the contested release is not the probe. */
        for (i = 0; i < backlog; i++)
            (void)redlock_unlock(others[i]);
        t0 = bench_now_ns();
        rc = redlock_unlock(hl);
        bench_samples_add(&rel, bench_now_ns() - t0);
        if (rc != REDLOCK_OK)
            bench_log("holder unlock with 3 of 5 frozen: %s", redlock_err_name(rc));
        bench_sleep_ns(t_freeze + freeze_ms * 1000000LL - bench_now_ns());
        t_thaw = bench_now_ns();
        thaw(3);
        rig_thaw_ns += bench_now_ns() - t_thaw;
        thaw(4);
        thaw(5);
        pthread_join(tid, NULL);
        if (w.rc == REDLOCK_OK) {
            bench_samples_add(&lockout, w.got_ns - t_thaw);
            bench_log("backlog %ld rep %ld: waiter held the lock %.1f ms after the thaw began",
                      backlog, r, (double)(w.got_ns - t_thaw) / 1e6);
        } else {
            failed++;
            bench_log("backlog %ld rep %ld: waiter: %s", backlog, r, redlock_err_name(w.rc));
        }
        redlock_lock_free(wl);
        redlock_lock_free(hl);
        for (i = 0; i < backlog; i++)
            redlock_lock_free(others[i]);
        /* The next rep starts with every node answering and nothing owed. */
        (void)redlock_client_flush(hc, 2000);
    }
    free(others);
    redlock_client_free(wc);
    redlock_client_free(hc);

    st = bench_stats_of(&lockout);
    st_rel = bench_stats_of(&rel);
    bench_json_begin(&j, "failover_thaw_lockout");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", NODES);
    bench_json_int(&j, "frozen", 3);
    bench_json_int(&j, "freeze_ms", freeze_ms);
    bench_json_int(&j, "lease_ms", LEASE_MS);
    bench_json_int(&j, "node_timeout_ms", NODE_TIMEOUT_MS);
    bench_json_int(&j, "retry_delay_ms", RETRY_DELAY_MS);
    bench_json_int(&j, "backlog", backlog);
    bench_json_str(&j, "measured", "thaw began -> waiter's acquire returned OK");
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "reps", reps);
    bench_json_int(&j, "waiter_failed", failed);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &st);
    bench_json_stats(&j, "holder_release_us", &st_rel);
    bench_json_num(&j, "rig_thaw_call_ms", (double)rig_thaw_ns / (double)reps / 1e6);
    bench_json_target(&j, "lockout after thaw, max (ms)", st.max / 1000.0,
                      NODE_TIMEOUT_MS + RETRY_DELAY_MS);
    bench_json_print(&j);
    bench_samples_free(&lockout);
    bench_samples_free(&rel);
}

int main(int argc, char **argv)
{
    bench_args a;
    double phase_s;
    long attempts, reps, lost_lease, pace_ms, thaw_locks, thaw_freeze, lockout_reps,
        lockout_freeze, backlog, thaw_rounds;
    const char *parts;

    bench_parse_args(&a, argc, argv);
    g_args = &a;
    phase_s = strtod(bench_opt(argc, argv, "--phase-seconds", "4"), NULL) * a.scale;
    pace_ms = bench_opt_long(argc, argv, "--pace-ms", 60);
    if (phase_s < 0.5)
        phase_s = 0.5;
    attempts = bench_opt_long(argc, argv, "--fail-attempts", bench_scaled(&a, 20, 5));
    reps = bench_opt_long(argc, argv, "--lost-reps", bench_scaled(&a, 6, 3));
    lost_lease = bench_opt_long(argc, argv, "--lost-lease", 3000);
    thaw_locks = bench_opt_long(argc, argv, "--thaw-locks", bench_scaled(&a, 2000, 200));
    thaw_rounds = bench_opt_long(argc, argv, "--thaw-rounds", bench_scaled(&a, 3, 1));
    thaw_freeze = bench_opt_long(argc, argv, "--thaw-freeze-ms", 4000);
    lockout_reps = bench_opt_long(argc, argv, "--lockout-reps", bench_scaled(&a, 5, 2));
    lockout_freeze = bench_opt_long(argc, argv, "--lockout-freeze-ms", 3000);
    backlog = bench_opt_long(argc, argv, "--thaw-backlog", 200);
    parts = bench_opt(argc, argv, "--parts", "timeline,fail,lost,thaw,lockout");
    if (a.n_nodes < NODES)
        bench_die("needs %d nodes (--nodes), %zu given", NODES, a.n_nodes);
    if (!a.rig || !a.rig_dir)
        bench_die("needs --rig PATH and --rig-dir DIR to freeze nodes");
    if (pace_ms < 1)
        bench_die("--pace-ms must be >= 1");
    if (lost_lease < 300)
        bench_die("--lost-lease must be >= 300");
    if (thaw_locks < 1 || thaw_rounds < 1 || thaw_freeze < 0 || lockout_reps < 1 ||
        lockout_freeze < 300 || lockout_freeze > 6000 || backlog < 0)
        bench_die("bad --thaw-locks, --thaw-rounds, --thaw-freeze-ms, --lockout-reps, "
                  "--lockout-freeze-ms (300-6000) or --thaw-backlog");
    srand((unsigned)getpid());
    atexit(thaw_all);
    if (bench_has_part(parts, "timeline"))
        timeline(&a, phase_s, pace_ms);
    if (bench_has_part(parts, "fail"))
        time_to_fail(&a, attempts);
    if (bench_has_part(parts, "lost"))
        lost_detection(&a, reps, lost_lease);
    if (bench_has_part(parts, "thaw"))
        thaw_cost(&a, thaw_locks, thaw_freeze, thaw_rounds);
    if (bench_has_part(parts, "lockout")) {
        thaw_lockout(&a, lockout_reps, lockout_freeze, 0);
        if (backlog > 0)
            thaw_lockout(&a, lockout_reps, lockout_freeze, backlog);
    }
    return 0;
}
