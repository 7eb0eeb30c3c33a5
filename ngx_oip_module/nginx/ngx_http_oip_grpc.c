
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The gRPC transport (oip_upstream_protocol grpc), one table of the
 * operations the paths call (ngx_http_oip_transport_t): a REST path is
 * routed to its call, an infer request's codec writes its
 * ModelInferRequest (prepare), the request becomes the call nginx's own
 * grpc_pass sends (its method, :path and te set here), and the call's
 * answer, held by the response path, is read here for it.  The paths
 * know this file only by its table.  The protobuf is the codec's.
 */


#include "ngx_http_oip_module.h"


static ngx_int_t ngx_http_oip_grpc_route(ngx_http_request_t *r,
    ngx_http_oip_route_t *rt);
static ngx_int_t ngx_http_oip_grpc_call(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res);
static void ngx_http_oip_grpc_prepare(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_http_oip_run_t *run);
static ngx_int_t ngx_http_oip_grpc_target(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_grpc_answer(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res, oip_framing_t *framing);
static void ngx_http_oip_grpc_options(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_grpc_options_t *g);
static ngx_int_t ngx_http_oip_grpc_status(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_table_elt_t *status,
    ngx_table_elt_t *message, oip_result_t *res);
static ngx_int_t ngx_http_oip_grpc_rest(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res, oip_framing_t *framing);


static ngx_str_t  ngx_http_oip_grpc_status_name = ngx_string("grpc-status");
static ngx_str_t  ngx_http_oip_grpc_message_name =
    ngx_string("grpc-message");


const ngx_http_oip_transport_t  ngx_http_oip_grpc_transport = {
    "grpc",
    ngx_http_oip_grpc_route,
    ngx_http_oip_grpc_call,
    ngx_http_oip_grpc_prepare,
    ngx_http_oip_grpc_target,
    ngx_http_oip_grpc_answer,
    ngx_string("not found: not a path of the protocol this gateway "
               "translates to gRPC"),
    ngx_string("method not allowed: this gateway translates POST for "
               "infer and GET for health and metadata"),
    0,                           /* passes: there is no REST upstream */
    0,                           /* carrier: the call is protobuf */
    1,                           /* subrequests: metadata is a call too */
    1,                           /* any_uri */
    1                            /* messages: ModelStreamInfer's */
};


/*
 * Which call a REST request is: NGX_OK (rpc, model, version set),
 * NGX_DECLINED (a gRPC client's own call: passed on as it is, so that
 * gRPC clients share the location), NGX_HTTP_NOT_FOUND (a REST path
 * with no gRPC call) or NGX_HTTP_NOT_ALLOWED.
 */

static ngx_int_t
ngx_http_oip_grpc_route(ngx_http_request_t *r, ngx_http_oip_route_t *rt)
{
    ngx_uint_t       *rpc;
    ngx_str_t        *uri, *model, *version;
    ngx_table_elt_t  *type;

    static ngx_str_t  live = ngx_string("/v2/health/live");
    static ngx_str_t  ready = ngx_string("/v2/health/ready");
    static ngx_str_t  server = ngx_string("/v2");
    static ngx_str_t  server_slash = ngx_string("/v2/");
    static ngx_str_t  infer = ngx_string("/infer");
    static ngx_str_t  infer_stream = ngx_string("/infer_stream");
    static ngx_str_t  model_ready = ngx_string("/ready");
    static ngx_str_t  none = ngx_string("");

#define ngx_http_oip_grpc_ends(uri, s)                                        \
    ((uri)->len >= (s).len                                                    \
     && ngx_strncmp((uri)->data + (uri)->len - (s).len, (s).data, (s).len)   \
        == 0)

    uri = &r->uri;
    rpc = &rt->rpc;
    model = &rt->model;
    version = &rt->version;

    ngx_str_null(model);
    ngx_str_null(version);

    if (ngx_http_oip_grpc_ends(uri, live)) {
        *rpc = OIP_RPC_SERVER_LIVE;

    } else if (ngx_http_oip_grpc_ends(uri, ready)) {
        *rpc = OIP_RPC_SERVER_READY;

    } else if (ngx_http_oip_grpc_ends(uri, server)
               || ngx_http_oip_grpc_ends(uri, server_slash))
    {
        *rpc = OIP_RPC_SERVER_METADATA;

    } else if (ngx_http_oip_model_uri(uri, &infer, model, version)
               == NGX_OK)
    {
        *rpc = OIP_RPC_MODEL_INFER;

    } else if (ngx_http_oip_model_uri(uri, &infer_stream, model, version)
               == NGX_OK)
    {
        /* Triton's ModelStreamInfer: one request, its answers as events */
        *rpc = OIP_RPC_MODEL_INFER;
        rt->stream = 1;

    } else if (ngx_http_oip_model_uri(uri, &model_ready, model,
                                           version)
               == NGX_OK)
    {
        *rpc = OIP_RPC_MODEL_READY;

    } else if (ngx_http_oip_model_uri(uri, &none, model, version)
               == NGX_OK)
    {
        *rpc = OIP_RPC_MODEL_METADATA;

    } else if (ngx_http_oip_generate_route(r, rt) == NGX_OK) {
        /* emulated: ModelInfer, or ModelStreamInfer for generate_stream */
        if (rt->generate != NGX_HTTP_OIP_GEN_EMULATE) {
            return NGX_HTTP_NOT_FOUND;
        }

    } else {
        type = r->headers_in.content_type;

        if (type && type->value.len >= sizeof(OIP_TYPE_GRPC) - 1
            && ngx_strncasecmp(type->value.data, (u_char *) OIP_TYPE_GRPC,
                               sizeof(OIP_TYPE_GRPC) - 1) == 0)
        {
            return NGX_DECLINED;
        }

        return NGX_HTTP_NOT_FOUND;
    }

#undef ngx_http_oip_grpc_ends

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: REST \"%V\" is the gRPC call %s", uri,
                   oip_grpc_paths[*rpc]);

    if (r->method != (*rpc == OIP_RPC_MODEL_INFER ? NGX_HTTP_POST
                                                  : NGX_HTTP_GET))
    {
        return NGX_HTTP_NOT_ALLOWED;
    }

    return NGX_OK;
}


