
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Answers converted as they arrive: a binary answer larger than
 * oip_buffer, all of whose binary outputs the client gets as JSON, is not
 * held.  Once its JSON header is in, the codec plans the answer
 * (oip_response_plan()): its text, with holes where the outputs' data
 * goes, and the chunks of its binary part.  The headers go out without a
 * Content-Length, the text up to the first hole, and each chunk's
 * elements as they arrive, printed into output buffers of our own that
 * come back once sent (the gzip filter's free and busy chains).  While
 * the client is slow the input is not consumed: nginx's upstream buffering
 * (memory, then its temporary files) holds the rest.  A runtime that
 * fails after the first byte leaves the client a cut answer.
 *
 * The response path (ngx_http_oip_response.c) holds the answer as ever
 * and hands it here; these are its next filters, saved, not filters of
 * their own.
 */


#include "ngx_http_oip_module.h"


/* output buffers: as many at once, each this large */
#define NGX_HTTP_OIP_FLOW_BUFS   8
#define NGX_HTTP_OIP_FLOW_SIZE   65536


struct ngx_http_oip_flow_s {
    oip_result_t           plan;
    size_t                 seg;        /* the next piece of text, or hole */
    size_t                 chunk;      /* the chunk being read */
    uint64_t               done;       /* its bytes read */
    uint64_t               at;         /* its elements printed */
    u_char                 carry[8];   /* an element cut between buffers */
    size_t                 have;

    ngx_chain_t           *in;         /* input not consumed yet */
    ngx_chain_t           *out;
    ngx_chain_t          **last_out;
    ngx_chain_t           *free;
    ngx_chain_t           *busy;
    ngx_buf_t             *buf;        /* the output buffer being filled */
    ngx_uint_t             bufs;

    unsigned               input_done:1;
    unsigned               sent_last:1;
    unsigned               unsized:1;  /* no Content-Length: chunked */
};


static ngx_int_t ngx_http_oip_flow_headers(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_flow_run(ngx_http_request_t *r,
    ngx_http_oip_flow_t *fl);
static ngx_int_t ngx_http_oip_flow_input(ngx_http_request_t *r,
    ngx_http_oip_flow_t *fl, ngx_buf_t *b);
static ngx_int_t ngx_http_oip_flow_next(ngx_http_request_t *r,
    ngx_http_oip_flow_t *fl);
static ngx_int_t ngx_http_oip_flow_text(ngx_http_request_t *r,
    ngx_http_oip_flow_t *fl);
static ngx_int_t ngx_http_oip_flow_room(ngx_http_request_t *r,
    ngx_http_oip_flow_t *fl);
static ngx_int_t ngx_http_oip_flow_put(ngx_http_request_t *r,
    ngx_http_oip_flow_t *fl, ngx_buf_t *b);


/* the response path's next filters: the flow's and the spool's */
ngx_http_output_header_filter_pt  ngx_http_oip_answer_next_header;
ngx_http_output_body_filter_pt    ngx_http_oip_answer_next_body;

static ngx_str_t  ngx_http_oip_flow_ihcl = ngx_string(NGX_HTTP_OIP_IHCL);


/* called just before the response path's filters are put in the chain */

ngx_int_t
ngx_http_oip_flow_init(ngx_conf_t *cf)
{
    ngx_http_oip_answer_next_header = ngx_http_top_header_filter;
    ngx_http_oip_answer_next_body = ngx_http_top_body_filter;

    return NGX_OK;
}


/*
 * Whether a 200 being held may flow: a REST answer with an IHCL, larger
 * than oip_buffer or of no length (chunked: its JSON header's sizes say),
 * to an infer call (its JSON header decides the rest).
 */

ngx_uint_t
ngx_http_oip_flow_may(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    off_t len)
{
    oip_header_t              ihcl;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (r != r->main || r->headers_out.status != NGX_HTTP_OK || r->cached
        || (len >= 0 && len <= (off_t) olcf->buffer)
        || ctx->req.transport != &ngx_http_oip_http_transport
        || ctx->req.rpc != OIP_RPC_MODEL_INFER
        || ctx->req.generate == NGX_HTTP_OIP_GEN_EMULATE
        || ngx_http_oip_header(&r->headers_out.headers,
                               &ngx_http_oip_flow_ihcl, &ihcl) == NULL)
    {
        return 0;
    }

    ctx->ans.may_flow = 1;

    return 1;
}


/*
 * The answer held so far (ctx->ans.buf): once its JSON header is there,
 * planned.  NGX_DECLINED: held on (not yet, or for good); else it flows
 * from now on, and this is the body filter's result.
 */

ngx_int_t
ngx_http_oip_flow_start(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_uint_t last)
{
    off_t                     len;
    size_t                    i;
    uint64_t                  blen;
    ngx_buf_t                *b;
    oip_alloc_t               alloc;
    oip_result_t              res;
    oip_options_t             opt;
    oip_framing_t             framing;
    ngx_http_oip_flow_t      *fl;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (ctx->req.transport->answer(r, ctx, &res, &framing) != NGX_OK
        || framing.ihcl <= 0)
    {
        ctx->ans.may_flow = 0;
        return NGX_DECLINED;
    }

    len = r->headers_out.content_length_n;

    if ((size_t) framing.ihcl > ctx->ans.len) {
        if (last || (len >= 0 && framing.ihcl >= len)) {
            ctx->ans.may_flow = 0;
        }

        return NGX_DECLINED;
    }

    ctx->ans.may_flow = 0;

    fl = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_flow_t));
    if (fl == NULL) {
        return NGX_ERROR;
    }

    ngx_http_oip_options(r, &opt);
    ngx_http_oip_allocator(r, &alloc);

    (void) oip_response_plan(&fl->plan, &alloc, &opt, &ctx->ans.wish,
                             ctx->ans.buf, (size_t) framing.ihcl,
                             (len >= 0) ? (uint64_t) (len - framing.ihcl)
                                        : OIP_BLEN_ANY);

    blen = 0;

    for (i = 0; fl->plan.status == 0 && i < fl->plan.nchunks; i++) {
        blen += fl->plan.chunks[i].len;
    }

    if (fl->plan.status || !fl->plan.planned
        || (len < 0 && framing.ihcl + blen <= olcf->buffer))
    {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: answer held whole: %s",
                       fl->plan.status ? fl->plan.error
                       : fl->plan.planned ? "its chunks within oip_buffer"
                                          : "an output stays binary");

        /*
         * Refused or not, its conversion says so as before, held whole:
         * past oip_buffer in a file (ngx_http_oip_spool_hold())
         */

        return NGX_DECLINED;
    }

    fl->unsized = (len < 0);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: answer of %O bytes flows: JSON %L, %uz pieces, "
                   "%uz chunks", (off_t) (framing.ihcl + blen),
                   framing.ihcl, fl->plan.nsegs, fl->plan.nchunks);

    fl->last_out = &fl->out;
    ctx->ans.flow = fl;
    ctx->ans.phase = NGX_HTTP_OIP_ANS_FLOW;

    ctx->vars.answer = NGX_HTTP_OIP_ANSWER_CONVERTED;
    ctx->vars.answer_form = OIP_SHAPE_JSON;
    ctx->vars.answer_bytes = (size_t) blen;
    ctx->vars.answer_timed = 1;

    if (ngx_http_oip_flow_headers(r, ctx) != NGX_OK) {
        return NGX_ERROR;
    }

    /* what came after the JSON is the first input */

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->temporary = 1;
    b->pos = ctx->ans.buf + framing.ihcl;
    b->last = ctx->ans.buf + ctx->ans.len;
    b->last_buf = last;

    if (ngx_http_oip_flow_input(r, fl, b) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_oip_flow_body(r, ctx, NULL);
}


