
/*
 * Copyright (C) ngx_oip_module authors
 *
 * What the glue's files share: the configuration, the request context,
 * and the helpers that the request path (ngx_http_oip_request.c) and the
 * response path (ngx_http_oip_response.c) both use.  Those two include
 * this header and the codec's, never each other.
 */


#ifndef _NGX_HTTP_OIP_MODULE_H_INCLUDED_
#define _NGX_HTTP_OIP_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "oip_codec.h"


#define NGX_HTTP_OIP_IHCL    "Inference-Header-Content-Length"

#define NGX_HTTP_OIP_NONFINITE_PASS    0
#define NGX_HTTP_OIP_NONFINITE_REFUSE  1

#define NGX_HTTP_OIP_ERRORS_REWRITE    0
#define NGX_HTTP_OIP_ERRORS_PASS       1

#define NGX_HTTP_OIP_SIG_OPEN          0
#define NGX_HTTP_OIP_SIG_CLOSED        1

#define NGX_HTTP_OIP_PROTOCOL_HTTP     0
#define NGX_HTTP_OIP_PROTOCOL_GRPC     1

/* oip_generate, and what a route made of a generate call */
#define NGX_HTTP_OIP_GENERATE_NATIVE   0
#define NGX_HTTP_OIP_GENERATE_EMULATE  1

/* a stream ended by oip_stream_idle, as the client is told */
#define NGX_HTTP_OIP_IDLE_ERROR                                               \
    "upstream answer: the runtime sent nothing for oip_stream_idle"

#define NGX_HTTP_OIP_GEN_NONE          0     /* not a generate call */
#define NGX_HTTP_OIP_GEN_PASS          1     /* the runtime's own, passed */
#define NGX_HTTP_OIP_GEN_EMULATE       2     /* made an infer call */


/* how its model's signature was found, for the metrics */
#define NGX_HTTP_OIP_LOOKUP_HIT        1
#define NGX_HTTP_OIP_LOOKUP_MISS       2
#define NGX_HTTP_OIP_LOOKUP_FAILED     3


/* the reasons a request is refused for (ngx_http_oip_reasons[]) */
#define NGX_HTTP_OIP_REASONS           8


/* what became of the upstream's answer, for the metrics */
#define NGX_HTTP_OIP_ANSWER_CONVERTED  1
#define NGX_HTTP_OIP_ANSWER_PASSED     2
#define NGX_HTTP_OIP_ANSWER_FAILED     3


typedef struct {
    ngx_shm_zone_t        *metrics;         /* oip_metrics_zone, or NULL */
    ngx_array_t           *admission;       /* of ngx_shm_zone_t *: the
                                               oip_admission_zones */
    ngx_array_t           *sequences;       /* of ngx_shm_zone_t *: the
                                               oip_sequence zones */
    ngx_flag_t             digest;          /* $oip_digest is used */

    /* this process's signature fetches in flight (signature.c) */
    ngx_queue_t            fetches;
    ngx_uint_t             nfetches;
} ngx_http_oip_main_conf_t;


/* a request's step of finding its model's signature (signature.c) */
typedef struct ngx_http_oip_sig_s  ngx_http_oip_sig_t;

/* oip_sequence: an upstream's sequence balancer (sequence.c) */
typedef struct ngx_http_oip_seq_conf_s  ngx_http_oip_seq_conf_t;

/* how a sequence's pin ended, in the order of the metrics' labels */
#define NGX_HTTP_OIP_SEQ_ENDED    0
#define NGX_HTTP_OIP_SEQ_IDLE     1
#define NGX_HTTP_OIP_SEQ_GONE     2     /* "lost" */
#define NGX_HTTP_OIP_SEQ_EVICTED  3
#define NGX_HTTP_OIP_SEQ_ENDS     4

typedef struct {
    ngx_http_oip_seq_conf_t  *sequence;    /* in upstream {}; NULL: none */
} ngx_http_oip_srv_conf_t;

/* the upstream's transport: a table of operations, below */
typedef struct ngx_http_oip_transport_s  ngx_http_oip_transport_t;


/* oip_admit: a location's budget, per key, in an admission zone */

