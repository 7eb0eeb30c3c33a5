
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Protobuf as the gRPC transport writes and reads it: the wire types and
 * field numbers of grpc_predict_v2.proto, a writer into the segment
 * writer (or a counter, to size what nests), a reader of fields, gRPC's
 * frame, and the little-endian loads and stores both directions share.
 */


#ifndef _OIP_PB_H_INCLUDED_
#define _OIP_PB_H_INCLUDED_


#include "oip_message.h"


/* wire types */
#define OIP_PB_VARINT        0
#define OIP_PB_FIXED64       1
#define OIP_PB_LEN           2
#define OIP_PB_FIXED32       5

/* InferParameter's oneof, by field number */
#define OIP_GP_BOOL          1
#define OIP_GP_INT64         2
#define OIP_GP_STRING        3
#define OIP_GP_DOUBLE        4
#define OIP_GP_UINT64        5


/* a protobuf writer; without an out it only counts, to size what nests */

typedef struct {
    oip_out_t             *o;          /* NULL: count */
    size_t                 n;
    int                    err;
} oip_pb_t;


/* a protobuf reader, and the field it read */

typedef struct {
    const uint8_t         *p;
    const uint8_t         *end;
} oip_pbr_t;


typedef struct {
    unsigned               field;
    unsigned               type;
    uint64_t               v;          /* a varint's value */
    const uint8_t         *data;       /* LEN and fixed: the bytes */
    size_t                 len;
} oip_pbf_t;


/* InferTensorContents' fields, by datatype (0: none, raw only) */
extern const unsigned  oip_grpc_typed_field[];


void oip_grpc_frame(uint8_t *p, size_t len);
void oip_pb_raw(oip_pb_t *w, const void *data, size_t len);
void oip_pb_ref(oip_pb_t *w, const uint8_t *data, size_t len);
size_t oip_pb_varint_len(uint64_t v);
uint8_t *oip_pb_varint_put(uint8_t *p, uint64_t v);
void oip_pb_varint(oip_pb_t *w, uint64_t v);
void oip_pb_tag(oip_pb_t *w, unsigned field, unsigned type);
void oip_pb_str(oip_pb_t *w, unsigned field, const uint8_t *s, size_t len);
int oip_pbr_varint(oip_pbr_t *r, uint64_t *v);
int oip_pbr_next(oip_pbr_t *r, oip_pbf_t *f);
int oip_grpc_unframe(oip_ctx_t *c, const uint8_t *body, size_t len,
    oip_pbr_t *r);
int oip_pbr_shape(oip_ctx_t *c, const uint8_t *msg, size_t len,
    unsigned field, uint64_t **dims, size_t *n);
int oip_gres_shape(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg,
    size_t len, unsigned field);
int oip_gres_text(oip_out_t *o, const uint8_t *s, size_t len);

/*
 * A framed ModelInferResponse read into the answer's items and envelope
 * (oip_pb_answer.c), each item's action set and its chunk checked, for
 * oip_envelope_write().  Returns 0, or -1 with the error in the context
 * (502: not a ModelInferResponse; 400: what a REST answer may not say).
 * stream: the message is a ModelStreamInferResponse, whose error_message
 * is the runtime's refusal (502, its words read for a reason code).
 */
int oip_answer_grpc(oip_msg_t *m, oip_envelope_t *env, const uint8_t *body,
    size_t len, unsigned stream);


static inline void
oip_grpc_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) v;
    p[1] = (uint8_t) (v >> 8);
    p[2] = (uint8_t) (v >> 16);
    p[3] = (uint8_t) (v >> 24);
}


static inline void
oip_grpc_put64(uint8_t *p, uint64_t v)
{
    oip_grpc_put32(p, (uint32_t) v);
    oip_grpc_put32(p + 4, (uint32_t) (v >> 32));
}


/* an integer element: its value, and the varint protobuf writes for it */

static inline void
oip_grpc_load_int(oip_dtype_e dt, const uint8_t *p, int64_t *v, uint64_t *u)
{
    size_t    i, size;
    uint64_t  x;

    size = oip_dtypes[dt].size;

    for (i = 0, x = 0; i < size; i++) {
        x |= (uint64_t) p[i] << (8 * i);
    }

    if (dt >= OIP_INT8 && dt <= OIP_INT64 && size < 8
        && (x >> (8 * size - 1)) & 1)
    {
        /* sign-extended: int32's negatives are ten-byte varints */
        x |= ~(uint64_t) 0 << (8 * size);
    }

    *v = (int64_t) x;
    *u = x;
}


/* whether a typed contents value fits the output's datatype */

static inline int
oip_grpc_fits(oip_dtype_e dt, uint64_t v)
{
    int64_t  s;

    s = (int64_t) v;

    switch (dt) {
    case OIP_BOOL:
        return v <= 1;
    case OIP_UINT8:
        return v <= 0xff;
    case OIP_UINT16:
        return v <= 0xffff;
    case OIP_UINT32:
        return v <= 0xffffffff;
    case OIP_INT8:
        return s >= -128 && s <= 127;
    case OIP_INT16:
        return s >= -32768 && s <= 32767;
    case OIP_INT32:
        return s >= INT32_MIN && s <= INT32_MAX;
    default:
        return 1;
    }
}


static inline void
oip_grpc_store_int(uint8_t *p, size_t size, uint64_t v)
{
    size_t  i;

    for (i = 0; i < size; i++) {
        p[i] = (uint8_t) (v >> (8 * i));
    }
}


#endif /* _OIP_PB_H_INCLUDED_ */
