/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock exec: a distributed flock(1). Acquires the lock (or a read or
 * write hold, or permits of a semaphore: exec_hold.c), runs the command as
 * a child while holding it, and releases it when the child exits. A loss
 * of the lock while the child runs (reported by the watchdog, or a fixed
 * lease running out) is turned into SIGTERM/SIGKILL and exit status 76.
 * The command runs in a process group of its own, and every signal for it
 * goes to the whole group (see pgroup.c).
 *
 * INT, TERM, HUP and CHLD are blocked in every thread and taken by one
 * thread in sigwait(), which can do what a signal handler may not: while
 * the lock is awaited it calls redlock_client_cancel(), so the acquire
 * aborts its attempt in flight and returns, and exec exits 128+signal
 * after freeing the client (which delivers what the client still owes
 * the nodes). While the command runs, that thread and the library's
 * on_lost callback (watchdog thread) only write one byte to a self-pipe,
 * so all decisions are taken in the main thread's poll() loop.
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

/* The byte the on_lost callback writes; signals write their number. */
#define WAKE_LOST 0xff

static int wake_pipe[2] = {-1, -1};

static void wake(unsigned char what)
{
    int saved = errno;

    /* The pipe is non-blocking: if it is full, a wake-up is pending anyway. */
    if (write(wake_pipe[1], &what, 1) < 0) {
    }
    errno = saved;
}

static void on_lost(void *ud, redlock_lock *lock, uint64_t owner, int reason)
{
    int *lost_reason = ud;

    (void)lock, (void)owner;
    __atomic_store_n(lost_reason, reason, __ATOMIC_SEQ_CST);
    wake(WAKE_LOST);
}

/* ---- signals ------------------------------------------------------------- */

/*
 * The signal thread. Until the command starts, the first INT/TERM/HUP
 * cancels the client (the acquire returns REDLOCK_ECANCELED) and is kept
 * in `got`; after that, signals go to the main loop through the pipe. A
 * signal that was ignored when redlock started (nohup(1), a background
 * job of a script) stays ignored, as it would have without redlock.
 */
typedef struct sig_thread {
    pthread_t thread;
    pthread_mutex_t mu;
    sigset_t wait_set;        /* INT, TERM, HUP, CHLD */
    sigset_t ignored;         /* those of INT, TERM, HUP ignored at start */
    redlock_client *client;   /* canceled by a signal before the command */
    int command_runs;
    int got;
    int quit;
    int running;
} sig_thread;

/* What the command gets back: the mask and SIGCHLD action redlock started
 * with. INT/TERM/HUP dispositions are never changed, only blocked, so a
 * command started under nohup(1) still ignores SIGHUP. */
static sigset_t saved_mask;
static struct sigaction saved_chld;

static void child_setup(void)
{
    sigaction(SIGCHLD, &saved_chld, NULL);
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
}

static void *sig_main(void *arg)
{
    sig_thread *t = arg;

    for (;;) {
        int sig, quit, to_loop;

        if (sigwait(&t->wait_set, &sig) != 0)
            continue;
        pthread_mutex_lock(&t->mu);
        quit = t->quit;
        to_loop = sig == SIGCHLD;
        if (!quit && sig != SIGCHLD && !sigismember(&t->ignored, sig)) {
            if (t->command_runs) {
                to_loop = 1;
            } else if (!t->got) {
                t->got = sig;
                if (t->client)
                    redlock_client_cancel(t->client);
            }
        }
        pthread_mutex_unlock(&t->mu);
        if (quit)
            return NULL;
        if (to_loop)
            wake((unsigned char)sig);
    }
}

/* Blocks the signals in the calling (main) thread, so every thread
 * started after it - the library's included - inherits the block, and
 * starts the thread that takes them. SIGTTOU is blocked too: giving the
 * terminal back from a background process group must not stop redlock;
 * and SIGPIPE (below). */
