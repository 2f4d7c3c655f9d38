/* SPDX-License-Identifier: BSD-3-Clause */
/* The real transport: a pool of connection sets and the poll() fan-out. */
#ifndef REDLOCK_TRANSPORT_NET_H
#define REDLOCK_TRANSPORT_NET_H

#include <pthread.h>
#include <stdint.h>

#include "transport/conn.h"
#include "transport/transport.h"

struct redlock__pubsub;
struct redlock__connset;
struct redlock__mux;

typedef struct redlock__net {
    const redlock__node *nodes;
    size_t n_nodes;
    int connect_timeout_ms;
    pthread_mutex_t mu;                 /* guards free_sets, draining */
    pthread_cond_t drained;             /* a drain round gave the sets back */
    int draining;                       /* a drain round holds the idle sets */
    struct redlock__connset *free_sets; /* idle sets, one conn per node */
    uint64_t *node_failures;            /* atomic counters, per node */
    struct redlock__pubsub *pubsub;     /* NULL: no release messages */
    redlock__settle_hook hook;          /* ledger settlements; set once */
    /* A loop-driven client's shared connections (transport/mux.h), which
     * its fibers use instead of the pool; NULL: none. Atomic. */
    struct redlock__mux *mux;
} redlock__net;

int redlock__net_init(redlock__net *net, const redlock__node *nodes,
                      size_t n_nodes, int connect_timeout_ms);
void redlock__net_destroy(redlock__net *net);

/* Every pool connection's fd, before it is closed, is told to fn (an
 * event loop of the same thread; fn NULL: nobody). Set once, before
 * any fan-out. */
void redlock__net_on_fd_closing(redlock__net *net, void (*fn)(void *ud, int fd), void *ud);

/* ctx is a redlock__net. */
extern const redlock__transport_ops redlock__net_ops;

/* The fan-out itself, over an explicit array of connections (one per
 * node index); used by the pool-based fanout and by tests. */
int redlock__fanout_conns(redlock__conn *conns, const redlock__batch *batches,
                          size_t n, int connect_timeout_ms, uint64_t *failures,
                          redlock__reply_fn fn, void *ud);


#endif
