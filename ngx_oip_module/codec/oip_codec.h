
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The tensor codec of ngx_oip_module: Open Inference Protocol messages
 * (KServe v2 / Triton HTTP, JSON and the binary tensor data extension)
 * validated and rewritten.  It knows nothing of nginx: header values and
 * bytes come in; a verdict, a list of byte segments and the headers that
 * go with them come out; memory comes from an allocator the caller
 * passes in.
 *
 * A message goes through it in two calls, as an HTTP message arrives:
 * its framing headers (oip_*_framing), then its body (oip_*_process).
 */


#ifndef _OIP_CODEC_H_INCLUDED_
#define _OIP_CODEC_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define OIP_ERROR_LEN        256

#define OIP_TYPE_JSON        "application/json"
#define OIP_TYPE_BINARY      "application/octet-stream"
#define OIP_TYPE_GRPC        "application/grpc"

/* the JSON header's length in the media type: json-header-size=N */
#define OIP_TYPE_SAGEMAKER   "application/vnd.sagemaker-triton.binary+json"
#define OIP_TYPE_VERTEX      "application/vnd.vertex-ai-triton.binary+json"
#define OIP_CARRIER_TYPE_LEN 96


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


/*
 * A piece of a message, in order.  A piece of a request body that nginx
 * holds in a file as well (opt.body_file) also says where it lies in
 * that file, so that it can be sent, or copied, from there.
 */

typedef struct {
    const uint8_t         *data;
    size_t                 len;
    int64_t                file;    /* the offset in the body's file, or
                                       -1: in memory only */
} oip_seg_t;


typedef enum {
    OIP_FORM_KEEP = 0,
    OIP_FORM_BINARY,
    OIP_FORM_JSON
} oip_form_e;


/* the form of a message's tensors, all told */

typedef enum {
    OIP_SHAPE_NONE = 0,      /* no tensor data (shared memory only) */
    OIP_SHAPE_JSON,
    OIP_SHAPE_BINARY,
    OIP_SHAPE_MIXED,
    OIP_SHAPE_RAW            /* a raw binary body */
} oip_shape_e;


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


/*
 * A model's signature, as its metadata declares it (GET /v2/models/M):
 * one piece of memory without pointers, size bytes, so that it is copied
 * whole into shared memory and back.  The header, then its inputs and
 * its outputs, each sorted by name (oip_sig_tensor_t), then dimensions
 * and names, at offsets from the start.
 */

#define OIP_SIG_ANY_RANK     UINT32_MAX    /* the metadata gave no shape */
#define OIP_SIG_ANY_DT       -1            /* a datatype not known here */

typedef struct {
    uint32_t               name;          /* offset: the name, unescaped */
    uint32_t               name_len;
    int32_t                dt;            /* or OIP_SIG_ANY_DT */
    uint32_t               rank;          /* or OIP_SIG_ANY_RANK */
    uint32_t               dims;          /* offset: rank int64_t, -1 any */
} oip_sig_tensor_t;

typedef struct {
    uint32_t               size;
    uint32_t               ninputs;       /* 0: requests not checked */
    uint32_t               noutputs;      /* 0: outputs not checked */
    uint32_t               align;
} oip_signature_t;


/* an input a model may go without: oip_signature_optional [MODEL:]INPUT */

typedef struct {
    const uint8_t         *model;         /* NULL: any model */
    size_t                 model_len;
    const uint8_t         *input;
    size_t                 input_len;
} oip_optional_t;


/*
 * The digest's sink: the canonical form of what determines the upstream's
 * answer is handed to update() in pieces (the caller hashes it).
 */

typedef struct {
    void                  *data;
    void                 (*update)(void *data, const uint8_t *p, size_t len);
} oip_digest_t;


/*
 * A message of any size (oip_buffer): the tensor bytes after its JSON
 * are written to the caller's file in pieces of block bytes, each at its
 * offset, rather than built in memory, and the caller is told how far the
 * pass has read its input, to let go of what lies behind.  write()
 * returns 0, or -1 (the caller keeps why: the message is a 500).
 * behind() is a hint: the pass may read earlier bytes again (a tensor
 * whose data came before its shape; the JSON's unchanged pieces).
 */

