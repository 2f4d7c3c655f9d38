/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scripted fake transport (see fake_transport.h).
 *
 * Replies are built as RESP text and parsed with hiredis' own reader, so
 * they are ordinary redisReply trees that freeReplyObject() releases, as
 * the lock logic expects of the real transport.
 */
#include "fake_transport.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock/redlock.h"
#include "resp/scripts.h"

#define NS_PER_MS 1000000LL
/* Node TIME = this + virtual clock (+ the node's offset): a plausible
 * wall clock, so tokens look like the real ones. */
#define WALL_BASE_US 1700000000000000LL
#define CHANNEL_PREFIX "redisson_lock__channel:{"

typedef struct ffield {
    char *name;
    char *value;
} ffield;

typedef struct fentry {
    struct fentry *next;
    char *key;
    int is_hash;
    char *str;
    ffield *fields;
    size_t nfields, cap;
    int64_t expire_ns;          /* 0: no expiry */
} fentry;

typedef struct behaviour {
    int set;
    fake_mode mode;
    int64_t delay_ms;
} behaviour;

typedef struct fnode {
    fentry *keys;
    behaviour def;
    behaviour per_script[REDLOCK__SCRIPT_COUNT + 1]; /* [script + 1] */
    char error[128];
    int64_t time_offset_us;
} fnode;

typedef struct fevent {
    struct fevent *next;
    int64_t at;
    size_t node;
    char *name;
} fevent;

typedef struct fpub {
    struct fpub *next;
    size_t node;
    char *channel;
    uint64_t count;
} fpub;

typedef struct fwatch {
    struct fwatch *next;
    size_t n;
    size_t *nodes;
    char **channels;
    uint64_t start_gen;
    int open;
} fwatch;

struct fake {
    pthread_mutex_t mu;
    size_t n;
    fnode *nodes;
    int64_t now;
    int isolated;
    pthread_t controller;
    pthread_t helper;      /* also sees the isolated clock move */
    int has_helper;
    int64_t frozen;
    fevent *events;             /* sorted by time */
    fpub *pubs;
    fwatch *watches;
    fake_call **calls;
    size_t ncalls, capcalls;
    fake_fanout *fanouts;
    size_t nfanouts, capfanouts;
    redlock__settle_fn settle;  /* the ledger hook (report_in_flight) */
    void *settle_ud;
    /* Calls left in flight on a frozen node: they wait in its "socket"
     * until it runs again (delivered) or restarts empty (lost). */
    struct fake_ledger {
        fake_call *rec;
        uint64_t token;
        int lost;               /* settled lost, hook not told yet */
    } *ledger;
    size_t nledger, capledger;
};

/* ---------------------------------------------------------------------- */
/* Small helpers. Tests have no use for running out of memory: abort. */

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (!p)
        abort();
    return p;
}

static void *xrealloc(void *p, size_t size)
{
    p = realloc(p, size ? size : 1);
    if (!p)
        abort();
    return p;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");

    if (!d)
        abort();
    return d;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    s = xcalloc((size_t)len + 1, 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* A growing RESP text buffer. */
typedef struct rbuf {
    char *data;
    size_t len, cap;
} rbuf;

static void rb_add(rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rb_add(rbuf *b, const char *fmt, ...)
{
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)len + 1 > b->cap) {
        b->cap = (b->len + (size_t)len + 1) * 2;
        b->data = xrealloc(b->data, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)len + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)len;
}

static void rb_nil(rbuf *b)
{
    rb_add(b, "$-1\r\n");
}

static void rb_int(rbuf *b, long long v)
{
    rb_add(b, ":%lld\r\n", v);
}

static void rb_bulk(rbuf *b, const char *s)
{
    rb_add(b, "$%zu\r\n%s\r\n", strlen(s), s);
}

static void rb_array(rbuf *b, size_t n)
{
    rb_add(b, "*%zu\r\n", n);
}

static void rb_error(rbuf *b, const char *msg)
{
    b->len = 0;
    rb_add(b, "-%s\r\n", msg);
}

static redisReply *parse_reply(const rbuf *b)
{
    redisReader *r = redisReaderCreate();
    void *reply = NULL;

    if (!r || redisReaderFeed(r, b->data, b->len) != REDIS_OK ||
        redisReaderGetReply(r, &reply) != REDIS_OK || !reply) {
        fprintf(stderr, "fake transport: cannot parse its own reply '%.*s'\n", (int)b->len,
                b->data);
        abort();
    }
    redisReaderFree(r);
    return reply;
}

/* ---------------------------------------------------------------------- */
/* The storage model. Callers hold f->mu. */

static void entry_free(fentry *e)
{
    size_t i;

    for (i = 0; i < e->nfields; i++) {
        free(e->fields[i].name);
        free(e->fields[i].value);
    }
    free(e->fields);
    free(e->str);
    free(e->key);
    free(e);
}

static int expired(const fake *f, const fentry *e)
{
    return e->expire_ns != 0 && e->expire_ns <= f->now;
}

/* Unlinks key from node; returns whether a live key was removed. */
static int del_key(fake *f, fnode *nd, const char *key)
{
    fentry **pp;

    for (pp = &nd->keys; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0) {
            fentry *e = *pp;
            int live = !expired(f, e);

            *pp = e->next;
            entry_free(e);
            return live;
        }
    }
    return 0;
}

/* The live entry for key (expired keys vanish here, as in redis). */
static fentry *lookup(fake *f, fnode *nd, const char *key)
{
    fentry *e;

    for (e = nd->keys; e; e = e->next) {
        if (strcmp(e->key, key) != 0)
            continue;
        if (expired(f, e)) {
            del_key(f, nd, key);
            return NULL;
        }
        return e;
    }
    return NULL;
}

static fentry *create(fnode *nd, const char *key, int is_hash)
{
    fentry *e = xcalloc(1, sizeof(*e));

    e->key = xstrdup(key);
    e->is_hash = is_hash;
    e->next = nd->keys;
    nd->keys = e;
    return e;
}

static ffield *hfield(fentry *e, const char *name)
{
    size_t i;

    for (i = 0; e && i < e->nfields; i++)
        if (strcmp(e->fields[i].name, name) == 0)
            return &e->fields[i];
    return NULL;
}

