/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A libuv TCP server that takes locks for its clients, on one thread.
 *
 * For each request line "NAME\n" it acquires the lock NAME (fixed lease
 * 5 s, waiting up to 2 s) without blocking the loop, answers
 * "HELD NAME <n>\n" (n: how many times this server was granted NAME) once
 * it holds it, keeps it a moment, then releases it, also without
 * blocking. A request it cannot serve is answered "BUSY NAME\n" (the wait
 * ran out) or "ERR NAME <error>\n".
 *
 * To run as a self-checking test the program is its own client too: it
 * listens on 127.0.0.1 on a port the kernel picks, connects 20 libuv TCP
 * clients to itself, each sending 5 requests one after another over 5
 * names, and checks that every request was answered HELD, every release
 * succeeded, and no two requests held one name at once (a hold counts
 * from its grant to the moment its release starts). A deadline of 20 s
 * ends the run whatever happens.
 *
 *   ./uv_server redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
 *
 * Exit status: 0 all requests held exclusively, 1 failure, 2 usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <redlock/adapters/libuv.h>
#include <redlock/redlock.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "nodes.h"

#define CLIENTS 20
#define NAMES 5
#define REQUESTS 5       /* per client, each sent when the last is answered */
#define TOTAL (CLIENTS * REQUESTS)
#define LEASE_MS 5000
#define WAIT_MS 2000
#define HOLD_MS 10       /* how long a request keeps its lock */
#define DEADLINE_MS 20000
#define MAX_LINE 512

static uv_loop_t *loop;
static redlock_client *rl;
static uv_tcp_t server;
static uv_timer_t deadline;
static uint64_t started_ms;

/* What the run saw. */
static int served, held, busy, errors, released, release_failures, overlaps;
static int answered, answered_held, bad_answers, client_failures, timed_out;

/* Tags in handle->data, so that the final sweep knows what it closes. */
static char conn_tag, tclient_tag, request_tag;

/* ------------------------------------------------------------------ */
/* Writing lines. */

typedef struct wreq {
    uv_write_t req; /* first: the request is the allocation */
    char data[MAX_LINE + 64];
} wreq;

static void on_written(uv_write_t *req, int status)
{
    (void)status; /* a peer gone meanwhile is seen by its reader */
    free(req);
}

