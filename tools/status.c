/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock status NAME: what every node stores for the lock, and whether one
 * holder holds it on a quorum; with --metrics, the client's statistics after
 * that inspection in the Prometheus text format. redlock unlock NAME
 * --force: deletes it on every node, whoever holds it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Members are read in parallel, one thread each, so a frozen node costs
 * one inspection timeout in total rather than one per node. */
typedef struct probe {
    pthread_t thread;
    redlock_lock *lock;
    size_t member;
    int rc;
    char error[128];  /* the size of redlock_member_state.message */
    redlock_member_state st;
} probe;

static void *probe_main(void *arg)
{
    probe *p = arg;

    p->rc = redlock_lock_inspect(p->lock, p->member, &p->st);
    if (p->rc != REDLOCK_OK)
        snprintf(p->error, sizeof(p->error), "%s", redlock_last_error());
    return NULL;
}

static void inspect_all(redlock_lock *lock, probe *p, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        memset(&p[i], 0, sizeof(p[i]));
        p[i].lock = lock;
        p[i].member = i;
        p[i].st.pttl_ms = -2;
        if (pthread_create(&p[i].thread, NULL, probe_main, &p[i]) != 0) {
            /* Too many threads: read this member here instead. */
            probe_main(&p[i]);
            p[i].thread = pthread_self();
        }
    }
    for (i = 0; i < n; i++)
        if (!pthread_equal(p[i].thread, pthread_self()))
            pthread_join(p[i].thread, NULL);
    for (i = 0; i < n; i++) {
        if (p[i].rc != REDLOCK_OK) {
            p[i].st.reachable = 0;
            p[i].st.err = p[i].rc;
            snprintf(p[i].st.message, sizeof(p[i].st.message), "%s", p[i].error);
        }
    }
}

typedef struct verdict {
    size_t reachable;
    const char *holder;       /* the field held on the most members */
    size_t holder_nodes;
    int held;                 /* holder_nodes >= quorum */
} verdict;

static verdict decide(const probe *p, size_t n, int quorum)
{
    verdict v = {0, NULL, 0, 0};
    size_t i, j, count;

    for (i = 0; i < n; i++) {
        if (!p[i].st.reachable)
            continue;
        v.reachable++;
        if (!p[i].st.exists || !p[i].st.holder[0])
            continue;
        count = 0;
        for (j = 0; j < n; j++)
            count += p[j].st.reachable && p[j].st.exists &&
                     strcmp(p[j].st.holder, p[i].st.holder) == 0;
        if (count > v.holder_nodes) {
            v.holder_nodes = count;
            v.holder = p[i].st.holder;
        }
    }
    v.held = v.holder && (int)v.holder_nodes >= quorum;
    return v;
}

static void print_json(redlock_client *c, const char *name, int quorum, const probe *p,
                       size_t n, const verdict *v)
{
    size_t i;

    printf("{\"name\":");
    cli_json_string(name);
    printf(",\"quorum\":%d,\"nodes\":[", quorum);
    for (i = 0; i < n; i++) {
        const redlock_member_state *st = &p[i].st;

        printf("%s{\"node\":", i ? "," : "");
        cli_json_string(redlock_client_node_name(c, i));
        printf(",\"reachable\":%s", st->reachable ? "true" : "false");
        if (!st->reachable) {
            printf(",\"error\":");
            cli_json_string(st->message[0] ? st->message : redlock_strerror(st->err));
            printf("}");
            continue;
        }
        printf(",\"exists\":%s,\"holder\":", st->exists ? "true" : "false");
        if (st->exists && st->holder[0])
            cli_json_string(st->holder);
        else
            printf("null");
        printf(",\"holders\":%zu,\"hold_count\":%lld,\"pttl_ms\":%lld,\"token\":%llu}",
               st->holders, (long long)st->hold_count, (long long)st->pttl_ms,
               (unsigned long long)st->token);
    }
    printf("],\"reachable\":%zu,\"holder\":", v->reachable);
    if (v->holder)
        cli_json_string(v->holder);
    else
        printf("null");
    printf(",\"holder_nodes\":%zu,\"held_by_quorum\":%s}\n", v->holder_nodes,
           v->held ? "true" : "false");
}

/* Room for a holder field, escaped (four bytes per byte at most). */
#define SAFE_FIELD (4 * sizeof(((redlock_member_state *)0)->holder) + 32)

static void print_text(redlock_client *c, const char *name, int quorum, const probe *p,
                       size_t n, const verdict *v)
{
    char node[256], msg[4 * 128 + 1], holder[SAFE_FIELD + 32], field[SAFE_FIELD];
    size_t i;

    /* Field names and messages come from the servers: escaped (the name
     * too, as every name is: it may have come from a script). */
    fputs("lock '", stdout);
    cli_fput_escaped(stdout, name, 0);
    printf("' on %zu node(s), quorum %d\n", n, quorum);
    printf("%-24s %-9s %-48s %5s %9s %s\n", "NODE", "REACHABLE", "HOLDER", "COUNT", "PTTL_MS",
           "TOKEN");
    for (i = 0; i < n; i++) {
        const redlock_member_state *st = &p[i].st;

        cli_escape(redlock_client_node_name(c, i), node, sizeof(node));
        if (!st->reachable) {
            printf("%-24s %-9s %s\n", node, "no",
                   cli_escape(st->message[0] ? st->message : redlock_strerror(st->err), msg,
                              sizeof(msg)));
            continue;
        }
        cli_escape(st->holder, field, sizeof(field));
        if (!st->exists)
            snprintf(holder, sizeof(holder), "-");
        else if (st->holders > 1)
            snprintf(holder, sizeof(holder), "%s (+%zu more)", field, st->holders - 1);
        else
            snprintf(holder, sizeof(holder), "%s", st->holder[0] ? field : "?");
        printf("%-24s %-9s %-48s %5lld %9lld %llu\n", node, "yes", holder,
               (long long)(st->exists ? st->hold_count : 0), (long long)st->pttl_ms,
               (unsigned long long)st->token);
    }
    if (v->holder)
        cli_escape(v->holder, field, sizeof(field));
    if (v->held)
        printf("held by quorum: yes (%s on %zu of %zu node(s))\n", field, v->holder_nodes, n);
    else if (v->holder)
        printf("held by quorum: no (%s on only %zu of %zu node(s))\n", field, v->holder_nodes,
               n);
    else
        printf("held by quorum: no (free)\n");
}

