/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node URI parser on arbitrary bytes. Besides "no crash, no leak, no
 * undefined behaviour", every result must keep the parser's promises:
 * a success is a complete, in-range node; a failure leaves *out empty and
 * a message that never quotes the user info (which holds the password);
 * and a parsed TCP node printed back as "redis://<display>/<db>" parses to
 * the same host, port and db (a sentinel node, printed back as
 * "redis-sentinel://<sentinels>/<db>#<master>", to the same sentinels, db
 * and master name).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/uri.h"
#include "redlock/redlock.h"

#define MAX_INPUT 8192

static void require(int ok, const char *what, const char *uri)
{
    if (!ok) {
        fprintf(stderr, "fuzz_uri: %s for input '%s'\n", what, uri);
        abort();
    }
}

static int is_empty(const redlock__node_uri *u)
{
    return u->kind == 0 && !u->host && !u->port && !u->path && !u->username &&
           !u->password && !u->db && !u->display && !u->master_name && !u->sentinels &&
           !u->n_sentinels;
}

static void check_success(const redlock__node_uri *u, const char *uri)
{
    require(u->display != NULL, "no display name", uri);
    require(!u->username || *u->username, "empty user not reported as absent", uri);
    require(!u->password || *u->password, "empty password not reported as absent", uri);
    require(u->db >= 0, "negative db", uri);
    if (u->kind == REDLOCK__NODE_UNIX) {
        require(u->path && u->path[0] == '/', "unix node without an absolute path", uri);
        require(strlen(u->path) <= 107, "unix path longer than sun_path", uri);
        require(!u->host, "unix node with a host", uri);
        return;
    }
    require(u->kind == REDLOCK__NODE_TCP || u->kind == REDLOCK__NODE_TLS, "unknown kind", uri);
    require(u->host && *u->host, "TCP node without a host", uri);
    require(u->port >= 1 && u->port <= 65535, "port out of range", uri);
    require(!u->path, "TCP node with a path", uri);
    if (u->master_name) {
        int i;

        require(*u->master_name, "empty master name", uri);
        require(u->sentinels && u->n_sentinels >= 1 && u->n_sentinels <= REDLOCK__MAX_SENTINELS,
                "sentinel count out of range", uri);
        for (i = 0; i < u->n_sentinels; i++)
            require(u->sentinels[i].host && *u->sentinels[i].host &&
                        u->sentinels[i].port >= 1 && u->sentinels[i].port <= 65535,
                    "bad sentinel", uri);
        require(strcmp(u->host, u->sentinels[0].host) == 0 && u->port == u->sentinels[0].port,
                "host and port are not the first sentinel's", uri);
    } else {
        require(!u->sentinels && !u->n_sentinels, "sentinels without a master name", uri);
    }
}

/* "redis-sentinel://<sentinels>/<db>#<master>" from the display name
 * ("<master>@<sentinels>") must describe the same node. */
static void check_sentinel_round_trip(const redlock__node_uri *u, const char *uri)
{
    char again[MAX_INPUT + 600], err[128];
    redlock__node_uri v;
    int rc, i;

    snprintf(again, sizeof(again), "redis-sentinel://%s/%d#%s", strchr(u->display, '@') + 1,
             u->db, u->master_name);
    memset(&v, 0, sizeof(v));
    rc = redlock__uri_parse(again, &v, err, sizeof(err));
    require(rc == REDLOCK_OK, "sentinel display name does not parse back", uri);
    require(strcmp(v.master_name, u->master_name) == 0, "master changed on the round trip", uri);
    require(v.db == u->db, "db changed on the round trip", uri);
    require(v.n_sentinels == u->n_sentinels, "sentinel count changed on the round trip", uri);
    for (i = 0; i < u->n_sentinels; i++)
        require(strcmp(v.sentinels[i].host, u->sentinels[i].host) == 0 &&
                    v.sentinels[i].port == u->sentinels[i].port,
                "sentinel changed on the round trip", uri);
    redlock__uri_clear(&v);
}

/* "redis://<display>/<db>" must describe the same node. */
static void check_round_trip(const redlock__node_uri *u, const char *uri)
{
    char again[600], err[128];
    redlock__node_uri v;
    int rc;

    if (u->master_name) {
        check_sentinel_round_trip(u, uri);
        return;
    }
    if (u->kind == REDLOCK__NODE_UNIX || strlen(u->display) > 500)
        return;
    snprintf(again, sizeof(again), "redis://%s/%d", u->display, u->db);
    memset(&v, 0, sizeof(v));
    rc = redlock__uri_parse(again, &v, err, sizeof(err));
    require(rc == REDLOCK_OK, "display name does not parse back", uri);
    require(strcmp(v.host, u->host) == 0, "host changed on the round trip", uri);
    require(v.port == u->port, "port changed on the round trip", uri);
    require(v.db == u->db, "db changed on the round trip", uri);
    redlock__uri_clear(&v);
}

