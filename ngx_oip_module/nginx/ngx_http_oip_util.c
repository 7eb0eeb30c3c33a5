
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The helpers every glue file uses: the request's context, which URIs
 * are infer requests, the codec's options and allocators, JSON errors,
 * headers, and the codec's segments as a chain.
 */


#include "ngx_http_oip_module.h"


static void ngx_http_oip_cleanup(void *data);
static ngx_int_t ngx_http_oip_loosen(ngx_pool_t *pool, ngx_str_t *path,
    ngx_str_t *loose);
static void *ngx_http_oip_alloc(void *data, size_t size);
static void ngx_http_oip_free(void *data, void *p);


/*
 * The context of an infer request, the one maker of it.  It lives in a
 * pool cleanup as well as in r->ctx: an internal redirect clears r->ctx
 * (the realip module's technique), and the body must not be converted
 * twice.  A signature fetch's subrequest gets one in r->ctx only: its
 * pool is the client's, where the client's context must be the one found
 * again; its transport is set when its location's handler takes it.
 */

ngx_http_oip_ctx_t *
ngx_http_oip_create_ctx(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t       *cln;
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    if (r != r->main) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_ctx_t));
        if (ctx == NULL) {
            return NULL;
        }

        ctx->req.sub = 1;
        ngx_http_set_ctx(r, ctx, ngx_http_oip_module);

        return ctx;
    }

    cln = ngx_pool_cleanup_add(r->pool, sizeof(ngx_http_oip_ctx_t));
    if (cln == NULL) {
        return NULL;
    }

    ctx = cln->data;
    ngx_memzero(ctx, sizeof(ngx_http_oip_ctx_t));

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);
    ctx->req.transport = olcf->transport;

    cln->handler = ngx_http_oip_cleanup;
    ngx_http_set_ctx(r, ctx, ngx_http_oip_module);

    return ctx;
}


/* it marks where the ctx lives, and ends the main request's share */

static void
ngx_http_oip_cleanup(void *data)
{
    ngx_http_oip_stream_end_timer(data);
    ngx_http_oip_admission_end(data);
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
ngx_http_oip_infer_uri(ngx_str_t *uri, ngx_str_t *model, ngx_str_t *version)
{
    static ngx_str_t  infer = ngx_string("/infer");

    return ngx_http_oip_model_uri(uri, &infer, model, version);
}


/*
 * A POST that nginx does not read as an infer URI, but that a runtime
 * reading paths more loosely would: a slash too many ("…/infer/", also
 * "infer%2F" decoded, or "//" with merge_slashes off), or an infer path
 * only while its escapes stay undecoded ("…/models/a%2Fb/infer", which
 * nginx reads as "…/models/a/b/infer"; the raw path only while it is
 * the URI's, not after a rewrite).  Passed on, it would reach such a
 * runtime unchecked: NGX_OK with the client's message in msg, and the
 * model and version it names.  NGX_DECLINED: no infer path at all.
 */

ngx_int_t
ngx_http_oip_infer_alias(ngx_http_request_t *r, ngx_str_t *model,
    ngx_str_t *version, ngx_str_t *msg)
{
    u_char     *p;
    ngx_str_t   raw, loose_uri, loose_raw, m, v, *path;
    ngx_uint_t  uri_is, raw_is;

    raw = r->unparsed_uri;

    p = ngx_strlchr(raw.data, raw.data + raw.len, '?');
    if (p) {
        raw.len = p - raw.data;
    }

    if (ngx_http_oip_loosen(r->pool, &r->uri, &loose_uri) != NGX_OK) {
        return NGX_ERROR;
    }

    uri_is = (ngx_http_oip_infer_uri(&loose_uri, model, version) == NGX_OK);

    /* the raw path says something else only when it is something else */

    ngx_str_null(&m);
    ngx_str_null(&v);

    if (raw.len == r->uri.len
        && ngx_strncmp(raw.data, r->uri.data, raw.len) == 0)
    {
        loose_raw = loose_uri;
        raw_is = uri_is;

    } else {
        if (ngx_http_oip_loosen(r->pool, &raw, &loose_raw) != NGX_OK) {
            return NGX_ERROR;
        }

        raw_is = (ngx_http_oip_infer_uri(&loose_raw, &m, &v) == NGX_OK);
    }

    if (!uri_is && !(raw_is && r->valid_unparsed_uri)) {
        return NGX_DECLINED;
    }

    msg->data = ngx_pnalloc(r->pool, 160 + 2 * raw.len + r->uri.len);
    if (msg->data == NULL) {
        return NGX_ERROR;
    }

    if (uri_is) {
        /* the client's own path, when a rewrite has not hidden it */

        path = raw_is ? &loose_raw : &loose_uri;

        p = ngx_sprintf(msg->data, "not found: \"%V\" is not an infer path, "
                        "it has a slash too many; the infer path is \"%V\"",
                        &raw, path);

    } else {
        *model = m;
        *version = v;
        path = &loose_raw;

        p = ngx_sprintf(msg->data, "not found: \"%V\" is an infer path only "
                        "while its escapes stay undecoded; decoded, it is "
                        "\"%V\", which is not one", &raw, &r->uri);
    }

    msg->len = p - msg->data;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: \"%V\" stands for the infer path \"%V\"",
                   &raw, path);

    return NGX_OK;
}


