/* SPDX-License-Identifier: BSD-3-Clause */
/* A handle's hold: generations and state (hold.c). Every function is
 * called with l->mu held. */
#ifndef REDLOCK_LOCK_HOLD_H
#define REDLOCK_LOCK_HOLD_H

#include "lock/internal.h"

/* A generation as the scripts write it: exactly REDLOCK__GEN_LEN lowercase
 * hex digits (a request id). */
int redlock__gen_valid(const char *gen);
/* Adds a valid gen to list (dropping the oldest when full). */
void redlock__gens_add(redlock__gens *list, const char *gen);
/* Makes list the one generation a member reported ("" : unknown). */
void redlock__gens_set(redlock__gens *list, const char *gen);
void redlock__gens_format(const redlock__gens *list, redlock__gens_text out);

/* Frees a handle's memory: members, key blocks, mutex, itself. The caller
 * made sure nothing uses it (unlisted from the watchdog, no tick pins it). */
void redlock__hold_free_handle(redlock_lock *l);

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