static void
ngx_http_oip_grpc_options(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_grpc_options_t *g)
{
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    ngx_memzero(g, sizeof(oip_grpc_options_t));

    g->model = ctx->model.data;
    g->model_len = ctx->model.len;
    g->version = ctx->version.data;
    g->version_len = ctx->version.len;
    g->max_message = olcf->grpc_max_message;
    g->typed = olcf->grpc_typed ? 1 : 0;
}


/* a health or metadata GET's call: res->segs, the body to send */

static ngx_int_t
ngx_http_oip_grpc_call(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res)
{
    oip_alloc_t         alloc;
    oip_grpc_options_t  g;

    ngx_http_oip_grpc_options(r, ctx, &g);
    ngx_http_oip_allocator(r, &alloc);

    if (oip_grpc_call(res, &alloc, &g, ctx->req.rpc) != 0) {
        return NGX_ERROR;
    }

    res->manage = 1;

    return NGX_OK;
}


/*
 * An infer request's codec writes its ModelInferRequest from the items
 * it reads, with the binary extension's bytes as raw contents.
 */

static void
ngx_http_oip_grpc_prepare(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_http_oip_run_t *run)
{
    ngx_http_oip_grpc_options(r, ctx, &run->grpc);

    run->opt.inputs = OIP_FORM_BINARY;
    run->opt.grpc = &run->grpc;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: a ModelInferRequest, %s contents, at most %uz "
                   "bytes", run->grpc.typed ? "typed" : "raw",
                   run->grpc.max_message);
}


/*
 * What grpc_pass takes from the request, made the call's: POST, the
 * method's :path (from r->uri: valid_unparsed_uri cleared), and te:
 * trailers, which gRPC servers require and HTTP/1.1 clients never send
 * (the grpc module reads it from r->headers_in.te).  The Content-Type
 * is set with the body.
 */

static ngx_int_t
ngx_http_oip_grpc_target(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_table_elt_t  *te;

    te = ngx_pcalloc(r->pool, sizeof(ngx_table_elt_t));
    if (te == NULL) {
        return NGX_ERROR;
    }

    te->hash = 1;
    ngx_str_set(&te->key, "TE");
    ngx_str_set(&te->value, "trailers");
    te->lowcase_key = (u_char *) "te";

    r->headers_in.te = te;

    r->method = NGX_HTTP_POST;
    ngx_str_set(&r->method_name, "POST");

    r->uri.data = (u_char *) oip_grpc_paths[ctx->req.stream
                                            ? OIP_RPC_MODEL_STREAM_INFER
                                            : ctx->req.rpc];
    r->uri.len = ngx_strlen(r->uri.data);
    r->valid_unparsed_uri = 0;
    ngx_str_null(&r->args);

    return NGX_OK;
}


/*
 * The call's answer, held whole (ctx->ans.buf), the upstream's trailers in
 * r->headers_out.trailers by now (or, for a trailers-only answer, in its
 * headers), read for the response path, which sends what it becomes:
 *   NGX_OK        an infer answer, the ModelInferResponse in ctx->ans.buf,
 *                 framed so (protobuf), to give the client's form;
 *   NGX_DONE      a health or metadata answer: res->segs, JSON, the
 *                 status set;
 *   NGX_DECLINED  a gRPC error: the status set, res->error its message;
 *   NGX_ABORT     not an answer: res->status, res->error (the gateway's
 *                 error);
 *   NGX_ERROR.
 */

