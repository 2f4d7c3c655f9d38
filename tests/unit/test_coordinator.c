/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the quorum decisions (src/lock/quorum.c, lock.c,
 * watchdog.c) over the scripted fake transport: no redis, a virtual clock,
 * and a model of what every node stores, so each case states exactly when
 * a decision was taken and what each member holds afterwards.
 *
 * Every case isolates the virtual clock for its own thread, so the
 * client's watchdog thread never ticks by itself; watchdog ticks and
 * background retries happen only where a case calls
 * redlock__watchdog_tick().
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "fake_transport.h"
#include "lock/hold.h"
#include "lock/internal.h"
#include "lock/watchdog.h"
#include "redlock/redlock.h"
#include "resp/scripts.h"

#define NAME "res"
#define TOKEN_KEY "redisson_lock_token:{" NAME "}"
#define CHANNEL "redisson_lock__channel:{" NAME "}"
#define FOREIGN "foreign-client:7"
#define OWNER 11u
#define MS REDLOCK__NS_PER_MS

/* ------------------------------------------------------------------------ */
/* Helpers. */

typedef struct env {
    fake *f;
    redlock_client *c;
    redlock_lock *l;
    char field[64];     /* the hash field of OWNER */
} env;

static void env_open(env *e, size_t n_nodes, const redlock_options *opts,
                     const redlock_lock_options *lopts)
{
    redlock__transport tp;
    int rc;

    memset(e, 0, sizeof(*e));
    e->f = fake_new(n_nodes);
    fake_isolate_clock(e->f);
    tp = fake_transport(e->f);
    rc = redlock__client_new_with_transport(&e->c, n_nodes, opts, &tp);
    ck_assert_msg(rc == REDLOCK_OK, "client: %s", redlock_last_error());
    rc = redlock_lock_new(e->c, NAME, lopts, &e->l);
    ck_assert_msg(rc == REDLOCK_OK, "lock_new: %s", redlock_last_error());
    snprintf(e->field, sizeof(e->field), "%s:%u", redlock_client_id(e->c), OWNER);
}

static void env_close(env *e)
{
    redlock_lock_free(e->l);
    redlock_client_free(e->c);
    fake_free(e->f);
}

static redlock_options opts_timeout(int node_timeout_ms)
{
    redlock_options o;

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = node_timeout_ms;
    return o;
}

/* The fan-out that carried the first call of script at or after call
 * index from. */
static fake_fanout fanout_of(fake *f, size_t from, int script)
{
    fake_call call;
    fake_fanout fo;
    long i = fake_find(f, from, -1, script);

    ck_assert_msg(i >= 0, "no call of script %d after %zu", script, from);
    ck_assert(fake_get_call(f, (size_t)i, &call));
    ck_assert(fake_get_fanout(f, call.fanout, &fo));
    return fo;
}

static fake_call call_at(fake *f, long i)
{
    fake_call call;

    ck_assert_msg(i >= 0, "call not found");
    ck_assert(fake_get_call(f, (size_t)i, &call));
    return call;
}

/* Members (out of n) on which OWNER has a hold. */
static size_t holders(env *e, size_t n)
{
    size_t i, k = 0;

    for (i = 0; i < n; i++)
        k += fake_hash_count(e->f, i, NAME, e->field) > 0;
    return k;
}

/* Nothing of OWNER left on any of five members: no hold, no generation
 * field (the lock key is gone). */
static void assert_released_everywhere(env *e)
{
    size_t i;

    ck_assert_uint_eq(holders(e, 5), 0);
    for (i = 0; i < 5; i++)
        ck_assert_uint_eq(fake_hash_len(e->f, i, NAME), 0);
}

static int64_t remaining_ms(env *e)
{
    int64_t ttl = -100;

    ck_assert_int_eq(redlock_remaining_ttl_as(e->l, OWNER, &ttl), REDLOCK_OK);
    return ttl;
}

static redlock_stats stats(env *e)
{
    redlock_stats s;

    ck_assert_int_eq(redlock_client_stats(e->c, &s), REDLOCK_OK);
    return s;
}

/* A small deterministic generator, so a failing run can be replayed. */
static uint64_t lcg_state;

static uint32_t lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(lcg_state >> 33);
}

typedef struct lost_log {
    int calls;
    uint64_t owner;
    int reason;
    redlock_lock *lock;
} lost_log;

static void on_lost(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    lost_log *log = ud;

    log->calls++;
    log->owner = owner;
    log->reason = reason;
    log->lock = l;
}

/* ------------------------------------------------------------------------ */
/* Quorum math. */

START_TEST(quorum_defaults_and_bounds)
{
    size_t n;

    for (n = 1; n <= 7; n++) {
        env e;
        redlock_lock_options lo;
        redlock_lock *l = NULL;
        int q;

        env_open(&e, n, NULL, NULL);
        ck_assert_int_eq(redlock_lock_quorum(e.l), (int)(n / 2 + 1));
        ck_assert_uint_eq(redlock_lock_member_count(e.l), n);
        memset(&lo, 0, sizeof(lo));
        lo.quorum = REDLOCK_QUORUM_ALL;
        ck_assert_int_eq(redlock_lock_new(e.c, NAME, &lo, &l), REDLOCK_OK);
        ck_assert_int_eq(redlock_lock_quorum(l), (int)n);
        redlock_lock_free(l);
        for (q = 1; q <= (int)n; q++) {
            lo.quorum = q;
            ck_assert_int_eq(redlock_lock_new(e.c, NAME, &lo, &l), REDLOCK_OK);
            ck_assert_int_eq(redlock_lock_quorum(l), q);
            redlock_lock_free(l);
        }
        /* Out of range: a clear error, except that with one member every
         * value means 1 (the single-node lock). */
        for (q = -3; q <= (int)n + 2; q += 1) {
            int rc;

            if (q >= 0 && q <= (int)n)
                continue;
            if (q == REDLOCK_QUORUM_ALL)
                continue;
            lo.quorum = q;
            l = (redlock_lock *)&e; /* must be reset to NULL on failure */
            rc = redlock_lock_new(e.c, NAME, &lo, &l);
            if (n == 1) {
                ck_assert_int_eq(rc, REDLOCK_OK);
                ck_assert_int_eq(redlock_lock_quorum(l), 1);
                redlock_lock_free(l);
            } else {
                ck_assert_int_eq(rc, REDLOCK_EINVAL);
                ck_assert_ptr_null(l);
                ck_assert_ptr_nonnull(strstr(redlock_last_error(), "quorum"));
            }
        }
        env_close(&e);
    }
}
END_TEST

START_TEST(invalid_members_are_refused)
{
    env e;
    redlock_member m[2] = {{0, "a"}, {3, "b"}};
    redlock_lock *l = NULL;
    char *big;

    env_open(&e, 3, NULL, NULL);
    ck_assert_int_eq(redlock_multilock_new(e.c, m, 2, NULL, &l), REDLOCK_EINVAL);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(redlock_multilock_new(e.c, m, 0, NULL, &l), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_multilock_new(e.c, NULL, 1, NULL, &l), REDLOCK_EINVAL);
    m[1].name = "";
    m[1].node = 1;
    ck_assert_int_eq(redlock_multilock_new(e.c, m, 2, NULL, &l), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_lock_new(e.c, "", NULL, &l), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_lock_new(e.c, NULL, NULL, &l), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_lock_new(NULL, NAME, NULL, &l), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_lock_new(e.c, NAME, NULL, NULL), REDLOCK_EINVAL);
    big = malloc(REDLOCK__MAX_NAME + 2);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', REDLOCK__MAX_NAME + 1);
    big[REDLOCK__MAX_NAME + 1] = '\0';
    ck_assert_int_eq(redlock_lock_new(e.c, big, NULL, &l), REDLOCK_EINVAL);
    big[REDLOCK__MAX_NAME] = '\0';
    ck_assert_int_eq(redlock_lock_new(e.c, big, NULL, &l), REDLOCK_OK);
    redlock_lock_free(l);
    free(big);
    /* Owner 0 is reserved; a NULL lock is refused. */
    ck_assert_int_eq(redlock_acquire_as(e.l, 0, 0, 1000), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_acquire_as(NULL, OWNER, 0, 1000), REDLOCK_EINVAL);
    ck_assert_uint_eq(fake_ncalls(e.f), 0);
    env_close(&e);
}
END_TEST

/* For N = 1..7, with k members free and the rest held by another client,
 * the lock is granted iff k >= Q, for RedLock and for MultiLock; a failed
 * attempt leaves nothing of ours behind and never touches the other
 * holder's keys. */
START_TEST(grant_iff_quorum_free)
{
    size_t n;
    int all;

    for (all = 0; all <= 1; all++) {
        for (n = 1; n <= 7; n++) {
            redlock_lock_options lo = {.quorum = all ? REDLOCK_QUORUM_ALL : 0};
            int q = all ? (int)n : (int)n / 2 + 1;
            size_t k, i;
            env e;

            env_open(&e, n, NULL, &lo);
            for (k = 0; k <= n; k++) {
                int rc;

                for (i = 0; i < n; i++) {
                    fake_flush(e.f, i);
                    if (i >= k)
                        fake_hold(e.f, i, NAME, FOREIGN, 1, 30000);
                }
                rc = redlock_acquire_as(e.l, OWNER, 0, 10000);
                if ((int)k >= q) {
                    ck_assert_msg(rc == REDLOCK_OK, "n=%zu q=%d k=%zu: %s", n, q, k,
                                  redlock_err_name(rc));
                    ck_assert_uint_eq(holders(&e, n), k);
                    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
                } else {
                    ck_assert_msg(rc == REDLOCK_EBUSY, "n=%zu q=%d k=%zu: %s", n, q, k,
                                  redlock_err_name(rc));
                }
                ck_assert_uint_eq(holders(&e, n), 0);
                for (i = k; i < n; i++) {
                    ck_assert_uint_eq(fake_hash_len(e.f, i, NAME), 1);
                    ck_assert_int_eq(fake_hash_count(e.f, i, NAME, FOREIGN), 1);
                }
            }
            env_close(&e);
        }
    }
}
END_TEST

/* MultiLock over three names, two of them on one node: the calls to one
 * node travel in one pipelined batch; one name held elsewhere fails the
 * whole lock and leaves nothing behind. */
