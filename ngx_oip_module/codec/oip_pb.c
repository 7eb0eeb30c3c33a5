
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Protobuf, from the field numbers of the protocol's grpc_predict_v2.proto
 * and Triton's two more parameter kinds (double, uint64): a writer into
 * the segment writer, or a counter that sizes what nests; a reader of
 * fields, as protobuf parsers must take them (packed or not, unknown
 * fields skipped); gRPC's length prefix; and what both directions write
 * of a message as JSON (strings, shapes).
 */


#include "oip_pb.h"
#include "oip_number.h"



/* InferTensorContents' fields, by datatype (0: none, raw only) */
const unsigned  oip_grpc_typed_field[] = {
    1,  /* BOOL:   bool_contents */
    4,  /* UINT8:  uint_contents */
    4,  /* UINT16 */
    4,  /* UINT32 */
    5,  /* UINT64: uint64_contents */
    2,  /* INT8:   int_contents */
    2,  /* INT16 */
    2,  /* INT32 */
    3,  /* INT64:  int64_contents */
    0,  /* FP16 */
    0,  /* BF16 */
    6,  /* FP32:   fp32_contents */
    7,  /* FP64:   fp64_contents */
    8   /* BYTES:  bytes_contents */
};


/* ---------------------------------------------------------- writing */

/* gRPC's length prefix: not compressed, then the length, big-endian */

void
oip_grpc_frame(uint8_t *p, size_t len)
{
    p[0] = 0;
    p[1] = (uint8_t) (len >> 24);
    p[2] = (uint8_t) (len >> 16);
    p[3] = (uint8_t) (len >> 8);
    p[4] = (uint8_t) len;
}


void
oip_pb_raw(oip_pb_t *w, const void *data, size_t len)
{
    w->n += len;

    if (w->o && !w->err && oip_out_write(w->o, data, len) != 0) {
        w->err = 1;
    }
}


void
oip_pb_ref(oip_pb_t *w, const uint8_t *data, size_t len)
{
    w->n += len;

    if (w->o && !w->err && oip_out_ref(w->o, data, len) != 0) {
        w->err = 1;
    }
}


size_t
oip_pb_varint_len(uint64_t v)
{
    size_t  n;

    for (n = 1; v >= 0x80; v >>= 7) {
        n++;
    }

    return n;
}


uint8_t *
oip_pb_varint_put(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t) (v | 0x80);
        v >>= 7;
    }

    *p++ = (uint8_t) v;

    return p;
}


void
oip_pb_varint(oip_pb_t *w, uint64_t v)
{
    uint8_t  buf[10];

    if (w->o == NULL) {
        w->n += oip_pb_varint_len(v);
        return;
    }

    oip_pb_raw(w, buf, oip_pb_varint_put(buf, v) - buf);
}


void
oip_pb_tag(oip_pb_t *w, unsigned field, unsigned type)
{
    oip_pb_varint(w, (uint64_t) field << 3 | type);
}


/* a string or bytes field; proto3 leaves out what is empty */

void
oip_pb_str(oip_pb_t *w, unsigned field, const uint8_t *s, size_t len)
{
    if (len == 0) {
        return;
    }

    oip_pb_tag(w, field, OIP_PB_LEN);
    oip_pb_varint(w, len);
    oip_pb_raw(w, s, len);
}

/* ------------------------------------------------------------ reading */

int
oip_pbr_varint(oip_pbr_t *r, uint64_t *v)
{
    unsigned  shift;
    uint64_t  x;

    x = 0;

    for (shift = 0; shift < 64; shift += 7) {
        if (r->p == r->end) {
            return -1;
        }

        x |= (uint64_t) (*r->p & 0x7f) << shift;

        if ((*r->p++ & 0x80) == 0) {
            *v = x;
            return 0;
        }
    }

    return -1;
}


/* the next field; 0 at the end, -1 for what is not protobuf */

int
oip_pbr_next(oip_pbr_t *r, oip_pbf_t *f)
{
    uint64_t  tag, len;

    if (r->p == r->end) {
        return 0;
    }

    if (oip_pbr_varint(r, &tag) != 0 || (tag >> 3) == 0
        || (tag >> 3) > 0x1fffffff)
    {
        return -1;
    }

    f->field = (unsigned) (tag >> 3);
    f->type = (unsigned) (tag & 7);
    f->v = 0;
    f->data = NULL;
    f->len = 0;

    switch (f->type) {

    case OIP_PB_VARINT:
        return (oip_pbr_varint(r, &f->v) == 0) ? 1 : -1;

    case OIP_PB_FIXED64:
    case OIP_PB_FIXED32:
        len = (f->type == OIP_PB_FIXED64) ? 8 : 4;
        break;

    case OIP_PB_LEN:
        if (oip_pbr_varint(r, &len) != 0) {
            return -1;
        }

        break;

    default:
        /* groups: not in this protocol */
        return -1;
    }

    if (len > (uint64_t) (r->end - r->p)) {
        return -1;
    }

    f->data = r->p;
    f->len = (size_t) len;
    r->p += len;

    return 1;
}