typedef struct {
    void                  *data;
    int                  (*write)(void *data, const uint8_t *p, size_t len,
                                  uint64_t off);
    void                 (*behind)(void *data, const uint8_t *p);
    size_t                 block;
    const char            *what;       /* "request", "answer": messages */

    /*
     * requests: an encoded body is inflated by write()s, from offset 0,
     * then remap(len) gives those bytes as one piece of memory, and the
     * writes that follow go to the sink's other file (the converted
     * body's), from 0 again; NULL on failure (a 500).  Without it an
     * encoded body is inflated in memory.
     */
    const uint8_t       *(*remap)(void *data, uint64_t len);

    /*
     * requests with a digest: bytes of the input read again out of order
     * (binary chunks hashed by name), done with: the caller may let them
     * go.  NULL: nothing to do.
     */
    void                 (*drop)(void *data, const uint8_t *p, size_t len);

    /*
     * A message part binary whose JSON may be larger than block (JSON
     * data printed from binary, or kept as it came): that JSON is
     * written by head()s to a file of its own, from offset 0, not held
     * in memory (res->head).  NULL: it is built in memory.
     */
    int                  (*head)(void *data, const uint8_t *p, size_t len,
                                 uint64_t off);

    /*
     * Requests translated to gRPC with typed contents (the integers as
     * varints, whose length is known only once they are read): the pass
     * writes the tensors as binary by head()s, read() gives them back
     * (len bytes at off, in pieces of block bytes at most), and the
     * message's inputs and outputs are written by write()s.  Returns 0,
     * or -1 as write() does.  NULL: typed contents are built in memory.
     */
    int                  (*read)(void *data, uint8_t *p, size_t len,
                                 uint64_t off);
} oip_sink_t;


/*
 * An answer converted as it arrives (oip_response_plan()): the chunks of
 * its binary part, in order, each made JSON data or dropped.
 */

typedef struct {
    uint64_t               len;        /* its bytes */
    int                    dt;
    unsigned               size;       /* an element's bytes (0: BYTES,
                                          which are only dropped) */
    unsigned               drop:1;     /* not in the answer: skipped */
} oip_chunk_t;

/* the most one element takes as JSON data, its comma with it */
#define OIP_ELEMENT_JSON_MAX  65


/* a request's gRPC call (oip_upstream_protocol grpc) */

typedef struct {
    const uint8_t         *model;         /* from the URI */
    size_t                 model_len;
    const uint8_t         *version;       /* empty: none */
    size_t                 version_len;
    size_t                 max_message;   /* oip_grpc_max_message */
    unsigned               typed:1;       /* oip_grpc_contents typed */
} oip_grpc_options_t;

typedef struct {
    oip_form_e             inputs;
    oip_form_e             outputs;
    size_t                 max_json_size;
    size_t                 max_tensor_size;
    unsigned               max_depth;
    const oip_raw_input_t *raw;                  /* or NULL */
    oip_form_e             raw_outputs;          /* BINARY or JSON */
    unsigned               finite_upstream:1;    /* NaN, Infinity refused
                                                    in JSON sent upstream */
    unsigned               coerce:1;             /* JSON numbers re-typed
                                                    to the signature's */

    /* requests: the model's signature, when it is known */
    const oip_signature_t *signature;            /* or NULL */
    const uint8_t         *model;                /* its name, for messages */
    size_t                 model_len;
    const oip_optional_t  *optional;             /* inputs it may lack */
    size_t                 noptional;

    /* requests: the canonical form goes there too (NULL: not asked) */
    const oip_digest_t    *digest;

    /*
     * requests and answers: tensors to the sink's file (REST; otherwise
     * ignored); res->spooled says what it holds.  A digest then reads
     * JSON data again from the body, not from memory.
     */
    const oip_sink_t      *sink;
    const uint8_t         *version;              /* from the URI */
    size_t                 version_len;

    /*
     * requests: written from their tensors as one framed
     * ModelInferRequest (res->segs, Content-Type OIP_TYPE_GRPC), tensors
     * referenced where they lie; 400 for what gRPC cannot carry, 413
     * above its max_message.  NULL: REST.
     */
    const oip_grpc_options_t *grpc;

    /*
     * requests: the priority that goes upstream, oip_priority's
     * (priority_set) or the client's; with levels (0: none), 0 and
     * anything above them mean default_level, as Triton reads them
     */
    uint64_t               levels;
    uint64_t               default_level;
    uint64_t               priority;
    unsigned               priority_set:1;

    /* requests: the body given is also a file's bytes from its start */
    unsigned               body_file:1;

    /* answers: the "id" they carry (answer_id set: this one, or none) */
    const uint8_t         *answer_id;            /* unescaped, or NULL */
    size_t                 answer_id_len;
    unsigned               answer_id_set:1;
} oip_options_t;


