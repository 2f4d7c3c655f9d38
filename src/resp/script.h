/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one place that knows each script's calling convention: how many
 * KEYS and ARGV it takes, in which order (the builders), what its replies
 * mean (the parsers), and which server errors map to which codes.
 *
 * Callers fill a named-field struct, so adding or reordering a script
 * argument changes a struct and breaks every caller at compile time,
 * including the benchmarks that speak to the servers directly. A unit
 * test checks the table against the KEYS[i]/ARGV[i] each embedded script
 * reads.
 *
 * Builders store pointers, not copies: argv points into the argument
 * struct's strings, which must outlive the call.
 */
#ifndef REDLOCK_RESP_SCRIPT_H
#define REDLOCK_RESP_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

#include "core/util.h"
#include "resp/scripts.h"

struct redisReply;

/* The most argv entries (keys and arguments) any script takes, and any
 * call the transport sends (plain commands included): the one limit. */
#define REDLOCK__SCRIPT_MAX_ARGS 14
#define REDLOCK__MAX_CALL_ARGS 16
_Static_assert(REDLOCK__SCRIPT_MAX_ARGS <= REDLOCK__MAX_CALL_ARGS, "a script call fits a call");

/* A hold's generation as acquire.lua writes it: lowercase hex digits. */
#define REDLOCK__SCRIPT_GEN_LEN 32

typedef struct redlock__script_shape {
    int nkeys;          /* KEYS always passed */
    int optional_keys;  /* KEYS passed only in some forms (fencing) */
    int nargs;          /* ARGV */
} redlock__script_shape;

extern const redlock__script_shape redlock__script_shapes[REDLOCK__SCRIPT_COUNT];

/* What a builder produced: the script and how argv splits. */
typedef struct redlock__script_call {
    int script;
    int nkeys;
    int argc;
} redlock__script_call;

/* What a lock handle holds; each kind has its own scripts (the builders
 * below pick them), with one calling convention and one set of replies. */
typedef enum redlock__kind {
    REDLOCK__KIND_MUTEX = 0,  /* acquire.lua, release.lua, ... */
    REDLOCK__KIND_READ,       /* rw_*.lua, the reader field */
    REDLOCK__KIND_WRITE,      /* rw_*.lua, the field ending in ":write" */
    REDLOCK__KIND_FAIR,       /* fair_*.lua; renewed by renew.lua */
    REDLOCK__KIND_SEMAPHORE   /* sem_*.lua (not a lock kind of the API) */
} redlock__kind;

/* acquire.lua (and its kind's counterpart). mark_key is the request's
 * cancel mark (only read there). token_key NULL: not fenced (no token
 * drawn; only the plain lock and a write hold take one). */
typedef struct redlock__acquire_args {
    const char *name, *mark_key, *token_key;
    const char *lease_ms, *field, *request_id;
    const char *fresh_only; /* "1": the caller holds nothing through this handle */
    int kind;               /* redlock__kind */
    const char *aux_key;    /* READ/WRITE: the waiting-writer mark;
                             * SEMAPHORE: the permits' sorted set;
                             * FAIR: the queue */
    const char *aux2_key, *aux3_key, *aux4_key; /* FAIR: the timeouts, the
                                                 * tickets, the lapses */
    const char *channel;    /* SEMAPHORE: its channel */
    const char *writer_wait_ms; /* WRITE: how long the writer goes on waiting */
    const char *permits, *limit; /* SEMAPHORE: P per grant, the size K */
    const char *ticket, *wait_lease_ms; /* FAIR: "" or the waiter's ticket;
                                          * how long its place lasts */
} redlock__acquire_args;

/* release.lua and abort.lua share their keys and first arguments. mark_key:
 * a release's own id (its prefix names the cancel marks), or the aborted
 * acquire's cancel mark. */
typedef struct redlock__release_args {
    const char *name, *channel, *mark_key;
    const char *message, *lease_ms, *field;
    const char *drop_all; /* release only: "1" drops every count */
    const char *gens;     /* release only: the hold's generations, or "" */
    int kind;             /* redlock__kind */
    const char *aux_key;  /* READ/WRITE: the plain lock's channel;
                           * SEMAPHORE: the permits' sorted set;
                           * FAIR: the queue */
    const char *aux2_key, *aux3_key, *aux4_key; /* FAIR: the timeouts, the
                                                 * tickets, the lapses */
    const char *permits;  /* SEMAPHORE: P per grant */
    const char *ticket;   /* FAIR abort only: the waiter's ticket when it
                           * goes on waiting (its place goes back, with the
                           * lapse its grant's receipt kept), or NULL */
} redlock__release_args;

typedef struct redlock__renew_args {
    const char *name, *lease_ms, *field;
    int kind;             /* redlock__kind */
    const char *aux_key;  /* SEMAPHORE: the permits' sorted set (the key
                           * renewed instead of name) */
} redlock__renew_args;

typedef struct redlock__fence_store_args {
    const char *name, *token_key, *field, *token;
} redlock__fence_store_args;

/* force_release.lua. A plain or fair lock also gives the fair queue's four
 * keys (as fair_release.lua's), so a first fair waiter is woken too; NULL
 * for other kinds. */
typedef struct redlock__force_release_args {
    const char *name, *channel, *message;
    const char *queue_key, *timeouts_key, *tickets_key, *lapses_key;
} redlock__force_release_args;

typedef struct redlock__inspect_args {
    const char *name, *token_key;
} redlock__inspect_args;

