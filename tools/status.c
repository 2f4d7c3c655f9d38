/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock status NAME: what every node stores for the lock, and whether one
 * holder holds it on a quorum (for a read-write lock, its readers or its
 * writer: status_rw.c); a semaphore's permits with --permits K, or when
 * NAME turns out to be one (status_sem.c); with --metrics, the client's
 * statistics after that inspection in the Prometheus text format.
 * redlock unlock NAME --force: deletes it on every node, whoever holds it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "status.h"

static void *probe_main(void *arg)
{
    probe *p = arg;

    p->rc = redlock_lock_inspect_holders(p->lock, p->member, &p->st, p->fields, STATUS_FIELDS);
    if (p->rc != REDLOCK_OK) {
        snprintf(p->error, sizeof(p->error), "%s", redlock_last_error());
        return NULL;
    }
    status_list_fields(p);
    /* A second round trip on the same thread: facts are only worth
     * reading from a member that holds the lock. */
    if (p->want_facts && p->st.reachable && p->st.exists &&
        redlock_lock_holder_facts(p->lock, p->member, &p->facts) != REDLOCK_OK)
        p->facts.found = 0;
    return NULL;
}

static void inspect_all(redlock_lock *lock, probe *p, size_t n, int want_facts)
{
    size_t i;

    for (i = 0; i < n; i++) {
        memset(&p[i], 0, sizeof(p[i]));
        p[i].lock = lock;
        p[i].member = i;
        p[i].want_facts = want_facts;
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
    /* The holder's facts, from a member whose facts name that holder: a
     * previous holder's facts may outlive its hold. NULL: none. */
    const redlock_holder_facts *facts;
} verdict;

static verdict decide(const probe *p, size_t n, int quorum)
{
    verdict v = {0, NULL, 0, 0, NULL};
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
    for (i = 0; v.held && !v.facts && i < n; i++)
        if (p[i].facts.found && strcmp(p[i].facts.owner, v.holder) == 0)
            v.facts = &p[i].facts;
    return v;
}

static void print_json(redlock_client *c, const char *name, int quorum, const probe *p,
                       size_t n, const verdict *v, const rw_view *rw)
{
    size_t i;

    printf("{\"name\":");
    cli_json_string(name);
    printf(",\"type\":\"lock\",\"quorum\":%d,\"nodes\":[", quorum);
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
        printf(",\"holders\":%zu,\"hold_count\":%lld,\"pttl_ms\":%lld,\"token\":%llu",
               st->holders, (long long)st->hold_count, (long long)st->pttl_ms,
               (unsigned long long)st->token);
        status_rw_node_json(&p[i]);
        printf("}");
    }
    printf("],\"reachable\":%zu,\"holder\":", v->reachable);
    if (v->holder)
        cli_json_string(v->holder);
    else
        printf("null");
    printf(",\"holder_nodes\":%zu,\"held_by_quorum\":%s", v->holder_nodes,
           v->held ? "true" : "false");
    cli_holder_json(v->facts);
    status_rw_json(rw, quorum);
    printf(",\"margin\":%lld}\n", (long long)v->reachable - quorum);
}

/* Room for a holder field, escaped (four bytes per byte at most). */
#define SAFE_FIELD (4 * sizeof(((redlock_member_state *)0)->holder) + 32)

static void print_text(redlock_client *c, const char *name, int quorum, const probe *p,
                       size_t n, const verdict *v, const rw_view *rw)
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
    status_rw_text(rw, n, quorum);
    cli_holder_text(v->facts);
    cli_margin_text(v->reachable, n, quorum, "lock");
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

enum { S_METRICS = 1, S_WATCH, S_COUNT, S_PERMITS };

#define WATCH_MAX_MS 86400000 /* a day between views */

typedef struct status_opts {
    const char *name;         /* NULL: --metrics without a lock */
    int metrics;
    int watch;                /* refresh until interrupted */
    int64_t interval_ms;
    int64_t count;            /* 0: no limit */
    int permits;              /* --permits K: NAME is a semaphore of K permits */
} status_opts;

