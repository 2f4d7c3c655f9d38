/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One connection to one Redis node: a non-blocking socket (optionally
 * wrapped in TLS) driven by the caller's poll loop. Connecting, the TLS
 * handshake, AUTH and SELECT all happen inside the same loop as the first
 * command, so a fan-out never waits on one node's set-up before another's.
 *
 * A connection is used by one thread at a time (the pool hands it out).
 */
#ifndef REDLOCK_TRANSPORT_CONN_H
#define REDLOCK_TRANSPORT_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config/uri.h"
#include "core/error.h"
#include "core/util.h"

struct ssl_ctx_st;
struct ssl_st;
struct redisReply;
struct redisReader;

/* Everything needed to reach one node; immutable after client creation. */
typedef struct redlock__node {
    redlock__node_uri uri;
    const char *username;          /* effective ACL user or NULL */
    const char *password;          /* effective password or NULL */
    struct ssl_ctx_st *ssl_ctx;    /* TLS nodes only, shared by the client */
    const char *tls_server_name;   /* SNI and verification name */
    int tls_verify;
    size_t max_reply_bytes;        /* unread reply data allowed (conn.c) */
    /* TCP and TLS nodes: the host's addresses, and who refreshes them. */
    struct redlock__addrs *addrs;
    struct redlock__resolver *resolver;
    /* Sentinel nodes (uri.master_name set): the sentinels' credentials,
     * from the client options (never the URI); NULL: none. */
    const char *sentinel_username;
    const char *sentinel_password;
    /* Which extra script families new connections preload (conn_open.c):
     * the lock layer sets a bit (atomically) once it makes a read-write
     * lock or a semaphore, so plain-lock clients do not pay for them. */
    unsigned preload_families;
} redlock__node;

#define REDLOCK__PRELOAD_RWLOCK 1u
#define REDLOCK__PRELOAD_SEMAPHORE 2u
#define REDLOCK__PRELOAD_FAIR 4u

typedef enum redlock__conn_state {
    REDLOCK__CONN_CLOSED = 0,
    REDLOCK__CONN_CONNECTING,
    REDLOCK__CONN_TLS_HANDSHAKE,
    REDLOCK__CONN_READY
} redlock__conn_state;

/* A run of abandoned replies to discard: token 0 for n bare ones, or one
 * ledger entry (n == 1) whose settlement the hook hears of. */
typedef struct redlock__skip_run {
    uint64_t token;
    unsigned n;
} redlock__skip_run;

/* Where a connection reports its ledger entries' settlements. */
typedef struct redlock__settle_hook {
    void (*fn)(void *ud, uint64_t token, int delivered, const char *error);
    void *ud;
    /* Hears that the connection's fd is about to be closed (an event loop
     * watching it must stop first); NULL: nobody. */
    void (*fd_closing)(void *ud, int fd);
    void *fd_ud;
} redlock__settle_hook;

typedef struct redlock__conn {
    const redlock__node *node;
    int fd;
    struct sockaddr_storage peer; /* TCP: the address connected to */
    socklen_t peer_len;
    struct ssl_st *ssl;
    redlock__conn_state state;
    int tls_want_write;   /* the last TLS call needs the socket writable */
    struct redisReader *reader;
    redlock__buf out;
    /* Commands queued while AUTH/SELECT replies are outstanding. They are
     * sent only once both succeeded: Redis runs every pipelined command
     * even after a failed AUTH (as the default user) or SELECT (in db 0). */
    redlock__buf held;
    unsigned skip;        /* replies of abandoned requests, to discard */
    /* The same replies in order, as runs, once a ledger entry is among
     * them (nruns > 0); skip still counts them all. */
    redlock__skip_run *runs;
    size_t run_head, nruns, cap_runs;
    size_t ledger;        /* ledger entries among them */
    const redlock__settle_hook *hook; /* NULL: no ledger on this conn */
    unsigned handshake;   /* AUTH/SELECT replies still expected */
    unsigned preload;     /* SCRIPT LOAD replies still expected (conn.c) */
    size_t auth_len;      /* AUTH's bytes at the front of out, to wipe */
    char errmsg[128];     /* why the last operation failed */
    /* A connected plain socket is blocking, and every other send and recv
     * passes MSG_DONTWAIT: then a lone caller can wait in recv itself
     * (redlock__conn_wait_read), a system call less per round trip than
     * ppoll and then recv. rcvtimeo_ms caches the socket's SO_RCVTIMEO. */
    int blocking;
    int64_t rcvtimeo_ms;
    /* Sentinel nodes: the master generation this connection reached, and
     * whether the node called itself a replica (-READONLY) since. Either
     * way the connection is reopened at its next use, on the master the
     * resolver names then. */
    uint64_t gen;
    int stale;
    /* Set before opening: the connection only carries subscriptions, so
     * the script preloads would be wasted on it. */
    int subscriber;
} redlock__conn;

