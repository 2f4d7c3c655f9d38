/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * safety_worker: one contending process of the safety harness.
 *
 * It takes fencing locks on a 5-node rig through the public API only (or,
 * with --kind read|write|mixed, read and write holds of read-write locks;
 * with --kind fair, fair locks; with --permits K, permits of semaphores of
 * K: worker_kinds.c) and
 * records, on CLOCK_MONOTONIC (shared by every process on the machine),
 * everything the checker needs to judge mutual exclusion afterwards (its
 * nodes may also be Sentinel-managed groups, redis-sentinel:// URIs, each
 * grant acknowledged by --replica-acks replicas):
 *
 *   F worker name ab ae wait_ms rc want [kind]     a failed acquire call
 *   H worker name seq mode ab ae token vend rb re unlock_rc lost_ns
 *     lost_reason writes members want              one hold (members: what
 *                                                  each member answered to
 *                                                  the acquire / the release)
 *     [acks]                                       acks: replicas that
 *                                                  acknowledged each member's
 *                                                  grant, e.g. "1,1,-" (only
 *                                                  with --replica-acks; "-":
 *                                                  none reported)
 *     [kind]                                       R read hold, W write hold,
 *                                                  F a fair lock's hold,
 *                                                  P<K> a permit of K (absent:
 *                                                  the plain lock)
 *   A worker name want t                           still wanting name when
 *                                                  the run ended (--stick)
 *   W worker name seq wb we token rc in_validity   one fenced write
 *   R worker t rss_kb fds cycles                   resource sample
 *   S worker cycles attempts acquired lost asan    totals at exit
 *   E worker t message                             an unexpected error
 *
 * ab/ae: before/after the acquire call; vend: the latest end of validity
 * the worker itself confirmed while holding (its "claimed" validity); rb/re:
 * before/after unlock. A hold's critical section is [ae, min(rb, vend)].
 * want: when this worker began wanting the name, i.e. the ab of the first
 * of its consecutive attempts on that name (ab itself when the attempt
 * before was on another name or succeeded). The checker measures lockouts
 * from it. It was added last on its lines, so records without it (older
 * logs) still read, with want = ab. kind is last for the same reason, and
 * is given only for holds other than the plain lock's, whose lines thus
 * stay as they were. Read holds and permits have no fencing token (0) and
 * make no writes.
 *
 * Roles:
 *   contend  loop until the duration ends: random name, random wait, hold
 *            for a random time, fenced writes while the hold is valid; with
 *            --stick, a failed attempt is followed by another on the same
 *            name (the worker keeps wanting it) instead of a random one;
 *   victim   take one name, signal readiness through --ready-file, keep
 *            writing every step until --stop-file exists or the hold time
 *            ends; with --unchecked it writes without checking validity
 *            first, like a process paused between its check and its write;
 *   probe    one acquire of one name, one write, a short hold, release.
 *
 * `safety_worker --now` prints CLOCK_MONOTONIC in ns, for the driver's own
 * records of when it injected faults.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "worker.h"

#if defined(__SANITIZE_ADDRESS__)
#define BUILT_WITH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BUILT_WITH_ASAN 1
#endif
#endif
#ifndef BUILT_WITH_ASAN
#define BUILT_WITH_ASAN 0
#endif

static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
    (void)sig;
    stop_requested = 1;
}

int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * NS_PER_MS;
    /* A signal (SIGTERM, or SIGCONT after a pause) ends the sleep early,
     * which only shortens a hold. */
    nanosleep(&ts, NULL);
}

static int64_t rand_between(worker *w, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(rand_r(&w->rng) % (unsigned)(hi - lo + 1));
}

static int file_exists(const char *path)
{
    return path && access(path, F_OK) == 0;
}

void record_error(worker *w, const char *what, int rc)
{
    fprintf(w->log, "E %d %lld %s:%s:%s\n", w->cfg.id, (long long)now_ns(), what,
            redlock_err_name(rc), redlock_last_error());
}

static int64_t resident_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;

    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream itself */
}

static void maybe_sample(worker *w)
{
    int64_t t = now_ns();

    if (t < w->next_sample_ns)
        return;
    w->next_sample_ns = t + w->cfg.sample_ms * NS_PER_MS;
    fprintf(w->log, "R %d %lld %lld %d %lld\n", w->cfg.id, (long long)t,
            (long long)resident_kb(), open_fds(), (long long)w->cycles);
}

