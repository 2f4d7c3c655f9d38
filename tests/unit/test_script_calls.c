/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The script layer (resp/script.h): the shape table agrees with what each
 * embedded script reads, every builder puts its named arguments where the
 * script reads them, and every parser maps each reply a script can give
 * (and some it cannot) to one answer. No server, no thread.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/redlock.h"
#include "resp/script.h"
#include "resp/scripts.h"

/* The highest N of `word[N]` in a script body. */
static int highest_index(const char *body, const char *word)
{
    size_t wl = strlen(word);
    const char *p = body;
    int best = 0;

    while ((p = strstr(p, word)) != NULL) {
        p += wl;
        if (*p == '[') {
            int n = atoi(p + 1);

            if (n > best)
                best = n;
        }
    }
    return best;
}

START_TEST(shapes_match_the_scripts)
{
    int i;

    for (i = 0; i < REDLOCK__SCRIPT_COUNT; i++) {
        const redlock__script_shape *s = &redlock__script_shapes[i];

        ck_assert_msg(highest_index(redlock__scripts[i].body, "KEYS") ==
                          s->nkeys + s->optional_keys,
                      "%s.lua reads KEYS up to %d", redlock__scripts[i].name,
                      highest_index(redlock__scripts[i].body, "KEYS"));
        ck_assert_msg(highest_index(redlock__scripts[i].body, "ARGV") == s->nargs,
                      "%s.lua reads ARGV up to %d", redlock__scripts[i].name,
                      highest_index(redlock__scripts[i].body, "ARGV"));
        ck_assert_int_le(s->nkeys + s->optional_keys + s->nargs, REDLOCK__SCRIPT_MAX_ARGS);
    }
}
END_TEST

/* Checks a built call against the table and the expected argv. */
static void expect_call(redlock__script_call sc, int script, int nkeys, const char **argv,
                        const char *const *want)
{
    int i;

    ck_assert_int_eq(sc.script, script);
    ck_assert_int_eq(sc.nkeys, nkeys);
    ck_assert_int_eq(sc.argc, nkeys + redlock__script_shapes[script].nargs);
    for (i = 0; i < sc.argc; i++)
        ck_assert_msg(argv[i] == want[i], "%s: argv[%d] is %s, want %s",
                      redlock__scripts[script].name, i, argv[i], want[i]);
}

