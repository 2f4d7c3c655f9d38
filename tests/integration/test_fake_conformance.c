/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The unit tests' fake transport (tests/unit/fake_transport.c) re-implements
 * every Lua script of lua/ in C. Here the same sequence of calls goes to the
 * fake and, as EVAL of the embedded scripts, to a real redis-server, and
 * the replies are compared step by step, so the fake cannot drift from the
 * scripts unnoticed. Values that depend on the server's clock (a PTTL, a
 * fencing token's time term) are compared by kind, not by value.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit/fake_transport.h"
#include "redlock/redlock.h"
#include "resp/scripts.h"
#include "rig_env.h"

typedef enum match {
    EXACT = 0,  /* same type and value, recursively */
    NEAR,       /* integers within 2 s (a PTTL), elsewhere exact */
    POSITIVE    /* array whose first element is an integer > 0 (a token) */
} match;

typedef struct step {
    const char *what;
    int script, nkeys, argc;
    const char *argv[12];
    match how;
} step;

/* Names of this run: every key shares one hash tag. */
static char NAME[64], LATCH[96], TOKEN[96], CHAN[96], RES[96];
static char ID[20][40];

static const char *latch(int i)
{
    static char buf[20][160];

    snprintf(buf[i], sizeof(buf[i]), "%s%s", LATCH, ID[i]);
    return buf[i];
}

static void names(void)
{
    int i;

    rig_unique_name(NAME, sizeof(NAME), "conf", "fake");
    snprintf(LATCH, sizeof(LATCH), "redlock_latch:{%s}:", NAME);
    snprintf(TOKEN, sizeof(TOKEN), "redisson_lock_token:{%s}", NAME);
    snprintf(CHAN, sizeof(CHAN), "redisson_lock__channel:{%s}", NAME);
    snprintf(RES, sizeof(RES), "conf-res:{%s}", NAME);
    /* Request ids: 12 hex digits of sequence, then 20 more. */
    for (i = 0; i < 20; i++)
        snprintf(ID[i], sizeof(ID[i]), "%012x%020x", 10 + i, 0xabc + i);
    /* An id from earlier in the client's sequence than every other. */
    snprintf(ID[13], sizeof(ID[13]), "%012x%020x", 5, 0xdef);
}

#define A "00000000-0000-4000-8000-00000000000a:1"
#define B "00000000-0000-4000-8000-00000000000b:1"