/* fair_leave.lua: keys as fair_release.lua's without the mark. ticket is
 * the ending wait's (NULL: any), so a late copy leaves a later wait's
 * place alone. */
typedef struct redlock__fair_leave_args {
    const char *name, *channel, *queue_key, *timeouts_key, *tickets_key, *lapses_key;
    const char *message, *field, *ticket;
} redlock__fair_leave_args;

typedef struct redlock__sem_inspect_args {
    const char *name, *permits_key;
} redlock__sem_inspect_args;

typedef struct redlock__fenced_set_args {
    const char *key, *value, *token;
} redlock__fenced_set_args;

/* Each fills argv[0 .. argc) (at most REDLOCK__SCRIPT_MAX_ARGS). */
redlock__script_call redlock__script_acquire(const char **argv, const redlock__acquire_args *a);
redlock__script_call redlock__script_release(const char **argv, const redlock__release_args *a);
redlock__script_call redlock__script_abort(const char **argv, const redlock__release_args *a);
redlock__script_call redlock__script_renew(const char **argv, const redlock__renew_args *a);
redlock__script_call redlock__script_fence_store(const char **argv,
                                                 const redlock__fence_store_args *a);
redlock__script_call redlock__script_force_release(const char **argv,
                                                   const redlock__force_release_args *a);
redlock__script_call redlock__script_inspect(const char **argv, const redlock__inspect_args *a);
redlock__script_call redlock__script_sem_inspect(const char **argv,
                                                 const redlock__sem_inspect_args *a);
redlock__script_call redlock__script_fair_ticket(const char **argv, const char *tickets_key);
redlock__script_call redlock__script_fair_leave(const char **argv,
                                                const redlock__fair_leave_args *a);
redlock__script_call redlock__script_fenced_set(const char **argv,
                                                const redlock__fenced_set_args *a);

/* Appends the RESP bytes of one script call to out: EVALSHA, or EVAL with
 * the body when fallback (the server answered NOSCRIPT); script < 0 is a
 * plain command whose argv[0] is its name. argvlen NULL: strlen of each.
 * Returns 0, or -1 (out unchanged) when out of memory or argc exceeds
 * REDLOCK__MAX_CALL_ARGS. */
int redlock__script_encode(redlock__buf *out, int script, int nkeys, int argc,
                           const char *const *argv, const size_t *argvlen, int fallback);

/* ---- replies ---- */

/* The redlock_err of a server error reply ("LOADING ...", "NOAUTH ..."). */
int redlock__server_error_code(const char *msg);

typedef enum redlock__reply_kind {
    REDLOCK__REPLY_ERROR = 0, /* a server error: err and message say which */
    REDLOCK__REPLY_MALFORMED, /* no script answers this way */
    REDLOCK__REPLY_GRANTED,   /* acquire: held by the caller now */
    REDLOCK__REPLY_BUSY,      /* acquire: held by another owner */
    REDLOCK__REPLY_DONE,      /* release/abort/fence: the caller's hold changed */
    REDLOCK__REPLY_OTHER,     /* release/abort/fence: another hold is there */
    REDLOCK__REPLY_NOT_HELD,  /* release/abort: nothing of the caller's there */
    REDLOCK__REPLY_RENEWED,   /* renew: the hold's lease was extended */
    REDLOCK__REPLY_VANISHED,  /* renew: the lock key is gone */
    REDLOCK__REPLY_STALE      /* fenced_set: a newer token wrote first */
} redlock__reply_kind;

typedef struct redlock__script_reply {
    redlock__reply_kind kind;
    int err;                  /* ERROR: the redlock_err; MALFORMED: EPROTO */
    const char *message;      /* ERROR/MALFORMED/STALE: points into the reply
                               * or a static string */
    long long token;          /* acquire: > 0 on a fresh fenced hold */
    int64_t pttl_ms;          /* BUSY: the holder's TTL, -1 none */
    /* BUSY from fair_acquire.lua without a ticket: the node's ticket
     * candidate, 0 if the reply had none. */
    unsigned long long ticket;
    const char *gen;          /* acquire: the hold's generation, or NULL */
    size_t gen_len;
    int deleted;              /* force_release: 1 when a hold was deleted */
} redlock__script_reply;

/* Each reads one reply of its script; r must not be NULL. The reply's
 * strings are borrowed, valid while r is. */
void redlock__parse_acquire(const struct redisReply *r, int fenced, redlock__script_reply *out);
void redlock__parse_release(const struct redisReply *r, redlock__script_reply *out);
void redlock__parse_renew(const struct redisReply *r, redlock__script_reply *out);
void redlock__parse_force_release(const struct redisReply *r, redlock__script_reply *out);
void redlock__parse_fenced_set(const struct redisReply *r, redlock__script_reply *out);

/* inspect.lua answers {pttl, token, field1, count1, ...}. */
typedef struct redlock__inspect_reply {
    redlock__reply_kind kind; /* ERROR, MALFORMED, or DONE */
    int err;
    const char *message;
    int64_t pttl_ms;          /* -2 absent, -1 no expiry */
    uint64_t token;
    size_t holders;
    const struct redisReply *const *pairs; /* holders field/count pairs */
} redlock__inspect_reply;

void redlock__parse_inspect(const struct redisReply *r, redlock__inspect_reply *out);
/* An integer or a decimal string (what Lua hands back), else 0. */
int64_t redlock__reply_i64(const struct redisReply *r);

#endif
