/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration tests of read-write locks (redlock_lock_options.kind READ and
 * WRITE) on the fixture's plain redis-server processes: shared read holds
 * and exclusive write holds at N = 1 and N = 5, re-entry and what it
 * stores (Redisson's hash, mode field and rwlock_timeout keys), the
 * refused upgrade, a writer under a continuous stream of readers, plain
 * locks of the same name, watchdog leases and loss, and a failed quorum
 * that must leave nothing behind. Redisson's own scripts run against our
 * holds and ours against theirs are in test_rwlock_redisson.c.
 *
 * Owners are explicit (redlock_acquire_as), one handle per owner, so one
 * thread can play several readers. Each case is its own TCase whose
 * unchecked fixture thaws and restarts nodes, so a failed case never
 * leaves a frozen node behind.
 */
#include "redlock/redlock.h"
#include "rig_env.h"
#include "rw_support.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* 1. Readers share, writers exclude (N = 1 and N = 5). */

static void readers_overlap(size_t n)
{
    redlock_client *c = client_over(n);
    char name[64], f1[FIELD_CAP], f2[FIELD_CAP], fw[FIELD_CAP], a[ARGS_CAP];
    redlock_lock *r1, *r2, *w1, *w2;
    size_t quorum = n / 2 + 1;

    rig_unique_name(name, sizeof(name), "rw", n == 1 ? "share1" : "share5");
    r1 = handle(c, name, REDLOCK_LOCK_READ);
    r2 = handle(c, name, REDLOCK_LOCK_READ);
    w1 = handle(c, name, REDLOCK_LOCK_WRITE);
    w2 = handle(c, name, REDLOCK_LOCK_WRITE);
    rig_field_of(c, R1, f1, sizeof(f1));
    rig_field_of(c, R2, f2, sizeof(f2));
    rig_field_of(c, W1, fw, sizeof(fw));
    strcat(fw, ":write");

    acquire_ok(r1, R1, 0, LEASE_MS);
    acquire_ok(r2, R2, 0, LEASE_MS);
    /* Both read holds at once, in Redisson's layout. */
    ck_assert_uint_ge(nodes_saying(n, n, "read", fmt_args(a, "HGET '%s' mode", name)), quorum);
    ck_assert_uint_ge(nodes_saying(n, n, "1", fmt_args(a, "HGET '%s' '%s'", name, f1)), quorum);
    ck_assert_uint_ge(nodes_saying(n, n, "1", fmt_args(a, "HGET '%s' '%s'", name, f2)), quorum);
    acquire_busy(w1, W1);
    unlock_ok(r1, R1);
    acquire_busy(w1, W1); /* one reader is enough to keep writers out */
    unlock_ok(r2, R2);
    acquire_ok(w1, W1, 0, LEASE_MS);
    ck_assert_uint_ge(nodes_saying(n, n, "write", fmt_args(a, "HGET '%s' mode", name)), quorum);
    ck_assert_uint_ge(nodes_saying(n, n, "1", fmt_args(a, "HGET '%s' '%s'", name, fw)), quorum);
    acquire_busy(r1, R1);
    acquire_busy(r2, R2);
    acquire_busy(w2, W2);
    unlock_ok(w1, W1);
    ck_assert_int_ge(wait_all_gone(n, name, 3000), 0);
    acquire_ok(w2, W2, 0, LEASE_MS); /* and the next writer gets it */
    unlock_ok(w2, W2);
    redlock_lock_free(r1);
    redlock_lock_free(r2);
    redlock_lock_free(w1);
    redlock_lock_free(w2);
    redlock_client_free(c);
}

START_TEST(test_readers_overlap_single)
{
    readers_overlap(1);
}
END_TEST

START_TEST(test_readers_overlap_quorum)
{
    readers_overlap(N_NODES);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 2. Re-entry: what each hold stores. */

START_TEST(test_reentry_layout)
{
    redlock_client *c = client_over(1);
    char name[64], fr[FIELD_CAP], fb[FIELD_CAP], fw[FIELD_CAP + 8], a[ARGS_CAP], k[ARGS_CAP];
    redlock_lock *r, *rb, *rd, *w, *wc;
    int i;

    rig_unique_name(name, sizeof(name), "rw", "reentry");
    r = handle(c, name, REDLOCK_LOCK_READ);
    rig_field_of(c, R1, fr, sizeof(fr));
    for (i = 0; i < 3; i++)
        acquire_ok(r, R1, 0, LEASE_MS);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, fr)), "3");
    /* One timeout key per hold, each with the hold's lease. */
    for (i = 1; i <= 3; i++) {
        long long pttl = atoll(rig_cli(0, fmt_args(a, "PTTL '%s'", timeout_key(k, name, fr, i))));

        ck_assert_msg(pttl > 0 && pttl <= LEASE_MS, "timeout key %d: PTTL %lld", i, pttl);
    }
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "EXISTS '%s'", timeout_key(k, name, fr, 4))), "0");
    /* Our bookkeeping field starts with a letter, so Redisson's tonumber()
     * over every field skips it. */
    ck_assert_int_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s:gen'", name, fr))[0], 'g');
    unlock_ok(r, R1);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, fr)), "2");
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "EXISTS '%s'", timeout_key(k, name, fr, 3))), "0");
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "EXISTS '%s'", timeout_key(k, name, fr, 2))), "1");
    unlock_ok(r, R1);
    unlock_ok(r, R1);
    ck_assert_int_ge(wait_all_gone(1, name, 0), 0);
    ck_assert_int_eq(redlock_unlock_as(r, R1), REDLOCK_ENOT_OWNER);

    /* Write re-entry, and the writer's own read holds under it. */
    w = handle(c, name, REDLOCK_LOCK_WRITE);
    rb = handle(c, name, REDLOCK_LOCK_READ);
    rd = handle(c, name, REDLOCK_LOCK_READ);
    wc = handle(c, name, REDLOCK_LOCK_WRITE);
    rig_field_of(c, W1, fb, sizeof(fb));
    snprintf(fw, sizeof(fw), "%s:write", fb);
    acquire_ok(w, W1, 0, LEASE_MS);
    acquire_ok(w, W1, 0, LEASE_MS);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, fw)), "2");
    acquire_ok(rb, W1, 0, LEASE_MS);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' mode", name)), "write");
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, fb)), "1");
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "EXISTS '%s'", timeout_key(k, name, fb, 1))), "1");
    acquire_busy(rd, R2); /* other readers stay out while it writes */
    unlock_ok(w, W1);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, fw)), "1");
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' mode", name)), "write");
    unlock_ok(w, W1);
    /* The write hold is gone; its read hold keeps the key, now in read mode. */
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' mode", name)), "read");
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HEXISTS '%s' '%s'", name, fw)), "0");
    ck_assert_int_gt(atoll(rig_cli(0, fmt_args(a, "PTTL '%s'", name))), 0);
    acquire_busy(wc, W2);
    acquire_ok(rd, R2, 0, LEASE_MS); /* read mode: other readers join */
    unlock_ok(rd, R2);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "EXISTS '%s'", name)), "1");
    unlock_ok(rb, W1);
    ck_assert_int_ge(wait_all_gone(1, name, 0), 0);
    redlock_lock_free(r);
    redlock_lock_free(rb);
    redlock_lock_free(rd);
    redlock_lock_free(w);
    redlock_lock_free(wc);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 3. A read hold is never upgraded: refused at once, nothing left. */

