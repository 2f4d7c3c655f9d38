/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock status, shared by its parts: status.c reads a lock on every
 * node and prints the common view, status_rw.c adds what a read-write lock
 * shows (its readers or its writer), status_sem.c shows a semaphore.
 */
#ifndef REDLOCK_TOOLS_STATUS_H
#define REDLOCK_TOOLS_STATUS_H

#include <pthread.h>

#include "cli.h"

/* The holder fields listed per node: a read-write lock has one per reader. */
#define STATUS_FIELDS 16

/* A holder field and its count, as the library lists them. */
typedef redlock_holder_info status_field;

/* One member's state. Members are read in parallel, one thread each, so a
 * frozen node costs one inspection timeout in total rather than one per
 * node. */
typedef struct probe {
    pthread_t thread;
    redlock_lock *lock;
    size_t member;
    int rc;
    char error[128];          /* the size of redlock_member_state.message */
    redlock_member_state st;
    status_field fields[STATUS_FIELDS];
    size_t n_fields;          /* listed; st.holders says how many there are */
    int want_facts;
    redlock_holder_facts facts; /* found 0 when unread or absent */
} probe;

/* ---- read-write locks (status_rw.c) --------------------------------------- */

/* The holder fields member p->member stores, as far as inspection lists
 * them, into p->fields. */
void status_list_fields(probe *p);

/* One holder field, over the nodes that list it. */
typedef struct rw_holder {
    const char *field;        /* points into a probe */
    int64_t count;            /* the largest hold count listed */
    size_t nodes;             /* nodes that list it */
    int writer;               /* a write hold ("...:write") */
} rw_holder;

/* The quorum view of a read-write lock. */
typedef struct rw_view {
    const char *mode;         /* "write", "read", or NULL: not a read-write lock,
                               * or one reader that looks like a plain holder */
    rw_holder holders[64];    /* the distinct fields the nodes list */
    size_t n_holders;
    size_t holders_on_quorum; /* holder fields that a quorum of nodes has at least */
    size_t unlisted;          /* the most holder fields a node has but did not list */
} rw_view;

void status_rw_decide(const probe *p, size_t n, int quorum, rw_view *v);
/* Lines after the common view; nothing when v->mode is NULL. */
void status_rw_text(const rw_view *v, size_t n, int quorum);
/* ,"holder_list":[...] of one node, inside its object. */
void status_rw_node_json(const probe *p);
/* ,"mode":...,"holders_on_quorum":...,"holder_list":[...] at the top. */
void status_rw_json(const rw_view *v, int quorum);

/* ---- semaphores (status_sem.c) -------------------------------------------- */

/* Whether the name looks like a semaphore's count rather than a lock: no
 * node has a lock there and some node answered WRONGTYPE. */
int status_is_semaphore(const probe *p, size_t n);
/*
 * One view of the semaphore sem (a handle of any limit: inspection does
 * not depend on it). limit is the one given with --permits, or 0 when it
 * was not and is estimated from what the nodes store. Returns 0, or 69
 * when fewer than a quorum of nodes answered.
 */
int status_sem_view(cli_globals *g, redlock_client *c, redlock_semaphore *sem, int limit,
                    const char *name);

#endif
