/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A watchdog lock on a libevent loop. The client is loop-driven
 * (options.event_loop): it starts no watchdog thread; the lock's lease
 * (3 s here) is renewed every lease/3 from the loop, and on_lost runs on
 * the loop's thread.
 *
 * The program takes "example:ev_watchdog" with the watchdog lease, keeps
 * it for more than two leases (it would have expired twice without the
 * renewals) checking that it stays held, then plays the part of a failure:
 * it deletes the lock's key on every node itself, over a plain Redis
 * connection, as an operator's DEL or a node restarted empty would. The
 * next renewal finds the key gone, and on_lost must run, on the loop's
 * thread, within about 2 s. A deadline of 20 s ends the run whatever
 * happens.
 *
 *   ./ev_watchdog redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
 *
 * Exit status: 0 renewals kept the lock and the loss was reported, 1
 * failure, 2 usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <redlock/adapters/libevent.h>
#include <redlock/redlock.h>

#include <event2/event.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nodes.h"

#define NAME "example:ev_watchdog"
#define OWNER 1
#define LEASE_MS 3000
#define HOLD_MS (2 * LEASE_MS + 500) /* over two leases */
#define LOST_WITHIN_MS 2000
#define DEADLINE_MS 20000
#define CHECK_MS 250

static struct event_base *base;
static redlock_client *client;
static redlock_lock *lock;
static pthread_t loop_thread;

static int64_t acquired_at = -1, deleted_at = -1, lost_at = -1, last_print;
static int failed, lost_reason, lost_on_loop_thread, unlock_rc = -1, unlocked;
static int64_t min_ttl = INT64_MAX;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fail(const char *what)
{
    fprintf(stderr, "ev_watchdog: %s\n", what);
    failed = 1;
    event_base_loopbreak(base);
}

/* ------------------------------------------------------------------ */
/* Deleting the key behind the library's back, in RESP by hand. */

/* A blocking connection to "host:port", "[v6]:port" or a socket path,
 * with 1 s timeouts; -1 on failure. */
