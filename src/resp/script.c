/* SPDX-License-Identifier: BSD-3-Clause */
#include "resp/script.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Indexed by redlock__script_id; test_script checks it against lua/. */
const redlock__script_shape redlock__script_shapes[REDLOCK__SCRIPT_COUNT] = {
    [REDLOCK__SCRIPT_ACQUIRE] = {2, 1, 5},
    [REDLOCK__SCRIPT_RENEW] = {1, 0, 2},
    [REDLOCK__SCRIPT_RELEASE] = {3, 0, 5},
    [REDLOCK__SCRIPT_ABORT] = {3, 0, 3},
    [REDLOCK__SCRIPT_FORCE_RELEASE] = {2, 4, 1},
    [REDLOCK__SCRIPT_FENCE_STORE] = {2, 0, 2},
    [REDLOCK__SCRIPT_FENCED_SET] = {1, 0, 2},
    [REDLOCK__SCRIPT_INSPECT] = {2, 0, 0},
    [REDLOCK__SCRIPT_RW_READ_ACQUIRE] = {3, 0, 4},
    [REDLOCK__SCRIPT_RW_WRITE_ACQUIRE] = {3, 1, 5},
    [REDLOCK__SCRIPT_RW_RELEASE] = {4, 0, 5},
    [REDLOCK__SCRIPT_RW_ABORT] = {4, 0, 3},
    [REDLOCK__SCRIPT_RW_RENEW] = {1, 0, 2},
    [REDLOCK__SCRIPT_SEM_ACQUIRE] = {4, 0, 6},
    [REDLOCK__SCRIPT_SEM_RELEASE] = {4, 0, 6},
    [REDLOCK__SCRIPT_SEM_ABORT] = {4, 0, 4},
    [REDLOCK__SCRIPT_SEM_RENEW] = {2, 0, 2},
    [REDLOCK__SCRIPT_SEM_INSPECT] = {2, 0, 0},
    [REDLOCK__SCRIPT_FAIR_TICKET] = {1, 0, 0},
    [REDLOCK__SCRIPT_FAIR_ACQUIRE] = {6, 1, 6},
    [REDLOCK__SCRIPT_FAIR_RELEASE] = {7, 0, 5},
    [REDLOCK__SCRIPT_FAIR_ABORT] = {7, 0, 4},
    [REDLOCK__SCRIPT_FAIR_LEAVE] = {6, 0, 3},
};

/* Copies keys then arguments into argv, in the script's order. */
static redlock__script_call place(const char **argv, int script, int nkeys,
                                  const char *const *keys, const char *const *args)
{
    const redlock__script_shape *s = &redlock__script_shapes[script];
    int i;

    for (i = 0; i < nkeys; i++)
        argv[i] = keys[i];
    for (i = 0; i < s->nargs; i++)
        argv[nkeys + i] = args[i];
    return (redlock__script_call){script, nkeys, nkeys + s->nargs};
}

redlock__script_call redlock__script_acquire(const char **argv, const redlock__acquire_args *a)
{
    switch (a->kind) {
    case REDLOCK__KIND_READ: {
        const char *keys[] = {a->name, a->mark_key, a->aux_key};
        const char *args[] = {a->lease_ms, a->field, a->request_id, a->fresh_only};

        return place(argv, REDLOCK__SCRIPT_RW_READ_ACQUIRE, 3, keys, args);
    }
    case REDLOCK__KIND_WRITE: {
        const char *keys[] = {a->name, a->mark_key, a->aux_key, a->token_key};
        const char *args[] = {a->lease_ms, a->field, a->request_id, a->fresh_only,
                              a->writer_wait_ms ? a->writer_wait_ms : "0"};

        return place(argv, REDLOCK__SCRIPT_RW_WRITE_ACQUIRE, a->token_key ? 4 : 3, keys, args);
    }
    case REDLOCK__KIND_FAIR: {
        const char *keys[] = {a->name,     a->mark_key, a->aux_key,  a->aux2_key,
                              a->aux3_key, a->aux4_key, a->token_key};
        const char *args[] = {a->lease_ms,   a->field,  a->request_id,
                              a->fresh_only, a->ticket, a->wait_lease_ms};

        return place(argv, REDLOCK__SCRIPT_FAIR_ACQUIRE, a->token_key ? 7 : 6, keys, args);
    }
    case REDLOCK__KIND_SEMAPHORE: {
        const char *keys[] = {a->name, a->mark_key, a->aux_key, a->channel};
        const char *args[] = {a->lease_ms, a->field,   a->request_id,
                              a->fresh_only, a->permits, a->limit};

        return place(argv, REDLOCK__SCRIPT_SEM_ACQUIRE, 4, keys, args);
    }
    default: {
        const char *keys[] = {a->name, a->mark_key, a->token_key};
        const char *args[] = {a->lease_ms, a->field, a->request_id, a->fresh_only,
                              a->writer_wait_ms ? a->writer_wait_ms : "0"};

        return place(argv, REDLOCK__SCRIPT_ACQUIRE, a->token_key ? 3 : 2, keys, args);
    }
    }
}

