
/*
 * Copyright (C) ngx_oip_module authors
 *
 * A request as oip_request.c reads it, shared with oip_digest.c, which
 * writes its canonical form, and oip_pb_request.c, which writes it as
 * protobuf.
 */


#ifndef _OIP_REQUEST_H_INCLUDED_
#define _OIP_REQUEST_H_INCLUDED_


#include "oip_message.h"


/* an object that may carry a boolean flag in its "parameters" */

typedef struct {
    const uint8_t         *close;       /* the object's '}' */
    oip_member_t           params;
    const uint8_t         *params_at;   /* its '{' */
    const uint8_t         *params_close;
    size_t                 params_n;
    oip_member_t           flag;
    const uint8_t         *flag_at;     /* the flag's value */
    unsigned               has_params:1;
    unsigned               has_flag:1;
    unsigned               flag_true:1;
} oip_flagged_t;


typedef struct {
    oip_msg_t              m;
    oip_result_t          *res;

    oip_flagged_t          top;
    oip_flagged_t         *outs;
    oip_key_t             *out_names;
    size_t                 nouts;
    size_t                 outs_cap;
    size_t                 names_cap;

    uint8_t               *sig_seen;    /* per declared input */

    oip_str_t              id;          /* a string "id" */
    uint64_t               priority;    /* parameters.priority */
    uint64_t               timeout;     /* parameters.timeout, µs */
    const uint8_t         *priority_at; /* their digits */
    const uint8_t         *priority_end;
    const uint8_t         *timeout_at;
    const uint8_t         *timeout_end;
    uint64_t               priority_out; /* the effective priority */
    uint64_t               sequence_id;  /* parameters.sequence_id: a */
    oip_str_t              sequence_str; /* number, or a string */

    unsigned               id_other:1;  /* an "id" neither string nor null */
    unsigned               raw:1;
    unsigned               misfit:1;    /* refused by the signature */
    unsigned               has_priority:1;
    unsigned               has_timeout:1;
    unsigned               priority_given:1; /* sent, or oip_priority's */
    unsigned               priority_new:1;   /* priority_out is written */
    unsigned               sequence_string:1; /* the id is a string */
    unsigned               sequence_start:1;
    unsigned               sequence_end:1;
} oip_req_t;


/*
 * The request's parameters (oip_params.c): a request-level "priority"
 * or "timeout" read, or one of the sequence batcher's, the scanner at
 * its value (0, or -1 with a 400), and the sequence given the result;
 * the effective priority decided; the edits of a REST request's
 * parameters made (the outputs' flags, the priority, the timeout's
 * place).
 */
int oip_request_uint(oip_req_t *rq, const oip_str_t *key);
int oip_request_sequence(oip_req_t *rq, const oip_str_t *key);
int oip_request_sequence_result(oip_req_t *rq, oip_result_t *res);
void oip_request_priority(oip_req_t *rq);
int oip_request_params_edits(oip_req_t *rq);

/*
 * Hands the canonical form of what determines the upstream's answer to
 * the options' digest.  Returns 1; 0 when a tensor's bytes are not in the
 * request (shared memory); -1 with the error in the context.
 */
int oip_request_digest(oip_req_t *rq);

/*
 * The request as one framed ModelInferRequest (oip_pb_request.c), written
 * from its items: the target of opt->grpc.  Returns 0, or -1 with the
 * error in the context.
 */
int oip_request_grpc(oip_msg_t *m, oip_result_t *res);

/*
 * With a sink, raw contents are in its file, each led by its field's tag
 * and length: the bytes that lead a tensor of len bytes (m->lead).
 */
size_t oip_request_grpc_lead(uint64_t len);


#endif /* _OIP_REQUEST_H_INCLUDED_ */
