/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host names are looked up once, when the client is made, and again only
 * in the background: a slow DNS server must not hold up a fan-out, the
 * watchdog or the subscriber thread. This binary puts its own getaddrinfo
 * in front of the C library's (the library's objects are linked into it):
 * names ending in ".slow.test" take SLOW_MS to resolve, to 127.0.0.1, and
 * names ending in ".dual.test" resolve to ::1 first, then 127.0.0.1 (the
 * rig's nodes listen on IPv4 only).
 */
#include <check.h>
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redlock/redlock.h"
#include "rig_env.h"

#define SLOW_MS 1500

static int slow_lookups;

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static int (*real)(const char *, const char *, const struct addrinfo *,
                       struct addrinfo **);
    size_t n = node ? strlen(node) : 0;

    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
    if (n > 10 && strcmp(node + n - 10, ".slow.test") == 0) {
        struct timespec ts = {SLOW_MS / 1000, (SLOW_MS % 1000) * 1000000L};

        __atomic_add_fetch(&slow_lookups, 1, __ATOMIC_SEQ_CST);
        nanosleep(&ts, NULL);
        node = "127.0.0.1";
    }
    if (n > 10 && strcmp(node + n - 10, ".dual.test") == 0) {
        struct addrinfo *v6 = NULL, *v4 = NULL, *last;
        int rc = real("::1", service, hints, &v6);

        if (rc != 0)
            return rc;
        if ((rc = real("127.0.0.1", service, hints, &v4)) != 0) {
            freeaddrinfo(v6);
            return rc;
        }
        for (last = v6; last->ai_next; last = last->ai_next)
            ;
        last->ai_next = v4; /* each entry is its own allocation */
        *res = v6;
        return 0;
    }
    return real(node, service, hints, res);
}

static int lookups(void)
{
    return __atomic_load_n(&slow_lookups, __ATOMIC_SEQ_CST);
}

/* A node behind a slow name that refuses connections (nothing listens on
 * the port just below the plain nodes), beside two good nodes: connecting
 * to it fails again and again, each time asking for a new lookup. Lock
 * cycles over the other two must not wait for DNS; they used to wait
 * SLOW_MS for every connect attempt, inside the fan-out. */
START_TEST(test_slow_dns_stays_off_the_fanout)
{
    char bad[96], good[2][64];
    const char *uris[3];
    redlock_client *c = NULL;
    redlock_lock *l;
    redlock_options o;
    int64_t t0, slowest = 0;
    int i, before;

    snprintf(bad, sizeof(bad), "redis://down.slow.test:%d", rig_get_int("PLAIN_BASE_PORT") - 1);
    snprintf(good[0], sizeof(good[0]), "%s", rig_plain_uri(0));
    snprintf(good[1], sizeof(good[1]), "%s", rig_plain_uri(1));
    uris[0] = bad;
    uris[1] = good[0];
    uris[2] = good[1];
    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = 200;
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_client_new(&c, uris, 3, &o), REDLOCK_OK);
    /* The one lookup the constructor makes, on the caller's thread. */
    ck_assert_int_ge(rig_now_ms() - t0, SLOW_MS - 50);
    ck_assert_int_eq(lookups(), 1);
    ck_assert_int_eq(redlock_lock_new(c, "resolve:slow", NULL, &l), REDLOCK_OK);
    before = lookups();
    for (i = 0; i < 20; i++) {
        int64_t s = rig_now_ms();

        ck_assert_int_eq(redlock_try_lock_for(l, 0, 30000), REDLOCK_OK);
        ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
        if (rig_now_ms() - s > slowest)
            slowest = rig_now_ms() - s;
        rig_sleep_ms(100);
    }
    fprintf(stderr, "slowest cycle %lld ms; %d background lookups in %d cycles\n",
            (long long)slowest, lookups() - before, i);
    ck_assert_msg(slowest < SLOW_MS / 2, "a cycle took %lld ms: it waited on DNS",
                  (long long)slowest);
    /* Failed connects asked for lookups, in the background, rate-limited. */
    ck_assert_int_ge(lookups() - before, 1);
    ck_assert_int_le(lookups() - before, 4);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* A name that does not resolve at all: the client is made (nodes are
 * connected lazily) and an acquire fails at once, saying why. */
START_TEST(test_unresolvable_name_fails_fast)
{
    const char *uri = "redis://no-such-host.invalid:6379";
    redlock_member_report rep;
    redlock_client *c = NULL;
    redlock_lock *l;
    int64_t t0;

    ck_assert_int_eq(redlock_client_new(&c, &uri, 1, NULL), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "resolve:none", NULL, &l), REDLOCK_OK);
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_try_lock_for(l, 0, 30000), REDLOCK_ENO_QUORUM);
    ck_assert_int_lt(rig_now_ms() - t0, 500);
    ck_assert_int_eq(redlock_lock_report(l, 0, &rep), REDLOCK_OK);
    ck_assert_msg(strstr(rep.message, "resolve") != NULL, "report: '%s'", rep.message);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

/* A name whose first address refuses the connection only once connect()
 * has returned (a non-blocking connect reports it later: EINPROGRESS,
 * then ECONNREFUSED): the node's other address is tried next. Every
 * attempt used to go to the first address and fail. */
START_TEST(test_next_address_after_async_refusal)
{
    char uri_buf[96];
    const char *uri = uri_buf;
    redlock_client *c = NULL;
    redlock_lock *l;
    int rc;

    snprintf(uri_buf, sizeof(uri_buf), "redis://node.dual.test:%d",
             rig_get_int("PLAIN_BASE_PORT"));
    ck_assert_int_eq(redlock_client_new(&c, &uri, 1, NULL), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "resolve:dual", NULL, &l), REDLOCK_OK);
    rc = redlock_try_lock_for(l, 3000, 10000);
    ck_assert_msg(rc == REDLOCK_OK, "acquire over the second address: %s: %s",
                  redlock_err_name(rc), redlock_last_error());
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resolve");
    TCase *tc = tcase_create("resolve");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_slow_dns_stays_off_the_fanout);
    tcase_add_test(tc, test_unresolvable_name_fails_fast);
    tcase_add_test(tc, test_next_address_after_async_refusal);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