/* The sequence; built at run time because the names are. */
static size_t build(step *s)
{
    size_t n = 0;

#define ACQ(w, owner, id, fresh, how_)                                                      \
    s[n++] = (step){w, REDLOCK__SCRIPT_ACQUIRE, 2, 6,                                       \
                    {NAME, latch(id), "30000", owner, ID[id], fresh}, how_}
#define REL(w, owner, id, gens, all)                                                        \
    s[n++] = (step){w, REDLOCK__SCRIPT_RELEASE, 3, 8,                                       \
                    {NAME, CHAN, latch(id), "0", "30000", owner, all, gens}, EXACT}
#define ABORT(w, owner, id)                                                                 \
    s[n++] = (step){w, REDLOCK__SCRIPT_ABORT, 3, 6,                                         \
                    {NAME, CHAN, latch(id), "0", "30000", owner}, EXACT}
#define RENEW(w, owner)                                                                     \
    s[n++] = (step){w, REDLOCK__SCRIPT_RENEW, 1, 3, {NAME, "30000", owner}, EXACT}

    ACQ("fresh grant", A, 0, "1", EXACT);
    ACQ("re-entry", A, 1, "0", EXACT);
    ACQ("replay of the re-entry", A, 1, "0", EXACT);
    ACQ("replay of the first request", A, 0, "1", EXACT);
    ACQ("another owner is refused with the PTTL", B, 2, "1", NEAR);
    RENEW("renew by the owner", A);
    RENEW("renew by another owner", B);
    REL("release one of two holds", A, 3, ID[0], "0");
    REL("replay of that release", A, 3, ID[0], "0");
    REL("release of another generation", A, 4, ID[19], "0");
    REL("last release deletes and publishes", A, 5, ID[0], "0");
    REL("release of a hold no longer there", A, 6, ID[7], "0");
    ACQ("an acquire the release tombstoned", A, 7, "1", EXACT);
    ABORT("abort before its acquire", A, 8);
    ACQ("the aborted acquire arrives late", A, 8, "1", EXACT);
    RENEW("renew of a missing key", A);
    ACQ("fresh grant, to be left behind", A, 10, "1", EXACT);
    ACQ("a newer fresh acquire replaces it", A, 11, "1", EXACT);
    ABORT("the leftover's abort spares the new hold", A, 10);
    ABORT("replay of that abort", A, 10);
    ACQ("a late copy older than the hold", A, 13, "1", EXACT);
    REL("drop-all of the hold", A, 12, ID[11], "1");
    ACQ("a hold to force-release", A, 15, "1", EXACT);
    ACQ("re-entered twice", A, 16, "0", EXACT);
    ACQ("and again", A, 17, "0", EXACT);
    ABORT("abort of the last re-entry undoes one count", A, 17);
    REL("release of one count", A, 18, ID[15], "0");
    REL("replay of that release", A, 18, ID[15], "0");
    s[n++] = (step){"force release", REDLOCK__SCRIPT_FORCE_RELEASE, 2, 3, {NAME, CHAN, "0"},
                    EXACT};
    s[n++] = (step){"force release of nothing", REDLOCK__SCRIPT_FORCE_RELEASE, 2, 3,
                    {NAME, CHAN, "0"}, EXACT};
    s[n++] = (step){"fenced fresh grant", REDLOCK__SCRIPT_ACQUIRE, 3, 7,
                    {NAME, latch(14), TOKEN, "30000", B, ID[14], "1"}, POSITIVE};
    s[n++] = (step){"fence store by the holder", REDLOCK__SCRIPT_FENCE_STORE, 2, 4,
                    {NAME, TOKEN, B, "1"}, EXACT};
    s[n++] = (step){"fence store by another owner", REDLOCK__SCRIPT_FENCE_STORE, 2, 4,
                    {NAME, TOKEN, A, "1"}, EXACT};
    s[n++] = (step){"fenced write", REDLOCK__SCRIPT_FENCED_SET, 1, 3, {RES, "v1", "5"}, EXACT};
    s[n++] = (step){"stale fenced write", REDLOCK__SCRIPT_FENCED_SET, 1, 3, {RES, "v0", "3"},
                    EXACT};
    return n;
}

/* ------------------------------------------------------------------------ */

typedef struct captured {
    redisReply *r;
    int err;
} captured;

/* Copies a reply tree (the fan-out frees its own after the callback). */
static redisReply *copy_reply(const redisReply *r)
{
    redisReply *c = calloc(1, sizeof(*c));
    size_t i;

    ck_assert_ptr_nonnull(c);
    c->type = r->type;
    c->integer = r->integer;
    if (r->str) {
        c->str = malloc(r->len + 1);
        memcpy(c->str, r->str, r->len + 1);
        c->len = r->len;
    }
    if (r->type == REDIS_REPLY_ARRAY) {
        c->elements = r->elements;
        c->element = calloc(r->elements ? r->elements : 1, sizeof(redisReply *));
        for (i = 0; i < r->elements; i++)
            c->element[i] = copy_reply(r->element[i]);
    }
    return c;
}

static void free_copy(redisReply *r)
{
    size_t i;

    if (!r)
        return;
    for (i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        free_copy(r->element[i]);
    free(r->element);
    free(r->str);
    free(r);
}

static int on_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                    redisReply *r)
{
    captured *c = ud;

    (void)batch, (void)call, (void)msg;
    c->err = err;
    if (!err)
        c->r = copy_reply(r);
    return 0;
}

