/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lock core's decisions (src/lock/decide.c), row by row: no server, no
 * thread, no clock. Each row names the rule it checks.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "lock/decide.h"
#include "redlock/redlock.h"

#define MS 1000000LL

/* ------------------------------------------------------------------------ */
/* One acquire attempt. */

typedef struct attempt_row {
    const char *rule;
    int n, quorum, granted, busy, failed, permanent, permanent_err;
    int64_t validity_ms;
    redlock__fence fence;
    int want;
} attempt_row;

static const attempt_row attempt_rows[] = {
    /* Success needs a quorum of grants and validity left. */
    {"N=1: the one member grants", 1, 1, 1, 0, 0, 0, 0, 900, REDLOCK__FENCE_NONE, REDLOCK_OK},
    {"N=3: two of three grant", 3, 2, 2, 1, 0, 0, 0, 900, REDLOCK__FENCE_NONE, REDLOCK_OK},
    {"N=5: three grant, two time out", 5, 3, 3, 0, 2, 0, 0, 900, REDLOCK__FENCE_NONE, REDLOCK_OK},
    {"N=7: four grant, three busy", 7, 4, 4, 3, 0, 0, 0, 900, REDLOCK__FENCE_NONE, REDLOCK_OK},
    {"MultiLock: every member grants", 4, 4, 4, 0, 0, 0, 0, 900, REDLOCK__FENCE_NONE, REDLOCK_OK},
    {"fenced: a quorum stored the token", 5, 3, 5, 0, 0, 0, 0, 900, REDLOCK__FENCE_CONFIRMED,
     REDLOCK_OK},
    /* A quorum that came too late is not a lock. */
    {"N=5: quorum granted, validity 0", 5, 3, 5, 0, 0, 0, 0, 0, REDLOCK__FENCE_NONE,
     REDLOCK_ETIMEOUT},
    {"N=1: granted, validity below 0", 1, 1, 1, 0, 0, 0, 0, -5, REDLOCK__FENCE_NONE,
     REDLOCK_ETIMEOUT},
    /* A short fencing write-back is a missing quorum, not a busy lock. */
    {"fenced: write-back short of a quorum", 5, 3, 5, 0, 0, 0, 0, 900, REDLOCK__FENCE_SHORT,
     REDLOCK_ENO_QUORUM},
    /* Refusals. */
    {"N=1: held by another owner", 1, 1, 0, 1, 0, 0, 0, 0, REDLOCK__FENCE_NONE, REDLOCK_EBUSY},
    {"N=5: grants and refusals reach Q: a split vote is busy", 5, 3, 2, 1, 2, 0, 0, 0,
     REDLOCK__FENCE_NONE, REDLOCK_EBUSY},
    {"N=5: refusals only, nobody failed", 5, 3, 0, 2, 0, 0, 0, 0, REDLOCK__FENCE_NONE,
     REDLOCK_EBUSY},
    {"N=5: more busy than N-Q: busy even with failures", 5, 3, 0, 3, 2, 0, 0, 0,
     REDLOCK__FENCE_NONE, REDLOCK_EBUSY},
    {"MultiLock: one member busy", 3, 3, 2, 1, 0, 0, 0, 0, REDLOCK__FENCE_NONE, REDLOCK_EBUSY},
    {"N=5: held, one node down, decided early", 5, 3, 0, 2, 1, 0, 0, 0, REDLOCK__FENCE_NONE,
     REDLOCK_EBUSY},
    {"N=5: held, N-Q nodes down", 5, 3, 0, 1, 2, 0, 0, 0, REDLOCK__FENCE_NONE, REDLOCK_EBUSY},
    /* Nodes failing. */
    {"N=1: timeout", 1, 1, 0, 0, 1, 0, 0, 0, REDLOCK__FENCE_NONE, REDLOCK_ENO_QUORUM},
    {"N=3: two timeouts", 3, 2, 1, 0, 2, 0, 0, 0, REDLOCK__FENCE_NONE, REDLOCK_ENO_QUORUM},
    {"N=5: three failed, one busy", 5, 3, 1, 1, 3, 0, 0, 0, REDLOCK__FENCE_NONE,
     REDLOCK_ENO_QUORUM},
    {"N=7: late answers count as failed", 7, 4, 3, 0, 4, 0, 0, 0, REDLOCK__FENCE_NONE,
     REDLOCK_ENO_QUORUM},
    /* Refusals waiting cannot fix. */
    {"N=1: wrong password", 1, 1, 0, 0, 1, 1, REDLOCK_EAUTH, 0, REDLOCK__FENCE_NONE,
     REDLOCK_EAUTH},
    {"N=5: three fail TLS verification", 5, 3, 2, 0, 3, 3, REDLOCK_ETLS, 0,
     REDLOCK__FENCE_NONE, REDLOCK_ETLS},
    {"N=5: WRONGTYPE on three beats busy", 5, 3, 0, 2, 3, 3, REDLOCK_ECONFIG, 0,
     REDLOCK__FENCE_NONE, REDLOCK_ECONFIG},
    {"N=5: one refusal for good leaves a quorum possible", 5, 3, 2, 0, 3, 1, REDLOCK_EAUTH, 0,
     REDLOCK__FENCE_NONE, REDLOCK_ENO_QUORUM},
    {"N=5: a quorum granted despite a refusal", 5, 3, 4, 0, 1, 1, REDLOCK_EAUTH, 900,
     REDLOCK__FENCE_NONE, REDLOCK_OK},
};

