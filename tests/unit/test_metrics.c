/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Prometheus exposition of a client's statistics, with no server:
 * clients over Unix socket paths connect lazily, so nothing is contacted.
 * Checks the counters, node labels (escaped, never user info), the
 * histograms fed through the internal recording functions, and the
 * snprintf-like truncation to whole lines.
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/prom.h"
#include "lock/context.h"
#include "lock/internal.h"
#include "redlock/redlock.h"

static redlock_client *client_of(const char *uri)
{
    redlock_client *c = NULL;
    const char *uris[] = {uri};

    ck_assert_msg(redlock_client_new(&c, uris, 1, NULL) == REDLOCK_OK, "%s: %s", uri,
                  redlock_last_error());
    return c;
}

/* The whole text, heap-allocated (free it). */
static char *format(redlock_client *c)
{
    size_t needed = 0;
    char *buf;

    ck_assert_int_eq(redlock_stats_format_prometheus(c, NULL, 0, &needed), REDLOCK_ERANGE);
    ck_assert_uint_gt(needed, 0);
    buf = malloc(needed + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(redlock_stats_format_prometheus(c, buf, needed + 1, NULL), REDLOCK_OK);
    ck_assert_uint_eq(strlen(buf), needed);
    return buf;
}

START_TEST(counters_have_help_type_and_total)
{
    redlock_client *c = client_of("unix:///tmp/redlock-metrics-test.sock");
    char *t = format(c);
    static const char *const names[] = {
        "redlock_acquire_attempts_total", "redlock_acquired_total",
        "redlock_acquire_busy_total", "redlock_acquire_no_quorum_total",
        "redlock_released_total", "redlock_lost_total", "redlock_renewals_total",
        "redlock_watchdog_ticks_total", "redlock_watchdog_batches_total",
        "redlock_background_releases_total"};
    char line[160];
    size_t i;

    /* One per field of redlock_stats before the histogram. */
    ck_assert_uint_eq(sizeof(names) / sizeof(names[0]),
                      offsetof(redlock_stats, acquire_latency_us) / sizeof(uint64_t));
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(line, sizeof(line), "# TYPE %s counter\n%s 0\n", names[i], names[i]);
        ck_assert_msg(strstr(t, line), "missing %s in:\n%s", names[i], t);
        snprintf(line, sizeof(line), "# HELP %s ", names[i]);
        ck_assert_msg(strstr(t, line), "no HELP for %s", names[i]);
    }
    ck_assert_ptr_nonnull(
        strstr(t, "redlock_node_failures_total{node=\"/tmp/redlock-metrics-test.sock\"} 0\n"));
    ck_assert_int_eq(t[strlen(t) - 1], '\n');
    free(t);
    redlock_client_free(c);
}
END_TEST

/* The node label of a client over uri is want; unwanted appears nowhere. */
static void expect_label(const char *uri, const char *want, const char *unwanted)
{
    redlock_client *c = client_of(uri);
    char *t = format(c);

    ck_assert_msg(strstr(t, want), "no '%s' in:\n%s", want, t);
    ck_assert_msg(!unwanted || !strstr(t, unwanted), "'%s' in:\n%s", unwanted, t);
    free(t);
    redlock_client_free(c);
}

START_TEST(node_label_is_escaped)
{
    expect_label("unix:///tmp/a\"b\\c.sock",
                 "redlock_node_failures_total{node=\"/tmp/a\\\"b\\\\c.sock\"} 0\n", NULL);
}
END_TEST

START_TEST(node_label_has_no_user_info)
{
    expect_label("redis://alice:hunter2@127.0.0.1:1", "{node=\"127.0.0.1:1\"} 0\n", "hunter2");
    expect_label("redis://alice:hunter2@127.0.0.1:1", "{node=\"127.0.0.1:1\"} 0\n", "alice");
}
END_TEST

START_TEST(label_escaping_covers_newline)
{
    char buf[128];
    redlock__prom p = {buf, sizeof(buf), 0};

    redlock__prom_labeled(&p, "m_total", "node", "a\\b\"c\nd", 7);
    ck_assert_int_eq(redlock__prom_finish(&p), 0);
    ck_assert_str_eq(buf, "m_total{node=\"a\\\\b\\\"c\\nd\"} 7\n");
}
END_TEST

