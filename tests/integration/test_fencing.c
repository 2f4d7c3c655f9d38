/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration tests of fencing tokens on the fixture's five plain
 * redis-server processes: tokens strictly increase across acquisitions,
 * clients and threads; every member stores the token at
 * redisson_lock_token:{NAME}; empty restarts (no persistence) never make
 * a token go back; and the fenced write on a separate storage node refuses
 * a stale holder.
 *
 * Each case is its own TCase whose unchecked fixture restarts dead nodes
 * and thaws frozen ones, so a failure never leaves a broken rig behind.
 */
#include "redlock/redlock.h"
#include "rig_env.h"

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_NODES 5
#define STORAGE_NODE 4 /* the fenced-write tests lock on 0..3, store on 4 */

/* ------------------------------------------------------------------------ */
/* Helpers. */

/* A client over the first n plain nodes. */
static redlock_client *client_over(size_t n)
{
    redlock_client *c = NULL;
    int rc = redlock_client_new(&c, rig_plain_uris(), n, NULL);

    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s", redlock_last_error());
    return c;
}

/* For cases about tokens, not timing: a node timeout a sanitizer build on
 * a loaded machine cannot miss (the default, 50 ms, made a release find
 * no quorum under TSan). */
static redlock_client *patient_client(void)
{
    redlock_options o;
    redlock_client *c = NULL;
    int rc;

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = 1000;
    rc = redlock_client_new(&c, rig_plain_uris(), N_NODES, &o);
    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s", redlock_last_error());
    return c;
}

static redlock_lock *fenced_lock(redlock_client *c, const char *name)
{
    redlock_lock_options lo;
    redlock_lock *l = NULL;
    int rc;

    memset(&lo, 0, sizeof(lo));
    lo.fencing = 1;
    rc = redlock_lock_new(c, name, &lo, &l);
    ck_assert_msg(rc == REDLOCK_OK, "lock_new: %s", redlock_last_error());
    return l;
}

/* Acquires (waiting up to wait_ms) and returns the token. */
static uint64_t acquire_token(redlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    uint64_t t = 0;
    int rc = redlock_acquire_as(l, redlock_thread_owner(), wait_ms, lease_ms);

    ck_assert_msg(rc == REDLOCK_OK, "acquire: %s: %s", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_int_eq(redlock_lock_token(l, &t), REDLOCK_OK);
    ck_assert_uint_gt(t, 0);
    return t;
}

/* The token stored on node (0 if the key is absent). */
static uint64_t stored_token(size_t node, const char *name)
{
    char args[256];

    snprintf(args, sizeof(args), "GET 'redisson_lock_token:{%s}'", name);
    return strtoull(rig_cli(node, args), NULL, 10);
}

/*
 * Members whose stored token is at least `token`. That, on a quorum, is
 * what fencing needs: any later quorum overlaps one of them and so picks a
 * larger token. Exactly `token` is not guaranteed everywhere: phase 2
 * returns once a quorum confirmed, and a straggler that granted late may
 * be among them, keeping its own, larger candidate (its clock term was
 * read later); a deciding member's write-back may then still be in flight,
 * or never sent if its connection was still authenticating.
 */
static size_t members_storing(const char *name, uint64_t token)
{
    size_t i, k = 0;
    int tries;

    /* The acquisition returns once Q write-backs confirmed; on a loaded
     * machine a reply can beat our read of a slower member, so let it settle. */
    for (tries = 0; tries < 25; tries++) {
        for (k = 0, i = 0; i < N_NODES; i++)
            k += stored_token(i, name) >= token;
        if (k >= 3)
            break;
        usleep(20000);
    }
    return k;
}

static int holds_field(size_t node, const char *name, const char *field)
{
    char args[320];

    snprintf(args, sizeof(args), "HEXISTS '%s' '%s'", name, field);
    return strcmp(rig_cli(node, args), "1") == 0;
}

/*
 * What a fenced acquisition leaves behind: at least a quorum of members
 * stores at least the token, and so does every member where the lock is
 * held by field. (A straggler that granted after the decision
 * keeps its own candidate when that is larger; one whose request was never
 * sent holds nothing.) Returns the number of members holding the lock.
 */
static size_t assert_token_stored(const char *name, const char *field, uint64_t token)
{
    size_t i, holding = 0;

    ck_assert_uint_ge(members_storing(name, token), 3);
    for (i = 0; i < N_NODES; i++) {
        if (!holds_field(i, name, field))
            continue;
        holding++;
        ck_assert_msg(stored_token(i, name) >= token, "member %zu stores %" PRIu64 " < %" PRIu64,
                      i, stored_token(i, name), token);
    }
    ck_assert_uint_ge(holding, 3);
    return holding;
}

static void my_field(redlock_client *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s:%llu", redlock_client_id(c),
             (unsigned long long)redlock_thread_owner());
}

