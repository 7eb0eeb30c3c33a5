
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The request path: a PRECONTENT handler reads the whole body, hands it
 * to the codec and puts the codec's segments in place of the body, with
 * the headers that go with them, before the proxy builds its request.
 */


#include "ngx_http_oip_module.h"


/* what ngx_http_oip_headers() changes */
#define NGX_HTTP_OIP_FRAMING   0x01    /* the body was rewritten */
#define NGX_HTTP_OIP_TYPE      0x02    /* Content-Type to match the body */
#define NGX_HTTP_OIP_ENCODING  0x04    /* no Accept-Encoding upstream */


static void ngx_http_oip_cleanup(void *data);
static void ngx_http_oip_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_process(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_ihcl(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, off_t *ihcl);
static ngx_int_t ngx_http_oip_body(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, u_char **data, size_t *len);
static u_char *ngx_http_oip_body_join(ngx_http_request_t *r, off_t total);
static ngx_int_t ngx_http_oip_replace(ngx_http_request_t *r,
    oip_request_t *req);
static ngx_int_t ngx_http_oip_headers(ngx_http_request_t *r,
    oip_request_t *req, ngx_uint_t what);
static ngx_uint_t ngx_http_oip_dropped(ngx_table_elt_t *h,
    ngx_uint_t what);
static ngx_table_elt_t *ngx_http_oip_header_add(ngx_list_t *list,
    char *key, ngx_str_t *value);
static ngx_int_t ngx_http_oip_fail(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_uint_t status, const char *msg);


ngx_int_t
ngx_http_oip_request_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc, status;
    ngx_str_t                 model;
    ngx_pool_cleanup_t       *cln;
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    if (r != r->main) {
        return NGX_DECLINED;
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (!olcf->enable) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_oip_get_ctx(r);

    if (ctx) {
        if (ctx->status == NGX_DONE || ctx->status == NGX_DECLINED) {
            /* still reading, or done once: an internal redirect must not
             * convert the converted body again */
            return ctx->status;
        }

        /*
         * sent once, whichever location comes next; and set before it is
         * sent: finalizing the request may free the pool holding ctx
         */

        status = ctx->status;
        ctx->status = NGX_DECLINED;

        return ngx_http_oip_send_error(r, status, &ctx->error);
    }

    if (r->method != NGX_HTTP_POST
        || ngx_http_oip_infer_uri(&r->uri, &model) != NGX_OK)
    {
        return NGX_DECLINED;
    }

    /* kept in a pool cleanup: internal redirects clear r->ctx */

    cln = ngx_pool_cleanup_add(r->pool, sizeof(ngx_http_oip_ctx_t));
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = cln->data;
    ngx_memzero(ctx, sizeof(ngx_http_oip_ctx_t));

    ctx->status = NGX_DONE;
    ctx->model = model;

    cln->handler = ngx_http_oip_cleanup;
    ngx_http_set_ctx(r, ctx, ngx_http_oip_module);

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
ngx_http_oip_cleanup(void *data)
{
    /* nothing to free: it only marks where the ctx lives */
}


ngx_http_oip_ctx_t *
ngx_http_oip_get_ctx(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t  *cln;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_oip_module);

    if (ctx == NULL && (r->internal || r->filter_finalize)) {
        for (cln = r->pool->cleanup; cln; cln = cln->next) {
            if (cln->handler == ngx_http_oip_cleanup) {
                ctx = cln->data;
                ngx_http_set_ctx(r, ctx, ngx_http_oip_module);
                break;
            }
        }
    }

    return ctx;
}


/* "…/v2/models/M/infer" or "…/v2/models/M/versions/V/infer" */

ngx_int_t
ngx_http_oip_infer_uri(ngx_str_t *uri, ngx_str_t *model)
{
    u_char  *p, *end, *seg;

    static const ngx_str_t  infer = ngx_string("/infer");
    static const ngx_str_t  models = ngx_string("/v2/models");
    static const ngx_str_t  versions = ngx_string("/versions");

#define ngx_http_oip_ends(p, end, s)                                          \
    ((size_t) ((end) - (p)) >= (s).len                                        \
     && ngx_strncmp((end) - (s).len, (s).data, (s).len) == 0)

    p = uri->data;
    end = p + uri->len;

    if (!ngx_http_oip_ends(p, end, infer)) {
        return NGX_DECLINED;
    }

    end -= infer.len;

    for (seg = end; seg > p && seg[-1] != '/'; seg--) { /* void */ }

    if (seg == end || seg == p) {
        return NGX_DECLINED;
    }

    if (ngx_http_oip_ends(p, seg - 1, models)) {
        model->data = seg;
        model->len = end - seg;
        return NGX_OK;
    }

    /* seg..end is the version */

    end = seg - 1;

    if (!ngx_http_oip_ends(p, end, versions)) {
        return NGX_DECLINED;
    }

    end -= versions.len;

    for (seg = end; seg > p && seg[-1] != '/'; seg--) { /* void */ }

    if (seg == end || seg == p || !ngx_http_oip_ends(p, seg - 1, models)) {
        return NGX_DECLINED;
    }

    model->data = seg;
    model->len = end - seg;

#undef ngx_http_oip_ends

    return NGX_OK;
}


static void
ngx_http_oip_body_handler(ngx_http_request_t *r)
{
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_get_ctx(r);

    ctx->status = ngx_http_oip_process(r, ctx);

    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


static ngx_int_t
ngx_http_oip_process(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    off_t                     ihcl;
    size_t                    len;
    u_char                   *body;
    ngx_int_t                 rc;
    ngx_uint_t                count, what;
    oip_alloc_t               alloc;
    oip_request_t             req;
    oip_options_t             opt;
    oip_encoding_e            enc;
    ngx_table_elt_t          *h;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    enc = OIP_ENC_NONE;

    h = ngx_http_oip_header_find(&r->headers_in.headers, "Content-Encoding",
                                 sizeof("Content-Encoding") - 1, &count);

    if (h && count == 1 && h->value.len == 4
        && ngx_strncasecmp(h->value.data, (u_char *) "gzip", 4) == 0)
    {
        enc = OIP_ENC_GZIP;

    } else if (h && count == 1 && h->value.len == 7
               && ngx_strncasecmp(h->value.data, (u_char *) "deflate", 7)
                  == 0)
    {
        enc = OIP_ENC_DEFLATE;

    } else if (h && !(count == 1 && h->value.len == 8
                      && ngx_strncasecmp(h->value.data,
                                         (u_char *) "identity", 8) == 0))
    {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_UNSUPPORTED_MEDIA_TYPE,
                                 "Content-Encoding must be gzip, deflate or "
                                 "identity");
    }

    rc = ngx_http_oip_ihcl(r, ctx, &ihcl);
    if (rc != NGX_OK) {
        return rc;
    }

    rc = ngx_http_oip_body(r, ctx, &body, &len);
    if (rc != NGX_OK) {
        return rc;
    }

    ngx_http_oip_options(olcf, &opt);
    ngx_http_oip_allocator(r, &alloc);

    if (oip_request_process(&req, &alloc, &opt, body, len, ihcl, enc) != 0) {
        return ngx_http_oip_fail(r, ctx, req.status, req.error);
    }

    ctx->wish = req.wish;
    ctx->manage = req.manage;

    if (req.rewritten && ngx_http_oip_replace(r, &req) != NGX_OK) {
        goto nomem;
    }

    /*
     * The headers describe the body sent: framing when it was rewritten,
     * a Content-Type that matches it whenever inputs are not kept as
     * sent (a runtime may go by it), no Accept-Encoding when the answer
     * may be rewritten.
     */

    what = 0;

    if (req.rewritten) {
        what |= NGX_HTTP_OIP_FRAMING;

    } else if (opt.inputs != OIP_FORM_KEEP && !req.raw) {
        what |= NGX_HTTP_OIP_TYPE;
    }

    if (req.manage) {
        what |= NGX_HTTP_OIP_ENCODING;
    }

    if (what && ngx_http_oip_headers(r, &req, what) != NGX_OK) {
        goto nomem;
    }

    return NGX_DECLINED;

nomem:

    return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                             "out of memory");
}


