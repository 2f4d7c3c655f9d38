/*
 * Command-line parsing shared by every command: the option reader, the
 * global options, number parsing, and turning the global options into a
 * client and a lock. Every mistake is a usage error (exit 64) with a
 * message that names the offending argument.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum {
    G_NODES = 1,
    G_QUORUM,
    G_TLS_CA,
    G_TLS_CERT,
    G_TLS_KEY,
    G_TLS_SERVER_NAME,
    G_TLS_INSECURE,
    G_CONNECT_TIMEOUT,
    G_TIMEOUT,
    G_WATCHDOG_LEASE,
    G_USER,
    G_VERBOSE,
    G_JSON
};

static const cli_opt global_opts[] = {
    {"nodes", 'n', 1, G_NODES},
    {"quorum", 'q', 1, G_QUORUM},
    {"tls-ca", 0, 1, G_TLS_CA},
    {"tls-cert", 0, 1, G_TLS_CERT},
    {"tls-key", 0, 1, G_TLS_KEY},
    {"tls-server-name", 0, 1, G_TLS_SERVER_NAME},
    {"tls-insecure", 0, 0, G_TLS_INSECURE},
    {"connect-timeout", 0, 1, G_CONNECT_TIMEOUT},
    {"timeout", 0, 1, G_TIMEOUT},
    {"watchdog-lease", 0, 1, G_WATCHDOG_LEASE},
    {"user", 0, 1, G_USER},
    {"verbose", 'v', 0, G_VERBOSE},
    {"json", 0, 0, G_JSON},
    {NULL, 0, 0, 0}};

int cli_parse_i64(const char *what, const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (!*s || *end || (*s != '-' && (*s < '0' || *s > '9'))) {
        cli_error(what, "'%s' is not a number", s);
        return CLI_EX_USAGE;
    }
    if (errno == ERANGE || v < min || v > max) {
        cli_error(what, "%s is out of range %lld..%lld", s, (long long)min, (long long)max);
        return CLI_EX_USAGE;
    }
    *out = v;
    return 0;
}

int cli_parse_int(const char *what, const char *s, int min, int max, int *out)
{
    int64_t v;
    int rc = cli_parse_i64(what, s, min, max, &v);

    if (rc == 0)
        *out = (int)v;
    return rc;
}

static int set_global(cli_globals *g, int id, const char *name, const char *v)
{
    switch (id) {
    case G_NODES:
        free(g->nodes_buf);
        if (!(g->nodes_buf = strdup(v))) {
            cli_error(name, "out of memory");
            return CLI_EX_SOFTWARE;
        }
        return 0;
    case G_QUORUM:
        if (strcmp(v, "all") == 0) {
            g->quorum = REDLOCK_QUORUM_ALL;
            return 0;
        }
        /* The upper bound is checked once the nodes are known. */
        {
            char *end;
            long q = strtol(v, &end, 10);

            if (!*v || *end || *v < '0' || *v > '9' || q < 1 || q > 64) {
                cli_error(name, "'%s' is not a quorum: use a number of nodes 1..N, or all", v);
                return CLI_EX_USAGE;
            }
            g->quorum = (int)q;
            return 0;
        }
    case G_TLS_CA:
        g->tls_ca = v;
        return 0;
    case G_TLS_CERT:
        g->tls_cert = v;
        return 0;
    case G_TLS_KEY:
        g->tls_key = v;
        return 0;
    case G_TLS_SERVER_NAME:
        g->tls_server_name = v;
        return 0;
    case G_TLS_INSECURE:
        g->tls_insecure = 1;
        return 0;
    case G_CONNECT_TIMEOUT:
        return cli_parse_int(name, v, 1, 3600000, &g->connect_timeout_ms);
    case G_TIMEOUT:
        return cli_parse_int(name, v, 1, 3600000, &g->timeout_ms);
    case G_WATCHDOG_LEASE:
        /* Below 100 ms a renewal every lease/3 cannot keep up with one
         * slow round trip. */
        return cli_parse_int(name, v, 100, 3600000, &g->watchdog_lease_ms);
    case G_USER:
        if (!*v) {
            cli_error(name, "the user name is empty");
            return CLI_EX_USAGE;
        }
        g->user = v;
        return 0;
    case G_VERBOSE:
        g->verbose++;
        return 0;
    case G_JSON:
        g->json = 1;
        return 0;
    }
    return CLI_EX_SOFTWARE;
}