START_TEST(builders_place_every_argument)
{
    const char *argv[REDLOCK__SCRIPT_MAX_ARGS];
    redlock__acquire_args acq = {.name = "n", .mark_key = "mark", .token_key = "token", .lease_ms = "30000",
                                 .field = "f", .request_id = "rid", .fresh_only = "1",
                                 .writer_wait_ms = "w"};
    redlock__release_args rel = {.name = "n", .channel = "chan", .mark_key = "mark", .message = "0",
                                 .lease_ms = "30000", .field = "f", .drop_all = "1", .gens = "g1,g2"};

    expect_call(redlock__script_acquire(argv, &acq), REDLOCK__SCRIPT_ACQUIRE, 3, argv,
                (const char *[]){"n", "mark", "token", "30000", "f", "rid", "1", "w"});
    acq.token_key = NULL;
    expect_call(redlock__script_acquire(argv, &acq), REDLOCK__SCRIPT_ACQUIRE, 2, argv,
                (const char *[]){"n", "mark", "30000", "f", "rid", "1", "w"});
    expect_call(redlock__script_release(argv, &rel), REDLOCK__SCRIPT_RELEASE, 3, argv,
                (const char *[]){"n", "chan", "mark", "0", "30000", "f", "1", "g1,g2"});
    /* An abort reads only the first three arguments of a release. */
    expect_call(redlock__script_abort(argv, &rel), REDLOCK__SCRIPT_ABORT, 3, argv,
                (const char *[]){"n", "chan", "mark", "0", "30000", "f"});
    expect_call(redlock__script_renew(argv, &(redlock__renew_args){.name = "n", .lease_ms = "30000", .field = "f"}),
                REDLOCK__SCRIPT_RENEW, 1, argv, (const char *[]){"n", "30000", "f"});
    expect_call(redlock__script_fence_store(
                    argv, &(redlock__fence_store_args){"n", "token", "f", "7"}),
                REDLOCK__SCRIPT_FENCE_STORE, 2, argv, (const char *[]){"n", "token", "f", "7"});
    expect_call(redlock__script_force_release(
                    argv, &(redlock__force_release_args){.name = "n", .channel = "chan", .message = "0"}),
                REDLOCK__SCRIPT_FORCE_RELEASE, 2, argv, (const char *[]){"n", "chan", "0"});
    /* A fair lock's also names its queue, so the first waiter is woken. */
    expect_call(redlock__script_force_release(
                    argv, &(redlock__force_release_args){"n", "chan", "0", "q", "t", "k", "l"}),
                REDLOCK__SCRIPT_FORCE_RELEASE, 6, argv,
                (const char *[]){"n", "chan", "q", "t", "k", "l", "0"});
    expect_call(redlock__script_inspect(argv, &(redlock__inspect_args){"n", "token"}),
                REDLOCK__SCRIPT_INSPECT, 2, argv, (const char *[]){"n", "token"});
    expect_call(redlock__script_fenced_set(argv, &(redlock__fenced_set_args){"k", "v", "9"}),
                REDLOCK__SCRIPT_FENCED_SET, 1, argv, (const char *[]){"k", "v", "9"});
}
END_TEST

/* Each kind's builders pick its scripts and place its extra keys and
 * arguments where the script reads them. */
START_TEST(kind_builders_place_every_argument)
{
    const char *argv[REDLOCK__SCRIPT_MAX_ARGS];
    redlock__acquire_args acq = {.name = "n", .mark_key = "mark", .token_key = NULL,
                                 .lease_ms = "30000", .field = "f", .request_id = "rid",
                                 .fresh_only = "1", .kind = REDLOCK__KIND_READ,
                                 .aux_key = "aux", .channel = "chan", .writer_wait_ms = "-1",
                                 .permits = "2", .limit = "5"};
    redlock__release_args rel = {.name = "n", .channel = "chan", .mark_key = "mark",
                                 .message = "0", .lease_ms = "30000", .field = "f",
                                 .drop_all = "1", .gens = "g1", .kind = REDLOCK__KIND_READ,
                                 .aux_key = "aux", .permits = "2"};
    redlock__renew_args ren = {.name = "n", .lease_ms = "30000", .field = "f",
                               .kind = REDLOCK__KIND_READ, .aux_key = "aux"};

    expect_call(redlock__script_acquire(argv, &acq), REDLOCK__SCRIPT_RW_READ_ACQUIRE, 3, argv,
                (const char *[]){"n", "mark", "aux", "30000", "f", "rid", "1"});
    acq.kind = REDLOCK__KIND_WRITE;
    expect_call(redlock__script_acquire(argv, &acq), REDLOCK__SCRIPT_RW_WRITE_ACQUIRE, 3, argv,
                (const char *[]){"n", "mark", "aux", "30000", "f", "rid", "1", "-1"});
    acq.token_key = "token";
    expect_call(redlock__script_acquire(argv, &acq), REDLOCK__SCRIPT_RW_WRITE_ACQUIRE, 4, argv,
                (const char *[]){"n", "mark", "aux", "token", "30000", "f", "rid", "1", "-1"});
    acq.kind = REDLOCK__KIND_SEMAPHORE;
    expect_call(redlock__script_acquire(argv, &acq), REDLOCK__SCRIPT_SEM_ACQUIRE, 4, argv,
                (const char *[]){"n", "mark", "aux", "chan", "30000", "f", "rid", "1", "2", "5"});
    expect_call(redlock__script_release(argv, &rel), REDLOCK__SCRIPT_RW_RELEASE, 4, argv,
                (const char *[]){"n", "chan", "mark", "aux", "0", "30000", "f", "1", "g1"});
    expect_call(redlock__script_abort(argv, &rel), REDLOCK__SCRIPT_RW_ABORT, 4, argv,
                (const char *[]){"n", "chan", "mark", "aux", "0", "30000", "f"});
    rel.kind = REDLOCK__KIND_SEMAPHORE;
    expect_call(redlock__script_release(argv, &rel), REDLOCK__SCRIPT_SEM_RELEASE, 4, argv,
                (const char *[]){"n", "chan", "mark", "aux", "0", "30000", "f", "1", "g1", "2"});
    expect_call(redlock__script_abort(argv, &rel), REDLOCK__SCRIPT_SEM_ABORT, 4, argv,
                (const char *[]){"n", "chan", "mark", "aux", "0", "30000", "f", "2"});
    expect_call(redlock__script_renew(argv, &ren), REDLOCK__SCRIPT_RW_RENEW, 1, argv,
                (const char *[]){"n", "30000", "f"});
    /* A permit's lease lives in the sorted set, not in the count. */
    ren.kind = REDLOCK__KIND_SEMAPHORE;
    expect_call(redlock__script_renew(argv, &ren), REDLOCK__SCRIPT_SEM_RENEW, 2, argv,
                (const char *[]){"aux", "n", "30000", "f"});
    expect_call(redlock__script_sem_inspect(argv, &(redlock__sem_inspect_args){"n", "aux"}),
                REDLOCK__SCRIPT_SEM_INSPECT, 2, argv, (const char *[]){"n", "aux"});
}
END_TEST