/* ------------------------------------------------------------------------ */
/* 1. Strictly increasing across acquisitions and clients. */

/* Each case starts on a healthy rig (every node thawed or restarted). */

START_TEST(test_tokens_increase_across_clients)
{
    redlock_client *c[2] = {patient_client(), patient_client()};
    redlock_lock *l[2];
    char name[64];
    uint64_t last = 0;
    int i;

    rig_unique_name(name, sizeof(name), "f", "clients");
    l[0] = fenced_lock(c[0], name);
    l[1] = fenced_lock(c[1], name);
    for (i = 0; i < 100; i++) {
        redlock_lock *lk = l[(i / 3) % 2];
        uint64_t t = acquire_token(lk, 5000, 10000);

        ck_assert_msg(t > last, "acquisition %d: token %" PRIu64 " after %" PRIu64, i, t,
                      last);
        last = t;
        if (i % 10 == 0)
            ck_assert_uint_ge(members_storing(name, t), 3);
        ck_assert_int_eq(redlock_unlock(lk), REDLOCK_OK);
    }
    redlock_lock_free(l[0]);
    redlock_lock_free(l[1]);
    redlock_client_free(c[0]);
    redlock_client_free(c[1]);
}
END_TEST

/* Two threads with their own clients contend; each records its token
 * while holding the lock, so the record order is the hold order and must
 * be strictly increasing. */
#define CONTEND_ROUNDS 40

typedef struct contend {
    const char *name;
    const char *const *uris; /* read before the threads start (rig_env is
                              * not thread-safe) */
    pthread_mutex_t mu;
    uint64_t tokens[2 * CONTEND_ROUNDS];
    int n;
    int failures;
} contend;

static void *contender(void *arg)
{
    contend *k = arg;
    redlock_client *c = NULL;
    redlock_lock_options lo = {.fencing = 1};
    redlock_lock *l = NULL;
    int i;

    if (redlock_client_new(&c, k->uris, N_NODES, NULL) != REDLOCK_OK ||
        redlock_lock_new(c, k->name, &lo, &l) != REDLOCK_OK) {
        pthread_mutex_lock(&k->mu);
        k->failures++;
        pthread_mutex_unlock(&k->mu);
        redlock_client_free(c);
        return NULL;
    }
    for (i = 0; i < CONTEND_ROUNDS; i++) {
        uint64_t t = 0;
        int ok = redlock_acquire_as(l, redlock_thread_owner(), 10000, 10000) == REDLOCK_OK &&
                 redlock_lock_token(l, &t) == REDLOCK_OK;

        pthread_mutex_lock(&k->mu);
        if (ok)
            k->tokens[k->n++] = t;
        else
            k->failures++;
        pthread_mutex_unlock(&k->mu);
        if (ok && redlock_unlock(l) != REDLOCK_OK) {
            pthread_mutex_lock(&k->mu);
            k->failures++;
            pthread_mutex_unlock(&k->mu);
        }
    }
    redlock_lock_free(l);
    redlock_client_free(c);
    return NULL;
}

