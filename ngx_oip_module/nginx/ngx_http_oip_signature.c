
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The model-aware edge: each infer request's model signature, before its
 * body is read.  Signatures live in a shared-memory zone for all workers
 * (ngx_http_oip_sig_cache.c) and are fetched here, with a subrequest to
 * the oip_signatures location (auth_request's way), its answer read in
 * memory and by the codec.
 *
 * In a worker, one fetch per key is in flight: requests for a model
 * being fetched wait for that fetch (parked, woken by a posted event)
 * instead of fetching too.  A signature older than valid= is used while
 * one background subrequest refreshes it.  "Model not found" is kept
 * for invalid=.
 */


#include "ngx_http_oip_module.h"


/* fetches in flight in one worker: beyond, the failure policy */
#define NGX_HTTP_OIP_SIG_FETCHES   64

/* a model's metadata: what a signature's JSON may take, at most */
#define NGX_HTTP_OIP_SIG_MAX       (1024 * 1024)

/*
 * How long a request waits for another's fetch at most.  A timer that
 * cannot be cancelled: a worker told to quit gracefully waits for the
 * requests parked here instead of dropping their connections.
 */
#define NGX_HTTP_OIP_SIG_WAIT      60000


typedef enum {
    NGX_HTTP_OIP_SIG_START = 0,
    NGX_HTTP_OIP_SIG_FETCHING,       /* its own subrequest in flight */
    NGX_HTTP_OIP_SIG_WAITING,        /* parked on another's fetch */
    NGX_HTTP_OIP_SIG_DONE
} ngx_http_oip_sig_state_e;


typedef enum {
    NGX_HTTP_OIP_SIG_FOUND = 0,
    NGX_HTTP_OIP_SIG_NOT_FOUND,
    NGX_HTTP_OIP_SIG_FAILED,
    NGX_HTTP_OIP_SIG_RETRY           /* the fetch's owner went away */
} ngx_http_oip_sig_outcome_e;



/* a fetch in flight in this worker, and the requests waiting for it */

typedef struct {
    ngx_queue_t                queue;
    uint32_t                   hash;
    ngx_str_t                  key;       /* allocated with it */
    ngx_http_oip_sig_t        *owner;
    ngx_queue_t                waiters;
    ngx_http_oip_main_conf_t  *table;     /* whose fetches it is in */
} ngx_http_oip_fetch_t;


struct ngx_http_oip_sig_s {
    ngx_http_request_t        *r;
    ngx_http_oip_ctx_t        *ctx;
    ngx_str_t                  key;       /* URI, model, version */
    uint32_t                   hash;

    ngx_http_oip_sig_state_e   state;
    ngx_http_oip_sig_outcome_e outcome;
    ngx_uint_t                 status;    /* of a failure: 502 or 503 */
    ngx_str_t                  why;       /* of a failure */
    oip_signature_t           *signature;

    ngx_http_oip_fetch_t      *fetch;     /* owned, or waited for */
    ngx_queue_t                queue;     /* in fetch->waiters */
    ngx_event_t                wake;

    unsigned                   done:1;    /* the outcome is known */
    unsigned                   hit:1;     /* known from the zone */
    unsigned                   background:1;
    unsigned                   refetch:1; /* after a misfit */
    unsigned                   cleanup:1; /* the pool cleanup is set */
};


static ngx_uint_t ngx_http_oip_sig_name(ngx_str_t *name);
static ngx_int_t ngx_http_oip_sig_lookup(ngx_http_request_t *r,
    ngx_http_oip_sig_t *s, ngx_uint_t *refresh);
static ngx_http_oip_sig_t *ngx_http_oip_sig_create(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_sig_join(ngx_http_request_t *r,
    ngx_http_oip_sig_t *s);
static ngx_int_t ngx_http_oip_sig_request(ngx_http_request_t *r,
    ngx_http_oip_sig_t *s, ngx_uint_t flags);
static ngx_int_t ngx_http_oip_sig_fetched(ngx_http_request_t *sr, void *data,
    ngx_int_t rc);
static void ngx_http_oip_sig_outcome(ngx_http_request_t *sr,
    ngx_http_oip_sig_t *s, ngx_int_t rc);
static ngx_uint_t ngx_http_oip_sig_unknown(ngx_http_oip_sig_t *s,
    ngx_http_request_t *sr, u_char *body, size_t len);
static void ngx_http_oip_sig_finish(ngx_http_oip_sig_t *s);
static void ngx_http_oip_sig_give(ngx_http_oip_sig_t *from,
    ngx_http_oip_sig_t *to);
static void ngx_http_oip_sig_wake(ngx_event_t *ev);
static void ngx_http_oip_sig_cleanup(void *data);
static ngx_int_t ngx_http_oip_sig_result(ngx_http_request_t *r,
    ngx_http_oip_sig_t *s);
static void ngx_http_oip_sig_failed(ngx_http_oip_sig_t *s,
    ngx_uint_t status, const char *fmt, ...);


/*
 * The request's signature.  Returns NGX_OK with ctx->req.signature set, or
 * NULL when there is none to check against (failing open, or a model
 * declaring no inputs); NGX_AGAIN while it is fetched or waited for; or
 * the status to refuse the request with, ctx->error set.
 */

ngx_int_t
ngx_http_oip_signature(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    ngx_int_t            rc;
    ngx_uint_t           refresh;
    ngx_http_oip_sig_t  *s, *bg;

    s = ctx->req.sig;

    if (s == NULL
        && (!ngx_http_oip_sig_name(&ctx->model)
            || (ctx->version.len && !ngx_http_oip_sig_name(&ctx->version))))
    {
        /* it would be a path of its own in the metadata URI */
        return ngx_http_oip_fail(r, ctx, NGX_HTTP_BAD_REQUEST,
                                 OIP_REASON_OTHER,
                                 "the model's name or version in the URI "
                                 "is not a name");
    }

    if (s == NULL) {
        s = ngx_http_oip_sig_create(r, ctx);
        if (s == NULL) {
            return ngx_http_oip_fail(r, ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                     OIP_REASON_OTHER,
                                     "out of memory");
        }
    }

    for ( ;; ) {

        switch (s->state) {

        case NGX_HTTP_OIP_SIG_START:
            rc = ngx_http_oip_sig_lookup(r, s, &refresh);

            if (rc == NGX_OK || rc == NGX_HTTP_NOT_FOUND) {
                if (refresh) {
                    /* stale: used while one subrequest refreshes it */
                    bg = ngx_http_oip_sig_create(r, ctx);

                    if (bg) {
                        bg->background = 1;

                        ngx_log_debug1(NGX_LOG_DEBUG_HTTP,
                                       r->connection->log, 0,
                                       "oip: signature \"%V\" stale, "
                                       "refreshing it", &s->key);

                        (void) ngx_http_oip_sig_request(r, bg,
                                               NGX_HTTP_SUBREQUEST_BACKGROUND);
                    }
                }

                s->state = NGX_HTTP_OIP_SIG_DONE;
                s->done = 1;
                s->hit = 1;
                s->outcome = (rc == NGX_OK) ? NGX_HTTP_OIP_SIG_FOUND
                                            : NGX_HTTP_OIP_SIG_NOT_FOUND;

                return ngx_http_oip_sig_result(r, s);
            }

            if (rc == NGX_ERROR) {
                return ngx_http_oip_fail(r, ctx,
                                         NGX_HTTP_INTERNAL_SERVER_ERROR,
                                         OIP_REASON_OTHER, "out of memory");
            }

            /* a miss */

            rc = ngx_http_oip_sig_join(r, s);

            if (rc == NGX_AGAIN) {
                return NGX_AGAIN;
            }

            /* too many fetches, or none could start */

            s->state = NGX_HTTP_OIP_SIG_DONE;

            return ngx_http_oip_sig_result(r, s);

        case NGX_HTTP_OIP_SIG_FETCHING:
        case NGX_HTTP_OIP_SIG_WAITING:

            if (!s->done) {
                return NGX_AGAIN;
            }

            if (s->outcome == NGX_HTTP_OIP_SIG_RETRY) {
                /* the fetch's owner went away: again, maybe as owner */
                ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                               "oip: signature \"%V\": its fetch was "
                               "abandoned, trying again", &s->key);

                s->state = NGX_HTTP_OIP_SIG_START;
                s->done = 0;
                continue;
            }

            s->state = NGX_HTTP_OIP_SIG_DONE;

            return ngx_http_oip_sig_result(r, s);

        default: /* NGX_HTTP_OIP_SIG_DONE */
            return ngx_http_oip_sig_result(r, s);
        }
    }
}


/*
 * After a misfit: the model may just have been updated.  One refetch a
 * request, and one a second for a key, so that a client sending wrong
 * requests does not hammer the metadata.  NGX_AGAIN when it started.
 */

ngx_int_t
ngx_http_oip_signature_refetch(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx)
{
    ngx_http_oip_sig_t       *s;
    ngx_http_oip_loc_conf_t  *olcf;

    s = ctx->req.sig;

    if (s == NULL || s->refetch || ctx->req.signature == NULL) {
        return NGX_DECLINED;
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (!ngx_http_oip_sig_cache_refetch(olcf->sig_zone, &s->key, s->hash)) {
        return NGX_DECLINED;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: signature \"%V\" refetched after a misfit",
                   &s->key);

    s->refetch = 1;
    s->state = NGX_HTTP_OIP_SIG_START;
    s->done = 0;
    s->signature = NULL;

    if (ngx_http_oip_sig_join(r, s) == NGX_AGAIN) {
        return NGX_AGAIN;
    }

    /* it could not start: the refusal stands */

    s->state = NGX_HTTP_OIP_SIG_DONE;

    return NGX_DECLINED;
}


/*
 * The zone's entry: NGX_OK with s->signature a copy in the request's
 * pool, NGX_HTTP_NOT_FOUND for a model known not to be there,
 * NGX_DECLINED for a miss.  *refresh: this request refreshes it.
 */

static ngx_int_t
ngx_http_oip_sig_lookup(ngx_http_request_t *r, ngx_http_oip_sig_t *s,
    ngx_uint_t *refresh)
{
    ngx_int_t                 rc;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    rc = ngx_http_oip_sig_cache_lookup(olcf->sig_zone, &s->key, s->hash,
                                       r->pool, &s->signature, refresh);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: signature \"%V\" in the zone: %s", &s->key,
                   rc == NGX_OK ? "found"
                   : rc == NGX_HTTP_NOT_FOUND ? "the model is not found"
                   : rc == NGX_DECLINED ? "missing" : "error");

    return rc;
}


/* this process's table of fetches: empty */

void
ngx_http_oip_signature_init(ngx_http_oip_main_conf_t *omcf)
{
    ngx_queue_init(&omcf->fetches);
    omcf->nfetches = 0;
}


/* a path segment of its own: not "." or "..", no control bytes */

static ngx_uint_t
ngx_http_oip_sig_name(ngx_str_t *name)
{
    size_t  i;

    if (name->len == 0
        || (name->len <= 2 && ngx_strncmp(name->data, "..", name->len) == 0))
    {
        return 0;
    }

    for (i = 0; i < name->len; i++) {
        if (name->data[i] < 0x20 || name->data[i] == 0x7f) {
            return 0;
        }
    }

    return 1;
}


static ngx_http_oip_sig_t *
ngx_http_oip_sig_create(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    u_char                   *p;
    ngx_http_oip_sig_t       *s;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    s = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_sig_t));
    if (s == NULL) {
        return NULL;
    }

    /* the key: URI, model, version; none of them holds a NUL */

    s->key.len = olcf->sig_uri.len + 1 + ctx->model.len + 1
                 + ctx->version.len;

    p = ngx_pnalloc(r->pool, s->key.len);
    if (p == NULL) {
        return NULL;
    }

    s->key.data = p;
    p = ngx_cpymem(p, olcf->sig_uri.data, olcf->sig_uri.len);
    *p++ = '\0';
    p = ngx_cpymem(p, ctx->model.data, ctx->model.len);
    *p++ = '\0';

    if (ctx->version.len) {
        ngx_memcpy(p, ctx->version.data, ctx->version.len);
    }

    s->hash = ngx_crc32_short(s->key.data, s->key.len);
    s->r = r;
    s->ctx = ctx;

    if (ctx->req.sig == NULL) {
        ctx->req.sig = s;
    }

    return s;
}