static void send_line(uv_stream_t *s, const char *fmt, ...)
{
    wreq *w;
    va_list ap;
    uv_buf_t buf;
    int n;

    if (uv_is_closing((uv_handle_t *)s) || !(w = malloc(sizeof(*w))))
        return;
    va_start(ap, fmt);
    n = vsnprintf(w->data, sizeof(w->data), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(w->data)) {
        free(w);
        return;
    }
    buf = uv_buf_init(w->data, (unsigned)n);
    if (uv_write(&w->req, s, &buf, 1, on_written) != 0)
        free(w);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

/* ------------------------------------------------------------------ */
/* The server. */

/* One lock handle per name, for every request on it: requests are told
 * apart by their owner ids, so they may wait on one handle together. */
typedef struct lock_entry {
    struct lock_entry *next;
    redlock_lock *lock;
    char *name;       /* its own copy: outlives the handle at shutdown */
    int holders;      /* granted and not yet being released */
    unsigned grants;
} lock_entry;

static lock_entry *locks;
static uint64_t next_owner = 1;

typedef struct conn {
    uv_tcp_t tcp;
    char line[MAX_LINE];
    size_t len;
    int refs;         /* requests in flight, and the handle until closed */
} conn;

typedef struct request {
    uv_timer_t hold;  /* the moment the lock is kept */
    conn *c;
    lock_entry *e;
    uint64_t owner;
} request;

static void check_finished(void)
{
    if (answered == TOTAL && served == TOTAL) {
        printf("uv_server: all %d requests answered and served in %llu ms\n", TOTAL,
               (unsigned long long)(uv_now(loop) - started_ms));
        uv_stop(loop);
    }
}

static void conn_unref(conn *c)
{
    if (--c->refs == 0)
        free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn_unref((conn *)h);
}

static lock_entry *entry_for(const char *name, int *rc)
{
    lock_entry *e;

    for (e = locks; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    if (!(e = calloc(1, sizeof(*e))) || !(e->name = strdup(name))) {
        free(e);
        *rc = REDLOCK_ENOMEM;
        return NULL;
    }
    if ((*rc = redlock_lock_new(rl, name, NULL, &e->lock)) != REDLOCK_OK) {
        free(e->name);
        free(e);
        return NULL;
    }
    e->next = locks;
    locks = e;
    return e;
}

static void on_request_closed(uv_handle_t *h)
{
    request *r = (request *)h;

    conn_unref(r->c);
    free(r);
}

/* The request is done with: answered, and released if it was granted. */
static void finish_request(request *r)
{
    served++;
    uv_close((uv_handle_t *)&r->hold, on_request_closed);
    check_finished();
}

static void on_unlocked(void *userdata, redlock_lock *lock, int rc, const char *message)
{
    request *r = userdata;

    (void)lock;
    if (rc == REDLOCK_OK) {
        released++;
    } else {
        release_failures++;
        fprintf(stderr, "uv_server: release %s: %s (%s)\n", r->e->name,
                redlock_err_name(rc), message);
    }
    finish_request(r);
}

static void on_hold_over(uv_timer_t *t)
{
    request *r = (request *)t;
    int rc;

    /* From here on another request may be granted the name. */
    r->e->holders--;
    rc = redlock_unlock_async(r->e->lock, r->owner, on_unlocked, r);
    if (rc != REDLOCK_OK) {
        release_failures++;
        fprintf(stderr, "uv_server: unlock_async: %s\n", redlock_last_error());
        finish_request(r);
    }
}

static void on_acquired(void *userdata, redlock_lock *lock, int rc, const char *message)
{
    request *r = userdata;
    const char *name = r->e->name;

    (void)lock; /* NULL if the handle was freed meanwhile (shutdown) */
    if (rc == REDLOCK_OK) {
        held++;
        if (++r->e->holders > 1) {
            overlaps++;
            fprintf(stderr, "uv_server: %s granted while held by another request\n", name);
        }
        send_line((uv_stream_t *)&r->c->tcp, "HELD %s %u\n", name, ++r->e->grants);
        uv_timer_start(&r->hold, on_hold_over, HOLD_MS, 0);
        return;
    }
    if (rc == REDLOCK_ETIMEOUT || rc == REDLOCK_EBUSY) {
        busy++;
        send_line((uv_stream_t *)&r->c->tcp, "BUSY %s\n", name);
    } else {
        errors++;
        fprintf(stderr, "uv_server: acquire %s: %s (%s)\n", name, redlock_err_name(rc), message);
        send_line((uv_stream_t *)&r->c->tcp, "ERR %s %s\n", name, redlock_err_name(rc));
    }
    finish_request(r);
}

static void serve(conn *c, const char *name)
{
    request *r;
    lock_entry *e;
    int rc = REDLOCK_OK;

    if (!(e = entry_for(name, &rc)) || !(r = calloc(1, sizeof(*r)))) {
        errors++;
        send_line((uv_stream_t *)&c->tcp, "ERR %s %s\n", name,
                  redlock_err_name(e ? REDLOCK_ENOMEM : rc));
        served++; /* answered: nothing more will happen for it */
        check_finished();
        return;
    }
    uv_timer_init(loop, &r->hold);
    r->hold.data = &request_tag;
    r->c = c;
    r->e = e;
    r->owner = next_owner++;
    c->refs++;
    rc = redlock_acquire_async(e->lock, r->owner, WAIT_MS, LEASE_MS, on_acquired, r);
    if (rc != REDLOCK_OK) {
        errors++;
        send_line((uv_stream_t *)&c->tcp, "ERR %s %s\n", name, redlock_err_name(rc));
        finish_request(r);
    }
}

/* Splits what arrived into lines; calls line_fn for each whole one. A line
 * longer than MAX_LINE is an error: returns -1. */
static int take_lines(char *acc, size_t *len, const char *data, size_t n, void *ctx,
                      void (*line_fn)(void *ctx, char *line))
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (data[i] != '\n') {
            if (*len + 1 >= MAX_LINE)
                return -1;
            acc[(*len)++] = data[i];
            continue;
        }
        if (*len > 0 && acc[*len - 1] == '\r')
            (*len)--;
        acc[*len] = '\0';
        *len = 0;
        line_fn(ctx, acc);
    }
    return 0;
}

