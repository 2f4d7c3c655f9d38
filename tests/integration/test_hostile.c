/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The library against a hostile server: a small RESP server running in a
 * thread of the test process, on a port the kernel picks, that answers every
 * command in one chosen bad way (wrong reply types, negative or huge lengths,
 * truncated or corrupt replies, server errors, NOSCRIPT forever, silence,
 * closing mid-reply). For each behaviour every public call must return an
 * error code with a fresh message in redlock_last_error(), within its
 * deadline plus a generous margin, and must neither crash nor leak (the
 * suite also runs under ASan/UBSan and valgrind).
 *
 * A "cooperative" mode answers each script the way a healthy node would, so
 * the same server can also play a good member of a quorum, or grant a lock
 * and then turn hostile while the watchdog renews it.
 *
 * No rig is needed; the fixture's environment is simply ignored.
 */
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lock/hold.h"
#include "lock/internal.h"
#include "lock/watchdog.h"
#include "redlock/redlock.h"
#include "resp/script.h"
#include "resp/scripts.h"
#include "rig_env.h"

/* Client timeouts used throughout, and the slack every time bound gets: the
 * machine is shared and the suite runs under sanitizers. Under valgrind
 * (scripts/memcheck) everything, the in-process server included, runs many
 * times slower: REDLOCK_TEST_TIME_SCALE=N stretches every duration N-fold. */
static int time_scale = 1;
#define CONNECT_MS (500 * time_scale)
#define NODE_MS (200 * time_scale)
#define WATCHDOG_LEASE_MS (1500 * time_scale)
#define MARGIN_MS (4000 * time_scale)
/* The longest any single non-waiting call may take: connecting, one
 * request, and the undo or background hand-off that may follow. */
#define CALL_BOUND_MS (2 * CONNECT_MS + 2 * NODE_MS + MARGIN_MS)

/* ------------------------------------------------------------------------ */
/* The hostile server. */

typedef enum hmode {
    H_COOPERATIVE = 0, /* answers each script like a healthy node */
    H_STATUS,          /* +OK to everything */
    H_BULK,            /* a bulk string */
    H_ARRAY,           /* an array of three strings */
    H_NEG_INT,         /* :-7 */
    H_NEG_BULK,        /* $-5: a negative length other than nil */
    H_NEG_ARRAY,       /* *-9 */
    H_BAD_INT,         /* :abc */
    H_HUGE_BULK,       /* $2147483647 then a few bytes, and nothing more */
    H_HUGE_ARRAY,      /* *2000000000: an element table of gigabytes */
    H_TRUNCATED,       /* half an array, then silence */
    H_CLOSE_MID,       /* half an array, then close */
    H_CLOSE_ON_ACCEPT, /* accepts, closes at once */
    H_SILENT,          /* reads, never answers */
    H_GARBAGE,         /* bytes that are not RESP */
    H_ERR,             /* -ERR */
    H_LOADING,         /* -LOADING */
    H_READONLY,        /* -READONLY */
    H_OOM,             /* -OOM */
    H_NOSCRIPT,        /* -NOSCRIPT to EVALSHA and EVAL alike */
    H_WRONGPASS,       /* -WRONGPASS */
    H_NOAUTH,          /* -NOAUTH */
    H_DOUBLE_ERR,      /* two error replies per command: out of step */
    H_ENDLESS_BULK,    /* $1000000000 then data as fast as it goes */
    H_DRIP,            /* the cooperative reply, one byte per 100 ms */
    H_PUSH,            /* a RESP3 push frame (">3") instead of a reply */
    H_PUSH_FIRST,      /* a RESP3 push frame, then the cooperative reply */
    H_MOVED,           /* -MOVED: a cluster node that does not own the slot */
    H_ASK,             /* -ASK */
    H_CROSSSLOT,       /* -CROSSSLOT */
    H_BUSY,            /* -BUSY: a script runs too long (not a held lock) */
    H_MASTERDOWN,      /* -MASTERDOWN */
    H_TRYAGAIN,        /* -TRYAGAIN */
    H_DB_RANGE,        /* -ERR DB index is out of range (for SELECT) */
    H_MUTE,            /* accepts, then never reads nor writes */
    H_MODE_COUNT
} hmode;

static const char *const mode_names[H_MODE_COUNT] = {
    "cooperative", "status",   "bulk",     "array",   "neg_int",  "neg_bulk",
    "neg_array",   "bad_int",  "huge_bulk", "huge_array", "truncated", "close_mid",
    "close_on_accept",
    "silent",      "garbage",  "err",      "loading", "readonly", "oom",
    "noscript",    "wrongpass", "noauth",  "double_err", "endless_bulk",
    "drip",        "push",     "push_first", "moved", "ask",     "crossslot",
    "busy",        "masterdown", "tryagain", "db_range", "mute",
};

#define MAX_CONNS 64

/* Output that could not go at once: a dripped reply, or flooded messages
 * the client has not read yet. Beyond this the connection is dropped. */
#define PEND_MAX (1 << 20)

typedef struct hconn {
    int fd;
    redisReader *reader;
    int mute;           /* never polled: accepted and left alone */
    char *pend;         /* output not yet sent, from pend_off on */
    size_t pend_len, pend_off;
    int64_t next_drip_ms;
    char chan[192];     /* the channel SUBSCRIBEd to, or "" */
} hconn;

typedef struct hostile {
    int lfd;
    int port;
    int wake[2];
    pthread_t thread;
    int stop;          /* atomics from here on */
    int mode;
    int auth_mode;     /* how AUTH is answered; -1: like everything else */
    int busy;          /* cooperative acquires answer "held, 5000 ms left" */
    int sub_silent;    /* cooperative SUBSCRIBEs are never confirmed */
    int select_mode;   /* how SELECT is answered; -1: like everything else */
    /* Release messages per second published on every subscribed channel
     * (0: none), counted from flood_start_ms; only the server thread
     * touches flood_start_ms and flood_owed. */
    int flood_per_s;
    int64_t flood_start_ms;
    unsigned long flood_owed;
    unsigned long commands, evalsha, eval, auth, select, subscribe, accepted, published;
    unsigned long token;
    hconn conns[MAX_CONNS];
} hostile;

static int load_int(const int *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static unsigned long load_ul(const unsigned long *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static void bump(unsigned long *p)
{
    __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST);
}

static void hostile_set_mode(hostile *h, hmode m)
{
    __atomic_store_n(&h->mode, (int)m, __ATOMIC_SEQ_CST);
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the client went away or is not reading: drop it */
        p += w;
        n -= (size_t)w;
    }
}

/* A bulk string that never ends, sent until the client hangs up (the
 * socket is blocking here) or 256 MiB went out, whichever comes first. */
static void send_endless_bulk(int fd)
{
    static char chunk[65536];
    size_t sent = 0;

    memset(chunk, 'z', sizeof(chunk));
    if (send(fd, "$1000000000\r\n", 14, MSG_NOSIGNAL) != 14)
        return;
    while (sent < ((size_t)256 << 20)) {
        ssize_t w = send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        sent += (size_t)w;
    }
}

static void send_str(int fd, const char *s)
{
    send_all(fd, s, strlen(s));
}

static void conn_drop(hconn *hc)
{
    if (hc->fd >= 0)
        close(hc->fd);
    if (hc->reader)
        redisReaderFree(hc->reader);
    free(hc->pend);
    memset(hc, 0, sizeof(*hc));
    hc->fd = -1;
}

/* Queues output behind what is pending; 0 if the backlog is too long (the
 * connection is then dropped). */
static int pend_append(hconn *hc, const char *p, size_t n)
{
    if (hc->pend_off > 0 && hc->pend_off == hc->pend_len)
        hc->pend_off = hc->pend_len = 0;
    if (hc->pend_len + n > PEND_MAX) {
        conn_drop(hc);
        return 0;
    }
    if (!hc->pend) {
        hc->pend = malloc(PEND_MAX);
        if (!hc->pend) {
            conn_drop(hc);
            return 0;
        }
    }
    memcpy(hc->pend + hc->pend_len, p, n);
    hc->pend_len += n;
    return 1;
}

/* Sends up to max bytes of the backlog without blocking. */
static void pend_flush(hconn *hc, size_t max)
{
    size_t n = hc->pend_len - hc->pend_off;
    ssize_t w;

    if (n == 0 || hc->fd < 0)
        return;
    if (n > max)
        n = max;
    w = send(hc->fd, hc->pend + hc->pend_off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0)
        hc->pend_off += (size_t)w;
    else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        conn_drop(hc);
}

/* Output of one answer: straight out, unless the server drips or a
 * backlog must keep its order. */
static void emit(hostile *h, hconn *hc, const char *p, size_t n)
{
    if (hc->fd < 0)
        return;
    if (load_int(&h->mode) == H_DRIP || hc->pend_len > hc->pend_off)
        pend_append(hc, p, n);
    else
        send_all(hc->fd, p, n);
}

static void emit_str(hostile *h, hconn *hc, const char *s)
{
    emit(h, hc, s, strlen(s));
}

/* The script a call names, by digest (EVALSHA) or body (EVAL); -1 if none. */
static int script_of(const redisReply *cmd, int by_body)
{
    const redisReply *a;
    int i;

    if (cmd->elements < 2 || cmd->element[1]->type != REDIS_REPLY_STRING)
        return -1;
    a = cmd->element[1];
    for (i = 0; i < REDLOCK__SCRIPT_COUNT; i++) {
        const redlock__script *s = &redlock__scripts[i];

        if (by_body ? (a->len == s->len && memcmp(a->str, s->body, s->len) == 0)
                    : strcasecmp(a->str, s->sha1) == 0)
            return i;
    }
    return -1;
}

