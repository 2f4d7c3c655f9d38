/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/env.h"
#include "config/uri.h"
#include "core/error.h"
#include "core/util.h"
#include "lock/context.h"
#include "lock/watchdog.h"
#include "lock/internal.h"
#include "transport/pubsub.h"
#include "transport/tls.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 1000
#define DEFAULT_WATCHDOG_LEASE_MS 30000
#define DEFAULT_DRIFT_FACTOR 0.01
#define DEFAULT_RETRY_DELAY_MS 50
#define DEFAULT_FLUSH_TIMEOUT_MS 200
#define DEFAULT_UNAVAILABLE_TIMEOUT_MS 10000
#define DEFAULT_MAX_REPLY_BYTES (1024 * 1024)

uint64_t redlock_thread_owner(void)
{
    return redlock__gettid();
}

static int check_options(const redlock_options *o)
{
    if (o->connect_timeout_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "connect_timeout_ms must be >= 0");
    if (o->node_timeout_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "node_timeout_ms must be >= 0");
    if (o->watchdog_lease_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "watchdog_lease_ms must be >= 0");
    if (o->watchdog_max_hold_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "watchdog_max_hold_ms must be >= 0");
    if (o->unavailable_timeout_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "unavailable_timeout_ms must be >= 0");
    if (o->retry_delay_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "retry_delay_ms must be >= 0");
    if (!(o->drift_factor >= 0.0 && o->drift_factor < 0.5))
        return redlock__fail(REDLOCK_EINVAL, "drift_factor must be in [0, 0.5)");
    if (o->io_thread && (o->event_loop || o->event_loop_watchdog_thread))
        return redlock__fail(REDLOCK_EINVAL, "io_thread excludes event_loop and "
                                             "event_loop_watchdog_thread: an I/O thread runs "
                                             "the client's loop and its watchdog itself");
    return REDLOCK_OK;
}

static int copy_options(redlock_client *c, const redlock_options *o)
{
    const char *tls[5] = {o->tls.ca_file, o->tls.ca_dir, o->tls.cert_file,
                          o->tls.key_file, o->tls.server_name};
    size_t i;

    c->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms
                                                  : DEFAULT_CONNECT_TIMEOUT_MS;
    c->node_timeout_ms = o->node_timeout_ms;
    c->watchdog_lease_ms = o->watchdog_lease_ms ? o->watchdog_lease_ms
                                                : DEFAULT_WATCHDOG_LEASE_MS;
    c->max_hold_ms = o->watchdog_max_hold_ms;
    c->drift_factor = o->drift_factor > 0 ? o->drift_factor : DEFAULT_DRIFT_FACTOR;
    c->retry_delay_ms = o->retry_delay_ms ? o->retry_delay_ms : DEFAULT_RETRY_DELAY_MS;
    /* An I/O thread is a loop-driven client whose loop the library runs. */
    c->io_thread = o->io_thread != 0;
    c->event_loop = o->event_loop != 0 || c->io_thread;
    c->event_loop_watchdog_thread = c->event_loop && o->event_loop_watchdog_thread;
    c->disable_pubsub = o->disable_pubsub;
    c->flush_timeout_ms = o->flush_timeout_ms ? o->flush_timeout_ms : DEFAULT_FLUSH_TIMEOUT_MS;
    c->unavailable_timeout_ms = o->unavailable_timeout_ms > 0 ? o->unavailable_timeout_ms
                                                             : DEFAULT_UNAVAILABLE_TIMEOUT_MS;
    c->log_fn = o->log_fn;
    c->log_userdata = o->log_userdata;
    c->log_level = o->log_level ? o->log_level : REDLOCK_LOG_WARN;
    c->username = redlock__strdup(o->username);
    c->password = redlock__strdup(o->password);
    if ((o->username && !c->username) || (o->password && !c->password))
        return REDLOCK_ENOMEM;
    c->sentinel_username = redlock__strdup(o->sentinel_username);
    c->sentinel_password = redlock__strdup(o->sentinel_password);
    if ((o->sentinel_username && !c->sentinel_username) ||
        (o->sentinel_password && !c->sentinel_password))
        return REDLOCK_ENOMEM;
    for (i = 0; i < 5; i++) {
        c->tls_strings[i] = redlock__strdup(tls[i]);
        if (tls[i] && !c->tls_strings[i])
            return REDLOCK_ENOMEM;
    }
    return REDLOCK_OK;
}

