/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration tests of the quorum coordinator (RedLock / MultiLock) on the
 * fixture's five plain redis-server processes, with real faults: SIGSTOP /
 * SIGCONT (frozen node), SIGKILL + empty restart, keys deleted behind the
 * holder's back. Every case checks return codes and what the nodes store.
 *
 * Each case is its own TCase whose unchecked fixture (run in the parent
 * process, also after a failed or timed-out case) thaws and restarts nodes,
 * so one failure never leaves a frozen or dead node to the next case.
 */
#include "core/util.h"
#include "lock/hold.h"
#include "lock/internal.h"
#include "lock/watchdog.h"
#include "redlock/redlock.h"
#include "resp/scripts.h"
#include "rig_env.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_NODES 5
#define FIELD_CAP 80

/* ------------------------------------------------------------------------ */
/* Helpers. */

static redlock_client *client_with(int node_timeout_ms, int watchdog_lease_ms,
                                   double drift_factor)
{
    redlock_options o;
    redlock_client *c = NULL;
    int rc;

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = node_timeout_ms;
    o.watchdog_lease_ms = watchdog_lease_ms;
    o.drift_factor = drift_factor;
    rc = redlock_client_new(&c, rig_plain_uris(), N_NODES, &o);
    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s", redlock_last_error());
    return c;
}

static redlock_client *client_default(void)
{
    return client_with(0, 0, 0);
}

static redlock_lock *lock_with_quorum(redlock_client *c, const char *name, int quorum)
{
    redlock_lock_options lo;
    redlock_lock *l = NULL;
    int rc;

    memset(&lo, 0, sizeof(lo));
    lo.quorum = quorum;
    rc = redlock_lock_new(c, name, &lo, &l);
    ck_assert_msg(rc == REDLOCK_OK, "lock_new: %s", redlock_last_error());
    return l;
}

/* The hash field the calling thread's holds use: "<client-id>:<tid>". */

static int key_exists(size_t node, const char *name)
{
    char args[256];

    snprintf(args, sizeof(args), "EXISTS '%s'", name);
    return strcmp(rig_cli(node, args), "1") == 0;
}

static long long node_pttl(size_t node, const char *name)
{
    char args[256];

    snprintf(args, sizeof(args), "PTTL '%s'", name);
    return atoll(rig_cli(node, args));
}

/* The hold count stored for field on node, or -1 if the field is absent. */
static long long node_count(size_t node, const char *name, const char *field)
{
    char args[512];
    const char *out;

    snprintf(args, sizeof(args), "HGET '%s' '%s'", name, field);
    out = rig_cli(node, args);
    return *out ? atoll(out) : -1;
}

/*
 * The count on node once it settles: success is decided as soon as Q
 * members granted, so the other members' grants may land a moment later.
 */
static long long settled_count(size_t node, const char *name, const char *field,
                               long long expect)
{
    long long n = node_count(node, name, field);
    int i;

    for (i = 0; i < 50 && n != expect; i++) {
        rig_sleep_ms(20);
        n = node_count(node, name, field);
    }
    return n;
}

/* Makes "foreign:1" hold name on node for 30 s, as another client would. */
static void hold_foreign(size_t node, const char *name)
{
    char args[256];

    snprintf(args, sizeof(args), "HSET '%s' foreign:1 1", name);
    ck_assert_str_eq(rig_cli(node, args), "1");
    snprintf(args, sizeof(args), "PEXPIRE '%s' 30000", name);
    ck_assert_str_eq(rig_cli(node, args), "1");
}

static void del_key(size_t node, const char *name)
{
    char args[256];

    snprintf(args, sizeof(args), "DEL '%s'", name);
    rig_cli(node, args);
}

/* The node holds exactly the foreign holder, untouched. */
static void assert_foreign_only(size_t node, const char *name)
{
    char args[256];

    snprintf(args, sizeof(args), "HGETALL '%s'", name);
    ck_assert_str_eq(rig_cli(node, args), "foreign:1\n1");
}

/* Polls until name exists on none of the first n nodes; the time it took
 * in ms, or -1 if some node still had it after timeout_ms. */
