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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lock/internal.h"
#include "redlock/redlock.h"
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
    H_MODE_COUNT
} hmode;

static const char *const mode_names[H_MODE_COUNT] = {
    "cooperative", "status",   "bulk",     "array",   "neg_int",  "neg_bulk",
    "neg_array",   "bad_int",  "huge_bulk", "huge_array", "truncated", "close_mid",
    "close_on_accept",
    "silent",      "garbage",  "err",      "loading", "readonly", "oom",
    "noscript",    "wrongpass", "noauth",  "double_err", "endless_bulk",
};

#define MAX_CONNS 64

typedef struct hconn {
    int fd;
    redisReader *reader;
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
    unsigned long commands, evalsha, eval, auth, subscribe, accepted;
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
    hc->fd = -1;
    hc->reader = NULL;
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
static void answer_cooperatively(hostile *h, int fd, const redisReply *cmd, const char *name)
{
    char buf[256];

    if (strcasecmp(name, "SUBSCRIBE") == 0 && load_int(&h->sub_silent))
        return;
    if (strcasecmp(name, "SUBSCRIBE") == 0 || strcasecmp(name, "UNSUBSCRIBE") == 0) {
        const redisReply *ch = cmd->elements > 1 ? cmd->element[1] : NULL;

        if (!ch || ch->type != REDIS_REPLY_STRING) {
            send_str(fd, "-ERR wrong number of arguments\r\n");
            return;
        }
        snprintf(buf, sizeof(buf), "*3\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(name), name, ch->len);
        for (char *p = buf; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        send_str(fd, buf);
        send_all(fd, ch->str, ch->len);
        send_str(fd, "\r\n:1\r\n");
        return;
    }
    if (strcasecmp(name, "EVALSHA") != 0 && strcasecmp(name, "EVAL") != 0) {
        send_str(fd, "+OK\r\n");
        return;
    }
    switch (script_of(cmd, strcasecmp(name, "EVAL") == 0)) {
    case REDLOCK__SCRIPT_ACQUIRE:
        if (load_int(&h->busy)) {
            send_str(fd, ":5000\r\n");
            break;
        }
        /* Four keys means a fencing acquire: a fresh token each time. */
        if (cmd->elements > 2 && cmd->element[2]->type == REDIS_REPLY_STRING &&
            strcmp(cmd->element[2]->str, "4") == 0) {
            snprintf(buf, sizeof(buf), "*1\r\n:%lu\r\n",
                     __atomic_add_fetch(&h->token, 1, __ATOMIC_SEQ_CST));
            send_str(fd, buf);
        } else {
            send_str(fd, "$-1\r\n");
        }
        break;
    case REDLOCK__SCRIPT_ABORT:
        send_str(fd, ":0\r\n");
        break;
    case REDLOCK__SCRIPT_INSPECT:
        send_str(fd, "*2\r\n:-2\r\n$1\r\n0\r\n");
        break;
    case REDLOCK__SCRIPT_RENEW:
    case REDLOCK__SCRIPT_RELEASE:
    case REDLOCK__SCRIPT_FORCE_RELEASE:
    case REDLOCK__SCRIPT_FENCE_STORE:
    case REDLOCK__SCRIPT_FENCED_SET:
        send_str(fd, ":1\r\n");
        break;
    default:
        send_str(fd, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
        break;
    }
}

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
    else if (strcasecmp(name, "AUTH") == 0) {
        bump(&h->auth);
        if (load_int(&h->auth_mode) >= 0)
            mode = load_int(&h->auth_mode);
    }

    switch ((hmode)mode) {
    case H_COOPERATIVE:
        answer_cooperatively(h, hc->fd, cmd, name);
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
            h->conns[i].reader = redisReaderCreate();
            if (!h->conns[i].reader)
                conn_drop(&h->conns[i]);
            return;
        }
    }
    close(fd); /* full: the client sees a closed connection */
}

static void *hostile_main(void *arg)
{
    hostile *h = arg;
    struct pollfd pfd[MAX_CONNS + 2];
    size_t idx[MAX_CONNS + 2];

    while (!load_int(&h->stop)) {
        size_t n = 2, i;
        int r;

        pfd[0] = (struct pollfd){h->wake[0], POLLIN, 0};
        pfd[1] = (struct pollfd){h->lfd, POLLIN, 0};
        for (i = 0; i < MAX_CONNS; i++) {
            if (h->conns[i].fd < 0)
                continue;
            pfd[n] = (struct pollfd){h->conns[i].fd, POLLIN, 0};
            idx[n++] = i;
        }
        r = poll(pfd, n, 100);
        if (r <= 0)
            continue;
        if (pfd[1].revents)
            accept_conn(h);
        for (i = 2; i < n; i++)
            if (pfd[i].revents && h->conns[idx[i]].fd == pfd[i].fd)
                serve_conn(h, &h->conns[idx[i]]);
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

/* Which member error codes a mode may produce. */
static int expected_code(hmode m)
{
    switch (m) {
    case H_STATUS: case H_BULK: case H_ARRAY: case H_NEG_INT: case H_NEG_BULK:
    case H_NEG_ARRAY: case H_BAD_INT: case H_GARBAGE: case H_HUGE_ARRAY:
    case H_ENDLESS_BULK:
        return REDLOCK_EPROTO;
    case H_HUGE_BULK: case H_TRUNCATED: case H_SILENT:
        return REDLOCK_ETIMEOUT;
    case H_CLOSE_MID: case H_CLOSE_ON_ACCEPT:
        return REDLOCK_EIO;
    case H_ERR: case H_NOSCRIPT: case H_DOUBLE_ERR:
        return REDLOCK_ESERVER;
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
    redlock_lock_options fo = {0, 1};
    redlock_member_state st;
    int64_t took, ttl = 0;
    size_t released = 99;
    int rc, flag = -1, count = -1;
    const char *mn = mode_names[m];

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

    redlock_lock_free(fl);
    redlock_lock_free(l);
    TIMED(redlock_client_free(c), took);
    CHECK_BOUND("client_free", took, CALL_BOUND_MS);
    hostile_stop(h);
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
    redlock_lock_options fo = {0, 1};
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
    suite_add_tcase(s, tc);

    tc = tcase_create("quorum");
    tcase_set_timeout(tc, 60 * time_scale);
    tcase_add_test(tc, test_hostile_minority_and_majority);
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
