/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The redlock command-line tool: declarations shared by its parts
 * (argument parsing, exec, status/unlock, rig, demo). The tool uses only
 * the public API in <redlock/redlock.h>.
 */
#ifndef REDLOCK_TOOLS_CLI_H
#define REDLOCK_TOOLS_CLI_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/*
 * What a configuration file says (config.c). Strings are owned; unset
 * values are NULL or 0. Relative paths are already resolved against the
 * file's directory.
 */
typedef struct cli_config {
    char *path;               /* the file that was read; NULL: none */
    char *nodes;
    char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
    char *user;
    char *password_file;
    int has_wait;
    int64_t wait_ms;          /* -1 = forever */
    int has_lease;
    int64_t lease_ms;         /* 0 = the watchdog lease */
    int quorum;               /* 0 = not set */
    int has_replica_acks;
    int replica_acks;         /* 0..64 */
    int has_replica_timeout;
    int replica_timeout_ms;   /* 1..INT32_MAX */
} cli_config;

/* Options that every command accepts, before or after the command name.
 * Where a value comes from: the command line, else the environment, else
 * the configuration file (see cli_resolve_nodes and cli_client_new). */
typedef struct cli_globals {
    char *nodes_buf;          /* the node list, split in place */
    const char *nodes[64];
    size_t n_nodes;
    int quorum;               /* 0 = N/2+1, REDLOCK_QUORUM_ALL, or 1..N */
    const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
    int tls_insecure;
    int connect_timeout_ms;   /* 0 = library default */
    int timeout_ms;           /* per node; 0 = library default */
    int watchdog_lease_ms;    /* 0 = library default (30000) */
    int unavailable_timeout_ms; /* 0 = library default (exec sets it) */
    /* Replica acknowledgement of every grant and renewal (exec sets them
     * from --replica-acks/--replica-timeout or the config file; 0 = no
     * WAIT, and for the timeout the node timeout). cli_lock_new() passes
     * them to the library. */
    int replica_acks;
    int replica_timeout_ms;
    const char *user;
    int verbose;
    int json;
    const char *config_path;  /* --config */
    const char *password_file; /* --password-file */
    char *password;           /* the password in use (owned, wiped on free) */
    /* exec without --keep-secret-env: once read, REDLOCK_PASSWORD and a
     * REDLOCK_NODES with user info are wiped from redlock's own
     * environment (its /proc/PID/environ, which the command could read). */
    int scrub_env;
    int config_loaded;        /* cfg holds the configuration file, if any */
    int nodes_layer;          /* where the nodes came from: CLI_LAYER_* */
    cli_config cfg;
} cli_globals;

/* ---- output (redlock.c) ---------------------------------------------------- */