typedef struct {
    ngx_shm_zone_t            *zone;
    ngx_http_complex_value_t  *key;         /* NULL: the model's name */
    ngx_uint_t                 concurrency; /* 0: no limit */
    uint64_t                   bytes;       /* 0: no limit */
    ngx_uint_t                 queue;
    uint64_t                   queue_bytes;
    ngx_msec_t                 wait;
    ngx_uint_t                 levels;      /* 1 the highest */
    ngx_uint_t                 default_level;
} ngx_http_oip_admit_t;


typedef struct {
    ngx_flag_t             enable;
    ngx_uint_t             inputs;          /* oip_form_e */
    ngx_uint_t             outputs;         /* oip_form_e */
    off_t                  max_json_size;
    off_t                  max_tensor_size;
    ngx_uint_t             max_depth;
    oip_raw_input_t       *raw;
    ngx_uint_t             raw_outputs;     /* oip_form_e */
    ngx_uint_t             nonfinite;       /* NGX_HTTP_OIP_NONFINITE_* */
    ngx_uint_t             errors;          /* NGX_HTTP_OIP_ERRORS_* */

    /* oip_signatures URI zone=NAME; sig_zone NULL: off */
    ngx_str_t              sig_uri;
    ngx_shm_zone_t        *sig_zone;
    ngx_uint_t             sig_fail;        /* NGX_HTTP_OIP_SIG_* */
    ngx_array_t           *sig_optional;    /* of oip_optional_t */
    ngx_flag_t             sig_coerce;

    /* oip_upstream_protocol: the transport, its table */
    ngx_uint_t             protocol;        /* NGX_HTTP_OIP_PROTOCOL_* */
    ngx_uint_t             generate;        /* NGX_HTTP_OIP_GENERATE_* */
    const ngx_http_oip_transport_t  *transport;
    ngx_uint_t             grpc_typed;      /* oip_grpc_contents typed */
    size_t                 grpc_max_message;

    ngx_msec_t             stream_idle;     /* oip_stream_idle; 0: off */

    /* how the upstream is told the JSON header's length */
    ngx_uint_t             carrier;         /* oip_carrier_e */

    /* oip_thread_pool NAME [threshold=SIZE]; NULL: inline (a
     * ngx_thread_pool_t, which nginx without threads does not have) */
    void                  *thread_pool;
    size_t                 thread_threshold;

    size_t                 buffer;          /* oip_buffer */

    ngx_http_oip_admit_t  *admit;           /* NULL: none */
    ngx_http_complex_value_t  *priority;    /* oip_priority; NULL: none */
} ngx_http_oip_loc_conf_t;


/*
 * Where an infer request is on the request path, the handler's state
 * (it runs again after each wait): zero when just routed.
 */

typedef enum {
    NGX_HTTP_OIP_PHASE_SIGNATURE = 1,  /* its model's signature, first */
    NGX_HTTP_OIP_PHASE_READ,           /* its body read and converted */
    NGX_HTTP_OIP_PHASE_REFETCH,        /* a misfit: the signature once
                                          more, then the body against it */
    NGX_HTTP_OIP_PHASE_REFUSED,        /* a refusal to send: status */
    NGX_HTTP_OIP_PHASE_PASSED          /* passed on, or refused: done */
} ngx_http_oip_phase_e;


/* the request path's own (request.c, signature.c, the transports) */

