/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fair locks in two more settings: a MultiLock (a different name on each
 * of three nodes, every member needed) grants in arrival order and leaves
 * no queue behind; and a waiter whose release message is dropped on its
 * way, by a proxy between its client and the node that forwards every
 * reply but pub/sub messages, still gets the lock within a third of its
 * place's length. Real redis-server processes of the fixture.
 */
#include <arpa/inet.h>
#include <check.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redlock/redlock.h"
#include "rig_env.h"
#include "rw_support.h"

#define HOLDER 1
#define PLACE_MS 1500
#define MEMBERS 3
#define WAITERS 3
#define HOLD_MS 30

static redlock_lock *fair_multilock(redlock_client *c, const redlock_member *m, size_t n)
{
    redlock_lock_options lo;
    redlock_lock *l = NULL;

    memset(&lo, 0, sizeof(lo));
    lo.kind = REDLOCK_LOCK_FAIR;
    lo.fair_wait_lease_ms = PLACE_MS;
    ck_assert_msg(redlock_multilock_new(c, m, n, &lo, &l) == REDLOCK_OK, "multilock_new: %s",
                  redlock_last_error());
    return l;
}

static long long cli_int(size_t node, const char *fmt, const char *name)
{
    char args[256];

    snprintf(args, sizeof(args), fmt, name);
    return atoll(rig_cli(node, args));
}

/* Whether every member's queue has len entries, within timeout_ms. */
static int queues_reach(const redlock_member *m, long long len, int64_t timeout_ms)
{
    int64_t t0 = rig_now_ms();
    size_t i;

    for (;;) {
        for (i = 0; i < MEMBERS; i++)
            if (cli_int(m[i].node, "LLEN 'redisson_lock_queue:{%s}'", m[i].name) != len)
                break;
        if (i == MEMBERS)
            return 1;
        if (rig_now_ms() - t0 > timeout_ms)
            return 0;
        rig_sleep_ms(2);
    }
}

/* Whether no member node keeps anything of its name, within timeout_ms. */
static int members_clean(const redlock_member *m, int64_t timeout_ms)
{
    static const char *const fmt = "EXISTS '%1$s' 'redisson_lock_queue:{%1$s}' "
                                   "'redisson_lock_timeout:{%1$s}' 'redlock_fair:{%1$s}' "
                                   "'redlock_fairlapse:{%1$s}'";
    int64_t t0 = rig_now_ms();
    size_t i;

    for (;;) {
        for (i = 0; i < MEMBERS; i++)
            if (cli_int(m[i].node, fmt, m[i].name) != 0)
                break;
        if (i == MEMBERS)
            return 1;
        if (rig_now_ms() - t0 > timeout_ms)
            return 0;
        rig_sleep_ms(10);
    }
}

typedef struct multi_waiter {
    redlock_lock *l;
    int idx, rc, unlock_rc;
    atomic_int *next, *inside, *overlaps;
    int *order;
    pthread_t th;
} multi_waiter;

static void *multi_waiter_main(void *arg)
{
    multi_waiter *w = arg;
    uint64_t owner = W1 + (uint64_t)w->idx;

    w->rc = redlock_acquire_as(w->l, owner, 20000, 10000);
    if (w->rc != REDLOCK_OK)
        return NULL;
    if (atomic_fetch_add(w->inside, 1) != 0)
        atomic_fetch_add(w->overlaps, 1);
    w->order[atomic_fetch_add(w->next, 1)] = w->idx;
    rig_sleep_ms(HOLD_MS);
    atomic_fetch_sub(w->inside, 1);
    w->unlock_rc = redlock_unlock_as(w->l, owner);
    return NULL;
}