/*
 * A miss: wait for this worker's fetch of the key, or fetch it.
 * NGX_AGAIN, or NGX_DECLINED with the failure set.
 */

static ngx_int_t
ngx_http_oip_sig_join(ngx_http_request_t *r, ngx_http_oip_sig_t *s)
{
    ngx_queue_t               *q;
    ngx_pool_cleanup_t        *cln;
    ngx_http_oip_fetch_t      *f;
    ngx_http_oip_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_oip_module);

    if (!s->cleanup) {
        cln = ngx_pool_cleanup_add(r->pool, 0);
        if (cln == NULL) {
            ngx_http_oip_sig_failed(s, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                    "out of memory");
            return NGX_DECLINED;
        }

        cln->handler = ngx_http_oip_sig_cleanup;
        cln->data = s;
        s->cleanup = 1;
    }

    for (q = ngx_queue_head(&omcf->fetches);
         q != ngx_queue_sentinel(&omcf->fetches);
         q = ngx_queue_next(q))
    {
        f = ngx_queue_data(q, ngx_http_oip_fetch_t, queue);

        if (f->hash == s->hash && f->key.len == s->key.len
            && ngx_memcmp(f->key.data, s->key.data, s->key.len) == 0)
        {
            ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "oip: signature \"%V\": waiting for the fetch "
                           "in flight", &s->key);

            s->fetch = f;
            s->state = NGX_HTTP_OIP_SIG_WAITING;
            ngx_queue_insert_tail(&f->waiters, &s->queue);

            s->wake.handler = ngx_http_oip_sig_wake;
            s->wake.data = s;
            s->wake.log = r->connection->log;

            ngx_add_timer(&s->wake, NGX_HTTP_OIP_SIG_WAIT);

            /* a client gone while it waits is noticed, as limit_req does */

            if (r->connection->read->ready) {
                ngx_post_event(r->connection->read, &ngx_posted_events);

            } else if (ngx_handle_read_event(r->connection->read, 0)
                       != NGX_OK)
            {
                ngx_queue_remove(&s->queue);
                ngx_del_timer(&s->wake);
                s->fetch = NULL;
                ngx_http_oip_sig_failed(s, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                        "the connection failed");
                return NGX_DECLINED;
            }

            r->read_event_handler = ngx_http_test_reading;

            return NGX_AGAIN;
        }
    }

    if (omcf->nfetches >= NGX_HTTP_OIP_SIG_FETCHES) {
        ngx_http_oip_sig_failed(s, NGX_HTTP_SERVICE_UNAVAILABLE,
                                "%d signatures are being fetched already",
                                NGX_HTTP_OIP_SIG_FETCHES);
        return NGX_DECLINED;
    }

    f = ngx_alloc(sizeof(ngx_http_oip_fetch_t) + s->key.len,
                  r->connection->log);
    if (f == NULL) {
        ngx_http_oip_sig_failed(s, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                "out of memory");
        return NGX_DECLINED;
    }

    f->hash = s->hash;
    f->key.data = (u_char *) (f + 1);
    f->key.len = s->key.len;
    ngx_memcpy(f->key.data, s->key.data, s->key.len);
    f->owner = s;
    ngx_queue_init(&f->waiters);

    s->fetch = f;
    s->state = NGX_HTTP_OIP_SIG_FETCHING;

    if (ngx_http_oip_sig_request(r, s, NGX_HTTP_SUBREQUEST_WAITED)
        != NGX_OK)
    {
        ngx_free(f);
        s->fetch = NULL;
        ngx_http_oip_sig_failed(s, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                "the metadata subrequest could not start");
        return NGX_DECLINED;
    }

    f->table = omcf;
    ngx_queue_insert_tail(&omcf->fetches, &f->queue);
    omcf->nfetches++;

    /* its subrequest's upstream watches the client for it */

    return NGX_AGAIN;
}