static void fenced_write(worker *w, slot *s, int64_t seq, int k, uint64_t token,
                         int64_t vend)
{
    char value[96];
    int64_t wb, we;
    int rc, len;

    len = snprintf(value, sizeof(value), "%d:%lld:%d:%llu", w->cfg.id, (long long)seq, k,
                   (unsigned long long)token);
    wb = now_ns();
    rc = redlock_fenced_set(w->storage, 0, s->resource, value, (size_t)len, token);
    we = now_ns();
    if (rc != REDLOCK_OK && rc != REDLOCK_ESTALE_TOKEN)
        record_error(w, "fenced_set", rc);
    fprintf(w->log, "W %d %s %lld %lld %lld %llu %s %d\n", w->cfg.id, s->name, (long long)seq,
            (long long)wb, (long long)we, (unsigned long long)token, redlock_err_name(rc),
            wb < vend);
}

/* What the next hold is: the worker's --kind (a random side each time for
 * "mixed", a fair lock's hold for "fair"), a permit for --permits, the
 * plain lock otherwise. */
static hold_kind next_kind(worker *w)
{
    if (w->cfg.permits > 0)
        return KIND_PERMIT;
    if (w->cfg.fair)
        return KIND_FAIR;
    switch (w->cfg.rw) {
    case RW_READ: return KIND_READ;
    case RW_WRITE: return KIND_WRITE;
    case RW_MIXED: return rand_between(w, 0, 1) ? KIND_WRITE : KIND_READ;
    default: return KIND_MUTEX;
    }
}

/* Results of an acquire that only say the lock was not to be had. */
static int expected_refusal(int rc)
{
    return rc == REDLOCK_EBUSY || rc == REDLOCK_ETIMEOUT || rc == REDLOCK_ENO_QUORUM ||
           rc == REDLOCK_EREPLICAS;
}

/* One acquire and, if it succeeds, one hold with its writes (fencing kinds
 * only) and release. Returns 1 if the lock was acquired. */
static int one_hold(worker *w, slot *s, int watchdog, int64_t wait_ms, int64_t hold_ms)
{
    int64_t ab, ae, rb, re, vend = 0, hold_until, seq = w->cycles, want;
    uint64_t token = 0;
    int rc, urc, writes = 0, fenced;
    char grants[72] = "-", released[72] = "-", acks[1040] = "-", kind[16];
    hold_kind k = next_kind(w);
    holding h;

    kind_tag(w, k, kind, sizeof(kind));
    atomic_store(&s->lost_ns, 0);
    atomic_store(&s->lost_reason, 0);
    w->attempts++;
    if (w->owner_per_hold)
        w->owner = ((uint64_t)1 << 62) | (uint64_t)w->attempts;
    ab = now_ns();
    want = w->wanting == s ? w->want_ns : ab;
    rc = hold_acquire(w, s, k, wait_ms, watchdog ? 0 : w->cfg.lease_ms, &h);
    ae = now_ns();
    if (rc != REDLOCK_OK) {
        if (!expected_refusal(rc))
            record_error(w, "acquire", rc);
        fprintf(w->log, "F %d %s %lld %lld %lld %s %lld%s%s\n", w->cfg.id, s->name,
                (long long)ab, (long long)ae, (long long)wait_ms, redlock_err_name(rc),
                (long long)want, *kind ? " " : "", kind);
        w->wanting = s;
        w->want_ns = want;
        w->last_fail_ns = ae;
        return 0;
    }
    w->wanting = NULL;
    w->acquired++;
    fenced = hold_fenced(&h);
    hold_grants(&h, grants, sizeof(grants), acks, sizeof(acks));
    if (fenced && (rc = hold_token(&h, &token)) != REDLOCK_OK)
        record_error(w, "token", rc);
    hold_confirm(w, &h, &vend);
    hold_until = ae + hold_ms * NS_PER_MS;
    for (;;) {
        int64_t t;

        if (!w->cfg.unchecked && !hold_confirm(w, &h, &vend))
            break;
        if (fenced)
            fenced_write(w, s, seq, writes++, token, vend);
        if (w->cfg.unchecked)
            hold_confirm(w, &h, &vend);
        /* An unchecked victim models a process that acts before it looks:
         * it keeps writing after the loss until told to stop. */
        if ((atomic_load(&s->lost_ns) != 0 && !w->cfg.unchecked) || stop_requested)
            break;
        if (w->cfg.role == ROLE_VICTIM && file_exists(w->cfg.stop_file))
            break;
        if (w->cfg.role == ROLE_VICTIM && writes == 1 && w->cfg.ready_file) {
            FILE *f = fopen(w->cfg.ready_file, "w");

            if (f) {
                fprintf(f, "%llu\n", (unsigned long long)token);
                fclose(f);
            }
        }
        t = now_ns();
        if (t >= hold_until)
            break;
        sleep_ms((hold_until - t) / NS_PER_MS < w->cfg.step_ms ? (hold_until - t) / NS_PER_MS + 1
                                                                 : w->cfg.step_ms);
    }
    rb = now_ns();
    urc = hold_release(&h, released, sizeof(released));
    re = now_ns();
    if (urc != REDLOCK_OK && urc != REDLOCK_ELOST)
        record_error(w, "unlock", urc);
    if (atomic_load(&s->lost_ns) != 0 || urc == REDLOCK_ELOST)
        w->lost++;
    fprintf(w->log, "H %d %s %lld %s %lld %lld %llu %lld %lld %lld %s %lld %s %d %s/%s %lld%s%s%s%s\n",
            w->cfg.id, s->name, (long long)seq, watchdog ? "watchdog" : "lease", (long long)ab,
            (long long)ae, (unsigned long long)token, (long long)vend, (long long)rb,
            (long long)re, redlock_err_name(urc), (long long)atomic_load(&s->lost_ns),
            redlock_err_name(atomic_load(&s->lost_reason)), writes, grants, released,
            (long long)want, w->cfg.replica_acks >= 0 ? " " : "",
            w->cfg.replica_acks >= 0 ? acks : "", *kind ? " " : "", kind);
    return 1;
}