/* 1. A fair MultiLock: arrival order over three names on three nodes. */
START_TEST(test_fair_multilock_in_order)
{
    redlock_client *c = client_over(N_NODES), *wc = client_over(N_NODES);
    char names[MEMBERS][64];
    redlock_member m[MEMBERS];
    redlock_lock *holder, *l[WAITERS];
    multi_waiter w[WAITERS];
    atomic_int next = 0, inside = 0, overlaps = 0;
    int order[WAITERS], i;

    for (i = 0; i < MEMBERS; i++) {
        rig_unique_name(names[i], sizeof(names[i]), "fairmulti", i == 0 ? "a" : i == 1 ? "b" : "c");
        m[i].node = (size_t)i;
        m[i].name = names[i];
    }
    holder = fair_multilock(c, m, MEMBERS);
    acquire_ok(holder, HOLDER, 0, 10000);
    for (i = 0; i < WAITERS; i++) {
        l[i] = fair_multilock(wc, m, MEMBERS);
        w[i] = (multi_waiter){.l = l[i], .idx = i, .next = &next, .inside = &inside,
                              .overlaps = &overlaps, .order = order};
        ck_assert_int_eq(pthread_create(&w[i].th, NULL, multi_waiter_main, &w[i]), 0);
        ck_assert_msg(queues_reach(m, i + 1, 5000), "waiter %d never queued on every member", i);
    }
    unlock_ok(holder, HOLDER);
    for (i = 0; i < WAITERS; i++) {
        pthread_join(w[i].th, NULL);
        ck_assert_msg(w[i].rc == REDLOCK_OK, "waiter %d: %s", i, redlock_err_name(w[i].rc));
        ck_assert_msg(w[i].unlock_rc == REDLOCK_OK, "waiter %d unlock: %s", i,
                      redlock_err_name(w[i].unlock_rc));
    }
    ck_assert_int_eq(atomic_load(&overlaps), 0);
    for (i = 0; i < WAITERS; i++)
        ck_assert_msg(order[i] == i, "grant %d went to waiter %d", i, order[i]);
    ck_assert_msg(members_clean(m, 3000), "a member kept its queue or hold");
    for (i = 0; i < WAITERS; i++)
        redlock_lock_free(l[i]);
    redlock_lock_free(holder);
    redlock_client_free(c);
    redlock_client_free(wc);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A proxy to node 0 that forwards everything but pub/sub messages. Replies
 * are parsed and encoded again; a "message" push is counted and dropped. */

typedef struct proxy {
    int listen_fd, port, upstream_port;
    atomic_int stop, dropped;
    pthread_t accept_th;
} proxy;

typedef struct pipe_pair {
    proxy *px;
    int client_fd, server_fd;
    pthread_t th;
    struct pipe_pair *next;
} pipe_pair;

static pipe_pair *pairs; /* joined at proxy_stop */

static int send_all_fd(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int encode_reply(const redisReply *r, char *out, size_t cap, size_t *off)
{
    int w;
    size_t i;

    switch (r->type) {
    case REDIS_REPLY_STRING:
        w = snprintf(out + *off, cap - *off, "$%zu\r\n", r->len);
        if (w < 0 || (size_t)w + r->len + 2 >= cap - *off)
            return -1;
        *off += (size_t)w;
        memcpy(out + *off, r->str, r->len);
        *off += r->len;
        memcpy(out + *off, "\r\n", 2);
        *off += 2;
        return 0;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        w = snprintf(out + *off, cap - *off, "%c%s\r\n",
                     r->type == REDIS_REPLY_STATUS ? '+' : '-', r->str);
        break;
    case REDIS_REPLY_INTEGER:
        w = snprintf(out + *off, cap - *off, ":%lld\r\n", r->integer);
        break;
    case REDIS_REPLY_NIL:
        w = snprintf(out + *off, cap - *off, "$-1\r\n");
        break;
    case REDIS_REPLY_ARRAY:
        w = snprintf(out + *off, cap - *off, "*%zu\r\n", r->elements);
        if (w < 0 || (size_t)w >= cap - *off)
            return -1;
        *off += (size_t)w;
        for (i = 0; i < r->elements; i++)
            if (encode_reply(r->element[i], out, cap, off) != 0)
                return -1;
        return 0;
    default:
        return -1;
    }
    if (w < 0 || (size_t)w >= cap - *off)
        return -1;
    *off += (size_t)w;
    return 0;
}

static int is_message(const redisReply *r)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
           r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "message") == 0;
}

static void *pipe_main(void *arg)
{
    pipe_pair *pp = arg;
    redisReader *rd = redisReaderCreate();
    char buf[16384], *out = malloc(1 << 20);
    struct pollfd pfd[2] = {{pp->client_fd, POLLIN, 0}, {pp->server_fd, POLLIN, 0}};

    while (rd && out && !atomic_load(&pp->px->stop)) {
        ssize_t n;
        void *reply;

        if (poll(pfd, 2, 50) <= 0)
            continue;
        if (pfd[0].revents) {
            n = recv(pp->client_fd, buf, sizeof(buf), 0);
            if (n <= 0 || send_all_fd(pp->server_fd, buf, (size_t)n) != 0)
                break;
        }
        if (pfd[1].revents) {
            size_t off = 0;

            n = recv(pp->server_fd, buf, sizeof(buf), 0);
            if (n <= 0 || redisReaderFeed(rd, buf, (size_t)n) != REDIS_OK)
                break;
            while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
                int bad = 0;

                if (is_message(reply))
                    atomic_fetch_add(&pp->px->dropped, 1);
                else
                    bad = encode_reply(reply, out, 1 << 20, &off) != 0;
                freeReplyObject(reply);
                if (bad)
                    goto done;
            }
            if (off > 0 && send_all_fd(pp->client_fd, out, off) != 0)
                break;
        }
    }