static int setup_nodes(redlock_client *c, const char *const *uris, const redlock_options *o)
{
    size_t i;
    int rc, warned_insecure = 0;

    for (i = 0; i < c->n_nodes; i++) {
        redlock__node *n = &c->nodes[i];
        char err[160];

        if (!uris[i])
            return redlock__fail(REDLOCK_EURI, "node %zu: empty URI", i);
        rc = redlock__uri_parse(uris[i], &n->uri, err, sizeof(err));
        /* Never the URI itself: its user info holds the password. The
         * parser's reason quotes only what follows it. */
        if (rc == REDLOCK_EURI)
            return redlock__fail(rc, "node %zu: %s", i, err);
        if (rc)
            return redlock__fail(rc, "out of memory");
        /* Options override what the URI says, so one set of credentials
         * can serve nodes listed without them. */
        n->max_reply_bytes = o->max_reply_bytes ? o->max_reply_bytes : DEFAULT_MAX_REPLY_BYTES;
        n->username = c->username ? c->username : n->uri.username;
        n->password = c->password ? c->password : n->uri.password;
        if (n->username && !n->password)
            return redlock__fail(REDLOCK_EINVAL, "node %zu (%s): user without password", i,
                                 n->uri.display);
        /* Only sentinel nodes use them (transport/sentinel.c). */
        n->sentinel_username = c->sentinel_username;
        n->sentinel_password = c->sentinel_password;
        if (n->uri.master_name && c->sentinel_username && !c->sentinel_password)
            return redlock__fail(REDLOCK_EINVAL, "node %zu (%s): sentinel_username without "
                                                 "sentinel_password", i, n->uri.display);
        if (n->uri.kind == REDLOCK__NODE_TLS) {
            /* Loud even without a log_fn: a client that does not verify
             * the server hands its password and its locks to anyone on
             * the path. A caller with a log_fn gets it there instead. */
            if (o->tls.insecure_skip_verify && !c->log_fn && !warned_insecure) {
                warned_insecure = 1;
                fprintf(stderr, "redlock: WARNING: TLS certificate verification is OFF "
                                "(insecure_skip_verify) for %s\n", n->uri.display);
            }
            if (!c->ssl_ctx && (rc = redlock__tls_ctx_new(&o->tls, &c->ssl_ctx)) != REDLOCK_OK)
                return rc;
            n->ssl_ctx = c->ssl_ctx;
            n->tls_server_name = c->tls_strings[4] ? c->tls_strings[4] : n->uri.host;
            n->tls_verify = !o->tls.insecure_skip_verify;
            if (!n->tls_verify)
                redlock__log(c, REDLOCK_LOG_WARN,
                             "%s: TLS certificate verification is OFF (insecure_skip_verify)",
                             n->uri.display);
        }
    }
    return REDLOCK_OK;
}

/* Looks every host up once, here, outside every mutex; later lookups
 * happen in the background (transport/resolve.c). */
static int resolve_nodes(redlock_client *c)
{
    const char *hosts[REDLOCK__MAX_NODES];
    int ports[REDLOCK__MAX_NODES];
    size_t i;

    for (i = 0; i < c->n_nodes; i++) {
        int tcp = c->nodes[i].uri.kind != REDLOCK__NODE_UNIX;

        hosts[i] = tcp ? c->nodes[i].uri.host : NULL;
        ports[i] = c->nodes[i].uri.port;
    }
    if (redlock__resolver_init(&c->resolver, hosts, ports, c->n_nodes) != 0)
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    for (i = 0; i < c->n_nodes; i++) {
        if (!hosts[i])
            continue;
        c->nodes[i].addrs = &c->resolver.addrs[i];
        c->nodes[i].resolver = &c->resolver;
    }
    return REDLOCK_OK;
}

