/* SPDX-License-Identifier: BSD-3-Clause */
/* Parked tasks with a deadline, in a binary heap: the loop's timer and
 * its wake-ups cost what is due, not a walk over every task. */
#include <stdlib.h>

#include "loop/sched.h"

int64_t redlock__heap_deadline(const redlock__task *t)
{
    return redlock__fiber_park(t->fiber)->deadline_ns;
}

static void heap_set(redlock__loop *loop, size_t i, redlock__task *t)
{
    loop->heap[i] = t;
    t->heap_idx = i + 1;
}

static void heap_up(redlock__loop *loop, size_t i)
{
    redlock__task *t = loop->heap[i];

    while (i > 0 && redlock__heap_deadline(loop->heap[(i - 1) / 2]) > redlock__heap_deadline(t)) {
        heap_set(loop, i, loop->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(loop, i, t);
}

static void heap_down(redlock__loop *loop, size_t i)
{
    redlock__task *t = loop->heap[i];

    for (;;) {
        size_t c = 2 * i + 1;

        if (c >= loop->heap_n)
            break;
        if (c + 1 < loop->heap_n && redlock__heap_deadline(loop->heap[c + 1]) < redlock__heap_deadline(loop->heap[c]))
            c++;
        if (redlock__heap_deadline(loop->heap[c]) >= redlock__heap_deadline(t))
            break;
        heap_set(loop, i, loop->heap[c]);
        i = c;
    }
    heap_set(loop, i, t);
}

void redlock__heap_remove(redlock__loop *loop, redlock__task *t)
{
    size_t i = t->heap_idx - 1;

    if (!t->heap_idx)
        return;
    t->heap_idx = 0;
    if (--loop->heap_n == i)
        return;
    heap_set(loop, i, loop->heap[loop->heap_n]);
    heap_up(loop, i);
    heap_down(loop, loop->heap[i]->heap_idx - 1);
}

/* A parked task with a deadline is woken by the clock. Out of memory it
 * is not, and ends when a kick or its fds wake it. */
void redlock__heap_add(redlock__loop *loop, redlock__task *t)
{
    if (t->heap_idx || redlock__heap_deadline(t) == INT64_MAX)
        return;
    if (loop->heap_n == loop->heap_cap) {
        size_t cap = loop->heap_cap ? 2 * loop->heap_cap : 64;
        redlock__task **h = realloc(loop->heap, cap * sizeof(*h));

        if (!h)
            return;
        loop->heap = h;
        loop->heap_cap = cap;
    }
    heap_set(loop, loop->heap_n++, t);
    heap_up(loop, loop->heap_n - 1);
}

