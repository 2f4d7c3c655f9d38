/* SPDX-License-Identifier: BSD-3-Clause */
#include "rig_env.h"

#include <check.h>

#include "redlock/redlock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define MAX_KEYS 64

static char keys[MAX_KEYS][64];
static char values[MAX_KEYS][512];
static int loaded = -1;

/* Copies src into dst, cutting it to fit: over-long lines are not ours. */
static void copy_field(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);

    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void load(void)
{
    const char *path = getenv("REDLOCK_TEST_RIG");
    char line[640];
    FILE *f;

    if (loaded >= 0)
        return;
    loaded = 0;
    if (!path || !(f = fopen(path, "r"))) {
        fprintf(stderr, "rig_env: cannot read REDLOCK_TEST_RIG=%s (is redis-server installed "
                        "and did the rig_setup fixture run?)\n", path ? path : "(unset)");
        exit(2);
    }
    while (fgets(line, sizeof(line), f) && loaded < MAX_KEYS) {
        char *eq = strchr(line, '=');

        if (!eq)
            continue;
        *eq = '\0';
        line[strcspn(line, "\r")] = '\0';
        eq[1 + strcspn(eq + 1, "\r\n")] = '\0';
        copy_field(keys[loaded], sizeof(keys[0]), line);
        copy_field(values[loaded], sizeof(values[0]), eq + 1);
        loaded++;
    }
    fclose(f);
}

const char *rig_get(const char *key)
{
    int i;

    load();
    for (i = 0; i < loaded; i++)
        if (strcmp(keys[i], key) == 0)
            return values[i];
    fprintf(stderr, "rig_env: key %s missing from %s\n", key, getenv("REDLOCK_TEST_RIG"));
    exit(2);
}

int rig_get_int(const char *key)
{
    return atoi(rig_get(key));
}

const char *rig_plain_uri(size_t i)
{
    static char uris[16][64];

    snprintf(uris[i % 16], sizeof(uris[0]), "redis://127.0.0.1:%d",
             rig_get_int("PLAIN_BASE_PORT") + (int)i);
    return uris[i % 16];
}

const char *const *rig_plain_uris(void)
{
    static const char *list[16];
    size_t i, n = (size_t)rig_get_int("PLAIN_NODES");

    for (i = 0; i < n && i < 16; i++)
        list[i] = rig_plain_uri(i);
    return list;
}

int rig_node(const char *verb, size_t node)
{
    char cmd[1024];
    int rc;

    snprintf(cmd, sizeof(cmd), "'%s' %s %zu --dir '%s' >/dev/null", rig_get("RIG_SCRIPT"), verb,
             node + 1, rig_get("PLAIN_DIR"));
    rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

const char *rig_cli(size_t node, const char *args)
{
    static char out[4096];
    char cmd[2048];
    size_t n;
    FILE *p;

    snprintf(cmd, sizeof(cmd), "redis-cli -p %d %s", rig_get_int("PLAIN_BASE_PORT") + (int)node,
             args);
    out[0] = '\0';
    p = popen(cmd, "r");
    if (!p)
        return out;
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    return out;
}

int64_t rig_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t rig_now_ms(void)
{
    return rig_now_us() / 1000;
}

void rig_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void rig_unique_name(char *buf, size_t cap, const char *prefix, const char *tag)
{
    static unsigned seq;

    snprintf(buf, cap, "%s:%s:%ld:%u", prefix, tag, (long)getpid(), ++seq);
}

/* Reads at most cap - 1 bytes of path into buf, NUL-terminated; the
 * length, or -1 when it cannot be opened. */
static long read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return -1;
    n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* Node i's redis-server pid if it is the rig's own, alive and not a
 * zombie; else 0. As scripts/rig's live_pid: the pid comes from the
 * node's pid file and must still name our port, so no other process is
 * ever signalled. */
static pid_t live_node_pid(size_t i)
{
    char path[640], buf[2048], want[32];
    const char *prog, *port;
    long pid, n, k;

    snprintf(path, sizeof(path), "%s/node%zu/redis.pid", rig_get("PLAIN_DIR"), i + 1);
    if (read_small(path, buf, sizeof(buf)) <= 0 || (pid = atol(buf)) <= 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
    if ((n = read_small(path, buf, sizeof(buf))) <= 0)
        return 0;
    for (k = 0; k < n; k++)
        if (buf[k] == '\0')
            buf[k] = ' ';
    /* "redis-server.*:PORT( |$)", as the script's grep. */
    snprintf(want, sizeof(want), ":%d", rig_get_int("PLAIN_BASE_PORT") + (int)i);
    if (!(prog = strstr(buf, "redis-server")))
        return 0;
    for (port = strstr(prog, want); port; port = strstr(port + 1, want))
        if (port[strlen(want)] == ' ' || port[strlen(want)] == '\0')
            break;
    if (!port)
        return 0;
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    if (read_small(path, buf, sizeof(buf)) <= 0 || strstr(buf, "\nState:\tZ"))
        return 0;
    return (pid_t)pid;
}

/* Runs before and after every case, so it signals live nodes itself
 * rather than through scripts/rig (two shell runs per node): only a dead
 * node needs the script, to restart it. */
void rig_heal(size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        pid_t pid = live_node_pid(i);

        if (pid == 0 || kill(pid, SIGCONT) != 0)
            rig_node("restart", i);
    }
}

void rig_heal_all(void)
{
    rig_heal((size_t)rig_get_int("PLAIN_NODES"));
}

const char *rig_acl_uri(const char *user, const char *pass)
{
    static char buf[256];

    snprintf(buf, sizeof(buf), "redis://%s:%s@127.0.0.1:%d", user, pass,
             rig_get_int("PLAIN_BASE_PORT"));
    return buf;
}

void rig_field_of(redlock_client *c, uint64_t owner, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s:%llu", redlock_client_id(c), (unsigned long long)owner);
}

redlock_stats rig_stats(redlock_client *c)
{
    redlock_stats s;

    ck_assert_int_eq(redlock_client_stats(c, &s), REDLOCK_OK);
    return s;
}