START_TEST(test_tokens_increase_under_contention)
{
    contend k;
    pthread_t th[2];
    char name[64];
    int i;

    memset(&k, 0, sizeof(k));
    pthread_mutex_init(&k.mu, NULL);
    rig_unique_name(name, sizeof(name), "f", "contend");
    k.name = name;
    k.uris = rig_plain_uris();
    for (i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, contender, &k), 0);
    for (i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&k.mu);
    ck_assert_int_eq(k.failures, 0);
    ck_assert_int_eq(k.n, 2 * CONTEND_ROUNDS);
    for (i = 1; i < k.n; i++)
        ck_assert_msg(k.tokens[i] > k.tokens[i - 1], "hold %d: token %" PRIu64 " after %" PRIu64,
                      i, k.tokens[i], k.tokens[i - 1]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 2. Where the token lives. */

START_TEST(test_token_stored_on_every_member)
{
    redlock_client *c = client_over(N_NODES);
    char name[64], args[160], field[80];
    redlock_lock *l;
    redlock_member_state st;
    uint64_t t, t2;
    size_t i, confirmed = 0;

    rig_unique_name(name, sizeof(name), "f", "stored");
    my_field(c, field, sizeof(field));
    l = fenced_lock(c, name);
    t = acquire_token(l, 5000, 10000);
    rig_sleep_ms(200); /* let stragglers' requests land */
    assert_token_stored(name, field, t);
    for (i = 0; i < N_NODES; i++) {
        ck_assert_int_eq(redlock_lock_inspect(l, i, &st), REDLOCK_OK);
        ck_assert_uint_eq(st.token, stored_token(i, name));
        confirmed += st.token == t;
        /* The token outlives the lock: it has no expiry. */
        if (st.token) {
            snprintf(args, sizeof(args), "PTTL 'redisson_lock_token:{%s}'", name);
            ck_assert_str_eq(rig_cli(i, args), "-1");
        }
    }
    ck_assert_uint_ge(confirmed, 3);
    /* A re-entry keeps the token and stores nothing new. */
    t2 = acquire_token(l, 0, 10000);
    ck_assert_uint_eq(t2, t);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_uint_ge(members_storing(name, t), 3);
    /* The next holder gets a larger one; on warm connections every member
     * grants and stores at least it. */
    t2 = acquire_token(l, 5000, 10000);
    ck_assert_uint_gt(t2, t);
    rig_sleep_ms(200);
    ck_assert_uint_eq(assert_token_stored(name, field, t2), N_NODES);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 3. Restarts without persistence. */

START_TEST(test_restart_without_persistence_keeps_increasing)
{
    redlock_client *c = client_over(N_NODES);
    char name[64];
    redlock_lock *l;
    uint64_t t1, t2, t3;
    size_t i;

    rig_unique_name(name, sizeof(name), "f", "restart");
    l = fenced_lock(c, name);
    t1 = acquire_token(l, 5000, 10000);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_uint_ge(members_storing(name, t1), 3);

    /* One member restarts empty: the quorum still overlaps members that
     * stored t1. */
    ck_assert_int_eq(rig_node("restart", 0), 0);
    ck_assert_uint_eq(stored_token(0, name), 0);
    t2 = acquire_token(l, 5000, 10000);
    ck_assert_uint_gt(t2, t1);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);

    /* Every member restarts empty: only the time term of the candidates
     * is left, and it is past every earlier token. */
    for (i = 0; i < N_NODES; i++)
        ck_assert_int_eq(rig_node("restart", i), 0);
    for (i = 0; i < N_NODES; i++)
        ck_assert_uint_eq(stored_token(i, name), 0);
    t3 = acquire_token(l, 10000, 10000);
    ck_assert_uint_gt(t3, t2);
    ck_assert_uint_ge(members_storing(name, t3), 3);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    fprintf(stderr, "tokens across restarts: %" PRIu64 " < %" PRIu64 " < %" PRIu64 "\n", t1, t2,
            t3);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 4. The fenced write, on a storage node that is not a lock member. */

static void resource_state(const char *key, char *value, size_t vcap, uint64_t *token)
{
    char args[256];

    snprintf(args, sizeof(args), "HGET '%s' value", key);
    snprintf(value, vcap, "%s", rig_cli(STORAGE_NODE, args));
    snprintf(args, sizeof(args), "HGET '%s' fence_token", key);
    *token = strtoull(rig_cli(STORAGE_NODE, args), NULL, 10);
}

START_TEST(test_fenced_set_rules)
{
    redlock_client *locks = client_over(STORAGE_NODE);
    redlock_client *storage = NULL;
    const char *uri = rig_plain_uri(STORAGE_NODE);
    char name[64], key[80], value[64];
    redlock_lock *l;
    uint64_t t, stored;

    ck_assert_int_eq(redlock_client_new(&storage, &uri, 1, NULL), REDLOCK_OK);
    rig_unique_name(name, sizeof(name), "f", "fenced");
    snprintf(key, sizeof(key), "%s:resource", name);
    l = fenced_lock(locks, name);
    t = acquire_token(l, 5000, 10000);

    ck_assert_int_eq(redlock_fenced_set(storage, 0, key, "first", 5, t), REDLOCK_OK);
    resource_state(key, value, sizeof(value), &stored);
    ck_assert_str_eq(value, "first");
    ck_assert_uint_eq(stored, t);
    /* Equal: the same holder writing again. */
    ck_assert_int_eq(redlock_fenced_set(storage, 0, key, "second", 6, t), REDLOCK_OK);
    /* Lower: refused with its own code, nothing changes. */
    ck_assert_int_eq(redlock_fenced_set(storage, 0, key, "stale", 5, t - 1),
                     REDLOCK_ESTALE_TOKEN);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "older"));
    resource_state(key, value, sizeof(value), &stored);
    ck_assert_str_eq(value, "second");
    ck_assert_uint_eq(stored, t);
    /* Higher: accepted. */
    ck_assert_int_eq(redlock_fenced_set(storage, 0, key, "third", 5, t + 1), REDLOCK_OK);
    resource_state(key, value, sizeof(value), &stored);
    ck_assert_str_eq(value, "third");
    ck_assert_uint_eq(stored, t + 1);
    /* The storage node is no lock member: it holds no token key. */
    ck_assert_uint_eq(stored_token(STORAGE_NODE, name), 0);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(storage);
    redlock_client_free(locks);
}
END_TEST