static void hset(fentry *e, const char *name, const char *value)
{
    ffield *fl = hfield(e, name);

    if (fl) {
        free(fl->value);
        fl->value = xstrdup(value);
        return;
    }
    if (e->nfields == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 4;
        e->fields = xrealloc(e->fields, e->cap * sizeof(ffield));
    }
    e->fields[e->nfields].name = xstrdup(name);
    e->fields[e->nfields].value = xstrdup(value);
    e->nfields++;
}

static void hdel(fake *f, fnode *nd, fentry *e, const char *name)
{
    size_t i;

    for (i = 0; i < e->nfields; i++) {
        if (strcmp(e->fields[i].name, name) == 0) {
            free(e->fields[i].name);
            free(e->fields[i].value);
            e->fields[i] = e->fields[--e->nfields];
            break;
        }
    }
    /* Redis deletes a hash with its last field. */
    if (e->nfields == 0)
        del_key(f, nd, e->key);
}

static int64_t pttl_of(fake *f, fnode *nd, const char *key)
{
    fentry *e = lookup(f, nd, key);

    if (!e)
        return -2;
    if (!e->expire_ns)
        return -1;
    return (e->expire_ns - f->now) / NS_PER_MS;
}

static void set_string(fake *f, fnode *nd, const char *key, const char *value, int64_t px_ms)
{
    fentry *e;

    del_key(f, nd, key);
    e = create(nd, key, 0);
    e->str = xstrdup(value);
    e->expire_ns = px_ms > 0 ? f->now + px_ms * NS_PER_MS : 0;
}

static void publish(fake *f, size_t node, const char *channel)
{
    fpub *p;

    for (p = f->pubs; p; p = p->next) {
        if (p->node == node && strcmp(p->channel, channel) == 0) {
            p->count++;
            return;
        }
    }
    p = xcalloc(1, sizeof(*p));
    p->node = node;
    p->channel = xstrdup(channel);
    p->count = 1;
    p->next = f->pubs;
    f->pubs = p;
}

static uint64_t published(const fake *f, size_t node, const char *channel)
{
    const fpub *p;

    for (p = f->pubs; p; p = p->next)
        if (p->node == node && strcmp(p->channel, channel) == 0)
            return p->count;
    return 0;
}

static uint64_t node_time_us(const fake *f, size_t node)
{
    return (uint64_t)(WALL_BASE_US + f->now / 1000 + f->nodes[node].time_offset_us);
}

/* Moves the clock forward to t, applying scheduled releases on the way. */
static void advance_to(fake *f, int64_t t)
{
    while (f->events && f->events->at <= t) {
        fevent *ev = f->events;
        char *channel = xprintf(CHANNEL_PREFIX "%s}", ev->name);

        f->events = ev->next;
        if (ev->at > f->now)
            f->now = ev->at;
        if (del_key(f, &f->nodes[ev->node], ev->name))
            publish(f, ev->node, channel);
        free(channel);
        free(ev->name);
        free(ev);
    }
    if (t > f->now)
        f->now = t;
}

/* ---------------------------------------------------------------------- */
/* The scripts of lua/, re-implemented over the model. Each comment names
 * the script whose return values it reproduces. */

typedef struct sx {
    fake *f;
    fnode *nd;
    size_t node;
    int nkeys, argc;
    char **argv;
    rbuf *out;
    int bad;                    /* wrong type or missing argument */
} sx;

static const char *key_at(sx *s, int i)
{
    if (i > s->nkeys || i > s->argc) {
        s->bad = 1;
        return "";
    }
    return s->argv[i - 1];
}

static const char *arg_at(sx *s, int i)
{
    if (s->nkeys + i > s->argc) {
        s->bad = 1;
        return "";
    }
    return s->argv[s->nkeys + i - 1];
}

static fentry *get_hash(sx *s, const char *key)
{
    fentry *e = lookup(s->f, s->nd, key);

    if (e && !e->is_hash) {
        s->bad = 1;
        return NULL;
    }
    return e;
}

static const char *get_str(sx *s, const char *key)
{
    fentry *e = lookup(s->f, s->nd, key);

    if (e && e->is_hash) {
        s->bad = 1;
        return NULL;
    }
    return e ? e->str : NULL;
}

static void pexpire(sx *s, const char *key, long long ms)
{
    fentry *e = lookup(s->f, s->nd, key);

    if (e)
        e->expire_ns = s->f->now + ms * NS_PER_MS;
}

/* The hold's bookkeeping field beside owner's count (acquire.lua). */
static void gen_field(const char *owner, char *out, size_t cap)
{
    snprintf(out, cap, "%s:gen", owner);
}

/* The :gen value's generation: up to the first comma. */
static void gen_part(const char *v, char *out, size_t cap)
{
    size_t n = strcspn(v, ",");

    if (n >= cap)
        n = cap - 1;
    memcpy(out, v, n);
    out[n] = '\0';
}

/* Whether seq is one of the recent sequence numbers in a :gen value. */
static int seen_seq(const char *v, const char *seq)
{
    const char *p = strchr(v, ',');

    while (p) {
        if (strncmp(p + 1, seq, 12) == 0 && (p[13] == ',' || p[13] == '\0'))
            return 1;
        p = strchr(p + 1, ',');
    }
    return 0;
}

/* v with seq appended to its recent sequence numbers, the last four kept. */
static void remember_seq(const char *v, const char *seq, char *out, size_t cap)
{
    char gen[64], rest[128];
    size_t glen, rlen;

    gen_part(v, gen, sizeof(gen));
    glen = strlen(gen);
    snprintf(rest, sizeof(rest), "%s,%.12s", v + glen, seq);
    rlen = strlen(rest);
    snprintf(out, cap, "%s%s", gen, rlen > 52 ? rest + rlen - 52 : rest);
}

/* Whether item is one of the comma-separated list (release.lua). */
static int in_list(const char *list, const char *item)
{
    size_t n = strlen(item);
    const char *p = list;

    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if (len == n && strncmp(p, item, n) == 0)
            return 1;
        if (!end)
            return 0;
        p = end + 1;
    }
}

static void set_count(fentry *e, const char *owner, long long count)
{
    char num[32];

    snprintf(num, sizeof(num), "%lld", count);
    hset(e, owner, num);
}