/* what the client asked for (SPEC 2), kept for its response */

typedef struct {
    const uint8_t         *name;                 /* unescaped */
    size_t                 len;
    unsigned               binary:1;
} oip_wish_out_t;


typedef struct {
    oip_wish_out_t        *outputs;
    size_t                 n;
    unsigned               listed:1;             /* an outputs array */
    unsigned               binary:1;             /* the default */
} oip_wish_t;


/* a header as the message came with it */

typedef struct {
    const uint8_t         *data;
    size_t                 len;
    unsigned               count;   /* how many times it came; 0: absent */
} oip_header_t;


/* how a message says its JSON header's length */

typedef enum {
    OIP_CARRIER_HEADER = 0,         /* Inference-Header-Content-Length */
    OIP_CARRIER_SAGEMAKER,          /* OIP_TYPE_SAGEMAKER, its parameter */
    OIP_CARRIER_VERTEX              /* OIP_TYPE_VERTEX;json-header-size= */
} oip_carrier_e;


/* what a message's headers say of its body, once checked */

typedef struct {
    int64_t                ihcl;    /* the JSON's length; -1: no IHCL */
    oip_encoding_e         encoding;
    oip_carrier_e          carrier; /* its Content-Type was a carrier's */
    unsigned               protobuf:1; /* answers: a framed
                                          ModelInferResponse */
    unsigned               stream:1;   /* ... wrapped in a
                                          ModelStreamInferResponse */
} oip_framing_t;


/*
 * Why a message was refused, for programs (the error is for people), set
 * where the refusal is decided, as yyjson's read errors carry a code
 * beside their message.  SYNTAX to OTHER are the reasons the module counts
 * refusals by (oip_rejections_total), in its order; the last are what a
 * runtime's error answer says (oip_response_error()).
 */

typedef enum {
    OIP_REASON_NONE = 0,
    OIP_REASON_SYNTAX,         /* not JSON, or not the protocol's */
    OIP_REASON_SHAPE,          /* shapes, counts, binary sizes, framing */
    OIP_REASON_DATATYPE,       /* datatypes, values a datatype cannot hold */
    OIP_REASON_LIMIT,          /* a size limit: 413 */
    OIP_REASON_SIGNATURE,      /* the model's signature: a misfit */
    OIP_REASON_ENCODING,       /* Content-Encoding, compressed bodies */
    OIP_REASON_OTHER,

    /* a runtime's own words */
    OIP_REASON_UNKNOWN_MODEL,  /* "unknown model", "no available versions" */
    OIP_REASON_QUEUE_FULL,     /* "Exceeds maximum queue size" */
    OIP_REASON_SEQUENCE_START  /* "must specify the START flag ..." */
} oip_reason_e;


/* the verdict on a message, and what to send instead */