START_TEST(test_upgrade_refused)
{
    redlock_client *c = client_over(N_NODES);
    char name[64], f[FIELD_CAP], a[ARGS_CAP];
    redlock_lock *r, *w;
    int64_t t0, took;
    int rc;
    size_t i;

    rig_unique_name(name, sizeof(name), "rw", "upgrade");
    r = handle(c, name, REDLOCK_LOCK_READ);
    w = handle(c, name, REDLOCK_LOCK_WRITE);
    rig_field_of(c, R1, f, sizeof(f));
    acquire_ok(r, R1, 0, LEASE_MS);
    ck_assert_uint_eq(nodes_saying(N_NODES, N_NODES, "1",
                                   fmt_args(a, "HGET '%s' '%s'", name, f)), N_NODES);
    t0 = rig_now_ms();
    rc = redlock_acquire_as(w, R1, 2000, LEASE_MS);
    took = rig_now_ms() - t0;
    fprintf(stderr, "upgrade: %s in %lld ms (%s)\n", redlock_err_name(rc), (long long)took,
            redlock_last_error());
    ck_assert_msg(rc == REDLOCK_EUPGRADE, "upgrade gave %s: %s", redlock_err_name(rc),
                  redlock_last_error());
    ck_assert_msg(took < 1000, "the refusal took %lld ms of the 2000 ms wait", (long long)took);
    rig_sleep_ms(200); /* anything a straggler did would have landed */
    for (i = 0; i < N_NODES; i++) {
        ck_assert_str_eq(rig_cli(i, fmt_args(a, "HEXISTS '%s' '%s:write'", name, f)), "0");
        ck_assert_str_eq(rig_cli(i, fmt_args(a, "HEXISTS '%s' '%s:write:gen'", name, f)), "0");
        ck_assert_str_eq(rig_cli(i, fmt_args(a, "EXISTS 'redlock_rwwait:{%s}'", name)), "0");
        ck_assert_str_eq(rig_cli(i, fmt_args(a, "HGET '%s' mode", name)), "read");
        ck_assert_str_eq(rig_cli(i, fmt_args(a, "HGET '%s' '%s'", name, f)), "1");
    }
    /* The read hold is untouched, and once it is gone the write is granted. */
    unlock_ok(r, R1);
    ck_assert_int_ge(wait_all_gone(N_NODES, name, 3000), 0);
    acquire_ok(w, R1, 0, LEASE_MS);
    unlock_ok(w, R1);
    redlock_lock_free(r);
    redlock_lock_free(w);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 4. A writer is not starved by a continuous stream of readers. */

#define READERS 4
#define MAX_SPANS 4096
#define WRITER_ROUNDS 3
#define WRITER_BOUND_MS 5000

typedef struct span {
    int64_t call_us, acq_us, rel_us; /* acquire called, granted, release called */
} span;

typedef struct read_load {
    redlock_lock *handles[READERS];
    atomic_int stop;
    pthread_mutex_t mu;
    span spans[MAX_SPANS];
    size_t n;
    int failures;
} read_load;

typedef struct reader_arg {
    read_load *load;
    int idx;
} reader_arg;

static void *reader_main(void *arg)
{
    reader_arg *ra = arg;
    read_load *ld = ra->load;
    unsigned seed = 7919u * (unsigned)(ra->idx + 1);
    uint64_t owner = 1000 + (uint64_t)ra->idx;
    int i;

    for (i = 0; i < 2000 && !atomic_load(&ld->stop); i++) {
        span s;
        int ok;

        s.call_us = rig_now_us();
        /* "Forever", bounded: a writer holds for 100 ms at a time. */
        ok = redlock_acquire_as(ld->handles[ra->idx], owner, 15000, LEASE_MS) == REDLOCK_OK;
        if (ok) {
            s.acq_us = rig_now_us();
            rig_sleep_ms(30 + rand_r(&seed) % 51);
            s.rel_us = rig_now_us();
            ok = redlock_unlock_as(ld->handles[ra->idx], owner) == REDLOCK_OK;
        }
        pthread_mutex_lock(&ld->mu);
        if (!ok)
            ld->failures++;
        else if (ld->n < MAX_SPANS)
            ld->spans[ld->n++] = s;
        pthread_mutex_unlock(&ld->mu);
    }
    return NULL;
}

START_TEST(test_writer_not_starved)
{
    redlock_client *c = client_over(1);
    read_load *ld = calloc(1, sizeof(*ld));
    reader_arg args[READERS];
    pthread_t th[READERS];
    bg_acquire wr;
    span wspan[WRITER_ROUNDS];
    int64_t mark_us[WRITER_ROUNDS];
    char name[64], mark_key[128];
    redlock_lock *w;
    redisContext *ctx;
    struct timeval tv = {5, 0};
    int round, marks_seen = 0, i;
    size_t k, grants_in_wait, queued;

    ck_assert_ptr_nonnull(ld);
    rig_unique_name(name, sizeof(name), "rw", "starve");
    snprintf(mark_key, sizeof(mark_key), "redlock_rwwait:{%s}", name);
    ctx = redisConnectWithTimeout("127.0.0.1", rig_get_int("PLAIN_BASE_PORT"), tv);
    ck_assert_msg(ctx && !ctx->err, "connect: %s", ctx ? ctx->errstr : "?");
    pthread_mutex_init(&ld->mu, NULL);
    w = handle(c, name, REDLOCK_LOCK_WRITE);
    for (i = 0; i < READERS; i++) {
        ld->handles[i] = handle(c, name, REDLOCK_LOCK_READ);
        args[i] = (reader_arg){ld, i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader_main, &args[i]), 0);
    }
    for (round = 0; round < WRITER_ROUNDS; round++) {
        rig_sleep_ms(400); /* the readers' stream is under way again */
        bg_start(&wr, w, 2000, 15000);
        /* Watch for the waiting-writer mark its first refused attempt sets:
         * a reader that starts to acquire after the mark is on the node
         * must not be let in before the writer. (The writer's grant
         * deletes the mark; the wait is bounded by the writer's own.) */
        mark_us[round] = 0;
        while (!atomic_load(&wr.finished)) {
            redisReply *r = redisCommand(ctx, "EXISTS %s", mark_key);

            ck_assert_ptr_nonnull(r);
            if (r->type == REDIS_REPLY_INTEGER && r->integer == 1 && !mark_us[round])
                mark_us[round] = rig_now_us();
            freeReplyObject(r);
            rig_sleep_ms(1);
        }
        pthread_join(wr.th, NULL);
        ck_assert_msg(wr.rc == REDLOCK_OK, "writer round %d: %s: %s", round,
                      redlock_err_name(wr.rc), redlock_last_error());
        wspan[round] = (span){wr.started_us, wr.done_us, 0};
        rig_sleep_ms(100);
        wspan[round].rel_us = rig_now_us();
        unlock_ok(w, 2000);
        marks_seen += mark_us[round] != 0;
        fprintf(stderr, "writer round %d: waited %lld ms among readers (mark %s)\n", round,
                (long long)bg_took_ms(&wr), mark_us[round] ? "seen" : "not seen");
        ck_assert_msg(bg_took_ms(&wr) < WRITER_BOUND_MS, "writer round %d waited %lld ms",
                      round, (long long)bg_took_ms(&wr));
    }
    atomic_store(&ld->stop, 1);
    for (i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);

    ck_assert_int_eq(ld->failures, 0);
    ck_assert_msg(ld->n >= 40, "only %zu read holds: no continuous load", ld->n);
    /* The writer waited among readers at least once (its mark was seen). */
    ck_assert_int_ge(marks_seen, 1);
    for (round = 0; round < WRITER_ROUNDS; round++) {
        span *ws = &wspan[round];

        for (grants_in_wait = 0, queued = 0, k = 0; k < ld->n; k++) {
            span *s = &ld->spans[k];

            /* Exclusion: no read hold overlaps the write hold. */
            ck_assert_msg(!(s->acq_us < ws->rel_us && ws->acq_us < s->rel_us),
                          "round %d: a read hold [%lld, %lld] overlaps the write hold "
                          "[%lld, %lld]", round, (long long)s->acq_us, (long long)s->rel_us,
                          (long long)ws->acq_us, (long long)ws->rel_us);
            /* Readers arriving after the mark queue behind the writer. */
            if (mark_us[round] && s->call_us > mark_us[round] && s->call_us < ws->acq_us) {
                queued++;
                ck_assert_msg(s->acq_us > ws->rel_us,
                              "round %d: a reader that came %lld us after the writer's mark "
                              "was let in before the writer", round,
                              (long long)(s->call_us - mark_us[round]));
            }
            grants_in_wait += s->acq_us > ws->call_us && s->acq_us < ws->acq_us;
        }
        fprintf(stderr, "writer round %d: %zu read grants while it waited, %zu readers "
                        "arrived after its mark and queued behind it\n", round,
                grants_in_wait, queued);
    }
    redisFree(ctx);
    for (i = 0; i < READERS; i++)
        redlock_lock_free(ld->handles[i]);
    redlock_lock_free(w);
    pthread_mutex_destroy(&ld->mu);
    free(ld);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 5. A plain lock and a read-write lock of the same name. */

#define PLAIN 31

START_TEST(test_plain_and_rw_exclude)
{
    redlock_client *c = client_over(1);
    char name[64];
    redlock_lock *m, *r, *w;
    bg_acquire b;
    int64_t released_us;

    rig_unique_name(name, sizeof(name), "rw", "plain");
    m = handle(c, name, REDLOCK_LOCK_MUTEX);
    r = handle(c, name, REDLOCK_LOCK_READ);
    w = handle(c, name, REDLOCK_LOCK_WRITE);

    /* A plain hold keeps readers and writers out. */
    acquire_ok(m, PLAIN, 0, 20000);
    acquire_busy(r, R1);
    acquire_busy(w, W1);
    /* A waiting reader is woken by the plain release, long before the
     * plain hold's 20 s lease would end. */
    bg_start(&b, r, R1, 5000);
    rig_sleep_ms(200);
    ck_assert_int_eq(atomic_load(&b.finished), 0);
    released_us = rig_now_us();
    unlock_ok(m, PLAIN);
    pthread_join(b.th, NULL);
    fprintf(stderr, "reader woken %lld ms after the plain release\n",
            (long long)(b.done_us - released_us) / 1000);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiting reader: %s: %s", redlock_err_name(b.rc),
                  redlock_last_error());
    ck_assert_msg(bg_took_ms(&b) < 3000, "the reader waited %lld ms", (long long)bg_took_ms(&b));

    /* A read hold keeps plain lockers out. */
    acquire_busy(m, PLAIN);
    unlock_ok(r, R1);
    ck_assert_int_ge(wait_all_gone(1, name, 0), 0);

    /* A write hold keeps plain lockers out, and its release wakes them. */
    acquire_ok(w, W1, 0, 20000);
    acquire_busy(m, PLAIN);
    bg_start(&b, m, PLAIN, 5000);
    rig_sleep_ms(200);
    ck_assert_int_eq(atomic_load(&b.finished), 0);
    released_us = rig_now_us();
    unlock_ok(w, W1);
    pthread_join(b.th, NULL);
    fprintf(stderr, "plain waiter woken %lld ms after the write release\n",
            (long long)(b.done_us - released_us) / 1000);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiting plain locker: %s: %s", redlock_err_name(b.rc),
                  redlock_last_error());
    ck_assert_msg(bg_took_ms(&b) < 3000, "the plain locker waited %lld ms",
                  (long long)bg_took_ms(&b));
    unlock_ok(m, PLAIN);
    redlock_lock_free(m);
    redlock_lock_free(r);
    redlock_lock_free(w);
    redlock_client_free(c);
}
END_TEST

