/*
 * The redlock command-line tool: declarations shared by its parts
 * (argument parsing, exec, status/unlock, rig, demo). The tool uses only
 * the public API in <redlock/redlock.h>.
 */
#ifndef REDLOCK_TOOLS_CLI_H
#define REDLOCK_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "redlock/redlock.h"

/* Exit statuses (the values of sysexits.h, which scripts already know). */
#define CLI_EX_OK 0
#define CLI_EX_USAGE 64      /* bad command line */
#define CLI_EX_NOQUORUM 69   /* too few nodes reachable */
#define CLI_EX_SOFTWARE 70   /* internal error */
#define CLI_EX_TEMPFAIL 75   /* lock not acquired in time */
#define CLI_EX_LOST 76       /* lock lost while the command ran */
#define CLI_EX_NOPERM 77     /* a node refused our credentials (AUTH, TLS) */
#define CLI_EX_CONFIG 78     /* a node refused the request for good (WRONGTYPE, bad db) */

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
    int unavailable_timeout_ms; /* 0 = library default (exec sets it) */
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
/* Why member i failed in report r, without the node name that transport
 * messages start with (the caller prints it). Points into r or static. */
const char *cli_member_why(redlock_client *c, size_t i, const redlock_member_report *r);

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

/* ---- the command's process group (pgroup.c) ------------------------------ */

typedef struct cli_pgroup {
    pid_t pgid;               /* the command's pid, which leads its group */
    pid_t watcher;            /* kills the group if redlock dies */
    int watcher_fd;           /* our end of the watcher's socket, or -1 */
    int tty;                  /* stdin if it is a terminal, else -1 */
} cli_pgroup;

/*
 * Starts cmd as the leader of a new process group, watched by a process
 * that signals the whole group if redlock dies (SIGTERM, SIGKILL after
 * grace_ms). child_setup runs in the child just before execvp() and may
 * only call async-signal-safe functions. Returns the pid (*exec_errno set
 * if execvp() failed) or -1 with errno. Call cli_pgroup_finish() on every
 * way out, also after a failure.
 */
pid_t cli_pgroup_spawn(cli_pgroup *pg, char **cmd, int64_t grace_ms, void (*child_setup)(void),
                       int *exec_errno);
/* Sends sig to every process of the group (and SIGCONT after it). */
void cli_pgroup_signal(const cli_pgroup *pg, int sig);
/* Whether any process is left in the group. */
int cli_pgroup_alive(const cli_pgroup *pg);
/* The group leader was stopped by sig (waitpid WUNTRACED, when tty >= 0):
 * a stop for the terminal gets it the terminal if redlock's job has it;
 * otherwise redlock stops its own job like the terminal would have, and
 * continues the command when the job is continued. */
void cli_pgroup_stopped(const cli_pgroup *pg, int sig);
/* Takes the terminal back and dismisses the watcher. */
void cli_pgroup_finish(cli_pgroup *pg);

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
