/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "async": the event-loop API against threads, N = 5.
 *
 *   - async_loop: one loop-driven client (options.event_loop) on the
 *     built-in poll() adapter (<redlock/adapters/poll.h>; --adapter libuv
 *     for libuv's epoll), driven from ONE thread
 *     (this one), keeps K = 64 acquire + release cycles in flight on 64
 *     names: redlock_acquire_async (wait 0, fixed lease); on the grant
 *     redlock_unlock_async; when the unlock is done the next cycle on that
 *     name starts at once.
 *   - async_blocking: the blocking client shared by T = 16 threads on 16
 *     names, each cycling redlock_try_lock_for(l, 0, lease) +
 *     redlock_unlock (as server.c's "16 threads on 16 names").
 *
 * The two run in alternating chunks in one process (R rounds of S seconds
 * each way; a chunk ends when its clock runs out and what was in flight
 * has finished, and its wall time includes that). Per mode: completed
 * cycles/s, cycle latency, client CPU per cycle (getrusage(RUSAGE_SELF)
 * over the chunks: the whole process, every thread) and server time per
 * cycle (EVAL/EVALSHA usec of INFO commandstats summed over the 5 nodes,
 * diffed around each chunk, as in server.c).
 *
 * Target: one async thread does at least the work of 16 blocking threads,
 * async cycles/s / blocking cycles/s >= 1.0 (printed as blocking / async
 * <= 1, the form of bench_json_target).
 *
 * Both clients use a 2000 ms node timeout, as server.c does for its
 * threads: the default 50 ms is for production latencies, not for 64
 * operations and 5 servers on 2 cores.
 *
 * Options: --seconds S per chunk (default 1; 0.5 with --scale < 1),
 * --rounds R (5; 2 with --scale < 1), --inflight K (64), --threads T (16),
 * --lease MS (10000), --wait MS (0: one attempt, as the threads make),
 * --adapter poll|libuv (poll).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"
#include "redisson.h"
#include "redlock/adapters/libuv.h"
#include "redlock/adapters/poll.h"

const char *bench_name = "async";

#define NODES 5
#define MAX_INFLIGHT 1024
#define MAX_THREADS 256
#define NODE_TIMEOUT_MS 2000
/* The owner id of every async cycle (each name has one cycle at a time). */
#define ASYNC_OWNER 1

/* ---- Measuring a chunk ------------------------------------------------- */

typedef struct probe {
    raw_conn conns[NODES];
} probe;

/* What one mode accumulated over its chunks. */
typedef struct meter {
    long long usec, calls;      /* server: script usec, commands */
    double server_cpu_s;        /* server processes' whole CPU */
    int64_t wall_ns;
    double user_s, sys_s;
    long cycles, failed;
    bench_samples lat;          /* cycle latency */
    double loop_cpu_s;          /* async: the loop thread's own CPU */
} meter;

typedef struct mark {
    long long usec, calls;
    double server_cpu_s;
    double user_s, sys_s;
    int64_t t;
} mark;

static void server_now(probe *p, long long *usec, long long *calls, double *cpu_s)
{
    size_t i;

    *usec = *calls = 0;
    *cpu_s = 0;
    for (i = 0; i < NODES; i++) {
        long long u, c;

        bench_server_usec(&p->conns[i], &u, &c);
        *usec += u;
        *calls += c;
        *cpu_s += bench_server_cpu_s(&p->conns[i]);
    }
}

/* The server is read outside the client's clock and CPU. */
static void mark_start(probe *p, mark *m)
{
    server_now(p, &m->usec, &m->calls, &m->server_cpu_s);
    bench_cpu(&m->user_s, &m->sys_s);
    m->t = bench_now_ns();
}

static void mark_stop(probe *p, const mark *m0, meter *m)
{
    int64_t t = bench_now_ns();
    double u, s;
    long long usec, calls;
    double server_cpu_s;

    bench_cpu(&u, &s);
    server_now(p, &usec, &calls, &server_cpu_s);
    m->wall_ns += t - m0->t;
    m->user_s += u - m0->user_s;
    m->sys_s += s - m0->sys_s;
    m->usec += usec - m0->usec;
    m->calls += calls - m0->calls;
    m->server_cpu_s += server_cpu_s - m0->server_cpu_s;
}

/* ---- (a) one thread, one loop-driven client ---------------------------- */

/* CPU of the calling thread alone, seconds. */
static double thread_cpu(void)
{
    struct rusage ru;

    getrusage(RUSAGE_THREAD, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

typedef struct async_run async_run;

typedef struct slot {
    async_run *run;
    redlock_lock *l;
    int64_t t0;
} slot;

struct async_run {
    redlock_client *c;
    int use_uv;                 /* the libuv adapter, else poll() */
    redlock_poll_loop pl;
    uv_loop_t uv;
    redlock_libuv *uv_adapter;
    slot slots[MAX_INFLIGHT];
    int k;
    int64_t wait_ms, lease_ms;
    int stopping;
    meter *m;                   /* where completed cycles are counted */
    long rc_counts[64];         /* failures by code (-rc), for the log */
};

static void note_failure(async_run *r, int rc, const char *what, const char *message)
{
    int i = rc < 0 ? -rc : rc;

    r->m->failed++;
    if (i < 64 && r->rc_counts[i]++ == 0)
        bench_log("async: first %s failure: %s: %s", what, redlock_err_name(rc), message);
}

static void start_cycle(slot *s);

static void on_unlocked(void *ud, redlock_lock *l, int rc, const char *message)
{
    slot *s = ud;
    async_run *r = s->run;

    (void)l;
    if (rc == REDLOCK_OK) {
        bench_samples_add(&r->m->lat, bench_now_ns() - s->t0);
        r->m->cycles++;
    } else {
        note_failure(r, rc, "unlock", message);
    }
    if (!r->stopping)
        start_cycle(s);
}

static void on_acquired(void *ud, redlock_lock *l, int rc, const char *message)
{
    slot *s = ud;
    async_run *r = s->run;

    if (rc != REDLOCK_OK) {
        /* Counted, not fatal (as in throughput.c); the name is tried
         * again. */
        note_failure(r, rc, "acquire", message);
        if (!r->stopping)
            start_cycle(s);
        return;
    }
    bench_check(redlock_unlock_async(l, ASYNC_OWNER, on_unlocked, s), "unlock_async");
}

static void start_cycle(slot *s)
{
    async_run *r = s->run;

    s->t0 = bench_now_ns();
    bench_check(redlock_acquire_async(s->l, ASYNC_OWNER, r->wait_ms, r->lease_ms, on_acquired,
                                      s),
                "acquire_async");
}

/* One turn of the program's loop. */
static void turn(async_run *r)
{
    if (r->use_uv)
        uv_run(&r->uv, UV_RUN_ONCE);
    else if (redlock_poll_run_once(&r->pl, 100) < 0 && errno != EINTR)
        bench_die("poll: %s", strerror(errno));
}

/* Runs the loop until every operation ended. */
static void async_drain(async_run *r)
{
    while (redlock_loop_pending(r->c) > 0)
        turn(r);
}

static void async_chunk(async_run *r, meter *m, double seconds)
{
    int64_t until;
    double cpu0 = thread_cpu();
    int i;

    r->m = m;
    r->stopping = 0;
    until = bench_now_ns() + (int64_t)(seconds * 1e9);
    for (i = 0; i < r->k; i++)
        start_cycle(&r->slots[i]);
    while (bench_now_ns() < until)
        turn(r);
    r->stopping = 1;
    async_drain(r);
    m->loop_cpu_s += thread_cpu() - cpu0;
}

static void async_init(async_run *r, const bench_args *a, int k, int64_t wait_ms,
                       int64_t lease_ms, int use_uv)
{
    redlock_options o = {0};
    char name[96];
    int i;

    memset(r, 0, sizeof(*r));
    o.event_loop = 1;
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    r->c = bench_client(a, NODES, &o);
    r->use_uv = use_uv;
    if (use_uv) {
        if (uv_loop_init(&r->uv) != 0)
            bench_die("uv_loop_init");
        bench_check(redlock_libuv_attach(r->c, &r->uv, &r->uv_adapter), "libuv_attach");
    } else {
        bench_check(redlock_poll_attach(&r->pl, r->c), "poll_attach");
    }
    r->k = k;
    r->wait_ms = wait_ms;
    r->lease_ms = lease_ms;
    for (i = 0; i < k; i++) {
        snprintf(name, sizeof(name), "bench:async:loop:%d:%d", (int)getpid(), i);
        r->slots[i].run = r;
        bench_check(redlock_lock_new(r->c, name, NULL, &r->slots[i].l), "lock_new");
    }
}

static void async_free(async_run *r)
{
    int i;

    for (i = 0; i < r->k; i++)
        redlock_lock_free(r->slots[i].l);
    redlock_client_free(r->c);
    if (r->use_uv) {
        redlock_libuv_detach(r->uv_adapter);
        uv_run(&r->uv, UV_RUN_NOWAIT); /* the handles' close callbacks */
        uv_loop_close(&r->uv);
    } else {
        redlock_poll_free(&r->pl);
    }
}

/* ---- (b) T threads, one shared blocking client ------------------------- */

typedef struct pool pool;

typedef struct worker {
    pthread_t th;
    pool *p;
    redlock_lock *l;
    bench_samples lat;
    long cycles, failed;
} worker;

struct pool {
    redlock_client *c;
    worker w[MAX_THREADS];
    int t;
    int64_t lease_ms;
    pthread_barrier_t go, done;
    volatile int stop, quit;
};

static void *work(void *arg)
{
    worker *w = arg;
    pool *p = w->p;

    for (;;) {
        pthread_barrier_wait(&p->go);
        if (__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE))
            return NULL;
        while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED)) {
            int64_t t0 = bench_now_ns();
            /* An overloaded machine can push a whole attempt past the node
             * timeout: counted, not fatal (as in throughput.c). */
            int rc = redlock_try_lock_for(w->l, 0, p->lease_ms);

            if (rc != REDLOCK_OK || redlock_unlock(w->l) != REDLOCK_OK) {
                w->failed++;
                continue;
            }
            bench_samples_add(&w->lat, bench_now_ns() - t0);
            w->cycles++;
        }
        pthread_barrier_wait(&p->done);
    }
}

static void pool_init(pool *p, const bench_args *a, int t, int64_t lease_ms)
{
    redlock_options o = {0};
    char name[96];
    int i;

    memset(p, 0, sizeof(*p));
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    p->c = bench_client(a, NODES, &o);
    p->t = t;
    p->lease_ms = lease_ms;
    pthread_barrier_init(&p->go, NULL, (unsigned)t + 1);
    pthread_barrier_init(&p->done, NULL, (unsigned)t + 1);
    for (i = 0; i < t; i++) {
        snprintf(name, sizeof(name), "bench:async:threads:%d:%d", (int)getpid(), i);
        p->w[i].p = p;
        bench_check(redlock_lock_new(p->c, name, NULL, &p->w[i].l), "lock_new");
        if (pthread_create(&p->w[i].th, NULL, work, &p->w[i]) != 0)
            bench_die("cannot start thread %d", i);
    }
}

/* The clock starts before the threads are released and stops once the
 * last one finished its cycle in flight. */
static void pool_chunk(pool *p, meter *m, double seconds)
{
    int i;

    for (i = 0; i < p->t; i++) {
        p->w[i].cycles = p->w[i].failed = 0;
    }
    __atomic_store_n(&p->stop, 0, __ATOMIC_RELAXED);
    pthread_barrier_wait(&p->go);
    bench_sleep_ns((int64_t)(seconds * 1e9));
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
    pthread_barrier_wait(&p->done);
    for (i = 0; i < p->t; i++) {
        m->cycles += p->w[i].cycles;
        m->failed += p->w[i].failed;
        bench_samples_merge(&m->lat, &p->w[i].lat);
        p->w[i].lat.n = 0;
    }
}

static void pool_free(pool *p)
{
    int i;

    __atomic_store_n(&p->quit, 1, __ATOMIC_RELEASE);
    pthread_barrier_wait(&p->go);
    for (i = 0; i < p->t; i++) {
        pthread_join(p->w[i].th, NULL);
        bench_samples_free(&p->w[i].lat);
        redlock_lock_free(p->w[i].l);
    }
    pthread_barrier_destroy(&p->go);
    pthread_barrier_destroy(&p->done);
    redlock_client_free(p->c);
}

/* ---- Output ------------------------------------------------------------ */

static double per_s(const meter *m)
{
    return (double)m->cycles / ((double)m->wall_ns / 1e9);
}

static double per_cycle(double v, const meter *m)
{
    return m->cycles ? v / (double)m->cycles : 0;
}

static void put_mode(const bench_args *a, const char *scenario, const char *mode, meter *m,
                     int inflight, int threads, double seconds, long rounds, long lease_ms,
                     long wait_ms)
{
    bench_stats st = bench_stats_of(&m->lat);
    bench_json j;

    bench_write_cdf(a, scenario, &m->lat);
    bench_json_begin(&j, scenario);
    bench_json_obj(&j, "params");
    bench_json_str(&j, "mode", mode);
    bench_json_int(&j, "nodes", NODES);
    bench_json_int(&j, "threads", threads);
    bench_json_int(&j, "inflight", inflight);
    bench_json_int(&j, "names", inflight);
    bench_json_num(&j, "seconds", seconds * (double)rounds);
    bench_json_int(&j, "lease_ms", lease_ms);
    bench_json_int(&j, "wait_ms", wait_ms);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "counts");
    bench_json_int(&j, "cycles", m->cycles);
    bench_json_int(&j, "failed", m->failed);
    bench_json_end_obj(&j);
    bench_json_stats(&j, "latency_us", &st);
    bench_json_num(&j, "ops_per_s", per_s(m));
    bench_json_cpu(&j, m->user_s, m->sys_s);
    bench_json_num(&j, "cpu_us_per_cycle", per_cycle((m->user_s + m->sys_s) * 1e6, m));
    bench_json_num(&j, "server_us_per_cycle", per_cycle((double)m->usec, m));
    bench_json_num(&j, "commands_per_cycle", per_cycle((double)m->calls, m));
    /* The servers' whole CPU per cycle (INFO cpu; includes the two
     * INFO probes, a few hundred us per chunk). */
    bench_json_num(&j, "server_process_cpu_us_per_cycle", per_cycle(m->server_cpu_s * 1e6, m));
    if (m->loop_cpu_s > 0)
        /* How busy the one loop thread was: 1.0 = a whole core. */
        bench_json_num(&j, "loop_thread_cpu_share", m->loop_cpu_s / ((double)m->wall_ns / 1e9));
    bench_json_print(&j);
}