static void run_acquire(sx *s)
{
    const char *name = key_at(s, 1), *mark = key_at(s, 2);
    const char *lease = arg_at(s, 1), *owner = arg_at(s, 2), *request = arg_at(s, 3);
    int fresh_only = strcmp(arg_at(s, 4), "1") == 0;
    int fenced = s->nkeys >= 3;
    char genf[256], gen[64], seq[13], buf[128];
    unsigned long long token = 0;
    fentry *e;
    ffield *count, *gv;

    if (s->bad)
        return;
    if (get_str(s, mark)) {
        rb_int(s->out, -3);
        return;
    }
    gen_field(owner, genf, sizeof(genf));
    snprintf(seq, sizeof(seq), "%.12s", request);
    e = get_hash(s, name);
    if (s->bad)
        return;
    if (e) {
        const char *v;

        if (!(count = hfield(e, owner))) {
            rb_int(s->out, pttl_of(s->f, s->nd, name));
            return;
        }
        gv = hfield(e, genf);
        v = gv ? gv->value : "";
        gen_part(v, gen, sizeof(gen));
        if (strcmp(gen, request) == 0) {
            /* A replay of the fresh grant that made this hold. */
            const char *stored = fenced ? get_str(s, key_at(s, 3)) : NULL;

            if (fenced) {
                rb_array(s->out, 2);
                rb_int(s->out, stored ? atoll(stored) : 0);
            }
            rb_bulk(s->out, gen);
            return;
        }
        if (seen_seq(v, seq)) {
            rb_bulk(s->out, gen);
            return;
        }
        if (!fresh_only) {
            remember_seq(v, seq, buf, sizeof(buf));
            set_count(e, owner, atoll(count->value) + 1);
            hset(e, genf, buf);
            pexpire(s, name, atoll(lease));
            rb_bulk(s->out, gen);
            return;
        }
        /* Not a re-entry: an older generation is a leftover to replace, a
         * newer one makes this request the late copy (acquire.lua). */
        if (strlen(gen) == 32 && strncmp(gen, request, 12) > 0) {
            set_string(s->f, s->nd, mark, "x", atoll(lease));
            rb_int(s->out, -3);
            return;
        }
        if (hfield(e, genf))
            hdel(s->f, s->nd, e, genf);
        if ((e = lookup(s->f, s->nd, name)) != NULL)
            hdel(s->f, s->nd, e, owner);
        if (lookup(s->f, s->nd, name)) {
            rb_int(s->out, pttl_of(s->f, s->nd, name));
            return;
        }
    }
    e = create(s->nd, name, 1);
    hset(e, owner, "1");
    hset(e, genf, request);
    pexpire(s, name, atoll(lease));
    if (fenced) {
        const char *stored = get_str(s, key_at(s, 3));
        unsigned long long now_us = node_time_us(s->f, s->node);

        token = (stored ? strtoull(stored, NULL, 10) : 0) + 1;
        if (now_us > token)
            token = now_us;
        snprintf(buf, sizeof(buf), "%llu", token);
        set_string(s->f, s->nd, key_at(s, 3), buf, 0);
        rb_array(s->out, 2);
        rb_int(s->out, (long long)token);
    }
    rb_bulk(s->out, request);
}

static void run_renew(sx *s)
{
    const char *name = key_at(s, 1);
    const char *lease = arg_at(s, 1), *owner = arg_at(s, 2);
    fentry *e;

    if (s->bad)
        return;
    e = get_hash(s, name);
    if (hfield(e, owner)) {
        pexpire(s, name, atoll(lease));
        rb_int(s->out, 1);
    } else {
        rb_int(s->out, e ? 0 : -2);
    }
}

/* release.lua: each listed generation without a cancel mark gets one, so a
 * late copy of that acquire cannot grant. */
static void tombstone_listed(sx *s, const char *mark, const char *list, const char *lease)
{
    size_t prefix = strlen(mark) >= 32 ? strlen(mark) - 32 : 0;
    const char *p = list;
    char key[512];

    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if (len > 0 && prefix + len < sizeof(key)) {
            memcpy(key, mark, prefix);
            memcpy(key + prefix, p, len);
            key[prefix + len] = '\0';
            if (!get_str(s, key))
                set_string(s->f, s->nd, key, "x", atoll(lease));
        }
        if (!end)
            break;
        p = end + 1;
    }
}

/* The last hold goes: the key holds nothing else (a lock has one owner). */
static void drop_lock(sx *s, const char *name, const char *channel)
{
    del_key(s->f, s->nd, name);
    publish(s->f, s->node, channel);
    rb_int(s->out, 1);
}

static void run_release(sx *s)
{
    const char *name = key_at(s, 1), *channel = key_at(s, 2), *mark = key_at(s, 3);
    const char *lease = arg_at(s, 2), *owner = arg_at(s, 3);
    int drop_all = strcmp(arg_at(s, 4), "1") == 0;
    const char *generation = arg_at(s, 5), *v;
    char genf[256], gen[64], seq[13], buf[128];
    ffield *count, *gv;
    fentry *e;

    (void)arg_at(s, 1);
    if (s->bad)
        return;
    gen_field(owner, genf, sizeof(genf));
    e = get_hash(s, name);
    if (!(count = hfield(e, owner))) {
        tombstone_listed(s, mark, generation, lease);
        rb_nil(s->out);
        return;
    }
    gv = hfield(e, genf);
    v = gv ? gv->value : "";
    gen_part(v, gen, sizeof(gen));
    if (gen[0] && *generation && !in_list(generation, gen)) {
        /* A release of an older hold of the same owner. */
        rb_nil(s->out);
        return;
    }
    snprintf(seq, sizeof(seq), "%.12s", strlen(mark) >= 32 ? mark + strlen(mark) - 32 : "");
    if (seen_seq(v, seq)) {
        rb_int(s->out, 0);
        return;
    }
    if (!drop_all && atoll(count->value) > 1) {
        remember_seq(v, seq, buf, sizeof(buf));
        set_count(e, owner, atoll(count->value) - 1);
        hset(e, genf, buf);
        pexpire(s, name, atoll(lease));
        rb_int(s->out, 0);
        return;
    }
    drop_lock(s, name, channel);
}

