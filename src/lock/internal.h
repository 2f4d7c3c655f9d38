/* Internal structures shared by the lock modules (client, lock, quorum,
 * watchdog, inspect). Nothing here is public. The thread model (threads,
 * what each mutex guards, the lock order wd.run_mu -> wd.mu -> lock->mu,
 * thread-locals, what a callback may call) is in THREADS.md beside it. */
#ifndef REDLOCK_LOCK_INTERNAL_H
#define REDLOCK_LOCK_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "redlock/redlock.h"
#include "transport/conn.h"
#include "transport/net.h"
#include "transport/transport.h"
#include "lock/keys.h"

#define REDLOCK__MAX_NODES 64
#define REDLOCK__MAX_NAME 65536
#define REDLOCK__LOST_MEMORY 4     /* lost owners a handle remembers */
#define REDLOCK__RELEASE_MSG "0"   /* what Redisson publishes */

typedef struct redlock__pending redlock__pending;

typedef struct redlock__watchdog {
    pthread_t thread;
    int running;
    pthread_mutex_t mu;             /* guards everything below */
    pthread_cond_t cond;            /* wakes the thread; signals unpins */
    int closing;
    struct redlock_lock *holds;     /* locks with a watchdog hold */
    redlock__pending *pending;      /* background releases */
    /* Per node: back-off after unanswered background calls, and when the
     * next may go (see settle_pending in watchdog.c). */
    int backoff_ms[REDLOCK__MAX_NODES];
    int64_t next_try_ns[REDLOCK__MAX_NODES];
    pthread_mutex_t run_mu;         /* one tick or flush at a time */
} redlock__watchdog;

struct redlock_client {
    char id[37];
    size_t n_nodes;
    redlock__node *nodes;
    struct ssl_ctx_st *ssl_ctx;
    redlock__net net;
    redlock__transport tp;          /* net, or a fake in unit tests */

    /* Options, resolved to their defaults. */
    int connect_timeout_ms;
    int node_timeout_ms;            /* 0: derived from each lease */
    int watchdog_lease_ms;
    int64_t max_hold_ms;
    double drift_factor;
    int retry_delay_ms;
    int disable_pubsub;
    int flush_timeout_ms;           /* < 0: free does not flush */
    int64_t unavailable_timeout_ms;
    int canceled;                   /* redlock_client_cancel(); atomic */
    uint64_t request_seq;           /* redlock__request_id(); atomic */
    unsigned char node_warned[REDLOCK__MAX_NODES]; /* refusal logged */
    redlock_log_fn log_fn;
    void *log_userdata;
    redlock_log_level log_level;
    char *username, *password;
    char *tls_strings[5];           /* copies behind the node configs */

    redlock__watchdog wd;
    redlock_stats stats;            /* updated with atomics */
    unsigned char node_silent[REDLOCK__MAX_NODES]; /* health.c, atomics */
};

typedef enum redlock__hold_state {
    REDLOCK__FREE = 0,
    REDLOCK__HELD,
    REDLOCK__LOST
} redlock__hold_state;

/* A request id (32 hex digits), also the generation of the hold a fresh
 * grant made: release.lua only drops a hold of its own generation. */
#define REDLOCK__GEN_LEN 32
#define REDLOCK__GEN_KEEP 4
typedef char redlock__gen[REDLOCK__GEN_LEN + 1];
/* The generations a hold may have on one member: the grant that made it
 * is not always known (a member that did not answer may have granted
 * afresh, or re-entered). At most REDLOCK__GEN_KEEP, newest last, kept as
 * raw bytes because every held handle carries one list per member;
 * n == 0 is unknown. */
typedef struct redlock__gens {
    unsigned char n;
    unsigned char id[REDLOCK__GEN_KEEP][REDLOCK__GEN_LEN / 2];
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
    redlock__lock_member *members;
    redlock_on_lost_fn on_lost;
    void *on_lost_ud;

    pthread_mutex_t mu;            /* guards the hold */
    /* The current hold through this handle (a lock has one owner). */
    redlock__hold_state state;
    uint64_t owner;
    char field[64];                /* "<client-id>:<owner>" */
    int count;
    int64_t lease_ms;
    int watchdog;                  /* renewed by the watchdog */
    int64_t acquired_ns;
    int64_t validity_end_ns;
    int64_t next_renew_ns;
    uint64_t token;
    int lost_reason;
    uint64_t lost_owners[REDLOCK__LOST_MEMORY];
    size_t lost_next;

    /* Watchdog list membership, guarded by client->wd.mu. */
    struct redlock_lock *wd_next;
    int wd_listed;
    int wd_free_later;             /* freed from inside a tick using it */
    int64_t unavailable_since_ns;  /* no quorum reachable since (atomic) */
    int wd_pins;                   /* ticks using this lock; changed under
                                    * wd.mu, read without it by settle */
};

