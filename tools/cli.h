/*
 * The redlock command-line tool: declarations shared by its parts
 * (argument parsing, exec, status/unlock, rig, demo). The tool uses only
 * the public API in <redlock/redlock.h>.
 */
#ifndef REDLOCK_TOOLS_CLI_H
#define REDLOCK_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "redlock/redlock.h"

/* Exit statuses (the values of sysexits.h, which scripts already know). */
#define CLI_EX_OK 0
#define CLI_EX_USAGE 64      /* bad command line */
#define CLI_EX_NOQUORUM 69   /* too few nodes reachable */
#define CLI_EX_SOFTWARE 70   /* internal error */
#define CLI_EX_TEMPFAIL 75   /* lock not acquired in time */
#define CLI_EX_LOST 76       /* lock lost while the command ran */

/* The default nodes: the local rig that `redlock rig start` creates. */
#define CLI_DEFAULT_NODES \
    "redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003," \
    "redis://127.0.0.1:7004,redis://127.0.0.1:7005"

/* Options that every command accepts, before or after the command name. */
typedef struct cli_globals {
    char *nodes_buf;          /* the --nodes list, split in place */
    const char *nodes[64];
    size_t n_nodes;
    int quorum;               /* 0 = N/2+1, REDLOCK_QUORUM_ALL, or 1..N */
    const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
    int tls_insecure;
    int connect_timeout_ms;   /* 0 = library default */
    int timeout_ms;           /* per node; 0 = library default */
    int watchdog_lease_ms;    /* 0 = library default (30000) */
    const char *user;
    int verbose;
    int json;
} cli_globals;

/* ---- output (redlock.c) ---------------------------------------------------- */

/* Prints "redlock: <what>: <why>" on stderr as one line. */
void cli_error(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "redlock: warning: <what>: <why>". */
void cli_warn(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "redlock: <what>: <why>" only with --verbose. */
void cli_info(const cli_globals *g, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes s as a JSON string literal (quotes included) to stdout. */
void cli_json_string(const char *s);
/* CLOCK_MONOTONIC in nanoseconds. */
int64_t cli_now_ns(void);
/* The absolute path of the running executable, or NULL. Static storage. */
const char *cli_self_exe(void);

/* ---- argument parsing (args.c) ----------------------------------------- */

typedef struct cli_opt {
    const char *name;         /* long name without "--" */
    char short_name;          /* 0 if none */
    int takes_value;
    int id;                   /* > 0 */
} cli_opt;

typedef struct cli_args {
    int argc;
    char **argv;
    int i;                    /* next argument to read */
    const char *cmd;          /* the command, for messages */
    cli_globals *g;
} cli_args;

#define CLI_ARG_POSITIONAL 0  /* *value is a positional argument */
#define CLI_ARG_END (-1)      /* no arguments left */
#define CLI_ARG_DASHDASH (-2) /* "--" was read; a->i is the argument after it */
#define CLI_ARG_ERROR (-3)    /* a usage error was printed */
#define CLI_OPT_HELP 1000     /* -h / --help, in every command's table */

/*
 * Reads the next argument. Command options come from opts (terminated by a
 * zero entry); global options are accepted anywhere and stored in a->g.
 * Returns an option id with *value set for options that take one, or one of
 * the CLI_ARG_ codes above.
 */
int cli_next(cli_args *a, const cli_opt *opts, const char **value);

/* Number parsing with usage errors ("--wait: 'x' is not a number"). Each
 * returns 0 or CLI_EX_USAGE after printing the error. */
int cli_parse_i64(const char *what, const char *s, int64_t min, int64_t max, int64_t *out);
int cli_parse_int(const char *what, const char *s, int min, int max, int *out);

/* Resolves the node list (--nodes, $REDLOCK_NODES, the rig default) and
 * checks --quorum against it. Returns 0 or CLI_EX_USAGE. */
int cli_resolve_nodes(cli_globals *g);

/* Creates a client from the global options ($REDLOCK_PASSWORD supplies
 * the password). Returns 0 or an exit status after printing the error. */
int cli_client_new(cli_globals *g, redlock_client **out);
/* Creates the lock NAME over every node with the global quorum. */
int cli_lock_new(cli_globals *g, redlock_client *c, const char *name, int fencing,
                 redlock_lock **out);
/* Prints one line per member that failed in the lock's last attempt. */
void cli_print_member_errors(redlock_client *c, redlock_lock *l);

void cli_free_globals(cli_globals *g);

/* ---- commands ------------------------------------------------------------ */

int cli_cmd_exec(cli_globals *g, int argc, char **argv);
int cli_cmd_status(cli_globals *g, int argc, char **argv);
int cli_cmd_unlock(cli_globals *g, int argc, char **argv);
int cli_cmd_rig(cli_globals *g, int argc, char **argv);
int cli_cmd_demo(cli_globals *g, int argc, char **argv);
/* The critical section the demo's workers run (not a public command). */
int cli_cmd_demo_cs(int argc, char **argv);

/* Prints the help of cmd (NULL: the overview). -1 if cmd is unknown. */
int cli_usage(const char *cmd, int to_stderr);

/* ---- the rig script (rig.c) ---------------------------------------------- */

/* The path of scripts/rig, or NULL (with an error printed). */
const char *cli_find_rig(void);
/*
 * Runs the rig script with args (NULL-terminated, without the script
 * itself), capturing up to cap-1 bytes of its stdout into out (may be NULL:
 * stdout goes to /dev/null). stderr passes through unless quiet. Returns the
 * exit status, or -1 if it could not be run.
 */
int cli_run_rig(const char *script, const char *const *args, char *out, size_t cap, int quiet);

#endif
