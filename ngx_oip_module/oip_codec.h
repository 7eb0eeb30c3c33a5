
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The tensor codec of ngx_oip_module: Open Inference Protocol messages
 * (KServe v2 / Triton HTTP, JSON and the binary tensor data extension)
 * validated and rewritten.  It knows nothing of nginx: bytes come in,
 * a list of byte segments goes out, memory comes from an allocator the
 * caller passes in.
 */


#ifndef _OIP_CODEC_H_INCLUDED_
#define _OIP_CODEC_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>


#define OIP_ERROR_LEN        256


/*
 * The allocator behaves like an nginx pool: everything it hands out is
 * released when its owner ends (the request); free() only gives memory
 * back early and may be NULL.  alloc() returns NULL on failure.
 */

typedef struct {
    void                *(*alloc)(void *data, size_t size);
    void                 (*free)(void *data, void *p);
    void                  *data;
} oip_alloc_t;


/* a piece of a rewritten message, in order */

typedef struct {
    const u_char          *data;
    size_t                 len;
} oip_seg_t;


typedef enum {
    OIP_FORM_KEEP = 0,
    OIP_FORM_BINARY,
    OIP_FORM_JSON
} oip_form_e;


typedef struct {
    oip_form_e             inputs;
    size_t                 max_json_size;
    size_t                 max_tensor_size;
    unsigned               max_depth;
} oip_options_t;


typedef struct {
    int                    status;      /* 0, or the HTTP status to answer */
    char                   error[OIP_ERROR_LEN];

    unsigned               rewritten:1; /* send segs instead of the body */
    unsigned               binary:1;    /* binary data follows the header */
    unsigned               raw:1;       /* a raw binary request */

    oip_seg_t             *segs;
    size_t                 nsegs;
    size_t                 header_len;  /* Inference-Header-Content-Length */
    size_t                 body_len;    /* Content-Length */
} oip_request_t;


/*
 * Validates an inference request body and, per opt->inputs, rewrites it.
 * ihcl is the Inference-Header-Content-Length value, or -1 when absent.
 * Returns req->status: 0 on success, else 400/413/500 with req->error set.
 * Segments point into body or into memory from the allocator.
 */
int oip_request_process(oip_request_t *req, const oip_alloc_t *a,
    const oip_options_t *opt, const u_char *body, size_t len, off_t ihcl);

/*
 * Parses an Inference-Header-Content-Length value: decimal digits only,
 * no sign, no leading zeros but for a lone "0".  Returns 0 or -1.
 */
int oip_ihcl_parse(const u_char *v, size_t len, uint64_t *n);

/* JSON string escaping: returns the length; dst may be NULL to measure */
size_t oip_json_escape(u_char *dst, const u_char *src, size_t len);


#endif /* _OIP_CODEC_H_INCLUDED_ */