/* the answer's headers: JSON, its length unknown */

static ngx_int_t
ngx_http_oip_flow_headers(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_int_t         rc;
    oip_header_t      ihcl;
    ngx_table_elt_t  *h;

    while ((h = ngx_http_oip_header(&r->headers_out.headers,
                                    &ngx_http_oip_flow_ihcl, &ihcl))
           != NULL)
    {
        h->hash = 0;
    }

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    r->headers_out.content_length_n = -1;

    ngx_http_clear_etag(r);
    ngx_http_oip_content_type(r, OIP_TYPE_JSON);

    rc = ngx_http_oip_answer_next_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * The body filter while the answer flows: in (or nothing, when called to
 * go on) converted as far as output buffers allow and sent.  ctx NULL:
 * the response path's filter was called with nothing, its request's
 * answer may flow or not.
 */

ngx_int_t
ngx_http_oip_flow_body(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_chain_t *in)
{
    uint64_t              start;
    ngx_int_t             rc, run;
    ngx_chain_t          *cl;
    ngx_http_oip_flow_t  *fl;

    if (ctx == NULL) {
        ctx = (r == r->main) ? ngx_http_oip_get_ctx(r) : NULL;

        if (ctx == NULL || ctx->ans.phase != NGX_HTTP_OIP_ANS_FLOW) {
            return ngx_http_oip_answer_next_body(r, in);
        }
    }

    fl = ctx->ans.flow;

    for (cl = in; cl; cl = cl->next) {
        if (ngx_http_oip_flow_input(r, fl, cl->buf) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    for ( ;; ) {
        start = ngx_http_oip_usec();
        run = ngx_http_oip_flow_run(r, fl);
        ctx->vars.answer_usec += ngx_http_oip_usec() - start;

        if (run == NGX_ERROR) {
            r->buffered &= ~NGX_HTTP_OIP_BUFFERED;
            return NGX_ERROR;
        }

        if (fl->out == NULL && fl->busy == NULL && run == NGX_OK) {
            /* nothing made, nothing waiting: on with what is below */
            rc = (in || fl->sent_last) ? NGX_OK
                                       : ngx_http_oip_answer_next_body(r, NULL);
            break;
        }

        rc = ngx_http_oip_answer_next_body(r, fl->out);

        ngx_chain_update_chains(r->pool, &fl->free, &fl->busy, &fl->out,
                                (ngx_buf_tag_t) &ngx_http_oip_flow_init);
        fl->last_out = &fl->out;

        if (rc == NGX_ERROR) {
            r->buffered &= ~NGX_HTTP_OIP_BUFFERED;
            return NGX_ERROR;
        }

        if (run == NGX_OK || fl->free == NULL) {
            /* all of the input made, or every buffer out: wait */
            break;
        }
    }

    /* input not consumed: the request may not end before it is */

    if (fl->in || run == NGX_AGAIN) {
        r->buffered |= NGX_HTTP_OIP_BUFFERED;

    } else {
        r->buffered &= ~NGX_HTTP_OIP_BUFFERED;
    }

    return (rc == NGX_OK && fl->busy) ? NGX_AGAIN : rc;
}


/* a buffer of input, kept until it is consumed (its link copied) */

static ngx_int_t
ngx_http_oip_flow_input(ngx_http_request_t *r, ngx_http_oip_flow_t *fl,
    ngx_buf_t *b)
{
    ngx_chain_t  *cl, **ll;

    for (ll = &fl->in; *ll; ll = &(*ll)->next) { /* void */ }

    cl = ngx_alloc_chain_link(r->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;
    *ll = cl;

    return NGX_OK;
}


/*
 * Converts the input held as far as output buffers allow: NGX_OK when it
 * is all consumed, NGX_AGAIN when the buffers ran out, NGX_ERROR for a
 * chunk that cannot be JSON or an answer cut short.
 */

static ngx_int_t
ngx_http_oip_flow_run(ngx_http_request_t *r, ngx_http_oip_flow_t *fl)
{
    long          w;
    char          err[OIP_ERROR_LEN];
    size_t        n, size, room, k;
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;
    oip_chunk_t  *ch;

    if (ngx_http_oip_flow_text(r, fl) != NGX_OK) {
        return NGX_ERROR;
    }

    while (fl->in) {
        b = fl->in->buf;

        if (b->pos == b->last) {
            if (b->last_buf) {
                fl->input_done = 1;
            }

            /* its link back to the pool: a link a buffer adds up */
            cl = fl->in;
            fl->in = cl->next;
            ngx_free_chain(r->pool, cl);
            continue;
        }

        if (fl->chunk == fl->plan.nchunks) {
            /* past the chunks: nginx stops at a Content-Length, not at
             * the end of what the JSON header declared */

            if (fl->unsized) {
                ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                              "oip: upstream answer: more binary data than "
                              "its binary_data_size say; the answer is "
                              "cut");
                return NGX_ERROR;
            }

            b->pos = b->last;
            continue;
        }

        ch = &fl->plan.chunks[fl->chunk];
        size = ch->size;

        if (fl->done == ch->len) {
            if (ngx_http_oip_flow_next(r, fl) != NGX_OK) {
                return NGX_ERROR;
            }

            continue;
        }

        n = (size_t) ngx_min((uint64_t) (b->last - b->pos),
                             ch->len - fl->done);

        if (ch->drop) {
            b->pos += n;
            fl->done += n;
            continue;
        }

        rc = ngx_http_oip_flow_room(r, fl);

        if (rc != NGX_OK) {
            return rc;
        }

        room = (fl->buf->end - fl->buf->last) / OIP_ELEMENT_JSON_MAX;

        if (fl->have || n < size) {
            /* an element cut between two buffers */

            k = ngx_min(size - fl->have, n);
            ngx_memcpy(fl->carry + fl->have, b->pos, k);
            fl->have += k;
            b->pos += k;
            fl->done += k;

            if (fl->have < size) {
                continue;
            }

            w = oip_chunk_json(ch, fl->at, fl->carry, 1, fl->buf->last, err);
            fl->have = 0;
            k = 1;

        } else {
            k = ngx_min(n / size, room);
            w = oip_chunk_json(ch, fl->at, b->pos, k, fl->buf->last, err);
            b->pos += k * size;
            fl->done += k * size;
        }

        if (w < 0) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "oip: upstream answer: %s; the answer is cut",
                          err);
            return NGX_ERROR;
        }

        fl->buf->last += w;
        fl->at += k;
    }

    if (!fl->input_done || fl->sent_last) {
        return NGX_OK;
    }

    /* the last chunks may be empty: done, then the text after them */

    while (fl->chunk < fl->plan.nchunks
           && fl->done == fl->plan.chunks[fl->chunk].len)
    {
        if (ngx_http_oip_flow_next(r, fl) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (fl->chunk < fl->plan.nchunks || fl->seg < fl->plan.nsegs) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "oip: upstream answer: cut short in its binary "
                      "data; the answer is cut");
        return NGX_ERROR;
    }

    /* the end */

    b = (fl->buf && fl->buf->last > fl->buf->pos) ? fl->buf
                                                   : ngx_calloc_buf(r->pool);

    if (b == NULL || ngx_http_oip_flow_put(r, fl, b) != NGX_OK) {
        return NGX_ERROR;
    }

    fl->buf = NULL;
    b->last_buf = 1;
    fl->sent_last = 1;

    return NGX_OK;
}


/* a chunk read whole: the next, and after a kept one's hole, the text */

static ngx_int_t
ngx_http_oip_flow_next(ngx_http_request_t *r, ngx_http_oip_flow_t *fl)
{
    ngx_uint_t  drop;

    drop = fl->plan.chunks[fl->chunk].drop;

    fl->chunk++;
    fl->done = 0;
    fl->at = 0;

    if (drop) {
        return NGX_OK;
    }

    fl->seg++;

    return ngx_http_oip_flow_text(r, fl);
}


/* the plan's text up to its next hole, sent from where it lies */

static ngx_int_t
ngx_http_oip_flow_text(ngx_http_request_t *r, ngx_http_oip_flow_t *fl)
{
    ngx_buf_t  *b;
    oip_seg_t  *seg;

    while (fl->seg < fl->plan.nsegs && fl->plan.segs[fl->seg].data) {
        seg = &fl->plan.segs[fl->seg++];

        if (seg->len == 0) {
            continue;
        }

        /* after what is made so far */

        if (fl->buf && fl->buf->last > fl->buf->pos) {
            if (ngx_http_oip_flow_put(r, fl, fl->buf) != NGX_OK) {
                return NGX_ERROR;
            }

            fl->buf = NULL;
        }

        b = ngx_calloc_buf(r->pool);
        if (b == NULL) {
            return NGX_ERROR;
        }

        b->memory = 1;
        b->pos = (u_char *) seg->data;
        b->last = b->pos + seg->len;

        if (ngx_http_oip_flow_put(r, fl, b) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * An output buffer with room for an element at least: the one being
 * filled, a free one, or a new one while there are fewer than the most;
 * NGX_AGAIN when all are out.
 */

static ngx_int_t
ngx_http_oip_flow_room(ngx_http_request_t *r, ngx_http_oip_flow_t *fl)
{
    ngx_chain_t  *cl;

    if (fl->buf && fl->buf->end - fl->buf->last >= OIP_ELEMENT_JSON_MAX) {
        return NGX_OK;
    }

    if (fl->buf) {
        if (ngx_http_oip_flow_put(r, fl, fl->buf) != NGX_OK) {
            return NGX_ERROR;
        }

        fl->buf = NULL;
    }

    if (fl->free) {
        cl = fl->free;
        fl->free = cl->next;
        fl->buf = cl->buf;
        fl->buf->pos = fl->buf->start;
        fl->buf->last = fl->buf->start;
        ngx_free_chain(r->pool, cl);

        return NGX_OK;
    }

    if (fl->bufs == NGX_HTTP_OIP_FLOW_BUFS) {
        return NGX_AGAIN;
    }

    fl->buf = ngx_create_temp_buf(r->pool, NGX_HTTP_OIP_FLOW_SIZE);
    if (fl->buf == NULL) {
        return NGX_ERROR;
    }

    fl->buf->tag = (ngx_buf_tag_t) &ngx_http_oip_flow_init;
    fl->bufs++;

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_flow_put(ngx_http_request_t *r, ngx_http_oip_flow_t *fl,
    ngx_buf_t *b)
{
    ngx_chain_t  *cl;

    cl = ngx_alloc_chain_link(r->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;
    *fl->last_out = cl;
    fl->last_out = &cl->next;

    return NGX_OK;
}