/*
 * The same owner on both sides: a reader's field and a plain hold's field
 * have the same name ("<client-id>:<owner>"), so a plain acquire by the
 * owner of a read hold must not take that field for a leftover of its own.
 *
 * KNOWN LIBRARY BUG (reported, not fixed here): acquire.lua's fresh-grant
 * path deletes the field and its :gen as a stale hold of the owner and
 * answers busy, leaving a hash with only "mode" = "read" until its PTTL
 * ends: the read hold is gone (its unlock returns REDLOCK_ELOST) while the
 * key keeps writers and plain lockers out. This case fails until it is
 * fixed.
 */
START_TEST(test_plain_same_owner_keeps_read_hold)
{
    redlock_client *c = client_over(1);
    char name[64], fr[FIELD_CAP], a[ARGS_CAP], k[ARGS_CAP];
    redlock_lock *m, *r, *r2;
    int64_t t0;

    rig_unique_name(name, sizeof(name), "rw", "same-owner");
    m = handle(c, name, REDLOCK_LOCK_MUTEX);
    r = handle(c, name, REDLOCK_LOCK_READ);
    r2 = handle(c, name, REDLOCK_LOCK_READ);
    rig_field_of(c, R1, fr, sizeof(fr));

    /* A plain hold's own owner is kept out as a reader (this side works). */
    acquire_ok(m, PLAIN, 0, 20000);
    acquire_busy(r, PLAIN);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' mode", name)), "");
    unlock_ok(m, PLAIN);
    ck_assert_int_ge(wait_all_gone(1, name, 0), 0);

    /* A reader's own owner is refused as a plain locker: REDLOCK_EUPGRADE
     * at once, even with a wait (it would wait for itself, and its
     * waiting-writer mark would keep every other reader out), and the hold
     * stays as it was. */
    acquire_ok(r, R1, 0, LEASE_MS);
    ck_assert_int_eq(redlock_acquire_as(m, R1, 0, LEASE_MS), REDLOCK_EUPGRADE);
    t0 = rig_now_ms();
    ck_assert_int_eq(redlock_acquire_as(m, R1, 2000, LEASE_MS), REDLOCK_EUPGRADE);
    ck_assert_msg(rig_now_ms() - t0 < 1000, "the refusal took %lld ms",
                  (long long)(rig_now_ms() - t0));
    acquire_ok(r2, R2, 0, LEASE_MS); /* no waiting-writer mark keeps readers out */
    unlock_ok(r2, R2);
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s'", name, fr)), "1");
    ck_assert_int_eq(rig_cli(0, fmt_args(a, "HGET '%s' '%s:gen'", name, fr))[0], 'g');
    ck_assert_str_eq(rig_cli(0, fmt_args(a, "EXISTS '%s'", timeout_key(k, name, fr, 1))), "1");
    unlock_ok(r, R1);
    ck_assert_int_ge(wait_all_gone(1, name, 0), 0);
    redlock_lock_free(m);
    redlock_lock_free(r);
    redlock_lock_free(r2);
    redlock_client_free(c);
}
END_TEST