static void run_abort(sx *s)
{
    const char *name = key_at(s, 1), *channel = key_at(s, 2), *mark = key_at(s, 3);
    const char *lease = arg_at(s, 2), *owner = arg_at(s, 3), *id, *v;
    char genf[256], gen[64], seq[13];
    ffield *count, *gv;
    fentry *e;

    (void)arg_at(s, 1);
    if (s->bad)
        return;
    if (get_str(s, mark) || s->bad) {
        rb_int(s->out, 0);
        return;
    }
    set_string(s->f, s->nd, mark, "x", atoll(lease));
    gen_field(owner, genf, sizeof(genf));
    e = get_hash(s, name);
    if (!(count = hfield(e, owner))) {
        rb_int(s->out, 0);
        return;
    }
    id = strlen(mark) >= 32 ? mark + strlen(mark) - 32 : "";
    snprintf(seq, sizeof(seq), "%.12s", id);
    gv = hfield(e, genf);
    v = gv ? gv->value : "";
    gen_part(v, gen, sizeof(gen));
    if (strcmp(gen, id) != 0 && !seen_seq(v, seq)) {
        /* Not granted by this request, or the hold was replaced since. */
        rb_int(s->out, 0);
        return;
    }
    if (atoll(count->value) > 1) {
        set_count(e, owner, atoll(count->value) - 1);
        pexpire(s, name, atoll(lease));
        rb_int(s->out, 1);
        return;
    }
    drop_lock(s, name, channel);
}

static void run_force_release(sx *s)
{
    const char *name = key_at(s, 1), *channel = key_at(s, 2);

    (void)arg_at(s, 1);
    if (s->bad)
        return;
    if (del_key(s->f, s->nd, name)) {
        publish(s->f, s->node, channel);
        rb_int(s->out, 1);
    } else {
        rb_int(s->out, 0);
    }
}

static void run_fence_store(sx *s)
{
    const char *name = key_at(s, 1), *token_key = key_at(s, 2);
    const char *owner = arg_at(s, 1), *token = arg_at(s, 2);
    const char *stored;

    if (s->bad)
        return;
    if (!hfield(get_hash(s, name), owner)) {
        rb_int(s->out, 0);
        return;
    }
    stored = get_str(s, token_key);
    if (strtoull(token, NULL, 10) > (stored ? strtoull(stored, NULL, 10) : 0))
        set_string(s->f, s->nd, token_key, token, 0);
    rb_int(s->out, 1);
}

static void run_fenced_set(sx *s)
{
    const char *key = key_at(s, 1), *value = arg_at(s, 1), *token = arg_at(s, 2);
    fentry *e;
    ffield *fl;
    unsigned long long accepted;

    if (s->bad)
        return;
    e = get_hash(s, key);
    fl = hfield(e, "fence_token");
    accepted = fl ? strtoull(fl->value, NULL, 10) : 0;
    if (strtoull(token, NULL, 10) < accepted) {
        char num[32];

        snprintf(num, sizeof(num), "%llu", accepted);
        rb_array(s->out, 2);
        rb_int(s->out, 0);
        rb_bulk(s->out, num);
        return;
    }
    if (!e)
        e = create(s->nd, key, 1);
    hset(e, "value", value);
    hset(e, "fence_token", token);
    rb_int(s->out, 1);
}

static int is_gen_field(const char *name)
{
    size_t n = strlen(name);

    return n >= 4 && strcmp(name + n - 4, ":gen") == 0;
}

static void run_inspect(sx *s)
{
    size_t holders = 0;
    const char *name = key_at(s, 1), *token_key = key_at(s, 2);
    const char *token;
    int64_t pttl;
    fentry *e;
    size_t i;

    if (s->bad)
        return;
    pttl = pttl_of(s->f, s->nd, name);
    token = get_str(s, token_key);
    e = get_hash(s, name);
    if (s->bad)
        return;
    /* The holders' :gen fields are bookkeeping, left out (inspect.lua). */
    for (i = 0; e && i < e->nfields; i++)
        holders += !is_gen_field(e->fields[i].name);
    rb_array(s->out, 2 + 2 * holders);
    rb_int(s->out, pttl);
    rb_bulk(s->out, token ? token : "0");
    for (i = 0; e && i < e->nfields; i++) {
        if (is_gen_field(e->fields[i].name))
            continue;
        rb_bulk(s->out, e->fields[i].name);
        rb_bulk(s->out, e->fields[i].value);
    }
}

/* Executes one call on node and leaves its reply in out. */
static void execute(fake *f, size_t node, const fake_call *call, rbuf *out)
{
    sx s;

    memset(&s, 0, sizeof(s));
    s.f = f;
    s.nd = &f->nodes[node];
    s.node = node;
    s.nkeys = call->nkeys;
    s.argc = call->argc;
    s.argv = call->argv;
    s.out = out;
    out->len = 0;
    switch (call->script) {
    case REDLOCK__SCRIPT_ACQUIRE:
        run_acquire(&s);
        break;
    case REDLOCK__SCRIPT_RENEW:
        run_renew(&s);
        break;
    case REDLOCK__SCRIPT_RELEASE:
        run_release(&s);
        break;
    case REDLOCK__SCRIPT_ABORT:
        run_abort(&s);
        break;
    case REDLOCK__SCRIPT_FORCE_RELEASE:
        run_force_release(&s);
        break;
    case REDLOCK__SCRIPT_FENCE_STORE:
        run_fence_store(&s);
        break;
    case REDLOCK__SCRIPT_FENCED_SET:
        run_fenced_set(&s);
        break;
    case REDLOCK__SCRIPT_INSPECT:
        run_inspect(&s);
        break;
    default:
        if (call->script < 0 && call->argc > 0 && strcasecmp(call->argv[0], "PING") == 0)
            rb_add(out, "+PONG\r\n");
        else
            rb_error(out, "ERR fake transport: unknown command");
        return;
    }
    /* A malformed call is the library's bug: answer the way redis would
     * (an error reply), so the test sees it fail. */
    if (s.bad)
        rb_error(out, "WRONGTYPE or missing argument (fake transport)");
}

/* ---------------------------------------------------------------------- */
/* The fan-out. */

enum { EV_REPLY, EV_ERROR_REPLY, EV_TIMEOUT, EV_CONN_ERROR };

