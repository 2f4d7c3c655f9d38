/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Configuration files: which one applies, and what it says.
 *
 * One file is read, the first of: --config FILE, $REDLOCK_CONFIG,
 * $XDG_CONFIG_HOME/redlock/config (default ~/.config/redlock/config),
 * /etc/redlock/config. The first two must exist; the others may not.
 * The format is deliberately small:
 *
 *   # a comment (a line whose first non-blank character is '#')
 *   nodes = rediss://r1:6379,rediss://r2:6379,rediss://r3:6379
 *   tls_ca = ca.pem              (relative to the file's directory)
 *   user = app
 *   password_file = /etc/redlock/password
 *   wait = 30s
 *   replica_acks = 1             (exec: replicas that acknowledge each grant)
 *
 * Values run to the end of the line, blanks around them removed; '#'
 * inside a value is part of it (sentinel URIs use it). Unknown keys are
 * errors, so a typo does not silently fall back to a default. There is
 * no "password" key: a password belongs in a file of its own that only
 * its owner can read (password_file).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Larger files are refused: a configuration is a few lines. */
#define CONFIG_MAX_BYTES (64 * 1024)
/* A password file holds one password. */
#define SECRET_MAX_BYTES 4096

enum {
    K_NODES,
    K_TLS_CA,
    K_TLS_CERT,
    K_TLS_KEY,
    K_TLS_SERVER_NAME,
    K_USER,
    K_PASSWORD_FILE,
    K_WAIT,
    K_LEASE,
    K_QUORUM,
    K_REPLICA_ACKS,
    K_REPLICA_TIMEOUT
};

static const struct {
    const char *name;
    int id;
    int is_path;              /* resolved against the file's directory */
} keys[] = {
    {"nodes", K_NODES, 0},
    {"tls_ca", K_TLS_CA, 1},
    {"tls_cert", K_TLS_CERT, 1},
    {"tls_key", K_TLS_KEY, 1},
    {"tls_server_name", K_TLS_SERVER_NAME, 0},
    {"user", K_USER, 0},
    {"password_file", K_PASSWORD_FILE, 1},
    {"wait", K_WAIT, 0},
    {"lease", K_LEASE, 0},
    {"quorum", K_QUORUM, 0},
    {"replica_acks", K_REPLICA_ACKS, 0},
    {"replica_timeout", K_REPLICA_TIMEOUT, 0},
};

void cli_config_free(cli_config *cfg)
{
    free(cfg->path);
    free(cfg->nodes);
    free(cfg->tls_ca);
    free(cfg->tls_cert);
    free(cfg->tls_key);
    free(cfg->tls_server_name);
    free(cfg->user);
    free(cfg->password_file);
    memset(cfg, 0, sizeof(*cfg));
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* value, or dir/value for a relative path; NULL if out of memory. */
static char *resolve_path(const char *path, const char *value)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len, len;
    char *out;

    if (value[0] == '/' || !slash)
        return strdup(value);
    dir_len = (size_t)(slash - path);
    len = dir_len + 1 + strlen(value) + 1;
    if (!(out = malloc(len)))
        return NULL;
    snprintf(out, len, "%.*s/%s", (int)dir_len, path, value);
    return out;
}

static int set_string(char **slot, char *value, const char *where)
{
    if (!value) {
        cli_error(where, "out of memory");
        return CLI_EX_SOFTWARE;
    }
    free(*slot);
    *slot = value;
    return 0;
}

/* One "key = value" line (already without its line break). */
static int parse_line(cli_config *cfg, const char *path, unsigned line, const char *s,
                      size_t len)
{
    const char *end = s + len, *eq, *k_end, *v;
    char where[300], what[340], *value;
    size_t i, k_len;
    int rc = 0;

    snprintf(where, sizeof(where), "%s:%u", path, line);
    while (s < end && is_blank(*s))
        s++;
    while (end > s && is_blank(end[-1]))
        end--;
    if (s == end || *s == '#')
        return 0;
    if (!(eq = memchr(s, '=', (size_t)(end - s)))) {
        cli_error(where, "expected 'key = value'");
        return CLI_EX_USAGE;
    }
    for (k_end = eq; k_end > s && is_blank(k_end[-1]); k_end--) {
    }
    k_len = (size_t)(k_end - s);
    for (v = eq + 1; v < end && is_blank(*v); v++) {
    }
    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strlen(keys[i].name) == k_len && strncmp(keys[i].name, s, k_len) == 0)
            break;
    if (i == sizeof(keys) / sizeof(keys[0])) {
        if (k_len == 8 && strncmp(s, "password", 8) == 0) {
            /* The value is not quoted: it is a password. */
            cli_error(where, "there is no 'password' key: put the password in a file only "
                             "you can read and name it with password_file");
            return CLI_EX_USAGE;
        }
        cli_error(where, "unknown key '%.*s' (known: nodes, tls_ca, tls_cert, tls_key, "
                         "tls_server_name, user, password_file, wait, lease, quorum, "
                         "replica_acks, replica_timeout)",
                  (int)(k_len > 60 ? 60 : k_len), s);
        return CLI_EX_USAGE;
    }
    if (v == end) {
        cli_error(where, "empty value for '%s'", keys[i].name);
        return CLI_EX_USAGE;
    }
    if (!(value = strndup(v, (size_t)(end - v)))) {
        cli_error(where, "out of memory");
        return CLI_EX_SOFTWARE;
    }
    snprintf(what, sizeof(what), "%s: %s", where, keys[i].name);
    if (keys[i].is_path) {
        char *resolved = resolve_path(path, value);

        free(value);
        if (!(value = resolved)) {
            cli_error(where, "out of memory");
            return CLI_EX_SOFTWARE;
        }
    }
    switch (keys[i].id) {
    case K_NODES:
        return set_string(&cfg->nodes, value, where);
    case K_TLS_CA:
        return set_string(&cfg->tls_ca, value, where);
    case K_TLS_CERT:
        return set_string(&cfg->tls_cert, value, where);
    case K_TLS_KEY:
        return set_string(&cfg->tls_key, value, where);
    case K_TLS_SERVER_NAME:
        return set_string(&cfg->tls_server_name, value, where);
    case K_USER:
        return set_string(&cfg->user, value, where);
    case K_PASSWORD_FILE:
        return set_string(&cfg->password_file, value, where);
    case K_WAIT:
        if (strcmp(value, "forever") == 0) {
            cfg->wait_ms = -1;
        } else {
            rc = cli_parse_duration(what, value, 0, INT64_MAX / 1000000, &cfg->wait_ms);
        }
        cfg->has_wait = rc == 0;
        break;
    case K_LEASE:
        if (strcmp(value, "watchdog") == 0) {
            cfg->lease_ms = 0;
        } else {
            rc = cli_parse_duration(what, value, 1, INT64_MAX / 1000000, &cfg->lease_ms);
        }
        cfg->has_lease = rc == 0;
        break;
    case K_QUORUM:
        rc = cli_parse_quorum(what, value, &cfg->quorum);
        break;
    case K_REPLICA_ACKS:
        rc = cli_parse_replica_acks(what, value, &cfg->replica_acks);
        cfg->has_replica_acks = rc == 0;
        break;
    case K_REPLICA_TIMEOUT:
        rc = cli_parse_replica_timeout(what, value, &cfg->replica_timeout_ms);
        cfg->has_replica_timeout = rc == 0;
        break;
    }
    free(value);
    return rc;
}