done:
    close(pp->client_fd);
    close(pp->server_fd);
    if (rd)
        redisReaderFree(rd);
    free(out);
    return NULL;
}

static void *accept_main(void *arg)
{
    proxy *px = arg;
    struct pollfd pfd = {px->listen_fd, POLLIN, 0};

    while (!atomic_load(&px->stop)) {
        struct sockaddr_in up = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px->upstream_port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        pipe_pair *pp;
        int cfd, sfd;

        if (poll(&pfd, 1, 50) <= 0)
            continue;
        if ((cfd = accept(px->listen_fd, NULL, NULL)) < 0)
            continue;
        sfd = socket(AF_INET, SOCK_STREAM, 0);
        if (sfd < 0 || connect(sfd, (struct sockaddr *)&up, sizeof(up)) != 0 ||
            !(pp = calloc(1, sizeof(*pp)))) {
            close(cfd);
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        *pp = (pipe_pair){.px = px, .client_fd = cfd, .server_fd = sfd, .next = pairs};
        if (pthread_create(&pp->th, NULL, pipe_main, pp) != 0) {
            close(cfd);
            close(sfd);
            free(pp);
            continue;
        }
        pairs = pp; /* only this thread adds; proxy_stop joins it first */
    }
    return NULL;
}

static void proxy_start(proxy *px, int upstream_port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);

    memset(px, 0, sizeof(*px));
    px->upstream_port = upstream_port;
    px->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(px->listen_fd, 0);
    ck_assert_int_eq(bind(px->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(px->listen_fd, 16), 0);
    ck_assert_int_eq(getsockname(px->listen_fd, (struct sockaddr *)&a, &len), 0);
    px->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&px->accept_th, NULL, accept_main, px), 0);
}

static void proxy_stop(proxy *px)
{
    atomic_store(&px->stop, 1);
    pthread_join(px->accept_th, NULL);
    while (pairs) {
        pipe_pair *pp = pairs;

        pairs = pp->next;
        pthread_join(pp->th, NULL);
        free(pp);
    }
    close(px->listen_fd);
}

/* 2. The release message is dropped on its way: the waiter finds its turn
 *    at its next renewal, a third of its place's length later. */
START_TEST(test_dropped_message_waiter_still_served)
{
    redlock_client *c = client_over(1), *wc = NULL;
    redlock_options o;
    redlock_lock_options lo;
    redlock_lock *holder, *w;
    char uri[64], name[64];
    const char *uris[1] = {uri};
    int64_t released_us, took_ms;
    bg_acquire b;
    proxy px;

    proxy_start(&px, rig_get_int("PLAIN_BASE_PORT"));
    snprintf(uri, sizeof(uri), "redis://127.0.0.1:%d", px.port);
    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    ck_assert_msg(redlock_client_new(&wc, uris, 1, &o) == REDLOCK_OK, "%s", redlock_last_error());
    rig_unique_name(name, sizeof(name), "fairmulti", "dropped");
    memset(&lo, 0, sizeof(lo));
    lo.kind = REDLOCK_LOCK_FAIR;
    lo.fair_wait_lease_ms = PLACE_MS;
    ck_assert_int_eq(redlock_lock_new(c, name, &lo, &holder), REDLOCK_OK);
    ck_assert_int_eq(redlock_lock_new(wc, name, &lo, &w), REDLOCK_OK);
    acquire_ok(holder, HOLDER, 0, 30000);
    bg_start(&b, w, W1, 10000);
    {
        int64_t t0 = rig_now_ms();

        while (cli_int(0, "LLEN 'redisson_lock_queue:{%s}'", name) != 1 &&
               rig_now_ms() - t0 < 5000)
            rig_sleep_ms(2);
    }
    ck_assert_int_eq(cli_int(0, "LLEN 'redisson_lock_queue:{%s}'", name), 1);
    released_us = rig_now_us();
    unlock_ok(holder, HOLDER);
    pthread_join(b.th, NULL);
    took_ms = (b.done_us - released_us) / 1000;
    fprintf(stderr, "dropped release message: %d dropped, granted %lld ms after the release\n",
            atomic_load(&px.dropped), (long long)took_ms);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiter: %s", redlock_err_name(b.rc));
    ck_assert_msg(atomic_load(&px.dropped) >= 1, "the proxy dropped no message");
    ck_assert_msg(took_ms <= PLACE_MS / 3 + 500, "granted %lld ms after the release",
                  (long long)took_ms);
    unlock_ok(w, W1);
    redlock_lock_free(w);
    redlock_lock_free(holder);
    redlock_client_free(wc);
    redlock_client_free(c);
    proxy_stop(&px);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fair_multi");

    RIG_ADD_CASE(s, test_fair_multilock_in_order, 60);
    RIG_ADD_CASE(s, test_dropped_message_waiter_still_served, 60);
    return run_suite(s);
}