/* GET URI/v2/models/M[/versions/V], its answer kept in memory */

static ngx_int_t
ngx_http_oip_sig_request(ngx_http_request_t *r, ngx_http_oip_sig_t *s,
    ngx_uint_t flags)
{
    u_char                       *p;
    ngx_str_t                     uri;
    ngx_http_request_t           *sr;
    ngx_http_oip_ctx_t           *sctx;
    ngx_http_oip_loc_conf_t      *olcf;
    ngx_http_post_subrequest_t   *ps;

    static const ngx_str_t  models = ngx_string("/v2/models/");
    static const ngx_str_t  versions = ngx_string("/versions/");

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    uri.len = olcf->sig_uri.len + models.len + s->ctx->model.len
              + (s->ctx->version.len ? versions.len + s->ctx->version.len
                                     : 0);

    uri.data = ngx_pnalloc(r->pool, uri.len);
    if (uri.data == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(uri.data, olcf->sig_uri.data, olcf->sig_uri.len);
    p = ngx_cpymem(p, models.data, models.len);
    p = ngx_cpymem(p, s->ctx->model.data, s->ctx->model.len);

    if (s->ctx->version.len) {
        p = ngx_cpymem(p, versions.data, versions.len);
        ngx_memcpy(p, s->ctx->version.data, s->ctx->version.len);
    }

    ps = ngx_palloc(r->pool, sizeof(ngx_http_post_subrequest_t));
    if (ps == NULL) {
        return NGX_ERROR;
    }

    ps->handler = ngx_http_oip_sig_fetched;
    ps->data = s;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: fetching the signature: \"%V\"%s", &uri,
                   (flags & NGX_HTTP_SUBREQUEST_BACKGROUND)
                   ? " in the background" : "");

    if (ngx_http_subrequest(r, &uri, NULL, &sr, ps,
                            flags | NGX_HTTP_SUBREQUEST_IN_MEMORY)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* no body goes with it, even after the client's was read */

    sr->request_body = ngx_pcalloc(r->pool, sizeof(ngx_http_request_body_t));
    if (sr->request_body == NULL) {
        return NGX_ERROR;
    }

    /* what it asks, should its location's transport make it a call */

    sctx = ngx_http_oip_create_ctx(sr);
    if (sctx == NULL) {
        return NGX_ERROR;
    }

    sctx->req.rpc = OIP_RPC_MODEL_METADATA;
    sctx->model = s->ctx->model;
    sctx->version = s->ctx->version;

    return NGX_OK;
}


/* the subrequest is done: what it says goes to the zone and the waiters */

static ngx_int_t
ngx_http_oip_sig_fetched(ngx_http_request_t *sr, void *data, ngx_int_t rc)
{
    ngx_http_oip_sig_t  *s = data;

    ngx_http_upstream_t      *u;
    ngx_http_oip_loc_conf_t  *olcf;

    if (s->done) {
        /* called again after nginx's error page for it: not wanted */
        return rc;
    }

    u = sr->upstream;

    if (u && u->pipe && u->pipe->downstream_error) {
        /*
         * An answer over subrequest_output_buffer_size: the in-memory
         * filter failed it and marked the client's connection broken,
         * which would end the client's request with an empty reply.
         * The client is fine: only the metadata was too large.
         */
        sr->connection->error = 0;
        rc = NGX_ERROR;

    } else if (rc == NGX_HTTP_CLIENT_CLOSED_REQUEST
               || sr->connection->error)
    {
        /* the client went away: its pool cleanup hands the fetch on */
        return rc;
    }

    ngx_http_oip_sig_outcome(sr, s, rc);

    s->done = 1;

    if (s->outcome != NGX_HTTP_OIP_SIG_FAILED) {
        olcf = ngx_http_get_module_loc_conf(s->r, ngx_http_oip_module);

        ngx_http_oip_sig_cache_store(olcf->sig_zone, &s->key, s->hash,
                                     s->outcome == NGX_HTTP_OIP_SIG_FOUND
                                     ? s->signature : NULL,
                                     &s->ctx->model, sr->connection->log);
    }

    if (!s->background) {
        ngx_http_oip_sig_finish(s);
    }

    /* the outcome is ours to tell: no error page is made for it */

    return (rc == NGX_ERROR || rc >= NGX_HTTP_SPECIAL_RESPONSE) ? NGX_OK
                                                                : rc;
}


/* what the metadata location answered, read */

static void
ngx_http_oip_sig_outcome(ngx_http_request_t *sr, ngx_http_oip_sig_t *s,
    ngx_int_t rc)
{
    size_t           len;
    u_char          *body;
    ngx_uint_t       status;
    oip_alloc_t      alloc;
    oip_result_t     res;
    oip_signature_t *sig;

    status = sr->headers_out.status;
    body = NULL;
    len = 0;

    if (sr->out && sr->out->buf) {
        body = sr->out->buf->pos;
        len = sr->out->buf->last - sr->out->buf->pos;
    }

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0,
                   "oip: signature \"%V\" answered: rc %i, status %ui, "
                   "%uz bytes", &s->key, rc, status, len);

    if (rc == NGX_ERROR) {
        ngx_http_oip_sig_failed(s, NGX_HTTP_BAD_GATEWAY, "the metadata "
                                "could not be read (larger than "
                                "subrequest_output_buffer_size?)");
        return;
    }

    if (status == 0 && rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        /* the proxy failed it before any answer: 502, 504 */
        status = rc;
    }

    if (status == NGX_HTTP_NOT_FOUND
        || (status == NGX_HTTP_BAD_REQUEST
            && ngx_http_oip_sig_unknown(s, sr, body, len)))
    {
        s->outcome = NGX_HTTP_OIP_SIG_NOT_FOUND;
        return;
    }

    if (status == NGX_HTTP_BAD_GATEWAY
        || status == NGX_HTTP_SERVICE_UNAVAILABLE
        || status == NGX_HTTP_GATEWAY_TIME_OUT)
    {
        ngx_http_oip_sig_failed(s, NGX_HTTP_SERVICE_UNAVAILABLE,
                                "the metadata location answered %ui",
                                status);
        return;
    }

    if (status != NGX_HTTP_OK) {
        ngx_http_oip_sig_failed(s, NGX_HTTP_BAD_GATEWAY,
                                "the metadata location answered %ui",
                                status);
        return;
    }

    if (len > NGX_HTTP_OIP_SIG_MAX) {
        ngx_http_oip_sig_failed(s, NGX_HTTP_BAD_GATEWAY, "the metadata is "
                                "over %d bytes", NGX_HTTP_OIP_SIG_MAX);
        return;
    }

    ngx_http_oip_allocator(s->r, &alloc);

    if (oip_signature_parse(&res, &alloc, body ? body : (u_char *) "", len,
                            &sig)
        != 0)
    {
        ngx_http_oip_sig_failed(s, res.status == 500
                                   ? NGX_HTTP_INTERNAL_SERVER_ERROR
                                   : NGX_HTTP_BAD_GATEWAY,
                                "%s", res.error);
        return;
    }

    s->outcome = NGX_HTTP_OIP_SIG_FOUND;
    s->signature = sig;
}


