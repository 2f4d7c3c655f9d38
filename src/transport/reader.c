/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/reader.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdlib.h>

/* hiredis keeps its default reply constructors static; the only way to
 * reach them is through the table a default reader points at. */
static redisReplyObjectFunctions bounded;
static void *(*create_array_unbounded)(const redisReadTask *, int);
static pthread_once_t bounded_once = PTHREAD_ONCE_INIT;
static int bounded_ready;

/* The reader hands its privdata to every task; a reader made here points
 * it at its own "refused" flag so the caller can tell why parsing failed. */
typedef struct reader_state {
    int refused;
} reader_state;

static void *create_array_bounded(const redisReadTask *task, int elements)
{
    if (elements > REDLOCK__READER_MAX_ELEMENTS) {
        if (task->privdata)
            ((reader_state *)task->privdata)->refused = 1;
        return NULL;
    }
    return create_array_unbounded(task, elements);
}

static void init_bounded(void)
{
    redisReader *probe = redisReaderCreate();

    if (!probe || !probe->fn || !probe->fn->createArray) {
        if (probe)
            redisReaderFree(probe);
        return;
    }
    bounded = *probe->fn;
    create_array_unbounded = bounded.createArray;
    bounded.createArray = create_array_bounded;
    redisReaderFree(probe);
    bounded_ready = 1;
}

static reader_state *state_of(const redisReader *r)
{
    return r->fn == &bounded ? r->privdata : NULL;
}

struct redisReader *redlock__reader_create(void)
{
    redisReader *r;
    reader_state *st;

    pthread_once(&bounded_once, init_bounded);
    if (!bounded_ready)
        return NULL;
    st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    r = redisReaderCreateWithFunctions(&bounded);
    if (!r) {
        free(st);
        return NULL;
    }
    r->privdata = st;
    return r;
}

void redlock__reader_free(struct redisReader *r)
{
    reader_state *st;

    if (!r)
        return;
    st = state_of(r);
    redisReaderFree(r);
    free(st);
}

int redlock__reader_refused(const struct redisReader *r)
{
    const reader_state *st = state_of(r);

    return st && st->refused;
}