/* A fair waiter's leave names the ending wait's ticket, so a late copy
 * spares the same owner's next place; without one it is "" (any place). */
START_TEST(fair_leave_carries_the_ticket)
{
    const char *argv[REDLOCK__SCRIPT_MAX_ARGS];
    redlock__fair_leave_args leave = {.name = "n", .channel = "chan", .queue_key = "q",
                                      .timeouts_key = "t", .tickets_key = "k",
                                      .lapses_key = "l", .message = "0", .field = "f",
                                      .ticket = "1764338400123456"};
    redlock__script_call sc;

    expect_call(redlock__script_fair_leave(argv, &leave), REDLOCK__SCRIPT_FAIR_LEAVE, 6, argv,
                (const char *[]){"n", "chan", "q", "t", "k", "l", "0", "f", "1764338400123456"});
    leave.ticket = NULL;
    sc = redlock__script_fair_leave(argv, &leave);
    ck_assert_int_eq(sc.argc, 9);
    ck_assert_str_eq(argv[8], "");
}
END_TEST

START_TEST(format_sends_evalsha_then_eval)
{
    const char *argv[REDLOCK__SCRIPT_MAX_ARGS];
    const char *many[REDLOCK__MAX_CALL_ARGS + 1];
    redlock__script_call sc =
        redlock__script_renew(argv, &(redlock__renew_args){.name = "n", .lease_ms = "30000", .field = "f"});
    const redlock__script *renew = &redlock__scripts[REDLOCK__SCRIPT_RENEW];
    char want[256];
    redlock__buf b = {0};
    int i;

    ck_assert_int_eq(redlock__script_encode(&b, sc.script, sc.nkeys, sc.argc, argv, NULL, 0), 0);
    snprintf(want, sizeof(want),
             "*6\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n1\r\n$1\r\nn\r\n"
             "$5\r\n30000\r\n$1\r\nf\r\n",
             renew->sha1);
    ck_assert_uint_eq(b.len, strlen(want));
    ck_assert_mem_eq(b.data, want, strlen(want));
    redlock__buf_free(&b);

    /* After NOSCRIPT the body goes out instead of its SHA1. */
    ck_assert_int_eq(redlock__script_encode(&b, sc.script, sc.nkeys, sc.argc, argv, NULL, 1), 0);
    ck_assert_uint_gt(b.len, renew->len);
    ck_assert_ptr_nonnull(memmem(b.data, b.len, "$4\r\nEVAL\r\n", 10));
    ck_assert_ptr_nonnull(memmem(b.data, b.len, renew->body, renew->len));
    redlock__buf_free(&b);

    /* A plain command appends after what is there; one argument too many
     * leaves the buffer as it was. */
    ck_assert_int_eq(redlock__script_encode(&b, -1, 0, 1, (const char *[]){"PING"}, NULL, 0), 0);
    ck_assert_int_eq(redlock__script_encode(&b, -1, 0, 1, (const char *[]){"PING"}, NULL, 0), 0);
    ck_assert_uint_eq(b.len, 2 * strlen("*1\r\n$4\r\nPING\r\n"));
    ck_assert_mem_eq(b.data, "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n", b.len);
    for (i = 0; i <= REDLOCK__MAX_CALL_ARGS; i++)
        many[i] = "x";
    ck_assert_int_eq(redlock__script_encode(&b, -1, 0, REDLOCK__MAX_CALL_ARGS + 1, many,
                                            NULL, 0), -1);
    ck_assert_uint_eq(b.len, 2 * strlen("*1\r\n$4\r\nPING\r\n"));
    redlock__buf_free(&b);
}
END_TEST

