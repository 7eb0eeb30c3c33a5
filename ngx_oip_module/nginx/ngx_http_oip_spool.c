
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


/* an answer sent from files: as many buffers at most, each this large */
#define NGX_HTTP_OIP_SPOOL_BUFS   4
#define NGX_HTTP_OIP_SPOOL_SIZE   65536


struct ngx_http_oip_spool_s {
    u_char                *map;
    size_t                 map_len;
    u_char                *released;   /* pages before it are let go */
    ngx_temp_file_t       *in;         /* an answer held, as it came; a
                                          body inflated */
    ngx_temp_file_t       *out;        /* the converted tensors */
    ngx_temp_file_t       *head;       /* a JSON too large for memory;
                                          typed contents' tensors */
    ngx_temp_file_t       *to;         /* the sink writes to: in, out */
    ngx_err_t              err;        /* the write that failed */
    ngx_temp_file_t       *failed_in;  /* ... and its file */
    oip_sink_t             sink;
    ngx_output_chain_ctx_t  *output;   /* an answer going out */
    unsigned               failed:1;   /* no file for the answer */
};


static ngx_int_t ngx_http_oip_spool_wanted(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_framing_t *framing, off_t *total);
static ngx_int_t ngx_http_oip_spool_file(ngx_http_request_t *r,
    ngx_path_t *path, ngx_uint_t persistent, ngx_uint_t clean,
    ngx_temp_file_t **file);
static void ngx_http_oip_spool_sink_init(ngx_http_request_t *r,
    ngx_http_oip_spool_t *sp, const char *what);
static int ngx_http_oip_spool_write(void *data, const uint8_t *p,
    size_t len, uint64_t off);
static int ngx_http_oip_spool_head(void *data, const uint8_t *p,
    size_t len, uint64_t off);
static int ngx_http_oip_spool_read(void *data, uint8_t *p, size_t len,
    uint64_t off);
static int ngx_http_oip_spool_into(ngx_http_oip_spool_t *sp,
    ngx_temp_file_t *tf, const uint8_t *p, size_t len, uint64_t off);
static ngx_err_t ngx_http_oip_spool_pwrite(ngx_fd_t fd, const u_char *p,
    size_t len, off_t off);
static void ngx_http_oip_spool_behind(void *data, const uint8_t *p);
static void ngx_http_oip_spool_drop(void *data, const uint8_t *p,
    size_t len);
static const uint8_t *ngx_http_oip_spool_remap(void *data, uint64_t len);
static void ngx_http_oip_spool_unmap(void *data);
static ngx_path_t *ngx_http_oip_spool_path(ngx_http_request_t *r);
static ngx_int_t ngx_http_oip_spool_buf(ngx_http_request_t *r,
    ngx_chain_t ***last, u_char *p, ngx_file_t *file, off_t pos,
    off_t end);
static ngx_int_t ngx_http_oip_spool_output(ngx_http_request_t *r,
    ngx_http_oip_spool_t *sp, ngx_chain_t *in);



/*
 * NGX_OK: the body is mapped (data, len) and the request's conversion
 * goes through files; NGX_DECLINED: today's path, in memory; or the
 * request's refusal.
 */

ngx_int_t
ngx_http_oip_spool_in(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_framing_t *framing, u_char **data, size_t *len)
{
    off_t                      total;
    u_char                    *map;
    ngx_file_t                *file;
    ngx_pool_cleanup_t        *cln;
    ngx_http_oip_spool_t      *sp;
    ngx_http_core_loc_conf_t  *clcf;

    ctx->spool = NULL;

    if (ngx_http_oip_spool_wanted(r, ctx, framing, &total) != NGX_OK) {
        return NGX_DECLINED;
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

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

    /* as nginx makes a request body's file; one more to inflate into */

    if (ngx_http_oip_spool_file(r, clcf->client_body_temp_path,
                                r->request_body_in_persistent_file,
                                r->request_body_in_clean_file, &sp->out)
        != NGX_OK
        || ngx_http_oip_spool_file(r, clcf->client_body_temp_path,
                                   r->request_body_in_persistent_file,
                                   r->request_body_in_clean_file, &sp->head)
           != NGX_OK
        || (framing->encoding != OIP_ENC_NONE
            && ngx_http_oip_spool_file(r, clcf->client_body_temp_path,
                                       r->request_body_in_persistent_file,
                                       r->request_body_in_clean_file,
                                       &sp->in)
               != NGX_OK))
    {
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 OIP_REASON_OTHER,
                                 "the converted request could not be "
                                 "written to a temporary file");
    }

    ngx_http_oip_spool_sink_init(r, sp, "request");

    if (sp->in) {
        /* inflated first, the codec reading it back from its mapping */
        sp->to = sp->in;
        sp->sink.remap = ngx_http_oip_spool_remap;
    }

    ctx->spool = sp;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: body of %O bytes mapped, converted through "
                   "\"%V\"", total, &sp->out->file.name);

    *data = map;
    *len = (size_t) total;

    return NGX_OK;
}


