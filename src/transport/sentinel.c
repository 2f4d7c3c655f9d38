/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A blocking Sentinel client for the resolver (see sentinel.h). Every
 * wait is bounded by a deadline on CLOCK_MONOTONIC; sockets are
 * non-blocking and driven by poll(), plain or wrapped in TLS.
 */
#define _GNU_SOURCE
#include "transport/sentinel.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "transport/reader.h"
#include "transport/tls.h"

typedef struct sconn {
    int fd;
    SSL *ssl;
    redisReader *reader;
    int64_t deadline;
} sconn;

struct redlock__sentinel_watch {
    sconn c;
    const redlock__sentinel_cfg *cfg;
};

static void sc_close(sconn *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    if (c->fd >= 0)
        close(c->fd);
    redlock__reader_free(c->reader);
    c->ssl = NULL;
    c->fd = -1;
    c->reader = NULL;
}

/* Waits for ev on c's socket until its deadline: 1 ready, 0 timed out. */
static int sc_wait(sconn *c, short ev)
{
    for (;;) {
        struct pollfd p = {c->fd, ev, 0};
        int64_t left = (c->deadline - redlock__now_ns()) / REDLOCK__NS_PER_MS;
        int r;

        if (left <= 0)
            return 0;
        r = poll(&p, 1, (int)(left > 1000000 ? 1000000 : left));
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

static int sc_connect(sconn *c, const char *host, int port, const redlock__sentinel_cfg *cfg,
                      char *err, size_t cap)
{
    struct addrinfo hints, *res = NULL, *ai;
    char portstr[8];
    int rc, e = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(portstr, sizeof(portstr), "%d", port);
    if ((rc = getaddrinfo(host, portstr, &hints, &res)) != 0) {
        snprintf(err, cap, "resolve: %s", gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai && c->fd < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int so = 0;
        socklen_t len = sizeof(so);

        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            e = errno;
            close(fd);
            continue;
        }
        c->fd = fd;
        if (!sc_wait(c, POLLOUT)) {
            e = ETIMEDOUT;
        } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) != 0 || so != 0) {
            e = so ? so : errno;
        } else {
            break;
        }
        close(fd);
        c->fd = -1;
    }
    freeaddrinfo(res);
    if (c->fd < 0) {
        snprintf(err, cap, "connect: %s", strerror(e ? e : ECONNREFUSED));
        return -1;
    }
    if (cfg->ssl_ctx) {
        const char *name = cfg->tls_name ? cfg->tls_name : host;

        if (redlock__tls_ssl_new(cfg->ssl_ctx, c->fd, name, cfg->tls_verify, &c->ssl, err, cap))
            return -1;
        for (;;) {
            int r, se;
            redlock__nopipe np;

            redlock__nopipe_begin(&np);
            ERR_clear_error();
            r = SSL_connect(c->ssl);
            redlock__nopipe_end(&np, r != 1);
            if (r == 1)
                break;
            se = SSL_get_error(c->ssl, r);
            if ((se != SSL_ERROR_WANT_READ && se != SSL_ERROR_WANT_WRITE) ||
                !sc_wait(c, se == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN)) {
                redlock__tls_describe(c->ssl, "TLS handshake", err, cap);
                return -1;
            }
        }
    }
    if (!(c->reader = redlock__reader_create())) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    return 0;
}

