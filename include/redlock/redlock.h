/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libredlock: distributed locks on Redis.
 *
 * One API covers three shapes of lock:
 *   - a single-node reentrant lock with Redisson's RLock data layout (N = 1);
 *   - RedLock: the same name on N independent masters, held while a quorum
 *     Q = N/2+1 of them agrees within a drift-adjusted validity window;
 *   - MultiLock: any (node, name) pairs, all of which must be held (Q = N).
 *
 * Data layout on every node (shared with Redisson, so Java and C processes
 * exclude each other): the lock NAME is a hash whose single field
 * "<client-id>:<owner-id>" counts re-entries; the key carries the lease as its
 * PEXPIRE; a release publishes "0" on "redisson_lock__channel:{NAME}".
 *
 * Threads. A redlock_client and every redlock_lock made from it may be used
 * from any number of threads at once. The owner of a hold is the pair
 * (client id, owner id); by default the owner id is the calling thread's id,
 * so a lock taken on one thread must be released on the same thread. Calls
 * ending in _as take an explicit owner id for work that moves between
 * threads (event loops, thread pools, coroutines).
 *
 * Errors. Every call returns a redlock_err; REDLOCK_OK is 0. After a call
 * fails, redlock_last_error() on the same thread describes why in one line.
 *
 * Time. Every duration is in milliseconds, measured on CLOCK_MONOTONIC.
 */
#ifndef REDLOCK_REDLOCK_H
#define REDLOCK_REDLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version is defined here once; CMakeLists.txt parses these lines. */
#define REDLOCK_VERSION_MAJOR 0
#define REDLOCK_VERSION_MINOR 2
#define REDLOCK_VERSION_PATCH 0
#define REDLOCK_VERSION_STRING "0.2.0"

#if defined(REDLOCK_STATIC)
#define REDLOCK_EXTERN
#elif defined(REDLOCK_BUILDING)
#define REDLOCK_EXTERN __attribute__((visibility("default")))
#else
#define REDLOCK_EXTERN
#endif

#if defined(__GNUC__)
#define REDLOCK_WARN_UNUSED __attribute__((warn_unused_result))
#else
#define REDLOCK_WARN_UNUSED
#endif

/*
 * The error table. Codes are stable: new codes are only ever added at the
 * end. "Expected" outcomes of a lock (BUSY, TIMEOUT, NOT_OWNER, NO_QUORUM,
 * LOST) are ordinary results, not failures of the library, and are never
 * logged as errors.
 */
#define REDLOCK_ERRNO_MAP(XX)                                                   \
    XX(OK, "success")                                                          \
    XX(EINVAL, "invalid argument")                                             \
    XX(ENOMEM, "out of memory")                                                \
    XX(EURI, "malformed node URI")                                             \
    XX(ECONNECT, "cannot connect to node")                                     \
    XX(EIO, "connection lost")                                                 \
    XX(ETIMEOUT, "timed out")                                                  \
    XX(EPROTO, "unexpected reply from server")                                 \
    XX(ESERVER, "server replied with an error")                                \
    XX(EAUTH, "authentication failed")                                         \
    XX(ETLS, "TLS failure")                                                    \
    XX(ELOADING, "server is loading its dataset")                              \
    XX(EREADONLY, "server is a read-only replica")                             \
    XX(EOOM, "server is out of memory")                                        \
    XX(EBUSY, "lock is held by another owner")                                 \
    XX(ENOT_OWNER, "lock is not held by this owner")                           \
    XX(ELOST, "lock was lost")                                                 \
    XX(ENO_QUORUM, "no quorum of nodes answered")                              \
    XX(ECLOSED, "client is closing")                                           \
    XX(ESTALE_TOKEN, "fencing token is older than one already accepted")       \
    XX(ERANGE, "value out of range")                                           \
    XX(ECANCELED, "operation canceled")                                        \
    XX(ECONFIG, "node refused the request for good (wrong type, bad db)")    \
    XX(ENONODES, "no nodes configured")                                        \
    XX(EREPLICAS, "too few replicas acknowledged the write")                  \
    XX(EUPGRADE, "a read hold cannot be upgraded to a write hold")

typedef enum redlock_err {
#define REDLOCK_ERR_ENUM_(name, msg) REDLOCK_##name,
    REDLOCK_ERRNO_MAP(REDLOCK_ERR_ENUM_)
#undef REDLOCK_ERR_ENUM_
    REDLOCK_ERR_COUNT_
} redlock_err;

/* A static description of err; never NULL, also for unknown codes. */
REDLOCK_EXTERN const char *redlock_strerror(int err);
/* The symbolic name ("REDLOCK_EBUSY"); never NULL ("REDLOCK_UNKNOWN"). */
REDLOCK_EXTERN const char *redlock_err_name(int err);
/*
 * A one-line description of the calling thread's most recent failed call,
 * e.g. "127.0.0.1:7003: connect: Connection refused". The string is owned by
 * the library and stays valid until the calling thread's next redlock call.
 */
REDLOCK_EXTERN const char *redlock_last_error(void);

REDLOCK_EXTERN const char *redlock_version(void);

/* ------------------------------------------------------------------------ */
/* Options. Every field left at zero means "the default". The library copies
 * what it keeps (strings included), so the caller's struct and strings may
 * be freed as soon as the call returns. */

typedef enum redlock_log_level {
    REDLOCK_LOG_ERROR = 1,
    REDLOCK_LOG_WARN = 2,
    REDLOCK_LOG_INFO = 3,
    REDLOCK_LOG_DEBUG = 4
} redlock_log_level;

/* Runs on whichever thread produced the message (caller, watchdog or
 * subscriber thread); it must not call back into the library. */
typedef void (*redlock_log_fn)(void *userdata, redlock_log_level level,
                               const char *message);

typedef struct redlock_tls_options {
    /* Trust anchors: a PEM file and/or a hashed directory. With neither,
     * the system's default store is used. */
    const char *ca_file;
    const char *ca_dir;
    /* Client certificate and key (PEM) for servers that require mutual TLS.
     * An encrypted key is refused with REDLOCK_ETLS: the library never
     * prompts for a passphrase. */
    const char *cert_file;
    const char *key_file;
    /* Name sent as SNI and checked against the server certificate. Defaults
     * to the URI's host. */
    const char *server_name;
    /*
     * SECURITY: nonzero turns OFF certificate and host name verification,
     * so anyone on the path can impersonate the server, read the password
     * and forge lock grants. Only for throwaway test setups. Off (= verify)
     * by default. When it is on, redlock_client_new() warns once: through
     * log_fn if one is set, otherwise on stderr.
     */
    int insecure_skip_verify;
} redlock_tls_options;

