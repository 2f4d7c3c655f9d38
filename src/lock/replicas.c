/* SPDX-License-Identifier: BSD-3-Clause */
#include "lock/replicas.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "resp/script.h"

void redlock__replica_wait_init(redlock__replica_wait *w, int acks, int timeout_ms, int aof)
{
    int n = 0;

    memset(w, 0, sizeof(*w));
    w->aof = aof;
    redlock__fmt_i64(w->count, sizeof(w->count), acks);
    /* WAIT 0 would block forever: never ask for less than 1 ms. */
    redlock__fmt_i64(w->timeout, sizeof(w->timeout), timeout_ms > 0 ? timeout_ms : 1);
    if (aof) {
        w->argv[n++] = "WAITAOF";
        w->argv[n++] = "0"; /* the master's own fsync is not asked for */
    } else {
        w->argv[n++] = "WAIT";
    }
    w->argv[n++] = w->count;
    w->argv[n++] = w->timeout;
    w->call = (redlock__call){-1, 0, n, w->argv, NULL};
}

int redlock__replica_acks_of(const redlock__replica_wait *w, int err, const char *msg,
                             const redisReply *r, int *code, char *why, size_t cap)
{
    if (err) {
        *code = err;
        snprintf(why, cap, "%s: %s", w->argv[0], msg ? msg : "no reply");
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        /* Redis before 7.2 has no WAITAOF: that cannot change by retrying. */
        if (w->aof && r->str && strstr(r->str, "unknown command")) {
            *code = REDLOCK_ECONFIG;
            snprintf(why, cap, "WAITAOF needs Redis 7.2 or later (replica_wait_aof): %.80s",
                     r->str);
        } else {
            *code = redlock__server_error_code(r->str);
            if (*code == REDLOCK_OK)
                *code = REDLOCK_ESERVER;
            snprintf(why, cap, "%s: %.100s", w->argv[0], r->str);
        }
        return -1;
    }
    if (!w->aof && r->type == REDIS_REPLY_INTEGER && r->integer >= 0)
        return r->integer > 1000 ? 1000 : (int)r->integer;
    /* WAITAOF: [local fsyncs, replica fsyncs]. */
    if (w->aof && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer >= 0)
        return r->element[1]->integer > 1000 ? 1000 : (int)r->element[1]->integer;
    *code = REDLOCK_EPROTO;
    snprintf(why, cap, "%s: unexpected reply type %d", w->argv[0], r->type);
    return -1;
}
