/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scenario "server": what a lock cycle costs the servers, and what that
 * does to throughput, against the "Redisson floor" (redisson.h):
 * Redisson's own lock and unlock scripts sent by hand.
 *
 *   - server_cost, N = 1 and N = 5: one thread, uncontended acquire +
 *     release cycles, the library (redlock_try_lock_for + redlock_unlock)
 *     and the floor in alternating chunks. Server time per cycle is the
 *     EVAL/EVALSHA usec of INFO commandstats summed over the nodes,
 *     diffed around each chunk; commands per cycle likewise. Client
 *     cycles/s and CPU per cycle too.
 *   - server_threads: 16 threads on 16 names at N = 5, the library over
 *     one shared client with options.io_thread (the target) and one
 *     without, against 16 floor threads with their own sockets, in
 *     alternating chunks: cycles/s.
 *   - server_threads_pipelined (only with --pipelined): also the Redisson
 *     floor over one connection per node shared by the threads
 *     (leader/follower, pipelined.h), in the same alternating rounds.
 *
 * Targets (issue "A lean per-node protocol"): library server time per
 * cycle <= 1.25x the floor's; uncontended cycles/s >= 1.0x the floor's at
 * N = 1 and N = 5; 16 threads on 16 names >= 1.0x.
 *
 * Options: --cycles C (default 20000), --rounds R (C / 500), --threads T
 * (16), --seconds S per threaded chunk (0.5), --thread-rounds R (4),
 * --pipelined, --threads-only (skip server_cost).
 *
 * Many short chunks, not a few long ones: at N = 1 the ratio of two
 * single-threaded loops on a 2-core box moves with where the scheduler
 * puts the client and the server, which drifts over seconds. Runs with 4
 * chunks of 5 000 cycles gave 0.84-1.04, with 8 of 500 0.88-1.01, and with
 * 40 of 500 four runs gave 0.92-0.94.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"
#include "pipelined.h"
#include "redisson.h"

const char *bench_name = "server";

#define LEASE_MS 10000

typedef struct meter {
    long long usec, calls;
    int64_t wall_ns;
    long cycles;
    double cpu_s, user_s; /* user_s: the part of cpu_s spent outside the kernel */
} meter;

typedef struct probe {
    raw_conn conns[BENCH_MAX_NODES];
    size_t n;
} probe;

static void server_now(probe *p, long long *usec, long long *calls)
{
    size_t i;

    *usec = *calls = 0;
    for (i = 0; i < p->n; i++) {
        long long u, c;

        bench_server_usec(&p->conns[i], &u, &c);
        *usec += u;
        *calls += c;
    }
}

/* Runs fn for a chunk of cycles and adds its server and client cost to m. */
typedef void (*cycle_fn)(void *ud);

static void chunk(probe *p, meter *m, long cycles, cycle_fn fn, void *ud)
{
    long long u0, c0, u1, c1;
    double us0, ss0, us1, ss1;
    int64_t t0;
    long i;

    server_now(p, &u0, &c0);
    bench_cpu(&us0, &ss0);
    t0 = bench_now_ns();
    for (i = 0; i < cycles; i++)
        fn(ud);
    m->wall_ns += bench_now_ns() - t0;
    bench_cpu(&us1, &ss1);
    server_now(p, &u1, &c1);
    m->usec += u1 - u0;
    m->calls += c1 - c0;
    m->cycles += cycles;
    m->cpu_s += (us1 - us0) + (ss1 - ss0);
    m->user_s += us1 - us0;
}

static void floor_cycle(void *ud)
{
    redisson_floor *f = ud;

    redisson_floor_lock(f);
    redisson_floor_unlock(f);
}

static void library_cycle(void *ud)
{
    redlock_lock *l = ud;

    bench_check(redlock_try_lock_for(l, 0, LEASE_MS), "try_lock_for");
    bench_check(redlock_unlock(l), "unlock");
}

static void put_meter(bench_json *j, const char *key, const meter *m)
{
    bench_json_obj(j, key);
    bench_json_num(j, "server_us_per_cycle", (double)m->usec / (double)m->cycles);
    bench_json_num(j, "commands_per_cycle", (double)m->calls / (double)m->cycles);
    bench_json_num(j, "cycles_per_s", (double)m->cycles / ((double)m->wall_ns / 1e9));
    bench_json_num(j, "cpu_us_per_cycle", m->cpu_s * 1e6 / (double)m->cycles);
    bench_json_num(j, "user_cpu_us_per_cycle", m->user_s * 1e6 / (double)m->cycles);
    bench_json_end_obj(j);
}