/* Runs rw_abort.lua by hand on node i for the write hold there, as a
 * late abort of the attempt that made it would; returns its reply. */
static long long abort_write_hold(size_t i, const char *name)
{
    redisContext *ctx = node_conn(i);
    redisReply *keys, *gen, *r;
    char field[FIELD_CAP] = "", genf[FIELD_CAP + 8], id[64] = "", latch[160], chan[160],
         plain[160];
    size_t n, k;
    long long out;

    keys = redisCommand(ctx, "HKEYS %s", name);
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    for (k = 0; k < keys->elements; k++) {
        const char *fk = keys->element[k]->str;

        n = strlen(fk);
        if (n > 6 && strcmp(fk + n - 6, ":write") == 0)
            snprintf(field, sizeof(field), "%s", fk);
    }
    freeReplyObject(keys);
    ck_assert_msg(field[0], "no write hold on node %zu", i);
    snprintf(genf, sizeof(genf), "%s:gen", field);
    gen = redisCommand(ctx, "HGET %s %s", name, genf);
    ck_assert_int_eq(gen->type, REDIS_REPLY_STRING);
    /* "<one character><generation>[,<seq>]..." (rw_write_acquire.lua). */
    snprintf(id, sizeof(id), "%.*s", (int)strcspn(gen->str + 1, ","), gen->str + 1);
    freeReplyObject(gen);
    redisFree(ctx);
    snprintf(latch, sizeof(latch), "redlock_latch:{%s}:%s", name, id);
    snprintf(chan, sizeof(chan), "redisson_rwlock:{%s}", name);
    snprintf(plain, sizeof(plain), "redisson_lock__channel:{%s}", name);
    r = eval_file(i, "rw_abort.lua", 4, 7,
                  (const char *[]){name, chan, latch, plain, "0", "10000", field});
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "rw_abort on node %zu: %s", i,
                  r->type == REDIS_REPLY_ERROR ? r->str : "not an integer");
    out = r->integer;
    freeReplyObject(r);
    return out;
}

