/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What redlock status adds for a read-write lock (Redisson's
 * RReadWriteLock layout): the hash NAME has one field per holder, readers
 * "<client-id>:<owner>" and the writer "<client-id>:<owner>:write", each
 * counting its holds. Any number of readers may hold it at once, or one
 * writer (who may also hold read holds of its own). A plain lock has one
 * holder field, so a name with more than one is a read-write lock held
 * for reading; one reader alone looks like a plain holder, since the
 * "mode" field that tells them apart is not part of what nodes report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/*
 * redlock_lock_inspect_holders() filled p->fields with up to STATUS_FIELDS
 * of the node's holder fields; st.holders says how many there are, and
 * the rest is reported as not listed.
 */
void status_list_fields(probe *p)
{
    p->n_fields = 0;
    if (!p->st.reachable || !p->st.exists)
        return;
    p->n_fields = p->st.holders < STATUS_FIELDS ? p->st.holders : STATUS_FIELDS;
}

static int is_writer(const char *field)
{
    size_t n = strlen(field);

    return n > 6 && strcmp(field + n - 6, ":write") == 0;
}

static int cmp_desc(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* Adds one listed field to the view (fields past the table's end are
 * dropped: 64 distinct holders per name is far beyond a screen). */
static void add_field(rw_view *v, const status_field *f)
{
    size_t k;

    for (k = 0; k < v->n_holders; k++)
        if (strcmp(v->holders[k].field, f->field) == 0)
            break;
    if (k == v->n_holders) {
        if (k == sizeof(v->holders) / sizeof(v->holders[0]))
            return;
        v->n_holders++;
        v->holders[k].field = f->field;
        v->holders[k].writer = is_writer(f->field);
    }
    v->holders[k].nodes++;
    if (f->count > v->holders[k].count)
        v->holders[k].count = f->count;
}

void status_rw_decide(const probe *p, size_t n, int quorum, rw_view *v)
{
    size_t counts[REDLOCK_MAX_NODES], answered = 0, most = 0, i, j;
    int writer = 0;

    memset(v, 0, sizeof(*v));
    for (i = 0; i < n && i < REDLOCK_MAX_NODES; i++) {
        size_t held;

        if (!p[i].st.reachable)
            continue;
        held = p[i].st.exists ? p[i].st.holders : 0;
        counts[answered++] = held;
        if (held > most)
            most = held;
        if (held > p[i].n_fields && held - p[i].n_fields > v->unlisted)
            v->unlisted = held - p[i].n_fields;
        for (j = 0; j < p[i].n_fields; j++)
            add_field(v, &p[i].fields[j]);
    }
    for (i = 0; i < v->n_holders; i++)
        writer |= v->holders[i].writer;
    /* What a quorum of nodes has at least: the quorum-th largest count. */
    qsort(counts, answered, sizeof(counts[0]), cmp_desc);
    if (quorum >= 1 && answered >= (size_t)quorum)
        v->holders_on_quorum = counts[quorum - 1];
    v->mode = writer ? "write" : most > 1 ? "read" : NULL;
}

void status_rw_text(const rw_view *v, size_t n, int quorum)
{
    char field[4 * sizeof(((status_field *)0)->field) + 1];
    size_t i;

    if (!v->mode)
        return;
    if (strcmp(v->mode, "write") == 0)
        printf("read-write lock, write hold:\n");
    else
        printf("read-write lock, read holds: %zu holder(s) on a quorum\n", v->holders_on_quorum);
    for (i = 0; i < v->n_holders; i++) {
        const rw_holder *h = &v->holders[i];

        /* Field names come from the servers: escaped. */
        printf("  %-6s %s: count %lld on %zu of %zu node(s)%s\n", h->writer ? "writer" : "reader",
               cli_escape(h->field, field, sizeof(field)), (long long)h->count, h->nodes, n,
               h->nodes >= (size_t)quorum ? "" : " (not a quorum)");
    }
    if (v->unlisted)
        printf("  and up to %zu more holder(s) per node, counted but not named by the nodes\n",
               v->unlisted);
}

void status_rw_node_json(const probe *p)
{
    size_t j;

    printf(",\"holder_list\":[");
    for (j = 0; j < p->n_fields; j++) {
        printf("%s{\"field\":", j ? "," : "");
        cli_json_string(p->fields[j].field);
        printf(",\"count\":%lld,\"writer\":%s}", (long long)p->fields[j].count,
               is_writer(p->fields[j].field) ? "true" : "false");
    }
    printf("]");
}

void status_rw_json(const rw_view *v, int quorum)
{
    size_t i;

    printf(",\"mode\":");
    if (v->mode)
        cli_json_string(v->mode);
    else
        printf("null");
    printf(",\"holders_on_quorum\":%zu,\"unlisted\":%zu,\"holder_list\":[", v->holders_on_quorum,
           v->unlisted);
    for (i = 0; i < v->n_holders; i++) {
        const rw_holder *h = &v->holders[i];

        printf("%s{\"field\":", i ? "," : "");
        cli_json_string(h->field);
        printf(",\"count\":%lld,\"nodes\":%zu,\"writer\":%s,\"held_by_quorum\":%s}",
               (long long)h->count, h->nodes, h->writer ? "true" : "false",
               h->nodes >= (size_t)quorum ? "true" : "false");
    }
    printf("]");
}
