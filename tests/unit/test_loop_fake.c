/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The loop-driven client over the scripted fake transport (virtual clock):
 * the same quorum outcomes as the blocking calls, done callbacks only from
 * redlock_loop_action(), and a grant whose handle is freed before its done
 * ran released again.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_transport.h"
#include "lock/internal.h"
#include "redlock/redlock.h"
#include "resp/scripts.h"

#define NAME "fake-loop"
#define OWNER 7u

typedef struct env {
    fake *f;
    redlock_client *c;
    redlock_lock *l;
    int64_t timer_ms;   /* last asked for; -2: never */
    int done, rc, lock_null;
} env;

static env E;

static void on_socket(void *ud, int fd, int events)
{
    (void)ud, (void)fd, (void)events;
}

static void on_timer(void *ud, int64_t ms)
{
    ((env *)ud)->timer_ms = ms;
}

static void on_done(void *ud, redlock_lock *l, int rc, const char *msg)
{
    env *e = ud;

    (void)msg;
    e->done++;
    e->rc = rc;
    e->lock_null = l == NULL;
}

static void open_env(void)
{
    redlock_options o;
    redlock__transport tp;

    memset(&E, 0, sizeof(E));
    memset(&o, 0, sizeof(o));
    E.timer_ms = -2;
    o.event_loop = 1;
    o.node_timeout_ms = 50;
    E.f = fake_new(5);
    fake_isolate_clock(E.f);
    tp = fake_transport(E.f);
    ck_assert_int_eq(redlock__client_new_with_transport(&E.c, 5, &o, &tp), REDLOCK_OK);
    ck_assert_int_eq(redlock_loop_attach(E.c, on_socket, on_timer, &E), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(E.c, NAME, NULL, &E.l), REDLOCK_OK);
}

static void close_env(void)
{
    redlock_lock_free(E.l);
    redlock_client_free(E.c);
    fake_free(E.f);
}

/* Two frozen members: granted by the other three; done runs from the
 * action the timer asked for, not from the start call. */
START_TEST(minority_frozen_grants)
{
    open_env();
    fake_set(E.f, 3, FAKE_SILENT, 0);
    fake_set(E.f, 4, FAKE_SILENT, 0);
    ck_assert_int_eq(redlock_acquire_async(E.l, OWNER, 0, 10000, on_done, &E), REDLOCK_OK);
    ck_assert_int_eq(E.done, 0);
    ck_assert_int_eq(E.timer_ms, 0);
    ck_assert_uint_eq(redlock_loop_pending(E.c), 1);
    ck_assert_int_eq(redlock_loop_action(E.c, REDLOCK_EV_TIMEOUT, 0), REDLOCK_OK);
    ck_assert_int_eq(E.done, 1);
    ck_assert_int_eq(E.rc, REDLOCK_OK);
    ck_assert_uint_eq(redlock_loop_pending(E.c), 0);
    ck_assert_int_eq(redlock_unlock_async(E.l, OWNER, on_done, &E), REDLOCK_OK);
    ck_assert_int_eq(redlock_loop_action(E.c, REDLOCK_EV_TIMEOUT, 0), REDLOCK_OK);
    ck_assert_int_eq(E.done, 2);
    ck_assert_int_eq(E.rc, REDLOCK_OK);
    close_env();
}
END_TEST

/* Three frozen members: no quorum, and every member that may have
 * granted gets an abort, as for the blocking call. */
START_TEST(majority_frozen_fails_and_aborts)
{
    size_t before;

    open_env();
    fake_set(E.f, 0, FAKE_SILENT, 0);
    fake_set(E.f, 1, FAKE_SILENT, 0);
    fake_set(E.f, 2, FAKE_SILENT, 0);
    before = fake_ncalls(E.f);
    ck_assert_int_eq(redlock_acquire_async(E.l, OWNER, 0, 10000, on_done, &E), REDLOCK_OK);
    ck_assert_int_eq(redlock_loop_action(E.c, REDLOCK_EV_TIMEOUT, 0), REDLOCK_OK);
    ck_assert_int_eq(E.done, 1);
    ck_assert_int_eq(E.rc, REDLOCK_ENO_QUORUM);
    ck_assert_uint_ge(fake_count(E.f, before, -1, REDLOCK__SCRIPT_ABORT), 3);
    close_env();
}
END_TEST

/* A grant whose handle is freed before its done ran: done hears
 * REDLOCK_ECANCELED with no handle, and the hold is released. */
START_TEST(freed_before_done_releases)
{
    size_t i, before;

    open_env();
    ck_assert_int_eq(redlock_acquire_async(E.l, OWNER, 0, 10000, on_done, &E), REDLOCK_OK);
    for (i = 0; i < 5; i++)
        ck_assert_uint_gt(fake_hash_len(E.f, i, NAME), 0);
    before = fake_ncalls(E.f);
    redlock_lock_free(E.l);
    E.l = NULL;
    ck_assert_int_eq(redlock_loop_action(E.c, REDLOCK_EV_TIMEOUT, 0), REDLOCK_OK);
    ck_assert_int_eq(E.done, 1);
    ck_assert_int_eq(E.rc, REDLOCK_ECANCELED);
    ck_assert(E.lock_null);
    ck_assert_uint_ge(fake_count(E.f, before, -1, REDLOCK__SCRIPT_RELEASE), 3);
    for (i = 0; i < 5; i++)
        ck_assert_uint_eq(fake_hash_len(E.f, i, NAME), 0);
    ck_assert_uint_eq(redlock_loop_pending(E.c), 0);
    close_env();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loop_fake");
    TCase *tc = tcase_create("loop_fake");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, minority_frozen_grants);
    tcase_add_test(tc, majority_frozen_fails_and_aborts);
    tcase_add_test(tc, freed_before_done_releases);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