static void cost(const bench_args *a, probe *p, size_t n, long cycles, long rounds)
{
    redisson_floor *f = malloc(sizeof(*f));
    meter lib = {0}, flo = {0};
    redlock_client *c = bench_client(a, n, NULL);
    redlock_lock *l;
    char name[96];
    long r, per = cycles / rounds;
    double server_ratio, speed_ratio;
    bench_json j;

    if (!f)
        bench_die("out of memory");
    snprintf(name, sizeof(name), "bench:server:floor:%d:%zu", (int)getpid(), n);
    redisson_floor_init(f, a, n, name, LEASE_MS);
    snprintf(name, sizeof(name), "bench:server:lib:%d:%zu", (int)getpid(), n);
    bench_check(redlock_lock_new(c, name, NULL, &l), "lock_new");
    for (r = 0; r < 200; r++) {
        floor_cycle(f);
        library_cycle(l);
    }
    /* Alternating chunks: a machine that slows down for a while slows
     * both alike. */
    for (r = 0; r < rounds; r++) {
        chunk(p, &flo, per, floor_cycle, f);
        chunk(p, &lib, per, library_cycle, l);
    }
    redlock_lock_free(l);
    redlock_client_free(c);
    redisson_floor_free(f);
    free(f);

    server_ratio = ((double)lib.usec / lib.cycles) / ((double)flo.usec / flo.cycles);
    speed_ratio = ((double)lib.cycles / lib.wall_ns) / ((double)flo.cycles / flo.wall_ns);
    bench_json_begin(&j, "server_cost");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)n);
    bench_json_int(&j, "cycles", lib.cycles);
    bench_json_int(&j, "lease_ms", LEASE_MS);
    bench_json_end_obj(&j);
    put_meter(&j, "library", &lib);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "Redisson floor: Redisson's lock/unlock scripts by hand, same run");
    put_meter(&j, "floor", &flo);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "server_us_library_over_floor", server_ratio);
    bench_json_num(&j, "cycles_per_s_library_over_floor", speed_ratio);
    bench_json_end_obj(&j);
    bench_json_target(&j, "server us per cycle, library / Redisson floor", server_ratio, 1.25);
    bench_json_print(&j);

    bench_json_begin(&j, "server_uncontended");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)n);
    bench_json_end_obj(&j);
    bench_json_num(&j, "ops_per_s", (double)lib.cycles / ((double)lib.wall_ns / 1e9));
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "cycles_per_s_library_over_floor", speed_ratio);
    bench_json_end_obj(&j);
    /* A target is "at least": met when the library/floor ratio >= 1. */
    bench_json_target(&j, "floor cycles/s / library cycles/s (<= 1 means library >= floor)",
                      1.0 / speed_ratio, 1.0);
    bench_json_print(&j);
}

/* ---- 16 threads on 16 names ------------------------------------------- */

/* Who runs a thread's cycles. */
typedef enum mode { FLOOR, LIBRARY, IO_LIBRARY, SHARED_FLOOR } mode;

typedef struct worker {
    pthread_t th;
    const bench_args *a;
    redlock_client *c;      /* LIBRARY, IO_LIBRARY: shared */
    shared_floor *shared;   /* SHARED_FLOOR */
    mode mode;
    int index;
    int64_t until_ns;
    long cycles;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char name[96];

    snprintf(name, sizeof(name), "bench:server:t%d:%d:%d", (int)w->mode, (int)getpid(),
             w->index);
    if (w->mode == SHARED_FLOOR) {
        while (bench_now_ns() < w->until_ns) {
            shared_floor_cycle(w->shared, name);
            w->cycles++;
        }
    } else if (w->mode == LIBRARY || w->mode == IO_LIBRARY) {
        redlock_lock *l;

        bench_check(redlock_lock_new(w->c, name, NULL, &l), "lock_new");
        while (bench_now_ns() < w->until_ns) {
            library_cycle(l);
            w->cycles++;
        }
        redlock_lock_free(l);
    } else {
        redisson_floor *f = malloc(sizeof(*f));

        if (!f)
            bench_die("out of memory");
        redisson_floor_init(f, w->a, 5, name, LEASE_MS);
        while (bench_now_ns() < w->until_ns) {
            floor_cycle(f);
            w->cycles++;
        }
        redisson_floor_free(f);
        free(f);
    }
    return NULL;
}

