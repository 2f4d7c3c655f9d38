/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests for the node URI parser (src/config/uri.c). No server needed. */
#include "config/uri.h"
#include "core/error.h"
#include "redlock/redlock.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_CAP 256

/* ------------------------------------------------------------------------ */
/* Helpers. Macros rather than functions so a failure names the test line. */

/* Parses uri, which must succeed, into *u. */
#define PARSE_OK(uri, u)                                                       \
    do {                                                                       \
        char err_[ERR_CAP];                                                    \
        int rc_;                                                               \
        memset((u), 0, sizeof(*(u)));                                          \
        rc_ = redlock__uri_parse((uri), (u), err_, sizeof(err_));              \
        ck_assert_msg(rc_ == REDLOCK_OK, "'%s' failed (%d): %s", (uri), rc_,   \
                      err_);                                                   \
        ck_assert_str_eq(err_, "");                                            \
    } while (0)

/* Parses uri, which must fail with REDLOCK_EURI and a message containing
 * needle, leaving the output zeroed. */
#define PARSE_BAD(uri, needle)                                                 \
    do {                                                                       \
        const char *uri_ = (uri);                                              \
        const char *shown_ = uri_ ? uri_ : "(null)";                           \
        char err_[ERR_CAP];                                                    \
        redlock__node_uri u_;                                                  \
        int rc_;                                                               \
        poison(&u_);                                                           \
        rc_ = redlock__uri_parse(uri_, &u_, err_, sizeof(err_));               \
        ck_assert_msg(rc_ == REDLOCK_EURI, "'%s' gave %d, want EURI", shown_,  \
                      rc_);                                                    \
        ck_assert_msg(strstr(err_, (needle)) != NULL,                          \
                      "'%s': message '%s' lacks '%s'", shown_, err_, (needle));\
        assert_zeroed(&u_);                                                    \
    } while (0)

/* Non-zero scalars (pointers stay NULL so nothing leaks), to check that a
 * failed parse really zeroes the output instead of leaving it alone. */
static void poison(redlock__node_uri *u)
{
    memset(u, 0, sizeof(*u));
    u->kind = REDLOCK__NODE_UNIX;
    u->port = 4242;
    u->db = 77;
}

static void assert_zeroed(const redlock__node_uri *u)
{
    ck_assert_int_eq(u->kind, 0);
    ck_assert_ptr_null(u->host);
    ck_assert_int_eq(u->port, 0);
    ck_assert_ptr_null(u->path);
    ck_assert_ptr_null(u->username);
    ck_assert_ptr_null(u->password);
    ck_assert_int_eq(u->db, 0);
    ck_assert_ptr_null(u->display);
}

