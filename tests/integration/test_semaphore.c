/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration tests of expiring semaphores (redlock_semaphore_*) on the
 * fixture's plain redis-server processes: never more than K holders at
 * N = 1 and N = 5, several permits per handle and what inspection shows,
 * the permit of a SIGKILLed holder coming back when its lease ends,
 * watchdog renewal, refused arguments, a failed quorum that must leave no
 * permit taken, late requests of a permit handle (run by EVAL) that must
 * take nothing, and clients of one name with different limits. Redisson's
 * RPermitExpirableSemaphore scripts run against our permits are in
 * test_semaphore_redisson.c.
 *
 * Each case is its own TCase whose unchecked fixture thaws and restarts
 * nodes, so a failed case never leaves a frozen node behind.
 */
#include "redlock/redlock.h"
#include "rig_env.h"
#include "rw_support.h"

#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* 1. Never more than K holders at once. */

#define K_LIMIT 3
#define WORKERS 8
#define ROUNDS 20

typedef struct hold_log {
    redlock_semaphore *sems[2]; /* two clients, so two client ids */
    pthread_mutex_t mu;
    int64_t start_us[WORKERS * ROUNDS], end_us[WORKERS * ROUNDS];
    size_t n;
    int failures;
    char why[200];
} hold_log;

