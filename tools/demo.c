/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock demo: mutual exclusion shown, then checked. Several `redlock
 * exec` workers (this same program) compete for one lock on the local rig;
 * inside the critical section each records its CLOCK_MONOTONIC start and
 * end in a shared log and increments a shared counter file with a slow
 * read-modify-write. Partway through, a minority of the nodes is frozen
 * with SIGSTOP and later thawed with SIGCONT. The verdict checks every
 * pair of sections for overlap and the counter for lost updates; the exit
 * status is 0 only if both hold.
 *
 * With --sentinel the rig is G Sentinel-managed groups (a master and a
 * replica each), the workers pass --replica-acks 1, and instead of the
 * freeze group 1's master is SIGKILLed through the rig a third of the way
 * in. The demo waits for the sentinels' failover (rig wait-failover, in
 * a child, so workers keep coming), restarts the killed node so that the
 * sentinels make it the new master's replica (without a replica, no grant
 * on group 1 could be acknowledged), and reports the time from the kill
 * to the failover and to the first acquire after it. It runs only on a
 * rig it starts itself: it kills a master, which no one else's rig should
 * suffer.
 *
 * CLOCK_MONOTONIC is one clock for every process on the machine, so
 * intervals recorded by different workers compare directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

enum { D_WORKERS = 1, D_SECONDS, D_BASE_PORT, D_NODES_COUNT, D_SENTINEL, D_GROUPS };


static volatile sig_atomic_t interrupted;

static int append_line(const char *path, const char *line);

static void on_interrupt(int sig)
{
    interrupted = sig;
}

double demo_secs(const demo *d, int64_t ns)
{
    return (double)(ns - d->t0) / 1e9;
}

/* ---- workers ------------------------------------------------------------------ */

static int spawn_worker(demo *d, int idx)
{
    const char *self = cli_self_exe();
    char spawn[32], widx[16], hold[16], lease[16];
    const char *argv[40];
    size_t n = 0;
    pid_t pid;

    d->w[idx].spawn_ns = cli_now_ns();
    snprintf(spawn, sizeof(spawn), "%lld", (long long)d->w[idx].spawn_ns);
    snprintf(widx, sizeof(widx), "%d", idx + 1);
    snprintf(hold, sizeof(hold), "%d", 20 + rand() % 60);
    /* --sentinel: a hold whose release the kill swallowed reaches the
     * promoted replica with its lease, which the others then wait out. */
    snprintf(lease, sizeof(lease), "%d", d->sentinel ? 3000 : 10000);
    argv[n++] = self;
    argv[n++] = "--nodes";
    argv[n++] = d->uris;
    /* The demo's own rig, whatever a configuration file says (a fixed
     * lease, a quorum, TLS, a wait). */
    argv[n++] = "--config";
    argv[n++] = "/dev/null";
    /* A short watchdog lease: keys a frozen node applies late (after the
     * thaw) expire within seconds instead of the default 30. */
    argv[n++] = "--watchdog-lease";
    argv[n++] = lease;
    if (d->g->user) {
        argv[n++] = "--user";
        argv[n++] = d->g->user;
    }
    argv[n++] = "exec";
    argv[n++] = d->lock_name;
    argv[n++] = "--wait";
    /* A group without a master for a few seconds (one group: no quorum)
     * is waited out rather than given up on. */
    argv[n++] = d->sentinel ? "20000" : "5000";
    if (d->sentinel) {
        argv[n++] = "--unavailable-timeout";
        argv[n++] = "20s";
        argv[n++] = "--replica-acks";
        argv[n++] = "1";
    }
    argv[n++] = "--";
    argv[n++] = self;
    argv[n++] = "__demo-cs";
    argv[n++] = d->tmpdir;
    argv[n++] = widx;
    argv[n++] = spawn;
    argv[n++] = hold;
    argv[n] = NULL;
    pid = fork();
    if (pid == 0) {
        int out = open("/dev/null", O_WRONLY);
        int err = open(d->err_path, O_WRONLY | O_APPEND | O_CREAT, 0600);

        if (out >= 0)
            dup2(out, STDOUT_FILENO);
        if (err >= 0)
            dup2(err, STDERR_FILENO);
        execv(self, (char *const *)argv);
        _exit(127);
    }
    if (pid < 0) {
        cli_error("demo", "fork: %s", strerror(errno));
        return -1;
    }
    d->w[idx].pid = pid;
    return 0;
}

