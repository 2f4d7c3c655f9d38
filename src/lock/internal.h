/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal structures shared by the lock modules (client, lock, quorum,
 * watchdog, inspect). Nothing here is public. The thread model (threads,
 * what each mutex guards, the lock order wd.run_mu -> wd.mu -> lock->mu,
 * thread-locals, what a callback may call) is in THREADS.md beside it. */
#ifndef REDLOCK_LOCK_INTERNAL_H
#define REDLOCK_LOCK_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "redlock/redlock.h"
#include "transport/conn.h"
#include "transport/net.h"
#include "transport/resolve.h"
#include "transport/transport.h"
#include "resp/script.h"
#include "lock/keys.h"
#include "lock/retry.h"

#define REDLOCK__MAX_NODES REDLOCK_MAX_NODES
/* More replicas than a master could usefully have: a typo, not a setup. */
#define REDLOCK__MAX_REPLICA_ACKS 64
/* WAIT's timeout when neither the lock nor the client sets one: the
 * default node timeout's order, since a grant waits for it. */
#define REDLOCK__DEFAULT_REPLICA_TIMEOUT_MS 50
#define REDLOCK__MAX_NAME 65536
#define REDLOCK__LOST_MEMORY 4     /* lost owners a handle remembers */
#define REDLOCK__RELEASE_MSG "0"   /* what Redisson publishes */
#define REDLOCK__FAIR_WAIT_LEASE_MS 3000

/* The event loop driving a loop-driven client (loop/, a layer above),
 * as the layers below see it. */
typedef struct redlock__loop_hooks {
    void *loop;
    /* Wakes the parked operations of lock l (every lock: NULL), so they
     * look at a cancel at once. */
    void (*kick)(void *loop, struct redlock_lock *l);
    /* redlock_lock_free(l): nonzero when operations of l are still in
     * flight; they are canceled, and the loop frees l after the last. */
    int (*lock_freeing)(void *loop, struct redlock_lock *l);
    /* redlock_client_free(): ends what is in flight, frees the loop. */
    void (*destroy)(void *loop);
    /* A blocking acquire (unlock == 0) or unlock from the loop's thread,
     * outside any fiber: run as a task, the loop driven until it ends, so
     * it cannot wait for a renewal parked in the loop. */
    int (*run_sync)(void *loop, struct redlock_lock *l, int unlock, uint64_t owner,
                    int64_t wait_ms, int64_t lease_ms);
    /* Nonzero while the loop runs operations or callbacks (the client
     * must not be freed from there). */
    int (*busy)(void *loop);
} redlock__loop_hooks;

/* The client's own I/O thread (options.io_thread, loop/io_thread.c), as
 * the layers below see it: a loop-driven client whose loop that thread
 * runs. Calls from any other thread that would touch the loop are handed
 * to it. */
typedef struct redlock__io_hooks {
    void *io;
    pthread_t thread;
    /* redlock_lock_free(l) from another thread: done on the I/O thread. */
    void (*free_lock)(void *io, struct redlock_lock *l);
    /* redlock_client_free() from another thread: the I/O thread frees
     * the client, and is joined. */
    void (*stop)(void *io);
    /* A hold was listed or a background call queued off the I/O thread
     * (a flush, a relayed call's caller): the next tick may have moved,
     * and only that thread can set its timer again. Takes no mutex. */
    void (*wake)(void *io);
} redlock__io_hooks;

typedef struct redlock__watchdog {
    pthread_t thread;
    int ready;                      /* set up (mutexes, the queue) */
    int running;                    /* its thread runs */
    pthread_mutex_t mu;             /* guards everything below */
    pthread_cond_t cond;            /* wakes the thread; signals unpins */
    int closing;
    struct redlock_lock *holds;     /* locks with a watchdog hold */
    pthread_mutex_t run_mu;         /* one tick at a time */
} redlock__watchdog;

/* A latency histogram: buckets as redlock_stats.acquire_latency_us, the
 * sum in microseconds; updated with atomics (redlock__stat_add). */
typedef struct redlock__histogram {
    uint64_t buckets[REDLOCK_LATENCY_BUCKETS];
    uint64_t sum_us;
} redlock__histogram;

struct redlock_client {
    char id[37];
    size_t n_nodes;
    redlock__node *nodes;
    struct ssl_ctx_st *ssl_ctx;
    redlock__net net;
    redlock__resolver resolver;     /* host names, looked up off the hot path */
    redlock__transport tp;          /* net, or a fake in unit tests */