typedef struct {
    ngx_http_oip_phase_e   phase;
    ngx_int_t              status;      /* REFUSED: the HTTP status */

    /* the call, as the transport routed it */
    const ngx_http_oip_transport_t  *transport;
    ngx_uint_t             rpc;         /* oip_rpc_e */
    ngx_uint_t             carrier;     /* oip_carrier_e: the client's */

    /* the model's signature, when oip_signatures is on */
    ngx_http_oip_sig_t    *sig;
    oip_signature_t       *signature;   /* NULL: not checked */

    /* where the new body holds the client's timeout: the remaining
     * budget is written there when it leaves (NULL: no timeout), or
     * at deadline_off in the converted body's file */
    u_char                *deadline_at;
    size_t                 deadline_len;
    ngx_file_t            *deadline_file;
    off_t                  deadline_off;
    unsigned               deadline_pb:1;

    void                  *sequence;    /* the balancer's data for it
                                           (sequence.c), or NULL */
    unsigned               sequence_lost:1; /* its runtime is gone */
    unsigned               stream:1;    /* an infer_stream call, or a
                                           generate_stream one */
    unsigned               generate:2;  /* NGX_HTTP_OIP_GEN_* */
    u_char                *gen_body;    /* emulated: the infer request */
    size_t                 gen_len;
    oip_seg_t              gen_seg;
    unsigned               refetched:1; /* no second refetch */
    unsigned               misfit:1;    /* refused by the signature */
    unsigned               sub:1;       /* a signature fetch's own */
} ngx_http_oip_req_t;


/*
 * Where its answer is on the answer path (response.c): held whole (a
 * 200, or an upstream's error), or nginx's own error page replaced, and
 * then sent.
 */

/* an answer above oip_buffer, converted as it arrives (flow.c) */
typedef struct ngx_http_oip_flow_s  ngx_http_oip_flow_t;

/* a body or an answer above oip_buffer, through files (spool.c) */
typedef struct ngx_http_oip_spool_s  ngx_http_oip_spool_t;


/*
 * The answer is being converted (in a thread, or as it arrives, holding
 * input): the request may not end.  r->buffered has four bits, nginx's
 * filters take three (SSI, sub, copy); no module of nginx's sets the
 * fourth (the image filter's 0x08 is a bit of c->buffered).
 */
#define NGX_HTTP_OIP_BUFFERED   0x08


typedef enum {
    NGX_HTTP_OIP_ANS_PASSING = 0,      /* not held: it goes as it comes */
    NGX_HTTP_OIP_ANS_HELD,             /* a 200, held to be converted */
    NGX_HTTP_OIP_ANS_HELD_ERROR,       /* an upstream's error, held */
    NGX_HTTP_OIP_ANS_PAGE,             /* nginx's error page, replaced */
    NGX_HTTP_OIP_ANS_SENT,             /* held, then sent: the rest goes */
    NGX_HTTP_OIP_ANS_PAGE_SENT,        /* the page sent: the rest goes */
    NGX_HTTP_OIP_ANS_STREAM,           /* a stream, its headers held until
                                          its first event (stream.c) */
    NGX_HTTP_OIP_ANS_STREAM_OPEN,      /* events flowing */
    NGX_HTTP_OIP_ANS_STREAM_DONE,      /* ended: the rest is dropped */
    NGX_HTTP_OIP_ANS_FLOW              /* converted as it arrives (flow.c) */
} ngx_http_oip_ans_phase_e;


typedef struct {
    ngx_http_oip_ans_phase_e  phase;
    oip_wish_t             wish;        /* the client's, from its request */
    u_char                *buf;         /* the answer held */
    size_t                 len;
    size_t                 cap;
    size_t                 limit;
    ngx_str_t              page;        /* JSON for nginx's error page */
    ngx_http_oip_flow_t   *flow;        /* converted as it arrives */
    ngx_http_oip_spool_t  *spool;       /* held in a file, not buf */
    unsigned               manage:1;    /* it may be reshaped */
    unsigned               may_flow:1;  /* ... once its JSON is here */
    unsigned               may_spool:1; /* ... held in a file past
                                           oip_buffer */
} ngx_http_oip_ans_t;


/* a stream's events as they go (ngx_http_oip_stream.c) */

typedef struct {
    oip_wish_t             wish;        /* the client's, every output JSON */
    u_char                *msg;         /* a gRPC message being gathered */
    size_t                 len;
    size_t                 cap;
    ngx_chain_t           *free;        /* the events' buffers */
    ngx_chain_t           *busy;
    ngx_uint_t             events;      /* sent, an error's included */
    uint64_t               first_usec;  /* the request line to the first */
    ngx_uint_t             status;      /* an error before the first event:
                                           the answer's status */
    ngx_event_t            idle;        /* oip_stream_idle */
    unsigned               opened:1;    /* its headers have gone */
    unsigned               passing:1;   /* the runtime's own events */
    unsigned               lf:1;        /* passing: the last byte was
                                           a line feed */
} ngx_http_oip_stream_t;


