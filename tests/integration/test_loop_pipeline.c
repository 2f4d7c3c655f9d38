/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A loop-driven client's operations share one pipelined connection per
 * node (src/transport/mux.c). On the fixture's real nodes: many
 * operations in flight open one connection per node, not one each; and
 * cycles keep going, with nothing left behind, through a node killed and
 * restarted, a node frozen and thawed, and script caches flushed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop_harness.h"
#include "redlock/redlock.h"
#include "rig_env.h"

#define NAMES 32

static long long info_field(size_t node, const char *section, const char *field)
{
    char args[64];
    const char *out, *p;

    snprintf(args, sizeof(args), "INFO %s", section);
    out = rig_cli(node, args);
    p = strstr(out, field);
    ck_assert_msg(p != NULL, "no %s in INFO %s", field, section);
    return atoll(p + strlen(field));
}

/* 1. 64 acquires in flight at once open one connection per node (and
 *    the subscriber's, when one waits), all granted; their releases leave
 *    no key on any node. Each borrowing a connection set of its own, as a
 *    blocking call does, would open 64 per node. */
START_TEST(test_one_connection_per_node)
{
    enum { K = 64 };
    static redlock_lock *locks[K];
    static result acq[K], rel[K];
    char names[K][64];
    long long conns0[N_NODES];
    size_t i, k;

    for (i = 0; i < N_NODES; i++)
        conns0[i] = info_field(i, "stats", "total_connections_received:");
    loop_client(2000, 0);
    for (k = 0; k < K; k++) {
        rig_unique_name(names[k], sizeof(names[k]), "pipe", "conns");
        locks[k] = new_lock(names[k]);
        start_acquire(locks[k], 1, 0, 60000, &acq[k]);
    }
    for (k = 0; k < K; k++) {
        ck_assert(run_until(&acq[k].done, 10000));
        ck_assert_msg(acq[k].rc == REDLOCK_OK, "acquire %zu: %s", k, acq[k].msg);
    }
    for (i = 0; i < N_NODES; i++) {
        /* Less the INFO connections of rig_cli (one per call). */
        long long opened =
            info_field(i, "stats", "total_connections_received:") - conns0[i] - 2;

        ck_assert_msg(opened <= 2, "node %zu: %lld connections for %d operations", i, opened, K);
    }
    for (k = 0; k < K; k++)
        start_unlock(locks[k], 1, &rel[k]);
    for (k = 0; k < K; k++) {
        ck_assert(run_until(&rel[k].done, 10000));
        ck_assert_msg(rel[k].rc == REDLOCK_OK, "unlock %zu: %s", k, rel[k].msg);
    }
    /* Releases settle at a quorum; the last members' replies are read
     * afterwards, from the shared connections: a flush on the loop's
     * thread waits for them there. */
    ck_assert_msg(redlock_client_flush(L.c, 3000) == REDLOCK_OK, "%s", redlock_last_error());
    for (k = 0; k < K; k++) {
        ck_assert_msg(nodes_with(names[k]) == 0, "%s left behind", names[k]);
        redlock_lock_free(locks[k]);
    }
    redlock_client_free(L.c);
}
END_TEST

/* Acquire+release cycles on NAMES names, each started from the previous
 * one's done callback, until stopping is set. */
typedef struct cycler {
    redlock_lock *lock;
    char name[64];
    int holding, idle;
    long cycles, failed;
    char last_error[256];
} cycler;

static cycler cyclers[NAMES];
static int stopping;

static void cycle_done(void *ud, redlock_lock *l, int rc, const char *msg)
{
    cycler *cy = ud;

    (void)l;
    if (rc != REDLOCK_OK) {
        cy->failed++;
        snprintf(cy->last_error, sizeof(cy->last_error), "%s: %s", redlock_err_name(rc), msg);
    }
    if (cy->holding) {
        cy->holding = 0;
        cy->cycles++;
    } else if (rc == REDLOCK_OK) {
        cy->holding = 1;
        ck_assert_int_eq(redlock_unlock_async(cy->lock, 1, cycle_done, cy), REDLOCK_OK);
        return;
    }
    if (stopping) {
        cy->idle = 1;
        return;
    }
    ck_assert_int_eq(redlock_acquire_async(cy->lock, 1, 0, 60000, cycle_done, cy), REDLOCK_OK);
}

static void start_cycles(const char *tag)
{
    size_t k;

    stopping = 0;
    for (k = 0; k < NAMES; k++) {
        cycler *cy = &cyclers[k];

        memset(cy, 0, sizeof(*cy));
        rig_unique_name(cy->name, sizeof(cy->name), "pipe", tag);
        cy->lock = new_lock(cy->name);
        ck_assert_int_eq(redlock_acquire_async(cy->lock, 1, 0, 60000, cycle_done, cy),
                         REDLOCK_OK);
    }
}

