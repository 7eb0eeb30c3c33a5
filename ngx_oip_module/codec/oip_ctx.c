
/*
 * Copyright (C) ngx_oip_module authors
 *
 * One conversion's context: memory from the caller's allocator (an
 * nginx pool in the module, an arena in the tests), arrays that grow,
 * the first error, and the tensor bytes counted against the limit.
 */


#include <stdarg.h>
#include <stdio.h>

#include "oip_ctx.h"


/*
 * The first room an array gets: about 256 bytes, one element at least
 * (most requests have one input, and an item is larger than that);
 * then OIP_GROW_MIN elements at least, then twice as many each time.
 */
#define OIP_GROW_BYTES       256
#define OIP_GROW_MIN         4


void
oip_ctx_init(oip_ctx_t *c, const oip_alloc_t *a, char *error,
    oip_reason_e *reason, size_t max_tensor_size)
{
    memset(c, 0, sizeof(oip_ctx_t));

    c->alloc = a;
    c->error = error;
    c->reason = reason;
    c->max_tensor_size = max_tensor_size;
}


void *
oip_alloc(oip_ctx_t *c, size_t size)
{
    void  *p;

    p = c->alloc->alloc(c->alloc->data, size ? size : 1);

    if (p == NULL) {
        oip_fail(c, 500, OIP_REASON_OTHER, "out of memory");
    }

    return p;
}


void
oip_free(oip_ctx_t *c, void *p)
{
    if (p != NULL && c->alloc->free != NULL) {
        c->alloc->free(c->alloc->data, p);
    }
}


/*
 * Room for more: elts holds n elements of size bytes in room for *cap.
 * Returns a block twice as large with the n elements in it, or NULL
 * (the error set).  The old block goes back to the allocator: a pool
 * frees only large ones, so growth by doubling wastes at most as much
 * as it keeps.
 */

void *
oip_grow(oip_ctx_t *c, void *elts, size_t n, size_t *cap, size_t size)
{
    size_t    want;
    uint8_t  *p;

    want = *cap ? oip_max(*cap * 2, OIP_GROW_MIN)
                : oip_max(OIP_GROW_BYTES / size, 1);

    p = oip_alloc(c, want * size);
    if (p == NULL) {
        return NULL;
    }

    if (n) {
        memcpy(p, elts, n * size);
    }

    oip_free(c, elts);

    *cap = want;

    return p;
}


int
oip_fail(oip_ctx_t *c, int status, oip_reason_e reason, const char *fmt, ...)
{
    va_list  args;

    /* the first error is the one the client sees */

    if (c->status == 0) {
        c->status = status;
        *c->reason = reason;

        va_start(args, fmt);
        vsnprintf(c->error, OIP_ERROR_LEN, fmt, args);
        va_end(args);
    }

    return -1;
}


int
oip_count_tensor(oip_ctx_t *c, size_t n)
{
    if (n > c->max_tensor_size - c->tensor_bytes) {
        return oip_fail(c, 413, OIP_REASON_LIMIT, "tensor data exceeds "
                        "oip_max_tensor_size (%zu bytes)", c->max_tensor_size);
    }

    c->tensor_bytes += n;

    return 0;
}


void
oip_progress_tell(oip_ctx_t *c, const uint8_t *p)
{
    c->told = p;
    c->sink->behind(c->sink->data, p);
}


/* len bytes to the sink's file at off, in pieces of its block at most */

int
oip_sink_write(oip_ctx_t *c, const uint8_t *p, size_t len, uint64_t off)
{
    size_t  n;

    while (len) {
        n = oip_min(len, c->sink->block);

        if (c->sink->write(c->sink->data, p, n, off) != 0) {
            return oip_fail(c, 500, OIP_REASON_OTHER, "the converted %s "
                            "could not be written to a temporary file",
                            c->sink->what);
        }

        p += n;
        off += n;
        len -= n;
    }

    return 0;
}
