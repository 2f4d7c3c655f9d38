/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the library tells an operator. Logs, by level: at DEBUG every
 * attempt with each member's answer, every release and abort, watchdog
 * ticks and a node's silence and recovery; at INFO only what an operator
 * should see (the renewal margin lost and back); never a password. And
 * the hand-off and renewal-lag histograms, fed by real traffic.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/redlock.h"
#include "rig_env.h"

#define MAX_LINES 512

typedef struct captured {
    pthread_mutex_t mu;
    size_t n;
    int level[MAX_LINES];
    char line[MAX_LINES][600];
} captured;

static captured cap = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {{0}}};

static void capture(void *ud, redlock_log_level level, const char *msg)
{
    (void)ud;
    pthread_mutex_lock(&cap.mu);
    if (cap.n < MAX_LINES) {
        cap.level[cap.n] = level;
        snprintf(cap.line[cap.n], sizeof(cap.line[0]), "%s", msg);
        cap.n++;
    }
    pthread_mutex_unlock(&cap.mu);
}

static void reset(void)
{
    pthread_mutex_lock(&cap.mu);
    cap.n = 0;
    pthread_mutex_unlock(&cap.mu);
}

/* The first captured line containing all of a, b (b may be NULL) at or
 * below max_level, or -1. */
static int find(const char *a, const char *b, int max_level)
{
    int found = -1;
    size_t i;

    pthread_mutex_lock(&cap.mu);
    for (i = 0; i < cap.n && found < 0; i++)
        if (cap.level[i] <= max_level && strstr(cap.line[i], a) && (!b || strstr(cap.line[i], b)))
            found = (int)i;
    pthread_mutex_unlock(&cap.mu);
    return found;
}

static redlock_client *client_at(redlock_log_level level, size_t n, const char *const *uris)
{
    redlock_client *c = NULL;
    redlock_options o;

    memset(&o, 0, sizeof(o));
    o.log_fn = capture;
    o.log_level = level;
    o.node_timeout_ms = 100;
    o.watchdog_lease_ms = 900;
    ck_assert_int_eq(redlock_client_new(&c, uris, n, &o), REDLOCK_OK);
    return c;
}

static void dump(void)
{
    size_t i;

    for (i = 0; i < cap.n; i++)
        fprintf(stderr, "  [%d] %s\n", cap.level[i], cap.line[i]);
}