typedef struct {
    int                    status;  /* 0, or the HTTP status to answer */
    oip_reason_e           reason;  /* with status: why */
    char                   error[OIP_ERROR_LEN];

    unsigned               rewritten:1;    /* segs differ from the body */
    unsigned               reshaped:1;     /* answers: an output's form
                                              changed, outputs dropped,
                                              the id replaced */
    unsigned               binary:1;       /* binary data follows JSON */
    unsigned               raw:1;          /* a raw binary request */
    unsigned               decompressed:1;
    unsigned               manage:1;       /* the answer may be reshaped,
                                              or outputs dropped from it */
    unsigned               misfit:1;       /* refused: the request does not
                                              fit the model's signature */
    unsigned               coerced:1;      /* an input was re-typed */
    unsigned               digested:1;     /* the digest has it all (not
                                              when a tensor is in shared
                                              memory) */

    oip_seg_t             *segs;           /* the new body, if rewritten */
    size_t                 nsegs;
    size_t                 header_len;     /* its IHCL, when binary */
    size_t                 body_len;       /* its Content-Length */
    uint64_t               spooled;        /* of it, in the sink's file
                                              from offset 0, after segs */
    unsigned               head:1;         /* the JSON, header_len bytes,
                                              in the sink's head file,
                                              not in segs */

    /* answers planned (oip_response_plan()): a hole is a segment
     * without data, where the next kept chunk's elements go */
    oip_chunk_t           *chunks;
    size_t                 nchunks;
    unsigned               planned:1;
    const char            *content_type;   /* to set, or NULL: as it is */

    oip_wish_t             wish;           /* requests: for the answer */

    /*
     * Accepted: what they held, for the operator's variables and metrics.
     * Tensors (inputs, or outputs given to the client), their elements
     * and bytes in binary size (BYTES outputs kept JSON: not counted).
     */
    const uint8_t         *id;             /* requests: "id", unescaped,
                                              or NULL */
    size_t                 id_len;
    size_t                 ninputs;
    uint64_t               elements;
    size_t                 tensor_bytes;
    oip_shape_e            in_form;        /* as they came: from the
                                              client, from the upstream */
    oip_shape_e            out_form;       /* as they go on: to the
                                              upstream, to the client */

    /* requests: the request-level "priority" and "timeout" (µs), as
     * Triton reads them (unsigned integers; here below 2^63, what
     * gRPC's int64_param carries); the priority the effective one, as
     * it goes upstream (has_priority: sent, or set by the options) */
    uint64_t               priority;
    uint64_t               timeout;
    unsigned               has_priority:1;
    unsigned               has_timeout:1;

    /*
     * requests with a timeout: where the new body holds its value, for
     * the remaining budget to be written when the request leaves; the
     * width is fixed (JSON: digits, then spaces; gRPC, deadline_pb: a
     * varint of 10 bytes), the budget never more than the client's;
     * with a sink, a place in the JSON written to its file is an offset
     * there (deadline_filed, deadline_at NULL)
     */
    uint8_t               *deadline_at;
    size_t                 deadline_len;
    uint64_t               deadline_off;
    unsigned               deadline_pb:1;
    unsigned               deadline_filed:1;

    /*
     * requests: Triton's sequence batcher's request-level parameters:
     * the id, an unsigned 64-bit integer (sequence_id) or a string
     * (sequence_str, unescaped); 0 and "" are none (has_sequence 0)
     */
    uint64_t               sequence_id;
    const uint8_t         *sequence_str;
    size_t                 sequence_str_len;
    unsigned               has_sequence:1;
    unsigned               sequence_start:1;
    unsigned               sequence_end:1;
} oip_result_t;


/*
 * A request's framing headers: Inference-Header-Content-Length,
 * Content-Encoding, and Content-Type (type, or NULL not to read it),
 * whose json-header-size counts as an IHCL when it is a carrier's media
 * type.  Returns res->status: 0, or 400 (a bad or repeated IHCL, or two
 * that differ) or 415 (an encoding other than gzip, deflate, identity).
 */
int oip_request_framing(oip_result_t *res, oip_framing_t *f,
    const oip_header_t *ihcl, const oip_header_t *encoding,
    const oip_header_t *type);

/*
 * Validates an inference request body and, per opt, rewrites it.
 * Returns res->status: 0 on success, else 400/413/500 with res->error
 * set.  Segments point into body or into memory from the allocator.
 */
int oip_request_process(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_framing_t *f, const uint8_t *body,
    size_t len);

