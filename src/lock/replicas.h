/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replica acknowledgement (options.replica_acks): the WAIT or WAITAOF
 * call pipelined behind a node's grants or renewals, and how its reply is
 * read. Its answer covers every write sent before it on that connection.
 */
#ifndef REDLOCK_LOCK_REPLICAS_H
#define REDLOCK_LOCK_REPLICAS_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

struct redisReply;

/* Redis checks a blocked WAIT's timeout in its cron (10 times a second by
 * default): the answer can come this much after WAIT's timeout, so the
 * request deadline allows for it. */
#define REDLOCK__REPLICA_WAIT_SLACK_MS 150

/* How much longer than the node timeout a request ending in the WAIT of a
 * lock with this timeout may take. */
#define REDLOCK__REPLICA_WAIT_NS(timeout_ms)                                                 \
    ((int64_t)((timeout_ms) + REDLOCK__REPLICA_WAIT_SLACK_MS) * 1000000)

typedef struct redlock__replica_wait {
    const char *argv[4];
    char count[12], timeout[24];
    int aof;
    redlock__call call;     /* the trailer for redlock__plan_build_trailed */
} redlock__replica_wait;

/* WAIT acks timeout_ms, or WAITAOF 0 acks timeout_ms when aof. The call
 * points into w: w must outlive the plan. */
void redlock__replica_wait_init(redlock__replica_wait *w, int acks, int timeout_ms, int aof);

/* The replicas a trailer's reply says acknowledged (>= 0), or -1 with
 * *code and why set: the transport's err, or the server's refusal (an
 * unknown WAITAOF is REDLOCK_ECONFIG, a refusal for good, saying which
 * version it needs). */
int redlock__replica_acks_of(const redlock__replica_wait *w, int err, const char *msg,
                             const struct redisReply *r, int *code, char *why, size_t cap);

#endif