typedef struct redlock_options {
    int connect_timeout_ms;   /* TCP connect + TLS + AUTH; default 1000 */
    /* Deadline of one request to one node. Default: min(50, lease/100) but
     * at least 10 ms for lock operations; 1000 ms for inspection calls. */
    int node_timeout_ms;
    /* ACL user and password for every node; override what the URIs say. */
    const char *username;
    const char *password;
    redlock_tls_options tls;  /* applies to rediss:// nodes */

    int watchdog_lease_ms;    /* lease when none is given; default 30000 */
    /* Cap on the total time the watchdog keeps one hold alive (0 = none).
     * When reached the hold is reported lost with REDLOCK_ETIMEOUT. */
    int64_t watchdog_max_hold_ms;
    double drift_factor;      /* default 0.01 */
    int retry_delay_ms;       /* upper bound of the random retry delay; 50 */
    /* Nonzero: waiters do not subscribe for release messages and only
     * retry after the random delay or the holder's TTL (for comparison). */
    int disable_pubsub;

    redlock_log_fn log_fn;    /* NULL: no logging */
    void *log_userdata;
    redlock_log_level log_level; /* 0 = REDLOCK_LOG_WARN */

    /* Fields added in 0.2 (appended, so older callers' layouts hold). */
    /*
     * How long redlock_client_free() spends delivering the releases and
     * aborts it still owes (see redlock_client_flush()); default 200 ms,
     * negative: do not flush.
     */
    int flush_timeout_ms;
    /*
     * An acquire, even one that waits forever, ends with REDLOCK_ENO_QUORUM
     * once no quorum of members has been reachable for this long: waiting
     * is only ever waiting for a holder, never for a broken node list.
     * Default 10000 ms. Permanent refusals (REDLOCK_EAUTH, REDLOCK_ETLS,
     * REDLOCK_ECONFIG) that leave fewer than a quorum of members able to
     * grant end the acquire at once with that code.
     */
    int unavailable_timeout_ms;
    /*
     * The most bytes of unread reply data a connection may hold: a bulk
     * string, an array, or several pipelined replies not yet consumed. A
     * server that sends more fails the connection with REDLOCK_EPROTO
     * ("reply data over N bytes"). Default 1 MiB; no reply this library
     * asks for comes near it. Raise it for redlock_lock_inspect() of a
     * hash with very many fields.
     */
    size_t max_reply_bytes;
    /*
     * ACL user and password for the sentinels of redis-sentinel:// and
     * rediss-sentinel:// nodes (AUTH before SENTINEL GET-MASTER-ADDR-BY-NAME
     * and before the +switch-master subscription). NULL (the default): the
     * sentinels are asked without AUTH. They are separate from username and
     * password, which with a sentinel URI's user info authenticate to the
     * data nodes (the masters the sentinels name), as in Lettuce; a sentinel
     * URI has no place for sentinel credentials, so they come only from
     * here. Copied by redlock_client_new(); the caller keeps its strings.
     * A user needs a password, as for the data nodes.
     */
    const char *sentinel_username;
    const char *sentinel_password;

    /* Fields added in 0.3. */
    /*
     * Nonzero: a loop-driven client, for programs built around an event
     * loop (see "Event loops" below). It starts no thread of its own: no
     * watchdog thread (renewals run from the loop) and no subscriber thread
     * (it runs on the loop too, unless disable_pubsub). Its operations are started with
     * redlock_acquire_async() and redlock_unlock_async() and make progress
     * only inside redlock_loop_action().
     */
    int event_loop;
    /*
     * With event_loop: run the watchdog on a thread of its own after all,
     * so renewals go on while the loop is busy elsewhere; on_lost then runs
     * on that thread, as for a blocking client. 0 (the default): renewals
     * and on_lost run inside redlock_loop_action(), on the loop's thread.
     */
    int event_loop_watchdog_thread;
    /*
     * Nonzero: a blocking client whose network work runs on one thread of
     * its own (see "The I/O thread" below). Every thread's blocking calls
     * are handed to that thread and share one pipelined connection per
     * node, which costs the servers less per call when many threads lock
     * at once. 0 (the default): each blocking call does its own I/O on its
     * own caller's thread. Not with event_loop or event_loop_watchdog_thread
     * (REDLOCK_EINVAL).
     */
    int io_thread;
} redlock_options;

/* ------------------------------------------------------------------------ */
/* Client. */

typedef struct redlock_client redlock_client;

/*
 * Creates a client for n_nodes independent Redis nodes given as URIs:
 *   redis://[user[:password]@]host[:port][/db]      (port 6379, db 0)
 *   rediss://...                                     (TLS, see options.tls)
 *   unix:///path/to/socket[?db=N]
 *   redis-sentinel://[user[:password]@]host[:port][,host[:port]...][/db]#MASTER
 *   rediss-sentinel://...                            (TLS for sentinels and data)
 * A sentinel URI (Lettuce's form, sentinel port 26379 by default) names a
 * Sentinel-managed group: the node is whichever server the sentinels name
 * as MASTER's master (checked with ROLE), asked at creation and again in
 * the background after a failed connect, a -READONLY reply or a
 * +switch-master message, so the node follows failovers. Its user info and
 * db are the data node's; sentinel credentials are options.sentinel_*. With
 * TLS, both are verified against options.tls.server_name if set, else each
 * server's own host (the master's as the sentinels announce it). The first
 * question is asked here, so with sentinels that do not answer this call
 * takes up to about 2 * connect_timeout_ms per sentinel listed; a master
 * not found yet is not an error (connecting to it fails until one is).
 * Each sentinel node adds a background thread (its +switch-master
 * subscription), joined by redlock_client_free().
 * IPv6 literals go in brackets ("redis://[::1]:7001"); user and password
 * may be percent-encoded. Connections are opened lazily, so an unreachable
 * node is not an error here. The client gets a fresh random UUID as its
 * client id and starts its watchdog and subscriber threads.
 *
 * opts may be NULL (all defaults). On success *out owns a new client that
 * must be freed with redlock_client_free().
 * Returns REDLOCK_OK, REDLOCK_EINVAL (NULL out/uris, n_nodes == 0 or above
 * 64, bad option), REDLOCK_EURI (with the URI's index and the reason in
 * redlock_last_error()), REDLOCK_ETLS (CA or key files unusable) or
 * REDLOCK_ENOMEM.
 */
REDLOCK_EXTERN int redlock_client_new(redlock_client **out,
                                      const char *const *uris, size_t n_nodes,
                                      const redlock_options *opts)
    REDLOCK_WARN_UNUSED;

/*
 * Flushes what the client owes the nodes (see redlock_client_flush(), for
 * at most options.flush_timeout_ms), then stops the background threads and
 * closes every connection. Every lock made from the client must be freed
 * first: freeing a lock after its client is undefined. Holds still
 * registered with the watchdog are not released (their keys expire after
 * the lease); release them first. NULL is allowed.
 */
REDLOCK_EXTERN void redlock_client_free(redlock_client *client);

/*
 * Delivers what the client still owes the nodes: releases and aborts that
 * did not get an answer in time and are being retried in the background.
 * Each is written once more and the call waits up to timeout_ms (>= 0) for
 * the answers. What a silent node has not answered by then stays queued on
 * its connection, in order, so the node still applies it when it wakes,
 * as long as the process lives (and the kernel delivers what was written
 * after it exits). Releases sent by an unlock that returned at a quorum
 * are not written again: the call waits for their answers; one whose
 * connection closed before the answer came is written once more within
 * the same timeout. When redlock_client_free() closes the connections,
 * what is still unanswered there stays with the node (it applies what it
 * had received). redlock_client_free() calls this with flush_timeout_ms.
 * A clean-up release held back until a lost hold's validity ends (see
 * redlock_on_lost_fn) is never sent early: the call sleeps until then if
 * that falls within timeout_ms, and counts it as unanswered otherwise;
 * called from on_lost it never sleeps for one (the watchdog, and every
 * other hold's renewal, would wait with it) and counts it. Calls the
 * watchdog has in flight at that moment are waited for too, and sent
 * once more if they come back unanswered. On a loop-driven client's
 * thread that sleep does not drive the loop (nor does the rest of the
 * wait): pass a short timeout there.
 * Returns REDLOCK_OK when nothing is owed any more, REDLOCK_ETIMEOUT if some
 * calls are still unanswered, REDLOCK_EINVAL. Thread-safe.
 */
REDLOCK_EXTERN int redlock_client_flush(redlock_client *client, int timeout_ms);

/*
 * Cancels every acquire blocked on this client, and every later one: they
 * abort their attempt in flight (so nothing they may have been granted
 * stays behind) and return REDLOCK_ECANCELED within about one node
 * timeout. For shutting down, e.g. on SIGTERM: call it from a normal
 * thread (not a signal handler), then unlock and free as usual. Unlock and
 * flush keep working after it. Thread-safe.
 */
REDLOCK_EXTERN void redlock_client_cancel(redlock_client *client);

/* The client id (a UUID, 36 characters); owned by the client. */
REDLOCK_EXTERN const char *redlock_client_id(const redlock_client *client);
REDLOCK_EXTERN size_t redlock_client_node_count(const redlock_client *client);
/* "host:port" or the socket path of node i, for messages; NULL if out of
 * range. Owned by the client. */
REDLOCK_EXTERN const char *redlock_client_node_name(const redlock_client *c,
                                                    size_t i);

/* The default owner id: the calling thread's id (Linux gettid()). */
REDLOCK_EXTERN uint64_t redlock_thread_owner(void);

/* ------------------------------------------------------------------------ */
/* Locks. */

typedef struct redlock_lock redlock_lock;

/* The most nodes a client, and members a lock, may have. */
#define REDLOCK_MAX_NODES 64

