/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The loop-driven client on the fixture's real nodes, with real faults
 * (SIGSTOP/SIGCONT): grants, waiting, a frozen minority and majority that
 * never block the loop, a loss reported through the loop, cancel in every
 * state, and handles or the client freed with operations in flight. The
 * loop here is the test's own poll() loop over the raw hooks, so it can
 * time every redlock_loop_action() call.
 */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_harness.h"
#include "redlock/adapters/poll.h"
#include "redlock/redlock.h"
#include "rig_env.h"

/* 1. Grant, wait for a holder (woken by its release message), release;
 *    done never runs inside the start call, and freeing the client stops
 *    every watcher. */
START_TEST(test_grant_wait_release)
{
    result a, b, ua, ub;
    redlock_lock *la, *lb;
    char name[64];

    loop_client(0, 0);
    rig_unique_name(name, sizeof(name), "loop", "basic");
    la = new_lock(name);
    lb = new_lock(name);
    start_acquire(la, 1, 0, 10000, &a);
    ck_assert(run_until(&a.done, 5000));
    ck_assert_msg(a.rc == REDLOCK_OK, "%s", a.msg);
    ck_assert(!a.called_in_start && !a.lock_was_null);
    ck_assert_int_ge(nodes_with(name), 3);
    /* A second owner waits for the first. */
    start_acquire(lb, 2, 5000, 10000, &b);
    run_until(&b.done, 300);
    ck_assert_int_eq(b.done, 0);
    ck_assert_uint_eq(redlock_loop_pending(L.c), 1);
    start_unlock(la, 1, &ua);
    ck_assert(run_until(&ua.done, 5000));
    ck_assert_msg(ua.rc == REDLOCK_OK, "%s", ua.msg);
    ck_assert(run_until(&b.done, 5000));
    ck_assert_msg(b.rc == REDLOCK_OK, "%s", b.msg);
    start_unlock(lb, 2, &ub);
    ck_assert(run_until(&ub.done, 5000));
    ck_assert_int_eq(ub.rc, REDLOCK_OK);
    ck_assert_int_eq(nodes_with(name), 0);
    ck_assert_uint_eq(redlock_loop_pending(L.c), 0);
    ck_assert_int_gt(L.socket_calls, 0);
    redlock_lock_free(la);
    redlock_lock_free(lb);
    /* Freeing the client stops every watcher it asked for. */
    redlock_client_free(L.c);
    ck_assert_uint_eq(L.n, 0);
}
END_TEST

/* 2. Bad input is refused at once, with no callback. */
START_TEST(test_bad_input)
{
    result r;
    redlock_client *blocking = NULL;
    redlock_lock *l, *bl = NULL;

    loop_client(0, 0);
    l = new_lock("loop:bad");
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(redlock_acquire_async(l, 0, 0, 1000, on_done, &r), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_acquire_async(l, 1, 0, 1000, NULL, &r), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_acquire_async(NULL, 1, 0, 1000, on_done, &r), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_unlock_async(l, 0, on_done, &r), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_loop_attach(L.c, on_socket, on_timer, &L), REDLOCK_EINVAL);
    /* A lease too short arrives through done, as the blocking call's
     * answer. */
    start_acquire(l, 1, 0, 5, &r);
    ck_assert(run_until(&r.done, 2000));
    ck_assert_int_eq(r.rc, REDLOCK_EINVAL);
    ck_assert_ptr_nonnull(strstr(r.msg, "too short"));
    /* A blocking client has no loop. */
    ck_assert_int_eq(redlock_client_new(&blocking, rig_plain_uris(), N_NODES, NULL), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(blocking, "loop:bad", NULL, &bl), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_async(bl, 1, 0, 1000, on_done, &r), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_loop_action(blocking, REDLOCK_EV_TIMEOUT, 0), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_loop_attach(blocking, on_socket, on_timer, &L), REDLOCK_EINVAL);
    redlock_lock_free(bl);
    redlock_client_free(blocking);
    redlock_lock_free(l);
    redlock_client_free(L.c);
}
END_TEST

