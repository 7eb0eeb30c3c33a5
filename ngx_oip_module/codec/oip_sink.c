
/*
 * Copyright (C) ngx_oip_module authors
 *
 * A message's tensors through the caller's sink (requests of any size,
 * oip_buffer): what is made binary is written to the sink's file as the
 * pass meets it, chunks that stay binary are given their places there in
 * the order of the tensors and copied once the layout has found them;
 * the writer keeps only the JSON.  And the other way, an answer planned
 * before its binary part comes: the chunks it will hold, in order.
 */


#include "oip_message.h"


static int oip_count_write(void *data, const uint8_t *p, size_t len,
    uint64_t off);
static void oip_count_behind(void *data, const uint8_t *p);


/*
 * A tensor made binary with a sink: its bytes go to the sink's file, in
 * the order of the tensors, through one window of the sink's block (or,
 * BYTES, one block of the writer); nothing of it is kept in memory.
 */

int
oip_item_spool(oip_msg_t *m, oip_item_t *it, oip_json_t *j,
    const oip_tensor_t *t)
{
    int         rc;
    size_t      size;
    uint64_t    len;
    oip_out_t   w;
    oip_win_t   win;

    it->spooled = 1;
    it->chunk = NULL;
    it->nchunk = 0;

    size = oip_dtypes[t->dt].size;

    if (m->lead) {
        /* BYTES are measured first: their length leads them */

        if (size == 0) {
            if (oip_item_measure(m, j->p, t, &len) != 0) {
                return -1;
            }

        } else {
            len = t->count * size;
        }

        m->sink_off += m->lead(len);
    }

    it->sink_at = m->sink_off;

    if (size == 0) {
        oip_out_init(&w, &m->c, 0);
        oip_out_sink(&w, &m->sink_off);

        rc = oip_data_to_binary(j, t, NULL, &w);

        if (rc == 0) {
            rc = oip_out_cut(&w);
        }

        oip_free(&m->c, w.block);
        it->chunk_len = w.total;

        return rc;
    }

    if (m->win == NULL) {
        m->win = oip_alloc(&m->c, m->c.sink->block);
        if (m->win == NULL) {
            return -1;
        }
    }

    win.buf = m->win;
    win.cap = m->c.sink->block / size;
    win.off = m->sink_off;

    rc = oip_data_to_sink(j, t, &win);

    m->sink_off = win.off;
    it->chunk_len = t->count * size;

    return rc;
}


/*
 * A binary chunk that stays binary, with a sink: its place in the sink's
 * file is kept when its tensor is read, in the order of the tensors; it
 * is copied there once the layout has found it.  One that cannot be
 * there gets none: the layout refuses it.  An answer's BYTES that cannot
 * be JSON stay binary: decided here, where the layout would decide it
 * (the chunks lie in the order of their tensors), so that their place
 * is kept.
 */

void
oip_item_reserve(oip_msg_t *m, oip_item_t *it)
{
    const uint8_t  *bin;

    if (!it->has_bds || it->bds_size > m->blen) {
        return;
    }

    bin = (m->bin_seen <= m->blen - it->bds_size) ? m->bin + m->bin_seen
                                                   : NULL;
    m->bin_seen += it->bds_size;

    if (it->act == OIP_ACT_JSON && it->t.dt == OIP_BYTES
        && m->kind->bytes_stay && bin && !oip_bytes_utf8(bin, it->bds_size))
    {
        it->act = OIP_ACT_PASS;
    }

    if (it->act == OIP_ACT_JSON || it->act == OIP_ACT_DROP
        || it->act == OIP_ACT_FAIL)
    {
        return;
    }

    if (m->lead) {
        m->sink_off += m->lead(it->bds_size);
    }

    it->sink_at = m->sink_off;
    it->reserved = 1;
    m->sink_off += it->bds_size;
}


/*
 * BYTES data at "at" made binary once without a byte kept, for their
 * length, which goes before them (a target's lead, the digest).  What
 * the pass counts and tells is left as it was.
 */

int
oip_item_measure(oip_msg_t *m, const uint8_t *at, const oip_tensor_t *t,
    uint64_t *len)
{
    int                rc;
    size_t             counted;
    uint64_t           off;
    oip_out_t          w;
    oip_json_t         sub;
    oip_sink_t         count;
    const uint8_t     *told;
    const oip_sink_t  *sink;

    sink = m->c.sink;
    counted = m->c.tensor_bytes;
    told = m->c.told;

    count = *sink;
    count.data = len;
    count.write = oip_count_write;
    count.behind = oip_count_behind;
    count.drop = NULL;

    *len = 0;
    off = 0;
    m->c.sink = &count;

    oip_msg_sub(m, &sub, at);
    oip_out_init(&w, &m->c, 0);
    oip_out_sink(&w, &off);

    rc = oip_data_to_binary(&sub, t, NULL, &w);

    if (rc == 0) {
        rc = oip_out_cut(&w);
    }

    oip_free(&m->c, w.block);
    oip_json_done(&sub);

    m->c.sink = sink;
    m->c.tensor_bytes = counted;
    m->c.told = told;

    return rc;
}


static int
oip_count_write(void *data, const uint8_t *p, size_t len, uint64_t off)
{
    (void) p;
    (void) off;

    *(uint64_t *) data += len;

    return 0;
}


/* what is read again is read once more: its pages stay */

static void
oip_count_behind(void *data, const uint8_t *p)
{
    (void) data;
    (void) p;
}


/*
 * A chunk that stays binary copied to the place kept for it in the
 * sink's file, its pages let go as they are read.
 */

