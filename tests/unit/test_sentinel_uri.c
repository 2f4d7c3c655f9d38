/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests for sentinel URIs (redis-sentinel://, rediss-sentinel://) in
 * src/config/uri.c and the node-list splitter (src/config/nodelist.c). No
 * server needed. */
#include "config/nodelist.h"
#include "config/uri.h"
#include "core/error.h"
#include "redlock/redlock.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_CAP 256

#define PARSE_OK(uri, u)                                                       \
    do {                                                                       \
        char err_[ERR_CAP];                                                    \
        int rc_;                                                               \
        memset((u), 0, sizeof(*(u)));                                          \
        rc_ = redlock__uri_parse((uri), (u), err_, sizeof(err_));              \
        ck_assert_msg(rc_ == REDLOCK_OK, "'%s' failed (%d): %s", (uri), rc_,   \
                      err_);                                                   \
    } while (0)

/* Must fail with REDLOCK_EURI, a message holding needle and no secret,
 * and leave the output zeroed. */
#define PARSE_BAD(uri, needle)                                                 \
    do {                                                                       \
        char err_[ERR_CAP];                                                    \
        redlock__node_uri u_;                                                  \
        int rc_;                                                               \
        memset(&u_, 0, sizeof(u_));                                            \
        u_.port = 4242;                                                        \
        rc_ = redlock__uri_parse((uri), &u_, err_, sizeof(err_));              \
        ck_assert_msg(rc_ == REDLOCK_EURI, "'%s' gave %d, want EURI", (uri),   \
                      rc_);                                                    \
        ck_assert_msg(strstr(err_, (needle)) != NULL,                          \
                      "'%s': message '%s' lacks '%s'", (uri), err_, (needle)); \
        ck_assert_msg(strstr(err_, "hunter2") == NULL,                         \
                      "'%s': message '%s' quotes the password", (uri), err_);  \
        ck_assert_ptr_null(u_.host);                                           \
        ck_assert_ptr_null(u_.master_name);                                    \
        ck_assert_ptr_null(u_.sentinels);                                      \
        ck_assert_int_eq(u_.n_sentinels, 0);                                   \
        ck_assert_int_eq(u_.port, 0);                                          \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Sentinel URIs: valid forms. */

START_TEST(test_one_sentinel_defaults)
{
    redlock__node_uri u;

    PARSE_OK("redis-sentinel://s1.example#mymaster", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_TCP);
    ck_assert_str_eq(u.master_name, "mymaster");
    ck_assert_int_eq(u.n_sentinels, 1);
    ck_assert_str_eq(u.sentinels[0].host, "s1.example");
    ck_assert_int_eq(u.sentinels[0].port, 26379);
    /* The first sentinel stands in as host and port. */
    ck_assert_str_eq(u.host, "s1.example");
    ck_assert_int_eq(u.port, 26379);
    ck_assert_int_eq(u.db, 0);
    ck_assert_ptr_null(u.username);
    ck_assert_ptr_null(u.password);
    ck_assert_str_eq(u.display, "mymaster@s1.example:26379");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_many_sentinels_userinfo_db)
{
    redlock__node_uri u;

    PARSE_OK("redis-sentinel://alice:s%40cret@10.0.0.1:26380,s2,[::1]:26381/3#my.master-1",
             &u);
    ck_assert_str_eq(u.username, "alice");
    ck_assert_str_eq(u.password, "s@cret");
    ck_assert_int_eq(u.n_sentinels, 3);
    ck_assert_str_eq(u.sentinels[0].host, "10.0.0.1");
    ck_assert_int_eq(u.sentinels[0].port, 26380);
    ck_assert_str_eq(u.sentinels[1].host, "s2");
    ck_assert_int_eq(u.sentinels[1].port, 26379);
    ck_assert_str_eq(u.sentinels[2].host, "::1");
    ck_assert_int_eq(u.sentinels[2].port, 26381);
    ck_assert_int_eq(u.db, 3);
    ck_assert_str_eq(u.master_name, "my.master-1");
    /* The display never carries the user info. */
    ck_assert_str_eq(u.display, "my.master-1@10.0.0.1:26380,s2:26379,[::1]:26381");
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_tls_and_case)
{
    redlock__node_uri u;

    PARSE_OK("rediss-sentinel://s1:1#m", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_TLS);
    redlock__uri_clear(&u);
    PARSE_OK("REDIS-Sentinel://s1#m", &u);
    ck_assert_int_eq(u.kind, REDLOCK__NODE_TCP);
    ck_assert_str_eq(u.master_name, "m");
    redlock__uri_clear(&u);
    PARSE_OK("redis-sentinel://s1/#m", &u);
    ck_assert_int_eq(u.db, 0);
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_password_with_hash_and_comma)
{
    redlock__node_uri u;

    /* The user info ends at the last '@' before the last '#'. */
    PARSE_OK("redis-sentinel://:p#w,x@h@s1,s2#m", &u);
    ck_assert_ptr_null(u.username);
    ck_assert_str_eq(u.password, "p#w,x@h");
    ck_assert_int_eq(u.n_sentinels, 2);
    ck_assert_str_eq(u.master_name, "m");
    ck_assert_ptr_null(strstr(u.display, "p#w"));
    redlock__uri_clear(&u);
}
END_TEST

START_TEST(test_sentinel_count_limit)
{
    char uri[1024] = "redis-sentinel://";
    redlock__node_uri u;
    int i;

    for (i = 0; i < REDLOCK__MAX_SENTINELS; i++)
        snprintf(uri + strlen(uri), sizeof(uri) - strlen(uri), "%ss%d", i ? "," : "", i);
    strcat(uri, "#m");
    PARSE_OK(uri, &u);
    ck_assert_int_eq(u.n_sentinels, REDLOCK__MAX_SENTINELS);
    redlock__uri_clear(&u);
    strcpy(strrchr(uri, '#'), ",one-more#m");
    PARSE_BAD(uri, "more than 16 sentinels");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sentinel URIs: bad input. */

START_TEST(test_bad_sentinel_uris)
{
    PARSE_BAD("redis-sentinel://s1", "no master name");
    PARSE_BAD("redis-sentinel://s1:26379", "no master name");
    PARSE_BAD("redis-sentinel://s1#", "empty master name");
    PARSE_BAD("redis-sentinel://#m", "empty host");
    PARSE_BAD("redis-sentinel://alice:hunter2@#m", "empty host");
    PARSE_BAD("redis-sentinel://s1,,s2#m", "sentinel 2: empty host");
    PARSE_BAD("redis-sentinel://s1,#m", "sentinel 2: empty host");
    PARSE_BAD("redis-sentinel://,s1#m", "sentinel 1: empty host");
    PARSE_BAD("redis-sentinel://s1:0#m", "port 0 out of range");
    PARSE_BAD("redis-sentinel://alice:hunter2@s1:99999#m", "out of range 1..65535");
    PARSE_BAD("redis-sentinel://s1:abc#m", "port 'abc' is not a number");
    PARSE_BAD("redis-sentinel://s1:#m", "empty port");
    PARSE_BAD("redis-sentinel://s1/x#m", "db 'x' is not a number");
    PARSE_BAD("redis-sentinel://s1/1/2#m", "trailing junk");
    PARSE_BAD("redis-sentinel://s1?timeout=1#m", "trailing junk");
    PARSE_BAD("redis-sentinel://s_1#m", "bad character '_' in host");
    PARSE_BAD("redis-sentinel://[::1#m", "missing ']'");
    PARSE_BAD("redis-sentinel://s1#my master", "bad character ' ' in master name");
    PARSE_BAD("redis-sentinel://s1#a/b", "bad character '/' in master name");
    PARSE_BAD("redis-sentinel:/s1#m", "missing '://'");
    PARSE_BAD("redis-sentinels://s1#m", "unknown scheme");
    PARSE_BAD("redis-sentinel://:hunter2@s1:0#m", "port 0");
    PARSE_BAD("redis-sentinel://:hunter2%zz@s1#m", "bad percent-escape in password");
}
END_TEST

START_TEST(test_plain_uri_with_comma)
{
    /* What a list without schemes turns into: one item, a clear reason. */
    PARSE_BAD("redis://127.0.0.1:7001,127.0.0.1:7002", "every node needs its scheme");
    PARSE_BAD("redis://alice:hunter2@h:1,h:2", "every node needs its scheme");
}
END_TEST

/* Every prefix and every one-byte change of a few sentinel URIs parses or
 * fails cleanly (the sanitizer builds catch leaks and overreads). */
START_TEST(test_mutations)
{
    static const char *const seeds[] = {
        "redis-sentinel://u:p@a:1,[::1]:2,b/3#m.x",
        "rediss-sentinel://s1,s2#m",
    };
    static const char alphabet[] = ",#@:/[]%0a\x01";
    size_t i, j, k;

    for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        size_t n = strlen(seeds[i]);
        char buf[128];

        for (j = 0; j <= n; j++) {
            for (k = 0; k < sizeof(alphabet); k++) {
                redlock__node_uri u;
                char err[64];
                int rc;

                memcpy(buf, seeds[i], n + 1);
                if (k + 1 == sizeof(alphabet))
                    buf[j] = '\0'; /* the prefix */
                else if (j < n)
                    buf[j] = alphabet[k];
                else
                    continue;
                memset(&u, 0, sizeof(u));
                rc = redlock__uri_parse(buf, &u, err, sizeof(err));
                ck_assert_msg(rc == REDLOCK_OK || rc == REDLOCK_EURI, "'%s': %d", buf, rc);
                if (rc == REDLOCK_OK) {
                    ck_assert_ptr_nonnull(u.display);
                    ck_assert(u.master_name == NULL || u.n_sentinels >= 1);
                }
                redlock__uri_clear(&u);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Node lists. */

#define SPLIT(list_literal, buf, uris, n, err)                                 \
    (snprintf((buf), sizeof(buf), "%s", (list_literal)),                      \
     redlock__nodelist_split((buf), (uris), REDLOCK_MAX_NODES, &(n), (err),    \
                             sizeof(err)))

START_TEST(test_split_plain)
{
    char buf[512], err[128];
    const char *uris[REDLOCK_MAX_NODES];
    size_t n = 0;

    ck_assert_int_eq(SPLIT("redis://a:1,rediss://b:2,unix:///tmp/s?db=1", buf, uris, n, err),
                     REDLOCK_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(uris[0], "redis://a:1");
    ck_assert_str_eq(uris[1], "rediss://b:2");
    ck_assert_str_eq(uris[2], "unix:///tmp/s?db=1");
    n = 0;
    ck_assert_int_eq(SPLIT("redis://a", buf, uris, n, err), REDLOCK_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(uris[0], "redis://a");
}
END_TEST

START_TEST(test_split_sentinel_keeps_commas)
{
    char buf[512], err[128];
    const char *uris[REDLOCK_MAX_NODES];
    size_t n = 0;

    ck_assert_int_eq(SPLIT("redis-sentinel://s1,s2:26380#g1,redis://b:2,"
                           "rediss-sentinel://x,[::1]:3/1#g2,REDIS-SENTINEL://y#g3",
                           buf, uris, n, err),
                     REDLOCK_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(uris[0], "redis-sentinel://s1,s2:26380#g1");
    ck_assert_str_eq(uris[1], "redis://b:2");
    ck_assert_str_eq(uris[2], "rediss-sentinel://x,[::1]:3/1#g2");
    ck_assert_str_eq(uris[3], "REDIS-SENTINEL://y#g3");
}
END_TEST

START_TEST(test_split_comma_in_password)
{
    char buf[512], err[128];
    const char *uris[REDLOCK_MAX_NODES];
    size_t n = 0;

    /* A ',' not followed by a scheme stays in its item. */
    ck_assert_int_eq(SPLIT("redis://:pa,ss@h:1,unix:///s", buf, uris, n, err), REDLOCK_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(uris[0], "redis://:pa,ss@h:1");
    ck_assert_str_eq(uris[1], "unix:///s");
}
END_TEST

START_TEST(test_split_bare_items_stay_in_previous)
{
    char buf[512], err[128];
    const char *uris[REDLOCK_MAX_NODES];
    size_t n = 0;
    redlock__node_uri u;

    /* Bare host:port items were never accepted (a URI needs its scheme);
     * now they stay in the URI before them, whose parse names the rule. */
    ck_assert_int_eq(SPLIT("redis://a:1,b:2", buf, uris, n, err), REDLOCK_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(redlock__uri_parse(uris[0], &u, err, sizeof(err)), REDLOCK_EURI);
    ck_assert_ptr_nonnull(strstr(err, "every node needs its scheme"));
    /* A mistyped scheme after ',' still splits, and gets its own reason. */
    n = 0;
    ck_assert_int_eq(SPLIT("redis://a:1,ftp://b", buf, uris, n, err), REDLOCK_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(uris[1], "ftp://b");
}
END_TEST

START_TEST(test_split_empty_items)
{
    static const struct {
        const char *list, *msg;
    } bad[] = {
        {"", "node 0: empty URI"},
        {",redis://a", "node 0: empty URI"},
        {"redis://a:1,,redis://b:2", "node 1: empty URI"},
        {"redis://:hunter2@a:1,", "node 1: empty URI"},
        {"redis-sentinel://s1,s2#m,", "node 1: empty URI"},
    };
    char buf[512], err[128];
    const char *uris[REDLOCK_MAX_NODES];
    size_t i, n;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        n = 0;
        ck_assert_int_eq(SPLIT(bad[i].list, buf, uris, n, err), REDLOCK_EURI);
        ck_assert_msg(strcmp(err, bad[i].msg) == 0, "'%s': '%s'", bad[i].list, err);
    }
}
END_TEST

START_TEST(test_split_appends_and_caps)
{
    char buf[2048], more[32] = "redis://c", err[128];
    const char *uris[REDLOCK_MAX_NODES];
    size_t n = 0, i;

    /* Lists given several times (-n twice) concatenate. */
    ck_assert_int_eq(SPLIT("redis://a,redis://b", buf, uris, n, err), REDLOCK_OK);
    ck_assert_int_eq(redlock__nodelist_split(more, uris, REDLOCK_MAX_NODES, &n, err,
                                             sizeof(err)),
                     REDLOCK_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(uris[2], "redis://c");

    buf[0] = '\0';
    for (i = 0; i <= REDLOCK_MAX_NODES; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%sredis://h%zu", i ? "," : "",
                 i);
    n = 0;
    ck_assert_int_eq(redlock__nodelist_split(buf, uris, REDLOCK_MAX_NODES, &n, err,
                                             sizeof(err)),
                     REDLOCK_EINVAL);
    ck_assert_str_eq(err, "more than 64 nodes");
}
END_TEST

START_TEST(test_item_end)
{
    const char *l = "redis-sentinel://a,b#m,redis://c";

    ck_assert_ptr_eq(redlock__nodelist_item_end(l), strchr(l, '#') + 2);
    ck_assert_ptr_eq(redlock__nodelist_item_end(l + 23), l + strlen(l));
}
END_TEST

static Suite *sentinel_uri_suite(void)
{
    Suite *s = suite_create("sentinel_uri");
    TCase *valid = tcase_create("valid");
    TCase *bad = tcase_create("malformed");
    TCase *list = tcase_create("nodelist");

    tcase_add_test(valid, test_one_sentinel_defaults);
    tcase_add_test(valid, test_many_sentinels_userinfo_db);
    tcase_add_test(valid, test_tls_and_case);
    tcase_add_test(valid, test_password_with_hash_and_comma);
    tcase_add_test(valid, test_sentinel_count_limit);
    suite_add_tcase(s, valid);
    tcase_add_test(bad, test_bad_sentinel_uris);
    tcase_add_test(bad, test_plain_uri_with_comma);
    tcase_add_test(bad, test_mutations);
    tcase_set_timeout(bad, 60);
    suite_add_tcase(s, bad);
    tcase_add_test(list, test_split_plain);
    tcase_add_test(list, test_split_sentinel_keeps_commas);
    tcase_add_test(list, test_split_comma_in_password);
    tcase_add_test(list, test_split_bare_items_stay_in_previous);
    tcase_add_test(list, test_split_empty_items);
    tcase_add_test(list, test_split_appends_and_caps);
    tcase_add_test(list, test_item_end);
    suite_add_tcase(s, list);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sentinel_uri_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