/* 3. Two members frozen: the grant comes from the other three, and no
 *    loop turn waits for the frozen ones. */
START_TEST(test_frozen_minority)
{
    result r, u;
    redlock_lock *l;
    char name[64];

    loop_client(500, 0);
    rig_unique_name(name, sizeof(name), "loop", "minority");
    l = new_lock(name);
    ck_assert_int_eq(rig_node("freeze", 3), 0);
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    start_acquire(l, 1, 3000, 60000, &r);
    ck_assert(run_until(&r.done, 5000));
    ck_assert_msg(r.rc == REDLOCK_OK, "%s", r.msg);
    start_unlock(l, 1, &u);
    ck_assert(run_until(&u.done, 5000));
    ck_assert_int_eq(u.rc, REDLOCK_OK);
    /* A blocking wait would have taken the node timeout (500 ms). */
    ck_assert_msg(L.longest_action_us < 250000, "an action took %lld us",
                  (long long)L.longest_action_us);
    ck_assert_int_eq(rig_node("thaw", 3), 0);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    redlock_lock_free(l);
    redlock_client_free(L.c);
    ck_assert_int_eq(nodes_with(name), 0);
}
END_TEST

/* 4. Three members frozen: the acquire fails within its wait, the loop
 *    is never held up, and what the frozen members grant once thawed is
 *    undone. */
START_TEST(test_frozen_majority)
{
    result r;
    redlock_lock *l;
    char name[64];
    int64_t t0;
    size_t i;

    loop_client(500, 0);
    rig_unique_name(name, sizeof(name), "loop", "majority");
    l = new_lock(name);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(rig_node("freeze", i), 0);
    t0 = rig_now_ms();
    start_acquire(l, 1, 1500, 60000, &r);
    ck_assert(run_until(&r.done, 6000));
    ck_assert_msg(r.rc == REDLOCK_ENO_QUORUM || r.rc == REDLOCK_ETIMEOUT, "%s: %s",
                  redlock_err_name(r.rc), r.msg);
    ck_assert_int_le(r.at_ms - t0, 1500 + 1500);
    ck_assert_msg(L.longest_action_us < 250000, "an action took %lld us",
                  (long long)L.longest_action_us);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(rig_node("thaw", i), 0);
    redlock_lock_free(l);
    /* The client's free flushes the aborts it owes. */
    redlock_client_free(L.c);
    ck_assert_int_eq(nodes_with(name), 0);
}
END_TEST

static int lost_calls, lost_reason;
static pthread_t lost_thread;

static void on_lost(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    (void)ud, (void)l, (void)owner;
    lost_calls++;
    lost_reason = reason;
    lost_thread = pthread_self();
}

/* 5. A watchdog hold is renewed from the loop, and its loss is reported
 *    through the loop, on the loop's thread. */
START_TEST(test_loss_through_the_loop)
{
    result r, u;
    redlock_lock *l;
    char name[64], args[128];
    int never = 0;
    size_t i;

    loop_client(0, 1500);
    rig_unique_name(name, sizeof(name), "loop", "lost");
    l = new_lock(name);
    lost_calls = 0;
    redlock_lock_set_on_lost(l, on_lost, NULL);
    start_acquire(l, 1, 0, 0, &r);
    ck_assert(run_until(&r.done, 5000));
    ck_assert_msg(r.rc == REDLOCK_OK, "%s", r.msg);
    /* Three leases: only the loop's renewals keep it. */
    run_until(&never, 4500);
    ck_assert_int_eq(lost_calls, 0);
    ck_assert_int_ge(nodes_with(name), 3);
    snprintf(args, sizeof(args), "DEL %s", name);
    for (i = 0; i < N_NODES; i++)
        rig_cli(i, args);
    ck_assert(run_until(&lost_calls, 3000));
    ck_assert_int_eq(lost_calls, 1);
    ck_assert(pthread_equal(lost_thread, pthread_self()));
    start_unlock(l, 1, &u);
    ck_assert(run_until(&u.done, 3000));
    ck_assert_int_eq(u.rc, REDLOCK_ELOST);
    redlock_lock_free(l);
    redlock_client_free(L.c);
}
END_TEST