static void reap_workers(demo *d, int block)
{
    int i, status;

    for (i = 0; i < d->workers; i++) {
        pid_t r;

        if (!d->w[i].pid)
            continue;
        r = waitpid(d->w[i].pid, &status, block ? 0 : WNOHANG);
        if (r != d->w[i].pid)
            continue;
        d->w[i].pid = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (WIFEXITED(status) && WEXITSTATUS(status) == CLI_EX_TEMPFAIL)
            d->gave_up++;
        else if (WIFEXITED(status) && WEXITSTATUS(status) == CLI_EX_NOQUORUM)
            d->no_quorum++;
        else if (WIFEXITED(status) && WEXITSTATUS(status) == CLI_EX_LOST)
            d->lost++;
        else
            d->failed++;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != CLI_EX_TEMPFAIL) {
            char line[96];

            /* Next to the worker's own messages: which one ended how. */
            snprintf(line, sizeof(line), "redlock demo: worker %d %s %d\n", i + 1,
                     WIFEXITED(status) ? "exited with status" : "was killed by signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            append_line(d->err_path, line);
        }
    }
}

static int busy_workers(const demo *d)
{
    int i, n = 0;

    for (i = 0; i < d->workers; i++)
        n += d->w[i].pid != 0;
    return n;
}

/* ---- the log -------------------------------------------------------------------- */

static void print_section(demo *d, const section *s)
{
    char nodes[DEMO_MAX_NODES + 1];
    int i, j, frozen;

    for (i = 0; i < d->nodes && i < DEMO_MAX_NODES; i++) {
        frozen = 0;
        for (j = 0; j < d->n_frozen; j++)
            frozen |= d->frozen_node[j] == i + 1 && d->freeze_ns && s->start_ns >= d->freeze_ns &&
                      (!d->thaw_ns || s->start_ns < d->thaw_ns);
        /* Group 1 from its master's kill until the sentinels promote
         * the replica. */
        frozen |= d->sentinel && i == 0 && d->kill_ns && s->start_ns >= d->kill_ns &&
                  (!d->failover_ns || s->start_ns < d->failover_ns);
        nodes[i] = frozen ? '-' : '#';
    }
    nodes[i] = '\0';
    printf("%7.3f  worker %-2d  waited %5lld ms  held %4lld ms  %s %s\n", demo_secs(d, s->start_ns),
           s->worker, (long long)((s->start_ns - s->spawn_ns) / NS_PER_MS),
           (long long)((s->end_ns - s->start_ns) / NS_PER_MS), d->sentinel ? "groups" : "nodes",
           nodes);
}

static void parse_line(demo *d, const char *line)
{
    section s;
    long long a, b, c, e;
    size_t i;

    memset(&s, 0, sizeof(s));
    if (sscanf(line, "S %d %ld %lld", &s.worker, &s.pid, &a) == 3) {
        if (d->n_sections == DEMO_MAX_SECTIONS)
            return;
        s.start_ns = a;
        d->s[d->n_sections++] = s;
        return;
    }
    if (sscanf(line, "E %d %ld %lld %lld %lld %lld", &s.worker, &s.pid, &a, &b, &c, &e) != 6)
        return;
    for (i = d->n_sections; i-- > 0;) {
        section *t = &d->s[i];

        if (t->pid == s.pid && t->start_ns == a && !t->complete) {
            t->end_ns = b;
            t->spawn_ns = c;
            t->validity_ms = e;
            t->complete = 1;
            print_section(d, t);
            if (d->kill_ns && t->start_ns > d->kill_ns) {
                d->after_kill++;
                if (!d->first_after_ns || t->start_ns < d->first_after_ns) {
                    if (!d->first_after_ns)
                        printf("%7.3f  ---- first acquire after the kill: %lld ms after it\n",
                               demo_secs(d, t->start_ns),
                               (long long)((t->start_ns - d->kill_ns) / NS_PER_MS));
                    d->first_after_ns = t->start_ns;
                }
            }
            return;
        }
    }
}