int cli_config_parse(cli_config *cfg, const char *path, const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    unsigned line = 1;
    int rc;

    for (; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char where[300];

        if (memchr(p, '\0', n)) {
            snprintf(where, sizeof(where), "%s:%u", path, line);
            cli_error(where, "the file contains a NUL byte");
            return CLI_EX_USAGE;
        }
        if ((rc = parse_line(cfg, path, line, p, n)) != 0)
            return rc;
        p += n + (nl ? 1 : 0);
    }
    return 0;
}

/* Reads a whole (small) file into a NUL-terminated buffer. errno is set
 * and NULL returned on failure; EFBIG if it is larger than max bytes. */
static char *read_small_file(const char *path, size_t max, size_t *len, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    char *buf;
    size_t got = 0;
    int saved;

    if (fd < 0)
        return NULL;
    if (fstat(fd, st) != 0 || !(buf = malloc(max + 2))) {
        saved = errno;
        close(fd);
        errno = saved;
        return NULL;
    }
    for (;;) {
        ssize_t r = read(fd, buf + got, max + 1 - got);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            saved = errno;
            free(buf);
            close(fd);
            errno = saved;
            return NULL;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got > max) {
            explicit_bzero(buf, got);
            free(buf);
            close(fd);
            errno = EFBIG;
            return NULL;
        }
    }
    close(fd);
    buf[got] = '\0';
    *len = got;
    return buf;
}

