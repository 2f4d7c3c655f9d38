/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Opening a connection (conn_open.c): the socket (TCP from the resolved
 * addresses, or Unix), the non-blocking connect and its completion, the
 * TLS handshake, and the AUTH/SELECT handshake and script preloads queued
 * ahead of the first command. For a sentinel member, also the master's
 * watch and a connection's check that its master is still the one named.
 */
#define _GNU_SOURCE
#include "transport/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "resp/script.h"
#include "resp/scripts.h"
#include "transport/reader.h"
#include "transport/resolve.h"
#include "transport/transport.h"
#include "transport/tls.h"

/* Scripts whose calls must be applied even when nobody waits for the
 * answer (an abort or release to a node that went silent, an acquire sent
 * to a member the attempt decided without): loaded on every connection
 * that runs commands (not a subscriber's), before its first command, so
 * a node whose cache was emptied (restart, SCRIPT FLUSH before we
 * connected) never answers their EVALSHA with a NOSCRIPT that nobody
 * reads. */
static const struct {
    int script;
    unsigned family;      /* 0: always; else a REDLOCK__PRELOAD_* bit */
} preloaded[] = {
    {REDLOCK__SCRIPT_ACQUIRE, 0},
    {REDLOCK__SCRIPT_RELEASE, 0},
    {REDLOCK__SCRIPT_ABORT, 0},
    {REDLOCK__SCRIPT_FORCE_RELEASE, 0},
    {REDLOCK__SCRIPT_RW_READ_ACQUIRE, REDLOCK__PRELOAD_RWLOCK},
    {REDLOCK__SCRIPT_RW_WRITE_ACQUIRE, REDLOCK__PRELOAD_RWLOCK},
    {REDLOCK__SCRIPT_RW_RELEASE, REDLOCK__PRELOAD_RWLOCK},
    {REDLOCK__SCRIPT_RW_ABORT, REDLOCK__PRELOAD_RWLOCK},
    {REDLOCK__SCRIPT_SEM_ACQUIRE, REDLOCK__PRELOAD_SEMAPHORE},
    {REDLOCK__SCRIPT_SEM_RELEASE, REDLOCK__PRELOAD_SEMAPHORE},
    {REDLOCK__SCRIPT_SEM_ABORT, REDLOCK__PRELOAD_SEMAPHORE},
    {REDLOCK__SCRIPT_FAIR_ACQUIRE, REDLOCK__PRELOAD_FAIR},
    {REDLOCK__SCRIPT_FAIR_RELEASE, REDLOCK__PRELOAD_FAIR},
    {REDLOCK__SCRIPT_FAIR_ABORT, REDLOCK__PRELOAD_FAIR},
    {REDLOCK__SCRIPT_FAIR_LEAVE, REDLOCK__PRELOAD_FAIR},
};

static int queue_argv(redlock__conn *c, int argc, const char **argv)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
    int rc;

    if (len < 0)
        return REDLOCK_ENOMEM;
    rc = redlock__buf_append(&c->out, cmd, (size_t)len) ? REDLOCK_ENOMEM : REDLOCK_OK;
    explicit_bzero(cmd, (size_t)len); /* AUTH carries the password */
    redisFreeCommand(cmd);
    return rc;
}

/* AUTH and SELECT are pipelined ahead of the first command; their replies
 * are checked as they arrive and never reach the caller. */
static int queue_handshake(redlock__conn *c)
{
    const redlock__node *n = c->node;
    unsigned families;
    char db[16];
    size_t i;

    if (n->password) {
        const char *argv[3] = {"AUTH", n->username, n->password};
        int rc = n->username ? queue_argv(c, 3, argv)
                             : queue_argv(c, 2, (const char *[]){"AUTH", n->password});
        if (rc)
            return rc;
        c->auth_len = c->out.len;
        c->handshake++;
    }
    if (n->uri.db != 0) {
        snprintf(db, sizeof(db), "%d", n->uri.db);
        if (queue_argv(c, 2, (const char *[]){"SELECT", db}))
            return REDLOCK_ENOMEM;
        c->handshake++;
    }
    families = __atomic_load_n(&n->preload_families, __ATOMIC_RELAXED);
    for (i = 0; !c->subscriber && i < sizeof(preloaded) / sizeof(preloaded[0]); i++) {
        const redlock__script *s = &redlock__scripts[preloaded[i].script];

        if (preloaded[i].family && !(families & preloaded[i].family))
            continue;
        const char *argv[3] = {"SCRIPT", "LOAD", s->body};
        size_t lens[3] = {6, 4, s->len};

        if (redlock__script_encode(&c->out, -1, 0, 3, argv, lens, 0) != 0)
            return REDLOCK_ENOMEM;
        c->preload++;
    }
    return REDLOCK_OK;
}

