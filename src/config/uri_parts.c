/* SPDX-License-Identifier: BSD-3-Clause */
/* The components every node URI scheme shares (see uri_parts.h). */
#define _POSIX_C_SOURCE 200809L /* inet_pton() under -std=c11 */

#include "config/uri_parts.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int redlock__uri_fail(redlock__uri_parser *p, const char *fmt, ...)
{
    va_list ap;

    if (p->err == NULL || p->err_cap == 0)
        return REDLOCK_EURI;
    va_start(ap, fmt);
    vsnprintf(p->err, p->err_cap, fmt, ap);
    va_end(ap);
    return REDLOCK_EURI;
}

int redlock__uri_oom(redlock__uri_parser *p)
{
    if (p->err != NULL)
        redlock__copy_msg(p->err, p->err_cap, "out of memory");
    return REDLOCK_ENOMEM;
}

/* Copies n bytes of s for quoting in a message: at most URI_ECHO_MAX of
 * them, with bytes outside printable ASCII shown as '?' so the message
 * stays one readable line whatever the input holds. */
void redlock__uri_echo(char *dst, size_t cap, const char *s, size_t n)
{
    size_t i, j = 0;
    int cut = n > URI_ECHO_MAX;

    if (cut)
        n = URI_ECHO_MAX;
    for (i = 0; i < n && j + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (cut && j + 3 < cap) {
        memcpy(dst + j, "...", 3);
        j += 3;
    }
    dst[j] = '\0';
}

char *redlock__uri_strndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (d == NULL)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* Zeroes n bytes of a secret, then frees it, so a password does not
 * linger in freed heap memory. The volatile pointer keeps the compiler
 * from dropping stores it can prove are dead before free(). */
void redlock__uri_free_secret(char *s, size_t n)
{
    volatile char *v = s;
    size_t i;

    if (s == NULL)
        return;
    for (i = 0; i < n; i++)
        v[i] = '\0';
    free(s);
}

int redlock__uri_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int redlock__uri_is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int redlock__uri_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Compares s[0..n) with the lower-case word, ignoring ASCII case. */
int redlock__uri_scheme_is(const char *s, size_t n, const char *word)
{
    size_t i;

    if (strlen(word) != n)
        return 0;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != word[i])
            return 0;
    }
    return 1;
}

/* Parses decimal digits s[0..n) into *val. Returns 0, -1 when a byte is
 * not a digit (or n == 0) and -2 when the value exceeds max. Accumulation
 * stops once the value passes max, so no digit string can overflow. */
int redlock__uri_parse_decimal(const char *s, size_t n, long long max,
                             long long *val)
{
    long long v = 0;
    size_t i;

    if (n == 0)
        return -1;
    for (i = 0; i < n; i++) {
        if (!redlock__uri_is_digit(s[i]))
            return -1;
        if (v <= max)
            v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -2;
    *val = v;
    return 0;
}

/* Percent-decodes s[0..n) into a new string at *dst; an empty input
 * leaves *dst NULL (absent). what names the part for messages, which on
 * purpose never quote it: it may be a password. */
int redlock__uri_decode(redlock__uri_parser *p, const char *s, size_t n,
                      const char *what, char **dst)
{
    size_t i, j = 0;
    char *d;

    if (n == 0)
        return REDLOCK_OK;
    d = malloc(n + 1);
    if (d == NULL)
        return redlock__uri_oom(p);
    for (i = 0; i < n; i++) {
        int hi, lo;

        if (s[i] != '%') {
            d[j++] = s[i];
            continue;
        }
        hi = i + 1 < n ? redlock__uri_hex_value(s[i + 1]) : -1;
        lo = i + 2 < n ? redlock__uri_hex_value(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            redlock__uri_free_secret(d, j);
            return redlock__uri_fail(p, "bad percent-escape in %s "
                               "(expected '%%' and two hex digits)", what);
        }
        if (hi == 0 && lo == 0) {
            redlock__uri_free_secret(d, j);
            return redlock__uri_fail(p, "percent-escape %%00 (NUL) in %s is not "
                               "allowed", what);
        }
        d[j++] = (char)(hi * 16 + lo);
        i += 2;
    }
    d[j] = '\0';
    *dst = d;
    return REDLOCK_OK;
}

/* Splits "user[:password]" at its first ':', so a user name cannot hold a
 * raw ':' but a password can. */
int redlock__uri_parse_userinfo(redlock__uri_parser *p, const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t user_len = colon ? (size_t)(colon - s) : n;
    int rc;

    rc = redlock__uri_decode(p, s, user_len, "user name", &p->u.username);
    if (rc != REDLOCK_OK || colon == NULL)
        return rc;
    return redlock__uri_decode(p, colon + 1, n - user_len - 1, "password",
                      &p->u.password);
}

int redlock__uri_parse_ipv6(redlock__uri_parser *p, const char *s, const char *end,
                          const char **next)
{
    const char *close = memchr(s, ']', (size_t)(end - s));
    size_t n;
    char buf[64];
    unsigned char addr[16];
    char shown[URI_ECHO_MAX + 4];
    size_t i;

    if (close == NULL)
        return redlock__uri_fail(p, "unterminated '[' in host (missing ']')");
    n = (size_t)(close - s - 1);
    if (n == 0)
        return redlock__uri_fail(p, "empty IPv6 address '[]' in host");
    redlock__uri_echo(shown, sizeof(shown), s + 1, n);
    for (i = 0; i < n; i++) {
        char c = s[1 + i];
        if (redlock__uri_hex_value(c) < 0 && c != ':' && c != '.')
            return redlock__uri_fail(p, "bad IPv6 address '[%s]' in host", shown);
    }
    /* inet_pton() rejects what the character check lets through, such as
     * "[1.2.3.4]" or "[:::]", here rather than at connect time. */
    if (n >= sizeof(buf))
        return redlock__uri_fail(p, "bad IPv6 address '[%s]' in host", shown);
    memcpy(buf, s + 1, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET6, buf, addr) != 1)
        return redlock__uri_fail(p, "bad IPv6 address '[%s]' in host", shown);
    if (close + 1 < end && close[1] != ':' && close[1] != '/') {
        redlock__uri_echo(shown, sizeof(shown), close + 1, (size_t)(end - close - 1));
        return redlock__uri_fail(p, "unexpected '%s' after ']' in host", shown);
    }
    p->u.host = redlock__uri_strndup(s + 1, n);
    if (p->u.host == NULL)
        return redlock__uri_oom(p);
    *next = close + 1;
    return REDLOCK_OK;
}

