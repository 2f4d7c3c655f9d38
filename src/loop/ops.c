/* SPDX-License-Identifier: BSD-3-Clause */
/* The operations a loop-driven client starts: each is the blocking call,
 * run as a task (loop.c). */
#include "loop/loop.h"

#include "lock/context.h"

static int acquire_fn(redlock__task *t)
{
    int rc;

    /* Canceled between its start and now: the blocking call would only
     * see cancels made after it began. */
    if (__atomic_load_n(&t->lock->cancels, __ATOMIC_ACQUIRE) != t->cancels)
        return redlock__fail(REDLOCK_ECANCELED, "lock '%s': acquire canceled",
                             redlock_lock_name(t->lock));
    rc = redlock__acquire_seen(t->lock, t->owner, t->wait_ms, t->lease_ms, t->cancels);

    /* A grant that came in while the handle was being freed: nobody can
     * release it any more, so it is released now. */
    if (rc == REDLOCK_OK && redlock__loop_freeing(t->loop, t->lock)) {
        (void)redlock_unlock_as(t->lock, t->owner);
        rc = redlock__fail(REDLOCK_ECANCELED, "lock '%s' was freed while being acquired",
                           redlock_lock_name(t->lock));
    }
    return rc;
}

static int unlock_fn(redlock__task *t)
{
    return redlock_unlock_as(t->lock, t->owner);
}

int redlock__loop_run_sync(void *ud, redlock_lock *l, int unlock, uint64_t owner,
                           int64_t wait_ms, int64_t lease_ms)
{
    redlock__task *t = NULL;
    int rc = redlock__task_start_ex(l->client, l, unlock ? unlock_fn : acquire_fn, NULL, owner,
                                    wait_ms, lease_ms, NULL, NULL, &t, NULL);

    if (rc != REDLOCK_OK)
        return rc;
    return redlock__loop_run(ud, t);
}

int redlock__loop_start_relayed(redlock_client *c, redlock_lock *l, int unlock, uint64_t owner,
                                int64_t wait_ms, int64_t lease_ms, uint64_t cancels_seen,
                                redlock_done_fn done, void *userdata)
{
    /* No undo: the caller waits for the outcome, and its redlock_lock_free
     * is relayed behind it. */
    return redlock__task_start_ex(c, l, unlock ? unlock_fn : acquire_fn, NULL, owner, wait_ms,
                                  lease_ms, done, userdata, NULL, &cancels_seen);
}

static int check(redlock_lock *l, uint64_t owner, redlock_done_fn done)
{
    if (!l || !done)
        return redlock__fail(REDLOCK_EINVAL, "lock and done are required");
    if (owner == 0)
        return redlock__fail(REDLOCK_EINVAL, "owner id 0 is reserved");
    if (!redlock__loop_of(l->client))
        return REDLOCK_EINVAL;
    return REDLOCK_OK;
}

int redlock_acquire_async(redlock_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms,
                          redlock_done_fn done, void *userdata)
{
    int rc = check(l, owner, done);

    if (rc != REDLOCK_OK)
        return rc;
    if (redlock__canceled(l->client))
        return redlock__fail(REDLOCK_ECANCELED, "lock '%s': the client was canceled",
                             redlock_lock_name(l));
    return redlock__task_start(l->client, l, acquire_fn, unlock_fn, owner, wait_ms, lease_ms,
                               done, userdata);
}

int redlock_unlock_async(redlock_lock *l, uint64_t owner, redlock_done_fn done, void *userdata)
{
    int rc = check(l, owner, done);

    if (rc != REDLOCK_OK)
        return rc;
    return redlock__task_start(l->client, l, unlock_fn, NULL, owner, 0, 0, done, userdata);
}