/* client.c */
void redlock__log(redlock_client *c, redlock_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void redlock__stat_add(uint64_t *counter, uint64_t n);
/* A request id, also the generation of the hold a fresh grant makes: 12
 * hex digits of a per-client sequence (so acquire.lua can tell a leftover
 * of ours from a newer hold), then 20 random ones. out gets 33 bytes. */
void redlock__request_id(redlock_client *c, char *out);
/* Nonzero once redlock_client_cancel() was called. */
int redlock__canceled(const redlock_client *c);
/* The per-request timeout for a lease (see redlock_options). */
int64_t redlock__node_timeout_ns(const redlock_client *c, int64_t lease_ms);
void redlock__owner_field(const redlock_client *c, uint64_t owner, char *out,
                          size_t cap);
/* Builds a client around an existing transport (unit tests pass a fake). */
int redlock__client_new_with_transport(redlock_client **out, size_t n_nodes,
                                       const redlock_options *opts,
                                       const redlock__transport *tp);

/* lock.c */
redlock_member_report *redlock__report_begin(redlock_lock *l);
/* Frees l now (redlock_lock_free decides when). */
void redlock__lock_destroy(redlock_lock *l);
/* A generation as the scripts write it: exactly REDLOCK__GEN_LEN lowercase
 * hex digits (a request id). */
int redlock__gen_valid(const char *gen);
/* Adds a valid gen to list (dropping the oldest when full). */
void redlock__gens_add(redlock__gens *list, const char *gen);
/* Makes list the one generation a member reported ("" : unknown). */
void redlock__gens_set(redlock__gens *list, const char *gen);
void redlock__gens_format(const redlock__gens *list, redlock__gens_text out);

/* quorum.c: one acquire attempt and one release, with the fan-out. */
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
    int reentry;         /* every grant was a re-entry */
    int permanent;       /* members refusing for good (auth, TLS, config) */
    int permanent_err;   /* the code of one such refusal */
    redlock__gen request_id; /* the generation of the fresh grants it made */
    /* Per member, the generation of the hold it granted or re-entered, as
     * the member reported it ("" for a hold without one), if it did. */
    redlock__gen gens[REDLOCK__MAX_NODES];
    unsigned char gen_reported[REDLOCK__MAX_NODES];
} redlock__attempt_result;

/* reentry: the owner holds the lock through this handle; otherwise a field
 * of the owner found on a member is a leftover to replace, never re-entered. */
int redlock__attempt(redlock_lock *l, const char *field, int64_t lease_ms, int reentry,
                     redlock__attempt_result *res);
/* Releases one hold on every member; drop_all drops every hold of field.
 * gens holds, per member, the generations the hold may have there (NULL:
 * unknown, any hold of field is released). *released gets members that released,
 * *decremented those that answered "still held". */
int redlock__release_members(redlock_lock *l, const char *field, const redlock__gens *gens,
                             int64_t lease_ms, int drop_all, int64_t give_up_ns,
                             int *released, int *decremented, int *not_held);

/* Re-acquires the included members (their keys vanished) without counting
 * them; used by the watchdog to restore the fault margin. The hold of field
 * records the restore's request as its generation on those members. */
void redlock__restore_members(redlock_lock *l, const char *field, int64_t lease_ms,
                              const unsigned char *include, int64_t deadline_ns);

/* health.c */
/* The transport's fan-out, noting on the way which nodes went silent (a
 * request timed out) and which answered. Every fan-out of the lock layer
 * goes through here. */
int redlock__fanout(redlock_client *c, const redlock__batch *batches, size_t n,
                    redlock__reply_fn fn, void *ud);
/* Whether err is a refusal that waiting cannot fix (auth, TLS, config). */
int redlock__refuses_for_good(int err);
/* Marks node silent: a request to it went unanswered for a node timeout. */
void redlock__node_went_silent(redlock_client *c, size_t node);
/* Nonzero while node's last request timed out and nothing came since. */
int redlock__node_silent(const redlock_client *c, size_t node);

/* watchdog.c */
int redlock__watchdog_start(redlock_client *c);
void redlock__watchdog_stop(redlock_client *c);
void redlock__watchdog_add(redlock_lock *l);
/* Removes l and waits until no tick is using it. */
void redlock__watchdog_remove(redlock_lock *l);
/* Called by redlock_lock_free: nonzero when the calling thread is the tick
 * that is using l (an on_lost callback freeing a lock); l is then unlisted
 * and the tick frees it when it is done with it. */
int redlock__watchdog_free_later(redlock_lock *l);
/* Waits until no watchdog tick is working on l. A tick that found l's hold
 * lost still releases what is left of it after telling the holder; a new
 * hold of the same owner taken meanwhile would re-enter those leftovers
 * and then lose them to that release (and be unlisted with the old one). */
void redlock__watchdog_settle(redlock_lock *l);
/* Queues a script call (release or abort) to retry in the background until
 * give_up_ns. The strings are copied. */
void redlock__background_call(redlock_client *c, size_t node, int script,
                              int nkeys, int argc, const char *const *argv,
                              int64_t give_up_ns);
/* Sends every queued background call once and waits up to timeout_ms for
 * the answers (redlock_client_flush). */
int redlock__watchdog_flush(redlock_client *c, int timeout_ms);
/* Runs one watchdog tick now (tests). */
void redlock__watchdog_tick(redlock_client *c);

#endif