/* A string of n copies of c after prefix and before suffix; free() it. */
static char *make_long(const char *prefix, char c, size_t n,
                       const char *suffix)
{
    size_t lp = strlen(prefix), ls = strlen(suffix);
    char *s = malloc(lp + n + ls + 1);

    ck_assert_ptr_nonnull(s);
    memcpy(s, prefix, lp);
    memset(s + lp, c, n);
    memcpy(s + lp + n, suffix, ls + 1);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Valid forms. */

START_TEST(test_plain_host)
{
    redlock__node_uri u;

    PARSE_OK("redis://localhost", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_TCP);
    ck_assert_str_eq(u.host, "localhost");
    ck_assert_int_eq(u.port, 6379);
    ck_assert_int_eq(u.db, 0);
    ck_assert_ptr_null(u.path);
    ck_assert_ptr_null(u.username);
    ck_assert_ptr_null(u.password);
    ck_assert_str_eq(u.display, "localhost:6379");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_ipv4_with_port)
{
    redlock__node_uri u;

    PARSE_OK("redis://127.0.0.1:7001", &u);
    ck_assert_str_eq(u.host, "127.0.0.1");
    ck_assert_int_eq(u.port, 7001);
    ck_assert_str_eq(u.display, "127.0.0.1:7001");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_port_bounds)
{
    redlock__node_uri u;

    PARSE_OK("redis://h:1", &u);
    ck_assert_int_eq(u.port, 1);
    redlock__uri_clear(&u);
    PARSE_OK("redis://h:65535", &u);
    ck_assert_int_eq(u.port, 65535);
    ck_assert_str_eq(u.display, "h:65535");
    redlock__uri_clear(&u);
    /* Leading zeros are only digits. */
    PARSE_OK("redis://h:007", &u);
    ck_assert_int_eq(u.port, 7);
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_with_db)
{
    redlock__node_uri u;

    PARSE_OK("redis://redis-1.example.com:7000/5", &u);
    ck_assert_str_eq(u.host, "redis-1.example.com");
    ck_assert_int_eq(u.port, 7000);
    ck_assert_int_eq(u.db, 5);
    redlock__uri_clear(&u);

    PARSE_OK("redis://h/15", &u);
    ck_assert_int_eq(u.port, 6379);
    ck_assert_int_eq(u.db, 15);
    redlock__uri_clear(&u);

    PARSE_OK("redis://h/2147483647", &u);
    ck_assert_int_eq(u.db, 2147483647);
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_trailing_slash_is_db0)
{
    redlock__node_uri u;

    PARSE_OK("redis://h/", &u);
    ck_assert_str_eq(u.host, "h");
    ck_assert_int_eq(u.db, 0);
    redlock__uri_clear(&u);

    PARSE_OK("redis://h:6380/", &u);
    ck_assert_int_eq(u.port, 6380);
    ck_assert_int_eq(u.db, 0);
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_user_and_password)
{
    redlock__node_uri u;

    PARSE_OK("redis://alice:s3cret@h:6380/2", &u);
    ck_assert_str_eq(u.username, "alice");
    ck_assert_str_eq(u.password, "s3cret");
    ck_assert_str_eq(u.host, "h");
    ck_assert_int_eq(u.port, 6380);
    ck_assert_int_eq(u.db, 2);
    /* Credentials never show up in the display name. */
    ck_assert_str_eq(u.display, "h:6380");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_password_only)
{
    redlock__node_uri u;

    PARSE_OK("redis://:s3cret@h", &u);
    ck_assert_ptr_null(u.username);
    ck_assert_str_eq(u.password, "s3cret");
    ck_assert_str_eq(u.host, "h");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_user_only_and_empty_parts)
{
    redlock__node_uri u;

    PARSE_OK("redis://alice@h", &u);
    ck_assert_str_eq(u.username, "alice");
    ck_assert_ptr_null(u.password);
    redlock__uri_clear(&u);

    /* Empty parts count as absent. */
    PARSE_OK("redis://alice:@h", &u);
    ck_assert_str_eq(u.username, "alice");
    ck_assert_ptr_null(u.password);
    redlock__uri_clear(&u);

    PARSE_OK("redis://@h", &u);
    ck_assert_ptr_null(u.username);
    ck_assert_ptr_null(u.password);
    ck_assert_str_eq(u.host, "h");
    redlock__uri_clear(&u);

    PARSE_OK("redis://:@h", &u);
    ck_assert_ptr_null(u.username);
    ck_assert_ptr_null(u.password);
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_percent_decoding)
{
    redlock__node_uri u;

    PARSE_OK("redis://:p%40ss@h", &u);
    ck_assert_str_eq(u.password, "p@ss");
    redlock__uri_clear(&u);

    /* Upper and lower case hex; ':' in a user name only when encoded. */
    PARSE_OK("redis://us%3Aer:a%3ab%2F%25@h", &u);
    ck_assert_str_eq(u.username, "us:er");
    ck_assert_str_eq(u.password, "a:b/%");
    redlock__uri_clear(&u);

    /* Bytes above 0x7f decode too (UTF-8 "é"). */
    PARSE_OK("redis://:%C3%A9@h", &u);
    ck_assert_str_eq(u.password, "\xc3\xa9");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_last_at_ends_userinfo)
{
    redlock__node_uri u;

    PARSE_OK("redis://:p@ss@h", &u);
    ck_assert_ptr_null(u.username);
    ck_assert_str_eq(u.password, "p@ss");
    ck_assert_str_eq(u.host, "h");
    redlock__uri_clear(&u);

    /* Raw '@', ':' and '/' all belong to the password. */
    PARSE_OK("redis://u:a@b:c/d@h:1/2", &u);
    ck_assert_str_eq(u.username, "u");
    ck_assert_str_eq(u.password, "a@b:c/d");
    ck_assert_str_eq(u.host, "h");
    ck_assert_int_eq(u.port, 1);
    ck_assert_int_eq(u.db, 2);
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_ipv6)
{
    redlock__node_uri u;

    PARSE_OK("redis://[::1]", &u);
    ck_assert_str_eq(u.host, "::1");
    ck_assert_int_eq(u.port, 6379);
    ck_assert_str_eq(u.display, "[::1]:6379");
    redlock__uri_clear(&u);

    PARSE_OK("redis://user:pw@[2001:db8::1]:7001/3", &u);
    ck_assert_str_eq(u.host, "2001:db8::1");
    ck_assert_int_eq(u.port, 7001);
    ck_assert_int_eq(u.db, 3);
    ck_assert_str_eq(u.username, "user");
    ck_assert_str_eq(u.display, "[2001:db8::1]:7001");
    redlock__uri_clear(&u);

    PARSE_OK("redis://[::ffff:192.0.2.1]/", &u);
    ck_assert_str_eq(u.host, "::ffff:192.0.2.1");
    ck_assert_str_eq(u.display, "[::ffff:192.0.2.1]:6379");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_rediss)
{
    redlock__node_uri u;

    PARSE_OK("rediss://:pw@secure.example:6380", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_TLS);
    ck_assert_str_eq(u.host, "secure.example");
    ck_assert_int_eq(u.port, 6380);
    ck_assert_str_eq(u.password, "pw");
    ck_assert_str_eq(u.display, "secure.example:6380");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_uppercase_scheme)
{
    redlock__node_uri u;

    PARSE_OK("REDIS://H", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_TCP);
    ck_assert_str_eq(u.host, "H");
    redlock__uri_clear(&u);

    PARSE_OK("ReDiSs://h", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_TLS);
    redlock__uri_clear(&u);

    PARSE_OK("UNIX:///tmp/r.sock", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_UNIX);
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_unix)
{
    redlock__node_uri u;

    PARSE_OK("unix:///tmp/redis.sock", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_UNIX);
    ck_assert_str_eq(u.path, "/tmp/redis.sock");
    ck_assert_str_eq(u.display, "/tmp/redis.sock");
    ck_assert_ptr_null(u.host);
    ck_assert_int_eq(u.port, 0);
    ck_assert_int_eq(u.db, 0);
    ck_assert_ptr_null(u.username);
    ck_assert_ptr_null(u.password);
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_unix_with_db)
{
    redlock__node_uri u;

    PARSE_OK("unix:///var/run/redis/redis.sock?db=3", &u);
    ck_assert_str_eq(u.path, "/var/run/redis/redis.sock");
    ck_assert_int_eq(u.db, 3);
    ck_assert_str_eq(u.display, "/var/run/redis/redis.sock");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_unix_path_is_literal)
{
    redlock__node_uri u;

    /* systemd instance names: '@' and '%' are kept as they are. */
    PARSE_OK("unix:///run/redis@a%41/s.sock", &u);
    ck_assert_str_eq(u.path, "/run/redis@a%41/s.sock");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_unix_path_limit)
{
    redlock__node_uri u;
    char *ok = make_long("unix:///", 'p', 106, "");
    char *bad = make_long("unix:///", 'p', 107, "");

    PARSE_OK(ok, &u);
    ck_assert_uint_eq(strlen(u.path), 107);
    redlock__uri_clear(&u);
    PARSE_BAD(bad, "longer than 107");
    free(ok);
    free(bad);
}
END_TEST

START_TEST(test_host_length_limit)
{
    redlock__node_uri u;
    char *ok = make_long("redis://", 'a', 255, ":1");
    char *bad = make_long("redis://", 'a', 256, ":1");

    PARSE_OK(ok, &u);
    ck_assert_uint_eq(strlen(u.host), 255);
    redlock__uri_clear(&u);
    PARSE_BAD(bad, "longer than 255");
    free(ok);
    free(bad);
}
END_TEST

START_TEST(test_uri_length_limit)
{
    redlock__node_uri u;
    /* "redis://" + user + "@h" is exactly 4096 bytes. */
    char *ok = make_long("redis://", 'u', 4096 - 8 - 2, "@h");
    char *bad = make_long("redis://", 'u', 4096 - 8 - 1, "@h");
    char *huge = make_long("redis://", 'u', 1 << 20, "@h");

    ck_assert_uint_eq(strlen(ok), 4096);
    PARSE_OK(ok, &u);
    ck_assert_uint_eq(strlen(u.username), 4096 - 10);
    redlock__uri_clear(&u);
    PARSE_BAD(bad, "longer than 4096");
    PARSE_BAD(huge, "longer than 4096");
    free(ok);
    free(bad);
    free(huge);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Malformed URIs, one problem each. */

START_TEST(test_bad_empty)
{
    PARSE_BAD(NULL, "empty URI");
    PARSE_BAD("", "empty URI");
}
END_TEST

START_TEST(test_bad_scheme)
{
    PARSE_BAD("http://h", "unknown scheme 'http' (expected redis, rediss, "
                          "unix, redis-sentinel or rediss-sentinel)");
    PARSE_BAD("redis+tls://h", "unknown scheme 'redis+tls'");
    PARSE_BAD("redi://h", "unknown scheme 'redi'");
    PARSE_BAD("localhost:6379", "missing '://' after scheme 'localhost'");
    PARSE_BAD("redis:/h", "missing '://'");
    PARSE_BAD("redis:h", "missing '://'");
    PARSE_BAD("redis", "missing '://'");
    PARSE_BAD("://h", "missing scheme");
    PARSE_BAD("[::1]:6379", "missing scheme");
}
END_TEST

START_TEST(test_bad_empty_host)
{
    PARSE_BAD("redis://", "empty host");
    PARSE_BAD("redis://:6379", "empty host");
    PARSE_BAD("redis://u:p@", "empty host");
    PARSE_BAD("redis://u:p@:1", "empty host");
    PARSE_BAD("redis:///0", "empty host");
}
END_TEST

START_TEST(test_bad_host_char)
{
    PARSE_BAD("redis://ho_st", "bad character '_' in host");
    PARSE_BAD("redis://h st", "bad character ' ' in host");
    PARSE_BAD("redis://a]b", "bad character ']' in host");
    PARSE_BAD("redis://h\xc3\xa9", "bad character '?' in host");
}
END_TEST

START_TEST(test_bad_ipv6)
{
    PARSE_BAD("redis://[::1", "unterminated '['");
    PARSE_BAD("redis://[::1:6379/0", "unterminated '['");
    PARSE_BAD("redis://[", "unterminated '['");
    PARSE_BAD("redis://[]", "empty IPv6 address");
    PARSE_BAD("redis://[g::1]", "bad IPv6 address '[g::1]'");
    PARSE_BAD("redis://[1.2.3.4]", "bad IPv6 address");
    PARSE_BAD("redis://[:::]", "bad IPv6 address");
    PARSE_BAD("redis://[fe80::1%eth0]", "bad IPv6 address");
}
END_TEST

START_TEST(test_bad_after_bracket)
{
    PARSE_BAD("redis://[::1]x", "unexpected 'x' after ']'");
    PARSE_BAD("redis://[::1]]:1", "unexpected ']:1' after ']'");
    PARSE_BAD("redis://[::1]?db=1", "after ']'");
}
END_TEST

START_TEST(test_bad_port)
{
    PARSE_BAD("redis://h:", "empty port after ':'");
    PARSE_BAD("redis://h:/0", "empty port after ':'");
    PARSE_BAD("redis://[::1]:", "empty port");
    PARSE_BAD("redis://h:abc", "port 'abc' is not a number");
    PARSE_BAD("redis://h:-1", "port '-1' is not a number");
    PARSE_BAD("redis://h:+1", "port '+1' is not a number");
    PARSE_BAD("redis://h:1:2", "port '1:2' is not a number");
    PARSE_BAD("redis://h:0", "port 0 out of range 1..65535");
    PARSE_BAD("redis://h:00", "out of range 1..65535");
    PARSE_BAD("redis://h:65536", "port 65536 out of range 1..65535");
    /* Far past any integer type; must not wrap round to a valid port. */
    PARSE_BAD("redis://h:18446744073709551616", "out of range");
    PARSE_BAD("redis://h:99999999999999999999999999999999999999999999",
              "out of range");
}
END_TEST

START_TEST(test_bad_db)
{
    PARSE_BAD("redis://h/x", "db 'x' is not a number");
    PARSE_BAD("redis://h/-1", "db '-1' is not a number");
    PARSE_BAD("redis://h/1x", "db '1x' is not a number");
    PARSE_BAD("redis://h/2147483648", "db 2147483648 out of range");
    PARSE_BAD("redis://h/99999999999999999999999999999", "out of range");
}
END_TEST

START_TEST(test_bad_trailing_junk)
{
    PARSE_BAD("redis://h/0/1", "trailing junk '/1'");
    PARSE_BAD("redis://h//", "trailing junk '/'");
    PARSE_BAD("redis://h?db=1", "trailing junk '?db=1'");
    PARSE_BAD("redis://h:1#x", "trailing junk '#x'");
    PARSE_BAD("redis://h/0?x", "trailing junk '?x'");
}
END_TEST

START_TEST(test_bad_percent_escape)
{
    PARSE_BAD("redis://:p%4@h", "bad percent-escape in password");
    PARSE_BAD("redis://:%zz@h", "bad percent-escape in password");
    PARSE_BAD("redis://:pw%@h", "bad percent-escape in password");
    PARSE_BAD("redis://%4g:pw@h", "bad percent-escape in user name");
    PARSE_BAD("redis://:%00@h", "%00");
    PARSE_BAD("redis://a%00b@h", "in user name");
}
END_TEST

START_TEST(test_error_never_quotes_password)
{
    char err[ERR_CAP];
    redlock__node_uri u;

    memset(&u, 0, sizeof(u));
    ck_assert_int_eq(redlock__uri_parse("redis://:Hunter2%4@h", &u, err,
                                        sizeof(err)),
                     REDLOCK_EURI);
    ck_assert_ptr_null(strstr(err, "Hunter2"));
    /* A password with a raw '/' is still userinfo, not a bad db. */
    ck_assert_int_eq(redlock__uri_parse("redis://:Hunter2/x@h:0", &u, err,
                                        sizeof(err)),
                     REDLOCK_EURI);
    ck_assert_ptr_nonnull(strstr(err, "port 0"));
    ck_assert_ptr_null(strstr(err, "Hunter2"));
}
END_TEST

START_TEST(test_bad_control_char)
{
    PARSE_BAD("redis://h\n", "control character 0x0a at offset 9");
    PARSE_BAD("redis://:pw\t@h", "control character");
    PARSE_BAD("unix:///tmp/s\x7f", "control character 0x7f");
}
END_TEST

START_TEST(test_bad_unix)
{
    PARSE_BAD("unix://", "unix:///absolute/path");
    PARSE_BAD("unix://tmp/s.sock", "no host or user info");
    PARSE_BAD("unix://u:p@/tmp/s.sock", "no host or user info");
    PARSE_BAD("unix:///", "empty socket path");
    PARSE_BAD("unix:///?db=1", "empty socket path");
    PARSE_BAD("unix:///s?db=x", "db 'x' is not a number");
    PARSE_BAD("unix:///s?db=-1", "db '-1' is not a number");
    PARSE_BAD("unix:///s?db=2147483648", "out of range");
    PARSE_BAD("unix:///s?db=", "empty db");
    PARSE_BAD("unix:///s?db", "empty db");
    PARSE_BAD("unix:///s?", "empty query parameter");
    PARSE_BAD("unix:///s?db=1&", "empty query parameter");
    PARSE_BAD("unix:///s?foo=1", "unknown query parameter 'foo'");
    PARSE_BAD("unix:///s?DB=1", "unknown query parameter 'DB'");
    PARSE_BAD("unix:///s?db=1&timeout=5", "unknown query parameter 'timeout'");
    PARSE_BAD("unix:///s?db=1&db=2", "given twice");
    PARSE_BAD("unix:///s?db=1?db=2", "db '1?db=2' is not a number");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Robustness. */

static const char *const malformed[] = {
    "",
    "r",
    ":",
    "://",
    "redis",
    "redis:",
    "redis:/",
    "redis://",
    "redis://@",
    "redis://:@",
    "redis://u:p@",
    "redis://h:",
    "redis://h:x",
    "redis://h:0",
    "redis://h:65536",
    "redis://h:123456789012345678901234567890",
    "redis://h/x",
    "redis://h/-0",
    "redis://h/4294967296",
    "redis://h//",
    "redis://h/0/",
    "redis://h?",
    "redis://h#",
    "redis://[",
    "redis://[]",
    "redis://[]:1",
    "redis://[::1",
    "redis://[::1]:",
    "redis://[::1]x",
    "redis://[zz]",
    "redis://%",
    "redis://%@h",
    "redis://%2@h",
    "redis://:%@h",
    "redis://:%0@h",
    "redis://:%00@h",
    "redis://h*st",
    "redis://h\t",
    "ftp://h",
    "1redis://h",
    "unix:",
    "unix://",
    "unix:///",
    "unix://x",
    "unix:///s?",
    "unix:///s?&",
    "unix:///s?=",
    "unix:///s?db=",
    "unix:///s?x",
    "unix:///s?db=1&db=1",
};

START_TEST(test_malformed_table)
{
    size_t i;

    for (i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        char err[ERR_CAP];
        redlock__node_uri u;
        int rc;

        poison(&u);
        err[0] = '\0';
        rc = redlock__uri_parse(malformed[i], &u, err, sizeof(err));
        ck_assert_msg(rc == REDLOCK_EURI, "'%s' gave %d", malformed[i], rc);
        ck_assert_msg(err[0] != '\0', "'%s': empty message", malformed[i]);
        ck_assert_msg(strchr(err, '\n') == NULL, "'%s': multi-line message",
                      malformed[i]);
        assert_zeroed(&u);
    }
}
END_TEST

/* Parses s and checks the result is consistent either way; for ASan and
 * valgrind, which catch any out-of-bounds read or leak on the way. */
static void parse_anything(const char *s)
{
    char err[ERR_CAP];
    redlock__node_uri u;
    int rc;

    poison(&u);
    rc = redlock__uri_parse(s, &u, err, sizeof(err));
    if (rc == REDLOCK_OK) {
        ck_assert_ptr_nonnull(u.display);
        ck_assert(u.kind == REDLOCK__NODE_UNIX ? u.path != NULL
                                               : u.host != NULL);
        redlock__uri_clear(&u);
    } else {
        ck_assert_msg(rc == REDLOCK_EURI, "'%s' gave %d", s, rc);
        ck_assert(err[0] != '\0');
        assert_zeroed(&u);
    }
}

static const char *const seeds[] = {
    "redis://alice:p%40ss@[2001:db8::1]:7001/3",
    "rediss://:pw@host.example:6380/15",
    "unix:///tmp/redis.sock?db=2",
};

/* Every prefix and every single-byte substitution of some valid URIs. */
START_TEST(test_prefixes_and_mutations)
{
    static const char subst[] = "@:/[]%?&=#0aZ.-_ \xff";
    size_t k, i, j;

    for (k = 0; k < sizeof(seeds) / sizeof(seeds[0]); k++) {
        size_t n = strlen(seeds[k]);
        char buf[128];

        ck_assert_uint_lt(n, sizeof(buf));
        for (i = 0; i <= n; i++) {
            memcpy(buf, seeds[k], i);
            buf[i] = '\0';
            parse_anything(buf);
        }
        for (i = 0; i < n; i++) {
            for (j = 0; j < sizeof(subst) - 1; j++) {
                memcpy(buf, seeds[k], n + 1);
                buf[i] = subst[j];
                parse_anything(buf);
            }
        }
    }
}
END_TEST

START_TEST(test_err_buffer_bounds)
{
    redlock__node_uri u;
    char small[8];

    memset(&u, 0, sizeof(u));
    /* No buffer at all. */
    ck_assert_int_eq(redlock__uri_parse("http://h", &u, NULL, 0),
                     REDLOCK_EURI);
    assert_zeroed(&u);
    memset(small, 'x', sizeof(small));
    ck_assert_int_eq(redlock__uri_parse("http://h", &u, small, 0),
                     REDLOCK_EURI);
    ck_assert_int_eq(small[0], 'x');
    /* A short buffer gets a truncated, terminated message. */
    ck_assert_int_eq(redlock__uri_parse("http://h", &u, small, sizeof(small)),
                     REDLOCK_EURI);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
    ck_assert_int_eq(strncmp(small, "unknown", 7), 0);
    /* Success with no buffer works too. */
    ck_assert_int_eq(redlock__uri_parse("redis://h", &u, NULL, 0), REDLOCK_OK);
    ck_assert_str_eq(u.display, "h:6379");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_long_token_is_cut_in_message)
{
    char err[ERR_CAP];
    redlock__node_uri u;
    char *s = make_long("redis://h:", '9', 1000, "");

    memset(&u, 0, sizeof(u));
    ck_assert_int_eq(redlock__uri_parse(s, &u, err, sizeof(err)),
                     REDLOCK_EURI);
    ck_assert_ptr_nonnull(strstr(err, "... out of range"));
    ck_assert_uint_lt(strlen(err), 100);
    free(s);
}
END_TEST

/* redlock_client_new used to echo the raw URI, password and all, on a
 * parse error; now it names the node index and the parser's reason. A
 * long URI must not push the reason out of the message either. */
START_TEST(test_client_new_never_echoes_password)
{
    static char long_uri[3000];
    const char *uris[2] = {"redis://127.0.0.1:7001", "redis://alice:S3cretPW@127.0.0.1:99999"};
    redlock_client *c = NULL;

    ck_assert_int_eq(redlock_client_new(&c, uris, 2, NULL), REDLOCK_EURI);
    ck_assert_ptr_null(c);
    ck_assert_ptr_null(strstr(redlock_last_error(), "S3cretPW"));
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "node 1"));
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "port"));

    snprintf(long_uri, sizeof(long_uri), "redis://bob:%02000d@127.0.0.1:0", 7);
    uris[1] = long_uri;
    ck_assert_int_eq(redlock_client_new(&c, uris, 2, NULL), REDLOCK_EURI);
    ck_assert_ptr_null(strstr(redlock_last_error(), "0000000000"));
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "port"));
}
END_TEST