typedef struct worker_arg {
    hold_log *log;
    int idx;
} worker_arg;

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    hold_log *lg = wa->log;
    redlock_semaphore *s = lg->sems[wa->idx % 2];
    unsigned seed = 104729u * (unsigned)(wa->idx + 1);
    int i;

    for (i = 0; i < ROUNDS; i++) {
        redlock_permit *p = NULL;
        int64_t t0, t1;
        int rc = redlock_semaphore_acquire(s, 1, 20000, LEASE_MS, &p);

        if (rc != REDLOCK_OK) {
            pthread_mutex_lock(&lg->mu);
            lg->failures++;
            snprintf(lg->why, sizeof(lg->why), "acquire: %s: %s", redlock_err_name(rc),
                     redlock_last_error());
            pthread_mutex_unlock(&lg->mu);
            continue;
        }
        /* Taken inside the hold: more than K overlapping intervals would
         * be more than K holders at once. */
        t0 = rig_now_us();
        rig_sleep_ms(5 + rand_r(&seed) % 16);
        t1 = rig_now_us();
        rc = redlock_semaphore_release(p);
        pthread_mutex_lock(&lg->mu);
        lg->start_us[lg->n] = t0;
        lg->end_us[lg->n++] = t1;
        if (rc != REDLOCK_OK) {
            lg->failures++;
            snprintf(lg->why, sizeof(lg->why), "release: %s", redlock_err_name(rc));
        }
        pthread_mutex_unlock(&lg->mu);
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* The most intervals covering one instant (an end and a start at the
 * same microsecond do not overlap). */
static int max_overlap(const int64_t *start, const int64_t *end, size_t n)
{
    int64_t *s = malloc(n * sizeof(*s)), *e = malloc(n * sizeof(*e));
    size_t i = 0, j = 0;
    int cur = 0, best = 0;

    ck_assert(s && e);
    memcpy(s, start, n * sizeof(*s));
    memcpy(e, end, n * sizeof(*e));
    qsort(s, n, sizeof(*s), cmp_i64);
    qsort(e, n, sizeof(*e), cmp_i64);
    while (i < n) {
        if (s[i] < e[j]) {
            if (++cur > best)
                best = cur;
            i++;
        } else {
            cur--;
            j++;
        }
    }
    free(s);
    free(e);
    return best;
}

static void never_more_than_k(size_t n)
{
    redlock_client *c[2] = {client_with(n, NODE_TIMEOUT_MS, 0), client_with(n, NODE_TIMEOUT_MS, 0)};
    hold_log *lg = calloc(1, sizeof(*lg));
    worker_arg args[WORKERS];
    pthread_t th[WORKERS];
    char name[64];
    int i, most;

    ck_assert_ptr_nonnull(lg);
    rig_unique_name(name, sizeof(name), "sem", n == 1 ? "k1" : "k5");
    lg->sems[0] = sem_new(c[0], name, K_LIMIT);
    lg->sems[1] = sem_new(c[1], name, K_LIMIT);
    pthread_mutex_init(&lg->mu, NULL);
    for (i = 0; i < WORKERS; i++) {
        args[i] = (worker_arg){lg, i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &args[i]), 0);
    }
    for (i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    most = max_overlap(lg->start_us, lg->end_us, lg->n);
    fprintf(stderr, "N=%zu: %zu holds, at most %d at once (limit %d), %d failures %s\n", n,
            lg->n, most, K_LIMIT, lg->failures, lg->why);
    ck_assert_msg(lg->failures == 0, "%d failures, last: %s", lg->failures, lg->why);
    ck_assert_uint_eq(lg->n, WORKERS * ROUNDS);
    ck_assert_msg(most <= K_LIMIT, "%d holders at once, limit %d", most, K_LIMIT);
    /* A semaphore that let only one in at a time would be a mutex. */
    ck_assert_int_ge(most, 2);
    /* Every permit came back: the count is K again wherever it exists. */
    for (i = 0; i < (int)n; i++) {
        const char *v = cli((size_t)i, "GET '%s'", name);

        ck_assert_msg(v[0] == '\0' || strcmp(v, "3") == 0, "node %d count %s", i, v);
    }
    redlock_semaphore_free(lg->sems[0]);
    redlock_semaphore_free(lg->sems[1]);
    pthread_mutex_destroy(&lg->mu);
    free(lg);
    redlock_client_free(c[0]);
    redlock_client_free(c[1]);
}

START_TEST(test_never_more_than_k_single)
{
    never_more_than_k(1);
}
END_TEST

START_TEST(test_never_more_than_k_quorum)
{
    never_more_than_k(N_NODES);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 2. Several permits per handle; a waiter woken by a release. */

typedef struct bg_take {
    redlock_semaphore *s;
    int permits;
    int64_t wait_ms;
    redlock_permit *p;
    int rc;
    int64_t done_us;
    atomic_int finished;
    pthread_t th;
} bg_take;

static void *bg_take_main(void *arg)
{
    bg_take *b = arg;

    b->rc = redlock_semaphore_acquire(b->s, b->permits, b->wait_ms, LEASE_MS, &b->p);
    b->done_us = rig_now_us();
    atomic_store(&b->finished, 1);
    return NULL;
}

START_TEST(test_multi_permit)
{
    redlock_client *c = client_with(1, NODE_TIMEOUT_MS, 0);
    redlock_permit_info h[4];
    redlock_semaphore_state st;
    redlock_semaphore *s;
    redlock_permit *three;
    bg_take b;
    char name[64];
    int64_t released_us;

    rig_unique_name(name, sizeof(name), "sem", "multi");
    s = sem_new(c, name, 4);
    st = inspect0(s, h, 4);
    ck_assert_int_eq(st.available, -1); /* nothing written before the first acquire */
    ck_assert_uint_eq(st.holders, 0);

    three = take(s, 3, 0, 20000);
    st = inspect0(s, h, 4);
    ck_assert_int_eq(st.available, 1);
    ck_assert_uint_eq(st.permits_taken, 3);
    ck_assert_uint_eq(st.holders, 1);
    ck_assert_str_eq(h[0].id, redlock_permit_id(three));
    ck_assert_int_eq(h[0].permits, 3);
    ck_assert_msg(h[0].ms_left > 0 && h[0].ms_left <= 20000, "ms_left %lld",
                  (long long)h[0].ms_left);
    ck_assert_str_eq(cli(0, "GET '%s'", name), "1");
    ck_assert_str_eq(cli(0, "ZCARD '{%s}:timeout'", name), "3");
    take_busy(s, 2);

    /* A waiter for 2 is woken by the release of the 3. */
    memset(&b, 0, sizeof(b));
    b.s = s;
    b.permits = 2;
    b.wait_ms = 3000;
    ck_assert_int_eq(pthread_create(&b.th, NULL, bg_take_main, &b), 0);
    rig_sleep_ms(300);
    ck_assert_int_eq(atomic_load(&b.finished), 0);
    released_us = rig_now_us();
    give_back(three);
    pthread_join(b.th, NULL);
    fprintf(stderr, "waiter for 2 granted %lld ms after the release of 3\n",
            (long long)(b.done_us - released_us) / 1000);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    ck_assert_msg(b.done_us - released_us < 1000000, "granted %lld ms after the release",
                  (long long)(b.done_us - released_us) / 1000);

    st = inspect0(s, h, 4);
    ck_assert_int_eq(st.available, 2);
    ck_assert_uint_eq(st.permits_taken, 2);
    ck_assert_uint_eq(st.holders, 1);
    ck_assert_str_eq(h[0].id, redlock_permit_id(b.p));
    ck_assert_int_eq(h[0].permits, 2);
    ck_assert_msg(h[0].ms_left > 0 && h[0].ms_left <= LEASE_MS, "ms_left %lld",
                  (long long)h[0].ms_left);
    give_back(b.p);
    st = inspect0(s, h, 4);
    ck_assert_int_eq(st.available, 4);
    ck_assert_uint_eq(st.permits_taken, 0);
    ck_assert_uint_eq(st.holders, 0);
    ck_assert_str_eq(cli(0, "EXISTS '{%s}:timeout'", name), "0");
    redlock_semaphore_free(s);
    redlock_client_free(c);
}
END_TEST

/*
 * redlock_semaphore_state.holders counts permit handles, also those past
 * the array given ("may be more than the array given could list"). The
 * holders were once matched only against those listed, so every permit
 * past `cap` counted as one more holder: one handle of 2 permits with
 * cap 0 gave holders 2, two handles of 2 with cap 1 gave 3.
 */
START_TEST(test_inspect_counts_handles_past_cap)
{
    redlock_client *c = client_with(1, NODE_TIMEOUT_MS, 0);
    redlock_permit_info h[1];
    redlock_semaphore_state st;
    redlock_semaphore *s;
    redlock_permit *a, *b;
    char name[64];

    rig_unique_name(name, sizeof(name), "sem", "cap");
    s = sem_new(c, name, 4);
    a = take(s, 2, 0, LEASE_MS);
    st = inspect0(s, h, 1); /* room for every holder: right */
    ck_assert_uint_eq(st.holders, 1);
    ck_assert_int_eq(h[0].permits, 2);
    ck_assert_int_eq(redlock_semaphore_inspect(s, 0, &st, NULL, 0), REDLOCK_OK);
    ck_assert_uint_eq(st.permits_taken, 2);
    ck_assert_msg(st.holders == 1, "one handle of 2 permits, no array: %zu holders",
                  st.holders);
    b = take(s, 2, 0, LEASE_MS);
    st = inspect0(s, h, 1);
    ck_assert_uint_eq(st.permits_taken, 4);
    ck_assert_int_eq(h[0].permits, 2);
    ck_assert_msg(st.holders == 2, "two handles of 2 permits, room for 1: %zu holders",
                  st.holders);
    give_back(a);
    give_back(b);
    redlock_semaphore_free(s);
    redlock_client_free(c);
}
END_TEST

/* A permit whose lease ended is available, though no acquire has put it
 * back into the count yet: inspect counts it so (it said 1 of 2). */
START_TEST(test_inspect_counts_lapsed_permit_available)
{
    redlock_client *c = client_with(1, NODE_TIMEOUT_MS, 0);
    redlock_semaphore_state st;
    redlock_semaphore *s;
    redlock_permit *p;
    char name[64];

    rig_unique_name(name, sizeof(name), "sem", "lapsed");
    s = sem_new(c, name, 2);
    /* Left to its fixed lease, nothing renews it. */
    p = take(s, 1, 0, 1500);
    st = inspect0(s, NULL, 0);
    ck_assert_int_eq(st.available, 1);
    rig_sleep_ms(1800);
    st = inspect0(s, NULL, 0);
    ck_assert_uint_eq(st.permits_taken, 0);
    ck_assert_msg(st.available == 2, "a lapsed permit: %lld of 2 available",
                  (long long)st.available);
    /* Frees the handle; its lease had ended. */
    ck_assert_int_eq(redlock_semaphore_release(p), REDLOCK_ELOST);
    redlock_semaphore_free(s);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 3. A SIGKILLed holder's permit returns when its lease ends. */

#define CRASH_LEASE_MS 1500

/* The child: its own client, the only permit, then wait to be killed.
 * Sends the monotonic time taken just before its acquire (the lease can
 * only end after that plus the lease), or -1 on failure. */
static void child_hold_permit(const char *name, int wfd)
{
    const char *uri = rig_plain_uri(0);
    redlock_options o = {.node_timeout_ms = NODE_TIMEOUT_MS};
    redlock_client *c = NULL;
    redlock_semaphore *s = NULL;
    redlock_permit *p = NULL;
    int ready = redlock_client_new(&c, &uri, 1, &o) == REDLOCK_OK &&
                redlock_semaphore_new(c, name, 1, NULL, &s) == REDLOCK_OK;
    int64_t called_us = rig_now_us();
    int i;

    if (!ready || redlock_semaphore_acquire(s, 1, 0, CRASH_LEASE_MS, &p) != REDLOCK_OK)
        called_us = -1;
    if (write(wfd, &called_us, sizeof(called_us)) != (ssize_t)sizeof(called_us))
        _exit(3);
    for (i = 0; i < 300; i++) /* bounded: the parent kills it long before */
        rig_sleep_ms(100);
    _exit(0);
}

START_TEST(test_killed_holder_permit_returns)
{
    redlock_client *c;
    redlock_semaphore *s;
    redlock_permit *p;
    struct pollfd pfd;
    char name[64];
    int fds[2], status = 0;
    int64_t called_us = -1, killed_us, got_us;
    pid_t pid;

    rig_unique_name(name, sizeof(name), "sem", "killed");
    rig_plain_uri(0); /* read the rig file before forking */
    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        child_hold_permit(name, fds[1]);
    }
    close(fds[1]);
    pfd = (struct pollfd){.fd = fds[0], .events = POLLIN};
    if (poll(&pfd, 1, 10000) != 1 || read(fds[0], &called_us, sizeof(called_us)) !=
                                         (ssize_t)sizeof(called_us))
        called_us = -1;
    killed_us = rig_now_us();
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    close(fds[0]);
    ck_assert_msg(called_us > 0, "the child did not get its permit");
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    c = client_with(1, NODE_TIMEOUT_MS, 0);
    s = sem_new(c, name, 1);
    ck_assert_str_eq(cli(0, "ZCARD '{%s}:timeout'", name), "1");
    take_busy(s, 1);
    p = take(s, 1, 5000, 5000);
    got_us = rig_now_us();
    fprintf(stderr, "dead holder's permit taken %lld ms after its acquire, %lld ms after the "
                    "kill\n", (long long)(got_us - called_us) / 1000,
            (long long)(got_us - killed_us) / 1000);
    /* Not before its lease ended (the node counts whole ms)... */
    ck_assert_msg(got_us - called_us >= (CRASH_LEASE_MS - 10) * 1000LL,
                  "granted %lld ms after the dead holder's acquire began",
                  (long long)(got_us - called_us) / 1000);
    /* ...and soon after. */
    ck_assert_msg(got_us - killed_us <= (CRASH_LEASE_MS + 1500) * 1000LL,
                  "granted %lld ms after the kill", (long long)(got_us - killed_us) / 1000);
    /* The dead permit is gone from the node, ours is the only one. */
    ck_assert_str_eq(cli(0, "ZCARD '{%s}:timeout'", name), "1");
    ck_assert_str_eq(cli(0, "GET '%s'", name), "0");
    give_back(p);
    ck_assert_str_eq(cli(0, "GET '%s'", name), "1");
    redlock_semaphore_free(s);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 4. The watchdog renews a permit. */

START_TEST(test_watchdog_renews_permit)
{
    redlock_client *c = client_with(N_NODES, NODE_TIMEOUT_MS, 1500);
    redlock_permit_info h[2];
    redlock_semaphore_state st;
    redlock_semaphore *s;
    redlock_permit *p;
    char name[64];
    int64_t left = 0;
    size_t i, live = 0;

    rig_unique_name(name, sizeof(name), "sem", "watchdog");
    s = sem_new(c, name, 1);
    p = take(s, 1, 0, 0);
    rig_sleep_ms(4000); /* well past the 1.5 s lease */
    ck_assert_int_eq(redlock_permit_remaining_ttl(p, &left), REDLOCK_OK);
    ck_assert_msg(left > 0 && left <= 1500, "remaining %lld ms", (long long)left);
    take_busy(s, 1);
    for (i = 0; i < N_NODES; i++) {
        ck_assert_int_eq(redlock_semaphore_inspect(s, i, &st, h, 2), REDLOCK_OK);
        if (st.holders == 1 && strcmp(h[0].id, redlock_permit_id(p)) == 0 &&
            h[0].ms_left > 0 && h[0].ms_left <= 1500 && st.available == 0)
            live++;
    }
    ck_assert_uint_eq(live, N_NODES);
    /* Each renewal extends the bookkeeping hash's TTL with the permits'. */
    for (i = 0; i < N_NODES; i++) {
        long long ttl = atoll(cli(i, "PTTL 'redlock_gen:{%s}'", name));

        ck_assert_msg(ttl > 0 && ttl <= 1500, "member %zu: redlock_gen PTTL %lld", i, ttl);
    }
    give_back(p);
    p = take(s, 1, 0, LEASE_MS);
    give_back(p);
    redlock_semaphore_free(s);
    redlock_client_free(c);
}
END_TEST

/* Permits removed by another client (Redisson's delete() drops the count
 * and the sorted set) leave no key of ours behind for longer than their
 * lease: the bookkeeping hash expires with them. */
START_TEST(test_bookkeeping_expires_with_permits)
{
    redlock_client *c = client_with(N_NODES, NODE_TIMEOUT_MS, 0);
    redlock_semaphore *s, *s2;
    redlock_permit *p, *q;
    char name[64];
    size_t i;

    rig_unique_name(name, sizeof(name), "sem", "deleted");
    s = sem_new(c, name, 2);
    s2 = sem_new(c, name, 2);
    p = take(s, 1, 0, 1000);
    for (i = 0; i < N_NODES; i++) {
        long long ttl = atoll(cli(i, "PTTL 'redlock_gen:{%s}'", name));

        ck_assert_msg(ttl > 0 && ttl <= 1000, "member %zu: redlock_gen PTTL %lld", i, ttl);
    }
    /* A longer lease beside it raises the TTL. */
    q = take(s2, 1, 0, 1500);
    for (i = 0; i < N_NODES; i++) {
        long long ttl = atoll(cli(i, "PTTL 'redlock_gen:{%s}'", name));

        ck_assert_msg(ttl > 1000 && ttl <= 1500, "member %zu: redlock_gen PTTL %lld after a "
                      "1500 ms permit", i, ttl);
        ck_assert_str_eq(cli(i, "DEL '%s' '{%s}:timeout'", name, name), "2");
    }
    rig_sleep_ms(1600);
    for (i = 0; i < N_NODES; i++)
        ck_assert_str_eq(cli(i, "EXISTS 'redlock_gen:{%s}'", name), "0");
    ck_assert_int_eq(redlock_semaphore_release(p), REDLOCK_ELOST);
    ck_assert_int_eq(redlock_semaphore_release(q), REDLOCK_ELOST);
    redlock_semaphore_free(s2);
    redlock_semaphore_free(s);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5. Refused input, and a name whose key is not a semaphore's. */

static void assert_einval(int rc, const char *what)
{
    ck_assert_msg(rc == REDLOCK_EINVAL, "%s gave %s", what, redlock_err_name(rc));
    ck_assert_msg(redlock_last_error()[0] != '\0', "%s: no message", what);
}

START_TEST(test_invalid_input)
{
    redlock_client *c = client_with(1, NODE_TIMEOUT_MS, 0), *c5;
    redlock_lock_options lo;
    redlock_semaphore_state st;
    redlock_semaphore *s = NULL, *bad = NULL;
    redlock_permit *p = NULL;
    redlock_lock *l = NULL;
    char name[64], before[1024];
    int64_t t0;
    int rc, held = 0;

    rig_unique_name(name, sizeof(name), "sem", "invalid");
    assert_einval(redlock_semaphore_new(c, name, 0, NULL, &bad), "limit 0");
    ck_assert_ptr_null(bad);
    assert_einval(redlock_semaphore_new(c, name, -2, NULL, &bad), "limit -2");
    /* Each permit is an entry the scripts walk: a huge limit would stall
     * a node on every call. */
    assert_einval(redlock_semaphore_new(c, name, REDLOCK_SEMAPHORE_MAX_LIMIT + 1, NULL, &bad),
                  "limit over the maximum");
    assert_einval(redlock_semaphore_new(c, name, INT32_MAX, NULL, &bad), "limit INT32_MAX");
    ck_assert_int_eq(redlock_semaphore_new(c, name, REDLOCK_SEMAPHORE_MAX_LIMIT, NULL, &bad),
                     REDLOCK_OK);
    redlock_semaphore_free(bad);
    bad = NULL;
    assert_einval(redlock_semaphore_new(NULL, name, 2, NULL, &bad), "NULL client");
    assert_einval(redlock_semaphore_new(c, NULL, 2, NULL, &bad), "NULL name");
    assert_einval(redlock_semaphore_new(c, "", 2, NULL, &bad), "empty name");
    assert_einval(redlock_semaphore_new(c, name, 2, NULL, NULL), "NULL out");
    memset(&lo, 0, sizeof(lo));
    lo.fencing = 1;
    assert_einval(redlock_semaphore_new(c, name, 2, &lo, &bad), "fencing");
    memset(&lo, 0, sizeof(lo));
    lo.holder_facts = 1;
    assert_einval(redlock_semaphore_new(c, name, 2, &lo, &bad), "holder_facts");
    memset(&lo, 0, sizeof(lo));
    lo.kind = REDLOCK_LOCK_WRITE;
    assert_einval(redlock_semaphore_new(c, name, 2, &lo, &bad), "kind");
    ck_assert_ptr_null(bad);
    /* Over 5 nodes, 2 permits need a quorum of 4 (the header's bound). */
    c5 = client_with(N_NODES, NODE_TIMEOUT_MS, 0);
    memset(&lo, 0, sizeof(lo));
    lo.quorum = 3;
    assert_einval(redlock_semaphore_new(c5, name, 2, &lo, &bad), "quorum 3 of 5 for 2");
    lo.quorum = 4;
    ck_assert_int_eq(redlock_semaphore_new(c5, name, 2, &lo, &bad), REDLOCK_OK);
    redlock_semaphore_free(bad);
    redlock_client_free(c5);

    s = sem_new(c, name, 2);
    assert_einval(redlock_semaphore_acquire(s, 0, 0, LEASE_MS, &p), "0 permits");
    ck_assert_ptr_null(p);
    assert_einval(redlock_semaphore_acquire(s, 3, 0, LEASE_MS, &p), "permits > limit");
    assert_einval(redlock_semaphore_acquire(s, -1, 0, LEASE_MS, &p), "-1 permits");
    assert_einval(redlock_semaphore_acquire(NULL, 1, 0, LEASE_MS, &p), "NULL semaphore");
    assert_einval(redlock_semaphore_acquire(s, 1, 0, LEASE_MS, NULL), "NULL out");
    ck_assert_ptr_null(p);
    assert_einval(redlock_semaphore_release(NULL), "release NULL");
    assert_einval(redlock_semaphore_inspect(NULL, 0, &st, NULL, 0), "inspect NULL");
    assert_einval(redlock_semaphore_inspect(s, 1, &st, NULL, 0), "member out of range");
    assert_einval(redlock_semaphore_inspect(s, 0, NULL, NULL, 0), "NULL state");
    /* Nothing was written by any of that. */
    ck_assert_str_eq(cli(0, "EXISTS '%s' '{%s}:timeout'", name, name), "0");
    redlock_semaphore_free(s);

    /* A plain lock holds the name: its key is a hash. The acquire fails
     * for good at once, whatever its wait, and the lock is untouched. */
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_acquire_as(l, 5, 0, 20000), REDLOCK_OK);
    snprintf(before, sizeof(before), "%s", cli(0, "HGETALL '%s'", name));
    s = sem_new(c, name, 2);
    rc = redlock_semaphore_acquire(s, 1, 0, LEASE_MS, &p);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "acquire on a hash: %s: %s", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "WRONGTYPE"));
    t0 = rig_now_ms();
    rc = redlock_semaphore_acquire(s, 1, 3000, LEASE_MS, &p);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "waiting acquire on a hash: %s",
                  redlock_err_name(rc));
    ck_assert_msg(rig_now_ms() - t0 < 1000, "a refusal for good took %lld ms",
                  (long long)(rig_now_ms() - t0));
    ck_assert_str_eq(cli(0, "HGETALL '%s'", name), before);
    ck_assert_int_gt(atoll(cli(0, "PTTL '%s'", name)), 0);
    ck_assert_str_eq(cli(0, "EXISTS '{%s}:timeout'", name), "0");
    ck_assert_int_eq(redlock_semaphore_inspect(s, 0, &st, NULL, 0), REDLOCK_ECONFIG);
    ck_assert_int_eq(redlock_is_held_as(l, 5, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    ck_assert_int_eq(redlock_unlock_as(l, 5), REDLOCK_OK);
    redlock_semaphore_free(s);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 6. A failed quorum leaves no permit taken. */

/* Every node's permits hold no id of this client, and its count is K or
 * absent; polled up to timeout_ms. Returns 1 if so. */
static int nothing_taken(redlock_client *c, const char *name, const char *k, int64_t timeout_ms)
{
    int64_t t0 = rig_now_ms();
    size_t i;

    for (;;) {
        for (i = 0; i < N_NODES; i++) {
            const char *count = cli(i, "GET '%s'", name);

            if ((count[0] && strcmp(count, k) != 0) ||
                strstr(cli(i, "ZRANGE '{%s}:timeout' 0 -1", name), redlock_client_id(c)))
                break;
        }
        if (i == N_NODES)
            return 1;
        if (rig_now_ms() - t0 > timeout_ms)
            return 0;
        rig_sleep_ms(20);
    }
}

/* With nodes 2.. frozen, an acquire of every permit fails; once they are
 * thawed nothing of it may stay taken anywhere. */
static void fail_with_frozen(redlock_client *c, redlock_semaphore *s, const char *name,
                             size_t frozen)
{
    redlock_permit *p = NULL;
    size_t m;
    int rc;

    for (m = N_NODES - frozen; m < N_NODES; m++)
        ck_assert_int_eq(rig_node("freeze", m), 0);
    rc = redlock_semaphore_acquire(s, 2, 300, LEASE_MS, &p);
    fprintf(stderr, "%zu of 5 frozen: acquire 2 -> %s (%s)\n", frozen, redlock_err_name(rc),
            redlock_last_error());
    for (m = N_NODES - frozen; m < N_NODES; m++)
        ck_assert_int_eq(rig_node("thaw", m), 0);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM || rc == REDLOCK_ETIMEOUT, "acquire: %s",
                  redlock_err_name(rc));
    ck_assert_ptr_null(p);
    /* The frozen nodes now run what was queued for them. */
    ck_assert_msg(nothing_taken(c, name, "2", 5000), "permits of %s outlived the thaw", name);
    rig_sleep_ms(300);
    ck_assert(nothing_taken(c, name, "2", 0));
}

START_TEST(test_failed_quorum_leaves_nothing)
{
    /* The default node timeout: the failure should be prompt. */
    redlock_client *c = client_with(N_NODES, 0, 0);
    redlock_semaphore *s;
    redlock_permit *p;
    char name[64];

    rig_unique_name(name, sizeof(name), "sem", "noquorum");
    s = sem_new(c, name, 2);
    /* Warm connections; the count is written on every node. For 2 permits
     * on 5 nodes a majority is not enough: 3 holders could each have 3
     * grants with no node letting more than 2 out. */
    p = take(s, 1, 0, LEASE_MS);
    ck_assert_int_eq(redlock_lock_quorum(redlock_permit_lock(p)), 4);
    give_back(p);
    ck_assert(nothing_taken(c, name, "2", 3000));
    fail_with_frozen(c, s, name, 2);
    fail_with_frozen(c, s, name, 3);
    /* Both permits are there for the next one. */
    give_back(take(s, 2, 0, LEASE_MS));
    redlock_semaphore_free(s);
    redlock_client_free(c);
}
END_TEST

/* The keys of a hand-run script: the latch is request (or release) id's. */
typedef struct sem_keys {
    char latch[160], taken[160], chan[160];
} sem_keys;

static sem_keys sem_keys_of(const char *name, const char *id)
{
    sem_keys k;

    snprintf(k.latch, sizeof(k.latch), "redlock_latch:{%s}:%s", name, id);
    snprintf(k.taken, sizeof(k.taken), "{%s}:timeout", name);
    snprintf(k.chan, sizeof(k.chan), "redisson_sc:{%s}", name);
    return k;
}

/* One sem_acquire.lua request (id, K = 2, P = 1, 60 s) by field on node 0;
 * returns the reply's integer, or 0 for a grant ({0, id}). */
static long long sem_acquire_by_hand(const char *name, const char *field, const char *id)
{
    sem_keys k = sem_keys_of(name, id);
    redisReply *r;
    long long out;

    r = eval_file(0, "sem_acquire.lua", 4, 10,
                  (const char *[]){name, k.latch, k.taken, k.chan, "60000", field, id, "1", "1",
                                   "2"});
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY || r->type == REDIS_REPLY_INTEGER,
                  "sem_acquire: reply type %d", r->type);
    out = r->type == REDIS_REPLY_ARRAY ? r->element[0]->integer : r->integer;
    freeReplyObject(r);
    return out;
}

/* One sem_release.lua request (release id rid, P = 1) by field on node 0
 * naming the generations gens; returns the reply's integer, -100 for nil. */
static long long sem_release_by_hand(const char *name, const char *field, const char *gens,
                                     const char *rid)
{
    sem_keys k = sem_keys_of(name, rid);
    redisReply *r;
    long long out;

    r = eval_file(0, "sem_release.lua", 4, 10,
                  (const char *[]){name, k.chan, k.latch, k.taken, "0", "60000", field, "1",
                                   gens, "1"});
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER || r->type == REDIS_REPLY_NIL,
                  "sem_release: reply type %d", r->type);
    out = r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
    freeReplyObject(r);
    return out;
}