static int sig_start(sig_thread *t)
{
    static const int taken[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction dfl;
    sigset_t block;
    size_t i;

    memset(t, 0, sizeof(*t));
    sigemptyset(&t->wait_set);
    sigemptyset(&t->ignored);
    for (i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
        struct sigaction old;

        sigaddset(&t->wait_set, taken[i]);
        if (sigaction(taken[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            sigaddset(&t->ignored, taken[i]);
    }
    sigaddset(&t->wait_set, SIGCHLD);
    block = t->wait_set;
    sigaddset(&block, SIGTTOU);
    /* A message to a stderr whose reader is gone (`... 2>&1 | head` that
     * quit) must fail with EPIPE, not kill redlock while it holds the
     * lock. The command gets the mask redlock started with. */
    sigaddset(&block, SIGPIPE);
    if (pthread_sigmask(SIG_BLOCK, &block, &saved_mask) != 0)
        return -1;
    /* An ignored SIGCHLD (inherited) would reap the command for us. */
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (sigaction(SIGCHLD, &dfl, &saved_chld) != 0)
        return -1;
    pthread_mutex_init(&t->mu, NULL);
    t->running = pthread_create(&t->thread, NULL, sig_main, t) == 0;
    return t->running ? 0 : -1;
}

/* The client that a signal cancels; a signal that came first cancels it
 * at once. */
static void sig_set_client(sig_thread *t, redlock_client *c)
{
    pthread_mutex_lock(&t->mu);
    t->client = c;
    if (c && t->got)
        redlock_client_cancel(c);
    pthread_mutex_unlock(&t->mu);
}

/* From now on signals are for the command. Returns the signal that came
 * while waiting, or 0. */
static int sig_command_starts(sig_thread *t)
{
    int got;

    pthread_mutex_lock(&t->mu);
    t->client = NULL;
    t->command_runs = 1;
    got = t->got;
    pthread_mutex_unlock(&t->mu);
    return got;
}

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGINT:
        return "SIGINT";
    case SIGTERM:
        return "SIGTERM";
    case SIGHUP:
        return "SIGHUP";
    }
    return "a signal";
}

static void sig_stop(sig_thread *t)
{
    if (!t->running)
        return;
    pthread_mutex_lock(&t->mu);
    t->quit = 1;
    t->client = NULL;
    pthread_mutex_unlock(&t->mu);
    /* A thread-directed SIGCHLD ends its sigwait(). */
    pthread_kill(t->thread, SIGCHLD);
    pthread_join(t->thread, NULL);
    pthread_mutex_destroy(&t->mu);
    t->running = 0;
}

/* ---- waiting for the lock ------------------------------------------------- */

/*
 * The first call waits at most this long, and so does every call while no
 * quorum is reachable, so that failing nodes are named (and the progress
 * line updated) while the wait goes on: the per-member report only exists
 * once a call returns, on the thread that made it. Once a quorum answers,
 * the rest of the wait is one call, since waiting for a holder is the
 * library's job (release messages, the holder's TTL) and must not poll.
 * A fair lock's wait is always one call: a waiter whose call ends leaves
 * the queue, and would come back behind everyone who arrived meanwhile.
 */
#define REPORT_SLICE_MS 1000

typedef struct waiter {
    redlock_client *client;
    cli_hold *hold;
    cli_progress prog;
    size_t n;
    unsigned char failing[64]; /* already named as failing */
} waiter;

/* Names each member that starts failing once, with the reason from the
 * last attempt's report, instead of on every attempt; a member that
 * answers again is named again if it fails later. Returns how many
 * members are failing. */
static int note_members(waiter *w)
{
    redlock_lock *lock = cli_hold_report_lock(w->hold);
    redlock_member_report r;
    int failing = 0;
    size_t i;

    cli_progress_pause(&w->prog);
    for (i = 0; i < w->n; i++) {
        /* Without a report (a semaphore's attempt that failed), the
         * members keep their last known state. */
        if (!lock || redlock_lock_report(lock, i, &r) != REDLOCK_OK) {
            failing += w->failing[i];
            continue;
        }
        switch (r.outcome) {
        case REDLOCK_MEMBER_ERROR:
        case REDLOCK_MEMBER_TIMEOUT:
            if (!w->failing[i])
                cli_error(redlock_client_node_name(w->client, i), "%s",
                          cli_member_why(w->client, i, &r));
            w->failing[i] = 1;
            break;
        case REDLOCK_MEMBER_NONE:
            /* Not contacted (the attempt was decided early): no news. */
            break;
        default:
            w->failing[i] = 0;
            break;
        }
        failing += w->failing[i];
    }
    fflush(stderr);
    cli_progress_resume(&w->prog, failing);
    return failing;
}

/* The acquire call over the whole --wait, in slices (see above). The
 * --unavailable-timeout is counted across slices here as well as by the
 * library, so a wait in slices ends like one call would. */
static int acquire(waiter *w, const cli_exec_opts *o, char *why, size_t cap)
{
    int64_t start = cli_now_ns(), unavailable_since = 0, deadline = -1;
    int slice = o->kind != REDLOCK_LOCK_FAIR, rc;

    /* A --wait beyond the clock's range (centuries) is forever. */
    if (o->wait_ms >= 0 && o->wait_ms < (INT64_MAX - start) / 1000000)
        deadline = start + o->wait_ms * 1000000;

    for (;;) {
        int64_t t0 = cli_now_ns(), now, left = -1, w_ms;
        int sliced = 0;

        if (deadline >= 0)
            left = deadline > t0 ? (deadline - t0) / 1000000 : 0;
        w_ms = left;
        if (slice && o->wait_ms != 0 && (left < 0 || left > REPORT_SLICE_MS)) {
            w_ms = REPORT_SLICE_MS;
            sliced = 1;
        }
        rc = cli_hold_acquire(w->hold, w_ms, o->lease_ms);
        snprintf(why, cap, "%s", rc == REDLOCK_OK ? "" : redlock_last_error());
        note_members(w);
        if (rc == REDLOCK_OK || !sliced)
            return rc;
        if (rc == REDLOCK_ETIMEOUT) {
            /* A quorum answered: the rest is waiting for the holder. */
            slice = 0;
            unavailable_since = 0;
            continue;
        }
        if (rc != REDLOCK_ENO_QUORUM)
            return rc;
        now = cli_now_ns();
        if (!unavailable_since)
            unavailable_since = t0;
        /* Before its slice ended, the library gave up by itself. */
        if (now - t0 < w_ms * 1000000 ||
            now - unavailable_since >= (int64_t)o->unavailable_ms * 1000000) {
            if (now - t0 >= w_ms * 1000000)
                snprintf(why, cap, "no quorum of nodes reachable for %d ms (--unavailable-timeout)",
                         o->unavailable_ms);
            return rc;
        }
    }
}

/* ---- the child ------------------------------------------------------------ */

/*
 * The command's environment, built before fork() (the child of a threaded
 * process may not allocate): redlock's own, without what redlock sets
 * itself and, unless --keep-secret-env, without the secrets: the password
 * and a node list with user info in it. The command holds the lock, not
 * the credentials to take other locks or to read the lock's nodes.
 */
typedef struct child_env {
    char **envp;
    char *mine[4];            /* the variables set here */
} child_env;

static int env_named(const char *entry, const char *name)
{
    size_t n = strlen(name);

    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static int is_secret(const char *entry)
{
    const char *nodes;

    if (env_named(entry, "REDLOCK_PASSWORD"))
        return 1;
    if (!env_named(entry, "REDLOCK_NODES"))
        return 0;
    /* A node list that cli_client_new() wiped reads as empty now. */
    nodes = entry + sizeof("REDLOCK_NODES=") - 1;
    return !*nodes || cli_nodes_userinfo(nodes) > 0;
}

static void child_env_free(child_env *e)
{
    size_t i;

    free(e->envp);
    for (i = 0; i < sizeof(e->mine) / sizeof(e->mine[0]); i++)
        free(e->mine[i]);
    memset(e, 0, sizeof(*e));
}

static int child_env_build(child_env *e, const cli_exec_opts *o, cli_hold *hold,
                           int64_t validity_ms)
{
    static const char *const set_here[] = {"REDLOCK_NAME", "REDLOCK_VALIDITY_MS",
                                           "REDLOCK_TOKEN", "REDLOCK_HELD"};
    extern char **environ;
    size_t n = 0, i, j, k, m = 0;
    int skip;

    memset(e, 0, sizeof(*e));
    if (asprintf(&e->mine[m++], "REDLOCK_NAME=%s", o->name) < 0 ||
        asprintf(&e->mine[m++], "REDLOCK_VALIDITY_MS=%lld", (long long)validity_ms) < 0 ||
        !(e->mine[m++] = strdup("REDLOCK_HELD=1"))) {
        e->mine[m - 1] = NULL;
        goto oom;
    }
    if (o->fencing) {
        uint64_t token;

        if (cli_hold_token(hold, &token) != REDLOCK_OK) {
            cli_error("--fencing", "%s", redlock_last_error());
            child_env_free(e);
            return CLI_EX_SOFTWARE;
        }
        if (asprintf(&e->mine[m++], "REDLOCK_TOKEN=%llu", (unsigned long long)token) < 0) {
            e->mine[m - 1] = NULL;
            goto oom;
        }
    }
    for (i = 0; environ && environ[i]; i++)
        n++;
    if (!(e->envp = calloc(n + m + 1, sizeof(char *))))
        goto oom;
    for (i = 0, k = 0; i < n; i++) {
        skip = !o->keep_secret_env && is_secret(environ[i]);
        for (j = 0; j < sizeof(set_here) / sizeof(set_here[0]); j++)
            skip |= env_named(environ[i], set_here[j]);
        if (!skip)
            e->envp[k++] = environ[i];
    }
    for (i = 0; i < m; i++)
        e->envp[k++] = e->mine[i];
    e->envp[k] = NULL;
    return 0;
oom:
    cli_error("exec", "environment: out of memory");
    child_env_free(e);
    return CLI_EX_SOFTWARE;
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
    const cli_exec_opts *o;
    const char *what;         /* what is held: "lock", "permit", ... */
    cli_pgroup pg;            /* the command's process group */
    pid_t child;              /* its leader */
    int lost_reason;          /* written by the on_lost callback */
    int lost;                 /* the loss was acted on */
    int forwarded;            /* a signal was forwarded to the group */
    int ran;                  /* the command was started (exec succeeded) */
    int64_t lease_end_ns;     /* fixed lease: when validity runs out */
    int64_t kill_at_ns;       /* SIGKILL after the grace period; 0 = none */
} supervisor;

/* from_ns plus ms on the monotonic clock; a time beyond its range (--grace
 * or --lease of centuries) is INT64_MAX, never a sum that wrapped into the
 * past. */
static int64_t ns_after_ms(int64_t from_ns, int64_t ms)
{
    return ms < (INT64_MAX - from_ns) / 1000000 ? from_ns + ms * 1000000 : INT64_MAX;
}

/* Now plus ms, as ns_after_ms. */
static int64_t after_ms(int64_t ms)
{
    return ns_after_ms(cli_now_ns(), ms);
}

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
    case CLI_LOST_TERM:
        cli_error(s->o->name,
                  "%s lost (%s); sending SIGTERM to process group %ld, SIGKILL in %lld ms",
                  s->what, why, (long)s->child, (long long)s->o->grace_ms);
        cli_pgroup_signal(&s->pg, SIGTERM);
        s->kill_at_ns = after_ms(s->o->grace_ms);
        break;
    case CLI_LOST_KILL:
        cli_error(s->o->name, "%s lost (%s); sending SIGKILL to process group %ld", s->what,
                  why, (long)s->child);
        cli_pgroup_signal(&s->pg, SIGKILL);
        break;
    case CLI_LOST_IGNORE:
        cli_warn(s->o->name, "%s lost (%s); the command keeps running (--on-lost ignore)",
                 s->what, why);
        break;
    }
}

/* Waits for the group leader, forwarding signals to the group and acting
 * on a loss. Returns the leader's wait status. */
static int supervise(supervisor *s)
{
    /* Stops matter only on a terminal (see pgroup.c). */
    int flags = WNOHANG | (s->pg.tty >= 0 ? WUNTRACED : 0);

    for (;;) {
        struct pollfd pfd = {wake_pipe[0], POLLIN, 0};
        unsigned char buf[64];
        int64_t now = cli_now_ns(), t1, t2, timeout;
        int status, reason;
        pid_t r;
        ssize_t n, i;

        r = waitpid(s->child, &status, flags);
        if (r == s->child && WIFSTOPPED(status)) {
            cli_pgroup_stopped(&s->pg, WSTOPSIG(status));
            continue;
        }
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
            cli_pgroup_signal(&s->pg, SIGKILL);
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

            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
                cli_pgroup_signal(&s->pg, sig);
                s->forwarded = 1;
            }
        }
    }
}

