/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The options of `redlock exec`: the wait, the lease, what is held (the
 * plain lock, a side of a read-write lock, a fair lock, permits of a
 * semaphore), signals and the command, checked against each other once
 * every option is known, then the config file's defaults. Like args.c it
 * has no side effect on the process (tests/fuzz/fuzz_args.c runs it).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum {
    O_WAIT = 1,
    O_NONBLOCK,
    O_LEASE,
    O_ON_LOST,
    O_GRACE,
    O_FENCING,
    O_UNAVAILABLE,
    O_CONFLICT,
    O_COMMAND,
    O_KEEP_SECRET_ENV,
    O_REPLICA_ACKS,
    O_REPLICA_TIMEOUT,
    O_SHARED,
    O_WRITE,
    O_FAIR,
    O_PERMITS,
    O_PERMIT_COUNT
};

/* Durations fit the clock in nanoseconds (centuries). */
#define MAX_MS (INT64_MAX / 1000000)

/* A number of permits: 1..REDLOCK_SEMAPHORE_MAX_LIMIT. */
static int parse_permits(const char *what, const char *v, int *out)
{
    char *end;
    long long k;

    errno = 0;
    k = strtoll(v, &end, 10);
    if (!*v || *end || *v < '0' || *v > '9' || errno || k < 1 ||
        k > REDLOCK_SEMAPHORE_MAX_LIMIT) {
        cli_error(what, "'%s' is not a number of permits (1..%d)", v,
                  REDLOCK_SEMAPHORE_MAX_LIMIT);
        return CLI_EX_USAGE;
    }
    *out = (int)k;
    return 0;
}

/* What is held: a side of a read-write lock or permits of a semaphore,
 * checked once every option is known. Each refusal names both options. */
static int exec_hold_check(cli_exec_opts *o)
{
    if (o->permits && o->kind != REDLOCK_LOCK_MUTEX) {
        cli_error("--permits", "takes permits of a semaphore; %s: give one of them",
                  o->kind == REDLOCK_LOCK_READ    ? "--shared takes a side of a read-write lock"
                  : o->kind == REDLOCK_LOCK_WRITE ? "--write takes a side of a read-write lock"
                                                  : "--fair takes a fair lock");
        return CLI_EX_USAGE;
    }
    if (o->permit_count && !o->permits) {
        cli_error("--permit-count", "goes with --permits K");
        return CLI_EX_USAGE;
    }
    if (o->permit_count > o->permits) {
        cli_error("--permit-count", "%d is more than the semaphore's %d permits (--permits)",
                  o->permit_count, o->permits);
        return CLI_EX_USAGE;
    }
    /* A token orders one holder after another: shared holds have none. */
    if (o->fencing && (o->permits || o->kind == REDLOCK_LOCK_READ)) {
        cli_error("--fencing", "a %s is shared and has no fencing token",
                  o->permits ? "semaphore's permit" : "read hold (--shared)");
        return CLI_EX_USAGE;
    }
    if (o->permits && !o->permit_count)
        o->permit_count = 1;
    return 0;
}

/* -c STRING: /bin/sh -c STRING, as flock(1) runs it. */
static int exec_command_string(cli_exec_opts *o)
{
    o->sh_argv[0] = (char *)"/bin/sh";
    o->sh_argv[1] = (char *)"-c";
    o->sh_argv[2] = (char *)o->command;
    o->sh_argv[3] = NULL;
    o->cmd = o->sh_argv;
    return exec_hold_check(o);
}

