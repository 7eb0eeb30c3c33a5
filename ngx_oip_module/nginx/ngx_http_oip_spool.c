
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Request bodies of any size, in bounded memory: one that nginx spilled
 * to its temporary file and that is larger than oip_buffer is not read
 * into memory.  The file is mapped, the codec's one pass runs over the
 * mapping and the pages behind its cursor are released (mapped pages
 * count in the worker's RSS while resident); the tensor bytes it writes
 * go to a temporary file of our own, in oip_buffer pieces, and the body
 * sent is the JSON in memory, then that file (docs/design.md).
 *
 * The sink's callbacks may run in a thread (oip_thread_pool): they only
 * write, release pages and keep an errno, nothing of nginx's.
 */


#include "ngx_http_oip_module.h"


struct ngx_http_oip_spool_s {
    u_char                *map;
    size_t                 map_len;
    u_char                *released;   /* pages before it are let go */
    ngx_temp_file_t       *out;
    ngx_err_t              err;        /* the write that failed */
    oip_sink_t             sink;
};


static ngx_int_t ngx_http_oip_spool_wanted(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_framing_t *framing, off_t *total);
static ngx_int_t ngx_http_oip_spool_file(ngx_http_request_t *r,
    ngx_http_oip_spool_t *sp);
static int ngx_http_oip_spool_write(void *data, const uint8_t *p,
    size_t len, uint64_t off);
static void ngx_http_oip_spool_behind(void *data, const uint8_t *p);
static void ngx_http_oip_spool_unmap(void *data);


/*
 * NGX_OK: the body is mapped (data, len) and the request's conversion
 * goes through files; NGX_DECLINED: today's path, in memory; or the
 * request's refusal.
 */

ngx_int_t
ngx_http_oip_spool_in(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_framing_t *framing, u_char **data, size_t *len)
{
    off_t                     total;
    u_char                   *map;
    ngx_file_t               *file;
    ngx_pool_cleanup_t       *cln;
    ngx_http_oip_spool_t     *sp;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);
    ctx->spool = NULL;

    if (ngx_http_oip_spool_wanted(r, ctx, framing, &total) != NGX_OK) {
        return NGX_DECLINED;
    }

    file = r->request_body->bufs->buf->file;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    sp = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_spool_t));

    if (cln == NULL || sp == NULL) {
        return NGX_DECLINED;
    }

    map = mmap(NULL, (size_t) total, PROT_READ, MAP_PRIVATE, file->fd, 0);

    if (map == MAP_FAILED) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, ngx_errno,
                      "oip: mmap() of \"%V\" failed, its body read into "
                      "memory", &file->name);
        return NGX_DECLINED;
    }

    sp->map = map;
    sp->map_len = (size_t) total;
    sp->released = map;

    cln->handler = ngx_http_oip_spool_unmap;
    cln->data = sp;

    if (ngx_http_oip_spool_file(r, sp) != NGX_OK) {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 OIP_REASON_OTHER,
                                 "the converted request could not be "
                                 "written to a temporary file");
    }

    sp->sink.data = sp;
    sp->sink.write = ngx_http_oip_spool_write;
    sp->sink.behind = ngx_http_oip_spool_behind;
    sp->sink.block = olcf->buffer;

    ctx->spool = sp;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: body of %O bytes mapped, converted through "
                   "\"%V\"", total, &sp->out->file.name);

    *data = map;
    *len = (size_t) total;

    return NGX_OK;
}


/*
 * A body in nginx's file alone, above oip_buffer, of the REST call whose
 * tensors the codec writes: not encoded (inflated in memory), no digest
 * (read from memory), not emulated generate, not for gRPC (one message
 * in memory, bounded by oip_grpc_max_message).
 */

static ngx_int_t
ngx_http_oip_spool_wanted(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_framing_t *framing, off_t *total)
{
    ngx_buf_t                 *b;
    ngx_http_request_body_t   *rb;
    ngx_http_oip_loc_conf_t   *olcf;
    ngx_http_oip_main_conf_t  *omcf;

    rb = r->request_body;
    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);
    omcf = ngx_http_get_module_main_conf(r, ngx_http_oip_module);

    if (rb == NULL || rb->temp_file == NULL || rb->bufs == NULL
        || rb->bufs->next != NULL || !rb->bufs->buf->in_file)
    {
        return NGX_DECLINED;
    }

    b = rb->bufs->buf;
    *total = b->file_last - b->file_pos;

    if (b->file_pos != 0 || *total <= (off_t) olcf->buffer
        || (uint64_t) *total > (uint64_t) olcf->max_json_size
                               + olcf->max_tensor_size)
    {
        /* a body too large for the limits is refused on today's path */
        return NGX_DECLINED;
    }

    if (framing->encoding != OIP_ENC_NONE
        || ctx->req.rpc != OIP_RPC_MODEL_INFER
        || ctx->req.generate == NGX_HTTP_OIP_GEN_EMULATE
        || olcf->transport != &ngx_http_oip_http_transport
        || omcf->digest)
    {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: a large body read into memory: encoded, a "
                       "digest, generate or gRPC");
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/* the converted body's file, as nginx makes a request body's */