static int sc_send(sconn *c, const char *buf, size_t len)
{
    size_t off = 0;

    while (off < len) {
        ssize_t w;

        if (c->ssl) {
            int r, e;

            /* A sentinel that closed its end must not SIGPIPE the process. */
            r = redlock__tls_write(c->ssl, buf + off, len - off, &e);
            if (r > 0) {
                off += (size_t)r;
                continue;
            }
            r = e;
            if ((r != SSL_ERROR_WANT_READ && r != SSL_ERROR_WANT_WRITE) ||
                !sc_wait(c, r == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT))
                return -1;
            continue;
        }
        w = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!sc_wait(c, POLLOUT))
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Reads until one reply is complete: 1, or 0 on timeout, -1 on error. */
static int sc_read(sconn *c, redisReply **out)
{
    char buf[4096];

    for (;;) {
        void *r = NULL;
        ssize_t n;

        if (redisReaderGetReply(c->reader, &r) != REDIS_OK)
            return -1;
        if (r) {
            *out = r;
            return 1;
        }
        if (c->ssl) {
            int e;
            redlock__nopipe np;

            redlock__nopipe_begin(&np);
            ERR_clear_error();
            e = SSL_read(c->ssl, buf, sizeof(buf));
            redlock__nopipe_end(&np, e <= 0);
            if (e > 0) {
                n = e;
            } else {
                e = SSL_get_error(c->ssl, e);
                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                    return -1;
                if (!sc_wait(c, e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN))
                    return 0;
                continue;
            }
        } else {
            n = recv(c->fd, buf, sizeof(buf), 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (!sc_wait(c, POLLIN))
                    return 0;
                continue;
            }
            if (n <= 0)
                return -1;
        }
        if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
            return -1;
    }
}

/* Sends one command and reads its reply: 0 and *out, or -1 with err. */
static int sc_command(sconn *c, int argc, const char **argv, redisReply **out, char *err,
                      size_t cap)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
    int rc;

    if (len < 0) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    rc = sc_send(c, cmd, (size_t)len);
    explicit_bzero(cmd, (size_t)len); /* AUTH carries a password */
    redisFreeCommand(cmd);
    if (rc != 0) {
        snprintf(err, cap, "%s: write failed", argv[0]);
        return -1;
    }
    rc = sc_read(c, out);
    if (rc <= 0) {
        snprintf(err, cap, "%s: %s", argv[0], rc == 0 ? "no reply in time" : "connection lost");
        return -1;
    }
    return 0;
}

/* AUTH [user] password, when a password is set: 0; -2 with err when the
 * server refused (its error, which never quotes the password); -1 with err
 * when no answer came (write failed, connection lost, timeout). */
static int sc_auth(sconn *c, const char *user, const char *password, char *err, size_t cap)
{
    const char *argv[3] = {"AUTH", user, password};
    redisReply *r = NULL;
    int ok;

    if (!password)
        return 0;
    if (!user) {
        argv[1] = password;
    }
    if (sc_command(c, user ? 3 : 2, argv, &r, err, cap) != 0)
        return -1;
    ok = r->type != REDIS_REPLY_ERROR;
    if (!ok)
        snprintf(err, cap, "AUTH: %.80s", r->str);
    freeReplyObject(r);
    return ok ? 0 : -2;
}

static int ask_one(const redlock__sentinel_cfg *cfg, const redlock__sentinel_addr *s,
                   char *host, size_t host_cap, int *port, char *err, size_t cap)
{
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", cfg->uri->master_name};
    sconn c = {-1, NULL, NULL, 0};
    redisReply *r = NULL;
    long p;
    char *end;
    int rc = -1;

    c.deadline = redlock__now_ns() + (int64_t)cfg->timeout_ms * REDLOCK__NS_PER_MS;
    if (sc_connect(&c, s->host, s->port, cfg, err, cap) != 0 ||
        sc_auth(&c, cfg->sentinel_username, cfg->sentinel_password, err, cap) != 0 ||
        sc_command(&c, 3, argv, &r, err, cap) != 0)
        goto out;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, cap, "%.80s", r->str);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
               r->element[0]->type != REDIS_REPLY_STRING ||
               r->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(err, cap, "%s", r->type == REDIS_REPLY_NIL ? "no such master name"
                                                            : "unexpected reply");
    } else if (r->element[0]->len == 0 || r->element[0]->len >= host_cap) {
        snprintf(err, cap, "unusable master host");
    } else {
        p = strtol(r->element[1]->str, &end, 10);
        if (*end || p < 1 || p > 65535) {
            snprintf(err, cap, "unusable master port");
        } else {
            memcpy(host, r->element[0]->str, r->element[0]->len + 1);
            *port = (int)p;
            rc = 0;
        }
    }
out:
    if (r)
        freeReplyObject(r);
    sc_close(&c);
    return rc;
}

/* ROLE on the master named: 0 when it says "master" (or refuses our AUTH
 * or ROLE for lack of rights: connecting then reports the refusal itself),
 * -1 with err otherwise. An AUTH that gets no answer at all is not such a
 * refusal: a frozen old master still accepts connections, and taking it
 * would skip the sentinels that know of the failover. */
