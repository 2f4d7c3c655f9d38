/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Command-line parsing shared by every command: the option reader, the
 * global options, numbers and durations, the node list, the options of
 * status and unlock (exec's are in args_exec.c; client.c turns them into
 * a client and a lock).
 * Every mistake is a usage error (exit 64) with a message that names the
 * offending argument.
 *
 * Parsing has no side effect on the process (no exit(), no environment
 * change): tests/fuzz/fuzz_args.c runs it on arbitrary arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "config/nodelist.h"

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
    G_JSON,
    G_CONFIG,
    G_PASSWORD_FILE
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
    {"config", 0, 1, G_CONFIG},
    {"password-file", 0, 1, G_PASSWORD_FILE},
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

static int duration_error(const char *what, const char *s)
{
    cli_error(what, "'%s' is not a duration (e.g. 250ms, 5s, 1.5s, 2m, 1h; a bare number is "
                    "milliseconds)", s);
    return CLI_EX_USAGE;
}

int cli_parse_duration(const char *what, const char *s, int64_t min_ms, int64_t max_ms,
                       int64_t *out_ms)
{
    static const struct {
        const char *suffix;
        uint64_t ms;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    const char *p = s;
    uint64_t whole = 0, frac = 0, scale = 1, unit = 0, ms;
    int digits = 0, frac_digits = 0, inexact = 0, over = 0;
    size_t i;

    /* Integer arithmetic only, so "1.1s" is exactly 1100 ms. */
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (whole > (UINT64_MAX - 9) / 10)
            over = 1;
        else
            whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, frac_digits++) {
            /* Nine digits are finer than any unit's millisecond; a
             * nonzero digit past them cannot make a whole number. */
            if (frac_digits < 9) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                scale *= 10;
            } else if (*p != '0') {
                inexact = 1;
            }
        }
        if (frac_digits == 0)
            return duration_error(what, s);
    }
    if (digits == 0 && frac_digits == 0)
        return duration_error(what, s);
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(p, units[i].suffix) == 0)
            unit = units[i].ms;
    if (!unit)
        return duration_error(what, s);
    if (inexact || (frac * unit) % scale != 0) {
        cli_error(what, "'%s' is not a whole number of milliseconds%s", s,
                  p[0] ? "" : " (a bare number is milliseconds; for seconds add an s)");
        return CLI_EX_USAGE;
    }
    if (over || whole > (uint64_t)max_ms / unit ||
        (ms = whole * unit + frac * unit / scale) > (uint64_t)max_ms || (int64_t)ms < min_ms) {
        cli_error(what, "%s is out of range %lld..%lld ms", s, (long long)min_ms,
                  (long long)max_ms);
        return CLI_EX_USAGE;
    }
    *out_ms = (int64_t)ms;
    return 0;
}

static int parse_duration_int(const char *what, const char *s, int min_ms, int max_ms, int *out)
{
    int64_t v;
    int rc = cli_parse_duration(what, s, min_ms, max_ms, &v);

    if (rc == 0)
        *out = (int)v;
    return rc;
}

int cli_parse_quorum(const char *what, const char *v, int *out)
{
    char *end;
    long q;

    if (strcmp(v, "all") == 0) {
        *out = REDLOCK_QUORUM_ALL;
        return 0;
    }
    /* The upper bound is checked once the nodes are known. */
    errno = 0;
    q = strtol(v, &end, 10);
    if (!*v || *end || *v < '0' || *v > '9' || errno || q < 1 || q > 64) {
        cli_error(what, "'%s' is not a quorum: use a number of nodes 1..N, or all", v);
        return CLI_EX_USAGE;
    }
    *out = (int)q;
    return 0;
}

int cli_parse_replica_acks(const char *what, const char *v, int *out)
{
    char *end;
    long k;

    /* One message for every bad value, naming the range: the generic
     * number parser's "out of range" would not say what K counts. */
    errno = 0;
    k = strtol(v, &end, 10);
    if (!*v || *end || *v < '0' || *v > '9' || errno || k > CLI_MAX_REPLICA_ACKS) {
        cli_error(what, "'%s' is not a number of replicas to acknowledge each grant (0..%d)", v,
                  CLI_MAX_REPLICA_ACKS);
        return CLI_EX_USAGE;
    }
    *out = (int)k;
    return 0;
}

int cli_parse_replica_timeout(const char *what, const char *v, int *out_ms)
{
    int64_t ms;

    /* 0 would mean "the node timeout" in the library: leave the option
     * out for that, so that a 0 typed by mistake is not a silent default. */
    if (cli_parse_duration(what, v, 1, INT32_MAX, &ms))
        return CLI_EX_USAGE;
    *out_ms = (int)ms;
    return 0;
}