static void client_destroy(redlock_client *c)
{
    size_t i;

    if (!c)
        return;
    redlock__watchdog_stop(c);
    redlock__retry_destroy(&c->retry);
    if (c->net.pubsub)
        redlock__pubsub_free(c->net.pubsub);
    if (c->net.node_failures)
        redlock__net_destroy(&c->net);
    redlock__resolver_free(&c->resolver);
    for (i = 0; c->nodes && i < c->n_nodes; i++)
        redlock__uri_clear(&c->nodes[i].uri);
    free(c->nodes);
    redlock__tls_ctx_free(c->ssl_ctx);
    free(c->username);
    if (c->password)
        explicit_bzero(c->password, strlen(c->password));
    free(c->password);
    free(c->sentinel_username);
    if (c->sentinel_password)
        explicit_bzero(c->sentinel_password, strlen(c->sentinel_password));
    free(c->sentinel_password);
    for (i = 0; i < 5; i++)
        free(c->tls_strings[i]);
    free(c);
}

static int client_alloc(redlock_client **out, size_t n_nodes, const redlock_options *opts)
{
    static const redlock_options defaults;
    redlock_client *c;
    int rc;

    if (!opts)
        opts = &defaults;
    if ((rc = check_options(opts)) != REDLOCK_OK)
        return rc;
    c = calloc(1, sizeof(*c));
    if (!c)
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    c->n_nodes = n_nodes;
    c->nodes = calloc(n_nodes, sizeof(redlock__node));
    if (!c->nodes || copy_options(c, opts) != REDLOCK_OK) {
        client_destroy(c);
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    }
    redlock__uuid(c->id);
    *out = c;
    return REDLOCK_OK;
}

