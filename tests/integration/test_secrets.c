/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * No password is left in memory the library gives back. This binary is
 * linked with --wrap=free and --wrap=realloc: every block the library's
 * own code frees is scanned for the ACL node's password first, and every
 * realloc moves its block (scanning the old one), as a growing realloc
 * may. A connection's output buffer holds AUTH until it is written, and
 * grew past it with realloc, leaving the password in the freed block.
 */
#include <check.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/redlock.h"
#include "rig_env.h"

void __real_free(void *p);
void *__real_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_realloc(void *p, size_t n);

static const char *_Atomic secret;
static atomic_int found;

static void scan(void *p)
{
    const char *s = atomic_load(&secret);

    if (p && s && memmem(p, malloc_usable_size(p), s, strlen(s)))
        atomic_store(&found, 1);
}

void __wrap_free(void *p)
{
    scan(p);
    __real_free(p);
}

void *__wrap_realloc(void *p, size_t n)
{
    void *q;

    if (!p)
        return malloc(n);
    if (n == 0) {
        __wrap_free(p);
        return NULL;
    }
    if (!(q = malloc(n)))
        return NULL;
    memcpy(q, p, malloc_usable_size(p) < n ? malloc_usable_size(p) : n);
    __wrap_free(p);
    return q;
}

START_TEST(test_password_not_left_in_freed_memory)
{
    const char *pass = rig_get("ACL_PASS");
    char name[64];
    redlock_client *c = NULL;
    redlock_lock *l = NULL;
    const char *uri;
    int i;

    ck_assert_msg(strlen(pass) >= 6, "the rig's ACL password is too short to look for");
    uri = rig_acl_uri(rig_get("ACL_USER"), pass);
    rig_unique_name(name, sizeof(name), "secrets", "auth");
    atomic_store(&secret, pass);
    /* Several clients: each opens connections (AUTH, then the script
     * preloads that grow the output buffer) and closes them. */
    for (i = 0; i < 5; i++) {
        ck_assert_int_eq(redlock_client_new(&c, &uri, 1, NULL), REDLOCK_OK);
        ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
        ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
        ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
        redlock_lock_free(l);
        redlock_client_free(c);
    }
    atomic_store(&secret, NULL);
    ck_assert_msg(!atomic_load(&found), "a freed block held the password");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("secrets");
    SRunner *sr;
    int failed;

    RIG_ADD_CASE(s, test_password_not_left_in_freed_memory, 60);
    sr = srunner_create(s);
    /* In this process: the scanners' verdict is a global. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
