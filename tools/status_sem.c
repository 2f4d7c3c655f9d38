/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock status for a semaphore (Redisson's RPermitExpirableSemaphore
 * layout): per node the permits still available (the string NAME) and the
 * permits taken ("{NAME}:timeout"), grouped by the permit handle holding
 * them, with the time left on each lease by the node's clock; then the
 * quorum view: which holders hold their permits on a quorum of nodes, for
 * how long at least, and how many permits a quorum still has available.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* Holders listed per node (the rest are counted: st.holders). */
#define SEM_LISTED 32
/* Distinct holders in the quorum view. */
#define SEM_VIEW 256

typedef struct sem_probe {
    pthread_t thread;
    redlock_semaphore *sem;
    size_t member;
    redlock_semaphore_state st;
    redlock_permit_info holders[SEM_LISTED];
} sem_probe;

static void *sem_probe_main(void *arg)
{
    sem_probe *p = arg;
    int rc = redlock_semaphore_inspect(p->sem, p->member, &p->st, p->holders, SEM_LISTED);

    if (rc != REDLOCK_OK) {
        p->st.reachable = 0;
        if (!p->st.err)
            p->st.err = rc;
        if (!p->st.message[0])
            snprintf(p->st.message, sizeof(p->st.message), "%s", redlock_last_error());
    }
    return NULL;
}

/* In parallel, as status.c reads a lock: a frozen node costs one
 * inspection timeout in total. */
static void sem_inspect_all(redlock_semaphore *sem, sem_probe *p, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        p[i].sem = sem;
        p[i].member = i;
        if (pthread_create(&p[i].thread, NULL, sem_probe_main, &p[i]) != 0) {
            sem_probe_main(&p[i]);
            p[i].thread = pthread_self();
        }
    }
    for (i = 0; i < n; i++)
        if (!pthread_equal(p[i].thread, pthread_self()))
            pthread_join(p[i].thread, NULL);
}

/* One permit handle over the nodes that list it. */
typedef struct sem_holder {
    const char *id;           /* points into a probe */
    int permits;              /* the most it holds on one node */
    size_t nodes;
    int64_t valid_ms;         /* its lease on a quorum of nodes at least; 0: none */
} sem_holder;

typedef struct sem_view {
    int limit;                /* given or estimated; 0: unknown */
    int estimated;
    int quorum;
    size_t reachable;
    sem_holder holders[SEM_VIEW];
    size_t n_holders;
    size_t unlisted;          /* the most holders a node has but did not list */
    long long permits_held;   /* permits of the holders valid on a quorum */
    long long available;      /* on a quorum of nodes at least; -1: unknown */
} sem_view;

/*
 * The smallest quorum under which at most `limit` permits are valid at
 * once (the library's rule for its default, see redlock_semaphore_new()):
 * q > limit * n / (limit + 1). --quorum, if given, is shown as given.
 */
static int sem_quorum(const cli_globals *g, int limit, size_t n)
{
    if (n <= 1)
        return 1;
    if (g->quorum == REDLOCK_QUORUM_ALL)
        return (int)n;
    if (g->quorum > 0)
        return g->quorum;
    if (limit < 1)
        limit = 1;
    return (int)(((uint64_t)limit * n) / ((uint64_t)limit + 1)) + 1;
}

static int cmp_i64_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* The quorum-th largest of v[0..n), or fallback when there are fewer. */
static int64_t quorum_th(int64_t *v, size_t n, int quorum, int64_t fallback)
{
    if (quorum < 1 || n < (size_t)quorum)
        return fallback;
    qsort(v, n, sizeof(v[0]), cmp_i64_desc);
    return v[quorum - 1];
}

static void add_holder(sem_view *v, const redlock_permit_info *h)
{
    size_t k;

    for (k = 0; k < v->n_holders; k++)
        if (strcmp(v->holders[k].id, h->id) == 0)
            break;
    if (k == v->n_holders) {
        if (k == SEM_VIEW)
            return;
        v->n_holders++;
        v->holders[k].id = h->id;
    }
    v->holders[k].nodes++;
    if (h->permits > v->holders[k].permits)
        v->holders[k].permits = h->permits;
}

