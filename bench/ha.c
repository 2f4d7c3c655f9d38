/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "ha": RedLock over 3 Sentinel-managed groups (a master and one
 * replica each, 3 sentinels; quorum 2 of 3), with replica acknowledgement.
 *
 * The scenario starts a rig of its own (`scripts/rig start --sentinel 3` on
 * 9 free ports between 20000 and 60000, in <--rig-dir>-ha, or in a fresh
 * temporary directory without --rig-dir), since bench/run's rig is 5 plain
 * nodes; the --nodes given are not used (and may be left out). That rig is
 * stopped on every way out: normal exit, bench_die() (atexit), and
 * SIGINT/SIGTERM/SIGHUP (the handler runs `rig stop` itself).
 *
 * 1. acks: one client over the 3 sentinel members, acquire + release
 *    cycles with replica_acks 0 and 1 in alternating chunks of the same
 *    run. Measured: acquire, release and cycle latency of each; the ratio
 *    acks1 / acks0 (there is no target: the issue asks for the ratio); the
 *    replicas_acked the member reports showed.
 * 2. timeline: --workers W (2) workers, each with its own client and lock
 *    name over the 3 groups, replica_acks 1, acquire (waiting up to
 *    --wait-ms, 3000) + release every --pace-ms (20). At --kill-at (3 s)
 *    group 1's master is SIGKILLed (`rig kill-master 1`); once every
 *    sentinel names a new master (`rig wait-failover`) the killed node is
 *    restarted (`rig restart`). It rejoins as the new master's replica only
 *    once a sentinel demotes it and a full sync ran (~15 s on the rig's
 *    settings), and until then the new master has no replica to
 *    acknowledge group 1's grants. A probe worker locks group 1 alone
 *    (N = 1, replica_acks 1, one attempt every 50 ms) to show how long the
 *    group by itself could not grant; its first grant after the restart
 *    marks the rejoin. The run lasts --seconds (15) and until 2 s after
 *    the rejoin, at most --max-seconds (40). Measured: acquire latency
 *    before / during (kill .. failover) / after, from the kill to the first
 *    successful acquire, failed acquires, and whether any failed for lack
 *    of a quorum although groups 2 and 3 had granted (must be 0: they keep
 *    the lock available on their own).
 *
 * Data (--data): ha_acks0_acquire.cdf, ha_acks1_acquire.cdf,
 * ha_timeline.dat ("t_s acquire_ms release_ms ok worker g1": g1 is the
 * redlock_member_outcome of group 1 in the acquire's report),
 * ha_probe.dat ("t_s acquire_ms ok result member_error": error names) and ha_events.dat ("t_s label").
 *
 * Options: --cycles C per mode (2000, scaled), --chunk K (100),
 * --replica-timeout-ms T (0: the node timeout), --workers W (2),
 * --pace-ms P (20), --wait-ms W (3000), --kill-at S (3), --seconds S (15,
 * scaled, at least 12), --max-seconds S (40), --parts P (acks,timeline).
 * Needs --rig PATH. Takes 40-50 s in all whatever --scale says: the rig's
 * start, the failover and the rejoin set the pace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

const char *bench_name = "ha";

#define GROUPS 3
#define SPAN (2 * GROUPS + 3) /* 6 data nodes, 3 sentinels */
#define LEASE_MS 10000
#define NODE_TIMEOUT_MS 50    /* the library's default for this lease */
#define PROBE_PACE_MS 50
#define DOWN_AFTER_MS 1000    /* the rig's defaults, reported in params */
#define FAILOVER_TIMEOUT_MS 3000

/* ---- The sentinel rig ---------------------------------------------------- */

static char rig_path[PATH_MAX];
static char rig_dir[PATH_MAX];
static char tmp_dir[PATH_MAX];  /* ours to remove, without --rig-dir */
static int base_port;
/* Set before `rig start` runs, so that a signal during the start stops
 * whatever it had started; cleared once stopped. */
static volatile sig_atomic_t rig_up;
static char *stop_argv[] = {rig_path, "stop", "--dir", rig_dir, NULL};
static char *rm_argv[] = {"/bin/rm", "-rf", tmp_dir, NULL};

/* Runs argv with stdout (and stderr if quiet) on /dev/null and waits for
 * it; only async-signal-safe calls, as the signal handler uses it too. */
static void run_quietly(char *const *argv, int quiet_stderr)
{
    pid_t pid = fork();
    int status;

    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);

        if (fd >= 0) {
            dup2(fd, 1);
            if (quiet_stderr)
                dup2(fd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
}

static void stop_rig(void)
{
    if (rig_up) {
        run_quietly(stop_argv, 0);
        rig_up = 0;
    }
    if (tmp_dir[0]) {
        run_quietly(rm_argv, 1);
        tmp_dir[0] = '\0';
    }
}

static void on_signal(int sig)
{
    stop_rig();
    _exit(128 + sig);
}

/*
 * Runs `<rig> ARGS... --dir <rig_dir>` with its stdout in out (always
 * NUL-terminated; our own stdout carries only JSON) and its stderr on ours;
 * returns its exit status. Not system(): that ignores SIGINT while it
 * waits, and the child must not inherit the clients' sockets (a restarted
 * redis-server would keep them open).
 */
static int rig_cmd(char *out, size_t outsz, const char *const *args)
{
    char *argv[16];
    size_t n = 0, len = 0;
    int fd[2], status;
    pid_t pid;

    argv[n++] = rig_path;
    while (*args && n < 12)
        argv[n++] = (char *)*args++;
    argv[n++] = "--dir";
    argv[n++] = rig_dir;
    argv[n] = NULL;
    if (pipe(fd) < 0)
        bench_die("pipe: %s", strerror(errno));
    pid = fork();
    if (pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (pid == 0) {
        long max = sysconf(_SC_OPEN_MAX), i;

        dup2(fd[1], 1);
        if (max < 0 || max > 65536)
            max = 65536;
        for (i = 3; i < max; i++)
            close((int)i);
        execv(rig_path, argv);
        _exit(127);
    }
    close(fd[1]);
    for (;;) {
        char buf[512];
        ssize_t r = read(fd[0], buf, sizeof(buf));

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (out && len + 1 < outsz) {
            size_t take = (size_t)r < outsz - 1 - len ? (size_t)r : outsz - 1 - len;

            memcpy(out + len, buf, take);
            len += take;
        }
    }
    if (out && outsz)
        out[len] = '\0';
    close(fd[0]);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            bench_die("waitpid: %s", strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int port_free(int port)
{
    struct sockaddr_in sa;
    int s = socket(AF_INET, SOCK_STREAM, 0), ok;

    if (s < 0)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(s);
    return ok;
}

/* Starts the rig on SPAN consecutive free ports; exits if it cannot. */
static void start_rig(const bench_args *a)
{
    struct sigaction sa;
    int attempt;

    if (!realpath(a->rig, rig_path))
        bench_die("--rig %s: %s", a->rig, strerror(errno));
    if (a->rig_dir) {
        if ((size_t)snprintf(rig_dir, sizeof(rig_dir), "%s-ha", a->rig_dir) >= sizeof(rig_dir))
            bench_die("--rig-dir too long");
    } else {
        if ((size_t)snprintf(tmp_dir, sizeof(tmp_dir) - 8, "%s/redlock-bench-ha.XXXXXX",
                             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") >= sizeof(tmp_dir) - 8)
            bench_die("TMPDIR too long");
        if (!mkdtemp(tmp_dir))
            bench_die("mkdtemp: %s", strerror(errno));
        if ((size_t)snprintf(rig_dir, sizeof(rig_dir), "%s/rig", tmp_dir) >= sizeof(rig_dir))
            bench_die("TMPDIR too long");
    }
    atexit(stop_rig);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    for (attempt = 0; attempt < 20; attempt++) {
        char port[16], out[1024];
        const char *args[] = {"start", "--sentinel", "3", "--base-port", port, NULL};
        int p, ok = 1;

        base_port = 20000 + (int)((unsigned)rand() % (40000 - SPAN));
        for (p = base_port; p < base_port + SPAN && ok; p++)
            ok = port_free(p);
        if (!ok)
            continue;
        snprintf(port, sizeof(port), "%d", base_port);
        rig_up = 1;
        if (rig_cmd(out, sizeof(out), args) == 0) {
            bench_log("%s", strtok(out, "\n") ? out : "sentinel rig started");
            return;
        }
        (void)rig_cmd(NULL, 0, (const char *const[]){"stop", NULL});
        rig_up = 0;
    }
    bench_die("could not start a sentinel rig on free ports");
}

/* The group URIs from `rig env`: RIG_URIS, split before each scheme (a
 * sentinel URI has commas of its own). */
static void rig_uris(char **uris)
{
    char out[8192], *line, *p, *save = NULL;
    size_t n = 0;

    if (rig_cmd(out, sizeof(out), (const char *const[]){"env", NULL}) != 0)
        bench_die("rig env failed");
    for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, "RIG_URIS=", 9) == 0)
            break;
    if (!line)
        bench_die("rig env printed no RIG_URIS");
    p = line + 9;
    while (p && *p) {
        char *next = strstr(p + 1, ",redis-sentinel://");

        if (n == GROUPS)
            bench_die("rig env: more than %d groups in RIG_URIS", GROUPS);
        if (next)
            *next++ = '\0';
        uris[n] = strdup(p);
        if (!uris[n++])
            bench_die("out of memory");
        p = next;
    }
    if (n != GROUPS)
        bench_die("rig env: %zu group URIs, %d expected", n, GROUPS);
}

static redlock_client *ha_client(char **uris, size_t n)
{
    redlock_client *c = NULL;

    bench_check(redlock_client_new(&c, (const char *const *)uris, n, NULL), "client_new");
    return c;
}

static redlock_lock *ha_lock(redlock_client *c, const char *what, int acks, int replica_timeout_ms)
{
    redlock_lock_options lo;
    redlock_lock *l;
    char name[96];

    memset(&lo, 0, sizeof(lo));
    lo.replica_acks = acks;
    lo.replica_timeout_ms = replica_timeout_ms;
    snprintf(name, sizeof(name), "bench:ha:%s:%d", what, (int)getpid());
    bench_check(redlock_lock_new(c, name, &lo, &l), "lock_new");
    return l;
}

/* ---- 1. replica_acks 0 against 1 ----------------------------------------- */

/* replicas_acked of the granted members, as a histogram: -1, 0, 1, 2+. */
static void tally_acked(redlock_lock *l, size_t members, long *hist, long *granted)
{
    size_t i;

    for (i = 0; i < members; i++) {
        redlock_member_report r;

        if (redlock_lock_report(l, i, &r) != REDLOCK_OK ||
            r.outcome != REDLOCK_MEMBER_GRANTED)
            continue;
        (*granted)++;
        hist[r.replicas_acked < 0 ? 0 : r.replicas_acked > 1 ? 3 : r.replicas_acked + 1]++;
    }
}

static void acks_part(const bench_args *a, char **uris, long cycles, long chunk,
                      int replica_timeout_ms)
{
    static const char *hist_keys[4] = {"none(-1)", "0", "1", "2+"};
    redlock_client *c = ha_client(uris, GROUPS);
    redlock_lock *l[2];
    bench_samples acq[2] = {{0}}, rel[2] = {{0}}, cyc[2] = {{0}};
    bench_stats s_acq[2], s_rel[2], s_cyc[2];
    bench_meter meter[2];
    long done[2] = {0, 0}, failed[2] = {0, 0}, hist[2][4] = {{0}}, granted[2] = {0, 0};
    int m, i, k;
    bench_json j;

    memset(meter, 0, sizeof(meter));
    for (m = 0; m < 2; m++) {
        l[m] = ha_lock(c, m ? "acks1" : "acks0", m, replica_timeout_ms);
        for (i = 0; i < 50; i++) {
            bench_check(redlock_try_lock_for(l[m], 0, LEASE_MS), "warm-up acquire");
            bench_check(redlock_unlock(l[m]), "warm-up release");
        }
    }
    while (done[0] < cycles || done[1] < cycles) {
        for (m = 0; m < 2; m++) {
            bench_meter_start(&meter[m]);
            for (k = 0; k < chunk && done[m] < cycles; k++, done[m]++) {
                int64_t t0 = bench_now_ns(), t1, t2;
                int rc = redlock_try_lock_for(l[m], 0, LEASE_MS), urc;

                t1 = bench_now_ns();
                if (rc != REDLOCK_OK) {
                    failed[m]++;
                    bench_log("replica_acks %d: acquire: %s: %s", m, redlock_err_name(rc),
                              redlock_last_error());
                    continue;
                }
                tally_acked(l[m], GROUPS, hist[m], &granted[m]);
                urc = redlock_unlock(l[m]);
                t2 = bench_now_ns();
                if (urc != REDLOCK_OK) {
                    failed[m]++;
                    bench_log("replica_acks %d: release: %s", m, redlock_err_name(urc));
                    continue;
                }
                bench_samples_add(&acq[m], t1 - t0);
                bench_samples_add(&rel[m], t2 - t1);
                bench_samples_add(&cyc[m], t2 - t0);
            }
            bench_meter_stop(&meter[m]);
        }
    }
    for (m = 0; m < 2; m++)
        redlock_lock_free(l[m]);
    redlock_client_free(c);

    for (m = 0; m < 2; m++) {
        s_acq[m] = bench_stats_of(&acq[m]);
        s_rel[m] = bench_stats_of(&rel[m]);
        s_cyc[m] = bench_stats_of(&cyc[m]);
        bench_write_cdf(a, m ? "ha_acks1_acquire" : "ha_acks0_acquire", &acq[m]);
    }
    bench_json_begin(&j, "ha_replica_acks");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", GROUPS);
    bench_json_str(&j, "topology", "3 Sentinel groups (master + 1 replica), 3 sentinels");
    bench_json_int(&j, "quorum", GROUPS / 2 + 1);
    bench_json_int(&j, "lease_ms", LEASE_MS);
    bench_json_int(&j, "replica_timeout_ms",
                   replica_timeout_ms ? replica_timeout_ms : NODE_TIMEOUT_MS);
    bench_json_int(&j, "cycles_per_mode", cycles);
    bench_json_int(&j, "chunk", chunk);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "acks1_cycles", (long long)cyc[1].n);
    bench_json_int(&j, "acks0_cycles", (long long)cyc[0].n);
    bench_json_int(&j, "acks1_failed", failed[1]);
    bench_json_int(&j, "acks0_failed", failed[0]);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &s_acq[1]);
    bench_json_stats(&j, "release_us", &s_rel[1]);
    bench_json_stats(&j, "cycle_us", &s_cyc[1]);
    bench_json_num(&j, "ops_per_s", (double)cyc[1].n / ((double)meter[1].wall_ns / 1e9));
    bench_json_cpu(&j, meter[1].user_s, meter[1].sys_s);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "replica_acks 0, same client and groups, alternating chunks");
    bench_json_stats(&j, "latency_us", &s_acq[0]);
    bench_json_stats(&j, "release_us", &s_rel[0]);
    bench_json_stats(&j, "cycle_us", &s_cyc[0]);
    bench_json_num(&j, "ops_per_s", (double)cyc[0].n / ((double)meter[0].wall_ns / 1e9));
    bench_json_cpu(&j, meter[0].user_s, meter[0].sys_s);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "acquire_p50_acks1_over_acks0", s_acq[1].p50 / s_acq[0].p50);
    bench_json_num(&j, "acquire_p99_acks1_over_acks0", s_acq[1].p99 / s_acq[0].p99);
    bench_json_num(&j, "cycle_p50_acks1_over_acks0", s_cyc[1].p50 / s_cyc[0].p50);
    bench_json_num(&j, "release_p50_acks1_over_acks0", s_rel[1].p50 / s_rel[0].p50);
    bench_json_end_obj(&j);
    for (m = 0; m < 2; m++) {
        bench_json_obj(&j, m ? "replicas_acked_acks1" : "replicas_acked_acks0");
        bench_json_int(&j, "granted_members", granted[m]);
        for (i = 0; i < 4; i++)
            bench_json_int(&j, hist_keys[i], hist[m][i]);
        bench_json_end_obj(&j);
    }
    bench_json_print(&j);
    for (m = 0; m < 2; m++) {
        bench_samples_free(&acq[m]);
        bench_samples_free(&rel[m]);
        bench_samples_free(&cyc[m]);
    }
}

/* ---- 2. The failover timeline --------------------------------------------- */

typedef struct rec {
    int64_t t0, t1;             /* acquire start and return, since start */
    int64_t rel_ns;
    int rc;
    signed char g1;             /* group 1's outcome in the report */
    int g1_err;                 /* and its redlock_err */
    signed char others_granted; /* groups 2 and 3 both granted and acked */
} rec;

typedef struct worker {
    redlock_client *c;
    redlock_lock *l;
    int index, probe;
    long pace_ms, wait_ms;
    int64_t start;
    int *stop;
    rec *recs;
    size_t n, cap;
    long oks;                   /* successful acquires so far (atomic) */
    pthread_t tid;
} worker;

static void add_rec(worker *w, const rec *r)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 1024;
        rec *v = realloc(w->recs, cap * sizeof(*v));

        if (!v)
            bench_die("out of memory");
        w->recs = v;
        w->cap = cap;
    }
    w->recs[w->n++] = *r;
}