/*
 * A body in nginx's file alone, above oip_buffer, of the call whose
 * tensors the codec writes: not emulated generate (a prompt).  A gzip
 * body counts the size its trailer says when that is larger: JSON
 * compresses tenfold and more.
 */

static ngx_int_t
ngx_http_oip_spool_wanted(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_framing_t *framing, off_t *total)
{
    off_t                      size, plain;
    u_char                     isize[4];
    ngx_buf_t                 *b;
    ngx_http_request_body_t   *rb;
    ngx_http_oip_loc_conf_t   *olcf;

    rb = r->request_body;

    if (rb == NULL || rb->temp_file == NULL || rb->bufs == NULL
        || rb->bufs->next != NULL || !rb->bufs->buf->in_file)
    {
        return NGX_DECLINED;
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    b = rb->bufs->buf;
    *total = b->file_last - b->file_pos;
    size = *total;

    /* ISIZE: the last 4 bytes, little-endian, the size modulo 2^32 */

    if (framing->encoding == OIP_ENC_GZIP && b->file_pos == 0 && size >= 18
        && ngx_read_file(b->file, isize, 4, size - 4) == 4)
    {
        plain = (off_t) isize[0] | ((off_t) isize[1] << 8)
                | ((off_t) isize[2] << 16) | ((off_t) isize[3] << 24);
        size = ngx_max(size, plain);
    }

    if (b->file_pos != 0 || size <= (off_t) olcf->buffer
        || (uint64_t) *total > (uint64_t) olcf->max_json_size
                               + olcf->max_tensor_size)
    {
        /* a body too large for the limits is refused on today's path */
        return NGX_DECLINED;
    }

    if (ctx->req.rpc != OIP_RPC_MODEL_INFER
        || ctx->req.generate == NGX_HTTP_OIP_GEN_EMULATE
        || (olcf->transport != &ngx_http_oip_http_transport
            && olcf->transport != &ngx_http_oip_grpc_transport))
    {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: a large body read into memory: generate");
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/* a temporary file of the request's */

static ngx_int_t
ngx_http_oip_spool_file(ngx_http_request_t *r, ngx_path_t *path,
    ngx_uint_t persistent, ngx_uint_t clean, ngx_temp_file_t **file)
{
    ngx_temp_file_t  *tf;

    tf = ngx_pcalloc(r->pool, sizeof(ngx_temp_file_t));
    if (tf == NULL) {
        return NGX_ERROR;
    }

    tf->file.fd = NGX_INVALID_FILE;
    tf->file.log = r->connection->log;
    tf->path = path;
    tf->pool = r->pool;
    tf->persistent = persistent;
    tf->clean = clean;

    /* not persistent: unlinked as soon as it is open, closed with r */

    if (ngx_create_temp_file(&tf->file, tf->path, tf->pool, tf->persistent,
                             tf->clean, tf->access)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    *file = tf;

    return NGX_OK;
}


static void
ngx_http_oip_spool_sink_init(ngx_http_request_t *r, ngx_http_oip_spool_t *sp,
    const char *what)
{
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    sp->sink.data = sp;
    sp->sink.write = ngx_http_oip_spool_write;
    sp->sink.behind = ngx_http_oip_spool_behind;
    sp->sink.block = olcf->buffer;
    sp->sink.what = what;
    sp->sink.drop = ngx_http_oip_spool_drop;
    sp->sink.head = ngx_http_oip_spool_head;
    sp->sink.read = ngx_http_oip_spool_read;
    sp->to = sp->out;
}


const oip_sink_t *
ngx_http_oip_spool_sink(ngx_http_oip_ctx_t *ctx)
{
    return ctx->spool ? &ctx->spool->sink : NULL;
}


/* the request's converted file, or its JSON's, for what goes in later */

ngx_file_t *
ngx_http_oip_spool_converted(ngx_http_oip_ctx_t *ctx, ngx_uint_t head)
{
    return head ? &ctx->spool->head->file : &ctx->spool->out->file;
}


/* in the worker or a thread: the codec's bytes at their offset */

static int
ngx_http_oip_spool_write(void *data, const uint8_t *p, size_t len,
    uint64_t off)
{
    ngx_http_oip_spool_t *sp = data;

    return ngx_http_oip_spool_into(sp, sp->to, p, len, off);
}


/* a JSON that may be larger than oip_buffer, to its own file */

static int
ngx_http_oip_spool_head(void *data, const uint8_t *p, size_t len,
    uint64_t off)
{
    ngx_http_oip_spool_t *sp = data;

    return ngx_http_oip_spool_into(sp, sp->head, p, len, off);
}


/*
 * In the worker or a thread: gRPC's typed contents read back from the
 * head file, where the pass wrote the tensors.
 */

static int
ngx_http_oip_spool_read(void *data, uint8_t *p, size_t len, uint64_t off)
{
    ngx_http_oip_spool_t *sp = data;

    ssize_t  n;

    while (len) {
        n = pread(sp->head->file.fd, p, len, (off_t) off);

        if (n == -1 && ngx_errno == NGX_EINTR) {
            continue;
        }

        if (n <= 0) {
            /* past the end: what the pass wrote is shorter than said */
            sp->err = (n == 0) ? EIO : ngx_errno;
            sp->failed_in = sp->head;
            return -1;
        }

        p += n;
        off += n;
        len -= n;
    }

    return 0;
}


static int
ngx_http_oip_spool_into(ngx_http_oip_spool_t *sp, ngx_temp_file_t *tf,
    const uint8_t *p, size_t len, uint64_t off)
{
    sp->err = ngx_http_oip_spool_pwrite(tf->file.fd, p, len, (off_t) off);
    sp->failed_in = tf;

    return sp->err ? -1 : 0;
}


/* 0, or why not */

static ngx_err_t
ngx_http_oip_spool_pwrite(ngx_fd_t fd, const u_char *p, size_t len, off_t off)
{
    ssize_t  n;

    while (len) {
        n = pwrite(fd, p, len, off);

        if (n == -1) {
            if (ngx_errno == NGX_EINTR) {
                continue;
            }

            return ngx_errno;
        }

        if (n == 0) {
            return NGX_ENOSPC;
        }

        p += n;
        off += n;
        len -= n;
    }

    return 0;
}


/*
 * In the worker or a thread: the body is inflated into its file (len
 * bytes): the compressed body's mapping goes, the inflated one's comes,
 * and the writes go on to the converted file.
 */

static const uint8_t *
ngx_http_oip_spool_remap(void *data, uint64_t len)
{
    ngx_http_oip_spool_t *sp = data;

    u_char  *map;

    (void) munmap(sp->map, sp->map_len);

    sp->map = NULL;
    sp->map_len = 0;
    sp->to = sp->out;

    if (len == 0) {
        /* nothing to map: the codec refuses an empty body */
        return (const uint8_t *) "";
    }

    map = mmap(NULL, (size_t) len, PROT_READ, MAP_PRIVATE, sp->in->file.fd,
               0);

    if (map == MAP_FAILED) {
        sp->err = ngx_errno;
        sp->failed_in = sp->in;
        return NULL;
    }

    sp->map = map;
    sp->map_len = (size_t) len;
    sp->released = map;

    return map;
}


/*
 * In the worker or a thread: bytes the digest read again, out of the
 * pass's order, let go (the whole pages within them).
 */

static void
ngx_http_oip_spool_drop(void *data, const uint8_t *p, size_t len)
{
    ngx_http_oip_spool_t *sp = data;

    u_char  *from, *to;

    if ((u_char *) p < sp->map || (u_char *) p + len > sp->map + sp->map_len)
    {
        return;
    }

    from = ngx_align_ptr(p, ngx_pagesize);
    to = (u_char *) ((uintptr_t) (p + len) & ~((uintptr_t) ngx_pagesize - 1));

    if (to > from) {
        (void) madvise(from, to - from, MADV_DONTNEED);
    }
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
                      "oip: writing the converted request to \"%V\" (or "
                      "reading it back) failed", &sp->failed_in->file.name);
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
    ngx_pool_run_cleanup_file(r->pool, sp->head->file.fd);
    ctx->spool = NULL;
}


/*
 * The body sent: the JSON, copied out of the mapping into one buffer (or
 * its own file, when it could be larger than oip_buffer), then the file
 * from its start (the request-body rules: memory buffers with pos ==
 * start, file buffers each from offset 0, for a retry to rewind: nginx's
 * reinit sets every file buffer's file_pos to 0); the body's own file is
 * closed (the mapping keeps it).
 */

ngx_int_t
ngx_http_oip_spool_body(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res)
{
    size_t                    i;
    u_char                   *p, *at;
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
    p = ngx_pnalloc(r->pool, (res->header_len && !res->head)
                             ? res->header_len : 1);

    if (b == NULL || f == NULL || cl == NULL || fl == NULL || p == NULL) {
        return NGX_ERROR;
    }

    b->start = p;
    b->pos = p;

    for (i = 0; !res->head && i < res->nsegs; i++) {
        at = ctx->req.deadline_at;

        /* the deadline is written where it went when the request leaves */

        if (at >= (u_char *) res->segs[i].data
            && at < (u_char *) res->segs[i].data + res->segs[i].len)
        {
            ctx->req.deadline_at = p + (at - (u_char *) res->segs[i].data);
        }

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

    if (res->head) {
        ngx_memzero(b, sizeof(ngx_buf_t));
        b->in_file = 1;
        b->file = &sp->head->file;
        b->file_last = (off_t) res->header_len;
    }

    if (res->spooled == 0) {
        /* all of it JSON: no file buffer, which would be empty */
        b->last_buf = 1;
        cl->next = NULL;
    }

    /* all of it in the file (JSON made whole there): no empty buffer */
    rb->bufs = (res->header_len == 0) ? fl : cl;
    rb->buf = NULL;

    if (rb->temp_file) {
        ngx_pool_run_cleanup_file(r->pool, rb->temp_file->file.fd);
        rb->temp_file = NULL;
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: body sent as %uz bytes of JSON%s, then %uL from "
                   "its file", res->header_len,
                   res->head ? " from a file of its own" : "",
                   res->spooled);

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


/*
 * Answers.  One that must be held whole to be converted (JSON made
 * binary, an output kept binary, BYTES made JSON, or one passed as it
 * came) goes to a file of its own once past oip_buffer, as it arrives;
 * when all of it is in, the file is mapped for the codec's pass, as a
 * request body's, and the answer is sent from files, through the
 * response path's next filters (saved by the flow), not filters of its
 * own.
 */


/*
 * Whether a 200 being held is not to be allocated whole at once: it may
 * flow (flow.c), or it is a REST answer to an infer call that goes to a
 * file past oip_buffer (ctx->ans.may_spool, its length known or not).
 */

ngx_uint_t
ngx_http_oip_spool_may(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    off_t len)
{
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (len >= 0 && len <= (off_t) olcf->buffer) {
        /* it fits: neither flows nor goes to a file (most answers) */
        return 0;
    }

    ctx->ans.may_spool = (r == r->main
                          && r->headers_out.status == NGX_HTTP_OK
                          && ctx->req.transport == &ngx_http_oip_http_transport
                          && ctx->req.rpc == OIP_RPC_MODEL_INFER
                          && ctx->req.generate != NGX_HTTP_OIP_GEN_EMULATE);

    return ngx_http_oip_flow_may(r, ctx, len)
           || (ctx->ans.may_spool && len > (off_t) olcf->buffer);
}


/*
 * A piece of an answer being held.  NGX_DECLINED: in memory, as ever;
 * NGX_OK: in its file, which it goes to once past oip_buffer (what memory
 * held is written first, and let go).  A file that cannot be made or
 * written is remembered, the rest of the answer dropped: it is a 500 once
 * all has come (ngx_http_oip_spool_answer()).
 */

ngx_int_t
ngx_http_oip_spool_hold(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    u_char *data, size_t len)
{
    ngx_http_oip_spool_t     *sp;
    ngx_http_oip_loc_conf_t  *olcf;

    sp = ctx->ans.spool;

    if (sp == NULL) {
        if (!ctx->ans.may_spool || ctx->ans.may_flow) {
            return NGX_DECLINED;
        }

        olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

        if (ctx->ans.len + len <= olcf->buffer) {
            return NGX_DECLINED;
        }

        sp = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_spool_t));
        if (sp == NULL) {
            return NGX_ERROR;
        }

        ctx->ans.spool = sp;

        if (ngx_http_oip_spool_file(r, ngx_http_oip_spool_path(r), 0, 0,
                                    &sp->in)
            != NGX_OK)
        {
            sp->failed = 1;

        } else {
            ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "oip: answer past %uz bytes held in \"%V\"",
                           olcf->buffer, &sp->in->file.name);

            sp->err = ngx_http_oip_spool_pwrite(sp->in->file.fd,
                                                ctx->ans.buf, ctx->ans.len,
                                                0);
        }

        if (ctx->ans.buf) {
            (void) ngx_pfree(r->pool, ctx->ans.buf);
            ctx->ans.buf = NULL;
            ctx->ans.cap = 0;
        }
    }

    if (!sp->failed && sp->err == 0) {
        sp->err = ngx_http_oip_spool_pwrite(sp->in->file.fd, data, len,
                                            (off_t) ctx->ans.len);
    }

    ctx->ans.len += len;

    return NGX_OK;
}


/* where an answer's files go: its upstream's temporary files' path */

static ngx_path_t *
ngx_http_oip_spool_path(ngx_http_request_t *r)
{
    ngx_http_core_loc_conf_t  *clcf;

    if (r->upstream && r->upstream->conf->temp_path) {
        return r->upstream->conf->temp_path;
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    return clcf->client_body_temp_path;
}


/*
 * The answer all in its file: mapped for the codec's pass (data, len),
 * its tensors written to a second file (sink).  NGX_DECLINED: held in
 * memory; NGX_ABORT: it could not be held or mapped (a 500).
 */

ngx_int_t
ngx_http_oip_spool_answer(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    const u_char **data, size_t *len, const oip_sink_t **sink)
{
    u_char                *map;
    ngx_pool_cleanup_t    *cln;
    ngx_http_oip_spool_t  *sp;

    sp = ctx->ans.spool;

    if (sp == NULL) {
        return NGX_DECLINED;
    }

    if (sp->failed) {
        return NGX_ABORT;
    }

    if (sp->err) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, sp->err,
                      "oip: writing the answer to \"%V\" failed",
                      &sp->in->file.name);
        return NGX_ABORT;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    map = mmap(NULL, ctx->ans.len, PROT_READ, MAP_PRIVATE, sp->in->file.fd,
               0);

    if (map == MAP_FAILED) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, ngx_errno,
                      "oip: mmap() of the answer held in \"%V\" failed",
                      &sp->in->file.name);
        return NGX_ABORT;
    }

    sp->map = map;
    sp->map_len = ctx->ans.len;
    sp->released = map;

    cln->handler = ngx_http_oip_spool_unmap;
    cln->data = sp;

    if (ngx_http_oip_spool_file(r, ngx_http_oip_spool_path(r), 0, 0,
                                &sp->out)
        != NGX_OK
        || ngx_http_oip_spool_file(r, ngx_http_oip_spool_path(r), 0, 0,
                                   &sp->head)
           != NGX_OK)
    {
        return NGX_ABORT;
    }

    ngx_http_oip_spool_sink_init(r, sp, "answer");

    *data = map;
    *len = sp->map_len;
    *sink = &sp->sink;

    return NGX_OK;
}