/* The quorum that makes a MultiLock: every member must be held. */
#define REDLOCK_QUORUM_ALL (-1)

typedef struct redlock_lock_options {
    /* 0 = N/2+1 (RedLock); REDLOCK_QUORUM_ALL = N (MultiLock); otherwise
     * 1 <= quorum <= N. With one member every value means 1. */
    int quorum;
    /* Nonzero: every fresh acquisition obtains a fencing token that is
     * larger than every earlier token of this name on a quorum (costs one
     * more round trip). See redlock_lock_token(). */
    int fencing;

    /* Fields added in 0.2 (appended, so older callers' layouts hold). */
    /*
     * Nonzero: each fresh hold (not a re-entry) also writes who holds it,
     * for operators (redlock_lock_holder_facts(), `redlock status`): this
     * host's name, this process's pid, holder_command, the wall-clock start
     * time and the owner field. They go to the companion key
     * "redlock_facts:{NAME}" (a reserved prefix like the others: no lock
     * name may start with it) on every member that granted the hold or
     * whose answer the acquire did not wait for, with the hold's lease;
     * the watchdog renews them with the hold, and a fixed lease lets them
     * expire with it. A release leaves them to expire: readers compare
     * their owner with the holder (see redlock_holder_facts). Cost: one
     * more pipelined round trip before each fresh acquisition returns (its
     * answers are only logged: a failure there never fails the acquire),
     * one more command per member and watchdog renewal, and about 500
     * bytes per member on the server. 0 (the default): nothing is written.
     */
    int holder_facts;
    /*
     * The command line to record, cut to 200 bytes (at a character
     * boundary). NULL: this process's /proc/self/cmdline, its arguments
     * joined with spaces. Copied by redlock_lock_new(), so the caller's
     * string need not outlive the call. Ignored unless holder_facts is
     * set. Anyone who can read the lock's keys can read it: the password
     * of a "scheme://user:password@host" in it is masked with '*', but
     * keep other secrets out of it.
     */
    const char *holder_command;
    /*
     * Replica acknowledgement, for members that are masters with replicas
     * (e.g. Sentinel-managed groups). replica_acks > 0: a member's grant
     * counts toward the quorum only once WAIT confirmed that many replicas
     * received it (WAIT is pipelined behind the acquire on the same
     * connection: no extra round trip, but the grant waits for the
     * replicas). A grant without the acknowledgement counts as a failed
     * member (REDLOCK_EREPLICAS in its report) and is undone like one when
     * the attempt fails. Watchdog renewals use the same rule: a renewal
     * that is not acknowledged is not a genuine renewal. 0 (the default):
     * no WAIT, a master's failover can lose the grant (see the README's
     * "High availability").
     */
    int replica_acks;
    /* WAIT's timeout; 0: the client's node timeout. The request deadline
     * of the acquire and renewal grows by it. */
    int replica_timeout_ms;
    /* Nonzero (with replica_acks > 0): WAITAOF 0 replica_acks instead of
     * WAIT, so the replicas also wrote it to their append-only file. Needs
     * Redis 7.2 or later: an older server's refusal fails the member with
     * REDLOCK_ECONFIG (a refusal for good), saying so. */
    int replica_wait_aof;

    /* Fields added in 0.3. */
    /*
     * What the handle holds (redlock_lock_kind). REDLOCK_LOCK_MUTEX, the
     * default, is the reentrant lock (Redisson's RLock). REDLOCK_LOCK_READ
     * and REDLOCK_LOCK_WRITE are the two sides of a read-write lock
     * (Redisson's RReadWriteLock, same keys): any number of owners may hold
     * read holds at once, or one owner a write hold; make one handle of
     * each kind for the same name. Both are reentrant; an owner holding the
     * write hold may also take read holds, but an owner holding a read hold
     * cannot take the write hold, nor a plain lock of the same name
     * (REDLOCK_EUPGRADE at once: it would wait for itself). A waiting
     * writer keeps new readers out, so a stream of readers cannot starve
     * it (see the README). A plain lock and a
     * read-write lock of the same name exclude each other (both sides).
     * Watchdog leases, on_lost, MultiLock members and replica_acks work as
     * for the plain lock; fencing works for write holds only, and holder
     * facts too: for a read handle either is refused with REDLOCK_EINVAL.
     *
     * REDLOCK_LOCK_FAIR is the plain lock granted first come, first served
     * (Redisson's RFairLock on one node, same keys): a waiter takes a
     * ticket from a quorum and queues by it on every member, a release
     * wakes only the next waiter, and a waiter that gives up leaves the
     * queue at once. Everything the plain lock does works the same; the
     * README's "Fair locks" says when to pick it and what it costs. A fair
     * handle that has waited keeps its subscription to the waiter's own
     * release channels (one per member, on the client's subscriber
     * connections) for that owner's next wait, until redlock_lock_free().
     */
    int kind;
    /* Fair locks: how long a waiter's place in the queue lasts without a
     * renewal (each attempt renews it; a waiter wakes at least every third
     * of it to do so), so a waiter that died leaves the queue within it.
     * 0: 3000 ms. At least three node timeouts (node_timeout_ms, or 50 ms
     * when it is derived), or REDLOCK_EINVAL: each renewal may take one. */
    int fair_wait_lease_ms;
} redlock_lock_options;

/* redlock_lock_options.kind. */
typedef enum redlock_lock_kind {
    REDLOCK_LOCK_MUTEX = 0,
    REDLOCK_LOCK_READ = 1,
    REDLOCK_LOCK_WRITE = 2,
    REDLOCK_LOCK_FAIR = 3
} redlock_lock_kind;

typedef struct redlock_member {
    size_t node;       /* index into the client's node list */
    const char *name;  /* lock name (the hash key) on that node */
} redlock_member;

/*
 * Why a lock was lost: REDLOCK_ENOT_OWNER (our field vanished or someone
 * else holds the key on too many members), REDLOCK_ENO_QUORUM (too few
 * members answered before validity ran out) or REDLOCK_ETIMEOUT (the
 * watchdog_max_hold_ms cap was reached). A loss is reported before the
 * hold's validity ends (REDLOCK_ENO_QUORUM up to one retry interval,
 * lease/10 at most 500 ms, early), so the holder can stop in time. While
 * the members still holding it keep others out (always after
 * REDLOCK_ENO_QUORUM; after REDLOCK_ENOT_OWNER when fewer than a quorum
 * lost our key, as for a MultiLock missing one member), they are released
 * only once that validity has ended, or when the client is freed: never
 * while the holder may still be acting; that release is already owed
 * (redlock_client_flush() counts it) when this callback runs. Otherwise,
 * and after REDLOCK_ETIMEOUT, they are released at once.
 *
 * Runs on the client's watchdog thread, never on a caller's thread, with
 * no library mutex held. It should return quickly (the tick waits for it);
 * signalling a thread is the intent. It may use other locks, and on its own
 * lock call redlock_unlock() (which returns REDLOCK_ELOST) and
 * redlock_lock_free() (the free then happens when the watchdog is done
 * with the lock). It must not call redlock_client_free().
 */
typedef void (*redlock_on_lost_fn)(void *userdata, redlock_lock *lock,
                                   uint64_t owner, int reason);

/*
 * A lock named `name` on every node of the client (RedLock over all nodes,
 * or the single-node lock when the client has one node). Names must be
 * 1..65536 bytes and must not start with "redlock_gen:{", "redlock_latch:{",
 * "redisson_lock_token:{", "redlock_facts:{", "redlock_rwwait:{",
 * "redlock_fair:{" or "redlock_fairlapse:{": every key the library itself
 * derives from a name (the hold's generations, request latches, the
 * fencing token, holder facts, a read-write lock's waiting-writer mark, a
 * fair lock's tickets and places) starts with one of those, so refusing them as names
 * means no lock can ever reach another lock's keys. Redisson's own derived
 * keys ("{NAME}:...:rwlock_timeout:<n>", a semaphore's "{NAME}:timeout",
 * a fair lock's "redisson_lock_queue:{NAME}") are kept where Redisson puts
 * them, so a name of that shape meets them as
 * it would in Redisson. opts may be NULL. The lock keeps a reference to client,
 * which must outlive it. Free with redlock_lock_free().
 * Returns REDLOCK_OK, REDLOCK_EINVAL (name empty, too long or reserved, bad
 * quorum) or REDLOCK_ENOMEM.
 */
