/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the read-write lock and semaphore suites; what each
 * does is in rw_support.h. */
#include "rw_support.h"
#include "rig_env.h"
#include "resp/scripts.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Both kinds. */

int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

redlock_client *client_with(size_t n, int node_timeout_ms, int watchdog_lease_ms)
{
    redlock_options o;
    redlock_client *c = NULL;
    int rc;

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = node_timeout_ms;
    o.watchdog_lease_ms = watchdog_lease_ms;
    rc = redlock_client_new(&c, rig_plain_uris(), n, &o);
    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s", redlock_last_error());
    return c;
}

/* ------------------------------------------------------------------------ */
/* Read-write locks. */

redlock_client *client_over(size_t n)
{
    return client_with(n, NODE_TIMEOUT_MS, 0);
}

redlock_lock *handle(redlock_client *c, const char *name, int kind)
{
    redlock_lock_options lo;
    redlock_lock *l = NULL;
    int rc;

    memset(&lo, 0, sizeof(lo));
    lo.kind = kind;
    rc = redlock_lock_new(c, name, &lo, &l);
    ck_assert_msg(rc == REDLOCK_OK, "lock_new(kind %d): %s", kind, redlock_last_error());
    return l;
}

void acquire_ok(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms)
{
    int rc = redlock_acquire_as(l, owner, wait_ms, lease_ms);

    ck_assert_msg(rc == REDLOCK_OK, "acquire (owner %llu): %s: %s", (unsigned long long)owner,
                  redlock_err_name(rc), redlock_last_error());
}

void acquire_busy(redlock_lock *l, uint64_t owner)
{
    int rc = redlock_acquire_as(l, owner, 0, LEASE_MS);

    ck_assert_msg(rc == REDLOCK_EBUSY, "acquire (owner %llu) gave %s, want EBUSY: %s",
                  (unsigned long long)owner, redlock_err_name(rc), redlock_last_error());
}

void unlock_ok(redlock_lock *l, uint64_t owner)
{
    int rc = redlock_unlock_as(l, owner);

    ck_assert_msg(rc == REDLOCK_OK, "unlock (owner %llu): %s: %s", (unsigned long long)owner,
                  redlock_err_name(rc), redlock_last_error());
}

const char *fmt_args(char *buf, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, ARGS_CAP, fmt, ap);
    va_end(ap);
    return buf;
}

const char *timeout_key(char *buf, const char *name, const char *field, int n)
{
    return fmt_args(buf, "{%s}:%s:rwlock_timeout:%d", name, field, n);
}

size_t nodes_saying(size_t n, size_t need, const char *want, const char *args)
{
    int64_t t0 = rig_now_ms();
    size_t i, k;

    for (;;) {
        for (k = 0, i = 0; i < n; i++)
            k += strcmp(rig_cli(i, args), want) == 0;
        if (k >= need || rig_now_ms() - t0 > 2000)
            return k;
        rig_sleep_ms(20);
    }
}

int64_t wait_all_gone(size_t n, const char *name, int64_t timeout_ms)
{
    char a[ARGS_CAP], b[ARGS_CAP];
    int64_t t0 = rig_now_ms();
    size_t i;

    fmt_args(a, "EXISTS '%s'", name);
    fmt_args(b, "KEYS '{%s}:*'", name);
    for (;;) {
        for (i = 0; i < n; i++)
            if (strcmp(rig_cli(i, a), "0") != 0 || rig_cli(i, b)[0] != '\0')
                break;
        if (i == n)
            return rig_now_ms() - t0;
        if (rig_now_ms() - t0 > timeout_ms)
            return -1;
        rig_sleep_ms(20);
    }
}

static void *bg_acquire_main(void *arg)
{
    bg_acquire *b = arg;

    b->started_us = rig_now_us();
    b->rc = redlock_acquire_as(b->l, b->owner, b->wait_ms, b->lease_ms);
    b->done_us = rig_now_us();
    atomic_store(&b->finished, 1);
    return NULL;
}

