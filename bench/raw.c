/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "raw.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "resp/script.h"
#include "resp/scripts.h"

void raw_connect(raw_conn *c, const char *host, int port, const char *user,
                 const char *pass)
{
    struct addrinfo hints, *res = NULL;
    char portstr[8];
    int one = 1, rc;
    raw_reply r;

    memset(c, 0, sizeof(*c));
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(portstr, sizeof(portstr), "%d", port);
    if ((rc = getaddrinfo(host, portstr, &hints, &res)) != 0)
        bench_die("%s: %s", host, gai_strerror(rc));
    c->fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    if (c->fd < 0 || connect(c->fd, res->ai_addr, res->ai_addrlen) < 0)
        bench_die("connect %s:%d: %s", host, port, strerror(errno));
    freeaddrinfo(res);
    /* The library sets the same option: requests are tiny. */
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (pass) {
        const char *argv[3] = {"AUTH", user ? user : pass, pass};

        raw_command(c, user ? 3 : 2, user ? argv : (const char *[]){"AUTH", pass}, &r);
        if (r.type != '+')
            bench_die("AUTH on %s:%d: %s", host, port, r.text);
    }
}

void raw_close(raw_conn *c)
{
    if (c->fd > 0)
        close(c->fd);
    c->fd = -1;
}

size_t raw_format(char *out, size_t cap, int argc, const char *const *argv)
{
    size_t len = 0;
    int i, n;

    n = snprintf(out, cap, "*%d\r\n", argc);
    len += (size_t)n;
    for (i = 0; i < argc && len < cap; i++) {
        size_t al = strlen(argv[i]);

        n = snprintf(out + len, cap - len, "$%zu\r\n", al);
        len += (size_t)n;
        if (len + al + 2 >= cap)
            break;
        memcpy(out + len, argv[i], al);
        len += al;
        memcpy(out + len, "\r\n", 2);
        len += 2;
    }
    if (len >= cap)
        bench_die("command too long for its buffer");
    return len;
}

