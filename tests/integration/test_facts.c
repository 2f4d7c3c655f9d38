/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Holder facts (redlock_lock_options.holder_facts) on the fixture's five
 * plain nodes: written only when asked, with the hold's owner field; a
 * command line cannot forge a field; the watchdog keeps them past the
 * first lease; a fixed lease lets them expire; a member that does not
 * answer is an error, not "no facts".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redlock/redlock.h"
#include "rig_env.h"

#define NODES 5

static redlock_client *client_with(int node_timeout_ms, int watchdog_lease_ms)
{
    redlock_options o;
    redlock_client *c = NULL;

    memset(&o, 0, sizeof(o));
    o.node_timeout_ms = node_timeout_ms;
    o.watchdog_lease_ms = watchdog_lease_ms;
    ck_assert_msg(redlock_client_new(&c, rig_plain_uris(), NODES, &o) == REDLOCK_OK, "%s",
                  redlock_last_error());
    return c;
}

static redlock_lock *lock_with(redlock_client *c, const char *tag, int facts,
                               const char *command, char *name, size_t cap)
{
    redlock_lock_options lo;
    redlock_lock *l = NULL;

    memset(&lo, 0, sizeof(lo));
    lo.holder_facts = facts;
    lo.holder_command = command;
    rig_unique_name(name, cap, "facts", tag);
    ck_assert_msg(redlock_lock_new(c, name, &lo, &l) == REDLOCK_OK, "%s", redlock_last_error());
    return l;
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Member i's facts; the read itself must succeed. */
static redlock_holder_facts facts_of(redlock_lock *l, size_t i)
{
    redlock_holder_facts f;

    ck_assert_msg(redlock_lock_holder_facts(l, i, &f) == REDLOCK_OK, "%s",
                  redlock_last_error());
    return f;
}

/* Every member has facts of this thread's hold through c with command. */
/* The facts of the first member that has them (a member the attempt did
 * not wait for has none). */
static redlock_holder_facts first_facts(redlock_lock *l)
{
    redlock_holder_facts f;
    size_t i;

    for (i = 0; i < NODES; i++)
        if ((f = facts_of(l, i)).found)
            return f;
    return f;
}

static void assert_facts(redlock_client *c, redlock_lock *l, const char *command)
{
    char field[160], host[256] = "";
    size_t i, found;

    rig_field_of(c, redlock_thread_owner(), field, sizeof(field));
    gethostname(host, sizeof(host) - 1);
    /* Written where the hold was granted: on a quorum at least (a member
     * the attempt did not wait for has none). */
    for (i = 0, found = 0; i < NODES; i++) {
        redlock_holder_facts f = facts_of(l, i);

        if (!f.found)
            continue;
        found++;
        ck_assert_str_eq(f.owner, field);
        ck_assert_str_eq(f.host, host);
        ck_assert_int_eq(f.pid, getpid());
        ck_assert_int_le(f.since_ms, wall_ms());
        ck_assert_int_ge(f.since_ms, wall_ms() - 60000);
        if (command)
            ck_assert_str_eq(f.command, command);
    }
    ck_assert_msg(found >= NODES / 2 + 1, "facts on %zu of %d members", found, NODES);
}

START_TEST(not_written_unless_asked)
{
    redlock_client *c = client_with(0, 0);
    char name[96], cmd[256];
    redlock_lock *l = lock_with(c, "off", 0, "not recorded", name, sizeof(name));
    size_t i;

    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 5000), REDLOCK_OK);
    for (i = 0; i < NODES; i++) {
        ck_assert_int_eq(facts_of(l, i).found, 0);
        snprintf(cmd, sizeof(cmd), "EXISTS 'redlock_facts:{%s}'", name);
        ck_assert_str_eq(rig_cli(i, cmd), "0");
    }
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(written_with_owner)
{
    redlock_client *c = client_with(0, 0);
    char name[96], cmd[256];
    redlock_lock *l = lock_with(c, "on", 1, "make deploy", name, sizeof(name));
    redlock_member_state st;
    size_t i;
    long pttl;

    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 5000), REDLOCK_OK);
    assert_facts(c, l, "make deploy");
    for (i = 0; i < NODES; i++) {
        /* The owner is the holder status finds, and the lease is the hold's. */
        ck_assert_int_eq(redlock_lock_inspect(l, i, &st), REDLOCK_OK);
        if (!facts_of(l, i).found)
            continue;
        ck_assert_str_eq(facts_of(l, i).owner, st.holder);
        snprintf(cmd, sizeof(cmd), "PTTL 'redlock_facts:{%s}'", name);
        pttl = atol(rig_cli(i, cmd));
        ck_assert_int_gt(pttl, 0);
        ck_assert_int_le(pttl, 5000);
    }
    /* A re-entry does not rewrite them. */
    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 5000), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);

    /* NULL: this process's command line. */
    l = lock_with(c, "self", 1, NULL, name, sizeof(name));
    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 5000), REDLOCK_OK);
    assert_facts(c, l, NULL);
    ck_assert_ptr_nonnull(strstr(first_facts(l).command, "test_facts"));
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(command_cannot_forge)
{
    static const char evil[] = "sleep 1\npid=1\nowner=someone:1\r\\x41\x01\\n end";
    redlock_client *c = client_with(0, 0);
    char name[96], cmd[256], long_cmd[400];
    redlock_lock *l = lock_with(c, "evil", 1, evil, name, sizeof(name));
    redlock_holder_facts f;
    size_t i;

    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 5000), REDLOCK_OK);
    assert_facts(c, l, evil); /* pid and owner are ours, the command intact */
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);

    /* A password in a node URI of the command line is masked. */
    l = lock_with(c, "secret", 1, "tool --nodes redis://u:s3cret@127.0.0.1:1,rediss://:pw@h x",
                  name, sizeof(name));
    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 5000), REDLOCK_OK);
    assert_facts(c, l, "tool --nodes redis://u:******@127.0.0.1:1,rediss://:**@h x");
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    /* Passwords holding what the URI parser takes raw in a password: '/',
     * '#', '?', '@' (the user info ends at the last '@'). */
    l = lock_with(c, "secret2", 1,
                  "t redis://app:pa/ss@db1 redis://app:se#cret@db2 redis://app:q?x@db3 "
                  "redis://:p@ss/word@h redis://app:x://y@db4",
                  name, sizeof(name));
    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 5000), REDLOCK_OK);
    assert_facts(c, l,
                 "t redis://app:*****@db1 redis://app:*******@db2 redis://app:***@db3 "
                 "redis://:*********@h redis://app:*****@db4");
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);

    /* Cut to 200 bytes, never inside a character ("é" is two bytes). */
    memset(long_cmd, 0, sizeof(long_cmd));
    long_cmd[0] = 'x';
    for (i = 1; i + 2 < 300; i += 2)
        memcpy(long_cmd + i, "\xc3\xa9", 2);
    l = lock_with(c, "long", 1, long_cmd, name, sizeof(name));
    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 5000), REDLOCK_OK);
    f = first_facts(l);
    ck_assert(f.found);
    ck_assert_uint_eq(strlen(f.command), 199);
    ck_assert_int_eq(strncmp(f.command, long_cmd, 199), 0);

    /* Anything the library did not write reads as no facts. */
    snprintf(cmd, sizeof(cmd), "SET 'redlock_facts:{%s}' 'owner=x' PX 5000", name);
    ck_assert_str_eq(rig_cli(0, cmd), "OK");
    ck_assert_int_eq(facts_of(l, 0).found, 0);
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(renewed_by_watchdog)
{
    redlock_client *c = client_with(0, 900);
    char name[96];
    redlock_lock *l = lock_with(c, "watchdog", 1, "renewed", name, sizeof(name));

    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 0), REDLOCK_OK);
    rig_sleep_ms(2000);
    assert_facts(c, l, "renewed");
    ck_assert_int_eq(redlock_unlock(l), REDLOCK_OK);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(fixed_lease_expires)
{
    redlock_client *c = client_with(0, 900);
    char name[96];
    redlock_lock *l = lock_with(c, "fixed", 1, "expires", name, sizeof(name));
    size_t i;

    ck_assert_int_eq(redlock_try_lock_for(l, 2000, 700), REDLOCK_OK);
    assert_facts(c, l, "expires");
    rig_sleep_ms(1200);
    for (i = 0; i < NODES; i++)
        ck_assert_int_eq(facts_of(l, i).found, 0);
    redlock_unlock(l); /* expired: reported, not checked here */
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

START_TEST(silent_member_is_an_error)
{
    redlock_client *c;
    char name[96];
    redlock_lock *l;
    redlock_holder_facts f;

    rig_heal(NODES);
    c = client_with(200, 0);
    l = lock_with(c, "silent", 1, "x", name, sizeof(name));
    ck_assert_int_eq(redlock_lock_holder_facts(l, NODES, &f), REDLOCK_EINVAL);
    ck_assert_int_eq(redlock_lock_holder_facts(NULL, 0, &f), REDLOCK_EINVAL);
    ck_assert_int_eq(rig_node("freeze", 4), 0);
    ck_assert_int_eq(redlock_lock_holder_facts(l, 4, &f), REDLOCK_ETIMEOUT);
    ck_assert_int_eq(f.found, 0);
    ck_assert_ptr_nonnull(strstr(redlock_last_error(), "holder facts"));
    ck_assert_int_eq(rig_node("thaw", 4), 0);
    redlock_lock_free(l);
    redlock_client_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("facts");
    TCase *tc = tcase_create("facts");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, not_written_unless_asked);
    tcase_add_test(tc, written_with_owner);
    tcase_add_test(tc, command_cannot_forge);
    tcase_add_test(tc, renewed_by_watchdog);
    tcase_add_test(tc, fixed_lease_expires);
    tcase_add_test(tc, silent_member_is_an_error);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
