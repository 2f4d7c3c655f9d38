/* SPDX-License-Identifier: BSD-3-Clause */
#include "lock/decide.h"

#include "redlock/redlock.h"

#define NS_PER_MS 1000000LL

int64_t redlock__drift_ms(int64_t lease_ms, double drift_factor)
{
    return (int64_t)((double)lease_ms * drift_factor) + 2;
}

int redlock__lease_too_short(int64_t lease_ms, double drift_factor, int64_t node_timeout_ms)
{
    return lease_ms <= redlock__drift_ms(lease_ms, drift_factor) + 2 * node_timeout_ms;
}

int redlock__fanout_settled(int confirmed, int pending, int need)
{
    return confirmed >= need || confirmed + pending < need;
}

int redlock__attempt_outcome(const redlock__tally *t, int64_t validity_ms,
                             redlock__fence fence)
{
    if (t->granted >= t->quorum) {
        if (validity_ms <= 0)
            return REDLOCK_ETIMEOUT;
        /* Not "too slow" and not "busy": the members that should have
         * stored the token did not answer, or lost the hold meanwhile. */
        return fence == REDLOCK__FENCE_SHORT ? REDLOCK_ENO_QUORUM : REDLOCK_OK;
    }
    if (t->permanent > 0 && t->n - t->permanent < t->quorum)
        return t->permanent_err;
    /* Too many members failed for any quorum: the nodes are the problem.
     * Otherwise the attempt stopped because refusals (and the members not
     * heard from yet) left no quorum: another owner holds it. */
    return t->failed > t->n - t->quorum ? REDLOCK_ENO_QUORUM : REDLOCK_EBUSY;
}

int redlock__attempt_retryable(int rc)
{
    return rc == REDLOCK_EBUSY || rc == REDLOCK_ENO_QUORUM || rc == REDLOCK_ETIMEOUT;
}

int redlock__wait_outcome(int rc, int64_t wait_ms)
{
    /* One attempt: a late grant is reported like a refusal, as before. */
    if (wait_ms == 0)
        return rc == REDLOCK_ETIMEOUT ? REDLOCK_EBUSY : rc;
    /* A wait that ran out: timed out, unless nodes were failing. */
    return rc == REDLOCK_ENO_QUORUM ? rc : REDLOCK_ETIMEOUT;
}

int redlock__unlock_outcome(const redlock__unlock_tally *t)
{
    int confirmed = t->released + t->decremented;

    if (t->expired)
        return REDLOCK_ELOST;
    if ((t->ours && confirmed > 0) || (!t->ours && confirmed >= t->quorum))
        return REDLOCK_OK;
    /* A recorded hold is gone only if a quorum says so: members that never
     * granted it answer "not held" too, while the ones that did may be
     * silent (their release goes on in the background). */
    if (t->ours)
        return t->not_held >= t->quorum ? REDLOCK_ELOST : REDLOCK_ENO_QUORUM;
    if (t->not_held == 0)
        return REDLOCK_ENO_QUORUM;
    return REDLOCK_ENOT_OWNER;
}

redlock__verdict redlock__renewal_verdict(const redlock__renewal *r, int *reason)
{
    int64_t lease_ns = r->lease_ms * NS_PER_MS, drift_ns = r->drift_ms * NS_PER_MS;

    *reason = 0;
    if (r->max_hold_ns > 0 && r->held_ns >= r->max_hold_ns) {
        *reason = REDLOCK_ETIMEOUT;
        return REDLOCK__VERDICT_LOST;
    }
    /* Validity counts from the tick's start: the renewals may have been
     * applied at any moment after it. */
    if (r->genuine >= r->quorum && r->now_ns - r->tick_ns < lease_ns - drift_ns)
        return REDLOCK__VERDICT_RENEWED;
    if (r->other + r->vanished > r->n - r->quorum) {
        *reason = REDLOCK_ENOT_OWNER;
        return REDLOCK__VERDICT_LOST;
    }
    /* The next try would come after validity ends: report the loss now,
     * while the holder can still stop in time. */
    if (r->now_ns + r->retry_ns >= r->validity_end_ns) {
        *reason = REDLOCK_ENO_QUORUM;
        return REDLOCK__VERDICT_LOST;
    }
    return REDLOCK__VERDICT_RETRY;
}
