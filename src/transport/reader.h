/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The RESP reply parser every connection uses: hiredis' redisReader with
 * one limit added.
 *
 * hiredis 0.14 allocates an array's element table as soon as it reads the
 * header ("*N\r\n"), before any element has arrived, so a faulty server or
 * a corrupted stream can make a client reserve gigabytes with a dozen
 * bytes. No reply this library asks for is longer than a handful of
 * elements; a header above REDLOCK__READER_MAX_ELEMENTS fails the parse
 * instead (redisReaderGetReply returns REDIS_ERR with err REDIS_ERR_OOM,
 * and redlock__reader_refused() says it was this limit).
 */
#ifndef REDLOCK_TRANSPORT_READER_H
#define REDLOCK_TRANSPORT_READER_H

struct redisReader;

#define REDLOCK__READER_MAX_ELEMENTS 65536

/* A new reader, or NULL when out of memory; free it with
 * redlock__reader_free(), never redisReaderFree() (the reader owns a small
 * state block of ours). Creating is thread-safe; each reader is then used
 * by one thread at a time. */
struct redisReader *redlock__reader_create(void);

/* Frees a reader from redlock__reader_create() and any partial reply in
 * it. NULL is allowed. */
void redlock__reader_free(struct redisReader *r);

/* Nonzero when the reader's last error came from the element limit
 * rather than a failed allocation. */
int redlock__reader_refused(const struct redisReader *r);

#endif