/* Reads what the workers appended since the last call. */
static void read_log(demo *d)
{
    char buf[4096];
    ssize_t n;
    int fd = open(d->log_path, O_RDONLY);

    if (fd < 0)
        return;
    while ((n = pread(fd, buf, sizeof(buf), d->log_offset)) > 0) {
        ssize_t i;

        d->log_offset += n;
        for (i = 0; i < n; i++) {
            if (buf[i] == '\n' || d->partial_len == sizeof(d->partial) - 1) {
                d->partial[d->partial_len] = '\0';
                parse_line(d, d->partial);
                d->partial_len = 0;
            } else {
                d->partial[d->partial_len++] = buf[i];
            }
        }
    }
    close(fd);
    fflush(stdout);
}

/* ---- the critical section (a worker, run by `redlock exec`) --------------- */

static int append_line(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    size_t len = strlen(line);
    int ok;

    if (fd < 0)
        return -1;
    /* One write() per line with O_APPEND: lines from different workers
     * never interleave. */
    ok = write(fd, line, len) == (ssize_t)len;
    close(fd);
    return ok ? 0 : -1;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Increments the counter with a deliberately slow read-modify-write: two
 * workers inside at once would lose an update. */
static int bump_counter(const char *path, int64_t hold_ms)
{
    char buf[32];
    long long v = 0;
    ssize_t n;
    int fd = open(path, O_RDWR | O_CREAT, 0600), len;

    if (fd < 0)
        return -1;
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n > 0) {
        buf[n] = '\0';
        v = strtoll(buf, NULL, 10);
    }
    sleep_ms(hold_ms);
    len = snprintf(buf, sizeof(buf), "%lld\n", v + 1);
    n = pwrite(fd, buf, (size_t)len, 0);
    close(fd);
    return n == len ? 0 : -1;
}

int cli_cmd_demo_cs(int argc, char **argv)
{
    char path[256], counter[256], line[256];
    const char *validity = getenv("REDLOCK_VALIDITY_MS");
    int64_t start, end, spawn_ns, hold_ms;
    long long worker;

    if (argc != 4 || !validity) {
        fprintf(stderr, "redlock: __demo-cs: internal command of 'redlock demo'\n");
        return CLI_EX_USAGE;
    }
    start = cli_now_ns();
    worker = strtoll(argv[1], NULL, 10);
    spawn_ns = strtoll(argv[2], NULL, 10);
    hold_ms = strtoll(argv[3], NULL, 10);
    snprintf(path, sizeof(path), "%s/sections.log", argv[0]);
    snprintf(counter, sizeof(counter), "%s/counter", argv[0]);
    snprintf(line, sizeof(line), "S %lld %ld %lld\n", worker, (long)getpid(), (long long)start);
    if (append_line(path, line) != 0 || bump_counter(counter, hold_ms) != 0) {
        fprintf(stderr, "redlock: __demo-cs: %s: %s\n", argv[0], strerror(errno));
        return CLI_EX_SOFTWARE;
    }
    end = cli_now_ns();
    snprintf(line, sizeof(line), "E %lld %ld %lld %lld %lld %s\n", worker, (long)getpid(),
             (long long)start, (long long)end, (long long)spawn_ns, validity);
    if (append_line(path, line) != 0) {
        fprintf(stderr, "redlock: __demo-cs: %s: %s\n", path, strerror(errno));
        return CLI_EX_SOFTWARE;
    }
    return 0;
}

/* ---- the verdict ---------------------------------------------------------------- */

/* ---- the command ---------------------------------------------------------------- */