/* The name --metrics inspects when given none: a key nobody locks, read
 * only so that every node is contacted once. */
#define METRICS_PROBE_NAME "redlock:metrics-probe"

/* One scrape: the whole text, however much the counters grew meanwhile. */
static int print_metrics(redlock_client *c)
{
    size_t needed = 0;
    char *buf = NULL;
    int rc;

    for (;;) {
        rc = redlock_stats_format_prometheus(c, buf, buf ? needed + 1 : 0, &needed);
        if (rc != REDLOCK_ERANGE)
            break;
        free(buf);
        if (!(buf = malloc(needed + 1))) {
            cli_error("--metrics", "out of memory");
            return CLI_EX_SOFTWARE;
        }
    }
    if (rc == REDLOCK_OK)
        fputs(buf, stdout);
    else
        cli_error("--metrics", "%s", redlock_last_error());
    free(buf);
    return rc == REDLOCK_OK ? 0 : CLI_EX_SOFTWARE;
}

int cli_cmd_status(cli_globals *g, int argc, char **argv)
{
    static const cli_opt opts[] = {{"metrics", 0, 0, 1}, {NULL, 0, 0, 0}};
    probe p[64];
    redlock_client *c = NULL;
    redlock_lock *lock = NULL;
    const char *name;
    verdict v;
    size_t n;
    int rc, quorum, metrics = 0, probe_only;

    if ((rc = cli_parse_name_opt(g, "status", argc, argv, opts, &metrics, &name)) != 0)
        return rc < 0 ? 0 : rc;
    if (!name && !metrics) {
        cli_error("status", "missing lock NAME");
        return CLI_EX_USAGE;
    }
    if (metrics && g->json) {
        cli_error("--metrics", "prints the Prometheus text format; it does not go with --json");
        return CLI_EX_USAGE;
    }
    probe_only = !name;
    if (probe_only)
        name = METRICS_PROBE_NAME;
    if ((rc = cli_client_new(g, &c)) != 0)
        return rc;
    if ((rc = cli_lock_new(g, c, name, 0, &lock)) != 0)
        goto out;
    n = redlock_lock_member_count(lock);
    quorum = redlock_lock_quorum(lock);
    inspect_all(lock, p, n);
    v = decide(p, n, quorum);
    if (metrics)
        rc = print_metrics(c);
    else if (g->json)
        print_json(c, name, quorum, p, n, &v);
    else
        print_text(c, name, quorum, p, n, &v);
    if ((int)v.reachable < quorum) {
        cli_error(probe_only ? "status" : name, "%zu of %zu node(s) answered, quorum is %d",
                  v.reachable, n, quorum);
        rc = CLI_EX_NOQUORUM;
    }
out:
    redlock_lock_free(lock);
    redlock_client_free(c);
    return rc;
}

int cli_cmd_unlock(cli_globals *g, int argc, char **argv)
{
    static const cli_opt opts[] = {{"force", 'f', 0, 1}, {NULL, 0, 0, 0}};
    redlock_client *c = NULL;
    redlock_lock *lock = NULL;
    const char *name;
    size_t released = 0;
    int rc, force = 0;

    if ((rc = cli_parse_name(g, "unlock", argc, argv, opts, &force, &name)) != 0)
        return rc < 0 ? 0 : rc;
    if (!force) {
        cli_error("unlock", "--force is required: the current holder loses the lock");
        return CLI_EX_USAGE;
    }
    if ((rc = cli_client_new(g, &c)) != 0)
        return rc;
    if ((rc = cli_lock_new(g, c, name, 0, &lock)) != 0)
        goto out;
    switch (redlock_force_unlock(lock, &released)) {
    case REDLOCK_OK:
        break;
    case REDLOCK_ENO_QUORUM:
        cli_error(name, "%s", redlock_last_error());
        rc = CLI_EX_NOQUORUM;
        goto out;
    default:
        cli_error(name, "force unlock: %s", redlock_last_error());
        rc = CLI_EX_SOFTWARE;
        goto out;
    }
    if (g->json) {
        printf("{\"name\":");
        cli_json_string(name);
        printf(",\"released_nodes\":%zu,\"was_locked\":%s}\n", released,
               released ? "true" : "false");
    } else {
        fputs("lock '", stdout);
        cli_fput_escaped(stdout, name, 0);
        if (released)
            printf("' released on %zu node(s)\n", released);
        else
            printf("' was free\n");
    }
out:
    redlock_lock_free(lock);
    redlock_client_free(c);
    return rc;
}