static redlock__script_call release_like(const char **argv, int abort,
                                         const redlock__release_args *a)
{
    const char *keys[] = {a->name,     a->channel,  a->mark_key, a->aux_key,
                          a->aux2_key, a->aux3_key, a->aux4_key};

    switch (a->kind) {
    case REDLOCK__KIND_FAIR: {
        const char *rel[] = {a->message, a->lease_ms, a->field, a->drop_all, a->gens};
        const char *ab[] = {a->message, a->lease_ms, a->field, a->ticket ? a->ticket : ""};
        const char *const *args = abort ? ab : rel;

        return place(argv, abort ? REDLOCK__SCRIPT_FAIR_ABORT : REDLOCK__SCRIPT_FAIR_RELEASE, 7,
                     keys, args);
    }
    case REDLOCK__KIND_READ:
    case REDLOCK__KIND_WRITE: {
        const char *args[] = {a->message, a->lease_ms, a->field, a->drop_all, a->gens};

        return place(argv, abort ? REDLOCK__SCRIPT_RW_ABORT : REDLOCK__SCRIPT_RW_RELEASE, 4,
                     keys, args);
    }
    case REDLOCK__KIND_SEMAPHORE: {
        const char *rel[] = {a->message, a->lease_ms, a->field, a->drop_all, a->gens, a->permits};
        const char *ab[] = {a->message, a->lease_ms, a->field, a->permits};

        return abort ? place(argv, REDLOCK__SCRIPT_SEM_ABORT, 4, keys, ab)
                     : place(argv, REDLOCK__SCRIPT_SEM_RELEASE, 4, keys, rel);
    }
    default: {
        const char *args[] = {a->message, a->lease_ms, a->field, a->drop_all, a->gens};

        return place(argv, abort ? REDLOCK__SCRIPT_ABORT : REDLOCK__SCRIPT_RELEASE, 3, keys,
                     args);
    }
    }
}

redlock__script_call redlock__script_release(const char **argv, const redlock__release_args *a)
{
    return release_like(argv, 0, a);
}

redlock__script_call redlock__script_abort(const char **argv, const redlock__release_args *a)
{
    return release_like(argv, 1, a);
}

redlock__script_call redlock__script_renew(const char **argv, const redlock__renew_args *a)
{
    const char *args[] = {a->lease_ms, a->field};
    int script = a->kind == REDLOCK__KIND_READ || a->kind == REDLOCK__KIND_WRITE
                     ? REDLOCK__SCRIPT_RW_RENEW
                 : a->kind == REDLOCK__KIND_SEMAPHORE ? REDLOCK__SCRIPT_SEM_RENEW
                                                       : REDLOCK__SCRIPT_RENEW;
    const char *keys[] = {script == REDLOCK__SCRIPT_SEM_RENEW ? a->aux_key : a->name, a->name};

    return place(argv, script, script == REDLOCK__SCRIPT_SEM_RENEW ? 2 : 1, keys, args);
}

redlock__script_call redlock__script_fair_ticket(const char **argv, const char *tickets_key)
{
    const char *keys[] = {tickets_key};

    return place(argv, REDLOCK__SCRIPT_FAIR_TICKET, 1, keys, NULL);
}

redlock__script_call redlock__script_fair_leave(const char **argv,
                                                const redlock__fair_leave_args *a)
{
    const char *keys[] = {a->name,         a->channel,     a->queue_key,
                          a->timeouts_key, a->tickets_key, a->lapses_key};
    const char *args[] = {a->message, a->field, a->ticket ? a->ticket : ""};

    return place(argv, REDLOCK__SCRIPT_FAIR_LEAVE, 6, keys, args);
}

