/* SPDX-License-Identifier: BSD-3-Clause */
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

#include "core/wait.h"
#include "core/error.h"
#include "resp/script.h"
#include "resp/scripts.h"
#include "transport/reader.h"
#include "transport/resolve.h"
#include "transport/transport.h"
#include "transport/tls.h"

void redlock__conn_init(redlock__conn *c, const redlock__node *node)
{
    memset(c, 0, sizeof(*c));
    c->node = node;
    c->fd = -1;
}

void redlock__conn_close(redlock__conn *c)
{
    redlock__conn_settle_lost(c);
    if (c->ssl) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd >= 0) {
        if (c->hook && c->hook->fd_closing)
            c->hook->fd_closing(c->hook->fd_ud, c->fd);
        redlock__wait_fd_closing(c->fd);
        close(c->fd);
        c->fd = -1;
    }
    if (c->reader) {
        redlock__reader_free(c->reader);
        c->reader = NULL;
    }
    /* The output may still hold the AUTH command. */
    redlock__buf_wipe(&c->out);
    redlock__buf_wipe(&c->held);
    c->auth_len = 0;
    c->state = REDLOCK__CONN_CLOSED;
    c->skip = c->handshake = c->preload = 0;
    c->tls_want_write = 0;
    c->blocking = 0;
    c->rcvtimeo_ms = 0;
}

int redlock__conn_fail(redlock__conn *c, int code, const char *fmt, ...)
{
    size_t used;
    va_list ap;

    redlock__conn_close(c);
    /* "<node>: <what>", the form every message about a node takes. */
    redlock__copy_msg(c->errmsg, sizeof(c->errmsg), c->node->uri.display);
    used = strlen(c->errmsg);
    if (used + 2 < sizeof(c->errmsg)) {
        memcpy(c->errmsg + used, ": ", 3);
        used += 2;
        va_start(ap, fmt);
        vsnprintf(c->errmsg + used, sizeof(c->errmsg) - used, fmt, ap);
        va_end(ap);
    }
    return code;
}

int redlock__conn_queue(redlock__conn *c, const char *cmd, size_t len)
{
    redlock__buf *b = c->handshake ? &c->held : &c->out;

    return redlock__buf_append(b, cmd, len) ? REDLOCK_ENOMEM : REDLOCK_OK;
}

short redlock__conn_events(const redlock__conn *c)
{
    switch (c->state) {
    case REDLOCK__CONN_CONNECTING:
        return POLLOUT;
    case REDLOCK__CONN_TLS_HANDSHAKE:
        return c->tls_want_write ? POLLOUT : POLLIN;
    case REDLOCK__CONN_READY:
        return (short)(POLLIN | (redlock__buf_pending(&c->out) || c->tls_want_write
                                     ? POLLOUT : 0));
    default:
        return 0;
    }
}

static ssize_t tls_write(redlock__conn *c, const char *p, size_t n, int *ssl_err)
{
    return redlock__tls_write(c->ssl, p, n, ssl_err);
}

/*
 * A server that refuses the client after a TLS 1.3 handshake looked
 * complete (a missing client certificate) sends an alert and closes. A
 * write racing with that close fails with a reset, while the alert that
 * says why may still be waiting to be read: prefer it.
 */
static int tls_write_failed(redlock__conn *c, int saved)
{
    char b[1], msg[128];
    redlock__nopipe np;
    int peeked;

    redlock__nopipe_begin(&np);
    ERR_clear_error();
    peeked = SSL_peek(c->ssl, b, 1);
    redlock__nopipe_end(&np, peeked <= 0);
    if (peeked <= 0 && ERR_peek_error() != 0) {
        redlock__tls_describe(c->ssl, "TLS", msg, sizeof(msg));
        return redlock__conn_fail(c, REDLOCK_ETLS, "%s", msg);
    }
    ERR_clear_error();
    return redlock__conn_fail(c, REDLOCK_EIO, "TLS write: %s",
                     saved ? strerror(saved) : "connection closed by server");
}

static int flush_out(redlock__conn *c)
{
    while (redlock__buf_pending(&c->out)) {
        const char *p = c->out.data + c->out.off;
        size_t n = redlock__buf_pending(&c->out);
        ssize_t w;

        if (c->ssl) {
            int e;
            char msg[128];

            w = tls_write(c, p, n, &e);
            if (w <= 0) {
                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                    c->tls_want_write = e == SSL_ERROR_WANT_WRITE;
                    return REDLOCK_OK;
                }
                if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
                    return tls_write_failed(c, errno);
                redlock__tls_describe(c->ssl, "TLS write", msg, sizeof(msg));
                return redlock__conn_fail(c, REDLOCK_EIO, "%s", msg);
            }
            c->tls_want_write = 0;
        } else {
            w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return REDLOCK_OK;
                if (errno == EINTR)
                    continue;
                return redlock__conn_fail(c, REDLOCK_EIO, "write: %s", strerror(errno));
            }
        }
        redlock__buf_consume(&c->out, (size_t)w);
    }
    /* A watchdog batch of thousands of renewals needs megabytes once per
     * tick; keeping that capacity on every connection would cost more
     * memory than the held locks themselves. */
    if (c->out.cap > 65536)
        redlock__buf_free(&c->out);
    return REDLOCK_OK;
}