    /* Options, resolved to their defaults. */
    int connect_timeout_ms;
    int node_timeout_ms;            /* 0: derived from each lease */
    int watchdog_lease_ms;
    int64_t max_hold_ms;
    double drift_factor;
    int retry_delay_ms;
    int disable_pubsub;
    int event_loop;                 /* loop-driven (loop/) */
    int event_loop_watchdog_thread; /* ... with the watchdog's thread */
    redlock__loop_hooks loop;       /* set by redlock_loop_attach() */
    int io_thread;                  /* options.io_thread */
    redlock__io_hooks io;           /* set once that thread runs */
    int flush_timeout_ms;           /* < 0: free does not flush */
    int64_t unavailable_timeout_ms;
    int canceled;                   /* redlock_client_cancel(); atomic */
    uint64_t request_seq;           /* redlock__request_id(); atomic */
    unsigned char node_warned[REDLOCK__MAX_NODES]; /* refusal logged */
    redlock_log_fn log_fn;
    void *log_userdata;
    redlock_log_level log_level;
    char *username, *password;
    /* Sentinel nodes' sentinel credentials (options.sentinel_*). */
    char *sentinel_username, *sentinel_password;
    char *tls_strings[5];           /* copies behind the node configs */

    redlock__watchdog wd;
    redlock__retry retry;           /* calls owed in the background */
    redlock_stats stats;            /* updated with atomics */
    /* What redlock_stats has no room for (its layout is ABI): the acquire
     * latency's sum and two more histograms (redlock_histogram). */
    uint64_t acquire_sum_us;
    redlock__histogram handoff, renewal_lag;
    unsigned char node_silent[REDLOCK__MAX_NODES]; /* health.c, atomics */
    /* health.c, atomics: since when a node has given no reply (0: it
     * answers), and whether that was logged as a warning. */
    int64_t node_down_since_ns[REDLOCK__MAX_NODES];
    unsigned char node_down_warned[REDLOCK__MAX_NODES];
};

/* Whether the caller is a thread other than c's own I/O thread, which
 * then does the work (options.io_thread). */
static inline int redlock__io_elsewhere(const redlock_client *c)
{
    return c->io.io && !pthread_equal(pthread_self(), c->io.thread);
}

/* Whether a blocking acquire or unlock goes through the loop's run_sync
 * hook: on the loop's thread outside its fibers (it drives the loop), and
 * on any thread but an I/O thread's own, fibers of another client's loop
 * included (it is handed over). */
static inline int redlock__loop_runs_call(const redlock_client *c, int parks)
{
    return c->loop.run_sync && (!parks || redlock__io_elsewhere(c));
}

typedef enum redlock__hold_state {
    REDLOCK__FREE = 0,
    REDLOCK__HELD,
    REDLOCK__LOST
} redlock__hold_state;

/* A request id (32 hex digits), also the generation of the hold a fresh
 * grant made: release.lua only drops a hold of its own generation. */
#define REDLOCK__GEN_LEN REDLOCK__SCRIPT_GEN_LEN
#define REDLOCK__GEN_KEEP 4
typedef char redlock__gen[REDLOCK__GEN_LEN + 1];
/* The generations a hold may have on one member: the grant that made it
 * is not always known (a member that did not answer may have granted
 * afresh, or re-entered). At most REDLOCK__GEN_KEEP, newest last;
 * n == 0 is unknown. */
typedef struct redlock__gens {
    unsigned char n;
    /* The ids as their hex digits, unterminated: a release sends them as
     * text, and a cycle that parsed and printed them again spent as much
     * on that as on encoding its request. */
    char id[REDLOCK__GEN_KEEP][REDLOCK__GEN_LEN];
} redlock__gens;
/* The same list as release.lua takes it: comma-separated, "" unknown. */
typedef char redlock__gens_text[REDLOCK__GEN_KEEP * (REDLOCK__GEN_LEN + 1)];

typedef struct redlock__lock_member {
    size_t node;
    /* The name, followed in the same block by every key derived from it
     * (see redlock__key); the first member with a name owns the block, the
     * others share it. Thousands of handles may be held, so no pointer per
     * key. */
    char *name;
    uint32_t name_len;
    unsigned char owns_keys;
    redlock__gens gens;   /* our hold's generations here, guarded by mu */
} redlock__lock_member;

struct redlock_lock {
    redlock_client *client;
    size_t n;
    int quorum;
    int fencing;
    /* Replica acknowledgement (options.replica_*): 0, or WAIT/WAITAOF for
     * that many replicas behind every grant and renewal (quorum.c,
     * watchdog.c); the timeout in ms, always > 0 when acks are asked. */
    int replica_acks;
    int replica_timeout_ms;
    int replica_wait_aof;
    /* What the handle holds (redlock__kind), and for a semaphore's permit
     * handle the permits per grant and the semaphore's size, as the
     * scripts take them. */
    int kind;
    char permits[12], limit[12];
    char wait_lease[12];           /* fair: options.fair_wait_lease_ms */
    redlock__lock_member *members;
    redlock_on_lost_fn on_lost;
    void *on_lost_ud;
    /* Holder facts (facts.c): the command line to record, set once when
     * the handle is made; NULL: this handle writes none. */
    char *facts_command;