/* The histograms through the recording functions the lock core calls. */
START_TEST(histograms_are_cumulative_in_seconds)
{
    redlock_client *c = client_of("unix:///tmp/redlock-metrics-test.sock");
    uint64_t b[REDLOCK_LATENCY_BUCKETS], sum;
    char *t;

    redlock__stats_observe_handoff(c, 500);              /* 0 us: bucket 0 */
    redlock__stats_observe_handoff(c, 3000);             /* 3 us: bucket 1 */
    redlock__stats_observe_handoff(c, 1500000);          /* 1500 us: bucket 10 */
    redlock__stats_observe_handoff(c, 60LL * 1000000000); /* 60 s: the last */
    redlock__stats_observe_renewal_lag(c, -5);           /* early: 0 */
    redlock__stats_observe_acquire(c, 2000);
    ck_assert_int_eq(redlock_client_histogram(c, REDLOCK_HIST_HANDOFF, b, &sum), REDLOCK_OK);
    ck_assert_uint_eq(b[0], 1);
    ck_assert_uint_eq(b[1], 1);
    ck_assert_uint_eq(b[10], 1);
    ck_assert_uint_eq(b[REDLOCK_LATENCY_BUCKETS - 1], 1);
    ck_assert_uint_eq(sum, 0 + 3 + 1500 + 60000000ULL);
    ck_assert_int_eq(redlock_client_histogram(c, 99, b, NULL), REDLOCK_EINVAL);

    t = format(c);
    ck_assert_ptr_nonnull(strstr(t, "# TYPE redlock_handoff_duration_seconds histogram\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_handoff_duration_seconds_bucket{le=\"0.000002\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_handoff_duration_seconds_bucket{le=\"0.000004\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_handoff_duration_seconds_bucket{le=\"0.001024\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_handoff_duration_seconds_bucket{le=\"0.002048\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_handoff_duration_seconds_bucket{le=\"8.388608\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_handoff_duration_seconds_bucket{le=\"+Inf\"} 4\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_handoff_duration_seconds_sum 60.001503\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_handoff_duration_seconds_count 4\n"));
    ck_assert_ptr_null(strstr(t, "redlock_handoff_duration_seconds_bucket{le=\"16.777216\"}"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_renewal_lag_seconds_bucket{le=\"0.000002\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_renewal_lag_seconds_sum 0.000000\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_acquire_duration_seconds_bucket{le=\"0.000004\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "redlock_acquire_duration_seconds_sum 0.000002\n"));
    free(t);
    redlock_client_free(c);
}
END_TEST

START_TEST(truncation_keeps_whole_lines)
{
    redlock_client *c = client_of("unix:///tmp/redlock-metrics-test.sock");
    char *full = format(c), *buf;
    size_t n = strlen(full), needed = 0, cut;

    buf = malloc(n + 1);
    ck_assert_ptr_nonnull(buf);
    /* No room for the NUL: everything but the last line. */
    ck_assert_int_eq(redlock_stats_format_prometheus(c, buf, n, &needed), REDLOCK_ERANGE);
    ck_assert_uint_eq(needed, n);
    cut = strlen(buf);
    ck_assert_uint_lt(cut, n);
    ck_assert_int_eq(buf[cut - 1], '\n');
    ck_assert(strncmp(buf, full, cut) == 0);
    ck_assert(strchr(full + cut, '\n') == full + n - 1);
    /* Cuts in the middle of the first line leave nothing. */
    ck_assert_int_eq(redlock_stats_format_prometheus(c, buf, 10, NULL), REDLOCK_ERANGE);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(redlock_stats_format_prometheus(c, buf, 1, NULL), REDLOCK_ERANGE);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(redlock_stats_format_prometheus(c, NULL, 5, NULL), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_stats_format_prometheus(NULL, buf, n, NULL), REDLOCK_EINVAL);
    free(buf);
    free(full);
    redlock_client_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("prometheus");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, counters_have_help_type_and_total);
    tcase_add_test(tc, node_label_is_escaped);
    tcase_add_test(tc, node_label_has_no_user_info);
    tcase_add_test(tc, label_escaping_covers_newline);
    tcase_add_test(tc, histograms_are_cumulative_in_seconds);
    tcase_add_test(tc, truncation_keeps_whole_lines);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
