/* SPDX-License-Identifier: BSD-3-Clause */
/* redlock demo: the verdict. Every pair of sections checked for overlap,
 * the counter for lost updates; the exit status is 0 only if both hold. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

static int cmp_start(const void *a, const void *b)
{
    const section *x = a, *y = b;

    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static long long read_counter(const demo *d)
{
    FILE *f = fopen(d->counter_path, "r");
    long long v = 0;

    if (!f)
        return 0;
    if (fscanf(f, "%lld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

static void print_worker_errors(const demo *d)
{
    char line[512];
    FILE *f = fopen(d->err_path, "r");
    int shown = 0;

    if (!f)
        return;
    while (fgets(line, sizeof(line), f) && shown < 8) {
        printf("    %s", line);
        shown++;
    }
    fclose(f);
}

int demo_verdict(demo *d)
{
    size_t i, complete = 0, incomplete = 0, overlaps = 0, during_freeze = 0;
    int64_t longest_wait = 0, longest_hold = 0, min_gap = INT64_MAX, max_end = 0;
    int longest_worker = 0, beyond_validity = 0;
    long long counter = read_counter(d);
    int ok;

    qsort(d->s, d->n_sections, sizeof(d->s[0]), cmp_start);
    for (i = 0; i < d->n_sections; i++) {
        section *s = &d->s[i];

        if (!s->complete) {
            incomplete++;
            continue;
        }
        complete++;
        if (s->start_ns - s->spawn_ns > longest_wait) {
            longest_wait = s->start_ns - s->spawn_ns;
            longest_worker = s->worker;
        }
        if (s->end_ns - s->start_ns > longest_hold)
            longest_hold = s->end_ns - s->start_ns;
        if ((s->end_ns - s->start_ns) / NS_PER_MS >= s->validity_ms)
            beyond_validity++;
        if (d->freeze_ns && s->start_ns >= d->freeze_ns &&
            (!d->thaw_ns || s->start_ns < d->thaw_ns))
            during_freeze++;
        /* Sorted by start, a section overlaps an earlier one exactly when
         * it starts before the latest end seen so far. */
        if (max_end && s->start_ns <= max_end)
            overlaps++;
        else if (max_end && s->start_ns - max_end < min_gap)
            min_gap = s->start_ns - max_end;
        if (s->end_ns > max_end)
            max_end = s->end_ns;
    }
    ok = complete > 0 && overlaps == 0 && incomplete == 0 && counter == (long long)complete &&
         !beyond_validity;
    /* The point of the sentinel demo: the workers went on after the kill. */
    if (d->sentinel)
        ok = ok && d->killed_port > 0 && d->after_kill > 0;
    printf("\nVerdict\n");
    if (d->sentinel)
        printf("  acquisitions        %zu (%zu after group 1's master was killed)\n", complete,
               d->after_kill);
    else
        printf("  acquisitions        %zu (%zu while %d of %d nodes were frozen)\n", complete,
               during_freeze, d->n_frozen, d->nodes);
    if (d->sentinel && d->killed_port <= 0) {
        printf("  master kill         FAILED (see above)\n");
    } else if (d->sentinel) {
        printf("  master kill         group 1, port %d, at %.3f s\n", d->killed_port,
               demo_secs(d, d->kill_ns));
        if (d->failover_ns)
            printf("  failover            %lld ms after the kill (new master: port %d)\n",
                   (long long)((d->failover_ns - d->kill_ns) / NS_PER_MS), d->new_port);
        else
            printf("  failover            not seen within %d s\n", DEMO_FAILOVER_SECS);
        if (d->first_after_ns)
            printf("  first acquire after the kill: %lld ms after it\n",
                   (long long)((d->first_after_ns - d->kill_ns) / NS_PER_MS));
        else
            printf("  first acquire after the kill: none (the workers did not go on)\n");
    }
    printf("  longest wait        %lld ms (worker %d)\n", (long long)(longest_wait / NS_PER_MS),
           longest_worker);
    printf("  longest hold        %lld ms\n", (long long)(longest_hold / NS_PER_MS));
    printf("  workers that gave up after --wait: %d; no quorum: %d; lost: %d; other errors: %d\n",
           d->gave_up, d->no_quorum, d->lost, d->failed);
    if (d->failed || d->lost || d->no_quorum)
        print_worker_errors(d);
    printf("  incomplete sections %zu\n", incomplete);
    printf("  overlapping pairs   %zu", overlaps);
    if (min_gap != INT64_MAX)
        printf(" (smallest gap between two sections: %.3f ms)", (double)min_gap / 1e6);
    printf("\n  shared counter      %lld after %zu increments%s\n", counter, complete,
           counter == (long long)complete ? " (no lost update)" : " (LOST UPDATES)");
    if (beyond_validity)
        printf("  sections past their validity: %d\n", beyond_validity);
    if (ok)
        printf("PASS: no two of the %zu critical sections overlapped (CLOCK_MONOTONIC stamps).\n",
               complete);
    else if (complete == 0)
        printf("FAIL: no critical section completed.\n");
    else
        printf("FAIL: mutual exclusion was not shown (see above).\n");
    return ok ? 0 : 1;
}
