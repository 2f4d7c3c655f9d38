/* SPDX-License-Identifier: BSD-3-Clause */
/* Releases, the abort of a failed attempt and fencing phase 2 (release.c). */
#ifndef REDLOCK_LOCK_RELEASE_H
#define REDLOCK_LOCK_RELEASE_H

#include "lock/internal.h"

/* Records a member's failure (a timeout or an error) in its report. */
void redlock__note_failure(redlock_member_report *r, int err, const char *msg);

/* Undoes request_id's grant on every member with include[m] != 0. Silent
 * nodes are not waited for; what does not answer is retried in the
 * background until the lease would have run out. ticket: a fair waiter's
 * when it goes on waiting (an undone grant gives its place back), else
 * NULL. */
void redlock__abort_members(redlock_lock *l, const char *field, const char *request_id,
                            int64_t lease_ms, const char *ticket, const unsigned char *include);

/* A fair lock waiter leaves the queue on every included member (the end
 * of its wait, or its grant where the attempt did not grant it); what does
 * not answer is retried in the background while its place would last.
 * ticket is the ending wait's: a copy landing after the owner queued again
 * leaves that later place alone. */
void redlock__leave_members(redlock_lock *l, const char *field, const char *ticket,
                            const unsigned char *include);

/* Fencing phase 2: stores token on every included member (a straggler may
 * hold the lock too; the script checks that field still holds it),
 * deciding as soon as a quorum confirmed or no longer can, and never past
 * valid_until_ns. Returns the number of confirmations. */
int redlock__fence_store(redlock_lock *l, const char *field, uint64_t token,
                         const unsigned char *include, int64_t lease_ms, int64_t valid_until_ns);

/* Releases one hold on every member; drop_all drops every hold of field.
 * gens holds, per member, the generations the hold may have there (NULL:
 * unknown, any hold of field is released). *released gets members that released,
 * *decremented those that answered "still held". With at_quorum, returns
 * once a quorum released: the calls still in flight are parked in the
 * background queue until the transport settles them (retry.h); calls that
 * did not go out are queued there as usual. */
int redlock__release_members(redlock_lock *l, const char *field, const redlock__gens *gens,
                             int64_t lease_ms, int drop_all, int at_quorum, int64_t give_up_ns,
                             int *released, int *decremented, int *not_held);

/* The same release of every hold of field (drop_all), not sent before
 * not_before_ns:
 * every call goes to the background queue, due then. For a hold whose
 * loss was declared while its validity still runs (the holder was told
 * early so it can stop in time): releasing it at once would let another
 * owner in while this holder may still act within the validity it was
 * given. */
int redlock__release_members_after(redlock_lock *l, const char *field,
                                   const redlock__gens *gens, int64_t lease_ms,
                                   int64_t not_before_ns, int64_t give_up_ns);

#endif