static int check_role(const redlock__sentinel_cfg *cfg, const char *host, int port, char *err,
                      size_t cap)
{
    const char *argv[1] = {"ROLE"};
    redlock__sentinel_cfg data = *cfg;
    sconn c = {-1, NULL, NULL, 0};
    redisReply *r = NULL;
    int rc = -1, auth;

    c.deadline = redlock__now_ns() + (int64_t)cfg->timeout_ms * REDLOCK__NS_PER_MS;
    if (sc_connect(&c, host, port, &data, err, cap) != 0)
        goto out;
    if ((auth = sc_auth(&c, cfg->username, cfg->password, err, cap)) != 0) {
        rc = auth == -2 ? 0 : -1;
        goto out;
    }
    if (sc_command(&c, 1, argv, &r, err, cap) != 0)
        goto out;
    if (r->type == REDIS_REPLY_ERROR) {
        rc = strncmp(r->str, "NOPERM", 6) == 0 || strncmp(r->str, "NOAUTH", 6) == 0 ? 0 : -1;
        if (rc)
            snprintf(err, cap, "ROLE: %.80s", r->str);
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
               r->element[0]->type == REDIS_REPLY_STRING) {
        rc = strcmp(r->element[0]->str, "master") == 0 ? 0 : -1;
        if (rc)
            snprintf(err, cap, "ROLE says %.20s, not master", r->element[0]->str);
    } else {
        snprintf(err, cap, "ROLE: unexpected reply");
    }
out:
    if (r)
        freeReplyObject(r);
    sc_close(&c);
    return rc;
}

int redlock__sentinel_master(const redlock__sentinel_cfg *cfg, char *host, size_t host_cap,
                             int *port, char *err, size_t err_cap)
{
    const redlock__node_uri *u = cfg->uri;
    char why[160];
    int i;

    snprintf(err, err_cap, "no sentinel listed");
    for (i = 0; i < u->n_sentinels; i++) {
        const redlock__sentinel_addr *s = &u->sentinels[i];
        int v6 = strchr(s->host, ':') != NULL;

        if (ask_one(cfg, s, host, host_cap, port, why, sizeof(why)) == 0) {
            if (check_role(cfg, host, *port, why, sizeof(why)) == 0)
                return 0;
            snprintf(err, err_cap, "sentinel %s%s%s:%d named %s:%d for %s: %s", v6 ? "[" : "",
                     s->host, v6 ? "]" : "", s->port, host, *port, u->master_name, why);
        } else {
            snprintf(err, err_cap, "sentinel %s%s%s:%d: %s", v6 ? "[" : "", s->host,
                     v6 ? "]" : "", s->port, why);
        }
    }
    return -1;
}

redlock__sentinel_watch *redlock__sentinel_watch_open(const redlock__sentinel_cfg *cfg)
{
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    redlock__sentinel_watch *w = calloc(1, sizeof(*w));
    char err[160];
    int i;

    if (!w)
        return NULL;
    w->cfg = cfg;
    for (i = 0; i < cfg->uri->n_sentinels; i++) {
        const redlock__sentinel_addr *s = &cfg->uri->sentinels[i];
        redisReply *r = NULL;
        int ok;

        w->c = (sconn){-1, NULL, NULL,
                       redlock__now_ns() + (int64_t)cfg->timeout_ms * REDLOCK__NS_PER_MS};
        if (sc_connect(&w->c, s->host, s->port, cfg, err, sizeof(err)) != 0 ||
            sc_auth(&w->c, cfg->sentinel_username, cfg->sentinel_password, err,
                    sizeof(err)) != 0 ||
            sc_command(&w->c, 2, argv, &r, err, sizeof(err)) != 0) {
            sc_close(&w->c);
            continue;
        }
        ok = r->type == REDIS_REPLY_ARRAY;
        freeReplyObject(r);
        if (ok)
            return w;
        sc_close(&w->c);
    }
    free(w);
    return NULL;
}

int redlock__sentinel_watch_wait(redlock__sentinel_watch *w, int wait_ms)
{
    redisReply *r = NULL;
    int rc, hit = 0;

    w->c.deadline = redlock__now_ns() + (int64_t)wait_ms * REDLOCK__NS_PER_MS;
    rc = sc_read(&w->c, &r);
    if (rc <= 0)
        return rc;
    /* ["message", "+switch-master", "<name> <old-ip> <old-port> <new-ip>
     * <new-port>"]: only our master's switch matters. */
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[2]->type == REDIS_REPLY_STRING) {
        const char *msg = r->element[2]->str;
        size_t n = strlen(w->cfg->uri->master_name);

        hit = strncmp(msg, w->cfg->uri->master_name, n) == 0 && msg[n] == ' ';
    }
    freeReplyObject(r);
    return hit;
}

void redlock__sentinel_watch_close(redlock__sentinel_watch *w)
{
    if (!w)
        return;
    sc_close(&w->c);
    free(w);
}
