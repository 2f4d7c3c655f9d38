/* SPDX-License-Identifier: BSD-3-Clause */
/* Node lists ("URI,URI,..."), as REDLOCK_NODES, --nodes and the config
 * file's "nodes =" give them. Pure string work, no I/O. */
#ifndef REDLOCK_CONFIG_NODELIST_H
#define REDLOCK_CONFIG_NODELIST_H

#include <stddef.h>

/* Splits a node list in place: it is cut at each ',' that is followed by a
 * scheme and "://" (any RFC 3986 scheme, so a mistyped one gets its own
 * "unknown scheme" message), by another ',' or by the end, and nowhere
 * else: a redis-sentinel:// URI keeps the commas between its sentinels.
 * Items are not trimmed. Fills uris[0..*n) with pointers into list,
 * appending after the *n items already there (so lists given several times
 * concatenate). Returns REDLOCK_OK, REDLOCK_EURI ("node 2: empty URI") or
 * REDLOCK_EINVAL (more than cap items) with the reason in err; messages
 * name an item's index, never its text (user info may hold a password). */
int redlock__nodelist_split(char *list, const char **uris, size_t cap, size_t *n, char *err,
                            size_t err_cap);

/* The end of the item that starts at p: the ',' that starts the next
 * item, or p's terminating NUL (the rule above). For callers that walk a
 * list without cutting it, such as masking passwords in place. */
const char *redlock__nodelist_item_end(const char *p);

#endif