static ngx_int_t
ngx_http_oip_grpc_answer(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res, oip_framing_t *framing)
{
    oip_header_t      v;
    ngx_table_elt_t  *status, *message;

    /* in the trailers, or in the headers of a trailers-only answer */

    status = ngx_http_oip_header(&r->headers_out.trailers,
                                 &ngx_http_oip_grpc_status_name, &v);
    if (status == NULL) {
        status = ngx_http_oip_header(&r->headers_out.headers,
                                     &ngx_http_oip_grpc_status_name, &v);
    }

    message = ngx_http_oip_header(&r->headers_out.trailers,
                                  &ngx_http_oip_grpc_message_name, &v);
    if (message == NULL) {
        message = ngx_http_oip_header(&r->headers_out.headers,
                                      &ngx_http_oip_grpc_message_name, &v);
    }

    /* they were the call's: the client is given none of them */

    ngx_http_oip_grpc_hide(&r->headers_out.trailers);
    ngx_http_oip_grpc_hide(&r->headers_out.headers);

    if (status == NULL) {
        ngx_memzero(res, sizeof(oip_result_t));
        res->status = NGX_HTTP_BAD_GATEWAY;
        ngx_cpystrn((u_char *) res->error, (u_char *) "upstream answer: no "
                    "grpc-status, not a gRPC answer", OIP_ERROR_LEN);
        return NGX_ABORT;
    }

    if (status->value.len != 1 || status->value.data[0] != '0') {
        return ngx_http_oip_grpc_status(r, ctx, status, message, res);
    }

    return ngx_http_oip_grpc_rest(r, ctx, res, framing);
}


/* takes every "grpc-" header out of the list (hash 0) */

void
ngx_http_oip_grpc_hide(ngx_list_t *list)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &list->part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len >= 5
            && ngx_strncasecmp(h[i].key.data, (u_char *) "grpc-", 5) == 0)
        {
            h[i].hash = 0;
        }
    }
}


/* a gRPC error: its HTTP status, its message (percent-decoded) */

static ngx_int_t
ngx_http_oip_grpc_status(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_table_elt_t *status, ngx_table_elt_t *message, oip_result_t *res)
{
    u_char     *dst, *src;
    ngx_int_t   code;

    ngx_memzero(res, sizeof(oip_result_t));

    code = ngx_atoi(status->value.data, status->value.len);

    if (code == NGX_ERROR) {
        res->status = NGX_HTTP_BAD_GATEWAY;
        ngx_cpystrn((u_char *) res->error, (u_char *) "upstream answer: a "
                    "grpc-status that is not a number", OIP_ERROR_LEN);
        return NGX_ABORT;
    }

    dst = (u_char *) res->error;

    if (message && message->value.len) {
        /* gRPC over HTTP/2, "Responses": grpc-message is percent-encoded;
         * decoding only shortens it */

        src = message->value.data;
        ngx_unescape_uri(&dst, &src,
                         ngx_min(message->value.len, OIP_ERROR_LEN - 1), 0);
        *dst = '\0';

    } else {
        *ngx_slprintf(dst, dst + OIP_ERROR_LEN - 1, "gRPC status %i", code)
            = '\0';
    }

    ngx_http_clean_header(r);

    /* what its words say, as oip_response_error() says it of REST's */
    res->reason = oip_error_words((uint8_t *) res->error,
                                  ngx_strlen(res->error));
    res->status = oip_grpc_http_status((unsigned) code);
    r->headers_out.status = res->status;

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "oip: model \"%V\": gRPC status %i given as %ui "
                  "{\"error\": ...}: %s", &ctx->model, code,
                  r->headers_out.status, res->error);

    return NGX_DECLINED;
}


/* a gRPC answer with status 0, as the REST answer it stands for */

static ngx_int_t
ngx_http_oip_grpc_rest(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res, oip_framing_t *framing)
{
    int           truth;
    oip_alloc_t   alloc;

    ngx_http_oip_allocator(r, &alloc);

    if (ctx->req.rpc == OIP_RPC_MODEL_INFER) {
        /* the codec reads the held ModelInferResponse into items */

        framing->ihcl = -1;
        framing->encoding = OIP_ENC_NONE;
        framing->carrier = OIP_CARRIER_HEADER;
        framing->protobuf = 1;
        framing->stream = 0;

        return NGX_OK;
    }

    if (oip_grpc_answer(res, &alloc, ctx->req.rpc,
                        ctx->ans.buf ? ctx->ans.buf : (u_char *) "",
                        ctx->ans.len, &truth)
        != 0)
    {
        return NGX_ABORT;
    }

    /* not live, not ready: a status probes and balancers act on */

    r->headers_out.status = (truth == 0) ? NGX_HTTP_SERVICE_UNAVAILABLE
                                         : NGX_HTTP_OK;
    ngx_str_null(&r->headers_out.status_line);

    return NGX_DONE;
}
