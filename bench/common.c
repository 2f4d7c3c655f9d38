/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>


int64_t bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void bench_sleep_ns(int64_t ns)
{
    struct timespec ts;

    if (ns <= 0)
        return;
    ts.tv_sec = ns / 1000000000LL;
    ts.tv_nsec = ns % 1000000000LL;
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

void bench_log(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[%s] ", bench_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void bench_die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[%s] error: ", bench_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- Command line ----------------------------------------------------- */

const char *bench_opt(int argc, char **argv, const char *key, const char *def)
{
    int i;

    for (i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], key) == 0)
            return argv[i + 1];
    return def;
}

long bench_opt_long(int argc, char **argv, const char *key, long def)
{
    const char *v = bench_opt(argc, argv, key, NULL);
    char *end;
    long r;

    if (!v)
        return def;
    errno = 0;
    r = strtol(v, &end, 10);
    if (errno || *end || end == v)
        bench_die("%s: not an integer: '%s'", key, v);
    return r;
}

static void parse_nodes(bench_args *a, const char *list)
{
    char *copy = strdup(list), *save = NULL, *tok;

    if (!copy)
        bench_die("out of memory");
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(tok, ':');
        long port;

        if (a->n_nodes == BENCH_MAX_NODES)
            bench_die("--nodes: at most %d nodes", BENCH_MAX_NODES);
        if (!colon || colon == tok)
            bench_die("--nodes: '%s' is not host:port", tok);
        *colon = '\0';
        port = strtol(colon + 1, NULL, 10);
        if (port <= 0 || port > 65535)
            bench_die("--nodes: bad port in '%s'", colon + 1);
        a->hosts[a->n_nodes] = strdup(tok);
        a->ports[a->n_nodes] = (int)port;
        a->n_nodes++;
    }
    free(copy);
}

void bench_parse_args(bench_args *a, int argc, char **argv)
{
    const char *nodes = bench_opt(argc, argv, "--nodes", NULL);
    const char *scale = bench_opt(argc, argv, "--scale", "1");

    memset(a, 0, sizeof(*a));
    if (!nodes)
        bench_die("usage: %s --nodes host:port[,host:port...] [--user U --pass P] "
                  "[--data DIR] [--rig PATH --rig-dir DIR] [--scale F] [scenario options]",
                  argv[0]);
    parse_nodes(a, nodes);
    a->user = bench_opt(argc, argv, "--user", NULL);
    a->pass = bench_opt(argc, argv, "--pass", NULL);
    a->data_dir = bench_opt(argc, argv, "--data", NULL);
    a->rig = bench_opt(argc, argv, "--rig", NULL);
    a->rig_dir = bench_opt(argc, argv, "--rig-dir", NULL);
    a->scale = strtod(scale, NULL);
    if (!(a->scale > 0))
        bench_die("--scale must be > 0");
}

long bench_scaled(const bench_args *a, long def, long min)
{
    long v = (long)((double)def * a->scale);

    return v < min ? min : v;
}

void bench_uris(const bench_args *a, size_t n, char **uris)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (asprintf(&uris[i], "redis://%s:%d", a->hosts[i], a->ports[i]) < 0)
            bench_die("out of memory");
    }
}

void bench_free_uris(char **uris, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(uris[i]);
}

redlock_client *bench_client(const bench_args *a, size_t n, const redlock_options *opts)
{
    redlock_options o;
    redlock_client *c = NULL;
    char *uris[BENCH_MAX_NODES] = {0};

    if (n > a->n_nodes)
        bench_die("%zu nodes needed, %zu given", n, a->n_nodes);
    memset(&o, 0, sizeof(o));
    if (opts)
        o = *opts;
    if (a->user)
        o.username = a->user;
    if (a->pass)
        o.password = a->pass;
    bench_uris(a, n, uris);
    bench_check(redlock_client_new(&c, (const char *const *)uris, n, &o), "client_new");
    bench_free_uris(uris, n);
    return c;
}