/* A release that names two generations of a handle, of which only one
 * granted here, leaves the cancel mark for the other: that acquire, still
 * on its way to this node, must not grant after the release (it would
 * leave a permit nobody holds, taken until its lease ends). The release
 * used to mark the ids only when it removed nothing at all. */
START_TEST(test_release_marks_generations_not_found)
{
    char name[64], gens[80];
    const char *field = "5f0c1d2e-aaaa-bbbb-cccc-000000000001:7";
    const char *first = "00000000000100000000000000000001";
    const char *again = "00000000000200000000000000000002";

    rig_unique_name(name, sizeof(name), "sem", "latemark");
    /* The watchdog's re-grant (again) landed; the first request has not. */
    ck_assert_int_eq(sem_acquire_by_hand(name, field, again), 0);
    snprintf(gens, sizeof(gens), "%s,%s", first, again);
    ck_assert_int_eq(sem_release_by_hand(name, field, gens, "00000000000300000000000000000003"),
                     1);
    /* The first request arrives after the release: cancelled. */
    ck_assert_int_eq(sem_acquire_by_hand(name, field, first), -3);
    ck_assert_str_eq(cli(0, "ZCARD '{%s}:timeout'", name), "0");
    ck_assert_str_eq(cli(0, "GET '%s'", name), "2");
    cli(0, "DEL '%s' '{%s}:timeout'", name, name);
}
END_TEST

