/* SPDX-License-Identifier: BSD-3-Clause */
/* The error table: every code has a distinct name and a message, and
 * unknown codes never yield NULL. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "redlock/redlock.h"
#include "resp/script.h"

START_TEST(every_code_has_name_and_message)
{
    int i, j;

    ck_assert_int_eq(REDLOCK_OK, 0);
    for (i = 0; i < REDLOCK_ERR_COUNT_; i++) {
        ck_assert_ptr_nonnull(redlock_strerror(i));
        ck_assert_int_gt((int)strlen(redlock_strerror(i)), 3);
        ck_assert_str_ne(redlock_err_name(i), "REDLOCK_UNKNOWN");
        ck_assert(strncmp(redlock_err_name(i), "REDLOCK_", 8) == 0);
        for (j = 0; j < i; j++)
            ck_assert_str_ne(redlock_err_name(i), redlock_err_name(j));
    }
    ck_assert_str_eq(redlock_err_name(REDLOCK_EBUSY), "REDLOCK_EBUSY");
    ck_assert_str_eq(redlock_err_name(REDLOCK_ENOT_OWNER), "REDLOCK_ENOT_OWNER");
}
END_TEST

START_TEST(unknown_codes_are_safe)
{
    ck_assert_str_eq(redlock_strerror(-1), "unknown error");
    ck_assert_str_eq(redlock_strerror(REDLOCK_ERR_COUNT_), "unknown error");
    ck_assert_str_eq(redlock_strerror(1 << 30), "unknown error");
    ck_assert_str_eq(redlock_err_name(-5), "REDLOCK_UNKNOWN");
}
END_TEST

START_TEST(last_error_is_per_call_and_bounded)
{
    char big[1024];

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ck_assert_int_eq(redlock__fail(REDLOCK_EINVAL, "bad %s", "thing"), REDLOCK_EINVAL);
    ck_assert_str_eq(redlock_last_error(), "bad thing");
    redlock__fail(REDLOCK_EINVAL, "%s", big);
    ck_assert_int_lt((int)strlen(redlock_last_error()), 256);
}
END_TEST

START_TEST(server_errors_map_to_codes)
{
    ck_assert_int_eq(redlock__server_error_code("LOADING Redis is loading"), REDLOCK_ELOADING);
    ck_assert_int_eq(redlock__server_error_code("READONLY You can't write"), REDLOCK_EREADONLY);
    ck_assert_int_eq(redlock__server_error_code("OOM command not allowed"), REDLOCK_EOOM);
    ck_assert_int_eq(redlock__server_error_code("NOAUTH Authentication required."), REDLOCK_EAUTH);
    ck_assert_int_eq(redlock__server_error_code("WRONGPASS invalid"), REDLOCK_EAUTH);
    ck_assert_int_eq(redlock__server_error_code("ELIMIT the permits taken here have limit 2"),
                     REDLOCK_ECONFIG);
    ck_assert_int_eq(redlock__server_error_code("ERR unknown"), REDLOCK_ESERVER);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("table");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, every_code_has_name_and_message);
    tcase_add_test(tc, unknown_codes_are_safe);
    tcase_add_test(tc, last_error_is_per_call_and_bounded);
    tcase_add_test(tc, server_errors_map_to_codes);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
