/* SPDX-License-Identifier: BSD-3-Clause */
/* What the two fan-outs share: over borrowed connections (net.c) and over
 * an event loop's shared, pipelined ones (mux.c). */
#ifndef REDLOCK_TRANSPORT_FANOUT_H
#define REDLOCK_TRANSPORT_FANOUT_H

#include <stdint.h>

#include "transport/transport.h"

struct redisReply;

/* Batches one fan-out takes. */
#define REDLOCK__MAX_BATCHES 64

/* The caller's reply_fn behind one that turns REDLOCK__FANOUT_LINGER into
 * a deadline: as long again as the fan-out has run when it is first said
 * (until stays INT64_MAX before that). */
typedef struct redlock__lingering {
    redlock__reply_fn fn;
    void *ud;
    int64_t started, until;
} redlock__lingering;

int redlock__linger_fn(void *ud, size_t batch, size_t call, int err, const char *msg,
                       struct redisReply *r);

/* A NOSCRIPT error reply: the node lost its script cache. */
int redlock__is_noscript(const struct redisReply *r);

/* Whether a batch started at `started` lets its connection's set-up take
 * the connect timeout (see redlock__batch_deadline). */
int redlock__batch_allows_setup(const redlock__batch *b, int64_t started);

/* A batch's deadline for this attempt: while its connection is still
 * being set up it gets the connect timeout instead (see net.c). */
int64_t redlock__batch_deadline(const redlock__batch *b, int conn_setting_up,
                                int64_t started, int connect_timeout_ms);

#endif
