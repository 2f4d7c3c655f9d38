/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The key namespace of a lock: every key and channel derived from a lock
 * name, and the rule that keeps names from reaching each other's keys.
 * The bottom of the lock layer: it knows names, nothing else.
 */
#include "lock/keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lock/internal.h"

#define LATCH_PREFIX "redlock_latch:{"
#define TOKEN_PREFIX "redisson_lock_token:{"
#define CHANNEL_PREFIX "redisson_lock__channel:{"
#define GEN_PREFIX "redlock_gen:{"
#define FACTS_PREFIX "redlock_facts:{"
#define RWWAIT_PREFIX "redlock_rwwait:{"
#define FAIR_PREFIX "redlock_fair:{"
#define FAIRLAPSE_PREFIX "redlock_fairlapse:{"

/* A member's block: the name, then each key of redlock__key_kind in order,
 * each NUL-terminated. Members with the same name (a RedLock) share one.
 * `fixed` is the key's length without the name, so finding a key (done for
 * every member of every lock on each watchdog tick) never measures strings. */
#define KEY_FORMAT(prefix, suffix) {prefix "%s" suffix, sizeof(prefix suffix) - 1}
static const struct {
    const char *format;
    size_t fixed;
} key_formats[] = {
    KEY_FORMAT("", ""),
    KEY_FORMAT(LATCH_PREFIX, "}:"),
    KEY_FORMAT(TOKEN_PREFIX, "}"),
    KEY_FORMAT(CHANNEL_PREFIX, "}"),
    KEY_FORMAT(GEN_PREFIX, "}"),
    KEY_FORMAT(FACTS_PREFIX, "}"),
};
#define N_KEY_FORMATS (sizeof(key_formats) / sizeof(key_formats[0]))

static size_t key_size(size_t i, size_t name_len)
{
    return key_formats[i].fixed + name_len + 1;
}

const char *redlock__key(const redlock__lock_member *m, redlock__key_kind kind)
{
    const char *p = m->name;
    size_t i;

    for (i = 0; i < (size_t)kind && i < N_KEY_FORMATS; i++)
        p += key_size(i, m->name_len);
    /* The kinds' own keys follow, their length depending on the name. */
    for (; i < (size_t)kind; i++)
        p += strlen(p) + 1;
    return p;
}

const char *redlock__channel(const redlock__lock_member *m, int lock_kind)
{
    return redlock__key(m, lock_kind == REDLOCK__KIND_MUTEX ? REDLOCK__KEY_CHANNEL
                                                            : REDLOCK__KEY_KIND_CHANNEL);
}

char *redlock__waiter_channel(const redlock__lock_member *m, const char *field)
{
    const char *prefix = redlock__key(m, REDLOCK__KEY_KIND_CHANNEL);
    size_t plen = strlen(prefix), flen = strlen(field);
    char *chan = malloc(plen + flen + 2);

    if (chan) {
        memcpy(chan, prefix, plen);
        chan[plen] = ':';
        memcpy(chan + plen + 1, field, flen + 1);
    }
    return chan;
}

/*
 * The keys of read-write locks and semaphores, as Redisson derives them:
 * prefixName() wraps the name in a hash tag unless it has one, and
 * suffixName() does the same before its suffix.
 */
static int kind_keys(char **out, size_t *len, const char *name, int lock_kind)
{
    const char *channel = lock_kind == REDLOCK__KIND_SEMAPHORE ? "redisson_sc"
                          : lock_kind == REDLOCK__KIND_FAIR    ? "redisson_lock__channel"
                                                               : "redisson_rwlock";
    const char *tagged = strchr(name, '{') ? "%s:%s" : "%s:{%s}";
    size_t n = strlen(name);
    char *p;

    *len = 5 * n + 200;
    if (!(p = *out = malloc(*len)))
        return REDLOCK_ENOMEM;
    p += snprintf(p, n + 40, tagged, channel, name) + 1;
    if (lock_kind == REDLOCK__KIND_SEMAPHORE) {
        p += snprintf(p, n + 40, strchr(name, '{') ? "%s:timeout" : "{%s}:timeout", name) + 1;
    } else if (lock_kind == REDLOCK__KIND_FAIR) {
        p += snprintf(p, n + 40, tagged, "redisson_lock_queue", name) + 1;
        p += snprintf(p, n + 40, tagged, "redisson_lock_timeout", name) + 1;
        p += snprintf(p, n + 40, FAIR_PREFIX "%s}", name) + 1;
        p += snprintf(p, n + 40, FAIRLAPSE_PREFIX "%s}", name) + 1;
    } else {
        p += snprintf(p, n + 40, RWWAIT_PREFIX "%s}", name) + 1;
    }
    *len = (size_t)(p - *out);
    return REDLOCK_OK;
}