static redisReply *via_fake(fake *f, const step *s)
{
    redlock__transport tp = fake_transport(f);
    redlock__call call = {s->script, s->nkeys, s->argc, s->argv, NULL};
    redlock__batch b = {.calls = &call, .ncalls = 1,
                        .deadline_ns = tp.ops->now_ns(tp.ctx) + 1000000000LL};
    captured c = {NULL, 0};

    tp.ops->fanout(tp.ctx, &b, 1, on_reply, &c);
    ck_assert_msg(!c.err && c.r, "%s: the fake gave no reply (%d)", s->what, c.err);
    return c.r;
}

static redisReply *via_redis(redisContext *ctx, const step *s)
{
    const char *argv[16];
    char nkeys[8];
    redisReply *r;
    int i;

    snprintf(nkeys, sizeof(nkeys), "%d", s->nkeys);
    argv[0] = "EVAL";
    argv[1] = redlock__scripts[s->script].body;
    argv[2] = nkeys;
    for (i = 0; i < s->argc; i++)
        argv[3 + i] = s->argv[i];
    r = redisCommandArgv(ctx, 3 + s->argc, argv, NULL);
    ck_assert_msg(r != NULL, "%s: redis: %s", s->what, ctx->errstr);
    return r;
}

static void describe(const redisReply *r, char *out, size_t cap)
{
    size_t used, i;

    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        snprintf(out, cap, "%lld", r->integer);
        break;
    case REDIS_REPLY_NIL:
        snprintf(out, cap, "nil");
        break;
    case REDIS_REPLY_ARRAY:
        snprintf(out, cap, "[");
        for (i = 0; i < r->elements && (used = strlen(out)) + 4 < cap; i++) {
            describe(r->element[i], out + used, cap - used - 2);
            strcat(out, i + 1 < r->elements ? " " : "");
        }
        strcat(out, "]");
        break;
    default:
        snprintf(out, cap, "'%s'", r->str ? r->str : "");
    }
}

static int same(const redisReply *a, const redisReply *b, match how)
{
    size_t i;

    if (how == POSITIVE)
        return a->type == REDIS_REPLY_ARRAY && b->type == REDIS_REPLY_ARRAY &&
               a->elements == b->elements && a->elements == 2 &&
               a->element[0]->integer > 0 && b->element[0]->integer > 0 &&
               same(a->element[1], b->element[1], EXACT);
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return how == NEAR ? llabs(a->integer - b->integer) <= 2000 : a->integer == b->integer;
    case REDIS_REPLY_NIL:
        return 1;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements)
            return 0;
        for (i = 0; i < a->elements; i++)
            if (!same(a->element[i], b->element[i], how))
                return 0;
        return 1;
    default:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    }
}

START_TEST(test_fake_matches_lua)
{
    static step steps[64];
    struct timeval tv = {5, 0};
    redisContext *ctx;
    fake *f = fake_new(1);
    size_t n, i;

    names();
    n = build(steps);
    ctx = redisConnectWithTimeout("127.0.0.1", rig_get_int("PLAIN_BASE_PORT"), tv);
    ck_assert_msg(ctx && !ctx->err, "connect: %s", ctx ? ctx->errstr : "?");
    for (i = 0; i < n; i++) {
        redisReply *got = via_fake(f, &steps[i]), *want = via_redis(ctx, &steps[i]);
        char g[256], w[256];

        describe(got, g, sizeof(g));
        describe(want, w, sizeof(w));
        ck_assert_msg(same(got, want, steps[i].how), "step %zu, %s: fake %s, redis %s", i + 1,
                      steps[i].what, g, w);
        free_copy(got);
        freeReplyObject(want);
    }
    fprintf(stderr, "fake and Lua agree on %zu steps\n", n);
    redisFree(ctx);
    fake_free(f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fake-conformance");
    TCase *tc = tcase_create("conformance");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_fake_matches_lua);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
