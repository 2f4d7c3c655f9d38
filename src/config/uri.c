/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Node URI parser. The accepted grammar:
 *
 *   redis://[user[:password]@]host[:port][/[db]]    TCP, port 6379, db 0
 *   rediss://...                                    the same over TLS
 *   unix:///absolute/path[?db=N]                    Unix domain socket
 *   redis-sentinel://[user[:password]@]host[:port][,host[:port]...][/[db]]#MASTER
 *   rediss-sentinel://...                           the same over TLS
 *
 * A sentinel URI is Lettuce's form: the hosts are sentinels (port 26379
 * by default), MASTER is the name they monitor, and the user info and db
 * are for the data nodes (the master they name), as in Lettuce. Sentinel
 * credentials come from the client options, never from the URI. The user
 * info ends at the last '@' before the last '#', so a password may hold
 * a raw '#' too; MASTER is made of [A-Za-z0-9._:-].
 *
 * Scheme names are case-insensitive. host is a name or IPv4 address made
 * of [A-Za-z0-9.-], or an IPv6 literal in brackets ("[::1]"). user and
 * password may be percent-encoded; empty ones count as absent (NULL).
 *
 * The user info is everything before the LAST '@' of the URI, as most URI
 * parsers do, so a raw '@', ':' or '/' in a password still works
 * ("redis://:p@ss/word@host"). Nothing after the host may contain '@'
 * (port and db are digits), so this never takes part of the host. It also
 * means no error message ever quotes part of a password: messages only
 * echo what comes after that '@'.
 *
 * The socket path is taken literally (no percent-decoding), so paths with
 * '@' or '%' (systemd instance names) need no escaping.
 */
#define _POSIX_C_SOURCE 200809L /* inet_pton() under -std=c11 */

#include "config/uri.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define URI_MAX_LEN 4096
/* sizeof(((struct sockaddr_un *)0)->sun_path) is 108 on Linux, and the
 * path needs its terminating NUL inside it. */
#define URI_UNIX_PATH_MAX 107
/* A DNS name is at most 253 characters; a little slack for a final '.'. */
#define URI_HOST_MAX 255
/* Longest quoted token in a message, so one bad URI cannot flood a log. */
#define URI_ECHO_MAX 32
#define URI_DEFAULT_PORT 6379
#define URI_DB_MAX 2147483647LL

#define URI_MASTER_NAME_MAX 255

typedef struct uri_parser {
    redlock__node_uri u; /* built here, moved to *out only on success */
    int sentinel;        /* the scheme was redis-sentinel or rediss-sentinel */
    char *err;
    size_t err_cap;
} uri_parser;

static int uri_fail(uri_parser *p, const char *fmt, ...)
    REDLOCK__PRINTF(2, 3);

static int uri_fail(uri_parser *p, const char *fmt, ...)
{
    va_list ap;

    if (p->err == NULL || p->err_cap == 0)
        return REDLOCK_EURI;
    va_start(ap, fmt);
    vsnprintf(p->err, p->err_cap, fmt, ap);
    va_end(ap);
    return REDLOCK_EURI;
}

static int uri_oom(uri_parser *p)
{
    if (p->err != NULL)
        redlock__copy_msg(p->err, p->err_cap, "out of memory");
    return REDLOCK_ENOMEM;
}

/* Copies n bytes of s for quoting in a message: at most URI_ECHO_MAX of
 * them, with bytes outside printable ASCII shown as '?' so the message
 * stays one readable line whatever the input holds. */
static void uri_echo(char *dst, size_t cap, const char *s, size_t n)
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

static char *uri_strndup(const char *s, size_t n)
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
static void uri_free_secret(char *s, size_t n)
{
    volatile char *v = s;
    size_t i;

    if (s == NULL)
        return;
    for (i = 0; i < n; i++)
        v[i] = '\0';
    free(s);
}

