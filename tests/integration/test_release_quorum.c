/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The last release settles at a quorum, against real redis-server
 * processes of the fixture: with two of five nodes frozen (SIGSTOP),
 * unlock returns on the three answers; the frozen nodes run the release
 * they had been sent, once, when thawed. A node killed while its release
 * is in flight gets it again from the background after its restart.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/redlock.h"
#include "rig_env.h"

#define N_NODES 5
#define NODE_TIMEOUT_MS 1000

/* Script calls (EVALSHA and EVAL) node i ran since its last RESETSTAT. */
static long script_calls(size_t i)
{
    const char *names[2] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
    const char *info = rig_cli(i, "INFO commandstats");
    long n = 0;
    int k;

    for (k = 0; k < 2; k++) {
        const char *p = strstr(info, names[k]);

        if (p)
            n += atol(p + strlen(names[k]));
    }
    return n;
}

static long exists(size_t i, const char *name)
{
    char args[300];

    snprintf(args, sizeof(args), "EXISTS %s", name);
    return atol(rig_cli(i, args));
}

static redlock_client *client_new(void)
{
    redlock_options o;
    redlock_client *c = NULL;

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    ck_assert_int_eq(redlock_client_new(&c, rig_plain_uris(), N_NODES, &o), REDLOCK_OK);
    return c;
}

/* A fixed lease: no watchdog renewals in the command counts. */
static redlock_lock *hold(redlock_client *c, const char *name)
{
    redlock_lock *l = NULL;
    size_t i;
    int k;

    redlock_lock_options all = {.quorum = REDLOCK_QUORUM_ALL};
    char warm[160];

    /* A first cycle that waits for every member opens every connection
     * and loads the acquire script on nodes restarted by earlier cases:
     * an acquire that decides on its quorum abandons a straggler's NOSCRIPT
     * (and closes connections still being set up). */
    snprintf(warm, sizeof(warm), "%s:warm", name);
    ck_assert_int_eq(redlock_lock_new(c, warm, &all, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 30000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    redlock_lock_free(l);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 30000), REDLOCK_OK);
    for (i = 0; i < N_NODES; i++) {
        /* The acquire returned at its quorum; the others follow. */
        for (k = 0; k < 50 && exists(i, name) != 1; k++)
            rig_sleep_ms(10);
        ck_assert_msg(exists(i, name) == 1, "node %zu: no key %s", i, name);
        ck_assert_str_eq(rig_cli(i, "CONFIG RESETSTAT"), "OK");
    }
    return l;
}

START_TEST(test_unlock_returns_at_quorum_with_two_frozen)
{
    char name[128];
    redlock_client *c = client_new();
    redlock_lock *l;
    int64_t t0, took;
    size_t i;
    int k;

    rig_unique_name(name, sizeof(name), "rq", "frozen");
    l = hold(c, name);
    ck_assert_int_eq(rig_node("freeze", 3), 0);
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    took = rig_now_ms() - t0;
    ck_assert_msg(took < NODE_TIMEOUT_MS / 2, "unlock took %lld ms", (long long)took);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(exists(i, name), 0);
    /* Still frozen: the flush waits for their answers, sends nothing. */
    ck_assert_int_eq(redlock_client_flush(c, 50), REDLOCK_ETIMEOUT);
    ck_assert_int_eq(rig_node("thaw", 3), 0);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    ck_assert_int_eq(redlock_client_flush(c, 3000), REDLOCK_OK);
    for (k = 0; k < 50 && (exists(3, name) || exists(4, name)); k++)
        rig_sleep_ms(20);
    for (i = 0; i < N_NODES; i++) {
        ck_assert_int_eq(exists(i, name), 0);
        /* The release ran once on every node, the thawed ones included. */
        ck_assert_int_eq(script_calls(i), 1);
    }
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(test_killed_node_gets_release_after_restart)
{
    char name[128];
    redlock_client *c = client_new();
    redlock_lock *l;
    int k;

    rig_unique_name(name, sizeof(name), "rq", "killed");
    l = hold(c, name);
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    /* The release sits unread in the frozen node's socket; the kill
     * discards it and resets the connection. */
    ck_assert_int_eq(rig_node("kill", 4), 0);
    rig_sleep_ms(300);
    ck_assert_int_eq(rig_node("restart", 4), 0);
    /* The background notices the reset, backs off while the node is down,
     * and sends the release once the node is back (an empty node without
     * AOF: the release finds no hold there and leaves its tombstones). */
    for (k = 0; k < 100 && script_calls(4) < 1; k++)
        rig_sleep_ms(50);
    ck_assert_int_ge(script_calls(4), 1);
    ck_assert_int_eq(redlock_client_flush(c, 2000), REDLOCK_OK);
    ck_assert_int_eq(exists(4, name), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* Members on one node share its connection: a release settled at its
 * quorum leaves the last member's reply behind, often read already along
 * with the others (Redis answers a pipeline in one write). A flush
 * settles it at once, not when a poll that can never fire times out. */
START_TEST(test_flush_settles_replies_already_read)
{
    char name[64], names[3][96];
    redlock_member m[3];
    redlock_lock_options lo;
    redlock_client *c = client_new();
    redlock_lock *l = NULL;
    int64_t t0, took;
    int rc, k;

    rig_unique_name(name, sizeof(name), "rq", "oneread");
    memset(&lo, 0, sizeof(lo));
    lo.quorum = 2;
    for (k = 0; k < 3; k++) {
        snprintf(names[k], sizeof(names[k]), "%s:%d", name, k);
        m[k].node = 0;
        m[k].name = names[k];
    }
    ck_assert_int_eq(redlock_multilock_new(c, m, 3, &lo, &l), REDLOCK_OK);
    for (k = 0; k < 20; k++) {
        ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 30000), REDLOCK_OK);
        ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
        t0 = rig_now_ms();
        rc = redlock_client_flush(c, 500);
        took = rig_now_ms() - t0;
        ck_assert_msg(rc == REDLOCK_OK && took < 250, "cycle %d: flush %s after %lld ms", k,
                      redlock_err_name(rc), (long long)took);
    }
    for (k = 0; k < 3; k++)
        ck_assert_int_eq(exists(0, names[k]), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("release_quorum");
    SRunner *sr;
    int failed;

    RIG_ADD_CASE(s, test_unlock_returns_at_quorum_with_two_frozen, 60);
    RIG_ADD_CASE(s, test_killed_node_gets_release_after_restart, 60);
    RIG_ADD_CASE(s, test_flush_settles_replies_already_read, 60);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
