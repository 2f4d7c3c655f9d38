/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What redlock exec holds while its command runs: a lock (plain, or a side
 * of a read-write lock) or permits of a semaphore. The calls differ only
 * in their handles; exec.c uses these and treats every kind alike.
 */
#include <string.h>

#include "cli.h"

int cli_hold_new(cli_globals *g, redlock_client *c, const cli_exec_opts *o,
                 const char *holder_command, cli_hold *h)
{
    memset(h, 0, sizeof(*h));
    h->client = c;
    if (o->permits) {
        h->what = o->permit_count > 1 ? "permits" : "permit";
        h->permit_count = o->permit_count;
        return cli_semaphore_new(g, c, o->name, o->permits, &h->sem);
    }
    switch (o->kind) {
    case REDLOCK_LOCK_READ:
        /* Holder facts name one holder; readers are many (status lists
         * them from the lock's own fields instead). */
        h->what = "read hold";
        holder_command = NULL;
        break;
    case REDLOCK_LOCK_WRITE:
        h->what = "write hold";
        break;
    case REDLOCK_LOCK_FAIR:
        h->what = "fair lock";
        break;
    default:
        h->what = "lock";
        break;
    }
    return cli_lock_new_kind(g, c, o->name, o->kind, o->fencing, holder_command, &h->lock);
}

void cli_hold_set_on_lost(cli_hold *h, redlock_on_lost_fn fn, void *ud)
{
    if (h->sem)
        redlock_semaphore_set_on_lost(h->sem, fn, ud);
    else
        redlock_lock_set_on_lost(h->lock, fn, ud);
}

int cli_hold_acquire(cli_hold *h, int64_t wait_ms, int64_t lease_ms)
{
    if (h->sem)
        return redlock_semaphore_acquire(h->sem, h->permit_count, wait_ms, lease_ms, &h->permit);
    return redlock_acquire_as(h->lock, redlock_thread_owner(), wait_ms, lease_ms);
}

redlock_lock *cli_hold_report_lock(const cli_hold *h)
{
    if (h->sem)
        return h->permit ? redlock_permit_lock(h->permit) : NULL;
    return h->lock;
}

size_t cli_hold_members(const cli_hold *h)
{
    return h->sem ? redlock_client_node_count(h->client) : redlock_lock_member_count(h->lock);
}

int cli_hold_remaining_ttl(cli_hold *h, int64_t *ms)
{
    if (h->sem)
        return redlock_permit_remaining_ttl(h->permit, ms);
    return redlock_remaining_ttl(h->lock, ms);
}

int cli_hold_token(cli_hold *h, uint64_t *token)
{
    /* exec refuses --fencing for shared holds before anything is made. */
    return redlock_lock_token(h->lock, token);
}

int cli_hold_release(cli_hold *h)
{
    redlock_permit *p = h->permit;

    if (h->sem) {
        h->permit = NULL;
        return redlock_semaphore_release(p);
    }
    return redlock_unlock(h->lock);
}

void cli_hold_free(cli_hold *h)
{
    /* A permit still here was never released: its lease runs out. */
    redlock_semaphore_free(h->sem);
    redlock_lock_free(h->lock);
    memset(h, 0, sizeof(*h));
}
