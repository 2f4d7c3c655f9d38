/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock rig: the local redis-server rig, driven through scripts/rig so
 * that the tool, the tests and the benchmarks share one implementation.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#ifndef REDLOCK_SOURCE_DIR
#define REDLOCK_SOURCE_DIR ""
#endif

static int executable(const char *path)
{
    return path && *path && access(path, X_OK) == 0;
}

/* $REDLOCK_RIG_SCRIPT, then scripts/rig relative to this program (in a
 * build tree: <src>/build/<dir>/tools/redlock; installed:
 * <prefix>/bin/redlock next to <prefix>/share/redlock/rig), then the
 * source tree this program was built from. */
const char *cli_find_rig(void)
{
    static char path[PATH_MAX];
    static const char *const relative[] = {"/../scripts/rig", "/../share/redlock/rig",
                                           "/../../../scripts/rig", "/../../scripts/rig"};
    const char *env = getenv("REDLOCK_RIG_SCRIPT");
    const char *self = cli_self_exe();
    size_t i;

    if (env && *env) {
        if (executable(env))
            return env;
        cli_error("REDLOCK_RIG_SCRIPT", "%s: not an executable file", env);
        return NULL;
    }
    if (self) {
        char dir[PATH_MAX];
        char *slash;

        snprintf(dir, sizeof(dir), "%s", self);
        if ((slash = strrchr(dir, '/')))
            *slash = '\0';
        for (i = 0; i < sizeof(relative) / sizeof(relative[0]); i++) {
            if ((size_t)snprintf(path, sizeof(path), "%s%s", dir, relative[i]) < sizeof(path) &&
                executable(path))
                return path;
        }
    }
    if (REDLOCK_SOURCE_DIR[0]) {
        snprintf(path, sizeof(path), "%s/scripts/rig", REDLOCK_SOURCE_DIR);
        if (executable(path))
            return path;
    }
    cli_error("rig", "scripts/rig not found (set REDLOCK_RIG_SCRIPT)");
    return NULL;
}

