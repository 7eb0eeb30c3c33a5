
/*
 * Copyright (C) ngx_oip_module authors
 *
 * One conversion's context: the caller's allocator, the first error (the
 * one the client sees), and the tensor bytes counted against the limit.
 */


#ifndef _OIP_CTX_H_INCLUDED_
#define _OIP_CTX_H_INCLUDED_


#include <string.h>

#include "oip_codec.h"


#define oip_min(a, b)        ((a) < (b) ? (a) : (b))
#define oip_max(a, b)        ((a) > (b) ? (a) : (b))

/* names in messages are cut to this many bytes */
#define OIP_NAME_MAX         64


typedef struct {
    const oip_alloc_t     *alloc;
    int                    status;     /* of the first error, or 0 */
    char                  *error;      /* OIP_ERROR_LEN bytes */
    oip_reason_e          *reason;     /* of the first error */
    size_t                 tensor_bytes;
    size_t                 max_tensor_size;

    /* requests of any size: where tensors go, what the pass has told */
    const oip_sink_t      *sink;
    const uint8_t         *told;
} oip_ctx_t;


/*
 * The pass is at p: every sink->block bytes it tells the caller, which
 * lets the input behind it go.  One test when there is no sink.
 */
#define oip_progress(c, p)                                                    \
    if ((c)->sink && (p) > (c)->told                                          \
        && (size_t) ((p) - (c)->told) >= (c)->sink->block)                    \
    {                                                                         \
        oip_progress_tell(c, p);                                              \
    }


void oip_ctx_init(oip_ctx_t *c, const oip_alloc_t *a, char *error,
    oip_reason_e *reason, size_t max_tensor_size);
void *oip_alloc(oip_ctx_t *c, size_t size);
void oip_free(oip_ctx_t *c, void *p);
void *oip_grow(oip_ctx_t *c, void *elts, size_t n, size_t *cap,
    size_t size);
int oip_fail(oip_ctx_t *c, int status, oip_reason_e reason,
    const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
int oip_count_tensor(oip_ctx_t *c, size_t n);
void oip_progress_tell(oip_ctx_t *c, const uint8_t *p);
int oip_sink_write(oip_ctx_t *c, const uint8_t *p, size_t len,
    uint64_t off);


#endif /* _OIP_CTX_H_INCLUDED_ */
