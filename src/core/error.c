/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const err_messages[] = {
#define REDLOCK_ERR_MSG_(name, msg) msg,
    REDLOCK_ERRNO_MAP(REDLOCK_ERR_MSG_)
#undef REDLOCK_ERR_MSG_
};

static const char *const err_names[] = {
#define REDLOCK_ERR_NAME_(name, msg) "REDLOCK_" #name,
    REDLOCK_ERRNO_MAP(REDLOCK_ERR_NAME_)
#undef REDLOCK_ERR_NAME_
};

/* Per thread, like errno: a message about one thread's call must never be
 * overwritten by another thread's failure. */
static _Thread_local char own_error[REDLOCK__ERROR_LEN];
/* A fiber brings its own (redlock__error_swap). */
static _Thread_local char *last_error_of;

#define last_error (last_error_of ? last_error_of : own_error)

char *redlock__error_swap(char *buf)
{
    char *before = last_error_of;

    last_error_of = buf;
    return before;
}

const char *redlock_strerror(int err)
{
    if (err < 0 || err >= REDLOCK_ERR_COUNT_)
        return "unknown error";
    return err_messages[err];
}

const char *redlock_err_name(int err)
{
    if (err < 0 || err >= REDLOCK_ERR_COUNT_)
        return "REDLOCK_UNKNOWN";
    return err_names[err];
}

const char *redlock_last_error(void)
{
    return last_error[0] ? last_error : "no error";
}

const char *redlock_version(void)
{
    return REDLOCK_VERSION_STRING;
}

int redlock__fail(int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, REDLOCK__ERROR_LEN, fmt, ap);
    va_end(ap);
    return code;
}

void redlock__copy_msg(char *dst, size_t cap, const char *src)
{
    size_t n;

    if (cap == 0)
        return;
    n = src ? strlen(src) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}
