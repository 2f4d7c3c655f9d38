/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Holder facts: host, pid, command line and start time of a hold, written
 * beside the lock in "redlock_facts:{NAME}" with the hold's lease, so an
 * operator can see who holds a lock without asking every host. They are
 * advisory: nothing in the lock's safety reads them, a failure to write
 * them never fails an acquire, and they carry the owner field so a reader
 * can tell one holder's facts from a later holder's.
 */
#include "lock/facts.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/util.h"
#include "lock/context.h"
#include "lock/health.h"
#include "lock/keys.h"
#include "lock/plan.h"

#define INSPECT_TIMEOUT_MS 1000
#define FACTS_VERSION "1"

/* The length of s cut to at most max bytes, never inside a UTF-8
 * character (a cut one would show as garbage in every status). */
static size_t cut_len(const char *s, size_t max)
{
    size_t len = strnlen(s, max + 1);

    if (len <= max)
        return len;
    len = max;
    while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
        len--;
    return len;
}

/* The first "://" in [p, end), or NULL. */
static char *find_scheme_end(char *p, const char *end)
{
    for (; p + 3 <= end; p++)
        if (p[0] == ':' && p[1] == '/' && p[2] == '/')
            return p;
    return NULL;
}

/* The last '@' in [p, end), or NULL. */
static char *find_last_at(char *p, const char *end)
{
    char *at = NULL;

    for (; p < end; p++)
        if (*p == '@')
            at = p;
    return at;
}

/*
 * Masks the password of every "scheme://user:password@" in [s, s + n)
 * with '*', in place: a command line often carries a node URI, and the
 * facts are readable by anyone who can read the lock's keys. As the URI
 * parser reads it, the user info ends at the last '@' (a password may hold
 * a raw '@', '/', '#', '?', a space or even "://"), here the last one
 * before the next URI with an '@', or the end: more than the password is
 * masked when a later word has an '@', never less.
 */
static void mask_passwords(char *s, size_t n)
{
    char *end = s + n, *p = find_scheme_end(s, end), *next, *colon, *at;

    for (; p; p = next) {
        p += 3;
        next = find_scheme_end(p, end);
        at = find_last_at(p, next ? next : end);
        /* No '@' before the next "://": that one may be inside the
         * password ("redis://app:x://y@db"), so the user info may end
         * after it. */
        while (!at && next) {
            char *from = next + 3;

            next = find_scheme_end(from, end);
            at = find_last_at(from, next ? next : end);
        }
        if (!at)
            continue;
        colon = memchr(p, ':', (size_t)(at - p));
        if (colon)
            memset(colon + 1, '*', (size_t)(at - colon - 1));
    }
}

/* This process's command line, its arguments joined with spaces. */
static char *own_command(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/cmdline", "rb");
    size_t n = 0, i, start;

    if (f) {
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    /* Each argument on its own: its end is known here, not after the join. */
    for (i = 0, start = 0; i <= n; i++)
        if (i == n || buf[i] == '\0') {
            mask_passwords(buf + start, i - start);
            start = i + 1;
        }
    for (i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
    return redlock__strdup(buf);
}

int redlock__facts_configure(redlock_lock *l, const redlock_lock_options *opts)
{
    char *command;

    l->facts_command = NULL;
    if (!opts || !opts->holder_facts)
        return REDLOCK_OK;
    command = opts->holder_command ? redlock__strdup(opts->holder_command) : own_command();
    if (!command)
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    if (opts->holder_command) /* own_command() masked each argument */
        mask_passwords(command, strlen(command)); /* before the cut: it could drop the '@' */
    command[cut_len(command, REDLOCK__FACTS_COMMAND_MAX)] = '\0';
    l->facts_command = command;
    return REDLOCK_OK;
}

void redlock__facts_forget(redlock_lock *l)
{
    free(l->facts_command);
    l->facts_command = NULL;
}

int redlock__facts_wanted(const redlock_lock *l)
{
    return l->facts_command != NULL;
}

/* ---- the line format ----------------------------------------------------- */

/* An snprintf-like writer: counts what it could not write. */
typedef struct writer {
    char *out;
    size_t cap, len;
} writer;

static void put(writer *w, const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++, w->len++)
        if (w->len + 1 < w->cap)
            w->out[w->len] = s[i];
}

/* A control byte would end the line (or make a terminal misbehave), and a
 * backslash starts an escape: those are written as \n, \\ or \xNN, so no
 * value can ever start a line of its own. */
static int needs_escape(unsigned char ch)
{
    return ch < 0x20 || ch == 0x7f || ch == '\\';
}

static void put_field(writer *w, const char *key, const char *value, size_t max)
{
    size_t i, n = cut_len(value, max);
    char esc[5];

    put(w, key, strlen(key));
    put(w, "=", 1);
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)value[i];

        if (!needs_escape(ch))
            put(w, &value[i], 1);
        else if (ch == '\\')
            put(w, "\\\\", 2);
        else if (ch == '\n')
            put(w, "\\n", 2);
        else
            put(w, esc, (size_t)snprintf(esc, sizeof(esc), "\\x%02x", ch));
    }
    put(w, "\n", 1);
}