static int tune_socket(int fd, int tcp)
{
    int one = 1;
    int flags = fcntl(fd, F_GETFL);

    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -1;
    if (tcp) {
        /* Lock requests are tiny and latency-bound. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    }
    return 0;
}

static int open_unix(redlock__conn *c)
{
    struct sockaddr_un sa;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return redlock__conn_fail(c, REDLOCK_ECONNECT, "socket: %s", strerror(errno));
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->node->uri.path);
    c->fd = fd;
    if (tune_socket(fd, 0) < 0)
        return redlock__conn_fail(c, REDLOCK_ECONNECT, "fcntl: %s", strerror(errno));
    /* EAGAIN from a unix socket's connect is a refusal (the listener's
     * queue is full), not a connect in progress: nothing would complete
     * it, and polling it would report it writable at once, for ever. */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS) {
        c->state = REDLOCK__CONN_CONNECTING;
        return REDLOCK_OK;
    }
    return redlock__conn_fail(c, REDLOCK_ECONNECT, "connect: %s", strerror(errno));
}

int redlock__node_watch_sentinel(const redlock__node *n, int timeout_ms)
{
    redlock__sentinel_cfg cfg;

    if (!n->uri.master_name || !n->addrs)
        return REDLOCK_OK;
    memset(&cfg, 0, sizeof(cfg));
    cfg.uri = &n->uri;
    cfg.sentinel_username = n->sentinel_username;
    cfg.sentinel_password = n->sentinel_password;
    cfg.username = n->username;
    cfg.password = n->password;
    if (n->uri.kind == REDLOCK__NODE_TLS) {
        cfg.ssl_ctx = n->ssl_ctx;
        /* The client's tls.server_name, if it set one; otherwise each
         * server is verified against its own host (see conn_tls_name). */
        cfg.tls_name = n->tls_server_name != n->uri.host ? n->tls_server_name : NULL;
        cfg.tls_verify = n->tls_verify;
    }
    cfg.timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    return redlock__resolver_watch_sentinel(n->resolver, n->addrs, &cfg) == 0 ? REDLOCK_OK
                                                                               : REDLOCK_ENOMEM;
}

/* A failed connect may mean the name points elsewhere now. */
void redlock__conn_refresh_addrs(redlock__conn *c)
{
    if (c->node->addrs)
        redlock__addrs_refresh(c->node->resolver, c->node->addrs);
}

static int open_tcp(redlock__conn *c)
{
    struct sockaddr_storage addr[REDLOCK__RESOLVE_MAX_ADDRS];
    socklen_t len[REDLOCK__RESOLVE_MAX_ADDRS];
    int n, i, gai = 0, saved = 0;

    /* Addresses resolved when the client was made (or since, in the
     * background): connecting never waits on DNS. */
    n = c->node->addrs ? redlock__addrs_get(c->node->addrs, addr, len, &gai) : 0;
    if (n == 0 && c->node->uri.master_name) {
        char why[160];

        redlock__addrs_master(c->node->addrs, NULL, 0, NULL, why, sizeof(why));
        redlock__conn_refresh_addrs(c);
        return redlock__conn_fail(c, REDLOCK_ECONNECT, "no master known yet (%s; asked again in the "
                                              "background)", why[0] ? why : "not asked yet");
    }
    if (n == 0) {
        redlock__conn_refresh_addrs(c);
        return redlock__conn_fail(c, REDLOCK_ECONNECT, "resolve: %s (looked up again in the background)",
                         gai ? gai_strerror(gai) : "no address");
    }
    for (i = 0; i < n; i++) {
        int fd = socket(addr[i].ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0) {
            saved = errno;
            continue;
        }
        if (tune_socket(fd, 1) < 0) {
            saved = errno;
            close(fd);
            continue;
        }
        if (connect(fd, (struct sockaddr *)&addr[i], len[i]) == 0 || errno == EINPROGRESS) {
            c->fd = fd;
            c->peer = addr[i];
            c->peer_len = len[i];
            c->state = REDLOCK__CONN_CONNECTING;
            return REDLOCK_OK;
        }
        saved = errno;
        close(fd);
        redlock__addrs_failed(c->node->addrs, &addr[i], len[i]);
    }
    redlock__conn_refresh_addrs(c);
    return redlock__conn_fail(c, REDLOCK_ECONNECT, "connect: %s", strerror(saved));
}

/* A sentinel node's connection to a master that is no longer the one the
 * resolver names (or that answered -READONLY) is closed here, at its next
 * use, so requests go to the new master. Closing settles what it still
 * owed as lost, exactly as a connection error would. */
int redlock__conn_outdated(const redlock__conn *c)
{
    uint64_t gen = 0;

    if (!c->node->uri.master_name || !c->node->addrs)
        return 0;
    if (c->stale)
        return 1;
    redlock__addrs_master(c->node->addrs, NULL, 0, &gen, NULL, 0);
    return gen != c->gen;
}

