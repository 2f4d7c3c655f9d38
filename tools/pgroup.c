/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The command's process group, for redlock exec. The command runs as the
 * leader of a new process group, so the processes it starts (a pipeline,
 * `sleep 300 &`) are signalled with it: on a lost lock, on a forwarded
 * signal, and when redlock itself dies.
 *
 * That last case needs a second process, because nothing of redlock runs
 * after a SIGKILL and PR_SET_PDEATHSIG only reaches a direct child, not
 * the command's own children. The watcher is a small child of redlock in
 * a process group of its own (so Ctrl-C or `kill %1` aimed at redlock's
 * job does not reach it). It blocks reading a socket whose other end only
 * redlock holds (close-on-exec, so the command does not inherit it). A
 * byte on it means "done, exit quietly"; end-of-file means redlock died:
 * the watcher sends SIGTERM (and SIGCONT, for stopped members) to the
 * group, SIGKILL after the grace period, and exits.
 *
 * What escapes: a process that leaves the group (setsid(1), daemons that
 * call setsid() or setpgid()), and everything if the watcher is killed
 * together with redlock (kill -9 of both pids, the OOM killer).
 *
 * The watcher and the command are forked from a threaded process, so
 * between fork() and exec() they call only async-signal-safe functions.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Reads exactly n bytes; 0 on end-of-file or error. */
static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = read(fd, p, n);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        p += r;
        n -= (size_t)r;
    }
    return 1;
}

/* Closes every descriptor but keep: the watcher must not keep redlock's
 * Redis connections, its stdout (a `$(redlock exec ...)` would wait for
 * it) or another copy of its own socket. */
static void close_all_but(int keep)
{
    int fd;

    if (keep > 0 && close_range(0, (unsigned)keep - 1, 0) == 0 &&
        close_range((unsigned)keep + 1, ~0U, 0) == 0)
        return;
    for (fd = 0; fd < 1024; fd++)
        if (fd != keep)
            close(fd);
}

static void sleep_ms(int ms)
{
    poll(NULL, 0, ms);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The watcher's whole life. It keeps the signal mask it was forked with
 * (INT, TERM, HUP blocked), so only SIGKILL ends it early. */
static void watcher_main(int fd, int64_t grace_ms)
{
    pid_t pgid;
    char byte;
    int64_t kill_at;

    setpgid(0, 0);
    close_all_but(fd);
    /* End-of-file before the group id: redlock died before the command
     * was released to run, and the command exits by itself (spawn()). */
    if (!read_all(fd, &pgid, sizeof(pgid)) || pgid <= 1)
        _exit(0);
    if (read_all(fd, &byte, 1))
        _exit(0);
    kill(-pgid, SIGTERM);
    kill(-pgid, SIGCONT);
    kill_at = now_ms() + grace_ms;
    /* kill(-pgid, 0) also counts members that died but were not reaped
     * yet, so the loop may last the whole grace period; it is bounded. */
    while (now_ms() < kill_at && kill(-pgid, 0) == 0)
        sleep_ms(20);
    kill(-pgid, SIGKILL);
    _exit(0);
}

static int start_watcher(cli_pgroup *pg, int64_t grace_ms)
{
    int sv[2];
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    pid = fork();
    if (pid == 0)
        watcher_main(sv[1], grace_ms);
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return -1;
    }
    pg->watcher = pid;
    pg->watcher_fd = sv[0];
    return 0;
}

/*
 * The terminal. A command in a process group of its own is in the
 * background of the terminal: reading from it stops the command
 * (SIGTTIN), and Ctrl-C and Ctrl-Z reach redlock's group, not the
 * command's. So while redlock's job has the terminal, the command gets
 * it: at once if redlock leads its own group (a job of an interactive
 * shell), or when the command first stops for it otherwise (redlock in a
 * script, or one of the demo's workers, where taking the terminal at once
 * would take Ctrl-C away from the other processes of the job). A stop
 * from the terminal is passed on to redlock's job, so the shell sees it
 * and fg/bg work.
 */
static int in_foreground(int tty)
{
    return tty >= 0 && tcgetpgrp(tty) == getpgrp();
}