static void server_line(void *ctx, char *line)
{
    conn *c = ctx;

    if (*line)
        serve(c, line);
    else
        send_line((uv_stream_t *)&c->tcp, "ERR - empty name\n");
}

static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    conn *c = (conn *)s;

    if (n > 0 && take_lines(c->line, &c->len, buf->base, (size_t)n, c, server_line) != 0) {
        send_line(s, "ERR - line too long\n");
        n = UV_EOF;
    }
    free(buf->base);
    /* EOF or an error: requests in flight keep c until they end. */
    if (n < 0 && !uv_is_closing((uv_handle_t *)s))
        uv_close((uv_handle_t *)s, on_conn_closed);
}

static void on_connection(uv_stream_t *srv, int status)
{
    conn *c;

    if (status < 0 || !(c = calloc(1, sizeof(*c))))
        return;
    uv_tcp_init(loop, &c->tcp);
    c->tcp.data = &conn_tag;
    c->refs = 1; /* the handle's, dropped by its close callback */
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, conn_read) != 0)
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* ------------------------------------------------------------------ */
/* The test clients. */

typedef struct tclient {
    uv_tcp_t tcp;
    uv_connect_t connect;
    int id, sent;
    char line[MAX_LINE];
    size_t len;
    char expect[64]; /* the name of the request in flight */
} tclient;

static void tclient_closed(uv_handle_t *h)
{
    free(h);
}

static void tclient_send(tclient *t)
{
    snprintf(t->expect, sizeof(t->expect), "example:uv_server:%d", (t->id + t->sent) % NAMES);
    t->sent++;
    send_line((uv_stream_t *)&t->tcp, "%s\n", t->expect);
}

static void tclient_line(void *ctx, char *line)
{
    tclient *t = ctx;
    size_t n = strlen(t->expect);

    answered++;
    if (strncmp(line, "HELD ", 5) == 0 && strncmp(line + 5, t->expect, n) == 0 &&
        line[5 + n] == ' ') {
        answered_held++;
    } else {
        bad_answers++;
        fprintf(stderr, "uv_server: client %d asked for %s, got \"%s\"\n", t->id, t->expect,
                line);
    }
    if (t->sent < REQUESTS)
        tclient_send(t);
    else
        uv_close((uv_handle_t *)&t->tcp, tclient_closed);
    check_finished();
}

static void tclient_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    tclient *t = (tclient *)s;

    if (n > 0 && take_lines(t->line, &t->len, buf->base, (size_t)n, t, tclient_line) != 0)
        n = UV_EOF;
    free(buf->base);
    if (n < 0 && !uv_is_closing((uv_handle_t *)s)) {
        client_failures++;
        fprintf(stderr, "uv_server: client %d: connection ended early: %s\n", t->id,
                uv_strerror((int)n));
        uv_close((uv_handle_t *)s, tclient_closed);
    }
}

static void tclient_connected(uv_connect_t *req, int status)
{
    tclient *t = req->data;

    if (status < 0 || uv_read_start((uv_stream_t *)&t->tcp, alloc_cb, tclient_read) != 0) {
        client_failures++;
        fprintf(stderr, "uv_server: client %d: connect: %s\n", t->id, uv_strerror(status));
        uv_close((uv_handle_t *)&t->tcp, tclient_closed);
        return;
    }
    tclient_send(t);
}