/* CPU of this process and of the servers, seconds, summed over chunks. */
typedef struct cpu_split {
    double client_s, server_s;
} cpu_split;

static void cpu_now(probe *p, double *client_s, double *server_s)
{
    double u, sy;
    size_t i;

    bench_cpu(&u, &sy);
    *client_s = u + sy;
    *server_s = 0;
    for (i = 0; i < p->n; i++)
        *server_s += bench_server_cpu_s(&p->conns[i]);
}

/* What a mode's threads share, and what they added up to. */
typedef struct side {
    mode mode;
    redlock_client *c;
    shared_floor *shared;
    long cycles;
    int64_t wall_ns;
    cpu_split cpu;
} side;

static long run_threads(const bench_args *a, probe *p, side *sd, int threads, double seconds)
{
    worker *w = calloc((size_t)threads, sizeof(*w));
    double c0, s0, c1, s1;
    int64_t t0 = bench_now_ns();
    long total = 0;
    int i;

    cpu_now(p, &c0, &s0);

    if (!w)
        bench_die("out of memory");
    for (i = 0; i < threads; i++) {
        w[i] = (worker){.a = a, .c = sd->c, .shared = sd->shared,
                        .mode = sd->mode, .index = i,
                        .until_ns = t0 + (int64_t)(seconds * 1e9)};
        if (pthread_create(&w[i].th, NULL, work, &w[i]) != 0)
            bench_die("pthread_create");
    }
    for (i = 0; i < threads; i++) {
        pthread_join(w[i].th, NULL);
        total += w[i].cycles;
    }
    sd->wall_ns += bench_now_ns() - t0;
    cpu_now(p, &c1, &s1);
    sd->cpu.client_s += c1 - c0;
    sd->cpu.server_s += s1 - s0;
    sd->cycles += total;
    free(w);
    return total;
}

static void put_cpu(bench_json *j, const cpu_split *cpu, long cycles)
{
    bench_json_num(j, "client_cpu_us_per_cycle", cpu->client_s * 1e6 / (double)cycles);
    bench_json_num(j, "server_process_cpu_us_per_cycle", cpu->server_s * 1e6 / (double)cycles);
}

static double ops_per_s(const side *sd)
{
    return (double)sd->cycles / ((double)sd->wall_ns / 1e9);
}

static void put_side(bench_json *j, const char *key, const char *name, const side *sd)
{
    bench_json_obj(j, key);
    bench_json_str(j, "name", name);
    bench_json_num(j, "ops_per_s", ops_per_s(sd));
    put_cpu(j, &sd->cpu, sd->cycles);
    bench_json_end_obj(j);
}

static void put_params(bench_json *j, int threads, double seconds, long rounds)
{
    bench_json_obj(j, "params");
    bench_json_int(j, "nodes", 5);
    bench_json_int(j, "threads", threads);
    bench_json_int(j, "names", threads);
    bench_json_num(j, "seconds", seconds * (double)rounds);
    bench_json_end_obj(j);
}

