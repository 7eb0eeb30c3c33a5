
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Streamed answers: a ModelStreamInfer call's messages, as they arrive,
 * each one server-sent event "data: <the answer as JSON>\n\n" (Triton's
 * and MLServer's framing: no "event:", no "id:").  grpc_pass never
 * buffers: the filter gets each read as it comes, gathers whole gRPC
 * messages, has the codec read each one and sends its event at once,
 * flushed.  The headers wait for the first event, so that an error
 * before it is still a JSON error answer with its status; an error
 * after it is one last event, data: {"error": "..."}.  Memory is one
 * message being gathered, a pool per event destroyed once it is
 * written, and the events' buffers, reused once sent.
 */


#include "ngx_http_oip_module.h"


#define NGX_HTTP_OIP_EVENT_MIN  4096   /* an event buffer: large, so that
                                          ngx_pfree() gives it back */


static ngx_int_t ngx_http_oip_stream_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_stream_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_int_t ngx_http_oip_stream_passing(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_stream_pass(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_chain_t *in);
static void ngx_http_oip_stream_count(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char *p, u_char *last);
static ngx_int_t ngx_http_oip_stream_cut(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_chain_t ***ll);
static ngx_uint_t ngx_http_oip_stream_lone_flush(ngx_chain_t *in);
static ngx_int_t ngx_http_oip_stream_gather(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char *p, size_t len, ngx_chain_t ***ll);
static ngx_int_t ngx_http_oip_stream_message(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char *msg, size_t len, ngx_chain_t ***ll);
static ngx_int_t ngx_http_oip_stream_end(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_chain_t ***ll);
static ngx_int_t ngx_http_oip_stream_error(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_uint_t status, u_char *msg,
    ngx_chain_t ***ll);
static ngx_buf_t *ngx_http_oip_stream_buf(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, size_t size, ngx_chain_t ***ll);
static ngx_int_t ngx_http_oip_stream_open(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_stream_refuse(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static void ngx_http_oip_stream_idle(ngx_event_t *ev);
static void ngx_http_oip_stream_rearm(ngx_http_oip_ctx_t *ctx,
    ngx_msec_t idle);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


static ngx_str_t  ngx_http_oip_grpc_status = ngx_string("grpc-status");
static ngx_str_t  ngx_http_oip_cache_control = ngx_string("Cache-Control");
static ngx_str_t  ngx_http_oip_no_cache = ngx_string("no-cache");
static ngx_str_t  ngx_http_oip_accel = ngx_string("X-Accel-Buffering");
static ngx_str_t  ngx_http_oip_no = ngx_string("no");


/*
 * oip_stream_idle must end a silent stream before nginx's own read
 * timeout cuts it: below grpc_read_timeout or proxy_read_timeout, as the
 * location's transport says (found by name: a module built without one
 * of them still loads).
 */

ngx_int_t
ngx_http_oip_stream_check(ngx_conf_t *cf, ngx_http_oip_loc_conf_t *conf)
{
    ngx_uint_t                 i;
    const char                *name;
    ngx_http_upstream_conf_t  *ucf;

    if (conf->stream_idle == 0) {
        return NGX_OK;
    }

    name = (conf->protocol == NGX_HTTP_OIP_PROTOCOL_GRPC)
           ? "ngx_http_grpc_module" : "ngx_http_proxy_module";

    for (i = 0; cf->cycle->modules[i]; i++) {
        if (ngx_strcmp(cf->cycle->modules[i]->name, name) != 0) {
            continue;
        }

        /* both modules' location configurations begin with it */
        ucf = ngx_http_conf_get_module_loc_conf(cf, (*cf->cycle->modules[i]));

        if (ucf && ucf->read_timeout != NGX_CONF_UNSET_MSEC
            && conf->stream_idle >= ucf->read_timeout)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "oip_stream_idle %Mms is not below %s's "
                               "read timeout, %Mms: the read timeout "
                               "would cut a silent stream first",
                               conf->stream_idle,
                               (conf->protocol == NGX_HTTP_OIP_PROTOCOL_GRPC)
                               ? "grpc_pass" : "proxy_pass",
                               ucf->read_timeout);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* a stream's state, made when a request turns out to be one */

ngx_http_oip_stream_t *
ngx_http_oip_stream_state(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    if (ctx->stream == NULL) {
        ctx->stream = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_stream_t));
    }

    return ctx->stream;
}


ngx_int_t
ngx_http_oip_stream_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_oip_stream_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_oip_stream_body_filter;

    return NGX_OK;
}


/*
 * Whether an answer opens a stream (the response path passes it on to
 * this file): a 200 from the runtime to an infer_stream call that is not
 * a trailers-only gRPC error, which the response path holds as every
 * other error (a trailers-only status 0 is a stream without answers).
 */

ngx_uint_t
ngx_http_oip_stream_opens(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_str_t        *type;
    oip_header_t      v;
    ngx_table_elt_t  *status;

    if (!ctx->req.stream || r->upstream == NULL
        || r->headers_out.status != NGX_HTTP_OK
        || r->header_only || r->method == NGX_HTTP_HEAD)
    {
        return 0;
    }

    if (!ctx->req.transport->messages) {
        /* an HTTP runtime's own events; another 200 is an answer */
        type = &r->headers_out.content_type;

        return type->len >= sizeof("text/event-stream") - 1
               && ngx_strncasecmp(type->data, (u_char *) "text/event-stream",
                                  sizeof("text/event-stream") - 1) == 0;
    }

    status = ngx_http_oip_header(&r->headers_out.headers,
                                 &ngx_http_oip_grpc_status, &v);

    return status == NULL
           || (status->value.len == 1 && status->value.data[0] == '0');
}


static ngx_int_t
ngx_http_oip_stream_header_filter(ngx_http_request_t *r)
{
    size_t                    i;
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    ctx = (r == r->main) ? ngx_http_oip_get_ctx(r) : NULL;

    if (ctx == NULL || ctx->ans.phase != NGX_HTTP_OIP_ANS_PASSING
        || ctx->req.phase != NGX_HTTP_OIP_PHASE_PASSED
        || r->err_status
        || !ngx_http_oip_stream_opens(r, ctx))
    {
        return ngx_http_next_header_filter(r);
    }

    if (ngx_http_oip_stream_state(r, ctx) == NULL) {
        return NGX_ERROR;
    }

    if (!ctx->req.transport->messages) {
        return ngx_http_oip_stream_passing(r, ctx);
    }

    /* every output as JSON: binary has no place in an event */

    ctx->stream->wish = ctx->ans.wish;
    ctx->stream->wish.binary = 0;

    if (ctx->ans.wish.n) {
        ctx->stream->wish.outputs = ngx_pnalloc(r->pool,
                                        ctx->ans.wish.n
                                        * sizeof(oip_wish_out_t));
        if (ctx->stream->wish.outputs == NULL) {
            return NGX_ERROR;
        }

        for (i = 0; i < ctx->ans.wish.n; i++) {
            ctx->stream->wish.outputs[i] = ctx->ans.wish.outputs[i];
            ctx->stream->wish.outputs[i].binary = 0;
        }
    }

    ctx->ans.phase = NGX_HTTP_OIP_ANS_STREAM;
    r->allow_ranges = 0;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (ctx->stream->idle.timer_set) {
        /* the runtime's headers: something said */
        ngx_http_oip_stream_rearm(ctx, olcf->stream_idle);
    }

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: a stream: its headers wait for its first event");

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_stream_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_int_t                 rc;
    ngx_uint_t                last;
    ngx_chain_t              *cl, *out, **ll;
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    ctx = (r == r->main) ? ngx_http_oip_get_ctx(r) : NULL;

    if (ctx == NULL || (ctx->ans.phase != NGX_HTTP_OIP_ANS_STREAM
                        && ctx->ans.phase != NGX_HTTP_OIP_ANS_STREAM_OPEN
                        && ctx->ans.phase != NGX_HTTP_OIP_ANS_STREAM_DONE))
    {
        return ngx_http_next_body_filter(r, in);
    }

    if (ctx->stream->passing) {
        return ngx_http_oip_stream_pass(r, ctx, in);
    }

    out = NULL;
    ll = &out;
    last = 0;
    rc = NGX_OK;

    if (ctx->ans.phase != NGX_HTTP_OIP_ANS_STREAM_DONE
        && r->upstream && r->upstream->peer.connection == NULL
        && ngx_http_oip_stream_lone_flush(in))
    {
        /* the upstream failed or timed out mid-stream (or was, by
         * oip_stream_idle): nginx flushes and closes; the client is told
         * first */
        rc = ngx_http_oip_stream_cut(r, ctx, &ll);

    } else if (ctx->stream->idle.timer_set
               && !ngx_http_oip_stream_lone_flush(in))
    {
        /* the runtime said something: the silence starts again */
        olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);
        ngx_http_oip_stream_rearm(ctx, olcf->stream_idle);
    }

    for (cl = in; cl; cl = cl->next) {

        if (ctx->ans.phase != NGX_HTTP_OIP_ANS_STREAM_DONE
            && cl->buf->last > cl->buf->pos && rc == NGX_OK)
        {
            rc = ngx_http_oip_stream_gather(r, ctx, cl->buf->pos,
                                            cl->buf->last - cl->buf->pos,
                                            &ll);
        }

        /* consumed, or grpc stops reading */
        cl->buf->pos = cl->buf->last;

        if (cl->buf->last_buf) {
            last = 1;
        }
    }

    if (rc == NGX_ERROR) {
        return NGX_ERROR;
    }

    if (last && ctx->ans.phase != NGX_HTTP_OIP_ANS_STREAM_DONE) {
        if (ngx_http_oip_stream_end(r, ctx, &ll) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (ctx->ans.phase == NGX_HTTP_OIP_ANS_STREAM_DONE) {
        ngx_http_oip_stream_end_timer(ctx);
    }

    if (ctx->stream->status) {
        /* an error before the first event: a JSON error answer */
        return ngx_http_oip_stream_refuse(r, ctx);
    }

    if (out == NULL) {
        /* nothing new; what is not sent yet goes on its own */
        return NGX_OK;
    }

    if (!ctx->stream->opened && ngx_http_oip_stream_open(r, ctx) != NGX_OK) {
        return NGX_ERROR;
    }

    rc = ngx_http_next_body_filter(r, out);

    ngx_chain_update_chains(r->pool, &ctx->stream->free, &ctx->stream->busy,
                            &out, (ngx_buf_tag_t) &ngx_http_oip_stream_init);

    return rc;
}


/*
 * An HTTP runtime's own events (MLServer's infer_stream): its answer
 * passes as it comes, unbuffered whatever proxy_buffering says (the
 * upstream looks at buffering only after the headers went through the
 * filters), its events counted; a cut or a silence ends it with an
 * error event, as a gRPC stream's.
 */

static ngx_int_t
ngx_http_oip_stream_passing(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_http_oip_loc_conf_t  *olcf;

    r->upstream->buffering = 0;
    r->allow_ranges = 0;

    ctx->ans.phase = NGX_HTTP_OIP_ANS_STREAM_OPEN;
    ctx->stream->passing = 1;
    ctx->stream->opened = 1;

    if (ctx->stream->idle.timer_set) {
        olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);
        ngx_http_oip_stream_rearm(ctx, olcf->stream_idle);
    }

    if (ngx_http_oip_header_push(&r->headers_out.headers,
                                 &ngx_http_oip_accel, &ngx_http_oip_no)
        == NULL)
    {
        return NGX_ERROR;
    }

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: the runtime's own events, passed unbuffered");

    return ngx_http_next_header_filter(r);
}


static ngx_int_t
ngx_http_oip_stream_pass(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_chain_t *in)
{
    ngx_int_t                 rc;
    ngx_chain_t              *cl, *out, **ll;
    ngx_http_oip_loc_conf_t  *olcf;

    if (ctx->ans.phase == NGX_HTTP_OIP_ANS_STREAM_DONE) {
        /* ended by an error event: the rest is dropped */
        for (cl = in; cl; cl = cl->next) {
            cl->buf->pos = cl->buf->last;
        }

        return NGX_OK;
    }

    if (r->upstream && r->upstream->peer.connection == NULL
        && ngx_http_oip_stream_lone_flush(in))
    {
        out = NULL;

        if (ngx_chain_add_copy(r->pool, &out, in) != NGX_OK) {
            return NGX_ERROR;
        }

        for (ll = &out; *ll; ll = &(*ll)->next) { /* void */ }

        rc = ngx_http_oip_stream_cut(r, ctx, &ll);
        if (rc != NGX_OK) {
            return NGX_ERROR;
        }

        ngx_http_oip_stream_end_timer(ctx);

        return ngx_http_next_body_filter(r, out);
    }

    for (cl = in; cl; cl = cl->next) {

        if (ngx_buf_in_memory(cl->buf) && cl->buf->last > cl->buf->pos) {
            ngx_http_oip_stream_count(r, ctx, cl->buf->pos, cl->buf->last);

            if (ctx->stream->idle.timer_set) {
                olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);
                ngx_http_oip_stream_rearm(ctx, olcf->stream_idle);
            }
        }

        if (cl->buf->last_buf) {
            ctx->ans.phase = NGX_HTTP_OIP_ANS_STREAM_DONE;
            ngx_http_oip_stream_end_timer(ctx);
        }
    }

    return ngx_http_next_body_filter(r, in);
}


/* events end with an empty line: "\n\n", perhaps across two reads */

static void
ngx_http_oip_stream_count(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    u_char *p, u_char *last)
{
    u_char  *lf;

    while (p < last) {
        lf = ngx_strlchr(p, last, '\n');

        if (lf == NULL) {
            ctx->stream->lf = 0;
            return;
        }

        /* a line feed right after one: an event ends */

        if (lf == p && ctx->stream->lf && ctx->stream->events++ == 0) {
            ctx->stream->first_usec = ngx_http_oip_usec()
                                     - ngx_http_oip_start_usec(r);
        }

        ctx->stream->lf = 1;
        p = lf + 1;
    }
}


/* the runtime's end before the stream's (nginx's flush), told */

static ngx_int_t
ngx_http_oip_stream_cut(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_chain_t ***ll)
{
    if (ctx->stream->idle.timedout) {
        return ngx_http_oip_stream_error(r, ctx, NGX_HTTP_GATEWAY_TIME_OUT,
                                         (u_char *) NGX_HTTP_OIP_IDLE_ERROR,
                                         ll);
    }

    return ngx_http_oip_stream_error(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                     (u_char *) "upstream answer: cut short, "
                                     "the upstream failed or timed out", ll);
}


/* nothing but a flush: what nginx sends when an upstream fails */

static ngx_uint_t
ngx_http_oip_stream_lone_flush(ngx_chain_t *in)
{
    ngx_chain_t  *cl;

    for (cl = in; cl; cl = cl->next) {
        if (cl->buf->last_buf || ngx_buf_size(cl->buf)) {
            return 0;
        }
    }

    return 1;
}


/*
 * A read's bytes: gRPC messages (a byte of flags, four of length, the
 * message) gathered whole, each read as it completes.
 */

static ngx_int_t
ngx_http_oip_stream_gather(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    u_char *p, size_t len, ngx_chain_t ***ll)
{
    u_char                   *buf;
    size_t                    n, need, cap;
    ngx_http_oip_stream_t    *st;
    ngx_http_oip_loc_conf_t  *olcf;

    st = ctx->stream;
    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    while (len && ctx->ans.phase != NGX_HTTP_OIP_ANS_STREAM_DONE) {

        need = 5;

        if (st->len >= 5) {
            need += (size_t) st->msg[1] << 24 | (size_t) st->msg[2] << 16
                    | (size_t) st->msg[3] << 8 | st->msg[4];

            if (need - 5 > olcf->grpc_max_message) {
                return ngx_http_oip_stream_error(r, ctx,
                                          NGX_HTTP_BAD_GATEWAY, (u_char *)
                                          "upstream answer: a message of "
                                          "the stream is larger than "
                                          "oip_grpc_max_message", ll);
            }
        }

        if (st->cap < need) {
            cap = ngx_max(need, 2 * st->cap);
            cap = ngx_max(cap, NGX_HTTP_OIP_EVENT_MIN);

            buf = ngx_palloc(r->pool, cap);
            if (buf == NULL) {
                return NGX_ERROR;
            }

            if (st->msg) {
                ngx_memcpy(buf, st->msg, st->len);
                ngx_pfree(r->pool, st->msg);
            }

            st->msg = buf;
            st->cap = cap;
        }

        n = ngx_min(len, need - st->len);
        ngx_memcpy(st->msg + st->len, p, n);
        st->len += n;
        p += n;
        len -= n;

        if (st->len < need
            || (need == 5
                && (st->msg[1] | st->msg[2] | st->msg[3] | st->msg[4])))
        {
            /* more to come, or the length is known now: read on */
            continue;
        }

        st->len = 0;

        if (ngx_http_oip_stream_message(r, ctx, st->msg, need, ll)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* one whole message: its event, none, or the stream's last */

static ngx_int_t
ngx_http_oip_stream_message(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    u_char *msg, size_t len, ngx_chain_t ***ll)
{
    int             rc;
    u_char         *p;
    size_t          i, size;
    ngx_buf_t      *b;
    ngx_int_t       status;
    ngx_pool_t     *pool;
    oip_alloc_t     alloc;
    oip_event_e     ev;
    oip_result_t    res;
    oip_options_t   opt;

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, r->connection->log);
    if (pool == NULL) {
        return NGX_ERROR;
    }

    ngx_http_oip_pool_allocator(pool, &alloc);
    ngx_http_oip_options(r, &opt);

    rc = oip_stream_process(&res, &alloc, &opt, &ctx->stream->wish, msg, len,
                            &ev);

    if (rc != 0) {
        status = (rc == 500) ? NGX_HTTP_INTERNAL_SERVER_ERROR
                             : NGX_HTTP_BAD_GATEWAY;
        rc = ngx_http_oip_stream_error(r, ctx, status, (u_char *) res.error,
                                       ll);
        ngx_destroy_pool(pool);
        return rc;
    }

    switch (ev) {

    case OIP_EVENT_NONE:
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: stream: an empty final response, no event");
        ngx_destroy_pool(pool);
        return NGX_OK;

    case OIP_EVENT_ERROR:
        /* Triton's stream carries no code: its words say what they can */
        status = (res.reason == OIP_REASON_UNKNOWN_MODEL) ? NGX_HTTP_NOT_FOUND
                 : (res.reason == OIP_REASON_QUEUE_FULL)
                   ? NGX_HTTP_TOO_MANY_REQUESTS : NGX_HTTP_BAD_REQUEST;
        rc = ngx_http_oip_stream_error(r, ctx, status, (u_char *) res.error,
                                       ll);
        ngx_destroy_pool(pool);
        return rc;

    default:
        break;
    }

    if (ctx->req.generate == NGX_HTTP_OIP_GEN_EMULATE) {
        /* each answer a generate answer */
        rc = ngx_http_oip_generate_json(r, pool, &res, NULL, 0, 0);

        if (rc != NGX_OK) {
            rc = (rc == NGX_ERROR) ? NGX_ERROR
                 : ngx_http_oip_stream_error(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                             (u_char *) res.error, ll);
            ngx_destroy_pool(pool);
            return rc;
        }
    }

    size = sizeof("data: ") - 1 + res.body_len + 2;

    b = ngx_http_oip_stream_buf(r, ctx, size, ll);
    if (b == NULL) {
        ngx_destroy_pool(pool);
        return NGX_ERROR;
    }

    p = ngx_cpymem(b->last, "data: ", sizeof("data: ") - 1);

    for (i = 0; i < res.nsegs; i++) {
        p = ngx_cpymem(p, res.segs[i].data, res.segs[i].len);
    }

    *p++ = '\n';
    *p++ = '\n';
    b->last = p;

    ngx_destroy_pool(pool);

    if (ctx->stream->events++ == 0) {
        ctx->stream->first_usec = ngx_http_oip_usec()
                                 - ngx_http_oip_start_usec(r);
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: stream: event %ui, %uz bytes",
                   ctx->stream->events, size);

    return NGX_OK;
}


/*
 * The runtime's stream has ended: its status (the trailers, read by the
 * transport as every gRPC answer's) may be an error, and a message cut
 * short is one.
 */

static ngx_int_t
ngx_http_oip_stream_end(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_chain_t ***ll)
{
    ngx_int_t       rc;
    ngx_buf_t      *b;
    ngx_uint_t      status;
    oip_result_t    res;
    oip_framing_t   framing;

    if (ctx->stream->len) {
        return ngx_http_oip_stream_error(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                         (u_char *) "upstream answer: the "
                                         "stream ends inside a message", ll);
    }

    rc = ctx->req.transport->answer(r, ctx, &res, &framing);

    if (rc == NGX_DECLINED || rc == NGX_ABORT) {
        status = (rc == NGX_ABORT) ? (ngx_uint_t) res.status
                                   : r->headers_out.status;

        return ngx_http_oip_stream_error(r, ctx, status,
                                         (u_char *) res.error, ll);
    }

    if (rc != NGX_OK) {
        return NGX_ERROR;
    }

    ctx->ans.phase = NGX_HTTP_OIP_ANS_STREAM_DONE;

    b = ngx_http_oip_stream_buf(r, ctx, 0, ll);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->last_buf = 1;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: stream ended after %ui events", ctx->stream->events);

    return NGX_OK;
}


/*
 * An error: before the first event, the answer's status and JSON error
 * (sent by the body filter); after it, the stream's last event.
 */

static ngx_int_t
ngx_http_oip_stream_error(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_uint_t status, u_char *msg, ngx_chain_t ***ll)
{
    u_char     *p;
    size_t      len, esc;
    ngx_buf_t  *b;

    len = ngx_strlen(msg);

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "oip: model \"%V\": stream ends with an error after %ui "
                  "events: %s", &ctx->model, ctx->stream->events, msg);

    ctx->ans.phase = NGX_HTTP_OIP_ANS_STREAM_DONE;

    if (ctx->stream->events == 0 && !ctx->stream->opened) {
        /* its headers not sent yet */
        ctx->stream->status = status;

        ctx->error.data = ngx_pnalloc(r->pool, len);
        if (ctx->error.data == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(ctx->error.data, msg, len);
        ctx->error.len = len;

        return NGX_OK;
    }

    esc = oip_json_escape(NULL, msg, len);

    b = ngx_http_oip_stream_buf(r, ctx, sizeof("data: {\"error\":\"\"}\n\n")
                                        - 1 + esc, ll);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(b->last, "data: {\"error\":\"",
                   sizeof("data: {\"error\":\"") - 1);
    p += oip_json_escape(p, msg, len);
    b->last = ngx_cpymem(p, "\"}\n\n", 4);
    b->last_buf = 1;

    ctx->stream->events++;

    return NGX_OK;
}


/* a buffer for size bytes of events, appended to the output */

static ngx_buf_t *
ngx_http_oip_stream_buf(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    size_t size, ngx_chain_t ***ll)
{
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    cl = ngx_chain_get_free_buf(r->pool, &ctx->stream->free);
    if (cl == NULL) {
        return NULL;
    }

    b = cl->buf;

    if (size && (size_t) (b->end - b->start) < size) {
        if (b->start) {
            ngx_pfree(r->pool, b->start);
        }

        size = ngx_max(size, NGX_HTTP_OIP_EVENT_MIN);

        b->start = ngx_palloc(r->pool, size);
        if (b->start == NULL) {
            return NULL;
        }

        b->end = b->start + size;
    }

    b->pos = b->start;
    b->last = b->start;
    b->temporary = (size != 0);     /* an empty last one is special */
    b->flush = 1;
    b->last_buf = 0;
    b->tag = (ngx_buf_tag_t) &ngx_http_oip_stream_init;

    **ll = cl;
    *ll = &cl->next;

    return b;
}


/* the first event is here: the headers of an event stream go first */

static ngx_int_t
ngx_http_oip_stream_open(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_int_t  rc;

    ctx->stream->opened = 1;

    if (ctx->ans.phase == NGX_HTTP_OIP_ANS_STREAM) {
        ctx->ans.phase = NGX_HTTP_OIP_ANS_STREAM_OPEN;
    }

    ngx_http_oip_grpc_hide(&r->headers_out.headers);

    r->headers_out.status = NGX_HTTP_OK;
    ngx_http_oip_content_type(r, "text/event-stream; charset=utf-8");

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    r->headers_out.content_length_n = -1;

    /* no cache, no proxy in front holds an event back */

    if (ngx_http_oip_header_push(&r->headers_out.headers,
                                 &ngx_http_oip_cache_control,
                                 &ngx_http_oip_no_cache) == NULL
        || ngx_http_oip_header_push(&r->headers_out.headers,
                                    &ngx_http_oip_accel,
                                    &ngx_http_oip_no) == NULL)
    {
        return NGX_ERROR;
    }

    rc = ngx_http_next_header_filter(r);

    if (rc == NGX_ERROR || rc > NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* an error before any event: the JSON error answer, its status */

static ngx_int_t
ngx_http_oip_stream_refuse(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    b = ngx_http_oip_error_json(r, ctx->error.data, ctx->error.len);
    if (b == NULL) {
        return NGX_ERROR;
    }

    ngx_http_clean_header(r);

    r->headers_out.status = ctx->stream->status;
    ngx_http_oip_content_type(r, OIP_TYPE_JSON);
    r->headers_out.content_length_n = b->last - b->pos;

    ctx->reason = ngx_http_oip_reason(ctx, ctx->stream->status);
    ctx->stream->status = 0;
    ctx->stream->opened = 1;

    rc = ngx_http_next_header_filter(r);

    if (rc == NGX_ERROR || rc > NGX_OK) {
        return NGX_ERROR;
    }

    cl = ngx_alloc_chain_link(r->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;

    return ngx_http_next_body_filter(r, cl);
}


/*
 * oip_stream_idle: the runtime has sent nothing for that long.  Its
 * call ends as nginx ends one whose read timed out (the upstream's read
 * handler, timedout set: "upstream timed out", the connection closed),
 * and the body filter, seeing that end, tells the client why.
 */

static void
ngx_http_oip_stream_idle(ngx_event_t *ev)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = ev->data;

    if (r->upstream == NULL || r->upstream->peer.connection == NULL) {
        return;
    }

    ngx_log_error(NGX_LOG_INFO, ev->log, 0,
                  "oip: the runtime sent nothing for oip_stream_idle: "
                  "the stream ends");

    c = r->upstream->peer.connection;
    c->read->timedout = 1;
    c->read->handler(c->read);
}


/* from now: ngx_add_timer() alone keeps a timer less than 300 ms off */

static void
ngx_http_oip_stream_rearm(ngx_http_oip_ctx_t *ctx, ngx_msec_t idle)
{
    ngx_del_timer(&ctx->stream->idle);
    ngx_add_timer(&ctx->stream->idle, idle);
}


/* a stream's request leaves for its runtime: the silence starts */

void
ngx_http_oip_stream_start(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (olcf->stream_idle == 0 || ngx_http_oip_stream_state(r, ctx) == NULL
        || ctx->stream->idle.timer_set || ctx->stream->idle.timedout)
    {
        return;
    }

    ctx->stream->idle.handler = ngx_http_oip_stream_idle;
    ctx->stream->idle.data = r;
    ctx->stream->idle.log = r->connection->log;

    ngx_add_timer(&ctx->stream->idle, olcf->stream_idle);
}


void
ngx_http_oip_stream_end_timer(ngx_http_oip_ctx_t *ctx)
{
    if (ctx->stream && ctx->stream->idle.timer_set) {
        ngx_del_timer(&ctx->stream->idle);
    }
}
