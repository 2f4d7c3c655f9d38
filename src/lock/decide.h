/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lock core's decisions, as pure functions: no I/O, no mutex, no clock
 * read (times are arguments). Everything that turns counts of answers into
 * an outcome lives here, once, so it can be tested row by row
 * (tests/unit/test_decide.c) and read in one place.
 */
#ifndef REDLOCK_LOCK_DECIDE_H
#define REDLOCK_LOCK_DECIDE_H

#include <stdint.h>

/* drift = lease * drift_factor + 2 ms: the clock-rate error allowed for,
 * plus the granularity of the servers' expiry. */
int64_t redlock__drift_ms(int64_t lease_ms, double drift_factor);

/* Nonzero when a lease can never come back valid: it does not exceed the
 * drift plus two node timeouts (one for the request, one for the abort or
 * fencing round that may follow). */
int redlock__lease_too_short(int64_t lease_ms, double drift_factor, int64_t node_timeout_ms);

/* Whether a fan-out that needs `need` confirmations can stop: it has them,
 * or the calls still pending can no longer bring them. */
int redlock__fanout_settled(int confirmed, int pending, int need);

/* What one acquire attempt heard from its members. */
typedef struct redlock__tally {
    int n, quorum;
    int granted;       /* granted or re-entered */
    int busy;          /* held by another owner */
    int failed;        /* timeouts, errors, refusals */
    int permanent;     /* of failed: refusals waiting cannot fix */
    int permanent_err; /* the code of one of them */
} redlock__tally;

/* Fencing, phase 2, as the attempt saw it. */
typedef enum redlock__fence {
    REDLOCK__FENCE_NONE = 0,  /* no phase 2 (unfenced, or a re-entry) */
    REDLOCK__FENCE_CONFIRMED, /* a quorum stored the token in time */
    REDLOCK__FENCE_SHORT      /* fewer than a quorum confirmed */
} redlock__fence;

/*
 * The outcome of one attempt:
 *   REDLOCK_OK          a quorum granted, validity left, fencing confirmed;
 *   REDLOCK_ETIMEOUT    a quorum granted, but too late to be valid;
 *   REDLOCK_ENO_QUORUM  the fencing write-back was short of a quorum, or
 *                       more than N - Q members failed;
 *   EAUTH/ETLS/ECONFIG  refusals for good leave fewer than a quorum;
 *   REDLOCK_EBUSY       another owner holds it where it counts.
 */
int redlock__attempt_outcome(const redlock__tally *t, int64_t validity_ms,
                             redlock__fence fence);

/* Whether the wait loop may try again after an attempt ended with rc. */
int redlock__attempt_retryable(int rc);

/* What the caller hears when the wait ends (wait_ms == 0: one attempt; the
 * deadline passed otherwise) after an attempt that ended with rc. */
int redlock__wait_outcome(int rc, int64_t wait_ms);

/* What one unlock heard, and what the handle knew before it. */
typedef struct redlock__unlock_tally {
    int quorum;
    int ours;          /* the handle records a hold of this owner */
    int expired;       /* that hold's validity ended before the unlock */
    int released;      /* members that deleted the key */
    int decremented;   /* members still held after the decrement */
    int not_held;      /* members without our field */
} redlock__unlock_tally;

/*
 *   REDLOCK_ELOST        validity ended first, or a quorum lacked our field;
 *   REDLOCK_OK           released (a recorded hold: any member confirms;
 *                        none recorded: a quorum of our fields must);
 *   REDLOCK_ENO_QUORUM   no member answered;
 *   REDLOCK_ENOT_OWNER   answered, but not our lock.
 */
int redlock__unlock_outcome(const redlock__unlock_tally *t);

/* The watchdog's verdict on one hold after a tick's renewals. */
typedef enum redlock__verdict {
    REDLOCK__VERDICT_RENEWED = 0, /* a quorum genuinely renewed, validity extended */
    REDLOCK__VERDICT_RETRY, /* not enough answers yet, but still valid */
    REDLOCK__VERDICT_LOST   /* with a reason */
} redlock__verdict;

typedef struct redlock__renewal {
    int n, quorum;
    int genuine;          /* our field was there and renewed */
    int other;            /* someone else holds the key */
    int vanished;         /* the key is gone */
    int64_t tick_ns;      /* when the tick began */
    int64_t now_ns;
    int64_t lease_ms, drift_ms;
    int64_t validity_end_ns; /* the hold's current validity */
    int64_t retry_ns;     /* when a retry would come, from now */
    int64_t held_ns;      /* how long it has been held */
    int64_t max_hold_ns;  /* 0: no cap */
} redlock__renewal;

/* The verdict; *reason gets the loss reason (REDLOCK_ETIMEOUT: the hold
 * cap; REDLOCK_ENOT_OWNER: gone or taken on too many members;
 * REDLOCK_ENO_QUORUM: too few answers before validity ends). */
redlock__verdict redlock__renewal_verdict(const redlock__renewal *r, int *reason);

#endif