/*
 * A permit handle's watchdog re-grant (a new request id) can reach a node
 * before the handle's first acquire does, when that one was held up on
 * the wire or by a frozen node. The late first acquire must not take a
 * second permit for the handle there: it used to, so one handle held two
 * of the node's permits (here both of K = 2) and kept another handle out
 * until its lease ended. A re-grant after the handle's permit lapsed is
 * no such copy and must still be granted.
 */
START_TEST(test_late_first_acquire_after_regrant)
{
    char name[64], gens[80];
    const char *field = "5f0c1d2e-aaaa-bbbb-cccc-000000000002:9";
    const char *other = "5f0c1d2e-aaaa-bbbb-cccc-000000000003:4";
    const char *first = "00000000000100000000000000000011";
    const char *again = "00000000000200000000000000000012";
    const char *third = "00000000000300000000000000000013";
    const char *fourth = "00000000000400000000000000000014";

    rig_unique_name(name, sizeof(name), "sem", "lateregrant");
    ck_assert_int_eq(sem_acquire_by_hand(name, field, again), 0);
    ck_assert_int_eq(sem_acquire_by_hand(name, field, first), -3);
    ck_assert_msg(strcmp(cli(0, "ZCARD '{%s}:timeout'", name), "1") == 0,
                  "the late first acquire took a second permit for the handle: %s",
                  cli(0, "ZRANGE '{%s}:timeout' 0 -1", name));
    ck_assert_str_eq(cli(0, "GET '%s'", name), "1");
    /* The re-grant's replay is answered as before; the other permit is
     * another handle's to take. */
    ck_assert_int_eq(sem_acquire_by_hand(name, field, again), 0);
    ck_assert_int_eq(sem_acquire_by_hand(name, other, third), 0);
    ck_assert_str_eq(cli(0, "GET '%s'", name), "0");
    /* The other handle's permit lapses here; its re-grant gets it back. */
    cli(0, "ZADD '{%s}:timeout' XX 1 '%s:%s:1'", name, other, third);
    ck_assert_int_eq(sem_acquire_by_hand(name, other, fourth), 0);
    ck_assert_str_eq(cli(0, "ZCARD '{%s}:timeout'", name), "2");
    ck_assert_str_eq(cli(0, "GET '%s'", name), "0");

    snprintf(gens, sizeof(gens), "%s,%s", first, again);
    ck_assert_int_eq(sem_release_by_hand(name, field, gens, "00000000000500000000000000000015"),
                     1);
    snprintf(gens, sizeof(gens), "%s,%s", third, fourth);
    ck_assert_int_eq(sem_release_by_hand(name, other, gens, "00000000000600000000000000000016"),
                     1);
    ck_assert_str_eq(cli(0, "GET '%s'", name), "2");
    /* Nothing of the semaphore but its count outlives the last permit. */
    ck_assert_str_eq(cli(0, "EXISTS '{%s}:timeout' 'redlock_gen:{%s}'", name, name), "0");
    cli(0, "DEL '%s'", name);
}
END_TEST