void bg_start(bg_acquire *b, redlock_lock *l, uint64_t owner, int64_t wait_ms)
{
    memset(b, 0, sizeof(*b));
    b->l = l;
    b->owner = owner;
    b->wait_ms = wait_ms;
    b->lease_ms = LEASE_MS;
    ck_assert_int_eq(pthread_create(&b->th, NULL, bg_acquire_main, b), 0);
}

int64_t bg_took_ms(const bg_acquire *b)
{
    return (b->done_us - b->started_us) / 1000;
}

/* ------------------------------------------------------------------------ */
/* Semaphores. */

redlock_semaphore *sem_new(redlock_client *c, const char *name, int limit)
{
    redlock_semaphore *s = NULL;
    int rc = redlock_semaphore_new(c, name, limit, NULL, &s);

    ck_assert_msg(rc == REDLOCK_OK, "semaphore_new: %s", redlock_last_error());
    return s;
}

redlock_permit *take(redlock_semaphore *s, int permits, int64_t wait_ms, int64_t lease_ms)
{
    redlock_permit *p = NULL;
    int rc = redlock_semaphore_acquire(s, permits, wait_ms, lease_ms, &p);

    ck_assert_msg(rc == REDLOCK_OK, "acquire %d: %s: %s", permits, redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_ptr_nonnull(p);
    return p;
}

void take_busy(redlock_semaphore *s, int permits)
{
    redlock_permit *p = NULL;
    int rc = redlock_semaphore_acquire(s, permits, 0, LEASE_MS, &p);

    ck_assert_msg(rc == REDLOCK_EBUSY, "acquire %d gave %s, want EBUSY: %s", permits,
                  redlock_err_name(rc), redlock_last_error());
    ck_assert_ptr_null(p);
}

void give_back(redlock_permit *p)
{
    int rc = redlock_semaphore_release(p);

    ck_assert_msg(rc == REDLOCK_OK, "release: %s: %s", redlock_err_name(rc),
                  redlock_last_error());
}

const char *cli(size_t node, const char *fmt, ...)
{
    char args[ARGS_CAP];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    return rig_cli(node, args);
}

redisContext *node_conn(size_t i)
{
    struct timeval tv = {5, 0};
    redisContext *ctx =
        redisConnectWithTimeout("127.0.0.1", rig_get_int("PLAIN_BASE_PORT") + (int)i, tv);

    ck_assert_msg(ctx && !ctx->err, "connect to node %zu: %s", i, ctx ? ctx->errstr : "?");
    return ctx;
}

redisReply *eval_file(size_t i, const char *file, int nkeys, int argc, const char *const *argv)
{
    char nk[16];
    const char *args[2 + 3 + 32];
    const redlock__script *script = NULL;
    size_t name_len = strcspn(file, ".");
    redisContext *ctx;
    redisReply *r;
    int k;

    ck_assert_int_le(argc, 32);
    for (k = 0; k < REDLOCK__SCRIPT_COUNT; k++)
        if (strlen(redlock__scripts[k].name) == name_len &&
            strncmp(redlock__scripts[k].name, file, name_len) == 0)
            script = &redlock__scripts[k];
    ck_assert_msg(script != NULL, "no script %s in the library", file);
    ctx = node_conn(i);
    snprintf(nk, sizeof(nk), "%d", nkeys);
    args[0] = "EVAL";
    args[1] = script->body;
    args[2] = nk;
    for (k = 0; k < argc; k++)
        args[3 + k] = argv[k];
    r = redisCommandArgv(ctx, 3 + argc, args, NULL);
    ck_assert_msg(r != NULL, "EVAL %s on node %zu: %s", file, i, ctx->errstr);
    redisFree(ctx);
    return r;
}

redlock_semaphore_state inspect0(redlock_semaphore *s, redlock_permit_info *h, size_t cap)
{
    redlock_semaphore_state st;

    ck_assert_int_eq(redlock_semaphore_inspect(s, 0, &st, h, cap), REDLOCK_OK);
    ck_assert_int_eq(st.reachable, 1);
    return st;
}
