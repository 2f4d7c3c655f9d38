/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock layer's fan-out, with node silence tracking (health.c). */
#ifndef REDLOCK_LOCK_HEALTH_H
#define REDLOCK_LOCK_HEALTH_H

#include "lock/internal.h"

/* The transport's fan-out, noting on the way which nodes went silent (a
 * request timed out) and which answered. Every fan-out of the lock layer
 * goes through here. */
int redlock__fanout(redlock_client *c, const redlock__batch *batches, size_t n,
                    redlock__reply_fn fn, void *ud);
/* Whether err is a refusal that waiting cannot fix (auth, TLS, config). */
int redlock__refuses_for_good(int err);
/* Marks node silent: a request to it went unanswered for a node timeout. */
void redlock__node_went_silent(redlock_client *c, size_t node);
/* Nonzero while node's last request timed out and nothing came since. */
int redlock__node_silent(const redlock_client *c, size_t node);
/* The transport's settle hook (ud is the client): settles the parked
 * release of token in the background queue, and warns of a refusal in
 * its error reply as any answer would. */
void redlock__ledger_settled(void *ud, uint64_t token, int delivered, const char *error);

#endif