/*
 * Clients of one name with different limits each enforced their own: the
 * count is written by whichever acquire finds none, so once it was gone
 * (a force unlock deletes it) the larger limit wrote it again as 3 minus
 * the permits out, and more permits were out than the smaller limit. The
 * limit is now kept beside the permits, and an acquire with another one
 * is refused for good, at once, taking nothing.
 */
static void limit_mismatch(size_t n)
{
    redlock_client *ca = client_with(n, NODE_TIMEOUT_MS, 0);
    redlock_client *cb = client_with(n, NODE_TIMEOUT_MS, 0);
    redlock_semaphore *two, *three;
    redlock_permit *p = NULL, *held;
    char name[64], args[ARGS_CAP];
    int64_t t0;
    size_t i;
    int rc;

    rig_unique_name(name, sizeof(name), "sem", n == 1 ? "limit1" : "limit5");
    two = sem_new(ca, name, 2);
    three = sem_new(cb, name, 3);
    held = take(two, 1, 0, LEASE_MS);
    /* Every node has its grant (a call returns at a quorum). */
    ck_assert_uint_eq(nodes_saying(n, n, "1", fmt_args(args, "ZCARD '{%s}:timeout'", name)), n);

    rc = redlock_semaphore_acquire(three, 1, 0, LEASE_MS, &p);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "limit 3 beside limit 2's permit: %s: %s",
                  redlock_err_name(rc), redlock_last_error());
    ck_assert_ptr_null(p);
    fprintf(stderr, "N=%zu: %s\n", n, redlock_last_error());
    ck_assert_msg(strstr(redlock_last_error(), "limit 2") &&
                      strstr(redlock_last_error(), "limit is 3"),
                  "the message names both limits: %s", redlock_last_error());
    t0 = rig_now_ms();
    rc = redlock_semaphore_acquire(three, 1, 3000, LEASE_MS, &p);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "waiting: %s", redlock_err_name(rc));
    ck_assert_msg(rig_now_ms() - t0 < 1000, "a refusal for good took %lld ms",
                  (long long)(rig_now_ms() - t0));
    /* Without the count, limit 3 would write it again as 3 - 1 and take
     * two more: three permits out of a semaphore of 2. */
    ck_assert_int_eq(redlock_force_unlock(redlock_permit_lock(held), NULL), REDLOCK_OK);
    rc = redlock_semaphore_acquire(three, 2, 0, LEASE_MS, &p);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "limit 3 after the count was deleted: %s: %s",
                  redlock_err_name(rc), redlock_last_error());
    for (i = 0; i < n; i++) {
        ck_assert_str_eq(cli(i, "ZCARD '{%s}:timeout'", name), "1");
        ck_assert_ptr_null(strstr(cli(i, "ZRANGE '{%s}:timeout' 0 -1", name),
                                  redlock_client_id(cb)));
    }

    /* The limit went with the last permit: limit 3 is the name's now. */
    give_back(held);
    ck_assert_uint_eq(nodes_saying(n, n, "0",
                                   fmt_args(args, "EXISTS '{%s}:timeout' 'redlock_gen:{%s}'",
                                            name, name)),
                      n);
    give_back(take(three, 3, 0, LEASE_MS));
    ck_assert_uint_eq(nodes_saying(n, n, "0",
                                   fmt_args(args, "EXISTS '{%s}:timeout' 'redlock_gen:{%s}'",
                                            name, name)),
                      n);
    for (i = 0; i < n; i++)
        cli(i, "DEL '%s'", name);
    redlock_semaphore_free(two);
    redlock_semaphore_free(three);
    redlock_client_free(ca);
    redlock_client_free(cb);
}