static void sem_decide(const cli_globals *g, const sem_probe *p, size_t n, int limit,
                       sem_view *v)
{
    int64_t vals[REDLOCK_MAX_NODES];
    size_t i, j, k, m;

    memset(v, 0, sizeof(*v));
    v->limit = limit;
    for (i = 0; i < n; i++) {
        const redlock_semaphore_state *st = &p[i].st;
        size_t listed = st->holders < SEM_LISTED ? st->holders : SEM_LISTED;

        if (!st->reachable)
            continue;
        v->reachable++;
        /* Without --permits: what a node that has its count started from
         * (available now plus taken), which is the limit while no expired
         * permit waits to be given back. */
        if (!limit && st->available >= 0 &&
            st->available + (int64_t)st->permits_taken > v->limit) {
            v->limit = (int)(st->available + (int64_t)st->permits_taken);
            v->estimated = 1;
        }
        if (st->holders > listed && st->holders - listed > v->unlisted)
            v->unlisted = st->holders - listed;
        for (j = 0; j < listed; j++)
            add_holder(v, &p[i].holders[j]);
    }
    v->quorum = sem_quorum(g, v->limit, n);
    for (k = 0; k < v->n_holders; k++) {
        sem_holder *h = &v->holders[k];

        for (i = 0, m = 0; i < n; i++) {
            size_t listed = p[i].st.holders < SEM_LISTED ? p[i].st.holders : SEM_LISTED;

            if (!p[i].st.reachable)
                continue;
            vals[m] = 0;
            for (j = 0; j < listed; j++)
                if (strcmp(p[i].holders[j].id, h->id) == 0)
                    vals[m] = p[i].holders[j].ms_left;
            m++;
        }
        h->valid_ms = quorum_th(vals, m, v->quorum, 0);
        if (h->nodes >= (size_t)v->quorum && h->valid_ms > 0)
            v->permits_held += h->permits;
    }
    /* A node without a count yet has every permit not taken there. */
    for (i = 0, m = 0; i < n; i++) {
        const redlock_semaphore_state *st = &p[i].st;

        if (!st->reachable)
            continue;
        if (st->available >= 0)
            vals[m++] = st->available;
        else
            vals[m++] = v->limit ? v->limit - (int64_t)st->permits_taken : -1;
    }
    v->available = quorum_th(vals, m, v->quorum, -1);
}

static void limit_text(const sem_view *v)
{
    if (!v->limit)
        printf("limit unknown (give --permits K)");
    else if (v->estimated)
        printf("about %d permits (available + taken; give --permits K)", v->limit);
    else
        printf("%d permits", v->limit);
}

static void print_text(redlock_client *c, const char *name, const sem_probe *p, size_t n,
                       const sem_view *v)
{
    char node[256], msg[4 * 128 + 1], id[4 * sizeof(((redlock_permit_info *)0)->id) + 1];
    size_t i;

    fputs("semaphore '", stdout);
    cli_fput_escaped(stdout, name, 0);
    printf("' on %zu node(s), ", n);
    limit_text(v);
    printf(", quorum %d\n", v->quorum);
    printf("%-24s %-9s %9s %6s %7s\n", "NODE", "REACHABLE", "AVAILABLE", "TAKEN", "HOLDERS");
    for (i = 0; i < n; i++) {
        const redlock_semaphore_state *st = &p[i].st;

        cli_escape(redlock_client_node_name(c, i), node, sizeof(node));
        if (!st->reachable) {
            printf("%-24s %-9s %s\n", node, "no",
                   cli_escape(st->message[0] ? st->message : redlock_strerror(st->err), msg,
                              sizeof(msg)));
            continue;
        }
        if (st->available >= 0)
            printf("%-24s %-9s %9lld %6zu %7zu\n", node, "yes", (long long)st->available,
                   st->permits_taken, st->holders);
        else
            printf("%-24s %-9s %9s %6zu %7zu\n", node, "yes", "-", st->permits_taken,
                   st->holders);
    }
    if (v->n_holders) {
        printf("%-64s %7s %10s %9s\n", "HOLDER", "PERMITS", "NODES", "MS_LEFT");
        for (i = 0; i < v->n_holders; i++) {
            const sem_holder *h = &v->holders[i];
            char nodes[32];

            snprintf(nodes, sizeof(nodes), "%zu of %zu", h->nodes, n);
            /* Permit ids come from the servers: escaped. */
            printf("%-64s %7d %10s %9lld%s\n", cli_escape(h->id, id, sizeof(id)), h->permits,
                   nodes, (long long)h->valid_ms,
                   h->nodes >= (size_t)v->quorum ? "" : "  (not a quorum)");
        }
    }
    if (v->unlisted)
        printf("and up to %zu more holder(s) per node, counted but not listed\n", v->unlisted);
    printf("permits held on a quorum: %lld", v->permits_held);
    if (v->limit)
        printf(" of %d", v->limit);
    if (v->available >= 0)
        printf("; available on a quorum: %lld\n", v->available);
    else
        printf("; available on a quorum: unknown\n");
    cli_margin_text(v->reachable, n, v->quorum, "permit");
}

