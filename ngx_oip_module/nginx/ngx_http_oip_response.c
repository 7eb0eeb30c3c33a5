
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The response path: for a 200 answer to a request this module handled
 * and may need to reshape, the headers are held, the body is buffered,
 * the codec gives each output the form the client asked for, and the
 * headers go out with an exact Content-Length (the image filter's model).
 */


#include "ngx_http_oip_module.h"


/* the answer is held (or was, and has gone out): the filters own it */
#define ngx_http_oip_held(ctx)                                                \
    ((ctx)->ans.phase == NGX_HTTP_OIP_ANS_HELD                                \
     || (ctx)->ans.phase == NGX_HTTP_OIP_ANS_HELD_ERROR                       \
     || (ctx)->ans.phase == NGX_HTTP_OIP_ANS_SENT)


static ngx_int_t ngx_http_oip_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_hold(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_own_error(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_not_http(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_page(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, const char *msg);
static ngx_int_t ngx_http_oip_replace_page(ngx_http_request_t *r,
    ngx_chain_t *in, ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_int_t ngx_http_oip_append(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char *data, size_t len);
static ngx_int_t ngx_http_oip_finish(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_convert(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_framing_t *framing);
static ngx_int_t ngx_http_oip_answered(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, int rc, oip_result_t *res);
static ngx_int_t ngx_http_oip_convert_done(ngx_http_request_t *r,
    ngx_http_oip_run_t *run);
static void ngx_http_oip_convert_resume(ngx_http_request_t *r,
    ngx_int_t rc);
static ngx_int_t ngx_http_oip_finish_error(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_answer_error(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char *msg, size_t len);
static ngx_int_t ngx_http_oip_send_held(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_answer_body(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_seg_t *segs, size_t n);
static ngx_int_t ngx_http_oip_send_json(ngx_http_request_t *r,
    ngx_buf_t *b);
static ngx_int_t ngx_http_oip_answer_failed(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_uint_t status, const char *msg);
static ngx_int_t ngx_http_oip_send(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


static ngx_str_t  ngx_http_oip_ihcl = ngx_string(NGX_HTTP_OIP_IHCL);


/* an error answer's message is read from this much of its body, at most */
#define NGX_HTTP_OIP_ERROR_MAX  65536


ngx_int_t
ngx_http_oip_response_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_oip_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_oip_body_filter;

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_header_filter(ngx_http_request_t *r)
{
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    if (r != r->main) {
        /* a signature's fetch made a call: its answer is read back */

        ctx = ngx_http_get_module_ctx(r, ngx_http_oip_module);

        if (ctx == NULL || ctx->req.transport == NULL || ngx_http_oip_held(ctx)
            || r->upstream == NULL)
        {
            return ngx_http_next_header_filter(r);
        }

        return ngx_http_oip_hold(r, ctx);
    }

    if (r->err_status >= NGX_HTTP_BAD_REQUEST) {
        return ngx_http_oip_own_error(r);
    }

    ctx = ngx_http_oip_get_ctx(r);

    if (ctx && (ctx->adm.share || ctx->req.stream)) {
        ngx_http_oip_admission_upstream(r, ctx);
    }

    if (ctx && ctx->req.phase == NGX_HTTP_OIP_PHASE_PASSED && r->upstream
        && r->http_version == NGX_HTTP_VERSION_9 && r->http_protocol.len)
    {
        return ngx_http_oip_not_http(r, ctx);
    }

    if (ctx == NULL || ctx->req.phase != NGX_HTTP_OIP_PHASE_PASSED
        || ngx_http_oip_held(ctx))
    {
        return ngx_http_next_header_filter(r);
    }

    if (ngx_http_oip_stream_opens(r, ctx)) {
        /* its events go as they come (ngx_http_oip_stream.c) */
        return ngx_http_next_header_filter(r);
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    /*
     * An answer is held when there may be something to do: a 200 to
     * reshape to the client's wish or to drop outputs from (or from the
     * cache: its id), an error from the upstream to give the protocol's
     * shape; under oip_upstream_errors pass, a small 503 that may say
     * the runtime's own queue is full (a 429 says it in its status).
     */

    if (r->headers_out.status == NGX_HTTP_TOO_MANY_REQUESTS && r->upstream
        && olcf->errors == NGX_HTTP_OIP_ERRORS_PASS)
    {
        if (ngx_http_oip_admission_overload(r, ctx) != NGX_OK) {
            return NGX_ERROR;
        }

        return ngx_http_next_header_filter(r);
    }

    if (r->header_only || r->method == NGX_HTTP_HEAD
        || !((r->headers_out.status == NGX_HTTP_OK
              && (ctx->ans.manage || r->cached))
             || (r->headers_out.status >= NGX_HTTP_BAD_REQUEST
                 && r->upstream
                 && (olcf->errors == NGX_HTTP_OIP_ERRORS_REWRITE
                     || ((r->headers_out.status
                          == NGX_HTTP_SERVICE_UNAVAILABLE
                          || (r->headers_out.status == NGX_HTTP_BAD_REQUEST
                              && ctx->vars.has_sequence
                              && !ctx->vars.sequence_start))
                         && r->headers_out.content_length_n >= 0
                         && r->headers_out.content_length_n
                            <= NGX_HTTP_OIP_ERROR_MAX)))))
    {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: answer %ui passed on as it is",
                       r->headers_out.status);
        return ngx_http_next_header_filter(r);
    }

    if (r->headers_out.content_encoding
        && r->headers_out.content_encoding->value.len)
    {
        /* asked without Accept-Encoding; compressed all the same */
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "oip: model \"%V\": the upstream compressed its "
                      "answer, passed on as it is", &ctx->model);
        return ngx_http_next_header_filter(r);
    }

    return ngx_http_oip_hold(r, ctx);
}


static ngx_int_t
ngx_http_oip_hold(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    off_t                     len;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    ctx->ans.phase = (r->headers_out.status != NGX_HTTP_OK)
                     ? NGX_HTTP_OIP_ANS_HELD_ERROR : NGX_HTTP_OIP_ANS_HELD;
    ctx->ans.limit = (ctx->ans.phase == NGX_HTTP_OIP_ANS_HELD_ERROR)
                     ? NGX_HTTP_OIP_ERROR_MAX
                            : (size_t) (olcf->max_json_size
                                        + olcf->max_tensor_size);

    /* the whole answer, once, when its size is announced */

    len = r->headers_out.content_length_n;

    /* one that may flow, or go to a file, is not allocated whole yet */

    if (!ngx_http_oip_spool_may(r, ctx, len)
        && len > 0 && (uint64_t) len <= ctx->ans.limit)
    {
        ctx->ans.buf = ngx_palloc(r->pool, (size_t) len);
        if (ctx->ans.buf == NULL) {
            return NGX_ERROR;
        }

        ctx->ans.cap = (size_t) len;
    }

    r->filter_need_in_memory = 1;
    r->allow_ranges = 0;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: answer %ui held, Content-Length %O",
                   r->headers_out.status, len);

    /* the headers go out when the body is known */

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_int_t            rc;
    ngx_uint_t           last, data;
    ngx_chain_t         *cl;
    ngx_http_oip_ctx_t  *ctx;

    if (in == NULL) {
        /* called to go on: an answer that flows, or from files, may have
         * more to send */
        return (r->buffered & NGX_HTTP_OIP_BUFFERED)
               ? ngx_http_oip_spool_on(r)
               : ngx_http_next_body_filter(r, in);
    }

    if (r != r->main) {
        /* only a gRPC metadata subrequest's, held by the header filter */
        ctx = ngx_http_get_module_ctx(r, ngx_http_oip_module);

    } else {
        ctx = ngx_http_oip_get_ctx(r);

        if (ctx && (ctx->ans.phase == NGX_HTTP_OIP_ANS_PAGE
                    || ctx->ans.phase == NGX_HTTP_OIP_ANS_PAGE_SENT))
        {
            return ngx_http_oip_replace_page(r, in, ctx);
        }

        if (ctx && ctx->ans.phase == NGX_HTTP_OIP_ANS_FLOW) {
            return ngx_http_oip_flow_body(r, ctx, in);
        }
    }

    if (ctx == NULL || !ngx_http_oip_held(ctx)) {
        return ngx_http_next_body_filter(r, in);
    }

    last = 0;
    data = 0;
    rc = NGX_OK;

    for (cl = in; cl; cl = cl->next) {

        if (cl->buf->last > cl->buf->pos) {
            data = 1;

            if (ctx->ans.phase != NGX_HTTP_OIP_ANS_SENT && rc == NGX_OK) {
                rc = ngx_http_oip_append(r, ctx, cl->buf->pos,
                                         cl->buf->last - cl->buf->pos);
            }
        }

        cl->buf->pos = cl->buf->last;

        if (cl->buf->last_buf
            || (cl->buf->last_in_chain && r != r->main))
        {
            last = 1;
        }
    }

    if (ctx->ans.phase == NGX_HTTP_OIP_ANS_SENT) {
        /* the answer has gone out: the rest is dropped */
        return NGX_OK;
    }

    if (ctx->ans.may_flow && rc == NGX_OK) {
        rc = ngx_http_oip_flow_start(r, ctx, last);

        if (rc != NGX_DECLINED) {
            return rc;
        }

        rc = NGX_OK;
    }

    /*
     * A lone flush once the upstream connection is gone: the upstream
     * failed after its headers (on success a last_buf comes).  The held
     * headers were never sent, so the client can still get a real error.
     */

    if (!last && !data && r->upstream && r->upstream->peer.connection == NULL)
    {
        return ngx_http_oip_answer_failed(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                   "upstream answer: cut short, the upstream "
                                   "failed or timed out after its headers");
    }

    if (rc != NGX_OK) {
        return ngx_http_oip_answer_failed(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                   "upstream answer: larger than "
                                   "oip_max_json_size plus "
                                   "oip_max_tensor_size");
    }

    if (!last) {
        return NGX_OK;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: answer of %uz bytes buffered", ctx->ans.len);

    if (ctx->ans.phase == NGX_HTTP_OIP_ANS_HELD_ERROR) {
        return ngx_http_oip_finish_error(r, ctx);
    }

    return ngx_http_oip_finish(r, ctx);
}


/*
 * nginx's own error page (client_max_body_size, a body that could not be
 * read, an upstream that could not be reached or timed out) for an infer
 * request where oip is on: JSON, as every other error there.
 */

static ngx_int_t
ngx_http_oip_own_error(ngx_http_request_t *r)
{
    ngx_str_t                 model, version;
    const char               *msg;
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    ctx = ngx_http_oip_get_ctx(r);

    /* translated to gRPC, its URI is the method's path by now */

    if (!olcf->enable || r->error_page
        || r->headers_out.status != r->err_status
        || ((ctx == NULL
             || !(ctx->req.transport->any_uri || ctx->req.stream))
            && (r->method != NGX_HTTP_POST
                || ngx_http_oip_infer_uri(&r->uri, &model, &version)
                   != NGX_OK)))
    {
        return ngx_http_next_header_filter(r);
    }

    /* a sequence whose runtime is gone: a 503 that says what to do */

    if (ctx && ctx->req.sequence_lost) {
        msg = (const char *) ngx_http_oip_sequence_lost(r, ctx);
        if (msg == NULL) {
            return NGX_ERROR;
        }

        r->headers_out.status = NGX_HTTP_SERVICE_UNAVAILABLE;

        return ngx_http_oip_page(r, ctx, msg);
    }

    switch (r->err_status) {
    case NGX_HTTP_BAD_REQUEST:
        msg = "the request could not be read";
        break;
    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        msg = "the request body exceeds client_max_body_size";
        break;
    case NGX_HTTP_BAD_GATEWAY:
        msg = "the upstream could not be reached or failed";
        break;
    case NGX_HTTP_GATEWAY_TIME_OUT:
        msg = (ctx && ctx->stream && ctx->stream->idle.timedout)
              ? NGX_HTTP_OIP_IDLE_ERROR : "the upstream did not answer in time";
        break;
    case NGX_HTTP_SERVICE_UNAVAILABLE:
        msg = "the service is unavailable";
        break;
    case NGX_HTTP_TOO_MANY_REQUESTS:
        msg = "too many requests: a limit_req or limit_conn limit";
        break;
    default:
        msg = "the request failed";
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: nginx's error page %ui given as JSON",
                   r->err_status);

    return ngx_http_oip_page(r, NULL, msg);
}


/*
 * An upstream that does not speak HTTP makes the proxy pass its bytes on
 * as an HTTP/0.9 answer, headers and all missing.  For a request this
 * module handled, that is a bad gateway, said to the client in its own
 * HTTP version.
 */

static ngx_int_t
ngx_http_oip_not_http(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
#if (NGX_HTTP_V2)
    if (r->stream) {
        r->http_version = NGX_HTTP_VERSION_20;

    } else
#endif
    if (r->http_protocol.len == sizeof("HTTP/1.0") - 1
               && ngx_strncmp(r->http_protocol.data, "HTTP/1.0",
                              sizeof("HTTP/1.0") - 1) == 0)
    {
        r->http_version = NGX_HTTP_VERSION_10;

    } else {
        r->http_version = NGX_HTTP_VERSION_11;
    }

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "oip: model \"%V\": upstream answer: not HTTP",
                  &ctx->model);

    ngx_http_clean_header(r);
    r->headers_out.status = NGX_HTTP_BAD_GATEWAY;
    r->keepalive = 0;

    return ngx_http_oip_page(r, ctx, "upstream answer: not HTTP");
}


/* the answer becomes {"error": msg}, with the status already set */

static ngx_int_t
ngx_http_oip_page(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    const char *msg)
{
    ngx_buf_t  *b;

    if (ctx == NULL) {
        ctx = ngx_http_oip_get_ctx(r);
    }

    if (ctx == NULL) {
        ctx = ngx_http_oip_create_ctx(r);
        if (ctx == NULL) {
            return NGX_ERROR;
        }
    }

    b = ngx_http_oip_error_json(r, (u_char *) msg, ngx_strlen(msg));
    if (b == NULL) {
        return NGX_ERROR;
    }

    ctx->ans.page.data = b->pos;
    ctx->ans.page.len = b->last - b->pos;
    ctx->ans.phase = NGX_HTTP_OIP_ANS_PAGE;

    r->headers_out.content_length_n = ctx->ans.page.len;

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    ngx_http_oip_content_type(r, OIP_TYPE_JSON);

    return ngx_http_next_header_filter(r);
}


static ngx_int_t
ngx_http_oip_replace_page(ngx_http_request_t *r, ngx_chain_t *in,
    ngx_http_oip_ctx_t *ctx)
{
    ngx_buf_t    *b;
    ngx_chain_t   out, *cl;

    for (cl = in; cl; cl = cl->next) {
        cl->buf->pos = cl->buf->last;
    }

    if (ctx->ans.phase == NGX_HTTP_OIP_ANS_PAGE_SENT) {
        return NGX_OK;
    }

    ctx->ans.phase = NGX_HTTP_OIP_ANS_PAGE_SENT;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = ctx->ans.page.data;
    b->last = ctx->ans.page.data + ctx->ans.page.len;
    b->memory = 1;
    b->last_buf = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_next_body_filter(r, &out);
}


static ngx_int_t
ngx_http_oip_append(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    u_char *data, size_t len)
{
    size_t     cap;
    u_char    *buf;
    ngx_int_t  rc;

    if (len == 0) {
        return NGX_OK;
    }

    if (len > ctx->ans.limit - ctx->ans.len) {
        if (ctx->ans.phase != NGX_HTTP_OIP_ANS_HELD_ERROR) {
            return NGX_DECLINED;
        }

        /* an error's message is in its beginning: the rest is dropped */
        len = ctx->ans.limit - ctx->ans.len;

        if (len == 0) {
            return NGX_OK;
        }
    }

    /* past oip_buffer, one to be converted may go to a file */

    rc = ngx_http_oip_spool_hold(r, ctx, data, len);

    if (rc != NGX_DECLINED) {
        return rc;
    }

    if (ctx->ans.len + len > ctx->ans.cap) {
        cap = ngx_max(ctx->ans.cap * 2, ctx->ans.len + len);
        cap = ngx_max(cap, 16384);
        cap = ngx_min(cap, ctx->ans.limit);

        buf = ngx_palloc(r->pool, cap);
        if (buf == NULL) {
            return NGX_ERROR;
        }

        if (ctx->ans.len) {
            ngx_memcpy(buf, ctx->ans.buf, ctx->ans.len);
        }

        if (ctx->ans.buf) {
            (void) ngx_pfree(r->pool, ctx->ans.buf);
        }

        ctx->ans.buf = buf;
        ctx->ans.cap = cap;
    }

    ngx_memcpy(ctx->ans.buf + ctx->ans.len, data, len);
    ctx->ans.len += len;

    return NGX_OK;
}


/* the answer held whole, as its transport reads it */

static ngx_int_t
ngx_http_oip_finish(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    oip_result_t    res;
    oip_framing_t   framing;

    switch (ctx->req.transport->answer(r, ctx, &res, &framing)) {

    case NGX_OK:
        return ngx_http_oip_convert(r, ctx, &framing);

    case NGX_DONE:
        if (r->headers_out.content_length) {
            r->headers_out.content_length->hash = 0;
            r->headers_out.content_length = NULL;
        }

        r->headers_out.content_length_n = res.body_len;
        ngx_http_oip_content_type(r, res.content_type);

        return ngx_http_oip_answer_body(r, ctx, res.segs, res.nsegs);

    case NGX_DECLINED:

        /* a gRPC status has no 429 of its own: only Triton's words */

        if (res.reason == OIP_REASON_QUEUE_FULL
            && ngx_http_oip_admission_overloaded(r, ctx, &res) != NGX_OK)
        {
            return NGX_ERROR;
        }

        if (res.reason == OIP_REASON_SEQUENCE_START
            && ngx_http_oip_sequence_gone(r, ctx, res.error) == NGX_ERROR)
        {
            return NGX_ERROR;
        }

        return ngx_http_oip_answer_error(r, ctx, (u_char *) res.error,
                                         ngx_strlen(res.error));

    case NGX_ABORT:
        return ngx_http_oip_answer_failed(r, ctx, res.status, res.error);

    default:
        return NGX_ERROR;
    }
}


/*
 * The held answer (ctx->ans.buf), framed so, given the client's form: here,
 * or in a thread (NGX_AGAIN then, the answer held back: the writer waits
 * on r->buffered and r->aio).
 */

static ngx_int_t
ngx_http_oip_convert(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_framing_t *framing)
{
    ngx_int_t            rc;
    ngx_http_oip_run_t   run;

    run.r = r;
    run.done = ngx_http_oip_convert_done;
    run.resume = ngx_http_oip_convert_resume;
    run.response = 1;
    run.digested = 0;
    run.threaded = 0;
    run.framing = *framing;
    run.wish = &ctx->ans.wish;
    run.body = ctx->ans.buf ? ctx->ans.buf : (u_char *) "";
    run.len = ctx->ans.len;

    ngx_http_oip_options(r, &run.opt);

    rc = ctx->ans.spool ? ngx_http_oip_spool_answer(r, ctx, &run.body,
                                                    &run.len, &run.opt.sink)
                        : NGX_DECLINED;

    if (rc == NGX_ABORT) {
        return ngx_http_oip_answer_failed(r, ctx,
                                          NGX_HTTP_INTERNAL_SERVER_ERROR,
                                          "the answer could not be written "
                                          "to a temporary file");
    }

    if (rc == NGX_ERROR) {
        return NGX_ERROR;
    }

    /* from the cache: the answer to another request, its id not ours */

    if (r->cached) {
        run.opt.answer_id_set = 1;
        run.opt.answer_id = ctx->vars.id.len ? ctx->vars.id.data : NULL;
        run.opt.answer_id_len = ctx->vars.id.len;
    }

    rc = ngx_http_oip_run(&run);

    if (rc == NGX_BUSY) {
        r->buffered |= NGX_HTTP_OIP_BUFFERED;
        return NGX_AGAIN;
    }

    return rc;
}


static ngx_int_t
ngx_http_oip_convert_done(ngx_http_request_t *r, ngx_http_oip_run_t *run)
{
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_get_ctx(r);

    r->buffered &= ~NGX_HTTP_OIP_BUFFERED;
    ctx->vars.answer_usec += run->usec;

    /* a client gone meanwhile gets nothing: its request is ending */

    if (run->threaded && r->connection->error) {
        return NGX_ERROR;
    }

    return ngx_http_oip_answered(r, ctx, run->rc, &run->res);
}


/* after a thread: on with whatever waits (the writer, the upstream, a
 * finalizer) */

static void
ngx_http_oip_convert_resume(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_connection_t  *c;

    c = r->connection;

    if (rc == NGX_ERROR) {
        c->error = 1;
    }

    c->write->handler(c->write);
}


/* the codec's verdict on an answer: it goes out, or a JSON error */

static ngx_int_t
ngx_http_oip_answered(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    int rc, oip_result_t *res)
{
    ctx->vars.answer_timed = 1;

    if (rc != 0) {
        return ngx_http_oip_answer_failed(r, ctx, res->status,
                                                res->error);
    }

    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: answer %s: binary:%d body:%uz json:%uz "
                   "segments:%uz",
                   res->reshaped ? "reshaped" : "already as asked",
                   res->binary, res->body_len, res->header_len, res->nsegs);

    /* a cached answer given its id only is not converted */

    ctx->vars.answer = (res->reshaped
                   && (!r->cached || res->in_form != res->out_form
                       || res->in_form == OIP_SHAPE_MIXED))
                  ? NGX_HTTP_OIP_ANSWER_CONVERTED
                  : NGX_HTTP_OIP_ANSWER_PASSED;

    ctx->vars.answer_bytes = res->tensor_bytes;
    ctx->vars.answer_form = res->out_form;

    if (ctx->req.generate == NGX_HTTP_OIP_GEN_EMULATE
        && ngx_http_oip_generate_answer(r, ctx, res) != NGX_OK)
    {
        return ngx_http_oip_answer_failed(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                          res->error);
    }

    return ngx_http_oip_send(r, ctx, res);
}


/*
 * An upstream's error answer: as it came if it is {"error": string}
 * already, else {"error": what it says}, its status kept.
 */

static ngx_int_t
ngx_http_oip_finish_error(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    int                       rc;
    ngx_int_t                 gone;
    oip_alloc_t               alloc;
    oip_header_t              type;
    oip_result_t              res;
    ngx_http_oip_loc_conf_t  *olcf;

    type.data = r->headers_out.content_type.data;
    type.len = r->headers_out.content_type.len;
    type.count = (type.len != 0);

    ngx_http_oip_allocator(r, &alloc);

    rc = oip_response_error(&res, &alloc, r->headers_out.status, &type,
                            ctx->ans.buf ? ctx->ans.buf : (u_char *) "",
                            ctx->ans.len);

    if (ngx_http_oip_admission_overloaded(r, ctx, &res) != NGX_OK) {
        return NGX_ERROR;
    }

    if (res.reason == OIP_REASON_SEQUENCE_START) {
        gone = ngx_http_oip_sequence_gone(r, ctx, res.error);

        if (gone != NGX_DECLINED) {
            return (gone == NGX_OK)
                   ? ngx_http_oip_answer_error(r, ctx, (u_char *) res.error,
                                               ngx_strlen(res.error))
                   : NGX_ERROR;
        }
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (olcf->errors == NGX_HTTP_OIP_ERRORS_PASS) {
        /* held only to be read */
        return ngx_http_oip_send_held(r, ctx);
    }

    if (rc == 0) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: error answer %ui already in the protocol's "
                       "shape", r->headers_out.status);

        return ngx_http_oip_send_held(r, ctx);
    }

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "oip: model \"%V\": upstream error %ui given as "
                  "{\"error\": ...}: %s", &ctx->model,
                  r->headers_out.status, res.error);

    return ngx_http_oip_answer_error(r, ctx, (u_char *) res.error,
                                     ngx_strlen(res.error));
}


/* {"error": msg} in place of the answer, its status already set */

static ngx_int_t
ngx_http_oip_answer_error(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    u_char *msg, size_t len)
{
    ngx_buf_t        *b;
    oip_header_t      ihcl;
    ngx_table_elt_t  *h;

    ctx->ans.phase = NGX_HTTP_OIP_ANS_SENT;

    b = ngx_http_oip_error_json(r, msg, len);
    if (b == NULL) {
        return NGX_ERROR;
    }

    /* the status and the other headers stay the upstream's */

    while ((h = ngx_http_oip_header(&r->headers_out.headers,
                                    &ngx_http_oip_ihcl, &ihcl))
           != NULL)
    {
        h->hash = 0;
    }

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    ngx_http_clear_etag(r);
    ngx_http_clear_last_modified(r);

    return ngx_http_oip_send_json(r, b);
}


/* what was held, sent on as it came, headers and all */

static ngx_int_t
ngx_http_oip_send_held(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    oip_seg_t  held;

    held.data = ctx->ans.buf;
    held.len = ctx->ans.len;

    return ngx_http_oip_answer_body(r, ctx, &held, 1);
}


/* the held headers, then the body: segments, or a lone last buffer */

static ngx_int_t
ngx_http_oip_answer_body(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_seg_t *segs, size_t n)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t  *out;

    ctx->ans.phase = NGX_HTTP_OIP_ANS_SENT;

    if (ngx_http_oip_chain(r, segs, n, &out, &b) != NGX_OK) {
        return NGX_ERROR;
    }

    if (out == NULL) {
        /* an empty answer */

        b = ngx_calloc_buf(r->pool);
        out = ngx_alloc_chain_link(r->pool);

        if (b == NULL || out == NULL) {
            return NGX_ERROR;
        }

        out->buf = b;
        out->next = NULL;
    }

    if (r == r->main) {
        b->last_buf = 1;

    } else {
        b->last_in_chain = 1;
    }

    rc = ngx_http_next_header_filter(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    return ngx_http_next_body_filter(r, out);
}


static ngx_int_t
ngx_http_oip_send(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res)
{
    u_char           *p;
    ngx_str_t         v;
    const char       *type;
    oip_header_t      ihcl;
    ngx_table_elt_t  *h;

    if (res->rewritten) {
        ngx_http_clear_etag(r);
    }

    /*
     * The headers say what the body is, whoever answered: runtimes label
     * binary answers in their own ways (a lower-case IHCL, a JSON type).
     */

    while ((h = ngx_http_oip_header(&r->headers_out.headers,
                                    &ngx_http_oip_ihcl, &ihcl))
           != NULL)
    {
        h->hash = 0;
    }

    type = res->content_type;

    if (res->binary && ctx->req.carrier != OIP_CARRIER_HEADER) {
        /* the length in the media type the client sent its own in */

        p = ngx_pnalloc(r->pool, OIP_CARRIER_TYPE_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        if (oip_carrier_type(ctx->req.carrier, (int64_t) res->header_len,
                             (char *) p, OIP_CARRIER_TYPE_LEN)
            == 0)
        {
            return NGX_ERROR;
        }

        type = (const char *) p;

    } else if (res->binary) {
        p = ngx_pnalloc(r->pool, NGX_SIZE_T_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v.data = p;
        v.len = ngx_sprintf(p, "%uz", res->header_len) - p;

        if (ngx_http_oip_header_push(&r->headers_out.headers,
                                     &ngx_http_oip_ihcl, &v)
            == NULL)
        {
            return NGX_ERROR;
        }
    }

    ngx_http_oip_content_type(r, type);

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    r->headers_out.content_length_n = res->body_len;

    if (ctx->ans.spool) {
        return ngx_http_oip_spool_send(r, ctx, res);
    }

    if (res->rewritten) {
        return ngx_http_oip_answer_body(r, ctx, res->segs, res->nsegs);
    }

    /* the tensors were right as they came */

    return ngx_http_oip_send_held(r, ctx);
}


/* a JSON 502 in place of an answer that cannot be given as asked */

static ngx_int_t
ngx_http_oip_answer_failed(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_uint_t status, const char *msg)
{
    ngx_buf_t  *b;

    ctx->vars.answer = NGX_HTTP_OIP_ANSWER_FAILED;
    ctx->ans.phase = NGX_HTTP_OIP_ANS_SENT;

    ngx_http_oip_uncache(r);

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "oip: model \"%V\": %s", &ctx->model, msg);

    b = ngx_http_oip_error_json(r, (u_char *) msg, ngx_strlen(msg));
    if (b == NULL) {
        return NGX_ERROR;
    }

    ngx_http_clean_header(r);

    r->headers_out.status = status;
    r->keepalive = 0;

    return ngx_http_oip_send_json(r, b);
}


/* the held headers, said to be JSON of b's length, then b */

static ngx_int_t
ngx_http_oip_send_json(ngx_http_request_t *r, ngx_buf_t *b)
{
    ngx_int_t     rc;
    ngx_chain_t   out;

    r->headers_out.content_length_n = b->last - b->pos;
    ngx_http_oip_content_type(r, OIP_TYPE_JSON);

    rc = ngx_http_next_header_filter(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_next_body_filter(r, &out);
}
