
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Tensors: the thirteen datatypes, JSON "data" to little-endian binary
 * and back, and the checks binary data must pass.
 */


#ifndef _OIP_TENSOR_H_INCLUDED_
#define _OIP_TENSOR_H_INCLUDED_


#include "oip_json.h"
#include "oip_out.h"


typedef enum {
    OIP_BOOL = 0,
    OIP_UINT8,
    OIP_UINT16,
    OIP_UINT32,
    OIP_UINT64,
    OIP_INT8,
    OIP_INT16,
    OIP_INT32,
    OIP_INT64,
    OIP_FP16,
    OIP_BF16,
    OIP_FP32,
    OIP_FP64,
    OIP_BYTES,
    OIP_DT_NONE
} oip_dtype_e;


typedef struct {
    const char            *name;
    size_t                 len;
    size_t                 size;       /* 0 for BYTES */
} oip_dtype_t;


extern const oip_dtype_t  oip_dtypes[];


typedef struct {
    const oip_str_t       *name;       /* for messages */
    const char            *what;       /* "input" or "output" */
    oip_dtype_e            dt;
    const uint64_t        *shape;
    size_t                 rank;
    uint64_t               count;      /* product of shape */
    unsigned               finite:1;   /* NaN and Infinity refused */
    unsigned               null_nan:1; /* null is a float's NaN */
    unsigned               exact:1;    /* integers read as floats: each
                                          one an integer, kept exactly */
} oip_tensor_t;


/* why a NaN or an infinity is refused: the upstream reads plain JSON */
#define OIP_NONFINITE_WHY                                                     \
    "the upstream reads JSON without NaN or Infinity "                        \
    "(oip_upstream_nonfinite refuse)"


/*
 * A tensor converted through a window (requests of any size): cap
 * elements at a time in buf, each full window written to the sink's
 * file at off, which moves on.
 */

typedef struct {
    uint8_t               *buf;
    uint64_t               base;       /* the index of buf's first element */
    uint64_t               cap;
    uint64_t               off;
} oip_win_t;

/* elements converted or checked between two looks at the progress */
#define OIP_SINK_RUN         65536


oip_dtype_e oip_dtype_find(const uint8_t *s, size_t len);
int oip_shape_count(const uint64_t *shape, size_t rank, uint64_t *count);
int oip_data_to_binary(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst,
    oip_out_t *bytes);
int oip_data_to_sink(oip_json_t *j, const oip_tensor_t *t, oip_win_t *w);
int oip_binary_check(oip_ctx_t *c, const oip_tensor_t *t,
    const uint8_t *src, size_t len, int status);
int oip_binary_to_data(oip_ctx_t *c, const oip_tensor_t *t,
    const uint8_t *src, size_t len, oip_out_t *o, int status);
int oip_bytes_utf8(const uint8_t *src, size_t len);
const char *oip_shape_str(const oip_tensor_t *t, char *buf, size_t size);


#endif /* _OIP_TENSOR_H_INCLUDED_ */