    pthread_mutex_t mu;            /* guards the hold */
    /* The current hold through this handle (a lock has one owner). Wide
     * fields first, then the narrow ones, so nothing is padding: thousands
     * of handles may be held at once. */
    uint64_t owner;
    int64_t lease_ms;
    int64_t acquired_ns;
    int64_t validity_end_ns;
    int64_t next_renew_ns;
    uint64_t token;
    uint64_t lost_owners[REDLOCK__LOST_MEMORY];
    size_t lost_next;
    char field[64];                /* "<client-id>:<owner>" */
    redlock__hold_state state;
    int count;
    int watchdog;                  /* renewed by the watchdog */
    int lost_reason;

    /* Fair: the last waiter's subscription to its own channels, kept for
     * the owner's next wait (acquire.c), guarded by mu; unwatched when
     * the handle is freed. */
    void *fair_watch;
    char fair_watch_field[64];

    int64_t unavailable_since_ns;  /* no quorum reachable since (atomic) */
    uint64_t cancels;              /* redlock_acquire_cancel() calls (atomic) */
    /* Watchdog list membership, guarded by client->wd.mu. */
    struct redlock_lock *wd_next;
    int wd_pins;                   /* ticks using this lock; changed under
                                    * wd.mu, read without it by settle */
    unsigned char wd_listed;
    unsigned char wd_free_later;   /* freed from inside a tick using it */
    unsigned char margin_lost;     /* renewed on exactly a quorum (logged) */
};

/* What one acquire attempt heard (quorum.c fills it, hold.c records it). */
typedef struct redlock__attempt_result {
    int granted;         /* members that granted */
    int busy;            /* members held by another owner */
    int failed;          /* timeouts, errors */
    int64_t min_pttl_ms; /* smallest TTL among busy members, or -1 */
    int64_t validity_ms; /* lease - elapsed - drift, on success */
    /* When that validity ends: t0 + lease - drift on the transport's clock
     * (validity_ms already counts the elapsed time from t0). */
    int64_t valid_until_ns;
    uint64_t token;      /* fencing token on a fresh fenced grant */
    int fence_confirmed; /* members that stored it (phase 2) */
    int permanent;       /* members refusing for good (auth, TLS, config) */
    int permanent_err;   /* the code of one such refusal */
    redlock__gen request_id; /* the generation of the fresh grants it made */
    /* Sent as fresh (the client held nothing through this owner): every
     * acquire script then replaces an older hold of ours, never re-enters
     * it, so a grant here can only carry request_id. */
    int fresh;
    unsigned char gen_reported[REDLOCK__MAX_NODES];
    /* A fair try without a ticket: how many members refused it with a
     * ticket candidate, and the largest (a ticket once a quorum did). */
    int ticket_answers;
    unsigned long long ticket_best;
    /* Per member, the generation of the hold it granted or re-entered, as
     * the member reported it ("" for a hold without one), if gen_reported
     * says it did. Last, and only read where reported: a result is
     * cleared up to here (redlock__attempt_result_clear). */
    redlock__gen gens[REDLOCK__MAX_NODES];
} redlock__attempt_result;

/* Clears all but the generations, which are 2 KB that each attempt would
 * zero for nothing. */
static inline void redlock__attempt_result_clear(redlock__attempt_result *res)
{
    memset(res, 0, offsetof(redlock__attempt_result, gens));
}

/* client.c */
/* Builds a client around an existing transport (unit tests pass a fake). */
int redlock__client_new_with_transport(redlock_client **out, size_t n_nodes,
                                       const redlock_options *opts,
                                       const redlock__transport *tp);
/* redlock_client_new() and redlock_client_new_from_env() without the I/O
 * thread, which loop/io_thread.c starts on top (options.io_thread). */
int redlock__client_create(redlock_client **out, const char *const *uris, size_t n_nodes,
                           const redlock_options *opts);
int redlock__client_create_from_env(redlock_client **out, const redlock_options *opts);





/* redlock_multilock_new() for any redlock__kind (lock.c); a semaphore's
 * permit handles are made this way (semaphore.c). */
int redlock__lock_create(redlock_client *c, const redlock_member *members, size_t n,
                         const redlock_lock_options *opts, int kind, redlock_lock **out);

#endif