/* The count outlives the permits (and the hash that keeps their limit):
 * once every permit of a limit-3 client went back, clients of limit 2
 * used to find no limit to compare with and take three permits from the
 * count of 3. The count plus the permits taken is the limit it was
 * written for. */
START_TEST(test_limit_mismatch_idle_count)
{
    redlock_client *ca = client_with(1, NODE_TIMEOUT_MS, 0);
    redlock_client *cb = client_with(1, NODE_TIMEOUT_MS, 0);
    redlock_semaphore *two, *three;
    redlock_permit *p = NULL;
    char name[64];
    int rc;

    rig_unique_name(name, sizeof(name), "sem", "limitidle");
    three = sem_new(ca, name, 3);
    two = sem_new(cb, name, 2);
    give_back(take(three, 1, 0, LEASE_MS));
    ck_assert_str_eq(cli(0, "GET '%s'", name), "3");
    ck_assert_str_eq(cli(0, "EXISTS '{%s}:timeout' 'redlock_gen:{%s}'", name, name), "0");
    rc = redlock_semaphore_acquire(two, 1, 0, LEASE_MS, &p);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "limit 2 on limit 3's idle count: %s: %s",
                  redlock_err_name(rc), redlock_last_error());
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(redlock_last_error(), "limit 3") &&
                      strstr(redlock_last_error(), "limit is 2"),
                  "the message names both limits: %s", redlock_last_error());
    ck_assert_str_eq(cli(0, "ZCARD '{%s}:timeout'", name), "0");
    /* Limit 3 itself still takes all three. */
    p = take(three, 3, 0, LEASE_MS);
    give_back(p);
    cli(0, "DEL '%s'", name);
    redlock_semaphore_free(two);
    redlock_semaphore_free(three);
    redlock_client_free(ca);
    redlock_client_free(cb);
}
END_TEST

