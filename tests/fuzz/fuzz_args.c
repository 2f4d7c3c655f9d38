/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The redlock tool's parsing on arbitrary input: the command line (global
 * options, exec's, status's and unlock's, as redlock's main() reads them),
 * the node list split ($REDLOCK_NODES), configuration file text, durations
 * and quorums, and the escaping of untrusted text for the terminal.
 *
 * The first input byte picks what is fuzzed; the rest is the input (for
 * the command line, NUL-separated arguments). Besides "no crash, no leak,
 * no undefined behaviour":
 *   - every rejected input gives a usage error (64) and prints an error;
 *     nothing else comes out (70 would be an internal error);
 *   - what is accepted is within the documented ranges;
 *   - the node split is lossless, and masking passwords keeps the shape;
 *   - escaped text holds no control byte, no C1 control and no byte that
 *     is not UTF-8, and (when not cut) unescapes to the input.
 * The tool's cli_error & co. are replaced here by counters (they print in
 * the tool): the parsers themselves never exit or touch the environment.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config/nodelist.h"

#define MAX_ARGS 64
#define MAX_INPUT 4096

static int errors, warnings;

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_args: %s\n", what);
        abort();
    }
}

/* Escaped text: no C0/DEL byte, valid UTF-8, no C1 code point. */
static void check_clean(const char *s, const char *what)
{
    const unsigned char *p = (const unsigned char *)s;
    uint32_t cp;
    size_t n;

    while (*p) {
        require(*p >= 0x20 && *p != 0x7f, what);
        n = cli_utf8_len(p, &cp);
        require(n > 0, what);
        require(cp < 0x80 || cp > 0x9f, what);
        p += n;
    }
}

/* The tool's reporting functions: formatted like the tool does, so that
 * a bad format argument (a NULL %s) shows up here. */
static void format(const char *what, const char *fmt, va_list ap)
{
    char why[1024], safe[4 * sizeof(why)];

    vsnprintf(why, sizeof(why), fmt, ap);
    check_clean(cli_escape(why, safe, sizeof(safe)), "escaped message");
    cli_escape(what ? what : "error", safe, sizeof(safe));
}

void cli_error(const char *what, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    format(what, fmt, ap);
    va_end(ap);
    errors++;
}

void cli_warn(const char *what, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    format(what, fmt, ap);
    va_end(ap);
    warnings++;
}

void cli_info(const cli_globals *g, const char *what, const char *fmt, ...)
{
    va_list ap;

    (void)g;
    va_start(ap, fmt);
    format(what, fmt, ap);
    va_end(ap);
}

int cli_usage(const char *cmd, int to_stderr)
{
    (void)cmd, (void)to_stderr;
    return 0;
}

/* ---- the command line ------------------------------------------------------- */

static void check_exec(const cli_exec_opts *o)
{
    require(o->name && o->cmd && o->cmd[0], "exec accepted without a name or command");
    require(o->wait_ms >= -1, "negative --wait");
    require(o->lease_ms >= 0 && o->grace_ms >= 0, "negative --lease or --grace");
    require(o->unavailable_ms >= 1, "--unavailable-timeout below 1");
    require(o->conflict_exit >= 0 && o->conflict_exit <= 255, "--conflict-exit-code range");
    if (o->command)
        require(o->cmd == o->sh_argv && strcmp(o->cmd[0], "/bin/sh") == 0 &&
                    strcmp(o->cmd[2], o->command) == 0 && !o->cmd[3],
                "-c does not run /bin/sh -c STRING");
}

static void check_nodes(const cli_globals *g)
{
    size_t i;

    require(g->n_nodes >= 1 && g->n_nodes <= 64, "node count out of range");
    for (i = 0; i < g->n_nodes; i++)
        /* An item may hold ',' (a sentinel URI's hosts), never a split point. */
        require(g->nodes[i][0] && *redlock__nodelist_item_end(g->nodes[i]) == '\0',
                "bad node in the split list");
    require(g->quorum == 0 || g->quorum == REDLOCK_QUORUM_ALL ||
                (g->quorum >= 1 && (size_t)g->quorum <= g->n_nodes),
            "quorum out of range");
}