int cli_parse_exec(cli_globals *g, int argc, char **argv, cli_exec_opts *o)
{
    static const cli_opt opts[] = {
        {"wait", 'w', 1, O_WAIT},
        {"nonblock", 'N', 0, O_NONBLOCK},
        {"lease", 0, 1, O_LEASE},
        {"on-lost", 0, 1, O_ON_LOST},
        {"grace", 0, 1, O_GRACE},
        {"fencing", 0, 0, O_FENCING},
        {"unavailable-timeout", 0, 1, O_UNAVAILABLE},
        {"conflict-exit-code", 'E', 1, O_CONFLICT},
        {"command", 'c', 1, O_COMMAND},
        {"keep-secret-env", 0, 0, O_KEEP_SECRET_ENV},
        {"replica-acks", 0, 1, O_REPLICA_ACKS},
        {"replica-timeout", 0, 1, O_REPLICA_TIMEOUT},
        {"shared", 0, 0, O_SHARED},
        {"write", 0, 0, O_WRITE},
        {"fair", 0, 0, O_FAIR},
        {"permits", 0, 1, O_PERMITS},
        {"permit-count", 0, 1, O_PERMIT_COUNT},
        {NULL, 0, 0, 0}};
    cli_args a = {argc, argv, 0, "exec", g};
    const char *v;
    int64_t n;
    int id;

    memset(o, 0, sizeof(*o));
    o->wait_ms = -1;
    o->grace_ms = 5000;
    o->unavailable_ms = 10000;
    o->conflict_exit = CLI_EX_TEMPFAIL;
    for (;;) {
        id = cli_next(&a, opts, &v);
        switch (id) {
        case CLI_OPT_HELP:
            cli_usage("exec", 0);
            return -1;
        case CLI_ARG_ERROR:
            return CLI_EX_USAGE;
        case O_WAIT:
            o->wait_set = 1;
            if (strcmp(v, "forever") == 0) {
                o->wait_ms = -1;
                break;
            }
            if (cli_parse_duration("--wait", v, 0, MAX_MS, &o->wait_ms))
                return CLI_EX_USAGE;
            break;
        case O_NONBLOCK:
            o->wait_set = 1;
            o->wait_ms = 0;
            break;
        case O_LEASE:
            o->lease_set = 1;
            if (strcmp(v, "watchdog") == 0) {
                o->lease_ms = 0;
                break;
            }
            if (cli_parse_duration("--lease", v, 1, MAX_MS, &o->lease_ms))
                return CLI_EX_USAGE;
            break;
        case O_ON_LOST:
            if (strcmp(v, "term") == 0) {
                o->on_lost = CLI_LOST_TERM;
            } else if (strcmp(v, "kill") == 0) {
                o->on_lost = CLI_LOST_KILL;
            } else if (strcmp(v, "ignore") == 0) {
                o->on_lost = CLI_LOST_IGNORE;
            } else {
                cli_error("--on-lost", "'%s' is not one of term, kill, ignore", v);
                return CLI_EX_USAGE;
            }
            break;
        case O_GRACE:
            if (cli_parse_duration("--grace", v, 0, MAX_MS, &o->grace_ms))
                return CLI_EX_USAGE;
            break;
        case O_FENCING:
            o->fencing = 1;
            break;
        case O_UNAVAILABLE:
            /* An int in the library; 0 would mean its default. */
            if (cli_parse_duration("--unavailable-timeout", v, 1, INT32_MAX, &n))
                return CLI_EX_USAGE;
            o->unavailable_ms = (int)n;
            break;
        case O_CONFLICT:
            if (cli_parse_int("--conflict-exit-code", v, 0, 255, &o->conflict_exit))
                return CLI_EX_USAGE;
            break;
        case O_COMMAND:
            if (!*v) {
                cli_error("--command", "the command is empty");
                return CLI_EX_USAGE;
            }
            o->command = v;
            break;
        case O_KEEP_SECRET_ENV:
            o->keep_secret_env = 1;
            break;
        case O_REPLICA_ACKS:
            if (cli_parse_replica_acks("--replica-acks", v, &o->replica_acks))
                return CLI_EX_USAGE;
            o->replica_acks_set = 1;
            break;
        case O_REPLICA_TIMEOUT:
            if (cli_parse_replica_timeout("--replica-timeout", v, &o->replica_timeout_ms))
                return CLI_EX_USAGE;
            o->replica_timeout_set = 1;
            break;
        case O_SHARED:
        case O_WRITE:
        case O_FAIR: {
            int kind = id == O_SHARED  ? REDLOCK_LOCK_READ
                       : id == O_WRITE ? REDLOCK_LOCK_WRITE
                                       : REDLOCK_LOCK_FAIR;

            if (o->kind != REDLOCK_LOCK_MUTEX && o->kind != kind) {
                cli_error(id == O_SHARED ? "--shared" : id == O_WRITE ? "--write" : "--fair",
                          "give one of --shared (a read hold), --write (the write hold) "
                          "and --fair (the fair lock)");
                return CLI_EX_USAGE;
            }
            o->kind = kind;
            break;
        }
        case O_PERMITS:
            if (parse_permits("--permits", v, &o->permits))
                return CLI_EX_USAGE;
            break;
        case O_PERMIT_COUNT:
            if (parse_permits("--permit-count", v, &o->permit_count))
                return CLI_EX_USAGE;
            break;
        case CLI_ARG_POSITIONAL:
            if (!o->name) {
                o->name = v;
                break;
            }
            if (o->command) {
                cli_error("--command", "give either -c STRING or a command, not both ('%s')", v);
                return CLI_EX_USAGE;
            }
            /* "exec NAME CMD ARG...": the command starts here and keeps
             * its own options. */
            o->cmd = argv + a.i - 1;
            return exec_hold_check(o);
        case CLI_ARG_DASHDASH:
            if (!o->name) {
                cli_error("exec", "missing lock NAME before '--'");
                return CLI_EX_USAGE;
            }
            if (o->command) {
                cli_error("--command", "give either -c STRING or a command after '--', not both");
                return CLI_EX_USAGE;
            }
            if (a.i >= argc) {
                cli_error("exec", "missing command after '--'");
                return CLI_EX_USAGE;
            }
            o->cmd = argv + a.i;
            return exec_hold_check(o);
        case CLI_ARG_END:
            if (o->name && o->command)
                return exec_command_string(o);
            cli_error("exec", o->name ? "missing command (exec NAME -- CMD [ARG...], or "
                                        "exec NAME -c STRING)"
                                      : "missing lock NAME and command");
            return CLI_EX_USAGE;
        default:
            cli_error("exec", "internal error: unexpected option %d", id);
            return CLI_EX_SOFTWARE;
        }
    }
}

int cli_exec_defaults(cli_globals *g, cli_exec_opts *o)
{
    int rc = cli_config_load(g);

    if (rc != 0)
        return rc;
    if (!o->wait_set && g->cfg.has_wait)
        o->wait_ms = g->cfg.wait_ms;
    if (!o->lease_set && g->cfg.has_lease)
        o->lease_ms = g->cfg.lease_ms;
    if (!o->replica_acks_set && g->cfg.has_replica_acks)
        o->replica_acks = g->cfg.replica_acks;
    if (!o->replica_timeout_set && g->cfg.has_replica_timeout)
        o->replica_timeout_ms = g->cfg.replica_timeout_ms;
    /* A timeout for a WAIT that is never sent is a mistake on the command
     * line; in the config file it may serve other invocations. */
    if (o->replica_timeout_set && o->replica_acks == 0)
        cli_warn("--replica-timeout", "has no effect without --replica-acks K (K > 0)");
    return 0;
}