void bench_check(int rc, const char *what)
{
    if (rc != REDLOCK_OK)
        bench_die("%s: %s: %s", what, redlock_err_name(rc), redlock_last_error());
}

int bench_rig(const bench_args *a, const char *verb, int node)
{
    char *cmd;
    int rc;

    if (!a->rig || !a->rig_dir)
        bench_die("this scenario needs --rig PATH and --rig-dir DIR");
    if (asprintf(&cmd, "'%s' %s %d --dir '%s' >/dev/null", a->rig, verb, node, a->rig_dir) < 0)
        bench_die("out of memory");
    rc = system(cmd);
    if (rc != 0)
        bench_die("'%s' failed (status %d)", cmd, rc);
    free(cmd);
    return 0;
}

/* ---- Samples and statistics ------------------------------------------- */

void bench_samples_add(bench_samples *s, int64_t ns)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        int64_t *v = realloc(s->v, cap * sizeof(*v));

        if (!v)
            bench_die("out of memory");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = ns;
}

void bench_samples_merge(bench_samples *dst, const bench_samples *src)
{
    size_t i;

    for (i = 0; i < src->n; i++)
        bench_samples_add(dst, src->v[i]);
}

void bench_samples_free(bench_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    return a < b ? -1 : a > b;
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const bench_samples *s, double p)
{
    size_t rank;

    if (s->n == 0)
        return NAN;
    rank = (size_t)ceil(p / 100.0 * (double)s->n);
    if (rank < 1)
        rank = 1;
    if (rank > s->n)
        rank = s->n;
    return (double)s->v[rank - 1] / 1000.0;
}

bench_stats bench_stats_of(bench_samples *s)
{
    bench_stats st;
    double sum = 0;
    size_t i;

    memset(&st, 0, sizeof(st));
    st.n = s->n;
    if (s->n == 0) {
        st.p50 = st.p90 = st.p99 = st.p999 = st.max = st.mean = NAN;
        return st;
    }
    qsort(s->v, s->n, sizeof(s->v[0]), cmp_i64);
    for (i = 0; i < s->n; i++)
        sum += (double)s->v[i];
    st.p50 = pct(s, 50);
    st.p90 = pct(s, 90);
    st.p99 = pct(s, 99);
    st.p999 = pct(s, 99.9);
    st.max = (double)s->v[s->n - 1] / 1000.0;
    st.mean = sum / (double)s->n / 1000.0;
    return st;
}

FILE *bench_data_file(const bench_args *a, const char *name)
{
    char path[4096];
    FILE *f;

    if (!a->data_dir)
        return NULL;
    snprintf(path, sizeof(path), "%s/%s", a->data_dir, name);
    f = fopen(path, "w");
    if (!f)
        bench_die("cannot write %s: %s", path, strerror(errno));
    return f;
}

void bench_write_cdf(const bench_args *a, const char *name, const bench_samples *s)
{
    char file[256];
    size_t i, step;
    FILE *f;

    snprintf(file, sizeof(file), "%s.cdf", name);
    if (s->n == 0 || !(f = bench_data_file(a, file)))
        return;
    /* Every sample in the tail (the last 1 %), a thinned body: the tail
     * is what a CDF on a log axis is read for. */
    step = s->n / 1000 ? s->n / 1000 : 1;
    fprintf(f, "# latency_us fraction (%zu samples)\n", s->n);
    for (i = 0; i < s->n; i++) {
        int tail = i >= s->n - s->n / 100 - 1;

        if (tail || i % step == 0)
            fprintf(f, "%.3f %.6f\n", (double)s->v[i] / 1000.0,
                    (double)(i + 1) / (double)s->n);
    }
    fclose(f);
}

/* ---- Process resources ------------------------------------------------ */

void bench_cpu(double *user_s, double *sys_s)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    *user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    *sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

long long bench_heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();

    return (long long)(mi.uordblks + mi.hblkhd);
}