/* one gRPC message, as its 5-byte prefix frames it */

int
oip_grpc_unframe(oip_ctx_t *c, const uint8_t *body, size_t len,
    oip_pbr_t *r)
{
    size_t  mlen;

    if (len < 5) {
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer holds no "
                        "message (%zu bytes)", len);
    }

    if (body[0] != 0) {
        return oip_fail(c, 502, OIP_REASON_ENCODING, "the gRPC answer is "
                        "compressed (grpc-encoding), which is not supported");
    }

    mlen = (size_t) body[1] << 24 | (size_t) body[2] << 16
           | (size_t) body[3] << 8 | body[4];

    if (mlen != len - 5) {
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer's message "
                        "of %zu bytes comes with %zu", mlen, len - 5);
    }

    r->p = body + 5;
    r->end = body + len;

    return 0;
}


/*
 * A repeated int64 field (a shape), packed, or one field a dimension, or
 * both, as protobuf parsers must take it: *dims from the allocator (NULL
 * when there is none).  Returns 0, or -1 (502 for a broken field).
 */

int
oip_pbr_shape(oip_ctx_t *c, const uint8_t *msg, size_t len, unsigned field,
    uint64_t **dims, size_t *n)
{
    size_t     cap;
    uint64_t   v, *d;
    oip_pbr_t  r, s;
    oip_pbf_t  f;

    r.p = msg;
    r.end = msg + len;

    *dims = NULL;
    *n = 0;
    cap = 0;

    while (oip_pbr_next(&r, &f) == 1) {
        if (f.field != field) {
            continue;
        }

        s.p = f.data;
        s.end = f.data ? f.data + f.len : NULL;

        while (f.type == OIP_PB_VARINT || s.p < s.end) {
            if (f.type == OIP_PB_VARINT) {
                v = f.v;

            } else if (f.type != OIP_PB_LEN || oip_pbr_varint(&s, &v) != 0) {
                return oip_fail(c, 502, OIP_REASON_SHAPE, "the gRPC answer has "
                                "a broken shape");
            }

            if (*n == cap) {
                d = oip_grow(c, *dims, *n, &cap, sizeof(uint64_t));
                if (d == NULL) {
                    return -1;
                }

                *dims = d;
            }

            (*dims)[(*n)++] = v;

            if (f.type == OIP_PB_VARINT) {
                break;
            }
        }
    }

    return 0;
}


/* a shape as a JSON array, each dimension as int64 (-1: any) */

int
oip_gres_shape(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field)
{
    int        rc;
    size_t     i, n;
    uint8_t    num[OIP_NUM_MAX];
    uint64_t  *dims;

    if (oip_pbr_shape(c, msg, len, field, &dims, &n) != 0) {
        return -1;
    }

    rc = oip_out_write(o, "[", 1);

    for (i = 0; rc == 0 && i < n; i++) {
        rc = (i && oip_out_write(o, ",", 1) != 0)
             || oip_out_write(o, num, oip_print_i64(num, (int64_t) dims[i])
                                      - num) != 0;
    }

    oip_free(c, dims);

    return (rc == 0) ? oip_out_write(o, "]", 1) : -1;
}


/* a protobuf string as a JSON string */

int
oip_gres_text(oip_out_t *o, const uint8_t *s, size_t len)
{
    size_t  n;

    if (len == 0) {
        /* an absent field: s may be NULL */
        return oip_out_write(o, "\"\"", 2);
    }

    if (!oip_utf8_valid(s, len)) {
        return oip_fail(o->ctx, 502, OIP_REASON_OTHER, "the gRPC answer has a "
                        "string that is not UTF-8");
    }

    n = oip_json_escape(NULL, s, len);

    if (oip_out_reserve(o, n + 2) != 0) {
        return -1;
    }

    *o->pos++ = '"';
    o->pos += oip_json_escape(o->pos, s, len);
    *o->pos++ = '"';

    return 0;
}
