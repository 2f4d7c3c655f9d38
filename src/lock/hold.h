/* A handle's hold: generations and state (hold.c). Every function is
 * called with l->mu held. */
#ifndef REDLOCK_LOCK_HOLD_H
#define REDLOCK_LOCK_HOLD_H

#include "lock/internal.h"

/* Records an acquisition (fresh or a re-entry) from the attempt's result.
 * Returns nonzero when the hold is renewed by the watchdog. */
int redlock__hold_record(redlock_lock *l, uint64_t owner, const char *field, int64_t lease_ms,
                         int watchdog, const redlock__attempt_result *res, int64_t now);

/* Marks the current hold lost and remembers its owner, so that owner's
 * unlock reports REDLOCK_ELOST. The caller tells the holder (on_lost),
 * after dropping l->mu. */
void redlock__hold_mark_lost(redlock_lock *l, int reason);

/* Forgets that owner lost the lock; nonzero if it had. */
int redlock__hold_forget_lost(redlock_lock *l, uint64_t owner);

#endif
