/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "transport/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static void last_openssl_error(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();

    if (e)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "unknown OpenSSL error");
    ERR_clear_error();
}

static int refuse_passphrase(char *buf, int size, int rwflag, void *ud)
{
    (void)buf, (void)size, (void)rwflag, (void)ud;
    return 0;
}

int redlock__tls_ctx_new(const redlock_tls_options *o, struct ssl_ctx_st **out)
{
    char why[160];
    SSL_CTX *ctx;

    *out = NULL;
    ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return redlock__fail(REDLOCK_ENOMEM, "TLS: cannot create context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Output buffers may be reallocated between partial writes. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (o->ca_file || o->ca_dir) {
        if (SSL_CTX_load_verify_locations(ctx, o->ca_file, o->ca_dir) != 1) {
            last_openssl_error(why, sizeof(why));
            SSL_CTX_free(ctx);
            return redlock__fail(REDLOCK_ETLS, "TLS: cannot load CA %s: %s",
                                 o->ca_file ? o->ca_file : o->ca_dir, why);
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        last_openssl_error(why, sizeof(why));
        SSL_CTX_free(ctx);
        return redlock__fail(REDLOCK_ETLS, "TLS: no default CA store: %s", why);
    }
    if ((o->cert_file == NULL) != (o->key_file == NULL)) {
        SSL_CTX_free(ctx);
        return redlock__fail(REDLOCK_EINVAL,
                             "TLS: a client certificate needs both cert_file and key_file");
    }
    /* An encrypted key file fails with ETLS; OpenSSL's default would
     * prompt for its passphrase on the process's terminal. */
    SSL_CTX_set_default_passwd_cb(ctx, refuse_passphrase);
    if (o->cert_file) {
        if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
            last_openssl_error(why, sizeof(why));
            SSL_CTX_free(ctx);
            return redlock__fail(REDLOCK_ETLS,
                                 "TLS: cannot use client certificate %s: %s",
                                 o->cert_file, why);
        }
    }
    *out = ctx;
    return REDLOCK_OK;
}

void redlock__tls_ctx_free(struct ssl_ctx_st *ctx)
{
    SSL_CTX_free(ctx);
}

static int is_ip_literal(const char *name)
{
    unsigned char addr[16];

    return inet_pton(AF_INET, name, addr) == 1 ||
           inet_pton(AF_INET6, name, addr) == 1;
}

int redlock__tls_ssl_new(struct ssl_ctx_st *ctx, int fd, const char *name,
                         int verify, struct ssl_st **out, char *err, size_t cap)
{
    SSL *ssl = SSL_new(ctx);
    int ok = 1;

    *out = NULL;
    if (!ssl) {
        snprintf(err, cap, "TLS: out of memory");
        return REDLOCK_ENOMEM;
    }
    SSL_set_fd(ssl, fd);
    if (verify) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);

        SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
        /* An address must match an IP SAN; a name, a DNS SAN or CN. */
        if (is_ip_literal(name))
            ok = X509_VERIFY_PARAM_set1_ip_asc(param, name) == 1;
        else
            ok = SSL_set1_host(ssl, name) == 1;
    } else {
        SSL_set_verify(ssl, SSL_VERIFY_NONE, NULL);
    }
    /* RFC 6066 forbids IP literals in SNI. */
    if (ok && !is_ip_literal(name))
        ok = SSL_set_tlsext_host_name(ssl, name) == 1;
    if (!ok) {
        snprintf(err, cap, "TLS: cannot set server name '%s'", name);
        SSL_free(ssl);
        return REDLOCK_ETLS;
    }
    *out = ssl;
    return REDLOCK_OK;
}

void redlock__tls_describe(struct ssl_st *ssl, const char *what, char *err,
                           size_t cap)
{
    char why[160];
    long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

    if (vr != X509_V_OK) {
        snprintf(err, cap, "%s: certificate verify failed: %s", what,
                 X509_verify_cert_error_string(vr));
        ERR_clear_error();
        return;
    }
    last_openssl_error(why, sizeof(why));
    snprintf(err, cap, "%s: %s", what, why);
}

void redlock__nopipe_begin(redlock__nopipe *np)
{
    sigemptyset(&np->set);
    sigaddset(&np->set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &np->set, &np->old);
}

void redlock__nopipe_end(redlock__nopipe *np, int failed)
{
    struct timespec zero = {0, 0};
    int saved = errno;

    if (failed && !sigismember(&np->old, SIGPIPE))
        while (sigtimedwait(&np->set, NULL, &zero) > 0)
            ;
    pthread_sigmask(SIG_SETMASK, &np->old, NULL);
    /* sigtimedwait's EAGAIN must not hide why the call failed. */
    errno = saved;
}

int redlock__tls_write(SSL *ssl, const char *p, size_t n, int *ssl_err)
{
    redlock__nopipe np;
    int r;

    redlock__nopipe_begin(&np);
    ERR_clear_error();
    r = SSL_write(ssl, p, (int)n);
    *ssl_err = r > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl, r);
    redlock__nopipe_end(&np, r <= 0);
    return r;
}