/*
 * Its admission (ngx_http_oip_admission.c): the outcomes, in the order
 * of the metrics' labels, then the state of one that waits.
 */

typedef enum {
    NGX_HTTP_OIP_ADM_NONE = 0,         /* not subject to a budget */
    NGX_HTTP_OIP_ADM_ADMITTED,         /* forwarded at once */
    NGX_HTTP_OIP_ADM_QUEUED,           /* forwarded after waiting */
    NGX_HTTP_OIP_ADM_SHED,             /* refused: queue full, too big */
    NGX_HTTP_OIP_ADM_TIMEOUT,          /* its wait ran out */
    NGX_HTTP_OIP_ADM_CANCELLED,        /* its client left while it waited */
    NGX_HTTP_OIP_ADM_RUNTIME,          /* the runtime's queue was full */
    NGX_HTTP_OIP_ADM_EXPIRED,          /* its client's deadline passed */
    NGX_HTTP_OIP_ADM_WAITING           /* parked now */
} ngx_http_oip_adm_e;

#define NGX_HTTP_OIP_ADM_RESULTS       7

/* a share: a record in the admission zone */
typedef struct ngx_http_oip_share_s  ngx_http_oip_share_t;

typedef struct {
    ngx_http_oip_adm_e     state;
    ngx_shm_zone_t        *zone;
    ngx_http_oip_admit_t  *conf;        /* the budget it asked in */
    ngx_http_oip_share_t  *share;       /* held or waiting; NULL: none */
    ngx_http_request_t    *r;
    ngx_queue_t            parked;      /* in this worker's, as it waits */
    uint64_t               start;       /* usec: when it asked */
    uint64_t               deadline;    /* usec: when its wait runs out */
    ngx_uint_t             level;       /* its priority's, 1 the first */
    uint64_t               queue_usec;  /* how long it waited */
    uint64_t               handover_usec;  /* release to its resumption */
    void                 (*finalize)(ngx_http_request_t *r, ngx_int_t rc);
    unsigned               asked:1;     /* once per main request */
    unsigned               handed:1;    /* handover_usec is set */
    unsigned               expires:1;   /* the deadline is the client's */
    unsigned               left:1;      /* its client left while its
                                           upstream ran (a 499, or a
                                           stream cut) */
} ngx_http_oip_adm_t;


/* what the request held and what became of it: variables and metrics */

typedef struct {
    ngx_str_t              id;
    ngx_str_t              digest;        /* hex, or empty */
    size_t                 ninputs;
    uint64_t               elements;
    size_t                 tensor_bytes;
    ngx_uint_t             in_form;       /* oip_shape_e */
    ngx_uint_t             upstream_form;
    uint64_t               request_usec;  /* converting the request */
    uint64_t               answer_usec;   /* converting its answer */
    ngx_uint_t             answer;        /* NGX_HTTP_OIP_ANSWER_*, or 0 */
    size_t                 answer_bytes;  /* its tensors, given */
    ngx_uint_t             answer_form;   /* oip_shape_e, as given */
    ngx_uint_t             sig_lookup;    /* NGX_HTTP_OIP_LOOKUP_*, or 0 */
    uint64_t               priority;      /* parameters.priority */
    uint64_t               timeout;       /* parameters.timeout, µs */
    uint64_t               sequence_id;   /* parameters.sequence_id, */
    ngx_str_t              sequence_str;  /* a number or a string */
    unsigned               has_priority:1;
    unsigned               has_timeout:1;
    unsigned               has_sequence:1; /* an id, not 0 nor "" */
    unsigned               sequence_start:1;
    unsigned               sequence_end:1;
    unsigned               counted:1;     /* the request's values are set */
    unsigned               answer_timed:1; /* the answer was converted */
} ngx_http_oip_vars_t;


/*
 * An infer request's context, made by ngx_http_oip_create_ctx() (a
 * signature fetch's subrequest by the fetch): what both paths name it
 * by, then each path's own state, then what the operator reads of it.
 */

