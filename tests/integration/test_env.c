/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock_client_new_from_env() against the fixture's plain nodes: a good
 * REDLOCK_NODES list takes a lock, REDLOCK_PASSWORD authenticates an ACL
 * user, and an unset, empty or malformed list fails with a message that
 * names the variable and never shows a password.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/redlock.h"
#include "rig_env.h"

static void set_nodes(const char *v)
{
    if (v)
        ck_assert_int_eq(setenv("REDLOCK_NODES", v, 1), 0);
    else
        ck_assert_int_eq(unsetenv("REDLOCK_NODES"), 0);
}

/* The five plain nodes as "URI,URI,...", each with prefix after "//". */
static const char *plain_list(const char *userinfo)
{
    static char list[1024];
    size_t i, off = 0;

    for (i = 0; i < 5; i++)
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%sredis://%s127.0.0.1:%d",
                                i ? "," : "", userinfo, rig_get_int("PLAIN_BASE_PORT") + (int)i);
    return list;
}

static void lock_once(redlock_client *c, const char *tag)
{
    redlock_lock *l = NULL;
    char name[96];

    rig_unique_name(name, sizeof(name), "env", tag);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_msg(redlock_try_lock_for(l, 2000, 0) == REDLOCK_OK, "%s", redlock_last_error());
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
}

START_TEST(good_list)
{
    redlock_client *c = NULL;

    unsetenv("REDLOCK_PASSWORD");
    set_nodes(plain_list(""));
    ck_assert_msg(redlock_client_new_from_env(&c, NULL) == REDLOCK_OK, "%s",
                  redlock_last_error());
    ck_assert_uint_eq(redlock_client_node_count(c), 5);
    lock_once(c, "good");
    redlock_client_free(c);
}
END_TEST

START_TEST(password_from_env)
{
    redlock_options o = {0};
    redlock_client *c = NULL;
    char user[64];

    snprintf(user, sizeof(user), "%s@", rig_get("ACL_USER"));
    set_nodes(plain_list(user));
    ck_assert_int_eq(setenv("REDLOCK_PASSWORD", rig_get("ACL_PASS"), 1), 0);
    ck_assert_msg(redlock_client_new_from_env(&c, &o) == REDLOCK_OK, "%s", redlock_last_error());
    lock_once(c, "password");
    redlock_client_free(c);

    /* The caller's password wins over the environment's. */
    o.password = "not-the-password";
    ck_assert_int_eq(redlock_client_new_from_env(&c, &o), REDLOCK_OK);
    {
        redlock_lock *l = NULL;
        int rc;

        ck_assert_int_eq(redlock_lock_new(c, "env:wrong-password", NULL, &l), REDLOCK_OK);
        rc = redlock_try_lock(l);
        ck_assert_msg(rc == REDLOCK_EAUTH, "%s: %s", redlock_err_name(rc), redlock_last_error());
        ck_assert_ptr_null(strstr(redlock_last_error(), "not-the-password"));
        redlock_lock_free(l);
    }
    redlock_client_free(c);
    unsetenv("REDLOCK_PASSWORD");
}
END_TEST

START_TEST(unset_or_empty)
{
    redlock_client *c = (redlock_client *)&c;

    set_nodes(NULL);
    ck_assert_int_eq(redlock_client_new_from_env(&c, NULL), REDLOCK_ENONODES);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "REDLOCK_NODES is not set"));
    set_nodes("");
    ck_assert_int_eq(redlock_client_new_from_env(&c, NULL), REDLOCK_ENONODES);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "REDLOCK_NODES is empty"));
    ck_assert_int_eq(redlock_client_new_from_env(NULL, NULL), REDLOCK_EINVAL);
}
END_TEST

START_TEST(bad_uri)
{
    static const struct {
        const char *list, *want;
    } cases[] = {
        {"redis://127.0.0.1:1,redis://127.0.0.1:99999", "REDLOCK_NODES: node 1: "},
        {"redis://127.0.0.1:1,,redis://127.0.0.1:2", "REDLOCK_NODES: node 1: empty URI"},
        {"redis://127.0.0.1:1,", "REDLOCK_NODES: node 1: empty URI"},
        {"ftp://127.0.0.1:1", "REDLOCK_NODES: node 0: "},
        {"redis://alice:hunter2@127.0.0.1:0", "REDLOCK_NODES: node 0: "},
        {"redis://:hunter2@", "REDLOCK_NODES: node 0: "},
        {"redis://alice:hunter2@[::1", "REDLOCK_NODES: node 0: "},
    };
    redlock_client *c = NULL;
    size_t i;

    ck_assert_int_eq(setenv("REDLOCK_PASSWORD", "hunter2", 1), 0);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc;

        set_nodes(cases[i].list);
        rc = redlock_client_new_from_env(&c, NULL);
        ck_assert_msg(rc == REDLOCK_EURI, "%s: %s (%s)", cases[i].list, redlock_err_name(rc),
                      redlock_last_error());
        ck_assert_ptr_null(c);
        ck_assert_msg(strncmp(redlock_last_error(), cases[i].want, strlen(cases[i].want)) == 0,
                      "%s: %s", cases[i].list, redlock_last_error());
        ck_assert_msg(!strstr(redlock_last_error(), "hunter2"), "password in '%s'",
                      redlock_last_error());
    }
    unsetenv("REDLOCK_PASSWORD");
}
END_TEST

START_TEST(too_many_nodes)
{
    char list[REDLOCK_MAX_NODES * 32 + 64];
    redlock_client *c = NULL;
    size_t i, off = 0;

    for (i = 0; i <= REDLOCK_MAX_NODES; i++)
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%sredis://127.0.0.1:%zu",
                                i ? "," : "", 1 + i);
    set_nodes(list);
    ck_assert_int_eq(redlock_client_new_from_env(&c, NULL), REDLOCK_EINVAL);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "REDLOCK_NODES: more than 64"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("from_env");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, good_list);
    tcase_add_test(tc, password_from_env);
    tcase_add_test(tc, unset_or_empty);
    tcase_add_test(tc, bad_uri);
    tcase_add_test(tc, too_many_nodes);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
