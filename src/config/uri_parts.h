/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node URI parser's pieces (uri_parts.c): its state, the limits, and
 * the components every scheme shares (user info, host, port, db,
 * percent-decoding, messages that never quote a password). The schemes
 * themselves are in uri.c. Internal to src/config.
 */
#ifndef REDLOCK_CONFIG_URI_PARTS_H
#define REDLOCK_CONFIG_URI_PARTS_H

#include <stddef.h>

#include "config/uri.h"
#include "core/error.h"

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

typedef struct redlock__uri_parser {
    redlock__node_uri u; /* built here, moved to *out only on success */
    int sentinel;        /* the scheme was redis-sentinel or rediss-sentinel */
    char *err;
    size_t err_cap;
} redlock__uri_parser;

int redlock__uri_fail(redlock__uri_parser *p, const char *fmt, ...) REDLOCK__PRINTF(2, 3);
int redlock__uri_oom(redlock__uri_parser *p);
void redlock__uri_echo(char *dst, size_t cap, const char *s, size_t n);
void redlock__uri_free_secret(char *s, size_t n);
char *redlock__uri_strndup(const char *s, size_t n);
int redlock__uri_is_digit(char c);
int redlock__uri_is_alpha(char c);
int redlock__uri_hex_value(char c);
int redlock__uri_scheme_is(const char *s, size_t n, const char *word);
int redlock__uri_parse_decimal(const char *s, size_t n, long long max, long long *val);
int redlock__uri_decode(redlock__uri_parser *p, const char *s, size_t n, const char *what, char **dst);
int redlock__uri_parse_userinfo(redlock__uri_parser *p, const char *s, size_t n);
int redlock__uri_parse_ipv6(redlock__uri_parser *p, const char *s, const char *end, const char **next);
int redlock__uri_parse_hostname(redlock__uri_parser *p, const char *s, const char *end, const char **next);
int redlock__uri_parse_port(redlock__uri_parser *p, const char *s, size_t n);
int redlock__uri_parse_db(redlock__uri_parser *p, const char *s, size_t n);
int redlock__uri_trailing_junk(redlock__uri_parser *p, const char *s, const char *end);
size_t redlock__uri_span(const char *s, const char *end, const char *stop);
int redlock__uri_skip_userinfo(redlock__uri_parser *p, const char **s, const char *end);
int redlock__uri_parse_db_path(redlock__uri_parser *p, const char **s, const char *end, const char *stop);

#endif