/* ---- user info in node URIs ------------------------------------------------ */

/*
 * The user info of the URI uri[0..n): 0 none, 1 a user only, 2 a
 * password, at uri[*pw_off .. *pw_off + *pw_len). As the library's parser
 * does, the user info is everything between "://" and the last '@';
 * unix:// paths are literal and have none.
 */
static int uri_userinfo(const char *uri, size_t n, size_t *pw_off, size_t *pw_len)
{
    size_t i, start, at = 0, colon = 0;
    int have_at = 0;

    for (i = 0; i + 3 <= n; i++)
        if (memcmp(uri + i, "://", 3) == 0)
            break;
    if (i + 3 > n)
        return 0;
    if (i == 4 && strncasecmp(uri, "unix", 4) == 0)
        return 0;
    start = i + 3;
    for (i = start; i < n; i++) {
        if (uri[i] == '@') {
            at = i;
            have_at = 1;
        }
    }
    if (!have_at)
        return 0;
    for (i = start; i < at; i++) {
        if (uri[i] == ':') {
            colon = i;
            break;
        }
    }
    if (i == at || colon + 1 == at)
        return 1;
    *pw_off = colon + 1;
    *pw_len = at - colon - 1;
    return 2;
}

/* Both walk the list item by item as the library splits it (at a ','
 * before a scheme: a sentinel URI's own commas stay inside its item). */
int cli_nodes_userinfo(const char *list)
{
    const char *p = list, *end;
    size_t off, len;
    int worst = 0, u;

    for (; p; p = *end ? end + 1 : NULL) {
        end = redlock__nodelist_item_end(p);
        u = uri_userinfo(p, (size_t)(end - p), &off, &len);
        if (u > worst)
            worst = u;
    }
    return worst;
}

void cli_mask_passwords(char *list)
{
    char *p = list;
    const char *end;
    size_t off, len;

    for (; p; p = *end ? p + (end - p) + 1 : NULL) {
        end = redlock__nodelist_item_end(p);
        if (uri_userinfo(p, (size_t)(end - p), &off, &len) == 2)
            memset(p + off, '*', len);
    }
}