START_TEST(test_limit_mismatch_single)
{
    limit_mismatch(1);
}
END_TEST

START_TEST(test_limit_mismatch_quorum)
{
    limit_mismatch(N_NODES);
}
END_TEST

/* ------------------------------------------------------------------------ */

int main(void)
{
    Suite *s = suite_create("semaphore");

    RIG_ADD_CASE(s, test_never_more_than_k_single, 60);
    RIG_ADD_CASE(s, test_never_more_than_k_quorum, 90);
    RIG_ADD_CASE(s, test_multi_permit, 60);
    RIG_ADD_CASE(s, test_inspect_counts_handles_past_cap, 60);
    RIG_ADD_CASE(s, test_inspect_counts_lapsed_permit_available, 60);
    RIG_ADD_CASE(s, test_killed_holder_permit_returns, 60);
    RIG_ADD_CASE(s, test_watchdog_renews_permit, 60);
    RIG_ADD_CASE(s, test_bookkeeping_expires_with_permits, 60);
    RIG_ADD_CASE(s, test_invalid_input, 60);
    RIG_ADD_CASE(s, test_failed_quorum_leaves_nothing, 60);
    RIG_ADD_CASE(s, test_release_marks_generations_not_found, 60);
    RIG_ADD_CASE(s, test_late_first_acquire_after_regrant, 60);
    RIG_ADD_CASE(s, test_limit_mismatch_single, 60);
    RIG_ADD_CASE(s, test_limit_mismatch_quorum, 60);
    RIG_ADD_CASE(s, test_limit_mismatch_idle_count, 60);
    return run_suite(s);
}
