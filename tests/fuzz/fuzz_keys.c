/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Key derivation: no two different (lock name, role) pairs ever give the
 * same Redis key, so no lock can reach (read, overwrite, delete) another
 * lock's keys, whatever the names. The fuzz version of the unit test
 * lock_names_cannot_reach_companion_keys (tests/unit/test_coordinator.c).
 *
 * Locks are made through the public API on a client whose nodes are
 * unreachable (127.0.0.1 port 1): creating a lock does no I/O. For each
 * accepted name the keys come from redlock__key(), in every role: the lock
 * hash (the name itself), a request latch (the latch prefix followed by a
 * 32-hex-digit request id), the fencing token and the hold's generations;
 * the release channel is a pub/sub channel, not a key, and is compared
 * with channels only.
 *
 * Input: byte 0 says how the second name is made (mode, role, cut) from
 * the first, bytes 1-2 the first name's length, then the first name, then
 * the rest (the second name, or what is added to the first's key). Names
 * end at their first NUL, as C strings do.
 *
 * Checked:
 *   - redlock_lock_new refuses with REDLOCK_EINVAL exactly the names that
 *     are empty or start with "redlock_gen:{", "redlock_latch:{",
 *     "redlock_facts:{", "redisson_lock_token:{", "redlock_rwwait:{",
 *     "redlock_fair:{" or "redlock_fairlapse:{" (spelled out here, so a
 *     change to the library's list must be made on purpose), and
 *     redlock__reserved_prefix agrees;
 *   - every key of an accepted name has its documented form (the token key
 *     and channel are Redisson's: Java clients share them);
 *   - every companion key of an accepted name is itself refused as a name;
 *   - for two accepted names, different (name, role) pairs give different
 *     keys (latch ids taken from the input, so two ids may coincide);
 *   - a MultiLock over both names on two nodes gives each member exactly
 *     the keys of the plain lock of its name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock/hold.h"
#include "lock/internal.h"
#include "lock/watchdog.h"
#include "redlock/redlock.h"

#define MAX_NAME 4096
#define ID_LEN 32
#define N_ROLES 5 /* name, latch, token, generations, holder facts: the keys */

static const char *const reserved[] = {"redlock_gen:{",         "redlock_latch:{",
                                       "redlock_facts:{",       "redisson_lock_token:{",
                                       "redlock_rwwait:{",      "redlock_fair:{",
                                       "redlock_fairlapse:{"};

static void require(int ok, const char *what, const char *a, const char *b)
{
    if (!ok) {
        fprintf(stderr, "fuzz_keys: %s\n  first:  '%s'\n  second: '%s'\n", what,
                a ? a : "(null)", b ? b : "(null)");
        abort();
    }
}

static redlock_client *client(void)
{
    static redlock_client *c;

    if (!c) {
        const char *uris[2] = {"redis://127.0.0.1:1", "redis://127.0.0.1:1/2"};
        redlock_options o;

        memset(&o, 0, sizeof(o));
        o.flush_timeout_ms = -1;
        if (redlock_client_new(&c, uris, 2, &o) != REDLOCK_OK) {
            fprintf(stderr, "fuzz_keys: client_new: %s\n", redlock_last_error());
            abort();
        }
    }
    return c;
}

static int should_refuse(const char *name)
{
    size_t i;

    if (!*name)
        return 1;
    for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (strncmp(name, reserved[i], strlen(reserved[i])) == 0)
            return 1;
    return 0;
}

/* A 32-hex-digit request id from input bytes (repeated if short). */
static void make_id(const uint8_t *p, size_t n, char id[ID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < ID_LEN; i++)
        id[i] = n ? hex[p[i % n] % 16] : '0';
    id[ID_LEN] = '\0';
}

typedef struct keys {
    char *k[N_ROLES];
    char *channel;
} keys;

static char *joined(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);

    require(s != NULL, "out of memory", a, b);
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
    return s;
}

static void keys_free(keys *k)
{
    size_t i;

    for (i = 0; i < N_ROLES; i++)
        free(k->k[i]);
    free(k->channel);
}

/* The keys of member m, checked against their documented forms. */
static void derive(const redlock__lock_member *m, const char *name, const char *id, keys *out)
{
    char *want;

    require(strcmp(m->name, name) == 0, "the lock's key is not its name", m->name, name);
    require(m->name_len == strlen(name), "name_len wrong", m->name, name);
    out->k[0] = joined(m->name, "", "");
    out->k[1] = joined(redlock__key(m, REDLOCK__KEY_LATCH_PREFIX), id, "");
    out->k[2] = joined(redlock__key(m, REDLOCK__KEY_TOKEN), "", "");
    out->k[3] = joined(redlock__key(m, REDLOCK__KEY_GEN), "", "");
    out->k[4] = joined(redlock__key(m, REDLOCK__KEY_FACTS), "", "");
    out->channel = joined(redlock__key(m, REDLOCK__KEY_CHANNEL), "", "");

    want = joined("redlock_latch:{", name, "}:");
    require(strncmp(out->k[1], want, strlen(want)) == 0 &&
                strcmp(out->k[1] + strlen(want), id) == 0,
            "latch key not redlock_latch:{NAME}:ID", out->k[1], name);
    free(want);
    want = joined("redisson_lock_token:{", name, "}");
    require(strcmp(out->k[2], want) == 0, "token key not Redisson's", out->k[2], name);
    free(want);
    want = joined("redlock_gen:{", name, "}");
    require(strcmp(out->k[3], want) == 0, "generation key form", out->k[3], name);
    free(want);
    want = joined("redlock_facts:{", name, "}");
    require(strcmp(out->k[4], want) == 0, "holder facts key form", out->k[4], name);
    free(want);
    want = joined("redisson_lock__channel:{", name, "}");
    require(strcmp(out->channel, want) == 0, "channel not Redisson's", out->channel, name);
    free(want);
}

/* Creates a lock named name; returns it, or NULL when refused (checked). */
static redlock_lock *make_lock(const char *name)
{
    redlock_lock *l = NULL;
    int rc = redlock_lock_new(client(), name, NULL, &l);
    int refuse = should_refuse(name);

    require((redlock__reserved_prefix(name) != NULL) == (refuse && *name),
            "redlock__reserved_prefix disagrees with the reserved prefixes", name, NULL);
    if (refuse) {
        require(rc == REDLOCK_EINVAL, "a reserved or empty name was accepted", name, NULL);
        require(l == NULL, "a refused lock was handed out", name, NULL);
        if (*name)
            require(strstr(redlock_last_error(), "may not start with") != NULL,
                    "refusal does not say why", name, redlock_last_error());
        return NULL;
    }
    require(rc == REDLOCK_OK, "a legal name was refused", name, redlock_last_error());
    require(l != NULL && redlock_lock_member_count(l) == 2, "lock shape", name, NULL);
    return l;
}

/* Every companion key of an accepted name is refused as a lock name. */
static void companions_refused(const keys *k, const char *name)
{
    size_t i;

    for (i = 1; i < N_ROLES; i++) {
        redlock_lock *other = NULL;

        require(redlock_lock_new(client(), k->k[i], NULL, &other) == REDLOCK_EINVAL,
                "a companion key is accepted as a lock name", name, k->k[i]);
        require(other == NULL, "a refused lock was handed out", name, k->k[i]);
    }
}

static void distinct(const char *a, const keys *ka, const char *b, const keys *kb)
{
    int same_name = strcmp(a, b) == 0;
    size_t i, j;

    for (i = 0; i < N_ROLES; i++)
        for (j = 0; j < N_ROLES; j++) {
            if (same_name && i == j)
                continue;
            if (strcmp(ka->k[i], kb->k[j]) == 0) {
                fprintf(stderr, "fuzz_keys: role %zu of the first and role %zu of the "
                                "second give '%s'\n", i, j, ka->k[i]);
                require(0, "two (name, role) pairs share a key", a, b);
            }
        }
    require(same_name == (strcmp(ka->channel, kb->channel) == 0),
            "channels collide or differ wrongly", a, b);
}

/* A MultiLock over (0, a), (1, b), (1, a): each member has its name's keys,
 * and members with the same name may share them. */
static void multilock_matches(const char *a, const keys *ka, const char *id_a, const char *b,
                              const keys *kb, const char *id_b)
{
    redlock_member ms[3] = {{0, a}, {1, b}, {1, a}};
    redlock_lock *l = NULL;
    size_t i, r;

    require(redlock_multilock_new(client(), ms, 3, NULL, &l) == REDLOCK_OK,
            "multilock of legal names refused", a, b);
    for (i = 0; i < 3; i++) {
        const keys *want = i == 1 ? kb : ka;
        keys got;

        derive(&l->members[i], i == 1 ? b : a, i == 1 ? id_b : id_a, &got);
        for (r = 0; r < N_ROLES; r++)
            require(strcmp(got.k[r], want->k[r]) == 0, "a MultiLock member's keys differ",
                    i == 1 ? b : a, got.k[r]);
        keys_free(&got);
    }
    redlock_lock_free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char a[MAX_NAME + 1], b[3 * MAX_NAME + 64], id_a[ID_LEN + 1], id_b[ID_LEN + 1];
    const uint8_t *rest;
    size_t la, lrest, mode, role, cut;
    redlock_lock *lock_a, *lock_b;
    keys ka, kb;

    if (size < 3 || size > MAX_NAME)
        return 0;
    mode = data[0] % 4;
    role = 1 + data[0] / 4 % 3;       /* a companion key role */
    cut = data[0] / 16;               /* 0..15 */
    la = ((size_t)data[1] << 8 | data[2]) % (size - 3 + 1);
    memcpy(a, data + 3, la);
    a[la] = '\0';
    rest = data + 3 + la;
    lrest = size - 3 - la;
    make_id(data + 1, size - 1, id_a);
    make_id(rest, lrest, id_b);

    lock_a = make_lock(a);
    /* The second name: independent, or made from the first. */
    if (mode == 0 || !lock_a) {
        memcpy(b, rest, lrest);
        b[lrest] = '\0';
    } else {
        const char *key = redlock__key(&lock_a->members[0], (redlock__key_kind)role);
        size_t lk = strlen(key), off = mode == 2 ? (cut < lk ? cut : lk) : 0;

        /* 1: a companion key plus a tail; 2: one with its first bytes cut
         * off; 3: the first name plus a tail. */
        if (mode == 3)
            snprintf(b, sizeof(b), "%s", a);
        else
            snprintf(b, sizeof(b), "%s", key + off);
        if (mode != 2) {
            size_t lb = strlen(b);

            memcpy(b + lb, rest, lrest);
            b[lb + lrest] = '\0';
        }
    }
    lock_b = make_lock(b);

    if (lock_a) {
        derive(&lock_a->members[0], a, id_a, &ka);
        companions_refused(&ka, a);
    }
    if (lock_b) {
        derive(&lock_b->members[0], b, id_b, &kb);
        companions_refused(&kb, b);
    }
    if (lock_a && lock_b) {
        distinct(a, &ka, b, &kb);
        /* The same name with the same id: only the roles must differ. */
        if (strcmp(a, b) != 0) {
            keys kc;

            derive(&lock_b->members[0], b, id_a, &kc);
            distinct(a, &ka, b, &kc);
            keys_free(&kc);
        }
        multilock_matches(a, &ka, id_a, b, &kb, id_b);
    }
    if (lock_a)
        keys_free(&ka);
    if (lock_b)
        keys_free(&kb);
    redlock_lock_free(lock_b);
    redlock_lock_free(lock_a);
    return 0;
}