/* Prints "redlock: <what>: <why>" on stderr as one line. */
void cli_error(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "redlock: warning: <what>: <why>". */
void cli_warn(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "redlock: <what>: <why>" only with --verbose. */
void cli_info(const cli_globals *g, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes s as a JSON string literal (quotes included) to stdout, escaped
 * as cli_fput_escaped() does. */
void cli_json_string(const char *s);
/* CLOCK_MONOTONIC in nanoseconds. */
int64_t cli_now_ns(void);
/* The absolute path of the running executable, or NULL. Static storage. */
const char *cli_self_exe(void);

/* ---- terminal safety (escape.c) ---------------------------------------- */

/* The length (1-4) of the valid UTF-8 sequence at s, with its code point
 * in *cp, or 0 if s does not start with one. s is NUL-terminated. */
size_t cli_utf8_len(const unsigned char *s, uint32_t *cp);
/*
 * s (NULL: "") with every control character (C0 including newline, DEL,
 * C1) and every byte that is not UTF-8 shown as \xNN and a backslash as
 * \\, cut to whole characters to fit cap. Returns buf. Everything the tool
 * prints that it did not write itself goes through this or the next.
 */
const char *cli_escape(const char *s, char *buf, size_t cap);
/* Writes s escaped like cli_escape() (json = 0) or as a JSON string
 * literal with quotes, the same characters as \u00NN (json = 1). */
void cli_fput_escaped(FILE *f, const char *s, int json);

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
/* A duration: "250ms", "5s", "1.5s", "2m", "1h"; a bare number is
 * milliseconds. The result must be a whole number of milliseconds in
 * min_ms..max_ms. */
int cli_parse_duration(const char *what, const char *s, int64_t min_ms, int64_t max_ms,
                       int64_t *out_ms);
/* "all" (REDLOCK_QUORUM_ALL) or 1..64; the upper bound N is checked once
 * the nodes are known. */
int cli_parse_quorum(const char *what, const char *s, int *out);
/* The replicas that must acknowledge each grant: 0..CLI_MAX_REPLICA_ACKS
 * (--replica-acks, replica_acks in the config file). */
#define CLI_MAX_REPLICA_ACKS 64
int cli_parse_replica_acks(const char *what, const char *s, int *out);
/* WAIT's timeout (--replica-timeout, replica_timeout): a duration of
 * 1 ms..INT32_MAX ms (the library's field is an int). */
int cli_parse_replica_timeout(const char *what, const char *s, int *out_ms);

/* Where a setting came from, strongest first: a setting of one layer
 * beats every setting of the layers below it. */
enum { CLI_LAYER_COMMAND_LINE, CLI_LAYER_ENVIRONMENT, CLI_LAYER_FILE };

/* User info in a node list ("URI,URI,..."): 0 none, 1 a user name only,
 * 2 a password. unix:// URIs have none. */
int cli_nodes_userinfo(const char *list);
/* Overwrites every password in a node list with '*', in place. */
void cli_mask_passwords(char *list);

/*
 * Resolves the node list: --nodes, else $REDLOCK_NODES, else the
 * configuration file's nodes; none is a usage error naming every way to
 * give them. Splits it (cli_split_nodes) and sets the quorum (--quorum,
 * else the file's). Returns 0 or an exit status after printing the error.
 */
int cli_resolve_nodes(cli_globals *g);
/* Splits g->nodes_buf at each ',' before a scheme (so sentinel URIs keep
 * their own commas) into g->nodes and checks the quorum against
 * the count; src names the list in messages. */
int cli_split_nodes(cli_globals *g, const char *src);

void cli_free_globals(cli_globals *g);

/* Parses "COMMAND NAME [options]" for status and unlock; *force (if not
 * NULL) is set by any command option. Returns 0, -1 after printing the
 * help, or an exit status after printing the error. */
int cli_parse_name(cli_globals *g, const char *cmd, int argc, char **argv, const cli_opt *opts,
                   int *force, const char **name);
/* What every such parser does with cli_next()'s id: the help, usage
 * errors, the one NAME (into *name), "--". Returns 0 when it took id, 1
 * when id is a command option (the caller's), -1 after printing the help,
 * or an exit status after printing the error. */
int cli_name_arg(const char *cmd, int id, const char *v, const char **name);
/* The same, but NAME may be left out (*name is then NULL). */
int cli_parse_name_opt(cli_globals *g, const char *cmd, int argc, char **argv,
                       const cli_opt *opts, int *force, const char **name);

enum cli_on_lost { CLI_LOST_TERM, CLI_LOST_KILL, CLI_LOST_IGNORE };

/* The options of redlock exec. */
typedef struct cli_exec_opts {
    int kind;                 /* REDLOCK_LOCK_MUTEX; READ (--shared), WRITE (--write),
                               * FAIR (--fair) */
    int permits;              /* --permits K: hold permits of a semaphore; 0: a lock */
    int permit_count;         /* --permit-count P (1..K; 1 with --permits) */
    const char *name;
    int64_t wait_ms;          /* -1 = forever */
    int wait_set;             /* given on the command line */
    int64_t lease_ms;         /* 0 = the watchdog lease */
    int lease_set;
    enum cli_on_lost on_lost;
    int64_t grace_ms;
    int unavailable_ms;       /* end the wait after no quorum for this long */
    int fencing;
    int keep_secret_env;      /* --keep-secret-env */
    int replica_acks;         /* --replica-acks K (0 = no WAIT) */
    int replica_acks_set;
    int replica_timeout_ms;   /* --replica-timeout; 0 = the node timeout */
    int replica_timeout_set;
    int conflict_exit;        /* exit status when not acquired in time */
    const char *command;      /* -c STRING */
    char *sh_argv[4];         /* /bin/sh -c STRING */
    char **cmd;               /* argv of the command (may point to sh_argv) */
} cli_exec_opts;

/* Parses exec's arguments into *o, which must stay where it is (o->cmd may
 * point into it). Returns 0, -1 after printing the help, or an exit status
 * after printing the error. No side effect beyond *o, *g and the error. */
int cli_parse_exec(cli_globals *g, int argc, char **argv, cli_exec_opts *o);
/* Fills what the command line left open from the configuration file
 * (wait, lease, replica_acks, replica_timeout), loading it first.
 * Returns 0 or an exit status. */
int cli_exec_defaults(cli_globals *g, cli_exec_opts *o);

/* ---- clients, locks and semaphores (client.c) ------------------------------ */

/* Creates a client from the global options, the environment and the
 * configuration file (the password: --password-file, else
 * $REDLOCK_PASSWORD, else password_file). Returns 0 or an exit status
 * after printing the error. */
int cli_client_new(cli_globals *g, redlock_client **out);
/* The lock options the global options ask for (quorum, replica
 * acknowledgement), with fencing and, for a non-NULL holder_command,
 * holder facts recording that command line. */
void cli_lock_options(const cli_globals *g, int fencing, const char *holder_command,
                      redlock_lock_options *lo);
/* Creates the lock NAME over every node with the global quorum. A
 * holder_command (exec's) makes every hold record its holder facts with
 * that command line; NULL records none. */
int cli_lock_new(cli_globals *g, redlock_client *c, const char *name, int fencing,
                 const char *holder_command, redlock_lock **out);
/* The same for a redlock_lock_kind: REDLOCK_LOCK_READ or _WRITE make a
 * side of the read-write lock NAME (a read handle takes neither fencing
 * nor a holder_command: the library refuses them). */
int cli_lock_new_kind(cli_globals *g, redlock_client *c, const char *name, int kind, int fencing,
                      const char *holder_command, redlock_lock **out);
/* Creates the semaphore NAME of limit permits over every node (quorum:
 * the global one, which must be safe for the limit, else the smallest
 * safe one). Returns 0 or an exit status after printing the error. */
int cli_semaphore_new(cli_globals *g, redlock_client *c, const char *name, int limit,
                      redlock_semaphore **out);
/* Why member i failed in report r, without the node name that transport
 * messages start with (the caller prints it). Points into r or static. */
const char *cli_member_why(redlock_client *c, size_t i, const redlock_member_report *r);

/* ---- what exec holds (exec_hold.c) ------------------------------------------ */

/*
 * One of the things exec can hold while the command runs: a lock of any
 * kind (the plain lock, a read hold with --shared, the write hold with
 * --write) or permits of a semaphore (--permits K). exec.c sees only this,
 * so every kind gets the same waiting, signals, loss handling and exit
 * statuses.
 */
typedef struct cli_hold {
    const char *what;         /* "lock", "read hold", "write hold", "permit(s)" */
    redlock_client *client;
    redlock_lock *lock;       /* a lock's handle; NULL for a semaphore */
    redlock_semaphore *sem;
    redlock_permit *permit;   /* while permits are held */
    int permit_count;         /* permits taken at once */
} cli_hold;

/* Creates what o asks for (holder facts only where one holder is
 * recorded: the plain lock and the write hold, with holder_command).
 * Returns 0 or an exit status after printing the error. */
int cli_hold_new(cli_globals *g, redlock_client *c, const cli_exec_opts *o,
                 const char *holder_command, cli_hold *h);
/* on_lost for the hold; its lock argument is only to compare. */
void cli_hold_set_on_lost(cli_hold *h, redlock_on_lost_fn fn, void *ud);
/* Acquires as redlock_acquire_as() on the calling thread's owner (a
 * semaphore's permit has an owner of its own). */
int cli_hold_acquire(cli_hold *h, int64_t wait_ms, int64_t lease_ms);
/* The lock whose member reports describe the last attempt, or NULL when
 * there is none to read (a semaphore's failed attempt leaves none). */
redlock_lock *cli_hold_report_lock(const cli_hold *h);
/* Members of the hold (a semaphore: every node). */
size_t cli_hold_members(const cli_hold *h);
/* The held validity left, as redlock_remaining_ttl(). */
int cli_hold_remaining_ttl(cli_hold *h, int64_t *ms);
/* The fencing token of a held plain lock or write hold. */
int cli_hold_token(cli_hold *h, uint64_t *token);
/* Releases what is held: redlock_unlock() or redlock_semaphore_release()
 * (which frees the permit), with their results. */
int cli_hold_release(cli_hold *h);
/* Frees the handles (not what they hold: release first). */
void cli_hold_free(cli_hold *h);

/* ---- holder facts (holder.c) ------------------------------------------------ */

/* The command line exec records in its holder facts: the -c STRING, or
 * the command's arguments joined with spaces (cut to fit cap). */
void cli_exec_command_line(const cli_exec_opts *o, char *buf, size_t cap);
/* Prints the holder's host, pid, command and since (local time and how
 * long ago), escaped; nothing when f is NULL or not found. */
void cli_holder_text(const redlock_holder_facts *f);
/* Appends ,"host":...,"pid":...,"command":...,"since_ms":... to a JSON
 * object being printed; nulls when f is NULL or not found. */
void cli_holder_json(const redlock_holder_facts *f);
/* "3 of 5 nodes answer: one more failure and no lock can be taken" and
 * the like: how many more nodes may fail before no lock (what: "lock",
 * "permit") can be taken. */
void cli_margin_text(size_t reachable, size_t n, int quorum, const char *what);
/* The exit status when fewer than quorum of n nodes answered, as exec's:
 * when the nodes that refused for good alone leave fewer than a quorum, 77
 * if some refused our credentials (REDLOCK_EAUTH, REDLOCK_ETLS), else 78
 * (REDLOCK_ECONFIG: a database the server lacks); otherwise 69. errs[i]:
 * node i's error, 0 if it answered. */
int cli_shortfall_status(const int *errs, size_t n, int quorum);

/* ---- configuration files (config.c) ---------------------------------------- */

/* The system-wide file, read when no other is found. */
#define CLI_SYSTEM_CONFIG "/etc/redlock/config"

/*
 * Parses a configuration file's text (len bytes; path names it in
 * messages and anchors relative paths). "key = value" lines, '#' comment
 * lines, blank lines. Fills *cfg (which must start zeroed or be cleared);
 * returns 0, or CLI_EX_USAGE after printing "PATH:LINE: why".
 */
int cli_config_parse(cli_config *cfg, const char *path, const char *text, size_t len);
/* Frees what *cfg owns and zeroes it. */
void cli_config_free(cli_config *cfg);
/*
 * Reads the configuration file into g->cfg once: --config FILE, else
 * $REDLOCK_CONFIG (both must exist), else $XDG_CONFIG_HOME/redlock/config
 * (default ~/.config/redlock/config), else /etc/redlock/config (either may
 * be absent). Returns 0 or an exit status after printing the error.
 */
int cli_config_load(cli_globals *g);
/* Where configuration files are looked for, for messages:
 * "--config FILE, $REDLOCK_CONFIG, /home/u/.config/redlock/config or
 * /etc/redlock/config". */
const char *cli_config_places(char *buf, size_t cap);
/*
 * Reads a password from a file: its contents without one trailing newline.
 * Warns if others may read the file. Returns 0 with *out owned by the
 * caller (wipe it before freeing), or CLI_EX_USAGE after an error naming
 * what.
 */
int cli_read_secret_file(const char *what, const char *path, char **out);
/* Warns (what: "PATH is readable by ...") if others may read the file. */
void cli_warn_if_readable(const char *what, const char *path);

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

/* ---- exec's progress line (progress.c) ------------------------------------ */

/* While the acquire call blocks the main thread, a small thread shows how
 * long it has been waiting - on a terminal only, and only after a second,
 * so scripts and quick acquisitions see nothing. */
typedef struct cli_progress {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, shown, running;
    const char *what;         /* "lock", "semaphore" (static) */
    char name[256];           /* escaped */
    int64_t start_ns;
    int unreachable;          /* members failing in the last report */
    size_t members;
} cli_progress;

/* Starts the thread if stdout and stderr are terminals. */
void cli_progress_start(cli_progress *p, const char *what, const char *name, size_t members);
/* Clears the line and keeps it clear until cli_progress_resume(), so that
 * messages printed in between start on a line of their own. */
void cli_progress_pause(cli_progress *p);
/* Shows the line again, with how many members are failing now. */
void cli_progress_resume(cli_progress *p, int unreachable);
/* Clears the line and joins the thread. */
void cli_progress_stop(cli_progress *p);

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
 * grace_ms), with envp as its environment (NULL: redlock's). child_setup
 * runs in the child just before execvpe() and may only call
 * async-signal-safe functions. Returns the pid (*exec_errno set if
 * execvpe() failed) or -1 with errno. Call cli_pgroup_finish() on every
 * way out, also after a failure.
 */
pid_t cli_pgroup_spawn(cli_pgroup *pg, char **cmd, char **envp, int64_t grace_ms,
                       void (*child_setup)(void), int *exec_errno);
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

/* ---- the sentinel rig's failover verbs (ha.c) ------------------------------ */

/* The value of KEY in `rig env` (e.g. RIG_URIS) for the rig on base_port,
 * into out. Returns 0, or -1 after printing the error. */
int cli_rig_env(const char *rig, int base_port, const char *key, char *out, size_t cap);
/* `rig kill-master G`: SIGKILLs group G's current master. Returns its
 * port, or -1 (the rig printed why). */
int cli_rig_kill_master(const char *rig, int base_port, int group);
/* Starts `rig wait-failover G OLDPORT SECS` as a child whose stdout (the
 * new master's port) goes to out_path. Returns its pid, or -1. */
pid_t cli_rig_failover_watch(const char *rig, int base_port, int group, int old_port, int secs,
                             const char *out_path);
/* Whether that child has ended (block: wait for it): 1 with *new_port
 * the promoted master's port, or -1 if no failover was seen; 0 if it is
 * still waiting. */
int cli_rig_failover_done(pid_t pid, const char *out_path, int block, int *new_port);
/* Ends that child early (SIGTERM) and collects it; pid <= 0: nothing. */
void cli_rig_failover_stop(pid_t pid, const char *out_path);
/* `rig restart I`: starts data node I again (the sentinels make a former
 * master a replica of the new one). Returns 0, or -1. */
int cli_rig_restart(const char *rig, int base_port, int node);

#endif
