
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The protocol's gRPC transport (inference.GRPCInferenceService), for
 * runtimes that serve gRPC only or best: its methods' paths, the calls
 * of health and metadata and their answers as the REST answers they
 * stand for, and grpc-status as an HTTP status.  ModelInfer's messages
 * are oip_pb_request.c's and oip_pb_answer.c's, protobuf oip_pb.c's.
 */


#include "oip_pb.h"


const char  *const oip_grpc_paths[] = {
    "/inference.GRPCInferenceService/ServerLive",
    "/inference.GRPCInferenceService/ServerReady",
    "/inference.GRPCInferenceService/ModelReady",
    "/inference.GRPCInferenceService/ServerMetadata",
    "/inference.GRPCInferenceService/ModelMetadata",
    "/inference.GRPCInferenceService/ModelInfer",
    "/inference.GRPCInferenceService/ModelStreamInfer"
};


/* ------------------------------------------- health and metadata */

int
oip_grpc_call(oip_result_t *res, const oip_alloc_t *a,
    const oip_grpc_options_t *g, oip_rpc_e rpc)
{
    size_t      len;
    uint8_t    *p;
    oip_ctx_t   c;
    oip_seg_t  *seg;

    memset(res, 0, sizeof(oip_result_t));
    oip_ctx_init(&c, a, res->error, &res->reason, (size_t) -1);

    /* ModelReadyRequest, ModelMetadataRequest: name 1, version 2 */

    len = 0;

    if (rpc == OIP_RPC_MODEL_READY || rpc == OIP_RPC_MODEL_METADATA) {
        len += g->model_len ? 1 + oip_pb_varint_len(g->model_len)
                              + g->model_len : 0;
        len += g->version_len ? 1 + oip_pb_varint_len(g->version_len)
                                + g->version_len : 0;
    }

    seg = oip_alloc(&c, sizeof(oip_seg_t));
    p = oip_alloc(&c, 5 + len);

    if (seg == NULL || p == NULL) {
        return res->status = c.status;
    }

    seg->data = p;
    seg->len = 5 + len;
    seg->file = -1;

    oip_grpc_frame(p, len);
    p += 5;

    if (len && g->model_len) {
        *p++ = 1 << 3 | OIP_PB_LEN;
        p = oip_pb_varint_put(p, g->model_len);
        p = (uint8_t *) memcpy(p, g->model, g->model_len) + g->model_len;
    }

    if (len && g->version_len) {
        *p++ = 2 << 3 | OIP_PB_LEN;
        p = oip_pb_varint_put(p, g->version_len);
        memcpy(p, g->version, g->version_len);
    }

    res->segs = seg;
    res->nsegs = 1;
    res->body_len = seg->len;
    res->rewritten = 1;
    res->content_type = OIP_TYPE_GRPC;

    return res->status = 0;
}


/* repeated string field as a JSON array */

static int
oip_gans_strings(oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field)
{
    int        rc, n;
    oip_pbr_t  r;
    oip_pbf_t  f;

    r.p = msg;
    r.end = msg + len;
    n = 0;

    if (oip_out_write(o, "[", 1) != 0) {
        return -1;
    }

    while ((rc = oip_pbr_next(&r, &f)) == 1) {
        if (f.field == field && f.type == OIP_PB_LEN) {
            if ((n++ && oip_out_write(o, ",", 1) != 0)
                || oip_gres_text(o, f.data, f.len) != 0)
            {
                return -1;
            }
        }
    }

    return oip_out_write(o, "]", 1);
}


/* the string field 'field' of a message, "" when absent */

static int
oip_gans_string(oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field)
{
    oip_pbr_t  r;
    oip_pbf_t  f, s;

    r.p = msg;
    r.end = msg + len;
    memset(&s, 0, sizeof(oip_pbf_t));

    while (oip_pbr_next(&r, &f) == 1) {
        if (f.field == field && f.type == OIP_PB_LEN) {
            s = f;
        }
    }

    return oip_gres_text(o, s.data, s.len);
}


/* ModelMetadataResponse.TensorMetadata: name 1, datatype 2, shape 3 */

static int
oip_gans_tensors(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field)
{
    int         n;
    oip_pbr_t   r;
    oip_pbf_t   f;

    r.p = msg;
    r.end = msg + len;
    n = 0;

    if (oip_out_write(o, "[", 1) != 0) {
        return -1;
    }

    while (oip_pbr_next(&r, &f) == 1) {
        if (f.field != field || f.type != OIP_PB_LEN) {
            continue;
        }

        if ((n++ && oip_out_write(o, ",", 1) != 0)
            || oip_out_write(o, "{\"name\":", 8) != 0
            || oip_gans_string(o, f.data, f.len, 1) != 0
            || oip_out_write(o, ",\"datatype\":", 12) != 0
            || oip_gans_string(o, f.data, f.len, 2) != 0
            || oip_out_write(o, ",\"shape\":", 9) != 0
            || oip_gres_shape(c, o, f.data, f.len, 3) != 0
            || oip_out_write(o, "}", 1) != 0)
        {
            return -1;
        }
    }

    return oip_out_write(o, "]", 1);
}