/*
 * Triton before 2.42 says "unknown model" with a 400 ("Request for
 * unknown model: 'm' is not found", "... has no available versions"):
 * the codec's reader of runtimes' errors tells.
 */

static ngx_uint_t
ngx_http_oip_sig_unknown(ngx_http_oip_sig_t *s, ngx_http_request_t *sr,
    u_char *body, size_t len)
{
    oip_alloc_t    alloc;
    oip_header_t   type;
    oip_result_t   res;

    ngx_http_oip_allocator(s->r, &alloc);
    ngx_memzero(&type, sizeof(oip_header_t));

    if (sr->headers_out.content_type.len) {
        type.data = sr->headers_out.content_type.data;
        type.len = sr->headers_out.content_type.len;
        type.count = 1;
    }

    (void) oip_response_error(&res, &alloc, NGX_HTTP_BAD_REQUEST, &type,
                              body ? body : (u_char *) "", len);

    return res.reason == OIP_REASON_UNKNOWN_MODEL;
}


/* a fetch's outcome to every request waiting for it; the fetch ends */

static void
ngx_http_oip_sig_finish(ngx_http_oip_sig_t *s)
{
    ngx_queue_t           *q;
    ngx_http_oip_sig_t    *w;
    ngx_http_oip_fetch_t  *f;

    f = s->fetch;

    if (f == NULL || f->owner != s) {
        return;
    }

    while (!ngx_queue_empty(&f->waiters)) {
        q = ngx_queue_head(&f->waiters);
        ngx_queue_remove(q);

        w = ngx_queue_data(q, ngx_http_oip_sig_t, queue);

        ngx_http_oip_sig_give(s, w);
    }

    ngx_queue_remove(&f->queue);
    f->table->nfetches--;
    ngx_free(f);

    s->fetch = NULL;
}