START_TEST(multilock_different_names)
{
    redlock_member m[3] = {{0, "ma"}, {1, "mb"}, {1, "mc"}};
    redlock_lock_options lo = {.quorum = REDLOCK_QUORUM_ALL};
    env e;
    size_t before;
    fake_fanout fo;

    env_open(&e, 2, NULL, NULL);
    redlock_lock_free(e.l);
    ck_assert_int_eq(redlock_multilock_new(e.c, m, 3, &lo, &e.l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_quorum(e.l), 3);
    fake_hold(e.f, 1, "mc", FOREIGN, 1, 30000);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_EBUSY);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_ACQUIRE);
    ck_assert_uint_eq(fo.ncalls, 3);
    ck_assert_int_eq(fake_hash_count(e.f, 0, "ma", e.field), 0);
    ck_assert_int_eq(fake_hash_count(e.f, 1, "mb", e.field), 0);
    ck_assert_int_eq(fake_pttl(e.f, 0, "ma"), -2);
    ck_assert_int_eq(fake_pttl(e.f, 1, "mb"), -2);
    ck_assert_int_eq(fake_hash_count(e.f, 1, "mc", FOREIGN), 1);

    fake_flush(e.f, 1);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_int_eq(fake_hash_count(e.f, 0, "ma", e.field), 1);
    ck_assert_int_eq(fake_hash_count(e.f, 1, "mb", e.field), 1);
    ck_assert_int_eq(fake_hash_count(e.f, 1, "mc", e.field), 1);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_int_eq(fake_pttl(e.f, 1, "mc"), -2);
    /* mb: once when the failed attempt undid its grant, once now. */
    ck_assert_uint_eq(fake_published(e.f, 1, "redisson_lock__channel:{mb}"), 2);
    ck_assert_uint_eq(fake_published(e.f, 1, "redisson_lock__channel:{mc}"), 1);
    env_close(&e);
}
END_TEST

/* N = 1 is the plain reentrant single-node lock. */
START_TEST(single_node_semantics)
{
    env e;
    int count = 0, held = 0;

    env_open(&e, 1, NULL, NULL);
    ck_assert_int_eq(redlock_lock_quorum(e.l), 1);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER + 1, 0, 10000), REDLOCK_EBUSY);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_int_eq(fake_hash_count(e.f, 0, NAME, e.field), 2);
    ck_assert_int_eq(redlock_hold_count_as(e.l, OWNER, &count), REDLOCK_OK);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq(redlock_is_held_as(e.l, OWNER, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER + 1), REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_int_eq(fake_hash_count(e.f, 0, NAME, e.field), 1);
    ck_assert_uint_eq(fake_published(e.f, 0, CHANNEL), 0);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_int_eq(fake_pttl(e.f, 0, NAME), -2);
    ck_assert_uint_eq(fake_published(e.f, 0, CHANNEL), 1);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_ENOT_OWNER);
    env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Deciding early. */

/* A slow or frozen minority does not delay a success: the attempt ends
 * when the third grant arrives (1 ms), not at the node timeout. */
START_TEST(early_success_slow_minority)
{
    int frozen;

    for (frozen = 0; frozen <= 1; frozen++) {
        redlock_options o = opts_timeout(50);
        redlock_member_report rep;
        fake_fanout fo;
        size_t before;
        env e;

        env_open(&e, 5, &o, NULL);
        fake_set(e.f, 3, frozen ? FAKE_SILENT : FAKE_REPLY, 40);
        fake_set(e.f, 4, frozen ? FAKE_SILENT : FAKE_REPLY, 45);
        before = fake_ncalls(e.f);
        ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
        fo = fanout_of(e.f, before, REDLOCK__SCRIPT_ACQUIRE);
        ck_assert_int_eq(fo.end_ns - fo.start_ns, 1 * MS);
        ck_assert(fo.stopped);
        ck_assert_int_eq(call_at(e.f, fake_find(e.f, before, 3, REDLOCK__SCRIPT_ACQUIRE)).outcome,
                         FAKE_ABANDONED);
        /* validity = lease - elapsed - drift = 10000 - 1 - (100 + 2). */
        ck_assert_int_eq(remaining_ms(&e), 10000 - 1 - 102);
        ck_assert_int_eq(redlock_lock_report(e.l, 0, &rep), REDLOCK_OK);
        ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_GRANTED);
        ck_assert_int_eq(redlock_lock_report(e.l, 3, &rep), REDLOCK_OK);
        ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_NONE);
        /* No release or abort went out on success. */
        ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_ABORT), 0);
        ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_RELEASE), 0);
        env_close(&e);
    }
}
END_TEST

/* Failure is decided the moment a quorum can no longer be reached (three
 * refusals of five), and the slow members that were abandoned, which may
 * still have granted, are undone too. */
START_TEST(early_failure_when_quorum_unreachable)
{
    redlock_options o = opts_timeout(50);
    redlock_member_report rep;
    fake_fanout fo;
    size_t before, i;
    env e;

    env_open(&e, 5, &o, NULL);
    for (i = 0; i < 3; i++)
        fake_hold(e.f, i, NAME, FOREIGN, 1, 30000);
    fake_set(e.f, 3, FAKE_REPLY, 40);
    fake_set(e.f, 4, FAKE_REPLY, 45);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_EBUSY);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_ACQUIRE);
    ck_assert_int_eq(fo.end_ns - fo.start_ns, 1 * MS);
    ck_assert(fo.stopped);
    ck_assert_int_eq(redlock_lock_report(e.l, 0, &rep), REDLOCK_OK);
    /* The report belongs to the last call (the abort), so look at the
     * stores instead: the abandoned grants on 3 and 4 were undone. */
    ck_assert_uint_eq(fake_count(e.f, before, 3, REDLOCK__SCRIPT_ABORT), 1);
    ck_assert_uint_eq(fake_count(e.f, before, 4, REDLOCK__SCRIPT_ABORT), 1);
    ck_assert_uint_eq(fake_count(e.f, before, 0, REDLOCK__SCRIPT_ABORT), 0);
    ck_assert_uint_eq(holders(&e, 5), 0);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(fake_hash_count(e.f, i, NAME, FOREIGN), 1);
    ck_assert_uint_eq(stats(&e).busy, 1);
    env_close(&e);
}
END_TEST

/* Three frozen of five: no answer can decide before the node timeout, so
 * the attempt ends exactly at it (no hang), returns ENO_QUORUM and sends
 * the abort to every member, including the frozen ones. It waits for the
 * two that answered, not for the frozen ones a second time; their aborts
 * are retried in the background until they answer. */
START_TEST(failure_releases_every_member_including_timed_out)
{
    redlock_options o = opts_timeout(20);
    fake_fanout fo;
    size_t before, i, after;
    env e;

    env_open(&e, 5, &o, NULL);
    for (i = 2; i < 5; i++)
        fake_set(e.f, i, FAKE_SILENT, 0);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_ENO_QUORUM);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "quorum is 3"));
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_ACQUIRE);
    ck_assert_int_eq(fo.end_ns - fo.start_ns, 20 * MS);
    for (i = 0; i < 5; i++)
        ck_assert_uint_eq(fake_count(e.f, before, (int)i, REDLOCK__SCRIPT_ABORT), 1);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_ABORT);
    ck_assert_int_lt(fo.end_ns - fo.start_ns, 20 * MS);
    ck_assert_uint_eq(holders(&e, 5), 0);
    ck_assert_uint_eq(stats(&e).no_quorum, 1);

    /* Still frozen: the background probes them with a PING, and resends
     * nothing (the aborts already wait in their sockets). */
    after = fake_ncalls(e.f);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    for (i = 2; i < 5; i++) {
        ck_assert_uint_eq(fake_count(e.f, after, (int)i, REDLOCK__SCRIPT_ABORT), 0);
        ck_assert_uint_eq(fake_count(e.f, after, (int)i, -1), 1);
    }
    ck_assert_uint_eq(fake_count(e.f, after, 0, FAKE_ANY), 0);

    /* Thawed: a probe is answered, then the abort lands and settles; later
     * ticks send nothing. */
    for (i = 2; i < 5; i++)
        fake_set(e.f, i, FAKE_REPLY, 1);
    after = fake_ncalls(e.f);
    fake_advance_ms(e.f, 1500);
    redlock__watchdog_tick(e.c);
    redlock__watchdog_tick(e.c);
    for (i = 2; i < 5; i++) {
        long k = fake_find(e.f, after, (int)i, REDLOCK__SCRIPT_ABORT);

        ck_assert_int_eq(call_at(e.f, k).outcome, FAKE_ANSWERED);
        /* The abort left its cancel mark: a late copy of the acquire
         * would change nothing. */
        ck_assert_int_gt(fake_pttl(e.f, i, call_at(e.f, k).argv[2]), 0);
    }
    after = fake_ncalls(e.f);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    ck_assert_uint_eq(fake_ncalls(e.f), after);
    env_close(&e);
}
END_TEST

/* A member applied the acquire but its reply was lost: the failed attempt
 * must undo it there too (the client cannot know it was granted). */
START_TEST(lost_reply_grant_is_undone)
{
    redlock_options o = opts_timeout(20);
    size_t before;
    env e;

    env_open(&e, 5, &o, NULL);
    fake_set_script(e.f, 2, REDLOCK__SCRIPT_ACQUIRE, FAKE_LOST_REPLY, 0);
    fake_hold(e.f, 3, NAME, FOREIGN, 1, 30000);
    fake_hold(e.f, 4, NAME, FOREIGN, 1, 30000);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_EBUSY);
    ck_assert(call_at(e.f, fake_find(e.f, before, 2, REDLOCK__SCRIPT_ACQUIRE)).applied);
    /* Its abort went out right behind the acquire and ran there, but the
     * caller did not wait for a member that had already timed out. */
    ck_assert(call_at(e.f, fake_find(e.f, before, 2, REDLOCK__SCRIPT_ABORT)).applied);
    ck_assert_int_eq(call_at(e.f, fake_find(e.f, before, 2, REDLOCK__SCRIPT_ABORT)).outcome,
                     FAKE_TIMED_OUT);
    ck_assert_uint_eq(holders(&e, 5), 0);
    ck_assert_int_eq(fake_pttl(e.f, 2, NAME), -2);
    ck_assert_uint_eq(fake_published(e.f, 2, CHANNEL), 1);
    env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Validity. */

static int try_with_delay(double drift_factor, int64_t lease_ms, int64_t delay_ms,
                          int64_t *remaining, size_t *left_behind)
{
    redlock_options o = opts_timeout(5000);
    size_t i;
    env e;
    int rc;

    o.drift_factor = drift_factor;
    env_open(&e, 5, &o, NULL);
    for (i = 0; i < 5; i++)
        fake_set(e.f, i, FAKE_REPLY, delay_ms);
    rc = redlock_acquire_as(e.l, OWNER, 0, lease_ms);
    *remaining = rc == REDLOCK_OK ? remaining_ms(&e) : -1;
    if (rc == REDLOCK_OK)
        ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    else
        for (i = 0; i < 5; i++)
            ck_assert_uint_eq(fake_count(e.f, 0, (int)i, REDLOCK__SCRIPT_ABORT), 1);
    *left_behind = holders(&e, 5);
    env_close(&e);
    return rc;
}

