/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client's own I/O thread (options.io_thread): a loop-driven client
 * whose loop the library runs, with poll(), on a thread of its own. The
 * blocking acquires and unlocks of every other thread are handed to it
 * and run there as the loop's tasks, so they share the loop's pipelined
 * connections, one per node: what many threads ask of a node goes out in
 * one write and comes back in one read, which costs each server less per
 * call than a connection per caller (bench/README.md, section 8). The
 * caller waits for its call's outcome and gets its message and member
 * report as if it had run the call itself.
 *
 * The public constructors live here, above the lock layer, because they
 * may start this thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/error.h"
#include "core/util.h"
#include "core/wait.h"
#include "lock/context.h"
#include "loop/loop.h"

typedef enum call_kind { CALL_ACQUIRE, CALL_UNLOCK, CALL_FREE } call_kind;

/* One call handed to the I/O thread; lives on its caller's stack. */
typedef struct io_call {
    struct io_thread *io;
    call_kind kind;
    redlock_lock *lock;
    uint64_t owner;
    uint64_t cancels_seen;          /* the lock's cancel count at the call */
    int64_t wait_ms, lease_ms;
    int rc;
    int done;                       /* under io_thread.mu */
    pthread_cond_t cond;
    char error[REDLOCK__ERROR_LEN];
    redlock__report_store report;
    struct io_call *next;
} io_call;

typedef struct io_thread {
    redlock_client *c;
    pthread_t thread;
    int wake_fd;                    /* eventfd: calls queued, or the stop */
    pthread_mutex_t mu;             /* the queue, stopping, started, each call's done */
    pthread_cond_t started_cond;
    io_call *head, *tail;           /* calls not yet started */
    int stopping, started, start_rc;
    int refresh;                    /* atomic: the next tick may have moved */
    /* The poll set and the loop's timer; only the I/O thread touches
     * them. */
    struct pollfd *pfd;
    size_t pfd_cap;
    size_t next_fd; /* where a poll set too small for every fd starts */
    int64_t timer_ns;               /* -1: no timer */
} io_thread;

/* ---- the loop's hooks (on the I/O thread) -------------------------------- */

/* The loop keeps what it watches itself (redlock__loop_fd_table); turn()
 * polls from there. */
static void watch(void *ud, int fd, int events)
{
    (void)ud;
    (void)fd;
    (void)events;
}

static void set_timer(void *ud, int64_t timeout_ms)
{
    io_thread *io = ud;

    io->timer_ns = timeout_ms < 0 ? -1 : redlock__now_ns() + timeout_ms * REDLOCK__NS_PER_MS;
}

/* ---- calls ------------------------------------------------------------- */

static void finish(io_thread *io, io_call *call, int rc)
{
    pthread_mutex_lock(&io->mu);
    call->rc = rc;
    call->done = 1;
    pthread_cond_signal(&call->cond);
    pthread_mutex_unlock(&io->mu);
}

/* A relayed task's end: inside it the thread's report is the task's. */
static void call_done(void *ud, redlock_lock *l, int rc, const char *message)
{
    io_call *call = ud;

    (void)l;
    redlock__copy_msg(call->error, sizeof(call->error), message);
    redlock__report_export(&call->report);
    finish(call->io, call, rc);
}

static void start_call(io_thread *io, io_call *call)
{
    int rc;

    if (call->kind == CALL_FREE) {
        redlock_lock_free(call->lock);
        finish(io, call, REDLOCK_OK);
        return;
    }
    rc = redlock__loop_start_relayed(io->c, call->lock, call->kind == CALL_UNLOCK, call->owner,
                                     call->wait_ms, call->lease_ms, call->cancels_seen,
                                     call_done, call);
    if (rc != REDLOCK_OK) {
        redlock__copy_msg(call->error, sizeof(call->error), redlock_last_error());
        finish(io, call, rc);
    }
}

/* Takes the queue; what a stop left queued is refused. */
static void start_queued(io_thread *io, int stopping)
{
    io_call *call, *next;

    pthread_mutex_lock(&io->mu);
    call = io->head;
    io->head = io->tail = NULL;
    pthread_mutex_unlock(&io->mu);
    if (!call)
        return;
    /* The calls' requests to a node go out together, in one write. */
    redlock__loop_batch_begin(io->c->loop.loop);
    for (; call; call = next) {
        next = call->next;
        if (!stopping || call->kind == CALL_FREE) {
            start_call(io, call);
            continue;
        }
        snprintf(call->error, sizeof(call->error), "lock '%s': the client is being freed",
                 redlock_lock_name(call->lock));
        finish(io, call, REDLOCK_ECANCELED);
    }
    redlock__loop_batch_end(io->c->loop.loop);
}

