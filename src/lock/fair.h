/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair lock tickets (fair.c); the queue itself lives in fair_*.lua. */
#ifndef REDLOCK_LOCK_FAIR_H
#define REDLOCK_LOCK_FAIR_H

#include "lock/internal.h"

/* A waiter's ticket in decimal: the largest candidate of the first quorum
 * of members to answer within a node timeout (else REDLOCK_ENO_QUORUM with
 * the reason in redlock_last_error()). */
int redlock__fair_ticket(redlock_lock *l, int64_t lease_ms, char out[24]);

#endif