static int run(worker *w)
{
    const config *c = &w->cfg;
    int64_t start = now_ns(), end = start + c->duration_ms * NS_PER_MS;

    maybe_sample(w);
    if (c->role == ROLE_VICTIM || c->role == ROLE_PROBE) {
        /* One hold of the first name, waiting for it up to wait_max_ms. */
        int watchdog = c->mode == MODE_WATCHDOG;
        int64_t hold = c->role == ROLE_VICTIM ? c->duration_ms : c->hold_max_ms;

        one_hold(w, &w->slots[0], watchdog, c->wait_max_ms, hold);
        w->cycles++;
        maybe_sample(w);
        return 0;
    }
    while (!stop_requested && now_ns() < end && (c->max_cycles <= 0 || w->cycles < c->max_cycles)) {
        slot *s = c->stick && w->wanting ? w->wanting
                                          : &w->slots[rand_between(w, 0, (int64_t)w->n_slots - 1)];
        int watchdog = c->mode == MODE_WATCHDOG || (c->mode == MODE_MIXED && rand_between(w, 0, 1));
        int64_t wait = rand_between(w, 0, c->wait_max_ms);
        int64_t left = (end - now_ns()) / NS_PER_MS;
        int64_t hold = rand_between(w, c->hold_min_ms, c->hold_max_ms);

        /* Some holds outlive several watchdog renewals, so that faults hit
         * holders and not only waiters. */
        if (c->long_hold_ms > 0 && rand_between(w, 0, 7) == 0)
            hold = rand_between(w, c->long_hold_ms / 2, c->long_hold_ms);

        if (wait > left)
            wait = left > 0 ? left : 0;
        if (!one_hold(w, s, watchdog, wait, hold))
            sleep_ms(rand_between(w, 1, c->step_ms));
        w->cycles++;
        maybe_sample(w);
    }
    /* Cut off by the end of the run, not given up: the checker counts the
     * wait up to the last attempt's return. */
    if (c->stick && w->wanting)
        fprintf(w->log, "A %d %s %lld %lld\n", c->id, w->wanting->name, (long long)w->want_ns,
                (long long)w->last_fail_ns);
    w->next_sample_ns = 0;
    maybe_sample(w);
    return 0;
}

/* Whether s starts with a URI scheme and "://" (letters, digits, '+', '-',
 * '.'), as a redis-sentinel:// entry does. */
static int starts_with_scheme(const char *s)
{
    size_t i = 0;

    while ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
           (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '-' || s[i] == '.')
        i++;
    return i > 0 && strncmp(s + i, "://", 3) == 0;
}

/* Splits a node list as the library's REDLOCK_NODES rule does: only at a
 * ',' followed by a scheme, since a sentinel URI has commas of its own. */
static size_t split_uris(char *s, char **out, size_t cap)
{
    size_t n = 0;
    char *p;

    if (!*s)
        return 0;
    out[n++] = s;
    for (p = s; *p && n < cap; p++)
        if (*p == ',' && starts_with_scheme(p + 1)) {
            *p = '\0';
            out[n++] = p + 1;
        }
    return n;
}

