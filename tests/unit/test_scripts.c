/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The embedded scripts: each is byte for byte its file in lua/ with every
 * "--@include lib/<file>.lua" line replaced by that file (expanded here
 * independently of the build's own expansion), carries the SHA1 that
 * EVALSHA will use, and documents its interface in a header comment
 * (KEYS, ARGV, results), since the Lua files are the contract shared with
 * other clients of the same keys.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "resp/scripts.h"

#ifndef LUA_DIR
#error "LUA_DIR must name the source lua/ directory"
#endif

/* The whole file, or NULL. The caller frees it. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        *len = fread(buf, 1, (size_t)n, f);
        buf[*len] = '\0';
    }
    fclose(f);
    return buf;
}

START_TEST(digest_matches_body)
{
    const redlock__script *s = &redlock__scripts[_i];
    unsigned char md[SHA_DIGEST_LENGTH];
    char hex[2 * SHA_DIGEST_LENGTH + 1];
    int i;

    ck_assert_ptr_nonnull(s->name);
    ck_assert_uint_eq(strlen(s->body), s->len);
    SHA1((const unsigned char *)s->body, s->len, md);
    for (i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    ck_assert_msg(strcmp(hex, s->sha1) == 0, "%s: embedded %s, body hashes to %s", s->name,
                  s->sha1, hex);
}
END_TEST

#define INCLUDE_LINE "--@include "

/* The source file with its include lines replaced by the included files
 * (without their last newline), or NULL. The caller frees it. */
static char *expanded_source(const char *name, size_t *len)
{
    char path[512];
    size_t src_len = 0, out_len = 0, cap;
    char *src, *out, *p;

    snprintf(path, sizeof(path), "%s/%s.lua", LUA_DIR, name);
    if (!(src = read_file(path, &src_len)))
        return NULL;
    cap = src_len + 1;
    out = malloc(cap);
    for (p = src; out && p < src + src_len;) {
        char *eol = strchr(p, '\n');
        size_t line_len = eol ? (size_t)(eol - p) : strlen(p);
        const char *piece = p;
        size_t piece_len = line_len;
        char *lib = NULL;

        if (strncmp(p, INCLUDE_LINE, strlen(INCLUDE_LINE)) == 0) {
            char lib_path[512];
            size_t lib_len = 0;

            snprintf(lib_path, sizeof(lib_path), "%s/%.*s", LUA_DIR,
                     (int)(line_len - strlen(INCLUDE_LINE)), p + strlen(INCLUDE_LINE));
            ck_assert_msg((lib = read_file(lib_path, &lib_len)) != NULL, "%s.lua: cannot read %s",
                          name, lib_path);
            if (lib_len > 0 && lib[lib_len - 1] == '\n')
                lib_len--;
            piece = lib;
            piece_len = lib_len;
        }
        if (out_len + piece_len + 1 >= cap) {
            cap = 2 * (out_len + piece_len + 1);
            out = realloc(out, cap);
        }
        if (out) {
            memcpy(out + out_len, piece, piece_len);
            out_len += piece_len;
            if (eol)
                out[out_len++] = '\n';
        }
        free(lib);
        p += line_len + (eol ? 1 : 0);
    }
    free(src);
    *len = out_len;
    return out;
}

START_TEST(body_is_the_source_file)
{
    const redlock__script *s = &redlock__scripts[_i];
    size_t len = 0;
    char *file = expanded_source(s->name, &len);

    ck_assert_msg(file != NULL, "cannot read %s/%s.lua", LUA_DIR, s->name);
    ck_assert_msg(len == s->len && memcmp(file, s->body, len) == 0,
                  "%s: embedded bytes differ from lua/%s.lua with its includes (stale build?)",
                  s->name, s->name);
    ck_assert_msg(strncmp(s->body, INCLUDE_LINE, strlen(INCLUDE_LINE)) != 0 &&
                      strstr(s->body, "\n" INCLUDE_LINE) == NULL,
                  "%s: an include was not expanded", s->name);
    free(file);
}
END_TEST

/* Who is first in a fair queue decides grants on every node: each script
 * that asks must ask lua/lib/fair_queue.lua, never a copy of its own. */
START_TEST(fair_queue_rule_written_once)
{
    const redlock__script *s = &redlock__scripts[_i];
    const char *def = "local function first_waiter(";
    char path[512];
    size_t len = 0;
    char *src, *first;

    if (!strstr(s->body, "first_waiter("))
        return;
    snprintf(path, sizeof(path), "%s/%s.lua", LUA_DIR, s->name);
    ck_assert_ptr_nonnull(src = read_file(path, &len));
    ck_assert_msg(strstr(src, def) == NULL, "%s.lua defines first_waiter itself", s->name);
    ck_assert_msg(strstr(src, INCLUDE_LINE "lib/fair_queue.lua\n") != NULL,
                  "%s.lua uses first_waiter without including lib/fair_queue.lua", s->name);
    first = strstr(s->body, def);
    ck_assert_msg(first && !strstr(first + 1, def), "%s: first_waiter defined %s", s->name,
                  first ? "twice" : "nowhere");
    free(src);
}
END_TEST

START_TEST(header_documents_interface)
{
    const redlock__script *s = &redlock__scripts[_i];

    ck_assert_msg(strncmp(s->body, "-- ", 3) == 0, "%s: no header comment", s->name);
    ck_assert_msg(strstr(s->body, "-- KEYS[1]") != NULL, "%s: KEYS not documented", s->name);
    ck_assert_msg(strstr(s->body, "-- ARGV[1]") != NULL || strstr(s->body, "no ARGV") != NULL,
                  "%s: ARGV not documented", s->name);
    ck_assert_msg(strstr(s->body, "Returns") != NULL || strstr(s->body, "Result") != NULL,
                  "%s: results not documented", s->name);
}
END_TEST

START_TEST(names_and_digests_are_distinct)
{
    int i, j;

    for (i = 0; i < REDLOCK__SCRIPT_COUNT; i++)
        for (j = i + 1; j < REDLOCK__SCRIPT_COUNT; j++) {
            ck_assert_str_ne(redlock__scripts[i].name, redlock__scripts[j].name);
            ck_assert_str_ne(redlock__scripts[i].sha1, redlock__scripts[j].sha1);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scripts");
    TCase *tc = tcase_create("embedded");
    SRunner *sr;
    int failed;

    tcase_add_loop_test(tc, digest_matches_body, 0, REDLOCK__SCRIPT_COUNT);
    tcase_add_loop_test(tc, body_is_the_source_file, 0, REDLOCK__SCRIPT_COUNT);
    tcase_add_loop_test(tc, header_documents_interface, 0, REDLOCK__SCRIPT_COUNT);
    tcase_add_loop_test(tc, fair_queue_rule_written_once, 0, REDLOCK__SCRIPT_COUNT);
    tcase_add_test(tc, names_and_digests_are_distinct);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