void cli_warn_if_readable(const char *what, const char *path)
{
    struct stat st;

    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    if (st.st_mode & S_IROTH)
        cli_warn(what, "%s is readable by every user of this machine (chmod 600 it)", path);
    else if (st.st_mode & S_IRGRP)
        cli_warn(what, "%s is readable by its group (chmod 600 it)", path);
}

int cli_read_secret_file(const char *what, const char *path, char **out)
{
    struct stat st;
    size_t len;
    char *buf;

    *out = NULL;
    if (!(buf = read_small_file(path, SECRET_MAX_BYTES, &len, &st))) {
        if (errno == EFBIG)
            cli_error(what, "%s: longer than %d bytes", path, SECRET_MAX_BYTES);
        else
            cli_error(what, "%s: %s", path, strerror(errno));
        return CLI_EX_USAGE;
    }
    /* One trailing line break, as `echo pw > file` writes it. */
    if (len > 0 && buf[len - 1] == '\n')
        buf[--len] = '\0';
    if (len > 0 && buf[len - 1] == '\r')
        buf[--len] = '\0';
    if (len == 0 || memchr(buf, '\0', len)) {
        cli_error(what, "%s: %s", path, len ? "contains a NUL byte" : "is empty");
        explicit_bzero(buf, len);
        free(buf);
        return CLI_EX_USAGE;
    }
    cli_warn_if_readable(what, path);
    *out = buf;
    return 0;
}

/* $XDG_CONFIG_HOME/redlock/config, else ~/.config/redlock/config; "" if
 * neither variable is usable (the XDG base directory spec ignores a
 * relative $XDG_CONFIG_HOME). */
static const char *user_config(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int n;

    if (xdg && xdg[0] == '/')
        n = snprintf(buf, cap, "%s/redlock/config", xdg);
    else if (home && home[0] == '/')
        n = snprintf(buf, cap, "%s/.config/redlock/config", home);
    else
        n = -1;
    if (n < 0 || (size_t)n >= cap)
        buf[0] = '\0';
    return buf;
}

const char *cli_config_places(char *buf, size_t cap)
{
    char user[4096];

    if (*user_config(user, sizeof(user)))
        snprintf(buf, cap, "--config FILE, $REDLOCK_CONFIG, %s or %s", user, CLI_SYSTEM_CONFIG);
    else
        snprintf(buf, cap, "--config FILE, $REDLOCK_CONFIG or %s", CLI_SYSTEM_CONFIG);
    return buf;
}

/* Reads and parses path. A missing file is fine unless required. */
static int load_file(cli_globals *g, const char *what, const char *path, int required,
                     int *found)
{
    struct stat st;
    size_t len;
    char *text;
    int rc;

    *found = 0;
    if (!(text = read_small_file(path, CONFIG_MAX_BYTES, &len, &st))) {
        if (errno == ENOENT && !required)
            return 0;
        if (errno == EFBIG)
            cli_error(what, "%s: larger than %d bytes", path, CONFIG_MAX_BYTES);
        else
            cli_error(what, "%s: %s", path, strerror(errno));
        return CLI_EX_USAGE;
    }
    *found = 1;
    if (!(g->cfg.path = strdup(path))) {
        free(text);
        cli_error(what, "out of memory");
        return CLI_EX_SOFTWARE;
    }
    rc = cli_config_parse(&g->cfg, path, text, len);
    free(text);
    if (rc == 0 && g->cfg.nodes && cli_nodes_userinfo(g->cfg.nodes) == 2 && S_ISREG(st.st_mode) &&
        (st.st_mode & (S_IRGRP | S_IROTH)))
        cli_warn(path, "holds a password in 'nodes' and is readable by %s (chmod 600 it, or "
                       "use password_file)",
                 st.st_mode & S_IROTH ? "every user" : "its group");
    return rc;
}

int cli_config_load(cli_globals *g)
{
    const char *env = getenv("REDLOCK_CONFIG");
    char user[4096];
    int found = 0, rc;

    if (g->config_loaded)
        return 0;
    g->config_loaded = 1;
    if (g->config_path)
        return load_file(g, "--config", g->config_path, 1, &found);
    if (env && *env)
        return load_file(g, "REDLOCK_CONFIG", env, 1, &found);
    if (*user_config(user, sizeof(user))) {
        if ((rc = load_file(g, "config file", user, 0, &found)) != 0 || found)
            return rc;
    }
    return load_file(g, "config file", CLI_SYSTEM_CONFIG, 0, &found);
}
