/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the holder facts' text (src/lock/facts.c): what
 * redlock__facts_format writes parses back the same, and numbers that do
 * not fit 64 bits are refused (anyone who can write the facts key writes
 * this text). No server needed.
 */
#include "lock/facts.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *pid, const char *since, redlock_holder_facts *f)
{
    char text[512];
    int n = snprintf(text, sizeof(text),
                     "v=1\nowner=abc:1\nhost=h\npid=%s\nsince_ms=%s\ncommand=sleep 1\n", pid,
                     since);

    return redlock__facts_parse(text, (size_t)n, f);
}

START_TEST(test_round_trip)
{
    redlock_holder_facts in, out;
    char text[1024];
    size_t n;

    memset(&in, 0, sizeof(in));
    snprintf(in.owner, sizeof(in.owner), "%s", "client:7");
    snprintf(in.host, sizeof(in.host), "%s", "box");
    in.pid = 4242;
    in.since_ms = INT64_MAX;
    snprintf(in.command, sizeof(in.command), "%s", "a\\b\nc");
    n = redlock__facts_format(text, sizeof(text), &in);
    ck_assert_int_eq(redlock__facts_parse(text, n, &out), 0);
    ck_assert_str_eq(out.owner, in.owner);
    ck_assert_str_eq(out.command, in.command);
    ck_assert(out.pid == 4242 && out.since_ms == INT64_MAX);
}
END_TEST

START_TEST(test_numbers_past_int64_refused)
{
    redlock_holder_facts f;

    ck_assert_int_eq(parse("9223372036854775807", "1", &f), 0);
    ck_assert(f.pid == INT64_MAX);
    ck_assert_int_eq(parse("9223372036854775808", "1", &f), -1);
    ck_assert_int_eq(parse("9999999999999999999", "1", &f), -1);
    ck_assert_int_eq(parse("1", "9999999999999999999", &f), -1);
    ck_assert_int_eq(f.found, 0);
    ck_assert_int_eq(parse("12345678901234567890", "1", &f), -1); /* 20 digits */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("facts_parse");
    TCase *tc = tcase_create("parse");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_numbers_past_int64_refused);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
