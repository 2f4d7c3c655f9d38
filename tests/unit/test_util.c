/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hand-written helpers of the send path (src/core/util.c): numbers
 * print exactly as snprintf would, truncation included; request ids are
 * hex of the asked length; per-call scratch is zeroed wherever it lives.
 */
#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"

static void check_u64(uint64_t v, size_t cap)
{
    char got[32], want[32];
    size_t n;

    memset(got, 'x', sizeof(got));
    n = redlock__fmt_u64(got, cap, v);
    snprintf(want, cap, "%" PRIu64, v);
    ck_assert_msg(strcmp(got, want) == 0, "%" PRIu64 " in %zu bytes: '%s', want '%s'", v, cap,
                  got, want);
    ck_assert_uint_eq(n, strlen(want));
}

START_TEST(u64_as_snprintf)
{
    static const uint64_t edges[] = {0, 1, 9, 10, 11, 42, 99, 100, 101, 999, 1000,
                                     65535, 4294967295u, 4294967296u, UINT64_MAX - 1,
                                     UINT64_MAX};
    size_t i, cap;
    uint64_t v;

    for (v = 0; v < 20000; v++)
        check_u64(v, 21);
    for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        for (cap = 1; cap <= 21; cap++)
            check_u64(edges[i], cap);
}
END_TEST

START_TEST(u64_into_no_room)
{
    char buf[4] = "abc";

    ck_assert_uint_eq(redlock__fmt_u64(buf, 0, 42), 0);
    ck_assert_str_eq(buf, "abc");
}
END_TEST

START_TEST(i64_as_snprintf)
{
    static const int64_t values[] = {0, -1, -9, -10, -99, -100, 5, 99, INT64_MIN, INT64_MAX};
    char got[24], want[24];
    size_t i;

    for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        redlock__fmt_i64(got, sizeof(got), values[i]);
        snprintf(want, sizeof(want), "%" PRId64, values[i]);
        ck_assert_str_eq(got, want);
    }
}
END_TEST

START_TEST(rand_hex_is_hex_of_the_length)
{
    char a[41], b[41];
    size_t n, i;

    for (n = 0; n <= 20; n++) {
        memset(a, 'x', sizeof(a));
        redlock__rand_hex(a, n);
        ck_assert_uint_eq(strlen(a), 2 * n);
        for (i = 0; i < 2 * n; i++)
            ck_assert_msg(strchr("0123456789abcdef", a[i]) != NULL, "'%c' in '%s'", a[i], a);
    }
    /* Two draws of ten bytes (a request id's) differ. */
    redlock__rand_hex(a, 10);
    redlock__rand_hex(b, 10);
    ck_assert_str_ne(a, b);
}
END_TEST

/* Zeroed scratch: the caller's buffer when it fits, the heap when not. */
START_TEST(scratch_inline_or_heap)
{
    unsigned char own[16];
    unsigned char *p;
    size_t i;

    memset(own, 0xa5, sizeof(own));
    p = redlock__scratch(own, sizeof(own), 12);
    ck_assert_ptr_eq(p, own);
    for (i = 0; i < 12; i++)
        ck_assert_uint_eq(p[i], 0);
    ck_assert_uint_eq(own[12], 0xa5); /* only what was asked for */
    redlock__scratch_free(p, own);

    p = redlock__scratch(own, sizeof(own), sizeof(own) + 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_ne(p, own);
    for (i = 0; i < sizeof(own) + 1; i++)
        ck_assert_uint_eq(p[i], 0);
    redlock__scratch_free(p, own); /* freed: ASan and valgrind see a leak otherwise */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("format");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, u64_as_snprintf);
    tcase_add_test(tc, u64_into_no_room);
    tcase_add_test(tc, scratch_inline_or_heap);
    tcase_add_test(tc, i64_as_snprintf);
    tcase_add_test(tc, rand_hex_is_hex_of_the_length);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