static const cli_opt *find_long(const cli_opt *t, const char *name, size_t len)
{
    for (; t && t->name; t++)
        if (strlen(t->name) == len && strncmp(t->name, name, len) == 0)
            return t;
    return NULL;
}

static const cli_opt *find_short(const cli_opt *t, char c)
{
    for (; t && t->name; t++)
        if (t->short_name == c)
            return t;
    return NULL;
}

static const char *ctx(const cli_args *a)
{
    return a->cmd ? a->cmd : "command line";
}

/* One option: its table entry, its display name and its value. Handles
 * "--name", "--name=value", "--name value", "-x", "-xvalue", "-x value" and
 * runs of value-less short options ("-vv"). */
int cli_next(cli_args *a, const cli_opt *opts, const char **value)
{
    static char shown[80];
    static const cli_opt help_opt = {"help", 'h', 0, CLI_OPT_HELP};
    const cli_opt *o;
    const char *arg, *inline_val = NULL;
    int is_global, rc;

    for (;;) {
        /* Global options loop here: nothing may carry over between them. */
        *value = NULL;
        inline_val = NULL;
        if (a->i >= a->argc)
            return CLI_ARG_END;
        arg = a->argv[a->i];
        if (strcmp(arg, "--") == 0) {
            a->i++;
            return CLI_ARG_DASHDASH;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            a->i++;
            *value = arg;
            return CLI_ARG_POSITIONAL;
        }
        a->i++;
        if (arg[1] == '-') {
            const char *name = arg + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);

            if (eq)
                inline_val = eq + 1;
            o = find_long(opts, name, len);
            is_global = 0;
            if (!o && (o = find_long(global_opts, name, len)))
                is_global = 1;
            if (!o && len == 4 && strncmp(name, "help", 4) == 0)
                o = &help_opt;
            if (!o) {
                cli_error(ctx(a), "unknown option '--%.*s'", (int)(len > 60 ? 60 : len), name);
                return CLI_ARG_ERROR;
            }
            snprintf(shown, sizeof(shown), "--%s", o->name);
            if (!o->takes_value && inline_val) {
                cli_error(shown, "takes no value");
                return CLI_ARG_ERROR;
            }
        } else {
            o = find_short(opts, arg[1]);
            is_global = 0;
            if (!o && (o = find_short(global_opts, arg[1])))
                is_global = 1;
            if (!o && arg[1] == 'h')
                o = &help_opt;
            if (!o) {
                cli_error(ctx(a), "unknown option '-%c'", arg[1]);
                return CLI_ARG_ERROR;
            }
            /* Messages name the long form, which the help lists first. */
            snprintf(shown, sizeof(shown), "--%s", o->name);
            if (arg[2]) {
                if (o->takes_value) {
                    inline_val = arg + 2;
                } else {
                    /* "-vv": only the value-less global -v may repeat. */
                    const char *p;

                    for (p = arg + 2; *p; p++) {
                        if (*p != arg[1]) {
                            cli_error(ctx(a), "unknown option '%s'", arg);
                            return CLI_ARG_ERROR;
                        }
                    }
                    if (is_global)
                        for (p = arg + 2; *p; p++)
                            set_global(a->g, o->id, shown, NULL);
                }
            }
        }
        if (o->takes_value) {
            if (inline_val) {
                *value = inline_val;
            } else if (a->i < a->argc) {
                *value = a->argv[a->i++];
            } else {
                cli_error(shown, "missing value");
                return CLI_ARG_ERROR;
            }
        }
        if (!is_global)
            return o->id;
        if ((rc = set_global(a->g, o->id, shown, *value)) != 0)
            return CLI_ARG_ERROR;
    }
}

int cli_resolve_nodes(cli_globals *g)
{
    const char *src = "--nodes";
    char *p, *next;

    g->n_nodes = 0;
    if (!g->nodes_buf) {
        const char *env = getenv("REDLOCK_NODES");

        src = env && *env ? "REDLOCK_NODES" : "default nodes";
        g->nodes_buf = strdup(env && *env ? env : CLI_DEFAULT_NODES);
        if (!g->nodes_buf) {
            cli_error(src, "out of memory");
            return CLI_EX_SOFTWARE;
        }
    }
    for (p = g->nodes_buf; p; p = next) {
        next = strchr(p, ',');
        if (next)
            *next++ = '\0';
        if (!*p) {
            cli_error(src, "empty node URI in the list");
            return CLI_EX_USAGE;
        }
        if (g->n_nodes == sizeof(g->nodes) / sizeof(g->nodes[0])) {
            cli_error(src, "more than %zu nodes", sizeof(g->nodes) / sizeof(g->nodes[0]));
            return CLI_EX_USAGE;
        }
        g->nodes[g->n_nodes++] = p;
    }
    if (g->quorum > 0 && (size_t)g->quorum > g->n_nodes) {
        cli_error("--quorum", "%d is more than the %zu node(s) given", g->quorum, g->n_nodes);
        return CLI_EX_USAGE;
    }
    return 0;
}