redlock__script_call redlock__script_sem_inspect(const char **argv,
                                                 const redlock__sem_inspect_args *a)
{
    const char *keys[] = {a->name, a->permits_key};

    return place(argv, REDLOCK__SCRIPT_SEM_INSPECT, 2, keys, NULL);
}

redlock__script_call redlock__script_fence_store(const char **argv,
                                                 const redlock__fence_store_args *a)
{
    const char *keys[] = {a->name, a->token_key};
    const char *args[] = {a->field, a->token};

    return place(argv, REDLOCK__SCRIPT_FENCE_STORE, 2, keys, args);
}

redlock__script_call redlock__script_force_release(const char **argv,
                                                   const redlock__force_release_args *a)
{
    const char *keys[] = {a->name,         a->channel,     a->queue_key,
                          a->timeouts_key, a->tickets_key, a->lapses_key};
    const char *args[] = {a->message};

    return place(argv, REDLOCK__SCRIPT_FORCE_RELEASE, a->queue_key ? 6 : 2, keys, args);
}

redlock__script_call redlock__script_inspect(const char **argv, const redlock__inspect_args *a)
{
    const char *keys[] = {a->name, a->token_key};

    return place(argv, REDLOCK__SCRIPT_INSPECT, 2, keys, NULL);
}

redlock__script_call redlock__script_fenced_set(const char **argv,
                                                const redlock__fenced_set_args *a)
{
    const char *keys[] = {a->key};
    const char *args[] = {a->value, a->token};

    return place(argv, REDLOCK__SCRIPT_FENCED_SET, 1, keys, args);
}

/* n in decimal at p; returns the digits written. Most are the lengths
 * of short arguments: one or two digits, without the general loop. */
static inline size_t put_decimal(char *p, size_t n)
{
    if (n < 10) {
        p[0] = (char)('0' + n);
        return 1;
    }
    if (n < 100) {
        p[0] = (char)('0' + n / 10);
        p[1] = (char)('0' + n % 10);
        return 2;
    }
    return redlock__fmt_u64(p, 21, (uint64_t)n);
}

/* "<prefix><n>\r\n" at p; returns the bytes written. */
static inline size_t put_header(char *p, char prefix, size_t n)
{
    size_t k;

    p[0] = prefix;
    k = 1 + put_decimal(p + 1, n);
    p[k] = '\r';
    p[k + 1] = '\n';
    return k + 2;
}

