/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reply interpretation of every script, through the public API.
 *
 * A client runs over a transport that answers each request with the next
 * chunk of the fuzz input, parsed by hiredis' redisReader exactly as the
 * real connection parses a socket, or with a transport error. Then one
 * lock goes through every operation that reads a script's result: acquire
 * (plain and fencing, with its undo and the fencing store), re-entry, the
 * watchdog's renewal and background releases, unlock, is_locked,
 * hold_count, is_held, remaining_ttl, inspect, force_unlock and fenced_set.
 *
 * Input: byte 0 picks the node count (1..5) and the quorum, byte 1 the
 * options; then chunks, each a length byte L followed by L bytes of RESP
 * (L = 255: a transport error, chosen by the next byte). When the input
 * runs out every request times out.
 *
 * Checked: no crash, leak or undefined behaviour; every return code is a
 * known one; every failure leaves a message; reports and lock state stay
 * within their documented ranges.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "lock/hold.h"
#include "lock/internal.h"
#include "lock/watchdog.h"
#include "redlock/redlock.h"
#include "transport/reader.h"

#define OWNER 7
#define OTHER_OWNER 9
#define EPOCH_NS 1000000000000LL

typedef struct fuzz_tp {
    pthread_mutex_t mu;
    const uint8_t *data;
    size_t len, pos;
    int64_t now;        /* virtual clock, moved only by the fuzzing thread */
    int64_t frozen;     /* what every other thread sees */
    pthread_t driver;
} fuzz_tp;

static fuzz_tp tp = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0, 0};

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_replies: %s\n", what);
        abort();
    }
}

/* The next answer: a reply (caller frees), or an error code. */
static redisReply *next_answer(int *err, const char **msg)
{
    static const int transport_errors[] = {REDLOCK_ETIMEOUT, REDLOCK_EIO, REDLOCK_ECONNECT,
                                           REDLOCK_ETLS, REDLOCK_EPROTO, REDLOCK_EAUTH};
    redisReader *rd;
    void *reply = NULL;
    size_t n;

    *err = REDLOCK_ETIMEOUT;
    *msg = "fuzz: no reply before the deadline";
    if (tp.pos >= tp.len)
        return NULL;
    n = tp.data[tp.pos++];
    if (n == 255) {
        size_t k = tp.pos < tp.len ? tp.data[tp.pos++] : 0;

        *err = transport_errors[k % (sizeof(transport_errors) / sizeof(transport_errors[0]))];
        *msg = "fuzz: transport error";
        return NULL;
    }
    if (n > tp.len - tp.pos)
        n = tp.len - tp.pos;
    rd = redlock__reader_create();
    require(rd != NULL, "out of memory");
    if (redisReaderFeed(rd, (const char *)tp.data + tp.pos, n) != REDIS_OK ||
        redisReaderGetReply(rd, &reply) != REDIS_OK) {
        *err = REDLOCK_EPROTO;
        *msg = "fuzz: protocol error";
        reply = NULL;
    }
    tp.pos += n;
    redlock__reader_free(rd);
    return reply;
}

/* Delivers one answer per call, interleaving the batches as replies from
 * several nodes would, and stops when the callback says so. */
static int fuzz_fanout(void *ctx, const redlock__batch *batches, size_t n,
                       redlock__reply_fn fn, void *ud)
{
    size_t k, i, most = 0;
    int stop = 0;

    (void)ctx;
    pthread_mutex_lock(&tp.mu);
    for (i = 0; i < n; i++)
        if (batches[i].ncalls > most)
            most = batches[i].ncalls;
    for (k = 0; k < most && !stop; k++) {
        for (i = 0; i < n && !stop; i++) {
            redisReply *r;
            const char *msg;
            int err;

            if (k >= batches[i].ncalls)
                continue;
            require(batches[i].calls[k].argc <= 16, "call with too many arguments");
            r = next_answer(&err, &msg);
            if (pthread_equal(pthread_self(), tp.driver))
                tp.now += REDLOCK__NS_PER_MS;
            stop = r ? fn(ud, i, k, 0, NULL, r) : fn(ud, i, k, err, msg, NULL);
            if (r)
                freeReplyObject(r);
        }
    }
    pthread_mutex_unlock(&tp.mu);
    return REDLOCK_OK;
}

static int64_t fuzz_now(void *ctx)
{
    int64_t t;

    (void)ctx;
    pthread_mutex_lock(&tp.mu);
    t = pthread_equal(pthread_self(), tp.driver) ? tp.now : tp.frozen;
    pthread_mutex_unlock(&tp.mu);
    return t;
}

static void advance_ms(int64_t ms)
{
    pthread_mutex_lock(&tp.mu);
    tp.now += ms * REDLOCK__NS_PER_MS;
    pthread_mutex_unlock(&tp.mu);
}

static void *fuzz_watch(void *ctx, const char *const *names, const size_t *nodes, size_t n,
                        int64_t deadline_ns)
{
    (void)ctx, (void)names, (void)nodes, (void)n, (void)deadline_ns;
    return NULL;
}