static int64_t wait_gone(const char *name, size_t n, int64_t timeout_ms)
{
    int64_t start = rig_now_ms();
    size_t i;

    for (;;) {
        int any = 0;

        for (i = 0; i < n && !any; i++)
            any = key_exists(i, name);
        if (!any)
            return rig_now_ms() - start;
        if (rig_now_ms() - start > timeout_ms)
            return -1;
        rig_sleep_ms(20);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static int64_t median(int64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_i64);
    return v[n / 2];
}

static redlock_member_outcome outcome(redlock_lock *l, size_t m)
{
    redlock_member_report r;

    ck_assert_int_eq(redlock_lock_report(l, m, &r), REDLOCK_OK);
    return r.outcome;
}


/* Records on_lost calls (they run on the watchdog thread). */
typedef struct lost_probe {
    atomic_int calls;
    atomic_int reason;
    atomic_llong at_ms;
    _Atomic uint64_t owner;
    redlock_lock *_Atomic lock;
    redlock_client *client;             /* set: note what was owed when told */
    _Atomic uint64_t owed_when_told;    /* background releases queued by then */
    int flush_when_told;                /* set: flush from the callback, */
    atomic_int flush_rc;                /* ... with this answer */
    atomic_llong flush_ms;              /* ... after this long */
} lost_probe;

static void on_lost(void *ud, redlock_lock *lock, uint64_t owner, int reason)
{
    lost_probe *p = ud;

    atomic_store(&p->reason, reason);
    atomic_store(&p->owner, owner);
    atomic_store(&p->lock, lock);
    atomic_store(&p->at_ms, (long long)rig_now_ms());
    if (p->client)
        atomic_store(&p->owed_when_told, rig_stats(p->client).background_releases);
    if (p->client && p->flush_when_told) {
        int64_t t0 = rig_now_ms();

        atomic_store(&p->flush_rc, redlock_client_flush(p->client, 5000));
        atomic_store(&p->flush_ms, (long long)(rig_now_ms() - t0));
    }
    atomic_fetch_add(&p->calls, 1);
}

/* ------------------------------------------------------------------------ */
/* 1. Quorum math on the real rig. */

/* Each case starts on a healthy rig (every node thawed or restarted). */

START_TEST(test_quorum_math)
{
    redlock_client *c = client_default();
    redlock_lock *l, *all, *two, *bad = (redlock_lock *)&bad;
    redlock_lock_options lo;
    redlock_member ms[3] = {{0, "m"}, {1, "m"}, {4, "m"}};
    char name[64], field[FIELD_CAP];
    size_t i;

    rig_unique_name(name, sizeof(name), "q", "math");
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));

    l = lock_with_quorum(c, name, 0);
    all = lock_with_quorum(c, name, REDLOCK_QUORUM_ALL);
    two = lock_with_quorum(c, name, 2);
    ck_assert_uint_eq(redlock_lock_member_count(l), 5);
    ck_assert_int_eq(redlock_lock_quorum(l), 3);
    ck_assert_int_eq(redlock_lock_quorum(all), 5);
    ck_assert_int_eq(redlock_lock_quorum(two), 2);

    /* Quorum values that are out of range. */
    memset(&lo, 0, sizeof(lo));
    for (i = 0; i < 3; i++) {
        static const int bad_q[3] = {6, -2, 1000};

        lo.quorum = bad_q[i];
        ck_assert_int_eq(redlock_lock_new(c, name, &lo, &bad), REDLOCK_EINVAL);
        ck_assert_ptr_null(bad);
        bad = (redlock_lock *)&bad;
    }
    lo.quorum = 4;
    ck_assert_int_eq(redlock_multilock_new(c, ms, 3, &lo, &bad), REDLOCK_EINVAL);
    ck_assert_ptr_null(bad);
    lo.quorum = 0;
    ck_assert_int_eq(redlock_multilock_new(c, ms, 0, &lo, &bad), REDLOCK_EINVAL);
    ms[2].node = N_NODES;
    ck_assert_int_eq(redlock_multilock_new(c, ms, 3, &lo, &bad), REDLOCK_EINVAL);
    ms[2].node = 4;
    ck_assert_int_eq(redlock_multilock_new(c, ms, 3, &lo, &bad), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_quorum(bad), 2);
    redlock_lock_free(bad);
    lo.quorum = REDLOCK_QUORUM_ALL;
    ck_assert_int_eq(redlock_multilock_new(c, ms, 3, &lo, &bad), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_quorum(bad), 3);
    redlock_lock_free(bad);

    /* Healthy: held with the lease as PEXPIRE on at least a quorum, and
     * nowhere counted twice. On a loaded machine a member may miss its
     * node timeout after Q grants decided: it is then cancelled, not held. */
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 20000), REDLOCK_OK);
    {
        int holding = 0;

        for (i = 0; i < N_NODES; i++) {
            long long count = settled_count(i, name, field, 1), pttl = node_pttl(i, name);

            ck_assert_msg(count == 1 || count == -1, "node %zu count %lld", i, count);
            if (count == 1) {
                holding++;
                ck_assert_msg(pttl > 0 && pttl <= 20000, "node %zu pttl %lld", i, pttl);
            }
        }
        ck_assert_int_ge(holding, 3);
    }
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_ge(wait_gone(name, N_NODES, 0), 0);

    /* Another owner on two nodes: three free members still make Q = 3,
     * but not MultiLock's Q = 5. */
    hold_foreign(0, name);
    hold_foreign(1, name);
    ck_assert_int_eq(redlock_try_lock_for(all, 0, 20000), REDLOCK_EBUSY);
    for (i = 2; i < N_NODES; i++)
        ck_assert_msg(!key_exists(i, name), "MultiLock left a key on node %zu", i);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 20000), REDLOCK_OK);
    for (i = 2; i < N_NODES; i++)
        ck_assert_int_eq(settled_count(i, name, field, 1), 1);
    assert_foreign_only(0, name);
    assert_foreign_only(1, name);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    for (i = 2; i < N_NODES; i++)
        ck_assert(!key_exists(i, name));
    assert_foreign_only(0, name);
    assert_foreign_only(1, name);

    /* On three nodes: Q = 3 is out of reach, a custom Q = 2 is not. */
    hold_foreign(2, name);
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 20000), REDLOCK_EBUSY);
    ck_assert(!key_exists(3, name));
    ck_assert(!key_exists(4, name));
    ck_assert_int_eq(redlock_try_lock_for(two, 0, 20000), REDLOCK_OK);
    ck_assert_int_eq(node_count(3, name, field), 1);
    ck_assert_int_eq(node_count(4, name, field), 1);
    ck_assert_int_eq(redlock_unlock(two), REDLOCK_OK);
    ck_assert(!key_exists(3, name));
    ck_assert(!key_exists(4, name));
    for (i = 0; i < 3; i++) {
        assert_foreign_only(i, name);
        del_key(i, name);
    }

    redlock_lock_free(two);
    redlock_lock_free(all);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 2. Early success: two frozen nodes must not delay a quorum of three. */

#define CYCLES 20
#define NODE_TIMEOUT_MS 200

/* One acquire (timed) + release cycle; returns the acquire time in us. */
static int64_t timed_cycle(redlock_lock *l)
{
    int64_t t0 = rig_now_us(), t;
    int rc = redlock_try_lock_for(l, 0, 10000);

    t = rig_now_us() - t0;
    ck_assert_msg(rc == REDLOCK_OK, "acquire: %s", redlock_last_error());
    return t;
}

