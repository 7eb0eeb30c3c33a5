
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Request bodies sent with Content-Encoding gzip or deflate (the zlib
 * wrapper, as Triton and its clients use it), inflated before anything
 * looks at them, within the limits.
 */


#include <zlib.h>

#include "oip_inflate.h"


static int oip_inflate_init(oip_ctx_t *c, z_stream *z, size_t len);
static int oip_inflate_step(oip_ctx_t *c, z_stream *z, const uint8_t *src,
    size_t len, size_t room);
static int oip_inflate_end(oip_ctx_t *c, z_stream *z, const uint8_t *src,
    size_t len, uint64_t total, size_t limit);
static voidpf oip_zalloc(voidpf opaque, uInt items, uInt size);
static void oip_zfree(voidpf opaque, voidpf address);


static voidpf
oip_zalloc(voidpf opaque, uInt items, uInt size)
{
    oip_ctx_t  *c = opaque;

    return c->alloc->alloc(c->alloc->data, (size_t) items * size);
}


static void
oip_zfree(voidpf opaque, voidpf address)
{
    oip_free(opaque, address);
}


int
oip_inflate(oip_ctx_t *c, const uint8_t *src, size_t len, size_t limit,
    uint8_t **out, size_t *outlen)
{
    int        rc;
    size_t     cap, ncap;
    uint8_t   *buf, *nbuf;
    z_stream   z;

    if (oip_inflate_init(c, &z, len) != 0) {
        return -1;
    }

    cap = oip_min(oip_max(len * 4, 4096), limit + 1);

    buf = oip_alloc(c, cap);
    if (buf == NULL) {
        inflateEnd(&z);
        return -1;
    }

    z.next_in = (uint8_t *) src;
    z.next_out = buf;

    for ( ;; ) {
        rc = oip_inflate_step(c, &z, src, len,
                              cap - (size_t) (z.next_out - buf));

        if (rc == 1) {
            break;
        }

        if (rc != 0) {
            goto failed;
        }

        if (z.avail_out == 0) {
            if (cap > limit) {
                oip_fail(c, 413, OIP_REASON_LIMIT, "the decompressed body "
                         "exceeds oip_max_json_size plus oip_max_tensor_size "
                         "(%zu bytes)", limit);
                goto failed;
            }

            ncap = oip_min(cap * 2, limit + 1);

            nbuf = oip_alloc(c, ncap);
            if (nbuf == NULL) {
                goto failed;
            }

            memcpy(nbuf, buf, z.next_out - buf);
            z.next_out = nbuf + (z.next_out - buf);
            oip_free(c, buf);

            buf = nbuf;
            cap = ncap;
        }
    }

    if (oip_inflate_end(c, &z, src, len, z.next_out - buf, limit) != 0) {
        oip_free(c, buf);
        return -1;
    }

    *out = buf;
    *outlen = z.next_out - buf;

    return 0;

failed:

    inflateEnd(&z);
    oip_free(c, buf);

    return -1;
}


/*
 * The same, the output written to the sink's file a block at a time
 * (*outlen bytes from offset 0), the input let go behind: a body of any
 * size in one buffer of the sink's block.
 */

int
oip_inflate_sink(oip_ctx_t *c, const uint8_t *src, size_t len, size_t limit,
    uint64_t *outlen)
{
    int        rc;
    size_t     n, block;
    uint8_t   *buf;
    uint64_t   total;
    z_stream   z;

    if (oip_inflate_init(c, &z, len) != 0) {
        return -1;
    }

    block = c->sink->block;

    buf = oip_alloc(c, block);
    if (buf == NULL) {
        inflateEnd(&z);
        return -1;
    }

    z.next_in = (uint8_t *) src;
    z.next_out = buf;
    total = 0;

    for ( ;; ) {
        /* at most limit + 1 bytes in all: over it, a 413, as in memory */

        n = z.next_out - buf;

        rc = oip_inflate_step(c, &z, src, len,
                              oip_min(block - n, limit + 1 - total - n));

        oip_progress(c, z.next_in);

        n = z.next_out - buf;

        if (rc == 0 && total + n > limit) {
            rc = oip_fail(c, 413, OIP_REASON_LIMIT, "the decompressed body "
                          "exceeds oip_max_json_size plus "
                          "oip_max_tensor_size (%zu bytes)", limit);
        }

        if (rc == 1 || (rc == 0 && n == block)) {
            if (n && oip_sink_write(c, buf, n, total) != 0) {
                rc = -1;
            }

            total += n;
            z.next_out = buf;
        }

        if (rc != 0) {
            break;
        }
    }

    if (rc < 0) {
        inflateEnd(&z);
        oip_free(c, buf);
        return -1;
    }

    oip_free(c, buf);

    if (oip_inflate_end(c, &z, src, len, total, limit) != 0) {
        return -1;
    }

    *outlen = total;

    return 0;
}


static int
oip_inflate_init(oip_ctx_t *c, z_stream *z, size_t len)
{
    if (len == 0) {
        return oip_fail(c, 400, OIP_REASON_ENCODING, "the compressed body is "
                        "empty");
    }

    memset(z, 0, sizeof(z_stream));
    z->zalloc = oip_zalloc;
    z->zfree = oip_zfree;
    z->opaque = c;

    /* 15 + 32: a zlib or a gzip wrapper, whichever it is */

    if (inflateInit2(z, 15 + 32) != Z_OK) {
        return oip_fail(c, 500, OIP_REASON_OTHER, "out of memory");
    }

    return 0;
}


/*
 * One call of inflate() with room bytes of output at z->next_out: 1 at
 * the stream's end, 0 to go on, -1 (failed, the stream still to end).
 */

static int
oip_inflate_step(oip_ctx_t *c, z_stream *z, const uint8_t *src, size_t len,
    size_t room)
{
    int  rc;

    /* zlib counts in uInt: feed it at most 1 GB at a time */

    z->avail_in = (uInt) oip_min(len - (size_t) (z->next_in - src),
                                 1U << 30);
    z->avail_out = (uInt) oip_min(room, 1U << 30);

    rc = inflate(z, Z_NO_FLUSH);

    if (rc == Z_STREAM_END) {
        return 1;
    }

    if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return oip_fail(c, rc == Z_MEM_ERROR ? 500 : 400, OIP_REASON_ENCODING,
                        "the compressed body cannot be decompressed: %s",
                        z->msg ? z->msg : "invalid data");
    }

    if (z->next_in == src + len && z->avail_out != 0) {
        return oip_fail(c, 400, OIP_REASON_ENCODING, "the compressed body is "
                        "cut short");
    }

    return 0;
}


/* after the stream's end: nothing may follow it; the stream ended */

static int
oip_inflate_end(oip_ctx_t *c, z_stream *z, const uint8_t *src, size_t len,
    uint64_t total, size_t limit)
{
    inflateEnd(z);

    if (z->next_in != src + len) {
        return oip_fail(c, 400, OIP_REASON_ENCODING, "%zu bytes follow the "
                        "end of the compressed body",
                        (size_t) (src + len - z->next_in));
    }

    if (total > limit) {
        return oip_fail(c, 413, OIP_REASON_LIMIT, "the decompressed body "
                        "exceeds oip_max_json_size plus oip_max_tensor_size "
                        "(%zu bytes)", limit);
    }

    return 0;
}