/*
 * The converted answer (its headers set), sent from files: its JSON,
 * whose long runs as they came are read from the answer's file, then the
 * converted tensors' file; or the answer's file whole, as it came.
 * Filters below that need memory (gzip, sub, SSI; HTTP/2, TLS without
 * sendfile) get it through nginx's output chain, a few buffers at a time,
 * as the copy filter gives it to them.
 */

ngx_int_t
ngx_http_oip_spool_send(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_result_t *res)
{
    size_t                     i;
    u_char                    *p;
    ngx_int_t                  rc;
    ngx_chain_t               *out, *cl, **last;
    ngx_output_chain_ctx_t    *oc;
    ngx_http_oip_spool_t      *sp;
    ngx_http_core_loc_conf_t  *clcf;

    sp = ctx->ans.spool;
    ctx->ans.phase = NGX_HTTP_OIP_ANS_SENT;

    (void) madvise(sp->map, sp->map_len, MADV_DONTNEED);
    sp->released = sp->map + sp->map_len;

    out = NULL;
    last = &out;

    if (!res->rewritten) {
        if (ngx_http_oip_spool_buf(r, &last, NULL, &sp->in->file, 0,
                                   (off_t) sp->map_len)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (res->rewritten && res->head
        && ngx_http_oip_spool_buf(r, &last, NULL, &sp->head->file, 0,
                                  (off_t) res->header_len)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    for (i = 0; res->rewritten && !res->head && i < res->nsegs; i++) {
        p = (u_char *) res->segs[i].data;

        if (p >= sp->map && p < sp->map + sp->map_len
            && res->segs[i].len >= NGX_HTTP_OIP_SPOOL_SIZE)
        {
            rc = ngx_http_oip_spool_buf(r, &last, NULL, &sp->in->file,
                                        p - sp->map,
                                        p - sp->map + res->segs[i].len);

        } else {
            /* a short run faults a page or two in again */
            rc = ngx_http_oip_spool_buf(r, &last, p, NULL, 0,
                                        res->segs[i].len);
        }

        if (rc != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (res->rewritten && res->spooled
        && ngx_http_oip_spool_buf(r, &last, NULL, &sp->out->file, 0,
                                  (off_t) res->spooled)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    oc = ngx_pcalloc(r->pool, sizeof(ngx_output_chain_ctx_t));
    if (oc == NULL || out == NULL) {
        return NGX_ERROR;
    }

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: answer of %O bytes sent from files: JSON %uz%s, "
                   "tensors %uL", r->headers_out.content_length_n,
                   res->header_len,
                   res->head ? " from a file of its own" : "",
                   res->spooled);

    for (cl = out; cl->next; cl = cl->next) { /* void */ }

    cl->buf->last_buf = 1;

    /* ours was for the input, all in: those below say theirs now */

    r->filter_need_in_memory = 0;

    rc = ngx_http_oip_answer_next_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    oc->sendfile = r->connection->sendfile;
    oc->need_in_memory = r->main_filter_need_in_memory
                         || r->filter_need_in_memory;
    oc->need_in_temp = r->filter_need_temporary;
    oc->alignment = clcf->directio_alignment;
    oc->pool = r->pool;
    oc->bufs.num = NGX_HTTP_OIP_SPOOL_BUFS;
    oc->bufs.size = NGX_HTTP_OIP_SPOOL_SIZE;
    oc->tag = (ngx_buf_tag_t) &ngx_http_oip_spool_send;
    oc->output_filter = (ngx_output_chain_filter_pt)
                            ngx_http_oip_answer_next_body;
    oc->filter_ctx = r;

    sp->output = oc;

    return ngx_http_oip_spool_output(r, sp, out);
}


/* a buffer at *last: memory (p), or a file's range */

static ngx_int_t
ngx_http_oip_spool_buf(ngx_http_request_t *r, ngx_chain_t ***last, u_char *p,
    ngx_file_t *file, off_t pos, off_t end)
{
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (end == pos) {
        /* nginx's output chain warns of empty buffers */
        return NGX_OK;
    }

    b = ngx_calloc_buf(r->pool);
    cl = ngx_alloc_chain_link(r->pool);

    if (b == NULL || cl == NULL) {
        return NGX_ERROR;
    }

    if (file) {
        b->in_file = 1;
        b->file = file;
        b->file_pos = pos;
        b->file_last = end;

    } else {
        b->memory = 1;
        b->start = p;
        b->pos = p;
        b->last = p + end;
        b->end = b->last;
    }

    cl->buf = b;
    cl->next = NULL;

    **last = cl;
    *last = &cl->next;

    return NGX_OK;
}


/*
 * Called with nothing (in == NULL) while the answer holds the request:
 * one sent from files reads on as its buffers come back; any other
 * flows, or is converted in a thread (flow.c says).
 */

ngx_int_t
ngx_http_oip_spool_on(ngx_http_request_t *r)
{
    ngx_http_oip_ctx_t  *ctx;

    ctx = (r == r->main) ? ngx_http_oip_get_ctx(r) : NULL;

    if (ctx == NULL || ctx->ans.spool == NULL
        || ctx->ans.spool->output == NULL)
    {
        return ngx_http_oip_flow_body(r, NULL, NULL);
    }

    return ngx_http_oip_spool_output(r, ctx->ans.spool, NULL);
}


/* the request may not end while the output chain holds input */

static ngx_int_t
ngx_http_oip_spool_output(ngx_http_request_t *r, ngx_http_oip_spool_t *sp,
    ngx_chain_t *in)
{
    ngx_int_t  rc;

    rc = ngx_output_chain(sp->output, in);

    if (sp->output->in == NULL || rc == NGX_ERROR) {
        r->buffered &= ~NGX_HTTP_OIP_BUFFERED;

    } else {
        r->buffered |= NGX_HTTP_OIP_BUFFERED;
    }

    return rc;
}
