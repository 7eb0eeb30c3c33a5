
/*
 * Copyright (C) ngx_oip_module authors
 *
 * gzip and deflate (zlib) bodies, inflated within a limit.
 */


#ifndef _OIP_INFLATE_H_INCLUDED_
#define _OIP_INFLATE_H_INCLUDED_


#include "oip_ctx.h"


int oip_inflate(oip_ctx_t *c, const uint8_t *src, size_t len, size_t limit,
    uint8_t **out, size_t *outlen);
int oip_inflate_sink(oip_ctx_t *c, const uint8_t *src, size_t len,
    size_t limit, uint64_t *outlen);


#endif /* _OIP_INFLATE_H_INCLUDED_ */
