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
#include "config/uri_parts.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "[user[:password]@]host[:port][/[db]]" after "redis://". */
static int uri_parse_tcp(redlock__uri_parser *p, const char *s, const char *end)
{
    const char *q;
    size_t n;
    int rc;

    rc = redlock__uri_skip_userinfo(p, &s, end);
    if (rc != REDLOCK_OK)
        return rc;
    /* Most likely a node list without schemes ("redis://a:1,b:2"): lists
     * split only before a scheme, since sentinel URIs hold commas. */
    for (q = s; q < end; q++)
        if (*q == ',')
            return redlock__uri_fail(p, "',' after the host: in a node list every node needs its "
                               "scheme (redis://a:1,redis://b:2); only redis-sentinel:// "
                               "URIs list several hosts");

    if (s < end && *s == '[')
        rc = redlock__uri_parse_ipv6(p, s, end, &s);
    else
        rc = redlock__uri_parse_hostname(p, s, end, &s);
    if (rc != REDLOCK_OK)
        return rc;

    p->u.port = URI_DEFAULT_PORT;
    if (s < end && *s == ':') {
        s++;
        n = redlock__uri_span(s, end, "/?#");
        rc = redlock__uri_parse_port(p, s, n);
        if (rc != REDLOCK_OK)
            return rc;
        s += n;
    }

    if (s < end && *s == '/') {
        rc = redlock__uri_parse_db_path(p, &s, end, "/?#");
        if (rc != REDLOCK_OK)
            return rc;
    }

    if (s < end)
        return redlock__uri_trailing_junk(p, s, end);
    return REDLOCK_OK;
}

/* One "host[:port]" of a sentinel list, s..end holding no ',' or '/'. */
static int uri_parse_sentinel_host(redlock__uri_parser *p, const char *s, const char *end)
{
    redlock__sentinel_addr *a;
    size_t n;
    int rc;

    if (s == end)
        return redlock__uri_fail(p, "sentinel %d: empty host", p->u.n_sentinels + 1);
    if (p->u.n_sentinels == REDLOCK__MAX_SENTINELS)
        return redlock__uri_fail(p, "more than %d sentinels", REDLOCK__MAX_SENTINELS);
    if (*s == '[')
        rc = redlock__uri_parse_ipv6(p, s, end, &s);
    else
        rc = redlock__uri_parse_hostname(p, s, end, &s);
    if (rc != REDLOCK_OK)
        return rc;
    p->u.port = REDLOCK__SENTINEL_DEFAULT_PORT;
    if (s < end && *s == ':') {
        s++;
        n = (size_t)(end - s);
        rc = redlock__uri_parse_port(p, s, n);
        if (rc != REDLOCK_OK)
            return rc;
        s += n;
    }
    if (s < end)
        return redlock__uri_trailing_junk(p, s, end);
    a = &p->u.sentinels[p->u.n_sentinels++];
    a->host = p->u.host;
    a->port = p->u.port;
    p->u.host = NULL;
    return REDLOCK_OK;
}

/* "[user[:password]@]host[:port][,host[:port]...][/[db]]#MASTER" after
 * "redis-sentinel://". */
static int uri_parse_sentinel(redlock__uri_parser *p, const char *s, const char *end)
{
    const char *hash = NULL, *q, *list_end;
    char shown[URI_ECHO_MAX + 4];
    size_t n;
    int rc;

    for (q = s; q < end; q++)
        if (*q == '#')
            hash = q;
    if (hash == NULL)
        return redlock__uri_fail(p, "no master name: a sentinel URI ends in '#MASTERNAME'");
    n = (size_t)(end - hash - 1);
    if (n == 0)
        return redlock__uri_fail(p, "empty master name after '#'");
    if (n > URI_MASTER_NAME_MAX)
        return redlock__uri_fail(p, "master name longer than %d bytes", URI_MASTER_NAME_MAX);
    for (q = hash + 1; q < end; q++) {
        if (!redlock__uri_is_alpha(*q) && !redlock__uri_is_digit(*q) && strchr("._:-", *q) == NULL) {
            redlock__uri_echo(shown, sizeof(shown), q, 1);
            return redlock__uri_fail(p, "bad character '%s' in master name (allowed: letters, "
                               "digits, '.', '_', ':', '-')", shown);
        }
    }
    if (!(p->u.master_name = redlock__uri_strndup(hash + 1, n)))
        return redlock__uri_oom(p);
    end = hash;

    rc = redlock__uri_skip_userinfo(p, &s, end);
    if (rc != REDLOCK_OK)
        return rc;
    if (!(p->u.sentinels = calloc(REDLOCK__MAX_SENTINELS, sizeof(*p->u.sentinels))))
        return redlock__uri_oom(p);
    list_end = s + redlock__uri_span(s, end, "/");
    if (s == list_end)
        return redlock__uri_fail(p, "empty host (a sentinel URI needs at least one sentinel)");
    for (;;) {
        n = redlock__uri_span(s, list_end, ",");
        rc = uri_parse_sentinel_host(p, s, s + n);
        if (rc != REDLOCK_OK)
            return rc;
        s += n;
        if (s == list_end)
            break;
        s++; /* ',' */
        if (s == list_end)
            return redlock__uri_fail(p, "sentinel %d: empty host", p->u.n_sentinels + 1);
    }
    if (s < end) { /* '/' */
        rc = redlock__uri_parse_db_path(p, &s, end, "/");
        if (rc != REDLOCK_OK)
            return rc;
    }
    if (s < end)
        return redlock__uri_trailing_junk(p, s, end);
    /* The first sentinel stands in as host and port (see uri.h). */
    p->u.port = p->u.sentinels[0].port;
    if (!(p->u.host = redlock__uri_strndup(p->u.sentinels[0].host, strlen(p->u.sentinels[0].host))))
        return redlock__uri_oom(p);
    return REDLOCK_OK;
}