static int start_clients(const struct sockaddr_in *addr)
{
    int i;

    for (i = 0; i < CLIENTS; i++) {
        tclient *t = calloc(1, sizeof(*t));

        if (!t)
            return -1;
        t->id = i;
        uv_tcp_init(loop, &t->tcp);
        t->tcp.data = &tclient_tag;
        t->connect.data = t;
        if (uv_tcp_connect(&t->connect, &t->tcp, (const struct sockaddr *)addr,
                           tclient_connected) != 0) {
            uv_close((uv_handle_t *)&t->tcp, tclient_closed);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */

static void on_deadline(uv_timer_t *t)
{
    (void)t;
    timed_out = 1;
    fprintf(stderr, "uv_server: deadline of %d ms reached (%d of %d answered, %d served)\n",
            DEADLINE_MS, answered, TOTAL, served);
    uv_stop(loop);
}

/* Closes what is still open once the loop stopped. */
static void sweep(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (uv_is_closing(h))
        return;
    if (h->data == &conn_tag)
        uv_close(h, on_conn_closed);
    else if (h->data == &tclient_tag)
        uv_close(h, tclient_closed);
    else if (h->data == &request_tag)
        uv_close(h, on_request_closed); /* only after the deadline */
    else
        uv_close(h, NULL); /* the listener and the deadline: static */
}

int main(int argc, char **argv)
{
    uv_loop_t uvloop;
    redlock_options opts = {0};
    redlock_libuv *ad = NULL;
    struct sockaddr_in addr;
    int namelen = sizeof(addr), rc, ok;
    lock_entry *e;

    opts.event_loop = 1;
    if (example_client(argc, argv, &opts, &rl) != REDLOCK_OK)
        return 2;
    loop = &uvloop;
    if (uv_loop_init(loop) != 0) {
        redlock_client_free(rl);
        return 2;
    }
    if (redlock_libuv_attach(rl, loop, &ad) != REDLOCK_OK) {
        fprintf(stderr, "uv_server: attach: %s\n", redlock_last_error());
        redlock_client_free(rl);
        uv_loop_close(loop);
        return 2;
    }

    uv_tcp_init(loop, &server);
    uv_ip4_addr("127.0.0.1", 0, &addr);
    if ((rc = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&server, 128, on_connection)) != 0 ||
        (rc = uv_tcp_getsockname(&server, (struct sockaddr *)&addr, &namelen)) != 0) {
        fprintf(stderr, "uv_server: listen: %s\n", uv_strerror(rc));
        client_failures++;
    } else {
        printf("uv_server: listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
        fflush(stdout);
        uv_timer_init(loop, &deadline);
        uv_timer_start(&deadline, on_deadline, DEADLINE_MS, 0);
        started_ms = uv_now(loop);
        if (start_clients(&addr) != 0)
            client_failures++;
        else
            uv_run(loop, UV_RUN_DEFAULT);
    }

    /* Every operation has ended (or, after the deadline, is canceled by
     * freeing its handle, and ends inside redlock_client_free(), whose
     * done callbacks still use the entries); the client goes, then the
     * adapter. */
    for (e = locks; e; e = e->next)
        redlock_lock_free(e->lock);
    redlock_client_free(rl);
    redlock_libuv_detach(ad);
    while ((e = locks) != NULL) {
        locks = e->next;
        free(e->name);
        free(e);
    }
    uv_walk(loop, sweep, NULL);
    uv_run(loop, UV_RUN_DEFAULT); /* the close callbacks */
    if (uv_loop_close(loop) != 0)
        fprintf(stderr, "uv_server: handles left open on the loop\n");

    printf("uv_server: %d of %d requests HELD (%d clients, %d names), %d released, "
           "%d busy, %d errors, %d overlaps, %d bad answers\n",
           answered_held, TOTAL, CLIENTS, NAMES, released, busy, errors, overlaps,
           bad_answers);
    ok = !timed_out && answered_held == TOTAL && held == TOTAL && released == TOTAL &&
         !overlaps && !bad_answers && !client_failures && !release_failures;
    return ok ? 0 : 1;
}