/* A holder whose lease ran out while it was not looking (a pause) writes
 * after the next holder did: the storage refuses the stale write. */
START_TEST(test_stale_holder_write_rejected)
{
    redlock_client *a = client_over(STORAGE_NODE), *b = client_over(STORAGE_NODE);
    redlock_client *storage = NULL;
    const char *uri = rig_plain_uri(STORAGE_NODE);
    char name[64], key[80], value[64];
    redlock_lock *la, *lb;
    uint64_t ta, tb, stored;
    int held = 1;

    ck_assert_int_eq(redlock_client_new(&storage, &uri, 1, NULL), REDLOCK_OK);
    rig_unique_name(name, sizeof(name), "f", "stale");
    snprintf(key, sizeof(key), "%s:resource", name);
    la = fenced_lock(a, name);
    lb = fenced_lock(b, name);

    ta = acquire_token(la, 5000, 300);
    rig_sleep_ms(600); /* a's lease expires on every member */
    tb = acquire_token(lb, 5000, 10000);
    ck_assert_uint_gt(tb, ta);
    ck_assert_int_eq(redlock_fenced_set(storage, 0, key, "from-b", 6, tb), REDLOCK_OK);
    /* a still believes in its hold and writes: refused. */
    ck_assert_int_eq(redlock_fenced_set(storage, 0, key, "from-a", 6, ta), REDLOCK_ESTALE_TOKEN);
    resource_state(key, value, sizeof(value), &stored);
    ck_assert_str_eq(value, "from-b");
    ck_assert_uint_eq(stored, tb);
    ck_assert_int_eq(redlock_is_held_by_current_thread(la, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 0);
    ck_assert_int_ne(redlock_unlock(la), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(lb), REDLOCK_OK);
    redlock_lock_free(la);
    redlock_lock_free(lb);
    redlock_client_free(storage);
    redlock_client_free(a);
    redlock_client_free(b);
}
END_TEST

/* ------------------------------------------------------------------------ */

#define ADD_CASE(s, test)                                                      \
    do {                                                                       \
        TCase *tc_ = tcase_create(#test);                                      \
        tcase_add_unchecked_fixture(tc_, rig_heal_all, rig_heal_all);          \
        tcase_set_timeout(tc_, 120);                                           \
        tcase_add_test(tc_, test);                                             \
        suite_add_tcase((s), tc_);                                             \
    } while (0)

int main(void)
{
    Suite *s = suite_create("fencing");
    SRunner *sr;
    int failed;

    ADD_CASE(s, test_tokens_increase_across_clients);
    ADD_CASE(s, test_tokens_increase_under_contention);
    ADD_CASE(s, test_token_stored_on_every_member);
    ADD_CASE(s, test_restart_without_persistence_keeps_increasing);
    ADD_CASE(s, test_fenced_set_rules);
    ADD_CASE(s, test_stale_holder_write_rejected);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