/* How a write hold ends under the writer's own read hold. */
typedef enum { BY_RELEASE, BY_ABORT } write_end;

/* A writer that also holds a read hold drops its write hold (its release,
 * or an abort of the grant that made it): the lock turns to read mode, and
 * a reader waiting on the write hold must be woken then, not at the end of
 * the write lease. */
static void check_downgrade_wakes_reader(write_end how)
{
    redlock_client *c = client_over(N_NODES);
    char name[64];
    const char *what = how == BY_RELEASE ? "the write release" : "the abort";
    redlock_lock *w, *wr, *r;
    bg_acquire b;
    int64_t dropped_ms;
    size_t i;

    rig_unique_name(name, sizeof(name), "rw", how == BY_RELEASE ? "downgrade" : "abortdown");
    w = handle(c, name, REDLOCK_LOCK_WRITE);
    wr = handle(c, name, REDLOCK_LOCK_READ);
    r = handle(c, name, REDLOCK_LOCK_READ);
    acquire_ok(w, W1, 0, LEASE_MS);
    acquire_ok(wr, W1, 0, LEASE_MS); /* the writer's own read hold */
    bg_start(&b, r, R1, 8000);
    rig_sleep_ms(300); /* R1 is refused and waits */
    ck_assert_int_eq(atomic_load(&b.finished), 0);
    if (how == BY_RELEASE)
        unlock_ok(w, W1);
    else
        for (i = 0; i < N_NODES; i++)
            ck_assert_int_eq(abort_write_hold(i, name), 1);
    dropped_ms = rig_now_ms();
    pthread_join(b.th, NULL);
    ck_assert_msg(b.rc == REDLOCK_OK, "waiting reader: %s", redlock_err_name(b.rc));
    fprintf(stderr, "downgrade: reader granted %lld ms after %s\n",
            (long long)(b.done_us / 1000 - dropped_ms), what);
    /* Woken by the release message, not by a retry near the lease's end. */
    ck_assert_msg(b.done_us / 1000 - dropped_ms < 1000, "the reader was granted %lld ms after %s",
                  (long long)(b.done_us / 1000 - dropped_ms), what);
    unlock_ok(r, R1);
    unlock_ok(wr, W1);
    /* An aborted write hold was undone under the handle: not held. */
    if (how == BY_ABORT)
        ck_assert_int_ne(redlock_unlock_as(w, W1), REDLOCK_OK);
    ck_assert_int_ge(wait_all_gone(N_NODES, name, 3000), 0);
    redlock_lock_free(w);
    redlock_lock_free(wr);
    redlock_lock_free(r);
    redlock_client_free(c);
}

START_TEST(test_downgrade_wakes_waiting_reader)
{
    check_downgrade_wakes_reader(BY_RELEASE);
}
END_TEST

/* The same when a write grant is undone (rw_abort.lua): a late abort of the
 * write attempt, landing after the owner took a read hold under the grant,
 * here run by hand. */
