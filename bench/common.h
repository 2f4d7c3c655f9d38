/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared pieces of the benchmark programs: the clock, latency samples and
 * their percentiles, process CPU and memory, the command line every
 * program accepts, and the JSON line each result is printed as.
 *
 * Every program prints one JSON object per line on stdout and nothing
 * else there; progress goes to stderr.
 */
#ifndef REDLOCK_BENCH_COMMON_H
#define REDLOCK_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "redlock/redlock.h"

#define BENCH_MAX_NODES 16

/* Each program defines its name, used as the prefix of its messages. */
extern const char *bench_name;

/* CLOCK_MONOTONIC in nanoseconds, the clock the library uses too. */
int64_t bench_now_ns(void);
void bench_sleep_ns(int64_t ns);

/* ---- Command line ----------------------------------------------------- */

typedef struct bench_args {
    /* --nodes 127.0.0.1:7001,127.0.0.1:7002,... (required) */
    char *hosts[BENCH_MAX_NODES];
    int ports[BENCH_MAX_NODES];
    size_t n_nodes;
    const char *user, *pass;    /* --user/--pass: ACL credentials, if any */
    const char *data_dir;       /* --data DIR: write CDF/timeline files */
    const char *rig;            /* --rig PATH: the scripts/rig script */
    const char *rig_dir;        /* --rig-dir DIR: the rig's --dir */
    double scale;               /* --scale F: multiplies default counts */
} bench_args;

/*
 * Parses the common options; every other "--key value" pair is left for
 * the program and can be read with bench_opt(). Exits with a message on
 * bad input.
 */
void bench_parse_args(bench_args *a, int argc, char **argv);
/* The value of "--key" in argv, or def. */
const char *bench_opt(int argc, char **argv, const char *key, const char *def);
long bench_opt_long(int argc, char **argv, const char *key, long def);
/* def scaled by --scale, at least min. */
long bench_scaled(const bench_args *a, long def, long min);

/* Fills uris[] with "redis://host:port" for the first n nodes (heap
 * strings, freed with bench_free_uris). Credentials go in the options. */
void bench_uris(const bench_args *a, size_t n, char **uris);
void bench_free_uris(char **uris, size_t n);

/* A client over the first n nodes with opts (NULL: defaults) and the
 * credentials of --user/--pass; exits on failure. */
redlock_client *bench_client(const bench_args *a, size_t n, const redlock_options *opts);
/* Exits with the library's message unless rc is REDLOCK_OK. */
void bench_check(int rc, const char *what);

/* Runs `<rig> <verb> <node> --dir <rig-dir>` (node is 1-based, as the
 * rig numbers them); exits if it fails. */
int bench_rig(const bench_args *a, const char *verb, int node);

/* ---- Samples and statistics ------------------------------------------- */

typedef struct bench_samples {
    int64_t *v;                 /* nanoseconds */
    size_t n, cap;
} bench_samples;

void bench_samples_add(bench_samples *s, int64_t ns);
void bench_samples_merge(bench_samples *dst, const bench_samples *src);
void bench_samples_free(bench_samples *s);

typedef struct bench_stats {
    size_t n;
    double p50, p90, p99, p999, max, mean; /* microseconds */
} bench_stats;

/* Sorts s in place. */
bench_stats bench_stats_of(bench_samples *s);

/* Writes DIR/<name>.cdf ("latency_us fraction", at most ~1000 rows) when
 * --data was given; s must be sorted (bench_stats_of sorts it). */
void bench_write_cdf(const bench_args *a, const char *name, const bench_samples *s);
/* Opens DIR/<name> for writing, or NULL without --data. */
FILE *bench_data_file(const bench_args *a, const char *name);

/* ---- Process resources ------------------------------------------------ */

/* User and system CPU of the whole process (every thread), seconds. */
void bench_cpu(double *user_s, double *sys_s);
/* VmRSS from /proc/self/status, in KiB. */
long bench_rss_kib(void);
/* Bytes the allocator has handed out and not taken back (every arena,
 * mmapped chunks included): live memory, without what malloc keeps cached
 * for reuse after a large transient peak. */
long long bench_heap_in_use(void);

/* Wall time and process CPU accumulated over the stretches a mode ran. */
typedef struct bench_meter {
    int64_t wall_ns, t0;
    double user_s, sys_s, u0, s0;
} bench_meter;

void bench_meter_start(bench_meter *m);
void bench_meter_stop(bench_meter *m);

/* ---- JSON lines -------------------------------------------------------- */

typedef struct bench_json {
    char buf[16384];
    size_t len;
    int depth;
    int first[8];
} bench_json;

void bench_json_begin(bench_json *j, const char *scenario);
void bench_json_obj(bench_json *j, const char *key);   /* opens "key": { */
void bench_json_end_obj(bench_json *j);
void bench_json_str(bench_json *j, const char *key, const char *v);
void bench_json_int(bench_json *j, const char *key, long long v);
void bench_json_num(bench_json *j, const char *key, double v); /* NaN: null */
void bench_json_bool(bench_json *j, const char *key, int v);
/* "key": {"n":..,"p50":..,"p90":..,"p99":..,"p99.9":..,"max":..} in us. */
void bench_json_stats(bench_json *j, const char *key, const bench_stats *st);
/* "cpu_s": {"user":..,"sys":..} */
void bench_json_cpu(bench_json *j, double user_s, double sys_s);
/* "target": {"metric":..,"value":..,"limit":..,"met":..}; returns met. */
int bench_json_target(bench_json *j, const char *metric, double value, double limit);
/* Closes the object and prints it as one line on stdout. */
void bench_json_print(bench_json *j);

/* Progress on stderr, prefixed with the program name. */
void bench_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Reports a fatal error on stderr and exits 1. */
/* Whether name is one of the comma-separated parts (--parts a,b,c). */
int bench_has_part(const char *parts, const char *name);

void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
