/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A refused attempt hears its stragglers out for a little while: members
 * that answer "busy" hold nothing and get no abort (no cancel mark, no
 * script), while a frozen member neither holds the refusal up nor keeps
 * what it may grant once thawed. Real redis-server processes of the
 * fixture, real SIGSTOP/SIGCONT.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/redlock.h"
#include "rig_env.h"

#define N_NODES 5
#define HOLDER 1
#define CONTENDER 2
#define TRIES 20

static redlock_client *client_over_all(void)
{
    redlock_client *c = NULL;

    ck_assert_msg(redlock_client_new(&c, rig_plain_uris(), N_NODES, NULL) == REDLOCK_OK, "%s",
                  redlock_last_error());
    return c;
}

/* Cancel marks of name on node i (each is an abort that reached it). */
static long marks_on(size_t i, const char *name)
{
    char args[160];

    snprintf(args, sizeof(args), "EVAL \"return #redis.call('keys', ARGV[1])\" 0 "
             "'redlock_latch:{%s}:*'", name);
    return atol(rig_cli(i, args));
}

static long marks_everywhere(const char *name)
{
    long sum = 0;
    size_t i;

    for (i = 0; i < N_NODES; i++)
        sum += marks_on(i, name);
    return sum;
}

/* 1. Refusals by every member leave no marks: nobody was aborted. */
START_TEST(test_refusal_aborts_nobody)
{
    redlock_client *c = client_over_all();
    redlock_lock *l;
    char name[64];
    long marks;
    int i;

    rig_unique_name(name, sizeof(name), "refuse", "quiet");
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, HOLDER, 0, 30000), REDLOCK_OK);
    for (i = 0; i < TRIES; i++)
        ck_assert_int_eq(redlock_acquire_as(l, CONTENDER, 0, 30000), REDLOCK_EBUSY);
    ck_assert_int_eq(redlock_client_flush(c, 2000), REDLOCK_OK);
    /* Each refusal used to abort the two members that answered after the
     * third "busy": about 2 x TRIES marks. A member slower than the
     * linger may still get one. */
    marks = marks_everywhere(name);
    fprintf(stderr, "%d refusals left %ld cancel marks\n", TRIES, marks);
    ck_assert_msg(marks <= TRIES / 4, "%ld cancel marks after %d refusals", marks, TRIES);
    ck_assert_int_eq(redlock_unlock_as(l, HOLDER), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* 2. A frozen member: the refusal still returns at once, and the member's
 *    late answer is undone once it thaws. */
START_TEST(test_refusal_with_frozen_member)
{
    redlock_client *c = client_over_all();
    redlock_lock *l;
    char name[64], field[96], args[256];
    int64_t t0, took;

    rig_unique_name(name, sizeof(name), "refuse", "frozen");
    rig_field_of(c, CONTENDER, field, sizeof(field));
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, HOLDER, 0, 30000), REDLOCK_OK);
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_acquire_as(l, CONTENDER, 0, 30000), REDLOCK_EBUSY);
    took = rig_now_ms() - t0;
    fprintf(stderr, "refused in %lld ms with a member frozen\n", (long long)took);
    /* No hang: the linger ends, and the frozen member's abort waits one
     * node timeout (50 ms here) before the background takes it over. */
    ck_assert_msg(took < 1000, "refusal took %lld ms", (long long)took);
    /* The holder leaves while node 4 is frozen: when it thaws it runs the
     * contender's acquire on a free lock, and then its abort. */
    ck_assert_int_eq(redlock_unlock_as(l, HOLDER), REDLOCK_OK);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    ck_assert_int_eq(redlock_client_flush(c, 5000), REDLOCK_OK);
    snprintf(args, sizeof(args), "HEXISTS '%s' '%s'", name, field);
    ck_assert_str_eq(rig_cli(4, args), "0");
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("refusal");
    SRunner *sr;
    int failed;

    RIG_ADD_CASE(s, test_refusal_aborts_nobody, 30);
    RIG_ADD_CASE(s, test_refusal_with_frozen_member, 60);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