START_TEST(validity_is_lease_minus_elapsed_minus_drift)
{
    int64_t rem;
    size_t left;

    /* drift = 20000 * 0.01 + 2 = 202 ms */
    ck_assert_int_eq(try_with_delay(0, 20000, 300, &rem, &left), REDLOCK_OK);
    ck_assert_int_eq(rem, 20000 - 300 - 202);
    ck_assert_int_eq(try_with_delay(0, 20000, 4999, &rem, &left), REDLOCK_OK);
    ck_assert_int_eq(rem, 20000 - 4999 - 202);
    /* drift = 20000 * 0.4 + 2 = 8002 ms: the floor is 18002 */
    ck_assert_int_eq(try_with_delay(0.4, 20000, 4999, &rem, &left), REDLOCK_OK);
    ck_assert_int_eq(rem, 20000 - 4999 - 8002);
    ck_assert_uint_eq(left, 0);
}
END_TEST

/* A lease no longer than the drift plus two node timeouts can never come
 * back valid: it is refused before anything is sent, where it used to be
 * granted, aborted and retried at once for the whole wait. */
START_TEST(lease_floor_refuses_short_lease)
{
    redlock_options o = opts_timeout(5000);
    env e;

    env_open(&e, 5, &o, NULL);
    /* 10012 = drift 12 ms + 2 x 5000 ms at a 1000 ms lease... */
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 3000, 1000), REDLOCK_EINVAL);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "too short"));
    /* ...and the floor grows with the lease: 10000 * 0.01 + 2 + 10000. */
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10102), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10104), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_uint_eq(fake_count(e.f, 0, -1, REDLOCK__SCRIPT_ACQUIRE), 5);
    ck_assert_uint_eq(stats(&e).attempts, 1);
    env_close(&e);
}
END_TEST

/* A waiter subscribes on every member and wakes on the release message,
 * not after the holder's 30 s TTL. */
START_TEST(waiter_wakes_on_release)
{
    size_t i, open = 9;
    int64_t start;
    env e;

    env_open(&e, 5, NULL, NULL);
    for (i = 0; i < 5; i++)
        fake_hold(e.f, i, NAME, FOREIGN, 1, 30000);
    start = fake_now(e.f);
    for (i = 0; i < 3; i++)
        fake_schedule_release(e.f, start + 200 * MS, i, NAME);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 5000, 10000), REDLOCK_OK);
    ck_assert_int_ge(fake_now(e.f) - start, 200 * MS);
    ck_assert_int_lt(fake_now(e.f) - start, 300 * MS);
    ck_assert_uint_eq(fake_watches(e.f, &open), 1);
    ck_assert_uint_eq(open, 0);
    ck_assert_uint_eq(holders(&e, 5), 3);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Release and the background. */

START_TEST(unlock_with_frozen_minority_leaves_release_in_flight)
{
    redlock_options o = opts_timeout(20);
    fake_fanout fo;
    size_t before, after, i;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 5);
    fake_set(e.f, 3, FAKE_SILENT, 0);
    fake_set(e.f, 4, FAKE_SILENT, 0);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_RELEASE);
    /* Settled at the quorum's replies, not at the frozen nodes' timeout. */
    ck_assert_int_lt(fo.end_ns - fo.start_ns, 20 * MS);
    ck_assert_uint_eq(holders(&e, 5), 2);
    /* Their releases wait in the frozen nodes' sockets: parked, not owed. */
    ck_assert_uint_eq(stats(&e).background_releases, 0);
    ck_assert_uint_eq(redlock__retry_parked(&e.c->retry), 2);

    /* Frozen still: nothing is resent, and no probe is needed. */
    after = fake_ncalls(e.f);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    ck_assert_uint_eq(fake_ncalls(e.f), after);

    /* Thawed: each node runs the release it had been sent, once; its
     * answer settles the parked call. */
    fake_set(e.f, 3, FAKE_REPLY, 1);
    fake_set(e.f, 4, FAKE_REPLY, 1);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    ck_assert_uint_eq(holders(&e, 5), 0);
    ck_assert_uint_eq(redlock__retry_parked(&e.c->retry), 0);
    for (i = 0; i < 5; i++) {
        ck_assert_uint_eq(fake_published(e.f, i, CHANNEL), 1);
        ck_assert_uint_eq(fake_count(e.f, before, (int)i, REDLOCK__SCRIPT_RELEASE), 1);
    }
    after = fake_ncalls(e.f);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    ck_assert_uint_eq(fake_ncalls(e.f), after);
    env_close(&e);
}
END_TEST

/* The last release settles at a quorum: with two members slow, unlock
 * returns on the third reply, and the slow two still get exactly one
 * release each (in flight, not sent again by the background). */
START_TEST(unlock_returns_at_quorum_while_two_are_slow)
{
    redlock_options o = opts_timeout(100);
    fake_fanout fo;
    size_t before, i;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    fake_set(e.f, 3, FAKE_REPLY, 50);
    fake_set(e.f, 4, FAKE_REPLY, 60);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_RELEASE);
    ck_assert(fo.stopped);
    ck_assert_int_lt(fo.end_ns - fo.start_ns, 50 * MS);
    ck_assert_uint_eq(stats(&e).background_releases, 0);
    ck_assert_uint_eq(redlock__retry_parked(&e.c->retry), 0);
    for (i = 3; i < 5; i++)
        ck_assert(call_at(e.f, fake_find(e.f, before, (int)i, REDLOCK__SCRIPT_RELEASE)).in_flight);
    for (i = 0; i < 4; i++) {
        fake_advance_ms(e.f, 250);
        redlock__watchdog_tick(e.c);
    }
    for (i = 0; i < 5; i++)
        ck_assert_uint_eq(fake_count(e.f, before, (int)i, REDLOCK__SCRIPT_RELEASE), 1);
    ck_assert_uint_eq(holders(&e, 5), 0);
    env_close(&e);
}
END_TEST

/* A straggler whose connection breaks after the early return never ran
 * its release: the background sends it once more, exactly once. */
START_TEST(straggler_lost_after_quorum_is_resent_once)
{
    redlock_options o = opts_timeout(100);
    size_t before, i;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    fake_set(e.f, 4, FAKE_CONN_ERROR, 50);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 1);
    ck_assert_uint_eq(redlock__retry_parked(&e.c->retry), 0);
    fake_set(e.f, 4, FAKE_REPLY, 1);
    for (i = 0; i < 6; i++) {
        fake_advance_ms(e.f, 250);
        redlock__watchdog_tick(e.c);
    }
    ck_assert_uint_eq(holders(&e, 5), 0);
    ck_assert_uint_eq(fake_count(e.f, before, 4, REDLOCK__SCRIPT_RELEASE), 2);
    for (i = 0; i < 4; i++)
        ck_assert_uint_eq(fake_count(e.f, before, (int)i, REDLOCK__SCRIPT_RELEASE), 1);
    ck_assert_uint_eq(fake_published(e.f, 4, CHANNEL), 1);
    env_close(&e);
}
END_TEST

/* MultiLock needs every member: its unlock waits for the slow one. */
START_TEST(multilock_unlock_waits_for_all)
{
    redlock_member m[3] = {{0, "ma"}, {1, "mb"}, {2, "mc"}};
    redlock_lock_options lo = {.quorum = REDLOCK_QUORUM_ALL};
    redlock_options o = opts_timeout(100);
    fake_fanout fo;
    size_t before;
    env e;

    env_open(&e, 3, &o, NULL);
    redlock_lock_free(e.l);
    ck_assert_int_eq(redlock_multilock_new(e.c, m, 3, &lo, &e.l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    fake_set(e.f, 2, FAKE_REPLY, 40);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_RELEASE);
    ck_assert_int_ge(fo.end_ns - fo.start_ns, 40 * MS);
    ck_assert_int_eq(call_at(e.f, fake_find(e.f, before, 2, REDLOCK__SCRIPT_RELEASE)).outcome,
                     FAKE_ANSWERED);
    ck_assert_int_eq(fake_pttl(e.f, 2, "mc"), -2);
    env_close(&e);
}
END_TEST

/* A node whose last request timed out is silent: the next unlock sends its
 * release there but does not wait a node timeout for it again. Once the
 * node answers anything (here a background retry), it is waited for as
 * usual. */
START_TEST(unlock_skips_waiting_for_silent_node)
{
    redlock_options o = opts_timeout(20);
    fake_fanout fo;
    size_t before;
    env e;

    env_open(&e, 5, &o, NULL);
    fake_set(e.f, 4, FAKE_SILENT, 0);
    /* The acquires decide on the first four; node 4 is not yet known
     * silent. Releasing the inner hold waits for every member (only the
     * last release settles at a quorum), so node 4 times out. */
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_RELEASE);
    ck_assert_int_eq(fo.end_ns - fo.start_ns, 20 * MS);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);

    /* Now it is: the next cycle's unlock does not wait for it, and leaves
     * its release to the background (one copy per release, not two). */
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_RELEASE);
    ck_assert_int_lt(fo.end_ns - fo.start_ns, 20 * MS);
    ck_assert_int_eq(fake_find(e.f, before, 4, REDLOCK__SCRIPT_RELEASE), -1);
    ck_assert_uint_eq(holders(&e, 4), 0);

    /* Thawed: the background retries land, and the node is heard again. */
    fake_set(e.f, 4, FAKE_REPLY, 1);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    ck_assert_uint_eq(holders(&e, 5), 0);
    fake_set(e.f, 4, FAKE_REPLY, 5);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    /* Sent by the unlock again; the quorum answered first, so it went on
     * in flight and landed. */
    ck_assert(call_at(e.f, fake_find(e.f, before, 4, REDLOCK__SCRIPT_RELEASE)).in_flight);
    ck_assert(call_at(e.f, fake_find(e.f, before, 4, REDLOCK__SCRIPT_RELEASE)).applied);
    ck_assert_uint_eq(holders(&e, 5), 0);
    env_close(&e);
}
END_TEST

/* A member frozen for longer than the lease is given up on: the key has
 * expired there by then. */
START_TEST(background_release_gives_up_after_lease)
{
    redlock_options o = opts_timeout(20);
    size_t after;
    int i;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 2000), REDLOCK_OK);
    fake_set(e.f, 4, FAKE_SILENT, 0);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    for (i = 0; i < 10; i++) {
        fake_advance_ms(e.f, 250);
        redlock__watchdog_tick(e.c);
    }
    after = fake_ncalls(e.f);
    /* The release went once and waits in the frozen node's socket: no
     * probe, no resend, until the release's give-up time. */
    ck_assert_uint_eq(fake_count(e.f, 0, 4, REDLOCK__SCRIPT_RELEASE), 1);
    ck_assert_uint_eq(fake_count(e.f, 0, 4, -1), 0);
    for (i = 0; i < 4; i++) {
        fake_advance_ms(e.f, 250);
        redlock__watchdog_tick(e.c);
    }
    ck_assert_uint_eq(fake_ncalls(e.f), after);
    ck_assert_uint_eq(redlock__retry_parked(&e.c->retry), 0);
    env_close(&e);
}
END_TEST

/* A release applied on a node whose reply was lost is retried with the
 * same request id, and the retry reports the first result (released), not
 * "not held"; the node publishes once. */
