
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The protocol's generate extension: POST .../generate and
 * .../generate_stream.  oip_generate native passes them to a runtime
 * that has them (Triton; its generate_stream's events unbuffered);
 * emulate makes each an infer call from the model's signature, Triton's
 * mapping (ConvertGenerateRequest), and its answers generate answers.
 */


#include "ngx_http_oip_module.h"


static ngx_str_t  ngx_http_oip_generate_path = ngx_string("/generate");
static ngx_str_t  ngx_http_oip_generate_stream_path =
    ngx_string("/generate_stream");


/*
 * Which generate call a POST is: NGX_OK (rt set: passed as the
 * runtime's, or emulated), NGX_DECLINED (a native generate: not the
 * module's), NGX_HTTP_NOT_FOUND (no generate path).
 */

ngx_int_t
ngx_http_oip_generate_route(ngx_http_request_t *r, ngx_http_oip_route_t *rt)
{
    ngx_uint_t                stream;
    ngx_http_oip_loc_conf_t  *olcf;

    if (ngx_http_oip_model_uri(&r->uri, &ngx_http_oip_generate_path,
                               &rt->model, &rt->version)
        == NGX_OK)
    {
        stream = 0;

    } else if (ngx_http_oip_model_uri(&r->uri,
                                      &ngx_http_oip_generate_stream_path,
                                      &rt->model, &rt->version)
               == NGX_OK)
    {
        stream = 1;

    } else {
        return NGX_HTTP_NOT_FOUND;
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    rt->rpc = OIP_RPC_MODEL_INFER;
    rt->stream = stream;

    if (olcf->generate == NGX_HTTP_OIP_GENERATE_NATIVE) {
        if (!stream) {
            return NGX_DECLINED;
        }

        rt->generate = NGX_HTTP_OIP_GEN_PASS;

    } else {
        rt->generate = NGX_HTTP_OIP_GEN_EMULATE;
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: generate%s for model \"%V\": %s",
                   stream ? "_stream" : "", &rt->model,
                   rt->generate == NGX_HTTP_OIP_GEN_PASS ? "the runtime's"
                                                         : "emulated");

    return NGX_OK;
}


/*
 * emulate: the generate request read, and the infer request it stands
 * for made, which the codec then checks and converts as it would the
 * client's own (NGX_OK: *body, *len are it; else the refusal's status).
 */

ngx_int_t
ngx_http_oip_generate_request(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_framing_t *framing, u_char **body, size_t *len)
{
    u_char         *p;
    size_t          i;
    oip_alloc_t     alloc;
    oip_result_t    res;
    oip_options_t   opt;

    if (framing->encoding != OIP_ENC_NONE || framing->ihcl >= 0) {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_BAD_REQUEST,
                                 OIP_REASON_ENCODING, "generate: a request "
                                 "is plain JSON, without Content-Encoding "
                                 "or Inference-Header-Content-Length");
    }

    ngx_http_oip_options(r, &opt);
    ngx_http_oip_allocator(r, &alloc);

    opt.signature = ctx->req.signature;
    opt.model = ctx->model.data;
    opt.model_len = ctx->model.len;

    if (oip_generate_request(&res, &alloc, &opt, *body, *len) != 0) {
        return ngx_http_oip_fail(r, ctx, res.status, res.reason, res.error);
    }

    p = ngx_pnalloc(r->pool, res.body_len);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->req.gen_body = p;
    ctx->req.gen_len = res.body_len;

    for (i = 0; i < res.nsegs; i++) {
        p = ngx_cpymem(p, res.segs[i].data, res.segs[i].len);
    }

    *body = ctx->req.gen_body;
    *len = ctx->req.gen_len;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: generate request as an infer request: \"%*s\"",
                   ngx_min(*len, 256), *body);

    return NGX_OK;
}


/*
 * The codec's verdict on the infer request: what goes upstream is it,
 * never the generate request nginx read, and every output comes back
 * as JSON, to be made the generate answer.
 */

void
ngx_http_oip_generate_made(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res)
{
    if (!res->rewritten) {
        ctx->req.gen_seg.data = ctx->req.gen_body;
        ctx->req.gen_seg.len = ctx->req.gen_len;
        ctx->req.gen_seg.file = 0;

        res->segs = &ctx->req.gen_seg;
        res->nsegs = 1;
        res->body_len = ctx->req.gen_len;
        res->header_len = ctx->req.gen_len;
        res->rewritten = 1;
        res->content_type = OIP_TYPE_JSON;
    }

    ngx_memzero(&res->wish, sizeof(oip_wish_t));
    res->manage = 1;
}