static void *worker_main(void *arg)
{
    worker *w = arg;

    while (!__atomic_load_n(w->stop, __ATOMIC_SEQ_CST)) {
        int64_t t0 = bench_now_ns(), t1;
        rec r;
        redlock_member_report rep[GROUPS];
        size_t i, members = w->probe ? 1 : GROUPS;

        memset(&r, 0, sizeof(r));
        r.rc = redlock_try_lock_for(w->l, w->probe ? 0 : w->wait_ms, LEASE_MS);
        t1 = bench_now_ns();
        for (i = 0; i < members; i++)
            if (redlock_lock_report(w->l, i, &rep[i]) != REDLOCK_OK)
                rep[i].outcome = REDLOCK_MEMBER_NONE;
        r.g1 = (signed char)rep[0].outcome;
        r.g1_err = rep[0].outcome == REDLOCK_MEMBER_NONE ? REDLOCK_OK : rep[0].err;
        r.others_granted = !w->probe && rep[1].outcome == REDLOCK_MEMBER_GRANTED &&
                           rep[2].outcome == REDLOCK_MEMBER_GRANTED &&
                           rep[1].replicas_acked >= 1 && rep[2].replicas_acked >= 1;
        if (r.rc == REDLOCK_OK) {
            int urc = redlock_unlock(w->l);

            __atomic_add_fetch(&w->oks, 1, __ATOMIC_SEQ_CST);
            r.rel_ns = bench_now_ns() - t1;
            if (urc != REDLOCK_OK)
                bench_log("worker %d: release: %s", w->index, redlock_err_name(urc));
        } else if (!w->probe) {
            bench_log("worker %d at %.3f s: acquire: %s: %s", w->index,
                      (double)(t0 - w->start) / 1e9, redlock_err_name(r.rc),
                      redlock_last_error());
        }
        r.t0 = t0 - w->start;
        r.t1 = t1 - w->start;
        add_rec(w, &r);
        bench_sleep_ns(t0 + w->pace_ms * 1000000LL - bench_now_ns());
    }
    return NULL;
}