typedef struct {
    ngx_str_t              model;
    ngx_str_t              version;     /* empty: none in the URI */
    ngx_str_t              error;       /* a refusal's, for the client */
    oip_reason_e           reason;      /* why, with error */

    ngx_http_oip_req_t     req;
    ngx_http_oip_ans_t     ans;
    ngx_http_oip_stream_t *stream;      /* a stream's only (stream.c) */
    ngx_http_oip_spool_t  *spool;       /* a body above oip_buffer's
                                           (spool.c) */
    ngx_http_oip_adm_t     adm;
    ngx_http_oip_vars_t    vars;
} ngx_http_oip_ctx_t;


/*
 * A conversion: the codec's call and what follows its verdict.  One
 * runner (ngx_http_oip_thread.c) runs it in the worker or, when the
 * location's thread pool takes it, in a thread; done() is called in the
 * worker either way, resume() after a thread only.
 */

typedef struct ngx_http_oip_run_s  ngx_http_oip_run_t;

typedef ngx_int_t (*ngx_http_oip_done_pt)(ngx_http_request_t *r,
    ngx_http_oip_run_t *run);
typedef void (*ngx_http_oip_resume_pt)(ngx_http_request_t *r,
    ngx_int_t rc);

struct ngx_http_oip_run_s {
    ngx_http_request_t       *r;
    ngx_http_oip_done_pt      done;      /* the verdict, in the worker */
    ngx_http_oip_resume_pt    resume;    /* on with it, after a thread */

    /* the codec's call */
    unsigned                  response:1;  /* an answer, else a request */
    unsigned                  digested:1;  /* digest set up: $oip_digest */
    unsigned                  threaded:1;  /* it ran in a thread */
    oip_options_t             opt;
    oip_grpc_options_t        grpc;      /* opt.grpc points here */
    oip_framing_t             framing;
    oip_digest_t              digest;
    oip_wish_t               *wish;
    const u_char             *body;
    size_t                    len;

    /* its outcome */
    oip_result_t              res;
    int                       rc;
    uint64_t                  usec;
};


/*
 * The upstream's transport, chosen at configuration time by
 * oip_upstream_protocol: what the request and answer paths ask of it,
 * so that neither branches on it.
 *
 * route()    which call a request is: NGX_OK (rt set), NGX_DECLINED
 *            (not the module's: passed on as it is), NGX_HTTP_NOT_FOUND
 *            (not a call: passed on when "passes", else refused with
 *            not_found), NGX_HTTP_NOT_ALLOWED (refused with not_allowed);
 * call()     a call without the client's body (health, metadata, and a
 *            signature's subrequest when "subrequests"): res, its body;
 * prepare()  the codec's options for an infer request: its target form;
 * target()   the request made the upstream's, once its body is set;
 * answer()   the answer held whole, read: NGX_OK (ctx->buf, framed so,
 *            to give the client's form), NGX_DONE (res->segs: the
 *            client's answer), NGX_DECLINED (an error answer, res->error
 *            its text), NGX_ABORT (not an answer: res->status, error).
 */

typedef struct {
    ngx_uint_t                rpc;       /* oip_rpc_e */
    ngx_str_t                 model;
    ngx_str_t                 version;   /* empty: none in the URI */
    unsigned                  stream:1;  /* infer_stream: its answers as
                                            events */
    unsigned                  generate:2;  /* NGX_HTTP_OIP_GEN_* */
} ngx_http_oip_route_t;

struct ngx_http_oip_transport_s {
    const char               *name;
    ngx_int_t               (*route)(ngx_http_request_t *r,
                                     ngx_http_oip_route_t *rt);
    ngx_int_t               (*call)(ngx_http_request_t *r,
                                    ngx_http_oip_ctx_t *ctx,
                                    oip_result_t *res);
    void                    (*prepare)(ngx_http_request_t *r,
                                       ngx_http_oip_ctx_t *ctx,
                                       ngx_http_oip_run_t *run);
    ngx_int_t               (*target)(ngx_http_request_t *r,
                                      ngx_http_oip_ctx_t *ctx);
    ngx_int_t               (*answer)(ngx_http_request_t *r,
                                      ngx_http_oip_ctx_t *ctx,
                                      oip_result_t *res,
                                      oip_framing_t *framing);
    ngx_str_t                 not_found;
    ngx_str_t                 not_allowed;

