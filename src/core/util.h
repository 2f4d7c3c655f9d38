/* SPDX-License-Identifier: BSD-3-Clause */
/* Clock, randomness and small helpers shared by every module. */
#ifndef REDLOCK_CORE_UTIL_H
#define REDLOCK_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define REDLOCK__NS_PER_MS 1000000LL

/* CLOCK_MONOTONIC in nanoseconds: every deadline and validity uses it. */
int64_t redlock__now_ns(void);

/* Uniform random integer in [0, bound) from a per-thread generator seeded
 * from getrandom(); bound 0 returns 0. */
uint64_t redlock__rand_below(uint64_t bound);

/* Writes n bytes as 2 * n lowercase hex digits plus a NUL into hex. */
void redlock__hex_encode(const unsigned char *bytes, size_t n, char *hex);

/* Fills hex (2 * nbytes + 1 bytes) with random lowercase hex digits. */
void redlock__rand_hex(char *hex, size_t nbytes);

/* A random RFC 4122 version 4 UUID, 36 characters plus NUL. */
void redlock__uuid(char out[37]);

/* The calling thread's kernel id. */
uint64_t redlock__gettid(void);

/* strdup that returns NULL for NULL. */
char *redlock__strdup(const char *s);

/* A growable byte buffer with a read offset, for socket I/O. */
typedef struct redlock__buf {
    char *data;
    size_t len; /* bytes stored */
    size_t off; /* bytes already consumed from the front */
    size_t cap;
} redlock__buf;

int redlock__buf_append(redlock__buf *b, const void *p, size_t n);
/* Grows b by n bytes and returns where to write them, or NULL (out of
 * memory, b unchanged). */
char *redlock__buf_extend(redlock__buf *b, size_t n);
void redlock__buf_consume(redlock__buf *b, size_t n);
void redlock__buf_free(redlock__buf *b);
/* A duration or a CLOCK_MONOTONIC time in ns as a timespec. */
struct timespec redlock__timespec(int64_t ns);
/* v in decimal, as scripts take their numeric arguments. */
void redlock__fmt_i64(char *buf, size_t cap, int64_t v);
/* v in decimal; returns the digits written (cap >= 21 holds any). */
size_t redlock__fmt_u64(char *buf, size_t cap, uint64_t v);
/* Zeroes the whole capacity (it may have held a password), then frees. */
void redlock__buf_wipe(redlock__buf *b);
/* n zeroed bytes of per-call scratch: the caller's own buffer of size
 * `room` when they fit (a lock's few members: no allocation on every
 * call), else the heap; NULL when out of memory. Give it back with
 * redlock__scratch_free(p, own). */
void *redlock__scratch(void *own, size_t room, size_t n);
void redlock__scratch_free(void *p, const void *own);
static inline size_t redlock__buf_pending(const redlock__buf *b)
{
    return b->len - b->off;
}

#endif