/* The leader has exited. What it left in its group was signalled with it
 * after a loss or a forwarded signal: it gets the rest of --grace to end
 * (counted from the SIGTERM of a loss, else from now), and then SIGKILL.
 * After a normal end it keeps running, without the lock, and the user is
 * told. */
static void leftovers(supervisor *s)
{
    if (!cli_pgroup_alive(&s->pg))
        return;
    if ((s->lost && s->o->on_lost != CLI_LOST_IGNORE) || s->forwarded) {
        int64_t kill_at = s->kill_at_ns ? s->kill_at_ns : after_ms(s->o->grace_ms);

        while (cli_pgroup_alive(&s->pg) && cli_now_ns() < kill_at)
            poll(NULL, 0, 20);
        if (cli_pgroup_alive(&s->pg))
            cli_pgroup_signal(&s->pg, SIGKILL);
        return;
    }
    cli_warn(s->o->name, "processes the command started are still running, without the %s "
             "(process group %ld)", s->what, (long)s->pg.pgid);
}

/* ---- the command ----------------------------------------------------------- */

/* -v: how long the wait took and which nodes granted the lock. */
static void report_acquired(const cli_globals *g, waiter *w, const cli_exec_opts *o,
                            int64_t waited_ms)
{
    redlock_lock *lock = cli_hold_report_lock(w->hold);
    redlock_member_report r;
    char nodes[2048];
    size_t i, len = 0, granted = 0;

    if (!g->verbose)
        return;
    nodes[0] = '\0';
    for (i = 0; i < w->n; i++) {
        const char *node = redlock_client_node_name(w->client, i);
        int n;

        if (redlock_lock_report(lock, i, &r) != REDLOCK_OK ||
            r.outcome != REDLOCK_MEMBER_GRANTED)
            continue;
        granted++;
        /* With --replica-acks, how many replicas confirmed this grant (the
         * library reports -1 when it asked none or got no answer). */
        if (o->replica_acks > 0 && r.replicas_acked >= 0)
            n = snprintf(nodes + len, sizeof(nodes) - len, "%s%s (%d replica(s) acked)",
                         len ? ", " : "", node ? node : "?", r.replicas_acked);
        else
            n = snprintf(nodes + len, sizeof(nodes) - len, "%s%s", len ? ", " : "",
                         node ? node : "?");
        if (n > 0 && (size_t)n < sizeof(nodes) - len)
            len += (size_t)n;
    }
    cli_info(g, o->name, "acquired after %lld ms on %zu of %zu node(s), quorum %d: %s",
             (long long)waited_ms, granted, w->n, redlock_lock_quorum(lock), nodes);
}