static size_t split(char *s, char **out, size_t cap)
{
    size_t n = 0;
    char *save = NULL, *tok;

    for (tok = strtok_r(s, ",", &save); tok && n < cap; tok = strtok_r(NULL, ",", &save))
        out[n++] = tok;
    return n;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: safety_worker --uris U1,U2,... --storage URI --names a,b --out FILE --id N\n"
            "         [--role contend|victim|probe] [--mode lease|watchdog|mixed]\n"
            "         [--duration-ms D] [--max-cycles N] [--lease-ms L] [--watchdog-lease-ms L]\n"
            "         [--node-timeout-ms T] [--hold-min-ms A] [--hold-max-ms B] [--wait-max-ms W]\n"
            "         [--long-hold-ms H] [--step-ms S] [--sample-ms S] [--ready-file F]\n"
            "         [--stop-file F] [--unchecked] [--stick]\n"
            "         [--replica-acks K] [--replica-timeout-ms T]\n"
            "         [--kind read|write|mixed|fair | --permits K]\n"
            "       safety_worker --now\n");
}

static int parse_args(config *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"uris", 1, 0, 'u'},           {"storage", 1, 0, 's'},    {"names", 1, 0, 'n'},
        {"out", 1, 0, 'o'},            {"id", 1, 0, 'i'},         {"role", 1, 0, 'r'},
        {"mode", 1, 0, 'm'},           {"duration-ms", 1, 0, 'd'}, {"max-cycles", 1, 0, 'c'},
        {"lease-ms", 1, 0, 'l'},       {"watchdog-lease-ms", 1, 0, 'L'},
        {"node-timeout-ms", 1, 0, 't'}, {"hold-min-ms", 1, 0, 'a'}, {"hold-max-ms", 1, 0, 'b'},
        {"wait-max-ms", 1, 0, 'w'},    {"step-ms", 1, 0, 'p'},    {"sample-ms", 1, 0, 'S'},
        {"long-hold-ms", 1, 0, 'g'},
        {"ready-file", 1, 0, 'R'},     {"stop-file", 1, 0, 'T'},  {"unchecked", 0, 0, 'U'},
        {"stick", 0, 0, 'K'},
        {"replica-acks", 1, 0, 'A'},   {"replica-timeout-ms", 1, 0, 'W'},
        {"kind", 1, 0, 'k'},           {"permits", 1, 0, 'P'},
        {0, 0, 0, 0}};
    int o;

    *c = (config){.role = ROLE_CONTEND, .mode = MODE_MIXED, .duration_ms = 10000,
                  .lease_ms = 2000, .watchdog_lease_ms = 1500, .node_timeout_ms = 100,
                  .hold_min_ms = 5, .hold_max_ms = 200, .wait_max_ms = 500, .step_ms = 20,
                  .sample_ms = 1000, .replica_acks = -1};
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'u': c->uris = optarg; break;
        case 's': c->storage = optarg; break;
        case 'n': c->names = optarg; break;
        case 'o': c->out = optarg; break;
        case 'i': c->id = atoi(optarg); break;
        case 'r':
            c->role = !strcmp(optarg, "victim") ? ROLE_VICTIM
                      : !strcmp(optarg, "probe") ? ROLE_PROBE
                      : !strcmp(optarg, "contend") ? ROLE_CONTEND : (worker_role)-1;
            break;
        case 'm':
            c->mode = !strcmp(optarg, "lease") ? MODE_LEASE
                      : !strcmp(optarg, "watchdog") ? MODE_WATCHDOG
                      : !strcmp(optarg, "mixed") ? MODE_MIXED : (lease_mode)-1;
            break;
        case 'd': c->duration_ms = atoll(optarg); break;
        case 'c': c->max_cycles = atoll(optarg); break;
        case 'l': c->lease_ms = atoll(optarg); break;
        case 'L': c->watchdog_lease_ms = atoi(optarg); break;
        case 't': c->node_timeout_ms = atoi(optarg); break;
        case 'a': c->hold_min_ms = atoll(optarg); break;
        case 'b': c->hold_max_ms = atoll(optarg); break;
        case 'w': c->wait_max_ms = atoll(optarg); break;
        case 'p': c->step_ms = atoll(optarg); break;
        case 'S': c->sample_ms = atoll(optarg); break;
        case 'g': c->long_hold_ms = atoll(optarg); break;
        case 'R': c->ready_file = optarg; break;
        case 'T': c->stop_file = optarg; break;
        case 'U': c->unchecked = 1; break;
        case 'K': c->stick = 1; break;
        case 'A': c->replica_acks = atoi(optarg); break;
        case 'W': c->replica_timeout_ms = atoi(optarg); break;
        case 'k':
            c->fair = !strcmp(optarg, "fair");
            c->rw = c->fair ? RW_NONE
                    : !strcmp(optarg, "read") ? RW_READ
                    : !strcmp(optarg, "write") ? RW_WRITE
                    : !strcmp(optarg, "mixed") ? RW_MIXED : (rw_choice)-1;
            break;
        case 'P': c->permits = atoi(optarg); break;
        default: return -1;
        }
    }
    if (!c->uris || !c->storage || !c->names || !c->out || (int)c->role < 0 ||
        (int)c->mode < 0 || c->lease_ms <= 0 || c->step_ms <= 0 || c->sample_ms <= 0 ||
        c->hold_max_ms < c->hold_min_ms || c->wait_max_ms < 0 || c->duration_ms < 0 ||
        c->replica_acks < -1 || c->replica_timeout_ms < 0 || (int)c->rw < 0 ||
        c->permits < 0 || (c->permits > 0 && (c->rw != RW_NONE || c->fair)))
        return -1;
    return 0;
}

