
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The request's body, for the request path: in, as one piece of memory
 * for the codec (copied only when nginx did not read it so); out, the
 * codec's segments in its place, with the header list rebuilt to
 * describe them (framing, Content-Type, a carrier's media type, no
 * Accept-Encoding when the answer may be reshaped).
 */


#include "ngx_http_oip_module.h"


/* what ngx_http_oip_headers() changes */
#define NGX_HTTP_OIP_FRAMING   0x01    /* the body was rewritten */
#define NGX_HTTP_OIP_TYPE      0x02    /* Content-Type to match the body */
#define NGX_HTTP_OIP_ENCODING  0x04    /* no Accept-Encoding upstream */
#define NGX_HTTP_OIP_CARRIER   0x08    /* the JSON's length, as the
                                          upstream reads it */


static u_char *ngx_http_oip_body_join(ngx_http_request_t *r, off_t total);
static ngx_int_t ngx_http_oip_replace(ngx_http_request_t *r,
    oip_result_t *res);
static ngx_int_t ngx_http_oip_headers(ngx_http_request_t *r,
    oip_result_t *res, ngx_uint_t what);
static ngx_int_t ngx_http_oip_carrier(ngx_http_request_t *r,
    oip_result_t *res, ngx_list_t *list, ngx_str_t *type);
static ngx_uint_t ngx_http_oip_dropped(ngx_table_elt_t *h,
    ngx_uint_t what);


static ngx_str_t  ngx_http_oip_ihcl = ngx_string(NGX_HTTP_OIP_IHCL);


/* the body the codec made, and the headers that go with it */

ngx_int_t
ngx_http_oip_body_out(ngx_http_request_t *r, oip_result_t *res)
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

    if (ctx->req.transport->carrier
        && (ctx->req.carrier != OIP_CARRIER_HEADER
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

ngx_int_t
ngx_http_oip_body_in(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
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
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_request_body_t  *rb;

    rb = r->request_body;
    ctx = ngx_http_oip_get_ctx(r);

    if (ctx->spool) {
        /* the JSON, then the converted body's file */

        if (ngx_http_oip_spool_body(r, ctx, res) != NGX_OK) {
            return NGX_ERROR;
        }

        goto length;
    }

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

length:

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