/* Runs a rig verb with up to three arguments (NULL ends them early); the
 * number it printed (a port; 0 if none), or -1 if it failed. */
static int rig_port(const char *verb, const char *x, const char *y, const char *z)
{
    char out[1024];
    const char *args[] = {verb, x, y, z, NULL};

    if (rig_cmd(out, sizeof(out), args) != 0)
        return -1;
    return atoi(out);
}

static double ms(int64_t ns)
{
    return (double)ns / 1e6;
}

static void timeline(const bench_args *a, char **uris, int workers, long pace_ms, long wait_ms,
                     double kill_at_s, double seconds, double max_seconds,
                     int replica_timeout_ms)
{
    static const char *win_names[5] = {"before", "during", "after", "after_until_rejoin",
                                       "after_rejoin"};
    worker w[9];
    int n = workers + 1, i, stop = 0, killed_port, new_port = -1, node, rejoined = 0;
    long probe_oks;
    int64_t start, t_kill0, t_kill, t_failover, t_restart0, t_restart, end;
    bench_samples win[5] = {{0}}, all = {0};
    bench_stats st[5], st_all;
    long attempts = 0, ok = 0, failed = 0, failed_nq = 0, failed_other = 0, failed_23 = 0;
    long g1_granted[5] = {0}, win_attempts[5] = {0};
    long p_attempts = 0, p_ok = 0, straddling_ok = 0;
    const rec *first_after_kill = NULL;
    int64_t first_ok_after_kill = -1, p_first_ok_after_kill = -1, p_last_fail = -1;
    int64_t p_first_ok_after_restart = -1, t_rejoin;
    char port_s[16], node_s[16];
    FILE *f;
    bench_json j;

    memset(w, 0, sizeof(w));
    for (i = 0; i < n; i++) {
        char what[32];

        w[i].index = i;
        w[i].probe = i == workers;
        w[i].pace_ms = w[i].probe ? PROBE_PACE_MS : pace_ms;
        w[i].wait_ms = wait_ms;
        w[i].stop = &stop;
        w[i].c = ha_client(uris, w[i].probe ? 1 : GROUPS);
        snprintf(what, sizeof(what), w[i].probe ? "probe" : "w%d", i);
        w[i].l = ha_lock(w[i].c, what, 1, replica_timeout_ms);
        for (int k = 0; k < 20; k++) {
            bench_check(redlock_try_lock_for(w[i].l, 0, LEASE_MS), "warm-up acquire");
            bench_check(redlock_unlock(w[i].l), "warm-up release");
        }
    }
    start = bench_now_ns();
    for (i = 0; i < n; i++) {
        w[i].start = start;
        if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0)
            bench_die("pthread_create failed");
    }
    bench_sleep_ns(start + (int64_t)(kill_at_s * 1e9) - bench_now_ns());
    t_kill0 = bench_now_ns();
    killed_port = rig_port("kill-master", "1", NULL, NULL);
    t_kill = bench_now_ns();
    if (killed_port <= 0)
        bench_die("rig kill-master 1 failed");
    node = killed_port - base_port + 1;
    bench_log("killed group 1's master (node %d, port %d) at %.3f s", node, killed_port,
              ms(t_kill - start) / 1e3);
    snprintf(port_s, sizeof(port_s), "%d", killed_port);
    snprintf(node_s, sizeof(node_s), "%d", node);
    new_port = rig_port("wait-failover", "1", port_s, "30");
    t_failover = bench_now_ns();
    if (new_port > 0)
        bench_log("failover: port %d is group 1's master, %.0f ms after the kill", new_port,
                  ms(t_failover - t_kill));
    else
        bench_log("no failover within 30 s; restarting the old master anyway");
    t_restart0 = bench_now_ns();
    if (rig_port("restart", node_s, NULL, NULL) < 0)
        bench_die("rig restart %d failed", node);
    t_restart = bench_now_ns();
    bench_log("restarted node %d (%.0f ms)", node, ms(t_restart - t_restart0));
    /* Until --seconds, and until group 1 grants with a replica's
     * acknowledgement again (the restarted node has rejoined as the new
     * master's replica) plus 2 s, but not past --max-seconds. */
    probe_oks = __atomic_load_n(&w[workers].oks, __ATOMIC_SEQ_CST);
    end = start + (int64_t)(seconds * 1e9);
    for (;;) {
        int64_t now = bench_now_ns();

        if (now >= start + (int64_t)(max_seconds * 1e9))
            break;
        if (!rejoined && __atomic_load_n(&w[workers].oks, __ATOMIC_SEQ_CST) > probe_oks) {
            rejoined = 1;
            bench_log("group 1 grants with a replica's acknowledgement again, %.1f s after the "
                      "restart", ms(now - t_restart) / 1e3);
            if (end < now + 2000000000LL)
                end = now + 2000000000LL;
        }
        if (rejoined && now >= end)
            break;
        bench_sleep_ns(50000000);
    }
    end = bench_now_ns();
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < n; i++)
        pthread_join(w[i].tid, NULL);
    for (i = 0; i < n; i++) {
        redlock_lock_free(w[i].l);
        redlock_client_free(w[i].c);
    }
    /* Times since start from here on. */
    t_kill0 -= start, t_kill -= start, t_failover -= start;
    t_restart0 -= start, t_restart -= start;

    /* The probe first: its first grant after the restart is the rejoin. */
    f = bench_data_file(a, "ha_probe.dat");
    if (f)
        fprintf(f, "# t_s acquire_ms ok result member_error (group 1 alone, N = 1, "
                   "replica_acks 1)\n");
    for (size_t k = 0; k < w[workers].n; k++) {
        const rec *r = &w[workers].recs[k];

        p_attempts++;
        if (f)
            fprintf(f, "%.4f %.4f %d %s %s\n", (double)r->t0 / 1e9, ms(r->t1 - r->t0),
                    r->rc == REDLOCK_OK, redlock_err_name(r->rc), redlock_err_name(r->g1_err));
        if (r->rc == REDLOCK_OK) {
            p_ok++;
            if (r->t0 >= t_kill && p_first_ok_after_kill < 0)
                p_first_ok_after_kill = r->t1;
            if (r->t0 >= t_restart && p_first_ok_after_restart < 0)
                p_first_ok_after_restart = r->t1;
        } else if (r->t0 >= t_kill) {
            p_last_fail = r->t1;
        }
    }
    if (f)
        fclose(f);
    t_rejoin = p_first_ok_after_restart >= 0 ? p_first_ok_after_restart : INT64_MAX;

    /* Windows: 0 before the kill, 1 kill .. failover, 2 after the failover,
     * split into 3 (until group 1 rejoined) and 4 (after). */
    f = bench_data_file(a, "ha_timeline.dat");
    if (f)
        fprintf(f, "# t_s acquire_ms release_ms ok worker g1_outcome\n");
    for (i = 0; i < workers; i++)
        for (size_t k = 0; k < w[i].n; k++) {
            const rec *r = &w[i].recs[k];
            int wi = r->t0 < t_kill ? 0 : r->t0 < t_failover ? 1 : 2;
            int sub = wi < 2 ? -1 : r->t0 < t_rejoin ? 3 : 4;

            attempts++;
            win_attempts[wi]++;
            if (sub > 0)
                win_attempts[sub]++;
            if (r->g1 == REDLOCK_MEMBER_GRANTED) {
                g1_granted[wi]++;
                if (sub > 0)
                    g1_granted[sub]++;
            }
            if (f)
                fprintf(f, "%.4f %.4f %.4f %d %d %d\n", (double)r->t0 / 1e9,
                        ms(r->t1 - r->t0), ms(r->rel_ns), r->rc == REDLOCK_OK, i, r->g1);
            if (r->t0 >= t_kill && (!first_after_kill || r->t0 < first_after_kill->t0))
                first_after_kill = r;
            if (r->rc != REDLOCK_OK) {
                failed++;
                if (r->rc == REDLOCK_ENO_QUORUM)
                    failed_nq++;
                else
                    failed_other++;
                if (r->others_granted)
                    failed_23++;
                continue;
            }
            ok++;
            bench_samples_add(&all, r->t1 - r->t0);
            bench_samples_add(&win[wi], r->t1 - r->t0);
            if (sub > 0)
                bench_samples_add(&win[sub], r->t1 - r->t0);
            if (r->t0 >= t_kill && (first_ok_after_kill < 0 || r->t1 < first_ok_after_kill))
                first_ok_after_kill = r->t1;
            if (r->t0 < t_kill && r->t1 >= t_kill)
                straddling_ok++;
        }
    if (f)
        fclose(f);
    f = bench_data_file(a, "ha_events.dat");
    if (f) {
        fprintf(f, "%.4f kill\n", (double)t_kill / 1e9);
        if (new_port > 0)
            fprintf(f, "%.4f failover\n", (double)t_failover / 1e9);
        fprintf(f, "%.4f restart\n", (double)t_restart / 1e9);
        if (t_rejoin != INT64_MAX)
            fprintf(f, "%.4f rejoined\n", (double)t_rejoin / 1e9);
        fclose(f);
    }
    st_all = bench_stats_of(&all);
    for (i = 0; i < 5; i++)
        st[i] = bench_stats_of(&win[i]);
    bench_json_begin(&j, "ha_failover_timeline");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", GROUPS);
    bench_json_str(&j, "topology", "3 Sentinel groups (master + 1 replica), 3 sentinels");
    bench_json_int(&j, "quorum", GROUPS / 2 + 1);
    bench_json_int(&j, "workers", workers);
    bench_json_int(&j, "replica_acks", 1);
    bench_json_int(&j, "replica_timeout_ms",
                   replica_timeout_ms ? replica_timeout_ms : NODE_TIMEOUT_MS);
    bench_json_int(&j, "lease_ms", LEASE_MS);
    bench_json_int(&j, "pace_ms", pace_ms);
    bench_json_int(&j, "wait_ms", wait_ms);
    bench_json_int(&j, "down_after_ms", DOWN_AFTER_MS);
    bench_json_int(&j, "failover_timeout_ms", FAILOVER_TIMEOUT_MS);
    bench_json_num(&j, "seconds", (double)(end - start) / 1e9);
    bench_json_num(&j, "max_seconds", max_seconds);
    bench_json_str(&j, "fault", "SIGKILL of group 1's master; restarted after the failover");
    bench_json_end_obj(&j);
    bench_json_obj(&j, "events_s");
    bench_json_num(&j, "kill", (double)t_kill / 1e9);
    bench_json_num(&j, "kill_cmd_ms", ms(t_kill - t_kill0));
    bench_json_int(&j, "killed_port", killed_port);
    bench_json_num(&j, "failover", new_port > 0 ? (double)t_failover / 1e9 : NAN);
    bench_json_int(&j, "new_master_port", new_port);
    bench_json_num(&j, "restart", (double)t_restart / 1e9);
    bench_json_num(&j, "rejoined", t_rejoin != INT64_MAX ? (double)t_rejoin / 1e9 : NAN);
    bench_json_num(&j, "restart_cmd_ms", ms(t_restart - t_restart0));
    bench_json_end_obj(&j);
    bench_json_num(&j, "kill_to_failover_ms", new_port > 0 ? ms(t_failover - t_kill) : NAN);
    /* Bounded below by the pace: the first attempt after the kill starts
     * up to --pace-ms later. */
    bench_json_num(&j, "kill_to_first_ok_acquire_ms",
                   first_ok_after_kill >= 0 ? ms(first_ok_after_kill - t_kill) : NAN);
    bench_json_obj(&j, "first_attempt_after_kill");
    bench_json_bool(&j, "ok", first_after_kill && first_after_kill->rc == REDLOCK_OK);
    bench_json_num(&j, "started_ms_after_kill",
                   first_after_kill ? ms(first_after_kill->t0 - t_kill) : NAN);
    bench_json_num(&j, "latency_ms",
                   first_after_kill ? ms(first_after_kill->t1 - first_after_kill->t0) : NAN);
    bench_json_end_obj(&j);
    bench_json_int(&j, "ok_acquires_spanning_the_kill", straddling_ok);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "attempts", attempts);
    bench_json_int(&j, "ok", ok);
    bench_json_int(&j, "failed", failed);
    bench_json_int(&j, "failed_no_quorum", failed_nq);
    bench_json_int(&j, "failed_other", failed_other);
    bench_json_int(&j, "failed_although_groups_2_3_granted", failed_23);
    bench_json_end_obj(&j);
    bench_json_bool(&j, "quorum_kept", failed_nq == 0 && failed_23 == 0);
    /* Groups 2 and 3 are a quorum on their own: nothing may fail. */
    bench_json_target(&j, "failed acquires through the master kill", (double)failed, 0);
    bench_json_stats(&j, "latency_us", &st_all);
    bench_json_num(&j, "max_acquire_ms", st_all.max / 1e3);
    bench_json_obj(&j, "windows");
    for (i = 0; i < 5; i++) {
        bench_json_obj(&j, win_names[i]);
        bench_json_int(&j, "attempts", win_attempts[i]);
        bench_json_int(&j, "group1_granted", g1_granted[i]);
        bench_json_stats(&j, "acquire_us", &st[i]);
        bench_json_end_obj(&j);
    }
    bench_json_end_obj(&j);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "before the kill, same run");
    bench_json_stats(&j, "latency_us", &st[0]);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "acquire_p50_during_over_before", st[1].p50 / st[0].p50);
    bench_json_num(&j, "acquire_p50_after_over_before", st[2].p50 / st[0].p50);
    bench_json_num(&j, "acquire_p50_after_until_rejoin_over_before", st[3].p50 / st[0].p50);
    bench_json_num(&j, "acquire_p50_after_rejoin_over_before", st[4].p50 / st[0].p50);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "group1_alone");
    bench_json_str(&j, "what", "a lock on group 1 only (N = 1, replica_acks 1), one try per 50 ms");
    bench_json_int(&j, "attempts", p_attempts);
    bench_json_int(&j, "ok", p_ok);
    bench_json_num(&j, "kill_to_first_ok_ms",
                   p_first_ok_after_kill >= 0 ? ms(p_first_ok_after_kill - t_kill) : NAN);
    bench_json_num(&j, "kill_to_last_failure_ms", p_last_fail >= 0 ? ms(p_last_fail - t_kill) : NAN);
    bench_json_bool(&j, "rejoined", t_rejoin != INT64_MAX);
    bench_json_num(&j, "restart_to_first_ok_ms",
                   p_first_ok_after_restart >= 0 ? ms(p_first_ok_after_restart - t_restart) : NAN);
    bench_json_end_obj(&j);
    bench_json_print(&j);
    for (i = 0; i < n; i++)
        free(w[i].recs);
    for (i = 0; i < 5; i++)
        bench_samples_free(&win[i]);
    bench_samples_free(&all);
}