static long total_cycles(void)
{
    long n = 0;
    size_t k;

    for (k = 0; k < NAMES; k++)
        n += cyclers[k].cycles;
    return n;
}

static void run_for(int64_t ms)
{
    int never = 0;

    run_until(&never, ms);
}

/* Stops the cycles, checks none failed, frees the client and checks that
 * no name is left on any node. */
static void stop_cycles(void)
{
    size_t k;

    stopping = 1;
    for (k = 0; k < NAMES; k++) {
        ck_assert_msg(run_until(&cyclers[k].idle, 10000), "name %zu never stopped", k);
        ck_assert_msg(cyclers[k].failed == 0, "name %zu: %ld failed, last %s", k,
                      cyclers[k].failed, cyclers[k].last_error);
    }
    for (k = 0; k < NAMES; k++)
        redlock_lock_free(cyclers[k].lock);
    redlock_client_free(L.c);
    for (k = 0; k < NAMES; k++)
        ck_assert_msg(nodes_with(cyclers[k].name) == 0, "%s left behind", cyclers[k].name);
}

/* 2. A member killed with cycles in flight: every operation still ends
 *    at a quorum of the other four; once it restarts, the shared
 *    connection to it is opened again and it runs scripts again. */
START_TEST(test_member_killed_and_restarted)
{
    long before;

    loop_client(500, 0);
    start_cycles("kill");
    run_for(300);
    ck_assert_int_eq(rig_node("kill", 4), 0);
    before = total_cycles();
    run_for(500);
    ck_assert_msg(total_cycles() > before, "no cycle without the killed member");
    ck_assert_int_eq(rig_node("restart", 4), 0);
    /* A restarted server counts from zero. */
    run_for(1000);
    ck_assert_msg(strstr(rig_cli(4, "INFO commandstats"), "cmdstat_eval") != NULL,
                  "the restarted member ran no script");
    stop_cycles();
}
END_TEST

/* 3. A member frozen with cycles in flight: the loop is never held up,
 *    cycles go on at a quorum, and what the member runs once thawed (the
 *    requests that waited in its socket) is undone. */
START_TEST(test_member_frozen_and_thawed)
{
    long before;

    loop_client(200, 0);
    start_cycles("freeze");
    run_for(300);
    ck_assert_int_eq(rig_node("freeze", 2), 0);
    before = total_cycles();
    run_for(1000);
    ck_assert_msg(total_cycles() > before, "no cycle with a member frozen");
    ck_assert_int_eq(rig_node("thaw", 2), 0);
    run_for(500);
    ck_assert_msg(L.longest_action_us < 250000, "an action took %lld us",
                  (long long)L.longest_action_us);
    stop_cycles();
}
END_TEST

/* 4. Script caches flushed under load: the calls answered NOSCRIPT are
 *    sent again as EVAL on the shared connection, and none fails. */
START_TEST(test_script_cache_flushed)
{
    size_t i;
    int round;

    loop_client(2000, 0);
    start_cycles("noscript");
    for (round = 0; round < 3; round++) {
        run_for(200);
        for (i = 0; i < N_NODES; i++)
            ck_assert_str_eq(rig_cli(i, "SCRIPT FLUSH"), "OK");
    }
    run_for(300);
    stop_cycles();
}
END_TEST

/* A member whose connection cannot even be started (a unix socket that
 * does not exist: connect fails at once) fails each of its calls at once,
 * with the reason, as on a blocking client. Its calls used to get no
 * outcome at all: the shared connection's open failed before any call was
 * queued on it, so the acquire knew nothing of that member until its
 * deadline, and said nothing of why. */
