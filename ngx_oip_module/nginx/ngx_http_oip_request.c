
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The request path: a PRECONTENT handler reads the whole body, hands it
 * to the codec and puts the codec's segments in place of the body, with
 * the headers that go with them, before the proxy builds its request
 * (the mirror module's way of reading a body before the content phase).
 */


#include "ngx_http_oip_module.h"


static ngx_int_t ngx_http_oip_request_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_route(ngx_http_request_t *r,
    ngx_http_oip_loc_conf_t *olcf);
static ngx_int_t ngx_http_oip_subrequest(ngx_http_request_t *r,
    const ngx_http_oip_transport_t *tr);
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
static ngx_int_t ngx_http_oip_process_done(ngx_http_request_t *r,
    ngx_http_oip_run_t *run);
static void ngx_http_oip_process_resume(ngx_http_request_t *r,
    ngx_int_t rc);
static void ngx_http_oip_resume_handler(ngx_http_request_t *r);
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
    ngx_int_t                 rc, status;
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (r != r->main) {
        return ngx_http_oip_subrequest(r, olcf->transport);
    }

    if (!olcf->enable) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_oip_get_ctx(r);

    if (ctx == NULL) {
        rc = ngx_http_oip_route(r, olcf);

        if (rc != NGX_OK) {
            return rc;
        }

        ctx = ngx_http_get_module_ctx(r, ngx_http_oip_module);
    }

    if (ctx->req.phase == NGX_HTTP_OIP_PHASE_SIGNATURE
        || ctx->req.phase == NGX_HTTP_OIP_PHASE_REFETCH)
    {
        rc = ngx_http_oip_signature(r, ctx);

        if (rc == NGX_AGAIN) {
            return NGX_AGAIN;
        }

        if (rc != NGX_OK) {
            ngx_http_oip_verdict(ctx, rc);

        } else if (ctx->req.phase == NGX_HTTP_OIP_PHASE_REFETCH) {
            /* fetched again after a misfit: the body against it */

            rc = ngx_http_oip_process(r, ctx);

            if (rc == NGX_BUSY) {
                /* in a thread: ngx_http_oip_process_resume() goes on */
                ctx->req.phase = NGX_HTTP_OIP_PHASE_READ;
                r->write_event_handler = ngx_http_request_empty_handler;
                return NGX_DONE;
            }

            ngx_http_oip_verdict(ctx, rc);

        } else {
            return ngx_http_oip_read_body(r, ctx);
        }
    }

    /* valid, converted: its share of the budget, once */

    if (ctx->req.phase == NGX_HTTP_OIP_PHASE_PASSED && !ctx->adm.asked
        && ctx->error.len == 0 && ctx->req.rpc == OIP_RPC_MODEL_INFER)
    {
        rc = ngx_http_oip_admission(r, ctx);

        if (rc == NGX_AGAIN) {
            return NGX_AGAIN;
        }

        if (rc != NGX_DECLINED) {
            ngx_http_oip_verdict(ctx, rc);
        }
    }

    if (ctx->req.phase == NGX_HTTP_OIP_PHASE_READ
        || ctx->req.phase == NGX_HTTP_OIP_PHASE_PASSED)
    {
        /* still reading, or done once: an internal redirect must not
         * convert the converted body again */

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: request handler again: %s",
                       ctx->req.phase == NGX_HTTP_OIP_PHASE_READ
                       ? "still reading the body" : "body handled, passed on");

        if (ctx->req.phase == NGX_HTTP_OIP_PHASE_READ) {
            return NGX_DONE;
        }

        if (ctx->req.stream && ctx->error.len == 0) {
            /* it leaves: oip_stream_idle counts from here */
            ngx_http_oip_stream_start(r, ctx);
        }

        return NGX_DECLINED;
    }

    /*
     * sent once, whichever location comes next; and set before it is
     * sent: finalizing the request may free the pool holding ctx
     */

    status = ctx->req.status;
    ctx->req.phase = NGX_HTTP_OIP_PHASE_PASSED;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: request refused with %i", status);

    return ngx_http_oip_send_error(r, status, &ctx->error);
}