static void threads16(const bench_args *a, probe *p, int threads, double seconds, long rounds,
                      int pipelined)
{
    redlock_options o = {0};
    side flo = {.mode = FLOOR}, lib = {.mode = LIBRARY}, iolib = {.mode = IO_LIBRARY},
         shared = {.mode = SHARED_FLOOR};
    double ratio, blocking_ratio;
    long r;
    bench_json j;

    /* The floor waits for every reply however long it takes; so does the
     * library here (the default 50 ms node timeout is for production
     * latencies, not for 16 threads and 5 servers on 2 cores). */
    o.node_timeout_ms = 2000;
    lib.c = bench_client(a, 5, &o);
    o.io_thread = 1;
    iolib.c = bench_client(a, 5, &o);
    o.io_thread = 0;
    if (pipelined) {
        shared.shared = shared_floor_new(a, 5, LEASE_MS);
    }
    for (r = 0; r < rounds; r++) {
        run_threads(a, p, &flo, threads, seconds);
        run_threads(a, p, &lib, threads, seconds);
        run_threads(a, p, &iolib, threads, seconds);
        if (pipelined) {
            run_threads(a, p, &shared, threads, seconds);
        }
    }
    redlock_client_free(lib.c);
    redlock_client_free(iolib.c);
    ratio = ops_per_s(&iolib) / ops_per_s(&flo);
    blocking_ratio = ops_per_s(&lib) / ops_per_s(&flo);
    bench_json_begin(&j, "server_threads");
    put_params(&j, threads, seconds, rounds);
    bench_json_str(&j, "client", "one client with options.io_thread, shared by every thread");
    bench_json_num(&j, "ops_per_s", ops_per_s(&iolib));
    put_cpu(&j, &iolib.cpu, iolib.cycles);
    put_side(&j, "blocking", "one client without io_thread: each call does its own I/O", &lib);
    put_side(&j, "baseline", "Redisson floor, one thread and socket set per name, same run", &flo);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "ops_library_over_floor", ratio);
    bench_json_num(&j, "ops_blocking_library_over_floor", blocking_ratio);
    bench_json_end_obj(&j);
    bench_json_target(&j, "floor ops/s / library ops/s, shared client with io_thread "
                          "(<= 1 means library >= floor)",
                      1.0 / ratio, 1.0);
    bench_json_print(&j);
    if (!pipelined)
        return;
    shared_floor_free(shared.shared);
    bench_json_begin(&j, "server_threads_pipelined");
    put_params(&j, threads, seconds, rounds);
    put_side(&j, "shared_floor", "Redisson floor, one connection per node shared by every thread",
             &shared);
    put_side(&j, "library", "the library, blocking calls on a shared client", &lib);
    put_side(&j, "io_thread_library", "the library, a shared client with options.io_thread",
             &iolib);
    put_side(&j, "baseline", "Redisson floor, one thread and socket set per name, same run", &flo);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "shared_floor_over_floor", ops_per_s(&shared) / ops_per_s(&flo));
    bench_json_num(&j, "library_over_floor", blocking_ratio);
    bench_json_num(&j, "io_thread_library_over_floor", ratio);
    bench_json_end_obj(&j);
    bench_json_print(&j);
}

int main(int argc, char **argv)
{
    bench_args a;
    probe p;
    long cycles, rounds, threads, thread_rounds;
    double seconds;
    int pipelined = 0, threads_only = 0;
    size_t i;

    bench_parse_args(&a, argc, argv);
    for (i = 1; i < (size_t)argc; i++) {
        pipelined |= strcmp(argv[i], "--pipelined") == 0;
        threads_only |= strcmp(argv[i], "--threads-only") == 0;
    }
    cycles = bench_opt_long(argc, argv, "--cycles", bench_scaled(&a, 20000, 1000));
    rounds = bench_opt_long(argc, argv, "--rounds", cycles / 500 > 2 ? cycles / 500 : 2);
    threads = bench_opt_long(argc, argv, "--threads", 16);
    seconds = atof(bench_opt(argc, argv, "--seconds", "0.5")) * (a.scale < 1 ? 0.5 : 1);
    thread_rounds = bench_opt_long(argc, argv, "--thread-rounds", 4);
    if (rounds < 1 || cycles < rounds || threads < 1 || threads > 256 || seconds <= 0 ||
        thread_rounds < 1)
        bench_die("bad --cycles/--rounds/--threads/--seconds/--thread-rounds");
    if (a.n_nodes < 5)
        bench_die("needs 5 nodes (--nodes), %zu given", a.n_nodes);
    memset(&p, 0, sizeof(p));
    p.n = 5;
    for (i = 0; i < p.n; i++)
        raw_connect(&p.conns[i], a.hosts[i], a.ports[i], a.user, a.pass);
    if (!threads_only) {
        cost(&a, &p, 1, cycles, rounds);
        cost(&a, &p, 5, cycles, rounds);
    }
    threads16(&a, &p, (int)threads, seconds, thread_rounds, pipelined);
    for (i = 0; i < p.n; i++)
        raw_close(&p.conns[i]);
    return 0;
}