/* Reads until the socket has nothing more. The first recv of a plain
 * socket passes first_flags: 0 waits (up to SO_RCVTIMEO) on a blocking one. */
static int read_in(redlock__conn *c, int first_flags)
{
    char buf[16384];
    int flags = first_flags;

    for (;;) {
        ssize_t r;

        if (c->ssl) {
            int e;
            char msg[128];
            redlock__nopipe np;

            /* A read may send an alert to a peer that is gone. */
            redlock__nopipe_begin(&np);
            ERR_clear_error();
            r = SSL_read(c->ssl, buf, sizeof(buf));
            redlock__nopipe_end(&np, r <= 0);
            if (r <= 0) {
                e = SSL_get_error(c->ssl, (int)r);
                if (e == SSL_ERROR_WANT_READ)
                    return REDLOCK_OK;
                if (e == SSL_ERROR_WANT_WRITE) {
                    c->tls_want_write = 1;
                    return REDLOCK_OK;
                }
                if (e == SSL_ERROR_ZERO_RETURN ||
                    (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0))
                    return redlock__conn_fail(c, REDLOCK_EIO, "connection closed by server");
                /* E.g. the server rejecting a missing client certificate
                 * after a TLS 1.3 handshake that looked complete. */
                redlock__tls_describe(c->ssl, "TLS", msg, sizeof(msg));
                return redlock__conn_fail(c, REDLOCK_ETLS, "%s", msg);
            }
        } else {
            r = recv(c->fd, buf, sizeof(buf), flags);
            flags = MSG_DONTWAIT;
            if (r == 0)
                return redlock__conn_fail(c, REDLOCK_EIO, "connection closed by server");
            if (r < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return REDLOCK_OK;
                if (errno == EINTR)
                    continue;
                return redlock__conn_fail(c, REDLOCK_EIO, "read: %s", strerror(errno));
            }
        }
        if (redisReaderFeed(c->reader, buf, (size_t)r) != REDIS_OK)
            return redlock__conn_fail(c, REDLOCK_EPROTO, "protocol error");
        /* A bulk string or a backlog of replies beyond the cap: a faulty
         * or hostile server must not grow the client without bound. */
        if (c->node->max_reply_bytes &&
            c->reader->len - c->reader->pos > c->node->max_reply_bytes)
            return redlock__conn_fail(c, REDLOCK_EPROTO, "reply data over %zu bytes refused",
                             c->node->max_reply_bytes);
        if ((size_t)r < sizeof(buf) && !(c->ssl && SSL_pending(c->ssl)))
            return REDLOCK_OK;
    }
}

int redlock__conn_io(redlock__conn *c, short revents)
{
    int rc;

    if (c->state == REDLOCK__CONN_CLOSED)
        return REDLOCK_EIO;
    if (c->state == REDLOCK__CONN_CONNECTING) {
        if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
            return REDLOCK_OK;
        if ((rc = redlock__conn_finish_connect(c)) != REDLOCK_OK ||
            c->state == REDLOCK__CONN_CONNECTING)
            return rc;
    }
    if (c->state == REDLOCK__CONN_TLS_HANDSHAKE) {
        if ((rc = redlock__conn_tls_handshake(c)) != REDLOCK_OK ||
            c->state == REDLOCK__CONN_TLS_HANDSHAKE)
            return rc;
        if (!c->node->tls_verify)
            snprintf(c->errmsg, sizeof(c->errmsg),
                     "%s: TLS certificate NOT verified (insecure_skip_verify)",
                     c->node->uri.display);
    }
    if ((rc = flush_out(c)) != REDLOCK_OK)
        return rc;
    if (revents & (POLLIN | POLLHUP | POLLERR) || (c->ssl && SSL_pending(c->ssl)))
        return read_in(c, MSG_DONTWAIT);
    return REDLOCK_OK;
}

/* The kernel rounds a receive timeout up to its tick (up to 4 ms at 250
 * Hz) and may wake a tick late: waiting this much less than asked keeps
 * the caller's deadline; what is left is waited out in ppoll. */
#define RCVTIMEO_MARGIN_MS 10

