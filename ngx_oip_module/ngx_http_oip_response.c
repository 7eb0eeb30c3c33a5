
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The response path: for a 200 answer to a request this module handled
 * and may need to reshape, the headers are held, the body is buffered,
 * the codec gives each output the form the client asked for, and the
 * headers go out with an exact Content-Length (the image filter's model).
 */


#include "ngx_http_oip_module.h"


static ngx_int_t ngx_http_oip_header_filter(ngx_http_request_t *r);
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
static ngx_int_t ngx_http_oip_send(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_response_t *resp);
static ngx_int_t ngx_http_oip_send_upstream_error(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_uint_t status, const char *msg);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


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
    off_t                     len;
    uint64_t                  n;
    ngx_uint_t                count;
    ngx_table_elt_t          *h;
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    if (r != r->main) {
        return ngx_http_next_header_filter(r);
    }

    if (r->err_status >= NGX_HTTP_BAD_REQUEST) {
        return ngx_http_oip_own_error(r);
    }

    ctx = ngx_http_oip_get_ctx(r);

    if (ctx && ctx->status == NGX_DECLINED && r->upstream
        && r->http_version == NGX_HTTP_VERSION_9 && r->http_protocol.len)
    {
        return ngx_http_oip_not_http(r, ctx);
    }

    if (ctx == NULL || !ctx->manage || ctx->filtering
        || r->headers_out.status != NGX_HTTP_OK
        || r->header_only || r->method == NGX_HTTP_HEAD)
    {
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

    ctx->resp_ihcl = -1;

    h = ngx_http_oip_header_find(&r->headers_out.headers, NGX_HTTP_OIP_IHCL,
                                sizeof(NGX_HTTP_OIP_IHCL) - 1, &count);
    if (h) {
        if (count > 1
            || oip_ihcl_parse(h->value.data, h->value.len, &n) != 0
            || n > (uint64_t) NGX_MAX_OFF_T_VALUE)
        {
            ctx->resp_ihcl = -2;

        } else {
            ctx->resp_ihcl = (off_t) n;
        }
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    ctx->filtering = 1;
    ctx->limit = (size_t) (olcf->max_json_size + olcf->max_tensor_size);

    /* the whole answer, once, when its size is announced */

    len = r->headers_out.content_length_n;

    if (len > 0 && (uint64_t) len <= ctx->limit) {
        ctx->buf = ngx_palloc(r->pool, (size_t) len);
        if (ctx->buf == NULL) {
            return NGX_ERROR;
        }

        ctx->cap = (size_t) len;
    }

    r->filter_need_in_memory = 1;
    r->allow_ranges = 0;

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

    if (in == NULL || r != r->main) {
        return ngx_http_next_body_filter(r, in);
    }

    ctx = ngx_http_oip_get_ctx(r);

    if (ctx && ctx->replace) {
        return ngx_http_oip_replace_page(r, in, ctx);
    }

    if (ctx == NULL || !ctx->filtering) {
        return ngx_http_next_body_filter(r, in);
    }

    last = 0;
    data = 0;
    rc = NGX_OK;

    for (cl = in; cl; cl = cl->next) {

        if (cl->buf->last > cl->buf->pos) {
            data = 1;

            if (!ctx->sent && rc == NGX_OK) {
                rc = ngx_http_oip_append(r, ctx, cl->buf->pos,
                                         cl->buf->last - cl->buf->pos);
            }
        }

        cl->buf->pos = cl->buf->last;

        if (cl->buf->last_buf) {
            last = 1;
        }
    }

    if (ctx->sent) {
        /* the answer has gone out: the rest is dropped */
        return NGX_OK;
    }

    /*
     * A lone flush once the upstream connection is gone: the upstream
     * failed after its headers (on success a last_buf comes).  The held
     * headers were never sent, so the client can still get a real error.
     */

    if (!last && !data && r->upstream && r->upstream->peer.connection == NULL)
    {
        return ngx_http_oip_send_upstream_error(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                   "upstream answer: cut short, the upstream "
                                   "failed or timed out after its headers");
    }

    if (rc != NGX_OK) {
        return ngx_http_oip_send_upstream_error(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                   "upstream answer: larger than "
                                   "oip_max_json_size plus "
                                   "oip_max_tensor_size");
    }

    if (!last) {
        return NGX_OK;
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
    ngx_str_t                 model;
    const char               *msg;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (!olcf->enable || r->error_page
        || r->headers_out.status != r->err_status
        || r->method != NGX_HTTP_POST
        || ngx_http_oip_infer_uri(&r->uri, &model) != NGX_OK)
    {
        return ngx_http_next_header_filter(r);
    }

    switch (r->err_status) {
    case NGX_HTTP_BAD_REQUEST:
        msg = "the request could not be read";
        break;
    case NGX_HTTP_REQUEST_TIME_OUT:
        msg = "the request body did not arrive in time";
        break;
    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        msg = "the request body exceeds client_max_body_size";
        break;
    case NGX_HTTP_BAD_GATEWAY:
        msg = "the upstream could not be reached or failed";
        break;
    case NGX_HTTP_GATEWAY_TIME_OUT:
        msg = "the upstream did not answer in time";
        break;
    case NGX_HTTP_SERVICE_UNAVAILABLE:
        msg = "the service is unavailable";
        break;
    default:
        msg = "the request failed";
    }

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
    size_t  len;
    u_char  *p;

    if (ctx == NULL) {
        ctx = ngx_http_oip_get_ctx(r);
    }

    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_ctx_t));
        if (ctx == NULL) {
            return NGX_ERROR;
        }

        ngx_http_set_ctx(r, ctx, ngx_http_oip_module);
    }

    len = sizeof("{\"error\":\"\"}") - 1 + ngx_strlen(msg);

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ctx->page.data = p;
    ctx->page.len = ngx_sprintf(p, "{\"error\":\"%s\"}", msg) - p;
    ctx->replace = 1;
    ctx->filtering = 0;

    r->headers_out.content_length_n = ctx->page.len;

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.charset.len = 0;

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

    if (ctx->sent) {
        return NGX_OK;
    }

    ctx->sent = 1;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = ctx->page.data;
    b->last = ctx->page.data + ctx->page.len;
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
    size_t   cap;
    u_char  *buf;

    if (len == 0) {
        return NGX_OK;
    }

    if (len > ctx->limit - ctx->len) {
        return NGX_DECLINED;
    }

    if (ctx->len + len > ctx->cap) {
        cap = ngx_max(ctx->cap * 2, ctx->len + len);
        cap = ngx_max(cap, 16384);
        cap = ngx_min(cap, ctx->limit);

        buf = ngx_palloc(r->pool, cap);
        if (buf == NULL) {
            return NGX_ERROR;
        }

        if (ctx->len) {
            ngx_memcpy(buf, ctx->buf, ctx->len);
        }

        if (ctx->buf) {
            (void) ngx_pfree(r->pool, ctx->buf);
        }

        ctx->buf = buf;
        ctx->cap = cap;
    }

    ngx_memcpy(ctx->buf + ctx->len, data, len);
    ctx->len += len;

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_finish(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    oip_alloc_t               alloc;
    oip_options_t             opt;
    oip_response_t            resp;
    ngx_http_oip_loc_conf_t  *olcf;

    if (ctx->resp_ihcl == -2) {
        return ngx_http_oip_send_upstream_error(r, ctx, NGX_HTTP_BAD_GATEWAY,
                                   "upstream answer: a bad "
                                   "Inference-Header-Content-Length");
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    ngx_http_oip_options(olcf, &opt);
    ngx_http_oip_allocator(r, &alloc);

    if (oip_response_process(&resp, &alloc, &opt, &ctx->wish,
                             ctx->buf ? ctx->buf : (u_char *) "", ctx->len,
                             ctx->resp_ihcl)
        != 0)
    {
        return ngx_http_oip_send_upstream_error(r, ctx, resp.status,
                                                resp.error);
    }

    return ngx_http_oip_send(r, ctx, &resp);
}


static ngx_int_t
ngx_http_oip_send(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_response_t *resp)
{
    size_t            i;
    u_char           *p;
    ngx_int_t         rc;
    ngx_str_t         v;
    ngx_buf_t        *b;
    ngx_uint_t        count;
    ngx_chain_t      *out, *cl, **ll;
    ngx_table_elt_t  *h;

    ctx->sent = 1;

    out = NULL;
    ll = &out;
    b = NULL;

    if (!resp->rewritten) {
        /* the tensors were right as they came */

        if (ctx->len) {
            b = ngx_calloc_buf(r->pool);
            cl = ngx_alloc_chain_link(r->pool);

            if (b == NULL || cl == NULL) {
                return NGX_ERROR;
            }

            b->pos = ctx->buf;
            b->last = ctx->buf + ctx->len;
            b->memory = 1;

            cl->buf = b;
            *ll = cl;
            ll = &cl->next;
        }

    } else {
        for (i = 0; i < resp->nsegs; i++) {
            if (resp->segs[i].len == 0) {
                continue;
            }

            b = ngx_calloc_buf(r->pool);
            cl = ngx_alloc_chain_link(r->pool);

            if (b == NULL || cl == NULL) {
                return NGX_ERROR;
            }

            b->pos = (u_char *) resp->segs[i].data;
            b->last = b->pos + resp->segs[i].len;
            b->memory = 1;

            cl->buf = b;
            *ll = cl;
            ll = &cl->next;
        }

        ngx_http_clear_etag(r);
    }

    /*
     * The headers say what the body is, whoever answered: runtimes label
     * binary answers in their own ways (a lower-case IHCL, a JSON type).
     */

    h = ngx_http_oip_header_find(&r->headers_out.headers, NGX_HTTP_OIP_IHCL,
                                 sizeof(NGX_HTTP_OIP_IHCL) - 1, &count);
    while (h) {
        h->hash = 0;
        h = ngx_http_oip_header_find(&r->headers_out.headers,
                                     NGX_HTTP_OIP_IHCL,
                                     sizeof(NGX_HTTP_OIP_IHCL) - 1, &count);
    }

    if (resp->binary) {
        p = ngx_pnalloc(r->pool, NGX_SIZE_T_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v.data = p;
        v.len = ngx_sprintf(p, "%uz", resp->header_len) - p;

        h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) {
            return NGX_ERROR;
        }

        h->hash = 1;
        ngx_str_set(&h->key, NGX_HTTP_OIP_IHCL);
        h->value = v;
        h->lowcase_key = NULL;
#if (nginx_version >= 1023000)
        h->next = NULL;
#endif

        ngx_str_set(&r->headers_out.content_type, "application/octet-stream");

    } else {
        ngx_str_set(&r->headers_out.content_type, "application/json");
    }

    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.charset.len = 0;

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    r->headers_out.content_length_n = resp->rewritten ? (off_t) resp->body_len
                                                      : (off_t) ctx->len;

    if (out == NULL) {
        b = ngx_calloc_buf(r->pool);
        cl = ngx_alloc_chain_link(r->pool);

        if (b == NULL || cl == NULL) {
            return NGX_ERROR;
        }

        cl->buf = b;
        out = cl;
        ll = &cl->next;
    }

    *ll = NULL;
    b->last_buf = 1;

    rc = ngx_http_next_header_filter(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    return ngx_http_next_body_filter(r, out);
}


/* a JSON 502 in place of an answer that cannot be given as asked */

static ngx_int_t
ngx_http_oip_send_upstream_error(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_uint_t status, const char *msg)
{
    size_t        len, n;
    u_char       *p;
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    ctx->sent = 1;

    n = ngx_strlen(msg);

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "oip: model \"%V\": %s", &ctx->model, msg);

    len = sizeof("{\"error\":\"\"}") - 1
          + oip_json_escape(NULL, (u_char *) msg, n);

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(b->last, "{\"error\":\"", sizeof("{\"error\":\"") - 1);
    p += oip_json_escape(p, (u_char *) msg, n);
    b->last = ngx_cpymem(p, "\"}", 2);
    b->last_buf = 1;

    ngx_http_clean_header(r);

    r->headers_out.status = status;
    r->headers_out.content_length_n = len;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->keepalive = 0;

    rc = ngx_http_next_header_filter(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_next_body_filter(r, &out);
}
