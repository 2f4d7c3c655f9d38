/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A scripted, in-memory transport for unit tests of the lock logic.
 *
 * It stands in for src/transport/net.c behind redlock__transport_ops:
 *   - N fake nodes, each with a behaviour (answer after a delay, stay
 *     silent, apply the call but lose the reply, answer with a server
 *     error, drop the connection), optionally overridden per script;
 *   - a model of what each node stores (lock hashes with their hold
 *     counts, latch keys, fencing token keys, TTLs measured on the virtual
 *     clock) on which the Lua scripts of lua/ are re-implemented, so every
 *     reply is the one the real script would give;
 *   - a VIRTUAL clock: now_ns() returns it, a fan-out advances it to each
 *     reply's delay in turn and delivers replies in that order, honours
 *     the callback's "stop" exactly as the real fan-out does (later calls
 *     get no callback), and times out at the batch deadline;
 *   - a log of every call (node, script, argv, outcome) and every fan-out
 *     (start, end), so tests can assert what was sent and when it was
 *     decided.
 *
 * Every function is thread-safe (one recursive mutex): the client's
 * watchdog thread calls now_ns() and may run ticks concurrently.
 */
#ifndef REDLOCK_TESTS_FAKE_TRANSPORT_H
#define REDLOCK_TESTS_FAKE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

typedef struct fake fake;

typedef enum fake_mode {
    FAKE_REPLY = 0,    /* run the call, answer after delay_ms */
    FAKE_SILENT,       /* frozen node: the call never runs, never answers */
    FAKE_LOST_REPLY,   /* the call runs, but its reply never arrives */
    FAKE_ERROR_REPLY,  /* answer with a server error (fake_set_error) */
    FAKE_CONN_ERROR    /* the connection breaks after delay_ms (REDLOCK_EIO) */
} fake_mode;

/* What became of one call. */
typedef enum fake_outcome {
    FAKE_PENDING = 0,
    FAKE_ANSWERED,     /* the callback got a reply (possibly an error reply) */
    FAKE_TIMED_OUT,    /* the callback got REDLOCK_ETIMEOUT at the deadline */
    FAKE_FAILED,       /* the callback got a connection error */
    FAKE_ABANDONED     /* the fan-out stopped first: no callback */
} fake_outcome;

typedef struct fake_call {
    size_t fanout;      /* index of the fan-out that sent it */
    size_t node;
    int script;         /* redlock__script_id, or -1 for a plain command */
    int nkeys;
    int argc;
    char **argv;        /* copies, owned by the fake */
    int64_t sent_ns;
    int64_t done_ns;    /* when the callback ran (or the fan-out ended) */
    int applied;        /* the node executed it */
    int in_flight;      /* abandoned, reported in flight (report_in_flight) */
    fake_outcome outcome;
} fake_call;

typedef struct fake_fanout {
    int64_t start_ns, end_ns;
    size_t first_call, ncalls;
    int stopped;        /* the callback ended it early */
} fake_fanout;

/* The virtual clock starts here (any value far from 0 will do). */
#define FAKE_EPOCH_NS 1000000000000LL

fake *fake_new(size_t n_nodes);
void fake_free(fake *f);
/* The table to hand to redlock__client_new_with_transport(). */
redlock__transport fake_transport(fake *f);

/* Behaviour of every call to node (default: FAKE_REPLY after 1 ms). */
void fake_set(fake *f, size_t node, fake_mode mode, int64_t delay_ms);
/* Behaviour of one script on node, overriding fake_set(); script -1
 * stands for plain commands. fake_clear_script() removes the override. */
void fake_set_script(fake *f, size_t node, int script, fake_mode mode, int64_t delay_ms);
void fake_clear_script(fake *f, size_t node, int script);
/* The server error a FAKE_ERROR_REPLY node gives ("ERR fake" by default). */
void fake_set_error(fake *f, size_t node, const char *message);

/* Virtual clock. */
int64_t fake_now(fake *f);
void fake_advance_ms(fake *f, int64_t ms);
/*
 * From now on only the calling thread sees the virtual clock move; every
 * other thread (the client's watchdog thread) sees it stand still at the
 * current value, so nothing ever falls due for it and ticks happen only
 * when the test calls redlock__watchdog_tick(). Makes tests deterministic.
 */
void fake_isolate_clock(fake *f);
/* The calling thread, too, sees the isolated clock move: a thread a case
 * starts to play the application while the test thread drives ticks. One
 * such thread at a time. */
void fake_join_clock(fake *f);

/* The model of node storage. */
/* Someone else's hold: hash `name` with `field` = count, PTTL ttl_ms (-1:
 * no expiry). */
void fake_hold(fake *f, size_t node, const char *name, const char *field, int count,
               int64_t ttl_ms);
void fake_set_string(fake *f, size_t node, const char *key, const char *value);
/* A restart without persistence: the node forgets everything. */
void fake_flush(fake *f, size_t node);
/* Offset of the node's TIME from the shared virtual clock, in us. */
void fake_set_time_offset_us(fake *f, size_t node, int64_t offset_us);
/* The node's TIME in microseconds, as the acquire script reads it. */
uint64_t fake_node_time_us(fake *f, size_t node);
/* The count stored in hash `name` field `field`, 0 if absent. */
int64_t fake_hash_count(fake *f, size_t node, const char *name, const char *field);
/* Fields in hash `name` (0 if the key is absent). */
size_t fake_hash_len(fake *f, size_t node, const char *name);
/* PTTL of key as redis reports it: -2 absent, -1 no expiry, else ms. */
int64_t fake_pttl(fake *f, size_t node, const char *key);
/* A string key as an unsigned integer (0 if absent). */
uint64_t fake_get_u64(fake *f, size_t node, const char *key);
/* Publishes seen on node's channel (e.g. "redisson_lock__channel:{x}"). */
uint64_t fake_published(fake *f, size_t node, const char *channel);

/* At virtual time at_ns (when a fan-out, a wait or fake_advance_ms gets
 * there), the hold `name` on node is deleted and its release published,
 * as if its holder had unlocked it. */
void fake_schedule_release(fake *f, int64_t at_ns, size_t node, const char *name);

/* The log. Indices are stable; fake_get_call copies the record (argv
 * still points into the fake). */
size_t fake_ncalls(fake *f);
int fake_get_call(fake *f, size_t i, fake_call *out);
/* Calls with index >= from to node (or any node if node < 0) of script
 * (any script if script == FAKE_ANY). */
#define FAKE_ANY (-100)
size_t fake_count(fake *f, size_t from, int node, int script);
/* The first such call at or after from, or -1. */
long fake_find(fake *f, size_t from, int node, int script);
size_t fake_nfanouts(fake *f);
int fake_get_fanout(fake *f, size_t i, fake_fanout *out);
/* Subscriptions made through watch(): how many were made, how many are
 * still open. */
size_t fake_watches(fake *f, size_t *open);

#endif
