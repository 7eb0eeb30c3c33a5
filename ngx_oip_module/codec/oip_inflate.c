
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Request bodies sent with Content-Encoding gzip or deflate (the zlib
 * wrapper, as Triton and its clients use it), inflated before anything
 * looks at them, within the limits.
 */


#include <zlib.h>

#include "oip_inflate.h"


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

    if (len == 0) {
        return oip_fail(c, 400, OIP_REASON_ENCODING, "the compressed body is "
                        "empty");
    }

    memset(&z, 0, sizeof(z_stream));
    z.zalloc = oip_zalloc;
    z.zfree = oip_zfree;
    z.opaque = c;

    /* 15 + 32: a zlib or a gzip wrapper, whichever it is */

    if (inflateInit2(&z, 15 + 32) != Z_OK) {
        return oip_fail(c, 500, OIP_REASON_OTHER, "out of memory");
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
        /* zlib counts in uInt: feed it at most 1 GB at a time */

        z.avail_in = (uInt) oip_min(len - (size_t) (z.next_in - src),
                                    1U << 30);
        z.avail_out = (uInt) oip_min(cap - (size_t) (z.next_out - buf),
                                     1U << 30);

        rc = inflate(&z, Z_NO_FLUSH);

        if (rc == Z_STREAM_END) {
            break;
        }

        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            oip_fail(c, rc == Z_MEM_ERROR ? 500 : 400, OIP_REASON_ENCODING,
                     "the compressed body cannot be decompressed: %s",
                     z.msg ? z.msg : "invalid data");
            goto failed;
        }

        if (z.next_in == src + len && z.avail_out != 0) {
            oip_fail(c, 400, OIP_REASON_ENCODING, "the compressed body is cut "
                     "short");
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

    if (z.next_in != src + len) {
        oip_fail(c, 400, OIP_REASON_ENCODING, "%zu bytes follow the end of the "
                 "compressed body", (size_t) (src + len - z.next_in));
        goto failed;
    }

    if ((size_t) (z.next_out - buf) > limit) {
        oip_fail(c, 413, OIP_REASON_LIMIT, "the decompressed body exceeds "
                 "oip_max_json_size plus oip_max_tensor_size (%zu bytes)",
                 limit);
        goto failed;
    }

    *out = buf;
    *outlen = z.next_out - buf;

    inflateEnd(&z);

    return 0;

failed:

    inflateEnd(&z);
    oip_free(c, buf);

    return -1;
}