int redlock__conn_can_wait_read(const redlock__conn *c, int64_t wait_ns)
{
    return c->blocking && c->state == REDLOCK__CONN_READY && !c->ssl &&
           !redlock__buf_pending(&c->out) &&
           wait_ns / REDLOCK__NS_PER_MS >= RCVTIMEO_MARGIN_MS + 2;
}

int redlock__conn_wait_read(redlock__conn *c, int64_t wait_ns)
{
    int64_t ms = wait_ns / REDLOCK__NS_PER_MS - RCVTIMEO_MARGIN_MS;

    /* Set only when the cached timeout would overshoot, or is far shorter
     * than the wait: a steady request timeout costs no system call. */
    if (c->rcvtimeo_ms == 0 || c->rcvtimeo_ms > ms || c->rcvtimeo_ms < ms / 2) {
        struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

        if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
            return read_in(c, MSG_DONTWAIT); /* no wait: the poll loop waits */
        c->rcvtimeo_ms = ms;
    }
    return read_in(c, 0);
}

int redlock__queue_call(redlock__conn *c, const redlock__call *call, int fallback)
{
    if (call->argc > REDLOCK__MAX_CALL_ARGS)
        return REDLOCK_EINVAL;
    /* Encoded in place: no temporary command to allocate and copy. */
    return redlock__script_encode(c->handshake ? &c->held : &c->out, call->script,
                                  call->nkeys, call->argc, call->argv, call->argvlen,
                                  fallback) != 0
               ? REDLOCK_ENOMEM
               : REDLOCK_OK;
}

/* Once AUTH is answered it has long been written: its bytes, still at the
 * front of the output buffer unless newer output overwrote them, are
 * zeroed where no unsent output lies. */
static void wipe_sent_auth(redlock__conn *c)
{
    size_t n = c->auth_len;

    if (n == 0 || !c->out.data)
        return;
    if (n > c->out.cap)
        n = c->out.cap;
    if (c->out.len == 0 || c->out.off >= n)
        explicit_bzero(c->out.data, n);
    c->auth_len = 0;
}

/* -READONLY from a sentinel node: the master we reach was demoted (a
 * failover the connection did not see break; a script's write on a
 * replica may carry it inside a longer message). Ask the resolver for the
 * new master, in the background, and reopen this connection at its next
 * use; the reply itself still goes to its reader. */
static void note_reply(redlock__conn *c, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ERROR || !c->node->uri.master_name || !r->str ||
        strstr(r->str, "READONLY") == NULL)
        return;
    c->stale = 1;
    redlock__conn_refresh_addrs(c);
}

int redlock__conn_next_reply(redlock__conn *c, redisReply **out)
{
    for (;;) {
        void *r = NULL;

        if (!c->reader)
            return 0;
        if (redisReaderGetReply(c->reader, &r) != REDIS_OK) {
            char why[100];

            /* Copied first: conn_fail frees the reader. */
            if (redlock__reader_refused(c->reader))
                snprintf(why, sizeof(why), "array of more than %d elements refused",
                         REDLOCK__READER_MAX_ELEMENTS);
            else
                redlock__copy_msg(why, sizeof(why), c->reader->errstr);
            return -redlock__conn_fail(c, REDLOCK_EPROTO, "protocol error: %s", why);
        }
        if (!r)
            return 0;
        if (c->handshake) {
            redisReply *h = r;

            c->handshake--;
            if (h->type == REDIS_REPLY_ERROR) {
                int code = redlock__server_error_code(h->str);

                /* AUTH and SELECT only fail for a wrong password or a db
                 * the server does not have: both are configuration. */
                if (code == REDLOCK_ESERVER)
                    code = REDLOCK_ECONFIG;
                char msg[100];

                redlock__copy_msg(msg, sizeof(msg), h->str);
                freeReplyObject(h);
                return -redlock__conn_fail(c, code, "%s", msg);
            }
            freeReplyObject(h);
            if (c->handshake == 0)
                wipe_sent_auth(c);
            if (c->handshake == 0 && redlock__buf_pending(&c->held)) {
                /* Authenticated and in the right db: release the commands. */
                if (redlock__buf_append(&c->out, c->held.data + c->held.off,
                                        redlock__buf_pending(&c->held)))
                    return -redlock__conn_fail(c, REDLOCK_ENOMEM, "out of memory");
                redlock__buf_free(&c->held);
            }
            continue;
        }
        /* Abandoned replies count too: a release nobody waited for can be
         * the first to meet a demoted master. */
        note_reply(c, r);
        /* The preloads' answers carry nothing: an error (a user without
         * SCRIPT rights) leaves EVALSHA's NOSCRIPT fallback to work. */
        if (c->preload || c->skip) {
            if (c->preload)
                c->preload--;
            else
                redlock__conn_skip_one(c, r);
            freeReplyObject(r);
            continue;
        }
        *out = r;
        return 1;
    }
}