REDLOCK_EXTERN int redlock_lock_new(redlock_client *client, const char *name,
                                    const redlock_lock_options *opts,
                                    redlock_lock **out) REDLOCK_WARN_UNUSED;

/*
 * A lock over arbitrary (node, name) members: MultiLock when quorum is
 * REDLOCK_QUORUM_ALL. A node may appear more than once with different
 * names. Same returns as redlock_lock_new(), plus REDLOCK_EINVAL for a node
 * index out of range or n_members == 0.
 */
REDLOCK_EXTERN int redlock_multilock_new(redlock_client *client,
                                         const redlock_member *members,
                                         size_t n_members,
                                         const redlock_lock_options *opts,
                                         redlock_lock **out)
    REDLOCK_WARN_UNUSED;

/* Frees the handle; does not release holds (their leases run out and the
 * watchdog stops renewing them). NULL is allowed. */
REDLOCK_EXTERN void redlock_lock_free(redlock_lock *lock);

REDLOCK_EXTERN const char *redlock_lock_name(const redlock_lock *lock);
REDLOCK_EXTERN size_t redlock_lock_member_count(const redlock_lock *lock);
REDLOCK_EXTERN int redlock_lock_quorum(const redlock_lock *lock);

/* Called once per loss; NULL clears it. Set it before acquiring. */
REDLOCK_EXTERN void redlock_lock_set_on_lost(redlock_lock *lock,
                                             redlock_on_lost_fn fn,
                                             void *userdata);

/*
 * The general acquire. wait_ms < 0 waits forever, 0 makes one attempt,
 * > 0 waits up to that long. lease_ms <= 0 means the watchdog lease,
 * renewed every lease/3 until release; a positive lease_ms is fixed and
 * never renewed. The same owner may acquire again (re-entry): the hold
 * count goes up and the lease is reset.
 *
 * The lease (given, or the watchdog lease) must exceed the drift
 * (lease * drift_factor + 2 ms) plus two node timeouts: a shorter one could
 * never be granted in time, and is refused with REDLOCK_EINVAL.
 *
 * A fresh acquire (owner does not hold the lock through this handle) never
 * re-enters a field of owner it finds on a member: that is a leftover of
 * an earlier attempt or hold whose abort or release has not arrived yet,
 * and it is replaced by the new hold (count 1, a new fencing token).
 *
 * Returns REDLOCK_OK (held), REDLOCK_EBUSY (wait_ms == 0 and another owner
 * holds it), REDLOCK_ETIMEOUT (waited wait_ms), REDLOCK_ENO_QUORUM (too few
 * members reachable, with wait_ms == 0, when the wait ended while nodes
 * were failing, or when no quorum was reachable for unavailable_timeout_ms,
 * even with wait_ms < 0), REDLOCK_EAUTH / REDLOCK_ETLS / REDLOCK_ECONFIG
 * (members refusing for good leave fewer than a quorum: ends at once; a
 * lone refusing member among enough healthy ones is logged once, as a
 * warning), REDLOCK_ECANCELED (redlock_client_cancel(), redlock_acquire_cancel()),
 * REDLOCK_ELOST (a re-entry of a hold the watchdog found lost: before
 * this owner's redlock_unlock() reported the loss, or while the attempt
 * was in flight, when what it granted is undone; either way nothing is
 * held, and the outer hold's redlock_unlock() reports REDLOCK_ELOST and
 * clears the loss, after which the lock can be taken again),
 * REDLOCK_EINVAL, REDLOCK_ECLOSED. While waiting, a waiter
 * is woken by the release message of any member and otherwise retries when
 * the holder's TTL runs out or after a random delay. Called right after a
 * loss of this lock was reported, it first waits (about one node timeout)
 * for the watchdog to release what the lost hold left on the members, so
 * the new hold cannot re-enter those leftovers and lose them.
 */
REDLOCK_EXTERN int redlock_acquire_as(redlock_lock *lock, uint64_t owner,
                                      int64_t wait_ms, int64_t lease_ms)
    REDLOCK_WARN_UNUSED;

/*
 * Ends every acquire of this lock handle that is in progress when it is
 * called, on any thread: each returns REDLOCK_ECANCELED within about one
 * node timeout (the attempt in flight is finished first, and aborted like
 * any failed attempt, so nothing is left granted on a member). An acquire
 * whose attempt in flight is granted returns REDLOCK_OK instead: the
 * caller holds the lock. Acquires that start later are not affected, nor
 * other lock handles (unlike redlock_client_cancel()). With
 * disable_pubsub a waiter notices at its next retry (see retry_delay_ms).
 * Thread-safe; never blocks; NULL is ignored.
 */
REDLOCK_EXTERN void redlock_acquire_cancel(redlock_lock *lock);

/* Blocks until held; watchdog lease. */
REDLOCK_EXTERN int redlock_lock_acquire(redlock_lock *lock) REDLOCK_WARN_UNUSED;
/* Blocks until held; fixed lease, no watchdog. */
REDLOCK_EXTERN int redlock_lock_acquire_lease(redlock_lock *lock,
                                              int64_t lease_ms)
    REDLOCK_WARN_UNUSED;
/* One attempt; watchdog lease. REDLOCK_EBUSY if held elsewhere. */
REDLOCK_EXTERN int redlock_try_lock(redlock_lock *lock) REDLOCK_WARN_UNUSED;
/* Waits up to wait_ms; lease_ms <= 0 means watchdog. */
REDLOCK_EXTERN int redlock_try_lock_for(redlock_lock *lock, int64_t wait_ms,
                                        int64_t lease_ms) REDLOCK_WARN_UNUSED;

/*
 * Drops one hold of owner. When the count reaches zero the lock is deleted
 * on every member, a release message is published and the watchdog stops
 * renewing it before the release is sent.
 *
 * The last hold's release returns as soon as a quorum of members confirmed
 * it (MultiLock, whose quorum is every member: all of them), or when the
 * node timeout ends the wait. The other members' releases have been sent
 * by then and are not waited for: a reply that arrives later is read on a
 * later call (or by the watchdog thread), and a release whose connection
 * closes before its answer came is sent again in the background. Releases
 * that get no answer within the node timeout are also released in the
 * background, until the lease could have expired on them, so this never
 * hangs on a dead node. A member whose node is silent (its last request
 * timed out) is not waited for at all: its release goes straight to the
 * background, which probes the node with PINGs (100 ms doubling to
 * 800 ms) and sends everything owed, once, when it answers. A release that
 * reaches a node before a late acquire of the same hold leaves a tombstone
 * there, so that acquire cannot grant. Releasing an inner (re-entered) hold
 * waits for every member within the node timeout.
 *
 * REDLOCK_OK means: this handle no longer holds the lock, and at least one
 * member that held it confirmed the release (for the last hold, normally a
 * quorum: the lock can be acquired by others at once); members that had
 * not answered are released in the background as described. It does not
 * mean every member has already dropped the key; redlock_client_flush()
 * waits for that.
 *
 * Returns REDLOCK_OK, REDLOCK_ENOT_OWNER (owner does not hold it: never a
 * silent success), REDLOCK_ELOST (the hold was lost before; the lost state
 * is cleared by this call; or a quorum of members no longer had it),
 * REDLOCK_ENO_QUORUM (no member that held it answered within the node
 * timeout: the hold is dropped locally and the release goes on in the
 * background), REDLOCK_EINVAL.
 */
REDLOCK_EXTERN int redlock_unlock_as(redlock_lock *lock, uint64_t owner);
REDLOCK_EXTERN int redlock_unlock(redlock_lock *lock);

/* Deletes the lock on every member whoever holds it, and publishes the
 * release. For a plain or fair lock it also wakes the first fair waiter,
 * on that waiter's own channel as Redisson's RFairLock does, whichever of
 * the two kinds the handle is. *released (may be NULL) gets the number of members on which a
 * key was deleted. REDLOCK_ENO_QUORUM if fewer than a quorum answered;
 * REDLOCK_EAUTH, REDLOCK_ETLS or REDLOCK_ECONFIG instead when members
 * refusing for good that way alone leave fewer than a quorum (as an
 * acquire reports it). */
