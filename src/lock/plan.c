/* SPDX-License-Identifier: BSD-3-Clause */
#include "lock/plan.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"

void redlock__plan_free(redlock__plan *p)
{
    size_t i;

    for (i = 0; p->owned && i < p->n; i++)
        free(p->owned[i]);
    redlock__scratch_free(p->block, p->own);
    memset(p, 0, offsetof(redlock__plan, own));
}

/* Every array of a plan in one allocation: a lock cycle makes several
 * plans, and each used to cost six. Each part's size is a multiple of 8,
 * so every part stays aligned for pointers and 64-bit fields. */
static int plan_alloc(redlock__plan *p, size_t count)
{
    size_t c = count ? count : 1;
    size_t calls = c * sizeof(*p->calls), batches = c * sizeof(*p->batches);
    size_t member = c * sizeof(size_t), starts = c * sizeof(size_t);
    size_t argv = c * REDLOCK__MAX_CALL_ARGS * sizeof(char *), owned = c * sizeof(char *);
    char *b = redlock__scratch(p->own, sizeof(p->own),
                               calls + batches + member + starts + argv + owned);

    _Static_assert(sizeof(redlock__call) % 8 == 0 && sizeof(redlock__batch) % 8 == 0,
                   "plan parts keep their alignment");
    if (!b)
        return -1;
    p->block = b;
    p->calls = (redlock__call *)b;
    p->batches = (redlock__batch *)(b + calls);
    p->member = (size_t *)(b + calls + batches);
    p->batch_start = (size_t *)(b + calls + batches + member);
    p->argv = (const char **)(b + calls + batches + member + starts);
    p->owned = (char **)(b + calls + batches + member + starts + argv);
    return 0;
}

int redlock__plan_build(redlock__plan *p, const redlock_lock *l,
                        const unsigned char *include, redlock__plan_fill fill, void *ud,
                        int64_t deadline_ns)
{
    return redlock__plan_build_trailed(p, l, include, fill, ud, deadline_ns, NULL);
}

int redlock__plan_build_trailed(redlock__plan *p, const redlock_lock *l,
                                const unsigned char *include, redlock__plan_fill fill,
                                void *ud, int64_t deadline_ns, const redlock__call *trailer)
{
    size_t m, node, k = 0, count = 0;

    /* Not the inline block: plan_alloc() clears what it uses of it. */
    memset(p, 0, offsetof(redlock__plan, own));
    for (m = 0; m < l->n; m++)
        count += !include || include[m];
    /* At most one trailer per member's batch. */
    if (plan_alloc(p, trailer ? 2 * count : count) != 0)
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    /* Group by node so each node gets one pipelined batch, even when a
     * MultiLock puts several names on it. */
    for (node = 0; node < l->client->n_nodes; node++) {
        size_t first = k;

        for (m = 0; m < l->n; m++) {
            const char **argv = &p->argv[k * REDLOCK__MAX_CALL_ARGS];
            redlock__script_call sc;

            if (l->members[m].node != node || (include && !include[m]))
                continue;
            if (fill(ud, m, argv, &p->owned[k], &sc) != 0) {
                p->n = k + 1; /* what plan_free frees */
                redlock__plan_free(p);
                return redlock__fail(REDLOCK_ENOMEM, "out of memory");
            }
            p->calls[k].script = sc.script;
            p->calls[k].nkeys = sc.nkeys;
            p->calls[k].argc = sc.argc;
            p->calls[k].argv = argv;
            p->member[k] = m;
            k++;
        }
        if (k > first && trailer) {
            p->calls[k] = *trailer;
            p->member[k] = REDLOCK__PLAN_TRAILER;
            k++;
        }
        if (k > first) {
            p->batch_start[p->nb] = first;
            p->batches[p->nb++] = (redlock__batch){.node = node,
                                                   .calls = &p->calls[first],
                                                   .ncalls = k - first,
                                                   .deadline_ns = deadline_ns};
        }
    }
    p->n = k;
    return REDLOCK_OK;
}