int redlock__member_keys(redlock__lock_member *m, const char *name, int lock_kind)
{
    size_t name_len = strlen(name), total = 0, extra_len = 0, i;
    char *p, *extra = NULL;

    if (lock_kind != REDLOCK__KIND_MUTEX &&
        kind_keys(&extra, &extra_len, name, lock_kind) != REDLOCK_OK)
        return REDLOCK_ENOMEM;
    for (i = 0; i < N_KEY_FORMATS; i++)
        total += key_size(i, name_len);
    if (!(p = malloc(total + extra_len))) {
        free(extra);
        return REDLOCK_ENOMEM;
    }
    m->name = p;
    m->name_len = (uint32_t)name_len;
    m->owns_keys = 1;
    for (i = 0; i < N_KEY_FORMATS; i++)
        p += snprintf(p, key_size(i, name_len), key_formats[i].format, name) + 1;
    if (extra)
        memcpy(p, extra, extra_len);
    free(extra);
    return REDLOCK_OK;
}

void redlock__share_keys(redlock__lock_member *m, const redlock__lock_member *from)
{
    m->name = from->name;
    m->name_len = from->name_len;
    m->owns_keys = 0;
}

/*
 * Every key derived from a lock name starts with one of these prefixes, and
 * no lock name may: so no lock can be (or overwrite) another lock's
 * companion key, whatever its name. The release channel is not a key and
 * is Redisson's, so it is not reserved.
 */
static const char *const reserved_prefixes[] = {LATCH_PREFIX, TOKEN_PREFIX, GEN_PREFIX,
                                                FACTS_PREFIX, RWWAIT_PREFIX, FAIR_PREFIX,
                                                FAIRLAPSE_PREFIX};

const char *redlock__reserved_prefix(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof(reserved_prefixes) / sizeof(reserved_prefixes[0]); i++)
        if (strncmp(name, reserved_prefixes[i], strlen(reserved_prefixes[i])) == 0)
            return reserved_prefixes[i];
    return NULL;
}

int redlock__check_name(const char *name)
{
    const char *prefix;
    size_t len;

    if (!name || !*name)
        return redlock__fail(REDLOCK_EINVAL, "lock name is empty");
    len = strnlen(name, REDLOCK__MAX_NAME + 1);
    if (len > REDLOCK__MAX_NAME)
        return redlock__fail(REDLOCK_EINVAL, "lock name longer than %d bytes",
                             REDLOCK__MAX_NAME);
    if ((prefix = redlock__reserved_prefix(name)) != NULL)
        return redlock__fail(REDLOCK_EINVAL,
                             "lock names may not start with '%s': the library keeps "
                             "each lock's own keys under that prefix", prefix);
    return REDLOCK_OK;
}

char *redlock__latch_key(const redlock__lock_member *m, const char *request_id)
{
    char *owned;

    return redlock__latch_key_in(m, request_id, NULL, 0, &owned) ? owned : NULL;
}

const char *redlock__latch_key_in(const redlock__lock_member *m, const char *request_id,
                                  char *room, size_t cap, char **owned)
{
    const char *prefix = redlock__key(m, REDLOCK__KEY_LATCH_PREFIX);
    size_t plen = strlen(prefix), rlen = strlen(request_id);
    char *key = room;

    /* Built on every acquire and release: copied, not printf'd. */
    *owned = NULL;
    if (!room || plen + rlen + 1 > cap) {
        if (!(key = *owned = malloc(plen + rlen + 1)))
            return NULL;
    }
    memcpy(key, prefix, plen);
    memcpy(key + plen, request_id, rlen + 1);
    return key;
}