/* "$<len>\r\n<bytes>\r\n" at p; returns the end. */
static inline char *put_bulk(char *p, const char *bytes, size_t len)
{
    p += put_header(p, '$', len);
    memcpy(p, bytes, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* The most any header takes: a prefix, 20 digits, CRLF. */
#define HEADER_MAX 23

int redlock__script_encode(redlock__buf *out, int script, int nkeys, int argc,
                           const char *const *argv, const size_t *argvlen, int fallback)
{
    size_t lens[REDLOCK__MAX_CALL_ARGS], room, i;
    const redlock__script *s = NULL;
    char nk[21], *p, *start;
    size_t nklen = 0;

    if (argc < 0 || argc > REDLOCK__MAX_CALL_ARGS || nkeys < 0)
        return -1;
    /* One pass over the arguments to bound the size, one to write them
     * straight into the output; the unused rest of the bound is given back. */
    room = HEADER_MAX;
    if (script >= 0) {
        s = &redlock__scripts[script];
        nklen = redlock__fmt_u64(nk, sizeof(nk), (uint64_t)nkeys);
        room += 3 * HEADER_MAX + (fallback ? 4 + s->len : 7 + 40) + nklen + 6;
    }
    for (i = 0; i < (size_t)argc; i++) {
        lens[i] = argvlen ? argvlen[i] : strlen(argv[i]);
        room += HEADER_MAX + lens[i] + 2;
    }
    start = p = redlock__buf_extend(out, room);
    if (!p)
        return -1;
    p += put_header(p, '*', (size_t)argc + (s ? 3 : 0));
    if (s) {
        p = fallback ? put_bulk(p, "EVAL", 4) : put_bulk(p, "EVALSHA", 7);
        p = put_bulk(p, fallback ? s->body : s->sha1, fallback ? s->len : 40);
        p = put_bulk(p, nk, nklen);
    }
    for (i = 0; i < (size_t)argc; i++)
        p = put_bulk(p, argv[i], lens[i]);
    out->len -= room - (size_t)(p - start);
    return 0;
}

int redlock__server_error_code(const char *msg)
{
    static const struct {
        const char *prefix;
        int code;
    } map[] = {
        {"LOADING", REDLOCK_ELOADING},   {"READONLY", REDLOCK_EREADONLY},
        {"OOM", REDLOCK_EOOM},           {"NOAUTH", REDLOCK_EAUTH},
        {"WRONGPASS", REDLOCK_EAUTH},    {"NOPERM", REDLOCK_EAUTH},
        {"WRONGTYPE", REDLOCK_ECONFIG}, {"EUPGRADE", REDLOCK_EUPGRADE},
        {"ELIMIT", REDLOCK_ECONFIG},
    };
    size_t i;

    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strncmp(msg, map[i].prefix, strlen(map[i].prefix)) == 0)
            return map[i].code;
    return REDLOCK_ESERVER;
}

/* Every parser starts here: a server error, or not yet classified. */
static int error_reply(const redisReply *r, redlock__script_reply *out)
{
    memset(out, 0, sizeof(*out));
    out->pttl_ms = -1;
    if (r->type != REDIS_REPLY_ERROR)
        return 0;
    out->kind = REDLOCK__REPLY_ERROR;
    out->err = redlock__server_error_code(r->str);
    out->message = r->str;
    return 1;
}

static void malformed(redlock__script_reply *out, const char *why)
{
    out->kind = REDLOCK__REPLY_MALFORMED;
    out->err = REDLOCK_EPROTO;
    out->message = why;
}

/* A ticket candidate: 1 to 20 decimal digits that fit 64 bits, else 0. */
static unsigned long long ticket_of(const redisReply *s)
{
    unsigned long long v = 0;
    size_t i;

    if (s->len == 0 || s->len > 20)
        return 0;
    for (i = 0; i < s->len; i++) {
        unsigned d = (unsigned)(s->str[i] - '0');

        if (d > 9 || v > (~0ULL - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    return v;
}

/* A generation is empty (none kept) or REDLOCK__SCRIPT_GEN_LEN lowercase
 * hex digits, as acquire.lua writes it. */
static int gen_well_formed(const redisReply *g)
{
    size_t i;

    if (g->type != REDIS_REPLY_STRING)
        return 0;
    if (g->len == 0)
        return 1;
    if (g->len != REDLOCK__SCRIPT_GEN_LEN)
        return 0;
    for (i = 0; i < g->len; i++)
        if (!((g->str[i] >= '0' && g->str[i] <= '9') || (g->str[i] >= 'a' && g->str[i] <= 'f')))
            return 0;
    return 1;
}

/*
 * acquire.lua: gen (a bare string) when granted without a token, {token}
 * or {token, gen} when granted with one (a fenced fresh hold; the other
 * acquire scripts send {0, gen} too), the holder's PTTL when busy. A nil
 * grant, from an acquire that reports no generation, is accepted when not
 * fenced: the hold's generation is then the request's, as if fresh.
 */
void redlock__parse_acquire(const redisReply *r, int fenced, redlock__script_reply *out)
{
    if (error_reply(r, out))
        return;
    if (r->type == REDIS_REPLY_NIL && !fenced) {
        out->kind = REDLOCK__REPLY_GRANTED;
        return;
    }
    /* A grant with no token (a re-entry, or unfenced): its generation. */
    if (r->type == REDIS_REPLY_STRING) {
        if (!gen_well_formed(r)) {
            malformed(out, "unexpected generation in an acquire reply");
            return;
        }
        out->kind = REDLOCK__REPLY_GRANTED;
        out->token = 0;
        out->gen = r->str;
        out->gen_len = r->len;
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && (r->elements == 1 || r->elements == 2) &&
        r->element[0]->type == REDIS_REPLY_INTEGER && (fenced || r->element[0]->integer == 0)) {
        if (r->elements == 2) {
            if (!gen_well_formed(r->element[1])) {
                malformed(out, "unexpected generation in an acquire reply");
                return;
            }
            out->gen = r->element[1]->str;
            out->gen_len = r->element[1]->len;
        }
        out->kind = REDLOCK__REPLY_GRANTED;
        out->token = r->element[0]->integer;
        return;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= -1) {
        out->kind = REDLOCK__REPLY_BUSY;
        out->pttl_ms = r->integer;
        return;
    }
    /* A fair lock's refusal of a try without a ticket: {pttl, 't', candidate}. */
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer >= -1 &&
        r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len == 1 &&
        r->element[1]->str[0] == 't' && r->element[2]->type == REDIS_REPLY_STRING) {
        out->ticket = ticket_of(r->element[2]);
        if (out->ticket == 0) {
            malformed(out, "unexpected ticket candidate in an acquire reply");
            return;
        }
        out->kind = REDLOCK__REPLY_BUSY;
        out->pttl_ms = r->element[0]->integer;
        return;
    }
    malformed(out, "unexpected reply to acquire");
}

/* release.lua, abort.lua and fence_store.lua: 1 done, 0 another hold is
 * there, nil nothing of ours. */
void redlock__parse_release(const redisReply *r, redlock__script_reply *out)
{
    if (error_reply(r, out))
        return;
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1)
        out->kind = REDLOCK__REPLY_DONE;
    else if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
        out->kind = REDLOCK__REPLY_OTHER;
    else if (r->type == REDIS_REPLY_NIL)
        out->kind = REDLOCK__REPLY_NOT_HELD;
    else
        /* The node's state is then unknown: the caller counts it as a
         * failure (and retries), never as "not held". */
        malformed(out, "unexpected reply to a release");
}

/* renew.lua: 1 renewed, -2 the lock key is gone, another integer: held by
 * someone else. */
void redlock__parse_renew(const redisReply *r, redlock__script_reply *out)
{
    if (error_reply(r, out))
        return;
    if (r->type != REDIS_REPLY_INTEGER)
        malformed(out, "unexpected reply to renew");
    else if (r->integer == 1)
        out->kind = REDLOCK__REPLY_RENEWED;
    else if (r->integer == -2)
        out->kind = REDLOCK__REPLY_VANISHED;
    else
        out->kind = REDLOCK__REPLY_OTHER;
}

void redlock__parse_force_release(const redisReply *r, redlock__script_reply *out)
{
    if (error_reply(r, out))
        return;
    if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
        out->kind = REDLOCK__REPLY_DONE;
        out->deleted = r->integer == 1;
        return;
    }
    malformed(out, "unexpected reply");
}

/* fenced_set.lua: 1 written, {0, newest} when a newer token wrote first. */
void redlock__parse_fenced_set(const redisReply *r, redlock__script_reply *out)
{
    if (error_reply(r, out))
        return;
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        out->kind = REDLOCK__REPLY_DONE;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[1]->type == REDIS_REPLY_STRING) {
        out->kind = REDLOCK__REPLY_STALE;
        out->message = r->element[1]->str;
    } else {
        malformed(out, "unexpected reply to fenced_set");
    }
}

int64_t redlock__reply_i64(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (r->type == REDIS_REPLY_STRING)
        return strtoll(r->str, NULL, 10);
    return 0;
}

void redlock__parse_inspect(const redisReply *r, redlock__inspect_reply *out)
{
    memset(out, 0, sizeof(*out));
    out->pttl_ms = -2;
    if (r->type == REDIS_REPLY_ERROR) {
        out->kind = REDLOCK__REPLY_ERROR;
        out->err = redlock__server_error_code(r->str);
        out->message = r->str;
        return;
    }
    /* PTTL is -2 (absent), -1 (no expiry) or a duration: anything else
     * would leak out of remaining_ttl() as a meaningless value. */
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements % 2 != 0 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer < -2) {
        out->kind = REDLOCK__REPLY_MALFORMED;
        out->err = REDLOCK_EPROTO;
        out->message = "unexpected reply to inspect";
        return;
    }
    out->kind = REDLOCK__REPLY_DONE;
    out->pttl_ms = r->element[0]->integer;
    out->token = (uint64_t)redlock__reply_i64(r->element[1]);
    out->holders = (r->elements - 2) / 2;
    out->pairs = (const redisReply *const *)&r->element[2];
}