REDLOCK_EXTERN int redlock_force_unlock(redlock_lock *lock, size_t *released);

/* *locked = 1 if at least a quorum of members hold the key (anyone). */
REDLOCK_EXTERN int redlock_is_locked(redlock_lock *lock, int *locked);
/* *held = 1 if owner holds it on at least a quorum of members and this
 * handle has not seen it lost. */
REDLOCK_EXTERN int redlock_is_held_as(redlock_lock *lock, uint64_t owner,
                                      int *held);
REDLOCK_EXTERN int redlock_is_held_by_current_thread(redlock_lock *lock,
                                                     int *held);
/* Re-entry count of owner as stored on a quorum of members (0 if none). */
REDLOCK_EXTERN int redlock_hold_count_as(redlock_lock *lock, uint64_t owner,
                                         int *count);
REDLOCK_EXTERN int redlock_hold_count(redlock_lock *lock, int *count);
/*
 * If owner holds the lock through this handle: the remaining validity (ms),
 * computed locally. Otherwise the time until fewer than a quorum of
 * members hold the key (the quorum-th largest PTTL); -2 if not locked, -1
 * if locked without expiry (only a foreign writer can do that).
 */
REDLOCK_EXTERN int redlock_remaining_ttl_as(redlock_lock *lock, uint64_t owner,
                                            int64_t *ttl_ms);
REDLOCK_EXTERN int redlock_remaining_ttl(redlock_lock *lock, int64_t *ttl_ms);

/* The fencing token of owner's current hold (fencing locks only);
 * REDLOCK_ENOT_OWNER if owner does not hold it through this handle. */
REDLOCK_EXTERN int redlock_lock_token_as(redlock_lock *lock, uint64_t owner,
                                         uint64_t *token);
REDLOCK_EXTERN int redlock_lock_token(redlock_lock *lock, uint64_t *token);

/* ------------------------------------------------------------------------ */
/* Observability. */

typedef enum redlock_member_outcome {
    REDLOCK_MEMBER_NONE = 0,     /* not contacted (decided early) */
    REDLOCK_MEMBER_GRANTED,      /* acquired / renewed / released */
    REDLOCK_MEMBER_HELD_ELSEWHERE, /* another owner holds it; see pttl_ms */
    REDLOCK_MEMBER_NOT_HELD,     /* release/renew: our field was absent */
    REDLOCK_MEMBER_TIMEOUT,      /* no answer before the node timeout */
    REDLOCK_MEMBER_ERROR         /* connection or server error; see err */
} redlock_member_outcome;

typedef struct redlock_member_report {
    redlock_member_outcome outcome;
    int err;                     /* redlock_err for ERROR/TIMEOUT */
    int64_t pttl_ms;             /* HELD_ELSEWHERE: the holder's TTL */
    int64_t latency_us;          /* request to reply, -1 without reply */
    char message[128];           /* server or transport message, or "" */
    /* Added in 0.2: replicas that acknowledged the grant (replica_acks
     * > 0), -1 when none were asked or no answer came. */
    int replicas_acked;
} redlock_member_report;

/* The per-member outcome of the calling thread's most recent acquire or
 * release attempt, if it was made through this handle (otherwise the
 * report is empty: outcome NONE). Reports are kept per thread, so threads
 * sharing a handle never see each other's. */
REDLOCK_EXTERN int redlock_lock_report(redlock_lock *lock, size_t member,
                                       redlock_member_report *out);

#define REDLOCK_LATENCY_BUCKETS 24
typedef struct redlock_stats {
    uint64_t attempts;           /* acquire attempts (each retry counts) */
    uint64_t acquired;           /* successful acquisitions */
    uint64_t busy;               /* attempts refused because held */
    uint64_t no_quorum;          /* attempts without a quorum answering */
    uint64_t released;
    uint64_t lost;               /* holds reported lost */
    uint64_t renewals;           /* watchdog renew requests sent */
    uint64_t watchdog_ticks;
    uint64_t watchdog_batches;   /* pipelined batches (one per node/tick) */
    uint64_t background_releases; /* releases retried after a timeout */
    /* Successful acquire latency: bucket i counts latencies in
     * [2^i, 2^(i+1)) microseconds (bucket 0 also holds < 1 us). */
    uint64_t acquire_latency_us[REDLOCK_LATENCY_BUCKETS];
} redlock_stats;

REDLOCK_EXTERN int redlock_client_stats(redlock_client *client,
                                        redlock_stats *out);
/* Failures (timeouts, connection and server errors) seen on node i. */
REDLOCK_EXTERN int redlock_client_node_failures(redlock_client *client,
                                                size_t node, uint64_t *out);

/* What one member node stores for a lock name (for inspection tools). */
typedef struct redlock_member_state {
    int reachable;               /* 0: err/message say why */
    int err;
    char message[128];
    int exists;                  /* the key exists */
    char holder[160];            /* first hash field ("<uuid>:<owner>") */
    size_t holders;              /* number of hash fields */
    int64_t hold_count;
    int64_t pttl_ms;             /* -2 absent, -1 no expiry */
    uint64_t token;              /* stored fencing token, 0 if none */
} redlock_member_state;

/* Reads member i's state with one round trip (inspection timeout). */
REDLOCK_EXTERN int redlock_lock_inspect(redlock_lock *lock, size_t member,
                                        redlock_member_state *out);

/* One holder field of a lock on one member (a read-write lock has one per
 * reader; a writer's ends in ":write"). */
typedef struct redlock_holder_info {
    char field[160];             /* "<uuid>:<owner>[:write]" */
    int64_t count;               /* its hold count */
} redlock_holder_info;

/* redlock_lock_inspect() that also lists up to cap of the member's holder
 * fields in holders (out->holders says how many there are). Thread-safe. */
REDLOCK_EXTERN int redlock_lock_inspect_holders(redlock_lock *lock, size_t member,
                                                redlock_member_state *out,
                                                redlock_holder_info *holders, size_t cap);

/*
 * Who holds a lock, as a fresh hold with holder_facts wrote it on one
 * member (see redlock_lock_options.holder_facts). found is set only when
 * the facts exist and parse; the other fields are then filled, strings
 * NUL-terminated. The facts expire with the lease of the hold that wrote
 * them, not at its release, and a later holder without holder_facts does
 * not replace them: show them only when owner equals the holder field
 * redlock_lock_inspect() found on a quorum.
 */
typedef struct redlock_holder_facts {
    int found;
    char owner[160];             /* the hold's field ("<uuid>:<owner>") */
    char host[256];              /* gethostname() of the holder */
    int64_t pid;                 /* getpid() of the process holding it */
    int64_t since_ms;            /* Unix ms: when the hold was taken */
    char command[201];           /* holder_command, at most 200 bytes */
} redlock_holder_facts;

/*
 * Reads member i's holder facts with one round trip (inspection timeout).
 * Returns REDLOCK_OK (out->found 0: no facts, or facts that do not parse),
 * REDLOCK_EINVAL (NULL argument, member out of range), or the member's
 * failure (REDLOCK_ETIMEOUT, REDLOCK_ECONNECT, REDLOCK_EIO, a server
 * error) with the reason in redlock_last_error(). Thread-safe.
 */
REDLOCK_EXTERN int redlock_lock_holder_facts(redlock_lock *lock, size_t member,
                                             redlock_holder_facts *out);

/* ------------------------------------------------------------------------ */
/* Semaphores with expiring permits: at most `limit` permits taken at once.
 *
 * On each node the layout is Redisson's RPermitExpirableSemaphore: the
 * string NAME holds the permits still available, the sorted set
 * "{NAME}:timeout" the permits taken, scored by when their lease ends, and
 * releases publish the new count on "redisson_sc:{NAME}". Unlike Redisson,
 * lease ends are taken from the node's clock (Redis TIME), never the
 * client's. Over several nodes a permit is held when a quorum of them
 * granted it, within the same drift-adjusted validity as a lock. Every
 * node lets at most `limit` permits out, so at most `limit` permits are
 * valid at once, provided the quorum is large enough: q grants of each of
 * limit + 1 holders cannot fit on n nodes of limit permits each when
 * q > limit * n / (limit + 1). That is the majority for limit 1 but grows
 * with the limit (5 nodes: 3 for limit 1, 4 for limits 2 and 3, all 5 from
 * limit 4 on), so a semaphore's default quorum is that smallest safe one
 * and a smaller opts.quorum is refused. The README's "Semaphores" gives the
 * argument and what a restarted node without persistence can do to it.
 *
 * A permit is a lease: with lease_ms <= 0 the client's watchdog renews it
 * (every lease/3) until it is released, and on_lost reports a permit that
 * could not be renewed; a crashed holder's permits return by themselves
 * when their lease ends. Thread-safe: any number of threads may acquire
 * and release permits of one semaphore at once; a permit belongs to whoever
 * holds the pointer and is released (and freed) once.
 */