/* The encoder writes exactly what hiredis's reference encoder writes, for
 * lengths across digit boundaries, empty and binary arguments. */
START_TEST(encode_matches_hiredis)
{
    static char big[100001];
    const size_t sizes[] = {0, 1, 9, 10, 11, 99, 100, 999, 1000, 65535, 100000};
    size_t k;

    memset(big, 'a', sizeof(big) - 1);
    big[5] = '\0';
    big[7] = '\r';
    for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        const char *argv[12];
        size_t lens[12];
        redlock__buf b = {0};
        char *ref = NULL;
        int n, i, len;

        for (n = 1; n <= 12; n++) {
            for (i = 0; i < n; i++) {
                argv[i] = big;
                lens[i] = (sizes[k] + (size_t)i * 7) % sizeof(big);
            }
            b.len = b.off = 0;
            ck_assert_int_eq(redlock__script_encode(&b, -1, 0, n, argv, lens, 0), 0);
            len = redisFormatCommandArgv(&ref, n, argv, lens);
            ck_assert_int_ge(len, 0);
            ck_assert_uint_eq(b.len, (size_t)len);
            ck_assert_mem_eq(b.data, ref, (size_t)len);
            redisFreeCommand(ref);
        }
        redlock__buf_free(&b);
    }
}

/* A reply object from RESP text, as the connection's reader makes it. */
static redisReply *resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;

    ck_assert_ptr_nonnull(rd);
    ck_assert_int_eq(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &r), REDIS_OK);
    ck_assert_ptr_nonnull(r);
    redisReaderFree(rd);
    return r;
}

#define GEN "0123456789abcdef0123456789abcdef"

typedef struct acquire_row {
    const char *rule;
    const char *reply;
    int fenced;
    redlock__reply_kind kind;
    int err;
    long long token;
    int64_t pttl_ms;
    size_t gen_len;
    unsigned long long ticket; /* BUSY: the fair ticket candidate, 0 none */
} acquire_row;

