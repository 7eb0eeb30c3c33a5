
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The output writer: a rewritten message is a list of segments, large
 * unchanged pieces of the input referenced, new bytes written into
 * blocks that grow geometrically.
 */


#ifndef _OIP_OUT_H_INCLUDED_
#define _OIP_OUT_H_INCLUDED_


#include "oip_ctx.h"


/* pieces shorter than this are copied rather than referenced */
#define OIP_REF_MIN          512


typedef struct {
    oip_ctx_t             *ctx;
    uint8_t               *pos;        /* free space of the current block */
    uint8_t               *end;
    uint8_t               *mark;       /* start of bytes not yet in segs */
    oip_seg_t             *segs;
    size_t                 nsegs;
    size_t                 cap;
    size_t                 next;       /* size of the next block */
    size_t                 total;      /* bytes in segs */
    size_t                 limit;      /* at most this many bytes; 0: any */
    const char            *over;       /* what would be too large */

    /* an input that is also a file's bytes from its start, or NULL */
    const uint8_t         *file;
    size_t                 file_len;

    /*
     * or, to the context's sink (oip_out_sink()): one block, written at
     * *off when full and used again; total counts what was written
     */
    uint64_t              *off;
    uint8_t               *block;
} oip_out_t;


void oip_out_init(oip_out_t *o, oip_ctx_t *c, size_t first);
int oip_out_grow(oip_out_t *o, size_t n);
int oip_out_write(oip_out_t *o, const void *data, size_t len);
int oip_out_ref(oip_out_t *o, const uint8_t *data, size_t len);
int oip_out_cut(oip_out_t *o);
void oip_out_sink(oip_out_t *o, uint64_t *off);
int oip_out_hole(oip_out_t *o, size_t len);

#define oip_out_reserve(o, n)                                                 \
    ((size_t) ((o)->end - (o)->pos) >= (n) ? 0 : oip_out_grow(o, n))

#define oip_out_len(o)       ((o)->total + (size_t) ((o)->pos - (o)->mark))


#endif /* _OIP_OUT_H_INCLUDED_ */
