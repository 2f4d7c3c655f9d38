/* SPDX-License-Identifier: BSD-3-Clause */
/* redlock demo: the rig it runs on, and the faults it injects (a minority
 * frozen and thawed; with --sentinel, group 1's master killed and its
 * failover followed). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

/* Counts the nodes that `rig status` reports up; -1 if there is no rig. */
static int rig_nodes_up(demo *d, int *listed)
{
    char port[16], out[4096];
    const char *args[] = {"status", "--base-port", port, NULL};
    const char *line;
    int up = 0;

    snprintf(port, sizeof(port), "%d", d->base_port);
    *listed = 0;
    if (cli_run_rig(d->rig, args, out, sizeof(out), 1) != 0)
        return -1;
    for (line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char state[16];
        unsigned i, p;

        if (sscanf(line, "%u %u %*s %15s", &i, &p, state) != 3)
            continue;
        (*listed)++;
        up += strcmp(state, "up") == 0;
    }
    return up;
}

int demo_rig_verb(demo *d, const char *verb, int quiet)
{
    char port[16], count[16];
    const char *args[] = {verb, "--base-port", port, "--nodes", count, NULL};

    snprintf(port, sizeof(port), "%d", d->base_port);
    snprintf(count, sizeof(count), "%d", d->nodes);
    if (strcmp(verb, "start") != 0)
        args[3] = NULL;
    return cli_run_rig(d->rig, args, NULL, 0, quiet);
}

/* A sentinel rig of d->nodes groups, always the demo's own. */
static int ensure_sentinel_rig(demo *d)
{
    char port[16], groups[16];
    const char *args[] = {"start", "--sentinel", groups, "--base-port", port, NULL};
    int listed, last = d->base_port + 2 * d->nodes + 2;

    if (rig_nodes_up(d, &listed) > 0) {
        cli_error("demo", "a rig runs on port %d; the sentinel demo kills a master, so it runs "
                          "only on a rig it starts: choose another --base-port",
                  d->base_port);
        return CLI_EX_USAGE;
    }
    snprintf(port, sizeof(port), "%d", d->base_port);
    snprintf(groups, sizeof(groups), "%d", d->nodes);
    printf("Starting %d Sentinel group(s) (a master and a replica each) on 127.0.0.1:%d-%d,\n"
           "sentinels on %d-%d...\n",
           d->nodes, d->base_port, last - 3, last - 2, last);
    fflush(stdout);
    if (cli_run_rig(d->rig, args, NULL, 0, 0) != 0) {
        cli_error("demo", "could not start the sentinel rig (see above)");
        /* Whatever part of it started is ours to stop. */
        d->started_rig = 1;
        return CLI_EX_NOQUORUM;
    }
    d->started_rig = 1;
    if (cli_rig_env(d->rig, d->base_port, "RIG_URIS", d->uris, sizeof(d->uris)) != 0)
        return CLI_EX_SOFTWARE;
    return 0;
}

int demo_ensure_rig(demo *d)
{
    int listed, up;

    if (d->sentinel)
        return ensure_sentinel_rig(d);
    up = rig_nodes_up(d, &listed);

    if (up > 0 && up == listed) {
        if (listed < 3) {
            cli_error("demo", "the rig on port %d has %d node(s); the demo needs at least 3",
                      d->base_port, listed);
            return CLI_EX_USAGE;
        }
        d->nodes = listed;
        printf("Using the running rig: %d nodes on 127.0.0.1:%d-%d.\n", listed, d->base_port,
               d->base_port + listed - 1);
        return 0;
    }
    if (up > 0) {
        cli_error("demo", "the rig on port %d is only partly up (%d of %d nodes); "
                  "run 'redlock rig stop --base-port %d' first",
                  d->base_port, up, listed, d->base_port);
        return CLI_EX_NOQUORUM;
    }
    printf("Starting a %d-node rig on 127.0.0.1:%d-%d...\n", d->nodes, d->base_port,
           d->base_port + d->nodes - 1);
    fflush(stdout);
    if (demo_rig_verb(d, "start", 0) != 0) {
        cli_error("demo", "could not start the rig (see above)");
        return CLI_EX_NOQUORUM;
    }
    d->started_rig = 1;
    return 0;
}