int main(int argc, char **argv)
{
    bench_args a;
    char *uris[GROUPS];
    char **args = argv;
    long cycles, chunk, rto, workers, pace_ms, wait_ms;
    double kill_at, seconds, max_seconds;
    const char *parts;
    int i;

    /* The common parser wants --nodes; this scenario brings its own. */
    if (!bench_opt(argc, argv, "--nodes", NULL)) {
        args = calloc((size_t)argc + 3, sizeof(*args));
        if (!args)
            bench_die("out of memory");
        memcpy(args, argv, (size_t)argc * sizeof(*args));
        args[argc] = "--nodes";
        args[argc + 1] = "127.0.0.1:1";
        argc += 2;
    }
    bench_parse_args(&a, argc, args);
    cycles = bench_opt_long(argc, args, "--cycles", bench_scaled(&a, 2000, 100));
    chunk = bench_opt_long(argc, args, "--chunk", 100);
    rto = bench_opt_long(argc, args, "--replica-timeout-ms", 0);
    workers = bench_opt_long(argc, args, "--workers", 2);
    pace_ms = bench_opt_long(argc, args, "--pace-ms", 20);
    wait_ms = bench_opt_long(argc, args, "--wait-ms", 3000);
    kill_at = strtod(bench_opt(argc, args, "--kill-at", "3"), NULL);
    seconds = strtod(bench_opt(argc, args, "--seconds", "15"), NULL) * a.scale;
    if (seconds < 12)
        seconds = 12;
    max_seconds = strtod(bench_opt(argc, args, "--max-seconds", "40"), NULL);
    parts = bench_opt(argc, args, "--parts", "acks,timeline");
    if (!a.rig)
        bench_die("needs --rig PATH (scripts/rig) to start a sentinel rig");
    if (cycles < 1 || chunk < 1 || rto < 0 || rto > 60000 || workers < 1 || workers > 8 ||
        pace_ms < 1 || wait_ms < 0 || wait_ms > 60000 || !(kill_at >= 0.5) ||
        !(kill_at + 3 < seconds) || !(max_seconds >= seconds) || max_seconds > 120)
        bench_die("bad --cycles, --chunk, --replica-timeout-ms, --workers (1-8), --pace-ms, "
                  "--wait-ms, --kill-at, --seconds (at least --kill-at + 3) or --max-seconds "
                  "(--seconds to 120)");
    srand((unsigned)getpid() ^ (unsigned)bench_now_ns());
    start_rig(&a);
    rig_uris(uris);
    if (bench_has_part(parts, "acks"))
        acks_part(&a, uris, cycles, chunk, (int)rto);
    if (bench_has_part(parts, "timeline"))
        timeline(&a, uris, (int)workers, pace_ms, wait_ms, kill_at, seconds, max_seconds,
                 (int)rto);
    for (i = 0; i < GROUPS; i++)
        free(uris[i]);
    if (args != argv)
        free(args);
    return 0;
}