/* the outcome, copied into the waiter's own pool, and the waiter woken */

static void
ngx_http_oip_sig_give(ngx_http_oip_sig_t *from, ngx_http_oip_sig_t *to)
{
    to->fetch = NULL;
    to->outcome = from->outcome;
    to->status = from->status;
    to->done = 1;

    if (from->outcome == NGX_HTTP_OIP_SIG_FOUND) {
        to->signature = ngx_palloc(to->r->pool, from->signature->size);

        if (to->signature == NULL) {
            to->outcome = NGX_HTTP_OIP_SIG_FAILED;
            to->status = NGX_HTTP_INTERNAL_SERVER_ERROR;
            ngx_str_set(&to->why, "out of memory");

        } else {
            ngx_memcpy(to->signature, from->signature,
                       from->signature->size);
        }

    } else if (from->why.len) {
        to->why.data = ngx_pnalloc(to->r->pool, from->why.len);

        if (to->why.data) {
            ngx_memcpy(to->why.data, from->why.data, from->why.len);
            to->why.len = from->why.len;
        }
    }

    ngx_post_event(&to->wake, &ngx_posted_events);
}


static void
ngx_http_oip_sig_wake(ngx_event_t *ev)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;
    ngx_http_oip_sig_t  *s;

    s = ev->data;
    r = s->r;
    c = r->connection;

    ngx_http_set_log_request(c->log, r);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, c->log, 0,
                   "oip: signature \"%V\": woken%s", &s->key,
                   ev->timedout ? " by its timer" : "");

    if (ev->timedout) {
        ev->timedout = 0;

        if (s->fetch) {
            ngx_queue_remove(&s->queue);
            s->fetch = NULL;
        }

        s->done = 1;
        ngx_http_oip_sig_failed(s, NGX_HTTP_SERVICE_UNAVAILABLE,
                                "timed out waiting for its fetch");
    }

    if (ev->timer_set) {
        ngx_del_timer(ev);
    }

    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;

    ngx_http_core_run_phases(r);
    ngx_http_run_posted_requests(c);
}