START_TEST(test_unreachable_member_reports_its_calls)
{
    redlock_options o = {0};
    char missing[96], a[64], b[64];
    const char *uris[3] = {missing, a, b};
    int base = rig_get_int("PLAIN_BASE_PORT");
    redlock_lock *l;
    result r;

    snprintf(missing, sizeof(missing), "unix:///tmp/redlock-missing-%d.sock", (int)getpid());
    snprintf(a, sizeof(a), "redis://127.0.0.1:%d", base);
    snprintf(b, sizeof(b), "redis://127.0.0.1:%d", base + 1);
    memset(&L, 0, sizeof(L));
    L.timer_at_ms = -1;
    o.event_loop = 1;
    o.node_timeout_ms = 1000;
    ck_assert_int_eq(redlock_client_new(&L.c, uris, 1, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_loop_attach(L.c, on_socket, on_timer, &L), REDLOCK_OK);
    l = new_lock("pipeline:unreachable");
    start_acquire(l, 1, 0, 10000, &r);
    ck_assert(run_until(&r.done, 5000));
    fprintf(stderr, "unreachable member: %s: %s\n", redlock_err_name(r.rc), r.msg);
    ck_assert_int_eq(r.rc, REDLOCK_ENO_QUORUM);
    ck_assert_msg(strstr(r.msg, "1 of 1 members failed") != NULL && strstr(r.msg, missing + 7),
                  "the failure is not reported: '%s'", r.msg);
    redlock_lock_free(l);
    redlock_client_free(L.c);
    L.c = NULL;

    /* With two healthy members the lock is taken all the same. */
    memset(&L, 0, sizeof(L));
    L.timer_at_ms = -1;
    ck_assert_int_eq(redlock_client_new(&L.c, uris, 3, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_loop_attach(L.c, on_socket, on_timer, &L), REDLOCK_OK);
    l = new_lock("pipeline:unreachable3");
    start_acquire(l, 1, 0, 10000, &r);
    ck_assert(run_until(&r.done, 5000));
    ck_assert_msg(r.rc == REDLOCK_OK, "%s: %s", redlock_err_name(r.rc), r.msg);
    start_unlock(l, 1, &r);
    ck_assert(run_until(&r.done, 5000));
    ck_assert_int_eq(r.rc, REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(L.c);
    L.c = NULL;
}
END_TEST

/* 6. One operation letting go of a node must not take the node's shared
 *    connection from the others. Node 4 is frozen before first use, so its
 *    connection stays in its set-up (db 1: SELECT gets no answer). X, on a
 *    free lock, decides at a quorum of nodes 0-3 and lets node 4 go; Y,
 *    refused by nodes 0 and 1, needs node 4 and waits for it within its
 *    connect allowance. Once node 4 is thawed, Y is granted. */
START_TEST(test_setup_kept_for_waiting_operation)
{
    redlock_options o = {0};
    char bufs[N_NODES][96], nx[64], ny[96], args[256];
    const char *uris[N_NODES];
    redlock_lock *x, *y;
    result rx, ry;
    size_t i;

    for (i = 0; i < N_NODES; i++) {
        snprintf(bufs[i], sizeof(bufs[i]), "%s/1", rig_plain_uri(i));
        uris[i] = bufs[i];
    }
    rig_unique_name(nx, sizeof(nx), "pipeline", "setup-x");
    rig_unique_name(ny, sizeof(ny), "pipeline", "setup-y");
    for (i = 0; i < 2; i++) {
        snprintf(args, sizeof(args), "-n 1 HSET '%s' other:1 1", ny);
        rig_cli(i, args);
        snprintf(args, sizeof(args), "-n 1 PEXPIRE '%s' 30000", ny);
        rig_cli(i, args);
    }
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    memset(&L, 0, sizeof(L));
    L.timer_at_ms = -1;
    o.event_loop = 1;
    o.node_timeout_ms = 200;
    o.connect_timeout_ms = 3000;
    ck_assert_int_eq(redlock_client_new(&L.c, uris, N_NODES, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_loop_attach(L.c, on_socket, on_timer, &L), REDLOCK_OK);
    x = new_lock(nx);
    y = new_lock(ny);
    start_acquire(y, 2, 0, 10000, &ry);
    start_acquire(x, 1, 0, 10000, &rx);
    ck_assert(run_until(&rx.done, 3000));
    ck_assert_msg(rx.rc == REDLOCK_OK, "X: %s: %s", redlock_err_name(rx.rc), rx.msg);
    run_until(&ry.done, 400);
    ck_assert_msg(!ry.done, "Y ended (%s: %s) before node 4's set-up could finish",
                  redlock_err_name(ry.rc), ry.msg);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    ck_assert(run_until(&ry.done, 5000));
    ck_assert_msg(ry.rc == REDLOCK_OK, "Y after the thaw: %s: %s", redlock_err_name(ry.rc),
                  ry.msg);
    start_unlock(x, 1, &rx);
    ck_assert(run_until(&rx.done, 3000));
    start_unlock(y, 2, &ry);
    ck_assert(run_until(&ry.done, 3000));
    redlock_lock_free(x);
    redlock_lock_free(y);
    redlock_client_free(L.c);
    L.c = NULL;
    for (i = 0; i < N_NODES; i++) {
        snprintf(args, sizeof(args), "-n 1 DEL '%s' '%s'", nx, ny);
        rig_cli(i, args);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loop_pipeline");
    SRunner *sr;
    int failed;

    RIG_ADD_CASE(s, test_one_connection_per_node, 60);
    RIG_ADD_CASE(s, test_member_killed_and_restarted, 60);
    RIG_ADD_CASE(s, test_member_frozen_and_thawed, 60);
    RIG_ADD_CASE(s, test_script_cache_flushed, 60);
    RIG_ADD_CASE(s, test_unreachable_member_reports_its_calls, 60);
    RIG_ADD_CASE(s, test_setup_kept_for_waiting_operation, 60);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