START_TEST(attempt_outcomes)
{
    const attempt_row *r = &attempt_rows[_i];
    redlock__tally t = {r->n, r->quorum, r->granted, r->busy, r->failed, r->permanent,
                        r->permanent_err};
    int got = redlock__attempt_outcome(&t, r->validity_ms, r->fence);

    ck_assert_msg(got == r->want, "%s: got %s, want %s", r->rule, redlock_err_name(got),
                  redlock_err_name(r->want));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The wait loop: retry, and what the caller hears when the wait ends. */

typedef struct wait_row {
    const char *rule;
    int rc;
    int64_t wait_ms;
    int retryable, want;
} wait_row;

static const wait_row wait_rows[] = {
    {"try_lock: busy stays busy", REDLOCK_EBUSY, 0, 1, REDLOCK_EBUSY},
    {"try_lock: a late grant reads as busy", REDLOCK_ETIMEOUT, 0, 1, REDLOCK_EBUSY},
    {"try_lock: no quorum stays no quorum", REDLOCK_ENO_QUORUM, 0, 1, REDLOCK_ENO_QUORUM},
    {"wait ran out while held: timed out", REDLOCK_EBUSY, 500, 1, REDLOCK_ETIMEOUT},
    {"wait ran out after a late grant: timed out", REDLOCK_ETIMEOUT, 500, 1, REDLOCK_ETIMEOUT},
    {"wait ran out while nodes failed: no quorum", REDLOCK_ENO_QUORUM, 500, 1,
     REDLOCK_ENO_QUORUM},
    {"auth refused for good: not retried", REDLOCK_EAUTH, -1, 0, REDLOCK_ETIMEOUT},
    {"config refused for good: not retried", REDLOCK_ECONFIG, -1, 0, REDLOCK_ETIMEOUT},
    {"TLS refused for good: not retried", REDLOCK_ETLS, -1, 0, REDLOCK_ETIMEOUT},
};

START_TEST(wait_outcomes)
{
    const wait_row *r = &wait_rows[_i];

    ck_assert_msg(redlock__attempt_retryable(r->rc) == r->retryable, "%s: retryable", r->rule);
    if (r->retryable)
        ck_assert_msg(redlock__wait_outcome(r->rc, r->wait_ms) == r->want, "%s: got %s",
                      r->rule, redlock_err_name(redlock__wait_outcome(r->rc, r->wait_ms)));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Unlock. */

typedef struct unlock_row {
    const char *rule;
    int quorum, ours, expired, released, decremented, not_held, want;
} unlock_row;

static const unlock_row unlock_rows[] = {
    {"a recorded hold: any member confirms", 3, 1, 0, 1, 0, 4, REDLOCK_OK},
    {"a re-entered hold: decremented everywhere", 3, 1, 0, 0, 5, 0, REDLOCK_OK},
    {"validity ended first: lost, even if released", 3, 1, 1, 5, 0, 0, REDLOCK_ELOST},
    {"a recorded hold found nowhere: lost", 3, 1, 0, 0, 0, 5, REDLOCK_ELOST},
    {"a quorum lacks a recorded hold: lost", 3, 1, 0, 0, 0, 3, REDLOCK_ELOST},
    {"only members that never granted answer: no quorum, not lost", 3, 1, 0, 0, 0, 2,
     REDLOCK_ENO_QUORUM},
    {"nobody answered: no quorum", 3, 1, 0, 0, 0, 0, REDLOCK_ENO_QUORUM},
    {"no record: a quorum of our fields releases", 3, 0, 0, 3, 0, 2, REDLOCK_OK},
    {"no record: fragments are not ownership", 3, 0, 0, 2, 0, 3, REDLOCK_ENOT_OWNER},
    {"no record: not ours anywhere", 3, 0, 0, 0, 0, 5, REDLOCK_ENOT_OWNER},
    {"no record, nobody answered: no quorum", 3, 0, 0, 0, 0, 0, REDLOCK_ENO_QUORUM},
};

START_TEST(unlock_outcomes)
{
    const unlock_row *r = &unlock_rows[_i];
    redlock__unlock_tally t = {r->quorum, r->ours, r->expired, r->released, r->decremented,
                               r->not_held};
    int got = redlock__unlock_outcome(&t);

    ck_assert_msg(got == r->want, "%s: got %s, want %s", r->rule, redlock_err_name(got),
                  redlock_err_name(r->want));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The watchdog's verdict. Lease 3000 ms, drift 32 ms, tick at t = 0. */

typedef struct renewal_row {
    const char *rule;
    int n, quorum, genuine, other, vanished;
    int64_t now_ms, validity_end_ms, retry_ms, held_ms, max_hold_ms;
    redlock__verdict want;
    int reason;
} renewal_row;

static const renewal_row renewal_rows[] = {
    {"a quorum genuinely renewed in time", 5, 3, 3, 0, 2, 40, 2000, 300, 1000, 0,
     REDLOCK__VERDICT_RENEWED, 0},
    {"renewed, but the tick outlasted the lease", 5, 3, 5, 0, 0, 2968, 3000, 300, 1000, 0,
     REDLOCK__VERDICT_LOST, REDLOCK_ENO_QUORUM},
    {"genuine renewals below Q, still valid: retry", 5, 3, 2, 0, 0, 40, 2000, 300, 1000, 0,
     REDLOCK__VERDICT_RETRY, 0},
    {"genuine below Q, the retry would miss validity", 5, 3, 2, 0, 0, 40, 300, 300, 1000, 0,
     REDLOCK__VERDICT_LOST, REDLOCK_ENO_QUORUM},
    {"vanished and taken on more than N-Q", 5, 3, 2, 1, 2, 40, 2000, 300, 1000, 0,
     REDLOCK__VERDICT_LOST, REDLOCK_ENOT_OWNER},
    {"vanished on N-Q exactly: retry", 5, 3, 2, 0, 2, 40, 2000, 300, 1000, 0,
     REDLOCK__VERDICT_RETRY, 0},
    {"N=1: the key vanished", 1, 1, 0, 0, 1, 40, 2000, 300, 1000, 0, REDLOCK__VERDICT_LOST,
     REDLOCK_ENOT_OWNER},
    {"MultiLock: one member taken", 3, 3, 2, 1, 0, 40, 2000, 300, 1000, 0,
     REDLOCK__VERDICT_LOST, REDLOCK_ENOT_OWNER},
    {"the hold cap reached beats a good renewal", 5, 3, 5, 0, 0, 40, 2000, 300, 6000, 6000,
     REDLOCK__VERDICT_LOST, REDLOCK_ETIMEOUT},
    {"below the hold cap: renewed", 5, 3, 5, 0, 0, 40, 2000, 300, 5999, 6000,
     REDLOCK__VERDICT_RENEWED, 0},
};

START_TEST(renewal_verdicts)
{
    const renewal_row *r = &renewal_rows[_i];
    redlock__renewal in = {r->n, r->quorum, r->genuine, r->other, r->vanished, 0,
                           r->now_ms * MS, 3000, redlock__drift_ms(3000, 0.01),
                           r->validity_end_ms * MS, r->retry_ms * MS, r->held_ms * MS,
                           r->max_hold_ms * MS};
    int reason = -1;
    redlock__verdict got = redlock__renewal_verdict(&in, &reason);

    ck_assert_msg(got == r->want && reason == r->reason, "%s: got verdict %d (%s)", r->rule,
                  (int)got, reason ? redlock_err_name(reason) : "-");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Early stop, drift and the lease floor. */

START_TEST(fanout_settles_when_certain)
{
    /* A quorum confirmed: stop. */
    ck_assert(redlock__fanout_settled(3, 2, 3));
    /* Not yet, and still reachable: go on. */
    ck_assert(!redlock__fanout_settled(2, 1, 3));
    /* Out of reach: stop. */
    ck_assert(redlock__fanout_settled(1, 1, 3));
    ck_assert(redlock__fanout_settled(0, 0, 1));
}
END_TEST

START_TEST(drift_and_lease_floor)
{
    ck_assert_int_eq(redlock__drift_ms(30000, 0.01), 302);
    ck_assert_int_eq(redlock__drift_ms(1000, 0.49), 492);
    /* lease 1000, drift 12: two 50 ms node timeouts fit, two 494 do not. */
    ck_assert(!redlock__lease_too_short(1000, 0.01, 50));
    ck_assert(!redlock__lease_too_short(1000, 0.01, 493));
    ck_assert(redlock__lease_too_short(1000, 0.01, 494));
    /* The issue's `--lease 1`: never valid. */
    ck_assert(redlock__lease_too_short(1, 0.01, 10));
    ck_assert(redlock__lease_too_short(22, 0.01, 10));
    ck_assert(!redlock__lease_too_short(23, 0.01, 10));
}
END_TEST

#define ROWS(a) (int)(sizeof(a) / sizeof(a[0]))

int main(void)
{
    Suite *s = suite_create("decide");
    TCase *tc = tcase_create("decide");
    SRunner *sr;
    int failed;

    tcase_add_loop_test(tc, attempt_outcomes, 0, ROWS(attempt_rows));
    tcase_add_loop_test(tc, wait_outcomes, 0, ROWS(wait_rows));
    tcase_add_loop_test(tc, unlock_outcomes, 0, ROWS(unlock_rows));
    tcase_add_loop_test(tc, renewal_verdicts, 0, ROWS(renewal_rows));
    tcase_add_test(tc, fanout_settles_when_certain);
    tcase_add_test(tc, drift_and_lease_floor);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
