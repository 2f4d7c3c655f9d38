/* SPDX-License-Identifier: BSD-3-Clause */
/* OpenSSL glue: hiredis 0.14 has no TLS, so the library wraps its own
 * sockets. */
#ifndef REDLOCK_TRANSPORT_TLS_H
#define REDLOCK_TRANSPORT_TLS_H

#include <signal.h>
#include <stddef.h>

#include "redlock/redlock.h"

struct ssl_ctx_st;
struct ssl_st;

/* Builds the client-wide context: TLS 1.2+, trust anchors, optional client
 * certificate. Returns REDLOCK_OK or REDLOCK_ETLS with a message. */
int redlock__tls_ctx_new(const redlock_tls_options *o,
                         struct ssl_ctx_st **out);
void redlock__tls_ctx_free(struct ssl_ctx_st *ctx);

/* A new SSL for fd, with SNI and host (or IP) verification of name. */
int redlock__tls_ssl_new(struct ssl_ctx_st *ctx, int fd, const char *name,
                         int verify, struct ssl_st **out, char *err,
                         size_t cap);

/* Describes the last TLS failure of ssl (verification result first). */
void redlock__tls_describe(struct ssl_st *ssl, const char *what, char *err,
                           size_t cap);

/* Any OpenSSL call may write (SSL_read and SSL_connect send alerts), and
 * OpenSSL writes with write(): to a peer that reset the connection that
 * raises SIGPIPE, which would kill the process. Around each call SIGPIPE
 * is blocked for the calling thread, and a pending one consumed after a
 * failed call; errno is kept. */
typedef struct redlock__nopipe {
    sigset_t set, old;
} redlock__nopipe;
void redlock__nopipe_begin(redlock__nopipe *np);
void redlock__nopipe_end(redlock__nopipe *np, int failed);

/* SSL_write of n bytes inside nopipe; *ssl_err gets SSL_get_error's
 * (SSL_ERROR_NONE on success). */
int redlock__tls_write(struct ssl_st *ssl, const char *p, size_t n, int *ssl_err);

#endif