static int fuzz_wait(void *ctx, void *watch, uint64_t *seen, int64_t deadline_ns,
                     int (*stop)(void *), void *stop_ud)
{
    (void)ctx, (void)watch, (void)seen, (void)stop, (void)stop_ud;
    pthread_mutex_lock(&tp.mu);
    if (deadline_ns > tp.now)
        tp.now = deadline_ns;
    pthread_mutex_unlock(&tp.mu);
    return REDLOCK_ETIMEOUT;
}

static void fuzz_unwatch(void *ctx, void *watch)
{
    (void)ctx, (void)watch;
}

static const redlock__transport_ops fuzz_ops = {
    .fanout = fuzz_fanout,
    .now_ns = fuzz_now,
    .watch = fuzz_watch,
    .wait = fuzz_wait,
    .unwatch = fuzz_unwatch,
};

/* Every call returns a known code, and a failure says why. */
static int checked(int rc)
{
    const char *m;

    require(rc >= 0 && rc < REDLOCK_ERR_COUNT_, "unknown return code");
    if (rc != REDLOCK_OK) {
        m = redlock_last_error();
        require(m && *m && strcmp(m, "no error") != 0, "failure without a message");
    }
    return rc;
}

static void check_reports(redlock_lock *l)
{
    size_t i;

    for (i = 0; i < redlock_lock_member_count(l); i++) {
        redlock_member_report r;

        require(redlock_lock_report(l, i, &r) == REDLOCK_OK, "report");
        require(r.outcome >= REDLOCK_MEMBER_NONE && r.outcome <= REDLOCK_MEMBER_ERROR,
                "report outcome out of range");
        require(memchr(r.message, '\0', sizeof(r.message)) != NULL, "unterminated report");
        require(r.err >= 0 && r.err < REDLOCK_ERR_COUNT_, "report error out of range");
    }
}

static void exercise(redlock_client *c, uint8_t cfg, uint8_t flags)
{
    static const int quorums[] = {0, REDLOCK_QUORUM_ALL, 1};
    redlock_lock_options lo = {.quorum = quorums[(cfg / 5) % 3], .fencing = flags & 1};
    int64_t lease = flags & 2 ? 0 : 5000, ttl = 0;
    redlock_member_state st;
    redlock_lock *l = NULL;
    uint64_t token = 0;
    size_t released = 0, i;
    int rc, v = 0;

    require(checked(redlock_lock_new(c, "fz", &lo, &l)) == REDLOCK_OK, "lock_new");
    rc = checked(redlock_acquire_as(l, OWNER, 0, lease));
    check_reports(l);
    if (rc == REDLOCK_OK) {
        if (flags & 4)
            checked(redlock_acquire_as(l, OWNER, 0, lease)); /* re-entry */
        require(checked(redlock_remaining_ttl_as(l, OWNER, &ttl)) == REDLOCK_OK, "own ttl");
        require(ttl >= 0 && ttl <= (lease ? lease : 30000), "own ttl out of range");
        rc = checked(redlock_lock_token_as(l, OWNER, &token));
        require((rc == REDLOCK_OK) == (lo.fencing != 0), "token of a fencing hold only");
        /* Due for renewal: the watchdog reads renew replies. */
        advance_ms(12000);
        redlock__watchdog_tick(c);
    }
    checked(redlock_unlock_as(l, OWNER));
    check_reports(l);
    if (flags & 8)
        checked(redlock_unlock_as(l, OWNER));
    checked(redlock_is_locked(l, &v));
    checked(redlock_hold_count_as(l, OWNER, &v));
    checked(redlock_is_held_as(l, OWNER, &v));
    if (checked(redlock_remaining_ttl_as(l, OTHER_OWNER, &ttl)) == REDLOCK_OK)
        require(ttl >= -2, "remaining ttl below -2");
    for (i = 0; i < redlock_lock_member_count(l); i++) {
        require(checked(redlock_lock_inspect(l, i, &st)) == REDLOCK_OK, "inspect");
        require(memchr(st.message, '\0', sizeof(st.message)) != NULL, "unterminated message");
        require(memchr(st.holder, '\0', sizeof(st.holder)) != NULL, "unterminated holder");
    }
    if (checked(redlock_force_unlock(l, &released)) == REDLOCK_OK)
        require(released <= redlock_lock_member_count(l), "released more than members");
    checked(redlock_fenced_set(c, 0, "fz:res", "v", 1, 5));
    /* Background releases fall due: the watchdog reads their replies. */
    advance_ms(60000);
    redlock__watchdog_tick(c);
    redlock_lock_free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redlock__transport t = {&fuzz_ops, NULL};
    redlock_options o;
    redlock_client *c = NULL;

    if (size < 2 || size > 65536)
        return 0;
    pthread_mutex_lock(&tp.mu);
    tp.data = data + 2;
    tp.len = size - 2;
    tp.pos = 0;
    tp.now = tp.frozen = EPOCH_NS;
    tp.driver = pthread_self();
    pthread_mutex_unlock(&tp.mu);

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = 10;
    require(redlock__client_new_with_transport(&c, 1 + data[0] % 5, &o, &t) == REDLOCK_OK,
            "client");
    exercise(c, data[0], data[1]);
    redlock_client_free(c);
    return 0;
}
