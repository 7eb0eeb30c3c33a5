
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The output writer.  A rewritten message is a list of segments: large
 * unchanged pieces of the input are referenced, not copied; new bytes
 * go into blocks that grow geometrically, so nothing is sized twice and
 * a huge output is never one huge allocation.
 */


#include "oip_out.h"


#define OIP_BLOCK_MAX        (1024 * 1024)


void
oip_out_init(oip_out_t *o, oip_ctx_t *c, size_t first)
{
    memset(o, 0, sizeof(oip_out_t));

    o->ctx = c;
    o->next = first;
}


static int oip_out_spill(oip_out_t *o);


/* what is written goes to the sink's file at *off, not to segments */

void
oip_out_sink(oip_out_t *o, uint64_t *off)
{
    o->off = off;
}


static int
oip_out_spill(oip_out_t *o)
{
    size_t  len;

    len = o->pos - o->block;

    if (len && oip_sink_write(o->ctx, o->block, len, *o->off) != 0) {
        return -1;
    }

    *o->off += len;
    o->total += len;
    o->pos = o->block;
    o->mark = o->block;

    return 0;
}


static int
oip_out_push(oip_out_t *o, const uint8_t *data, size_t len)
{
    oip_seg_t  *segs;

    if (o->nsegs == o->cap) {
        segs = oip_grow(o->ctx, o->segs, o->nsegs, &o->cap,
                        sizeof(oip_seg_t));
        if (segs == NULL) {
            return -1;
        }

        o->segs = segs;
    }

    o->segs[o->nsegs].data = data;
    o->segs[o->nsegs].len = len;

    /* a piece of the input that is in its file too says where */
    o->segs[o->nsegs].file = (o->file && data >= o->file
                              && len <= o->file_len
                              && (size_t) (data - o->file)
                                 <= o->file_len - len)
                             ? (int64_t) (data - o->file) : -1;
    o->nsegs++;
    o->total += len;

    return 0;
}


/* a segment without data: len bytes that are not here (not counted) */

int
oip_out_hole(oip_out_t *o, size_t len)
{
    if (oip_out_cut(o) != 0 || oip_out_push(o, NULL, 0) != 0) {
        return -1;
    }

    o->segs[o->nsegs - 1].len = len;

    return 0;
}


int
oip_out_cut(oip_out_t *o)
{
    uint8_t *mark;

    if (o->off) {
        return oip_out_spill(o);
    }

    if (o->pos == o->mark) {
        return 0;
    }

    mark = o->mark;
    o->mark = o->pos;

    return oip_out_push(o, mark, o->pos - mark);
}


static int
oip_out_over(oip_out_t *o, size_t n)
{
    if (o->limit && n > o->limit - oip_min(oip_out_len(o), o->limit)) {
        return oip_fail(o->ctx, 413, OIP_REASON_LIMIT, "%s would exceed "
                        "oip_max_json_size (%zu bytes)", o->over, o->limit);
    }

    return 0;
}


int
oip_out_grow(oip_out_t *o, size_t n)
{
    size_t   size;
    uint8_t *block;

    /*
     * The limit: exceeded already (what is reserved may not all be
     * used), so that a message is refused exactly when its JSON is over
     * it, in memory or in a sink's file, whatever the blocks
     */

    if (oip_out_over(o, 0) != 0) {
        return -1;
    }

    if (o->off) {
        /* one block, written out when full, as large as one element */

        if (oip_out_spill(o) != 0) {
            return -1;
        }

        if (o->block && (size_t) (o->end - o->block) >= n) {
            return 0;
        }

        oip_free(o->ctx, o->block);

        size = oip_max(o->ctx->sink->block, n);

        o->block = oip_alloc(o->ctx, size);
        if (o->block == NULL) {
            return -1;
        }

        o->pos = o->block;
        o->mark = o->block;
        o->end = o->block + size;

        return 0;
    }

    if (oip_out_cut(o) != 0) {
        return -1;
    }

    size = oip_max(o->next, n);

    block = oip_alloc(o->ctx, size);
    if (block == NULL) {
        return -1;
    }

    o->pos = block;
    o->mark = block;
    o->end = block + size;

    if (o->next < OIP_BLOCK_MAX) {
        o->next *= 2;
    }

    return 0;
}


int
oip_out_write(oip_out_t *o, const void *data, size_t len)
{
    if (oip_out_reserve(o, len) != 0) {
        return -1;
    }

    memcpy(o->pos, data, len);
    o->pos += len;

    return 0;
}


int
oip_out_ref(oip_out_t *o, const uint8_t *data, size_t len)
{
    if (len < OIP_REF_MIN) {
        return len ? oip_out_write(o, data, len) : 0;
    }

    if (oip_out_over(o, len) != 0 || oip_out_cut(o) != 0) {
        return -1;
    }

    if (o->off) {
        /* to the sink's file: a piece of the input is copied there */

        if (oip_sink_write(o->ctx, data, len, *o->off) != 0) {
            return -1;
        }

        *o->off += len;
        o->total += len;

        return 0;
    }

    return oip_out_push(o, data, len);
}