/*
 * A path with runs of slashes as one, and none at its end: the path
 * itself, not a copy, when it has neither (every request but a
 * look-alike's).
 */

static ngx_int_t
ngx_http_oip_loosen(ngx_pool_t *pool, ngx_str_t *path, ngx_str_t *loose)
{
    u_char  *p, *q, *end;

    end = path->data + path->len;

    if (path->len < 2
        || (end[-1] != '/'
            && ngx_strlcasestrn(path->data, end, (u_char *) "//", 1)
               == NULL))
    {
        *loose = *path;
        return NGX_OK;
    }

    loose->data = ngx_pnalloc(pool, path->len + 1);
    if (loose->data == NULL) {
        return NGX_ERROR;
    }

    q = loose->data;

    for (p = path->data; p < end; p++) {
        if (*p != '/' || q == loose->data || q[-1] != '/') {
            *q++ = *p;
        }
    }

    while (q > loose->data + 1 && q[-1] == '/') {
        q--;
    }

    loose->len = q - loose->data;

    return NGX_OK;
}


/* "…/v2/models/M" or "…/v2/models/M/versions/V", then the suffix */

ngx_int_t
ngx_http_oip_model_uri(ngx_str_t *uri, ngx_str_t *suffix, ngx_str_t *model,
    ngx_str_t *version)
{
    u_char  *p, *end, *seg;

    static const ngx_str_t  models = ngx_string("/v2/models");
    static const ngx_str_t  versions = ngx_string("/versions");

#define ngx_http_oip_ends(p, end, s)                                          \
    ((size_t) ((end) - (p)) >= (s).len                                        \
     && ngx_strncmp((end) - (s).len, (s).data, (s).len) == 0)

    p = uri->data;
    end = p + uri->len;

    if (!ngx_http_oip_ends(p, end, *suffix)) {
        return NGX_DECLINED;
    }

    end -= suffix->len;

    for (seg = end; seg > p && seg[-1] != '/'; seg--) { /* void */ }

    if (seg == end || seg == p) {
        return NGX_DECLINED;
    }

    if (ngx_http_oip_ends(p, seg - 1, models)) {
        model->data = seg;
        model->len = end - seg;
        ngx_str_null(version);
        return NGX_OK;
    }

    /* seg..end is the version */

    version->data = seg;
    version->len = end - seg;

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


void
ngx_http_oip_options(ngx_http_request_t *r, oip_options_t *opt)
{
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    ngx_memzero(opt, sizeof(oip_options_t));

    opt->inputs = olcf->inputs;
    opt->outputs = olcf->outputs;
    opt->max_json_size = (size_t) olcf->max_json_size;
    opt->max_tensor_size = (size_t) olcf->max_tensor_size;
    opt->max_depth = olcf->max_depth;
    opt->raw = olcf->raw;
    opt->raw_outputs = olcf->raw_outputs;
    opt->finite_upstream = (olcf->nonfinite == NGX_HTTP_OIP_NONFINITE_REFUSE);
    opt->coerce = olcf->sig_coerce;

    if (olcf->sig_optional) {
        opt->optional = olcf->sig_optional->elts;
        opt->noptional = olcf->sig_optional->nelts;
    }
}


/* now, to the microsecond, for $oip_convert_time */

uint64_t
ngx_http_oip_usec(void)
{
    struct timeval  tv;

    ngx_gettimeofday(&tv);

    return (uint64_t) tv.tv_sec * 1000000 + tv.tv_usec;
}


/*
 * A zone's header, when nginx makes the zone: the old cycle's on a
 * reload, or the one there already (NGX_OK both), or a new one of size,
 * zeroed (NGX_DONE: the caller sets it up).  data is the old cycle's
 * zone data; each zone's own begins as ngx_http_oip_zone_t.
 */

ngx_int_t
ngx_http_oip_zone_header(ngx_shm_zone_t *shm_zone, void *data, size_t size)
{
    ngx_http_oip_zone_t  *z, *oz;

    z = shm_zone->data;
    oz = data;

    if (oz) {
        z->sh = oz->sh;
        z->shpool = oz->shpool;
        return NGX_OK;
    }

    z->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        z->sh = z->shpool->data;
        return NGX_OK;
    }

    z->sh = ngx_slab_calloc(z->shpool, size);
    if (z->sh == NULL) {
        return NGX_ERROR;
    }

    z->shpool->data = z->sh;

    return NGX_DONE;
}


