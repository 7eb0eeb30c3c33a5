
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The HTTP transport (oip_upstream_protocol http, the default): REST goes
 * on as REST.  A call is a POST to an infer path; anything else passes
 * on untouched; the body the codec makes is sent as it is, and the answer
 * is read by its framing headers.  The gRPC transport is the other table
 * of the same operations (ngx_http_oip_grpc.c).
 */


#include "ngx_http_oip_module.h"


static ngx_int_t ngx_http_oip_http_route(ngx_http_request_t *r,
    ngx_http_oip_route_t *rt);
static ngx_int_t ngx_http_oip_http_answer(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res, oip_framing_t *framing);


static ngx_str_t  ngx_http_oip_http_ihcl = ngx_string(NGX_HTTP_OIP_IHCL);
static ngx_str_t  ngx_http_oip_http_stream = ngx_string("/infer_stream");


const ngx_http_oip_transport_t  ngx_http_oip_http_transport = {
    "http",
    ngx_http_oip_http_route,
    NULL,                        /* every call is an infer request */
    NULL,                        /* the codec's options are the location's */
    NULL,                        /* the request goes where it was sent */
    ngx_http_oip_http_answer,
    ngx_null_string,
    ngx_null_string,
    1,                           /* passes: other paths are the runtime's */
    1,                           /* carrier */
    0,                           /* subrequests: metadata is REST already */
    0,                           /* any_uri */
    0                            /* messages: the runtime's own events */
};


static ngx_int_t
ngx_http_oip_http_route(ngx_http_request_t *r, ngx_http_oip_route_t *rt)
{
    if (r->method != NGX_HTTP_POST) {
        return NGX_DECLINED;
    }

    rt->rpc = OIP_RPC_MODEL_INFER;

    if (ngx_http_oip_infer_uri(&r->uri, &rt->model, &rt->version) == NGX_OK) {
        return NGX_OK;
    }

    /* MLServer's: an infer request, its answers as the runtime's events */

    if (ngx_http_oip_model_uri(&r->uri, &ngx_http_oip_http_stream,
                               &rt->model, &rt->version)
        == NGX_OK)
    {
        rt->stream = 1;
        return NGX_OK;
    }

    return ngx_http_oip_generate_route(r, rt);
}


/* the answer's framing: its IHCL, or its carrier's json-header-size */

static ngx_int_t
ngx_http_oip_http_answer(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res, oip_framing_t *framing)
{
    oip_header_t  ihcl, type;

    (void) ngx_http_oip_header(&r->headers_out.headers,
                               &ngx_http_oip_http_ihcl, &ihcl);

    type.data = r->headers_out.content_type.data;
    type.len = r->headers_out.content_type.len;
    type.count = (type.len != 0);

    if (oip_response_framing(res, framing, &ihcl, &type) != 0) {
        return NGX_ABORT;
    }

    return NGX_OK;
}
