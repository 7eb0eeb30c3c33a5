
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The request path: a PRECONTENT handler reads the whole body, hands it
 * to the codec and puts the codec's segments in place of the body, with
 * the headers that go with them, before the proxy builds its request
 * (the mirror module's way of reading a body before the content phase).
 */


#include "ngx_http_oip_module.h"


/* what ngx_http_oip_headers() changes */
#define NGX_HTTP_OIP_FRAMING   0x01    /* the body was rewritten */
#define NGX_HTTP_OIP_TYPE      0x02    /* Content-Type to match the body */
#define NGX_HTTP_OIP_ENCODING  0x04    /* no Accept-Encoding upstream */
#define NGX_HTTP_OIP_CARRIER   0x08    /* the JSON's length, as the
                                          upstream reads it */


static ngx_int_t ngx_http_oip_request_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_read_body(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static void ngx_http_oip_body_handler(ngx_http_request_t *r);
static void ngx_http_oip_verdict(ngx_http_oip_ctx_t *ctx, ngx_int_t rc);
static void ngx_http_oip_resume(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_process(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_processed(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, int rc, oip_result_t *res);
static ngx_int_t ngx_http_oip_rpc(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_send_on(ngx_http_request_t *r,
    oip_result_t *res);
static ngx_int_t ngx_http_oip_process_done(ngx_http_request_t *r,
    ngx_http_oip_run_t *run);
static void ngx_http_oip_process_resume(ngx_http_request_t *r,
    ngx_int_t rc);
static void ngx_http_oip_resume_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_body(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char **data, size_t *len);
static u_char *ngx_http_oip_body_join(ngx_http_request_t *r, off_t total);
static ngx_int_t ngx_http_oip_replace(ngx_http_request_t *r,
    oip_result_t *res);
static ngx_int_t ngx_http_oip_headers(ngx_http_request_t *r,
    oip_result_t *res, ngx_uint_t what);
static ngx_int_t ngx_http_oip_carrier(ngx_http_request_t *r,
    oip_result_t *res, ngx_list_t *list, ngx_str_t *type);
static ngx_uint_t ngx_http_oip_dropped(ngx_table_elt_t *h,
    ngx_uint_t what);
static ngx_int_t ngx_http_oip_alias(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_send_error(ngx_http_request_t *r,
    ngx_uint_t status, const ngx_str_t *msg);


static ngx_str_t  ngx_http_oip_ihcl = ngx_string(NGX_HTTP_OIP_IHCL);
static ngx_str_t  ngx_http_oip_encoding = ngx_string("Content-Encoding");


ngx_int_t
ngx_http_oip_request_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_oip_request_handler;

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_request_handler(ngx_http_request_t *r)
{
    ngx_int_t                        rc, status;
    ngx_http_oip_ctx_t              *ctx;
    ngx_http_oip_route_t             rt;
    ngx_http_oip_loc_conf_t         *olcf;
    const ngx_http_oip_transport_t  *tr;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);
    tr = olcf->transport;

    if (r != r->main) {
        /* the signature's metadata fetch, when it is a call too */

        ctx = ngx_http_get_module_ctx(r, ngx_http_oip_module);

        if (ctx == NULL || !ctx->sub || ctx->phase == NGX_HTTP_OIP_PHASE_PASSED
            || !tr->subrequests)
        {
            return NGX_DECLINED;
        }

        ctx->transport = tr;

        status = ngx_http_oip_rpc(r, ctx);
        ctx->phase = NGX_HTTP_OIP_PHASE_PASSED;

        return (status == NGX_DECLINED) ? status
                                        : NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (!olcf->enable) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_oip_get_ctx(r);

    if (ctx == NULL) {
        rc = tr->route(r, &rt);

        if (rc == NGX_HTTP_NOT_ALLOWED) {
            return ngx_http_oip_send_error(r, rc, &tr->not_allowed);
        }

        if (rc == NGX_HTTP_NOT_FOUND) {
            rc = ngx_http_oip_alias(r);

            if (rc != NGX_DECLINED) {
                return rc;
            }

            if (!tr->passes) {
                return ngx_http_oip_send_error(r, NGX_HTTP_NOT_FOUND,
                                               &tr->not_found);
            }
        }

        if (rc != NGX_OK) {
            ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "oip: not an infer request, passed on");
            return NGX_DECLINED;
        }

        ctx = ngx_http_oip_create_ctx(r);
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ctx->model = rt.model;
        ctx->version = rt.version;
        ctx->rpc = rt.rpc;

        if (olcf->sig_zone == NULL || rt.rpc != OIP_RPC_MODEL_INFER) {
            return ngx_http_oip_read_body(r, ctx);
        }

        /* the signature first: an unknown model costs no body read */

        ctx->phase = NGX_HTTP_OIP_PHASE_SIGNATURE;
    }

    if (ctx->phase == NGX_HTTP_OIP_PHASE_SIGNATURE
        || ctx->phase == NGX_HTTP_OIP_PHASE_REFETCH)
    {
        rc = ngx_http_oip_signature(r, ctx);

        if (rc == NGX_AGAIN) {
            return NGX_AGAIN;
        }

        if (rc != NGX_OK) {
            ngx_http_oip_verdict(ctx, rc);

        } else if (ctx->phase == NGX_HTTP_OIP_PHASE_REFETCH) {
            /* fetched again after a misfit: the body against it */

            rc = ngx_http_oip_process(r, ctx);

            if (rc == NGX_BUSY) {
                /* in a thread: ngx_http_oip_process_resume() goes on */
                ctx->phase = NGX_HTTP_OIP_PHASE_READ;
                r->write_event_handler = ngx_http_request_empty_handler;
                return NGX_DONE;
            }

            ngx_http_oip_verdict(ctx, rc);

        } else {
            return ngx_http_oip_read_body(r, ctx);
        }
    }

    if (ctx->phase == NGX_HTTP_OIP_PHASE_READ
        || ctx->phase == NGX_HTTP_OIP_PHASE_PASSED)
    {
        /* still reading, or done once: an internal redirect must not
         * convert the converted body again */

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: request handler again: %s",
                       ctx->phase == NGX_HTTP_OIP_PHASE_READ
                       ? "still reading the body" : "body handled, passed on");

        return (ctx->phase == NGX_HTTP_OIP_PHASE_READ) ? NGX_DONE
                                                       : NGX_DECLINED;
    }

    /*
     * sent once, whichever location comes next; and set before it is
     * sent: finalizing the request may free the pool holding ctx
     */

    status = ctx->status;
    ctx->phase = NGX_HTTP_OIP_PHASE_PASSED;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: request refused with %i", status);

    return ngx_http_oip_send_error(r, status, &ctx->error);
}


/*
 * A POST whose path stands for an infer path without being one to nginx
 * (ngx_http_oip_infer_alias()) is refused with a 404 naming the path: a
 * runtime that reads paths loosely would serve it unchecked.
 */

static ngx_int_t
ngx_http_oip_alias(ngx_http_request_t *r)
{
    ngx_int_t            rc;
    ngx_str_t            model, version, msg;
    ngx_http_oip_ctx_t  *ctx;

    if (r->method != NGX_HTTP_POST) {
        return NGX_DECLINED;
    }

    rc = ngx_http_oip_infer_alias(r, &model, &version, &msg);

    if (rc != NGX_OK) {
        return (rc == NGX_DECLINED) ? rc : NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = ngx_http_oip_create_ctx(r);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* counted and logged as the model's refused request; sent once */

    ctx->model = model;
    ctx->version = version;
    ctx->error = msg;
    ctx->reason = OIP_REASON_OTHER;
    ctx->phase = NGX_HTTP_OIP_PHASE_PASSED;

    return ngx_http_oip_send_error(r, NGX_HTTP_NOT_FOUND, &msg);
}


static ngx_int_t
ngx_http_oip_read_body(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_int_t  rc;

    ctx->phase = NGX_HTTP_OIP_PHASE_READ;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: infer request for model \"%V\", reading its body",
                   &ctx->model);

    /* room for the part read with the headers: see ngx_http_oip_body_join() */

    r->request_body_in_single_buf = 1;

    rc = ngx_http_read_client_request_body(r, ngx_http_oip_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    ngx_http_finalize_request(r, NGX_DONE);

    return NGX_DONE;
}


static void
ngx_http_oip_body_handler(ngx_http_request_t *r)
{
    ngx_int_t            rc;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_get_ctx(r);

    rc = ngx_http_oip_process(r, ctx);

    if (rc == NGX_BUSY) {
        /* converted in a thread: ngx_http_oip_thread_done() goes on */
        r->write_event_handler = ngx_http_request_empty_handler;
        return;
    }

    ngx_http_oip_verdict(ctx, rc);

    ngx_http_oip_resume(r, ctx);
}


/*
 * What the codec's run or the signature's step returned, as the phase
 * the handler finds when it runs again.
 */

static void
ngx_http_oip_verdict(ngx_http_oip_ctx_t *ctx, ngx_int_t rc)
{
    switch (rc) {

    case NGX_DECLINED:
        ctx->phase = NGX_HTTP_OIP_PHASE_PASSED;
        break;

    case NGX_DONE:
        ctx->phase = NGX_HTTP_OIP_PHASE_READ;
        break;

    default:
        ctx->phase = NGX_HTTP_OIP_PHASE_REFUSED;
        ctx->status = rc;
    }
}


/* the request checked (and converted): on to the next phase */

static void
ngx_http_oip_resume(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    /* a model may just have been updated: its signature once more */

    if (ctx->misfit && !ctx->refetched
        && ngx_http_oip_signature_refetch(r, ctx) == NGX_AGAIN)
    {
        ctx->phase = NGX_HTTP_OIP_PHASE_REFETCH;
    }

    ctx->refetched = 1;

    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


static ngx_int_t
ngx_http_oip_process(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    size_t               len;
    u_char              *body;
    ngx_int_t            rc;
    oip_header_t         ihcl, encoding, type;
    oip_result_t         res;
    oip_framing_t        framing;
    ngx_http_oip_run_t   run;

    (void) ngx_http_oip_header(&r->headers_in.headers, &ngx_http_oip_ihcl,
                               &ihcl);
    (void) ngx_http_oip_header(&r->headers_in.headers,
                               &ngx_http_oip_encoding, &encoding);

    /* nginx has found it already: no walk of the list for it */

    ngx_memzero(&type, sizeof(oip_header_t));

    if (r->headers_in.content_type) {
        type.data = r->headers_in.content_type->value.data;
        type.len = r->headers_in.content_type->value.len;
        type.count = 1;
    }

    if (oip_request_framing(&res, &framing, &ihcl, &encoding, &type) != 0) {
        return ngx_http_oip_fail(r, ctx, res.status, res.reason, res.error);
    }

    /* its binary answer goes back in the media type it came with */
    ctx->carrier = framing.carrier;

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: IHCL %L, encoding %d, carrier %d", framing.ihcl,
                   (int) framing.encoding, (int) framing.carrier);

    rc = ngx_http_oip_body(r, ctx, &body, &len);
    if (rc != NGX_OK) {
        return rc;
    }

    if (ctx->rpc != OIP_RPC_MODEL_INFER) {
        /* a health or metadata GET: its body, if any, is not sent */
        return ngx_http_oip_rpc(r, ctx);
    }

    /* converted here, or in a thread: NGX_BUSY, the request parked */

    run.r = r;
    run.done = ngx_http_oip_process_done;
    run.resume = ngx_http_oip_process_resume;
    run.response = 0;
    run.threaded = 0;
    run.framing = framing;
    run.wish = NULL;
    run.body = body;
    run.len = len;

    ngx_http_oip_options(r, &run.opt);

    if (ctx->transport->prepare) {
        ctx->transport->prepare(r, ctx, &run);
    }

    run.opt.signature = ctx->signature;
    run.opt.model = ctx->model.data;
    run.opt.model_len = ctx->model.len;

    run.digested = (ngx_http_oip_digest_begin(r, ctx, &run.digest, &run.opt)
                    == NGX_OK);

    return ngx_http_oip_run(&run);
}


/* the codec's verdict, in the worker: inline, or once the thread is done */

static ngx_int_t
ngx_http_oip_process_done(ngx_http_request_t *r, ngx_http_oip_run_t *run)
{
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_get_ctx(r);

    if (run->digested) {
        ngx_http_oip_digest_end(r, ctx, &run->digest,
                                run->rc == 0 && run->res.digested);
    }

    ctx->request_usec += run->usec;

    return ngx_http_oip_processed(r, ctx, run->rc, &run->res);
}


static void
ngx_http_oip_process_resume(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_get_ctx(r);
    ngx_http_oip_verdict(ctx, rc);

    /*
     * Unless the request was terminated meanwhile (its finalizer waits
     * in the write handler then), on with it, as the connection's write
     * event would go on: that also runs the posted requests.
     */

    if (r->write_event_handler == ngx_http_request_empty_handler) {
        r->write_event_handler = ngx_http_oip_resume_handler;
    }

    r->connection->write->handler(r->connection->write);
}


static void
ngx_http_oip_resume_handler(ngx_http_request_t *r)
{
    ngx_http_oip_resume(r, ngx_http_oip_get_ctx(r));
}


/* what follows the codec's verdict, in the worker */

static ngx_int_t
ngx_http_oip_processed(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    int rc, oip_result_t *res)
{
    ngx_http_oip_loc_conf_t  *olcf;

    if (rc != 0) {
        ctx->misfit = res->misfit;
        return ngx_http_oip_fail(r, ctx, res->status, res->reason,
                                 res->error);
    }

    ctx->misfit = 0;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    /* for the variables */

    ctx->counted = 1;
    ctx->id.data = (u_char *) res->id;
    ctx->id.len = res->id_len;
    ctx->ninputs = res->ninputs;
    ctx->elements = res->elements;
    ctx->tensor_bytes = res->tensor_bytes;
    ctx->in_form = res->in_form;
    ctx->upstream_form = res->out_form;

    ngx_log_debug8(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: request valid: rewritten:%d raw:%d "
                   "decompressed:%d binary:%d body:%uz json:%uz "
                   "segments:%uz manage:%d",
                   res->rewritten, res->raw, res->decompressed, res->binary,
                   res->body_len, res->header_len, res->nsegs, res->manage);

    /*
     * A length in a media type, either way, is re-said in the answer:
     * it is held, and its Accept-Encoding dropped, to that end.
     */

    if (ctx->carrier != OIP_CARRIER_HEADER
        || (ctx->transport->carrier && olcf->carrier != OIP_CARRIER_HEADER)
        || ctx->transport->manage)
    {
        res->manage = 1;
    }

    ctx->wish = res->wish;
    ctx->manage = res->manage;

    if (ngx_http_oip_send_on(r, res) != NGX_OK
        || (ctx->transport->target
            && ctx->transport->target(r, ctx) != NGX_OK))
    {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 OIP_REASON_OTHER, "out of memory");
    }

    return NGX_DECLINED;
}


/* a call without the client's body (health, metadata), the transport's */

static ngx_int_t
ngx_http_oip_rpc(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    oip_result_t  res;

    ctx->manage = 1;

    if (ctx->transport->call(r, ctx, &res) != NGX_OK
        || ngx_http_oip_send_on(r, &res) != NGX_OK
        || ctx->transport->target(r, ctx) != NGX_OK)
    {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 OIP_REASON_OTHER,
                                 "out of memory");
    }

    return NGX_DECLINED;
}


/* the body the codec made, and the headers that go with it */

static ngx_int_t
ngx_http_oip_send_on(ngx_http_request_t *r, oip_result_t *res)
{
    ngx_uint_t                what;
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    ctx = ngx_http_oip_get_ctx(r);
    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (res->rewritten && ngx_http_oip_replace(r, res) != NGX_OK) {
        return NGX_ERROR;
    }

    /*
     * The headers describe the body sent: framing when it was rewritten,
     * the Content-Type the codec gives, no Accept-Encoding when the
     * answer may be reshaped.
     */

    what = 0;

    if (res->rewritten) {
        what |= NGX_HTTP_OIP_FRAMING;
    }

    if (res->content_type) {
        what |= NGX_HTTP_OIP_TYPE;
    }

    if (ctx->transport->carrier
        && (ctx->carrier != OIP_CARRIER_HEADER
            || olcf->carrier != OIP_CARRIER_HEADER))
    {
        what |= NGX_HTTP_OIP_CARRIER;
    }

    if (res->manage
#if (NGX_HTTP_GZIP || NGX_HTTP_HEADERS)
        /* nothing to drop, no list to rebuild: most clients send none */
        && r->headers_in.accept_encoding
#endif
        )
    {
        what |= NGX_HTTP_OIP_ENCODING;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: request headers changed: 0x%xi, Content-Type %s",
                   what, res->content_type ? res->content_type : "as sent");

    if (what && ngx_http_oip_headers(r, res, what) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* the body in one piece of memory, copied only when it is not already */

static ngx_int_t
ngx_http_oip_body(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    u_char **data, size_t *len)
{
    off_t                     total;
    u_char                   *p;
    ssize_t                   n;
    ngx_buf_t                *b;
    ngx_chain_t              *cl;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    *data = (u_char *) "";
    *len = 0;

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        return NGX_OK;
    }

    total = 0;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        total += ngx_buf_size(cl->buf);
    }

    /* nothing larger can pass the limits: do not even read it */

    if ((uint64_t) total > (uint64_t) olcf->max_json_size
                           + olcf->max_tensor_size)
    {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                 OIP_REASON_LIMIT,
                                 "the request body exceeds oip_max_json_size"
                                 " plus oip_max_tensor_size");
    }

    /*
     * nginx reads a body that fits client_body_buffer_size into one
     * allocation, but hands it on as one buffer a read: when they follow
     * each other in memory, the body is already one piece.
     */

    cl = r->request_body->bufs;
    p = cl->buf->pos;

    for ( /* void */ ; cl; cl = cl->next) {
        if (cl->buf->in_file || cl->buf->pos != p) {
            break;
        }

        p = cl->buf->last;
    }

    if (cl == NULL) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: body of %O bytes already in one piece", total);

        *data = r->request_body->bufs->buf->pos;
        *len = (size_t) total;
        return NGX_OK;
    }

    p = ngx_http_oip_body_join(r, total);

    if (p) {
        *data = p;
        *len = (size_t) total;
        return NGX_OK;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: body of %O bytes copied into one piece%s", total,
                   r->request_body->temp_file ? ", from its file" : "");

    cl = r->request_body->bufs;

    p = ngx_palloc(r->pool, (size_t) total ? (size_t) total : 1);
    if (p == NULL) {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 OIP_REASON_OTHER,
                                 "out of memory");
    }

    *data = p;
    *len = (size_t) total;

    for ( /* void */ ; cl; cl = cl->next) {
        b = cl->buf;

        if (!b->in_file) {
            if (b->last > b->pos) {
                p = ngx_cpymem(p, b->pos, b->last - b->pos);
            }

            continue;
        }

        n = ngx_read_file(b->file, p, (size_t) (b->file_last - b->file_pos),
                          b->file_pos);

        if (n != b->file_last - b->file_pos) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "oip: reading the request body from \"%V\" failed",
                          &b->file->name);

            return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                     OIP_REASON_OTHER,
                                     "the request body could not be read");
        }

        p += n;
    }

    return NGX_OK;
}