size_t redlock__facts_format(char *out, size_t cap, const redlock_holder_facts *f)
{
    writer w = {out, cap, 0};
    char num[24];

    put_field(&w, "v", FACTS_VERSION, sizeof(FACTS_VERSION) - 1);
    put_field(&w, "owner", f->owner, sizeof(f->owner) - 1);
    put_field(&w, "host", f->host, sizeof(f->host) - 1);
    redlock__fmt_i64(num, sizeof(num), f->pid);
    put_field(&w, "pid", num, sizeof(num) - 1);
    redlock__fmt_i64(num, sizeof(num), f->since_ms);
    put_field(&w, "since_ms", num, sizeof(num) - 1);
    put_field(&w, "command", f->command, REDLOCK__FACTS_COMMAND_MAX);
    if (cap)
        out[w.len < cap ? w.len : cap - 1] = '\0';
    return w.len;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reads "key=value\n" at *p (before end) into dst (cap bytes with the
 * NUL), undoing put_field's escapes. Only what put_field writes is
 * accepted: a raw control byte, an unknown escape, an escape of a byte
 * that needs none, or a value too long for dst fails. */
static int get_field(const char **p, const char *end, const char *key, char *dst, size_t cap)
{
    size_t klen = strlen(key), n = 0;
    const char *s = *p;

    if ((size_t)(end - s) <= klen || memcmp(s, key, klen) != 0 || s[klen] != '=')
        return -1;
    for (s += klen + 1; s < end && *s != '\n'; s++) {
        unsigned char ch = (unsigned char)*s;

        if (needs_escape(ch) && ch != '\\')
            return -1;
        if (ch == '\\') {
            if (end - s >= 2 && (s[1] == '\\' || s[1] == 'n')) {
                ch = s[1] == 'n' ? '\n' : '\\';
                s += 1;
            } else if (end - s >= 4 && s[1] == 'x' && hex_digit(s[2]) >= 0 &&
                       hex_digit(s[3]) >= 0) {
                ch = (unsigned char)(hex_digit(s[2]) * 16 + hex_digit(s[3]));
                if (ch == 0 || ch == '\n' || ch == '\\' || !needs_escape(ch))
                    return -1;
                s += 3;
            } else {
                return -1;
            }
        }
        if (n + 1 >= cap)
            return -1;
        dst[n++] = (char)ch;
    }
    if (s >= end)
        return -1; /* every line ends with a newline */
    dst[n] = '\0';
    *p = s + 1;
    return 0;
}

/* A decimal number without sign, leading zeros or spaces. */
static int get_number(const char **p, const char *end, const char *key, int64_t *out)
{
    char num[20];
    size_t i;
    int64_t v = 0;

    if (get_field(p, end, key, num, sizeof(num)) != 0 || !num[0] ||
        (num[0] == '0' && num[1]))
        return -1;
    for (i = 0; num[i]; i++) {
        if (num[i] < '0' || num[i] > '9' || v > (INT64_MAX - (num[i] - '0')) / 10)
            return -1; /* 19 digits can still pass INT64_MAX */
        v = v * 10 + (num[i] - '0');
    }
    *out = v;
    return 0;
}

int redlock__facts_parse(const char *text, size_t len, redlock_holder_facts *out)
{
    const char *p = text, *end = text + len;
    char version[8];

    memset(out, 0, sizeof(*out));
    if (get_field(&p, end, "v", version, sizeof(version)) != 0 ||
        strcmp(version, FACTS_VERSION) != 0 ||
        get_field(&p, end, "owner", out->owner, sizeof(out->owner)) != 0 ||
        get_field(&p, end, "host", out->host, sizeof(out->host)) != 0 ||
        get_number(&p, end, "pid", &out->pid) != 0 ||
        get_number(&p, end, "since_ms", &out->since_ms) != 0 ||
        get_field(&p, end, "command", out->command, sizeof(out->command)) != 0 || p != end ||
        !out->owner[0]) {
        memset(out, 0, sizeof(*out));
        return -1;
    }
    out->found = 1;
    return 0;
}

/* ---- writing ------------------------------------------------------------- */

typedef struct write_ctx {
    redlock_lock *l;
    const redlock__plan *plan;
    const char *value;
    char lease[24];
} write_ctx;

static int fill_set(void *ud, size_t m, const char **argv, char **owned,
                    redlock__script_call *out)
{
    write_ctx *w = ud;

    (void)owned;
    argv[0] = "SET";
    argv[1] = redlock__key(&w->l->members[m], REDLOCK__KEY_FACTS);
    argv[2] = w->value;
    argv[3] = "PX";
    argv[4] = w->lease;
    *out = (redlock__script_call){-1, 0, 5};
    return 0;
}

static int on_set_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                        redisReply *r)
{
    write_ctx *w = ud;
    size_t m = redlock__plan_member(w->plan, batch, call);

    if (!err && r->type != REDIS_REPLY_ERROR)
        return 0;
    /* Advisory: the hold stands without them. */
    redlock__log(w->l->client, REDLOCK_LOG_DEBUG,
                 "lock '%.200s': holder facts not written on member %zu: %.200s",
                 w->l->members[0].name, m, err ? msg : r->str);
    return 0;
}

