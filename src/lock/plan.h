/* SPDX-License-Identifier: BSD-3-Clause */
/* A fan-out plan: one script call per member, grouped into one pipelined
 * batch per node, with a map back from (batch, call) to the member. */
#ifndef REDLOCK_LOCK_PLAN_H
#define REDLOCK_LOCK_PLAN_H

#include "lock/internal.h"


typedef struct redlock__plan {
    void *block;               /* the one allocation behind every array */
    size_t n;                  /* calls */
    redlock__call *calls;      /* grouped by node */
    size_t *member;            /* member index of each call */
    size_t *batch_start;       /* first call of each batch */
    redlock__batch *batches;
    size_t nb;
    const char **argv;         /* REDLOCK__MAX_CALL_ARGS per call */
    char **owned;              /* per call: a string the plan frees */
    /* The block itself while it fits (up to five calls): a lock cycle
     * builds two plans, and a plan lives on its builder's stack. A plan
     * points into itself, so it must not be copied. */
    uint64_t own[160];
} redlock__plan;

/* Builds member m's call with one of the resp/script.h builders into argv
 * (REDLOCK__MAX_CALL_ARGS entries); may set *owned to a heap string used
 * in argv, which the plan frees. Returns 0, or -1 when out of memory. */
typedef int (*redlock__plan_fill)(void *ud, size_t m, const char **argv,
                                   char **owned, redlock__script_call *out);

/* Plans one call per member with include[m] != 0 (NULL: all). */
int redlock__plan_build(redlock__plan *p, const redlock_lock *l,
                        const unsigned char *include, redlock__plan_fill fill,
                        void *ud, int64_t deadline_ns);

/* The member index of a batch's trailer call. */
#define REDLOCK__PLAN_TRAILER ((size_t)-1)

/* The same, with trailer (a plain command, e.g. WAIT; its argv must
 * outlive the plan) appended to every node's batch after its members'
 * calls: its reply covers the writes of the calls before it on that
 * connection. Its member index is REDLOCK__PLAN_TRAILER. */
int redlock__plan_build_trailed(redlock__plan *p, const redlock_lock *l,
                                const unsigned char *include, redlock__plan_fill fill,
                                void *ud, int64_t deadline_ns, const redlock__call *trailer);
void redlock__plan_free(redlock__plan *p);

static inline size_t redlock__plan_member(const redlock__plan *p, size_t batch,
                                          size_t call)
{
    return p->member[p->batch_start[batch] + call];
}


#endif