/* What a healthy node would answer (enough to grant, renew and release). */
static void answer_cooperatively(hostile *h, hconn *hc, const redisReply *cmd, const char *name)
{
    char buf[256];

    if (strcasecmp(name, "SUBSCRIBE") == 0 && load_int(&h->sub_silent))
        return;
    if (strcasecmp(name, "SUBSCRIBE") == 0 || strcasecmp(name, "UNSUBSCRIBE") == 0) {
        const redisReply *ch = cmd->elements > 1 ? cmd->element[1] : NULL;

        if (!ch || ch->type != REDIS_REPLY_STRING) {
            emit_str(h, hc, "-ERR wrong number of arguments\r\n");
            return;
        }
        /* One channel per connection is all the flood needs. */
        if (strcasecmp(name, "SUBSCRIBE") == 0 && ch->len < sizeof(hc->chan))
            snprintf(hc->chan, sizeof(hc->chan), "%s", ch->str);
        else if (strcmp(hc->chan, ch->str) == 0)
            hc->chan[0] = '\0';
        snprintf(buf, sizeof(buf), "*3\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(name), name, ch->len);
        for (char *p = buf; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        emit_str(h, hc, buf);
        emit(h, hc, ch->str, ch->len);
        emit_str(h, hc, "\r\n:1\r\n");
        return;
    }
    if (strcasecmp(name, "EVALSHA") != 0 && strcasecmp(name, "EVAL") != 0) {
        emit_str(h, hc, "+OK\r\n");
        return;
    }
    switch (script_of(cmd, strcasecmp(name, "EVAL") == 0)) {
    case REDLOCK__SCRIPT_ACQUIRE:
        if (load_int(&h->busy)) {
            emit_str(h, hc, ":5000\r\n");
            break;
        }
        /* The optional key means a fencing acquire: a fresh token each time. */
        if (cmd->elements > 2 && cmd->element[2]->type == REDIS_REPLY_STRING &&
            atoi(cmd->element[2]->str) >
                redlock__script_shapes[REDLOCK__SCRIPT_ACQUIRE].nkeys) {
            snprintf(buf, sizeof(buf), "*1\r\n:%lu\r\n",
                     __atomic_add_fetch(&h->token, 1, __ATOMIC_SEQ_CST));
            emit_str(h, hc, buf);
        } else {
            emit_str(h, hc, "$-1\r\n");
        }
        break;
    case REDLOCK__SCRIPT_ABORT:
        emit_str(h, hc, ":0\r\n");
        break;
    case REDLOCK__SCRIPT_INSPECT:
        emit_str(h, hc, "*2\r\n:-2\r\n$1\r\n0\r\n");
        break;
    case REDLOCK__SCRIPT_RENEW:
    case REDLOCK__SCRIPT_RELEASE:
    case REDLOCK__SCRIPT_FORCE_RELEASE:
    case REDLOCK__SCRIPT_FENCE_STORE:
    case REDLOCK__SCRIPT_FENCED_SET:
        emit_str(h, hc, ":1\r\n");
        break;
    default:
        emit_str(h, hc, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
        break;
    }
}

/* A RESP3 push frame, as Redis 6 sends a pub/sub message to a client that
 * said HELLO 3; hiredis 0.14 knows no '>' type. */
#define PUSH_FRAME ">3\r\n$7\r\nmessage\r\n$7\r\nhostile\r\n$1\r\n0\r\n"

/* Answers one command; returns 0 if the connection was closed. */
static int answer(hostile *h, hconn *hc, const redisReply *cmd)
{
    const char *name = "";
    int mode = load_int(&h->mode);

    if (cmd->type == REDIS_REPLY_ARRAY && cmd->elements > 0 &&
        cmd->element[0]->type == REDIS_REPLY_STRING)
        name = cmd->element[0]->str;
    bump(&h->commands);
    if (strcasecmp(name, "EVALSHA") == 0)
        bump(&h->evalsha);
    else if (strcasecmp(name, "EVAL") == 0)
        bump(&h->eval);
    else if (strcasecmp(name, "SUBSCRIBE") == 0)
        bump(&h->subscribe);
    else if (strcasecmp(name, "SELECT") == 0) {
        bump(&h->select);
        if (load_int(&h->select_mode) >= 0)
            mode = load_int(&h->select_mode);
    } else if (strcasecmp(name, "AUTH") == 0) {
        bump(&h->auth);
        if (load_int(&h->auth_mode) >= 0)
            mode = load_int(&h->auth_mode);
    }

    switch ((hmode)mode) {
    case H_COOPERATIVE:
    case H_DRIP:
        answer_cooperatively(h, hc, cmd, name);
        break;
    case H_PUSH:
        send_str(hc->fd, PUSH_FRAME);
        break;
    case H_PUSH_FIRST:
        send_str(hc->fd, PUSH_FRAME);
        answer_cooperatively(h, hc, cmd, name);
        break;
    case H_MOVED:
        send_str(hc->fd, "-MOVED 3999 127.0.0.1:6381\r\n");
        break;
    case H_ASK:
        send_str(hc->fd, "-ASK 3999 127.0.0.1:6381\r\n");
        break;
    case H_CROSSSLOT:
        send_str(hc->fd, "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
        break;
    case H_BUSY:
        send_str(hc->fd, "-BUSY Redis is busy running a script. You can only call "
                         "SCRIPT KILL or SHUTDOWN NOSCRIPT.\r\n");
        break;
    case H_MASTERDOWN:
        send_str(hc->fd, "-MASTERDOWN Link with MASTER is down and "
                         "replica-serve-stale-data is set to 'no'.\r\n");
        break;
    case H_TRYAGAIN:
        send_str(hc->fd, "-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
        break;
    case H_DB_RANGE:
        send_str(hc->fd, "-ERR DB index is out of range\r\n");
        break;
    case H_STATUS:
        send_str(hc->fd, "+OK\r\n");
        break;
    case H_BULK:
        send_str(hc->fd, "$7\r\nhostile\r\n");
        break;
    case H_ARRAY:
        send_str(hc->fd, "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
        break;
    case H_NEG_INT:
        send_str(hc->fd, ":-7\r\n");
        break;
    case H_NEG_BULK:
        send_str(hc->fd, "$-5\r\n");
        break;
    case H_NEG_ARRAY:
        send_str(hc->fd, "*-9\r\n");
        break;
    case H_BAD_INT:
        send_str(hc->fd, ":abc\r\n");
        break;
    case H_HUGE_BULK:
        send_str(hc->fd, "$2147483647\r\nnot nearly enough");
        break;
    case H_HUGE_ARRAY:
        send_str(hc->fd, "*2000000000\r\n:1\r\n");
        break;
    case H_TRUNCATED:
        send_str(hc->fd, "*3\r\n$1\r\na\r\n$5\r\nab");
        break;
    case H_CLOSE_MID:
        send_str(hc->fd, "*3\r\n$1\r\na\r\n$5\r\nab");
        conn_drop(hc);
        return 0;
    case H_CLOSE_ON_ACCEPT:
        conn_drop(hc);
        return 0;
    case H_SILENT:
        break;
    case H_GARBAGE:
        send_all(hc->fd, "\x00\x01\xfe\xffgarbage\r\n", 13);
        break;
    case H_ERR:
        send_str(hc->fd, "-ERR hostile server says no\r\n");
        break;
    case H_LOADING:
        send_str(hc->fd, "-LOADING Redis is loading the dataset in memory\r\n");
        break;
    case H_READONLY:
        send_str(hc->fd, "-READONLY You can't write against a read only replica.\r\n");
        break;
    case H_OOM:
        send_str(hc->fd, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
        break;
    case H_NOSCRIPT:
        send_str(hc->fd, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
        break;
    case H_WRONGPASS:
        send_str(hc->fd, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
        break;
    case H_NOAUTH:
        send_str(hc->fd, "-NOAUTH Authentication required.\r\n");
        break;
    case H_DOUBLE_ERR:
        send_str(hc->fd, "-ERR first\r\n-ERR second\r\n");
        break;
    case H_ENDLESS_BULK:
        send_endless_bulk(hc->fd);
        break;
    default:
        break;
    }
    return 1;
}

static void serve_conn(hostile *h, hconn *hc)
{
    char buf[16384];
    ssize_t r = recv(hc->fd, buf, sizeof(buf), 0);
    void *cmd;

    if (r <= 0) {
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        conn_drop(hc);
        return;
    }
    if (redisReaderFeed(hc->reader, buf, (size_t)r) != REDIS_OK) {
        conn_drop(hc);
        return;
    }
    for (;;) {
        cmd = NULL;
        if (redisReaderGetReply(hc->reader, &cmd) != REDIS_OK) {
            conn_drop(hc);
            return;
        }
        if (!cmd)
            return;
        if (!answer(h, hc, cmd)) {
            freeReplyObject(cmd);
            return;
        }
        freeReplyObject(cmd);
    }
}

static void accept_conn(hostile *h)
{
    int fd = accept(h->lfd, NULL, NULL);
    size_t i;

    if (fd < 0)
        return;
    bump(&h->accepted);
    if (load_int(&h->mode) == H_CLOSE_ON_ACCEPT) {
        close(fd);
        return;
    }
    for (i = 0; i < MAX_CONNS; i++) {
        if (h->conns[i].fd < 0) {
            h->conns[i].fd = fd;
            /* A mute connection is kept open but never polled, so its
             * peer's bytes (a TLS ClientHello, say) sit unread. */
            h->conns[i].mute = load_int(&h->mode) == H_MUTE;
            h->conns[i].reader = redisReaderCreate();
            if (!h->conns[i].reader)
                conn_drop(&h->conns[i]);
            return;
        }
    }
    close(fd); /* full: the client sees a closed connection */
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Publishes what the flood owes by now on every subscribed connection: a
 * release message as Redis sends it, the same bytes Redisson publishes. */
static void flood_tick(hostile *h, int64_t now)
{
    int rate = load_int(&h->flood_per_s);
    unsigned long due, n, k;
    char msg[320];
    size_t i;
    int len;

    if (rate <= 0) {
        h->flood_start_ms = 0;
        return;
    }
    if (h->flood_start_ms == 0) {
        h->flood_start_ms = now;
        h->flood_owed = 0;
    }
    due = (unsigned long)((now - h->flood_start_ms) * rate / 1000);
    n = due - h->flood_owed;
    h->flood_owed = due;
    if (n > (unsigned long)rate / 10)
        n = (unsigned long)rate / 10; /* the thread was late: no burst */
    for (i = 0; i < MAX_CONNS; i++) {
        hconn *hc = &h->conns[i];

        if (hc->fd < 0 || !hc->chan[0])
            continue;
        len = snprintf(msg, sizeof(msg), "*3\r\n$7\r\nmessage\r\n$%zu\r\n%s\r\n$1\r\n0\r\n",
                       strlen(hc->chan), hc->chan);
        for (k = 0; k < n && hc->fd >= 0; k++)
            if (pend_append(hc, msg, (size_t)len))
                bump(&h->published);
    }
}

/* Sends pending output: one byte per 100 ms when dripping, otherwise as
 * much as the socket takes. Returns how soon it wants to run again. */
static int output_tick(hostile *h, int64_t now)
{
    int drip = load_int(&h->mode) == H_DRIP, wait = 100;
    size_t i;

    for (i = 0; i < MAX_CONNS; i++) {
        hconn *hc = &h->conns[i];

        if (hc->fd < 0 || hc->pend_len == hc->pend_off)
            continue;
        if (!drip) {
            pend_flush(hc, (size_t)-1);
            wait = 5;
        } else if (now >= hc->next_drip_ms) {
            pend_flush(hc, 1);
            hc->next_drip_ms = now + 100 * time_scale;
        } else if (hc->next_drip_ms - now < wait) {
            wait = (int)(hc->next_drip_ms - now);
        }
    }
    return wait;
}

static void *hostile_main(void *arg)
{
    hostile *h = arg;
    struct pollfd pfd[MAX_CONNS + 2];
    size_t idx[MAX_CONNS + 2];
    int wait = 100;

    while (!load_int(&h->stop)) {
        size_t n = 2, i;
        int r;

        pfd[0] = (struct pollfd){h->wake[0], POLLIN, 0};
        pfd[1] = (struct pollfd){h->lfd, POLLIN, 0};
        for (i = 0; i < MAX_CONNS; i++) {
            if (h->conns[i].fd < 0 || h->conns[i].mute)
                continue;
            pfd[n] = (struct pollfd){h->conns[i].fd, POLLIN, 0};
            idx[n++] = i;
        }
        r = poll(pfd, n, load_int(&h->flood_per_s) > 0 && wait > 5 ? 5 : wait);
        if (r > 0) {
            if (pfd[1].revents)
                accept_conn(h);
            for (i = 2; i < n; i++)
                if (pfd[i].revents && h->conns[idx[i]].fd == pfd[i].fd)
                    serve_conn(h, &h->conns[idx[i]]);
        }
        flood_tick(h, mono_ms());
        wait = output_tick(h, mono_ms());
    }
    return NULL;
}

static hostile *hostile_start(hmode mode)
{
    hostile *h = calloc(1, sizeof(*h));
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int one = 1;
    size_t i;

    ck_assert_ptr_nonnull(h);
    for (i = 0; i < MAX_CONNS; i++)
        h->conns[i].fd = -1;
    h->mode = (int)mode;
    h->auth_mode = -1;
    h->select_mode = -1;
    ck_assert_int_eq(pipe(h->wake), 0);
    h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(h->lfd, 0);
    setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0; /* the kernel picks a free ephemeral port */
    ck_assert_int_eq(bind(h->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(h->lfd, 64), 0);
    ck_assert_int_eq(getsockname(h->lfd, (struct sockaddr *)&sa, &len), 0);
    h->port = ntohs(sa.sin_port);
    ck_assert_msg(h->port < 7001 || h->port > 7005, "port %d belongs to the demo rig", h->port);
    ck_assert_int_eq(pthread_create(&h->thread, NULL, hostile_main, h), 0);
    return h;
}

static void hostile_stop(hostile *h)
{
    size_t i;
    char c = 1;

    __atomic_store_n(&h->stop, 1, __ATOMIC_SEQ_CST);
    if (write(h->wake[1], &c, 1) < 0) {
        /* poll() times out within 100 ms anyway */
    }
    pthread_join(h->thread, NULL);
    for (i = 0; i < MAX_CONNS; i++)
        conn_drop(&h->conns[i]);
    close(h->lfd);
    close(h->wake[0]);
    close(h->wake[1]);
    free(h);
}

static const char *hostile_uri(const hostile *h)
{
    static char buf[4][64];
    static int k;

    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "redis://127.0.0.1:%d", h->port);
    return buf[k];
}

/* ------------------------------------------------------------------------ */
/* Helpers. */

static redlock_options test_options(void)
{
    redlock_options o;

    memset(&o, 0, sizeof(o));
    o.connect_timeout_ms = CONNECT_MS;
    o.node_timeout_ms = NODE_MS;
    o.watchdog_lease_ms = WATCHDOG_LEASE_MS;
    o.retry_delay_ms = 20;
    return o;
}

static redlock_client *client_of(hostile *const *hs, size_t n, const redlock_options *o)
{
    const char *uris[8];
    redlock_client *c = NULL;
    size_t i;
    int rc;

    for (i = 0; i < n; i++)
        uris[i] = hostile_uri(hs[i]);
    rc = redlock_client_new(&c, uris, n, o);
    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    return c;
}

/* Leaves a known message behind, so a call that fails without saying why
 * cannot pass on an older message. */
#define STALE_MESSAGE "member index out of range"
static void plant_stale_message(void)
{
    redlock_member_report r;

    ck_assert_int_eq(redlock_lock_report(NULL, 0, &r), REDLOCK_EINVAL);
    ck_assert_str_eq(redlock_last_error(), STALE_MESSAGE);
}

/* A failed call must leave a fresh, non-empty message. */
static void check_message(const char *what, int rc)
{
    const char *m = redlock_last_error();

    ck_assert_msg(rc >= 0 && rc < REDLOCK_ERR_COUNT_, "%s returned unknown code %d", what, rc);
    ck_assert_msg(m && *m && strcmp(m, "no error") != 0 && strcmp(m, STALE_MESSAGE) != 0,
                  "%s failed with %s but left no message of its own ('%s')", what,
                  redlock_err_name(rc), m ? m : "(null)");
}

#define TIMED(expr, took) \
    do {                  \
        int64_t t0_ = rig_now_ms(); \
        expr;             \
        (took) = rig_now_ms() - t0_; \
    } while (0)

#define CHECK_BOUND(what, took, bound) \
    ck_assert_msg((took) <= (bound), "%s took %lld ms, bound %lld ms", (what), \
                  (long long)(took), (long long)(bound))

/*
 * Memory stays bounded: the growth of the process's peak RSS over a case
 * (ru_maxrss, which the forked case starts with its parent's) stays under
 * a generous bound. A server that streams or floods must not make the
 * client buffer without limit; the in-process server's own backlog is
 * capped at PEND_MAX per connection.
 *
 * Under AddressSanitizer freed blocks are kept in a quarantine (256 MiB by
 * default) before reuse, so every reader buffer grown to max_reply_bytes
 * and dropped stays resident for a while: the RSS bound gets that much
 * more, and the live heap (which excludes the quarantine) is checked
 * instead, while the client still exists.
 */
#if defined(__SANITIZE_ADDRESS__)
#define HOSTILE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOSTILE_ASAN 1
#endif
#endif

#ifdef HOSTILE_ASAN
size_t __sanitizer_get_current_allocated_bytes(void); /* the ASan runtime's */
#define ASAN_QUARANTINE_KB (256L * 1024)
static long live_heap_kb(void)
{
    return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
}
#else
#define ASAN_QUARANTINE_KB 0L
static long live_heap_kb(void)
{
    return -1; /* not measurable; the RSS bound is tight enough */
}
#endif
static long peak_rss_kb(void)
{
    struct rusage ru;

    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

#define GROWTH_BOUND_KB (time_scale > 1 ? 256L * 1024 : 64L * 1024)
#define RSS_GROWTH_BOUND_KB (GROWTH_BOUND_KB + ASAN_QUARANTINE_KB)

static void check_rss_growth(const char *what, long start_kb)
{
    long grown = peak_rss_kb() - start_kb;

    ck_assert_msg(grown <= RSS_GROWTH_BOUND_KB, "%s: peak RSS grew by %ld KiB (bound %ld KiB)",
                  what, grown, RSS_GROWTH_BOUND_KB);
}

/* Where the live heap can be measured: what the case holds now, beyond
 * what it held at start_kb, stays under the bound. */
static void check_live_heap(const char *what, long start_kb)
{
    long now = live_heap_kb();

    if (now >= 0 && start_kb >= 0)
        ck_assert_msg(now - start_kb <= GROWTH_BOUND_KB,
                      "%s: live heap grew by %ld KiB (bound %ld KiB)", what, now - start_kb,
                      GROWTH_BOUND_KB);
}

/* CPU time (user + system) of the whole process, every thread included. */
static int64_t cpu_ms(void)
{
    struct rusage ru;

    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* Which member error codes a mode may produce. */
static int expected_code(hmode m)
{
    switch (m) {
    case H_STATUS: case H_BULK: case H_ARRAY: case H_NEG_INT: case H_NEG_BULK:
    case H_NEG_ARRAY: case H_BAD_INT: case H_GARBAGE: case H_HUGE_ARRAY:
    case H_ENDLESS_BULK:
        return REDLOCK_EPROTO;
    case H_PUSH: case H_PUSH_FIRST:
        return REDLOCK_EPROTO;
    case H_HUGE_BULK: case H_TRUNCATED: case H_SILENT: case H_DRIP: case H_MUTE:
        return REDLOCK_ETIMEOUT;
    case H_CLOSE_MID: case H_CLOSE_ON_ACCEPT:
        return REDLOCK_EIO;
    case H_ERR: case H_NOSCRIPT: case H_DOUBLE_ERR:
    case H_MOVED: case H_ASK: case H_CROSSSLOT: case H_BUSY: case H_MASTERDOWN:
    case H_TRYAGAIN:
        return REDLOCK_ESERVER;
    case H_DB_RANGE:
        return REDLOCK_ECONFIG; /* only ever sent for SELECT */
    case H_LOADING:
        return REDLOCK_ELOADING;
    case H_READONLY:
        return REDLOCK_EREADONLY;
    case H_OOM:
        return REDLOCK_EOOM;
    case H_WRONGPASS: case H_NOAUTH:
        return REDLOCK_EAUTH;
    default:
        return -1;
    }
}

/*
 * Whether code is what mode m may produce. A truncated reply times out the
 * first request; the connection is then kept for the late remainder, which
 * never comes right, so later requests see a corrupt stream (EPROTO). Two
 * replies per command put the stream out of step: stale errors or EPROTO.
 */
static int code_fits(hmode m, int code)
{
    if ((m == H_TRUNCATED || m == H_DOUBLE_ERR) && code == REDLOCK_EPROTO)
        return 1;
    return code == expected_code(m);
}

/* The words a member's message must contain for each code. */
static const char *expected_words(hmode m)
{
    switch (m) {
    case H_LOADING: return "LOADING";
    case H_READONLY: return "READONLY";
    case H_OOM: return "OOM";
    case H_NOSCRIPT: return "NOSCRIPT";
    case H_ERR: return "hostile server";
    case H_WRONGPASS: return "WRONGPASS";
    case H_NOAUTH: return "NOAUTH";
    case H_HUGE_ARRAY: return "elements refused";
    case H_ENDLESS_BULK: return "reply data over";
    case H_PUSH: case H_PUSH_FIRST: return "got \">\"";
    /* Cluster and script errors: the server's own words, not a guess. */
    case H_MOVED: return "MOVED 3999 127.0.0.1:6381";
    case H_ASK: return "ASK 3999 127.0.0.1:6381";
    case H_CROSSSLOT: return "CROSSSLOT Keys in request don't hash";
    case H_BUSY: return "BUSY Redis is busy running a script";
    case H_MASTERDOWN: return "MASTERDOWN Link with MASTER is down";
    case H_TRYAGAIN: return "TRYAGAIN Multiple keys request";
    case H_DB_RANGE: return "DB index is out of range";
    default: return "";
    }
}

/* ------------------------------------------------------------------------ */
/* Every call against every hostile behaviour. */

/* Behaviours a single node can show for every command. */
static const hmode every_call_modes[] = {
    H_STATUS, H_BULK, H_ARRAY, H_NEG_INT, H_NEG_BULK, H_NEG_ARRAY, H_BAD_INT,
    H_HUGE_BULK, H_HUGE_ARRAY, H_TRUNCATED, H_CLOSE_MID, H_CLOSE_ON_ACCEPT, H_SILENT,
    H_GARBAGE, H_ERR, H_LOADING, H_READONLY, H_OOM, H_NOSCRIPT, H_DOUBLE_ERR, H_ENDLESS_BULK,
    H_DRIP, H_PUSH, H_PUSH_FIRST, H_MOVED, H_ASK, H_CROSSSLOT, H_BUSY, H_MASTERDOWN,
    H_TRYAGAIN,
};
#define N_EVERY_CALL_MODES (sizeof(every_call_modes) / sizeof(every_call_modes[0]))

static void check_member_report(redlock_lock *l, hmode m, const char *what)
{
    redlock_member_report rep;
    int want = expected_code(m);

    ck_assert_int_eq(redlock_lock_report(l, 0, &rep), REDLOCK_OK);
    ck_assert_msg(rep.outcome == (rep.err == REDLOCK_ETIMEOUT ? REDLOCK_MEMBER_TIMEOUT
                                                               : REDLOCK_MEMBER_ERROR),
                  "%s/%s: member outcome %d", mode_names[m], what, rep.outcome);
    ck_assert_msg(code_fits(m, rep.err), "%s/%s: member error %s, want %s (%s)", mode_names[m],
                  what, redlock_err_name(rep.err), redlock_err_name(want), rep.message);
    ck_assert_msg(rep.message[0] != '\0', "%s/%s: member report without a message",
                  mode_names[m], what);
    ck_assert_msg(strstr(rep.message, expected_words(m)) != NULL,
                  "%s/%s: member message '%s' lacks '%s'", mode_names[m], what, rep.message,
                  expected_words(m));
}

START_TEST(test_every_call_fails_cleanly)
{
    hmode m = every_call_modes[_i];
    hostile *h = hostile_start(m);
    redlock_options o = test_options();
    redlock_client *c = client_of(&h, 1, &o);
    redlock_lock *l = NULL, *fl = NULL;
    redlock_lock_options fo = {.fencing = 1};
    redlock_member_state st;
    int64_t took, ttl = 0;
    size_t released = 99;
    int rc, flag = -1, count = -1;
    const char *mn = mode_names[m];
    long rss0 = peak_rss_kb(), heap0 = live_heap_kb();

    /* No I/O happens here: a bad server cannot make these fail. */
    ck_assert_int_eq(redlock_lock_new(c, "hostile", NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:fenced", &fo, &fl), REDLOCK_OK);

    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(l, 0, 1000 * time_scale), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: try_lock: %s (%s)", mn, redlock_err_name(rc),
                  redlock_last_error());
    check_message("try_lock", rc);
    CHECK_BOUND("try_lock", took, CALL_BOUND_MS);
    check_member_report(l, m, "try_lock");
    if (expected_words(m)[0])
        ck_assert_msg(strstr(redlock_last_error(), expected_words(m)),
                      "%s: try_lock message '%s' does not say why", mn, redlock_last_error());

    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(l, 300, 1000 * time_scale), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: try_lock_for: %s (%s)", mn,
                  redlock_err_name(rc), redlock_last_error());
    check_message("try_lock_for", rc);
    CHECK_BOUND("try_lock_for", took, 300 + CALL_BOUND_MS);

    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(fl, 0, 1000 * time_scale), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: fenced try_lock: %s (%s)", mn,
                  redlock_err_name(rc), redlock_last_error());
    check_message("fenced try_lock", rc);
    CHECK_BOUND("fenced try_lock", took, CALL_BOUND_MS);
    check_member_report(fl, m, "fenced try_lock");

    plant_stale_message();
    TIMED(rc = redlock_unlock(l), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: unlock: %s (%s)", mn, redlock_err_name(rc),
                  redlock_last_error());
    check_message("unlock", rc);
    CHECK_BOUND("unlock", took, CALL_BOUND_MS);
    check_member_report(l, m, "unlock");

    plant_stale_message();
    TIMED(rc = redlock_is_locked(l, &flag), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: is_locked: %s (%s)", mn, redlock_err_name(rc),
                  redlock_last_error());
    check_message("is_locked", rc);
    CHECK_BOUND("is_locked", took, CALL_BOUND_MS);
    ck_assert_int_eq(flag, -1); /* untouched on failure */

    plant_stale_message();
    TIMED(rc = redlock_is_held_by_current_thread(l, &flag), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: is_held: %s", mn, redlock_err_name(rc));
    check_message("is_held", rc);
    CHECK_BOUND("is_held", took, CALL_BOUND_MS);

    plant_stale_message();
    TIMED(rc = redlock_hold_count(l, &count), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: hold_count: %s", mn, redlock_err_name(rc));
    check_message("hold_count", rc);
    CHECK_BOUND("hold_count", took, CALL_BOUND_MS);

    plant_stale_message();
    TIMED(rc = redlock_remaining_ttl(l, &ttl), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: remaining_ttl: %s", mn, redlock_err_name(rc));
    check_message("remaining_ttl", rc);
    CHECK_BOUND("remaining_ttl", took, CALL_BOUND_MS);
    if (expected_words(m)[0])
        ck_assert_msg(strstr(redlock_last_error(), expected_words(m)),
                      "%s: remaining_ttl message '%s' does not say why", mn,
                      redlock_last_error());

    /* Inspection reports an unreachable member in the state, not as a
     * failure of the call. */
    TIMED(rc = redlock_lock_inspect(l, 0, &st), took);
    ck_assert_int_eq(rc, REDLOCK_OK);
    CHECK_BOUND("inspect", took, CALL_BOUND_MS);
    ck_assert_msg(!st.reachable, "%s: inspect says reachable", mn);
    ck_assert_msg(code_fits(m, st.err), "%s: inspect err %s (%s)", mn,
                  redlock_err_name(st.err), st.message);
    ck_assert_msg(st.message[0] != '\0', "%s: inspect state without a message", mn);

    plant_stale_message();
    TIMED(rc = redlock_force_unlock(l, &released), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "%s: force_unlock: %s", mn, redlock_err_name(rc));
    check_message("force_unlock", rc);
    CHECK_BOUND("force_unlock", took, CALL_BOUND_MS);
    ck_assert_uint_eq(released, 0);

    /* fenced_set talks to one node and returns that node's error as is. */
    plant_stale_message();
    TIMED(rc = redlock_fenced_set(c, 0, "hostile:resource", "v", 1, 7), took);
    ck_assert_msg(code_fits(m, rc), "%s: fenced_set: %s, want %s (%s)", mn,
                  redlock_err_name(rc), redlock_err_name(expected_code(m)),
                  redlock_last_error());
    check_message("fenced_set", rc);
    CHECK_BOUND("fenced_set", took, CALL_BOUND_MS);
    ck_assert_msg(strstr(redlock_last_error(), expected_words(m)),
                  "%s: fenced_set message '%s' lacks '%s'", mn, redlock_last_error(),
                  expected_words(m));

    check_live_heap(mn, heap0);
    redlock_lock_free(fl);
    redlock_lock_free(l);
    TIMED(redlock_client_free(c), took);
    CHECK_BOUND("client_free", took, CALL_BOUND_MS);
    hostile_stop(h);
    check_rss_growth(mn, rss0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* NOSCRIPT forever: EVALSHA falls back to EVAL once per request, then the
 * error is reported; no request loops. */

START_TEST(test_noscript_forever_is_bounded)
{
    hostile *h = hostile_start(H_NOSCRIPT);
    redlock_options o = test_options();
    redlock_client *c;
    redlock_lock *l = NULL;
    redlock_member_report rep;
    int rc;

    o.disable_pubsub = 1; /* count only lock requests */
    c = client_of(&h, 1, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:noscript", NULL, &l), REDLOCK_OK);
    rc = redlock_try_lock(l);
    ck_assert_int_eq(rc, REDLOCK_ENO_QUORUM);
    ck_assert_int_eq(redlock_lock_report(l, 0, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.err, REDLOCK_ESERVER);
    ck_assert_msg(strstr(rep.message, "NOSCRIPT"), "report '%s'", rep.message);
    /* The acquire and its undo: each once by digest, once with the body. */
    ck_assert_uint_eq(load_ul(&h->evalsha), 2);
    ck_assert_uint_eq(load_ul(&h->eval), 2);

    rc = redlock_fenced_set(c, 0, "hostile:noscript:res", "v", 1, 1);
    ck_assert_int_eq(rc, REDLOCK_ESERVER);
    ck_assert_uint_eq(load_ul(&h->evalsha), 3);
    ck_assert_uint_eq(load_ul(&h->eval), 3);

    redlock_lock_free(l);
    redlock_client_free(c);
    hostile_stop(h);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A subscriber connection that never confirms SUBSCRIBE is given up on
 * after the connect timeout and opened again with back-off; it used to
 * stay stuck for the client's lifetime, leaving every waiter on TTL
 * polling without anyone noticing. */

START_TEST(test_unconfirmed_subscribe_reconnects)
{
    hostile *h = hostile_start(H_COOPERATIVE);
    redlock_options o = test_options();
    redlock_client *c;
    redlock_lock *l = NULL;
    int64_t took;
    int rc;

    __atomic_store_n(&h->busy, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->sub_silent, 1, __ATOMIC_SEQ_CST);
    o.connect_timeout_ms = 300;
    c = client_of(&h, 1, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:subscribe", NULL, &l), REDLOCK_OK);
    TIMED(rc = redlock_try_lock_for(l, 2500, 10000), took);
    ck_assert_int_eq(rc, REDLOCK_ETIMEOUT);
    CHECK_BOUND("try_lock_for", took, 2500 + CALL_BOUND_MS);
    fprintf(stderr, "unconfirmed SUBSCRIBE: %lu subscriptions asked in %lld ms\n",
            load_ul(&h->subscribe), (long long)took);
    ck_assert_uint_ge(load_ul(&h->subscribe), 3);
    redlock_lock_free(l);
    redlock_client_free(c);
    hostile_stop(h);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A hostile answer to AUTH, pipelined ahead of the first command. */

static const hmode auth_modes[] = {
    H_WRONGPASS, H_NOAUTH, H_LOADING, H_GARBAGE, H_NEG_BULK, H_SILENT, H_CLOSE_MID,
};

START_TEST(test_hostile_auth_reply)
{
    hmode m = auth_modes[_i];
    hostile *h = hostile_start(H_COOPERATIVE);
    redlock_options o = test_options();
    redlock_client *c;
    redlock_lock *l = NULL;
    redlock_member_report rep;
    int64_t took;
    int rc;

    __atomic_store_n(&h->auth_mode, (int)m, __ATOMIC_SEQ_CST);
    o.username = "redlock";
    o.password = "not-the-password";
    c = client_of(&h, 1, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:auth", NULL, &l), REDLOCK_OK);
    plant_stale_message();
    TIMED(rc = redlock_try_lock(l), took);
    /* A refused password ends the acquire with its own code; the other
     * answers might pass on a retry, so they are "no quorum". */
    ck_assert_msg(rc == (m == H_WRONGPASS || m == H_NOAUTH ? REDLOCK_EAUTH : REDLOCK_ENO_QUORUM),
                  "%s: try_lock: %s", mode_names[m], redlock_err_name(rc));
    check_message("try_lock", rc);
    CHECK_BOUND("try_lock", took, CALL_BOUND_MS);
    ck_assert_uint_ge(load_ul(&h->auth), 1);
    ck_assert_int_eq(redlock_lock_report(l, 0, &rep), REDLOCK_OK);
    if (m == H_SILENT) {
        /* Silence during set-up is a timeout, whatever the phase. */
        ck_assert_int_eq(rep.err, REDLOCK_ETIMEOUT);
    } else {
        int want = m == H_GARBAGE || m == H_NEG_BULK ? REDLOCK_EPROTO
                   : m == H_CLOSE_MID                ? REDLOCK_EIO
                                                     : expected_code(m);

        ck_assert_msg(rep.err == want, "%s: member error %s, want %s (%s)", mode_names[m],
                      redlock_err_name(rep.err), redlock_err_name(want), rep.message);
        ck_assert_msg(strstr(rep.message, expected_words(m)), "%s: '%s'", mode_names[m],
                      rep.message);
    }
    /* Never mistaken for a grant: the lock stays unheld here. */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_ENO_QUORUM);
    redlock_lock_free(l);
    redlock_client_free(c);
    hostile_stop(h);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Drip-fed replies (one byte per 100 ms) are correct replies: with a node
 * timeout long enough for them the lock is granted and released, so the
 * ETIMEOUTs every_call_fails_cleanly expects come from the deadline being
 * kept while bytes still trickle in, not from a broken reply. */

START_TEST(test_drip_is_a_correct_reply)
{
    hostile *h = hostile_start(H_DRIP);
    redlock_options o = test_options();
    redlock_client *c;
    redlock_lock *l = NULL;
    redlock_member_report rep;
    int64_t took;
    int rc;

    o.disable_pubsub = 1;
    /* Four preloaded scripts' "+OK" (20 bytes), then the grant (5). */
    o.node_timeout_ms = 4000 * time_scale;
    o.connect_timeout_ms = 4000 * time_scale;
    c = client_of(&h, 1, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:drip", NULL, &l), REDLOCK_OK);
    TIMED(rc = redlock_try_lock_for(l, 0, 60000 * time_scale), took);
    ck_assert_msg(rc == REDLOCK_OK, "try_lock: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_msg(took >= 2000 * time_scale, "25 dripped bytes came in %lld ms",
                  (long long)took);
    TIMED(rc = redlock_unlock(l), took);
    ck_assert_msg(rc == REDLOCK_OK, "unlock: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    redlock_lock_free(l);
    redlock_client_free(c);

    /* With a short node timeout the same trickle ends the request at its
     * deadline, however many bytes are still on their way. */
    o = test_options();
    o.disable_pubsub = 1;
    c = client_of(&h, 1, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:drip", NULL, &l), REDLOCK_OK);
    plant_stale_message();
    TIMED(rc = redlock_try_lock(l), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "try_lock: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("try_lock", rc);
    ck_assert_int_eq(redlock_lock_report(l, 0, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.err, REDLOCK_ETIMEOUT);
    fprintf(stderr, "drip: try_lock with a %d ms node timeout ended after %lld ms\n", NODE_MS,
            (long long)took);
    CHECK_BOUND("try_lock", took, NODE_MS + MARGIN_MS);
    redlock_lock_free(l);
    redlock_client_free(c);
    hostile_stop(h);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* AUTH accepted, SELECT refused (a db the server does not have): a
 * configuration error that waiting cannot fix, so the acquire ends at once
 * with REDLOCK_ECONFIG, whatever it was willing to wait; and no lock
 * command ever runs in the wrong db. */

static redlock_client *client_with_db(hostile *const *hs, size_t n, const int *db,
                                      const redlock_options *o)
{
    char bufs[8][64];
    const char *uris[8];
    redlock_client *c = NULL;
    size_t i;
    int rc;

    for (i = 0; i < n; i++) {
        if (db[i])
            snprintf(bufs[i], sizeof(bufs[i]), "redis://127.0.0.1:%d/%d", hs[i]->port, db[i]);
        else
            snprintf(bufs[i], sizeof(bufs[i]), "redis://127.0.0.1:%d", hs[i]->port);
        uris[i] = bufs[i];
    }
    rc = redlock_client_new(&c, uris, n, o);
    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    return c;
}

static void check_config_refusal(redlock_lock *l, size_t member)
{
    redlock_member_report rep;

    ck_assert_int_eq(redlock_lock_report(l, member, &rep), REDLOCK_OK);
    ck_assert_msg(rep.err == REDLOCK_ECONFIG, "member %zu error %s (%s)", member,
                  redlock_err_name(rep.err), rep.message);
    ck_assert_msg(strstr(rep.message, "DB index is out of range"), "member %zu: '%s'", member,
                  rep.message);
}

START_TEST(test_select_refused)
{
    hostile *h = hostile_start(H_COOPERATIVE);
    redlock_options o = test_options();
    redlock_client *c;
    redlock_lock *l = NULL;
    int64_t took, ttl = 0;
    int db = 3, rc, flag = -1;
    long rss0 = peak_rss_kb();

    __atomic_store_n(&h->auth_mode, (int)H_STATUS, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->select_mode, (int)H_DB_RANGE, __ATOMIC_SEQ_CST);
    o.password = "secret";
    c = client_with_db(&h, 1, &db, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:select", NULL, &l), REDLOCK_OK);

    plant_stale_message();
    TIMED(rc = redlock_try_lock(l), took);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "try_lock: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("try_lock", rc);
    ck_assert_msg(strstr(redlock_last_error(), "DB index is out of range"),
                  "try_lock message '%s' does not say why", redlock_last_error());
    CHECK_BOUND("try_lock", took, CALL_BOUND_MS);
    check_config_refusal(l, 0);
    ck_assert_uint_ge(load_ul(&h->auth), 1);
    ck_assert_uint_ge(load_ul(&h->select), 1);

    /* Willing to wait long, or forever: still ends at once. */
    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(l, 20000 * time_scale, 10000), took);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "try_lock_for: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("try_lock_for", rc);
    CHECK_BOUND("try_lock_for", took, CALL_BOUND_MS);

    plant_stale_message();
    TIMED(rc = redlock_lock_acquire(l), took);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "lock_acquire: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("lock_acquire", rc);
    CHECK_BOUND("lock_acquire", took, CALL_BOUND_MS);

    /* The other calls fail cleanly too, and say why. */
    plant_stale_message();
    TIMED(rc = redlock_unlock(l), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM || rc == REDLOCK_ECONFIG, "unlock: %s (%s)",
                  redlock_err_name(rc), redlock_last_error());
    check_message("unlock", rc);
    CHECK_BOUND("unlock", took, CALL_BOUND_MS);

    plant_stale_message();
    TIMED(rc = redlock_is_locked(l, &flag), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM || rc == REDLOCK_ECONFIG, "is_locked: %s (%s)",
                  redlock_err_name(rc), redlock_last_error());
    check_message("is_locked", rc);
    CHECK_BOUND("is_locked", took, CALL_BOUND_MS);
    ck_assert_int_eq(flag, -1);

    plant_stale_message();
    TIMED(rc = redlock_remaining_ttl(l, &ttl), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM || rc == REDLOCK_ECONFIG, "remaining_ttl: %s (%s)",
                  redlock_err_name(rc), redlock_last_error());
    check_message("remaining_ttl", rc);
    ck_assert_msg(strstr(redlock_last_error(), "DB index is out of range"),
                  "remaining_ttl message '%s' does not say why", redlock_last_error());

    plant_stale_message();
    TIMED(rc = redlock_fenced_set(c, 0, "hostile:select:res", "v", 1, 1), took);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "fenced_set: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("fenced_set", rc);
    ck_assert_msg(strstr(redlock_last_error(), "DB index is out of range"),
                  "fenced_set message '%s' does not say why", redlock_last_error());
    CHECK_BOUND("fenced_set", took, CALL_BOUND_MS);

    /* Commands pipelined behind a failed SELECT would run in db 0. */
    ck_assert_msg(load_ul(&h->evalsha) == 0 && load_ul(&h->eval) == 0,
                  "%lu EVALSHA and %lu EVAL reached a node whose SELECT failed",
                  load_ul(&h->evalsha), load_ul(&h->eval));

    redlock_lock_free(l);
    TIMED(redlock_client_free(c), took);
    CHECK_BOUND("client_free", took, CALL_BOUND_MS);
    hostile_stop(h);
    check_rss_growth("select_refused", rss0);
}
END_TEST

/* One refusing member of three is no reason to fail; two are, at once. */
START_TEST(test_select_refused_quorum)
{
    hostile *hs[3];
    redlock_options o = test_options();
    redlock_client *c;
    redlock_lock *l = NULL;
    int dbs[3] = {0, 0, 3};
    unsigned long base[3] = {0, 0, 0};
    int64_t took;
    size_t i;
    int rc;

    for (i = 0; i < 3; i++) {
        hs[i] = hostile_start(H_COOPERATIVE);
        __atomic_store_n(&hs[i]->select_mode, (int)H_DB_RANGE, __ATOMIC_SEQ_CST);
    }
    c = client_with_db(hs, 3, dbs, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:select3", NULL, &l), REDLOCK_OK);
    TIMED(rc = redlock_try_lock(l), took);
    ck_assert_msg(rc == REDLOCK_OK, "one refusing member: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    CHECK_BOUND("try_lock", took, CALL_BOUND_MS);
    /* (The grant need not wait for the third member's answer, so its
     * report may still be empty; its server saw no lock command.) */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_uint_eq(load_ul(&hs[2]->evalsha) + load_ul(&hs[2]->eval), 0);
    redlock_lock_free(l);
    redlock_client_free(c);

    dbs[1] = 5;
    base[1] = load_ul(&hs[1]->evalsha) + load_ul(&hs[1]->eval);
    base[2] = load_ul(&hs[2]->evalsha) + load_ul(&hs[2]->eval);
    c = client_with_db(hs, 3, dbs, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:select3", NULL, &l), REDLOCK_OK);
    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(l, 20000 * time_scale, 10000), took);
    ck_assert_msg(rc == REDLOCK_ECONFIG, "two refusing members: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("try_lock_for", rc);
    CHECK_BOUND("try_lock_for", took, CALL_BOUND_MS);
    check_config_refusal(l, 1);
    check_config_refusal(l, 2);
    ck_assert_uint_eq(load_ul(&hs[1]->evalsha) + load_ul(&hs[1]->eval), base[1]);
    ck_assert_uint_eq(load_ul(&hs[2]->evalsha) + load_ul(&hs[2]->eval), base[2]);
    redlock_lock_free(l);
    redlock_client_free(c);
    for (i = 0; i < 3; i++)
        hostile_stop(hs[i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A flood of release messages (anyone may PUBLISH on a lock's channel)
 * while a waiter waits for a holder that never lets go: the waiter still
 * ends at its deadline, and the process does not spin. */

#define FLOOD_PER_S (10000 / time_scale)
#define FLOOD_WAIT_MS (3000 * time_scale)

START_TEST(test_release_flood)
{
    hostile *h = hostile_start(H_COOPERATIVE);
    redlock_options o = test_options();
    redlock_client *c;
    redlock_lock *l = NULL;
    int64_t took, cpu0, cpu;
    unsigned long attempts0;
    long rss0 = peak_rss_kb(), heap0 = live_heap_kb();
    int rc;

    __atomic_store_n(&h->busy, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->flood_per_s, FLOOD_PER_S, __ATOMIC_SEQ_CST);
    /* Without messages the waiter would try about once a second (and
     * when the holder's 5 s TTL runs out): any more attempts than that
     * are the flood's doing, which shows the messages do reach it. */
    o.retry_delay_ms = 1000;
    c = client_of(&h, 1, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:flood", NULL, &l), REDLOCK_OK);

    attempts0 = load_ul(&h->evalsha) + load_ul(&h->eval);
    cpu0 = cpu_ms();
    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(l, FLOOD_WAIT_MS, 10000), took);
    cpu = cpu_ms() - cpu0;
    fprintf(stderr,
            "release flood: %lu messages published, %lu acquire requests, "
            "%lld ms CPU over %lld ms waiting (%.0f%%)\n",
            load_ul(&h->published), load_ul(&h->evalsha) + load_ul(&h->eval) - attempts0,
            (long long)cpu, (long long)took, took > 0 ? 100.0 * (double)cpu / (double)took : 0.0);
    ck_assert_msg(rc == REDLOCK_ETIMEOUT, "try_lock_for: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("try_lock_for", rc);
    CHECK_BOUND("try_lock_for", took, FLOOD_WAIT_MS + CALL_BOUND_MS);
    ck_assert_msg(took >= FLOOD_WAIT_MS - 50, "gave up after %lld ms of %d", (long long)took,
                  FLOOD_WAIT_MS);
    /* The flood did reach the subscriber for most of the wait, and woke
     * the waiter (it tried far more often than its retry delay). */
    ck_assert_msg(load_ul(&h->published) >= (unsigned long)FLOOD_PER_S,
                  "only %lu messages were published", load_ul(&h->published));
    ck_assert_msg(load_ul(&h->evalsha) + load_ul(&h->eval) - attempts0 >= 20,
                  "the waiter was not woken by the messages (%lu attempts)",
                  load_ul(&h->evalsha) + load_ul(&h->eval) - attempts0);
    /* Under valgrind (time_scale > 1) every thread runs serialized and
     * many times slower, so CPU time says nothing there. */
    if (time_scale == 1)
        ck_assert_msg(cpu * 2 < took, "%lld ms of CPU in %lld ms of waiting: the waiter spins",
                      (long long)cpu, (long long)took);
    /* Read as it came: the subscriber connection was never given up (the
     * server drops a connection whose backlog reaches PEND_MAX). */
    ck_assert_msg(load_ul(&h->accepted) <= 2, "%lu connections: the subscriber was dropped",
                  load_ul(&h->accepted));
    __atomic_store_n(&h->flood_per_s, 0, __ATOMIC_SEQ_CST);
    check_live_heap("release flood", heap0);

    redlock_lock_free(l);
    TIMED(redlock_client_free(c), took);
    CHECK_BOUND("client_free", took, CALL_BOUND_MS);
    hostile_stop(h);
    check_rss_growth("release flood", rss0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A TLS node that accepts the connection and then never speaks (nor reads
 * the ClientHello): every call ends within the connect timeout plus a
 * margin, with ETIMEOUT or ETLS. */

static void quiet_log(void *ud, redlock_log_level level, const char *message)
{
    (void)ud, (void)level, (void)message;
}

static int tls_code_fits(int code)
{
    return code == REDLOCK_ETIMEOUT || code == REDLOCK_ETLS;
}

START_TEST(test_tls_handshake_stalls)
{
    hostile *h = hostile_start(H_MUTE);
    redlock_options o = test_options();
    redlock_client *c = NULL;
    redlock_lock *l = NULL;
    redlock_member_report rep;
    char uri[64];
    const char *uris[1] = {uri};
    int64_t took;
    long rss0 = peak_rss_kb();
    int rc, flag = -1;

    snprintf(uri, sizeof(uri), "rediss://127.0.0.1:%d", h->port);
    o.tls.insecure_skip_verify = 1; /* the handshake never gets that far */
    o.log_fn = quiet_log;            /* ... nor does the warning about it */
    rc = redlock_client_new(&c, uris, 1, &o);
    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_int_eq(redlock_lock_new(c, "hostile:tls", NULL, &l), REDLOCK_OK);

    plant_stale_message();
    TIMED(rc = redlock_try_lock(l), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "try_lock: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("try_lock", rc);
    CHECK_BOUND("try_lock", took, CONNECT_MS + MARGIN_MS);
    ck_assert_int_eq(redlock_lock_report(l, 0, &rep), REDLOCK_OK);
    ck_assert_msg(tls_code_fits(rep.err), "member error %s (%s)", redlock_err_name(rep.err),
                  rep.message);
    ck_assert_msg(rep.message[0] != '\0', "member report without a message");
    fprintf(stderr, "tls stall: try_lock ended after %lld ms with %s: %s\n", (long long)took,
            redlock_err_name(rep.err), rep.message);
    ck_assert_uint_ge(load_ul(&h->accepted), 1);

    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(l, 300, 10000), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM || rc == REDLOCK_ETIMEOUT, "try_lock_for: %s (%s)",
                  redlock_err_name(rc), redlock_last_error());
    check_message("try_lock_for", rc);
    CHECK_BOUND("try_lock_for", took, 300 + CALL_BOUND_MS);

    plant_stale_message();
    TIMED(rc = redlock_unlock(l), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "unlock: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("unlock", rc);
    CHECK_BOUND("unlock", took, CALL_BOUND_MS);

    plant_stale_message();
    TIMED(rc = redlock_is_locked(l, &flag), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "is_locked: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("is_locked", rc);
    CHECK_BOUND("is_locked", took, CALL_BOUND_MS);

    plant_stale_message();
    TIMED(rc = redlock_fenced_set(c, 0, "hostile:tls:res", "v", 1, 1), took);
    ck_assert_msg(tls_code_fits(rc), "fenced_set: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    check_message("fenced_set", rc);
    CHECK_BOUND("fenced_set", took, CONNECT_MS + MARGIN_MS);

    redlock_lock_free(l);
    TIMED(redlock_client_free(c), took);
    CHECK_BOUND("client_free", took, CALL_BOUND_MS);
    hostile_stop(h);
    check_rss_growth("tls stall", rss0);
}
END_TEST

/*
 * A failed acquire against a stalled TLS node costs one connect timeout,
 * as any other call does: the request never left the client (it waits in
 * the output buffer until the handshake completes), so there is nothing to
 * undo there and no reason to wait a second time. (Until c5803cf the
 * attempt's abort opened a fresh connection and waited through a second
 * stalled handshake: try_lock took two connect timeouts.)
 */
START_TEST(test_tls_stall_costs_one_connect_timeout)
{
    enum { CONNECT = 1500 };
    hostile *h = hostile_start(H_MUTE);
    redlock_options o = test_options();
    redlock_client *c = NULL;
    redlock_lock *l = NULL;
    char uri[64];
    const char *uris[1] = {uri};
    int64_t took_set, took_lock;
    int rc;

    snprintf(uri, sizeof(uri), "rediss://127.0.0.1:%d", h->port);
    o.tls.insecure_skip_verify = 1;
    o.log_fn = quiet_log;
    o.disable_pubsub = 1;
    o.connect_timeout_ms = CONNECT * time_scale;
    rc = redlock_client_new(&c, uris, 1, &o);
    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_int_eq(redlock_lock_new(c, "hostile:tls:once", NULL, &l), REDLOCK_OK);
    TIMED(rc = redlock_fenced_set(c, 0, "hostile:tls:res", "v", 1, 1), took_set);
    ck_assert_msg(tls_code_fits(rc), "fenced_set: %s", redlock_err_name(rc));
    TIMED(rc = redlock_try_lock(l), took_lock);
    ck_assert_int_eq(rc, REDLOCK_ENO_QUORUM);
    fprintf(stderr, "tls stall, connect timeout %d ms: fenced_set %lld ms, try_lock %lld ms\n",
            CONNECT * time_scale, (long long)took_set, (long long)took_lock);
    ck_assert_msg(took_lock < (CONNECT + 1000) * time_scale,
                  "try_lock took %lld ms against a stalled TLS handshake, fenced_set %lld ms: "
                  "a failed acquire waits a second connect timeout for its abort",
                  (long long)took_lock, (long long)took_set);
    redlock_lock_free(l);
    redlock_client_free(c);
    hostile_stop(h);
}
END_TEST

/*
 * The same with a quorum: two healthy members and one whose TLS handshake
 * stalls. A grant, an unlock and a "busy" answer are all known from the
 * healthy two within a round trip; the stalled member may cost a node
 * timeout (unlock: "members that do not answer within the node timeout are
 * released in the background"), never a connect timeout per call.
 *
 * FAILS at c5803cf (reported, not fixed here): the unlock of the granted
 * hold takes a whole connect timeout instead of about a node timeout. The
 * grant decided on the healthy two without waiting for the stalled member,
 * so nothing marked that node silent; redlock__release_members
 * (src/lock/quorum.c:529, fan-out at :570) therefore sends it the release
 * with the node-timeout deadline, and slot_deadline
 * (src/transport/net.c:156-171) stretches the deadline of a connection
 * still in its handshake to start + connect_timeout_ms. (Before c5803cf
 * the EBUSY answer also took a connect timeout, for the attempt's abort.)
 */
START_TEST(test_tls_stalled_member_does_not_delay_quorum)
{
    enum { CONNECT = 1500 };
    hostile *hs[3];
    redlock_options o = test_options();
    redlock_client *c = NULL;
    redlock_lock *l = NULL;
    char uris_buf[3][64];
    const char *uris[3] = {uris_buf[0], uris_buf[1], uris_buf[2]};
    int64_t took_grant, took_unlock, took_busy;
    size_t i;
    int rc;

    for (i = 0; i < 3; i++) {
        hs[i] = hostile_start(i < 2 ? H_COOPERATIVE : H_MUTE);
        snprintf(uris_buf[i], sizeof(uris_buf[i]), "%s://127.0.0.1:%d",
                 i < 2 ? "redis" : "rediss", hs[i]->port);
    }
    o.tls.insecure_skip_verify = 1;
    o.log_fn = quiet_log;
    o.disable_pubsub = 1;
    o.connect_timeout_ms = CONNECT * time_scale;
    rc = redlock_client_new(&c, uris, 3, &o);
    ck_assert_msg(rc == REDLOCK_OK, "client_new: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_int_eq(redlock_lock_new(c, "hostile:tls:quorum", NULL, &l), REDLOCK_OK);

    TIMED(rc = redlock_try_lock_for(l, 0, 20000), took_grant);
    ck_assert_msg(rc == REDLOCK_OK, "grant: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    TIMED(rc = redlock_unlock(l), took_unlock);
    ck_assert_msg(rc == REDLOCK_OK, "unlock: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    __atomic_store_n(&hs[0]->busy, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&hs[1]->busy, 1, __ATOMIC_SEQ_CST);
    TIMED(rc = redlock_try_lock_for(l, 0, 20000), took_busy);
    ck_assert_msg(rc == REDLOCK_EBUSY, "busy: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    fprintf(stderr, "tls-stalled member, connect timeout %d ms: grant %lld ms, unlock %lld ms, "
            "busy %lld ms\n", CONNECT * time_scale, (long long)took_grant,
            (long long)took_unlock, (long long)took_busy);
    ck_assert_msg(took_grant < (CONNECT - 500) * time_scale, "grant took %lld ms",
                  (long long)took_grant);
    ck_assert_msg(took_unlock < (CONNECT - 500) * time_scale,
                  "unlock took %lld ms: it waited for the stalled member's handshake",
                  (long long)took_unlock);
    ck_assert_msg(took_busy < (CONNECT - 500) * time_scale,
                  "EBUSY took %lld ms: the attempt's abort waited for the stalled member's "
                  "handshake", (long long)took_busy);
    redlock_lock_free(l);
    redlock_client_free(c);
    for (i = 0; i < 3; i++)
        hostile_stop(hs[i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Quorum: a hostile minority neither blocks nor delays a grant; a hostile
 * majority gives a clean ENO_QUORUM. */

START_TEST(test_hostile_minority_and_majority)
{
    hostile *hs[3];
    redlock_options o = test_options();
    redlock_client *c;
    redlock_lock *l = NULL;
    redlock_member_report rep;
    int64_t took;
    size_t i;
    int rc;

    for (i = 0; i < 3; i++)
        hs[i] = hostile_start(H_COOPERATIVE);
    /* A long node timeout: the grant must not wait for it. */
    o.node_timeout_ms = 5000 * time_scale;
    c = client_of(hs, 3, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:quorum", NULL, &l), REDLOCK_OK);

    hostile_set_mode(hs[2], H_SILENT);
    TIMED(rc = redlock_try_lock_for(l, 0, 30000), took);
    ck_assert_msg(rc == REDLOCK_OK, "silent minority: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_msg(took < 4000 * time_scale, "a silent minority delayed the grant to %lld ms",
                  (long long)took);
    ck_assert_int_eq(redlock_lock_report(l, 0, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.outcome, REDLOCK_MEMBER_GRANTED);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);

    /* Garbage from one member: still held by the other two. */
    hostile_set_mode(hs[2], H_GARBAGE);
    rc = redlock_try_lock_for(l, 0, 30000);
    ck_assert_msg(rc == REDLOCK_OK, "garbage minority: %s", redlock_err_name(rc));
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);

    /* Two of three hostile: no quorum, quickly, with each member's cause. */
    o.node_timeout_ms = NODE_MS;
    redlock_lock_free(l);
    redlock_client_free(c);
    c = client_of(hs, 3, &o);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:quorum", NULL, &l), REDLOCK_OK);
    hostile_set_mode(hs[1], H_LOADING);
    hostile_set_mode(hs[2], H_NEG_BULK);
    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(l, 0, 30000), took);
    ck_assert_msg(rc == REDLOCK_ENO_QUORUM, "hostile majority: %s", redlock_err_name(rc));
    check_message("try_lock", rc);
    CHECK_BOUND("try_lock", took, CALL_BOUND_MS);
    ck_assert_int_eq(redlock_lock_report(l, 1, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.err, REDLOCK_ELOADING);
    ck_assert_int_eq(redlock_lock_report(l, 2, &rep), REDLOCK_OK);
    ck_assert_int_eq(rep.err, REDLOCK_EPROTO);

    plant_stale_message();
    TIMED(rc = redlock_try_lock_for(l, 400, 30000), took);
    ck_assert_int_eq(rc, REDLOCK_ENO_QUORUM);
    check_message("try_lock_for", rc);
    CHECK_BOUND("try_lock_for", took, 400 + CALL_BOUND_MS);

    redlock_lock_free(l);
    redlock_client_free(c);
    for (i = 0; i < 3; i++)
        hostile_stop(hs[i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The watchdog renews against a node that turns hostile: the holder hears
 * of the loss (on_lost) before long, and unlock says the lock was lost. */

static const hmode watchdog_modes[] = {H_SILENT, H_STATUS, H_LOADING, H_CLOSE_MID, H_NEG_BULK};

typedef struct lost_note {
    int calls;
    int reason;
    int64_t at_ms;
} lost_note;

static void on_lost(void *ud, redlock_lock *l, uint64_t owner, int reason)
{
    lost_note *n = ud;

    (void)l, (void)owner;
    __atomic_store_n(&n->reason, reason, __ATOMIC_SEQ_CST);
    __atomic_store_n(&n->at_ms, rig_now_ms(), __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&n->calls, 1, __ATOMIC_SEQ_CST);
}

START_TEST(test_watchdog_against_hostile_node)
{
    hmode m = watchdog_modes[_i];
    hostile *h = hostile_start(H_COOPERATIVE);
    redlock_options o = test_options();
    redlock_client *c = client_of(&h, 1, &o);
    redlock_lock *l = NULL;
    lost_note note = {0, 0, 0};
    int64_t start, deadline;
    int rc;

    ck_assert_int_eq(redlock_lock_new(c, "hostile:watchdog", NULL, &l), REDLOCK_OK);
    redlock_lock_set_on_lost(l, on_lost, &note);
    start = rig_now_ms();
    rc = redlock_try_lock(l); /* watchdog lease */
    ck_assert_msg(rc == REDLOCK_OK, "cooperative grant: %s (%s)", redlock_err_name(rc),
                  redlock_last_error());
    hostile_set_mode(h, m);

    /* Validity is at most one lease from the attempt's start. */
    deadline = start + WATCHDOG_LEASE_MS + MARGIN_MS;
    while (__atomic_load_n(&note.calls, __ATOMIC_SEQ_CST) == 0 && rig_now_ms() < deadline)
        rig_sleep_ms(20);
    ck_assert_msg(__atomic_load_n(&note.calls, __ATOMIC_SEQ_CST) == 1,
                  "%s: on_lost called %d times within %d ms", mode_names[m], note.calls,
                  WATCHDOG_LEASE_MS + MARGIN_MS);
    ck_assert_msg(note.reason == REDLOCK_ENO_QUORUM, "%s: lost with %s", mode_names[m],
                  redlock_err_name(note.reason));

    plant_stale_message();
    rc = redlock_unlock(l);
    ck_assert_msg(rc == REDLOCK_ELOST, "%s: unlock after loss: %s", mode_names[m],
                  redlock_err_name(rc));
    check_message("unlock", rc);

    redlock_lock_free(l);
    redlock_client_free(c);
    hostile_stop(h);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The cooperative mode itself works, so the failures above are the hostile
 * behaviours' doing and not the test server's. */

START_TEST(test_cooperative_server_works)
{
    hostile *h = hostile_start(H_COOPERATIVE);
    redlock_options o = test_options();
    redlock_client *c = client_of(&h, 1, &o);
    redlock_lock *l = NULL, *fl = NULL;
    redlock_lock_options fo = {.fencing = 1};
    uint64_t token = 0;
    int locked = -1;

    ck_assert_int_eq(redlock_lock_new(c, "hostile:coop", NULL, &l), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock(l), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_eq(redlock_is_locked(l, &locked), REDLOCK_OK);
    ck_assert_int_eq(locked, 0);
    ck_assert_int_eq(redlock_force_unlock(l, NULL), REDLOCK_OK);
    ck_assert_int_eq(redlock_fenced_set(c, 0, "hostile:res", "v", 1, 3), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(c, "hostile:coop:fenced", &fo, &fl), REDLOCK_OK);
    ck_assert_int_eq(redlock_try_lock(fl), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_token(fl, &token), REDLOCK_OK);
    ck_assert_uint_ge(token, 1);
    ck_assert_int_eq(redlock_unlock(fl), REDLOCK_OK);
    ck_assert_uint_ge(load_ul(&h->evalsha), 6);
    ck_assert_uint_eq(load_ul(&h->eval), 0);
    redlock_lock_free(fl);
    redlock_lock_free(l);
    redlock_client_free(c);
    hostile_stop(h);
}
END_TEST

static Suite *hostile_suite(void)
{
    Suite *s = suite_create("hostile");
    TCase *tc;

    tc = tcase_create("server");
    tcase_set_timeout(tc, 60 * time_scale);
    tcase_add_test(tc, test_cooperative_server_works);
    tcase_add_loop_test(tc, test_every_call_fails_cleanly, 0, (int)N_EVERY_CALL_MODES);
    tcase_add_test(tc, test_noscript_forever_is_bounded);
    tcase_add_test(tc, test_unconfirmed_subscribe_reconnects);
    tcase_add_loop_test(tc, test_hostile_auth_reply, 0,
                        (int)(sizeof(auth_modes) / sizeof(auth_modes[0])));
    tcase_add_test(tc, test_drip_is_a_correct_reply);
    tcase_add_test(tc, test_select_refused);
    tcase_add_test(tc, test_release_flood);
    tcase_add_test(tc, test_tls_handshake_stalls);
    tcase_add_test(tc, test_tls_stall_costs_one_connect_timeout);
    suite_add_tcase(s, tc);

    tc = tcase_create("quorum");
    tcase_set_timeout(tc, 60 * time_scale);
    tcase_add_test(tc, test_hostile_minority_and_majority);
    tcase_add_test(tc, test_select_refused_quorum);
    tcase_add_test(tc, test_tls_stalled_member_does_not_delay_quorum);
    tcase_add_loop_test(tc, test_watchdog_against_hostile_node, 0,
                        (int)(sizeof(watchdog_modes) / sizeof(watchdog_modes[0])));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *scale = getenv("REDLOCK_TEST_TIME_SCALE");
    SRunner *sr;
    int failed;

    if (scale && atoi(scale) >= 1 && atoi(scale) <= 100)
        time_scale = atoi(scale);
    sr = srunner_create(hostile_suite());

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