START_TEST(release_retry_is_idempotent)
{
    redlock_options o = opts_timeout(20);
    size_t before;
    long k;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    /* Three lost replies: no quorum answers early, so the unlock waits
     * for them and they time out (a single one would just be in flight). */
    for (k = 0; k < 3; k++)
        fake_set_script(e.f, (size_t)k, REDLOCK__SCRIPT_RELEASE, FAKE_LOST_REPLY, 0);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_int_eq(fake_pttl(e.f, 0, NAME), -2);
    for (k = 0; k < 3; k++)
        fake_clear_script(e.f, (size_t)k, REDLOCK__SCRIPT_RELEASE);
    /* The node timed out: first a PING, then, answered, the release. */
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    redlock__watchdog_tick(e.c);
    k = fake_find(e.f, before + 5, 0, REDLOCK__SCRIPT_RELEASE);
    ck_assert_int_eq(call_at(e.f, k).outcome, FAKE_ANSWERED);
    ck_assert_uint_eq(fake_published(e.f, 0, CHANNEL), 1);
    /* Settled by that answer: nothing more is sent. */
    before = fake_ncalls(e.f);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    ck_assert_uint_eq(fake_ncalls(e.f), before);
    env_close(&e);
}
END_TEST

/* A release still pending for a node (frozen, then restarted empty) reaches
 * it only after the same owner acquired again: it carries the old hold's
 * generation, so it must leave the new hold there alone. Dropping it would
 * leave the new hold one member short. */
START_TEST(late_release_spares_newer_hold_of_same_owner)
{
    redlock_options o = opts_timeout(20);
    size_t before;
    long k;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    fake_set(e.f, 4, FAKE_SILENT, 0);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 1);
    ck_assert_uint_eq(redlock__retry_parked(&e.c->retry), 1);

    /* The restart loses what waited in its socket: the release is owed. */
    fake_flush(e.f, 4);
    ck_assert_uint_eq(redlock__retry_parked(&e.c->retry), 0);
    fake_set(e.f, 4, FAKE_REPLY, 1);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 5);
    /* The count and the new hold's generation field. */
    ck_assert_uint_eq(fake_hash_len(e.f, 4, NAME), 2);

    before = fake_ncalls(e.f);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c); /* a PING: node 4 was last seen silent */
    redlock__watchdog_tick(e.c);
    k = fake_find(e.f, before, 4, REDLOCK__SCRIPT_RELEASE);
    ck_assert_int_eq(call_at(e.f, k).outcome, FAKE_ANSWERED);
    ck_assert(call_at(e.f, k).applied);
    ck_assert_int_eq(fake_hash_count(e.f, 4, NAME, e.field), 1);
    ck_assert_uint_eq(fake_hash_len(e.f, 4, NAME), 2);
    ck_assert_uint_eq(fake_published(e.f, 4, CHANNEL), 0);
    ck_assert_uint_eq(holders(&e, 5), 5);
    /* "Not held" settles it: no further retries. */
    before = fake_ncalls(e.f);
    fake_advance_ms(e.f, 250);
    redlock__watchdog_tick(e.c);
    ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_RELEASE), 0);

    /* The new hold's own release drops it everywhere, generations too. */
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    assert_released_everywhere(&e);
    env_close(&e);
}
END_TEST

/* A re-entry keeps the hold's generation where the hold survived, and takes
 * the new one where a member restarted empty and granted afresh: both
 * unlocks then release every member. */
START_TEST(reentry_learns_generation_of_fresh_member)
{
    size_t before, i;
    env e;

    env_open(&e, 5, NULL, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    fake_flush(e.f, 4);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_ACQUIRE), 5);
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(fake_hash_count(e.f, i, NAME, e.field), 2);
    ck_assert_int_eq(fake_hash_count(e.f, 4, NAME, e.field), 1);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    assert_released_everywhere(&e);
    env_close(&e);
}
END_TEST

/* A fresh acquire replaces any older hold of ours it finds (acquire.lua),
 * so on a member that had not answered when the acquire decided, the new
 * hold can only carry this request's generation. Its release names that
 * one alone: the earlier holds' generations would only lengthen every
 * release and keep it off release.lua's short path. */
START_TEST(fresh_hold_forgets_earlier_generations)
{
    redlock_options o = opts_timeout(100);
    size_t before = 0, m;
    int round;
    env e;

    env_open(&e, 5, &o, NULL);
    fake_set_script(e.f, 3, REDLOCK__SCRIPT_ACQUIRE, FAKE_REPLY, 50);
    fake_set_script(e.f, 4, REDLOCK__SCRIPT_ACQUIRE, FAKE_REPLY, 60);
    for (round = 0; round < 5; round++) {
        ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
        before = fake_ncalls(e.f);
        ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
        fake_advance_ms(e.f, 100);
    }
    for (m = 3; m < 5; m++) {
        fake_call release = call_at(e.f, fake_find(e.f, before, (int)m, REDLOCK__SCRIPT_RELEASE));
        const char *gens = release.argv[release.argc - 1];

        ck_assert_msg(strlen(gens) == REDLOCK__GEN_LEN && !strchr(gens, ','),
                      "member %zu: the fifth release names generations '%s'", m, gens);
    }
    assert_released_everywhere(&e);
    env_close(&e);
}
END_TEST

/* A hold without a recorded generation (as Redisson writes it) is released
 * like any other hold of the owner. */
START_TEST(release_of_hold_without_generation)
{
    env e;

    env_open(&e, 5, NULL, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    fake_flush(e.f, 0);
    fake_hold(e.f, 0, NAME, e.field, 1, 10000);
    ck_assert_uint_eq(fake_hash_len(e.f, 0, NAME), 1); /* no generation field */
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 0);
    ck_assert_int_eq(fake_pttl(e.f, 0, NAME), -2);
    ck_assert_uint_eq(fake_published(e.f, 0, CHANNEL), 1);
    env_close(&e);
}
END_TEST

/* A handle keeps each member's generations as raw bytes; release.lua must
 * get back exactly the request ids the scripts stored, oldest dropped
 * first, and a list never accepts what no script writes. */
START_TEST(generation_list_round_trip)
{
    static const char *ids[] = {
        "00112233445566778899aabbccddeeff", "0123456789abcdef0123456789abcdef",
        "ffffffffffffffffffffffffffffffff", "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0",
        "5555555555555555555555555555555f"};
    redlock__gens g;
    redlock__gens_text text;
    char want[sizeof(text)];

    memset(&g, 0, sizeof(g));
    redlock__gens_format(&g, text);
    ck_assert_str_eq(text, "");
    redlock__gens_add(&g, ids[0]);
    redlock__gens_format(&g, text);
    ck_assert_str_eq(text, ids[0]);
    redlock__gens_add(&g, ids[1]);
    redlock__gens_add(&g, ids[2]);
    redlock__gens_add(&g, ids[3]);
    redlock__gens_add(&g, ids[4]);
    redlock__gens_format(&g, text);
    snprintf(want, sizeof(want), "%s,%s,%s,%s", ids[1], ids[2], ids[3], ids[4]);
    ck_assert_str_eq(text, want);
    ck_assert_uint_eq(strlen(text) + 1, sizeof(text));

    /* Not a request id: ignored by add, unknown when a member reports it. */
    redlock__gens_add(&g, "0123456789ABCDEF0123456789abcdef");
    redlock__gens_add(&g, "0123");
    redlock__gens_add(&g, "00112233445566778899aabbccddeeff0");
    redlock__gens_format(&g, text);
    ck_assert_str_eq(text, want);
    ck_assert(!redlock__gen_valid(""));
    ck_assert(redlock__gen_valid(ids[2]));
    redlock__gens_set(&g, ids[3]);
    redlock__gens_format(&g, text);
    ck_assert_str_eq(text, ids[3]);
    redlock__gens_set(&g, "");
    redlock__gens_format(&g, text);
    ck_assert_str_eq(text, "");
}
END_TEST

START_TEST(force_unlock_counts_deleted_members)
{
    size_t released = 99;
    env e;

    env_open(&e, 5, NULL, NULL);
    fake_hold(e.f, 0, NAME, FOREIGN, 1, 30000);
    fake_hold(e.f, 1, NAME, FOREIGN, 1, 30000);
    fake_set(e.f, 4, FAKE_SILENT, 0);
    ck_assert_int_eq(redlock_force_unlock(e.l, &released), REDLOCK_OK);
    ck_assert_uint_eq(released, 2);
    ck_assert_int_eq(fake_pttl(e.f, 0, NAME), -2);
    fake_set(e.f, 2, FAKE_SILENT, 0);
    fake_set(e.f, 3, FAKE_SILENT, 0);
    ck_assert_int_eq(redlock_force_unlock(e.l, &released), REDLOCK_ENO_QUORUM);
    env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The watchdog. */

static redlock_options opts_watchdog(int lease_ms)
{
    redlock_options o;

    memset(&o, 0, sizeof(o));
    o.watchdog_lease_ms = lease_ms;
    return o;
}

/* With two of five frozen, every tick renews the other three (one batch
 * per node) and the lock outlives its lease many times over. */
START_TEST(watchdog_renews_on_quorum)
{
    redlock_options o = opts_watchdog(3000);
    lost_log lost = {0};
    redlock_stats s0, s1;
    size_t i;
    int tick;
    env e;

    env_open(&e, 5, &o, NULL);
    redlock_lock_set_on_lost(e.l, on_lost, &lost);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    fake_set(e.f, 3, FAKE_SILENT, 0);
    fake_set(e.f, 4, FAKE_SILENT, 0);
    for (tick = 0; tick < 12; tick++) {
        size_t before = fake_ncalls(e.f);

        s0 = stats(&e);
        fake_advance_ms(e.f, 1000);
        redlock__watchdog_tick(e.c);
        s1 = stats(&e);
        ck_assert_uint_eq(s1.watchdog_batches - s0.watchdog_batches, 5);
        ck_assert_uint_eq(s1.renewals - s0.renewals, 1);
        ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_RENEW), 5);
        for (i = 0; i < 3; i++)
            ck_assert_int_gt(fake_pttl(e.f, i, NAME), 2900);
        /* Validity restarts at the tick: lease - drift - time since. */
        ck_assert_int_gt(remaining_ms(&e), 2900);
    }
    ck_assert_int_eq(lost.calls, 0);
    /* 12 s after a 3 s lease the keys on the frozen nodes have expired. */
    ck_assert_int_eq(fake_pttl(e.f, 3, NAME), -2);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 0);
    env_close(&e);
}
END_TEST

/* Keys deleted on three of five members: the next tick reports the loss at
 * once (ENOT_OWNER), calls on_lost exactly once, re-creates nothing,
 * releases what is left, and unlock() reports ELOST. */