/* Another owner takes name over on every node (for 20 s): a hold of ours
 * there is lost at the next renewal, and our waiters keep waiting. */
static void take_over_everywhere(const char *name)
{
    char args[256];
    size_t i;

    snprintf(args, sizeof(args),
             "EVAL \"redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], 'someone:1', 1); "
             "redis.call('pexpire', KEYS[1], 20000)\" 1 %s",
             name);
    for (i = 0; i < N_NODES; i++)
        rig_cli(i, args);
}

static int freed_in_on_lost;

static void free_on_lost(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    (void)ud, (void)owner, (void)reason;
    redlock_lock_free(l);
    freed_in_on_lost++;
}

/* 5b. on_lost frees its lock (as the header allows) while another owner's
 *     acquire waits on the same handle: that acquire ends as for any free
 *     in flight (ECANCELED, lock NULL). The tick that ran on_lost used to
 *     free the handle outright when it ended, under the waiting acquire. */
START_TEST(test_free_from_on_lost_while_pending)
{
    result r, w;
    redlock_lock *l;
    char name[64], args[256];
    size_t i;

    loop_client(0, 1500);
    rig_unique_name(name, sizeof(name), "loop", "lostfree");
    l = new_lock(name);
    freed_in_on_lost = 0;
    redlock_lock_set_on_lost(l, free_on_lost, NULL);
    start_acquire(l, 1, 0, 0, &r);
    ck_assert(run_until(&r.done, 5000));
    ck_assert_msg(r.rc == REDLOCK_OK, "%s", r.msg);
    start_acquire(l, 2, 20000, 30000, &w);
    run_until(&w.done, 200);
    ck_assert_int_eq(w.done, 0);
    /* Another owner takes the lock over on every node: owner 1's renewal
     * finds it gone, and owner 2 keeps waiting. */
    take_over_everywhere(name);
    ck_assert(run_until(&freed_in_on_lost, 3000));
    ck_assert(run_until(&w.done, 3000));
    ck_assert_int_eq(w.done, 1);
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    ck_assert(w.lock_was_null);
    ck_assert_uint_eq(redlock_loop_pending(L.c), 0);
    redlock_client_free(L.c);
    snprintf(args, sizeof(args), "DEL %s", name);
    for (i = 0; i < N_NODES; i++)
        rig_cli(i, args);
}
END_TEST

/* 5c. A cancel reaches an acquire that has not run yet because it waits
 *     for room under the cap of operations on the network: it used to read
 *     the lock's cancel count only when it first ran, after the cancel, and
 *     went on to a grant. */
#define CAPPED 100

START_TEST(test_cancel_before_admission)
{
    static result r[CAPPED], u[CAPPED];
    static redlock_lock *l[CAPPED];
    char name[64];
    int all = 0, i;

    loop_client(0, 0);
    memset(r, 0, sizeof(r));
    memset(u, 0, sizeof(u));
    for (i = 0; i < CAPPED; i++) {
        char tag[32];

        snprintf(tag, sizeof(tag), "capped%d", i);
        rig_unique_name(name, sizeof(name), "loop", tag);
        l[i] = new_lock(name);
        start_acquire(l[i], 1, 5000, 30000, &r[i]);
    }
    redlock_acquire_cancel(l[CAPPED - 1]);
    for (i = 0; i < CAPPED && run_until(&r[i].done, 5000); i++)
        ;
    ck_assert_int_eq(i, CAPPED);
    for (i = 0; i < CAPPED - 1; i++)
        all += r[i].rc == REDLOCK_OK;
    ck_assert_int_eq(all, CAPPED - 1);
    ck_assert_msg(r[CAPPED - 1].rc == REDLOCK_ECANCELED, "the canceled acquire: %s",
                  redlock_err_name(r[CAPPED - 1].rc));
    for (i = 0; i < CAPPED - 1; i++)
        start_unlock(l[i], 1, &u[i]);
    for (i = 0; i < CAPPED - 1; i++) {
        ck_assert(run_until(&u[i].done, 5000));
        ck_assert_int_eq(u[i].rc, REDLOCK_OK);
    }
    for (i = 0; i < CAPPED; i++)
        redlock_lock_free(l[i]);
    redlock_client_free(L.c);
}
END_TEST

