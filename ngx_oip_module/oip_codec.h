
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


typedef enum {
    OIP_ENC_NONE = 0,
    OIP_ENC_GZIP,
    OIP_ENC_DEFLATE
} oip_encoding_e;


#define OIP_RAW_RANK         16
#define OIP_RAW_NAME         256

/* the single input of raw binary requests: oip_raw_input NAME TYPE DIMS */

typedef struct {
    char                   name[OIP_RAW_NAME];
    int                    dt;
    int64_t                dims[OIP_RAW_RANK];   /* -1 at most once */
    size_t                 rank;
    int                    deduced;              /* where -1 is, or -1 */
    char                   text[OIP_RAW_RANK * 21 + 2];
} oip_raw_input_t;


typedef struct {
    oip_form_e             inputs;
    oip_form_e             outputs;
    size_t                 max_json_size;
    size_t                 max_tensor_size;
    unsigned               max_depth;
    const oip_raw_input_t *raw;                  /* or NULL */
    oip_form_e             raw_outputs;          /* BINARY or JSON */
} oip_options_t;


/* what the client asked for (SPEC 2), kept for its response */

typedef struct {
    const u_char          *name;                 /* unescaped */
    size_t                 len;
    unsigned               binary:1;
} oip_wish_out_t;


typedef struct {
    oip_wish_out_t        *outputs;
    size_t                 n;
    unsigned               listed:1;             /* an outputs array */
    unsigned               binary:1;             /* the default */
} oip_wish_t;


typedef struct {
    int                    status;      /* 0, or the HTTP status to answer */
    char                   error[OIP_ERROR_LEN];

    unsigned               rewritten:1; /* send segs instead of the body */
    unsigned               binary:1;    /* binary data follows the header */
    unsigned               raw:1;       /* a raw binary request */
    unsigned               decompressed:1;
    unsigned               manage:1;    /* the response may be rewritten */

    oip_seg_t             *segs;
    size_t                 nsegs;
    size_t                 header_len;  /* Inference-Header-Content-Length */
    size_t                 body_len;    /* Content-Length */

    oip_wish_t             wish;
} oip_request_t;


typedef struct {
    int                    status;      /* 0, or 502 (500: no memory) */
    char                   error[OIP_ERROR_LEN];

    unsigned               rewritten:1;
    unsigned               binary:1;

    oip_seg_t             *segs;
    size_t                 nsegs;
    size_t                 header_len;
    size_t                 body_len;
} oip_response_t;


/*
 * Validates an inference request body and, per opt, rewrites it.  ihcl
 * is the Inference-Header-Content-Length value, or -1 when absent; enc
 * the Content-Encoding.  Returns req->status: 0 on success, else
 * 400/413/500 with req->error set.  Segments point into body or into
 * memory from the allocator.
 */
int oip_request_process(oip_request_t *req, const oip_alloc_t *a,
    const oip_options_t *opt, const u_char *body, size_t len, off_t ihcl,
    oip_encoding_e enc);

/*
 * Gives each output of an upstream's 200 answer the form the client
 * asked for.  Returns resp->status: 0, or 502 for an answer that cannot
 * be parsed (500 out of memory).
 */
int oip_response_process(oip_response_t *resp, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_wish_t *wish, const u_char *body,
    size_t len, off_t ihcl);

/*
 * Checks and stores an oip_raw_input declaration ("INPUT0", "FP32",
 * "-1,3").  Returns 0, or -1 with a message in err.
 */
int oip_raw_input_init(oip_raw_input_t *raw, const u_char *name,
    size_t name_len, const u_char *dt, size_t dt_len, const u_char *dims,
    size_t dims_len, char *err, size_t err_len);

/*
 * Parses an Inference-Header-Content-Length value: decimal digits only,
 * no sign, no leading zeros but for a lone "0".  Returns 0 or -1.
 */
int oip_ihcl_parse(const u_char *v, size_t len, uint64_t *n);

/* JSON string escaping: returns the length; dst may be NULL to measure */
size_t oip_json_escape(u_char *dst, const u_char *src, size_t len);


#endif /* _OIP_CODEC_H_INCLUDED_ */