typedef struct fev {
    int64_t t;
    size_t b, k;
    int kind;
    int apply;
    fake_call *rec;
} fev;

static int cmp_fev(const void *a, const void *b)
{
    const fev *x = a, *y = b;

    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->b != y->b)
        return x->b < y->b ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

static behaviour behaviour_of(const fake *f, size_t node, int script)
{
    const fnode *nd = &f->nodes[node];
    int i = script + 1;

    if (i >= 0 && i <= REDLOCK__SCRIPT_COUNT && nd->per_script[i].set)
        return nd->per_script[i];
    return nd->def;
}

static fake_call *record(fake *f, size_t fanout, size_t node, const redlock__call *c)
{
    fake_call *r = xcalloc(1, sizeof(*r));
    int i;

    r->fanout = fanout;
    r->node = node;
    r->script = c->script;
    r->nkeys = c->nkeys;
    r->argc = c->argc;
    r->argv = xcalloc((size_t)c->argc + 1, sizeof(char *));
    for (i = 0; i < c->argc; i++) {
        size_t len = c->argvlen ? c->argvlen[i] : strlen(c->argv[i]);

        r->argv[i] = xcalloc(len + 1, 1);
        memcpy(r->argv[i], c->argv[i], len);
    }
    r->sent_ns = f->now;
    if (f->ncalls == f->capcalls) {
        f->capcalls = f->capcalls ? f->capcalls * 2 : 64;
        f->calls = xrealloc(f->calls, f->capcalls * sizeof(*f->calls));
    }
    f->calls[f->ncalls++] = r;
    return r;
}

/* Plans when and how each call of one batch ends. A pipeline answers in
 * order: a call cannot be answered before the one sent ahead of it, and
 * once a reply is missing every later one is missing too. */
static void plan_batch(fake *f, const redlock__batch *bt, size_t b, fev *ev, size_t *nev,
                       size_t fanout, int64_t start)
{
    enum { OPEN, BLOCKED_SILENT, BLOCKED_LOST, BROKEN } state = OPEN;
    int64_t t_prev = start, t_broken = 0;
    size_t k;

    for (k = 0; k < bt->ncalls; k++) {
        const redlock__call *c = &bt->calls[k];
        behaviour beh = behaviour_of(f, bt->node, c->script);
        fev *e = &ev[(*nev)++];
        int64_t t = start + beh.delay_ms * NS_PER_MS;

        e->b = b;
        e->k = k;
        e->rec = record(f, fanout, bt->node, c);
        if (t < t_prev)
            t = t_prev;
        if (state == BROKEN) {
            e->kind = EV_CONN_ERROR;
            e->t = t_broken;
            continue;
        }
        if (state != OPEN) {
            e->kind = EV_TIMEOUT;
            e->t = bt->deadline_ns;
            e->apply = state == BLOCKED_LOST &&
                       (beh.mode == FAKE_REPLY || beh.mode == FAKE_LOST_REPLY);
            continue;
        }
        switch (beh.mode) {
        case FAKE_REPLY:
        case FAKE_ERROR_REPLY:
            if (t > bt->deadline_ns) {
                /* Too slow: the node still runs it, the reply comes late. */
                e->kind = EV_TIMEOUT;
                e->t = bt->deadline_ns;
                e->apply = beh.mode == FAKE_REPLY;
                state = BLOCKED_LOST;
            } else {
                e->kind = beh.mode == FAKE_REPLY ? EV_REPLY : EV_ERROR_REPLY;
                e->t = t;
                e->apply = beh.mode == FAKE_REPLY;
                t_prev = t;
            }
            break;
        case FAKE_SILENT:
            e->kind = EV_TIMEOUT;
            e->t = bt->deadline_ns;
            state = BLOCKED_SILENT;
            break;
        case FAKE_LOST_REPLY:
            e->kind = EV_TIMEOUT;
            e->t = bt->deadline_ns;
            e->apply = 1;
            state = BLOCKED_LOST;
            break;
        case FAKE_CONN_ERROR:
            if (t > bt->deadline_ns) {
                e->kind = EV_TIMEOUT;
                e->t = bt->deadline_ns;
                state = BLOCKED_SILENT;
            } else {
                e->kind = EV_CONN_ERROR;
                e->t = t;
                t_broken = t;
                state = BROKEN;
            }
            break;
        }
    }
}

static void ledger_add(fake *f, fake_call *rec, uint64_t token)
{
    if (f->nledger == f->capledger) {
        f->capledger = f->capledger ? 2 * f->capledger : 8;
        f->ledger = xrealloc(f->ledger, f->capledger * sizeof(*f->ledger));
    }
    f->ledger[f->nledger].rec = rec;
    f->ledger[f->nledger].token = token;
    f->ledger[f->nledger++].lost = 0;
}

/* Settles the ledger entries whose node runs again (it reads and runs
 * the call, and the reply arrives) or that were lost; tells the hook
 * without the mutex. Returns how many remain. */
static size_t ledger_settle(fake *f)
{
    uint64_t tok[64];
    unsigned char ok[64];
    size_t i, n = 0, keep = 0, left;
    rbuf out = {NULL, 0, 0};

    pthread_mutex_lock(&f->mu);
    for (i = 0; i < f->nledger; i++) {
        struct fake_ledger *l = &f->ledger[i];
        fake_mode mode = behaviour_of(f, l->rec->node, l->rec->script).mode;

        if (n < 64 && (l->lost || mode != FAKE_SILENT)) {
            if (!l->lost && mode != FAKE_CONN_ERROR) {
                out.len = 0;
                if (mode == FAKE_REPLY || mode == FAKE_LOST_REPLY) {
                    execute(f, l->rec->node, l->rec, &out);
                    l->rec->applied = 1;
                }
            }
            tok[n] = l->token;
            ok[n++] = !l->lost && mode != FAKE_CONN_ERROR;
            continue;
        }
        f->ledger[keep++] = *l;
    }
    f->nledger = left = keep;
    pthread_mutex_unlock(&f->mu);
    free(out.data);
    for (i = 0; i < n; i++)
        if (f->settle)
            f->settle(f->settle_ud, tok[i], ok[i], NULL);
    return left;
}

