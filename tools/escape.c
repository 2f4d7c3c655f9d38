/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Terminal safety: everything the tool prints that it did not write itself
 * (a server's error text, a hash field name, a lock name, a node name) goes
 * through one of the two escapers here, so that no server can move the
 * cursor, retitle the window, ring the bell or clear the screen of whoever
 * runs `redlock status`.
 *
 * Text output escapes, as \xNN: the C0 controls (0x00-0x1f, newline and
 * carriage return included, so a message stays one line), DEL (0x7f), the
 * C1 controls encoded in UTF-8 (U+0080-U+009F, which some terminals obey),
 * and every byte that is not part of a valid UTF-8 sequence (a lone 0x9b is
 * CSI to an 8-bit terminal). A backslash becomes \\ so the output is never
 * ambiguous. Everything else, other scripts included, passes unchanged.
 *
 * JSON output escapes the same characters as \u00NN, so the document is
 * valid UTF-8; a byte that is not UTF-8 is shown as the code point of the
 * same number (Latin-1), since JSON strings cannot hold raw bytes.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

size_t cli_utf8_len(const unsigned char *s, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t n, i;
    uint32_t v;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        v = c & 0x07;
    } else {
        return 0; /* a continuation byte, an overlong lead (C0, C1) or F5+ */
    }
    /* A NUL ends the string, and is not a continuation byte either. */
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    /* Overlong forms, UTF-16 surrogates and code points past U+10FFFF. */
    if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10ffff)) ||
        (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

/* The representation of the character at p: writes it to out (at most
 * 25 bytes with its NUL) and returns how many input bytes it covers. */
static size_t escape_step(const unsigned char *p, int json, char out[32])
{
    static const char hex[] = "0123456789abcdef";
    uint32_t cp;
    size_t n = cli_utf8_len(p, &cp), i, len = 0;

    if (n == 0) {
        /* One stray byte. */
        if (json)
            snprintf(out, 32, "\\u00%c%c", hex[p[0] >> 4], hex[p[0] & 15]);
        else
            snprintf(out, 32, "\\x%c%c", hex[p[0] >> 4], hex[p[0] & 15]);
        return 1;
    }
    if (cp == '\\' || (json && cp == '"')) {
        out[0] = '\\';
        out[1] = (char)cp;
        out[2] = '\0';
        return 1;
    }
    if (json && (cp == '\n' || cp == '\r' || cp == '\t')) {
        out[0] = '\\';
        out[1] = cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
        out[2] = '\0';
        return 1;
    }
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
        if (json) {
            snprintf(out, 32, "\\u00%c%c", hex[cp >> 4], hex[cp & 15]);
        } else {
            /* U+0080-U+009F are two bytes in UTF-8: show both. */
            for (i = 0; i < n; i++) {
                out[len++] = '\\';
                out[len++] = 'x';
                out[len++] = hex[p[i] >> 4];
                out[len++] = hex[p[i] & 15];
            }
            out[len] = '\0';
        }
        return n;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return n;
}

const char *cli_escape(const char *s, char *buf, size_t cap)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = 0;
    char one[32];

    if (cap == 0)
        return "";
    while (*p) {
        size_t used = escape_step(p, 0, one), n = strlen(one);

        /* Only whole characters: a cut escape or UTF-8 sequence would be
         * a new way to confuse the reader. */
        if (len + n >= cap)
            break;
        memcpy(buf + len, one, n);
        len += n;
        p += used;
    }
    buf[len] = '\0';
    return buf;
}

void cli_fput_escaped(FILE *f, const char *s, int json)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    char one[32];

    if (json)
        putc('"', f);
    while (*p) {
        p += escape_step(p, json, one);
        fputs(one, f);
    }
    if (json)
        putc('"', f);
}
