/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Release notifications. One background thread and one subscriber
 * connection per node serve every waiter of every lock of a client.
 * Channels are reference-counted per node: the first waiter subscribes,
 * the last one unsubscribes. A waiter registers (and the subscription is
 * confirmed) before its next attempt, so a release between the failed
 * attempt and the wait cannot be missed. If a subscriber connection breaks,
 * every waiter is woken to retry, since messages may have been lost.
 */
#ifndef REDLOCK_TRANSPORT_PUBSUB_H
#define REDLOCK_TRANSPORT_PUBSUB_H

#include <stddef.h>
#include <stdint.h>

#include "transport/conn.h"

typedef struct redlock__pubsub redlock__pubsub;
typedef struct redlock__watch redlock__watch;

/* with_thread: start the subscriber thread; otherwise the caller runs
 * redlock__pubsub_run() itself (in a fiber of its event loop). */
int redlock__pubsub_new(const redlock__node *nodes, size_t n_nodes,
                        int connect_timeout_ms, int with_thread, redlock__pubsub **out);
/* The subscriber: returns once redlock__pubsub_close() was called. */
void redlock__pubsub_run(redlock__pubsub *ps);
/* Tells the subscriber, and every waiter, that the client is closing. */
void redlock__pubsub_close(redlock__pubsub *ps);
void redlock__pubsub_free(redlock__pubsub *ps);

/* Watches channels[i] (a lock's release channel) on node nodes[i] for
 * each i; returns once every node confirmed its subscription, failed, or
 * deadline_ns passed. NULL only when out of memory. */
redlock__watch *redlock__pubsub_watch(redlock__pubsub *ps,
                                      const char *const *channels,
                                      const size_t *nodes, size_t n,
                                      int64_t deadline_ns);

/* Waits for a release message newer than *seen (0 = any since the watch
 * began). REDLOCK_OK when woken (and *seen updated), REDLOCK_ETIMEOUT at
 * deadline_ns or once stop(stop_ud) holds, REDLOCK_ECLOSED when the
 * client is closing. stop is tested under the lock redlock__pubsub_kick()
 * takes, at the start and after every kick; with stop NULL a kick ends
 * the wait (REDLOCK_ETIMEOUT). */
int redlock__pubsub_wait(redlock__pubsub *ps, redlock__watch *w, uint64_t *seen,
                         int64_t deadline_ns, int (*stop)(void *), void *stop_ud);

void redlock__pubsub_unwatch(redlock__pubsub *ps, redlock__watch *w);

struct redisReply;
/* Handles one reply read from node's subscriber connection, exactly as the
 * subscriber thread does (fuzz targets feed it arbitrary replies). */
void redlock__pubsub_feed(redlock__pubsub *ps, size_t node, struct redisReply *r);

/* Wakes every waiter at once (they return REDLOCK_ETIMEOUT early and look
 * again at why they wait, e.g. a cancel). */
void redlock__pubsub_kick(redlock__pubsub *ps);

#endif