/* What redlock's run() does before it creates a client. */
static int parse_command_line(cli_globals *g, int argc, char **argv)
{
    static const cli_opt top_opts[] = {{"version", 'V', 0, 1}, {NULL, 0, 0, 0}};
    static const cli_opt unlock_opts[] = {{"force", 'f', 0, 1}, {NULL, 0, 0, 0}};
    static const cli_opt no_opts[] = {{NULL, 0, 0, 0}};
    cli_args a = {argc, argv, 1, NULL, g};
    cli_exec_opts o;
    const char *v, *name;
    int rc, force = 0;

    switch (cli_next(&a, top_opts, &v)) {
    case CLI_ARG_ERROR:
        return CLI_EX_USAGE;
    case CLI_OPT_HELP:
    case 1:
        return -1;
    case CLI_ARG_POSITIONAL:
        break;
    default:
        cli_error(NULL, "usage"); /* the tool prints the usage text */
        return CLI_EX_USAGE;
    }
    argc -= a.i;
    argv += a.i;
    if (strcmp(v, "exec") == 0) {
        if ((rc = cli_parse_exec(g, argc, argv, &o)) != 0)
            return rc;
        check_exec(&o);
        if ((rc = cli_exec_defaults(g, &o)) != 0)
            return rc;
        check_exec(&o);
    } else if (strcmp(v, "status") == 0) {
        if ((rc = cli_parse_name(g, "status", argc, argv, no_opts, NULL, &name)) != 0)
            return rc;
        require(name != NULL, "status without a name");
    } else if (strcmp(v, "unlock") == 0) {
        if ((rc = cli_parse_name(g, "unlock", argc, argv, unlock_opts, &force, &name)) != 0)
            return rc;
        require(name != NULL, "unlock without a name");
    } else {
        return -1; /* rig, demo, version, help: parsed elsewhere */
    }
    if ((rc = cli_resolve_nodes(g)) != 0)
        return rc;
    check_nodes(g);
    return 0;
}

static void fuzz_command_line(const char *data, size_t size)
{
    char *argv[MAX_ARGS + 2];
    int argc = 0, rc;
    size_t start = 0, i;
    cli_globals g;

    argv[argc++] = strdup("redlock");
    for (i = 0; i <= size && argc <= MAX_ARGS; i++) {
        if (i == size || data[i] == '\0') {
            /* Each argument its own allocation, so overreads are caught. */
            argv[argc] = malloc(i - start + 1);
            require(argv[argc] != NULL, "out of memory");
            memcpy(argv[argc], data + start, i - start);
            argv[argc][i - start] = '\0';
            argc++;
            start = i + 1;
        }
    }
    argv[argc] = NULL;
    memset(&g, 0, sizeof(g));
    g.config_loaded = 1; /* no configuration file: nothing is read from disk */
    errors = 0;
    rc = parse_command_line(&g, argc, argv);
    require(rc == 0 || rc == -1 || rc == CLI_EX_USAGE, "not a usage error code");
    if (rc == CLI_EX_USAGE)
        require(errors > 0, "usage error without a message");
    if (rc == 0)
        require(errors == 0, "accepted with an error message");
    cli_free_globals(&g);
    for (i = 0; i < (size_t)argc; i++)
        free(argv[i]);
}

/* ---- the node list ------------------------------------------------------------ */

static void fuzz_node_list(const char *s)
{
    cli_globals g;
    char *masked, *joined;
    size_t i, len = 0;
    int rc, level;

    memset(&g, 0, sizeof(g));
    level = cli_nodes_userinfo(s);
    require(level >= 0 && level <= 2, "userinfo level");
    masked = strdup(s);
    require(masked != NULL, "out of memory");
    cli_mask_passwords(masked);
    require(strlen(masked) == strlen(s), "masking changed the length");
    require(cli_nodes_userinfo(masked) == level, "masking changed the user info");
    if (level < 2)
        require(strcmp(masked, s) == 0, "masked a list without a password");
    free(masked);

    g.nodes_buf = strdup(s);
    require(g.nodes_buf != NULL, "out of memory");
    errors = 0;
    rc = cli_split_nodes(&g, "REDLOCK_NODES");
    require(rc == 0 || rc == CLI_EX_USAGE, "not a usage error code");
    require((rc == 0) == (errors == 0), "error message and result disagree");
    if (rc == 0) {
        check_nodes(&g);
        joined = malloc(strlen(s) + 1);
        require(joined != NULL, "out of memory");
        for (i = 0; i < g.n_nodes; i++)
            len += (size_t)sprintf(joined + len, "%s%s", i ? "," : "", g.nodes[i]);
        require(strcmp(joined, s) == 0, "the split lost or changed something");
        free(joined);
    }
    cli_free_globals(&g);
}

/* ---- configuration text --------------------------------------------------------- */