/* What is looked at: the lock NAME, or the semaphore NAME (given with
 * --permits, or found there: then made for inspection only, whose limit
 * does not matter, and the view estimates the limit). */
typedef struct status_target {
    redlock_lock *lock;
    redlock_semaphore *sem;
    int limit;                /* --permits K; 0: not given */
} status_target;

/* --watch [INTERVAL]: the value is optional, so it is the next argument
 * only if that reads as a duration (starts with a digit); a lock name
 * that does would come before --watch. */
static int parse_status(cli_globals *g, int argc, char **argv, status_opts *o)
{
    static const cli_opt opts[] = {{"metrics", 0, 0, S_METRICS},
                                   {"watch", 0, 0, S_WATCH},
                                   {"count", 0, 1, S_COUNT},
                                   {"permits", 0, 1, S_PERMITS},
                                   {NULL, 0, 0, 0}};
    cli_args a = {argc, argv, 0, "status", g};
    const char *v;
    int id, rc;

    memset(o, 0, sizeof(*o));
    o->interval_ms = 1000;
    for (;;) {
        if (a.i < argc && strncmp(argv[a.i], "--watch=", 8) == 0) {
            o->watch = 1;
            if (cli_parse_duration("--watch", argv[a.i++] + 8, 10, WATCH_MAX_MS, &o->interval_ms))
                return CLI_EX_USAGE;
            continue;
        }
        if ((id = cli_next(&a, opts, &v)) == CLI_ARG_END)
            break;
        if ((rc = cli_name_arg("status", id, v, &o->name)) != 1) {
            if (rc)
                return rc;
            continue;
        }
        switch (id) {
        case S_METRICS:
            o->metrics = 1;
            break;
        case S_WATCH:
            o->watch = 1;
            if (a.i < argc && argv[a.i][0] >= '0' && argv[a.i][0] <= '9' &&
                cli_parse_duration("--watch", argv[a.i++], 10, WATCH_MAX_MS, &o->interval_ms))
                return CLI_EX_USAGE;
            break;
        case S_COUNT:
            if (cli_parse_i64("--count", v, 1, INT64_MAX, &o->count))
                return CLI_EX_USAGE;
            break;
        case S_PERMITS:
            if (cli_parse_int("--permits", v, 1, INT32_MAX, &o->permits))
                return CLI_EX_USAGE;
            break;
        default:
            cli_error("status", "internal error: unexpected option %d", id);
            return CLI_EX_SOFTWARE;
        }
    }
    if (o->count && !o->watch) {
        cli_error("--count", "goes with --watch");
        return CLI_EX_USAGE;
    }
    return 0;
}

/* One look at the lock: the probes, then the view. */
static int status_view(cli_globals *g, redlock_client *c, status_target *t,
                       const status_opts *o, const char *name)
{
    redlock_lock *lock = t->lock;
    probe p[64];
    size_t n = redlock_lock_member_count(lock);
    int quorum = redlock_lock_quorum(lock), rc = 0;
    verdict v;
    rw_view rw;

    if (t->limit && !o->metrics)
        return status_sem_view(g, c, t->sem, t->limit, name);

    inspect_all(lock, p, n, !o->metrics);
    if (!o->metrics && status_is_semaphore(p, n)) {
        /* NAME is a semaphore's count: shown as one, its limit estimated. */
        if (!t->sem && redlock_semaphore_new(c, name, 1, NULL, &t->sem) != REDLOCK_OK) {
            cli_error(name, "semaphore: %s", redlock_last_error());
            return CLI_EX_SOFTWARE;
        }
        return status_sem_view(g, c, t->sem, 0, name);
    }
    v = decide(p, n, quorum);
    status_rw_decide(p, n, quorum, &rw);
    if (o->metrics)
        rc = print_metrics(c);
    else if (g->json)
        print_json(c, name, quorum, p, n, &v, &rw);
    else
        print_text(c, name, quorum, p, n, &v, &rw);
    fflush(stdout);
    if ((int)v.reachable < quorum) {
        int errs[REDLOCK_MAX_NODES];
        size_t i;

        for (i = 0; i < n; i++)
            errs[i] = p[i].st.reachable ? 0 : p[i].st.err;
        cli_error(o->name ? name : "status", "%zu of %zu node(s) answered, quorum is %d",
                  v.reachable, n, quorum);
        rc = cli_shortfall_status(errs, n, quorum);
    }
    return rc;
}

