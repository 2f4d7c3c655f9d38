/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host names are looked up once, when the client is made, and again only
 * in the background: a slow DNS server must not hold up a fan-out, the
 * watchdog or the subscriber thread. This binary puts its own getaddrinfo
 * in front of the C library's (the library's objects are linked into it):
 * names ending in ".slow.test" take SLOW_MS to resolve, to 127.0.0.1, and
 * names ending in ".dual.test" resolve to ::1 first, then 127.0.0.1 (the
 * rig's nodes listen on IPv4 only), and names ending in ".hole.test" to
 * 127.0.0.1 on hole_port first (a listener that never completes a
 * connect), then 127.0.0.1 on the port asked for.
 */
#include <check.h>
#include <errno.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redlock/redlock.h"
#include "rig_env.h"

#define SLOW_MS 1500

static int slow_lookups;
static int hole_port;

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);

/* first's addresses (on first_port if not 0), then 127.0.0.1's. */
static int two_lists(getaddrinfo_fn real, const char *first, int first_port,
                     const char *service, const struct addrinfo *hints, struct addrinfo **res)
{
    struct addrinfo *head = NULL, *v4 = NULL, *last;
    int rc = real(first, service, hints, &head);

    if (rc != 0)
        return rc;
    if ((rc = real("127.0.0.1", service, hints, &v4)) != 0) {
        freeaddrinfo(head);
        return rc;
    }
    for (last = head; first_port && last; last = last->ai_next)
        ((struct sockaddr_in *)last->ai_addr)->sin_port = htons((uint16_t)first_port);
    for (last = head; last->ai_next; last = last->ai_next)
        ;
    last->ai_next = v4; /* each entry is its own allocation */
    *res = head;
    return 0;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static getaddrinfo_fn real;
    size_t n = node ? strlen(node) : 0;

    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
    if (n > 10 && strcmp(node + n - 10, ".slow.test") == 0) {
        struct timespec ts = {SLOW_MS / 1000, (SLOW_MS % 1000) * 1000000L};

        __atomic_add_fetch(&slow_lookups, 1, __ATOMIC_SEQ_CST);
        nanosleep(&ts, NULL);
        return real("127.0.0.1", service, hints, res);
    }
    if (n > 10 && strcmp(node + n - 10, ".dual.test") == 0)
        return two_lists(real, "::1", 0, service, hints, res);
    if (n > 10 && strcmp(node + n - 10, ".hole.test") == 0)
        return two_lists(real, "127.0.0.1", hole_port, service, hints, res);
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

/* One acquire (waiting up to 3 s) and release over the node at
 * node.<domain>.test on the rig's first port, with options o. */
static void lock_cycle_over(const char *domain, const redlock_options *o)
{
    char uri_buf[96], name[64];
    const char *uri = uri_buf;
    redlock_client *c = NULL;
    redlock_lock *l;
    int rc;

    snprintf(uri_buf, sizeof(uri_buf), "redis://node.%s.test:%d", domain,
             rig_get_int("PLAIN_BASE_PORT"));
    snprintf(name, sizeof(name), "resolve:%s", domain);
    ck_assert_int_eq(redlock_client_new(&c, &uri, 1, o), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, name, NULL, &l), REDLOCK_OK);
    rc = redlock_try_lock_for(l, 3000, 10000);
    ck_assert_msg(rc == REDLOCK_OK, "acquire over the second address: %s: %s",
                  redlock_err_name(rc), redlock_last_error());
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}

/* A name whose first address refuses the connection only once connect()
 * has returned (a non-blocking connect reports it later: EINPROGRESS,
 * then ECONNREFUSED): the node's other address is tried next. Every
 * attempt used to go to the first address and fail. */
START_TEST(test_next_address_after_async_refusal)
{
    lock_cycle_over("dual", NULL);
}
END_TEST

/* A listener on 127.0.0.1 whose accept queue is full (backlog 0 and one
 * connection never accepted): Linux drops the SYNs of further connects,
 * which hang as towards a host that silently drops them. Returns the
 * listener; *filler is the connection that fills the queue. */
static int full_listener(int *port, int *filler)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 0), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    *filler = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(*filler, 0);
    ck_assert_int_eq(connect(*filler, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* A name whose first address never completes a connect (its SYNs are
 * dropped) and whose second is the node: once a connect to the first was
 * given up at its deadline, the second is tried. Every attempt used to go
 * to the first address and time out. */
START_TEST(test_next_address_after_silent_connect)
{
    redlock_options o;
    int filler, listener = full_listener(&hole_port, &filler);

    memset(&o, 0, sizeof(o));
    o.connect_timeout_ms = 200;
    lock_cycle_over("hole", &o);
    close(filler);
    close(listener);
}
END_TEST

/* A unix socket whose listener's queue is full refuses a non-blocking
 * connect with EAGAIN: that is a refusal, reported at once. Taken for a
 * connect in progress it was polled (writable at once, for ever) until
 * the connect timeout. */
START_TEST(test_unix_queue_full_fails_at_once)
{
    char path[64], uri_buf[96];
    const char *uri = uri_buf;
    struct sockaddr_un sa;
    redlock_member_report rep;
    redlock_client *c = NULL;
    redlock_lock *l;
    int listener = socket(AF_UNIX, SOCK_STREAM, 0), fillers[8], n = 0, rc;
    int64_t t0, took;

    snprintf(path, sizeof(path), "/tmp/redlock-full-%d.sock", (int)getpid());
    unlink(path);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    ck_assert_int_eq(bind(listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(listener, 0), 0);
    /* Fill the queue: connects go in until one is refused with EAGAIN. */
    for (; n < 8; n++) {
        fillers[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect(fillers[n], (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            ck_assert_int_eq(errno, EAGAIN);
            close(fillers[n]);
            break;
        }
    }
    ck_assert_int_lt(n, 8);
    snprintf(uri_buf, sizeof(uri_buf), "unix://%s", path);
    ck_assert_int_eq(redlock_client_new(&c, &uri, 1, NULL), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "resolve:unixfull", NULL, &l), REDLOCK_OK);
    t0 = rig_now_ms();
    rc = redlock_try_lock_for(l, 0, 10000);
    took = rig_now_ms() - t0;
    ck_assert_int_eq(redlock_lock_report(l, 0, &rep), REDLOCK_OK);
    fprintf(stderr, "unix queue full: %s after %lld ms: %s\n", redlock_err_name(rc),
            (long long)took, rep.message);
    ck_assert_int_eq(rc, REDLOCK_ENO_QUORUM);
    ck_assert_msg(took < 500, "a refused unix connect took %lld ms", (long long)took);
    ck_assert_msg(strstr(rep.message, "connect") != NULL, "report: '%s'", rep.message);
    redlock_lock_free(l);
    redlock_client_free(c);
    while (n-- > 0)
        close(fillers[n]);
    close(listener);
    unlink(path);
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
    tcase_add_test(tc, test_next_address_after_silent_connect);
    tcase_add_test(tc, test_unix_queue_full_fails_at_once);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
