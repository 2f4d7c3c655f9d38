/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock: distributed locks from the shell. This file holds main(), the
 * command dispatch and the output helpers; each command lives in its own
 * file (exec.c, status.c, rig.c, demo.c).
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* The longest "what" and "why" a message quotes, before escaping. */
#define REPORT_MAX 1023

/* A heap copy of text with its URI passwords masked, then cut to
 * REPORT_MAX bytes; NULL if out of memory. Masked before the cut: a cut
 * inside a long password would leave no '@' to find, and its start would
 * be printed. */
static char *masked_copy(const char *text)
{
    char *copy = strdup(text);

    if (!copy)
        return NULL;
    cli_mask_passwords(copy);
    if (strlen(copy) > REPORT_MAX)
        copy[REPORT_MAX] = '\0';
    return copy;
}

/* Frees a copy that may have held a secret before it was masked. */
static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static void vreport(const char *prefix, const char *what, const char *fmt, va_list ap)
{
    char *why_raw = NULL, *why, *what_buf;
    char safe_what[4 * (REPORT_MAX + 1)], safe_why[4 * (REPORT_MAX + 1)];

    /* A stray or misplaced argument is quoted as given, and it may be a
     * node URI with its password. */
    if (vasprintf(&why_raw, fmt, ap) < 0)
        why_raw = NULL;
    why = why_raw ? masked_copy(why_raw) : NULL;
    what_buf = masked_copy(what ? what : "error");
    wipe_free(why_raw);
    /* Messages quote servers, file contents and arguments: every control
     * byte is escaped (escape.c), which also keeps a message on one line
     * for scripts that read stderr line by line. */
    fprintf(stderr, "redlock: %s%s: %s\n", prefix,
            cli_escape(what_buf ? what_buf : "error", safe_what, sizeof(safe_what)),
            cli_escape(why ? why : "out of memory", safe_why, sizeof(safe_why)));
    wipe_free(what_buf);
    wipe_free(why);
}

void cli_error(const char *what, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport("", what, fmt, ap);
    va_end(ap);
}

void cli_warn(const char *what, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport("warning: ", what, fmt, ap);
    va_end(ap);
}

void cli_info(const cli_globals *g, const char *what, const char *fmt, ...)
{
    va_list ap;

    if (!g->verbose)
        return;
    va_start(ap, fmt);
    vreport("", what, fmt, ap);
    va_end(ap);
}

void cli_json_string(const char *s)
{
    cli_fput_escaped(stdout, s, 1);
}

int64_t cli_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *cli_self_exe(void)
{
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

    if (n <= 0)
        return NULL;
    path[n] = '\0';
    return path;
}

static int cmd_version(cli_globals *g, int argc, char **argv)
{
    static const cli_opt opts[] = {{NULL, 0, 0, 0}};
    cli_args a = {argc, argv, 0, "version", g};
    const char *v;
    int id;

    while ((id = cli_next(&a, opts, &v)) != CLI_ARG_END) {
        if (id == CLI_OPT_HELP) {
            cli_usage("version", 0);
            return 0;
        }
        if (id == CLI_ARG_ERROR)
            return CLI_EX_USAGE;
        cli_error("version", "unexpected argument '%s'", v ? v : "--");
        return CLI_EX_USAGE;
    }
    if (g->json) {
        printf("{\"version\":");
        cli_json_string(REDLOCK_VERSION_STRING);
        printf(",\"library\":");
        cli_json_string(redlock_version());
        printf("}\n");
    } else {
        printf("redlock %s (libredlock %s)\n", REDLOCK_VERSION_STRING, redlock_version());
    }
    return 0;
}

static int cmd_help(cli_globals *g, int argc, char **argv)
{
    (void)g;
    if (argc == 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        cli_usage("help", 0);
        return 0;
    }
    if (argc > 1) {
        cli_error("help", "expected at most one command name");
        return CLI_EX_USAGE;
    }
    if (cli_usage(argc == 1 ? argv[0] : NULL, 0) != 0) {
        cli_error(argv[0], "unknown command (see 'redlock help')");
        return CLI_EX_USAGE;
    }
    return 0;
}

typedef struct command {
    const char *name;
    int (*run)(cli_globals *g, int argc, char **argv);
} command;

static const command commands[] = {
    {"exec", cli_cmd_exec},
    {"status", cli_cmd_status},
    {"unlock", cli_cmd_unlock},
    {"rig", cli_cmd_rig},
    {"demo", cli_cmd_demo},
    {"version", cmd_version},
    {"help", cmd_help},
    {NULL, NULL}};

/* Reads the global options before the command and runs it. Every path
 * frees the globals: under a leak checker a leak would change the exit
 * status that scripts rely on. */
static int run(cli_globals *g, int argc, char **argv)
{
    static const cli_opt top_opts[] = {{"version", 'V', 0, 1}, {NULL, 0, 0, 0}};
    cli_args a = {argc, argv, 1, NULL, g};
    const command *c;
    const char *v;

    switch (cli_next(&a, top_opts, &v)) {
    case CLI_ARG_ERROR:
        return CLI_EX_USAGE;
    case CLI_OPT_HELP:
        cli_usage(NULL, 0);
        return 0;
    case 1:
        return cmd_version(g, 0, NULL);
    case CLI_ARG_POSITIONAL:
        break;
    default:
        cli_usage(NULL, 1);
        return CLI_EX_USAGE;
    }
    for (c = commands; c->name; c++)
        if (strcmp(c->name, v) == 0)
            break;
    if (!c->name) {
        cli_error(v, "unknown command (see 'redlock help')");
        return CLI_EX_USAGE;
    }
    return c->run(g, argc - a.i, argv + a.i);
}

int main(int argc, char **argv)
{
    cli_globals g;
    int rc;

    /* The demo's critical section: a worker process, not a user command. */
    if (argc >= 2 && strcmp(argv[1], "__demo-cs") == 0)
        return cli_cmd_demo_cs(argc - 2, argv + 2);
    memset(&g, 0, sizeof(g));
    rc = run(&g, argc, argv);
    cli_free_globals(&g);
    if (fflush(stdout) != 0 && rc == 0) {
        /* "redlock status > /full/disk" must not look like a success. */
        cli_error("stdout", "write failed");
        rc = CLI_EX_SOFTWARE;
    }
    return rc;
}
