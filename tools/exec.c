/*
 * redlock exec: a distributed flock(1). Acquires the lock, runs the
 * command as a child while holding it, and releases it when the child
 * exits. A loss of the lock while the child runs (reported by the
 * watchdog, or a fixed lease running out) is turned into SIGTERM/SIGKILL
 * and exit status 76.
 *
 * The parent waits in one poll() loop on a self-pipe: signal handlers and
 * the library's on_lost callback (watchdog thread) only write one byte to
 * it, so all decisions are taken on the main thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

enum { O_WAIT = 1, O_LEASE, O_ON_LOST, O_GRACE, O_FENCING };

enum on_lost_policy { LOST_TERM, LOST_KILL, LOST_IGNORE };

/* The byte the on_lost callback writes; signals write their number. */
#define WAKE_LOST 0xff

typedef struct exec_opts {
    const char *name;
    int64_t wait_ms;      /* -1 = forever */
    int64_t lease_ms;     /* 0 = watchdog */
    enum on_lost_policy on_lost;
    int64_t grace_ms;
    int fencing;
    char **cmd;
} exec_opts;

static int wake_pipe[2] = {-1, -1};

/* The signals exec handles, and their dispositions before it did: the
 * child gets those back, so a command started under nohup(1) still
 * ignores SIGHUP and a forwarded signal means what it would have meant. */
static const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
#define N_HANDLED (sizeof(handled_signals) / sizeof(handled_signals[0]))
static struct sigaction saved_actions[N_HANDLED];

static void wake(unsigned char what)
{
    int saved = errno;

    /* The pipe is non-blocking: if it is full, a wake-up is pending anyway. */
    if (write(wake_pipe[1], &what, 1) < 0) {
    }
    errno = saved;
}

static void on_signal(int sig)
{
    wake((unsigned char)sig);
}

static void on_lost(void *ud, redlock_lock *lock, uint64_t owner, int reason)
{
    int *lost_reason = ud;

    (void)lock, (void)owner;
    __atomic_store_n(lost_reason, reason, __ATOMIC_SEQ_CST);
    wake(WAKE_LOST);
}

static int parse_exec(cli_globals *g, int argc, char **argv, exec_opts *o)
{
    static const cli_opt opts[] = {
        {"wait", 0, 1, O_WAIT},         {"lease", 0, 1, O_LEASE},
        {"on-lost", 0, 1, O_ON_LOST},   {"grace", 0, 1, O_GRACE},
        {"fencing", 0, 0, O_FENCING},   {NULL, 0, 0, 0}};
    cli_args a = {argc, argv, 0, "exec", g};
    const char *v;
    int id;

    memset(o, 0, sizeof(*o));
    o->wait_ms = -1;
    o->grace_ms = 5000;
    for (;;) {
        id = cli_next(&a, opts, &v);
        switch (id) {
        case CLI_OPT_HELP:
            cli_usage("exec", 0);
            return -1;
        case CLI_ARG_ERROR:
            return CLI_EX_USAGE;
        case O_WAIT:
            if (cli_parse_i64("--wait", v, 0, INT64_MAX / 1000000, &o->wait_ms))
                return CLI_EX_USAGE;
            break;
        case O_LEASE:
            if (cli_parse_i64("--lease", v, 1, INT64_MAX / 1000000, &o->lease_ms))
                return CLI_EX_USAGE;
            break;
        case O_ON_LOST:
            if (strcmp(v, "term") == 0) {
                o->on_lost = LOST_TERM;
            } else if (strcmp(v, "kill") == 0) {
                o->on_lost = LOST_KILL;
            } else if (strcmp(v, "ignore") == 0) {
                o->on_lost = LOST_IGNORE;
            } else {
                cli_error("--on-lost", "'%s' is not one of term, kill, ignore", v);
                return CLI_EX_USAGE;
            }
            break;
        case O_GRACE:
            if (cli_parse_i64("--grace", v, 0, INT64_MAX / 1000000, &o->grace_ms))
                return CLI_EX_USAGE;
            break;
        case O_FENCING:
            o->fencing = 1;
            break;
        case CLI_ARG_POSITIONAL:
            if (!o->name) {
                o->name = v;
                break;
            }
            /* "exec NAME CMD ARG...": the command starts here and keeps
             * its own options. */
            o->cmd = argv + a.i - 1;
            return 0;
        case CLI_ARG_DASHDASH:
            if (!o->name) {
                cli_error("exec", "missing lock NAME before '--'");
                return CLI_EX_USAGE;
            }
            if (a.i >= argc) {
                cli_error("exec", "missing command after '--'");
                return CLI_EX_USAGE;
            }
            o->cmd = argv + a.i;
            return 0;
        case CLI_ARG_END:
            cli_error("exec", o->name ? "missing command (exec NAME -- CMD [ARG...])"
                                      : "missing lock NAME and command");
            return CLI_EX_USAGE;
        default:
            cli_error("exec", "internal error: unexpected option %d", id);
            return CLI_EX_SOFTWARE;
        }
    }
}