int cli_run_rig(const char *script, const char *const *args, char *out, size_t cap, int quiet)
{
    const char *argv[32];
    int fds[2] = {-1, -1}, status;
    size_t n = 0, len = 0;
    pid_t pid;

    argv[n++] = script;
    while (args && *args && n < sizeof(argv) / sizeof(argv[0]) - 1)
        argv[n++] = *args++;
    argv[n] = NULL;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        cli_error("rig", "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);

        dup2(out ? fds[1] : devnull, STDOUT_FILENO);
        if (quiet)
            dup2(devnull, STDERR_FILENO);
        /* The rig's redis-server daemons must not hold our pipe open. */
        execv(script, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        cli_error("rig", "fork: %s", strerror(errno));
        return -1;
    }
    for (;;) {
        char buf[512];
        ssize_t r = read(fds[0], buf, sizeof(buf));

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (out && cap > 1 && len < cap - 1) {
            size_t take = (size_t)r < cap - 1 - len ? (size_t)r : cap - 1 - len;

            memcpy(out + len, buf, take);
            len += take;
        }
    }
    close(fds[0]);
    if (out && cap)
        out[len] = '\0';
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            cli_error("rig", "waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !executable(script)) {
        cli_error(script, "cannot run");
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

enum { R_NODES_COUNT = 1, R_BASE_PORT, R_TLS, R_AOF, R_DIR, R_SENTINEL };

/* A pid column: a number, or "-" for a node that is down (JSON null). */
static const char *json_pid(const char *pid)
{
    return strcmp(pid, "-") == 0 ? "null" : pid;
}

/*
 * `rig status` lines: "I PORT PID STATE" per node; a sentinel rig adds
 * "ROLE GROUP" to each node ("-" for a role that is not known, e.g. of a
 * node that is down) and a line "sI PORT PID STATE sentinel" per sentinel.
 */
static void print_status_json(const char *out, const char *base_port)
{
    const char *line;
    int first = 1, pass;

    printf("{\"base_port\":%s", base_port);
    for (pass = 0; pass < 2; pass++) {
        printf(",\"%s\":[", pass == 0 ? "nodes" : "sentinels");
        first = 1;
        for (line = out; line && *line;
             line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            unsigned idx, port;
            char pid[24], state[24], role[24], group[40];
            int n;

            if (pass == 0 &&
                (n = sscanf(line, "%u %u %23s %23s %23s %39s", &idx, &port, pid, state, role,
                            group)) >= 4) {
                printf("%s{\"node\":%u,\"port\":%u,\"pid\":%s,\"state\":", first ? "" : ",",
                       idx, port, json_pid(pid));
                cli_json_string(state);
                if (n == 6) {
                    printf(",\"role\":");
                    if (strcmp(role, "-") == 0)
                        printf("null");
                    else
                        cli_json_string(role);
                    printf(",\"group\":");
                    cli_json_string(group);
                }
                printf("}");
                first = 0;
            } else if (pass == 1 && sscanf(line, "s%u %u %23s %23s", &idx, &port, pid, state) == 4) {
                printf("%s{\"sentinel\":%u,\"port\":%u,\"pid\":%s,\"state\":",
                       first ? "" : ",", idx, port, json_pid(pid));
                cli_json_string(state);
                printf("}");
                first = 0;
            }
        }
        printf("]");
    }
    printf("}\n");
}

int cli_cmd_rig(cli_globals *g, int argc, char **argv)
{
    static const cli_opt opts[] = {{"nodes-count", 0, 1, R_NODES_COUNT},
                                   {"base-port", 0, 1, R_BASE_PORT},
                                   {"tls", 0, 0, R_TLS},
                                   {"aof", 0, 0, R_AOF},
                                   {"dir", 0, 1, R_DIR},
                                   {"sentinel", 0, 1, R_SENTINEL},
                                   {NULL, 0, 0, 0}};
    cli_args a = {argc, argv, 0, "rig", g};
    const char *args[16], *v, *verb = NULL, *script;
    const char *count_s = NULL, *port_s = "7001", *dir = NULL, *groups_s = NULL;
    int id, tmp, tls = 0, aof = 0, rc;
    size_t n = 0;
    char out[8192];

    while ((id = cli_next(&a, opts, &v)) != CLI_ARG_END) {
        switch (id) {
        case CLI_OPT_HELP:
            cli_usage("rig", 0);
            return 0;
        case CLI_ARG_ERROR:
            return CLI_EX_USAGE;
        case CLI_ARG_POSITIONAL:
            if (verb) {
                cli_error("rig", "unexpected argument '%s'", v);
                return CLI_EX_USAGE;
            }
            if (strcmp(v, "start") && strcmp(v, "stop") && strcmp(v, "status") &&
                strcmp(v, "env")) {
                cli_error("rig", "'%s' is not one of start, stop, status, env", v);
                return CLI_EX_USAGE;
            }
            verb = v;
            break;
        case R_NODES_COUNT:
            if (cli_parse_int("--nodes-count", v, 1, 64, &tmp))
                return CLI_EX_USAGE;
            count_s = v;
            break;
        case R_BASE_PORT:
            if (cli_parse_int("--base-port", v, 1, 65535, &tmp))
                return CLI_EX_USAGE;
            port_s = v;
            break;
        case R_TLS:
            tls = 1;
            break;
        case R_AOF:
            aof = 1;
            break;
        case R_DIR:
            dir = v;
            break;
        case R_SENTINEL:
            /* scripts/rig's own bound: 2G data nodes and 3 sentinels. */
            if (cli_parse_int("--sentinel", v, 1, 16, &tmp))
                return CLI_EX_USAGE;
            groups_s = v;
            break;
        default:
            cli_error("rig", "unexpected '--'");
            return CLI_EX_USAGE;
        }
    }
    if (!verb) {
        cli_error("rig", "missing start, stop, status or env");
        return CLI_EX_USAGE;
    }
    if (strcmp(verb, "start") != 0 && (count_s || tls || aof || groups_s)) {
        cli_error(verb, "--nodes-count, --sentinel, --tls and --aof apply to 'rig start' only");
        return CLI_EX_USAGE;
    }
    /* A sentinel rig's size is its groups (two nodes each), and the rig
     * script serves its sentinels without TLS. */
    if (groups_s && (count_s || tls)) {
        cli_error("--sentinel", "does not combine with %s", count_s ? "--nodes-count" : "--tls");
        return CLI_EX_USAGE;
    }
    if (!(script = cli_find_rig()))
        return CLI_EX_SOFTWARE;
    args[n++] = verb;
    args[n++] = "--base-port";
    args[n++] = port_s;
    if (count_s) {
        args[n++] = "--nodes";
        args[n++] = count_s;
    }
    if (groups_s) {
        args[n++] = "--sentinel";
        args[n++] = groups_s;
    }
    if (dir) {
        args[n++] = "--dir";
        args[n++] = dir;
    }
    if (tls)
        args[n++] = "--tls";
    if (aof)
        args[n++] = "--aof";
    args[n] = NULL;
    rc = cli_run_rig(script, args, out, sizeof(out), 0);
    if (rc < 0)
        return CLI_EX_SOFTWARE;
    if (rc == 0 && g->json && strcmp(verb, "status") == 0)
        print_status_json(out, port_s);
    else
        fputs(out, stdout);
    return rc == 0 ? 0 : 1;
}