/* A host name or IPv4 address runs up to ':', '/', '?', '#' or the end;
 * what follows is the port, the db or trailing junk. */
int redlock__uri_parse_hostname(redlock__uri_parser *p, const char *s, const char *end,
                              const char **next)
{
    const char *e = s;
    char shown[URI_ECHO_MAX + 4];

    while (e < end && strchr(":/?#", *e) == NULL) {
        if (!redlock__uri_is_alpha(*e) && !redlock__uri_is_digit(*e) && *e != '.'
            && *e != '-') {
            redlock__uri_echo(shown, sizeof(shown), e, 1);
            return redlock__uri_fail(p, "bad character '%s' in host", shown);
        }
        e++;
    }
    if (e == s)
        return redlock__uri_fail(p, "empty host");
    if (e - s > URI_HOST_MAX)
        return redlock__uri_fail(p, "host name longer than %d bytes", URI_HOST_MAX);
    p->u.host = redlock__uri_strndup(s, (size_t)(e - s));
    if (p->u.host == NULL)
        return redlock__uri_oom(p);
    *next = e;
    return REDLOCK_OK;
}

int redlock__uri_parse_port(redlock__uri_parser *p, const char *s, size_t n)
{
    char shown[URI_ECHO_MAX + 4];
    long long v = 0;
    int rc;

    if (n == 0)
        return redlock__uri_fail(p, "empty port after ':'");
    rc = redlock__uri_parse_decimal(s, n, 65535, &v);
    redlock__uri_echo(shown, sizeof(shown), s, n);
    if (rc == -1)
        return redlock__uri_fail(p, "port '%s' is not a number", shown);
    if (rc == -2 || v == 0)
        return redlock__uri_fail(p, "port %s out of range 1..65535", shown);
    p->u.port = (int)v;
    return REDLOCK_OK;
}

/* An empty db means 0 after a bare '/', but is an error in "?db=". */
int redlock__uri_parse_db(redlock__uri_parser *p, const char *s, size_t n)
{
    char shown[URI_ECHO_MAX + 4];
    long long v = 0;
    int rc;

    rc = redlock__uri_parse_decimal(s, n, URI_DB_MAX, &v);
    redlock__uri_echo(shown, sizeof(shown), s, n);
    if (rc == -1)
        return redlock__uri_fail(p, "db '%s' is not a number", shown);
    if (rc == -2)
        return redlock__uri_fail(p, "db %s out of range 0..%lld", shown, URI_DB_MAX);
    p->u.db = (int)v;
    return REDLOCK_OK;
}

int redlock__uri_trailing_junk(redlock__uri_parser *p, const char *s, const char *end)
{
    char shown[URI_ECHO_MAX + 4];

    redlock__uri_echo(shown, sizeof(shown), s, (size_t)(end - s));
    return redlock__uri_fail(p, "trailing junk '%s'", shown);
}

/* The span of s..end up to the first byte of stop (or end). */
size_t redlock__uri_span(const char *s, const char *end, const char *stop)
{
    const char *e = s;

    while (e < end && strchr(stop, *e) == NULL)
        e++;
    return (size_t)(e - s);
}

/* "[user[:password]@]" at *s, up to the last '@' before end (a password
 * may hold '@' percent-encoded or not); *s moves past it. */
int redlock__uri_skip_userinfo(redlock__uri_parser *p, const char **s, const char *end)
{
    const char *q, *at = NULL;
    int rc;

    for (q = *s; q < end; q++)
        if (*q == '@')
            at = q;
    if (at == NULL)
        return REDLOCK_OK;
    rc = redlock__uri_parse_userinfo(p, *s, (size_t)(at - *s));
    if (rc == REDLOCK_OK)
        *s = at + 1;
    return rc;
}

/* "/[db]" at *s (which points at the '/'): the db up to a stop character,
 * if any; *s moves past what was read. */
int redlock__uri_parse_db_path(redlock__uri_parser *p, const char **s, const char *end, const char *stop)
{
    size_t n;
    int rc;

    (*s)++;
    n = redlock__uri_span(*s, end, stop);
    if (n > 0) {
        rc = redlock__uri_parse_db(p, *s, n);
        if (rc != REDLOCK_OK)
            return rc;
        *s += n;
    }
    return REDLOCK_OK;
}