    unsigned                  passes:1;      /* what is not a call goes on */
    unsigned                  carrier:1;     /* a carrier's media type goes
                                                upstream */
    unsigned                  subrequests:1; /* a signature's fetch is a
                                                call too */
    unsigned                  any_uri:1;     /* the URI becomes the call's:
                                                every error is an infer
                                                request's */
    unsigned                  messages:1;    /* a stream's answer is gRPC
                                                messages, each made an
                                                event (else the runtime's
                                                own events, passed on) */
};


/* the two paths, registered by the module, and streams' own filters */
ngx_int_t ngx_http_oip_request_init(ngx_conf_t *cf);
ngx_int_t ngx_http_oip_response_init(ngx_conf_t *cf);
ngx_int_t ngx_http_oip_stream_init(ngx_conf_t *cf);
ngx_uint_t ngx_http_oip_stream_opens(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
ngx_int_t ngx_http_oip_stream_check(ngx_conf_t *cf,
    ngx_http_oip_loc_conf_t *conf);
ngx_http_oip_stream_t *ngx_http_oip_stream_state(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
void ngx_http_oip_stream_start(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
void ngx_http_oip_stream_end_timer(ngx_http_oip_ctx_t *ctx);

ngx_http_oip_ctx_t *ngx_http_oip_create_ctx(ngx_http_request_t *r);
ngx_http_oip_ctx_t *ngx_http_oip_get_ctx(ngx_http_request_t *r);
ngx_int_t ngx_http_oip_infer_uri(ngx_str_t *uri, ngx_str_t *model,
    ngx_str_t *version);
ngx_int_t ngx_http_oip_model_uri(ngx_str_t *uri, ngx_str_t *suffix,
    ngx_str_t *model, ngx_str_t *version);
ngx_int_t ngx_http_oip_infer_alias(ngx_http_request_t *r, ngx_str_t *model,
    ngx_str_t *version, ngx_str_t *msg);
void ngx_http_oip_options(ngx_http_request_t *r, oip_options_t *opt);
ngx_int_t ngx_http_oip_fail(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_uint_t status, oip_reason_e reason, const char *msg);
ngx_uint_t ngx_http_oip_reason(ngx_http_oip_ctx_t *ctx, ngx_uint_t status);
char *ngx_http_oip_zone_arg(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *name,
    ssize_t *size);

/* how every zone's own data begins (signatures, metrics, admission,
 * sequences): its header in the slab, and the slab */
typedef struct {
    void                  *sh;
    ngx_slab_pool_t       *shpool;
} ngx_http_oip_zone_t;

ngx_int_t ngx_http_oip_zone_header(ngx_shm_zone_t *shm_zone, void *data,
    size_t size);
void ngx_http_oip_allocator(ngx_http_request_t *r, oip_alloc_t *alloc);
void ngx_http_oip_pool_allocator(ngx_pool_t *pool, oip_alloc_t *alloc);

ngx_table_elt_t *ngx_http_oip_header(ngx_list_t *headers, ngx_str_t *name,
    oip_header_t *h);
ngx_table_elt_t *ngx_http_oip_header_push(ngx_list_t *list, ngx_str_t *key,
    ngx_str_t *value);
void ngx_http_oip_content_type(ngx_http_request_t *r, const char *type);
ngx_buf_t *ngx_http_oip_error_json(ngx_http_request_t *r, u_char *msg,
    size_t len);
ngx_int_t ngx_http_oip_chain(ngx_http_request_t *r, oip_seg_t *segs,
    size_t n, ngx_chain_t **out, ngx_buf_t **last);


/* the request's body in and out (ngx_http_oip_body.c) */
ngx_int_t ngx_http_oip_body_in(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char **data, size_t *len);
ngx_int_t ngx_http_oip_body_out(ngx_http_request_t *r, oip_result_t *res);

/* bodies and answers above oip_buffer, through files (spool.c) */
ngx_int_t ngx_http_oip_spool_in(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_framing_t *framing, u_char **data,
    size_t *len);
const oip_sink_t *ngx_http_oip_spool_sink(ngx_http_oip_ctx_t *ctx);
ngx_file_t *ngx_http_oip_spool_converted(ngx_http_oip_ctx_t *ctx,
    ngx_uint_t head);
void ngx_http_oip_spool_done(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, int rc, oip_result_t *res);
ngx_int_t ngx_http_oip_spool_body(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res);
ngx_uint_t ngx_http_oip_spool_may(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, off_t len);
ngx_int_t ngx_http_oip_spool_hold(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char *data, size_t len);
ngx_int_t ngx_http_oip_spool_answer(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, const u_char **data, size_t *len,
    const oip_sink_t **sink);
ngx_int_t ngx_http_oip_spool_send(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res);
ngx_int_t ngx_http_oip_spool_on(ngx_http_request_t *r);

/* answers above oip_buffer, converted as they arrive (flow.c) */
ngx_int_t ngx_http_oip_flow_init(ngx_conf_t *cf);

/* the response path's next filters, saved by the flow's init: answers
 * that flow or come from files are sent through them */
extern ngx_http_output_header_filter_pt  ngx_http_oip_answer_next_header;
extern ngx_http_output_body_filter_pt    ngx_http_oip_answer_next_body;
ngx_uint_t ngx_http_oip_flow_may(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, off_t len);
ngx_int_t ngx_http_oip_flow_start(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_uint_t last);
ngx_int_t ngx_http_oip_flow_body(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_chain_t *in);

/* the conversion runner, big ones in a thread (ngx_http_oip_thread.c) */
char *ngx_http_oip_thread_pool(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_oip_run(ngx_http_oip_run_t *run);

/* the transports (ngx_http_oip_http.c, ngx_http_oip_grpc.c) */
extern const ngx_http_oip_transport_t  ngx_http_oip_http_transport;
extern const ngx_http_oip_transport_t  ngx_http_oip_grpc_transport;
void ngx_http_oip_grpc_hide(ngx_list_t *list);

/* generate and generate_stream (ngx_http_oip_generate.c) */
ngx_int_t ngx_http_oip_generate_route(ngx_http_request_t *r,
    ngx_http_oip_route_t *rt);
ngx_int_t ngx_http_oip_generate_request(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_framing_t *framing, u_char **body,
    size_t *len);
void ngx_http_oip_generate_made(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res);
ngx_int_t ngx_http_oip_generate_target(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
ngx_int_t ngx_http_oip_generate_json(ngx_http_request_t *r,
    ngx_pool_t *pool, oip_result_t *res, const u_char *src, size_t len,
    ngx_uint_t event);
ngx_int_t ngx_http_oip_generate_answer(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res);

/* the variables (ngx_http_oip_variables.c) */
ngx_int_t ngx_http_oip_variables_add(ngx_conf_t *cf);
uint64_t ngx_http_oip_usec(void);
uint64_t ngx_http_oip_start_usec(ngx_http_request_t *r);

/* the metrics (ngx_http_oip_metrics.c) */
char *ngx_http_oip_metrics_zone(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_oip_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
ngx_int_t ngx_http_oip_metrics_log(ngx_http_request_t *r);

/* $oip_digest and caching (ngx_http_oip_cache.c) */
ngx_int_t ngx_http_oip_digest_init(ngx_conf_t *cf);
ngx_int_t ngx_http_oip_digest_begin(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_digest_t *d, oip_options_t *opt);
void ngx_http_oip_digest_end(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_digest_t *d, ngx_uint_t ok);
void ngx_http_oip_uncache(ngx_http_request_t *r);

/* the signatures' shared-memory zone (ngx_http_oip_sig_cache.c) */
char *ngx_http_oip_signature_zone(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_oip_sig_cache_lookup(ngx_shm_zone_t *zone, ngx_str_t *key,
    uint32_t hash, ngx_pool_t *pool, oip_signature_t **sig,
    ngx_uint_t *refresh);
ngx_uint_t ngx_http_oip_sig_cache_refetch(ngx_shm_zone_t *zone,
    ngx_str_t *key, uint32_t hash);
void ngx_http_oip_sig_cache_store(ngx_shm_zone_t *zone, ngx_str_t *key,
    uint32_t hash, oip_signature_t *signature, ngx_str_t *model,
    ngx_log_t *log);

/* admission control (ngx_http_oip_admission.c) */
char *ngx_http_oip_admit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
ngx_int_t ngx_http_oip_admission(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
void ngx_http_oip_admission_upstream(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
void ngx_http_oip_admission_end(ngx_http_oip_ctx_t *ctx);
ngx_int_t ngx_http_oip_admission_overload(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
ngx_int_t ngx_http_oip_admission_overloaded(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res);
ngx_int_t ngx_http_oip_admission_options(ngx_http_request_t *r,
    oip_options_t *opt);
ngx_http_oip_adm_e ngx_http_oip_admission_result(ngx_http_oip_ctx_t *ctx);

/* its shared-memory zone (ngx_http_oip_admission_zone.c) */

typedef struct {
    ngx_str_t              key;
    ngx_str_t              model;
    uint64_t               bytes;
    ngx_uint_t             level;       /* 1 the highest */
    ngx_http_oip_admit_t  *conf;
    ngx_log_t             *log;
    ngx_uint_t             shed;        /* out: waiters it displaced */
    ngx_uint_t             waiting;     /* out: requests that wait */
    ngx_uint_t             held;        /* out: requests in flight */
    ngx_uint_t             retry;       /* out: Retry-After, seconds */
} ngx_http_oip_adm_ask_t;

char *ngx_http_oip_admission_zone(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_shm_zone_t *ngx_http_oip_admission_zone_ref(ngx_conf_t *cf,
    ngx_str_t *name);
void ngx_http_oip_admission_start(ngx_cycle_t *cycle, ngx_array_t *zones);
ngx_int_t ngx_http_oip_admission_take(ngx_shm_zone_t *shm_zone,
    ngx_http_oip_adm_ask_t *a, ngx_http_oip_share_t **share);
ngx_uint_t ngx_http_oip_admission_granted(ngx_http_oip_share_t *s,
    uint64_t *granted);
ngx_uint_t ngx_http_oip_admission_shed(ngx_http_oip_share_t *s);
ngx_int_t ngx_http_oip_admission_leave(ngx_shm_zone_t *shm_zone,
    ngx_http_oip_share_t *s, ngx_uint_t *retry, ngx_uint_t *grants);
ngx_uint_t ngx_http_oip_admission_release(ngx_shm_zone_t *shm_zone,
    ngx_http_oip_share_t *s);
void ngx_http_oip_admission_sum(ngx_shm_zone_t *shm_zone,
    ngx_int_t (*found)(void *data, u_char *model, size_t len), void *data,
    uint64_t *requests, uint64_t *bytes, uint64_t *waiting);

/* the sequence balancer (ngx_http_oip_sequence.c) */
char *ngx_http_oip_sequence(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
u_char *ngx_http_oip_sequence_lost(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
ngx_int_t ngx_http_oip_sequence_lose(ngx_http_request_t *r);
ngx_int_t ngx_http_oip_sequence_gone(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, char *error);
void ngx_http_oip_sequence_sum(ngx_shm_zone_t *shm_zone,
    ngx_int_t (*found)(void *data, u_char *model, size_t len), void *data,
    uint64_t *active);
void ngx_http_oip_metrics_sequence(ngx_http_request_t *r, u_char *model,
    size_t len, ngx_uint_t end);

/* the model-aware edge: fetching signatures (ngx_http_oip_signature.c) */
ngx_int_t ngx_http_oip_signature(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
ngx_int_t ngx_http_oip_signature_refetch(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
void ngx_http_oip_signature_init(ngx_http_oip_main_conf_t *omcf);


extern ngx_module_t  ngx_http_oip_module;
extern ngx_str_t     ngx_http_oip_reasons[NGX_HTTP_OIP_REASONS];


#endif /* _NGX_HTTP_OIP_MODULE_H_INCLUDED_ */