static const acquire_row acquire_rows[] = {
    {"re-entry answers token 0", "*1\r\n:0\r\n", 0, REDLOCK__REPLY_GRANTED, 0, 0, -1, 0, 0},
    {"a fresh grant reports its generation", "*2\r\n:0\r\n$32\r\n" GEN "\r\n", 0,
     REDLOCK__REPLY_GRANTED, 0, 0, -1, 32, 0},
    {"a fenced fresh grant carries its token candidate", "*2\r\n:42\r\n$32\r\n" GEN "\r\n", 1,
     REDLOCK__REPLY_GRANTED, 0, 42, -1, 32, 0},
    {"an empty generation is none kept", "*2\r\n:0\r\n$0\r\n\r\n", 0, REDLOCK__REPLY_GRANTED,
     0, 0, -1, 0, 0},
    {"a token without fencing is not an answer", "*1\r\n:5\r\n", 0, REDLOCK__REPLY_MALFORMED,
     REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a generation of the wrong length is refused", "*2\r\n:0\r\n$3\r\nabc\r\n", 0,
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a generation with upper case is refused", "*2\r\n:0\r\n$32\r\n0123456789ABCDEF0123456789abcdef\r\n",
     0, REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a grant without a token is its bare generation", "$32\r\n" GEN "\r\n", 0,
     REDLOCK__REPLY_GRANTED, 0, 0, -1, 32, 0},
    {"a fenced re-entry is its bare generation, token 0", "$32\r\n" GEN "\r\n", 1,
     REDLOCK__REPLY_GRANTED, 0, 0, -1, 32, 0},
    {"a bare empty generation is none kept", "$0\r\n\r\n", 0, REDLOCK__REPLY_GRANTED, 0, 0,
     -1, 0, 0},
    {"a bare generation of the wrong length is refused", "$3\r\nabc\r\n", 0,
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a bare generation with upper case is refused",
     "$32\r\n0123456789ABCDEF0123456789abcdef\r\n", 0, REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO,
     0, -1, 0, 0},
    {"nil is a grant without a generation when not fenced", "$-1\r\n", 0,
     REDLOCK__REPLY_GRANTED, 0, 0, -1, 0, 0},
    {"nil is no answer when fenced", "$-1\r\n", 1, REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0,
     -1, 0, 0},
    {"busy answers the holder's TTL", ":1234\r\n", 0, REDLOCK__REPLY_BUSY, 0, 0, 1234, 0, 0},
    {"busy without expiry answers -1", ":-1\r\n", 0, REDLOCK__REPLY_BUSY, 0, 0, -1, 0, 0},
    {"below -1 is no TTL", ":-5\r\n", 0, REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a fair refusal carries its ticket candidate",
     "*3\r\n:250\r\n$1\r\nt\r\n$16\r\n1732400000000001\r\n", 0, REDLOCK__REPLY_BUSY, 0, 0,
     250, 0, 1732400000000001ULL},
    {"the largest 64-bit candidate is read",
     "*3\r\n:0\r\n$1\r\nt\r\n$20\r\n18446744073709551615\r\n", 0, REDLOCK__REPLY_BUSY, 0, 0,
     0, 0, 18446744073709551615ULL},
    {"a candidate past 64 bits is refused",
     "*3\r\n:0\r\n$1\r\nt\r\n$20\r\n18446744073709551616\r\n", 0,
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a candidate that is not a number is refused", "*3\r\n:0\r\n$1\r\nt\r\n$3\r\n12x\r\n",
     0, REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a zero candidate is refused", "*3\r\n:0\r\n$1\r\nt\r\n$1\r\n0\r\n", 0,
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a three-part reply needs the ticket mark", "*3\r\n:0\r\n$1\r\nx\r\n$1\r\n5\r\n", 0,
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a refusal's TTL below -1 is refused", "*3\r\n:-7\r\n$1\r\nt\r\n$1\r\n5\r\n", 0,
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO, 0, -1, 0, 0},
    {"a loading server maps to ELOADING", "-LOADING Redis is loading\r\n", 0,
     REDLOCK__REPLY_ERROR, REDLOCK_ELOADING, 0, -1, 0, 0},
    {"an unknown server error is ESERVER", "-ERR boom\r\n", 1, REDLOCK__REPLY_ERROR,
     REDLOCK_ESERVER, 0, -1, 0, 0},
    {"a status reply is not an answer", "+OK\r\n", 0, REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO,
     0, -1, 0, 0},
};

