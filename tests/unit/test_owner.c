/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The default owner id is the calling thread's kernel id, cached per
 * thread: another thread, and a forked child, must each get their own.
 */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redlock/redlock.h"

static uint64_t kernel_tid(void)
{
    return (uint64_t)syscall(SYS_gettid);
}

START_TEST(owner_is_the_thread_id)
{
    ck_assert_uint_eq(redlock_thread_owner(), kernel_tid());
    ck_assert_uint_eq(redlock_thread_owner(), kernel_tid()); /* from the cache */
}
END_TEST

static void *owner_on_thread(void *out)
{
    *(uint64_t *)out = redlock_thread_owner() == kernel_tid() ? redlock_thread_owner() : 0;
    return NULL;
}

START_TEST(each_thread_has_its_own)
{
    uint64_t mine = redlock_thread_owner(), theirs = 0;
    pthread_t th;

    ck_assert_int_eq(pthread_create(&th, NULL, owner_on_thread, &theirs), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_uint_ne(theirs, 0);
    ck_assert_uint_ne(theirs, mine);
}
END_TEST

/* The child's one thread inherits the parent's cached id; it must not
 * lock as the parent's thread. Exits 0 when its owner is its own id. */
static int fork_and_check(void)
{
    int status = 0;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(redlock_thread_owner() == kernel_tid() ? 0 : 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(forked_child_has_its_own)
{
    uint64_t before = redlock_thread_owner();

    ck_assert_msg(fork_and_check() == 0, "a forked child kept its parent's owner id");
    ck_assert_uint_eq(redlock_thread_owner(), before);
}
END_TEST

static void *fork_on_thread(void *out)
{
    (void)redlock_thread_owner();
    *(int *)out = fork_and_check();
    return NULL;
}

START_TEST(child_forked_by_another_thread_has_its_own)
{
    int rc = -1;
    pthread_t th;

    ck_assert_int_eq(pthread_create(&th, NULL, fork_on_thread, &rc), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(rc == 0, "a child forked by a thread kept that thread's owner id");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("owner");
    TCase *tc = tcase_create("thread id");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, owner_is_the_thread_id);
    tcase_add_test(tc, each_thread_has_its_own);
    tcase_add_test(tc, forked_child_has_its_own);
    tcase_add_test(tc, child_forked_by_another_thread_has_its_own);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    /* No fork per test: the cache must be tested in a process that filled
     * it before forking, as a real program does. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