typedef struct redlock_semaphore redlock_semaphore;
typedef struct redlock_permit redlock_permit;

/* The most permits a semaphore may have: each taken permit is an entry
 * that a node's scripts walk on every acquire and renewal, and a larger
 * set would hold a node up for many milliseconds per call. */
#define REDLOCK_SEMAPHORE_MAX_LIMIT 10000

/*
 * A semaphore of `limit` permits (1..REDLOCK_SEMAPHORE_MAX_LIMIT) named
 * `name` on every node of the client.
 * The count is written on a node by the first acquire that finds none
 * there (limit minus the permits still taken) and kept afterwards, as
 * Redisson's trySetPermits: every client of one name must use the same
 * limit. opts (may be NULL) is used as for redlock_lock_new(), except that
 * quorum 0 means the smallest safe quorum (above) and a smaller one is
 * refused; kind must be 0, and fencing and holder_facts are refused
 * (REDLOCK_EINVAL): permits are shared. The semaphore keeps a reference to client, which must
 * outlive it. Returns REDLOCK_OK, REDLOCK_EINVAL or REDLOCK_ENOMEM.
 */
REDLOCK_EXTERN int redlock_semaphore_new(redlock_client *client, const char *name, int limit,
                                         const redlock_lock_options *opts,
                                         redlock_semaphore **out) REDLOCK_WARN_UNUSED;
/* Frees the semaphore; its permits must be released (or abandoned to
 * their leases) first, as they refer to it. NULL is allowed. */
REDLOCK_EXTERN void redlock_semaphore_free(redlock_semaphore *sem);
REDLOCK_EXTERN const char *redlock_semaphore_name(const redlock_semaphore *sem);
REDLOCK_EXTERN int redlock_semaphore_limit(const redlock_semaphore *sem);
/* The grants a permit needs (the safe quorum above, or opts.quorum). */
REDLOCK_EXTERN int redlock_semaphore_quorum(const redlock_semaphore *sem);

/* on_lost for permits acquired from now on; its lock argument is the
 * permit's redlock_permit_lock(), to compare only. NULL clears it. */
REDLOCK_EXTERN void redlock_semaphore_set_on_lost(redlock_semaphore *sem,
                                                  redlock_on_lost_fn fn, void *userdata);

/*
 * Takes `permits` permits (1..limit) as one permit handle. wait_ms and
 * lease_ms as for redlock_acquire(): wait_ms < 0 waits forever, 0 tries
 * once; lease_ms <= 0 is the watchdog lease. A waiter is woken by every
 * release, also when it asks for more than one permit, and otherwise
 * retries when the first taken permit's lease ends. On success *out is the
 * permit (release it with redlock_semaphore_release()); otherwise *out is
 * NULL and nothing is left taken (attempts that fell short are undone on
 * every node). Returns REDLOCK_OK, REDLOCK_EBUSY (wait_ms == 0), and the
 * other results of redlock_acquire(); REDLOCK_ECONFIG, at once, when the
 * permits taken on a quorum's worth of nodes were taken with another
 * limit (each node keeps the limit of the permits it holds).
 */
REDLOCK_EXTERN int redlock_semaphore_acquire(redlock_semaphore *sem, int permits,
                                             int64_t wait_ms, int64_t lease_ms,
                                             redlock_permit **out) REDLOCK_WARN_UNUSED;
/*
 * Gives the permit's permits back on every node and frees the permit,
 * whatever the result. Waits and returns as redlock_unlock_as() does for a
 * last hold: REDLOCK_OK means the permit handle holds nothing any more and
 * at least one member confirmed (normally a quorum, within the node
 * timeout); members that had not answered get their release in the
 * background, so their permits return a little later (or at the lease's
 * end if those nodes stay unreachable). REDLOCK_ELOST when its lease had
 * ended (or a quorum no longer had it), REDLOCK_ENO_QUORUM when no member
 * that held it answered in time (the release goes on in the background),
 * REDLOCK_EINVAL for NULL.
 */
REDLOCK_EXTERN int redlock_semaphore_release(redlock_permit *permit);
/* The permit's id on the nodes ("<client-id>:<owner>"): each permit
 * handle's members in "{NAME}:timeout" are "<id>:<request id>:<i>". */
REDLOCK_EXTERN const char *redlock_permit_id(const redlock_permit *permit);
REDLOCK_EXTERN redlock_lock *redlock_permit_lock(const redlock_permit *permit);
/* The permit's remaining validity, as redlock_remaining_ttl(). */
REDLOCK_EXTERN int redlock_permit_remaining_ttl(redlock_permit *permit, int64_t *ms);

/* One holder of permits on one node (redlock_semaphore_inspect()). */
typedef struct redlock_permit_info {
    char id[160];                /* the permit's id, as redlock_permit_id() */
    int permits;                 /* permits it has taken there */
    int64_t ms_left;             /* until their lease ends there */
} redlock_permit_info;

typedef struct redlock_semaphore_state {
    int reachable;               /* 0: err/message say why */
    int err;
    char message[128];
    int64_t available;           /* -1: no count written there yet */
    size_t permits_taken;        /* live permits there */
    size_t holders;              /* permit handles holding them (may be more
                                  * than the array given could list) */
} redlock_semaphore_state;

/* Reads member i's count and live permits with one round trip (inspection
 * timeout), listing up to cap holders. Changes nothing. Thread-safe. */
REDLOCK_EXTERN int redlock_semaphore_inspect(redlock_semaphore *sem, size_t member,
                                             redlock_semaphore_state *out,
                                             redlock_permit_info *holders, size_t cap);

/* ------------------------------------------------------------------------ */
/* Fenced writes (for a resource stored in Redis, normally on a separate
 * storage node): sets key to value only if token >= the largest token the
 * key has accepted. The token is kept in a companion hash field, so the
 * resource is the hash "key" with fields "value" and "fence_token".
 * Returns REDLOCK_OK, REDLOCK_ESTALE_TOKEN, or a transport error. node is
 * an index into the client's nodes. */
REDLOCK_EXTERN int redlock_fenced_set(redlock_client *client, size_t node,
                                      const char *key, const char *value,
                                      size_t value_len, uint64_t token);

/* ------------------------------------------------------------------------ */
/* Added in 0.2: the client from the environment, and metrics. */

/*
 * redlock_client_new() with the nodes taken from the environment, as the
 * redlock tool reads them:
 *   REDLOCK_NODES     the node URIs, separated by ',' (no spaces, no empty
 *                     entries), e.g. "redis://r1:6379,redis://r2:6379".
 *                     The list is split only at a ',' followed by a scheme
 *                     and "://" (or by another ',' or the end), since a
 *                     sentinel URI has commas of its own, so every entry
 *                     needs its scheme: "redis-sentinel://s1,s2#g1,
 *                     redis-sentinel://s1,s2#g2" (without the space) is two
 *                     nodes;
 *   REDLOCK_PASSWORD  if set and not empty, the password for every node,
 *                     unless opts->password is set (opts win). It overrides
 *                     passwords in the URIs, as options.password does.
 * opts may be NULL (all defaults); the client copies what it keeps, so the
 * environment may change once the call returns. On success *out owns a new
 * client that must be freed with redlock_client_free().
 *
 * Returns what redlock_client_new() returns, plus REDLOCK_ENONODES when
 * REDLOCK_NODES is unset or empty, and REDLOCK_EURI for an empty entry or a
 * malformed URI in it (the message starts with "REDLOCK_NODES: " and gives
 * the entry's index, never the URI itself or a password). REDLOCK_EINVAL
 * also covers a list of more than REDLOCK_MAX_NODES entries.
 *
 * Threads: it reads the environment with getenv(), so it must not run
 * while another thread changes the environment (setenv, putenv).
 */