static int acquire_status(int rc, int sig, const cli_exec_opts *o, const char *what,
                          const char *why)
{
    switch (rc) {
    case REDLOCK_EBUSY:
    case REDLOCK_ETIMEOUT:
        cli_error(o->name, "%s", why);
        return o->conflict_exit; /* 75 unless -E */
    case REDLOCK_ENO_QUORUM:
    case REDLOCK_EREPLICAS:
        /* Too few replicas acknowledged: as good as too few nodes. */
        cli_error(o->name, "%s", why);
        return CLI_EX_NOQUORUM;
    case REDLOCK_EAUTH:
    case REDLOCK_ETLS:
        cli_error(o->name, "%s", why);
        return CLI_EX_NOPERM;
    case REDLOCK_ECONFIG:
        cli_error(o->name, "%s", why);
        return CLI_EX_CONFIG;
    case REDLOCK_ECANCELED:
        if (sig) {
            cli_error(o->name, "%s while waiting for the %s; gave up, holding nothing",
                      sig_name(sig), what);
            return 128 + sig;
        }
        cli_error(o->name, "acquire: %s", why);
        return CLI_EX_SOFTWARE;
    case REDLOCK_EINVAL:
        cli_error(o->name, "%s", why);
        return CLI_EX_USAGE;
    default:
        cli_error(o->name, "acquire: %s", why);
        return CLI_EX_SOFTWARE;
    }
}