START_TEST(watchdog_loss_when_keys_vanish)
{
    redlock_options o = opts_watchdog(3000);
    lost_log lost = {0};
    size_t i, before;
    int held = 1;
    env e;

    env_open(&e, 5, &o, NULL);
    redlock_lock_set_on_lost(e.l, on_lost, &lost);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    for (i = 0; i < 3; i++)
        fake_flush(e.f, i);
    fake_advance_ms(e.f, 1000);
    before = fake_ncalls(e.f);
    redlock__watchdog_tick(e.c);
    ck_assert_int_eq(lost.calls, 1);
    ck_assert_int_eq(lost.reason, REDLOCK_ENOT_OWNER);
    ck_assert_uint_eq(lost.owner, OWNER);
    ck_assert_ptr_eq(lost.lock, e.l);
    ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_ACQUIRE), 0);
    ck_assert_uint_eq(holders(&e, 5), 0);
    ck_assert_int_eq(redlock_is_held_as(e.l, OWNER, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);
    ck_assert_uint_eq(stats(&e).lost, 1);

    before = fake_ncalls(e.f);
    for (i = 0; i < 5; i++) {
        fake_advance_ms(e.f, 1000);
        redlock__watchdog_tick(e.c);
    }
    ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_RENEW), 0);
    ck_assert_int_eq(lost.calls, 1);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_ELOST);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_ENOT_OWNER);
    env_close(&e);
}
END_TEST

/* Three of five frozen: renewals fall below the quorum, but the lock stays
 * held while its validity lasts and is reported lost (ENO_QUORUM) no later
 * than the first tick at or after its end (at the earliest when the next
 * retry, lease/10 away, would come too late). */
START_TEST(watchdog_loss_when_quorum_stops_answering)
{
    redlock_options o = opts_watchdog(3000);
    lost_log lost = {0};
    int64_t end_ns = 0, lost_at = 0;
    size_t i;
    int tick;
    env e;

    env_open(&e, 5, &o, NULL);
    redlock_lock_set_on_lost(e.l, on_lost, &lost);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    end_ns = fake_now(e.f) + remaining_ms(&e) * MS;
    for (i = 0; i < 3; i++)
        fake_set(e.f, i, FAKE_SILENT, 0);
    for (tick = 0; tick < 100 && lost.calls == 0; tick++) {
        fake_advance_ms(e.f, 100);
        redlock__watchdog_tick(e.c);
        if (lost.calls == 0)
            ck_assert_int_lt(fake_now(e.f), end_ns);
        else
            lost_at = fake_now(e.f);
    }
    ck_assert_int_eq(lost.calls, 1);
    ck_assert_int_eq(lost.reason, REDLOCK_ENO_QUORUM);
    ck_assert_int_ge(lost_at, end_ns - 300 * MS);
    ck_assert_int_le(lost_at, end_ns + 100 * MS);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_ELOST);
    env_close(&e);
}
END_TEST

/* One member restarted empty: the tick renews four (a quorum) and then
 * re-acquires the vanished member to restore the fault margin. */
START_TEST(watchdog_restores_vanished_member)
{
    redlock_options o = opts_watchdog(3000);
    lost_log lost = {0};
    size_t before;
    env e;

    env_open(&e, 5, &o, NULL);
    redlock_lock_set_on_lost(e.l, on_lost, &lost);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    fake_flush(e.f, 0);
    fake_advance_ms(e.f, 1000);
    before = fake_ncalls(e.f);
    redlock__watchdog_tick(e.c);
    ck_assert_int_eq(lost.calls, 0);
    ck_assert_uint_eq(fake_count(e.f, before, 0, REDLOCK__SCRIPT_ACQUIRE), 1);
    ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_ACQUIRE), 1);
    ck_assert_int_eq(fake_hash_count(e.f, 0, NAME, e.field), 1);
    ck_assert_int_gt(fake_pttl(e.f, 0, NAME), 2900);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 0);
    env_close(&e);
}
END_TEST

/* Two members restarted empty and one frozen: the genuine renewals (two)
 * do not reach the quorum, so nothing is re-acquired, neither while the
 * lock is still valid nor after its validity ran out. */
START_TEST(watchdog_never_restores_without_genuine_quorum)
{
    redlock_options o = opts_watchdog(3000);
    lost_log lost = {0};
    int tick;
    env e;

    env_open(&e, 5, &o, NULL);
    redlock_lock_set_on_lost(e.l, on_lost, &lost);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    fake_flush(e.f, 0);
    fake_flush(e.f, 1);
    fake_set(e.f, 2, FAKE_SILENT, 0);
    for (tick = 0; tick < 60 && lost.calls == 0; tick++) {
        fake_advance_ms(e.f, 100);
        redlock__watchdog_tick(e.c);
    }
    ck_assert_int_eq(lost.calls, 1);
    ck_assert_int_eq(lost.reason, REDLOCK_ENO_QUORUM);
    ck_assert_uint_eq(fake_count(e.f, 0, 0, REDLOCK__SCRIPT_ACQUIRE), 1); /* the first grant */
    ck_assert_uint_eq(fake_count(e.f, 0, 1, REDLOCK__SCRIPT_ACQUIRE), 1);
    ck_assert_int_eq(fake_pttl(e.f, 0, NAME), -2);
    ck_assert_int_eq(fake_pttl(e.f, 1, NAME), -2);
    env_close(&e);
}
END_TEST

/* The holder, told of a loss, takes the lock again at once from another
 * thread (the on_lost callback only signals it). That new hold must not be
 * undone by the tick that reported the old one lost: neither unlisted from
 * the watchdog nor released with the old hold's generations on the members
 * where it re-entered what the old hold left. */
typedef struct relock {
    env *e;
    lost_log lost;
    pthread_t thread;
    int started, done, unlock_rc, acquire_rc;
    pthread_mutex_t mu;
    pthread_cond_t cond;
} relock;

static void *relock_main(void *arg)
{
    relock *r = arg;

    fake_join_clock(r->e->f);
    r->unlock_rc = redlock_unlock_as(r->e->l, OWNER);
    r->acquire_rc = redlock_acquire_as(r->e->l, OWNER, 0, 0);
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void on_lost_relock(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    relock *r = ud;
    struct timespec until;

    on_lost(&r->lost, l, owner, reason);
    if (r->started)
        return;
    r->started = pthread_create(&r->thread, NULL, relock_main, r) == 0;
    /* Give the new hold every chance to land while the tick is still
     * inside its loss handling; the tick must cope either way. */
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    pthread_mutex_lock(&r->mu);
    while (!r->done && pthread_cond_timedwait(&r->cond, &r->mu, &until) == 0)
        ;
    pthread_mutex_unlock(&r->mu);
}

START_TEST(watchdog_loss_spares_hold_taken_again)
{
    redlock_options o = opts_watchdog(3000);
    relock r;
    size_t i, before;
    int held = 0;
    env e;

    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cond, NULL);
    env_open(&e, 5, &o, NULL);
    r.e = &e;
    redlock_lock_set_on_lost(e.l, on_lost_relock, &r);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    for (i = 0; i < 3; i++)
        fake_flush(e.f, i);
    fake_advance_ms(e.f, 1000);
    redlock__watchdog_tick(e.c);
    ck_assert(r.started);
    pthread_join(r.thread, NULL);
    ck_assert_int_eq(r.lost.calls, 1);
    ck_assert_int_eq(r.lost.reason, REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(r.unlock_rc, REDLOCK_ELOST);
    ck_assert_int_eq(r.acquire_rc, REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 5);
    ck_assert_int_eq(redlock_is_held_as(e.l, OWNER, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);

    /* The new hold is renewed, and ends with one unlock. */
    before = fake_ncalls(e.f);
    for (i = 0; i < 6; i++) {
        fake_advance_ms(e.f, 1000);
        redlock__watchdog_tick(e.c);
    }
    ck_assert_uint_ge(fake_count(e.f, before, -1, REDLOCK__SCRIPT_RENEW), 5);
    ck_assert_int_eq(r.lost.calls, 1);
    ck_assert_uint_eq(holders(&e, 5), 5);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 0);
    env_close(&e);
    pthread_cond_destroy(&r.cond);
    pthread_mutex_destroy(&r.mu);
}
END_TEST

/* A re-entry in flight when the watchdog ends the hold (here the hold cap,
 * whose clean-up release goes out at once) must not come back as a new
 * hold: the clean-up drops what it re-entered, so its caller would be
 * told it holds the lock while no member holds it. It reports the loss
 * instead, and what it granted is undone. The log line of the re-entry's
 * decided attempt is the moment between its grant and its record. */
typedef struct loss_mid_reentry {
    env *e;
    int armed, fired;
} loss_mid_reentry;

static void end_hold_after_attempt(void *ud, redlock_log_level level, const char *message)
{
    loss_mid_reentry *x = ud;

    (void)level;
    if (!x->armed || x->fired || !strstr(message, " attempt ") || !strstr(message, "acquired"))
        return;
    x->fired = 1;
    fake_advance_ms(x->e->f, 2000); /* past the hold cap and a renewal */
    redlock__watchdog_tick(x->e->c);
}

START_TEST(reentry_during_loss_is_undone)
{
    redlock_options o = opts_watchdog(3000);
    loss_mid_reentry x = {0};
    lost_log lost = {0};
    int held = 1;
    env e;

    o.watchdog_max_hold_ms = 1000;
    o.log_fn = end_hold_after_attempt;
    o.log_userdata = &x;
    o.log_level = REDLOCK_LOG_DEBUG;
    env_open(&e, 5, &o, NULL);
    x.e = &e;
    redlock_lock_set_on_lost(e.l, on_lost, &lost);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    x.armed = 1;
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_ELOST);
    ck_assert(x.fired);
    ck_assert_int_eq(lost.calls, 1);
    ck_assert_int_eq(lost.reason, REDLOCK_ETIMEOUT);
    ck_assert_int_eq(redlock_is_held_as(e.l, OWNER, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);
    ck_assert_uint_eq(holders(&e, 5), 0);
    /* The outer hold's unlock hears of the loss too. */
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_ELOST);
    /* And a later acquire is an ordinary fresh one. */
    x.armed = 0;
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 5);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    assert_released_everywhere(&e);
    env_close(&e);
}
END_TEST

/* An acquire by an owner whose hold the watchdog found lost, before that
 * owner's unlock heard of it, is a re-entry of the lost hold: it returns
 * REDLOCK_ELOST and grants nothing, and the outer unlock still reports the
 * loss. (As a fresh acquire it handed nested code a new hold and left the
 * outer unlock REDLOCK_ENOT_OWNER.) */
START_TEST(reentry_after_loss_reports_it)
{
    redlock_options o = opts_watchdog(3000);
    lost_log lost = {0};
    size_t i;
    env e;

    env_open(&e, 5, &o, NULL);
    redlock_lock_set_on_lost(e.l, on_lost, &lost);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    for (i = 0; i < 3; i++)
        fake_flush(e.f, i);
    fake_advance_ms(e.f, 1000);
    redlock__watchdog_tick(e.c);
    ck_assert_int_eq(lost.calls, 1);
    ck_assert_uint_eq(holders(&e, 5), 0);

    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_ELOST);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "was lost"));
    ck_assert_uint_eq(holders(&e, 5), 0);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_ELOST);
    /* Once the unlock reported it, the lock is taken afresh. */
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 5);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    assert_released_everywhere(&e);
    env_close(&e);
}
END_TEST

