/*
 * Which nodes are silent, as the lock layer sees them: a node whose last
 * request timed out is silent until any reply comes from it again.
 *
 * A release sends its call to a silent node but does not wait for the
 * answer (the background retries it until it lands or the lease could
 * have expired there), so while a node is frozen or cut off, unlock costs
 * a round trip to the others instead of a node timeout every time. Only
 * releases use it: an acquire decides on the first quorum anyway, and a
 * watchdog tick needs every answer it can get.
 */
#include "core/error.h"
#include "lock/internal.h"

typedef struct observed {
    redlock_client *c;
    const redlock__batch *batches;
    redlock__reply_fn fn;
    void *ud;
} observed;

static int observe(void *ud, size_t batch, size_t call, int err, const char *msg,
                   struct redisReply *r)
{
    observed *o = ud;
    size_t node = o->batches[batch].node;

    if (err == REDLOCK_ETIMEOUT)
        redlock__node_went_silent(o->c, node);
    else if (!err)
        __atomic_store_n(&o->c->node_silent[node], 0, __ATOMIC_RELAXED);
    return o->fn(o->ud, batch, call, err, msg, r);
}

int redlock__fanout(redlock_client *c, const redlock__batch *batches, size_t n,
                    redlock__reply_fn fn, void *ud)
{
    observed o = {c, batches, fn, ud};

    return c->tp.ops->fanout(c->tp.ctx, batches, n, observe, &o);
}

void redlock__node_went_silent(redlock_client *c, size_t node)
{
    if (node < REDLOCK__MAX_NODES)
        __atomic_store_n(&c->node_silent[node], 1, __ATOMIC_RELAXED);
}

int redlock__node_silent(const redlock_client *c, size_t node)
{
    return node < REDLOCK__MAX_NODES &&
           __atomic_load_n(&c->node_silent[node], __ATOMIC_RELAXED);
}