static int setup(worker *w, char *uris_buf, char *names_buf)
{
    const config *c = &w->cfg;
    char *uris[64], *names[MAX_NAMES];
    size_t n_uris = split_uris(uris_buf, uris, 64), i;
    redlock_options o = {0}, so = {0};
    redlock_lock_options lo = {0};
    int rc;

    w->n_slots = split(names_buf, names, MAX_NAMES);
    if (n_uris == 0 || w->n_slots == 0) {
        fprintf(stderr, "safety_worker: no nodes or no names\n");
        return -1;
    }
    o.node_timeout_ms = c->node_timeout_ms;
    o.watchdog_lease_ms = c->watchdog_lease_ms;
    if ((rc = redlock_client_new(&w->client, (const char *const *)uris, n_uris, &o)) ||
        (rc = redlock_client_new(&w->storage, &c->storage, 1, &so))) {
        fprintf(stderr, "safety_worker: client: %s: %s\n", redlock_err_name(rc),
                redlock_last_error());
        return -1;
    }
    lo.fencing = 1;
    if (c->replica_acks >= 0) {
        lo.replica_acks = c->replica_acks;
        lo.replica_timeout_ms = c->replica_timeout_ms;
    }
    for (i = 0; i < w->n_slots; i++) {
        slot *s = &w->slots[i];

        snprintf(s->name, sizeof(s->name), "%s", names[i]);
        snprintf(s->resource, sizeof(s->resource), "res:{%s}", names[i]);
        if (slot_open(w, s, &lo) != 0)
            return -1;
    }
    w->owner = redlock_thread_owner();
    w->owner_per_hold = getenv("REDLOCK_SAFETY_OWNER_PER_HOLD") &&
                        strcmp(getenv("REDLOCK_SAFETY_OWNER_PER_HOLD"), "1") == 0;
    return 0;
}

static void teardown(worker *w)
{
    size_t i;

    for (i = 0; i < w->n_slots; i++)
        slot_close(&w->slots[i]);
    redlock_client_free(w->storage);
    redlock_client_free(w->client);
}

int main(int argc, char **argv)
{
    static worker w;
    char *uris_buf = NULL, *names_buf = NULL;
    struct sigaction sa;
    int rc = 1;

    if (argc == 2 && !strcmp(argv[1], "--now")) {
        printf("%lld\n", (long long)now_ns());
        return 0;
    }
    if (parse_args(&w.cfg, argc, argv) != 0) {
        usage();
        return 64;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    w.rng = (unsigned)(now_ns() ^ ((int64_t)getpid() << 16) ^ w.cfg.id);
    if (!(w.log = fopen(w.cfg.out, "a"))) {
        fprintf(stderr, "safety_worker: %s: %s\n", w.cfg.out, strerror(errno));
        return 1;
    }
    setvbuf(w.log, NULL, _IOLBF, 0);
    uris_buf = strdup(w.cfg.uris);
    names_buf = strdup(w.cfg.names);
    if (uris_buf && names_buf && setup(&w, uris_buf, names_buf) == 0)
        rc = run(&w);
    teardown(&w);
    fprintf(w.log, "S %d %lld %lld %lld %lld %d\n", w.cfg.id, (long long)w.cycles,
            (long long)w.attempts, (long long)w.acquired, (long long)w.lost, BUILT_WITH_ASAN);
    fclose(w.log);
    free(uris_buf);
    free(names_buf);
    return rc;
}