/*
 * Which call a request is, as the location's transport routes it: its
 * context made and its first phase begun (NGX_OK: on to the signature),
 * or what the handler returns (passed on, refused, the body being read).
 */

static ngx_int_t
ngx_http_oip_route(ngx_http_request_t *r, ngx_http_oip_loc_conf_t *olcf)
{
    ngx_int_t                        rc;
    ngx_http_oip_ctx_t              *ctx;
    ngx_http_oip_route_t             rt;
    const ngx_http_oip_transport_t  *tr;

    tr = olcf->transport;

    ngx_memzero(&rt, sizeof(ngx_http_oip_route_t));

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
    ctx->req.rpc = rt.rpc;
    ctx->req.stream = rt.stream;
    ctx->req.generate = rt.generate;

    if (rt.generate == NGX_HTTP_OIP_GEN_PASS) {
        /* the runtime's own generate_stream: its body is its business,
         * its events pass as they come */
        ctx->req.phase = NGX_HTTP_OIP_PHASE_PASSED;
        ngx_http_oip_stream_start(r, ctx);
        return NGX_DECLINED;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: %s transport, model \"%V\"", tr->name, &ctx->model);

    if (olcf->sig_zone == NULL || rt.rpc != OIP_RPC_MODEL_INFER) {
        return ngx_http_oip_read_body(r, ctx);
    }

    /* the signature first: an unknown model costs no body read */

    ctx->req.phase = NGX_HTTP_OIP_PHASE_SIGNATURE;

    return NGX_OK;
}


/* a signature's metadata fetch, when its location makes it a call too */

static ngx_int_t
ngx_http_oip_subrequest(ngx_http_request_t *r,
    const ngx_http_oip_transport_t *tr)
{
    ngx_int_t            rc;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_oip_module);

    if (ctx == NULL || !ctx->req.sub || !tr->subrequests
        || ctx->req.phase == NGX_HTTP_OIP_PHASE_PASSED)
    {
        return NGX_DECLINED;
    }

    ctx->req.transport = tr;

    rc = ngx_http_oip_rpc(r, ctx);
    ctx->req.phase = NGX_HTTP_OIP_PHASE_PASSED;

    return (rc == NGX_DECLINED) ? rc : NGX_HTTP_INTERNAL_SERVER_ERROR;
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
    ctx->req.phase = NGX_HTTP_OIP_PHASE_PASSED;

    return ngx_http_oip_send_error(r, NGX_HTTP_NOT_FOUND, &msg);
}


static ngx_int_t
ngx_http_oip_read_body(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_int_t  rc;

    ctx->req.phase = NGX_HTTP_OIP_PHASE_READ;

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
        ctx->req.phase = NGX_HTTP_OIP_PHASE_PASSED;
        break;

    case NGX_DONE:
        ctx->req.phase = NGX_HTTP_OIP_PHASE_READ;
        break;

    default:
        ctx->req.phase = NGX_HTTP_OIP_PHASE_REFUSED;
        ctx->req.status = rc;
    }
}


/* the request checked (and converted): on to the next phase */