/* Runs the command while the lock is held; returns the exit status. */
static int run_command(supervisor *s, const cli_exec_opts *o, cli_hold *hold)
{
    int64_t validity_ms = 0, asked_ns = cli_now_ns();
    child_env env;
    int status, exec_errno, rc;

    /* The validity left is counted from before it was asked for, not from
     * after the spawn: the kill must never come later than the lock's end. */
    if (cli_hold_remaining_ttl(hold, &validity_ms) != REDLOCK_OK)
        validity_ms = 0;
    if ((rc = child_env_build(&env, o, hold, validity_ms)) != 0)
        return rc;
    fflush(NULL);
    s->child = cli_pgroup_spawn(&s->pg, o->cmd, env.envp, o->grace_ms, child_setup, &exec_errno);
    child_env_free(&env);
    if (o->lease_ms > 0)
        s->lease_end_ns = ns_after_ms(asked_ns, validity_ms);
    if (s->child < 0) {
        cli_error("fork", "%s", strerror(errno));
        return CLI_EX_SOFTWARE;
    }
    if (exec_errno) {
        waitpid(s->child, &status, 0);
        cli_error(o->cmd[0], "%s", strerror(exec_errno));
        return exit_status_of(status);
    }
    s->ran = 1;
    status = supervise(s);
    rc = status < 0 ? CLI_EX_SOFTWARE : exit_status_of(status);
    leftovers(s);
    if (s->lost && o->on_lost != CLI_LOST_IGNORE)
        rc = CLI_EX_LOST;
    return rc;
}

