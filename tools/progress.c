/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The progress line of redlock exec: while the acquire call blocks the
 * main thread, a small thread shows how long it has been waiting - on a
 * terminal only, and only after a second, so scripts and quick
 * acquisitions see nothing.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void *progress_main(void *arg)
{
    static const char spin[] = "|/-\\";
    cli_progress *p = arg;
    struct timespec until;
    unsigned n = 0;

    pthread_mutex_lock(&p->mu);
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 1;
    while (!p->done) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0 && !p->done) {
            double waited = (double)(cli_now_ns() - p->start_ns) / 1e9;

            if (p->unreachable > 0)
                fprintf(stderr, "\r%c waiting: %d of %zu nodes unreachable (%s '%s', %.0f s)\033[K",
                        spin[n++ % 4], p->unreachable, p->members, p->what, p->name, waited);
            else
                fprintf(stderr, "\r%c waiting for %s '%s' (%.0f s)\033[K", spin[n++ % 4],
                        p->what, p->name, waited);
            fflush(stderr);
            p->shown = 1;
            until.tv_nsec += 250000000;
            if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
            }
        }
    }
    if (p->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void cli_progress_start(cli_progress *p, const char *what, const char *name, size_t members)
{
    pthread_condattr_t ca;

    memset(p, 0, sizeof(*p));
    if (!isatty(STDOUT_FILENO) || !isatty(STDERR_FILENO))
        return;
    p->what = what;
    cli_escape(name, p->name, sizeof(p->name));
    p->members = members;
    p->start_ns = cli_now_ns();
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    p->running = pthread_create(&p->thread, NULL, progress_main, p) == 0;
    if (!p->running) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
    }
}

/* Clears the line and keeps it clear until cli_progress_resume(), so that
 * messages printed in between start on a line of their own. */
void cli_progress_pause(cli_progress *p)
{
    if (!p->running)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->shown) {
        fputs("\r\033[K", stderr);
        p->shown = 0;
    }
}

void cli_progress_resume(cli_progress *p, int unreachable)
{
    if (!p->running)
        return;
    p->unreachable = unreachable;
    pthread_mutex_unlock(&p->mu);
}

void cli_progress_stop(cli_progress *p)
{
    if (!p->running)
        return;
    pthread_mutex_lock(&p->mu);
    p->done = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    p->running = 0;
}