static void
ngx_http_oip_resume(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    /* a model may just have been updated: its signature once more */

    if (ctx->req.misfit && !ctx->req.refetched
        && ngx_http_oip_signature_refetch(r, ctx) == NGX_AGAIN)
    {
        ctx->req.phase = NGX_HTTP_OIP_PHASE_REFETCH;
    }

    ctx->req.refetched = 1;

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
    ctx->req.carrier = framing.carrier;

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: IHCL %L, encoding %d, carrier %d", framing.ihcl,
                   (int) framing.encoding, (int) framing.carrier);

    /* above oip_buffer, mapped and converted through files */

    rc = ngx_http_oip_spool_in(r, ctx, &framing, &body, &len);

    if (rc == NGX_DECLINED) {
        rc = ngx_http_oip_body_in(r, ctx, &body, &len);
    }

    if (rc != NGX_OK) {
        return rc;
    }

    if (ctx->req.rpc != OIP_RPC_MODEL_INFER) {
        /* a health or metadata GET: its body, if any, is not sent */
        return ngx_http_oip_rpc(r, ctx);
    }

    if (ctx->req.generate == NGX_HTTP_OIP_GEN_EMULATE) {
        /* the infer request a generate request stands for, processed */
        rc = ngx_http_oip_generate_request(r, ctx, &framing, &body, &len);
        if (rc != NGX_OK) {
            return rc;
        }
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

    /* the priority that goes upstream: oip_priority's, the levels */

    rc = ngx_http_oip_admission_options(r, &run.opt);
    if (rc != NGX_OK) {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 OIP_REASON_OTHER, "the gateway's "
                                 "oip_priority is not a priority");
    }

    if (ctx->req.transport->prepare) {
        ctx->req.transport->prepare(r, ctx, &run);
    }

    run.opt.signature = ctx->req.signature;
    run.opt.model = ctx->model.data;
    run.opt.model_len = ctx->model.len;

    run.digested = (ngx_http_oip_digest_begin(r, ctx, &run.digest, &run.opt)
                    == NGX_OK);

    run.opt.sink = ngx_http_oip_spool_sink(ctx);

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

    ctx->vars.request_usec += run->usec;

    if (ctx->spool) {
        ngx_http_oip_spool_done(r, ctx, run->rc, &run->res);
    }

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
        ctx->req.misfit = res->misfit;
        return ngx_http_oip_fail(r, ctx, res->status, res->reason,
                                 res->error);
    }

    ctx->req.misfit = 0;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    /* for the variables */

    ctx->vars.counted = 1;
    ctx->vars.id.data = (u_char *) res->id;
    ctx->vars.id.len = res->id_len;
    ctx->vars.ninputs = res->ninputs;
    ctx->vars.elements = res->elements;
    ctx->vars.tensor_bytes = res->tensor_bytes;
    ctx->vars.in_form = res->in_form;
    ctx->vars.upstream_form = res->out_form;
    ctx->vars.priority = res->priority;
    ctx->vars.timeout = res->timeout;
    ctx->vars.has_priority = res->has_priority;
    ctx->vars.has_timeout = res->has_timeout;

    /* without one, a request of the default level where levels are */

    if (!res->has_priority && olcf->admit) {
        ctx->vars.priority = olcf->admit->default_level;
        ctx->vars.has_priority = 1;
    }

    ctx->vars.sequence_id = res->sequence_id;
    ctx->vars.sequence_str.data = (u_char *) res->sequence_str;
    ctx->vars.sequence_str.len = res->sequence_str_len;
    ctx->vars.has_sequence = res->has_sequence;
    ctx->vars.sequence_start = res->sequence_start;
    ctx->vars.sequence_end = res->sequence_end;

    ctx->req.deadline_at = res->deadline_at;
    ctx->req.deadline_len = res->deadline_len;
    ctx->req.deadline_pb = res->deadline_pb;

    if (res->deadline_filed && ctx->spool) {
        ctx->req.deadline_file = ngx_http_oip_spool_converted(ctx,
                                                              res->head);
        ctx->req.deadline_off = (off_t) res->deadline_off;
    }

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

    if (ctx->req.carrier != OIP_CARRIER_HEADER
        || (ctx->req.transport->carrier && olcf->carrier != OIP_CARRIER_HEADER))
    {
        res->manage = 1;
    }

    if (ctx->req.generate == NGX_HTTP_OIP_GEN_EMULATE) {
        ngx_http_oip_generate_made(r, ctx, res);
    }

    ctx->ans.wish = res->wish;
    ctx->ans.manage = res->manage;

    if (ngx_http_oip_body_out(r, res) != NGX_OK
        || (ctx->req.transport->target
            && ctx->req.transport->target(r, ctx) != NGX_OK)
        || (ctx->req.generate == NGX_HTTP_OIP_GEN_EMULATE
            && ngx_http_oip_generate_target(r, ctx) != NGX_OK))
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

    ctx->ans.manage = 1;

    if (ctx->req.transport->call(r, ctx, &res) != NGX_OK
        || ngx_http_oip_body_out(r, &res) != NGX_OK
        || ctx->req.transport->target(r, ctx) != NGX_OK)
    {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 OIP_REASON_OTHER,
                                 "out of memory");
    }

    return NGX_DECLINED;
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