int redlock__client_create(redlock_client **out, const char *const *uris, size_t n_nodes,
                            const redlock_options *opts)
{
    redlock_client *c = NULL;
    int rc;

    if (!out)
        return redlock__fail(REDLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (!uris || n_nodes == 0)
        return redlock__fail(REDLOCK_EINVAL, "at least one node is required");
    if (n_nodes > REDLOCK__MAX_NODES)
        return redlock__fail(REDLOCK_EINVAL, "at most %d nodes", REDLOCK__MAX_NODES);
    if ((rc = client_alloc(&c, n_nodes, opts)) != REDLOCK_OK)
        return rc;
    if ((rc = setup_nodes(c, uris, opts ? opts : &(redlock_options){0})) != REDLOCK_OK)
        goto fail;
    if ((rc = resolve_nodes(c)) != REDLOCK_OK)
        goto fail;
    rc = redlock__net_init(&c->net, c->nodes, n_nodes, c->connect_timeout_ms);
    if (rc == REDLOCK_OK && !c->disable_pubsub)
        /* A loop-driven client's subscriber runs on the loop (loop/). */
        rc = redlock__pubsub_new(c->nodes, n_nodes, c->connect_timeout_ms, !c->event_loop,
                                 &c->net.pubsub);
    if (rc != REDLOCK_OK) {
        rc = redlock__fail(rc, "cannot set up the transport");
        goto fail;
    }
    c->tp.ops = &redlock__net_ops;
    c->tp.ctx = &c->net;
    if ((rc = redlock__watchdog_start(c, !c->event_loop || c->event_loop_watchdog_thread)) !=
        REDLOCK_OK)
        goto fail;
    *out = c;
    return REDLOCK_OK;
fail:
    client_destroy(c);
    return rc;
}

int redlock__client_create_from_env(redlock_client **out, const redlock_options *opts)
{
    redlock__env env;
    char why[256];
    int rc;

    if (!out)
        return redlock__fail(REDLOCK_EINVAL, "out is NULL");
    *out = NULL;
    rc = redlock__env_read(&env, opts);
    if (rc == REDLOCK_OK)
        rc = redlock__client_create(out, env.uris, env.n, &env.opts);
    /* Say where a bad URI came from ("node 2: port 0 out of range"). */
    if (rc == REDLOCK_EURI && strncmp(redlock_last_error(), "REDLOCK_NODES", 13) != 0) {
        redlock__copy_msg(why, sizeof(why), redlock_last_error());
        redlock__fail(rc, "REDLOCK_NODES: %s", why);
    }
    redlock__env_clear(&env);
    return rc;
}

int redlock__client_new_with_transport(redlock_client **out, size_t n_nodes,
                                       const redlock_options *opts,
                                       const redlock__transport *tp)
{
    redlock_client *c = NULL;
    int rc;

    *out = NULL;
    if ((rc = client_alloc(&c, n_nodes, opts)) != REDLOCK_OK)
        return rc;
    c->tp = *tp;
    if ((rc = redlock__watchdog_start(c, !c->event_loop || c->event_loop_watchdog_thread)) !=
        REDLOCK_OK) {
        client_destroy(c);
        return rc;
    }
    *out = c;
    return REDLOCK_OK;
}

void redlock_client_free(redlock_client *c)
{
    if (!c)
        return;
    /* The I/O thread frees the client itself: its loop is that thread's. */
    if (c->io.stop && redlock__io_elsewhere(c)) {
        c->io.stop(c->io.io);
        return;
    }
    /* From a callback of the loop (a done, an on_lost), the loop and the
     * fiber that called are still in use: refused, loudly, rather than
     * freed under them. */
    if (c->loop.busy && c->loop.busy(c->loop.loop)) {
        redlock__log(c, REDLOCK_LOG_ERROR,
                     "redlock_client_free() called from a callback of the client's loop: "
                     "ignored (the client leaks)");
        return;
    }
    /* Operations still in flight on the loop end first: they use the
     * watchdog and the connections. */
    if (c->loop.destroy)
        c->loop.destroy(c->loop.loop);
    /* The watchdog first, so nothing of the queue is in flight in a tick. */
    redlock__watchdog_stop(c);
    /* Its locks are freed, so no holder can still be acting on a lost
     * hold: a clean-up release held back for one goes now. */
    redlock__retry_lift_holds(&c->retry, c->tp.ops->now_ns(c->tp.ctx));
    if (c->flush_timeout_ms >= 0)
        redlock__watchdog_flush(c, c->flush_timeout_ms);
    client_destroy(c);
}

int redlock_client_flush(redlock_client *c, int timeout_ms)
{
    if (!c || timeout_ms < 0)
        return redlock__fail(REDLOCK_EINVAL, "client is NULL or timeout_ms < 0");
    return redlock__watchdog_flush(c, timeout_ms);
}

void redlock_client_cancel(redlock_client *c)
{
    if (!c)
        return;
    __atomic_store_n(&c->canceled, 1, __ATOMIC_RELEASE);
    if (c->net.pubsub)
        redlock__pubsub_kick(c->net.pubsub);
    if (c->loop.kick)
        c->loop.kick(c->loop.loop, NULL);
}

void redlock_acquire_cancel(redlock_lock *l)
{
    if (!l)
        return;
    __atomic_add_fetch(&l->cancels, 1, __ATOMIC_ACQ_REL);
    /* Wakes every waiter of the client; the others find their own cancel
     * count unchanged and sleep on (acquire.c, wait_for). */
    if (l->client->net.pubsub)
        redlock__pubsub_kick(l->client->net.pubsub);
    if (l->client->loop.kick)
        l->client->loop.kick(l->client->loop.loop, l);
}


const char *redlock_client_id(const redlock_client *c)
{
    return c ? c->id : "";
}

size_t redlock_client_node_count(const redlock_client *c)
{
    return c ? c->n_nodes : 0;
}

const char *redlock_client_node_name(const redlock_client *c, size_t i)
{
    if (!c || i >= c->n_nodes || !c->nodes[i].uri.display)
        return NULL;
    return c->nodes[i].uri.display;
}

int redlock_client_stats(redlock_client *c, redlock_stats *out)
{
    size_t i;
    const uint64_t *src;
    uint64_t *dst;

    if (!c || !out)
        return redlock__fail(REDLOCK_EINVAL, "NULL argument");
    src = (const uint64_t *)&c->stats;
    dst = (uint64_t *)out;
    for (i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    return REDLOCK_OK;
}

int redlock_client_node_failures(redlock_client *c, size_t node, uint64_t *out)
{
    if (!c || !out || node >= c->n_nodes)
        return redlock__fail(REDLOCK_EINVAL, "node index out of range");
    *out = c->net.node_failures ? __atomic_load_n(&c->net.node_failures[node],
                                                  __ATOMIC_RELAXED)
                                : 0;
    return REDLOCK_OK;
}