START_TEST(test_abort_downgrade_wakes_waiting_reader)
{
    check_downgrade_wakes_reader(BY_ABORT);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 6. Watchdog leases: renewed while held, loss reported. */

typedef struct lost_probe {
    atomic_int calls;
    atomic_int reason;
    atomic_llong at_ms;
} lost_probe;

static void on_lost(void *ud, redlock_lock *lock, uint64_t owner, int reason)
{
    lost_probe *p = ud;

    (void)lock;
    (void)owner;
    atomic_store(&p->reason, reason);
    atomic_store(&p->at_ms, (long long)rig_now_ms());
    atomic_fetch_add(&p->calls, 1);
}

/* An owner holding the write hold may take a read hold with a longer
 * lease. Renewing (or re-entering) the write hold must not cut the hash's
 * TTL back to the write lease: the hash would expire while the read hold
 * still counts as valid, and another writer could then be granted. */
START_TEST(test_write_renewal_keeps_longer_read_hold)
{
    redlock_client *c = client_with(N_NODES, NODE_TIMEOUT_MS, 1500);
    char name[64];
    redlock_lock *r, *w;
    long long pttl;
    size_t i;

    rig_unique_name(name, sizeof(name), "rw", "wd-longread");
    r = handle(c, name, REDLOCK_LOCK_READ);
    w = handle(c, name, REDLOCK_LOCK_WRITE);
    acquire_ok(w, W1, 0, 0);       /* watchdog: 1.5 s, renewed every 0.5 s */
    acquire_ok(r, W1, 0, 60000);   /* under it, a read hold of 60 s */
    acquire_ok(w, W1, 0, 0);       /* and a write re-entry */
    rig_sleep_ms(1200);            /* two renewals of the write hold */
    for (i = 0; i < N_NODES; i++) {
        pttl = atoll(cli(i, "PTTL %s", name));
        ck_assert_msg(pttl > 50000, "node %zu: the hash expires in %lld ms under a read hold "
                      "of 60 s", i, pttl);
    }
    unlock_ok(w, W1);
    unlock_ok(w, W1);
    for (i = 0; i < N_NODES; i++) {
        pttl = atoll(cli(i, "PTTL %s", name));
        ck_assert_msg(pttl > 50000, "node %zu: after the write release the hash expires in "
                      "%lld ms", i, pttl);
    }
    unlock_ok(r, W1);
    ck_assert_int_ge(wait_all_gone(N_NODES, name, 3000), 0);
    redlock_lock_free(r);
    redlock_lock_free(w);
    redlock_client_free(c);
}
END_TEST

/* A read hold whose timeout key lapsed on a node while other readers kept
 * the hash alive there no longer keeps writers out on that node: its
 * renewal must not count as one. It did (the hash was extended and 1
 * returned), and the holder went on counting that node. */
START_TEST(test_lapsed_read_hold_is_not_renewed)
{
    redlock_client *c = client_with(1, NODE_TIMEOUT_MS, 1500);
    char name[64], fr[FIELD_CAP], k[ARGS_CAP];
    redlock_lock *r, *other;
    lost_probe rl;
    int64_t t0;

    memset(&rl, 0, sizeof(rl));
    rig_unique_name(name, sizeof(name), "rw", "lapsed-read");
    r = handle(c, name, REDLOCK_LOCK_READ);
    other = handle(c, name, REDLOCK_LOCK_READ);
    redlock_lock_set_on_lost(r, on_lost, &rl);
    rig_field_of(c, R1, fr, sizeof(fr));
    acquire_ok(r, R1, 0, 0);            /* watchdog: renewed every 0.5 s */
    acquire_ok(other, R2, 0, 20000);    /* keeps the hash alive */
    /* R1's read hold lapses on the node (as when its renewals could not
     * reach it for longer than the lease). */
    ck_assert_str_eq(cli(0, "DEL %s", timeout_key(k, name, fr, 1)), "1");
    t0 = rig_now_ms();
    while (atomic_load(&rl.calls) == 0 && rig_now_ms() - t0 < 3000)
        rig_sleep_ms(10);
    ck_assert_msg(atomic_load(&rl.calls) == 1,
                  "the lapsed read hold was still renewed %lld ms later",
                  (long long)(rig_now_ms() - t0));
    ck_assert_int_eq(redlock_unlock_as(r, R1), REDLOCK_ELOST);
    unlock_ok(other, R2);
    ck_assert_int_ge(wait_all_gone(1, name, 3000), 0);
    redlock_lock_free(r);
    redlock_lock_free(other);
    redlock_client_free(c);
}
END_TEST

/* A read hold vanishes on one member (a restart without persistence) and
 * another reader's grant re-creates the hash there: readers share, so the
 * watchdog puts our read hold back on that member, as it does where the
 * key is gone. It counted the member as held by others and left it out. */
START_TEST(test_vanished_read_hold_restored_beside_other_reader)
{
    redlock_client *c = client_with(N_NODES, NODE_TIMEOUT_MS, 1500);
    char name[64], fr[FIELD_CAP], k[ARGS_CAP], a[ARGS_CAP];
    redlock_lock *r, *other;
    lost_probe rl;
    int64_t t0;
    int back = 0;

    memset(&rl, 0, sizeof(rl));
    rig_unique_name(name, sizeof(name), "rw", "restore-read");
    r = handle(c, name, REDLOCK_LOCK_READ);
    other = handle(c, name, REDLOCK_LOCK_READ);
    redlock_lock_set_on_lost(r, on_lost, &rl);
    rig_field_of(c, R1, fr, sizeof(fr));
    acquire_ok(r, R1, 0, 0); /* watchdog: renewed every 0.5 s */
    ck_assert_uint_eq(nodes_saying(N_NODES, N_NODES, "1",
                                   fmt_args(a, "HGET '%s' '%s'", name, fr)), N_NODES);
    /* Node 4 forgets everything of the lock, then another reader comes. */
    cli(4, "DEL %s %s", name, timeout_key(k, name, fr, 1));
    acquire_ok(other, R2, 0, 20000);
    t0 = rig_now_ms();
    while (!back && rig_now_ms() - t0 < 3000) {
        back = strcmp(cli(4, "HGET %s %s", name, fr), "1") == 0;
        rig_sleep_ms(20);
    }
    fprintf(stderr, "vanished read hold beside another reader: %s after %lld ms\n",
            back ? "restored" : "not restored", (long long)(rig_now_ms() - t0));
    ck_assert_msg(back, "the read hold was not put back on node 4 beside the other reader");
    ck_assert_str_eq(cli(4, "EXISTS %s", timeout_key(k, name, fr, 1)), "1");
    ck_assert_int_eq(atomic_load(&rl.calls), 0);
    unlock_ok(r, R1);
    unlock_ok(other, R2);
    ck_assert_int_ge(wait_all_gone(N_NODES, name, 3000), 0);
    redlock_lock_free(r);
    redlock_lock_free(other);
    redlock_client_free(c);
}
END_TEST

START_TEST(test_watchdog_and_loss)
{
    redlock_client *c = client_with(N_NODES, NODE_TIMEOUT_MS, 1500);
    char rname[64], wname[64], fr[FIELD_CAP], a[ARGS_CAP], k[ARGS_CAP];
    redlock_lock *r, *w;
    lost_probe rl, wl;
    int held = 0;
    int64_t deleted_ms;
    size_t i;

    memset(&rl, 0, sizeof(rl));
    memset(&wl, 0, sizeof(wl));
    rig_unique_name(rname, sizeof(rname), "rw", "wd-read");
    rig_unique_name(wname, sizeof(wname), "rw", "wd-write");
    r = handle(c, rname, REDLOCK_LOCK_READ);
    w = handle(c, wname, REDLOCK_LOCK_WRITE);
    redlock_lock_set_on_lost(r, on_lost, &rl);
    redlock_lock_set_on_lost(w, on_lost, &wl);
    rig_field_of(c, R1, fr, sizeof(fr));
    acquire_ok(r, R1, 0, 0);
    acquire_ok(w, W1, 0, 0);
    rig_sleep_ms(4000); /* well past the 1.5 s lease */
    ck_assert_int_eq(redlock_is_held_as(r, R1, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    ck_assert_int_eq(redlock_is_held_as(w, W1, &held), REDLOCK_OK);
    ck_assert_int_eq(held, 1);
    timeout_key(k, rname, fr, 1);
    for (i = 0; i < N_NODES; i++) {
        long long kp = atoll(rig_cli(i, fmt_args(a, "PTTL '%s'", rname)));
        long long tp = atoll(rig_cli(i, fmt_args(a, "PTTL '%s'", k)));
        long long wp = atoll(rig_cli(i, fmt_args(a, "PTTL '%s'", wname)));

        ck_assert_msg(kp > 0 && kp <= 1500 && tp > 0 && tp <= 1500 && wp > 0 && wp <= 1500,
                      "node %zu: read key %lld, its timeout key %lld, write key %lld ms", i,
                      kp, tp, wp);
    }
    ck_assert_int_eq(atomic_load(&rl.calls) + atomic_load(&wl.calls), 0);

    /* Another writer takes both keys' place on a majority: both holds are
     * reported lost. (Deleting them would not do: the nodes are changed one
     * after the other, and a renewal between two of them finds a key gone
     * on a minority and restores it, keeping the hold.) Each replacement is
     * one script, and lives 3 s, so the leftovers still go below. */
    deleted_ms = rig_now_ms();
    for (i = 0; i < 3; i++) {
        static const char takeover[] =
            "EVAL \"redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], 'mode', 'write', "
            "'other:1:write', 1); return redis.call('pexpire', KEYS[1], 3000)\" 1 '%s'";

        rig_cli(i, fmt_args(a, takeover, rname));
        rig_cli(i, fmt_args(a, takeover, wname));
    }
    while ((atomic_load(&rl.calls) == 0 || atomic_load(&wl.calls) == 0) &&
           rig_now_ms() - deleted_ms < 6000)
        rig_sleep_ms(20);
    fprintf(stderr, "loss reported after %lld ms (write, %s) and %lld ms (read, %s)\n",
            (long long)(atomic_load(&wl.at_ms) - deleted_ms),
            redlock_err_name(atomic_load(&wl.reason)),
            (long long)(atomic_load(&rl.at_ms) - deleted_ms),
            redlock_err_name(atomic_load(&rl.reason)));
    ck_assert_int_eq(atomic_load(&wl.calls), 1);
    ck_assert_int_eq(atomic_load(&rl.calls), 1);
    ck_assert_int_eq(atomic_load(&wl.reason), REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(atomic_load(&rl.reason), REDLOCK_ENOT_OWNER);
    ck_assert_int_eq(redlock_unlock_as(w, W1), REDLOCK_ELOST);
    ck_assert_int_eq(redlock_unlock_as(r, R1), REDLOCK_ELOST);
    /* Nothing keeps the leftovers on the other members alive. */
    ck_assert_int_ge(wait_all_gone(N_NODES, rname, 4000), 0);
    ck_assert_int_ge(wait_all_gone(N_NODES, wname, 4000), 0);
    redlock_lock_free(r);
    redlock_lock_free(w);
    redlock_client_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 7. A failed quorum leaves nothing behind. */

START_TEST(test_failed_quorum_leaves_nothing)
{
    /* The default node timeout (lease / 100, at most 50 ms): a failure
     * should be prompt. */
    redlock_client *c = client_with(N_NODES, 0, 0);
    char name[64];
    redlock_lock *r, *w;
    int rc_w, rc_r;
    int64_t gone;
    size_t m;

    rig_unique_name(name, sizeof(name), "rw", "noquorum");
    r = handle(c, name, REDLOCK_LOCK_READ);
    w = handle(c, name, REDLOCK_LOCK_WRITE);
    /* Warm connections, so the attempts below reach the live nodes. */
    acquire_ok(w, W1, 0, LEASE_MS);
    unlock_ok(w, W1);
    ck_assert_int_ge(wait_all_gone(N_NODES, name, 3000), 0);
    for (m = 2; m < N_NODES; m++)
        ck_assert_int_eq(rig_node("freeze", m), 0);
    rc_w = redlock_acquire_as(w, W1, 300, LEASE_MS);
    fprintf(stderr, "3 of 5 frozen: write -> %s (%s)\n", redlock_err_name(rc_w),
            redlock_last_error());
    rc_r = redlock_acquire_as(r, R1, 300, LEASE_MS);
    fprintf(stderr, "3 of 5 frozen: read -> %s (%s)\n", redlock_err_name(rc_r),
            redlock_last_error());
    for (m = 2; m < N_NODES; m++)
        ck_assert_int_eq(rig_node("thaw", m), 0);
    ck_assert_msg(rc_w == REDLOCK_ENO_QUORUM || rc_w == REDLOCK_ETIMEOUT, "write: %s",
                  redlock_err_name(rc_w));
    ck_assert_msg(rc_r == REDLOCK_ENO_QUORUM || rc_r == REDLOCK_ETIMEOUT, "read: %s",
                  redlock_err_name(rc_r));
    /* The frozen nodes now run what was queued for them: no grant, no
     * rwlock_timeout key, no bookkeeping may survive that. */
    gone = wait_all_gone(N_NODES, name, 5000);
    ck_assert_msg(gone >= 0, "keys of %s outlived the thaw", name);
    rig_sleep_ms(300);
    ck_assert_int_ge(wait_all_gone(N_NODES, name, 0), 0);
    /* And the lock is free for the next owner. */
    acquire_ok(w, W2, 0, LEASE_MS);
    unlock_ok(w, W2);
    redlock_lock_free(r);
    redlock_lock_free(w);
    redlock_client_free(c);
}
END_TEST

/* A retried re-entry or release reaches a node twice: the hold's
 * generation record (lua/lib/gens.lua) remembers the request, and the
 * second copy changes nothing. By EVAL on one node, for a write hold and a
 * read hold, so the record is the only thing that can tell. */
static void check_replays_apply_once(int writing)
{
    char name[64], field[96], genf[112], latch[4][160], mark[160], chan[160], plain[160];
    const char *ids[4] = {"00000000000100000000000000000001", "00000000000200000000000000000002",
                          "00000000000300000000000000000003", "00000000000400000000000000000004"};
    const char *script = writing ? "rw_write_acquire.lua" : "rw_read_acquire.lua";
    redisReply *r;
    int k, copy;

    rig_unique_name(name, sizeof(name), "rw", writing ? "replayw" : "replayr");
    snprintf(field, sizeof(field), "replay-client:1%s", writing ? ":write" : "");
    snprintf(genf, sizeof(genf), "%s:gen", field);
    snprintf(mark, sizeof(mark), "redlock_rwwait:{%s}", name);
    snprintf(chan, sizeof(chan), "redisson_rwlock:{%s}", name);
    snprintf(plain, sizeof(plain), "redisson_lock__channel:{%s}", name);
    for (k = 0; k < 4; k++)
        snprintf(latch[k], sizeof(latch[k]), "redlock_latch:{%s}:%s", name, ids[k]);
    /* A fresh grant (ids[0]), then a re-entry (ids[1]) sent twice. */
    for (k = 0; k < 2; k++)
        for (copy = 0; copy < 1 + k; copy++) {
            r = eval_file(0, script, 3, 8,
                          (const char *[]){name, latch[k], mark, "10000", field, ids[k],
                                           k == 0 ? "1" : "0", "0"});
            ck_assert_msg(r->type == REDIS_REPLY_ARRAY, "%s copy %d of request %d: %s", script,
                          copy + 1, k, r->type == REDIS_REPLY_ERROR ? r->str : "refused");
            freeReplyObject(r);
        }
    ck_assert_str_eq(cli(0, "HGET %s %s", name, field), "2");
    /* A release (ids[2]) sent twice leaves one hold. */
    for (copy = 0; copy < 2; copy++) {
        r = eval_file(0, "rw_release.lua", 4, 9,
                      (const char *[]){name, chan, latch[2], plain, "0", "10000", field, "0",
                                       ids[0]});
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 0,
                      "rw_release copy %d: not 'still held'", copy + 1);
        freeReplyObject(r);
    }
    ck_assert_str_eq(cli(0, "HGET %s %s", name, field), "1");
    ck_assert_msg(strstr(cli(0, "HGET %s %s", name, genf), ids[0]) != NULL,
                  "the generation changed: %s", cli(0, "HGET %s %s", name, genf));
    /* The last release ends it. */
    r = eval_file(0, "rw_release.lua", 4, 9,
                  (const char *[]){name, chan, latch[3], plain, "0", "10000", field, "0", ids[0]});
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert_str_eq(cli(0, "EXISTS %s", name), "0");
}

START_TEST(test_write_replays_apply_once)
{
    check_replays_apply_once(1);
}
END_TEST

START_TEST(test_read_replays_apply_once)
{
    check_replays_apply_once(0);
}
END_TEST

/* ------------------------------------------------------------------------ */

int main(void)
{
    Suite *s = suite_create("rwlock");

    RIG_ADD_CASE(s, test_readers_overlap_single, 60);
    RIG_ADD_CASE(s, test_readers_overlap_quorum, 60);
    RIG_ADD_CASE(s, test_reentry_layout, 60);
    RIG_ADD_CASE(s, test_upgrade_refused, 60);
    RIG_ADD_CASE(s, test_writer_not_starved, 90);
    RIG_ADD_CASE(s, test_plain_and_rw_exclude, 60);
    RIG_ADD_CASE(s, test_plain_same_owner_keeps_read_hold, 60);
    RIG_ADD_CASE(s, test_downgrade_wakes_waiting_reader, 60);
    RIG_ADD_CASE(s, test_abort_downgrade_wakes_waiting_reader, 60);
    RIG_ADD_CASE(s, test_write_renewal_keeps_longer_read_hold, 60);
    RIG_ADD_CASE(s, test_lapsed_read_hold_is_not_renewed, 60);
    RIG_ADD_CASE(s, test_vanished_read_hold_restored_beside_other_reader, 60);
    RIG_ADD_CASE(s, test_watchdog_and_loss, 60);
    RIG_ADD_CASE(s, test_failed_quorum_leaves_nothing, 60);
    RIG_ADD_CASE(s, test_write_replays_apply_once, 60);
    RIG_ADD_CASE(s, test_read_replays_apply_once, 60);
    return run_suite(s);
}