/* The name a TLS data connection verifies: the client's tls.server_name
 * if set, else the URI's host; for a sentinel node without an override,
 * the master's host as the sentinels announced it (buf). */
static const char *conn_tls_name(redlock__conn *c, char *buf, size_t cap)
{
    const redlock__node *n = c->node;

    if (!n->uri.master_name || n->tls_server_name != n->uri.host || !n->addrs)
        return n->tls_server_name;
    redlock__addrs_master(n->addrs, buf, cap, NULL, NULL, 0);
    return buf[0] ? buf : n->tls_server_name;
}

int redlock__conn_open(redlock__conn *c)
{
    int rc;

    if (c->state != REDLOCK__CONN_CLOSED && redlock__conn_outdated(c))
        redlock__conn_close(c);
    if (c->state != REDLOCK__CONN_CLOSED)
        return REDLOCK_OK;
    c->stale = 0;
    if (c->node->uri.master_name && c->node->addrs)
        redlock__addrs_master(c->node->addrs, NULL, 0, &c->gen, NULL, 0);
    c->errmsg[0] = '\0';
    c->reader = redlock__reader_create();
    if (!c->reader)
        return redlock__conn_fail(c, REDLOCK_ENOMEM, "out of memory");
    rc = c->node->uri.kind == REDLOCK__NODE_UNIX ? open_unix(c) : open_tcp(c);
    if (rc)
        return rc;
    if (c->node->uri.kind == REDLOCK__NODE_TLS) {
        char err[128], name[REDLOCK__MASTER_HOST_MAX];

        rc = redlock__tls_ssl_new(c->node->ssl_ctx, c->fd, conn_tls_name(c, name, sizeof(name)),
                                  c->node->tls_verify, &c->ssl, err, sizeof(err));
        if (rc)
            return redlock__conn_fail(c, rc, "%s", err);
    }
    if (queue_handshake(c))
        return redlock__conn_fail(c, REDLOCK_ENOMEM, "out of memory");
    return REDLOCK_OK;
}

void redlock__conn_connect_given_up(redlock__conn *c)
{
    if (c->state == REDLOCK__CONN_CONNECTING && c->node->addrs && c->peer_len)
        redlock__addrs_failed(c->node->addrs, &c->peer, c->peer_len);
}

int redlock__conn_finish_connect(redlock__conn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err == EINPROGRESS)
        return REDLOCK_OK;
    if (err == 0) {
        struct sockaddr_storage peer;
        socklen_t peer_len = sizeof(peer);

        /* No error pending is not "connected": a connect still in progress
         * has none either, and a fan-out asks before poll() said the
         * socket is writable (it writes a ready connection at once).
         * Taken for connected, such a socket lost its set-up allowance and
         * a node whose SYNs are dropped looked like one that never
         * answers. */
        if (getpeername(c->fd, (struct sockaddr *)&peer, &peer_len) < 0 && errno == ENOTCONN)
            return REDLOCK_OK;
    }
    if (err) {
        if (c->node->addrs && c->peer_len)
            redlock__addrs_failed(c->node->addrs, &c->peer, c->peer_len);
        redlock__conn_refresh_addrs(c);
        return redlock__conn_fail(c, REDLOCK_ECONNECT, "connect: %s", strerror(err));
    }
    c->state = c->ssl ? REDLOCK__CONN_TLS_HANDSHAKE : REDLOCK__CONN_READY;
    /* OpenSSL does a TLS socket's I/O, without MSG_DONTWAIT: it stays
     * non-blocking. (If this fails, the socket just stays so too.) */
    if (!c->ssl) {
        int flags = fcntl(c->fd, F_GETFL);

        c->blocking = flags >= 0 && fcntl(c->fd, F_SETFL, flags & ~O_NONBLOCK) == 0;
    }
    return REDLOCK_OK;
}

int redlock__conn_tls_handshake(redlock__conn *c)
{
    int r, e;
    char msg[128];
    redlock__nopipe np;

    redlock__nopipe_begin(&np);
    ERR_clear_error();
    r = SSL_connect(c->ssl);
    redlock__nopipe_end(&np, r != 1);
    if (r == 1) {
        c->tls_want_write = 0;
        c->state = REDLOCK__CONN_READY;
        return REDLOCK_OK;
    }
    e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        c->tls_want_write = e == SSL_ERROR_WANT_WRITE;
        return REDLOCK_OK;
    }
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
        return redlock__conn_fail(c, REDLOCK_ETLS, "TLS handshake: connection closed (%s)",
                         errno ? strerror(errno) : "EOF");
    redlock__tls_describe(c->ssl, "TLS handshake", msg, sizeof(msg));
    return redlock__conn_fail(c, REDLOCK_ETLS, "%s", msg);
}