void redlock__facts_after_grant(redlock_lock *l, const char *field, int64_t lease_ms,
                                const redlock__attempt_result *res)
{
    redlock_client *c = l->client;
    unsigned char include[REDLOCK__MAX_NODES];
    redlock_holder_facts f;
    char value[4 * sizeof(redlock_holder_facts) + 64];
    write_ctx w = {l, NULL, value, ""};
    struct timespec now;
    redlock__plan p;
    size_t m, n = 0;

    memset(&f, 0, sizeof(f));
    if (!l->facts_command)
        return;
    snprintf(f.command, sizeof(f.command), "%s", l->facts_command);
    /* Members that granted this very hold. One the attempt decided without
     * may never run the acquire (its request can be dropped with the
     * connection), and facts there would name a holder the member does not
     * have; a quorum of members carries them, enough for a reader. */
    for (m = 0; m < l->n; m++) {
        include[m] = res->gen_reported[m] && strcmp(res->gens[m], res->request_id) == 0;
        n += include[m];
    }
    if (n == 0)
        return;
    redlock__copy_msg(f.owner, sizeof(f.owner), field);
    if (gethostname(f.host, sizeof(f.host)) != 0)
        f.host[0] = '\0';
    f.host[sizeof(f.host) - 1] = '\0';
    f.pid = (int64_t)getpid();
    /* A wall-clock time, for people: never used for a deadline. */
    clock_gettime(CLOCK_REALTIME, &now);
    f.since_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    redlock__facts_format(value, sizeof(value), &f);
    redlock__fmt_i64(w.lease, sizeof(w.lease), lease_ms);
    if (redlock__plan_build(&p, l, include, fill_set, &w,
                            c->tp.ops->now_ns(c->tp.ctx) +
                                redlock__node_timeout_ns(c, lease_ms)) != REDLOCK_OK)
        return;
    w.plan = &p;
    redlock__fanout(c, p.batches, p.nb, on_set_reply, &w);
    redlock__plan_free(&p);
}

/* ---- reading ------------------------------------------------------------- */

typedef struct read_ctx {
    int rc;
    char msg[128];
    redlock_holder_facts *out;
} read_ctx;

static int on_get_reply(void *ud, size_t batch, size_t call, int err, const char *msg,
                        redisReply *r)
{
    read_ctx *x = ud;

    (void)batch, (void)call;
    if (err) {
        x->rc = err;
        redlock__copy_msg(x->msg, sizeof(x->msg), msg);
    } else if (r->type == REDIS_REPLY_ERROR) {
        x->rc = redlock__server_error_code(r->str);
        redlock__copy_msg(x->msg, sizeof(x->msg), r->str);
    } else if (r->type == REDIS_REPLY_NIL) {
        x->rc = REDLOCK_OK;
    } else if (r->type == REDIS_REPLY_STRING) {
        x->rc = REDLOCK_OK;
        redlock__facts_parse(r->str, r->len, x->out); /* malformed: not found */
    } else {
        x->rc = REDLOCK_EPROTO;
        snprintf(x->msg, sizeof(x->msg), "unexpected reply type %d to GET", r->type);
    }
    return 0;
}

int redlock_lock_holder_facts(redlock_lock *l, size_t member, redlock_holder_facts *out)
{
    redlock_client *c;
    const char *argv[2];
    redlock__call call;
    redlock__batch b;
    read_ctx x = {REDLOCK_ETIMEOUT, "no reply", out};

    if (!l || !out || member >= l->n)
        return redlock__fail(REDLOCK_EINVAL, "member index out of range");
    memset(out, 0, sizeof(*out));
    c = l->client;
    argv[0] = "GET";
    argv[1] = redlock__key(&l->members[member], REDLOCK__KEY_FACTS);
    call = (redlock__call){-1, 0, 2, argv, NULL};
    b = (redlock__batch){.node = l->members[member].node, .calls = &call, .ncalls = 1,
                         .deadline_ns = c->tp.ops->now_ns(c->tp.ctx) +
                                        (c->node_timeout_ms > 0 ? c->node_timeout_ms
                                                                : INSPECT_TIMEOUT_MS) *
                                            REDLOCK__NS_PER_MS};
    redlock__fanout(c, &b, 1, on_get_reply, &x);
    if (x.rc != REDLOCK_OK) {
        memset(out, 0, sizeof(*out));
        return redlock__fail(x.rc, "lock '%.200s' member %zu: holder facts: %s",
                             l->members[0].name, member, x.msg);
    }
    return REDLOCK_OK;
}