int
oip_item_copy(oip_msg_t *m, oip_item_t *it)
{
    size_t          n, len;
    const uint8_t  *p;

    p = it->bin;
    len = it->bds_size;

    for (n = 0; n < len; n += m->c.sink->block) {
        if (oip_sink_write(&m->c, p + n, oip_min(len - n, m->c.sink->block),
                           it->sink_at + n)
            != 0)
        {
            return -1;
        }

        oip_progress(&m->c, p + oip_min(len, n + m->c.sink->block));
    }

    return 0;
}


/*
 * Where the JSON of a message goes with a sink.  All JSON (nothing in
 * the sink's file): the message, as large as its tensors, is written to
 * the file whole.  Part binary, its JSON is a header, in memory, unless
 * it may be larger than the sink's block (JSON data printed from binary
 * chunks, or kept as it came): then it is written to the sink's head
 * file, the sink swapped for one that writes there until the chunks.
 */

void
oip_msg_sunk(oip_msg_t *m, oip_out_t *o)
{
    size_t             i;
    uint64_t           most;
    oip_item_t        *it;
    const oip_sink_t  *sink;

    sink = m->c.sink;

    if (m->to_json && m->sink_off == 0) {
        oip_out_sink(o, &m->sink_off);
        return;
    }

    if (sink->head == NULL) {
        return;
    }

    /* the most it may be: an element printed takes 65 bytes at most,
     * a byte of BYTES 6 (\u00XX) */

    most = m->jlen;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (it->has_bds && it->act == OIP_ACT_JSON) {
            most += oip_dtypes[it->t.dt].size
                    ? it->t.count * OIP_ELEMENT_JSON_MAX
                    : it->bds_size * 6 + it->t.count * 3;
        }
    }

    if (most <= sink->block) {
        return;
    }

    oip_msg_head_sink(m);
    m->headed = 1;

    oip_out_sink(o, &m->head_off);
}


/*
 * The sink swapped for a copy of it that writes to its head file, from
 * offset 0, the body's kept for later (a copy in the message: no pointer
 * to a dead frame is left if the build fails): a JSON header too large
 * for memory, or gRPC's typed contents' tensors, read back.
 */

void
oip_msg_head_sink(oip_msg_t *m)
{
    m->head = *m->c.sink;
    m->head.write = m->c.sink->head;
    m->head_off = 0;

    m->body_sink = m->c.sink;
    m->c.sink = &m->head;
}


/*
 * With a sink: the JSON is what the writer holds, or in the head file;
 * every chunk after it is in the sink's file, converted ones already
 * there, the others copied now into the places kept for them.  A message
 * all JSON is all in the file.
 */

int
oip_msg_chunks_spooled(oip_msg_t *m, oip_out_t *o, oip_result_t *res)
{
    size_t       i;
    oip_item_t  *it;

    if (oip_out_cut(o) != 0) {
        return -1;
    }

    if (m->headed) {
        /* the JSON is all in the head file: the chunks to the body's */
        m->c.sink = m->body_sink;
        oip_free(&m->c, o->block);
        o->block = NULL;
        o->nsegs = 0;
        res->head = 1;

    } else if (o->off) {
        /* all JSON, all in the file (oip_msg_build()): none in memory */
        oip_free(&m->c, o->block);

        if (o->total > m->opt->max_json_size) {
            return oip_fail(&m->c, 413, OIP_REASON_LIMIT, "%s would exceed "
                            "oip_max_json_size (%zu bytes)",
                            m->kind->as_json, m->opt->max_json_size);
        }

        res->header_len = 0;
        res->spooled = m->sink_off;
        res->body_len = m->sink_off;

        return 0;
    }

    res->header_len = o->total;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (it->spooled) {
            res->binary = 1;
            continue;
        }

        if (!it->has_bds || it->act == OIP_ACT_JSON
            || it->act == OIP_ACT_DROP)
        {
            continue;
        }

        if (!it->reserved) {
            return oip_fail(&m->c, 500, OIP_REASON_OTHER, "internal error: "
                            "a chunk without its place");
        }

        res->binary = 1;

        if (oip_item_copy(m, it) != 0) {
            return -1;
        }
    }

    res->segs = o->segs;
    res->nsegs = o->nsegs;
    res->spooled = m->sink_off;
    res->body_len = o->total + m->sink_off;

    return 0;
}


/*
 * Planned (oip_response_plan()): the JSON with its holes is what the
 * writer holds; each chunk of the binary part is made JSON in its hole or
 * dropped.  One that stays binary, or JSON data made binary, cannot be
 * sent before the JSON that comes after it in the answer: that answer is
 * held, as before.
 */

int
oip_msg_chunks_planned(oip_msg_t *m, oip_out_t *o, oip_result_t *res)
{
    size_t        i, n;
    oip_item_t   *it;
    oip_chunk_t  *ch;

    if (oip_out_cut(o) != 0) {
        return -1;
    }

    n = 0;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (it->act == OIP_ACT_BINARY) {
            /* JSON data the client gets binary: binary follows the JSON */
            m->unplanned = 1;
            return 0;
        }

        if (!it->has_bds) {
            continue;
        }

        if (it->act != OIP_ACT_JSON && it->act != OIP_ACT_DROP) {
            m->unplanned = 1;
            return 0;
        }

        n++;
    }

    ch = oip_alloc(&m->c, n * sizeof(oip_chunk_t));
    if (ch == NULL) {
        return -1;
    }

    res->chunks = ch;
    res->nchunks = n;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (it->has_bds) {
            ch->len = it->bds_size;
            ch->dt = it->t.dt;
            ch->size = oip_dtypes[it->t.dt].size;
            ch->drop = (it->act == OIP_ACT_DROP);
            ch++;
        }
    }

    res->segs = o->segs;
    res->nsegs = o->nsegs;
    res->header_len = o->total;
    res->body_len = o->total;

    return 0;
}
