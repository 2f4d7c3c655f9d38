/* SPDX-License-Identifier: BSD-3-Clause */
/* One acquire attempt over every member (quorum.c); releases are in
 * release.h. */
#ifndef REDLOCK_LOCK_QUORUM_H
#define REDLOCK_LOCK_QUORUM_H

#include "lock/internal.h"
#include "lock/release.h"


/* reentry: the owner holds the lock through this handle; otherwise a field
 * of the owner found on a member is a leftover to replace, never re-entered.
 * wait_left_ms: how long the caller goes on waiting after this attempt (0
 * none, < 0 for ever): a write hold's waiting-writer mark lives no longer.
 * ticket: a fair lock waiter's ticket (it queues by it), or NULL. */
int redlock__attempt(redlock_lock *l, const char *field, int64_t lease_ms, int reentry,
                     int64_t wait_left_ms, const char *ticket, redlock__attempt_result *res);

/* Re-acquires the included members (their keys vanished) without counting
 * them; used by the watchdog to restore the fault margin. The hold of field
 * records the restore's request as its generation on those members. */
void redlock__restore_members(redlock_lock *l, const char *field, int64_t lease_ms,
                              const unsigned char *include, int64_t deadline_ns);

#endif