/* Hands call to the I/O thread and waits for its outcome. */
static int relay(io_thread *io, io_call *call)
{
    uint64_t one = 1;
    int was_empty;

    call->io = io;
    call->done = 0;
    call->next = NULL;
    pthread_cond_init(&call->cond, NULL);
    pthread_mutex_lock(&io->mu);
    if (io->stopping) {
        pthread_mutex_unlock(&io->mu);
        pthread_cond_destroy(&call->cond);
        return redlock__fail(REDLOCK_ECANCELED, "lock '%s': the client is being freed",
                             redlock_lock_name(call->lock));
    }
    was_empty = io->head == NULL;
    if (io->tail)
        io->tail->next = call;
    else
        io->head = call;
    io->tail = call;
    pthread_mutex_unlock(&io->mu);
    /* A queue that was not empty has its wake-up on the way already. A
     * full counter (EAGAIN) means the same. */
    if (was_empty && write(io->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        redlock__log(io->c, REDLOCK_LOG_ERROR, "I/O thread: eventfd write: %s", strerror(errno));
    /* In a fiber (another client's on_lost) the thread must not block: its
     * loop may be what this call, or a call of its own, waits for. */
    pthread_mutex_lock(&io->mu);
    while (!call->done)
        redlock__wait_cond(&call->cond, &io->mu);
    pthread_mutex_unlock(&io->mu);
    pthread_cond_destroy(&call->cond);
    if (call->kind == CALL_FREE)
        return REDLOCK_OK;
    redlock__report_adopt(&call->report);
    if (call->rc != REDLOCK_OK)
        return redlock__fail(call->rc, "%s", call->error);
    return REDLOCK_OK;
}

/* The loop's run_sync hook: a blocking acquire or unlock. */
static int run_sync(void *loop, redlock_lock *l, int unlock, uint64_t owner, int64_t wait_ms,
                    int64_t lease_ms)
{
    io_call call;

    if (!redlock__io_elsewhere(l->client))
        return redlock__loop_run_sync(loop, l, unlock, owner, wait_ms, lease_ms);
    memset(&call, 0, sizeof(call));
    call.kind = unlock ? CALL_UNLOCK : CALL_ACQUIRE;
    call.lock = l;
    call.owner = owner;
    call.wait_ms = wait_ms;
    call.lease_ms = lease_ms;
    /* A cancel made from now on ends the call, as for any blocking one. */
    call.cancels_seen = __atomic_load_n(&l->cancels, __ATOMIC_ACQUIRE);
    return relay(l->client->io.io, &call);
}

static void wake(void *ud)
{
    io_thread *io = ud;
    uint64_t one = 1;
    ssize_t w;

    __atomic_store_n(&io->refresh, 1, __ATOMIC_RELEASE);
    w = write(io->wake_fd, &one, sizeof(one));
    (void)w; /* a full counter already means a wake-up is due */
}

static void free_lock(void *ud, redlock_lock *l)
{
    io_call call;

    memset(&call, 0, sizeof(call));
    call.kind = CALL_FREE;
    call.lock = l;
    (void)relay(ud, &call);
}

/* ---- the thread -------------------------------------------------------- */

/* How long a poll lasts while its set cannot hold every watched fd. */
#define PARTIAL_POLL_MS 10

/* One poll() over what the loop watches and the wake-up fd, then what is
 * ready, the timer, and the calls queued meanwhile. */
static void turn(io_thread *io)
{
    const int ev_mask = REDLOCK_EV_READ | REDLOCK_EV_WRITE;
    size_t n = 0, i, k, want = 1, cap;
    const unsigned char *events = redlock__loop_fd_table(io->c->loop.loop, &cap);
    int64_t wait_ms = -1;

    for (i = 0; i < cap; i++)
        want += (events[i] & ev_mask) != 0;
    /* Out of memory the set stays as it was. Each turn then starts where
     * the last one stopped and polls briefly, so every fd is polled within
     * a few turns until the set can grow. */
    if (want > io->pfd_cap) {
        struct pollfd *grown = realloc(io->pfd, 2 * want * sizeof(*grown));

        if (grown) {
            io->pfd = grown;
            io->pfd_cap = 2 * want;
        }
    }
    if (io->pfd_cap == 0) {
        /* No memory even for the wake-up fd: a nap, then the timer. */
        redlock__wait_until(redlock__now_ns() + REDLOCK__NS_PER_MS);
    } else {
        int partial = want > io->pfd_cap;
        size_t start = partial && cap ? io->next_fd % cap : 0;

        io->pfd[n++] = (struct pollfd){.fd = io->wake_fd, .events = POLLIN};
        for (k = 0; k < cap && n < io->pfd_cap; k++) {
            i = (start + k) % cap;
            if (events[i] & ev_mask)
                io->pfd[n++] = (struct pollfd){
                    .fd = (int)i,
                    .events = (short)((events[i] & REDLOCK_EV_READ ? POLLIN : 0) |
                                      (events[i] & REDLOCK_EV_WRITE ? POLLOUT : 0))};
        }
        io->next_fd = start + k;
        if (io->timer_ns >= 0) {
            int64_t now = redlock__now_ns();

            wait_ms = io->timer_ns <= now ? 0
                                          : (io->timer_ns - now + REDLOCK__NS_PER_MS - 1) /
                                                REDLOCK__NS_PER_MS;
        }
        if (partial && (wait_ms < 0 || wait_ms > PARTIAL_POLL_MS))
            wait_ms = PARTIAL_POLL_MS;
        if (poll(io->pfd, n, (int)(wait_ms > 1000 ? 1000 : wait_ms)) < 0)
            n = 0; /* EINTR: the timer and the queue are looked at all the same */
    }
    for (i = 1; i < n; i++) {
        short ev = io->pfd[i].revents;

        if (ev)
            redlock_loop_action(
                io->c, io->pfd[i].fd,
                (ev & (POLLIN | POLLERR | POLLHUP | POLLNVAL) ? REDLOCK_EV_READ : 0) |
                    (ev & (POLLOUT | POLLERR | POLLHUP | POLLNVAL) ? REDLOCK_EV_WRITE : 0));
    }
    if (io->timer_ns >= 0 && redlock__now_ns() >= io->timer_ns) {
        io->timer_ns = -1;
        redlock_loop_action(io->c, REDLOCK_EV_TIMEOUT, 0);
    }
    if (n > 0 && io->pfd[0].revents) {
        uint64_t count;

        if (read(io->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
            redlock__log(io->c, REDLOCK_LOG_ERROR, "I/O thread: eventfd read: %s",
                         strerror(errno));
    }
    if (__atomic_exchange_n(&io->refresh, 0, __ATOMIC_ACQ_REL))
        redlock__loop_refresh_tick(io->c->loop.loop);
}

static void stop(void *ud);

static void *io_main(void *arg)
{
    io_thread *io = arg;
    redlock_client *c = io->c;
    int rc = redlock_loop_attach(c, watch, set_timer, io);

    if (rc == REDLOCK_OK) {
        c->loop.run_sync = run_sync;
        c->io = (redlock__io_hooks){
            .io = io, .thread = pthread_self(), .free_lock = free_lock, .stop = stop,
            .wake = wake};
    }
    pthread_mutex_lock(&io->mu);
    io->start_rc = rc;
    io->started = 1;
    pthread_cond_signal(&io->started_cond);
    pthread_mutex_unlock(&io->mu);
    if (rc != REDLOCK_OK)
        return NULL;
    for (;;) {
        int stopping;

        pthread_mutex_lock(&io->mu);
        stopping = io->stopping;
        pthread_mutex_unlock(&io->mu);
        start_queued(io, stopping);
        if (stopping)
            break;
        turn(io);
    }
    /* From here on nothing is relayed: the client is this thread's, and
     * its redlock_client_free() ends what is in flight. */
    c->io = (redlock__io_hooks){0};
    redlock_client_free(c);
    return NULL;
}

static void io_destroy(io_thread *io)
{
    close(io->wake_fd);
    pthread_mutex_destroy(&io->mu);
    pthread_cond_destroy(&io->started_cond);
    free(io->pfd);
    free(io);
}

/* redlock_client_free() from another thread. */
static void stop(void *ud)
{
    io_thread *io = ud;
    uint64_t one = 1;

    pthread_mutex_lock(&io->mu);
    io->stopping = 1;
    pthread_mutex_unlock(&io->mu);
    if (write(io->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        redlock__log(io->c, REDLOCK_LOG_ERROR, "I/O thread: eventfd write: %s", strerror(errno));
    pthread_join(io->thread, NULL);
    io_destroy(io);
}

/* Starts c's I/O thread; on failure c is freed. */
static int start(redlock_client **out)
{
    redlock_client *c = *out;
    io_thread *io = calloc(1, sizeof(*io));
    sigset_t all, before;
    int rc;

    if (!io || (io->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        rc = redlock__fail(REDLOCK_ENOMEM, "cannot start the I/O thread: %s",
                           io ? strerror(errno) : "out of memory");
        free(io);
        goto fail;
    }
    io->c = c;
    io->timer_ns = -1;
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->started_cond, NULL);
    /* The program's signals go to its own threads, never to this one. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    rc = pthread_create(&io->thread, NULL, io_main, io);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (rc != 0) {
        io_destroy(io);
        rc = redlock__fail(REDLOCK_ENOMEM, "cannot start the I/O thread");
        goto fail;
    }
    pthread_mutex_lock(&io->mu);
    while (!io->started)
        pthread_cond_wait(&io->started_cond, &io->mu);
    rc = io->start_rc;
    pthread_mutex_unlock(&io->mu);
    if (rc != REDLOCK_OK) {
        pthread_join(io->thread, NULL);
        io_destroy(io);
        rc = redlock__fail(rc, "cannot start the I/O thread: attaching its loop failed");
        goto fail;
    }
    return REDLOCK_OK;
fail:
    redlock_client_free(c);
    *out = NULL;
    return rc;
}

int redlock_client_new(redlock_client **out, const char *const *uris, size_t n_nodes,
                       const redlock_options *opts)
{
    int rc = redlock__client_create(out, uris, n_nodes, opts);

    return rc == REDLOCK_OK && (*out)->io_thread ? start(out) : rc;
}

int redlock_client_new_from_env(redlock_client **out, const redlock_options *opts)
{
    int rc = redlock__client_create_from_env(out, opts);

    return rc == REDLOCK_OK && (*out)->io_thread ? start(out) : rc;
}
