/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the master lookup through Sentinel (src/transport/
 * sentinel.c) against small scripted servers on 127.0.0.1, each on a
 * free port of its own, served by a thread of this process:
 *   - a sentinel that names a given port for any master;
 *   - a node that accepts connections and never answers (a frozen master
 *     whose kernel still accepts);
 *   - a master that answers AUTH and ROLE (or refuses AUTH).
 * Every server thread stops when the test sets its stop flag; every wait is
 * bounded by the lookup's own timeout.
 */
#include "config/uri.h"
#include "transport/sentinel.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef enum { FAKE_SENTINEL, FAKE_SILENT, FAKE_MASTER, FAKE_MASTER_REFUSING } fake_kind;

typedef struct fake {
    fake_kind kind;
    int names_port; /* FAKE_SENTINEL: the master port it names */
    int listen_fd, port;
    atomic_int stop;
    pthread_t th;
} fake;

/* Answers the command in buf as f's kind would (every command here fits
 * one read). */
static void answer(fake *f, int fd, const char *buf)
{
    char out[128];
    int n = 0;

    if (f->kind == FAKE_SENTINEL && strcasestr(buf, "GET-MASTER-ADDR-BY-NAME")) {
        char port[8];

        snprintf(port, sizeof(port), "%d", f->names_port);
        n = snprintf(out, sizeof(out), "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n", strlen(port),
                     port);
    } else if (strcasestr(buf, "AUTH")) {
        n = f->kind == FAKE_MASTER_REFUSING
                ? snprintf(out, sizeof(out), "-WRONGPASS invalid username-password pair\r\n")
                : snprintf(out, sizeof(out), "+OK\r\n");
    } else if (strcasestr(buf, "ROLE")) {
        n = snprintf(out, sizeof(out), "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    }
    if (n > 0 && write(fd, out, (size_t)n) != n)
        return;
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    int i;

    /* Bounded: at most 200 connections, 100 ms polls until stopped. */
    for (i = 0; i < 200 && !atomic_load(&f->stop); i++) {
        struct pollfd p = {f->listen_fd, POLLIN, 0};
        char buf[1024];
        int fd, k;

        if (poll(&p, 1, 100) <= 0)
            continue;
        if ((fd = accept(f->listen_fd, NULL, NULL)) < 0)
            continue;
        for (k = 0; k < 100 && !atomic_load(&f->stop); k++) {
            struct pollfd q = {fd, POLLIN, 0};
            ssize_t got;

            if (poll(&q, 1, 100) <= 0)
                continue;
            if ((got = read(fd, buf, sizeof(buf) - 1)) <= 0)
                break;
            buf[got] = '\0';
            if (f->kind != FAKE_SILENT)
                answer(f, fd, buf);
        }
        close(fd);
    }
    return NULL;
}

static void fake_start(fake *f, fake_kind kind, int names_port)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);

    memset(f, 0, sizeof(*f));
    f->kind = kind;
    f->names_port = names_port;
    f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(f->listen_fd, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(f->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(f->listen_fd, 8), 0);
    ck_assert_int_eq(getsockname(f->listen_fd, (struct sockaddr *)&a, &len), 0);
    f->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->th, NULL);
    close(f->listen_fd);
}

/* Looks the master up through sentinels s1 then s2, with password. */
static int lookup(const fake *s1, const fake *s2, const char *password, int *port, char *err,
                  size_t cap)
{
    redlock__sentinel_addr s[2] = {{"127.0.0.1", s1->port}, {"127.0.0.1", s2->port}};
    redlock__node_uri u;
    redlock__sentinel_cfg cfg;
    char host[64];

    memset(&u, 0, sizeof(u));
    memset(&cfg, 0, sizeof(cfg));
    u.master_name = "mymaster";
    u.sentinels = s;
    u.n_sentinels = 2;
    cfg.uri = &u;
    cfg.timeout_ms = 300;
    cfg.password = password;
    return redlock__sentinel_master(&cfg, host, sizeof(host), port, err, cap);
}

/* A sentinel that has not heard of a failover yet names the old master,
 * frozen: it accepts and never answers. With a password set, the AUTH that
 * gets no answer must not pass for a master: the next sentinel is asked. */
static void stale_sentinel_names_frozen_master(const char *password)
{
    fake frozen, master, stale, current;
    char err[300] = "";
    int port = 0, rc;

    fake_start(&frozen, FAKE_SILENT, 0);
    fake_start(&master, FAKE_MASTER, 0);
    fake_start(&stale, FAKE_SENTINEL, frozen.port);
    fake_start(&current, FAKE_SENTINEL, master.port);
    rc = lookup(&stale, &current, password, &port, err, sizeof(err));
    ck_assert_msg(rc == 0, "lookup failed: %s", err);
    ck_assert_msg(port == master.port,
                  "password %s: the lookup chose port %d, the frozen old master's (the "
                  "master is on %d)",
                  password ? "set" : "unset", port, master.port);
    fake_stop(&stale);
    fake_stop(&current);
    fake_stop(&frozen);
    fake_stop(&master);
}

START_TEST(test_frozen_master_skipped_without_password)
{
    stale_sentinel_names_frozen_master(NULL);
}
END_TEST

START_TEST(test_frozen_master_skipped_with_password)
{
    stale_sentinel_names_frozen_master("s3cret-pass");
}
END_TEST

/* A master that refuses our AUTH is still the master the sentinel named:
 * the lookup takes it, and connecting reports the refusal itself. The
 * lookup's message never quotes the password. */
START_TEST(test_auth_refusal_still_named_master)
{
    fake refusing, other, s1, s2;
    char err[300] = "";
    int port = 0, rc;

    fake_start(&refusing, FAKE_MASTER_REFUSING, 0);
    fake_start(&other, FAKE_MASTER, 0);
    fake_start(&s1, FAKE_SENTINEL, refusing.port);
    fake_start(&s2, FAKE_SENTINEL, other.port);
    rc = lookup(&s1, &s2, "s3cret-pass", &port, err, sizeof(err));
    ck_assert_msg(rc == 0, "lookup failed: %s", err);
    ck_assert_int_eq(port, refusing.port);
    ck_assert_ptr_null(strstr(err, "s3cret"));
    fake_stop(&s1);
    fake_stop(&s2);
    fake_stop(&refusing);
    fake_stop(&other);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel_lookup");
    TCase *tc = tcase_create("lookup");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_frozen_master_skipped_without_password);
    tcase_add_test(tc, test_frozen_master_skipped_with_password);
    tcase_add_test(tc, test_auth_refusal_still_named_master);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