/* when its request line came, in the same clock: a client's deadline */

uint64_t
ngx_http_oip_start_usec(ngx_http_request_t *r)
{
    return (uint64_t) r->start_sec * 1000000
           + (uint64_t) r->start_msec * 1000;
}


/* a refusal kept for the client, and logged */

ngx_int_t
ngx_http_oip_fail(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_uint_t status, oip_reason_e reason, const char *msg)
{
    size_t  len;

    len = ngx_strlen(msg);
    ctx->reason = reason;

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


void
ngx_http_oip_allocator(ngx_http_request_t *r, oip_alloc_t *alloc)
{
    ngx_http_oip_pool_allocator(r->pool, alloc);
}


/* the codec's memory from an nginx pool (the thread file has its own) */

void
ngx_http_oip_pool_allocator(ngx_pool_t *pool, oip_alloc_t *alloc)
{
    alloc->alloc = ngx_http_oip_alloc;
    alloc->free = ngx_http_oip_free;
    alloc->data = pool;
}


static void *
ngx_http_oip_alloc(void *data, size_t size)
{
    return ngx_palloc(data, size);
}


static void
ngx_http_oip_free(void *data, void *p)
{
    /* only large allocations come back; small ones stay to the end */
    (void) ngx_pfree(data, p);
}


/*
 * The first header of that name (any case), and in h its value and how
 * many times it came, as the codec takes them.
 */

ngx_table_elt_t *
ngx_http_oip_header(ngx_list_t *headers, ngx_str_t *name, oip_header_t *h)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *e, *found;

    found = NULL;
    ngx_memzero(h, sizeof(oip_header_t));

    part = &headers->part;
    e = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            e = part->elts;
            i = 0;
        }

        if (e[i].hash != 0 && e[i].key.len == name->len
            && ngx_strncasecmp(e[i].key.data, name->data, name->len) == 0)
        {
            if (h->count++ == 0) {
                found = &e[i];
                h->data = e[i].value.data;
                h->len = e[i].value.len;
            }
        }
    }

    return found;
}


/* a header added to a list, hashed as nginx's own parser does it */

ngx_table_elt_t *
ngx_http_oip_header_push(ngx_list_t *list, ngx_str_t *key, ngx_str_t *value)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(list);
    if (h == NULL) {
        return NULL;
    }

    h->key = *key;
    h->value = *value;

    h->lowcase_key = ngx_pnalloc(list->pool, key->len);
    if (h->lowcase_key == NULL) {
        return NULL;
    }

    h->hash = ngx_hash_strlow(h->lowcase_key, key->data, key->len);

#if (nginx_version >= 1023000)
    h->next = NULL;
#endif

    return h;
}