START_TEST(acquire_replies)
{
    const acquire_row *row = &acquire_rows[_i];
    redisReply *r = resp(row->reply);
    redlock__script_reply sr;

    redlock__parse_acquire(r, row->fenced, &sr);
    ck_assert_msg(sr.kind == row->kind, "%s: kind %d", row->rule, sr.kind);
    ck_assert_msg(sr.err == row->err, "%s: err %d", row->rule, sr.err);
    if (sr.kind == REDLOCK__REPLY_GRANTED) {
        ck_assert_msg(sr.token == row->token, "%s: token", row->rule);
        ck_assert_msg(sr.gen_len == row->gen_len, "%s: gen_len", row->rule);
    }
    if (sr.kind == REDLOCK__REPLY_BUSY) {
        ck_assert_msg(sr.pttl_ms == row->pttl_ms, "%s: pttl", row->rule);
        ck_assert_msg(sr.ticket == row->ticket, "%s: ticket %llu", row->rule, sr.ticket);
    }
    if (sr.kind == REDLOCK__REPLY_ERROR || sr.kind == REDLOCK__REPLY_MALFORMED)
        ck_assert_msg(sr.message && *sr.message, "%s: a message", row->rule);
    freeReplyObject(r);
}
END_TEST

typedef struct simple_row {
    const char *rule;
    void (*parse)(const redisReply *, redlock__script_reply *);
    const char *reply;
    redlock__reply_kind kind;
    int err;
} simple_row;

static const simple_row simple_rows[] = {
    {"release: 1 is done", redlock__parse_release, ":1\r\n", REDLOCK__REPLY_DONE, 0},
    {"release: 0 leaves another count", redlock__parse_release, ":0\r\n", REDLOCK__REPLY_OTHER,
     0},
    {"release: nil is not held", redlock__parse_release, "$-1\r\n", REDLOCK__REPLY_NOT_HELD, 0},
    {"release: any other integer is unknown state", redlock__parse_release, ":2\r\n",
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO},
    {"release: a read-only replica maps to EREADONLY", redlock__parse_release,
     "-READONLY You can't write\r\n", REDLOCK__REPLY_ERROR, REDLOCK_EREADONLY},
    {"renew: 1 renewed", redlock__parse_renew, ":1\r\n", REDLOCK__REPLY_RENEWED, 0},
    {"renew: -2 vanished", redlock__parse_renew, ":-2\r\n", REDLOCK__REPLY_VANISHED, 0},
    {"renew: 0 held by another", redlock__parse_renew, ":0\r\n", REDLOCK__REPLY_OTHER, 0},
    {"renew: a string is no answer", redlock__parse_renew, "$1\r\n1\r\n",
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO},
    {"renew: OOM maps to EOOM", redlock__parse_renew, "-OOM no\r\n", REDLOCK__REPLY_ERROR,
     REDLOCK_EOOM},
    {"force: 1 deleted", redlock__parse_force_release, ":1\r\n", REDLOCK__REPLY_DONE, 0},
    {"force: 0 nothing there", redlock__parse_force_release, ":0\r\n", REDLOCK__REPLY_DONE, 0},
    {"force: 2 is no answer", redlock__parse_force_release, ":2\r\n", REDLOCK__REPLY_MALFORMED,
     REDLOCK_EPROTO},
    {"fenced_set: 1 written", redlock__parse_fenced_set, ":1\r\n", REDLOCK__REPLY_DONE, 0},
    {"fenced_set: {0, newest} is stale", redlock__parse_fenced_set,
     "*2\r\n:0\r\n$2\r\n17\r\n", REDLOCK__REPLY_STALE, 0},
    {"fenced_set: NOPERM maps to EAUTH", redlock__parse_fenced_set, "-NOPERM no\r\n",
     REDLOCK__REPLY_ERROR, REDLOCK_EAUTH},
    {"fenced_set: nil is no answer", redlock__parse_fenced_set, "$-1\r\n",
     REDLOCK__REPLY_MALFORMED, REDLOCK_EPROTO},
};