void raw_send(raw_conn *c, const char *cmd, size_t len)
{
    while (len > 0) {
        ssize_t n = send(c->fd, cmd, len, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            bench_die("send: %s", strerror(errno));
        cmd += n;
        len -= (size_t)n;
    }
}

/* Reads more bytes; blocks until at least one arrives. */
static void fill(raw_conn *c)
{
    ssize_t n;

    if (c->off == c->len) {
        c->off = c->len = 0;
    } else if (c->len == sizeof(c->buf)) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
        if (c->len == sizeof(c->buf))
            bench_die("reply larger than the read buffer");
    }
    do {
        n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        bench_die("recv: %s", n == 0 ? "connection closed" : strerror(errno));
    c->len += (size_t)n;
}

/* The next CRLF-terminated line, NUL-terminated in place. */
static char *next_line(raw_conn *c)
{
    for (;;) {
        char *start = c->buf + c->off;
        char *crlf = memmem(start, c->len - c->off, "\r\n", 2);

        if (crlf) {
            *crlf = '\0';
            c->off = (size_t)(crlf - c->buf) + 2;
            return start;
        }
        fill(c);
    }
}

static void copy_text(raw_reply *r, const char *s, size_t n)
{
    if (n >= sizeof(r->text))
        n = sizeof(r->text) - 1;
    memcpy(r->text, s, n);
    r->text[n] = '\0';
}

static void parse(raw_conn *c, raw_reply *r)
{
    char *l = next_line(c);
    long long n = strtoll(l + 1, NULL, 10);

    memset(r, 0, sizeof(*r));
    r->type = l[0];
    switch (l[0]) {
    case '+':
    case '-':
        copy_text(r, l + 1, strlen(l + 1));
        break;
    case ':':
        r->integer = n;
        break;
    case '$':
        if (n < 0) {
            r->type = 'n';
            break;
        }
        while (c->len - c->off < (size_t)n + 2)
            fill(c);
        copy_text(r, c->buf + c->off, (size_t)n);
        c->off += (size_t)n + 2;
        break;
    case '*': {
        long long i;
        raw_reply sub;

        if (n < 0) {
            r->type = 'n';
            break;
        }
        for (i = 0; i < n; i++) {
            parse(c, &sub);
            if (i == 0 && sub.type == ':')
                r->integer = sub.integer;
        }
        break;
    }
    default:
        bench_die("bad RESP type byte 0x%02x", (unsigned char)l[0]);
    }
}

void raw_read(raw_conn *c, raw_reply *r)
{
    parse(c, r);
}

void raw_command(raw_conn *c, int argc, const char *const *argv, raw_reply *r)
{
    char cmd[8192];

    raw_send(c, cmd, raw_format(cmd, sizeof(cmd), argc, argv));
    raw_read(c, r);
}

void raw_command_bulk(raw_conn *c, int argc, const char *const *argv, char *out,
                      size_t cap)
{
    char cmd[1024];
    char *l;
    long long n;

    raw_send(c, cmd, raw_format(cmd, sizeof(cmd), argc, argv));
    l = next_line(c);
    if (l[0] != '$')
        bench_die("%s: expected a bulk reply, got '%.100s'", argv[0], l);
    n = strtoll(l + 1, NULL, 10);
    if (n < 0 || (size_t)n >= cap || (size_t)n + 2 > sizeof(c->buf))
        bench_die("%s: reply of %lld bytes does not fit", argv[0], n);
    while (c->len - c->off < (size_t)n + 2)
        fill(c);
    memcpy(out, c->buf + c->off, (size_t)n);
    out[n] = '\0';
    c->off += (size_t)n + 2;
}

long long raw_command_calls(raw_conn *c, const char *command)
{
    char info[16000], key[96];
    const char *p;

    raw_command_bulk(c, 2, (const char *[]){"INFO", "commandstats"}, info, sizeof(info));
    snprintf(key, sizeof(key), "cmdstat_%s:calls=", command);
    p = strstr(info, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : 0;
}

long long raw_info_int(raw_conn *c, const char *section, const char *field)
{
    char info[16000], key[96];
    const char *p;

    raw_command_bulk(c, 2, (const char *[]){"INFO", section}, info, sizeof(info));
    /* Every field follows a line break: INFO starts with "# Section". */
    snprintf(key, sizeof(key), "\n%s:", field);
    p = strstr(info, key);
    if (!p)
        bench_die("INFO %s has no field '%s'", section, field);
    return strtoll(p + strlen(key), NULL, 10);
}

int raw_exists(raw_conn *c, const char *key)
{
    raw_reply r;

    raw_command(c, 2, (const char *[]){"EXISTS", key}, &r);
    if (r.type != ':')
        bench_die("EXISTS %s: %s", key, r.text);
    return r.integer != 0;
}

void raw_del(raw_conn *c, const char *name)
{
    raw_reply r;

    raw_command(c, 2, (const char *[]){"DEL", name}, &r);
    if (r.type != ':')
        bench_die("DEL %s: %s", name, r.text);
}

/* ---- The floor --------------------------------------------------------- */

static _Thread_local uint64_t rng_state;

/* The library draws request ids from a per-thread xorshift64*; so does
 * the floor, so both pay the same for them. */
static void rand_hex(char *hex, size_t nbytes)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;

    if (rng_state == 0)
        rng_state = ((uint64_t)bench_now_ns() ^ ((uint64_t)gettid() << 40)) | 1;
    for (i = 0; i < nbytes; i++) {
        uint64_t x = rng_state;

        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        rng_state = x;
        x *= 0x2545F4914F6CDD1DULL;
        hex[2 * i] = digits[(x >> 4) & 15];
        hex[2 * i + 1] = digits[x & 15];
    }
    hex[2 * nbytes] = '\0';
}

static void load_script(raw_conn *c, int id)
{
    const redlock__script *s = &redlock__scripts[id];
    raw_reply r;

    raw_command(c, 3, (const char *[]){"SCRIPT", "LOAD", s->body}, &r);
    if (r.type != '$' || strcmp(r.text, s->sha1) != 0)
        bench_die("SCRIPT LOAD %s: got '%s', embedded SHA1 is %s", s->name, r.text,
                  s->sha1);
}

void raw_floor_init(raw_floor *f, const bench_args *a, size_t n, const char *name,
                    int64_t lease_ms)
{
    char id[17];
    size_t i;

    memset(f, 0, sizeof(*f));
    if (n > a->n_nodes)
        bench_die("the floor needs %zu nodes, %zu given", n, a->n_nodes);
    f->n = n;
    snprintf(f->name, sizeof(f->name), "%s", name);
    snprintf(f->channel, sizeof(f->channel), "redisson_lock__channel:{%s}", name);
    snprintf(f->latch_prefix, sizeof(f->latch_prefix), "redlock_latch:{%s}:", name);
    rand_hex(id, 8);
    /* Same shape as a library field: "<36-char uuid>:<owner>". */
    snprintf(f->field, sizeof(f->field), "%.8s-0000-4000-8000-%.8s0000:%d", id, id + 8,
             (int)gettid());
    snprintf(f->lease, sizeof(f->lease), "%lld", (long long)lease_ms);
    for (i = 0; i < n; i++) {
        raw_connect(&f->conns[i], a->hosts[i], a->ports[i], a->user, a->pass);
        load_script(&f->conns[i], REDLOCK__SCRIPT_ACQUIRE);
        load_script(&f->conns[i], REDLOCK__SCRIPT_RELEASE);
    }
}

static void send_all(raw_floor *f, size_t len)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        raw_send(&f->conns[i], f->cmd, len);
}