/* the one place the module says what its bodies are */

void
ngx_http_oip_content_type(ngx_http_request_t *r, const char *type)
{
    r->headers_out.content_type.data = (u_char *) type;
    r->headers_out.content_type.len = ngx_strlen(type);
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.charset.len = 0;
}


/* {"error":"..."}, the message escaped, in a last buffer */

ngx_buf_t *
ngx_http_oip_error_json(ngx_http_request_t *r, u_char *msg, size_t len)
{
    u_char     *p;
    ngx_buf_t  *b;

    b = ngx_create_temp_buf(r->pool, sizeof("{\"error\":\"\"}") - 1
                                     + oip_json_escape(NULL, msg, len));
    if (b == NULL) {
        return NULL;
    }

    p = ngx_cpymem(b->last, "{\"error\":\"", sizeof("{\"error\":\"") - 1);
    p += oip_json_escape(p, msg, len);
    b->last = ngx_cpymem(p, "\"}", 2);

    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    return b;
}


/*
 * The codec's segments as a chain of memory buffers; empty ones are
 * left out, and *out is NULL if all are.  pos == start, so that an
 * upstream retry, which rewinds a request body to start, sends it whole.
 */

ngx_int_t
ngx_http_oip_chain(ngx_http_request_t *r, oip_seg_t *segs, size_t n,
    ngx_chain_t **out, ngx_buf_t **last)
{
    size_t        i;
    ngx_buf_t    *b;
    ngx_chain_t  *cl, **ll;

    ll = out;
    b = NULL;

    for (i = 0; i < n; i++) {

        if (segs[i].len == 0) {
            continue;
        }

        b = ngx_calloc_buf(r->pool);
        cl = ngx_alloc_chain_link(r->pool);

        if (b == NULL || cl == NULL) {
            return NGX_ERROR;
        }

        b->start = (u_char *) segs[i].data;
        b->pos = b->start;
        b->last = b->start + segs[i].len;
        b->end = b->last;
        b->memory = 1;

        cl->buf = b;
        *ll = cl;
        ll = &cl->next;
    }

    *ll = NULL;
    *last = b;

    return NGX_OK;
}


/*
 * The reasons a request is refused for, by name: oip_reason_e's order
 * from OIP_REASON_SYNTAX, then "limited" (nginx's limit_req and
 * limit_conn), which only nginx decides.
 */

ngx_str_t  ngx_http_oip_reasons[NGX_HTTP_OIP_REASONS] = {
    ngx_string("syntax"), ngx_string("shape"), ngx_string("datatype"),
    ngx_string("limit"), ngx_string("signature"), ngx_string("encoding"),
    ngx_string("other"), ngx_string("limited")
};


/* a refused request's reason, an index of ngx_http_oip_reasons[] */

ngx_uint_t
ngx_http_oip_reason(ngx_http_oip_ctx_t *ctx, ngx_uint_t status)
{
    if (ctx == NULL || ctx->error.len == 0) {

        /*
         * refused by nginx, without an error of the module's: a size; the
         * statuses limit_req and limit_conn answer (429, as recommended,
         * or their default 503); anything else (a body that timed out,
         * 408; one nginx could not parse, 400; a client gone, 499) is not
         * a limit
         */

        switch (status) {
        case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
            return 3;
        case NGX_HTTP_TOO_MANY_REQUESTS:
        case NGX_HTTP_SERVICE_UNAVAILABLE:
            return 7;
        default:
            return 6;
        }
    }

    /*
     * the refusal's reason, decided where it was decided (the codec's
     * oip_reason_e, or the glue's): the labels are in the same order
     */

    if (ctx->reason == OIP_REASON_QUEUE_FULL) {
        return 7;           /* an admission budget's 429 */
    }

    if (ctx->reason >= OIP_REASON_SYNTAX && ctx->reason <= OIP_REASON_OTHER) {
        return ctx->reason - OIP_REASON_SYNTAX;
    }

    return (status == NGX_HTTP_REQUEST_ENTITY_TOO_LARGE) ? 3
           : (status == NGX_HTTP_UNSUPPORTED_MEDIA_TYPE) ? 5 : 6;
}