/* ran: the command was started (its status, whatever it is, is in rc). */
static int release(const cli_exec_opts *o, cli_globals *g, cli_hold *hold, int lost, int ran,
                   int rc)
{
    int unlock_rc = cli_hold_release(hold);

    if (unlock_rc == REDLOCK_ELOST) {
        /* A loss the loop had not yet seen (the child ended first) still
         * means the command may have run without the lock: that outranks
         * its own status, even one that looks like ours (70). */
        if (!lost) {
            cli_error(o->name, "%s", redlock_last_error());
            if (o->on_lost != CLI_LOST_IGNORE && ran)
                rc = CLI_EX_LOST;
        }
    } else if (unlock_rc != REDLOCK_OK) {
        /* The keys expire with their lease; say so rather than fail CMD's
         * own status. */
        cli_warn(o->name, "release: %s (the lease expires on its own)", redlock_last_error());
    } else {
        cli_info(g, o->name, "released");
    }
    return rc;
}

int cli_cmd_exec(cli_globals *g, int argc, char **argv)
{
    cli_exec_opts o;
    supervisor s;
    sig_thread sigs;
    waiter w;
    redlock_client *client = NULL;
    cli_hold hold;
    char why[512], command[1024];
    int64_t t0, waited_ms;
    int rc, sig;

    if ((rc = cli_parse_exec(g, argc, argv, &o)) != 0)
        return rc < 0 ? 0 : rc;
    if ((rc = cli_exec_defaults(g, &o)) != 0)
        return rc;
    g->unavailable_timeout_ms = o.unavailable_ms;
    g->replica_acks = o.replica_acks;
    g->replica_timeout_ms = o.replica_timeout_ms;
    /* Once read, the secrets leave redlock's own environment too, so the
     * command cannot read them in /proc/PPID/environ either. */
    g->scrub_env = !o.keep_secret_env;
    memset(&s, 0, sizeof(s));
    memset(&hold, 0, sizeof(hold));
    s.o = &o;
    s.pg.watcher_fd = s.pg.tty = -1;
    /* The pipe exists before the client starts its watchdog thread, so
     * that thread's on_lost callback sees it fully made; the signals are
     * blocked before it too, so that thread never takes one. */
    if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        cli_error("exec", "pipe: %s", strerror(errno));
        return CLI_EX_SOFTWARE;
    }
    if (sig_start(&sigs) != 0) {
        cli_error("exec", "signal setup: %s", strerror(errno));
        return CLI_EX_SOFTWARE;
    }
    if ((rc = cli_client_new(g, &client)) != 0)
        goto out;
    /* Recorded wherever one holder is (the plain lock, the write hold):
     * `redlock status` shows who runs what under it. */
    cli_exec_command_line(&o, command, sizeof(command));
    if ((rc = cli_hold_new(g, client, &o, command, &hold)) != 0)
        goto out;
    cli_hold_set_on_lost(&hold, on_lost, &s.lost_reason);
    s.what = hold.what;

    memset(&w, 0, sizeof(w));
    w.client = client;
    w.hold = &hold;
    w.n = cli_hold_members(&hold);
    if (w.n > sizeof(w.failing))
        w.n = sizeof(w.failing);
    sig_set_client(&sigs, client);
    cli_progress_start(&w.prog, hold.sem ? "semaphore" : "lock", o.name,
                       cli_hold_members(&hold));
    t0 = cli_now_ns();
    rc = acquire(&w, &o, why, sizeof(why));
    waited_ms = (cli_now_ns() - t0) / 1000000;
    cli_progress_stop(&w.prog);
    sig = sig_command_starts(&sigs);
    if (rc != REDLOCK_OK) {
        rc = acquire_status(rc, sig, &o, hold.what, why);
        goto out;
    }
    if (sig) {
        /* The signal came as the lock was granted: do not start. */
        cli_error(o.name, "%s before the command started; releasing the %s", sig_name(sig),
                  hold.what);
        rc = release(&o, g, &hold, 0, 0, 128 + sig);
        goto out;
    }
    report_acquired(g, &w, &o, waited_ms);
    /* From here on the lock is released on every way out. */
    rc = run_command(&s, &o, &hold);
    cli_pgroup_finish(&s.pg);
    rc = release(&o, g, &hold, s.lost, s.ran, rc);
out:
    sig_stop(&sigs);
    cli_hold_free(&hold);
    /* Frees the client, which first delivers what it still owes the
     * nodes (an abort or release that did not get its answer in time). */
    redlock_client_free(client);
    return rc;
}
