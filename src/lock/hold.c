/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bookkeeping of a handle's hold: which generations it may have on each
 * member, when it was taken, which owners lost it. Called with the lock's
 * mutex held; no I/O, no callbacks.
 */
#include "lock/hold.h"

#include "lock/context.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

int redlock__gen_valid(const char *gen)
{
    size_t i;

    for (i = 0; i < REDLOCK__GEN_LEN; i++)
        if (hex_digit(gen[i]) < 0)
            return 0;
    return gen[REDLOCK__GEN_LEN] == '\0';
}

void redlock__gens_add(redlock__gens *list, const char *gen)
{
    if (!redlock__gen_valid(gen))
        return;
    if (list->n == REDLOCK__GEN_KEEP) {
        memmove(list->id[0], list->id[1], sizeof(list->id) - sizeof(list->id[0]));
        list->n--;
    }
    memcpy(list->id[list->n++], gen, REDLOCK__GEN_LEN);
}

void redlock__gens_set(redlock__gens *list, const char *gen)
{
    list->n = 0;
    redlock__gens_add(list, gen);
}

void redlock__gens_format(const redlock__gens *list, redlock__gens_text out)
{
    char *p = out;
    size_t g;

    for (g = 0; g < list->n; g++) {
        if (g)
            *p++ = ',';
        memcpy(p, list->id[g], REDLOCK__GEN_LEN);
        p += REDLOCK__GEN_LEN;
    }
    *p = '\0';
}

static void remember_lost(redlock_lock *l, uint64_t owner)
{
    l->lost_owners[l->lost_next++ % REDLOCK__LOST_MEMORY] = owner;
}

int redlock__hold_forget_lost(redlock_lock *l, uint64_t owner)
{
    size_t i;

    for (i = 0; i < REDLOCK__LOST_MEMORY; i++) {
        if (l->lost_owners[i] == owner && owner != 0) {
            l->lost_owners[i] = 0;
            return 1;
        }
    }
    return 0;
}

void redlock__hold_mark_lost(redlock_lock *l, int reason)
{
    uint64_t owner = l->owner;

    if (l->state != REDLOCK__HELD)
        return;
    l->state = REDLOCK__LOST;
    l->lost_reason = reason;
    remember_lost(l, owner);
    redlock__stat_add(&l->client->stats.lost, 1);
    redlock__log(l->client, REDLOCK_LOG_WARN, "lock '%s' lost by owner %llu: %s",
                 l->members[0].name, (unsigned long long)owner, redlock_strerror(reason));
}

int redlock__hold_record(redlock_lock *l, uint64_t owner, const char *field, int64_t lease_ms,
                         int watchdog, const redlock__attempt_result *res, int64_t now)
{
    size_t m;

    /* A member that answered says which hold it granted or re-entered. One
     * that did not may still grant afresh with this request's id. A re-entry
     * there may instead re-enter the hold we know of, or a leftover of an
     * earlier one whose release has not reached it yet: its release may
     * carry any of these (older ids never name a newer hold, so keeping
     * them is safe). A fresh request replaces such leftovers instead, and
     * their own releases carry their ids: its hold needs this id alone. */
    for (m = 0; m < l->n; m++) {
        if (res->gen_reported[m])
            redlock__gens_set(&l->members[m].gens, res->gens[m]);
        else if (res->fresh)
            redlock__gens_set(&l->members[m].gens, res->request_id);
        else
            redlock__gens_add(&l->members[m].gens, res->request_id);
    }
    if (l->state == REDLOCK__HELD && l->owner == owner) {
        l->count++;
    } else {
        l->state = REDLOCK__HELD;
        l->owner = owner;
        l->count = 1;
        l->watchdog = watchdog;
        l->acquired_ns = now;
        l->token = res->token;
        redlock__copy_msg(l->field, sizeof(l->field), field);
        redlock__hold_forget_lost(l, owner);
    }
    l->lease_ms = lease_ms;
    l->validity_end_ns = res->valid_until_ns;
    l->next_renew_ns = now + lease_ms * REDLOCK__NS_PER_MS / 3;
    return l->watchdog;
}

void redlock__hold_free_handle(redlock_lock *l)
{
    size_t i;

    for (i = 0; l->members && i < l->n; i++)
        if (l->members[i].owns_keys)
            free(l->members[i].name);
    free(l->members);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
