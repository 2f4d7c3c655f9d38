/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The physical floor: the library's own acquire and release scripts, sent
 * by hand over plain blocking sockets with a minimal RESP encoder and
 * reader. No pool, no poll, no quorum logic: send to every node, then read
 * every reply. What the library adds on top of this is its overhead.
 */
#ifndef REDLOCK_BENCH_RAW_H
#define REDLOCK_BENCH_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct raw_conn {
    int fd;
    char buf[16384];
    size_t len, off;
} raw_conn;

/* Reply kinds: '+' '-' ':' '$' '*' as on the wire, 'n' for a nil. */
typedef struct raw_reply {
    char type;
    long long integer;     /* ':' replies, and the first integer of '*' */
    char text[128];        /* '+', '-' and '$' replies, truncated */
} raw_reply;

/* Connects (blocking, TCP_NODELAY) and authenticates; exits on failure. */
void raw_connect(raw_conn *c, const char *host, int port, const char *user,
                 const char *pass);
void raw_close(raw_conn *c);
/* Encodes argv as a RESP array into out; returns its length. */
size_t raw_format(char *out, size_t cap, int argc, const char *const *argv);
void raw_send(raw_conn *c, const char *cmd, size_t len);
void raw_read(raw_conn *c, raw_reply *r);
/* One command, one reply. */
void raw_command(raw_conn *c, int argc, const char *const *argv, raw_reply *r);

/* A lock name held and released by hand on n nodes. */
typedef struct raw_floor {
    raw_conn conns[BENCH_MAX_NODES];
    size_t n;
    char name[128];
    char channel[160];
    char latch_prefix[160];
    char field[64];
    char lease[24];
    char cmd[2048];
} raw_floor;

/* Connects to the first n nodes and loads the scripts (checking that the
 * server's SHA1 is the embedded one). */
void raw_floor_init(raw_floor *f, const bench_args *a, size_t n, const char *name,
                    int64_t lease_ms);
/* One acquire round on every node; exits unless every node granted.
 * Returns the round's duration in ns. */
int64_t raw_floor_acquire(raw_floor *f);
/* One release round; exits unless every node released. */
int64_t raw_floor_release(raw_floor *f);
/* One PING round: the network and syscall floor without any script. */
int64_t raw_floor_ping(raw_floor *f);
void raw_floor_free(raw_floor *f);

/* One command whose reply is a bulk string, copied whole into out
 * (NUL-terminated); exits on any other reply or if it does not fit. */
void raw_command_bulk(raw_conn *c, int argc, const char *const *argv, char *out,
                      size_t cap);
/* The "calls" count of one command in INFO commandstats ("evalsha"). */
long long raw_command_calls(raw_conn *c, const char *command);

/* An integer field of INFO <section> ("stats", "total_connections_received");
 * exits if the field is missing. */
long long raw_info_int(raw_conn *c, const char *section, const char *field);
/* EXISTS key: 1 or 0. */
int raw_exists(raw_conn *c, const char *key);

/* Sends DEL name to node i (used to make a held lock vanish). */
void raw_del(raw_conn *c, const char *name);

#endif