static void fuzz_config(const char *data, size_t size)
{
    static const char path[] = "conf.d/fuzz.conf";
    cli_config cfg;
    char *text = malloc(size ? size : 1);
    int rc;

    require(text != NULL, "out of memory");
    memcpy(text, data, size);
    memset(&cfg, 0, sizeof(cfg));
    errors = 0;
    rc = cli_config_parse(&cfg, path, text, size);
    require(rc == 0 || rc == CLI_EX_USAGE, "not a usage error code");
    require((rc == 0) == (errors == 0), "error message and result disagree");
    if (rc == 0) {
        const char *paths[] = {cfg.tls_ca, cfg.tls_cert, cfg.tls_key, cfg.password_file};
        size_t i;

        require(!cfg.has_wait || cfg.wait_ms >= -1, "wait out of range");
        require(!cfg.has_lease || cfg.lease_ms >= 0, "lease out of range");
        require(cfg.quorum == 0 || cfg.quorum == REDLOCK_QUORUM_ALL ||
                    (cfg.quorum >= 1 && cfg.quorum <= 64),
                "quorum out of range");
        for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
            require(!paths[i] || paths[i][0] == '/' || strncmp(paths[i], "conf.d/", 7) == 0,
                    "a relative path not resolved against the file's directory");
        require(!cfg.nodes || (cfg.nodes[0] && cfg.nodes[0] != ' '), "untrimmed value");
    }
    cli_config_free(&cfg);
    free(text);
}

/* ---- durations, quorums, escaping ------------------------------------------------ */

/* Undoes cli_escape(): \\ and \xNN. */
static size_t unescape(const char *s, char *out)
{
    size_t n = 0;

    while (*s) {
        if (s[0] == '\\' && s[1] == '\\') {
            out[n++] = '\\';
            s += 2;
        } else if (s[0] == '\\' && s[1] == 'x') {
            unsigned v;

            require(sscanf(s + 2, "%2x", &v) == 1, "bad \\x escape");
            out[n++] = (char)v;
            s += 4;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
    return n;
}

static void fuzz_text(const char *s)
{
    static const size_t caps[] = {1, 2, 5, 17, 64};
    size_t len = strlen(s), big = 4 * len + 1, i;
    char *buf = malloc(big), *back = malloc(big), *json = NULL;
    size_t json_len = 0;
    int64_t ms;
    int q, rc;
    FILE *f;

    require(buf && back, "out of memory");
    /* Complete: unescapes to the input. */
    cli_escape(s, buf, big);
    check_clean(buf, "cli_escape output");
    require(unescape(buf, back) == len && memcmp(back, s, len) == 0, "escaping lost data");
    /* Cut: still whole characters, still clean. */
    for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        char small[64];

        cli_escape(s, small, caps[i]);
        require(strlen(small) < caps[i], "cli_escape overflowed");
        check_clean(small, "cut cli_escape output");
    }
    f = open_memstream(&json, &json_len);
    require(f != NULL, "open_memstream");
    cli_fput_escaped(f, s, 1);
    fclose(f);
    require(json_len >= 2 && json[0] == '"' && json[json_len - 1] == '"', "JSON quotes");
    check_clean(json, "JSON output");
    for (i = 1; i + 1 < json_len; i++)
        require(json[i] != '"' || json[i - 1] == '\\', "unescaped quote in JSON");
    free(json);
    free(buf);
    free(back);

    errors = 0;
    rc = cli_parse_duration("--wait", s, 0, INT64_MAX / 1000000, &ms);
    require(rc == 0 || rc == CLI_EX_USAGE, "duration: not a usage error code");
    require((rc == 0) == (errors == 0), "duration: error message and result disagree");
    if (rc == 0) {
        require(ms >= 0 && ms <= INT64_MAX / 1000000, "duration out of range");
        if (strspn(s, "0123456789") == len && len < 13)
            require(ms == strtoll(s, NULL, 10), "a bare number is not milliseconds");
    }
    errors = 0;
    rc = cli_parse_quorum("--quorum", s, &q);
    require((rc == 0) == (errors == 0), "quorum: error message and result disagree");
    if (rc == 0)
        require(q == REDLOCK_QUORUM_ALL || (q >= 1 && q <= 64), "quorum out of range");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    /* Nodes come from the input, never from the fuzzer's environment. */
    unsetenv("REDLOCK_NODES");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s;

    if (size < 1 || size > MAX_INPUT)
        return 0;
    s = malloc(size);
    require(s != NULL, "out of memory");
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0'; /* for the string modes; embedded NULs end it early */
    switch (data[0] % 4) {
    case 0:
        fuzz_command_line((const char *)data + 1, size - 1);
        break;
    case 1:
        fuzz_node_list(s);
        break;
    case 2:
        fuzz_config((const char *)data + 1, size - 1);
        break;
    default:
        fuzz_text(s);
        break;
    }
    free(s);
    return 0;
}
