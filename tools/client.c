/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Turning the parsed options (with the environment and the configuration
 * file) into a client, a lock or a semaphore. Kept apart from args.c,
 * whose parsing is fuzzed on its own: nothing here runs before the
 * command line has been accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void log_to_stderr(void *ud, redlock_log_level level, const char *msg)
{
    char safe[2048];

    (void)ud;
    /* Library messages quote servers: escaped, one line. */
    fprintf(stderr, "redlock: %s%s\n", level <= REDLOCK_LOG_WARN ? "warning: " : "",
            cli_escape(msg, safe, sizeof(safe)));
}

/* Wipes the value of an environment variable in place, in the memory
 * that /proc/PID/environ shows. */
static void wipe_env(const char *name)
{
    char *v = getenv(name);

    if (v)
        explicit_bzero(v, strlen(v));
}

/* The password: --password-file, else $REDLOCK_PASSWORD, else the config
 * file's password_file. A source of a layer weaker than weakest_used is
 * not even read (a missing password_file is then no error): the node
 * URIs' own passwords beat it. */
static int resolve_password(cli_globals *g, int weakest_used)
{
    const char *env = getenv("REDLOCK_PASSWORD");

    if (g->password_file)
        return cli_read_secret_file("--password-file", g->password_file, &g->password);
    if (CLI_LAYER_ENVIRONMENT > weakest_used)
        return 0;
    if (env && *env) {
        if (!(g->password = strdup(env))) {
            cli_error("REDLOCK_PASSWORD", "out of memory");
            return CLI_EX_SOFTWARE;
        }
        return 0;
    }
    if (CLI_LAYER_FILE > weakest_used)
        return 0;
    if (g->cfg.password_file)
        return cli_read_secret_file("password_file", g->cfg.password_file, &g->password);
    return 0;
}

int cli_client_new(cli_globals *g, redlock_client **out)
{
    redlock_options o;
    const char *key_what = "--tls-key";
    size_t i;
    int rc, uri_pw = 0, all_pw = 1, all_user = 1;

    *out = NULL;
    if ((rc = cli_resolve_nodes(g)) != 0)
        return rc;
    /* Command line over configuration file (the environment has no TLS
     * settings). A certificate and its key are one setting. */
    if (!g->tls_cert && !g->tls_key) {
        g->tls_cert = g->cfg.tls_cert;
        g->tls_key = g->cfg.tls_key;
        key_what = "tls_key";
    }
    if (!g->tls_ca)
        g->tls_ca = g->cfg.tls_ca;
    if (!g->tls_server_name)
        g->tls_server_name = g->cfg.tls_server_name;
    for (i = 0; i < g->n_nodes; i++) {
        int info = cli_nodes_userinfo(g->nodes[i]);

        uri_pw |= info == 2;
        all_pw &= info == 2;
        all_user &= info >= 1;
    }
    /* The library lets its options beat the URIs' user info (for every
     * node alike), so a user or password from a layer below the nodes' is
     * not passed on when every node names its own: they are the stronger
     * setting. A list where only some do keeps the option, which the
     * others need. */
    if (!g->user && !(all_user && g->nodes_layer < CLI_LAYER_FILE))
        g->user = g->cfg.user;
    if ((rc = resolve_password(g, all_pw ? g->nodes_layer : CLI_LAYER_FILE)) != 0)
        return rc;
    if (g->scrub_env) {
        /* Copied above (password, node list); the library copies again. */
        const char *env_nodes = getenv("REDLOCK_NODES");

        wipe_env("REDLOCK_PASSWORD");
        if (env_nodes && cli_nodes_userinfo(env_nodes) > 0)
            wipe_env("REDLOCK_NODES");
    }
    memset(&o, 0, sizeof(o));
    o.connect_timeout_ms = g->connect_timeout_ms;
    o.node_timeout_ms = g->timeout_ms;
    o.username = g->user;
    o.password = g->password;
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
    if (g->user && !o.password && !uri_pw) {
        cli_error(g->user == g->cfg.user ? "user" : "--user",
                  "needs a password: --password-file FILE, $REDLOCK_PASSWORD, or password_file "
                  "in the config file");
        return CLI_EX_USAGE;
    }
    if ((g->tls_cert == NULL) != (g->tls_key == NULL)) {
        cli_error(g->tls_cert ? "--tls-cert" : "--tls-key",
                  "--tls-cert and --tls-key go together");
        return CLI_EX_USAGE;
    }
    cli_warn_if_readable(key_what, g->tls_key);
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

void cli_lock_options(const cli_globals *g, int fencing, const char *holder_command,
                      redlock_lock_options *lo)
{
    memset(lo, 0, sizeof(*lo));
    lo->quorum = g->quorum;
    lo->fencing = fencing;
    lo->holder_facts = holder_command != NULL;
    lo->holder_command = holder_command;
    lo->replica_acks = g->replica_acks;
    lo->replica_timeout_ms = g->replica_timeout_ms;
}

/* The library refuses bad options (a name, a quorum, replica settings)
 * with EINVAL: a usage error, in the library's words. */
static int made(int rc, const cli_globals *g, const char *what)
{
    if (rc == REDLOCK_EINVAL) {
        cli_error(g->replica_acks ? what : "lock name", "%s", redlock_last_error());
        return CLI_EX_USAGE;
    }
    if (rc) {
        cli_error(what, "%s", redlock_last_error());
        return CLI_EX_SOFTWARE;
    }
    return 0;
}

int cli_lock_new_kind(cli_globals *g, redlock_client *c, const char *name, int kind, int fencing,
                      const char *holder_command, redlock_lock **out)
{
    redlock_lock_options lo;

    cli_lock_options(g, fencing, holder_command, &lo);
    lo.kind = kind;
    return made(redlock_lock_new(c, name, &lo, out), g, "lock");
}

int cli_lock_new(cli_globals *g, redlock_client *c, const char *name, int fencing,
                 const char *holder_command, redlock_lock **out)
{
    return cli_lock_new_kind(g, c, name, REDLOCK_LOCK_MUTEX, fencing, holder_command, out);
}

int cli_semaphore_new(cli_globals *g, redlock_client *c, const char *name, int limit,
                      redlock_semaphore **out)
{
    redlock_lock_options lo;
    int rc;

    /* Permits are shared: no fencing token, no holder facts (the library
     * refuses both). The quorum, if given, must be a safe one for the
     * limit; the library says which when it is not. */
    cli_lock_options(g, 0, NULL, &lo);
    rc = redlock_semaphore_new(c, name, limit, &lo, out);
    if (rc == REDLOCK_EINVAL) {
        cli_error("semaphore", "%s", redlock_last_error());
        return CLI_EX_USAGE;
    }
    return made(rc, g, "semaphore");
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

