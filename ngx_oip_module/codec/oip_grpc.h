
/*
 * Copyright (C) ngx_oip_module authors
 *
 * What oip_grpc.c needs of the pipeline, and the little-endian loads and
 * stores its two directions share.
 */


#ifndef _OIP_GRPC_H_INCLUDED_
#define _OIP_GRPC_H_INCLUDED_


#include "oip_message.h"


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


#endif /* _OIP_GRPC_H_INCLUDED_ */
