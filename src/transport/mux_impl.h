/* SPDX-License-Identifier: BSD-3-Clause */
/* The mux's state, shared by mux.c (connections, reader) and
 * mux_fanout.c (operations waiting on them). Not seen elsewhere. */
#ifndef REDLOCK_TRANSPORT_MUX_IMPL_H
#define REDLOCK_TRANSPORT_MUX_IMPL_H

#include <pthread.h>

#include "transport/mux.h"

struct redisReply;

/* Room for small batches in the slot itself. */
#define REDLOCK__MUX_INLINE 8

/* One batch of one fan-out: its calls on one node's shared connection.
 * queue[k] is the call sent k-th, inbox[k] its reply once the reader got
 * it: replies come in send order, so got only grows. */
typedef struct redlock__mux_slot {
    struct redlock__mux_node *mn;
    const redlock__batch *batch;
    const void *key;              /* the fan-out's: wakes its fiber */
    size_t *queue;
    unsigned char *eval;          /* that send was the EVAL fallback */
    struct redisReply **inbox;
    size_t head, got, tail;       /* handled, received, sent */
    int err;                      /* the connection failed after got */
    char errmsg[128];
    int64_t started;
    int done;
    size_t inline_queue[2 * REDLOCK__MUX_INLINE];
    unsigned char inline_eval[2 * REDLOCK__MUX_INLINE];
    struct redisReply *inline_inbox[2 * REDLOCK__MUX_INLINE];
} redlock__mux_slot;

/* A reply the node owes: to a waiting slot, or abandoned (owner NULL;
 * a nonzero token is a ledger entry its reply settles). */
typedef struct redlock__mux_entry {
    redlock__mux_slot *owner;
    uint64_t token;
} redlock__mux_entry;

typedef struct redlock__mux_node {
    redlock__conn conn;
    redlock__mux_entry *q;        /* owed replies: q[head..tail) */
    size_t head, tail, cap;
} redlock__mux_node;

struct redlock__mux {
    redlock__mux_node *nodes;
    size_t n_nodes;
    const redlock__settle_hook *hook;
    uint64_t *failures;
    pthread_t thread;             /* the reader's */
    /* The loop whose fiber the reader is (redlock__wait_runner()): it
     * wakes only that loop's fibers. */
    const void *runner;
    int running, closing;         /* atomics */
};

/* Appends a reply owed to owner. REDLOCK_OK or REDLOCK_ENOMEM. */
int redlock__mux_push(redlock__mux_node *mn, redlock__mux_slot *owner);

/* Reads what mn's connection has received, now, and hands it out. */
void redlock__mux_pump(redlock__mux *m, redlock__mux_node *mn);

/* Closes mn's connection; every owed reply is lost (see mux.c). */
void redlock__mux_node_failed(redlock__mux *m, redlock__mux_node *mn, int err, const char *msg);

#endif