static int node_connect(const char *node)
{
    struct timeval tv = {1, 0};
    int fd = -1;

    if (node[0] == '/') {
        struct sockaddr_un sa;

        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (strlen(node) >= sizeof(sa.sun_path) || (fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
            return -1;
        strcpy(sa.sun_path, node);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            close(fd);
            return -1;
        }
    } else {
        char host[256];
        const char *colon = strrchr(node, ':');
        struct addrinfo hints, *ai = NULL, *a;
        size_t n;

        if (!colon || (n = (size_t)(colon - node)) >= sizeof(host))
            return -1;
        memcpy(host, node, n);
        host[n] = '\0';
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
            memmove(host, host + 1, n - 2);
            host[n - 2] = '\0';
        }
        memset(&hints, 0, sizeof(hints));
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
            return -1;
        for (a = ai; a; a = a->ai_next) {
            if ((fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol)) < 0)
                continue;
            if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
                break;
            close(fd);
            fd = -1;
        }
        freeaddrinfo(ai);
        if (fd < 0)
            return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Sends one command (argv, as a RESP array) and reads the reply's first
 * line into reply. Returns 0, or -1 if the node did not answer. */
static int node_command(int fd, int argc, const char **argv, char *reply, size_t len)
{
    char buf[1024];
    size_t used = 0, got = 0;
    int i, n;

    n = snprintf(buf, sizeof(buf), "*%d\r\n", argc);
    for (i = 0; i < argc && n > 0 && used + (size_t)n < sizeof(buf); i++) {
        used += (size_t)n;
        n = snprintf(buf + used, sizeof(buf) - used, "$%zu\r\n%s\r\n", strlen(argv[i]),
                     argv[i]);
    }
    if (n < 0 || used + (size_t)n >= sizeof(buf))
        return -1;
    used += (size_t)n;
    if (write(fd, buf, used) != (ssize_t)used)
        return -1;
    /* Replies here are one line (":1", "+OK", "-ERR ..."). */
    while (got + 1 < len) {
        ssize_t r = read(fd, reply + got, 1);

        if (r != 1)
            return -1;
        if (reply[got] == '\n')
            break;
        got++;
    }
    if (got > 0 && reply[got - 1] == '\r')
        got--;
    reply[got] = '\0';
    return 0;
}

/* DEL NAME on every node; returns how many deleted it. */
static int delete_everywhere(void)
{
    const char *password = getenv("REDLOCK_PASSWORD");
    size_t i, n = redlock_client_node_count(client);
    int deleted = 0;

    for (i = 0; i < n; i++) {
        const char *node = redlock_client_node_name(client, i);
        const char *auth[] = {"AUTH", password}, *del[] = {"DEL", NAME};
        char reply[256];
        int fd = node_connect(node);

        if (fd < 0) {
            fprintf(stderr, "ev_watchdog: %s: cannot connect\n", node);
            continue;
        }
        if (password && *password &&
            (node_command(fd, 2, auth, reply, sizeof(reply)) != 0 || reply[0] != '+'))
            fprintf(stderr, "ev_watchdog: %s: AUTH refused\n", node);
        else if (node_command(fd, 2, del, reply, sizeof(reply)) != 0)
            fprintf(stderr, "ev_watchdog: %s: no answer to DEL\n", node);
        else if (strcmp(reply, ":1") == 0)
            deleted++;
        else
            fprintf(stderr, "ev_watchdog: %s: DEL answered %s\n", node, reply);
        close(fd);
    }
    return deleted;
}

/* ------------------------------------------------------------------ */

static void on_unlocked(void *userdata, redlock_lock *l, int rc, const char *message)
{
    (void)userdata, (void)l, (void)message;
    unlocked = 1;
    unlock_rc = rc;
    event_base_loopbreak(base);
}

static void on_lost(void *userdata, redlock_lock *l, uint64_t owner, int reason)
{
    (void)userdata;
    lost_at = now_ms();
    lost_reason = reason;
    lost_on_loop_thread = pthread_equal(pthread_self(), loop_thread);
    printf("ev_watchdog: on_lost (%s) %lld ms after the delete, on the %s thread\n",
           redlock_err_name(reason), (long long)(lost_at - deleted_at),
           lost_on_loop_thread ? "loop's" : "WRONG");
    /* Starting an operation is allowed here; the release clears the lost
     * state (REDLOCK_ELOST) and removes whatever is left on the nodes. */
    if (redlock_unlock_async(l, owner, on_unlocked, NULL) != REDLOCK_OK)
        fail("unlock_async from on_lost refused");
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
    int64_t now = now_ms(), ttl = -1;
    redlock_stats st;

    (void)fd, (void)what, (void)arg;
    if (acquired_at < 0 || lost_at >= 0)
        return;
    if (deleted_at < 0) {
        if (redlock_remaining_ttl_as(lock, OWNER, &ttl) != REDLOCK_OK || ttl <= 0) {
            fail("the lock's validity ran out while the watchdog should renew it");
            return;
        }
        if (ttl < min_ttl)
            min_ttl = ttl;
        if (now - last_print >= 1000) {
            redlock_client_stats(client, &st);
            printf("ev_watchdog: held for %lld ms, %lld ms of validity left, %llu renewals\n",
                   (long long)(now - acquired_at), (long long)ttl,
                   (unsigned long long)st.renewals);
            last_print = now;
        }
        if (now - acquired_at >= HOLD_MS) {
            int held = 0, deleted;

            /* A blocking call: fine between two loop rounds, for one check. */
            if (redlock_is_held_as(lock, OWNER, &held) != REDLOCK_OK || !held) {
                fail("not held on a quorum after two leases");
                return;
            }
            redlock_client_stats(client, &st);
            printf("ev_watchdog: still held on a quorum after %lld ms (lease %d ms, %llu "
                   "renewals, least validity seen %lld ms)\n",
                   (long long)(now - acquired_at), LEASE_MS, (unsigned long long)st.renewals,
                   (long long)min_ttl);
            deleted = delete_everywhere();
            deleted_at = now_ms();
            printf("ev_watchdog: deleted %s on %d of %zu nodes\n", NAME, deleted,
                   redlock_client_node_count(client));
            if (deleted < redlock_lock_quorum(lock))
                fail("could not delete the key on a quorum of nodes");
        }
        return;
    }
    if (now - deleted_at > LOST_WITHIN_MS)
        fail("on_lost was not called within 2 s of the delete");
}

static void on_acquired(void *userdata, redlock_lock *l, int rc, const char *message)
{
    (void)userdata, (void)l;
    if (rc != REDLOCK_OK) {
        fprintf(stderr, "ev_watchdog: not acquired: %s (%s)\n", redlock_err_name(rc), message);
        fail("acquire failed");
        return;
    }
    acquired_at = last_print = now_ms();
    printf("ev_watchdog: acquired %s with a %d ms watchdog lease\n", NAME, LEASE_MS);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    fail("deadline reached");
}

int main(int argc, char **argv)
{
    redlock_options opts = {0};
    redlock_libevent *ad = NULL;
    struct event *check = NULL, *deadline = NULL;
    struct timeval check_tv = {0, CHECK_MS * 1000}, deadline_tv = {DEADLINE_MS / 1000, 0};
    int64_t start = now_ms();
    int ok;

    loop_thread = pthread_self();
    opts.event_loop = 1;
    opts.watchdog_lease_ms = LEASE_MS;
    if (example_client(argc, argv, &opts, &client) != REDLOCK_OK)
        return 2;
    if (!(base = event_base_new())) {
        redlock_client_free(client);
        return 2;
    }
    if (redlock_libevent_attach(client, base, &ad) != REDLOCK_OK ||
        redlock_lock_new(client, NAME, NULL, &lock) != REDLOCK_OK) {
        fprintf(stderr, "ev_watchdog: %s\n", redlock_last_error());
        redlock_client_free(client);
        redlock_libevent_detach(ad);
        event_base_free(base);
        return 2;
    }
    redlock_lock_set_on_lost(lock, on_lost, NULL);
    check = event_new(base, -1, EV_PERSIST, on_check, NULL);
    deadline = evtimer_new(base, on_deadline, NULL);
    if (!check || !deadline) {
        failed = 1;
    } else {
        event_add(check, &check_tv);
        evtimer_add(deadline, &deadline_tv);
        /* lease 0: the watchdog lease, renewed from the loop. */
        if (redlock_acquire_async(lock, OWNER, 5000, 0, on_acquired, NULL) != REDLOCK_OK) {
            fprintf(stderr, "ev_watchdog: acquire_async: %s\n", redlock_last_error());
            failed = 1;
        } else {
            event_base_dispatch(base);
        }
    }

    printf("ev_watchdog: unlock after the loss: %s\n",
           unlocked ? redlock_err_name(unlock_rc) : "not done");
    ok = !failed && lost_at >= 0 && lost_at - deleted_at <= LOST_WITHIN_MS &&
         lost_on_loop_thread && lost_reason == REDLOCK_ENOT_OWNER && unlocked &&
         unlock_rc == REDLOCK_ELOST;
    printf("ev_watchdog: %s in %lld ms\n", ok ? "ok" : "FAILED", (long long)(now_ms() - start));
    if (check)
        event_free(check);
    if (deadline)
        event_free(deadline);
    redlock_lock_free(lock);
    redlock_client_free(client);
    redlock_libevent_detach(ad);
    event_base_free(base);
    return ok ? 0 : 1;
}
