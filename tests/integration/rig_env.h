/* SPDX-License-Identifier: BSD-3-Clause */
/* Access to the private test rig started by tests/fixture/rig-fixture.sh:
 * reads $REDLOCK_TEST_RIG (a KEY=VALUE file) and drives scripts/rig. */
#ifndef REDLOCK_TESTS_RIG_ENV_H
#define REDLOCK_TESTS_RIG_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "redlock/redlock.h"

/* The value of KEY in the rig file; aborts the test run (never skips) if
 * the file or the key is missing. */
const char *rig_get(const char *key);
int rig_get_int(const char *key);

/* "redis://127.0.0.1:<PLAIN_BASE_PORT + i>" for node i (0-based). Static
 * storage, one buffer per node. */
const char *rig_plain_uri(size_t i);
/* The five plain-node URIs as an array. */
const char *const *rig_plain_uris(void);

/* Runs `scripts/rig <verb> <node> --dir PLAIN_DIR` (node is 0-based here,
 * 1-based for the script), e.g. rig_node("freeze", 2). Returns the exit
 * status. */
int rig_node(const char *verb, size_t node);

/* Runs a redis-cli command against plain node i and returns its stdout
 * (trimmed, static buffer), e.g. rig_cli(0, "HGETALL mylock"). */
const char *rig_cli(size_t node, const char *args);

/* CLOCK_MONOTONIC, the clock the library measures leases on. */
int64_t rig_now_ms(void);
int64_t rig_now_us(void);
void rig_sleep_ms(int64_t ms);

/* "<prefix>:<tag>:<pid>:<seq>": a lock name no other case or run uses. */
void rig_unique_name(char *buf, size_t cap, const char *prefix, const char *tag);

/* Thaws plain nodes 0..n-1, restarting any that is not running, so a case
 * starts on a healthy rig whatever the previous one did. A frozen node is
 * thawed before anything talks to it (redis-cli would hang on it). */
void rig_heal(size_t n);

/* Thaws and restarts every plain node (an unchecked Check fixture). */
void rig_heal_all(void);

/* "redis://user:pass@127.0.0.1:<plain node 0>" (static storage). */
const char *rig_acl_uri(const char *user, const char *pass);

/* "<client-id>:<owner>": the hash field a hold of owner uses. */
void rig_field_of(redlock_client *c, uint64_t owner, char *buf, size_t cap);

/* The client's counters (a failed read fails the test). */
redlock_stats rig_stats(redlock_client *c);

/* Adds test to suite s in a case of its own, with secs as its timeout and
 * a healed rig before and after it (for files that include check.h). */
#define RIG_ADD_CASE(s, test, secs)                                            \
    do {                                                                       \
        TCase *tc_ = tcase_create(#test);                                      \
        tcase_add_unchecked_fixture(tc_, rig_heal_all, rig_heal_all);          \
        tcase_set_timeout(tc_, secs);                                          \
        tcase_add_test(tc_, test);                                             \
        suite_add_tcase((s), tc_);                                             \
    } while (0)

#endif