static int parse_demo(cli_globals *g, int argc, char **argv, demo *d)
{
    static const cli_opt opts[] = {{"workers", 0, 1, D_WORKERS},
                                   {"seconds", 0, 1, D_SECONDS},
                                   {"base-port", 0, 1, D_BASE_PORT},
                                   {"nodes-count", 0, 1, D_NODES_COUNT},
                                   {"sentinel", 0, 0, D_SENTINEL},
                                   {"groups", 0, 1, D_GROUPS},
                                   {NULL, 0, 0, 0}};
    cli_args a = {argc, argv, 0, "demo", g};
    const char *v;
    int id, count_set = 0, groups = 0;

    d->workers = 6;
    d->seconds = 15;
    d->base_port = 7001;
    d->nodes = 5;
    while ((id = cli_next(&a, opts, &v)) != CLI_ARG_END) {
        switch (id) {
        case CLI_OPT_HELP:
            cli_usage("demo", 0);
            return -1;
        case CLI_ARG_ERROR:
            return CLI_EX_USAGE;
        case D_WORKERS:
            if (cli_parse_int("--workers", v, 2, DEMO_MAX_WORKERS, &d->workers))
                return CLI_EX_USAGE;
            break;
        case D_SECONDS:
            if (cli_parse_int("--seconds", v, 3, 600, &d->seconds))
                return CLI_EX_USAGE;
            break;
        case D_BASE_PORT:
            if (cli_parse_int("--base-port", v, 1, 65535 - DEMO_MAX_NODES, &d->base_port))
                return CLI_EX_USAGE;
            break;
        case D_NODES_COUNT:
            if (cli_parse_int("--nodes-count", v, 3, DEMO_MAX_NODES, &d->nodes))
                return CLI_EX_USAGE;
            count_set = 1;
            break;
        case D_SENTINEL:
            d->sentinel = 1;
            break;
        case D_GROUPS:
            /* scripts/rig's bound on sentinel groups. */
            if (cli_parse_int("--groups", v, 1, 16, &groups))
                return CLI_EX_USAGE;
            break;
        default:
            cli_error("demo", "unexpected argument '%s'", v ? v : "--");
            return CLI_EX_USAGE;
        }
    }
    if (g->nodes_buf) {
        cli_error("demo", "--nodes does not apply: the demo runs on the local rig "
                          "(choose it with --base-port)");
        return CLI_EX_USAGE;
    }
    if (groups && !d->sentinel) {
        cli_error("--groups", "applies to 'demo --sentinel' only");
        return CLI_EX_USAGE;
    }
    if (d->sentinel) {
        if (count_set) {
            cli_error("--nodes-count", "does not apply to 'demo --sentinel' (use --groups G)");
            return CLI_EX_USAGE;
        }
        d->nodes = groups ? groups : 3;
        /* 2G data nodes, then 3 sentinels. */
        if (d->base_port > 65535 - (2 * d->nodes + 2)) {
            cli_error("--base-port", "%d leaves no room for %d ports", d->base_port,
                      2 * d->nodes + 3);
            return CLI_EX_USAGE;
        }
    }
    return 0;
}

static int setup_files(demo *d)
{
    size_t i, len = 0;
    int fd;

    snprintf(d->tmpdir, sizeof(d->tmpdir), "%s", "/tmp/redlock-demo-XXXXXX");
    if (!mkdtemp(d->tmpdir)) {
        cli_error("demo", "mkdtemp: %s", strerror(errno));
        return -1;
    }
    snprintf(d->log_path, sizeof(d->log_path), "%s/sections.log", d->tmpdir);
    snprintf(d->counter_path, sizeof(d->counter_path), "%s/counter", d->tmpdir);
    snprintf(d->err_path, sizeof(d->err_path), "%s/workers.err", d->tmpdir);
    if ((fd = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) >= 0)
        close(fd);
    snprintf(d->failover_path, sizeof(d->failover_path), "%s/failover", d->tmpdir);
    for (i = 0; i < (size_t)d->nodes && !d->sentinel; i++)
        len += (size_t)snprintf(d->uris + len, sizeof(d->uris) - len, "%sredis://127.0.0.1:%d",
                                i ? "," : "", d->base_port + (int)i);
    snprintf(d->lock_name, sizeof(d->lock_name), "redlock-demo:%ld", (long)getpid());
    return 0;
}

static void remove_files(demo *d)
{
    unlink(d->log_path);
    unlink(d->counter_path);
    unlink(d->err_path);
    unlink(d->failover_path);
    rmdir(d->tmpdir);
}

/* Spawns workers until the end of the run, freezing and thawing on the
 * way (--sentinel: killing group 1's master), then lets the workers in
 * flight finish (bounded by their --wait). */