/* on_lost of one lock may take another lock (only the same lock is off
 * limits), even one the same tick has just found lost and is still
 * cleaning up: that acquire must not wait for the tick it runs in. */
typedef struct cross {
    redlock_lock *other;
    int calls, unlock_rc, acquire_rc;
} cross;

/* The other lock's loss is acknowledged first (an acquire before that
 * would be a re-entry of the lost hold: reentry_after_loss_reports_it). */
static void on_lost_take_other(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    cross *x = ud;

    (void)l;
    (void)owner;
    (void)reason;
    if (x->calls++ == 0) {
        x->unlock_rc = redlock_unlock_as(x->other, OWNER);
        x->acquire_rc = redlock_acquire_as(x->other, OWNER, 0, 0);
    }
}

START_TEST(on_lost_may_take_another_lock_of_the_same_tick)
{
    redlock_options o = opts_watchdog(3000);
    redlock_lock *second = NULL;
    cross x = {0};
    size_t i, before;
    int held = 0;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_lock_new(e.c, "res2", NULL, &second), REDLOCK_OK);
    x.other = second;
    x.acquire_rc = -1;
    redlock_lock_set_on_lost(e.l, on_lost_take_other, &x);
    /* Listed after e.l, so the tick judges it first. */
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 0), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(second, OWNER, 0, 0), REDLOCK_OK);
    for (i = 0; i < 5; i++)
        fake_flush(e.f, i);
    fake_advance_ms(e.f, 1000);
    redlock__watchdog_tick(e.c);
    ck_assert_int_eq(x.calls, 1);
    ck_assert_int_eq(x.unlock_rc, REDLOCK_ELOST);
    ck_assert_int_eq(x.acquire_rc, REDLOCK_OK);
    ck_assert_int_eq(redlock_is_held_as(second, OWNER, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    for (i = 0; i < 5; i++)
        ck_assert_int_eq(fake_hash_count(e.f, i, "res2", e.field), 1);
    /* And the watchdog keeps it. */
    before = fake_ncalls(e.f);
    fake_advance_ms(e.f, 1000);
    redlock__watchdog_tick(e.c);
    ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_RENEW), 5);
    ck_assert_int_eq(redlock_unlock_as(second, OWNER), REDLOCK_OK);
    redlock_lock_free(second);
    env_close(&e);
}
END_TEST

/*
 * on_lost may unlock and free its own lock. The unlock reports the loss;
 * the free is done by the tick once it no longer uses the lock (it used
 * to wait for that tick, from inside it, forever). ASan checks the rest.
 */
typedef struct self_free {
    int calls, unlock_rc;
} self_free;

static void on_lost_free_self(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    self_free *sf = ud;

    (void)reason;
    sf->calls++;
    sf->unlock_rc = redlock_unlock_as(l, owner);
    redlock_lock_free(l);
}

START_TEST(on_lost_may_unlock_and_free_its_lock)
{
    redlock_options o = opts_watchdog(3000);
    redlock_lock *l = NULL;
    self_free sf = {0, -1};
    size_t i;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_lock_new(e.c, "res3", NULL, &l), REDLOCK_OK);
    redlock_lock_set_on_lost(l, on_lost_free_self, &sf);
    ck_assert_int_eq(redlock_acquire_as(l, OWNER, 0, 0), REDLOCK_OK);
    for (i = 0; i < 3; i++)
        fake_flush(e.f, i);
    fake_advance_ms(e.f, 1000);
    redlock__watchdog_tick(e.c);
    ck_assert_int_eq(sf.calls, 1);
    ck_assert_int_eq(sf.unlock_rc, REDLOCK_ELOST);
    /* The tick still released what was left, after the callback. */
    for (i = 0; i < 5; i++)
        ck_assert_int_eq(fake_hash_count(e.f, i, "res3", e.field), 0);
    /* And the next tick does not touch the freed lock. */
    fake_advance_ms(e.f, 1000);
    redlock__watchdog_tick(e.c);
    env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Fencing. */

static const redlock_lock_options fenced = {.fencing = 1};

static uint64_t token_of(env *e)
{
    uint64_t t = 0;

    ck_assert_int_eq(redlock_lock_token_as(e->l, OWNER, &t), REDLOCK_OK);
    return t;
}

/* T = max over the granting members of max(stored + 1, node time), and
 * phase 2 stores T on every member that did not refuse, never on a
 * refusing one. The three fastest members decide; the fourth (slow) is
 * not waited for and the fifth refuses. */
START_TEST(fencing_token_is_max_of_candidates)
{
    const uint64_t base = 3000000000000000ULL; /* above any node's clock */
    const uint64_t stored[5] = {base + 1000, base, base + 2000, base + 1500, base + 9000};
    char v[32];
    size_t i, before;
    uint64_t t;
    env e;

    env_open(&e, 5, NULL, &fenced);
    for (i = 0; i < 5; i++) {
        snprintf(v, sizeof(v), "%llu", (unsigned long long)stored[i]);
        fake_set_string(e.f, i, TOKEN_KEY, v);
    }
    fake_set_script(e.f, 3, REDLOCK__SCRIPT_ACQUIRE, FAKE_REPLY, 30);
    /* Member 4 refuses first, so its refusal is heard. */
    fake_hold(e.f, 4, NAME, FOREIGN, 1, 30000);
    fake_set_script(e.f, 4, REDLOCK__SCRIPT_ACQUIRE, FAKE_REPLY, 0);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    t = token_of(&e);
    ck_assert_uint_eq(t, base + 2000 + 1);
    for (i = 0; i < 4; i++) {
        /* Member 3 granted late, with a candidate below T: it stores T. */
        ck_assert_uint_eq(fake_get_u64(e.f, i, TOKEN_KEY), t);
        ck_assert_uint_eq(fake_count(e.f, before, (int)i, REDLOCK__SCRIPT_FENCE_STORE), 1);
    }
    ck_assert_uint_eq(fake_get_u64(e.f, 4, TOKEN_KEY), base + 9000);
    ck_assert_uint_eq(fake_count(e.f, before, 4, REDLOCK__SCRIPT_FENCE_STORE), 0);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_token_as(e.l, OWNER, &t), REDLOCK_ENOT_OWNER);
    env_close(&e);
}
END_TEST

/* With empty stores the time term decides: the token is the node time of
 * the member whose clock is furthest ahead, at the moment it granted. */
START_TEST(fencing_time_term_uses_fastest_member)
{
    size_t before;
    fake_fanout fo;
    uint64_t expect;
    env e;

    env_open(&e, 5, NULL, &fenced);
    fake_set_time_offset_us(e.f, 2, 5000000);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_ACQUIRE);
    expect = fake_node_time_us(e.f, 2) - (uint64_t)((fake_now(e.f) - fo.end_ns) / 1000);
    ck_assert_uint_eq(token_of(&e), expect);
    ck_assert_uint_gt(token_of(&e), fake_node_time_us(e.f, 0));
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    env_close(&e);
}
END_TEST

/* Phase 2 needs Q confirmations: one member whose write-back fails does
 * not matter (it keeps its own, lower candidate); three do, and then the
 * attempt fails and releases everything. */
START_TEST(fencing_writeback_needs_quorum)
{
    size_t i;
    uint64_t t;
    env e;

    env_open(&e, 5, NULL, &fenced);
    fake_set_time_offset_us(e.f, 1, 1000000);
    fake_set_script(e.f, 0, REDLOCK__SCRIPT_FENCE_STORE, FAKE_ERROR_REPLY, 1);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    t = token_of(&e);
    for (i = 1; i < 5; i++)
        ck_assert_uint_eq(fake_get_u64(e.f, i, TOKEN_KEY), t);
    ck_assert_uint_gt(fake_get_u64(e.f, 0, TOKEN_KEY), 0);
    ck_assert_uint_lt(fake_get_u64(e.f, 0, TOKEN_KEY), t);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);

    /* Granted, but the token stored by at most 2 of 5: no quorum, said as
     * such (it used to come out as "held by another owner"). */
    for (i = 0; i < 3; i++)
        fake_set_script(e.f, i, REDLOCK__SCRIPT_FENCE_STORE, FAKE_ERROR_REPLY, 1);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_ENO_QUORUM);
    ck_assert_msg(strstr(redlock_last_error(), "too few members stored the fencing token"), "%s", redlock_last_error());
    ck_assert_uint_eq(holders(&e, 5), 0);
    for (i = 0; i < 5; i++)
        ck_assert_uint_eq(fake_count(e.f, 0, (int)i, REDLOCK__SCRIPT_ABORT), 1);
    ck_assert_int_eq(redlock_lock_token_as(e.l, OWNER, &t), REDLOCK_ENOT_OWNER);
    env_close(&e);
}
END_TEST

/* A write-back that never answers is bounded by the validity window, and
 * members that lost the lock in between do not confirm. */
START_TEST(fencing_writeback_silent_or_not_held)
{
    redlock_options o = opts_timeout(50);
    fake_fanout fo;
    size_t i, before;
    env e;

    env_open(&e, 5, &o, &fenced);
    for (i = 0; i < 3; i++)
        fake_set_script(e.f, i, REDLOCK__SCRIPT_FENCE_STORE, FAKE_SILENT, 0);
    before = fake_ncalls(e.f);
    ck_assert_int_ne(redlock_acquire_as(e.l, OWNER, 0, 1000), REDLOCK_OK);
    fo = fanout_of(e.f, before, REDLOCK__SCRIPT_FENCE_STORE);
    /* Like any request, the write-back waits one node timeout at most. */
    ck_assert_int_eq(fo.end_ns - fo.start_ns, 50 * MS);
    ck_assert_uint_eq(holders(&e, 5), 0);
    env_close(&e);
}
END_TEST

/* A frozen minority delays neither phase of a fenced acquisition. */
START_TEST(fencing_frozen_minority_does_not_delay)
{
    redlock_options o = opts_timeout(50);
    int64_t start;
    size_t before;
    env e;

    env_open(&e, 5, &o, &fenced);
    fake_set(e.f, 3, FAKE_SILENT, 0);
    fake_set(e.f, 4, FAKE_SILENT, 0);
    start = fake_now(e.f);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_int_eq(fake_now(e.f) - start, 2 * MS);
    ck_assert(fanout_of(e.f, before, REDLOCK__SCRIPT_FENCE_STORE).stopped);
    ck_assert_int_eq(remaining_ms(&e), 10000 - 102 - 2);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    env_close(&e);
}
END_TEST

