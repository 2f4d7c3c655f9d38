/* SPDX-License-Identifier: BSD-3-Clause */
/* Error codes and the thread-local "last error" message. */
#ifndef REDLOCK_CORE_ERROR_H
#define REDLOCK_CORE_ERROR_H

#include "redlock/redlock.h"

#if defined(__GNUC__)
#define REDLOCK__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define REDLOCK__PRINTF(a, b)
#endif

/* Records a message for redlock_last_error() and returns code, so callers
 * can write `return redlock__fail(REDLOCK_EINVAL, "lease %d", x);`. */
int redlock__fail(int code, const char *fmt, ...) REDLOCK__PRINTF(2, 3);

/* The size of a last-error message, terminator included. */
#define REDLOCK__ERROR_LEN 256

/* From now on this thread's last error lives in buf (REDLOCK__ERROR_LEN
 * bytes; NULL: the thread's own), until the next swap; returns what was
 * used before. A fiber keeps its own, so operations interleaved on one
 * thread do not overwrite each other's messages. */
char *redlock__error_swap(char *buf);

/* Copies a bounded message into dst (always terminated). */
void redlock__copy_msg(char *dst, size_t cap, const char *src);

#endif
