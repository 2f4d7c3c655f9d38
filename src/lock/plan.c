/* SPDX-License-Identifier: BSD-3-Clause */
#include "lock/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void redlock__plan_free(redlock__plan *p)
{
    size_t i;

    for (i = 0; p->owned && i < p->n; i++)
        free(p->owned[i]);
    free(p->owned);
    free(p->calls);
    free(p->member);
    free(p->batch_start);
    free(p->batches);
    free(p->argv);
    memset(p, 0, sizeof(*p));
}

int redlock__plan_build(redlock__plan *p, const redlock_lock *l,
                        const unsigned char *include, redlock__plan_fill fill, void *ud,
                        int64_t deadline_ns)
{
    size_t m, node, k = 0, count = 0;

    memset(p, 0, sizeof(*p));
    for (m = 0; m < l->n; m++)
        count += !include || include[m];
    p->n = count;
    p->calls = calloc(count ? count : 1, sizeof(*p->calls));
    p->member = calloc(count ? count : 1, sizeof(size_t));
    p->batch_start = calloc(count ? count : 1, sizeof(size_t));
    p->batches = calloc(count ? count : 1, sizeof(*p->batches));
    p->argv = calloc((count ? count : 1) * REDLOCK__MAX_CALL_ARGS, sizeof(char *));
    p->owned = calloc(count ? count : 1, sizeof(char *));
    if (!p->calls || !p->member || !p->batch_start || !p->batches || !p->argv ||
        !p->owned) {
        redlock__plan_free(p);
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    }
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
        if (k > first) {
            p->batch_start[p->nb] = first;
            p->batches[p->nb].node = node;
            p->batches[p->nb].calls = &p->calls[first];
            p->batches[p->nb].ncalls = k - first;
            p->batches[p->nb].deadline_ns = deadline_ns;
            p->nb++;
        }
    }
    return REDLOCK_OK;
}
