/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A bounded writer of the Prometheus text exposition format 0.0.4: HELP
 * and TYPE lines, samples, escaped label values, cumulative histograms.
 * Knows nothing of clients; the caller passes plain numbers, so the
 * formatting is testable on its own.
 */
#ifndef REDLOCK_CORE_PROM_H
#define REDLOCK_CORE_PROM_H

#include <stddef.h>
#include <stdint.h>

typedef struct redlock__prom {
    char *buf;      /* may be NULL when cap is 0 */
    size_t cap;
    size_t len;     /* bytes of the whole text, also those that did not fit */
} redlock__prom;

/* "# HELP name help" and "# TYPE name type" (help has no '\\' or newline). */
void redlock__prom_header(redlock__prom *p, const char *name, const char *type,
                          const char *help);
/* A counter without labels: its header and its one sample. */
void redlock__prom_counter(redlock__prom *p, const char *name, const char *help, uint64_t v);
/* name{label="value"} v, with value escaped (backslash, quote, newline). */
void redlock__prom_labeled(redlock__prom *p, const char *name, const char *label,
                           const char *value, uint64_t v);
/*
 * A histogram in seconds from n power-of-two microsecond buckets (bucket i
 * counts [2^i, 2^(i+1)) us; the last one everything above): header,
 * cumulative _bucket lines with le = 2^(i+1) us for every bucket but the
 * last, le="+Inf", _sum and _count.
 */
void redlock__prom_histogram_us(redlock__prom *p, const char *name, const char *help,
                                const uint64_t *buckets, size_t n, uint64_t sum_us);
/* NUL-terminates the text, cut back to whole lines if it did not fit.
 * Returns 0 if everything fit, -1 otherwise. */
int redlock__prom_finish(redlock__prom *p);

#endif