static size_t op_drain(void *ctx, int64_t deadline_ns)
{
    (void)deadline_ns;
    return ledger_settle(ctx);
}

static int op_fanout(void *ctx, const redlock__batch *batches, size_t n, redlock__reply_fn fn,
                     void *ud)
{
    fake *f = ctx;
    size_t i, total = 0, nev = 0, fi;
    fev *ev;
    rbuf out = {NULL, 0, 0};
    int stop = 0;
    int64_t start;
    /* Ledger settlements, heard after the mutex is released (the hook
     * takes the client's mutexes, which are taken before this one). */
    uint64_t *settle_token;
    unsigned char *settle_ok;
    size_t nsettle = 0;

    /* A thawed node reads its socket before anything sent after. */
    if (f->nledger)
        ledger_settle(f);
    pthread_mutex_lock(&f->mu);
    start = f->now;
    for (i = 0; i < n; i++)
        total += batches[i].ncalls;
    ev = xcalloc(total, sizeof(*ev));
    settle_token = xcalloc(total, sizeof(*settle_token));
    settle_ok = xcalloc(total, 1);
    if (f->nfanouts == f->capfanouts) {
        f->capfanouts = f->capfanouts ? f->capfanouts * 2 : 32;
        f->fanouts = xrealloc(f->fanouts, f->capfanouts * sizeof(*f->fanouts));
    }
    fi = f->nfanouts++;
    memset(&f->fanouts[fi], 0, sizeof(f->fanouts[fi]));
    f->fanouts[fi].start_ns = start;
    f->fanouts[fi].first_call = f->ncalls;
    for (i = 0; i < n; i++) {
        if (batches[i].node >= f->n) {
            fprintf(stderr, "fake transport: batch for node %zu of %zu\n", batches[i].node,
                    f->n);
            abort();
        }
        plan_batch(f, &batches[i], i, ev, &nev, fi, start);
    }
    f->fanouts[fi].ncalls = nev;
    qsort(ev, nev, sizeof(*ev), cmp_fev);

    for (i = 0; i < nev; i++) {
        fev *e = &ev[i];
        fake_call *rec = e->rec;
        redisReply *reply = NULL;

        if (stop) {
            /* Abandoned: the request was sent, so the node may still run
             * it (now, to keep each node's order), but nobody hears. */
            if (e->apply) {
                execute(f, rec->node, rec, &out);
                rec->applied = 1;
            }
            rec->outcome = FAKE_ABANDONED;
            rec->done_ns = f->now;
            /* A call the node runs counts as delivered at once; one a frozen
             * node has not read waits in the fake's ledger (its socket) until
             * the node runs again or restarts empty; one on a connection
             * that breaks is lost. */
            if (batches[e->b].report_in_flight && batches[e->b].tokens) {
                uint64_t token = batches[e->b].tokens[e->k];

                fn(ud, e->b, e->k, REDLOCK__IN_FLIGHT, NULL, NULL);
                rec->in_flight = 1;
                if (!e->apply && behaviour_of(f, rec->node, rec->script).mode == FAKE_SILENT) {
                    ledger_add(f, rec, token);
                } else {
                    settle_token[nsettle] = token;
                    settle_ok[nsettle++] = (unsigned char)e->apply;
                }
            }
            continue;
        }
        advance_to(f, e->t);
        if (e->apply) {
            execute(f, rec->node, rec, &out);
            rec->applied = 1;
        }
        rec->done_ns = f->now;
        switch (e->kind) {
        case EV_REPLY:
            rec->outcome = FAKE_ANSWERED;
            reply = parse_reply(&out);
            stop = fn(ud, e->b, e->k, 0, NULL, reply);
            break;
        case EV_ERROR_REPLY:
            rec->outcome = FAKE_ANSWERED;
            out.len = 0;
            rb_error(&out, f->nodes[rec->node].error);
            reply = parse_reply(&out);
            stop = fn(ud, e->b, e->k, 0, NULL, reply);
            break;
        case EV_TIMEOUT:
            rec->outcome = FAKE_TIMED_OUT;
            stop = fn(ud, e->b, e->k, REDLOCK_ETIMEOUT, "no reply before the deadline", NULL);
            break;
        default:
            rec->outcome = FAKE_FAILED;
            stop = fn(ud, e->b, e->k, REDLOCK_EIO, "connection reset (fake)", NULL);
            break;
        }
        if (reply)
            freeReplyObject(reply);
        if (stop)
            f->fanouts[fi].stopped = 1;
    }
    f->fanouts[fi].end_ns = f->now;
    pthread_mutex_unlock(&f->mu);
    for (i = 0; i < nsettle; i++)
        if (f->settle)
            f->settle(f->settle_ud, settle_token[i], settle_ok[i], NULL);
    free(settle_token);
    free(settle_ok);
    free(ev);
    free(out.data);
    return REDLOCK_OK;
}

static int64_t op_now(void *ctx)
{
    fake *f = ctx;
    int64_t t;

    pthread_mutex_lock(&f->mu);
    if (f->isolated && !pthread_equal(pthread_self(), f->controller) &&
        !(f->has_helper && pthread_equal(pthread_self(), f->helper)))
        t = f->frozen;
    else
        t = f->now;
    pthread_mutex_unlock(&f->mu);
    return t;
}

static uint64_t watch_gen(const fake *f, const fwatch *w)
{
    uint64_t g = 1;
    size_t i;

    for (i = 0; i < w->n; i++)
        g += published(f, w->nodes[i], w->channels[i]);
    return g;
}

static void *op_watch(void *ctx, const char *const *names, const size_t *nodes, size_t n,
                      int64_t deadline_ns)
{
    fake *f = ctx;
    fwatch *w = xcalloc(1, sizeof(*w));
    size_t i;

    (void)deadline_ns;
    w->n = n;
    w->nodes = xcalloc(n, sizeof(size_t));
    w->channels = xcalloc(n, sizeof(char *));
    for (i = 0; i < n; i++) {
        w->nodes[i] = nodes[i];
        w->channels[i] = xstrdup(names[i]);
    }
    w->open = 1;
    pthread_mutex_lock(&f->mu);
    w->start_gen = watch_gen(f, w);
    w->next = f->watches;
    f->watches = w;
    pthread_mutex_unlock(&f->mu);
    return w;
}