/*
 * The request's pool goes: it leaves the queue it waits in; if it owned
 * a fetch that had not ended, its subrequest goes with it, and those
 * waiting for it are woken to try again.
 */

static void
ngx_http_oip_sig_cleanup(void *data)
{
    ngx_http_oip_sig_t  *s = data;

    ngx_queue_t           *q;
    ngx_http_oip_sig_t    *w;
    ngx_http_oip_fetch_t  *f;

    if (s->wake.posted) {
        ngx_delete_posted_event(&s->wake);
    }

    if (s->wake.timer_set) {
        ngx_del_timer(&s->wake);
    }

    f = s->fetch;

    if (f == NULL) {
        return;
    }

    s->fetch = NULL;

    if (f->owner != s) {
        ngx_queue_remove(&s->queue);
        return;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->r->connection->log, 0,
                   "oip: signature \"%V\": its fetch abandoned", &s->key);

    while (!ngx_queue_empty(&f->waiters)) {
        q = ngx_queue_head(&f->waiters);
        ngx_queue_remove(q);

        w = ngx_queue_data(q, ngx_http_oip_sig_t, queue);
        w->fetch = NULL;
        w->outcome = NGX_HTTP_OIP_SIG_RETRY;
        w->done = 1;

        ngx_post_event(&w->wake, &ngx_posted_events);
    }

    ngx_queue_remove(&f->queue);
    f->table->nfetches--;
    ngx_free(f);
}