/* ---- the progress line ---------------------------------------------------- */

/* While the acquire call blocks the main thread, a small thread shows how
 * long it has been waiting - on a terminal only, and only after a second,
 * so scripts and quick acquisitions see nothing. */
typedef struct progress {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, shown, running;
    const char *name;
    int64_t start_ns;
} progress;

static void *progress_main(void *arg)
{
    static const char spin[] = "|/-\\";
    progress *p = arg;
    struct timespec until;
    unsigned n = 0;

    pthread_mutex_lock(&p->mu);
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 1;
    while (!p->done) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0 && !p->done) {
            double waited = (double)(cli_now_ns() - p->start_ns) / 1e9;

            fprintf(stderr, "\r%c waiting for lock '%s' (%.0f s)   ", spin[n++ % 4],
                    p->name, waited);
            fflush(stderr);
            p->shown = 1;
            until.tv_nsec += 250000000;
            if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
            }
        }
    }
    if (p->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void progress_start(progress *p, const char *name)
{
    pthread_condattr_t ca;

    memset(p, 0, sizeof(*p));
    if (!isatty(STDOUT_FILENO) || !isatty(STDERR_FILENO))
        return;
    p->name = name;
    p->start_ns = cli_now_ns();
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    p->running = pthread_create(&p->thread, NULL, progress_main, p) == 0;
    if (!p->running) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
    }
}

static void progress_stop(progress *p)
{
    if (!p->running)
        return;
    pthread_mutex_lock(&p->mu);
    p->done = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    p->running = 0;
}

/* ---- the child ------------------------------------------------------------ */

static int set_child_env(const exec_opts *o, redlock_lock *lock, int64_t validity_ms)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%lld", (long long)validity_ms);
    if (setenv("REDLOCK_NAME", o->name, 1) || setenv("REDLOCK_VALIDITY_MS", buf, 1))
        return -1;
    if (o->fencing) {
        uint64_t token;

        if (redlock_lock_token(lock, &token) != REDLOCK_OK) {
            cli_error("--fencing", "%s", redlock_last_error());
            return -1;
        }
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)token);
        if (setenv("REDLOCK_TOKEN", buf, 1))
            return -1;
    }
    return 0;
}

/*
 * Starts CMD. A close-on-exec pipe carries the errno of a failed execvp()
 * back, so the error is printed by the parent (a forked child of a
 * threaded process may only call async-signal-safe functions).
 */
static pid_t spawn(char **cmd, const sigset_t *old_mask, int *exec_errno)
{
    int fds[2], err = 0;
    pid_t pid;
    ssize_t n;

    *exec_errno = 0;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        size_t i;

        for (i = 0; i < N_HANDLED; i++)
            sigaction(handled_signals[i], &saved_actions[i], NULL);
        sigprocmask(SIG_SETMASK, old_mask, NULL);
        close(fds[0]);
        execvp(cmd[0], cmd);
        err = errno;
        if (write(fds[1], &err, sizeof(err)) < 0) {
        }
        _exit(err == ENOENT ? 127 : 126);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    do {
        n = read(fds[0], &err, sizeof(err));
    } while (n < 0 && errno == EINTR);
    close(fds[0]);
    if (n == (ssize_t)sizeof(err))
        *exec_errno = err;
    return pid;
}

static int exit_status_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return CLI_EX_SOFTWARE;
}

/* ---- the supervision loop -------------------------------------------------- */