START_TEST(test_null_out)
{
    char err[ERR_CAP];

    ck_assert_int_eq(redlock__uri_parse("redis://h", NULL, err, sizeof(err)),
                     REDLOCK_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* redlock__uri_clear. */

START_TEST(test_clear_zeroed_and_twice)
{
    redlock__node_uri u;

    memset(&u, 0, sizeof(u));
    redlock__uri_clear(&u);
    redlock__uri_clear(&u);
    assert_zeroed(&u);
    redlock__uri_clear(NULL);

    PARSE_OK("redis://alice:pw@h:1/2", &u);
    redlock__uri_clear(&u);
    assert_zeroed(&u);
    redlock__uri_clear(&u);
    assert_zeroed(&u);
}
END_TEST

START_TEST(test_reuse_after_clear)
{
    redlock__node_uri u;

    PARSE_OK("unix:///tmp/a.sock?db=1", &u);
    redlock__uri_clear(&u);
    PARSE_OK("redis://[::1]:2", &u);
    ck_assert_ptr_null(u.path);
    ck_assert_int_eq(u.db, 0);
    ck_assert_str_eq(u.display, "[::1]:2");
    redlock__uri_clear(&u);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *uri_suite(void)
{
    Suite *s = suite_create("uri");
    TCase *valid = tcase_create("valid");
    TCase *bad = tcase_create("malformed");
    TCase *robust = tcase_create("robustness");
    TCase *clear = tcase_create("clear");

    tcase_add_test(valid, test_plain_host);
    tcase_add_test(valid, test_ipv4_with_port);
    tcase_add_test(valid, test_port_bounds);
    tcase_add_test(valid, test_with_db);
    tcase_add_test(valid, test_trailing_slash_is_db0);
    tcase_add_test(valid, test_user_and_password);
    tcase_add_test(valid, test_password_only);
    tcase_add_test(valid, test_user_only_and_empty_parts);
    tcase_add_test(valid, test_percent_decoding);
    tcase_add_test(valid, test_last_at_ends_userinfo);
    tcase_add_test(valid, test_ipv6);
    tcase_add_test(valid, test_rediss);
    tcase_add_test(valid, test_uppercase_scheme);
    tcase_add_test(valid, test_unix);
    tcase_add_test(valid, test_unix_with_db);
    tcase_add_test(valid, test_unix_path_is_literal);
    tcase_add_test(valid, test_unix_path_limit);
    tcase_add_test(valid, test_host_length_limit);
    tcase_add_test(valid, test_uri_length_limit);
    suite_add_tcase(s, valid);

    tcase_add_test(bad, test_bad_empty);
    tcase_add_test(bad, test_bad_scheme);
    tcase_add_test(bad, test_bad_empty_host);
    tcase_add_test(bad, test_bad_host_char);
    tcase_add_test(bad, test_bad_ipv6);
    tcase_add_test(bad, test_bad_after_bracket);
    tcase_add_test(bad, test_bad_port);
    tcase_add_test(bad, test_bad_db);
    tcase_add_test(bad, test_bad_trailing_junk);
    tcase_add_test(bad, test_bad_percent_escape);
    tcase_add_test(bad, test_error_never_quotes_password);
    tcase_add_test(bad, test_bad_control_char);
    tcase_add_test(bad, test_bad_unix);
    suite_add_tcase(s, bad);

    tcase_add_test(robust, test_malformed_table);
    tcase_add_test(robust, test_prefixes_and_mutations);
    tcase_add_test(robust, test_err_buffer_bounds);
    tcase_add_test(robust, test_long_token_is_cut_in_message);
    tcase_add_test(robust, test_null_out);
    tcase_add_test(robust, test_client_new_never_echoes_password);
    /* Valgrind runs the mutation loop slowly. */
    tcase_set_timeout(robust, 60);
    suite_add_tcase(s, robust);

    tcase_add_test(clear, test_clear_zeroed_and_twice);
    tcase_add_test(clear, test_reuse_after_clear);
    suite_add_tcase(s, clear);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(uri_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
