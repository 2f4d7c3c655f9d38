/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The connection and fan-out layer reading a hostile byte stream.
 *
 * One connection (the real src/transport code) is handed one end of a
 * socket pair whose other end has already written the fuzz bytes and shut
 * down. A pipelined batch of script calls and plain commands is fanned out
 * over it, so everything between the socket and the lock logic runs on the
 * fuzz bytes: reading, hiredis' parser, handshake replies (AUTH/SELECT)
 * that are consumed silently, replies of abandoned requests that are
 * skipped, the EVALSHA -> EVAL fallback on NOSCRIPT, and the out-of-step
 * checks. A second fan-out reuses the connection if it survived.
 *
 * Input: byte 0 sets the handshake replies to expect and the replies to
 * skip, byte 1 the number of calls (1..8), byte 2 when the callback stops
 * the fan-out early, bytes 3..10 the calls; the rest is the stream.
 *
 * Checked: no crash, leak or undefined behaviour, and the transport's
 * contract: each call gets exactly one callback unless the callback
 * stopped the fan-out, and a reply or an error, never both.
 */
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "redlock/redlock.h"
#include "resp/scripts.h"
#include "transport/conn.h"
#include "transport/net.h"
#include "transport/reader.h"

#define HEADER 11
#define MAX_CALLS 8

typedef struct seen {
    size_t calls;
    unsigned char answered[MAX_CALLS];
    size_t stop_after;  /* 0: never stop */
    int stopped;
} seen;

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_stream: %s\n", what);
        abort();
    }
}

/* Touches every byte of a reply tree, so the sanitizers see any bad one. */
static size_t walk(const redisReply *r, int depth)
{
    size_t sum = 0, i;

    require(depth < 64, "reply nested too deep");
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        require(r->str != NULL, "string reply without data");
        for (i = 0; i < r->len; i++)
            sum += (unsigned char)r->str[i];
        require(r->str[r->len] == '\0', "string reply not terminated");
        break;
    case REDIS_REPLY_ARRAY:
        for (i = 0; i < r->elements; i++)
            sum += walk(r->element[i], depth + 1);
        break;
    default:
        break;
    }
    return sum;
}

static int on_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                    redisReply *r)
{
    seen *s = ud;

    require(batch == 0, "reply for a batch that was not sent");
    require(!s->stopped, "callback after the fan-out was stopped");
    /* Not necessarily in order: a NOSCRIPT answer re-sends its call last. */
    require(call < MAX_CALLS && !s->answered[call], "a call answered twice");
    s->answered[call] = 1;
    require((err == 0) == (r != NULL), "a reply and an error, or neither");
    require(err >= 0 && err < REDLOCK_ERR_COUNT_, "unknown error code");
    if (err)
        require(msg != NULL, "error without a message");
    else
        (void)walk(r, 0);
    s->calls++;
    if (s->stop_after && s->calls == s->stop_after) {
        s->stopped = 1;
        return 1;
    }
    return 0;
}

static const char *const args[] = {"fz", "fz:2", "fz:3", "1000", "owner:1", "0", "1", "x"};

static void fan_out(redlock__conn *conn, const uint8_t *spec, size_t ncalls,
                    size_t stop_after)
{
    redlock__call calls[MAX_CALLS];
    redlock__batch b;
    seen s = {0, {0}, stop_after, 0};
    uint64_t failures = 0;
    size_t i;

    for (i = 0; i < ncalls; i++) {
        int script = spec[i] % (REDLOCK__SCRIPT_COUNT + 1) - 1;

        calls[i].script = script;
        calls[i].nkeys = script < 0 ? 0 : 1 + spec[i] / 64 % 3;
        calls[i].argc = script < 0 ? 2 : 8;
        calls[i].argv = script < 0 ? (const char *const[]){"PING", "fz"} : args;
        calls[i].argvlen = NULL;
    }
    b = (redlock__batch){.calls = calls, .ncalls = ncalls,
                         .deadline_ns = redlock__now_ns() + 200 * REDLOCK__NS_PER_MS};
    require(redlock__fanout_conns(conn, &b, 1, 200, &failures, on_reply, &s) == REDLOCK_OK,
            "fan-out failed");
    require(s.stopped ? s.calls == stop_after : s.calls == ncalls,
            "a call got no callback");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char host[] = "fuzz", display[] = "fuzz:1";
    redlock__node node;
    redlock__conn conn;
    int sv[2];
    size_t ncalls, stop_after;

    if (size < HEADER || size > 65536)
        return 0;
    require(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
    /* The whole stream fits the socket buffer, so writing cannot block. */
    {
        int cap = 1 << 20;

        setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &cap, sizeof(cap));
        setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &cap, sizeof(cap));
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &cap, sizeof(cap));
    }
    require(write(sv[1], data + HEADER, size - HEADER) == (ssize_t)(size - HEADER),
            "short write");
    shutdown(sv[1], SHUT_WR);

    memset(&node, 0, sizeof(node));
    node.uri.kind = REDLOCK__NODE_TCP;
    node.uri.host = host;
    node.uri.port = 1;
    node.uri.display = display;
    redlock__conn_init(&conn, &node);
    conn.fd = sv[0];
    require(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) == 0, "fcntl");
    conn.reader = redlock__reader_create();
    require(conn.reader != NULL, "out of memory");
    conn.state = REDLOCK__CONN_READY;
    conn.handshake = data[0] % 3;
    conn.skip = data[0] / 3 % 4;

    ncalls = 1 + data[1] % MAX_CALLS;
    stop_after = data[2] % (ncalls + 1);
    fan_out(&conn, data + 3, ncalls, stop_after);
    if (conn.state == REDLOCK__CONN_READY)
        fan_out(&conn, data + 3 + MAX_CALLS - 1, 1, 0); /* what is left of the stream */
    redlock__conn_close(&conn); /* closes sv[0] if still open */
    close(sv[1]);
    return 0;
}