typedef struct supervisor {
    const exec_opts *o;
    pid_t child;
    int lost_reason;          /* written by the on_lost callback */
    int lost;                 /* the loss was acted on */
    int64_t lease_end_ns;     /* fixed lease: when validity runs out */
    int64_t kill_at_ns;       /* SIGKILL after the grace period; 0 = none */
} supervisor;

static int64_t ms_until(int64_t deadline_ns, int64_t now)
{
    int64_t ms;

    if (deadline_ns == 0)
        return -1;
    if (deadline_ns <= now)
        return 0;
    ms = (deadline_ns - now + 999999) / 1000000;
    return ms;
}

static void act_on_loss(supervisor *s, const char *why)
{
    if (s->lost)
        return;
    s->lost = 1;
    switch (s->o->on_lost) {
    case LOST_TERM:
        cli_error(s->o->name, "lock lost (%s); sending SIGTERM to %ld, SIGKILL in %lld ms",
                  why, (long)s->child, (long long)s->o->grace_ms);
        kill(s->child, SIGTERM);
        s->kill_at_ns = cli_now_ns() + s->o->grace_ms * 1000000;
        break;
    case LOST_KILL:
        cli_error(s->o->name, "lock lost (%s); sending SIGKILL to %ld", why, (long)s->child);
        kill(s->child, SIGKILL);
        break;
    case LOST_IGNORE:
        cli_warn(s->o->name, "lock lost (%s); the command keeps running (--on-lost ignore)",
                 why);
        break;
    }
}

/* Waits for the child, forwarding signals and acting on a loss. Returns
 * the child's wait status. */
static int supervise(supervisor *s)
{
    for (;;) {
        struct pollfd pfd = {wake_pipe[0], POLLIN, 0};
        unsigned char buf[64];
        int64_t now = cli_now_ns(), t1, t2, timeout;
        int status, reason;
        pid_t r;
        ssize_t n, i;

        r = waitpid(s->child, &status, WNOHANG);
        if (r == s->child)
            return status;
        if (r < 0 && errno != EINTR) {
            cli_error("waitpid", "%s", strerror(errno));
            return -1;
        }
        reason = __atomic_load_n(&s->lost_reason, __ATOMIC_SEQ_CST);
        if (reason && !s->lost)
            act_on_loss(s, redlock_strerror(reason));
        if (s->lease_end_ns && now >= s->lease_end_ns && !s->lost)
            act_on_loss(s, "the fixed --lease ran out");
        if (s->kill_at_ns && now >= s->kill_at_ns) {
            cli_error(s->o->name, "command still running after --grace; sending SIGKILL");
            kill(s->child, SIGKILL);
            s->kill_at_ns = 0;
        }
        /* SIGCHLD wakes the loop; the timeout only bounds a missed one. */
        t1 = ms_until(s->lost ? 0 : s->lease_end_ns, now);
        t2 = ms_until(s->kill_at_ns, now);
        timeout = 1000;
        if (t1 >= 0 && t1 < timeout)
            timeout = t1;
        if (t2 >= 0 && t2 < timeout)
            timeout = t2;
        if (poll(&pfd, 1, (int)timeout) <= 0)
            continue;
        n = read(wake_pipe[0], buf, sizeof(buf));
        for (i = 0; i < n; i++) {
            int sig = buf[i];

            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
                kill(s->child, sig);
        }
    }
}

/* ---- the command ----------------------------------------------------------- */

static int install_handlers(void)
{
    struct sigaction sa;
    size_t i;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < N_HANDLED; i++)
        if (sigaction(handled_signals[i], &sa, &saved_actions[i]) != 0)
            return -1;
    return 0;
}

static int acquire_status(int rc, redlock_client *c, redlock_lock *lock, const exec_opts *o)
{
    switch (rc) {
    case REDLOCK_EBUSY:
    case REDLOCK_ETIMEOUT:
        cli_error(o->name, "%s", redlock_last_error());
        return CLI_EX_TEMPFAIL;
    case REDLOCK_ENO_QUORUM: {
        char why[256];

        snprintf(why, sizeof(why), "%s", redlock_last_error());
        cli_print_member_errors(c, lock);
        cli_error(o->name, "%s", why);
        return CLI_EX_NOQUORUM;
    }
    case REDLOCK_EINVAL:
        cli_error(o->name, "%s", redlock_last_error());
        return CLI_EX_USAGE;
    default:
        cli_error(o->name, "acquire: %s", redlock_last_error());
        return CLI_EX_SOFTWARE;
    }
}