/*
 * An answer converted as it arrives: its JSON header alone (ihcl bytes),
 * blen bytes of binary part to come.  res->planned when every binary
 * output is made JSON data or dropped: res->segs are the answer's text
 * with holes (a segment without data, between the data's brackets) and
 * res->chunks the binary part's chunks; not planned when the answer must
 * be held (an output stays binary, BYTES made JSON, nothing to do).
 * Returns res->status as oip_response_process() does; the chunks' bytes
 * are checked as they come, by oip_chunk_json().  blen OIP_BLEN_ANY: its
 * length unknown (no Content-Length), what the chunks declare.
 */
#define OIP_BLEN_ANY  UINT64_MAX

int oip_response_plan(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_wish_t *wish, const uint8_t *header,
    size_t ihcl, uint64_t blen);

/*
 * n whole elements of a planned chunk, from src, as JSON data into dst
 * (room for n * OIP_ELEMENT_JSON_MAX); at, the index of the first (a
 * comma before it unless 0).  Returns the bytes written, or -1 with the
 * reason in error (OIP_ERROR_LEN): a BOOL that is neither 0 nor 1.
 */
long oip_chunk_json(const oip_chunk_t *ch, uint64_t at, const uint8_t *src,
    size_t n, uint8_t *dst, char *error);

/*
 * An upstream answer's Inference-Header-Content-Length, or its
 * Content-Type's json-header-size (type may be NULL).  Returns
 * res->status: 0, or 502 when it is bad, repeated or they differ.
 */
int oip_response_framing(oip_result_t *res, oip_framing_t *f,
    const oip_header_t *ihcl, const oip_header_t *type);

/*
 * The carrier's media type in buf, with ";json-header-size=size" unless
 * size is -1.  Returns its length, 0 if it does not fit (len is
 * OIP_CARRIER_TYPE_LEN).  OIP_CARRIER_HEADER gives "".
 */
size_t oip_carrier_type(oip_carrier_e carrier, int64_t size, char *buf,
    size_t len);

/*
 * Gives each output of an upstream's 200 answer the form the client
 * asked for: a REST answer, or (f->protobuf) a framed ModelInferResponse
 * read into the same items and written as REST.  Returns res->status: 0,
 * or 502 for an answer that cannot be parsed (500 out of memory).
 * content_type is always set.
 */
int oip_response_process(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_wish_t *wish, const oip_framing_t *f,
    const uint8_t *body, size_t len);

/* what one message of a stream gives the client */

typedef enum {
    OIP_EVENT_DATA = 0,                 /* an answer: res->segs */
    OIP_EVENT_ERROR,                    /* the runtime's error: res->error;
                                           the stream ends */
    OIP_EVENT_NONE                      /* an empty final response */
} oip_event_e;

/*
 * One framed ModelStreamInferResponse of a ModelStreamInfer call, read:
 * *ev says what it is; an answer is written as oip_response_process()
 * writes a ModelInferResponse.  Returns res->status: 0, or 502 for a
 * message that cannot be read (500 out of memory).
 */
int oip_stream_process(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_wish_t *wish, const uint8_t *body,
    size_t len, oip_event_e *ev);

/*
 * The generate extension, emulated (oip_generate.c): a generate request
 * made the infer request it stands for (res->segs, JSON), mapped by
 * opt->signature's inputs as Triton maps it; 400 for what does not fit.
 * And an infer answer (JSON, every output's data in it) made the
 * generate answer; 502 for an answer that cannot be read.
 */
int oip_generate_request(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const uint8_t *body, size_t len);
int oip_generate_answer(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const uint8_t *json, size_t len);

/*
 * An upstream's error answer to an infer request, in the protocol's
 * shape.  Returns 0 when the body is {"error": string} already (it goes
 * as it is), else 1 with res->error holding what the body says as one
 * line of readable text, bounded: FastAPI's {"detail": ...}, another
 * JSON object, an HTML page's title, plain text, or for an empty body
 * the status.  type is the answer's Content-Type.
 */