/*
 * A client sends its headers and the start of its body at once: that
 * start stays in the header buffer, the rest is read into a buffer of
 * its own.  Asked for a single buffer (the handler asks), nginx leaves
 * room for the start after the rest: the rest moved up and the start put
 * in front make the body one piece in place, where a copy would take
 * the body's size again.  NULL when the buffers are not laid out so.
 */

static u_char *
ngx_http_oip_body_join(ngx_http_request_t *r, off_t total)
{
    size_t        head;
    u_char       *p, *start;
    ngx_buf_t    *b, *first;
    ngx_chain_t  *cl, *last;

    first = r->request_body->bufs->buf;
    cl = r->request_body->bufs->next;

    if (first->in_file || cl == NULL) {
        return NULL;
    }

    start = cl->buf->pos;
    p = start;
    last = cl;

    for ( /* void */ ; cl; cl = cl->next) {
        if (cl->buf->in_file || cl->buf->pos != p) {
            return NULL;
        }

        p = cl->buf->last;
        last = cl;
    }

    head = first->last - first->pos;

    if (start == NULL || (size_t) (last->buf->end - p) < head
        || (off_t) (head + (p - start)) != total)
    {
        return NULL;
    }

    /* the old buffers point at bytes about to move: one buffer instead */

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NULL;
    }

    ngx_memmove(start + head, start, p - start);
    ngx_memcpy(start, first->pos, head);

    b->temporary = 1;
    b->start = start;
    b->pos = start;
    b->last = start + total;
    b->end = b->last;
    b->last_buf = 1;

    cl = r->request_body->bufs;
    cl->buf = b;
    cl->next = NULL;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: body joined in place, %uz bytes moved", head);

    return start;
}