REDLOCK_EXTERN int redlock_client_new_from_env(redlock_client **out,
                                               const redlock_options *opts)
    REDLOCK_WARN_UNUSED;

/*
 * Histograms the client keeps besides redlock_stats (whose layout is fixed).
 * Every histogram has REDLOCK_LATENCY_BUCKETS buckets of the same shape as
 * redlock_stats.acquire_latency_us: bucket i counts durations in
 * [2^i, 2^(i+1)) microseconds, bucket 0 also those under 1 us, and the last
 * bucket everything from 2^(REDLOCK_LATENCY_BUCKETS-1) us up.
 */
typedef enum redlock_histogram {
    /* A successful acquire, from the call to the grant (waiting included):
     * the same counts as redlock_stats.acquire_latency_us. */
    REDLOCK_HIST_ACQUIRE = 0,
    /*
     * Hand-off: for an acquire that found the lock held by another owner at
     * least once and then got it, the time from the moment it last learned
     * the lock may be free until the grant. That moment is the end of its
     * last sleep before the grant (a release message of a member arrived,
     * the holder's TTL ran out, or its random retry delay was over), or,
     * when it got the lock before sleeping at all (the attempt right after
     * subscribing), the moment its first attempt found the lock busy. It
     * measures how quickly a released lock is held again: the winning
     * attempt's round trips plus any back-off after a lost race.
     */
    REDLOCK_HIST_HANDOFF = 1,
    /*
     * Watchdog renewal lag: for every hold a watchdog tick renews, how late
     * the tick started compared with the hold's scheduled renewal time
     * (acquired or last renewed + lease/3). A tick that renews a hold ahead
     * of its schedule (renewals are bunched) counts as 0. Large values
     * mean the watchdog thread is starved or a tick ran long, which eats
     * into validity.
     */
    REDLOCK_HIST_RENEWAL_LAG = 2
} redlock_histogram;

/*
 * Copies histogram `which` into out (REDLOCK_LATENCY_BUCKETS counts) and
 * the sum of the recorded durations, in microseconds, into *sum_us (may be
 * NULL). Each value is read atomically, but not all at once: under load the
 * sum and the buckets may disagree by the observations made during the
 * call. Returns REDLOCK_OK, or REDLOCK_EINVAL (NULL client or out, unknown
 * which). Thread-safe.
 */
REDLOCK_EXTERN int redlock_client_histogram(redlock_client *client, int which,
                                            uint64_t out[REDLOCK_LATENCY_BUCKETS],
                                            uint64_t *sum_us);

/*
 * The client's counters and histograms in the Prometheus text exposition
 * format 0.0.4, for an HTTP handler or a textfile collector to serve:
 *   - every counter of redlock_stats as redlock_<name>_total (e.g.
 *     redlock_acquire_attempts_total);
 *   - redlock_node_failures_total{node="host:port"}, one per node; the
 *     label is redlock_client_node_name() (host and port, or the socket
 *     path), never user info or a password, escaped as the format asks
 *     (backslash, double quote and newline);
 *   - the histograms of redlock_histogram as redlock_acquire_duration_seconds,
 *     redlock_handoff_duration_seconds and redlock_renewal_lag_seconds, with
 *     cumulative _bucket{le="..."} lines (le is a bucket's upper bound
 *     2^(i+1) us in seconds; the last bucket is only in le="+Inf"), _sum
 *     (seconds) and _count.
 * Every metric has its # HELP and # TYPE lines; lines end with '\n'.
 *
 * snprintf-like: *needed (may be NULL) gets the length of the whole text,
 * without the terminating NUL. buf (len bytes; NULL with len 0 to ask for
 * the size) gets the text and a NUL. If it does not fit (needed >= len), buf
 * holds only the whole lines that fit (never half a sample), NUL-terminated
 * if len > 0, and the call returns REDLOCK_ERANGE: call again with
 * needed + 1 bytes. Otherwise returns REDLOCK_OK, or REDLOCK_EINVAL (NULL
 * client, or NULL buf with len > 0). Thread-safe; it reads the counters as
 * redlock_client_stats() does and talks to no node.
 */
REDLOCK_EXTERN int redlock_stats_format_prometheus(redlock_client *client, char *buf,
                                                   size_t len, size_t *needed);

/* ------------------------------------------------------------------------ */
/*
 * Event loops.
 *
 * A client made with options.event_loop never blocks its caller: an
 * operation is started, returns at once, and later calls its done
 * callback. The shape is curl's multi-socket interface, because a client
 * has several sockets (one per node, and the release subscriber's) rather
 * than hiredis's one per context:
 *   - the library says which fds it wants watched, and for what, through
 *     socket_fn, and when it next needs the time, through timer_fn;
 *   - the program's loop reports readiness and expired timers with
 *     redlock_loop_action();
 *   - the library then does its work and runs callbacks.
 * Small adapters for libuv, libevent and a poll() loop are in
 * <redlock/adapters/libuv.h>, <redlock/adapters/libevent.h> and
 * <redlock/adapters/poll.h>.
 *
 * The operations are the blocking ones, run by the same lock core: each
 * runs on a small stack of its own (a fiber), which parks where the
 * blocking call would wait and is resumed from redlock_loop_action(). So
 * an operation started here has exactly the blocking call's semantics,
 * return codes and fault handling: quorum decisions, aborts of failed
 * attempts, releases settled at a quorum, deliveries owed in the
 * background. Each operation in flight costs a stack of 256 KiB of
 * address space, of which only the pages it touches are committed (a few
 * KiB).
 *
 * Connections: the operations of a loop-driven client share one
 * connection per node, pipelined. What they ask of a node while the loop
 * runs goes out in one write, and the replies, which Redis sends in
 * order, are handed to each operation as they are read. A node that
 * fails or is killed fails the requests in flight to it, as a connection
 * error fails a blocking call's; the connection is opened again at the
 * next request. Blocking calls on the loop's thread (below) share it too;
 * the inspection calls, and renewals with event_loop_watchdog_thread, use
 * connections of their own.
 *
 * Threads: a loop-driven client belongs to the thread that attached it
 * (the loop's). Every call on it, its locks and this section's functions
 * must come from that thread, except redlock_client_cancel() and
 * redlock_acquire_cancel(), which any thread may call (they wake the loop
 * through an eventfd it watches), and redlock_client_stats() and the other
 * read-only calls marked thread-safe. Callbacks run on the loop's thread:
 * socket_fn and timer_fn inside any call of this section, and they must not
 * call the library; done, on_lost and log_fn inside redlock_loop_action()
 * (or a blocking call, see below). done and on_lost may start and cancel
 * operations and free locks, but not call redlock_loop_action() or
 * redlock_client_free() (which logs an error and does nothing then);
 * log_fn, as everywhere, must not call the library at all (it may run
 * with a lock's mutex held). on_lost runs on the watchdog fiber's stack
 * (256 KiB, of which the library's own deepest path, a blocking acquire
 * made from on_lost, uses about 70 KiB): it should not put large buffers
 * on the stack. With
 * event_loop_watchdog_thread, on_lost runs on the watchdog's thread and may
 * only cancel. The client starts no thread, with two
 * exceptions: options.event_loop_watchdog_thread, and a Sentinel member's
 * +switch-master subscription (one thread per such member). A host name
 * that fails to connect is looked up again on a resolver thread, as for
 * a blocking client; nodes given as addresses never need one.
 * redlock_client_free() on a loop-driven client first asks socket_fn to
 * stop watching every fd and cancels the timer; then it ends what is
 * still in flight itself (acquires are canceled), with poll() and no
 * further hook call, and runs their done callbacks from inside it. Every
 * operation ends within its own bounds (a node timeout or so); after 30 s
 * (a bug) what is left is abandoned without its callback.
 * The blocking acquires and unlocks (redlock_acquire_as(), redlock_unlock()
 * and their wrappers, semaphore permits) still work on a loop-driven client
 * and return only when done, as always: called on the loop's thread
 * outside a callback's fiber, each drives the client itself (poll() on its
 * fds) until it is done, so the operations in flight and the renewals go
 * on meanwhile, and their done callbacks may run inside it (socket_fn and
 * timer_fn may be called too). On a client not attached yet, a watchdog
 * lease is refused (REDLOCK_EINVAL): nothing would renew it. Called from
 * on_lost (which
 * runs in the watchdog's fiber), they park that fiber instead. The
 * inspection calls (redlock_lock_inspect() ...) block the thread for up to
 * their node timeout and do not drive the loop.
 */