static pid_t node_pid(demo *d, int node)
{
    char port[16], idx[16], out[64];
    const char *args[] = {"pid", idx, "--base-port", port, NULL};

    snprintf(port, sizeof(port), "%d", d->base_port);
    snprintf(idx, sizeof(idx), "%d", node);
    if (cli_run_rig(d->rig, args, out, sizeof(out), 0) != 0)
        return -1;
    return (pid_t)strtol(out, NULL, 10);
}

void demo_thaw_all(demo *d)
{
    int i;

    for (i = 0; i < d->n_frozen; i++)
        if (d->frozen_pid[i] > 0)
            kill(d->frozen_pid[i], SIGCONT);
}

void demo_freeze(demo *d)
{
    int i, node;

    printf("%7.3f  ---- SIGSTOP", demo_secs(d, cli_now_ns()));
    /* Every second node (2, 4, ...): a minority, so a quorum stays. */
    for (i = 0, node = 2; node <= d->nodes && i < (d->nodes - 1) / 2; node += 2, i++) {
        d->frozen_node[i] = node;
        d->frozen_pid[i] = node_pid(d, node);
        if (d->frozen_pid[i] > 0 && kill(d->frozen_pid[i], SIGSTOP) == 0)
            printf(" node %d (port %d, pid %ld)", node, d->base_port + node - 1,
                   (long)d->frozen_pid[i]);
        else
            printf(" node %d (FAILED)", node);
        d->n_frozen = i + 1;
    }
    d->freeze_ns = cli_now_ns();
    printf(": %d of %d nodes answer, quorum is %d\n", d->nodes - d->n_frozen, d->nodes,
           d->nodes / 2 + 1);
    fflush(stdout);
}

void demo_thaw(demo *d)
{
    int i;

    demo_thaw_all(d);
    d->thaw_ns = cli_now_ns();
    printf("%7.3f  ---- SIGCONT", demo_secs(d, d->thaw_ns));
    for (i = 0; i < d->n_frozen; i++)
        printf(" node %d", d->frozen_node[i]);
    printf(": all %d nodes answer again\n", d->nodes);
    fflush(stdout);
}

/* SIGKILLs group 1's master through the rig and starts waiting for the
 * sentinels to promote its replica. */
void demo_kill_master(demo *d)
{
    d->kill_ns = cli_now_ns();
    d->killed_port = cli_rig_kill_master(d->rig, d->base_port, 1);
    if (d->killed_port <= 0) {
        printf("%7.3f  ---- SIGKILL group 1's master: FAILED\n", demo_secs(d, d->kill_ns));
        d->killed_port = -1;
        fflush(stdout);
        return;
    }
    d->killed_node = d->killed_port - d->base_port + 1;
    printf("%7.3f  ---- SIGKILL group 1's master (node %d, port %d); waiting for the "
           "sentinels' failover\n",
           demo_secs(d, d->kill_ns), d->killed_node, d->killed_port);
    fflush(stdout);
    d->failover_pid = cli_rig_failover_watch(d->rig, d->base_port, 1, d->killed_port,
                                             DEMO_FAILOVER_SECS, d->failover_path);
}

/* Once the failover is seen: when, and the killed node back as a replica. */
void demo_check_failover(demo *d, int block)
{
    int port;

    if (d->failover_pid <= 0 || !cli_rig_failover_done(d->failover_pid, d->failover_path, block,
                                                       &port))
        return;
    d->failover_pid = 0;
    d->new_port = port;
    if (port < 0) {
        printf("%7.3f  ---- no failover of group 1 seen within %d s\n",
               demo_secs(d, cli_now_ns()), DEMO_FAILOVER_SECS);
        fflush(stdout);
        return;
    }
    d->failover_ns = cli_now_ns();
    printf("%7.3f  ---- failover: port %d is group 1's master, %lld ms after the kill; "
           "restarting node %d as its replica\n",
           demo_secs(d, d->failover_ns), port,
           (long long)((d->failover_ns - d->kill_ns) / NS_PER_MS), d->killed_node);
    fflush(stdout);
    if (cli_rig_restart(d->rig, d->base_port, d->killed_node) != 0)
        cli_warn("demo", "restarting node %d failed: group 1 has no replica to acknowledge "
                         "grants",
                 d->killed_node);
}