static void run_workers(demo *d)
{
    int64_t end = d->t0 + (int64_t)d->seconds * 1000 * NS_PER_MS;
    int64_t freeze_at = d->t0 + (int64_t)d->seconds * 1000 * NS_PER_MS / 3;
    int64_t thaw_at = d->t0 + (int64_t)d->seconds * 2000 * NS_PER_MS / 3;
    int64_t drain_end = end + 8000 * NS_PER_MS, now;
    int i, term_sent = 0;

    if (d->sentinel)
        printf("   time  worker     waited        held       groups (# up, - group 1 failing "
               "over)\n");
    else
        printf("   time  worker     waited        held       nodes (# up, - frozen)\n");
    while ((now = cli_now_ns()) < drain_end) {
        if (interrupted)
            break;
        if (d->sentinel) {
            if (now >= freeze_at && !d->kill_ns)
                demo_kill_master(d);
            demo_check_failover(d, 0);
        } else {
            if (now >= freeze_at && !d->freeze_ns)
                demo_freeze(d);
            if (now >= thaw_at && d->freeze_ns && !d->thaw_ns)
                demo_thaw(d);
        }
        reap_workers(d, 0);
        if (now < end) {
            for (i = 0; i < d->workers; i++)
                if (!d->w[i].pid && spawn_worker(d, i) != 0)
                    break;
        } else if (busy_workers(d) == 0) {
            break;
        }
        read_log(d);
        sleep_ms(20);
    }
    if (d->freeze_ns && !d->thaw_ns)
        demo_thaw(d);
    /* A failover still awaited: its child ends now (the verdict says the
     * failover was not seen). */
    if (d->failover_pid > 0 && !interrupted)
        demo_check_failover(d, 0);
    cli_rig_failover_stop(d->failover_pid, d->failover_path);
    d->failover_pid = 0;
    /* Interrupted or overrun: SIGTERM makes each exec forward it and
     * release its lock; SIGKILL two seconds later as a last resort. */
    for (i = 0; i < d->workers; i++) {
        if (d->w[i].pid) {
            kill(d->w[i].pid, SIGTERM);
            term_sent = 1;
        }
    }
    if (term_sent) {
        int64_t kill_at = cli_now_ns() + 2000 * NS_PER_MS;

        while (busy_workers(d) && cli_now_ns() < kill_at) {
            reap_workers(d, 0);
            sleep_ms(20);
        }
        for (i = 0; i < d->workers; i++)
            if (d->w[i].pid)
                kill(d->w[i].pid, SIGKILL);
        reap_workers(d, 1);
    }
    read_log(d);
}

int cli_cmd_demo(cli_globals *g, int argc, char **argv)
{
    demo d;
    struct sigaction sa, old_int, old_term, old_hup;
    int rc;

    memset(&d, 0, sizeof(d));
    d.g = g;
    if ((rc = parse_demo(g, argc, argv, &d)) != 0)
        return rc < 0 ? 0 : rc;
    if (!cli_self_exe()) {
        cli_error("demo", "cannot find this program in /proc/self/exe");
        return CLI_EX_SOFTWARE;
    }
    if (!(d.rig = cli_find_rig()))
        return CLI_EX_SOFTWARE;
    if (!(d.s = calloc(DEMO_MAX_SECTIONS, sizeof(*d.s)))) {
        cli_error("demo", "out of memory");
        return CLI_EX_SOFTWARE;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    if ((rc = demo_ensure_rig(&d)) != 0)
        goto out;
    if (setup_files(&d) != 0) {
        rc = CLI_EX_SOFTWARE;
        goto out;
    }
    srand((unsigned)getpid());
    if (d.sentinel)
        printf("%d workers compete for lock '%s' on %d Sentinel group(s) (quorum %d) for %d s,\n"
               "with --replica-acks 1 (a grant counts once a replica has it); each appends\n"
               "its CLOCK_MONOTONIC start/end to %s.\n\n",
               d.workers, d.lock_name, d.nodes, d.nodes / 2 + 1, d.seconds, d.log_path);
    else
        printf("%d workers compete for lock '%s' on %d nodes (quorum %d) for %d s;\n"
               "each appends its CLOCK_MONOTONIC start/end to %s.\n\n",
               d.workers, d.lock_name, d.nodes, d.nodes / 2 + 1, d.seconds, d.log_path);
    fflush(stdout);
    d.t0 = cli_now_ns();
    run_workers(&d);
    if (interrupted) {
        cli_error("demo", "interrupted by signal %d", (int)interrupted);
        rc = 128 + (int)interrupted;
    } else {
        rc = demo_verdict(&d);
    }
    remove_files(&d);
out:
    demo_thaw_all(&d);
    if (d.started_rig) {
        printf("Stopping the rig the demo started.\n");
        fflush(stdout);
        if (demo_rig_verb(&d, "stop", 0) != 0)
            cli_warn("demo", "stopping the rig failed");
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    free(d.s);
    return rc;
}
