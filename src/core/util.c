/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "core/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int64_t redlock__now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* xorshift64*: retry jitter and request ids need speed and independence
 * between threads, not cryptographic strength; the seed comes from the
 * kernel so two processes never share a sequence. */
static _Thread_local uint64_t rng_state;

/* The thread's id, cached: it is every blocking call's default owner, and
 * the system call cost two of the six a lock cycle made. */
static _Thread_local uint64_t thread_id;

/* A forked child's one thread inherits the forking thread's copies of
 * both: it must take its own id, and a sequence of its own. */
static void forget_thread_state(void)
{
    thread_id = 0;
    rng_state = 0;
}

static void register_fork_handler(void)
{
    (void)pthread_atfork(NULL, NULL, forget_thread_state);
}

static void watch_forks(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    (void)pthread_once(&once, register_fork_handler);
}

static uint64_t rng_next(void)
{
    uint64_t x;

    if (rng_state == 0) {
        watch_forks();
        if (getrandom(&rng_state, sizeof(rng_state), 0) !=
                (ssize_t)sizeof(rng_state) ||
            rng_state == 0)
            rng_state = (uint64_t)redlock__now_ns() ^
                        ((uint64_t)redlock__gettid() << 32) ^ 0x9e3779b97f4a7c15ULL;
    }
    x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

uint64_t redlock__rand_below(uint64_t bound)
{
    return bound ? rng_next() % bound : 0;
}

void redlock__hex_encode(const unsigned char *bytes, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex[2 * n] = '\0';
}

void redlock__rand_hex(char *hex, size_t nbytes)
{
    static const char digits[] = "0123456789abcdef";
    size_t i, n = 2 * nbytes;

    /* Sixteen digits from each draw: every request id takes twenty. */
    for (i = 0; i < n; i += 16) {
        uint64_t bits = rng_next();
        size_t j, k = n - i < 16 ? n - i : 16;

        for (j = 0; j < k; j++, bits >>= 4)
            hex[i + j] = digits[bits & 15];
    }
    hex[n] = '\0';
}

void redlock__uuid(char out[37])
{
    unsigned char b[16];
    size_t i;

    /* The client id must be unique across every process sharing a lock:
     * take it from the kernel, not from the per-thread generator. */
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        for (i = 0; i < sizeof(b); i++)
            b[i] = (unsigned char)rng_next();
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

uint64_t redlock__gettid(void)
{
    if (thread_id == 0) {
        watch_forks();
        thread_id = (uint64_t)syscall(SYS_gettid);
    }
    return thread_id;
}

char *redlock__strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

int redlock__buf_append(redlock__buf *b, const void *p, size_t n)
{
    char *dst = redlock__buf_extend(b, n);

    if (!dst)
        return -1;
    memcpy(dst, p, n);
    return 0;
}

char *redlock__buf_extend(redlock__buf *b, size_t n)
{
    char *dst;

    if (b->off > 0 && b->off == b->len)
        b->off = b->len = 0;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *data;

        /* Slide unread bytes to the front before growing. */
        if (b->off > 0) {
            memmove(b->data, b->data + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        while (cap < b->len + n)
            cap *= 2;
        if (cap != b->cap) {
            /* Not realloc: a buffer may hold a password (AUTH), and the
             * block realloc would leave behind must be wiped first. */
            data = malloc(cap);
            if (!data)
                return NULL;
            if (b->data) {
                memcpy(data, b->data, b->len);
                explicit_bzero(b->data, b->cap);
                free(b->data);
            }
            b->data = data;
            b->cap = cap;
        }
    }
    dst = b->data + b->len;
    b->len += n;
    return dst;
}

void redlock__buf_consume(redlock__buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        b->off = b->len = 0;
}


void redlock__buf_wipe(redlock__buf *b)
{
    if (b->data)
        explicit_bzero(b->data, b->cap);
    redlock__buf_free(b);
}

void redlock__buf_free(redlock__buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

struct timespec redlock__timespec(int64_t ns)
{
    struct timespec ts;

    ts.tv_sec = (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

/* By hand: the send path formats several numbers per request, and
 * snprintf's machinery cost more than the rest of the formatting. */
size_t redlock__fmt_u64(char *buf, size_t cap, uint64_t v)
{
    char tmp[20];
    size_t n = 0, len = 0, i;

    /* Most are RESP lengths of one or two digits. */
    if (v < 100 && cap > 2) {
        if (v >= 10)
            buf[n++] = (char)('0' + v / 10);
        buf[n++] = (char)('0' + v % 10);
        buf[n] = '\0';
        return n;
    }
    do {
        tmp[len++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (cap == 0)
        return 0;
    /* Truncated to the leading digits, as snprintf would (callers size it). */
    n = len > cap - 1 ? cap - 1 : len;
    for (i = 0; i < n; i++)
        buf[i] = tmp[len - 1 - i];
    buf[n] = '\0';
    return n;
}

void *redlock__scratch(void *own, size_t room, size_t n)
{
    if (n <= room)
        return memset(own, 0, n);
    return calloc(n, 1);
}

void redlock__scratch_free(void *p, const void *own)
{
    if (p != own)
        free(p);
}

void redlock__fmt_i64(char *buf, size_t cap, int64_t v)
{
    if (v < 0 && cap > 1) {
        buf[0] = '-';
        redlock__fmt_u64(buf + 1, cap - 1, (uint64_t)0 - (uint64_t)v);
        return;
    }
    redlock__fmt_u64(buf, cap, (uint64_t)v);
}