int
oip_grpc_answer(oip_result_t *res, const oip_alloc_t *a, oip_rpc_e rpc,
    const uint8_t *body, size_t len, int *truth)
{
    int          rc;
    size_t       mlen;
    oip_ctx_t    c;
    oip_out_t    o;
    oip_pbr_t    r;
    oip_pbf_t    f;
    const char  *key;
    const uint8_t  *msg;

    memset(res, 0, sizeof(oip_result_t));
    oip_ctx_init(&c, a, res->error, &res->reason, (size_t) -1);

    *truth = -1;

    if (oip_grpc_unframe(&c, body, len, &r) != 0) {
        return res->status = c.status;
    }

    msg = r.p;
    mlen = r.end - r.p;

    /* all of it read once: what is not protobuf is said as such */

    while ((rc = oip_pbr_next(&r, &f)) == 1) { /* void */ }

    if (rc < 0) {
        oip_fail(&c, 502, OIP_REASON_OTHER, "the gRPC answer is not a %s "
                 "response", oip_grpc_paths[rpc]
                             + sizeof("/inference.GRPCInferenceService/") - 1);
        return res->status = c.status;
    }

    oip_out_init(&o, &c, 256);

    switch (rpc) {

    case OIP_RPC_SERVER_LIVE:
    case OIP_RPC_SERVER_READY:
    case OIP_RPC_MODEL_READY:
        /* one bool, field 1 */
        *truth = 0;
        r.p = msg;

        while (oip_pbr_next(&r, &f) == 1) {
            if (f.field == 1 && f.type == OIP_PB_VARINT) {
                *truth = (f.v != 0);
            }
        }

        key = (rpc == OIP_RPC_SERVER_LIVE) ? "{\"live\":" : "{\"ready\":";

        rc = oip_out_write(&o, key, strlen(key)) != 0
             || oip_out_write(&o, *truth ? "true}" : "false}",
                              *truth ? 5 : 6) != 0;
        break;

    case OIP_RPC_SERVER_METADATA:
        /* name 1, version 2, extensions 3 */
        rc = oip_out_write(&o, "{\"name\":", 8) != 0
             || oip_gans_string(&o, msg, mlen, 1) != 0
             || oip_out_write(&o, ",\"version\":", 11) != 0
             || oip_gans_string(&o, msg, mlen, 2) != 0
             || oip_out_write(&o, ",\"extensions\":", 14) != 0
             || oip_gans_strings(&o, msg, mlen, 3) != 0
             || oip_out_write(&o, "}", 1) != 0;
        break;

    default:
        /* ModelMetadataResponse: name 1, versions 2, platform 3,
           inputs 4, outputs 5 */
        rc = oip_out_write(&o, "{\"name\":", 8) != 0
             || oip_gans_string(&o, msg, mlen, 1) != 0
             || oip_out_write(&o, ",\"versions\":", 12) != 0
             || oip_gans_strings(&o, msg, mlen, 2) != 0
             || oip_out_write(&o, ",\"platform\":", 12) != 0
             || oip_gans_string(&o, msg, mlen, 3) != 0
             || oip_out_write(&o, ",\"inputs\":", 10) != 0
             || oip_gans_tensors(&c, &o, msg, mlen, 4) != 0
             || oip_out_write(&o, ",\"outputs\":", 11) != 0
             || oip_gans_tensors(&c, &o, msg, mlen, 5) != 0
             || oip_out_write(&o, "}", 1) != 0;
    }

    if (rc || oip_out_cut(&o) != 0) {
        if (c.status == 0) {
            res->reason = OIP_REASON_OTHER;
        }

        return res->status = c.status ? c.status : 500;
    }

    res->segs = o.segs;
    res->nsegs = o.nsegs;
    res->body_len = o.total;
    res->rewritten = 1;
    res->content_type = OIP_TYPE_JSON;

    return res->status = 0;
}


/*
 * grpc-status as HTTP, as google.rpc.Code documents each code's HTTP
 * mapping; CANCELLED, which it maps to 499 (the client closed), is the
 * upstream's here: 502.
 */

int
oip_grpc_http_status(unsigned code)
{
    static const int  http[] = {
        200,    /* OK */
        502,    /* CANCELLED */
        500,    /* UNKNOWN */
        400,    /* INVALID_ARGUMENT */
        504,    /* DEADLINE_EXCEEDED */
        404,    /* NOT_FOUND */
        409,    /* ALREADY_EXISTS */
        403,    /* PERMISSION_DENIED */
        429,    /* RESOURCE_EXHAUSTED */
        400,    /* FAILED_PRECONDITION */
        409,    /* ABORTED */
        400,    /* OUT_OF_RANGE */
        501,    /* UNIMPLEMENTED */
        500,    /* INTERNAL */
        503,    /* UNAVAILABLE */
        500,    /* DATA_LOSS */
        401     /* UNAUTHENTICATED */
    };

    return (code < sizeof(http) / sizeof(http[0])) ? http[code] : 502;
}