/* A re-entry keeps the token and costs no second round. */
START_TEST(fencing_reentry_keeps_token)
{
    size_t before;
    uint64_t t;
    env e;

    env_open(&e, 5, NULL, &fenced);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    t = token_of(&e);
    fake_advance_ms(e.f, 10);
    before = fake_ncalls(e.f);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_uint_eq(fake_count(e.f, before, -1, REDLOCK__SCRIPT_FENCE_STORE), 0);
    ck_assert_uint_eq(token_of(&e), t);
    ck_assert_int_eq(fake_hash_count(e.f, 0, NAME, e.field), 2);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_uint_eq(token_of(&e), t);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    env_close(&e);
}
END_TEST

/* A non-fencing lock has no token. */
START_TEST(unfenced_lock_has_no_token)
{
    uint64_t t = 5;
    env e;

    env_open(&e, 3, NULL, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_token_as(e.l, OWNER, &t), REDLOCK_ENOT_OWNER);
    ck_assert_uint_eq(fake_count(e.f, 0, -1, REDLOCK__SCRIPT_FENCE_STORE), 0);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    env_close(&e);
}
END_TEST

/* Restarted members with empty stores. A minority restart, even with its
 * clocks an hour behind, cannot lower the token: the quorum overlaps a
 * member that stored the last one. A restart of every member relies on
 * the time term (clocks roughly in step). */
START_TEST(fencing_restart_with_empty_store)
{
    uint64_t t1, t2, t3;
    size_t i;
    env e;

    env_open(&e, 5, NULL, &fenced);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    t1 = token_of(&e);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);

    fake_flush(e.f, 0);
    fake_flush(e.f, 1);
    for (i = 0; i < 3; i++)
        fake_set_time_offset_us(e.f, i, -3600000000LL);
    fake_hold(e.f, 3, NAME, FOREIGN, 1, 30000);
    fake_hold(e.f, 4, NAME, FOREIGN, 1, 30000);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    t2 = token_of(&e);
    ck_assert_uint_gt(t2, t1);
    ck_assert_uint_eq(t2, t1 + 1); /* from member 2's stored t1 */
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);

    for (i = 0; i < 5; i++) {
        fake_flush(e.f, i);
        fake_set_time_offset_us(e.f, i, 0);
    }
    fake_advance_ms(e.f, 1);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    t3 = token_of(&e);
    ck_assert_uint_gt(t3, t2);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The key namespace. */

/* Every key a lock derives from its name, for (name, request id). */
static void derived_keys(const redlock_lock *l, const char *id, char out[4][600])
{
    const redlock__lock_member *m = &l->members[0];

    snprintf(out[0], 600, "%s", m->name);
    snprintf(out[1], 600, "%s%s", redlock__key(m, REDLOCK__KEY_LATCH_PREFIX), id);
    snprintf(out[2], 600, "%s", redlock__key(m, REDLOCK__KEY_TOKEN));
    snprintf(out[3], 600, "%s", redlock__key(m, REDLOCK__KEY_GEN));
}

/*
 * No lock name reaches another lock's keys: every companion key of a name
 * is refused as a lock name, and two different (name, role) pairs never
 * give the same key. A lock named "redlock_gen:{foo}" used to lose its
 * hold whenever anyone took "foo".
 */
START_TEST(lock_names_cannot_reach_companion_keys)
{
    static const char *const tricky[] = {
        "foo", "redlock_gen:{foo}", "redlock_latch:{foo}:", "redisson_lock_token:{foo}",
        "{foo}", "a}:b", "}", "{", "redlock_gen:", "redlock_gen:{", "x:{redlock_gen:{y}}",
        "redisson_lock__channel:{foo}",
    };
    enum { RANDOM = 300 };
    char names[RANDOM + 12][40];
    char keys_a[4][600], keys_b[4][600];
    redlock_lock *locks[RANDOM + 12];
    size_t n = 0, i, j, a, b;
    env e;

    env_open(&e, 1, NULL, NULL);
    lcg_state = 21;
    for (i = 0; i < sizeof(tricky) / sizeof(tricky[0]); i++)
        snprintf(names[n++], sizeof(names[0]), "%s", tricky[i]);
    for (i = 0; i < RANDOM; i++) {
        /* Short names over an alphabet rich in the separators. */
        static const char alphabet[] = "ab{}:_rdlockgenatchisonk";
        size_t len = 1 + lcg() % 24;

        for (j = 0; j < len; j++)
            names[n][j] = alphabet[lcg() % (sizeof(alphabet) - 1)];
        names[n++][len] = '\0';
    }
    for (i = 0; i < n; i++) {
        int rc = redlock_lock_new(e.c, names[i], NULL, &locks[i]);

        ck_assert_int_eq(rc, redlock__reserved_prefix(names[i]) ? REDLOCK_EINVAL : REDLOCK_OK);
        if (rc != REDLOCK_OK) {
            ck_assert_ptr_nonnull(strstr(redlock_last_error(), "may not start with"));
            locks[i] = NULL;
            continue;
        }
        /* Every companion key of this name is refused as a name. */
        derived_keys(locks[i], "0123456789abcdef0123456789abcdef", keys_a);
        for (j = 1; j < 4; j++) {
            redlock_lock *other = NULL;

            ck_assert_int_eq(redlock_lock_new(e.c, keys_a[j], NULL, &other), REDLOCK_EINVAL);
            ck_assert_ptr_null(other);
        }
    }
    /* Distinct (name, role) pairs give distinct keys. */
    for (a = 0; a < n; a++)
        for (b = a; b < n; b++) {
            if (!locks[a] || !locks[b] || (a != b && strcmp(names[a], names[b]) == 0))
                continue;
            derived_keys(locks[a], "0123456789abcdef0123456789abcdef", keys_a);
            derived_keys(locks[b], "0123456789abcdef0123456789abcdef", keys_b);
            for (i = 0; i < 4; i++)
                for (j = 0; j < 4; j++)
                    if (!(a == b && i == j))
                        ck_assert_msg(strcmp(keys_a[i], keys_b[j]) != 0,
                                      "'%s' role %zu and '%s' role %zu share key '%s'",
                                      names[a], i, names[b], j, keys_a[i]);
        }
    for (i = 0; i < n; i++)
        redlock_lock_free(locks[i]);
    env_close(&e);
}
END_TEST

/* A latch key is built in the caller's room when it fits and on the heap
 * when not (a long name), and reads the same either way; a lock cycle with
 * a long name still releases and frees what it built. */
