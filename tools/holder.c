/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Who holds a lock, for people: the command line redlock exec records as
 * its holder facts, and how redlock status shows those facts and how many
 * more node failures the lock can take.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"

void cli_exec_command_line(const cli_exec_opts *o, char *buf, size_t cap)
{
    size_t len = 0, n;
    char **arg;

    if (cap == 0)
        return;
    buf[0] = '\0';
    /* -c STRING: the string is the command; "/bin/sh -c" says nothing. */
    if (o->command) {
        snprintf(buf, cap, "%s", o->command);
        return;
    }
    for (arg = o->cmd; arg && *arg && len + 1 < cap; arg++) {
        n = (size_t)snprintf(buf + len, cap - len, "%s%s", arg == o->cmd ? "" : " ", *arg);
        len = n < cap - len ? len + n : cap - 1;
    }
}

/* "2026-01-31 12:00:05 +0100 (42s ago)": local time, for the operator
 * reading it on this machine. */
static void format_since(int64_t since_ms, char *buf, size_t cap)
{
    struct timespec now;
    struct tm tm;
    time_t t = (time_t)(since_ms / 1000);
    char when[64] = "?";
    int64_t ago;

    clock_gettime(CLOCK_REALTIME, &now);
    ago = (int64_t)now.tv_sec - since_ms / 1000;
    if (localtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %z", &tm);
    if (ago >= 0)
        snprintf(buf, cap, "%s (%llds ago)", when, (long long)ago);
    else /* the holder's clock is ahead of ours */
        snprintf(buf, cap, "%s (%llds from now)", when, (long long)-ago);
}

void cli_holder_text(const redlock_holder_facts *f)
{
    char host[4 * sizeof(f->host)], command[4 * sizeof(f->command)], since[128];

    if (!f || !f->found)
        return;
    /* The facts come from the servers: escaped like every holder field. */
    printf("holder host:    %s\n", cli_escape(f->host, host, sizeof(host)));
    printf("holder pid:     %lld\n", (long long)f->pid);
    printf("holder command: %s\n", cli_escape(f->command, command, sizeof(command)));
    format_since(f->since_ms, since, sizeof(since));
    printf("held since:     %s\n", since);
}

void cli_holder_json(const redlock_holder_facts *f)
{
    if (!f || !f->found) {
        printf(",\"host\":null,\"pid\":null,\"command\":null,\"since_ms\":null");
        return;
    }
    printf(",\"host\":");
    cli_json_string(f->host);
    printf(",\"pid\":%lld,\"command\":", (long long)f->pid);
    cli_json_string(f->command);
    printf(",\"since_ms\":%lld", (long long)f->since_ms);
}

void cli_margin_text(size_t reachable, size_t n, int quorum, const char *what)
{
    const char *nodes = n == 1 ? "node" : "nodes";
    size_t q = (size_t)quorum;

    printf("%zu of %zu %s answer: ", reachable, n, nodes);
    if (reachable < q)
        printf("no %s can be taken", what);
    else if (q == n && n > 1)
        printf("every node must answer (quorum is all %zu): one failure and no %s can "
               "be taken", n, what);
    else if (reachable == q)
        printf("one more failure and no %s can be taken", what);
    else
        printf("%zu more can fail", reachable - q);
    printf("\n");
}

int cli_shortfall_status(const int *errs, size_t n, int quorum)
{
    size_t perm = 0, config = 0, i;

    for (i = 0; i < n; i++) {
        perm += errs[i] == REDLOCK_EAUTH || errs[i] == REDLOCK_ETLS;
        config += errs[i] == REDLOCK_ECONFIG;
    }
    /* Counted together, as the library counts refusals for good; the
     * credentials are named first. */
    if ((int)(n - perm - config) < quorum)
        return perm ? CLI_EX_NOPERM : CLI_EX_CONFIG;
    return CLI_EX_NOQUORUM;
}