/*
 * A failure message may echo what follows the last '@', never the user
 * info before it. Checked by difference: the same URI with the user info's
 * plain characters replaced by 'Z' (escapes, ':' and '@' kept, so it fails
 * the same way) must give a message quoting the original text no less
 * often; text that is also in the message template or elsewhere in the
 * URI then cancels out.
 */
static size_t count_in(const char *hay, const char *needle)
{
    size_t n = 0;
    const char *p = hay;

    while ((p = strstr(p, needle)) != NULL) {
        n++;
        p++;
    }
    return n;
}

/* The message of a failed parse, from the parser or (client) from
 * redlock_client_new(), which must not add the URI to it. */
static int failure_message(const char *uri, int client, char *msg, size_t cap)
{
    redlock__node_uri v;
    redlock_client *c = NULL;
    int rc;

    if (!client) {
        memset(&v, 0, sizeof(v));
        rc = redlock__uri_parse(uri, &v, msg, cap);
        if (rc == REDLOCK_OK)
            redlock__uri_clear(&v);
        return rc;
    }
    rc = redlock_client_new(&c, &uri, 1, NULL);
    if (rc == REDLOCK_OK) {
        redlock_client_free(c);
        return rc;
    }
    snprintf(msg, cap, "%s", redlock_last_error());
    return rc;
}

static void check_no_secret_echo(const char *uri, const char *msg, int client)
{
    const char *scheme_end = strstr(uri, "://"), *at = strrchr(uri, '@');
    char secret[MAX_INPUT + 1], masked[MAX_INPUT + 1], msg2[600];
    size_t n, i, from;

    /* unix:// has no user info: its path is literal, '@' included. */
    if (!scheme_end || !at || at < scheme_end + 3 || strncasecmp(uri, "unix:", 5) == 0)
        return;
    from = (size_t)(scheme_end + 3 - uri);
    n = (size_t)(at - uri) - from;
    if (n < 4)
        return; /* too short to tell a leak from a coincidence */
    memcpy(secret, uri + from, n);
    secret[n] = '\0';
    strcpy(masked, uri);
    for (i = from; i < from + n; i++) {
        if (masked[i] == '%') {
            i += 2; /* keep the escape, valid or not */
            continue;
        }
        if (masked[i] != ':' && masked[i] != '@')
            masked[i] = 'Z';
    }
    if (failure_message(masked, client, msg2, sizeof(msg2)) == REDLOCK_OK)
        return; /* a different outcome: nothing to compare */
    require(count_in(msg, secret) <= count_in(msg2, secret),
            client ? "redlock_client_new's message quotes the user info"
                   : "error message quotes the user info",
            uri);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *uri, err[128], msg[600];
    redlock__node_uri u;
    int rc;

    if (size > MAX_INPUT)
        return 0;
    uri = malloc(size + 1);
    if (!uri)
        return 0;
    memcpy(uri, data, size);
    uri[size] = '\0'; /* embedded NULs just end the string early */
    memset(&u, 0, sizeof(u));
    memset(err, 'x', sizeof(err));
    rc = redlock__uri_parse(uri, &u, err, sizeof(err));
    require(rc == REDLOCK_OK || rc == REDLOCK_EURI || rc == REDLOCK_ENOMEM,
            "unexpected return code", uri);
    if (rc == REDLOCK_OK) {
        check_success(&u, uri);
        check_round_trip(&u, uri);
        redlock__uri_clear(&u);
        require(is_empty(&u), "uri_clear left something behind", uri);
    } else {
        require(memchr(err, '\0', sizeof(err)) != NULL, "unterminated message", uri);
        require(err[0] != '\0', "failure without a message", uri);
        require(is_empty(&u), "failure left a partial result", uri);
        check_no_secret_echo(uri, err, 0);
        /* The same URI through the public constructor (no threads start:
         * it fails before). */
        if (failure_message(uri, 1, msg, sizeof(msg)) == REDLOCK_EURI)
            check_no_secret_echo(uri, msg, 1);
    }
    free(uri);
    return 0;
}