START_TEST(test_debug_shows_every_member_of_an_attempt)
{
    redlock_client *c;
    redlock_lock *l, *other;
    char name[128], node2[64];

    rig_heal(3);
    reset();
    rig_unique_name(name, sizeof(name), "log", "attempt");
    c = client_at(REDLOCK_LOG_DEBUG, 3, rig_plain_uris());
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &other), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 30000), REDLOCK_OK);
    snprintf(node2, sizeof(node2), "%s", rig_plain_uri(2) + strlen("redis://"));
    /* It may decide on the first two grants: the third is "not waited for". */
    if (find("granted, 0 busy, 0 failed of 3 (quorum 2)", node2, REDLOCK_LOG_DEBUG) < 0 ||
        find("attempt", "granted in", REDLOCK_LOG_DEBUG) < 0) {
        dump();
        ck_abort_msg("no attempt line naming every member");
    }
    /* A second owner is refused: its line says by whom and for how long. */
    ck_assert_int_eq(redlock_acquire_as(other, 2, 0, 30000), REDLOCK_EBUSY);
    ck_assert_int_ge(find("attempt", "held elsewhere (ttl", REDLOCK_LOG_DEBUG), 0);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_ge(find(name, "released, 0 still held", REDLOCK_LOG_DEBUG), 0);
    redlock_lock_free(other);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(test_info_leaves_debug_out)
{
    redlock_client *c;
    redlock_lock *l;
    char name[128];

    rig_heal(3);
    reset();
    rig_unique_name(name, sizeof(name), "log", "info");
    c = client_at(REDLOCK_LOG_INFO, 3, rig_plain_uris());
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 30000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_lt(find("attempt", NULL, REDLOCK_LOG_DEBUG), 0);
    ck_assert_int_lt(find("release", NULL, REDLOCK_LOG_DEBUG), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* A frozen member: its silence at DEBUG, the watchdog's thin margin at
 * INFO (renewed on exactly 2 of 3), both undone when it thaws. */
START_TEST(test_silence_and_margin_are_logged)
{
    redlock_client *c;
    redlock_lock *l;
    char name[128], node2[64];
    int i;

    rig_heal(3);
    reset();
    rig_unique_name(name, sizeof(name), "log", "margin");
    snprintf(node2, sizeof(node2), "%s", rig_plain_uri(2) + strlen("redis://"));
    c = client_at(REDLOCK_LOG_DEBUG, 3, rig_plain_uris());
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_acquire(l), REDLOCK_OK); /* watchdog lease 900 ms */
    ck_assert_int_eq(rig_node("freeze", 2), 0);
    for (i = 0; i < 40 && find("renewed on only 2 of 3", NULL, REDLOCK_LOG_INFO) < 0; i++)
        rig_sleep_ms(100);
    ck_assert_int_eq(rig_node("thaw", 2), 0);
    ck_assert_msg(find("renewed on only 2 of 3", NULL, REDLOCK_LOG_INFO) >= 0,
                  "no INFO line for the lost margin");
    ck_assert_int_ge(find(node2, "gives no reply", REDLOCK_LOG_DEBUG), 0);
    ck_assert_int_ge(find("watchdog tick", "holds renewed", REDLOCK_LOG_DEBUG), 0);
    for (i = 0; i < 40 && find("renewed on 3 of 3 members again", NULL, REDLOCK_LOG_INFO) < 0;
         i++)
        rig_sleep_ms(100);
    ck_assert_int_ge(find("renewed on 3 of 3 members again", NULL, REDLOCK_LOG_INFO), 0);
    ck_assert_int_ge(find(node2, "answers again after", REDLOCK_LOG_DEBUG), 0);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* Every line at DEBUG, over an ACL user's URI, with the node refusing the
 * password once: the password appears nowhere. */
START_TEST(test_no_password_in_any_line)
{
    const char *uris[1];
    redlock_client *c;
    redlock_lock *l;
    char name[128];
    size_t i;

    rig_heal(1);
    reset();
    rig_unique_name(name, sizeof(name), "log", "secret");
    uris[0] = rig_acl_uri("nobody-here", "s3cret-Pa55word");
    c = client_at(REDLOCK_LOG_DEBUG, 1, uris);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_ne(redlock_try_lock_for(l, 0, 30000), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
    ck_assert_uint_gt(cap.n, 0);
    for (i = 0; i < cap.n; i++)
        ck_assert_msg(!strstr(cap.line[i], "s3cret"), "password in: %s", cap.line[i]);
}
END_TEST

static uint64_t count_of(redlock_client *c, int which, uint64_t *sum_us)
{
    uint64_t b[REDLOCK_LATENCY_BUCKETS], n = 0;
    int i;

    ck_assert_int_eq(redlock_client_histogram(c, which, b, sum_us), REDLOCK_OK);
    for (i = 0; i < REDLOCK_LATENCY_BUCKETS; i++)
        n += b[i];
    return n;
}

typedef struct waiter {
    redlock_lock *l;
    int rc;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;

    w->rc = redlock_acquire_as(w->l, 2, 5000, 30000);
    return NULL;
}

/* One waiter gets the lock from another owner: one hand-off, about as long
 * as the release took to reach it, not the whole wait. A watchdog hold
 * renewed a few times: as many renewal-lag observations. */
START_TEST(test_histograms_from_real_traffic)
{
    redlock_client *c;
    redlock_lock *l;
    char name[128];
    uint64_t sum_us = 0;
    pthread_t t;
    waiter w;

    rig_heal(3);
    rig_unique_name(name, sizeof(name), "log", "histograms");
    c = client_at(REDLOCK_LOG_WARN, 3, rig_plain_uris());
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(count_of(c, REDLOCK_HIST_HANDOFF, NULL), 0);
    ck_assert_int_eq(redlock_acquire_as(l, 1, 0, 30000), REDLOCK_OK);
    w.l = l;
    w.rc = -1;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_for_it, &w), 0);
    rig_sleep_ms(400);
    ck_assert_int_eq(redlock_unlock_as(l, 1), REDLOCK_OK);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_OK);
    ck_assert_int_eq(count_of(c, REDLOCK_HIST_HANDOFF, &sum_us), 1);
    /* Measured from the release message, not from the start of the wait. */
    ck_assert_msg(sum_us < 300000, "hand-off of %llu us", (unsigned long long)sum_us);
    ck_assert_int_eq(redlock_unlock_as(l, 2), REDLOCK_OK);

    ck_assert_int_eq(count_of(c, REDLOCK_HIST_RENEWAL_LAG, NULL), 0);
    ck_assert_int_eq(redlock_lock_acquire(l), REDLOCK_OK); /* lease 900 ms */
    rig_sleep_ms(1000);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_uint_ge(count_of(c, REDLOCK_HIST_RENEWAL_LAG, NULL), 2);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("logging");
    TCase *tc = tcase_create("logging");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_debug_shows_every_member_of_an_attempt);
    tcase_add_test(tc, test_info_leaves_debug_out);
    tcase_add_test(tc, test_silence_and_margin_are_logged);
    tcase_add_test(tc, test_no_password_in_any_line);
    tcase_add_test(tc, test_histograms_from_real_traffic);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