/* the outcome, for the request: the failure policy applied */

static ngx_int_t
ngx_http_oip_sig_result(ngx_http_request_t *r, ngx_http_oip_sig_t *s)
{
    u_char                   *p;
    u_char                    msg[NGX_MAX_ERROR_STR];
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_loc_conf_t  *olcf;

    ctx = s->ctx;

    /* for oip_signature_lookups_total */
    ctx->vars.sig_lookup = (s->outcome == NGX_HTTP_OIP_SIG_FAILED)
                      ? NGX_HTTP_OIP_LOOKUP_FAILED
                      : s->hit ? NGX_HTTP_OIP_LOOKUP_HIT
                               : NGX_HTTP_OIP_LOOKUP_MISS;

    switch (s->outcome) {

    case NGX_HTTP_OIP_SIG_FOUND:
        /* a model declaring no inputs is served unchecked */
        ctx->req.signature = s->signature->ninputs ? s->signature : NULL;

        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: signature of \"%V\": %s", &ctx->model,
                       ctx->req.signature ? "checked against"
                                      : "no inputs declared, not checked");
        return NGX_OK;

    case NGX_HTTP_OIP_SIG_NOT_FOUND:
        ctx->req.signature = NULL;

        p = ngx_snprintf(msg, sizeof(msg) - 1, "model '%V'%s%V%s not found",
                         &ctx->model, ctx->version.len ? " version '" : "",
                         &ctx->version, ctx->version.len ? "'" : "");
        *p = '\0';

        return ngx_http_oip_fail(r, ctx, NGX_HTTP_NOT_FOUND,
                                 OIP_REASON_SIGNATURE, (char *) msg);

    default:
        break;
    }

    ctx->req.signature = NULL;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (olcf->sig_fail == NGX_HTTP_OIP_SIG_OPEN
        && s->status != NGX_HTTP_INTERNAL_SERVER_ERROR)
    {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "oip: model \"%V\": no signature (%V), "
                      "forwarded unchecked (oip_signature_fail open)",
                      &ctx->model, &s->why);
        return NGX_OK;
    }

    p = ngx_snprintf(msg, sizeof(msg) - 1, "the signature of model '%V' "
                     "is not available: %V", &ctx->model, &s->why);
    *p = '\0';

    return ngx_http_oip_fail(r, ctx, s->status, OIP_REASON_OTHER,
                             (char *) msg);
}


static void
ngx_http_oip_sig_failed(ngx_http_oip_sig_t *s, ngx_uint_t status,
    const char *fmt, ...)
{
    u_char   *p;
    u_char    buf[OIP_ERROR_LEN];
    va_list   args;

    va_start(args, fmt);
    p = ngx_vslprintf(buf, buf + sizeof(buf), fmt, args);
    va_end(args);

    s->outcome = NGX_HTTP_OIP_SIG_FAILED;
    s->status = status;

    s->why.data = ngx_pnalloc(s->r->pool, p - buf);

    if (s->why.data) {
        ngx_memcpy(s->why.data, buf, p - buf);
        s->why.len = p - buf;
    }
}