static redlock_lock *on_other_client;
static result other_result;
static int other_rc, started_other;
static int64_t other_took_ms;

/* A second loop-driven client on this thread, on a poll() loop of its
 * own, with the handle on_other_client on a fresh name. */
static redlock_client *other_client(redlock_poll_loop *pl, const char *tag)
{
    redlock_options o = {0};
    redlock_client *other = NULL;
    char name[64];

    o.event_loop = 1;
    ck_assert_int_eq(redlock_client_new(&other, rig_plain_uris(), N_NODES, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_poll_attach(pl, other), REDLOCK_OK);
    rig_unique_name(name, sizeof(name), "loop", tag);
    ck_assert_int_eq(redlock_lock_new(other, name, NULL, &on_other_client), REDLOCK_OK);
    started_other = 0;
    other_rc = -1;
    return other;
}

/* Drives the other client's loop alone until *flag is set or ms passed. */
static void run_other_until(redlock_poll_loop *pl, const int *flag, int64_t ms)
{
    int64_t end;

    for (end = rig_now_ms() + ms; !*flag && rig_now_ms() < end;)
        redlock_poll_run_once(pl, 10);
}

/* A lock of L's client on name, held by owner 1 with a watchdog lease,
 * whose on_lost is fn; a take-over then calls fn from L's tick. */
static redlock_lock *held_with_on_lost(const char *name, redlock_on_lost_fn fn)
{
    redlock_lock *l = new_lock(name);
    result r;

    redlock_lock_set_on_lost(l, fn, NULL);
    start_acquire(l, 1, 0, 0, &r);
    ck_assert(run_until(&r.done, 5000));
    ck_assert_msg(r.rc == REDLOCK_OK, "%s", r.msg);
    return l;
}

/* Frees both clients and L's lock on name, released first. */
static void end_two_clients(redlock_client *other, redlock_poll_loop *pl, redlock_lock *l,
                            const char *name)
{
    char args[256];
    result u;
    size_t i;

    redlock_lock_free(on_other_client);
    redlock_client_free(other);
    redlock_poll_free(pl);
    start_unlock(l, 1, &u);
    ck_assert(run_until(&u.done, 3000));
    redlock_lock_free(l);
    redlock_client_free(L.c);
    snprintf(args, sizeof(args), "DEL %s", name);
    for (i = 0; i < N_NODES; i++)
        rig_cli(i, args);
}

static void start_on_other_client(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    (void)ud, (void)l, (void)owner, (void)reason;
    other_rc = redlock_acquire_async(on_other_client, 7, 0, 30000, on_done, &other_result);
    started_other++;
}

/* 5d. A callback of one loop-driven client (on_lost, in its watchdog's
 *     fiber) starts an operation of another client on the same thread: the
 *     other client's loop is told to run it. It used to be queued as if the
 *     callback's own loop would run it, and an idle client never did. */
START_TEST(test_callback_starts_on_other_client)
{
    redlock_client *other;
    redlock_poll_loop pl;
    result u;
    redlock_lock *l;
    char name[64];

    loop_client(0, 1500);
    other = other_client(&pl, "cbother");
    memset(&other_result, 0, sizeof(other_result));
    rig_unique_name(name, sizeof(name), "loop", "cbfirst");
    l = held_with_on_lost(name, start_on_other_client);
    take_over_everywhere(name);
    ck_assert(run_until(&started_other, 3000));
    ck_assert_int_eq(other_rc, REDLOCK_OK);
    /* Only the other client's loop runs from now on. */
    run_other_until(&pl, &other_result.done, 3000);
    ck_assert_msg(other_result.done == 1, "the other client's acquire never ran");
    ck_assert_msg(other_result.rc == REDLOCK_OK, "%s", other_result.msg);
    memset(&u, 0, sizeof(u));
    ck_assert_int_eq(redlock_unlock_async(on_other_client, 7, on_done, &u), REDLOCK_OK);
    run_other_until(&pl, &u.done, 3000);
    ck_assert_int_eq(u.rc, REDLOCK_OK);
    end_two_clients(other, &pl, l, name);
}
END_TEST

static void block_on_other_client(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    int64_t t0 = rig_now_ms();

    (void)ud, (void)l, (void)owner, (void)reason;
    other_rc = redlock_acquire_as(on_other_client, 7, 0, 30000);
    if (other_rc == REDLOCK_OK)
        other_rc = redlock_unlock_as(on_other_client, 7);
    other_took_ms = rig_now_ms() - t0;
    started_other++;
}

/* 5e. The same callback makes a blocking acquire and unlock on the other
 *     client: they run in the callback's fiber, so they must wait the way
 *     that fiber's loop can wake them, not on the other client's shared
 *     connections, whose reader wakes only its own loop's tasks. Both
 *     loops are driven, as a program with two clients on one loop would. */
START_TEST(test_blocking_call_on_other_client)
{
    redlock_client *other;
    redlock_poll_loop pl;
    result u;
    redlock_lock *l;
    char name[64];
    int64_t end;

    loop_client(0, 1500);
    other = other_client(&pl, "cbblockother");
    rig_unique_name(name, sizeof(name), "loop", "cbblock");
    l = held_with_on_lost(name, block_on_other_client);
    /* A request to the other client's nodes, so its shared connections
     * exist and its reader runs. */
    memset(&u, 0, sizeof(u));
    ck_assert_int_eq(redlock_acquire_async(on_other_client, 8, 0, 30000, on_done, &u), REDLOCK_OK);
    run_other_until(&pl, &u.done, 3000);
    ck_assert_int_eq(u.rc, REDLOCK_OK);
    memset(&u, 0, sizeof(u));
    ck_assert_int_eq(redlock_unlock_async(on_other_client, 8, on_done, &u), REDLOCK_OK);
    run_other_until(&pl, &u.done, 3000);
    ck_assert_int_eq(u.rc, REDLOCK_OK);
    take_over_everywhere(name);
    for (end = rig_now_ms() + 5000; !started_other && rig_now_ms() < end;) {
        run_until(&started_other, 5);
        redlock_poll_run_once(&pl, 5);
    }
    ck_assert_msg(started_other == 1, "the callback's blocking calls never ended");
    ck_assert_msg(other_rc == REDLOCK_OK, "rc %d after %lld ms", other_rc,
                  (long long)other_took_ms);
    ck_assert_int_lt(other_took_ms, 1000);
    end_two_clients(other, &pl, l, name);
}
END_TEST

static void *thaw_node0_later(void *arg)
{
    (void)arg;
    rig_sleep_ms(150);
    rig_node("thaw", 0);
    return NULL;
}

/* 5f. redlock_client_flush() on the loop's thread, while a release's
 *     answer is owed on a frozen node and an acquire waits behind it on
 *     the same connection: the flush ends when the thawed node answers,
 *     and the acquire is granted as soon as the loop runs again, not at
 *     its node timeout. */
START_TEST(test_flush_wakes_operation_it_read_for)
{
    redlock_options o = {0};
    result a, u, b;
    redlock_lock *la, *lb;
    char name[64], name2[64];
    pthread_t th;
    int64_t flushed_at;

    memset(&L, 0, sizeof(L));
    L.timer_at_ms = -1;
    o.event_loop = 1;
    o.node_timeout_ms = 2000;
    ck_assert_int_eq(redlock_client_new(&L.c, rig_plain_uris(), 1, &o), REDLOCK_OK);
    ck_assert_int_eq(redlock_loop_attach(L.c, on_socket, on_timer, &L), REDLOCK_OK);
    rig_unique_name(name, sizeof(name), "loop", "flushwake-a");
    rig_unique_name(name2, sizeof(name2), "loop", "flushwake-b");
    la = new_lock(name);
    lb = new_lock(name2);
    start_acquire(la, 1, 0, 30000, &a);
    ck_assert(run_until(&a.done, 3000));
    ck_assert_int_eq(a.rc, REDLOCK_OK);
    /* The release's answer is owed while the node is frozen. */
    rig_node("freeze", 0);
    start_unlock(la, 1, &u);
    ck_assert(run_until(&u.done, 5000));
    /* An acquire behind it on the same connection, then the flush on this
     * thread; the node thaws during the flush and answers both. */
    start_acquire(lb, 2, 0, 30000, &b);
    ck_assert_int_eq(pthread_create(&th, NULL, thaw_node0_later, NULL), 0);
    ck_assert_int_eq(redlock_client_flush(L.c, 3000), REDLOCK_OK);
    flushed_at = rig_now_ms();
    pthread_join(th, NULL);
    ck_assert(run_until(&b.done, 5000));
    ck_assert_msg(b.rc == REDLOCK_OK, "%s", b.msg);
    ck_assert_msg(b.at_ms - flushed_at < 500, "the acquire ended %lld ms after the flush",
                  (long long)(b.at_ms - flushed_at));
    start_unlock(lb, 2, &u);
    ck_assert(run_until(&u.done, 3000));
    ck_assert_int_eq(u.rc, REDLOCK_OK);
    redlock_lock_free(la);
    redlock_lock_free(lb);
    redlock_client_free(L.c);
}
END_TEST

/* 6. Cancel: before the loop ever turned, while waiting for a holder, in
 *    the middle of an attempt to a frozen majority, and after the end (no
 *    effect). */
START_TEST(test_cancel_in_every_state)
{
    result h, w, f, u;
    redlock_lock *holder, *waiter, *frozen;
    char name[64], name2[64];
    int64_t t0;
    size_t i;

    loop_client(300, 0);
    rig_unique_name(name, sizeof(name), "loop", "cancel");
    rig_unique_name(name2, sizeof(name2), "loop", "cancel-frozen");
    holder = new_lock(name);
    waiter = new_lock(name);
    frozen = new_lock(name2);
    start_acquire(holder, 1, 0, 30000, &h);
    ck_assert(run_until(&h.done, 5000));
    ck_assert_int_eq(h.rc, REDLOCK_OK);
    /* Started, its first attempt on the wire, the loop not turned yet. */
    start_acquire(waiter, 2, 20000, 30000, &w);
    redlock_acquire_cancel(waiter);
    ck_assert(run_until(&w.done, 2000));
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    ck_assert(!w.called_in_start);
    /* Waiting: ends at once. */
    start_acquire(waiter, 2, 20000, 30000, &w);
    run_until(&w.done, 200);
    ck_assert_int_eq(w.done, 0);
    t0 = rig_now_ms();
    redlock_acquire_cancel(waiter);
    ck_assert(run_until(&w.done, 2000));
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    ck_assert_int_lt(w.at_ms - t0, 1000);
    ck_assert(!w.lock_was_null);
    /* In the middle of an attempt: finished, undone, then canceled. */
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(rig_node("freeze", i), 0);
    start_acquire(frozen, 3, 20000, 30000, &f);
    run_until(&f.done, 50);
    redlock_acquire_cancel(frozen);
    ck_assert(run_until(&f.done, 3000));
    ck_assert_int_eq(f.rc, REDLOCK_ECANCELED);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(rig_node("thaw", i), 0);
    /* After the end: the holder still holds, and unlocks. */
    redlock_acquire_cancel(holder);
    start_unlock(holder, 1, &u);
    ck_assert(run_until(&u.done, 3000));
    ck_assert_int_eq(u.rc, REDLOCK_OK);
    redlock_lock_free(holder);
    redlock_lock_free(waiter);
    redlock_lock_free(frozen);
    redlock_client_free(L.c);
    ck_assert_int_eq(nodes_with(name), 0);
    ck_assert_int_eq(nodes_with(name2), 0);
}
END_TEST

/* 7. A handle freed with an acquire in flight: done says so (lock NULL,
 *    REDLOCK_ECANCELED), the handle goes after it, nothing is left held;
 *    an unlock in flight reports its own outcome.
 *    Then the client is freed with an operation still in flight. */
START_TEST(test_free_while_pending)
{
    result h, w, late, o;
    redlock_lock *holder, *waiter, *last, *other;
    char name[64], name2[64];

    loop_client(0, 0);
    rig_unique_name(name, sizeof(name), "loop", "free");
    rig_unique_name(name2, sizeof(name2), "loop", "free-unlock");
    holder = new_lock(name);
    waiter = new_lock(name);
    start_acquire(holder, 1, 0, 30000, &h);
    ck_assert(run_until(&h.done, 5000));
    ck_assert_int_eq(h.rc, REDLOCK_OK);
    start_acquire(waiter, 2, 20000, 30000, &w);
    run_until(&w.done, 100);
    redlock_lock_free(waiter);
    ck_assert(run_until(&w.done, 2000));
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    ck_assert(w.lock_was_null);
    ck_assert_uint_eq(redlock_loop_pending(L.c), 0);
    /* An unlock is never canceled: with its handle freed in flight, done
     * gets lock NULL and the unlock's own outcome, and the hold is gone. */
    other = new_lock(name2);
    start_acquire(other, 4, 0, 30000, &o);
    ck_assert(run_until(&o.done, 5000));
    ck_assert_int_eq(o.rc, REDLOCK_OK);
    start_unlock(other, 4, &o);
    redlock_lock_free(other);
    ck_assert(run_until(&o.done, 3000));
    ck_assert(o.lock_was_null);
    ck_assert_msg(o.rc == REDLOCK_OK, "unlock of a freed handle: %s", redlock_err_name(o.rc));
    ck_assert_int_eq(nodes_with(name2), 0);
    /* The client freed while an acquire of a freed handle still waits:
     * it ends before the client does. */
    last = new_lock(name);
    start_acquire(last, 3, 20000, 30000, &late);
    run_until(&late.done, 100);
    redlock_lock_free(last);
    redlock_lock_free(holder); /* its hold runs out with its lease */
    redlock_client_free(L.c);
    ck_assert_int_eq(late.done, 1);
    ck_assert_int_eq(late.rc, REDLOCK_ECANCELED);
}
END_TEST

/* 8. A blocking call on the loop's thread while a watchdog renewal is
 *    parked in the loop (waiting for a frozen member) and pins the lock:
 *    the call drives the loop itself until it is done, instead of waiting
 *    for a renewal only the loop can finish. */
START_TEST(test_blocking_call_meets_a_parked_renewal)
{
    result r;
    redlock_lock *l;
    char name[64];
    int never = 0, rc;
    int64_t t0;

    loop_client(500, 1500);
    rig_unique_name(name, sizeof(name), "loop", "blocking");
    l = new_lock(name);
    start_acquire(l, 1, 0, 0, &r);
    ck_assert(run_until(&r.done, 5000));
    ck_assert_msg(r.rc == REDLOCK_OK, "%s", r.msg);
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    /* The renewal is due at lease / 3 (500 ms) and then waits up to the
     * node timeout (500 ms) for the frozen member: stop in between. */
    run_until(&never, 750);
    t0 = rig_now_ms();
    rc = redlock_unlock_as(l, 1);
    ck_assert_msg(rc == REDLOCK_OK, "%s", redlock_last_error());
    ck_assert_int_lt(rig_now_ms() - t0, 3000);
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    /* A blocking acquire works the same way. */
    ck_assert_int_eq(redlock_acquire_as(l, 2, 0, 10000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock_as(l, 2), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(L.c);
    ck_assert_int_eq(nodes_with(name), 0);
}
END_TEST

typedef struct canceler {
    redlock_lock *lock;
    int64_t delay_ms;
} canceler;

static void *cancel_later(void *arg)
{
    canceler *k = arg;

    rig_sleep_ms(k->delay_ms);
    redlock_acquire_cancel(k->lock);
    return NULL;
}

/* 9. A cancel from another thread (as from a signal-handling thread)
 *    wakes the loop and ends the acquire at once; the loop's lists are
 *    only ever touched on its own thread (TSan checks). */
START_TEST(test_cancel_from_another_thread)
{
    result h, w, u;
    redlock_lock *holder, *waiter;
    canceler k;
    pthread_t th;
    char name[64];
    int64_t t0;

    loop_client(0, 0);
    rig_unique_name(name, sizeof(name), "loop", "xcancel");
    holder = new_lock(name);
    waiter = new_lock(name);
    start_acquire(holder, 1, 0, 30000, &h);
    ck_assert(run_until(&h.done, 5000));
    ck_assert_int_eq(h.rc, REDLOCK_OK);
    /* The waiter sleeps until a release message or the holder's TTL
     * (30 s): only the cancel can end it early. */
    start_acquire(waiter, 2, 60000, 30000, &w);
    run_until(&w.done, 200);
    ck_assert_int_eq(w.done, 0);
    k.lock = waiter;
    k.delay_ms = 100;
    t0 = rig_now_ms();
    ck_assert_int_eq(pthread_create(&th, NULL, cancel_later, &k), 0);
    ck_assert(run_until(&w.done, 3000));
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, REDLOCK_ECANCELED);
    ck_assert_int_lt(w.at_ms - t0, 1500);
    start_unlock(holder, 1, &u);
    ck_assert(run_until(&u.done, 3000));
    ck_assert_int_eq(u.rc, REDLOCK_OK);
    redlock_lock_free(holder);
    redlock_lock_free(waiter);
    redlock_client_free(L.c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loop");
    SRunner *sr;
    int failed;

    RIG_ADD_CASE(s, test_grant_wait_release, 30);
    RIG_ADD_CASE(s, test_bad_input, 30);
    RIG_ADD_CASE(s, test_frozen_minority, 30);
    RIG_ADD_CASE(s, test_frozen_majority, 30);
    RIG_ADD_CASE(s, test_loss_through_the_loop, 30);
    RIG_ADD_CASE(s, test_free_from_on_lost_while_pending, 30);
    RIG_ADD_CASE(s, test_cancel_before_admission, 30);
    RIG_ADD_CASE(s, test_callback_starts_on_other_client, 30);
    RIG_ADD_CASE(s, test_blocking_call_on_other_client, 30);
    RIG_ADD_CASE(s, test_flush_wakes_operation_it_read_for, 30);
    RIG_ADD_CASE(s, test_cancel_in_every_state, 30);
    RIG_ADD_CASE(s, test_free_while_pending, 30);
    RIG_ADD_CASE(s, test_blocking_call_meets_a_parked_renewal, 30);
    RIG_ADD_CASE(s, test_cancel_from_another_thread, 30);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