static void log_to_stderr(void *ud, redlock_log_level level, const char *msg)
{
    (void)ud;
    fprintf(stderr, "redlock: %s%s\n", level <= REDLOCK_LOG_WARN ? "warning: " : "", msg);
}

int cli_client_new(cli_globals *g, redlock_client **out)
{
    redlock_options o;
    const char *pw = getenv("REDLOCK_PASSWORD");
    int rc;

    *out = NULL;
    if ((rc = cli_resolve_nodes(g)) != 0)
        return rc;
    memset(&o, 0, sizeof(o));
    o.connect_timeout_ms = g->connect_timeout_ms;
    o.node_timeout_ms = g->timeout_ms;
    o.username = g->user;
    o.password = pw && *pw ? pw : NULL;
    o.tls.ca_file = g->tls_ca;
    o.tls.cert_file = g->tls_cert;
    o.tls.key_file = g->tls_key;
    o.tls.server_name = g->tls_server_name;
    o.tls.insecure_skip_verify = g->tls_insecure;
    /* A short watchdog lease makes a lost lock show up within a second
     * (tests, experiments); 0 keeps the library's default. */
    o.watchdog_lease_ms = g->watchdog_lease_ms;
    o.unavailable_timeout_ms = g->unavailable_timeout_ms;
    /* Library warnings (a lost lock, TLS without verification) go to
     * stderr; -v adds the informational messages, -vv the debug ones. */
    o.log_fn = log_to_stderr;
    o.log_level = g->verbose >= 2 ? REDLOCK_LOG_DEBUG
                  : g->verbose  ? REDLOCK_LOG_INFO
                                : REDLOCK_LOG_ERROR;
    if (g->user && !o.password) {
        cli_error("--user", "needs a password in $REDLOCK_PASSWORD");
        return CLI_EX_USAGE;
    }
    if ((g->tls_cert == NULL) != (g->tls_key == NULL)) {
        cli_error(g->tls_cert ? "--tls-cert" : "--tls-key",
                  "--tls-cert and --tls-key go together");
        return CLI_EX_USAGE;
    }
    if (g->tls_insecure)
        cli_warn("--tls-insecure", "server certificates are NOT verified");
    rc = redlock_client_new(out, g->nodes, g->n_nodes, &o);
    switch (rc) {
    case REDLOCK_OK:
        return 0;
    case REDLOCK_EURI:
    case REDLOCK_EINVAL:
        cli_error("--nodes", "%s", redlock_last_error());
        return CLI_EX_USAGE;
    case REDLOCK_ETLS:
        cli_error("TLS", "%s", redlock_last_error());
        return CLI_EX_USAGE;
    default:
        cli_error("client", "%s", redlock_last_error());
        return CLI_EX_SOFTWARE;
    }
}

int cli_lock_new(cli_globals *g, redlock_client *c, const char *name, int fencing,
                 redlock_lock **out)
{
    redlock_lock_options lo;
    int rc;

    memset(&lo, 0, sizeof(lo));
    lo.quorum = g->quorum;
    lo.fencing = fencing;
    rc = redlock_lock_new(c, name, &lo, out);
    if (rc == REDLOCK_EINVAL) {
        cli_error("lock name", "%s", redlock_last_error());
        return CLI_EX_USAGE;
    }
    if (rc) {
        cli_error("lock", "%s", redlock_last_error());
        return CLI_EX_SOFTWARE;
    }
    return 0;
}

const char *cli_member_why(redlock_client *c, size_t i, const redlock_member_report *r)
{
    const char *node = redlock_client_node_name(c, i);
    const char *why = r->message[0] ? r->message : redlock_strerror(r->err);
    size_t len = node ? strlen(node) : 0;

    /* Transport messages already name the node; say it once. */
    if (len && strncmp(why, node, len) == 0 && strncmp(why + len, ": ", 2) == 0)
        why += len + 2;
    return why;
}

void cli_free_globals(cli_globals *g)
{
    free(g->nodes_buf);
    g->nodes_buf = NULL;
}
