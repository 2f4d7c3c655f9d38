/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the safety worker's two files share: its configuration, its per-name
 * handles, and the holds of each kind (worker_kinds.c) that one_hold() in
 * worker.c takes, confirms, writes under and releases.
 */
#ifndef SAFETY_WORKER_H
#define SAFETY_WORKER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "redlock/redlock.h"

#define MAX_NAMES 16
#define NS_PER_MS 1000000LL

typedef enum { MODE_LEASE, MODE_WATCHDOG, MODE_MIXED } lease_mode;
typedef enum { ROLE_CONTEND, ROLE_VICTIM, ROLE_PROBE } worker_role;

/* What one hold is. The plain lock is the default; a read-write worker
 * (--kind read|write|mixed) takes KIND_READ and KIND_WRITE holds, a fair
 * lock worker (--kind fair) KIND_FAIR ones, a semaphore worker
 * (--permits K) KIND_PERMIT ones. */
typedef enum { KIND_MUTEX, KIND_READ, KIND_WRITE, KIND_PERMIT, KIND_FAIR } hold_kind;
/* --kind: what a read-write worker takes; RW_MIXED draws each time. */
typedef enum { RW_NONE, RW_READ, RW_WRITE, RW_MIXED } rw_choice;

typedef struct slot {
    redlock_lock *lock;       /* the plain or fair lock, or the write side */
    redlock_lock *read_lock;  /* the read side (read-write workers) */
    redlock_semaphore *sem;   /* semaphore workers */
    char name[64];
    char resource[96];
    /* Written by the watchdog thread's on_lost callback. */
    _Atomic int64_t lost_ns;
    _Atomic int lost_reason;
} slot;

typedef struct config {
    const char *uris;
    const char *storage;
    const char *names;
    const char *out;
    const char *ready_file;
    const char *stop_file;
    int id;
    worker_role role;
    lease_mode mode;
    rw_choice rw;
    int fair;    /* --kind fair: REDLOCK_LOCK_FAIR handles, fencing on */
    int permits; /* > 0: a semaphore of this many permits per name */
    int64_t duration_ms;
    int64_t max_cycles;
    int64_t lease_ms;
    int watchdog_lease_ms;
    int node_timeout_ms;
    int64_t hold_min_ms, hold_max_ms;
    int64_t long_hold_ms; /* one hold in eight lasts up to this long */
    int64_t wait_max_ms;
    int64_t step_ms;
    int64_t sample_ms;
    int unchecked;
    int stick; /* after a failed attempt, try the same name again */
    /* redlock_lock_options.replica_acks and replica_timeout_ms; -1: not
     * given (no WAIT, and the H line has no acks field). */
    int replica_acks;
    int replica_timeout_ms;
} config;

typedef struct worker {
    config cfg;
    FILE *log;
    redlock_client *client;
    redlock_client *storage;
    slot slots[MAX_NAMES];
    size_t n_slots;
    uint64_t owner;      /* the owner id of the current attempt */
    /* Nonzero: a fresh owner id per attempt instead of the thread's own,
     * which keeps late releases of earlier holds from ever matching (see
     * "a late release of the same owner" in tests/safety/README.md). */
    int owner_per_hold;
    int64_t cycles, attempts, acquired, lost;
    /* The name this worker has wanted since want_ns without getting it
     * (its last attempt failed), or NULL; last_fail_ns: when that attempt
     * returned. */
    slot *wanting;
    int64_t want_ns, last_fail_ns;
    int64_t next_sample_ns;
    unsigned rng;
} worker;

/* One hold of any kind, from its acquire to its release. */
typedef struct holding {
    hold_kind kind;
    redlock_lock *lock;       /* the handle that holds it (a permit's own) */
    redlock_permit *permit;   /* KIND_PERMIT only */
    uint64_t owner;
    /* The client's count of holds marked lost, read before the acquire:
     * see still_ours() in worker_kinds.c. */
    uint64_t lost_before;
} holding;

int64_t now_ns(void);
void record_error(worker *w, const char *what, int rc);

/* worker_kinds.c */
/* Makes the handles of s for the worker's kind; 0 or -1 (said on stderr). */
int slot_open(worker *w, slot *s, const redlock_lock_options *lo);
void slot_close(slot *s);
/* Acquires one hold of the kind; returns the library's result. */
int hold_acquire(worker *w, slot *s, hold_kind kind, int64_t wait_ms, int64_t lease_ms,
                 holding *h);
/* Whether the kind carries a fencing token (and so makes fenced writes). */
int hold_fenced(const holding *h);
int hold_token(const holding *h, uint64_t *token);
/* 1 while the hold is ours and valid, raising *vend to the validity end
 * the library reports; 0 otherwise. */
int hold_confirm(worker *w, const holding *h, int64_t *vend);
/* Releases the hold (a permit is freed); `released` gets each member's
 * answer when the handle outlives the release ("?" otherwise). */
int hold_release(holding *h, char *released, size_t cap);
/* What each member answered to the acquire, and the replicas that
 * acknowledged each grant. */
void hold_grants(const holding *h, char *grants, size_t gcap, char *acks, size_t acap);
/* The kind as the records give it: "" for the plain lock, "R", "W", "F"
 * (a fair lock), or "P<limit>" (the limit lets the checker judge a
 * semaphore by itself). */
void kind_tag(const worker *w, hold_kind kind, char *out, size_t cap);

#endif