START_TEST(latch_key_in_room_or_heap)
{
    static const char id[] = "0123456789abcdef0123456789abcdef";
    char long_name[300], room[128], *owned = (char *)1, *want;
    const char *got;
    redlock_lock *l = NULL;
    env e;

    env_open(&e, 1, NULL, NULL);
    want = redlock__latch_key(&e.l->members[0], id);
    ck_assert_ptr_nonnull(want);
    got = redlock__latch_key_in(&e.l->members[0], id, room, sizeof(room), &owned);
    ck_assert_ptr_eq(got, room);
    ck_assert_ptr_null(owned);
    ck_assert_str_eq(got, want);
    /* One byte short of the key and its terminator: the heap. */
    got = redlock__latch_key_in(&e.l->members[0], id, room, strlen(want), &owned);
    ck_assert_ptr_nonnull(owned);
    ck_assert_ptr_eq(got, owned);
    ck_assert_str_eq(got, want);
    free(owned);
    got = redlock__latch_key_in(&e.l->members[0], id, NULL, 0, &owned);
    ck_assert_ptr_eq(got, owned);
    ck_assert_str_eq(got, want);
    free(owned);
    free(want);

    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    ck_assert_int_eq(redlock_lock_new(e.c, long_name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, OWNER, 0, 10000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(l, OWNER), REDLOCK_OK);
    redlock_lock_free(l);
    env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Nothing left behind. */

/*
 * An attempt that failed with its aborts lost (safety_freeze3: a majority
 * frozen, the aborts never applied) leaves grants of OWNER on members 0
 * and 1. The next acquire, by an owner that holds nothing, must replace
 * them: a fresh hold with a new token and count 1. Taking them for a
 * re-entry gave token 0 and count 2, so the release left the lock held
 * there for a whole lease. The lost aborts, retried late, must then spare
 * the new hold.
 */
START_TEST(fresh_acquire_replaces_own_leftover)
{
    redlock_options o = opts_timeout(20);
    uint64_t stored, token;
    size_t i;
    int held = 0;
    env e;

    env_open(&e, 5, &o, &fenced);
    for (i = 2; i < 5; i++)
        fake_set(e.f, i, FAKE_SILENT, 0);
    for (i = 0; i < 2; i++)
        fake_set_script(e.f, i, REDLOCK__SCRIPT_ABORT, FAKE_SILENT, 0);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_ENO_QUORUM);
    ck_assert_uint_eq(holders(&e, 5), 2);
    stored = fake_get_u64(e.f, 0, TOKEN_KEY);
    ck_assert_uint_gt(stored, 0);

    for (i = 0; i < 5; i++) {
        fake_set(e.f, i, FAKE_REPLY, 1);
        if (i < 2)
            fake_set_script(e.f, i, REDLOCK__SCRIPT_ABORT, FAKE_SILENT, 0);
    }
    fake_advance_ms(e.f, 1);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    token = token_of(&e);
    ck_assert_uint_gt(token, stored);
    for (i = 0; i < 5; i++)
        ck_assert_int_eq(fake_hash_count(e.f, i, NAME, e.field), 1);

    /* The first attempt's aborts arrive now, from the background. */
    for (i = 0; i < 2; i++)
        fake_clear_script(e.f, i, REDLOCK__SCRIPT_ABORT);
    for (i = 0; i < 4; i++) {
        fake_advance_ms(e.f, 250);
        redlock__watchdog_tick(e.c);
    }
    ck_assert_uint_ge(fake_count(e.f, 0, 0, REDLOCK__SCRIPT_ABORT), 2);
    ck_assert_uint_eq(holders(&e, 5), 5);
    ck_assert_int_eq(redlock_is_held_as(e.l, OWNER, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    assert_released_everywhere(&e);
    env_close(&e);
}
END_TEST

/*
 * Releases owed to a frozen node are not resent on every tick: the node
 * gets one probe at a time, with a back-off that doubles to a few
 * seconds, and everything once it answers again. Unanswered background
 * calls used to go out every 100-200 ms each, thousands of them.
 */
START_TEST(background_calls_back_off_on_silent_node)
{
    enum { LOCKS = 200 };
    redlock_lock *locks[LOCKS];
    redlock_options o = opts_timeout(20);
    size_t before, during, k;
    char name[32];
    int i;
    env e;

    o.watchdog_lease_ms = 60000;
    env_open(&e, 5, &o, NULL);
    for (k = 0; k < LOCKS; k++) {
        snprintf(name, sizeof(name), "bulk-%zu", k);
        ck_assert_int_eq(redlock_lock_new(e.c, name, NULL, &locks[k]), REDLOCK_OK);
        ck_assert_int_eq(redlock_acquire_as(locks[k], OWNER, 0, 60000), REDLOCK_OK);
    }
    fake_set(e.f, 4, FAKE_SILENT, 0);
    before = fake_ncalls(e.f);
    for (k = 0; k < LOCKS; k++)
        ck_assert_int_eq(redlock_unlock_as(locks[k], OWNER), REDLOCK_OK);
    /* Eight seconds frozen, a tick every 100 ms. */
    for (i = 0; i < 80; i++) {
        fake_advance_ms(e.f, 100);
        redlock__watchdog_tick(e.c);
    }
    during = fake_count(e.f, before, 4, REDLOCK__SCRIPT_RELEASE);
    /* The foreground sends (not waited for) plus a handful of probes. */
    ck_assert_uint_le(during, LOCKS + 12);
    fake_set(e.f, 4, FAKE_REPLY, 1);
    for (i = 0; i < 70; i++) {
        fake_advance_ms(e.f, 100);
        redlock__watchdog_tick(e.c);
    }
    /* Once answered, every owed release goes once more, no more. */
    ck_assert_uint_le(fake_count(e.f, before, 4, REDLOCK__SCRIPT_RELEASE), during + LOCKS + 2);
    for (k = 0; k < LOCKS; k++) {
        snprintf(name, sizeof(name), "bulk-%zu", k);
        ck_assert_uint_eq(fake_hash_len(e.f, 4, name), 0);
        redlock_lock_free(locks[k]);
    }
    env_close(&e);
}
END_TEST

/* redlock_client_flush() sends what is owed at once, whatever the
 * back-off, and says whether anything is still unanswered. */
START_TEST(flush_sends_owed_calls_now)
{
    redlock_options o = opts_timeout(20);
    size_t before;
    env e;

    env_open(&e, 5, &o, NULL);
    ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 10000), REDLOCK_OK);
    fake_set(e.f, 4, FAKE_SILENT, 0);
    ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
    ck_assert_int_eq(fake_hash_count(e.f, 4, NAME, e.field), 1);
    before = fake_ncalls(e.f);
    /* The release is in flight on the frozen node: the flush waits for
     * it rather than sending it twice. */
    ck_assert_int_eq(redlock_client_flush(e.c, 30), REDLOCK_ETIMEOUT);
    ck_assert_uint_eq(fake_count(e.f, before, 4, REDLOCK__SCRIPT_RELEASE), 0);
    fake_set(e.f, 4, FAKE_REPLY, 1);
    ck_assert_int_eq(redlock_client_flush(e.c, 30), REDLOCK_OK);
    ck_assert_uint_eq(holders(&e, 5), 0);
    ck_assert_int_eq(redlock_client_flush(e.c, 30), REDLOCK_OK);
    ck_assert_int_eq(redlock_client_flush(e.c, -1), REDLOCK_EINVAL);
    env_close(&e);
}
END_TEST

/* Many acquisitions with random minority faults (restart with an empty
 * store, frozen member, member held elsewhere, failing write-back) and
 * random pauses: every token is larger than the one before, and a quorum
 * of members stores at least the current token. */
START_TEST(fencing_tokens_monotonic_over_many_acquisitions)
{
    uint64_t last = 0;
    int iter, ok = 0;
    env e;

    lcg_state = 20240601u;
    env_open(&e, 5, NULL, &fenced);
    for (iter = 0; iter < 300; iter++) {
        size_t i, stored = 0, faulty = lcg() % 3;
        unsigned char bad[5] = {0};
        uint64_t t;

        for (i = 0; i < faulty; i++) {
            size_t m = lcg() % 5;

            bad[m] = 1;
            switch (lcg() % 4) {
            case 0:
                fake_flush(e.f, m);
                break;
            case 1:
                fake_set(e.f, m, FAKE_SILENT, 0);
                break;
            case 2:
                fake_hold(e.f, m, NAME, FOREIGN, 1, 30000);
                break;
            default:
                fake_set_script(e.f, m, REDLOCK__SCRIPT_FENCE_STORE, FAKE_ERROR_REPLY, 1);
                break;
            }
        }
        fake_advance_ms(e.f, lcg() % 50);
        ck_assert_int_eq(redlock_acquire_as(e.l, OWNER, 0, 5000), REDLOCK_OK);
        ok++;
        t = token_of(&e);
        ck_assert_msg(t > last, "iteration %d: token %llu after %llu", iter,
                      (unsigned long long)t, (unsigned long long)last);
        last = t;
        for (i = 0; i < 5; i++)
            stored += fake_get_u64(e.f, i, TOKEN_KEY) >= t;
        ck_assert_uint_ge(stored, 3);
        /* Heal, release, and let the background finish owed releases. */
        for (i = 0; i < 5; i++) {
            fake_set(e.f, i, FAKE_REPLY, 1);
            fake_clear_script(e.f, i, REDLOCK__SCRIPT_FENCE_STORE);
        }
        ck_assert_int_eq(redlock_unlock_as(e.l, OWNER), REDLOCK_OK);
        for (i = 0; i < 5; i++)
            if (bad[i] && fake_hash_count(e.f, i, NAME, FOREIGN) > 0)
                fake_flush(e.f, i);
        fake_advance_ms(e.f, 250);
        redlock__watchdog_tick(e.c);
        ck_assert_uint_eq(holders(&e, 5), 0);
    }
    ck_assert_int_eq(ok, 300);
    env_close(&e);
}
END_TEST

/* The fenced write against a storage node: equal and higher tokens are
 * applied, a lower one is refused with ESTALE_TOKEN and changes nothing. */
START_TEST(fenced_set_rules)
{
    env e;

    env_open(&e, 2, NULL, NULL);
    ck_assert_int_eq(redlock_fenced_set(e.c, 1, "acct", "100", 3, 10), REDLOCK_OK);
    ck_assert_int_eq(fake_hash_count(e.f, 1, "acct", "fence_token"), 10);
    ck_assert_int_eq(redlock_fenced_set(e.c, 1, "acct", "200", 3, 10), REDLOCK_OK);
    ck_assert_int_eq(fake_hash_count(e.f, 1, "acct", "value"), 200);
    ck_assert_int_eq(redlock_fenced_set(e.c, 1, "acct", "300", 3, 9), REDLOCK_ESTALE_TOKEN);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "10"));
    ck_assert_int_eq(fake_hash_count(e.f, 1, "acct", "value"), 200);
    ck_assert_int_eq(fake_hash_count(e.f, 1, "acct", "fence_token"), 10);
    ck_assert_int_eq(redlock_fenced_set(e.c, 1, "acct", "400", 3, 11), REDLOCK_OK);
    ck_assert_int_eq(fake_hash_count(e.f, 1, "acct", "value"), 400);
    ck_assert_int_eq(fake_hash_len(e.f, 0, "acct"), 0);
    ck_assert_int_eq(redlock_fenced_set(e.c, 2, "acct", "1", 1, 99), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_fenced_set(e.c, 1, "", "1", 1, 99), REDLOCK_EINVAL);
    fake_set(e.f, 1, FAKE_SILENT, 0);
    ck_assert_int_eq(redlock_fenced_set(e.c, 1, "acct", "500", 3, 12), REDLOCK_ETIMEOUT);
    fake_set(e.f, 1, FAKE_ERROR_REPLY, 1);
    fake_set_error(e.f, 1, "OOM command not allowed");
    ck_assert_int_eq(redlock_fenced_set(e.c, 1, "acct", "500", 3, 12), REDLOCK_EOOM);
    env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */

static void add(Suite *s, const char *name, const TTest *t)
{
    TCase *tc = tcase_create(name);

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t);
    suite_add_tcase(s, tc);
}

int main(void)
{
    Suite *s = suite_create("quorum-unit");
    SRunner *sr;
    int failed;

    add(s, "quorum_math", quorum_defaults_and_bounds);
    add(s, "quorum_math", invalid_members_are_refused);
    add(s, "quorum_math", grant_iff_quorum_free);
    add(s, "quorum_math", multilock_different_names);
    add(s, "quorum_math", single_node_semantics);
    add(s, "decide_early", early_success_slow_minority);
    add(s, "decide_early", early_failure_when_quorum_unreachable);
    add(s, "decide_early", failure_releases_every_member_including_timed_out);
    add(s, "decide_early", lost_reply_grant_is_undone);
    add(s, "validity", validity_is_lease_minus_elapsed_minus_drift);
    add(s, "validity", lease_floor_refuses_short_lease);
    add(s, "validity", waiter_wakes_on_release);
    add(s, "release", unlock_with_frozen_minority_leaves_release_in_flight);
    add(s, "release", unlock_returns_at_quorum_while_two_are_slow);
    add(s, "release", straggler_lost_after_quorum_is_resent_once);
    add(s, "release", multilock_unlock_waits_for_all);
    add(s, "release", background_release_gives_up_after_lease);
    add(s, "release", unlock_skips_waiting_for_silent_node);
    add(s, "release", release_retry_is_idempotent);
    add(s, "release", force_unlock_counts_deleted_members);
    add(s, "release", late_release_spares_newer_hold_of_same_owner);
    add(s, "release", release_of_hold_without_generation);
    add(s, "release", reentry_learns_generation_of_fresh_member);
    add(s, "release", fresh_hold_forgets_earlier_generations);
    add(s, "watchdog", reentry_during_loss_is_undone);
    add(s, "watchdog", reentry_after_loss_reports_it);
    add(s, "release", generation_list_round_trip);
    add(s, "watchdog", watchdog_renews_on_quorum);
    add(s, "watchdog", watchdog_loss_when_keys_vanish);
    add(s, "watchdog", watchdog_loss_when_quorum_stops_answering);
    add(s, "watchdog", watchdog_restores_vanished_member);
    add(s, "watchdog", watchdog_never_restores_without_genuine_quorum);
    add(s, "watchdog", watchdog_loss_spares_hold_taken_again);
    add(s, "watchdog", on_lost_may_take_another_lock_of_the_same_tick);
    add(s, "watchdog", on_lost_may_unlock_and_free_its_lock);
    add(s, "fencing", fencing_token_is_max_of_candidates);
    add(s, "fencing", fencing_time_term_uses_fastest_member);
    add(s, "fencing", fencing_writeback_needs_quorum);
    add(s, "fencing", fencing_writeback_silent_or_not_held);
    add(s, "fencing", fencing_frozen_minority_does_not_delay);
    add(s, "fencing", fencing_reentry_keeps_token);
    add(s, "fencing", unfenced_lock_has_no_token);
    add(s, "fencing", fencing_restart_with_empty_store);
    add(s, "fencing", fencing_tokens_monotonic_over_many_acquisitions);
    add(s, "fencing", fenced_set_rules);
    add(s, "namespace", lock_names_cannot_reach_companion_keys);
    add(s, "namespace", latch_key_in_room_or_heap);
    add(s, "delivery", fresh_acquire_replaces_own_leftover);
    add(s, "delivery", background_calls_back_off_on_silent_node);
    add(s, "delivery", flush_sends_owed_calls_now);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
