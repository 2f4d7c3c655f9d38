/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The server side of scenario "rwlock" (rwlock.c runs it): what one
 * uncontended cycle (acquire + release, one thread) of a read hold and of a
 * permit costs the servers, against a mutex cycle on the same client and
 * nodes, in alternating chunks. Server time per cycle is the EVAL/EVALSHA
 * usec of INFO commandstats summed over every node and diffed around each
 * chunk (bench_server_usec(), as server.c); scripts and other commands per
 * cycle likewise (a command a script runs counts under its own name).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "raw.h"
#include "redisson.h"

#define COST_LEASE_MS 10000
#define COST_WAIT_MS 10000
#define WARMUP_CYCLES 100
#define FLUSH_MS 10000

/* Declared in rwlock.c, which calls them. */
void rwlock_server_now(raw_conn *conns, size_t n, long long *usec, long long *scripts,
                       long long *calls);
void rwlock_server_cost(const bench_args *a, raw_conn *conns, size_t n_conns, size_t nodes,
                        int permits, long cycles, int rounds);

typedef enum subject_kind { S_MUTEX, S_READ, S_PERMIT, S_COUNT } subject_kind;

typedef struct subjects {
    redlock_lock *mutex, *read;
    redlock_semaphore *sem;
} subjects;

typedef struct cost_meter {
    long long usec, scripts, calls;
    int64_t wall_ns;
    long cycles;
    double cpu_s;
} cost_meter;

void rwlock_server_now(raw_conn *conns, size_t n, long long *usec, long long *scripts,
                       long long *calls)
{
    size_t i;

    *usec = *scripts = *calls = 0;
    for (i = 0; i < n; i++) {
        long long u, c;

        bench_server_usec(&conns[i], &u, &c);
        *usec += u;
        *calls += c;
        *scripts += raw_command_calls(&conns[i], "evalsha") + raw_command_calls(&conns[i], "eval");
    }
}

static void cycle(subjects *s, subject_kind k)
{
    redlock_permit *p = NULL;
    redlock_lock *l = k == S_READ ? s->read : s->mutex;

    if (k == S_PERMIT) {
        bench_check(redlock_semaphore_acquire(s->sem, 1, COST_WAIT_MS, COST_LEASE_MS, &p),
                    "semaphore_acquire");
        bench_check(redlock_semaphore_release(p), "semaphore_release");
        return;
    }
    bench_check(redlock_try_lock_for(l, COST_WAIT_MS, COST_LEASE_MS), "acquire");
    bench_check(redlock_unlock(l), "release");
}

static void chunk(raw_conn *conns, size_t n_conns, redlock_client *c, size_t nodes, cost_meter *m,
                  subjects *s, subject_kind k, long cycles)
{
    long long u0, k0, c0, u1, k1, c1;
    double us0, ss0, us1, ss1;
    int64_t t0;
    long i;

    rwlock_server_now(conns, n_conns, &u0, &k0, &c0);
    bench_cpu(&us0, &ss0);
    t0 = bench_now_ns();
    for (i = 0; i < cycles; i++)
        cycle(s, k);
    m->wall_ns += bench_now_ns() - t0;
    bench_cpu(&us1, &ss1);
    /* The last releases may have returned at a quorum: their stragglers
     * belong to this chunk. */
    if (redlock_client_flush(c, FLUSH_MS) != REDLOCK_OK)
        bench_log("N = %zu: the nodes did not catch up within %d ms", nodes, FLUSH_MS);
    rwlock_server_now(conns, n_conns, &u1, &k1, &c1);
    m->usec += u1 - u0;
    m->scripts += k1 - k0;
    m->calls += c1 - c0;
    m->cycles += cycles;
    m->cpu_s += (us1 - us0) + (ss1 - ss0);
}

static double server_us(const cost_meter *m)
{
    return (double)m->usec / (double)m->cycles;
}

static void put_cost(bench_json *j, const char *key, const cost_meter *m)
{
    bench_json_obj(j, key);
    bench_json_num(j, "server_us_per_cycle", server_us(m));
    bench_json_num(j, "scripts_per_cycle", (double)m->scripts / (double)m->cycles);
    bench_json_num(j, "commands_per_cycle", (double)m->calls / (double)m->cycles);
    bench_json_num(j, "cycles_per_s", (double)m->cycles / ((double)m->wall_ns / 1e9));
    bench_json_num(j, "cpu_us_per_cycle", m->cpu_s * 1e6 / (double)m->cycles);
    bench_json_end_obj(j);
}

void rwlock_server_cost(const bench_args *a, raw_conn *conns, size_t n_conns, size_t nodes,
                        int permits, long cycles, int rounds)
{
    cost_meter m[S_COUNT];
    redlock_lock_options ro = {0};
    redlock_client *c = bench_client(a, nodes, NULL);
    subjects s;
    char name[128];
    bench_json j;
    int r, k;

    memset(m, 0, sizeof(m));
    snprintf(name, sizeof(name), "bench:rwlock:%d:cost:n%zu:mutex", (int)getpid(), nodes);
    bench_check(redlock_lock_new(c, name, NULL, &s.mutex), "lock_new");
    ro.kind = REDLOCK_LOCK_READ;
    snprintf(name, sizeof(name), "bench:rwlock:%d:cost:n%zu:read", (int)getpid(), nodes);
    bench_check(redlock_lock_new(c, name, &ro, &s.read), "lock_new read");
    snprintf(name, sizeof(name), "bench:rwlock:%d:cost:n%zu:sem", (int)getpid(), nodes);
    bench_check(redlock_semaphore_new(c, name, permits, NULL, &s.sem), "semaphore_new");
    /* Connections, script caches and the semaphore's count in place first. */
    for (r = 0; r < WARMUP_CYCLES; r++)
        for (k = 0; k < S_COUNT; k++)
            cycle(&s, (subject_kind)k);
    for (r = 0; r < rounds; r++)
        for (k = 0; k < S_COUNT; k++)
            chunk(conns, n_conns, c, nodes, &m[k], &s, (subject_kind)k, cycles / rounds);
    redlock_semaphore_free(s.sem);
    redlock_lock_free(s.read);
    redlock_lock_free(s.mutex);
    redlock_client_free(c);

    bench_json_begin(&j, "rwlock_server_cost");
    bench_json_obj(&j, "params");
    bench_json_int(&j, "nodes", (long long)nodes);
    bench_json_int(&j, "cycles", m[S_READ].cycles);
    bench_json_int(&j, "permits", permits);
    bench_json_int(&j, "lease_ms", COST_LEASE_MS);
    bench_json_end_obj(&j);
    put_cost(&j, "read", &m[S_READ]);
    put_cost(&j, "permit", &m[S_PERMIT]);
    bench_json_obj(&j, "baseline");
    bench_json_str(&j, "name", "mutex cycles, same client and nodes, alternating chunks");
    put_cost(&j, "mutex", &m[S_MUTEX]);
    bench_json_end_obj(&j);
    bench_json_obj(&j, "ratio");
    bench_json_num(&j, "server_us_read_over_mutex", server_us(&m[S_READ]) / server_us(&m[S_MUTEX]));
    bench_json_num(&j, "server_us_permit_over_mutex",
                   server_us(&m[S_PERMIT]) / server_us(&m[S_MUTEX]));
    bench_json_end_obj(&j);
    bench_json_print(&j);
}
