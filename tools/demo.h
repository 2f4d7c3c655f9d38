/* SPDX-License-Identifier: BSD-3-Clause */
/* redlock demo's shared state (demo.c), its rig and faults (demo_rig.c) and
 * its verdict (demo_verdict.c). */
#ifndef REDLOCK_TOOLS_DEMO_H
#define REDLOCK_TOOLS_DEMO_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli.h"

#define DEMO_MAX_WORKERS 32
#define DEMO_MAX_NODES 16
#define DEMO_MAX_SECTIONS 20000
#define NS_PER_MS 1000000LL


/* How long the failover may take before the demo says it was not seen. */
#define DEMO_FAILOVER_SECS 30

typedef struct section {
    int worker;
    long pid;
    int64_t start_ns, end_ns, spawn_ns, validity_ms;
    int complete;
} section;

typedef struct demo_worker {
    pid_t pid;                /* 0 = idle */
    int64_t spawn_ns;
} demo_worker;

typedef struct demo {
    cli_globals *g;
    const char *rig;
    int workers, seconds, base_port, nodes;
    int started_rig;
    char tmpdir[64], log_path[96], counter_path[96], err_path[96];
    char uris[4096];
    char lock_name[64];
    pid_t frozen_pid[DEMO_MAX_NODES];
    int frozen_node[DEMO_MAX_NODES];
    int n_frozen;
    int64_t t0, freeze_ns, thaw_ns;
    demo_worker w[DEMO_MAX_WORKERS];
    section *s;
    size_t n_sections;
    long log_offset;
    char partial[256];
    size_t partial_len;
    int gave_up, failed, no_quorum, lost;
    /* --sentinel: nodes is the number of groups. */
    int sentinel;
    int killed_port, killed_node;  /* group 1's master, as killed; -1 failed */
    int new_port;                  /* the promoted replica, -1 not seen */
    int64_t kill_ns, failover_ns, first_after_ns;
    size_t after_kill;             /* acquisitions that started after it */
    pid_t failover_pid;            /* rig wait-failover, while it runs */
    char failover_path[96];
} demo;

/* Seconds since the demo's start, for its timeline. */
double demo_secs(const demo *d, int64_t ns);

/* demo_rig.c: the rig the demo runs on (the running one, or one it
 * starts), and the faults it injects. */
int demo_rig_verb(demo *d, const char *verb, int quiet);
int demo_ensure_rig(demo *d);
void demo_freeze(demo *d);
void demo_thaw(demo *d);
void demo_thaw_all(demo *d);
void demo_kill_master(demo *d);
void demo_check_failover(demo *d, int block);

/* demo_verdict.c: overlaps and lost updates, printed; the exit status. */
int demo_verdict(demo *d);

#endif
