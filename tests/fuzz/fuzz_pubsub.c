/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The subscriber thread's handling of what a node sends on a subscriber
 * connection: confirmations, release messages, and anything else a faulty
 * or hostile server (or anyone who may PUBLISH) puts there.
 *
 * Fuzz bytes go through the library's reader (src/transport/reader.h, with
 * its element limit), split into feeds where the input says, and every
 * reply parsed is handed to redlock__pubsub_feed(), which runs exactly the
 * subscriber thread's message handling. The pub/sub object is real, with
 * its thread, on two nodes at 127.0.0.1 port 1: the thread tries to connect
 * there only because watches exist, and port 1 refuses (a failed node
 * wakes waiters, which the checks below allow for).
 *
 * Input: byte 0 picks which node each reply goes to (bit k for reply k mod
 * 8; with bit 7 of byte 1 set, every eighth reply goes to node 2, which
 * does not exist and must be ignored); byte 1's low bits split the stream
 * into feeds of 1 << (byte1 % 8) bytes; the rest is the RESP stream.
 *
 * Checked: no crash, leak or undefined behaviour; every parsed reply is
 * well formed; and a "message" on a watched channel wakes its waiter: a
 * wait with a deadline of now returns REDLOCK_OK right after it, and a
 * waiter on another channel is not required to wake.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "redlock/redlock.h"
#include "transport/conn.h"
#include "transport/pubsub.h"
#include "transport/reader.h"

#define HEADER 2
#define N_NODES 2

/* The release channels of two locks are watched: "fz" on both nodes,
 * "a}b" on node 1 only. */
#define FZ_CHANNEL "redisson_lock__channel:{fz}"
#define AB_CHANNEL "redisson_lock__channel:{a}b}"
static const char *const fz_names[] = {FZ_CHANNEL, FZ_CHANNEL};
static const size_t fz_nodes[] = {0, 1};
static const char *const ab_names[] = {AB_CHANNEL};
static const size_t ab_nodes[] = {1};

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_pubsub: %s\n", what);
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
        require(r->elements <= REDLOCK__READER_MAX_ELEMENTS, "element limit not kept");
        for (i = 0; i < r->elements; i++)
            sum += walk(r->element[i], depth + 1);
        break;
    default:
        break;
    }
    return sum;
}

/* Whether r is a release message on channel, as the subscriber reads one:
 * an array of at least three whose first two elements are bulk strings,
 * the first "message" and the second the channel (compared as C strings,
 * as pubsub.c does). */
static int is_message_on(const redisReply *r, const char *channel)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
           r->element[0]->type == REDIS_REPLY_STRING &&
           r->element[1]->type == REDIS_REPLY_STRING &&
           strcmp(r->element[0]->str, "message") == 0 &&
           strcmp(r->element[1]->str, channel) == 0;
}

static void expect_woken(redlock__pubsub *ps, redlock__watch *w, uint64_t *seen,
                         const char *what)
{
    uint64_t before = *seen;

    require(redlock__pubsub_wait(ps, w, seen, redlock__now_ns(), NULL, NULL) == REDLOCK_OK, what);
    require(*seen != before, "woken without a new generation");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char host[] = "127.0.0.1", display[] = "127.0.0.1:1";
    static redlock__node nodes[N_NODES];
    redlock__pubsub *ps = NULL;
    redlock__watch *fz, *ab;
    struct redisReader *rd;
    uint64_t fz_seen = 0, ab_seen = 0;
    size_t pos, chunk, k = 0, i;
    int broken = 0;

    if (size < HEADER || size > 65536)
        return 0;
    for (i = 0; i < N_NODES; i++) {
        nodes[i].uri.kind = REDLOCK__NODE_TCP;
        nodes[i].uri.host = host;
        nodes[i].uri.port = 1;
        nodes[i].uri.display = display;
    }
    require(redlock__pubsub_new(nodes, N_NODES, 50, 1, &ps) == REDLOCK_OK, "pubsub_new");
    /* A deadline of now: register, do not wait for confirmations. */
    fz = redlock__pubsub_watch(ps, fz_names, fz_nodes, 2, redlock__now_ns());
    ab = redlock__pubsub_watch(ps, ab_names, ab_nodes, 1, redlock__now_ns());
    require(fz && ab, "watch");
    rd = redlock__reader_create();
    require(rd != NULL, "out of memory");

    chunk = (size_t)1 << (data[1] % 8);
    for (pos = HEADER; pos < size && !broken; pos += chunk) {
        size_t n = size - pos < chunk ? size - pos : chunk;

        if (redisReaderFeed(rd, (const char *)data + pos, n) != REDIS_OK)
            break;
        for (;;) {
            void *reply = NULL;
            redisReply *r;
            size_t node;

            if (redisReaderGetReply(rd, &reply) != REDIS_OK) {
                broken = 1; /* the subscriber drops the connection here */
                break;
            }
            if (!reply)
                break;
            r = reply;
            (void)walk(r, 0);
            node = (data[0] >> (k % 8)) & 1;
            if ((data[1] & 0x80) && k % 8 == 7)
                node = N_NODES; /* out of range: ignored */
            k++;
            redlock__pubsub_feed(ps, node, r);
            if (node < N_NODES && is_message_on(r, FZ_CHANNEL))
                expect_woken(ps, fz, &fz_seen, "a message on a watched channel woke nobody");
            if (node < N_NODES && is_message_on(r, AB_CHANNEL))
                expect_woken(ps, ab, &ab_seen, "a message on a watched channel woke nobody");
            freeReplyObject(r);
        }
    }
    redlock__reader_free(rd);
    redlock__pubsub_unwatch(ps, fz);
    redlock__pubsub_unwatch(ps, ab);
    redlock__pubsub_free(ps);
    return 0;
}
