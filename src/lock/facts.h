/* SPDX-License-Identifier: BSD-3-Clause */
/* Holder facts: who holds a lock, in a companion key beside it (facts.c). */
#ifndef REDLOCK_LOCK_FACTS_H
#define REDLOCK_LOCK_FACTS_H

#include <stddef.h>
#include <stdint.h>

#include "lock/internal.h"

/* The most bytes of a recorded command line. */
#define REDLOCK__FACTS_COMMAND_MAX 200

/* Keeps opts' holder facts settings in l (a copy of the command, masked
 * and cut); redlock_lock_new calls it. REDLOCK_OK, or REDLOCK_ENOMEM. */
int redlock__facts_configure(redlock_lock *l, const redlock_lock_options *opts);
/* Frees l's settings; called when l is freed. */
void redlock__facts_forget(redlock_lock *l);
/* Whether fresh holds through l write facts. Set once when l is made, so
 * no mutex: callable with wd.mu or l->mu held. */
int redlock__facts_wanted(const redlock_lock *l);

/* After a fresh acquisition (not a re-entry) with the hold's field and
 * lease: writes the facts on every member that granted that hold, if l
 * wants them. One pipelined batch per node; answers only logged. */
void redlock__facts_after_grant(redlock_lock *l, const char *field, int64_t lease_ms,
                                const redlock__attempt_result *res);

/* The stored value: "v=1\nowner=...\nhost=...\npid=...\nsince_ms=...\n
 * command=...\n", each string escaped so it stays on its line. Writes at
 * most cap bytes with a NUL; returns the length it needed (as snprintf).
 * f's strings longer than their fields are cut. */
size_t redlock__facts_format(char *out, size_t cap, const redlock_holder_facts *f);
/* Parses a stored value strictly: every line, in order, each value within
 * its field. Returns 0 (out filled, out->found set) or -1 (out->found 0). */
int redlock__facts_parse(const char *text, size_t len, redlock_holder_facts *out);

#endif