/* EVALSHA of a call built by the library's own builders and encoder, so
 * the floor sends exactly the library's bytes. */
static size_t format_script(raw_floor *f, redlock__script_call sc, const char *const *args)
{
    redlock__buf b = {0};
    size_t len;

    if (redlock__script_encode(&b, sc.script, sc.nkeys, sc.argc, args, NULL, 0) != 0 ||
        b.len > sizeof(f->cmd))
        bench_die("cannot format a %s call", redlock__scripts[sc.script].name);
    memcpy(f->cmd, b.data, b.len);
    len = b.len;
    redlock__buf_free(&b);
    return len;
}

int64_t raw_floor_acquire(raw_floor *f)
{
    char rid[33], latch[256];
    const char *args[REDLOCK__SCRIPT_MAX_ARGS];
    redlock__script_call sc;
    int64_t t0 = bench_now_ns();
    size_t i;
    raw_reply r;

    rand_hex(rid, 16);
    snprintf(latch, sizeof(latch), "%s%s", f->latch_prefix, rid);
    sc = redlock__script_acquire(
        args, &(redlock__acquire_args){.name = f->name,
                                       .mark_key = latch,
                                       .lease_ms = f->lease,
                                       .field = f->field,
                                       .request_id = rid,
                                       .fresh_only = "1"});
    send_all(f, format_script(f, sc, args));
    for (i = 0; i < f->n; i++) {
        raw_read(&f->conns[i], &r);
        /* Granted: the bare generation (no token asked for). */
        if (r.type != '$')
            bench_die("floor acquire on node %zu: not granted (%c %lld %s)", i, r.type,
                      r.integer, r.text);
    }
    return bench_now_ns() - t0;
}

int64_t raw_floor_release(raw_floor *f)
{
    char rid[33], latch[256];
    const char *args[REDLOCK__SCRIPT_MAX_ARGS];
    redlock__script_call sc;
    int64_t t0 = bench_now_ns();
    size_t i;
    raw_reply r;

    rand_hex(rid, 16);
    snprintf(latch, sizeof(latch), "%s%s", f->latch_prefix, rid);
    sc = redlock__script_release(
        args, &(redlock__release_args){.name = f->name,
                                       .channel = f->channel,
                                       .mark_key = latch,
                                       .message = "0",
                                       .lease_ms = f->lease,
                                       .field = f->field,
                                       .drop_all = "0",
                                       .gens = ""});
    send_all(f, format_script(f, sc, args));
    for (i = 0; i < f->n; i++) {
        raw_read(&f->conns[i], &r);
        if (r.type != ':' || r.integer != 1)
            bench_die("floor release on node %zu: unexpected reply (%c %lld %s)", i, r.type,
                      r.integer, r.text);
    }
    return bench_now_ns() - t0;
}

int64_t raw_floor_ping(raw_floor *f)
{
    int64_t t0 = bench_now_ns();
    size_t i;
    raw_reply r;

    send_all(f, raw_format(f->cmd, sizeof(f->cmd), 1, (const char *[]){"PING"}));
    for (i = 0; i < f->n; i++) {
        raw_read(&f->conns[i], &r);
        if (r.type != '+')
            bench_die("PING on node %zu: %s", i, r.text);
    }
    return bench_now_ns() - t0;
}

void raw_floor_free(raw_floor *f)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        raw_close(&f->conns[i]);
}