/* "db=N" is the only query parameter, and may appear once. */
static int uri_parse_unix_query(redlock__uri_parser *p, const char *s, const char *end)
{
    char shown[URI_ECHO_MAX + 4];
    int seen_db = 0;

    for (;;) {
        size_t n = redlock__uri_span(s, end, "&");
        size_t name_len = redlock__uri_span(s, s + n, "=");
        int rc;

        if (n == 0)
            return redlock__uri_fail(p, "empty query parameter");
        if (name_len != 2 || memcmp(s, "db", 2) != 0) {
            redlock__uri_echo(shown, sizeof(shown), s, name_len);
            return redlock__uri_fail(p, "unknown query parameter '%s' "
                               "(only db is allowed)", shown);
        }
        if (seen_db)
            return redlock__uri_fail(p, "query parameter db given twice");
        if (name_len == n || n == 3)
            return redlock__uri_fail(p, "empty db in query (expected '?db=N')");
        rc = redlock__uri_parse_db(p, s + 3, n - 3);
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
static int uri_parse_unix(redlock__uri_parser *p, const char *s, const char *end)
{
    size_t n;

    if (s == end || *s != '/')
        return redlock__uri_fail(p, "unix URI must be 'unix:///absolute/path' "
                           "(no host or user info)");
    n = redlock__uri_span(s, end, "?");
    if (n == 1)
        return redlock__uri_fail(p, "empty socket path");
    if (n > URI_UNIX_PATH_MAX)
        return redlock__uri_fail(p, "socket path is %zu bytes, longer than %d", n,
                        URI_UNIX_PATH_MAX);
    p->u.path = redlock__uri_strndup(s, n);
    if (p->u.path == NULL)
        return redlock__uri_oom(p);
    s += n;
    if (s < end)
        return uri_parse_unix_query(p, s + 1, end);
    return REDLOCK_OK;
}

/* Reads the scheme and its "://", setting the kind; *rest gets what
 * follows. */
static int uri_parse_scheme(redlock__uri_parser *p, const char *s, const char *end,
                            const char **rest)
{
    const char *e = s;
    char shown[URI_ECHO_MAX + 4];
    size_t n;

    /* RFC 3986 scheme characters, so "host:6379" reads as scheme "host"
     * and gets the "missing '://'" message rather than an unknown one. */
    while (e < end && (redlock__uri_is_alpha(*e) || redlock__uri_is_digit(*e) || *e == '+'
                       || *e == '-' || *e == '.'))
        e++;
    n = (size_t)(e - s);
    if (n == 0)
        return redlock__uri_fail(p, "missing scheme (expected redis://, rediss://, "
                           "unix:// or redis-sentinel://)");
    redlock__uri_echo(shown, sizeof(shown), s, n);
    if (end - e < 3 || memcmp(e, "://", 3) != 0)
        return redlock__uri_fail(p, "missing '://' after scheme '%s' (expected "
                           "redis://, rediss://, unix:// or redis-sentinel://)", shown);
    if (redlock__uri_scheme_is(s, n, "redis"))
        p->u.kind = REDLOCK__NODE_TCP;
    else if (redlock__uri_scheme_is(s, n, "rediss"))
        p->u.kind = REDLOCK__NODE_TLS;
    else if (redlock__uri_scheme_is(s, n, "unix"))
        p->u.kind = REDLOCK__NODE_UNIX;
    else if (redlock__uri_scheme_is(s, n, "redis-sentinel"))
        p->u.kind = REDLOCK__NODE_TCP, p->sentinel = 1;
    else if (redlock__uri_scheme_is(s, n, "rediss-sentinel"))
        p->u.kind = REDLOCK__NODE_TLS, p->sentinel = 1;
    else
        return redlock__uri_fail(p, "unknown scheme '%s' (expected redis, rediss, "
                           "unix, redis-sentinel or rediss-sentinel)", shown);
    *rest = e + 3;
    return REDLOCK_OK;
}

static int uri_make_display(redlock__uri_parser *p)
{
    redlock__node_uri *u = &p->u;
    size_t cap;

    if (u->kind == REDLOCK__NODE_UNIX) {
        u->display = redlock__uri_strndup(u->path, strlen(u->path));
        return u->display ? REDLOCK_OK : redlock__uri_oom(p);
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
            return redlock__uri_oom(p);
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
        return redlock__uri_oom(p);
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

static int uri_parse_all(redlock__uri_parser *p, const char *uri)
{
    const char *end, *rest = NULL;
    size_t n, i;
    int rc;

    if (uri == NULL || uri[0] == '\0')
        return redlock__uri_fail(p, "empty URI");
    n = uri_bounded_len(uri);
    if (n > URI_MAX_LEN)
        return redlock__uri_fail(p, "URI longer than %d bytes", URI_MAX_LEN);
    /* A stray newline from a config file would otherwise surface as a
     * puzzling "bad character" somewhere, or end up in a password. */
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)uri[i];
        if (c < 0x20 || c == 0x7f)
            return redlock__uri_fail(p, "control character 0x%02x at offset %zu",
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
    redlock__uri_parser p;
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
        redlock__uri_free_secret(u->password, strlen(u->password));
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