#define REDLOCK_EV_READ 1
#define REDLOCK_EV_WRITE 2
/* The fd of redlock_loop_action() when the timer expired. */
#define REDLOCK_EV_TIMEOUT (-1)

/* Watch fd for events (REDLOCK_EV_READ, REDLOCK_EV_WRITE or both) from now
 * on, replacing what was asked before for that fd; events == 0: stop
 * watching it (the library is about to close it, or needs nothing more). */
typedef void (*redlock_socket_fn)(void *userdata, int fd, int events);
/* Call redlock_loop_action(client, REDLOCK_EV_TIMEOUT, 0) once, after
 * timeout_ms (0: as soon as the loop can); -1: no timer is needed. Each
 * call replaces the timer asked for before. */
typedef void (*redlock_timer_fn)(void *userdata, int64_t timeout_ms);

/*
 * Connects a loop-driven client to the program's loop. Call it once,
 * before starting any operation. Returns REDLOCK_OK, REDLOCK_EINVAL (NULL
 * argument, a client made without options.event_loop, or hooks already
 * set) or REDLOCK_ENOMEM.
 */
REDLOCK_EXTERN int redlock_loop_attach(redlock_client *client, redlock_socket_fn socket_fn,
                                       redlock_timer_fn timer_fn, void *userdata)
    REDLOCK_WARN_UNUSED;

/*
 * Reports that fd is ready for events (REDLOCK_EV_READ / REDLOCK_EV_WRITE;
 * error and hang-up count as both), or, with fd == REDLOCK_EV_TIMEOUT, that
 * the timer expired. Runs every operation that can make progress, the
 * watchdog's renewals when due, and the done callbacks of what finished;
 * then updates the fds and the timer. A readiness report for an fd the
 * library no longer watches is ignored. Returns REDLOCK_OK or
 * REDLOCK_EINVAL (not a loop-driven client, or called from a callback).
 */
REDLOCK_EXTERN int redlock_loop_action(redlock_client *client, int fd, int events);

/* How many operations of the client are in flight (started, their done
 * callback not yet run). */
REDLOCK_EXTERN size_t redlock_loop_pending(const redlock_client *client);

/*
 * Called once when an operation ends: rc is what the blocking call would
 * have returned, message what redlock_last_error() would have said ("" on
 * success; valid only during the call). lock is the operation's handle,
 * or NULL when the handle was freed while the operation was in flight.
 * Then an acquire that was or would have been granted reports
 * REDLOCK_ECANCELED (the grant has been released again), an acquire that
 * had already failed keeps its own rc (REDLOCK_ETIMEOUT, ...), and an
 * unlock, which is never canceled, reports its own outcome.
 */
typedef void (*redlock_done_fn)(void *userdata, redlock_lock *lock, int rc,
                                const char *message);

/*
 * Starts redlock_acquire_as(lock, owner, wait_ms, lease_ms) on the loop.
 * done (required) runs with its outcome. A watchdog lease (lease_ms <= 0)
 * is renewed from the loop every lease/3 (or by the watchdog thread, see
 * options.event_loop_watchdog_thread); a loss is reported to on_lost.
 * Several acquires may be in flight on one handle only for distinct
 * owners; an owner is yours to choose (a request id, a counter), 0
 * excepted. redlock_acquire_cancel(lock) ends every acquire in flight on
 * the handle with REDLOCK_ECANCELED (an attempt in flight is finished and
 * undone first, as for the blocking call); redlock_lock_free(lock) does
 * too, and the handle is freed once its last operation has ended.
 * A lease too short, like every refusal of the blocking call, comes to
 * done. Returns REDLOCK_OK (done will run, never from inside this call), or
 * REDLOCK_EINVAL (NULL lock or done, owner 0, not a loop-driven client or
 * not attached), REDLOCK_ECANCELED (the client was
 * canceled) or REDLOCK_ENOMEM; done is not called then.
 */
REDLOCK_EXTERN int redlock_acquire_async(redlock_lock *lock, uint64_t owner, int64_t wait_ms,
                                         int64_t lease_ms, redlock_done_fn done,
                                         void *userdata) REDLOCK_WARN_UNUSED;

/*
 * Starts redlock_unlock_as(lock, owner) on the loop; done runs with its
 * outcome. An unlock is not canceled (it ends within about one node
 * timeout, and its releases are owed in the background if it could not
 * finish). Same returns as redlock_acquire_async().
 */
REDLOCK_EXTERN int redlock_unlock_async(redlock_lock *lock, uint64_t owner,
                                        redlock_done_fn done, void *userdata)
    REDLOCK_WARN_UNUSED;

/* ------------------------------------------------------------------------ */
/*
 * The I/O thread.
 *
 * A client made with options.io_thread is used like any blocking client:
 * every call blocks its caller until done, with the same codes and
 * messages. Its network work runs on one thread of its own, which drives
 * the client as an event loop would (the section above) with poll(). A
 * blocking acquire or unlock (redlock_acquire_as(), redlock_unlock_as()
 * and their wrappers, every lock kind, semaphore permits) is handed to
 * that thread, which runs it as an operation of the loop, and the caller
 * sleeps until it ends. The operations of all threads share one
 * pipelined connection per node: the calls handed over while the thread
 * was busy start together, and their requests to a node leave in one
 * write, so each node reads and answers them in batches and spends less
 * CPU per call than on a connection per caller (bench/README.md,
 * section 8: with 16 threads on 16 names and five nodes on two cores,
 * 2.0-2.3x the cycles of Redisson's scripts sent by 16 threads over
 * their own sockets, and 2.2-2.5x those of a blocking client). A single
 * thread loses: each call pays two thread hand-offs (0.8x a blocking
 * client's cycles at N = 1).
 *
 * What changes against a blocking client:
 *   - the watchdog's renewals run on the I/O thread, and on_lost runs
 *     there, in the watchdog's fiber (see "Event loops" for what it may
 *     do: start and cancel blocking calls, which park it; not free the
 *     client). Every thread's calls need that thread: an on_lost that
 *     waits for something a caller does while inside a library call (a
 *     mutex the caller holds across redlock_unlock(), say) deadlocks
 *     both;
 *   - the client starts the I/O thread instead of the watchdog and
 *     subscriber threads, with every signal blocked in it;
 *   - redlock_last_error() and redlock_lock_report() still tell each
 *     caller thread of its own last call: the outcome is copied back;
 *   - redlock_acquire_cancel() and redlock_client_cancel() from any
 *     thread end relayed acquires as they end blocking ones;
 *   - redlock_lock_free() from another thread is handed over too, and
 *     returns once done; redlock_client_free() stops the I/O thread,
 *     which frees the client (flush included), and joins it;
 *   - the event-loop calls (redlock_loop_attach(), redlock_loop_action(),
 *     redlock_acquire_async(), redlock_unlock_async()) are refused with
 *     REDLOCK_EINVAL on any thread but the I/O thread, whose loop it is,
 *     and redlock_loop_pending() says 0 there;
 *   - a blocking call made from a fiber of another client's loop (that
 *     client's on_lost) is handed over too, and parks that fiber in
 *     one-millisecond naps until done, so neither loop blocks the other;
 *   - redlock_client_flush() from another thread also waits for the
 *     releases owed on the I/O thread's shared connections;
 *   - the inspection calls (redlock_lock_inspect() ...), fenced writes and
 *     force unlocks run on the caller's thread over pooled connections,
 *     as on a blocking client.
 * Thread-safety is that of a blocking client: any thread may use the
 * client and its locks, each lock handle by one thread at a time unless
 * owners differ (see redlock_acquire_as()).
 */

#ifdef __cplusplus
}
#endif
#endif /* REDLOCK_REDLOCK_H */