int main(int argc, char **argv)
{
    bench_args a;
    probe p;
    async_run *r;
    pool *tp;
    meter am = {0}, bm = {0};
    mark mk;
    long rounds, k, threads, lease_ms, wait_ms, i;
    const char *adapter;
    double seconds, ratio, cpu_ratio, server_ratio;
    int met;
    bench_json j;

    bench_parse_args(&a, argc, argv);
    seconds = atof(bench_opt(argc, argv, "--seconds", a.scale < 1 ? "0.5" : "1"));
    rounds = bench_opt_long(argc, argv, "--rounds", a.scale < 1 ? 2 : 5);
    k = bench_opt_long(argc, argv, "--inflight", 64);
    threads = bench_opt_long(argc, argv, "--threads", 16);
    lease_ms = bench_opt_long(argc, argv, "--lease", 10000);
    wait_ms = bench_opt_long(argc, argv, "--wait", 0);
    adapter = bench_opt(argc, argv, "--adapter", "poll");
    if (strcmp(adapter, "libuv") != 0 && strcmp(adapter, "poll") != 0)
        bench_die("--adapter: libuv or poll");
    if (rounds < 1 || seconds <= 0 || k < 1 || k > MAX_INFLIGHT || threads < 1 ||
        threads > MAX_THREADS || lease_ms < 100 || wait_ms < 0)
        bench_die("bad --seconds/--rounds/--inflight/--threads/--lease/--wait");
    if (a.n_nodes < NODES)
        bench_die("needs %d nodes (--nodes), %zu given", NODES, a.n_nodes);
    memset(&p, 0, sizeof(p));
    for (i = 0; i < NODES; i++)
        raw_connect(&p.conns[i], a.hosts[i], a.ports[i], a.user, a.pass);
    if (!(r = calloc(1, sizeof(*r))) || !(tp = calloc(1, sizeof(*tp))))
        bench_die("out of memory");
    async_init(r, &a, (int)k, wait_ms, lease_ms, strcmp(adapter, "libuv") == 0);
    pool_init(tp, &a, (int)threads, lease_ms);

    /* Warm-up, not counted: every connection is open before the clock
     * starts (both clients open theirs lazily). */
    {
        meter wa = {0}, wb = {0};

        async_chunk(r, &wa, 0.3);
        pool_chunk(tp, &wb, 0.3);
        bench_samples_free(&wa.lat);
        bench_samples_free(&wb.lat);
        memset(r->rc_counts, 0, sizeof(r->rc_counts));
    }
    /* Alternating chunks: a machine that slows down for a while slows
     * both alike. */
    for (i = 0; i < rounds; i++) {
        long c0 = am.cycles, c1 = bm.cycles;
        int64_t w0 = am.wall_ns, w1 = bm.wall_ns;

        mark_start(&p, &mk);
        async_chunk(r, &am, seconds);
        mark_stop(&p, &mk, &am);
        mark_start(&p, &mk);
        pool_chunk(tp, &bm, seconds);
        mark_stop(&p, &mk, &bm);
        bench_log("round %ld: async %.0f cycles/s, %ld threads %.0f cycles/s", i + 1,
                  (double)(am.cycles - c0) / ((double)(am.wall_ns - w0) / 1e9), threads,
                  (double)(bm.cycles - c1) / ((double)(bm.wall_ns - w1) / 1e9));
    }
    pool_free(tp);
    async_free(r);
    for (i = 0; i < NODES; i++)
        raw_close(&p.conns[i]);

    ratio = per_s(&am) / per_s(&bm);
    cpu_ratio = per_cycle(am.user_s + am.sys_s, &am) / per_cycle(bm.user_s + bm.sys_s, &bm);
    server_ratio = per_cycle((double)am.usec, &am) / per_cycle((double)bm.usec, &bm);
    put_mode(&a, "async_loop",
             r->use_uv ? "one thread, event loop (libuv adapter)"
                       : "one thread, event loop (poll adapter)",
             &am, (int)k, 1,
             seconds, rounds, lease_ms, wait_ms);
    put_mode(&a, "async_blocking", "threads, one shared blocking client", &bm,
             (int)threads, (int)threads, seconds, rounds, lease_ms, wait_ms);

    bench_json_begin(&j, "async");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", NODES);
    bench_json_int(&j, "inflight", k);
    bench_json_int(&j, "workers", threads);
    bench_json_num(&j, "seconds", seconds * (double)rounds);
    bench_json_int(&j, "rounds", rounds);
    bench_json_int(&j, "lease_ms", lease_ms);
    bench_json_int(&j, "wait_ms", wait_ms);
    bench_json_end_obj(&j);
    bench_json_num(&j, "ops_per_s", per_s(&am));
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "16 threads on 16 names, one shared blocking client, same run");
    bench_json_num(&j, "ops_per_s", per_s(&bm));
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "ops_async_over_blocking", ratio);
    bench_json_num(&j, "cpu_us_per_cycle_async_over_blocking", cpu_ratio);
    bench_json_num(&j, "server_us_per_cycle_async_over_blocking", server_ratio);
    bench_json_end_obj(&j);
    /* A target is "at most" in bench_json_target: met when blocking /
     * async <= 1, i.e. async / blocking >= 1. */
    met = bench_json_target(&j,
                            "blocking threads' cycles/s / one async thread's "
                            "(<= 1 means one async thread does at least their work)",
                            1.0 / ratio, 1.0);
    bench_json_print(&j);
    bench_log("async / %ld blocking threads = %.3f cycles/s (target >= 1.0): %s; "
              "client CPU us/cycle %.1f / %.1f, server us/cycle %.1f / %.1f "
              "(server processes' CPU %.1f / %.1f); loop thread busy %.0f %% of a core",
              threads, ratio, met ? "MET" : "MISSED",
              per_cycle((am.user_s + am.sys_s) * 1e6, &am),
              per_cycle((bm.user_s + bm.sys_s) * 1e6, &bm), per_cycle((double)am.usec, &am),
              per_cycle((double)bm.usec, &bm), per_cycle(am.server_cpu_s * 1e6, &am),
              per_cycle(bm.server_cpu_s * 1e6, &bm), 100 * am.loop_cpu_s / ((double)am.wall_ns / 1e9));
    bench_samples_free(&am.lat);
    bench_samples_free(&bm.lat);
    free(r);
    free(tp);
    return 0;
}