pid_t cli_pgroup_spawn(cli_pgroup *pg, char **cmd, char **envp, int64_t grace_ms,
                       void (*child_setup)(void), int *exec_errno)
{
    int go[2], errp[2], err = 0;
    char byte = 'g';
    pid_t pid;
    ssize_t n;
    int handoff;

    memset(pg, 0, sizeof(*pg));
    pg->watcher_fd = -1;
    pg->tty = isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
    handoff = getpgrp() == getpid() && in_foreground(pg->tty);
    *exec_errno = 0;
    if (start_watcher(pg, grace_ms) != 0)
        return -1;
    if (pipe2(go, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(errp, O_CLOEXEC) != 0) {
        close(go[0]);
        close(go[1]);
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (handoff)
            tcsetpgrp(pg->tty, getpid());
        close(go[1]);
        close(errp[0]);
        /* Run only once the watcher knows the group: if redlock dies
         * before that, the command never starts. */
        if (!read_all(go[0], &byte, 1))
            _exit(127);
        child_setup();
        /* envp was built before fork(): nothing here allocates. */
        if (envp)
            execvpe(cmd[0], cmd, envp);
        else
            execvp(cmd[0], cmd);
        err = errno;
        if (write(errp[1], &err, sizeof(err)) < 0) {
        }
        _exit(err == ENOENT ? 127 : 126);
    }
    close(go[0]);
    close(errp[1]);
    if (pid < 0) {
        close(go[1]);
        close(errp[0]);
        return -1;
    }
    /* Both sides set the group and the terminal, as shells do, so neither
     * order of the two processes leaves a window. */
    setpgid(pid, pid);
    if (handoff)
        tcsetpgrp(pg->tty, pid);
    pg->pgid = pid;
    if (send(pg->watcher_fd, &pg->pgid, sizeof(pg->pgid), MSG_NOSIGNAL) != sizeof(pg->pgid))
        cli_warn("exec", "the watcher is gone: if redlock dies, the command keeps running");
    if (write(go[1], &byte, 1) < 0) {
    }
    close(go[1]);
    do {
        n = read(errp[0], &err, sizeof(err));
    } while (n < 0 && errno == EINTR);
    close(errp[0]);
    if (n == (ssize_t)sizeof(err))
        *exec_errno = err;
    return pid;
}

void cli_pgroup_signal(const cli_pgroup *pg, int sig)
{
    if (pg->pgid <= 1)
        return;
    kill(-pg->pgid, sig);
    /* A stopped process acts on nothing but SIGKILL until it continues. */
    if (sig != SIGKILL && sig != SIGCONT)
        kill(-pg->pgid, SIGCONT);
}

int cli_pgroup_alive(const cli_pgroup *pg)
{
    return pg->pgid > 1 && kill(-pg->pgid, 0) == 0;
}

void cli_pgroup_stopped(const cli_pgroup *pg, int sig)
{
    /* A SIGSTOP from someone else is theirs to undo. */
    if (pg->tty < 0 || (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU))
        return;
    if (sig != SIGTSTP && in_foreground(pg->tty)) {
        /* The command needs the terminal, and our job has it: lend it. */
        tcsetpgrp(pg->tty, pg->pgid);
        kill(-pg->pgid, SIGCONT);
        return;
    }
    if (tcgetpgrp(pg->tty) == pg->pgid)
        tcsetpgrp(pg->tty, getpgrp());
    /* Stop our own job as the terminal would have (in an orphaned group
     * the kernel ignores this and we go on at once); the shell continues
     * it with fg or bg, and then we continue the command, in the
     * foreground if the job is. */
    kill(0, SIGTSTP);
    if (in_foreground(pg->tty))
        tcsetpgrp(pg->tty, pg->pgid);
    kill(-pg->pgid, SIGCONT);
}

void cli_pgroup_finish(cli_pgroup *pg)
{
    int i;

    /* Even once the group is gone, the terminal still names it. */
    if (pg->tty >= 0 && pg->pgid > 1 && tcgetpgrp(pg->tty) == pg->pgid)
        tcsetpgrp(pg->tty, getpgrp());
    pg->tty = -1;
    if (pg->watcher_fd >= 0) {
        /* The byte dismisses the watcher; then reap it (bounded: a watcher
         * someone stopped is left to init). */
        if (send(pg->watcher_fd, "d", 1, MSG_NOSIGNAL) < 0) {
        }
        close(pg->watcher_fd);
        pg->watcher_fd = -1;
        for (i = 0; i < 50 && waitpid(pg->watcher, NULL, WNOHANG) == 0; i++)
            sleep_ms(10);
    }
}