int cli_cmd_exec(cli_globals *g, int argc, char **argv)
{
    exec_opts o;
    supervisor s;
    progress prog;
    redlock_client *client = NULL;
    redlock_lock *lock = NULL;
    sigset_t block, old_mask;
    int64_t validity_ms = 0;
    int rc, status, exec_errno, unlock_rc;

    if ((rc = parse_exec(g, argc, argv, &o)) != 0)
        return rc < 0 ? 0 : rc;
    /* The pipe exists before the client starts its watchdog thread, so
     * that thread's on_lost callback sees it fully made. */
    if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        cli_error("exec", "pipe: %s", strerror(errno));
        return CLI_EX_SOFTWARE;
    }
    if ((rc = cli_client_new(g, &client)) != 0)
        return rc;
    if ((rc = cli_lock_new(g, client, o.name, o.fencing, &lock)) != 0)
        goto out;
    memset(&s, 0, sizeof(s));
    s.o = &o;
    redlock_lock_set_on_lost(lock, on_lost, &s.lost_reason);

    /* Until the lock is held, INT/TERM/HUP keep their default action: a
     * waiter interrupted by the user simply ends, holding nothing. */
    progress_start(&prog, o.name);
    rc = redlock_acquire_as(lock, redlock_thread_owner(), o.wait_ms, o.lease_ms);
    progress_stop(&prog);
    if (rc != REDLOCK_OK) {
        rc = acquire_status(rc, client, lock, &o);
        goto out;
    }
    cli_info(g, o.name, "acquired on a quorum of %d of %zu node(s)", redlock_lock_quorum(lock),
             redlock_lock_member_count(lock));
    if (redlock_remaining_ttl(lock, &validity_ms) != REDLOCK_OK)
        validity_ms = 0;

    /* From here on the lock is released on every way out. Signals are
     * blocked around fork() so none is lost between the two. */
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &block, &old_mask);
    if (install_handlers() != 0) {
        cli_error("exec", "signal setup: %s", strerror(errno));
        rc = CLI_EX_SOFTWARE;
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
        goto release;
    }
    if (set_child_env(&o, lock, validity_ms) != 0) {
        cli_error("exec", "environment: %s", strerror(errno));
        rc = CLI_EX_SOFTWARE;
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
        goto release;
    }
    fflush(NULL);
    s.child = spawn(o.cmd, &old_mask, &exec_errno);
    if (o.lease_ms > 0)
        s.lease_end_ns = cli_now_ns() + validity_ms * 1000000;
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    if (s.child < 0) {
        cli_error("fork", "%s", strerror(errno));
        rc = CLI_EX_SOFTWARE;
        goto release;
    }
    if (exec_errno) {
        waitpid(s.child, &status, 0);
        cli_error(o.cmd[0], "%s", strerror(exec_errno));
        rc = exit_status_of(status);
        goto release;
    }
    status = supervise(&s);
    rc = status < 0 ? CLI_EX_SOFTWARE : exit_status_of(status);
    if (s.lost && o.on_lost != LOST_IGNORE)
        rc = CLI_EX_LOST;

release:
    unlock_rc = redlock_unlock(lock);
    if (unlock_rc == REDLOCK_ELOST) {
        /* A loss the loop had not yet seen (the child ended first) still
         * means the command may have run without the lock. */
        if (!s.lost) {
            cli_error(o.name, "%s", redlock_last_error());
            if (o.on_lost != LOST_IGNORE && rc != CLI_EX_SOFTWARE)
                rc = CLI_EX_LOST;
        }
    } else if (unlock_rc != REDLOCK_OK) {
        /* The keys expire with their lease; say so rather than fail CMD's
         * own status. */
        cli_warn(o.name, "release: %s (the lease expires on its own)", redlock_last_error());
    } else {
        cli_info(g, o.name, "released");
    }
out:
    redlock_lock_free(lock);
    redlock_client_free(client);
    return rc;
}