/* Sleeps in virtual time: jumps to the next scheduled release if one
 * comes before the deadline, otherwise to the deadline. */
static int op_wait(void *ctx, void *watch, uint64_t *seen, int64_t deadline_ns,
                   int (*stop)(void *), void *stop_ud)
{
    fake *f = ctx;
    fwatch *w = watch;
    int rc = REDLOCK_ETIMEOUT;

    pthread_mutex_lock(&f->mu);
    if (w && *seen == 0)
        *seen = w->start_gen;
    for (;;) {
        if (stop && stop(stop_ud))
            break;
        if (w) {
            uint64_t g = watch_gen(f, w);

            if (g != *seen) {
                *seen = g;
                rc = REDLOCK_OK;
                break;
            }
        }
        if (f->events && f->events->at <= deadline_ns) {
            advance_to(f, f->events->at);
            continue;
        }
        advance_to(f, deadline_ns);
        break;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static void op_unwatch(void *ctx, void *watch)
{
    fake *f = ctx;
    fwatch *w = watch;

    if (!w)
        return;
    pthread_mutex_lock(&f->mu);
    w->open = 0;
    pthread_mutex_unlock(&f->mu);
}

static void op_set_settle(void *ctx, redlock__settle_fn fn, void *ud)
{
    fake *f = ctx;

    pthread_mutex_lock(&f->mu);
    f->settle = fn;
    f->settle_ud = ud;
    pthread_mutex_unlock(&f->mu);
}

static const redlock__transport_ops fake_ops = {
    .fanout = op_fanout,
    .now_ns = op_now,
    .watch = op_watch,
    .wait = op_wait,
    .unwatch = op_unwatch,
    .set_settle = op_set_settle,
    .drain = op_drain,
};

/* ---------------------------------------------------------------------- */
/* The test-facing API. */

fake *fake_new(size_t n_nodes)
{
    fake *f = xcalloc(1, sizeof(*f));
    pthread_mutexattr_t attr;
    size_t i;

    /* Recursive: a reply callback that asks for the time must not
     * deadlock against the fan-out delivering it. */
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&f->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    f->n = n_nodes;
    f->nodes = xcalloc(n_nodes, sizeof(fnode));
    for (i = 0; i < n_nodes; i++) {
        f->nodes[i].def.mode = FAKE_REPLY;
        f->nodes[i].def.delay_ms = 1;
        snprintf(f->nodes[i].error, sizeof(f->nodes[i].error), "ERR fake");
    }
    f->now = FAKE_EPOCH_NS;
    return f;
}

void fake_free(fake *f)
{
    size_t i;

    if (!f)
        return;
    free(f->ledger);
    for (i = 0; i < f->n; i++) {
        while (f->nodes[i].keys) {
            fentry *e = f->nodes[i].keys;

            f->nodes[i].keys = e->next;
            entry_free(e);
        }
    }
    while (f->events) {
        fevent *e = f->events;

        f->events = e->next;
        free(e->name);
        free(e);
    }
    while (f->pubs) {
        fpub *p = f->pubs;

        f->pubs = p->next;
        free(p->channel);
        free(p);
    }
    while (f->watches) {
        fwatch *w = f->watches;

        f->watches = w->next;
        for (i = 0; i < w->n; i++)
            free(w->channels[i]);
        free(w->channels);
        free(w->nodes);
        free(w);
    }
    for (i = 0; i < f->ncalls; i++) {
        int k;

        for (k = 0; k < f->calls[i]->argc; k++)
            free(f->calls[i]->argv[k]);
        free(f->calls[i]->argv);
        free(f->calls[i]);
    }
    free(f->calls);
    free(f->fanouts);
    free(f->nodes);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

redlock__transport fake_transport(fake *f)
{
    redlock__transport tp = {&fake_ops, f};

    return tp;
}

static fnode *node_of(fake *f, size_t node)
{
    if (node >= f->n) {
        fprintf(stderr, "fake transport: no node %zu\n", node);
        abort();
    }
    return &f->nodes[node];
}

void fake_set(fake *f, size_t node, fake_mode mode, int64_t delay_ms)
{
    pthread_mutex_lock(&f->mu);
    node_of(f, node)->def = (behaviour){1, mode, delay_ms};
    pthread_mutex_unlock(&f->mu);
}

void fake_set_script(fake *f, size_t node, int script, fake_mode mode, int64_t delay_ms)
{
    pthread_mutex_lock(&f->mu);
    if (script >= -1 && script < REDLOCK__SCRIPT_COUNT)
        node_of(f, node)->per_script[script + 1] = (behaviour){1, mode, delay_ms};
    pthread_mutex_unlock(&f->mu);
}

void fake_clear_script(fake *f, size_t node, int script)
{
    pthread_mutex_lock(&f->mu);
    if (script >= -1 && script < REDLOCK__SCRIPT_COUNT)
        node_of(f, node)->per_script[script + 1].set = 0;
    pthread_mutex_unlock(&f->mu);
}

void fake_set_error(fake *f, size_t node, const char *message)
{
    pthread_mutex_lock(&f->mu);
    snprintf(node_of(f, node)->error, sizeof(f->nodes[0].error), "%s", message);
    pthread_mutex_unlock(&f->mu);
}

int64_t fake_now(fake *f)
{
    int64_t t;

    pthread_mutex_lock(&f->mu);
    t = f->now;
    pthread_mutex_unlock(&f->mu);
    return t;
}

void fake_advance_ms(fake *f, int64_t ms)
{
    pthread_mutex_lock(&f->mu);
    advance_to(f, f->now + ms * NS_PER_MS);
    pthread_mutex_unlock(&f->mu);
}

void fake_join_clock(fake *f)
{
    pthread_mutex_lock(&f->mu);
    f->helper = pthread_self();
    f->has_helper = 1;
    pthread_mutex_unlock(&f->mu);
}

void fake_isolate_clock(fake *f)
{
    pthread_mutex_lock(&f->mu);
    f->isolated = 1;
    f->controller = pthread_self();
    f->frozen = f->now;
    pthread_mutex_unlock(&f->mu);
}

void fake_hold(fake *f, size_t node, const char *name, const char *field, int count,
               int64_t ttl_ms)
{
    fnode *nd;
    fentry *e;
    char num[32];

    pthread_mutex_lock(&f->mu);
    nd = node_of(f, node);
    e = lookup(f, nd, name);
    if (!e || !e->is_hash) {
        del_key(f, nd, name);
        e = create(nd, name, 1);
    }
    snprintf(num, sizeof(num), "%d", count);
    hset(e, field, num);
    e->expire_ns = ttl_ms >= 0 ? f->now + ttl_ms * NS_PER_MS : 0;
    pthread_mutex_unlock(&f->mu);
}

void fake_set_string(fake *f, size_t node, const char *key, const char *value)
{
    pthread_mutex_lock(&f->mu);
    set_string(f, node_of(f, node), key, value, 0);
    pthread_mutex_unlock(&f->mu);
}

void fake_flush(fake *f, size_t node)
{
    fnode *nd;
    size_t i;

    pthread_mutex_lock(&f->mu);
    nd = node_of(f, node);
    while (nd->keys) {
        fentry *e = nd->keys;

        nd->keys = e->next;
        entry_free(e);
    }
    /* A restart closes its connections: what waited in them is lost. */
    for (i = 0; i < f->nledger; i++)
        if (f->ledger[i].rec->node == node)
            f->ledger[i].lost = 1;
    pthread_mutex_unlock(&f->mu);
    ledger_settle(f);
}

void fake_set_time_offset_us(fake *f, size_t node, int64_t offset_us)
{
    pthread_mutex_lock(&f->mu);
    node_of(f, node)->time_offset_us = offset_us;
    pthread_mutex_unlock(&f->mu);
}

uint64_t fake_node_time_us(fake *f, size_t node)
{
    uint64_t t;

    pthread_mutex_lock(&f->mu);
    node_of(f, node);
    t = node_time_us(f, node);
    pthread_mutex_unlock(&f->mu);
    return t;
}

int64_t fake_hash_count(fake *f, size_t node, const char *name, const char *field)
{
    fentry *e;
    ffield *fl;
    int64_t v = 0;

    pthread_mutex_lock(&f->mu);
    e = lookup(f, node_of(f, node), name);
    if (e && e->is_hash && (fl = hfield(e, field)) != NULL)
        v = atoll(fl->value);
    pthread_mutex_unlock(&f->mu);
    return v;
}

size_t fake_hash_len(fake *f, size_t node, const char *name)
{
    fentry *e;
    size_t n = 0;

    pthread_mutex_lock(&f->mu);
    e = lookup(f, node_of(f, node), name);
    if (e && e->is_hash)
        n = e->nfields;
    pthread_mutex_unlock(&f->mu);
    return n;
}

int64_t fake_pttl(fake *f, size_t node, const char *key)
{
    int64_t v;

    pthread_mutex_lock(&f->mu);
    v = pttl_of(f, node_of(f, node), key);
    pthread_mutex_unlock(&f->mu);
    return v;
}

uint64_t fake_get_u64(fake *f, size_t node, const char *key)
{
    fentry *e;
    uint64_t v = 0;

    pthread_mutex_lock(&f->mu);
    e = lookup(f, node_of(f, node), key);
    if (e && !e->is_hash)
        v = strtoull(e->str, NULL, 10);
    pthread_mutex_unlock(&f->mu);
    return v;
}

uint64_t fake_published(fake *f, size_t node, const char *channel)
{
    uint64_t v;

    pthread_mutex_lock(&f->mu);
    v = published(f, node, channel);
    pthread_mutex_unlock(&f->mu);
    return v;
}

void fake_schedule_release(fake *f, int64_t at_ns, size_t node, const char *name)
{
    fevent *ev = xcalloc(1, sizeof(*ev)), **pp;

    ev->at = at_ns;
    ev->node = node;
    ev->name = xstrdup(name);
    pthread_mutex_lock(&f->mu);
    node_of(f, node);
    for (pp = &f->events; *pp && (*pp)->at <= at_ns; pp = &(*pp)->next)
        ;
    ev->next = *pp;
    *pp = ev;
    pthread_mutex_unlock(&f->mu);
}

size_t fake_ncalls(fake *f)
{
    size_t n;

    pthread_mutex_lock(&f->mu);
    n = f->ncalls;
    pthread_mutex_unlock(&f->mu);
    return n;
}

int fake_get_call(fake *f, size_t i, fake_call *out)
{
    int ok = 0;

    pthread_mutex_lock(&f->mu);
    if (i < f->ncalls) {
        *out = *f->calls[i];
        ok = 1;
    }
    pthread_mutex_unlock(&f->mu);
    return ok;
}

static int matches(const fake_call *c, int node, int script)
{
    return (node < 0 || c->node == (size_t)node) && (script == FAKE_ANY || c->script == script);
}

size_t fake_count(fake *f, size_t from, int node, int script)
{
    size_t i, n = 0;

    pthread_mutex_lock(&f->mu);
    for (i = from; i < f->ncalls; i++)
        n += matches(f->calls[i], node, script);
    pthread_mutex_unlock(&f->mu);
    return n;
}

long fake_find(fake *f, size_t from, int node, int script)
{
    long found = -1;
    size_t i;

    pthread_mutex_lock(&f->mu);
    for (i = from; i < f->ncalls && found < 0; i++)
        if (matches(f->calls[i], node, script))
            found = (long)i;
    pthread_mutex_unlock(&f->mu);
    return found;
}

size_t fake_nfanouts(fake *f)
{
    size_t n;

    pthread_mutex_lock(&f->mu);
    n = f->nfanouts;
    pthread_mutex_unlock(&f->mu);
    return n;
}

int fake_get_fanout(fake *f, size_t i, fake_fanout *out)
{
    int ok = 0;

    pthread_mutex_lock(&f->mu);
    if (i < f->nfanouts) {
        *out = f->fanouts[i];
        ok = 1;
    }
    pthread_mutex_unlock(&f->mu);
    return ok;
}

size_t fake_watches(fake *f, size_t *open)
{
    const fwatch *w;
    size_t n = 0, o = 0;

    pthread_mutex_lock(&f->mu);
    for (w = f->watches; w; w = w->next) {
        n++;
        o += w->open != 0;
    }
    pthread_mutex_unlock(&f->mu);
    if (open)
        *open = o;
    return n;
}