/* over HTTP the call is the model's /infer (gRPC's target names its own) */

ngx_int_t
ngx_http_oip_generate_target(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    u_char     *p;
    size_t      len;
    ngx_str_t  *path;

    if (ctx->req.transport->any_uri) {
        return NGX_OK;
    }

    path = ctx->req.stream ? &ngx_http_oip_generate_stream_path
                           : &ngx_http_oip_generate_path;

    /* the route matched the suffix: what is before it stays */
    len = r->uri.len - path->len;

    p = ngx_pnalloc(r->pool, len + sizeof("/infer") - 1);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(p, r->uri.data, len);
    ngx_memcpy(p + len, "/infer", sizeof("/infer") - 1);

    r->uri.data = p;
    r->uri.len = len + sizeof("/infer") - 1;
    r->valid_unparsed_uri = 0;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: generate emulated by \"%V\"", &r->uri);

    return NGX_OK;
}


/*
 * An infer answer as the generate answer (pool: where the codec's work
 * goes; src, len: the answer's JSON), in res; with event, framed as one
 * server-sent event.
 */

ngx_int_t
ngx_http_oip_generate_json(ngx_http_request_t *r, ngx_pool_t *pool,
    oip_result_t *res, const u_char *src, size_t len, ngx_uint_t event)
{
    u_char         *p, *q;
    size_t          i, n;
    oip_alloc_t     alloc;
    oip_result_t    gres;
    oip_options_t   opt;

    if (src == NULL) {
        /* the segments, in one piece */
        for (n = 0, i = 0; i < res->nsegs; i++) {
            n += res->segs[i].len;
        }

        p = ngx_pnalloc(pool, n ? n : 1);
        if (p == NULL) {
            return NGX_ERROR;
        }

        for (q = p, i = 0; i < res->nsegs; i++) {
            q = ngx_cpymem(q, res->segs[i].data, res->segs[i].len);
        }

        src = p;
        len = n;
    }

    ngx_http_oip_options(r, &opt);
    ngx_http_oip_pool_allocator(pool, &alloc);

    if (oip_generate_answer(&gres, &alloc, &opt, src, len) != 0) {
        ngx_memcpy(res->error, gres.error, OIP_ERROR_LEN);
        res->status = gres.status;
        return NGX_DECLINED;
    }

    if (event) {
        n = sizeof("data: ") - 1 + gres.body_len + 2;

        p = ngx_pnalloc(pool, n);
        if (p == NULL) {
            return NGX_ERROR;
        }

        q = ngx_cpymem(p, "data: ", sizeof("data: ") - 1);

        for (i = 0; i < gres.nsegs; i++) {
            q = ngx_cpymem(q, gres.segs[i].data, gres.segs[i].len);
        }

        *q++ = '\n';
        *q = '\n';

        gres.segs[0].data = p;
        gres.segs[0].len = n;
        gres.nsegs = 1;
        gres.body_len = n;
        gres.content_type = "text/event-stream; charset=utf-8";
    }

    res->segs = gres.segs;
    res->nsegs = gres.nsegs;
    res->body_len = gres.body_len;
    res->header_len = gres.body_len;
    res->content_type = gres.content_type;
    res->binary = 0;
    res->rewritten = 1;

    return NGX_OK;
}


/* the held answer to an emulated call, made the generate answer */

ngx_int_t
ngx_http_oip_generate_answer(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res)
{
    ngx_int_t  rc;

    rc = ngx_http_oip_generate_json(r, r->pool, res,
                                    res->rewritten ? NULL : ctx->ans.buf,
                                    res->rewritten ? 0 : ctx->ans.len,
                                    ctx->req.stream);

    if (rc == NGX_OK && ctx->req.stream) {
        /* one event: the runtime answered once */
        if (ngx_http_oip_stream_state(r, ctx) == NULL) {
            return NGX_ERROR;
        }

        ctx->stream->events = 1;
        ctx->stream->first_usec = ngx_http_oip_usec()
                                  - ngx_http_oip_start_usec(r);
    }

    return rc;
}