void redlock__conn_init(redlock__conn *c, const redlock__node *node);

/* For a Sentinel-managed node (uri.master_name set; a no-op otherwise):
 * asks its sentinels for the master now and starts following it (see
 * transport/resolve.h). Called once per node at client creation, before
 * any connection is opened. Returns REDLOCK_OK, or REDLOCK_ENOMEM when
 * the node's watcher thread could not start. */
int redlock__node_watch_sentinel(const redlock__node *n, int timeout_ms);

/* Opens the socket if closed (non-blocking connect, TLS set-up, queued
 * AUTH/SELECT). Returns REDLOCK_OK or an error with c->errmsg set. */
int redlock__conn_open(redlock__conn *c);

/* Whether an open connection of a Sentinel node reaches a master that is
 * no longer the one named (or that answered -READONLY): redlock__conn_open
 * then closes it and connects anew. */
int redlock__conn_outdated(const redlock__conn *c);

/* Appends an encoded command to the output. */
int redlock__conn_queue(redlock__conn *c, const char *cmd, size_t len);

/* Formats a call as EVALSHA (fallback == 0) or EVAL, or as a plain
 * command, and queues it on c. At most REDLOCK__MAX_CALL_ARGS arguments. */
struct redlock__call;
int redlock__queue_call(redlock__conn *c, const struct redlock__call *call, int fallback);

/* poll() events the connection is waiting for. */
short redlock__conn_events(const redlock__conn *c);

/* Makes progress after poll() reported revents: finishes connecting and
 * the TLS handshake, writes queued output, reads what arrived. Returns
 * REDLOCK_OK, or an error after which the connection is closed. */
int redlock__conn_io(redlock__conn *c, short revents);

/* Whether redlock__conn_wait_read can wait up to wait_ns on c: a ready
 * plain connection with nothing left to write, and a wait long enough to
 * leave a margin for the kernel's coarse receive timeout. */
int redlock__conn_can_wait_read(const redlock__conn *c, int64_t wait_ns);

/* Blocks in recv for at most wait_ns (less a margin), then reads what
 * arrived, as redlock__conn_io would after POLLIN. Returns REDLOCK_OK
 * (data read, or the wait ended: the caller checks its own deadline), or
 * an error after which the connection is closed. */
int redlock__conn_wait_read(redlock__conn *c, int64_t wait_ns);

/* Takes the next reply meant for the caller: 1 and *reply (caller frees
 * with freeReplyObject), 0 if none is complete yet, or a negative redlock
 * error (-code) if the stream is corrupt or a handshake reply failed; the
 * connection is then closed. Stale and handshake replies are consumed. */
int redlock__conn_next_reply(redlock__conn *c, struct redisReply **reply);

/* Gives up on `unanswered` requests: their replies will be discarded when
 * they arrive. A connection that cannot be reused that way (output not
 * yet written, still connecting, too far behind) is closed instead.
 * With tokens (one per request, in send order; needs c->hook), each is
 * kept as a ledger entry: settled "delivered" when its reply arrives,
 * "lost" if the connection closes first; output not written yet is then
 * kept too (written by the connection's next user or a drain). Returns 1 when the connection
 * stays open (the requests are in flight), 0 when it was closed (or out
 * of memory for the ledger, which closes it too). */
int redlock__conn_abandon(redlock__conn *c, unsigned unanswered, const uint64_t *tokens);

void redlock__conn_close(redlock__conn *c);

/* skip.c: settles every ledger entry "lost" and empties the ledger (the
 * connection is closing); discards one abandoned reply, settling its
 * ledger entry if it has one. */
void redlock__conn_settle_lost(redlock__conn *c);
void redlock__conn_skip_one(redlock__conn *c, const struct redisReply *r);

/* Shared by conn.c and conn_open.c. */
/* Closes c and sets c->errmsg to "<node>: <what>"; returns code. */
int redlock__conn_fail(redlock__conn *c, int code, const char *fmt, ...) REDLOCK__PRINTF(3, 4);
/* After a failed connect or a demotion: asks the resolver to look again. */
void redlock__conn_refresh_addrs(redlock__conn *c);
/* The caller gives up on c at its deadline: a connect still in progress
 * (its SYNs dropped, as by a firewall or an address no host answers)
 * counts against its address as a refusal does, so the next connect
 * tries the node's other addresses first. Call before closing c. */
void redlock__conn_connect_given_up(redlock__conn *c);
/* The connect finished (or failed): the next state, or an error. */
int redlock__conn_finish_connect(redlock__conn *c);
/* One step of the TLS handshake. */
int redlock__conn_tls_handshake(redlock__conn *c);

#endif