static int uri_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int uri_is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int uri_hex_value(char c)
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
static int uri_scheme_is(const char *s, size_t n, const char *word)
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
static int uri_parse_decimal(const char *s, size_t n, long long max,
                             long long *val)
{
    long long v = 0;
    size_t i;

    if (n == 0)
        return -1;
    for (i = 0; i < n; i++) {
        if (!uri_is_digit(s[i]))
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
static int uri_decode(uri_parser *p, const char *s, size_t n,
                      const char *what, char **dst)
{
    size_t i, j = 0;
    char *d;

    if (n == 0)
        return REDLOCK_OK;
    d = malloc(n + 1);
    if (d == NULL)
        return uri_oom(p);
    for (i = 0; i < n; i++) {
        int hi, lo;

        if (s[i] != '%') {
            d[j++] = s[i];
            continue;
        }
        hi = i + 1 < n ? uri_hex_value(s[i + 1]) : -1;
        lo = i + 2 < n ? uri_hex_value(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            uri_free_secret(d, j);
            return uri_fail(p, "bad percent-escape in %s "
                               "(expected '%%' and two hex digits)", what);
        }
        if (hi == 0 && lo == 0) {
            uri_free_secret(d, j);
            return uri_fail(p, "percent-escape %%00 (NUL) in %s is not "
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
static int uri_parse_userinfo(uri_parser *p, const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t user_len = colon ? (size_t)(colon - s) : n;
    int rc;

    rc = uri_decode(p, s, user_len, "user name", &p->u.username);
    if (rc != REDLOCK_OK || colon == NULL)
        return rc;
    return uri_decode(p, colon + 1, n - user_len - 1, "password",
                      &p->u.password);
}

static int uri_parse_ipv6(uri_parser *p, const char *s, const char *end,
                          const char **next)
{
    const char *close = memchr(s, ']', (size_t)(end - s));
    size_t n;
    char buf[64];
    unsigned char addr[16];
    char shown[URI_ECHO_MAX + 4];
    size_t i;

    if (close == NULL)
        return uri_fail(p, "unterminated '[' in host (missing ']')");
    n = (size_t)(close - s - 1);
    if (n == 0)
        return uri_fail(p, "empty IPv6 address '[]' in host");
    uri_echo(shown, sizeof(shown), s + 1, n);
    for (i = 0; i < n; i++) {
        char c = s[1 + i];
        if (uri_hex_value(c) < 0 && c != ':' && c != '.')
            return uri_fail(p, "bad IPv6 address '[%s]' in host", shown);
    }
    /* inet_pton() rejects what the character check lets through, such as
     * "[1.2.3.4]" or "[:::]", here rather than at connect time. */
    if (n >= sizeof(buf))
        return uri_fail(p, "bad IPv6 address '[%s]' in host", shown);
    memcpy(buf, s + 1, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET6, buf, addr) != 1)
        return uri_fail(p, "bad IPv6 address '[%s]' in host", shown);
    if (close + 1 < end && close[1] != ':' && close[1] != '/') {
        uri_echo(shown, sizeof(shown), close + 1, (size_t)(end - close - 1));
        return uri_fail(p, "unexpected '%s' after ']' in host", shown);
    }
    p->u.host = uri_strndup(s + 1, n);
    if (p->u.host == NULL)
        return uri_oom(p);
    *next = close + 1;
    return REDLOCK_OK;
}

/* A host name or IPv4 address runs up to ':', '/', '?', '#' or the end;
 * what follows is the port, the db or trailing junk. */
static int uri_parse_hostname(uri_parser *p, const char *s, const char *end,
                              const char **next)
{
    const char *e = s;
    char shown[URI_ECHO_MAX + 4];

    while (e < end && strchr(":/?#", *e) == NULL) {
        if (!uri_is_alpha(*e) && !uri_is_digit(*e) && *e != '.'
            && *e != '-') {
            uri_echo(shown, sizeof(shown), e, 1);
            return uri_fail(p, "bad character '%s' in host", shown);
        }
        e++;
    }
    if (e == s)
        return uri_fail(p, "empty host");
    if (e - s > URI_HOST_MAX)
        return uri_fail(p, "host name longer than %d bytes", URI_HOST_MAX);
    p->u.host = uri_strndup(s, (size_t)(e - s));
    if (p->u.host == NULL)
        return uri_oom(p);
    *next = e;
    return REDLOCK_OK;
}

static int uri_parse_port(uri_parser *p, const char *s, size_t n)
{
    char shown[URI_ECHO_MAX + 4];
    long long v = 0;
    int rc;

    if (n == 0)
        return uri_fail(p, "empty port after ':'");
    rc = uri_parse_decimal(s, n, 65535, &v);
    uri_echo(shown, sizeof(shown), s, n);
    if (rc == -1)
        return uri_fail(p, "port '%s' is not a number", shown);
    if (rc == -2 || v == 0)
        return uri_fail(p, "port %s out of range 1..65535", shown);
    p->u.port = (int)v;
    return REDLOCK_OK;
}

/* An empty db means 0 after a bare '/', but is an error in "?db=". */
static int uri_parse_db(uri_parser *p, const char *s, size_t n)
{
    char shown[URI_ECHO_MAX + 4];
    long long v = 0;
    int rc;

    rc = uri_parse_decimal(s, n, URI_DB_MAX, &v);
    uri_echo(shown, sizeof(shown), s, n);
    if (rc == -1)
        return uri_fail(p, "db '%s' is not a number", shown);
    if (rc == -2)
        return uri_fail(p, "db %s out of range 0..%lld", shown, URI_DB_MAX);
    p->u.db = (int)v;
    return REDLOCK_OK;
}

static int uri_trailing_junk(uri_parser *p, const char *s, const char *end)
{
    char shown[URI_ECHO_MAX + 4];

    uri_echo(shown, sizeof(shown), s, (size_t)(end - s));
    return uri_fail(p, "trailing junk '%s'", shown);
}

/* The span of s..end up to the first byte of stop (or end). */
static size_t uri_span(const char *s, const char *end, const char *stop)
{
    const char *e = s;

    while (e < end && strchr(stop, *e) == NULL)
        e++;
    return (size_t)(e - s);
}

/* "[user[:password]@]" at *s, up to the last '@' before end (a password
 * may hold '@' percent-encoded or not); *s moves past it. */
static int uri_skip_userinfo(uri_parser *p, const char **s, const char *end)
{
    const char *q, *at = NULL;
    int rc;

    for (q = *s; q < end; q++)
        if (*q == '@')
            at = q;
    if (at == NULL)
        return REDLOCK_OK;
    rc = uri_parse_userinfo(p, *s, (size_t)(at - *s));
    if (rc == REDLOCK_OK)
        *s = at + 1;
    return rc;
}

/* "/[db]" at *s (which points at the '/'): the db up to a stop character,
 * if any; *s moves past what was read. */
static int uri_parse_db_path(uri_parser *p, const char **s, const char *end, const char *stop)
{
    size_t n;
    int rc;

    (*s)++;
    n = uri_span(*s, end, stop);
    if (n > 0) {
        rc = uri_parse_db(p, *s, n);
        if (rc != REDLOCK_OK)
            return rc;
        *s += n;
    }
    return REDLOCK_OK;
}

/* "[user[:password]@]host[:port][/[db]]" after "redis://". */
static int uri_parse_tcp(uri_parser *p, const char *s, const char *end)
{
    const char *q;
    size_t n;
    int rc;

    rc = uri_skip_userinfo(p, &s, end);
    if (rc != REDLOCK_OK)
        return rc;
    /* Most likely a node list without schemes ("redis://a:1,b:2"): lists
     * split only before a scheme, since sentinel URIs hold commas. */
    for (q = s; q < end; q++)
        if (*q == ',')
            return uri_fail(p, "',' after the host: in a node list every node needs its "
                               "scheme (redis://a:1,redis://b:2); only redis-sentinel:// "
                               "URIs list several hosts");

    if (s < end && *s == '[')
        rc = uri_parse_ipv6(p, s, end, &s);
    else
        rc = uri_parse_hostname(p, s, end, &s);
    if (rc != REDLOCK_OK)
        return rc;

    p->u.port = URI_DEFAULT_PORT;
    if (s < end && *s == ':') {
        s++;
        n = uri_span(s, end, "/?#");
        rc = uri_parse_port(p, s, n);
        if (rc != REDLOCK_OK)
            return rc;
        s += n;
    }

    if (s < end && *s == '/') {
        rc = uri_parse_db_path(p, &s, end, "/?#");
        if (rc != REDLOCK_OK)
            return rc;
    }

    if (s < end)
        return uri_trailing_junk(p, s, end);
    return REDLOCK_OK;
}

/* One "host[:port]" of a sentinel list, s..end holding no ',' or '/'. */
static int uri_parse_sentinel_host(uri_parser *p, const char *s, const char *end)
{
    redlock__sentinel_addr *a;
    size_t n;
    int rc;

    if (s == end)
        return uri_fail(p, "sentinel %d: empty host", p->u.n_sentinels + 1);
    if (p->u.n_sentinels == REDLOCK__MAX_SENTINELS)
        return uri_fail(p, "more than %d sentinels", REDLOCK__MAX_SENTINELS);
    if (*s == '[')
        rc = uri_parse_ipv6(p, s, end, &s);
    else
        rc = uri_parse_hostname(p, s, end, &s);
    if (rc != REDLOCK_OK)
        return rc;
    p->u.port = REDLOCK__SENTINEL_DEFAULT_PORT;
    if (s < end && *s == ':') {
        s++;
        n = (size_t)(end - s);
        rc = uri_parse_port(p, s, n);
        if (rc != REDLOCK_OK)
            return rc;
        s += n;
    }
    if (s < end)
        return uri_trailing_junk(p, s, end);
    a = &p->u.sentinels[p->u.n_sentinels++];
    a->host = p->u.host;
    a->port = p->u.port;
    p->u.host = NULL;
    return REDLOCK_OK;
}

/* "[user[:password]@]host[:port][,host[:port]...][/[db]]#MASTER" after
 * "redis-sentinel://". */
static int uri_parse_sentinel(uri_parser *p, const char *s, const char *end)
{
    const char *hash = NULL, *q, *list_end;
    char shown[URI_ECHO_MAX + 4];
    size_t n;
    int rc;

    for (q = s; q < end; q++)
        if (*q == '#')
            hash = q;
    if (hash == NULL)
        return uri_fail(p, "no master name: a sentinel URI ends in '#MASTERNAME'");
    n = (size_t)(end - hash - 1);
    if (n == 0)
        return uri_fail(p, "empty master name after '#'");
    if (n > URI_MASTER_NAME_MAX)
        return uri_fail(p, "master name longer than %d bytes", URI_MASTER_NAME_MAX);
    for (q = hash + 1; q < end; q++) {
        if (!uri_is_alpha(*q) && !uri_is_digit(*q) && strchr("._:-", *q) == NULL) {
            uri_echo(shown, sizeof(shown), q, 1);
            return uri_fail(p, "bad character '%s' in master name (allowed: letters, "
                               "digits, '.', '_', ':', '-')", shown);
        }
    }
    if (!(p->u.master_name = uri_strndup(hash + 1, n)))
        return uri_oom(p);
    end = hash;

    rc = uri_skip_userinfo(p, &s, end);
    if (rc != REDLOCK_OK)
        return rc;
    if (!(p->u.sentinels = calloc(REDLOCK__MAX_SENTINELS, sizeof(*p->u.sentinels))))
        return uri_oom(p);
    list_end = s + uri_span(s, end, "/");
    if (s == list_end)
        return uri_fail(p, "empty host (a sentinel URI needs at least one sentinel)");
    for (;;) {
        n = uri_span(s, list_end, ",");
        rc = uri_parse_sentinel_host(p, s, s + n);
        if (rc != REDLOCK_OK)
            return rc;
        s += n;
        if (s == list_end)
            break;
        s++; /* ',' */
        if (s == list_end)
            return uri_fail(p, "sentinel %d: empty host", p->u.n_sentinels + 1);
    }
    if (s < end) { /* '/' */
        rc = uri_parse_db_path(p, &s, end, "/");
        if (rc != REDLOCK_OK)
            return rc;
    }
    if (s < end)
        return uri_trailing_junk(p, s, end);
    /* The first sentinel stands in as host and port (see uri.h). */
    p->u.port = p->u.sentinels[0].port;
    if (!(p->u.host = uri_strndup(p->u.sentinels[0].host, strlen(p->u.sentinels[0].host))))
        return uri_oom(p);
    return REDLOCK_OK;
}

/* "db=N" is the only query parameter, and may appear once. */
static int uri_parse_unix_query(uri_parser *p, const char *s, const char *end)
{
    char shown[URI_ECHO_MAX + 4];
    int seen_db = 0;

    for (;;) {
        size_t n = uri_span(s, end, "&");
        size_t name_len = uri_span(s, s + n, "=");
        int rc;

        if (n == 0)
            return uri_fail(p, "empty query parameter");
        if (name_len != 2 || memcmp(s, "db", 2) != 0) {
            uri_echo(shown, sizeof(shown), s, name_len);
            return uri_fail(p, "unknown query parameter '%s' "
                               "(only db is allowed)", shown);
        }
        if (seen_db)
            return uri_fail(p, "query parameter db given twice");
        if (name_len == n || n == 3)
            return uri_fail(p, "empty db in query (expected '?db=N')");
        rc = uri_parse_db(p, s + 3, n - 3);
        if (rc != REDLOCK_OK)
            return rc;
        seen_db = 1;
        s += n;
        if (s == end)
            return REDLOCK_OK;
        s++; /* '&' */
    }
}

/* "/absolute/path[?db=N]" after "unix://". */
static int uri_parse_unix(uri_parser *p, const char *s, const char *end)
{
    size_t n;

    if (s == end || *s != '/')
        return uri_fail(p, "unix URI must be 'unix:///absolute/path' "
                           "(no host or user info)");
    n = uri_span(s, end, "?");
    if (n == 1)
        return uri_fail(p, "empty socket path");
    if (n > URI_UNIX_PATH_MAX)
        return uri_fail(p, "socket path is %zu bytes, longer than %d", n,
                        URI_UNIX_PATH_MAX);
    p->u.path = uri_strndup(s, n);
    if (p->u.path == NULL)
        return uri_oom(p);
    s += n;
    if (s < end)
        return uri_parse_unix_query(p, s + 1, end);
    return REDLOCK_OK;
}

/* Reads the scheme and its "://", setting the kind; *rest gets what
 * follows. */
static int uri_parse_scheme(uri_parser *p, const char *s, const char *end,
                            const char **rest)
{
    const char *e = s;
    char shown[URI_ECHO_MAX + 4];
    size_t n;

    /* RFC 3986 scheme characters, so "host:6379" reads as scheme "host"
     * and gets the "missing '://'" message rather than an unknown one. */
    while (e < end && (uri_is_alpha(*e) || uri_is_digit(*e) || *e == '+'
                       || *e == '-' || *e == '.'))
        e++;
    n = (size_t)(e - s);
    if (n == 0)
        return uri_fail(p, "missing scheme (expected redis://, rediss://, "
                           "unix:// or redis-sentinel://)");
    uri_echo(shown, sizeof(shown), s, n);
    if (end - e < 3 || memcmp(e, "://", 3) != 0)
        return uri_fail(p, "missing '://' after scheme '%s' (expected "
                           "redis://, rediss://, unix:// or redis-sentinel://)", shown);
    if (uri_scheme_is(s, n, "redis"))
        p->u.kind = REDLOCK__NODE_TCP;
    else if (uri_scheme_is(s, n, "rediss"))
        p->u.kind = REDLOCK__NODE_TLS;
    else if (uri_scheme_is(s, n, "unix"))
        p->u.kind = REDLOCK__NODE_UNIX;
    else if (uri_scheme_is(s, n, "redis-sentinel"))
        p->u.kind = REDLOCK__NODE_TCP, p->sentinel = 1;
    else if (uri_scheme_is(s, n, "rediss-sentinel"))
        p->u.kind = REDLOCK__NODE_TLS, p->sentinel = 1;
    else
        return uri_fail(p, "unknown scheme '%s' (expected redis, rediss, "
                           "unix, redis-sentinel or rediss-sentinel)", shown);
    *rest = e + 3;
    return REDLOCK_OK;
}

static int uri_make_display(uri_parser *p)
{
    redlock__node_uri *u = &p->u;
    size_t cap;

    if (u->kind == REDLOCK__NODE_UNIX) {
        u->display = uri_strndup(u->path, strlen(u->path));
        return u->display ? REDLOCK_OK : uri_oom(p);
    }
    if (u->master_name != NULL) {
        size_t used;
        int i;

        /* "MASTER@" then each sentinel as "[host]:port," (the last ','
         * becomes the NUL). No user info: it may hold a password. */
        cap = strlen(u->master_name) + 1;
        for (i = 0; i < u->n_sentinels; i++)
            cap += strlen(u->sentinels[i].host) + 2 + 1 + 5 + 1;
        u->display = malloc(cap);
        if (u->display == NULL)
            return uri_oom(p);
        used = (size_t)snprintf(u->display, cap, "%s@", u->master_name);
        for (i = 0; i < u->n_sentinels; i++) {
            const redlock__sentinel_addr *a = &u->sentinels[i];
            int v6 = strchr(a->host, ':') != NULL;

            used += (size_t)snprintf(u->display + used, cap - used, "%s%s%s:%d%s",
                                     v6 ? "[" : "", a->host, v6 ? "]" : "", a->port,
                                     i + 1 < u->n_sentinels ? "," : "");
        }
        return REDLOCK_OK;
    }
    /* Brackets, ':', five digits and the NUL. */
    cap = strlen(u->host) + 2 + 1 + 5 + 1;
    u->display = malloc(cap);
    if (u->display == NULL)
        return uri_oom(p);
    if (strchr(u->host, ':') != NULL)
        snprintf(u->display, cap, "[%s]:%d", u->host, u->port);
    else
        snprintf(u->display, cap, "%s:%d", u->host, u->port);
    return REDLOCK_OK;
}

/* The length of s if it is at most URI_MAX_LEN, without reading further
 * than one byte past that limit; URI_MAX_LEN + 1 if longer. */
static size_t uri_bounded_len(const char *s)
{
    size_t n = 0;

    while (n <= URI_MAX_LEN && s[n] != '\0')
        n++;
    return n;
}

static int uri_parse_all(uri_parser *p, const char *uri)
{
    const char *end, *rest = NULL;
    size_t n, i;
    int rc;

    if (uri == NULL || uri[0] == '\0')
        return uri_fail(p, "empty URI");
    n = uri_bounded_len(uri);
    if (n > URI_MAX_LEN)
        return uri_fail(p, "URI longer than %d bytes", URI_MAX_LEN);
    /* A stray newline from a config file would otherwise surface as a
     * puzzling "bad character" somewhere, or end up in a password. */
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)uri[i];
        if (c < 0x20 || c == 0x7f)
            return uri_fail(p, "control character 0x%02x at offset %zu",
                            c, i);
    }
    end = uri + n;

    rc = uri_parse_scheme(p, uri, end, &rest);
    if (rc != REDLOCK_OK)
        return rc;
    if (p->u.kind == REDLOCK__NODE_UNIX)
        rc = uri_parse_unix(p, rest, end);
    else if (p->sentinel)
        rc = uri_parse_sentinel(p, rest, end);
    else
        rc = uri_parse_tcp(p, rest, end);
    if (rc != REDLOCK_OK)
        return rc;
    return uri_make_display(p);
}

int redlock__uri_parse(const char *uri, redlock__node_uri *out, char *err,
                       size_t err_cap)
{
    uri_parser p;
    int rc;

    memset(&p, 0, sizeof(p));
    p.err = err;
    p.err_cap = err_cap;
    if (err != NULL && err_cap > 0)
        err[0] = '\0';
    /* A caller bug, not a bad URI; there is nowhere to put a result. */
    if (out == NULL) {
        if (err != NULL)
            redlock__copy_msg(err, err_cap, "no output struct");
        return REDLOCK_EINVAL;
    }

    rc = uri_parse_all(&p, uri);
    if (rc != REDLOCK_OK) {
        redlock__uri_clear(&p.u);
        memset(out, 0, sizeof(*out));
        return rc;
    }
    *out = p.u;
    return REDLOCK_OK;
}

void redlock__uri_clear(redlock__node_uri *u)
{
    if (u == NULL)
        return;
    free(u->host);
    free(u->path);
    free(u->username);
    if (u->password != NULL)
        uri_free_secret(u->password, strlen(u->password));
    free(u->display);
    free(u->master_name);
    if (u->sentinels != NULL) {
        int i;

        for (i = 0; i < u->n_sentinels; i++)
            free(u->sentinels[i].host);
        free(u->sentinels);
    }
    memset(u, 0, sizeof(*u));
}