long bench_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

void bench_meter_start(bench_meter *m)
{
    bench_cpu(&m->u0, &m->s0);
    m->t0 = bench_now_ns();
}

void bench_meter_stop(bench_meter *m)
{
    double u, s;

    m->wall_ns += bench_now_ns() - m->t0;
    bench_cpu(&u, &s);
    m->user_s += u - m->u0;
    m->sys_s += s - m->s0;
}

/* ---- JSON lines -------------------------------------------------------- */

static void put(bench_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(bench_json *j, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (j->len >= sizeof(j->buf))
        return;
    va_start(ap, fmt);
    n = vsnprintf(j->buf + j->len, sizeof(j->buf) - j->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        j->len += (size_t)n;
    if (j->len >= sizeof(j->buf))
        bench_die("JSON line too long");
}

static void put_key(bench_json *j, const char *key)
{
    if (!j->first[j->depth])
        put(j, ",");
    j->first[j->depth] = 0;
    put(j, "\"%s\":", key);
}

void bench_json_begin(bench_json *j, const char *scenario)
{
    memset(j, 0, sizeof(*j));
    put(j, "{");
    j->first[0] = 1;
    bench_json_str(j, "scenario", scenario);
}

void bench_json_obj(bench_json *j, const char *key)
{
    put_key(j, key);
    put(j, "{");
    j->first[++j->depth] = 1;
}

void bench_json_end_obj(bench_json *j)
{
    put(j, "}");
    j->depth--;
}

void bench_json_str(bench_json *j, const char *key, const char *v)
{
    const char *p;

    put_key(j, key);
    put(j, "\"");
    for (p = v; *p; p++) {
        if (*p == '"' || *p == '\\')
            put(j, "\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            put(j, "\\u%04x", (unsigned char)*p);
        else
            put(j, "%c", *p);
    }
    put(j, "\"");
}

void bench_json_int(bench_json *j, const char *key, long long v)
{
    put_key(j, key);
    put(j, "%lld", v);
}

void bench_json_num(bench_json *j, const char *key, double v)
{
    put_key(j, key);
    if (isfinite(v))
        put(j, "%.6g", v);
    else
        put(j, "null");
}

void bench_json_bool(bench_json *j, const char *key, int v)
{
    put_key(j, key);
    put(j, v ? "true" : "false");
}

void bench_json_stats(bench_json *j, const char *key, const bench_stats *st)
{
    bench_json_obj(j, key);
    bench_json_int(j, "n", (long long)st->n);
    bench_json_num(j, "p50", st->p50);
    bench_json_num(j, "p90", st->p90);
    bench_json_num(j, "p99", st->p99);
    bench_json_num(j, "p99.9", st->p999);
    bench_json_num(j, "max", st->max);
    bench_json_num(j, "mean", st->mean);
    bench_json_end_obj(j);
}

void bench_json_cpu(bench_json *j, double user_s, double sys_s)
{
    bench_json_obj(j, "cpu_s");
    bench_json_num(j, "user", user_s);
    bench_json_num(j, "sys", sys_s);
    bench_json_end_obj(j);
}

int bench_json_target(bench_json *j, const char *metric, double value, double limit)
{
    int met = isfinite(value) && value <= limit;

    bench_json_obj(j, "target");
    bench_json_str(j, "metric", metric);
    bench_json_num(j, "value", value);
    bench_json_num(j, "limit", limit);
    bench_json_bool(j, "met", met);
    bench_json_end_obj(j);
    return met;
}

void bench_json_print(bench_json *j)
{
    while (j->depth > 0)
        bench_json_end_obj(j);
    put(j, "}");
    fprintf(stdout, "%s\n", j->buf);
    fflush(stdout);
}

int bench_has_part(const char *parts, const char *name)
{
    size_t n = strlen(name);
    const char *p;

    for (p = parts; (p = strstr(p, name)) != NULL; p += n)
        if ((p == parts || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}