static ngx_int_t
ngx_http_oip_replace(ngx_http_request_t *r, oip_result_t *res)
{
    ngx_buf_t                *last;
    ngx_http_request_body_t  *rb;

    rb = r->request_body;

    if (ngx_http_oip_chain(r, res->segs, res->nsegs, &rb->bufs, &last)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (last) {
        last->last_buf = 1;
    }

    if (rb->temp_file) {
        ngx_pool_run_cleanup_file(r->pool, rb->temp_file->file.fd);
        rb->temp_file = NULL;
    }

    r->headers_in.content_length_n = res->body_len;
    r->headers_in.chunked = 0;

    return NGX_OK;
}


/*
 * The header list is rebuilt rather than edited: an element cannot be
 * taken out of an ngx_list_t, and the proxy copies every one it finds.
 */

static ngx_int_t
ngx_http_oip_headers(ngx_http_request_t *r, oip_result_t *res,
    ngx_uint_t what)
{
    u_char           *p;
    ngx_str_t         v;
    ngx_uint_t        i, n;
    ngx_list_t        list;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h, *nh;

    static ngx_str_t  content_length = ngx_string("Content-Length");
    static ngx_str_t  content_type = ngx_string("Content-Type");

    n = 0;

    for (part = &r->headers_in.headers.part; part; part = part->next) {
        n += part->nelts;
    }

    if (ngx_list_init(&list, r->pool, n + 3, sizeof(ngx_table_elt_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    part = &r->headers_in.headers.part;
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

        if (h[i].hash == 0 || ngx_http_oip_dropped(&h[i], what)) {
            continue;
        }

        nh = ngx_list_push(&list);
        if (nh == NULL) {
            return NGX_ERROR;
        }

        *nh = h[i];
    }

    if (what & NGX_HTTP_OIP_ENCODING) {
        r->headers_in.accept_encoding = NULL;
    }

    if (what & NGX_HTTP_OIP_FRAMING) {
        p = ngx_pnalloc(r->pool, 2 * NGX_OFF_T_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v.data = p;
        v.len = ngx_sprintf(p, "%uz", res->body_len) - p;

        r->headers_in.content_length = ngx_http_oip_header_push(&list,
                                                     &content_length, &v);
        if (r->headers_in.content_length == NULL) {
            return NGX_ERROR;
        }

        if (res->binary && !(what & NGX_HTTP_OIP_CARRIER)) {
            v.data = p + NGX_OFF_T_LEN;
            v.len = ngx_sprintf(v.data, "%uz", res->header_len) - v.data;

            if (ngx_http_oip_header_push(&list, &ngx_http_oip_ihcl, &v)
                == NULL)
            {
                return NGX_ERROR;
            }
        }

        r->headers_in.transfer_encoding = NULL;
    }

    if (what & NGX_HTTP_OIP_CARRIER) {
        if (ngx_http_oip_carrier(r, res, &list, &v) != NGX_OK) {
            return NGX_ERROR;
        }

    } else if (what & NGX_HTTP_OIP_TYPE) {
        v.data = (u_char *) res->content_type;
        v.len = ngx_strlen(res->content_type);
    }

    if (what & (NGX_HTTP_OIP_TYPE|NGX_HTTP_OIP_CARRIER)) {
        r->headers_in.content_type = ngx_http_oip_header_push(&list,
                                                       &content_type, &v);
        if (r->headers_in.content_type == NULL) {
            return NGX_ERROR;
        }
    }

    r->headers_in.headers = list;

    return NGX_OK;
}


/*
 * The JSON's length said as the upstream reads it (an IHCL, or its media
 * type's json-header-size), whatever the client used; type, the
 * Content-Type to go with it.
 */

static ngx_int_t
ngx_http_oip_carrier(ngx_http_request_t *r, oip_result_t *res,
    ngx_list_t *list, ngx_str_t *type)
{
    u_char                   *p;
    int64_t                   hlen;
    ngx_str_t                 v;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    /* the body sent: binary, raw (its IHCL 0), or JSON */

    hlen = res->binary ? (int64_t) res->header_len : (res->raw ? 0 : -1);

    if (olcf->carrier == OIP_CARRIER_HEADER) {
        if (hlen >= 0) {
            p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
            if (p == NULL) {
                return NGX_ERROR;
            }

            v.data = p;
            v.len = ngx_sprintf(p, "%L", hlen) - p;

            if (ngx_http_oip_header_push(list, &ngx_http_oip_ihcl, &v)
                == NULL)
            {
                return NGX_ERROR;
            }
        }

        type->data = (u_char *) (res->content_type ? res->content_type
                                 : (hlen >= 0) ? OIP_TYPE_BINARY
                                 : OIP_TYPE_JSON);
        type->len = ngx_strlen(type->data);

        return NGX_OK;
    }

    if (hlen < 0) {
        ngx_str_set(type, OIP_TYPE_JSON);
        return NGX_OK;
    }

    type->data = ngx_pnalloc(r->pool, OIP_CARRIER_TYPE_LEN);
    if (type->data == NULL) {
        return NGX_ERROR;
    }

    type->len = oip_carrier_type(olcf->carrier, hlen, (char *) type->data,
                                 OIP_CARRIER_TYPE_LEN);

    return NGX_OK;
}


static ngx_uint_t
ngx_http_oip_dropped(ngx_table_elt_t *h, ngx_uint_t what)
{
    ngx_uint_t  i;

    static struct {
        ngx_str_t   name;
        ngx_uint_t  what;
    } headers[] = {
        { ngx_string("Content-Length"), NGX_HTTP_OIP_FRAMING },
        { ngx_string("Transfer-Encoding"), NGX_HTTP_OIP_FRAMING },
        { ngx_string("Content-Encoding"), NGX_HTTP_OIP_FRAMING },
        { ngx_string(NGX_HTTP_OIP_IHCL),
          NGX_HTTP_OIP_FRAMING|NGX_HTTP_OIP_CARRIER },
        { ngx_string("Content-Type"),
          NGX_HTTP_OIP_FRAMING|NGX_HTTP_OIP_TYPE|NGX_HTTP_OIP_CARRIER },
        { ngx_string("Accept-Encoding"), NGX_HTTP_OIP_ENCODING }
    };

    for (i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {

        if ((headers[i].what & what)
            && h->key.len == headers[i].name.len
            && ngx_strncasecmp(h->key.data, headers[i].name.data,
                               headers[i].name.len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* {"error":"..."} with the given status, instead of nginx's HTML pages */

static ngx_int_t
ngx_http_oip_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const ngx_str_t *msg)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    /*
     * Refused before its body was read (its model is not found): the
     * body must not be taken for the connection's next request.
     */

    if (ngx_http_discard_request_body(r) != NGX_OK) {
        r->keepalive = 0;
    }

    b = ngx_http_oip_error_json(r, msg->data, msg->len);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->headers_out.status = status;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_http_oip_content_type(r, OIP_TYPE_JSON);

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    ngx_http_finalize_request(r, ngx_http_output_filter(r, &out));

    return NGX_DONE;
}