/* Sleeps ms, or less if SIGINT or SIGTERM (blocked, so only this wait
 * takes them) comes: then returns 1. */
static int interrupted_within(const sigset_t *stop, int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    int64_t end = cli_now_ns() + ms * 1000000;

    for (;;) {
        if (sigtimedwait(stop, NULL, &ts) > 0)
            return 1;
        if (errno != EINTR)
            return 0; /* EAGAIN: the time is up */
        ms = (end - cli_now_ns()) / 1000000;
        if (ms <= 0)
            return 0;
        ts.tv_sec = (time_t)(ms / 1000);
        ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    }
}

/* --watch: a view per interval until interrupted (exit 0) or --count
 * views (the last one's status). */
static int watch(cli_globals *g, redlock_client *c, status_target *t, const status_opts *o,
                 const char *name, const sigset_t *stop)
{
    int tty = isatty(STDOUT_FILENO), rc = 0;
    int64_t shown;

    for (shown = 0; !o->count || shown < o->count; shown++) {
        if (shown > 0 && interrupted_within(stop, o->interval_ms))
            return 0;
        /* Only a terminal is redrawn; a pipe or file keeps every view. */
        if (tty)
            fputs("\033[H\033[2J", stdout);
        else if (shown > 0 && !g->json)
            fputs("\n", stdout);
        rc = status_view(g, c, t, o, name);
    }
    return rc;
}

int cli_cmd_status(cli_globals *g, int argc, char **argv)
{
    redlock_client *c = NULL;
    status_target t = {NULL, NULL, 0};
    status_opts o;
    sigset_t stop, old;
    const char *name;
    int rc;

    if ((rc = parse_status(g, argc, argv, &o)) != 0)
        return rc < 0 ? 0 : rc;
    if (!o.name && !o.metrics) {
        cli_error("status", "missing lock NAME");
        return CLI_EX_USAGE;
    }
    if (o.permits && !o.name) {
        cli_error("--permits", "names no semaphore: give NAME");
        return CLI_EX_USAGE;
    }
    if (o.metrics && g->json) {
        cli_error("--metrics", "prints the Prometheus text format; it does not go with --json");
        return CLI_EX_USAGE;
    }
    name = o.name ? o.name : METRICS_PROBE_NAME;
    /* Blocked before the client starts its threads, so none of them takes
     * the signal that ends --watch: the wait between views does. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    if (o.watch)
        pthread_sigmask(SIG_BLOCK, &stop, &old);
    if ((rc = cli_client_new(g, &c)) != 0)
        goto out;
    if ((rc = cli_lock_new(g, c, name, 0, NULL, &t.lock)) != 0)
        goto out;
    /* The quorum a holder of K permits would use (a --quorum too small
     * for K is refused, as exec refuses it). */
    if (o.permits && (rc = cli_semaphore_new(g, c, name, o.permits, &t.sem)) != 0)
        goto out;
    t.limit = o.permits;
    rc = o.watch ? watch(g, c, &t, &o, name, &stop) : status_view(g, c, &t, &o, name);
out:
    redlock_semaphore_free(t.sem);
    redlock_lock_free(t.lock);
    redlock_client_free(c);
    if (o.watch)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
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
    if ((rc = cli_lock_new(g, c, name, 0, NULL, &lock)) != 0)
        goto out;
    switch (redlock_force_unlock(lock, &released)) {
    case REDLOCK_OK:
        break;
    case REDLOCK_ENO_QUORUM:
        cli_error(name, "%s", redlock_last_error());
        rc = CLI_EX_NOQUORUM;
        goto out;
    case REDLOCK_EAUTH:
    case REDLOCK_ETLS:
        cli_error(name, "%s", redlock_last_error());
        rc = CLI_EX_NOPERM;
        goto out;
    case REDLOCK_ECONFIG:
        cli_error(name, "%s", redlock_last_error());
        rc = CLI_EX_CONFIG;
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
