/* SPDX-License-Identifier: BSD-3-Clause */
/* The key namespace of a lock (keys.c). */
#ifndef REDLOCK_LOCK_KEYS_H
#define REDLOCK_LOCK_KEYS_H

#include <stddef.h>
#include <stdint.h>

struct redlock__lock_member;

/* Which key of a lock's block (the name comes first, then these). */
typedef enum redlock__key_kind {
    REDLOCK__KEY_LATCH_PREFIX = 1, /* "redlock_latch:{NAME}:" */
    REDLOCK__KEY_TOKEN,            /* "redisson_lock_token:{NAME}" */
    REDLOCK__KEY_CHANNEL,          /* "redisson_lock__channel:{NAME}" */
    REDLOCK__KEY_GEN,              /* "redlock_gen:{NAME}": 0.1's generations,
                                    * no longer written for locks; a
                                    * semaphore's scripts keep there the
                                    * limit its permits were taken with and
                                    * each permit handle's request id */
    REDLOCK__KEY_FACTS,            /* "redlock_facts:{NAME}" (facts.c) */
    /* Only in the blocks of read-write locks and semaphores (lock_kind !=
     * REDLOCK__KIND_MUTEX), named as Redisson names them: */
    REDLOCK__KEY_KIND_CHANNEL,     /* "redisson_rwlock:{NAME}",
                                    * "redisson_sc:{NAME}", or for a fair lock
                                    * "redisson_lock__channel:{NAME}", the
                                    * prefix of each waiter's own channel */
    REDLOCK__KEY_AUX,              /* read-write: "redlock_rwwait:{NAME}", the
                                    * waiting-writer mark; semaphore:
                                    * "{NAME}:timeout", the permits taken;
                                    * fair: "redisson_lock_queue:{NAME}" */
    REDLOCK__KEY_AUX2,             /* fair: "redisson_lock_timeout:{NAME}" */
    REDLOCK__KEY_AUX3,             /* fair: "redlock_fair:{NAME}", the tickets */
    REDLOCK__KEY_AUX4              /* fair: "redlock_fairlapse:{NAME}", when our
                                    * waiters' places lapse */
} redlock__key_kind;

/* A key of m's block; no allocation, and no string measuring up to
 * REDLOCK__KEY_FACTS (the ones every renewal and release uses). */
const char *redlock__key(const struct redlock__lock_member *m, redlock__key_kind kind);

/* The channel a release of a lock of lock_kind publishes on. */
const char *redlock__channel(const struct redlock__lock_member *m, int lock_kind);

/* A fair lock waiter's own channel, "<KIND_CHANNEL>:<field>" (malloc'd;
 * NULL when out of memory): releases wake only the next waiter. */
char *redlock__waiter_channel(const struct redlock__lock_member *m, const char *field);

/* Builds m's block for name, for a lock of lock_kind (a redlock__kind)
 * (REDLOCK_OK or REDLOCK_ENOMEM); m owns it. */
int redlock__member_keys(struct redlock__lock_member *m, const char *name, int lock_kind);
/* m uses from's block (the same name on another node). */
void redlock__share_keys(struct redlock__lock_member *m, const struct redlock__lock_member *from);

/* The reserved prefix name starts with (no lock name may), or NULL. */
const char *redlock__reserved_prefix(const char *name);
/* REDLOCK_OK, or REDLOCK_EINVAL with a message: empty, too long, or a
 * reserved prefix (see redlock_lock_new in the public header). */
int redlock__check_name(const char *name);

/* "<latch prefix><request id>": a request's cancel mark (acquire.lua),
 * unique to that request (malloc'd; NULL when out of memory). */
char *redlock__latch_key(const struct redlock__lock_member *m, const char *request_id);
/* Room for the latch keys of a lock's first members in a call's own
 * context: five members, names of up to about 80 bytes. */
#define REDLOCK__LATCH_ROOMS 5
#define REDLOCK__LATCH_ROOM_BYTES 128
/* The same key in room when it fits in cap bytes (room may be NULL), else
 * in a new block put in *owned for the caller to free (*owned is NULL
 * otherwise). NULL when out of memory. A lock cycle builds two of these:
 * their allocations were the library's last per-cycle own ones. */
const char *redlock__latch_key_in(const struct redlock__lock_member *m, const char *request_id,
                                  char *room, size_t cap, char **owned);

#endif