START_TEST(test_early_success_two_frozen)
{
    redlock_client *c = client_with(NODE_TIMEOUT_MS, 0, 0);
    char name[64];
    redlock_lock *l;
    int64_t healthy[CYCLES], frozen[CYCLES], h, f, bound;
    size_t i, m;

    rig_unique_name(name, sizeof(name), "q", "early");
    l = lock_with_quorum(c, name, 0);
    /* Warm up: connections and script caches. */
    for (i = 0; i < 3; i++) {
        timed_cycle(l);
        ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    }
    for (i = 0; i < CYCLES; i++) {
        healthy[i] = timed_cycle(l);
        ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    }
    ck_assert_int_eq(rig_node("freeze", 3), 0);
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    for (i = 0; i < CYCLES; i++) {
        frozen[i] = timed_cycle(l);
        /* The frozen members never answered in time. */
        for (m = 0; m < 3; m++)
            ck_assert_int_eq(outcome(l, m), REDLOCK_MEMBER_GRANTED);
        for (m = 3; m < N_NODES; m++) {
            redlock_member_outcome o = outcome(l, m);

            ck_assert_msg(o == REDLOCK_MEMBER_NONE || o == REDLOCK_MEMBER_TIMEOUT,
                          "frozen member %zu: outcome %d", m, (int)o);
        }
        ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    }
    h = median(healthy, CYCLES);
    f = median(frozen, CYCLES);
    bound = 3 * h > h + 20000 ? 3 * h : h + 20000;
    fprintf(stderr, "early success: healthy median %lld us, 2 frozen median %lld us "
                    "(bound %lld us, node timeout %d ms)\n",
            (long long)h, (long long)f, (long long)bound, NODE_TIMEOUT_MS);
    ck_assert_msg(f <= bound, "with 2 of 5 frozen the median acquire took %lld us, "
                              "healthy %lld us", (long long)f, (long long)h);
    ck_assert_int_eq(rig_node("thaw", 3), 0);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    /* Everything the frozen nodes granted late is released again. */
    ck_assert_msg(wait_gone(name, N_NODES, 3000) >= 0, "a key of %s was left behind", name);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 3. Prompt failure with three frozen nodes, and cleanup after the thaw. */

START_TEST(test_prompt_failure_three_frozen)
{
    redlock_client *c = client_with(NODE_TIMEOUT_MS, 0, 0);
    char name[64];
    redlock_lock *l;
    int64_t t0, took, gone;
    int rc, timeouts = 0;
    size_t m;

    rig_unique_name(name, sizeof(name), "q", "prompt");
    l = lock_with_quorum(c, name, 0);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK); /* warm connections */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    for (m = 2; m < N_NODES; m++)
        ck_assert_int_eq(rig_node("freeze", m), 0);

    t0 = rig_now_ms();
    rc = redlock_try_lock(l);
    took = rig_now_ms() - t0;
    fprintf(stderr, "3 of 5 frozen: try_lock -> %s in %lld ms\n", redlock_err_name(rc),
            (long long)took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "try_lock gave %s: %s", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_msg(took < NODE_TIMEOUT_MS + 300, "try_lock took %lld ms", (long long)took);
    ck_assert_int_eq(outcome(l, 0), REDLOCK_MEMBER_GRANTED);
    ck_assert_int_eq(outcome(l, 1), REDLOCK_MEMBER_GRANTED);
    for (m = 2; m < N_NODES; m++) {
        redlock_member_outcome o = outcome(l, m);

        ck_assert(o == REDLOCK_MEMBER_NONE || o == REDLOCK_MEMBER_TIMEOUT);
        timeouts += o == REDLOCK_MEMBER_TIMEOUT;
    }
    ck_assert_int_ge(timeouts, 1);
    /* The two grants were undone. */
    ck_assert(!key_exists(0, name));
    ck_assert(!key_exists(1, name));

    for (m = 2; m < N_NODES; m++)
        ck_assert_int_eq(rig_node("thaw", m), 0);
    /* The acquire the frozen nodes now run must not leave a grant. */
    gone = wait_gone(name, N_NODES, 3000);
    ck_assert_msg(gone >= 0, "a key of %s outlived the thaw", name);
    rig_sleep_ms(300);
    ck_assert_int_ge(wait_gone(name, N_NODES, 0), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 4. unlock() with two frozen nodes is prompt; they are released later. */

START_TEST(test_unlock_two_frozen)
{
    redlock_client *c = client_with(NODE_TIMEOUT_MS, 0, 0);
    char name[64], field[FIELD_CAP];
    redlock_lock *l;
    int64_t t0, took, gone;
    int rc;
    size_t i;

    rig_unique_name(name, sizeof(name), "q", "unlock");
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    l = lock_with_quorum(c, name, 0);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    for (i = 0; i < N_NODES; i++)
        ck_assert_int_eq(settled_count(i, name, field, 1), 1);
    ck_assert_int_eq(rig_node("freeze", 3), 0);
    ck_assert_int_eq(rig_node("freeze", 4), 0);

    t0 = rig_now_ms();
    rc = redlock_unlock(l);
    took = rig_now_ms() - t0;
    fprintf(stderr, "unlock with 2 of 5 frozen: %s in %lld ms\n", redlock_err_name(rc),
            (long long)took);
    ck_assert_msg(rc == REDLOCK_OK, "unlock: %s", redlock_last_error());
    ck_assert_msg(took < NODE_TIMEOUT_MS + 300, "unlock took %lld ms", (long long)took);
    for (i = 0; i < 3; i++)
        ck_assert_msg(!key_exists(i, name), "node %zu still has the key", i);
    /* Their releases are in flight (parked), not owed to the background. */
    ck_assert_uint_eq(rig_stats(c).background_releases, 0);
    ck_assert_uint_eq(redlock__retry_parked(&c->retry), 2);

    ck_assert_int_eq(rig_node("thaw", 3), 0);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    gone = wait_gone(name, N_NODES, 2000);
    fprintf(stderr, "frozen members released %lld ms after the thaw\n", (long long)gone);
    ck_assert_msg(gone >= 0, "the frozen nodes were not released in the background");
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5. The watchdog keeps a quorum lock across a crash + empty restart. */

#define WD_LEASE_MS 1500

static void run_id(size_t node, char *buf, size_t cap)
{
    const char *info = rig_cli(node, "INFO server"), *p = strstr(info, "run_id:");

    ck_assert_ptr_nonnull(p);
    snprintf(buf, cap, "%.40s", p + 7);
}

START_TEST(test_watchdog_survives_restart)
{
    redlock_client *c = client_with(100, WD_LEASE_MS, 0);
    lost_probe probe;
    char name[64], field[FIELD_CAP], sentinel[80], args[128], before[48], after[48];
    redlock_lock *l;
    int64_t t0, back = -1;
    int held;
    size_t i;

    memset(&probe, 0, sizeof(probe));
    rig_unique_name(name, sizeof(name), "q", "restart");
    snprintf(sentinel, sizeof(sentinel), "%s:sentinel", name);
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    l = lock_with_quorum(c, name, 0);
    redlock_lock_set_on_lost(l, on_lost, &probe);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    for (i = 0; i < N_NODES; i++)
        ck_assert_int_eq(settled_count(i, name, field, 1), 1);

    snprintf(args, sizeof(args), "SET '%s' 1", sentinel);
    ck_assert_str_eq(rig_cli(2, args), "OK");
    run_id(2, before, sizeof(before));
    ck_assert_int_eq(rig_node("kill", 2), 0);
    /* Renewal ticks with the node down: four members still renew. */
    rig_sleep_ms(WD_LEASE_MS / 2);
    ck_assert_int_eq(atomic_load(&probe.calls), 0);
    ck_assert_int_eq(rig_node("restart", 2), 0);
    run_id(2, after, sizeof(after));
    ck_assert_str_ne(before, after);
    ck_assert_msg(!key_exists(2, sentinel), "node 2 did not restart empty");

    /* The watchdog restores the vanished member. */
    t0 = rig_now_ms();
    while (rig_now_ms() - t0 < 3 * WD_LEASE_MS) {
        if (node_count(2, name, field) == 1) {
            back = rig_now_ms() - t0;
            break;
        }
        rig_sleep_ms(20);
    }
    fprintf(stderr, "restarted member restored after %lld ms\n", (long long)back);
    ck_assert_msg(back >= 0, "the key did not reappear on the restarted node");

    /* Held for more than a lease after that, never lost. */
    t0 = rig_now_ms();
    while (rig_now_ms() - t0 < WD_LEASE_MS + 300) {
        for (i = 0; i < N_NODES; i++) {
            long long pttl = node_pttl(i, name);

            ck_assert_msg(pttl > 0 && pttl <= WD_LEASE_MS, "node %zu pttl %lld", i, pttl);
        }
        rig_sleep_ms(100);
    }
    ck_assert_int_eq(atomic_load(&probe.calls), 0);
    ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_ge(wait_gone(name, N_NODES, 0), 0);
    ck_assert_int_eq(atomic_load(&probe.calls), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 6. The watchdog reports the loss of 3 of 5 members. */

/* Waits up to limit_ms for the next watchdog tick to finish; nonzero if
 * one did. */
static int wait_for_tick(redlock_client *c, int64_t limit_ms)
{
    uint64_t ticks = rig_stats(c).watchdog_ticks;
    int64_t t0 = rig_now_ms();

    while (rig_stats(c).watchdog_ticks == ticks && rig_now_ms() - t0 < limit_ms)
        rig_sleep_ms(1);
    return rig_stats(c).watchdog_ticks > ticks;
}

START_TEST(test_watchdog_reports_loss)
{
    redlock_client *c = client_with(100, WD_LEASE_MS, 0);
    lost_probe probe;
    char name[64];
    redlock_lock *l;
    int64_t t_del, detect;
    int held;
    size_t i;

    memset(&probe, 0, sizeof(probe));
    rig_unique_name(name, sizeof(name), "q", "loss");
    l = lock_with_quorum(c, name, 0);
    redlock_lock_set_on_lost(l, on_lost, &probe);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);

    /* Delete right after a tick, so no tick sees only some of the three
     * gone (it would restore them: a genuine quorum still renewed). */
    ck_assert(wait_for_tick(c, 2 * WD_LEASE_MS));
    for (i = 0; i < 3; i++)
        del_key(i, name);
    t_del = rig_now_ms();

    while (atomic_load(&probe.calls) == 0 && rig_now_ms() - t_del < 3 * WD_LEASE_MS)
        rig_sleep_ms(5);
    ck_assert_int_eq(atomic_load(&probe.calls), 1);
    detect = atomic_load(&probe.at_ms) - t_del;
    fprintf(stderr, "loss reported %lld ms after the deletes (tick every %d ms)\n",
            (long long)detect, WD_LEASE_MS / 3);
    ck_assert_msg(detect <= WD_LEASE_MS / 3 + 400, "loss reported after %lld ms",
                  (long long)detect);
    ck_assert_int_eq(atomic_load(&probe.reason), REDLOCK_ENOT_OWNER);
    ck_assert_uint_eq(atomic_load(&probe.owner), redlock_thread_owner());
    ck_assert_ptr_eq(atomic_load(&probe.lock), l);
    ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);

    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENOT_OWNER);
    /* The surviving members are released, and nothing comes back. */
    ck_assert_msg(wait_gone(name, N_NODES, 1000) >= 0, "members 3, 4 were not released");
    rig_sleep_ms(2 * WD_LEASE_MS / 3 + 200);
    ck_assert_int_ge(wait_gone(name, N_NODES, 0), 0);
    ck_assert_int_eq(atomic_load(&probe.calls), 1);
    ck_assert_uint_eq(rig_stats(c).lost, 1);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* The watchdog declares a loss up to a retry interval before validity
 * ends, so the holder can stop in time; until then the holder may still
 * act. Its clean-up release must wait for that end: released at once, the
 * healthy members would let another owner in while this one still holds
 * validity the library gave it. */
#define HELD_BACK_LEASE_MS 3000

/* Follows the validity the holder of l is given, as a careful holder
 * does, until on_lost reports reason: returns when that validity ends
 * (rig_now_ms() time). */
static int64_t follow_until_lost(redlock_lock *l, lost_probe *probe, int reason)
{
    int64_t vend = 0, t0, early_ms;

    t0 = rig_now_ms();
    while (atomic_load(&probe->calls) == 0 && rig_now_ms() - t0 < 3 * HELD_BACK_LEASE_MS) {
        int64_t ttl;

        if (redlock_remaining_ttl(l, &ttl) == REDLOCK_OK && ttl > 0 &&
            rig_now_ms() + ttl > vend)
            vend = rig_now_ms() + ttl;
        rig_sleep_ms(2);
    }
    ck_assert_int_eq(atomic_load(&probe->calls), 1);
    ck_assert_int_eq(atomic_load(&probe->reason), reason);
    early_ms = vend - atomic_load(&probe->at_ms);
    fprintf(stderr, "loss reported %lld ms before validity ended\n", (long long)early_ms);
    ck_assert_msg(early_ms >= 0, "loss reported %lld ms after validity ended",
                  (long long)-early_ms);
    return vend;
}

/* Takes a watchdog hold through l, freezes three of the five members and
 * follows the holder's validity until the loss. */
static int64_t lose_for_want_of_quorum(redlock_lock *l, lost_probe *probe)
{
    size_t i;

    redlock_lock_set_on_lost(l, on_lost, probe);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(rig_node("freeze", i), 0);
    return follow_until_lost(l, probe, REDLOCK_ENO_QUORUM);
}

/* Until validity ends the members 'from' onwards still hold name: a check
 * that finished before then saw the key. Then they are released, long
 * before the keys would expire. */
static void held_until_validity_ends(const char *name, size_t from, int64_t vend)
{
    int64_t t0, gone_after;
    size_t i;
    int any = 1;

    while (rig_now_ms() < vend) {
        for (i = from; i < N_NODES; i++) {
            int there = key_exists(i, name);
            int64_t checked = rig_now_ms();

            ck_assert_msg(there || checked >= vend,
                          "member %zu released %lld ms before the lost hold's validity ended",
                          i, (long long)(vend - checked));
        }
        rig_sleep_ms(5);
    }
    t0 = rig_now_ms();
    while (any && rig_now_ms() - t0 < HELD_BACK_LEASE_MS / 2) {
        for (any = 0, i = from; i < N_NODES; i++)
            any |= key_exists(i, name);
        if (any)
            rig_sleep_ms(10);
    }
    gone_after = rig_now_ms() - vend;
    fprintf(stderr, "members released %lld ms after validity ended\n", (long long)gone_after);
    ck_assert_msg(!any, "members not released %lld ms after validity ended",
                  (long long)gone_after);
}

static int healthy_members_hold(const char *name)
{
    return key_exists(3, name) || key_exists(4, name);
}

START_TEST(test_loss_release_waits_for_validity)
{
    redlock_client *c = client_with(100, HELD_BACK_LEASE_MS, 0);
    lost_probe probe;
    char name[64];
    redlock_lock *l;
    int64_t vend;
    uint64_t owed_when_told;
    size_t i;

    memset(&probe, 0, sizeof(probe));
    probe.client = c;
    rig_unique_name(name, sizeof(name), "q", "heldback");
    l = lock_with_quorum(c, name, 0);
    vend = lose_for_want_of_quorum(l, &probe);
    /* Owed, not yet sendable, from the moment the holder is told (a flush
     * it makes at once must count the release): a flush with no time to
     * wait says so. */
    owed_when_told = atomic_load(&probe.owed_when_told);
    ck_assert_msg(owed_when_told == N_NODES,
                  "%llu of %d releases were owed when the holder was told of the loss",
                  (unsigned long long)owed_when_told, N_NODES);
    ck_assert_int_eq(redlock_client_flush(c, 0), REDLOCK_ETIMEOUT);
    held_until_validity_ends(name, 3, vend);
    /* Thawed, the frozen members take their part too, and nothing stays
     * owed. */
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(rig_node("thaw", i), 0);
    ck_assert_int_eq(redlock_client_flush(c, 3000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* A lock that needs every member is lost when one member's key vanishes,
 * but nobody else can take it while the other four still hold it: their
 * release waits for the holder's validity to end as well. (With a
 * majority quorum and three keys gone, test_watchdog_reports_loss: others
 * can take it anyway, and what is left is released at once.) */
START_TEST(test_multilock_loss_release_waits_for_validity)
{
    redlock_client *c = client_with(100, HELD_BACK_LEASE_MS, 0);
    lost_probe probe;
    char name[64];
    redlock_lock *l;
    int64_t vend;

    memset(&probe, 0, sizeof(probe));
    rig_unique_name(name, sizeof(name), "q", "allheld");
    l = lock_with_quorum(c, name, REDLOCK_QUORUM_ALL);
    redlock_lock_set_on_lost(l, on_lost, &probe);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    wait_for_tick(c, 2 * HELD_BACK_LEASE_MS);
    del_key(0, name);
    vend = follow_until_lost(l, &probe, REDLOCK_ENOT_OWNER);
    held_until_validity_ends(name, 1, vend);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* A flush made from on_lost does not sleep until the held-back release may
 * go: the tick, and every other hold's renewal, would wait with it. One
 * made by the holder's thread does, and a signal that interrupts its sleep
 * does not end it early. */
/* A flush that returned OK left no member holding the lost hold's key;
 * the unlock reports the loss. */
static void end_after_flush(redlock_client *c, redlock_lock *l, const char *name)
{
    size_t i;

    for (i = 0; i < N_NODES; i++)
        ck_assert_msg(!key_exists(i, name), "member %zu still holds the key after the flush", i);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    redlock_lock_free(l);
    redlock_client_free(c);
}

typedef struct poke {
    pthread_t target;
    pthread_t th;
} poke;

static void no_op(int sig)
{
    (void)sig;
}

static void *poke_later(void *arg)
{
    poke *p = arg;

    rig_sleep_ms(50);
    pthread_kill(p->target, SIGUSR1);
    return NULL;
}

START_TEST(test_flush_waits_out_held_back_release)
{
    redlock_client *c = client_with(100, HELD_BACK_LEASE_MS, 0);
    struct sigaction sa, old;
    lost_probe probe;
    char name[64];
    redlock_lock *l;
    int64_t vend, t0;
    poke pk;
    int rc;

    memset(&probe, 0, sizeof(probe));
    probe.client = c;
    probe.flush_when_told = 1;
    rig_unique_name(name, sizeof(name), "q", "flushheld");
    l = lock_with_quorum(c, name, REDLOCK_QUORUM_ALL);
    redlock_lock_set_on_lost(l, on_lost, &probe);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    wait_for_tick(c, 2 * HELD_BACK_LEASE_MS);
    del_key(0, name);
    vend = follow_until_lost(l, &probe, REDLOCK_ENOT_OWNER);
    fprintf(stderr, "flush from on_lost: %s after %lld ms\n",
            redlock_err_name(atomic_load(&probe.flush_rc)), (long long)atomic_load(&probe.flush_ms));
    ck_assert_msg(atomic_load(&probe.flush_rc) == REDLOCK_ETIMEOUT &&
                      atomic_load(&probe.flush_ms) < 200,
                  "a flush from on_lost: %s after %lld ms (the release is held back)",
                  redlock_err_name(atomic_load(&probe.flush_rc)),
                  (long long)atomic_load(&probe.flush_ms));

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = no_op;
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, &old), 0);
    pk.target = pthread_self();
    ck_assert_int_eq(pthread_create(&pk.th, NULL, poke_later, &pk), 0);
    t0 = rig_now_ms();
    rc = redlock_client_flush(c, 5000);
    pthread_join(pk.th, NULL);
    ck_assert_int_eq(sigaction(SIGUSR1, &old, NULL), 0);
    fprintf(stderr, "flush interrupted by a signal: %s after %lld ms, %lld ms after validity "
            "ended\n", redlock_err_name(rc), (long long)(rig_now_ms() - t0),
            (long long)(rig_now_ms() - vend));
    ck_assert_msg(rc == REDLOCK_OK, "flush: %s after %lld ms (%s)", redlock_err_name(rc),
                  (long long)(rig_now_ms() - t0), redlock_last_error());
    ck_assert_int_ge(rig_now_ms(), vend);
    end_after_flush(c, l, name);
}
END_TEST

/* When validity ends the watchdog's tick sends the held-back release. A
 * member frozen just before then (not known to be silent, so its call is
 * sent and waited for, up to a node timeout) keeps that call in flight in
 * the tick. A flush meanwhile finds nothing of it queued, yet it is
 * unanswered: the flush says so. */
START_TEST(test_flush_counts_release_in_flight_in_tick)
{
    redlock_client *c = NULL;
    lost_probe probe;
    char name[64];
    redlock_lock *l = NULL;
    int64_t vend = 0, frozen_at = 0;
    size_t i;
    int attempt, rc;

    /* The loss is reported a few hundred ms before validity ends, and each
     * freeze or thaw runs a script: on a slow build member 3 may be frozen
     * only after the tick released it. Such a set-up tests nothing, so it
     * is tried again with a new name (at most three times). */
    for (attempt = 0; attempt < 3; attempt++) {
        c = client_with(200, HELD_BACK_LEASE_MS, 0);
        memset(&probe, 0, sizeof(probe));
        rig_unique_name(name, sizeof(name), "q", "tickflight");
        l = lock_with_quorum(c, name, 0);
        vend = lose_for_want_of_quorum(l, &probe);
        ck_assert_int_eq(rig_node("freeze", 3), 0);
        frozen_at = rig_now_ms();
        for (i = 0; i < 3; i++)
            ck_assert_int_eq(rig_node("thaw", i), 0);
        if (frozen_at < vend - 20)
            break;
        fprintf(stderr, "member 3 frozen %lld ms after validity ended, trying again\n",
                (long long)(frozen_at - vend));
        ck_assert_int_eq(rig_node("thaw", 3), 0);
        ck_assert_int_eq(redlock_client_flush(c, 3000), REDLOCK_OK);
        end_after_flush(c, l, name);
    }
    ck_assert_msg(frozen_at < vend - 20, "member 3 was never frozen before validity ended");
    while (rig_now_ms() < vend + 30)
        rig_sleep_ms(2);
    rc = redlock_client_flush(c, 100);
    ck_assert_msg(rc == REDLOCK_ETIMEOUT,
                  "a flush while the tick waits for a frozen member: %s", redlock_err_name(rc));
    ck_assert_int_eq(rig_node("thaw", 3), 0);
    ck_assert_int_eq(redlock_client_flush(c, 3000), REDLOCK_OK);
    end_after_flush(c, l, name);
}
END_TEST

/* A client freed right after such a loss has no holder left that could be
 * acting: the held-back release goes out with its last flush, not lost
 * with the client (the keys would stay for a whole lease). */
START_TEST(test_client_free_sends_held_back_release)
{
    redlock_client *c = client_with(100, HELD_BACK_LEASE_MS, 0);
    lost_probe probe;
    char name[64];
    redlock_lock *l;
    int64_t vend, freed;

    memset(&probe, 0, sizeof(probe));
    rig_unique_name(name, sizeof(name), "q", "freeheld");
    l = lock_with_quorum(c, name, 0);
    vend = lose_for_want_of_quorum(l, &probe);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ELOST);
    redlock_lock_free(l);
    redlock_client_free(c);
    freed = rig_now_ms();
    ck_assert_msg(!healthy_members_hold(name),
                  "healthy members still hold the lock after redlock_client_free() "
                  "(%lld ms before its validity ended)", (long long)(vend - freed));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 7. Two clients contending: mutual exclusion protects a plain counter. */

#define CLIENTS 2
#define THREADS 4
#define ROUNDS 50

typedef struct contender {
    redlock_lock *l;
    atomic_long *counter;
    atomic_int *inside;
    atomic_int *overlaps;
    int failures;
    char error[160];
} contender;

static void *contend(void *arg)
{
    contender *t = arg;
    int i, rc;

    for (i = 0; i < ROUNDS; i++) {
        long v;

        rc = redlock_try_lock_for(t->l, 20000, 10000);
        if (rc != REDLOCK_OK) {
            t->failures++;
            snprintf(t->error, sizeof(t->error), "acquire: %s", redlock_last_error());
            continue;
        }
        if (atomic_fetch_add(t->inside, 1) != 0)
            atomic_fetch_add(t->overlaps, 1);
        /* Read, pause, write: a second holder would lose an update. The
         * accesses are atomic only so that the thread sanitizer, which
         * cannot see a lock held in Redis, stays quiet. */
        v = atomic_load_explicit(t->counter, memory_order_relaxed);
        if (i % 8 == 0)
            usleep(200);
        else
            sched_yield();
        atomic_store_explicit(t->counter, v + 1, memory_order_relaxed);
        atomic_fetch_sub(t->inside, 1);
        rc = redlock_unlock(t->l);
        if (rc != REDLOCK_OK) {
            t->failures++;
            snprintf(t->error, sizeof(t->error), "unlock: %s", redlock_last_error());
        }
    }
    return NULL;
}

START_TEST(test_two_clients_contend)
{
    redlock_client *c[CLIENTS];
    redlock_lock *l[CLIENTS];
    contender t[CLIENTS * THREADS];
    pthread_t th[CLIENTS * THREADS];
    atomic_long counter = 0;
    atomic_int inside = 0, overlaps = 0;
    char name[64];
    int64_t t0;
    size_t i;

    rig_unique_name(name, sizeof(name), "q", "contend");
    for (i = 0; i < CLIENTS; i++) {
        c[i] = client_default();
        l[i] = lock_with_quorum(c[i], name, 0);
    }
    t0 = rig_now_ms();
    for (i = 0; i < CLIENTS * THREADS; i++) {
        memset(&t[i], 0, sizeof(t[i]));
        t[i].l = l[i % CLIENTS];
        t[i].counter = &counter;
        t[i].inside = &inside;
        t[i].overlaps = &overlaps;
        ck_assert_int_eq(pthread_create(&th[i], NULL, contend, &t[i]), 0);
    }
    for (i = 0; i < CLIENTS * THREADS; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "%d clients x %d threads x %d rounds in %lld ms\n", CLIENTS, THREADS,
            ROUNDS, (long long)(rig_now_ms() - t0));
    for (i = 0; i < CLIENTS * THREADS; i++)
        ck_assert_msg(t[i].failures == 0, "thread %zu: %d failures, last %s", i,
                      t[i].failures, t[i].error);
    ck_assert_int_eq(atomic_load(&overlaps), 0);
    ck_assert_int_eq(atomic_load(&counter), CLIENTS * THREADS * ROUNDS);
    ck_assert_int_ge(wait_gone(name, N_NODES, 0), 0);
    for (i = 0; i < CLIENTS; i++) {
        ck_assert_uint_eq(rig_stats(c[i]).acquired, THREADS * ROUNDS);
        redlock_lock_free(l[i]);
        redlock_client_free(c[i]);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 8. MultiLock over three names on three nodes. */

START_TEST(test_multilock_names)
{
    redlock_client *c = client_default();
    redlock_lock_options lo;
    redlock_member ms[3];
    char base[64], names[3][80], field[FIELD_CAP];
    redlock_lock *l = NULL;
    size_t i, j;

    rig_unique_name(base, sizeof(base), "q", "multi");
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    for (i = 0; i < 3; i++) {
        snprintf(names[i], sizeof(names[i]), "%s:%c", base, "abc"[i]);
        ms[i].node = i;
        ms[i].name = names[i];
    }
    memset(&lo, 0, sizeof(lo));
    lo.quorum = REDLOCK_QUORUM_ALL;
    ck_assert_int_eq(redlock_multilock_new(c, ms, 3, &lo, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_quorum(l), 3);

    hold_foreign(1, names[1]);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_EBUSY);
    ck_assert_msg(!key_exists(0, names[0]), "'a' left behind on node 0");
    ck_assert_msg(!key_exists(2, names[2]), "'c' left behind on node 2");
    assert_foreign_only(1, names[1]);

    del_key(1, names[1]);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(node_count(i, names[i], field), 1);
        /* Each name lives on its own node only. */
        for (j = 0; j < N_NODES; j++)
            if (j != i)
                ck_assert_msg(!key_exists(j, names[i]), "%s on node %zu", names[i], j);
    }
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    for (i = 0; i < 3; i++)
        ck_assert_int_ge(wait_gone(names[i], N_NODES, 0), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 9. Validity. */

START_TEST(test_validity)
{
    redlock_client *c = client_default();
    redlock_client *slow = client_with(3000, 0, 0.49);
    char name[64], field[FIELD_CAP];
    redlock_lock *l, *all;
    int64_t ttl;
    long long min_pttl = -1;
    int rc, granted = 0;
    size_t i;

    rig_unique_name(name, sizeof(name), "q", "validity");
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    l = lock_with_quorum(c, name, 0);

    /* A lease no longer than the drift plus two node timeouts can never
     * leave positive validity: it is refused before anything is sent. */
    rc = redlock_try_lock_for(l, 0, 2);
    ck_assert_msg(rc == REDLOCK_EINVAL, "lease 2 ms gave %s", redlock_err_name(rc));
    for (i = 0; i < N_NODES; i++)
        granted += outcome(l, i) == REDLOCK_MEMBER_GRANTED;
    ck_assert_int_eq(granted, 0);
    ck_assert_int_ge(wait_gone(name, N_NODES, 2000), 0);

    /* Normal lease: validity <= lease - drift, and below every node's PTTL
     * read before it (the lease started on each node after t0). */
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 10000), REDLOCK_OK);
    for (i = 0; i < N_NODES; i++) {
        long long p = node_pttl(i, name);

        if (min_pttl < 0 || p < min_pttl)
            min_pttl = p;
    }
    ck_assert_int_eq(redlock_remaining_ttl(l, &ttl), REDLOCK_OK);
    fprintf(stderr, "validity %lld ms, smallest PTTL %lld ms (lease 10000)\n",
            (long long)ttl, min_pttl);
    ck_assert_int_gt(ttl, 0);
    ck_assert_int_le(ttl, 10000 - (10000 / 100 + 2));
    ck_assert_int_lt(ttl, min_pttl);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);

    /* A grant late enough to leave no validity (a node frozen for 0.9 s
     * under a 3 s node timeout, lease 1500 - 0.9 s - drift 737 < 0) used
     * to be granted, undone and retried; now such a lease is refused up
     * front, before any member is asked: it does not exceed the drift plus
     * two node timeouts. */
    all = lock_with_quorum(slow, name, REDLOCK_QUORUM_ALL);
    ck_assert_int_eq(redlock_try_lock_for(all, 0, 1500), REDLOCK_EINVAL);
    ck_assert_msg(strstr(redlock_last_error(), "too short") != NULL, "%s",
                  redlock_last_error());
    for (i = 0; i < N_NODES; i++)
        ck_assert_int_eq(outcome(all, i), REDLOCK_MEMBER_NONE);
    ck_assert_int_ge(wait_gone(name, N_NODES, 0), 0);
    redlock_lock_free(all);
    redlock_lock_free(l);
    redlock_client_free(slow);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 10. A waiter blocked on five nodes wakes at once on a release message. */

typedef struct waiter {
    redlock_lock *l;
    int rc;
    atomic_llong done_us;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;

    w->rc = redlock_try_lock_for(w->l, 10000, 30000);
    atomic_store(&w->done_us, (long long)rig_now_us());
    if (w->rc == REDLOCK_OK && redlock_unlock(w->l) != REDLOCK_OK)
        w->rc = -1;
    return NULL;
}

/* Waits until every node has a subscriber on name's release channel. */
static void wait_subscribed(const char *name)
{
    char args[256], want[200];
    int64_t t0 = rig_now_ms();
    size_t i;

    snprintf(args, sizeof(args), "PUBSUB NUMSUB 'redisson_lock__channel:{%s}'", name);
    snprintf(want, sizeof(want), "redisson_lock__channel:{%s}\n1", name);
    for (i = 0; i < N_NODES; i++) {
        while (strcmp(rig_cli(i, args), want) != 0) {
            ck_assert_msg(rig_now_ms() - t0 < 3000, "no subscriber on node %zu", i);
            rig_sleep_ms(10);
        }
    }
}

START_TEST(test_waiter_wakes)
{
    redlock_client *ca = client_default(), *cb = client_default();
    char name[64], args[256];
    redlock_lock *la, *lb;
    pthread_t th;
    waiter w;
    int64_t t_rel, woke;
    size_t i;

    rig_unique_name(name, sizeof(name), "q", "wake");
    la = lock_with_quorum(ca, name, 0);
    lb = lock_with_quorum(cb, name, 0);

    /* Released by its holder: the release publishes on every node. */
    ck_assert_int_eq(redlock_try_lock_for(la, 0, 30000), REDLOCK_OK);
    memset(&w, 0, sizeof(w));
    w.l = lb;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_for_lock, &w), 0);
    wait_subscribed(name);
    rig_sleep_ms(50);
    ck_assert_int_eq(atomic_load(&w.done_us), 0);
    t_rel = rig_now_us();
    ck_assert_int_eq(redlock_unlock(la), REDLOCK_OK);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_OK);
    woke = (atomic_load(&w.done_us) - t_rel) / 1000;
    fprintf(stderr, "waiter acquired %lld ms after the unlock\n", (long long)woke);
    ck_assert_msg(woke < 150, "waiter took %lld ms", (long long)woke);

    /* Held by someone else everywhere; the keys vanish silently and the
     * release message comes from one node only: that one message wakes. */
    for (i = 0; i < N_NODES; i++)
        hold_foreign(i, name);
    memset(&w, 0, sizeof(w));
    w.l = lb;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_for_lock, &w), 0);
    wait_subscribed(name);
    for (i = 0; i < N_NODES; i++)
        del_key(i, name);
    rig_sleep_ms(200);
    ck_assert_msg(atomic_load(&w.done_us) == 0, "the waiter polled instead of waiting");
    snprintf(args, sizeof(args), "PUBLISH 'redisson_lock__channel:{%s}' 0", name);
    t_rel = rig_now_us();
    ck_assert_str_eq(rig_cli(4, args), "1");
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_OK);
    woke = (atomic_load(&w.done_us) - t_rel) / 1000;
    fprintf(stderr, "waiter acquired %lld ms after one node's message\n", (long long)woke);
    ck_assert_msg(woke < 150, "waiter took %lld ms", (long long)woke);
    ck_assert_int_ge(wait_gone(name, N_NODES, 0), 0);

    redlock_lock_free(lb);
    redlock_lock_free(la);
    redlock_client_free(cb);
    redlock_client_free(ca);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 11. N = 1 is the single-node reentrant lock. */

START_TEST(test_single_node)
{
    redlock_client *c = NULL, *other = NULL;
    redlock_lock *l, *lo;
    char name[64], field[FIELD_CAP];
    int count, held, q;
    int64_t ttl;
    size_t i;

    ck_assert_int_eq(redlock_client_new(&c, rig_plain_uris(), 1, NULL), REDLOCK_OK);
    ck_assert_int_eq(redlock_client_new(&other, rig_plain_uris(), 1, NULL), REDLOCK_OK);
    rig_unique_name(name, sizeof(name), "q", "single");
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    /* With one member every quorum value means 1. */
    for (q = -1; q <= 5; q++) {
        l = lock_with_quorum(c, name, q);
        ck_assert_int_eq(redlock_lock_quorum(l), 1);
        redlock_lock_free(l);
    }
    l = lock_with_quorum(c, name, 0);
    lo = lock_with_quorum(other, name, 0);
    ck_assert_uint_eq(redlock_lock_member_count(l), 1);

    for (i = 1; i <= 3; i++) {
        ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
        ck_assert_int_eq(node_count(0, name, field), (long long)i);
        ck_assert_int_eq(redlock_hold_count(l, &count), REDLOCK_OK);
        ck_assert_int_eq(count, (int)i);
    }
    ck_assert_int_eq(redlock_try_lock(lo), REDLOCK_EBUSY);
    for (i = 1; i < N_NODES; i++)
        ck_assert(!key_exists(i, name));
    ck_assert_int_eq(redlock_remaining_ttl(l, &ttl), REDLOCK_OK);
    ck_assert(ttl > 0 && ttl <= 30000);
    for (i = 3; i-- > 1;) {
        ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
        ck_assert_int_eq(node_count(0, name, field), (long long)i);
        ck_assert_int_eq(redlock_is_held_by_current_thread(l, &held), REDLOCK_OK);
        ck_assert_int_eq(held, 1);
    }
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert(!key_exists(0, name));
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(redlock_try_lock(lo), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(lo), REDLOCK_OK);
    redlock_lock_free(lo);
    redlock_lock_free(l);
    redlock_client_free(other);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 12. A late release of an earlier hold of the same owner (a copy still
 * queued on a node that was frozen or restarting, or retried from the
 * background) must leave a newer hold of that owner alone: dropping it on
 * three members would leave the newer hold without a quorum. The late copy
 * is sent by hand, exactly as the background retry sends it, so the order
 * of events does not depend on when a node wakes up. */

/* Sends release.lua to node as a late copy would: its own request id
 * (32 hex digits), the generations of the hold it was sent for. Returns
 * the reply. */
static const char *send_release(size_t node, const char *name, const char *field,
                                const char *gens, const char *request_id)
{
    char args[1024];

    snprintf(args, sizeof(args),
             "EVALSHA %s 3 '%s' 'redisson_lock__channel:{%s}' 'redlock_latch:{%s}:%s' "
             "0 10000 '%s' 0 '%s'",
             redlock__scripts[REDLOCK__SCRIPT_RELEASE].sha1, name, name, name, request_id,
             field, gens);
    return rig_cli(node, args);
}

static void member_gens(redlock_lock *l, redlock__gens_text *out)
{
    size_t i;

    pthread_mutex_lock(&l->mu);
    for (i = 0; i < l->n; i++)
        redlock__gens_format(&l->members[i].gens, out[i]);
    pthread_mutex_unlock(&l->mu);
}

START_TEST(test_late_release_spares_newer_hold)
{
    redlock_client *c = client_with(NODE_TIMEOUT_MS, 0, 0), *other = client_default();
    char name[64], field[FIELD_CAP], tag[40];
    redlock__gens_text old_gens[N_NODES], new_gens[N_NODES];
    redlock_lock *l, *lo;
    size_t i;

    rig_unique_name(name, sizeof(name), "q", "late");
    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    l = lock_with_quorum(c, name, 0);
    lo = lock_with_quorum(other, name, 0);

    ck_assert_int_eq(redlock_try_lock_for(l, 0, 10000), REDLOCK_OK);
    for (i = 0; i < N_NODES; i++)
        ck_assert_int_eq(settled_count(i, name, field, 1), 1);
    member_gens(l, old_gens);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_ge(wait_gone(name, N_NODES, 2000), 0);

    /* The same owner (this thread) takes it again. */
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 10000), REDLOCK_OK);
    for (i = 0; i < N_NODES; i++)
        ck_assert_int_eq(settled_count(i, name, field, 1), 1);
    member_gens(l, new_gens);
    for (i = 0; i < N_NODES; i++)
        ck_assert_str_ne(old_gens[i], new_gens[i]);

    /* The earlier hold's release reaches three members only now. */
    for (i = 2; i < N_NODES; i++) {
        snprintf(tag, sizeof(tag), "%012zx%020x", 0xfff000 + i, 0xabc);
        ck_assert_str_eq(send_release(i, name, field, old_gens[i], tag), "");
        ck_assert_int_eq(node_count(i, name, field), 1);
        /* Retried with the same id, it answers the same. */
        ck_assert_str_eq(send_release(i, name, field, old_gens[i], tag), "");
        ck_assert_int_eq(node_count(i, name, field), 1);
    }
    /* The newer hold still has every member: nobody else gets it. */
    ck_assert_int_eq(redlock_try_lock(lo), REDLOCK_EBUSY);

    /* The same call with the newer hold's generations does release it,
     * so the refusal above came from the generation alone. */
    ck_assert_str_eq(send_release(4, name, field, new_gens[4],
                                  "000000fff9000000000000000000000c"),
                     "1");
    ck_assert(!key_exists(4, name));
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_ge(wait_gone(name, N_NODES, 2000), 0);
    ck_assert_int_eq(redlock_try_lock(lo), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(lo), REDLOCK_OK);
    redlock_lock_free(lo);
    redlock_lock_free(l);
    redlock_client_free(other);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */

/* One TCase per case: its unchecked fixture heals the rig around it. */
#define ADD_CASE(s, test)                                                      \
    do {                                                                       \
        TCase *tc_ = tcase_create(#test);                                      \
        tcase_add_unchecked_fixture(tc_, rig_heal_all, rig_heal_all);          \
        tcase_set_timeout(tc_, 60);                                            \
        tcase_add_test(tc_, test);                                             \
        suite_add_tcase((s), tc_);                                             \
    } while (0)

int main(void)
{
    Suite *s = suite_create("quorum");
    SRunner *sr;
    int failed;

    ADD_CASE(s, test_quorum_math);
    ADD_CASE(s, test_early_success_two_frozen);
    ADD_CASE(s, test_prompt_failure_three_frozen);
    ADD_CASE(s, test_unlock_two_frozen);
    ADD_CASE(s, test_watchdog_survives_restart);
    ADD_CASE(s, test_watchdog_reports_loss);
    ADD_CASE(s, test_loss_release_waits_for_validity);
    ADD_CASE(s, test_client_free_sends_held_back_release);
    ADD_CASE(s, test_flush_waits_out_held_back_release);
    ADD_CASE(s, test_flush_counts_release_in_flight_in_tick);
    ADD_CASE(s, test_multilock_loss_release_waits_for_validity);
    ADD_CASE(s, test_two_clients_contend);
    ADD_CASE(s, test_multilock_names);
    ADD_CASE(s, test_validity);
    ADD_CASE(s, test_waiter_wakes);
    ADD_CASE(s, test_single_node);
    ADD_CASE(s, test_late_release_spares_newer_hold);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
