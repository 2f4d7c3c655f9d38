/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The replies a connection still owes for requests nobody waits for any
 * more: a count to discard, and, for calls whose owner asked
 * (report_in_flight), a ledger entry each, settled "delivered" when the
 * reply arrives and "lost" when the connection closes first.
 */
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "transport/conn.h"

/* Beyond this many abandoned replies a node is hopelessly behind. Closing
 * the connection would cost more than draining them: a frozen node runs
 * what it already read and answers into a reset, losing the rest, so the
 * bound only stops a node that never answers from growing this forever. */
#define MAX_SKIP (1u << 20)

/* Every ledger entry still waiting for its reply is settled "lost": the
 * node may never have read the call. Bare skips just go. */
void redlock__conn_settle_lost(redlock__conn *c)
{
    size_t i;

    for (i = c->run_head; i < c->nruns; i++)
        if (c->runs[i].token && c->hook && c->hook->fn)
            c->hook->fn(c->hook->ud, c->runs[i].token, 0, NULL);
    free(c->runs);
    c->runs = NULL;
    c->run_head = c->nruns = c->cap_runs = 0;
    c->ledger = 0;
}

/* Discards the reply of the oldest abandoned request; a ledger entry's
 * reply settles it. Any answer means the node ran the call (the scripts
 * are idempotent, an error reply included), except NOSCRIPT: that call
 * did not run, so it counts as lost and is sent again by its owner. */
void redlock__conn_skip_one(redlock__conn *c, const redisReply *r)
{
    uint64_t token = 0;

    c->skip--;
    if (c->run_head < c->nruns) {
        redlock__skip_run *run = &c->runs[c->run_head];

        token = run->token;
        if (--run->n == 0 && ++c->run_head == c->nruns)
            c->run_head = c->nruns = 0;
    }
    if (token) {
        int noscript = r->type == REDIS_REPLY_ERROR && r->str &&
                       strncmp(r->str, "NOSCRIPT", 8) == 0;

        c->ledger--;
        if (c->hook && c->hook->fn)
            c->hook->fn(c->hook->ud, token, !noscript,
                        r->type == REDIS_REPLY_ERROR ? r->str : NULL);
    }
}

/* Room for n more runs (and one for the bare skips before the first
 * ledger entry), compacting what was consumed. */
static int reserve_runs(redlock__conn *c, size_t n)
{
    size_t need, cap;
    redlock__skip_run *runs;

    if (c->run_head > 0) {
        memmove(c->runs, c->runs + c->run_head, (c->nruns - c->run_head) * sizeof(*c->runs));
        c->nruns -= c->run_head;
        c->run_head = 0;
    }
    need = c->nruns + n + 1;
    if (need <= c->cap_runs)
        return 0;
    cap = c->cap_runs ? c->cap_runs : 4;
    while (cap < need)
        cap *= 2;
    runs = realloc(c->runs, cap * sizeof(*runs));
    if (!runs)
        return -1;
    c->runs = runs;
    c->cap_runs = cap;
    return 0;
}

static void push_run(redlock__conn *c, uint64_t token, unsigned n)
{
    if (token == 0 && c->nruns > c->run_head && c->runs[c->nruns - 1].token == 0) {
        c->runs[c->nruns - 1].n += n;
        return;
    }
    c->runs[c->nruns].token = token;
    c->runs[c->nruns++].n = n;
}

int redlock__conn_abandon(redlock__conn *c, unsigned unanswered, const uint64_t *tokens)
{
    unsigned i;

    if (c->state == REDLOCK__CONN_CLOSED)
        return 0;
    if (unanswered == 0)
        return 1;
    /* Tracked calls may keep unsent output: a node that stopped reading
     * gets them when it reads again (the pool's next user or a drain
     * writes them), instead of a closed socket and a resend. */
    if (c->state != REDLOCK__CONN_READY ||
        (!(tokens && c->hook) && (redlock__buf_pending(&c->out) || c->tls_want_write)) ||
        c->handshake || c->skip + unanswered > MAX_SKIP) {
        redlock__conn_close(c);
        return 0;
    }
    if (tokens && c->hook) {
        if (reserve_runs(c, unanswered) != 0) {
            redlock__conn_close(c);
            return 0;
        }
        /* The bare skips so far become the first run, so the runs keep
         * the order of the replies still to come. */
        if (c->nruns == 0 && c->skip > 0)
            push_run(c, 0, c->skip);
        for (i = 0; i < unanswered; i++) {
            push_run(c, tokens[i], 1);
            c->ledger += tokens[i] != 0;
        }
    } else if (c->nruns > 0) {
        if (reserve_runs(c, 1) != 0) {
            redlock__conn_close(c);
            return 0;
        }
        push_run(c, 0, unanswered);
    }
    c->skip += unanswered;
    return 1;
}