static ngx_int_t
ngx_http_oip_spool_file(ngx_http_request_t *r, ngx_http_oip_spool_t *sp)
{
    ngx_temp_file_t           *tf;
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    tf = ngx_pcalloc(r->pool, sizeof(ngx_temp_file_t));
    if (tf == NULL) {
        return NGX_ERROR;
    }

    tf->file.fd = NGX_INVALID_FILE;
    tf->file.log = r->connection->log;
    tf->path = clcf->client_body_temp_path;
    tf->pool = r->pool;
    tf->log_level = r->request_body_file_log_level;
    tf->persistent = r->request_body_in_persistent_file;
    tf->clean = r->request_body_in_clean_file;

    /* not persistent: unlinked as soon as it is open, closed with r */

    if (ngx_create_temp_file(&tf->file, tf->path, tf->pool, tf->persistent,
                             tf->clean, tf->access)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    sp->out = tf;

    return NGX_OK;
}


const oip_sink_t *
ngx_http_oip_spool_sink(ngx_http_oip_ctx_t *ctx)
{
    return ctx->spool ? &ctx->spool->sink : NULL;
}


/* in the worker or a thread: the codec's bytes at their offset */

static int
ngx_http_oip_spool_write(void *data, const uint8_t *p, size_t len,
    uint64_t off)
{
    ngx_http_oip_spool_t *sp = data;

    ssize_t  n;

    while (len) {
        n = pwrite(sp->out->file.fd, p, len, (off_t) off);

        if (n == -1) {
            if (ngx_errno == NGX_EINTR) {
                continue;
            }

            sp->err = ngx_errno;
            return -1;
        }

        if (n == 0) {
            sp->err = NGX_ENOSPC;
            return -1;
        }

        p += n;
        off += n;
        len -= n;
    }

    return 0;
}


/* in the worker or a thread: the mapped pages before p are let go */

static void
ngx_http_oip_spool_behind(void *data, const uint8_t *p)
{
    ngx_http_oip_spool_t *sp = data;

    u_char  *to;

    if ((u_char *) p <= sp->released || (u_char *) p > sp->map + sp->map_len)
    {
        /* behind what is let go, or not in the body (a raw header) */
        return;
    }

    to = (u_char *) ((uintptr_t) p & ~((uintptr_t) ngx_pagesize - 1));

    if (to > sp->released) {
        (void) madvise(sp->released, to - sp->released, MADV_DONTNEED);
        sp->released = to;
    }
}


/*
 * After the pass, in the worker: a write that failed is logged; the
 * mapping's pages are let go whole, the mapping itself kept to the
 * request's end, since what the pass found is read from it later (the
 * outputs the client listed, its id: a few pages fault in again); when
 * nothing was converted, or the request is refused, the file goes at
 * once.
 */

void
ngx_http_oip_spool_done(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    int rc, oip_result_t *res)
{
    ngx_http_oip_spool_t  *sp;

    sp = ctx->spool;

    if (sp == NULL) {
        return;
    }

    if (sp->err) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, sp->err,
                      "oip: writing the converted request to \"%V\" failed",
                      &sp->out->file.name);
    }

    (void) madvise(sp->map, sp->map_len, MADV_DONTNEED);
    sp->released = sp->map + sp->map_len;

    if (rc == 0 && res->rewritten) {
        return;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: converted body's file dropped: %s",
                   rc ? "refused" : "the body goes as it came");

    ngx_pool_run_cleanup_file(r->pool, sp->out->file.fd);
    ctx->spool = NULL;
}


/*
 * The body sent: the JSON, copied out of the mapping into one buffer,
 * then the file from its start (the request-body rules: memory buffers
 * with pos == start, at most one file, from offset 0, for a retry to
 * rewind); the body's own file is closed (the mapping keeps it).
 */

ngx_int_t
ngx_http_oip_spool_body(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res)
{
    size_t                    i;
    u_char                   *p;
    ngx_buf_t                *b, *f;
    ngx_chain_t              *cl, *fl;
    ngx_http_oip_spool_t     *sp;
    ngx_http_request_body_t  *rb;

    sp = ctx->spool;
    rb = r->request_body;

    b = ngx_calloc_buf(r->pool);
    f = ngx_calloc_buf(r->pool);
    cl = ngx_alloc_chain_link(r->pool);
    fl = ngx_alloc_chain_link(r->pool);
    p = ngx_pnalloc(r->pool, res->header_len ? res->header_len : 1);

    if (b == NULL || f == NULL || cl == NULL || fl == NULL || p == NULL) {
        return NGX_ERROR;
    }

    b->start = p;
    b->pos = p;

    for (i = 0; i < res->nsegs; i++) {
        p = ngx_cpymem(p, res->segs[i].data, res->segs[i].len);
    }

    b->last = p;
    b->end = p;
    b->temporary = 1;

    f->in_file = 1;
    f->file = &sp->out->file;
    f->file_pos = 0;
    f->file_last = (off_t) res->spooled;
    f->last_buf = 1;

    cl->buf = b;
    cl->next = fl;
    fl->buf = f;
    fl->next = NULL;

    if (res->spooled == 0) {
        /* all of it JSON: no file buffer, which would be empty */
        b->last_buf = 1;
        cl->next = NULL;
    }

    rb->bufs = cl;
    rb->buf = NULL;

    if (rb->temp_file) {
        ngx_pool_run_cleanup_file(r->pool, rb->temp_file->file.fd);
        rb->temp_file = NULL;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: body sent as %uz bytes of JSON, then %uL from "
                   "its file", res->header_len, res->spooled);

    return NGX_OK;
}


static void
ngx_http_oip_spool_unmap(void *data)
{
    ngx_http_oip_spool_t *sp = data;

    if (sp->map) {
        (void) munmap(sp->map, sp->map_len);
        sp->map = NULL;
    }
}