static ngx_int_t
ngx_http_oip_ihcl(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    off_t *ihcl)
{
    uint64_t          n;
    ngx_uint_t        count;
    ngx_table_elt_t  *h;

    *ihcl = -1;

    h = ngx_http_oip_header_find(&r->headers_in.headers, NGX_HTTP_OIP_IHCL,
                                 sizeof(NGX_HTTP_OIP_IHCL) - 1, &count);
    if (h == NULL) {
        return NGX_OK;
    }

    if (count > 1) {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_BAD_REQUEST,
                                 "Inference-Header-Content-Length appears "
                                 "more than once");
    }

    if (oip_ihcl_parse(h->value.data, h->value.len, &n) != 0
        || n > (uint64_t) NGX_MAX_OFF_T_VALUE)
    {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_BAD_REQUEST,
                                 "Inference-Header-Content-Length must be "
                                 "a decimal number without sign or leading "
                                 "zeros");
    }

    *ihcl = (off_t) n;

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

    cl = r->request_body->bufs;

    p = ngx_palloc(r->pool, (size_t) total ? (size_t) total : 1);
    if (p == NULL) {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
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
ngx_http_oip_replace(ngx_http_request_t *r, oip_request_t *req)
{
    size_t                    i;
    ngx_buf_t                *b;
    ngx_chain_t              *cl, **ll;
    ngx_http_request_body_t  *rb;

    rb = r->request_body;

    ll = &rb->bufs;
    b = NULL;

    for (i = 0; i < req->nsegs; i++) {

        if (req->segs[i].len == 0) {
            continue;
        }

        b = ngx_calloc_buf(r->pool);
        if (b == NULL) {
            return NGX_ERROR;
        }

        /* pos == start: an upstream retry rewinds to start */

        b->start = (u_char *) req->segs[i].data;
        b->pos = b->start;
        b->last = b->start + req->segs[i].len;
        b->end = b->last;
        b->memory = 1;

        cl = ngx_alloc_chain_link(r->pool);
        if (cl == NULL) {
            return NGX_ERROR;
        }

        cl->buf = b;
        *ll = cl;
        ll = &cl->next;
    }

    *ll = NULL;

    if (b) {
        b->last_buf = 1;
    }

    if (rb->temp_file) {
        ngx_pool_run_cleanup_file(r->pool, rb->temp_file->file.fd);
        rb->temp_file = NULL;
    }

    r->headers_in.content_length_n = req->body_len;
    r->headers_in.chunked = 0;

    return NGX_OK;
}


/*
 * The header list is rebuilt rather than edited: an element cannot be
 * taken out of an ngx_list_t, and the proxy copies every one it finds.
 */

static ngx_int_t
ngx_http_oip_headers(ngx_http_request_t *r, oip_request_t *req,
    ngx_uint_t what)
{
    u_char           *p;
    ngx_str_t         v;
    ngx_uint_t        i, n;
    ngx_list_t        list;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h, *nh;

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
        v.len = ngx_sprintf(p, "%uz", req->body_len) - p;

        r->headers_in.content_length = ngx_http_oip_header_add(&list,
                                                       "Content-Length", &v);
        if (r->headers_in.content_length == NULL) {
            return NGX_ERROR;
        }

        if (req->binary) {
            v.data = p + NGX_OFF_T_LEN;
            v.len = ngx_sprintf(v.data, "%uz", req->header_len) - v.data;

            if (ngx_http_oip_header_add(&list, NGX_HTTP_OIP_IHCL, &v)
                == NULL)
            {
                return NGX_ERROR;
            }
        }

        r->headers_in.transfer_encoding = NULL;
    }

    if (what & (NGX_HTTP_OIP_FRAMING|NGX_HTTP_OIP_TYPE)) {
        if (req->binary) {
            ngx_str_set(&v, "application/octet-stream");

        } else {
            ngx_str_set(&v, "application/json");
        }

        r->headers_in.content_type = ngx_http_oip_header_add(&list,
                                                       "Content-Type", &v);
        if (r->headers_in.content_type == NULL) {
            return NGX_ERROR;
        }
    }

    r->headers_in.headers = list;

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
        { ngx_string(NGX_HTTP_OIP_IHCL), NGX_HTTP_OIP_FRAMING },
        { ngx_string("Content-Type"),
          NGX_HTTP_OIP_FRAMING|NGX_HTTP_OIP_TYPE },
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


static ngx_table_elt_t *
ngx_http_oip_header_add(ngx_list_t *list, char *key, ngx_str_t *value)
{
    size_t            len;
    ngx_table_elt_t  *h;

    h = ngx_list_push(list);
    if (h == NULL) {
        return NULL;
    }

    len = ngx_strlen(key);

    h->key.data = (u_char *) key;
    h->key.len = len;
    h->value = *value;

    h->lowcase_key = ngx_pnalloc(list->pool, len);
    if (h->lowcase_key == NULL) {
        return NULL;
    }

    h->hash = ngx_hash_strlow(h->lowcase_key, h->key.data, len);

#if (nginx_version >= 1023000)
    h->next = NULL;
#endif

    return h;
}


static ngx_int_t
ngx_http_oip_fail(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_uint_t status, const char *msg)
{
    size_t  len;

    len = ngx_strlen(msg);

    ctx->error.data = ngx_pnalloc(r->pool, len);
    if (ctx->error.data == NULL) {
        ngx_str_set(&ctx->error, "out of memory");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memcpy(ctx->error.data, msg, len);
    ctx->error.len = len;

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "oip: model \"%V\": %V", &ctx->model, &ctx->error);

    return status;
}


/* {"error":"..."} with the given status, instead of nginx's HTML pages */

ngx_int_t
ngx_http_oip_send_error(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *msg)
{
    size_t        len;
    u_char       *p;
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    len = sizeof("{\"error\":\"\"}") - 1
          + oip_json_escape(NULL, msg->data, msg->len);

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_cpymem(b->last, "{\"error\":\"", sizeof("{\"error\":\"") - 1);
    p += oip_json_escape(p, msg->data, msg->len);
    p = ngx_cpymem(p, "\"}", 2);

    b->last = p;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.status = status;
    r->headers_out.content_length_n = len;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    ngx_http_finalize_request(r, ngx_http_output_filter(r, &out));

    return NGX_DONE;
}