static void print_json(redlock_client *c, const char *name, const sem_probe *p, size_t n,
                       const sem_view *v)
{
    size_t i, j;

    printf("{\"name\":");
    cli_json_string(name);
    printf(",\"type\":\"semaphore\",\"limit\":");
    if (v->limit && !v->estimated)
        printf("%d,\"limit_estimate\":null", v->limit);
    else if (v->limit)
        printf("null,\"limit_estimate\":%d", v->limit);
    else
        printf("null,\"limit_estimate\":null");
    printf(",\"quorum\":%d,\"nodes\":[", v->quorum);
    for (i = 0; i < n; i++) {
        const redlock_semaphore_state *st = &p[i].st;
        size_t listed = st->holders < SEM_LISTED ? st->holders : SEM_LISTED;

        printf("%s{\"node\":", i ? "," : "");
        cli_json_string(redlock_client_node_name(c, i));
        printf(",\"reachable\":%s", st->reachable ? "true" : "false");
        if (!st->reachable) {
            printf(",\"error\":");
            cli_json_string(st->message[0] ? st->message : redlock_strerror(st->err));
            printf("}");
            continue;
        }
        printf(",\"available\":");
        if (st->available >= 0)
            printf("%lld", (long long)st->available);
        else
            printf("null");
        printf(",\"permits_taken\":%zu,\"holders\":%zu,\"holder_list\":[", st->permits_taken,
               st->holders);
        for (j = 0; j < listed; j++) {
            printf("%s{\"id\":", j ? "," : "");
            cli_json_string(p[i].holders[j].id);
            printf(",\"permits\":%d,\"ms_left\":%lld}", p[i].holders[j].permits,
                   (long long)p[i].holders[j].ms_left);
        }
        printf("]}");
    }
    printf("],\"reachable\":%zu,\"holder_list\":[", v->reachable);
    for (i = 0; i < v->n_holders; i++) {
        const sem_holder *h = &v->holders[i];

        printf("%s{\"id\":", i ? "," : "");
        cli_json_string(h->id);
        printf(",\"permits\":%d,\"nodes\":%zu,\"ms_left\":%lld,\"held_by_quorum\":%s}",
               h->permits, h->nodes, (long long)h->valid_ms,
               h->nodes >= (size_t)v->quorum && h->valid_ms > 0 ? "true" : "false");
    }
    printf("],\"unlisted\":%zu,\"permits_held_by_quorum\":%lld,\"available_on_quorum\":",
           v->unlisted, v->permits_held);
    if (v->available >= 0)
        printf("%lld", v->available);
    else
        printf("null");
    printf(",\"margin\":%lld}\n", (long long)v->reachable - v->quorum);
}

int status_is_semaphore(const probe *p, size_t n)
{
    size_t i;
    int wrongtype = 0;

    for (i = 0; i < n; i++) {
        if (p[i].st.reachable && p[i].st.exists)
            return 0;
        /* The lock's inspection runs HGETALL, which a string refuses. */
        if (!p[i].st.reachable && p[i].st.err == REDLOCK_ECONFIG &&
            strstr(p[i].st.message, "WRONGTYPE"))
            wrongtype = 1;
    }
    return wrongtype;
}

int status_sem_view(cli_globals *g, redlock_client *c, redlock_semaphore *sem, int limit,
                    const char *name)
{
    size_t n = redlock_client_node_count(c);
    sem_probe *p = calloc(n ? n : 1, sizeof(*p));
    sem_view *v = calloc(1, sizeof(*v));
    int rc = 0;

    if (!p || !v) {
        free(p);
        free(v);
        cli_error("status", "out of memory");
        return CLI_EX_SOFTWARE;
    }
    sem_inspect_all(sem, p, n);
    sem_decide(g, p, n, limit, v);
    if (g->json)
        print_json(c, name, p, n, v);
    else
        print_text(c, name, p, n, v);
    fflush(stdout);
    if ((int)v->reachable < v->quorum) {
        int errs[REDLOCK_MAX_NODES];
        size_t i;

        for (i = 0; i < n; i++)
            errs[i] = p[i].st.reachable ? 0 : p[i].st.err;
        cli_error(name, "%zu of %zu node(s) answered, quorum is %d", v->reachable, n, v->quorum);
        rc = cli_shortfall_status(errs, n, v->quorum);
    }
    free(p);
    free(v);
    return rc;
}