int oip_response_error(oip_result_t *res, const oip_alloc_t *a, int status,
    const oip_header_t *type, const uint8_t *body, size_t len);

/*
 * Reads a model's metadata answer into a signature, one allocation of
 * (*sig)->size bytes.  Returns res->status: 0, 502 when the answer is not
 * the metadata of a model (the message says why), or 500 out of memory.
 */
int oip_signature_parse(oip_result_t *res, const oip_alloc_t *a,
    const uint8_t *json, size_t len, oip_signature_t **sig);

/*
 * The gRPC transport (oip_grpc.c): inference.GRPCInferenceService's
 * methods, in the order of their paths in oip_grpc_paths[].
 */

typedef enum {
    OIP_RPC_SERVER_LIVE = 0,
    OIP_RPC_SERVER_READY,
    OIP_RPC_MODEL_READY,
    OIP_RPC_SERVER_METADATA,
    OIP_RPC_MODEL_METADATA,
    OIP_RPC_MODEL_INFER,
    OIP_RPC_MODEL_STREAM_INFER          /* Triton's: the ModelInferRequest
                                           of an infer_stream call */
} oip_rpc_e;

extern const char  *const oip_grpc_paths[];

/* the framed request of a method other than ModelInfer: res->segs */
int oip_grpc_call(oip_result_t *res, const oip_alloc_t *a,
    const oip_grpc_options_t *g, oip_rpc_e rpc);

/*
 * Its answer as the REST JSON answer: res->segs.  *truth is what a
 * live or ready answer says (1 or 0), -1 for the metadata.  Returns
 * res->status: 0, 502 or 500.
 */
int oip_grpc_answer(oip_result_t *res, const oip_alloc_t *a, oip_rpc_e rpc,
    const uint8_t *body, size_t len, int *truth);

/* what a runtime's words say, as a code (OIP_REASON_NONE: nothing) */
oip_reason_e oip_error_words(const uint8_t *text, size_t len);

/* the HTTP status for a grpc-status code */
int oip_grpc_http_status(unsigned code);


/*
 * Checks and stores an oip_raw_input declaration ("INPUT0", "FP32",
 * "-1,3").  Returns 0, or -1 with a message in err.
 */
int oip_raw_input_init(oip_raw_input_t *raw, const uint8_t *name,
    size_t name_len, const uint8_t *dt, size_t dt_len, const uint8_t *dims,
    size_t dims_len, char *err, size_t err_len);

/*
 * Parses an Inference-Header-Content-Length value: decimal digits only,
 * no sign, no leading zeros but for a lone "0".  Returns 0 or -1.
 */
int oip_ihcl_parse(const uint8_t *v, size_t len, uint64_t *n);

/* JSON string escaping: returns the length; dst may be NULL to measure */
size_t oip_json_escape(uint8_t *dst, const uint8_t *src, size_t len);


/*
 * The sequence balancer's consistent-hashing ring (oip_ring.c): built
 * from the peers' names and weights, OIP_RING_POINTS points a unit of
 * weight, the same on every gateway that has the same peers, whatever
 * their order.
 */

#define OIP_RING_POINTS      160

typedef struct {
    const uint8_t         *name;       /* "10.0.0.1:8000" */
    size_t                 len;
    unsigned               weight;
} oip_ring_peer_t;

typedef struct {
    uint32_t               hash;
    uint32_t               peer;       /* an index into the peers given */
} oip_ring_point_t;

typedef struct {
    oip_ring_point_t      *points;     /* by hash */
    size_t                 n;
} oip_ring_t;

/* the ring: 0, or -1 when memory ran out; no peers, no points */
int oip_ring_build(oip_ring_t *ring, const oip_alloc_t *a,
    const oip_ring_peer_t *peers, size_t npeers);

/* a key's hash: its CRC-32 (nginx's ngx_crc32_long()) */
uint32_t oip_ring_hash(const uint8_t *key, size_t len);

/* the index of the first point at or after hash, round the ring */
size_t oip_ring_find(const oip_ring_t *ring, uint32_t hash);


#endif /* _OIP_CODEC_H_INCLUDED_ */
