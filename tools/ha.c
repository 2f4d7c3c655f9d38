/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sentinel rig as the tool drives it (redlock demo --sentinel): its
 * node list, killing a group's master and waiting for the failover, all
 * through scripts/rig's own verbs (env, kill-master, wait-failover,
 * restart), so the tool never signals a process it did not start through
 * the rig, and the tests, the safety harness and the tool share one
 * implementation of each step.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

int cli_rig_env(const char *rig, int base_port, const char *key, char *out, size_t cap)
{
    const char *args[] = {"env", "--base-port", NULL, NULL};
    char port[16], env[16384];
    const char *line;
    size_t klen = strlen(key);

    snprintf(port, sizeof(port), "%d", base_port);
    args[2] = port;
    if (cli_run_rig(rig, args, env, sizeof(env), 0) != 0) {
        cli_error("rig env", "failed for the rig on port %d (see above)", base_port);
        return -1;
    }
    for (line = env; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);

        if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == '=') {
            if (len - klen - 1 >= cap) {
                cli_error("rig env", "%s is longer than %zu bytes", key, cap - 1);
                return -1;
            }
            memcpy(out, line + klen + 1, len - klen - 1);
            out[len - klen - 1] = '\0';
            return 0;
        }
    }
    cli_error("rig env", "no %s for the rig on port %d", key, base_port);
    return -1;
}

int cli_rig_kill_master(const char *rig, int base_port, int group)
{
    const char *args[] = {"kill-master", NULL, "--base-port", NULL, NULL};
    char port[16], g[16], out[64];
    long p;
    char *end;

    snprintf(port, sizeof(port), "%d", base_port);
    snprintf(g, sizeof(g), "%d", group);
    args[1] = g;
    args[3] = port;
    if (cli_run_rig(rig, args, out, sizeof(out), 0) != 0)
        return -1;
    p = strtol(out, &end, 10);
    if (end == out || p < 1 || p > 65535)
        return -1;
    return (int)p;
}

pid_t cli_rig_failover_watch(const char *rig, int base_port, int group, int old_port, int secs,
                             const char *out_path)
{
    char port[16], g[16], old[16], s[16];
    const char *argv[] = {rig, "wait-failover", g, old, s, "--base-port", port, NULL};
    pid_t pid;

    snprintf(port, sizeof(port), "%d", base_port);
    snprintf(g, sizeof(g), "%d", group);
    snprintf(old, sizeof(old), "%d", old_port);
    snprintf(s, sizeof(s), "%d", secs);
    /* The child inherits stdio buffers: flushed first, so nothing is
     * written twice. */
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int null = open("/dev/null", O_WRONLY);

        if (out < 0)
            _exit(127);
        dup2(out, STDOUT_FILENO);
        /* Its progress is not the demo's timeline; its failure is seen
         * in the exit status. */
        if (null >= 0)
            dup2(null, STDERR_FILENO);
        execv(rig, (char *const *)argv);
        _exit(127);
    }
    if (pid < 0)
        cli_error("rig wait-failover", "fork: %s", strerror(errno));
    return pid;
}

int cli_rig_failover_done(pid_t pid, const char *out_path, int block, int *new_port)
{
    char buf[64];
    int status, fd;
    ssize_t n;
    pid_t r;

    *new_port = -1;
    while ((r = waitpid(pid, &status, block ? 0 : WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r == 0)
        return 0;
    if (r != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    if ((fd = open(out_path, O_RDONLY | O_CLOEXEC)) < 0)
        return 1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n > 0) {
        long p;
        char *end;

        buf[n] = '\0';
        p = strtol(buf, &end, 10);
        if (end != buf && p >= 1 && p <= 65535)
            *new_port = (int)p;
    }
    return 1;
}

void cli_rig_failover_stop(pid_t pid, const char *out_path)
{
    int port;

    if (pid <= 0)
        return;
    /* Our own child (the rig script); it ends within its SECS anyway. */
    kill(pid, SIGTERM);
    cli_rig_failover_done(pid, out_path, 1, &port);
}

int cli_rig_restart(const char *rig, int base_port, int node)
{
    const char *args[] = {"restart", NULL, "--base-port", NULL, NULL};
    char port[16], idx[16];

    snprintf(port, sizeof(port), "%d", base_port);
    snprintf(idx, sizeof(idx), "%d", node);
    args[1] = idx;
    args[3] = port;
    return cli_run_rig(rig, args, NULL, 0, 0) == 0 ? 0 : -1;
}