START_TEST(simple_replies)
{
    const simple_row *row = &simple_rows[_i];
    redisReply *r = resp(row->reply);
    redlock__script_reply sr;

    row->parse(r, &sr);
    ck_assert_msg(sr.kind == row->kind, "%s: kind %d", row->rule, sr.kind);
    ck_assert_msg(sr.err == row->err, "%s: err %d", row->rule, sr.err);
    if (row->parse == redlock__parse_force_release && sr.kind == REDLOCK__REPLY_DONE)
        ck_assert_int_eq(sr.deleted, strcmp(row->reply, ":1\r\n") == 0);
    if (sr.kind == REDLOCK__REPLY_STALE)
        ck_assert_str_eq(sr.message, "17");
    freeReplyObject(r);
}
END_TEST

START_TEST(inspect_replies)
{
    redisReply *r = resp("*4\r\n:900\r\n$1\r\n7\r\n$5\r\nowner\r\n:2\r\n");
    redlock__inspect_reply ir;

    redlock__parse_inspect(r, &ir);
    ck_assert_int_eq(ir.kind, REDLOCK__REPLY_DONE);
    ck_assert_int_eq(ir.pttl_ms, 900);
    ck_assert_uint_eq(ir.token, 7);
    ck_assert_uint_eq(ir.holders, 1);
    ck_assert_str_eq(ir.pairs[0]->str, "owner");
    ck_assert_int_eq(redlock__reply_i64(ir.pairs[1]), 2);
    freeReplyObject(r);

    /* An absent lock: PTTL -2, no holders. */
    r = resp("*2\r\n:-2\r\n:0\r\n");
    redlock__parse_inspect(r, &ir);
    ck_assert_int_eq(ir.kind, REDLOCK__REPLY_DONE);
    ck_assert_uint_eq(ir.holders, 0);
    freeReplyObject(r);

    /* A PTTL below -2, or an odd number of elements, is no answer. */
    r = resp("*2\r\n:-3\r\n:0\r\n");
    redlock__parse_inspect(r, &ir);
    ck_assert_int_eq(ir.kind, REDLOCK__REPLY_MALFORMED);
    ck_assert_int_eq(ir.err, REDLOCK_EPROTO);
    freeReplyObject(r);
    r = resp("*3\r\n:5\r\n:0\r\n$1\r\nx\r\n");
    redlock__parse_inspect(r, &ir);
    ck_assert_int_eq(ir.kind, REDLOCK__REPLY_MALFORMED);
    freeReplyObject(r);
    r = resp("-LOADING wait\r\n");
    redlock__parse_inspect(r, &ir);
    ck_assert_int_eq(ir.kind, REDLOCK__REPLY_ERROR);
    ck_assert_int_eq(ir.err, REDLOCK_ELOADING);
    freeReplyObject(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("script_calls");
    TCase *tc = tcase_create("script_calls");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, shapes_match_the_scripts);
    tcase_add_test(tc, builders_place_every_argument);
    tcase_add_test(tc, kind_builders_place_every_argument);
    tcase_add_test(tc, fair_leave_carries_the_ticket);
    tcase_add_test(tc, format_sends_evalsha_then_eval);
    tcase_add_test(tc, encode_matches_hiredis);
    tcase_add_loop_test(tc, acquire_replies, 0,
                        (int)(sizeof(acquire_rows) / sizeof(acquire_rows[0])));
    tcase_add_loop_test(tc, simple_replies, 0,
                        (int)(sizeof(simple_rows) / sizeof(simple_rows[0])));
    tcase_add_test(tc, inspect_replies);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