static int set_global(cli_globals *g, int id, const char *name, const char *v)
{
    switch (id) {
    case G_NODES: {
        /* Given more than once, the lists concatenate: joined with ',',
         * which splits there since each list starts with a scheme. */
        size_t had = g->nodes_buf ? strlen(g->nodes_buf) : 0;
        char *joined = malloc(had + 1 + strlen(v) + 1);

        if (!joined) {
            cli_error(name, "out of memory");
            return CLI_EX_SOFTWARE;
        }
        if (had) {
            memcpy(joined, g->nodes_buf, had);
            joined[had++] = ',';
            explicit_bzero(g->nodes_buf, strlen(g->nodes_buf));
        }
        strcpy(joined + had, v);
        free(g->nodes_buf);
        g->nodes_buf = joined;
        /* The copy is what is used; the argument itself is what `ps`
         * and /proc/PID/cmdline show, from now on without the password
         * (cli_resolve_nodes warns that it was visible until now). v
         * points into argv, which is ours to change. */
        cli_mask_passwords((char *)v);
        return 0;
    }
    case G_QUORUM:
        return cli_parse_quorum(name, v, &g->quorum);
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
        return parse_duration_int(name, v, 1, 3600000, &g->connect_timeout_ms);
    case G_TIMEOUT:
        return parse_duration_int(name, v, 1, 3600000, &g->timeout_ms);
    case G_WATCHDOG_LEASE:
        /* Below 100 ms a renewal every lease/3 cannot keep up with one
         * slow round trip. */
        return parse_duration_int(name, v, 100, 3600000, &g->watchdog_lease_ms);
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
    case G_CONFIG:
        if (!*v) {
            cli_error(name, "the file name is empty");
            return CLI_EX_USAGE;
        }
        g->config_path = v;
        return 0;
    case G_PASSWORD_FILE:
        if (!*v) {
            cli_error(name, "the file name is empty");
            return CLI_EX_USAGE;
        }
        g->password_file = v;
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

int cli_split_nodes(cli_globals *g, const char *src)
{
    char why[128];
    int rc;

    /* The library's splitter (config/nodelist.c), so --nodes, the config
     * file and REDLOCK_NODES accept exactly what redlock_client_new_from_env
     * accepts. */
    g->n_nodes = 0;
    rc = redlock__nodelist_split(g->nodes_buf, g->nodes, sizeof(g->nodes) / sizeof(g->nodes[0]),
                                 &g->n_nodes, why, sizeof(why));
    if (rc == REDLOCK_EURI) {
        cli_error(src, "empty node URI in the list (%s)", why);
        return CLI_EX_USAGE;
    }
    if (rc != REDLOCK_OK) {
        cli_error(src, "%s", why);
        return CLI_EX_USAGE;
    }
    if (g->quorum > 0 && (size_t)g->quorum > g->n_nodes) {
        cli_error("--quorum", "%d is more than the %zu node(s) given", g->quorum, g->n_nodes);
        return CLI_EX_USAGE;
    }
    return 0;
}

int cli_resolve_nodes(cli_globals *g)
{
    const char *env = getenv("REDLOCK_NODES"), *src = "--nodes";
    char src_buf[300], places[4500];
    int rc;

    if ((rc = cli_config_load(g)) != 0)
        return rc;
    g->nodes_layer = CLI_LAYER_COMMAND_LINE;
    if (g->nodes_buf) {
        if (cli_nodes_userinfo(g->nodes_buf) == 2)
            cli_warn("--nodes", "a password on the command line is visible to other users "
                                "(ps, /proc) until redlock starts; use $REDLOCK_PASSWORD, "
                                "--password-file or password_file in the config file");
    } else if (env && *env) {
        src = "REDLOCK_NODES";
        g->nodes_layer = CLI_LAYER_ENVIRONMENT;
        g->nodes_buf = strdup(env);
    } else if (g->cfg.nodes) {
        snprintf(src_buf, sizeof(src_buf), "%s: nodes", g->cfg.path ? g->cfg.path : "config");
        src = src_buf;
        g->nodes_layer = CLI_LAYER_FILE;
        g->nodes_buf = strdup(g->cfg.nodes);
    } else {
        /* There is no default: a lock on nodes nobody chose is no lock. */
        cli_error("nodes", "no nodes configured: give --nodes URI[,URI...], set REDLOCK_NODES, "
                           "or write 'nodes = URI,...' in a config file (%s%s%s)",
                  cli_config_places(places, sizeof(places)), g->cfg.path ? "; read " : "",
                  g->cfg.path ? g->cfg.path : "");
        return CLI_EX_USAGE;
    }
    if (!g->nodes_buf) {
        cli_error(src, "out of memory");
        return CLI_EX_SOFTWARE;
    }
    if (!g->quorum)
        g->quorum = g->cfg.quorum;
    return cli_split_nodes(g, src);
}

void cli_free_globals(cli_globals *g)
{
    free(g->nodes_buf);
    g->nodes_buf = NULL;
    if (g->password) {
        explicit_bzero(g->password, strlen(g->password));
        free(g->password);
        g->password = NULL;
    }
    cli_config_free(&g->cfg);
    g->config_loaded = 0;
}


/* ---- the options of the commands ------------------------------------------ */

int cli_name_arg(const char *cmd, int id, const char *v, const char **name)
{
    switch (id) {
    case CLI_OPT_HELP:
        cli_usage(cmd, 0);
        return -1;
    case CLI_ARG_ERROR:
        return CLI_EX_USAGE;
    case CLI_ARG_POSITIONAL:
        if (*name) {
            cli_error(cmd, "unexpected argument '%s' (one lock NAME)", v);
            return CLI_EX_USAGE;
        }
        *name = v;
        return 0;
    case CLI_ARG_DASHDASH:
        cli_error(cmd, "unexpected '--'");
        return CLI_EX_USAGE;
    default:
        return 1;
    }
}

int cli_parse_name_opt(cli_globals *g, const char *cmd, int argc, char **argv,
                       const cli_opt *opts, int *force, const char **name)
{
    cli_args a = {argc, argv, 0, cmd, g};
    const char *v;
    int id, rc;

    *name = NULL;
    while ((id = cli_next(&a, opts, &v)) != CLI_ARG_END) {
        if ((rc = cli_name_arg(cmd, id, v, name)) != 1) {
            if (rc)
                return rc;
        } else if (force) {
            *force = 1;
        } else {
            cli_error(cmd, "internal error: unexpected option %d", id);
            return CLI_EX_SOFTWARE;
        }
    }
    return 0;
}

int cli_parse_name(cli_globals *g, const char *cmd, int argc, char **argv, const cli_opt *opts,
                   int *force, const char **name)
{
    int rc = cli_parse_name_opt(g, cmd, argc, argv, opts, force, name);

    if (rc == 0 && !*name) {
        cli_error(cmd, "missing lock NAME");
        return CLI_EX_USAGE;
    }
    return rc;
}
