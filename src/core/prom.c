/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Prometheus text format, written into a caller's buffer like
 * snprintf: everything is counted, only what fits is stored, and the end
 * cuts back to the last whole line so a reader never sees half a sample.
 * Seconds are printed from integer microseconds ("0.000512"), exactly,
 * with no floating point.
 */
#include "core/prom.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void put(redlock__prom *p, const char *s, size_t n)
{
    if (p->len < p->cap) {
        size_t room = p->cap - p->len;

        memcpy(p->buf + p->len, s, n < room ? n : room);
    }
    p->len += n;
}

static void putf(redlock__prom *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(redlock__prom *p, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    /* Only names and numbers come here: they always fit tmp. */
    if (n > 0)
        put(p, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Label values may hold any byte; the format escapes exactly these. */
static void put_label_value(redlock__prom *p, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '\\')
            put(p, "\\\\", 2);
        else if (*s == '"')
            put(p, "\\\"", 2);
        else if (*s == '\n')
            put(p, "\\n", 2);
        else
            put(p, s, 1);
    }
}

static void put_seconds(redlock__prom *p, uint64_t us)
{
    putf(p, "%llu.%06llu", (unsigned long long)(us / 1000000),
         (unsigned long long)(us % 1000000));
}

void redlock__prom_header(redlock__prom *p, const char *name, const char *type,
                          const char *help)
{
    putf(p, "# HELP %s ", name);
    put(p, help, strlen(help));
    putf(p, "\n# TYPE %s %s\n", name, type);
}

void redlock__prom_counter(redlock__prom *p, const char *name, const char *help, uint64_t v)
{
    redlock__prom_header(p, name, "counter", help);
    putf(p, "%s %llu\n", name, (unsigned long long)v);
}

void redlock__prom_labeled(redlock__prom *p, const char *name, const char *label,
                           const char *value, uint64_t v)
{
    putf(p, "%s{%s=\"", name, label);
    put_label_value(p, value);
    putf(p, "\"} %llu\n", (unsigned long long)v);
}

void redlock__prom_histogram_us(redlock__prom *p, const char *name, const char *help,
                                const uint64_t *buckets, size_t n, uint64_t sum_us)
{
    uint64_t count = 0;
    size_t i;

    redlock__prom_header(p, name, "histogram", help);
    for (i = 0; i < n; i++) {
        count += buckets[i];
        if (i + 1 == n)
            break;
        putf(p, "%s_bucket{le=\"", name);
        put_seconds(p, (uint64_t)1 << (i + 1));
        putf(p, "\"} %llu\n", (unsigned long long)count);
    }
    putf(p, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)count);
    putf(p, "%s_sum ", name);
    put_seconds(p, sum_us);
    putf(p, "\n%s_count %llu\n", name, (unsigned long long)count);
}

int redlock__prom_finish(redlock__prom *p)
{
    size_t end;

    if (p->cap == 0)
        return p->len == 0 ? 0 : -1;
    if (p->len < p->cap) {
        p->buf[p->len] = '\0';
        return 0;
    }
    /* Keep the whole lines among the first cap - 1 bytes. */
    for (end = p->cap - 1; end > 0 && p->buf[end - 1] != '\n'; end--)
        ;
    p->buf[end] = '\0';
    return -1;
}
