
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Prometheus metrics shared by all workers: oip_metrics_zone declares a
 * zone of counters (one block per model, atomics, stub_status's way), a
 * log-phase handler counts every infer request of an oip location into
 * it, and oip_metrics writes the text exposition format 0.0.4.
 *
 * Model names come from clients: at most models= of them get a block,
 * and only once an upstream answered them with something else than 404
 * or their signature was found; all the others count as "_other".
 */


#include "ngx_http_oip_module.h"


#define NGX_HTTP_OIP_M_NAME       128

#define NGX_HTTP_OIP_M_PASSED     0
#define NGX_HTTP_OIP_M_CONVERTED  1
#define NGX_HTTP_OIP_M_REJECTED   2
#define NGX_HTTP_OIP_M_CANCELLED  3
#define NGX_HTTP_OIP_M_OUTCOMES   4

#define NGX_HTTP_OIP_M_CODES      15        /* the list below, and "other" */
#define NGX_HTTP_OIP_M_REASONS    NGX_HTTP_OIP_REASONS
#define NGX_HTTP_OIP_M_BUCKETS    11        /* the list below, and +Inf */
#define NGX_HTTP_OIP_M_CACHE      7         /* $upstream_cache_status's */

/* a family's HELP and TYPE lines, written at p */
#define ngx_http_oip_head(name, type, help)                                   \
    p = ngx_cpymem(p, "# HELP " name " " help "\n# TYPE " name " " type "\n", \
                   sizeof("# HELP " name " " help "\n# TYPE " name " "        \
                          type "\n") - 1)


typedef struct {
    ngx_atomic_t               requests[NGX_HTTP_OIP_M_OUTCOMES]
                                       [NGX_HTTP_OIP_M_CODES];
    ngx_atomic_t               rejections[NGX_HTTP_OIP_M_REASONS];
    ngx_atomic_t               bytes[2][2];       /* request, response;
                                                     json, binary */
    ngx_atomic_t               hist[4][NGX_HTTP_OIP_M_BUCKETS];
    ngx_atomic_t               hist_usec[4];      /* request, response;
                                                     admission's queue;
                                                     the first event */
    ngx_atomic_t               events;
    ngx_atomic_t               answers[3];        /* converted, passed,
                                                     failed */
    ngx_atomic_t               cache[NGX_HTTP_OIP_M_CACHE];
    ngx_atomic_t               admission[NGX_HTTP_OIP_ADM_RESULTS];
    ngx_atomic_t               sequences[NGX_HTTP_OIP_SEQ_ENDS];
} ngx_http_oip_mcount_t;


typedef struct {
    ngx_atomic_t               ready;
    size_t                     len;
    u_char                     name[NGX_HTTP_OIP_M_NAME];
    ngx_http_oip_mcount_t      c;
} ngx_http_oip_mslot_t;


typedef struct {
    ngx_atomic_t               nslots;            /* _other included */
    ngx_atomic_t               lookups[3];        /* hit, miss, failed */
    ngx_http_oip_mslot_t       slot[1];
} ngx_http_oip_msh_t;


typedef struct {
    ngx_http_oip_msh_t        *sh;
    ngx_slab_pool_t           *shpool;
    ngx_uint_t                 models;
} ngx_http_oip_mzone_t;


/* a model's block among the first n, for the gauges' sums */
typedef struct {
    ngx_http_oip_mzone_t      *z;
    ngx_uint_t                 n;
} ngx_http_oip_mfind_t;


static ngx_int_t ngx_http_oip_metrics_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_oip_metrics_handler(ngx_http_request_t *r);
static u_char *ngx_http_oip_metrics_write(u_char *p,
    ngx_http_oip_mzone_t *z, ngx_uint_t n);
static u_char *ngx_http_oip_metrics_admission(u_char *p,
    ngx_http_oip_mzone_t *z, ngx_uint_t n, ngx_array_t *zones,
    uint64_t *sums);
static u_char *ngx_http_oip_metrics_sequences(u_char *p,
    ngx_http_oip_mzone_t *z, ngx_uint_t n, ngx_array_t *zones,
    uint64_t *active);
static ngx_int_t ngx_http_oip_metrics_find(void *data, u_char *model,
    size_t len);
static u_char *ngx_http_oip_metrics_histogram(u_char *p,
    ngx_http_oip_mslot_t *s, ngx_uint_t d);
static ngx_http_oip_mslot_t *ngx_http_oip_metrics_slot(
    ngx_http_oip_mzone_t *z, ngx_str_t *model, ngx_uint_t earned);
static void ngx_http_oip_metrics_observe(ngx_http_oip_mcount_t *c,
    ngx_uint_t direction, uint64_t usec);
static u_char *ngx_http_oip_metrics_start(u_char *p, const char *metric,
    ngx_http_oip_mslot_t *s);


static ngx_uint_t  ngx_http_oip_m_codes[NGX_HTTP_OIP_M_CODES - 1] = {
    200, 400, 404, 408, 413, 415, 422, 429, 499, 500, 501, 502, 503, 504
};

static ngx_str_t  ngx_http_oip_m_outcomes[] = {
    ngx_string("passed"), ngx_string("converted"), ngx_string("rejected"),
    ngx_string("cancelled")
};

static ngx_str_t  ngx_http_oip_m_sequence_ends[] = {
    ngx_string("ended"), ngx_string("idle"), ngx_string("lost"),
    ngx_string("evicted")
};

static ngx_str_t  ngx_http_oip_m_admission[] = {
    ngx_string("admitted"), ngx_string("queued"), ngx_string("shed"),
    ngx_string("timeout"), ngx_string("cancelled"), ngx_string("runtime"),
    ngx_string("expired")
};

/* the histograms: oip_conversion_seconds each way, oip_queue_seconds,
 * oip_time_to_first_event_seconds */
static const char  *ngx_http_oip_m_hist[] = {
    "oip_conversion_seconds", "oip_conversion_seconds", "oip_queue_seconds",
    "oip_time_to_first_event_seconds"
};

static const char  *ngx_http_oip_m_hist_label[] = {
    ",direction=\"request\"", ",direction=\"response\"", "", ""
};

static ngx_str_t  ngx_http_oip_m_answers[] = {
    ngx_string("converted"), ngx_string("passed"), ngx_string("failed")
};

static ngx_str_t  ngx_http_oip_m_lookups[] = {
    ngx_string("hit"), ngx_string("miss"), ngx_string("failed")
};

/* seconds, as text and in microseconds */
static const char  *ngx_http_oip_m_le[NGX_HTTP_OIP_M_BUCKETS - 1] = {
    "0.0001", "0.0005", "0.001", "0.005", "0.01", "0.05", "0.1", "0.5",
    "1", "5"
};

static uint64_t  ngx_http_oip_m_le_usec[NGX_HTTP_OIP_M_BUCKETS - 1] = {
    100, 500, 1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000
};


/* oip_metrics_zone zone=NAME:SIZE [models=N] */

char *
ngx_http_oip_metrics_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_oip_main_conf_t *omcf = conf;

    char                  *rv;
    size_t                 need;
    ssize_t                size;
    ngx_int_t              n;
    ngx_str_t             *value, name;
    ngx_uint_t             i, models;
    ngx_http_oip_mzone_t  *z;

    if (omcf->metrics) {
        return "is duplicate";
    }

    value = cf->args->elts;
    name.len = 0;
    size = 0;
    models = 100;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {
            rv = ngx_http_oip_zone_arg(cf, &value[i], &name, &size);

            if (rv != NGX_CONF_OK) {
                return rv;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "models=", 7) == 0) {
            n = ngx_atoi(value[i].data + 7, value[i].len - 7);

            if (n == NGX_ERROR || n > 100000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            models = n;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    if (name.len == 0) {
        return "takes zone=NAME:SIZE";
    }

    /* every block is there from the start: a zone that cannot hold them
     * is refused now, not found full under traffic */

    need = sizeof(ngx_http_oip_msh_t) + models * sizeof(ngx_http_oip_mslot_t)
           + 8 * ngx_pagesize;

    if ((size_t) size < need) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small for %ui models: it "
                           "needs %uzk", &name, models, need / 1024 + 1);
        return NGX_CONF_ERROR;
    }

    z = ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_mzone_t));
    if (z == NULL) {
        return NGX_CONF_ERROR;
    }

    z->models = models;

    omcf->metrics = ngx_shared_memory_add(cf, &name, size,
                                          &ngx_http_oip_module);
    if (omcf->metrics == NULL) {
        return NGX_CONF_ERROR;
    }

    if (omcf->metrics->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is already declared", &name);
        return NGX_CONF_ERROR;
    }

    omcf->metrics->init = ngx_http_oip_metrics_init_zone;
    omcf->metrics->data = z;

    return NGX_CONF_OK;
}


/* a reload keeps the counters when the zone and models= are the same */

static ngx_int_t
ngx_http_oip_metrics_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_oip_mzone_t  *oz = data;

    ngx_int_t              rc;
    ngx_http_oip_mzone_t  *z;

    z = shm_zone->data;

    /*
     * The old workers count into the old blocks until they end: they
     * cannot be freed or reshaped under them.
     */

    if (oz && oz->models != z->models) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "oip_metrics_zone \"%V\": models= changed from %ui "
                      "to %ui: give the zone another size or name",
                      &shm_zone->shm.name, oz->models, z->models);
        return NGX_ERROR;
    }

    rc = ngx_http_oip_zone_header(shm_zone, data,
                                  sizeof(ngx_http_oip_msh_t)
                                  + z->models * sizeof(ngx_http_oip_mslot_t));
    if (rc != NGX_DONE) {
        return rc;
    }

    z->sh->nslots = 1;
    z->sh->slot[0].ready = 1;
    z->sh->slot[0].len = sizeof("_other") - 1;
    ngx_memcpy(z->sh->slot[0].name, "_other", sizeof("_other") - 1);

    return NGX_OK;
}


/* oip_metrics: this location answers the zone's counters */

char *
ngx_http_oip_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_oip_metrics_handler;

    return NGX_CONF_OK;
}


/*
 * The log phase: every infer request of an oip location, whatever
 * became of it (refused by the module, by limit_req before its body,
 * answered by the upstream).
 */

ngx_int_t
ngx_http_oip_metrics_log(ngx_http_request_t *r)
{
    ngx_str_t                  model, version;
    ngx_uint_t                 i, code, outcome, earned, status;
    ngx_http_oip_ctx_t        *ctx;
    ngx_http_oip_mslot_t      *slot;
    ngx_http_oip_mzone_t      *z;
    ngx_http_oip_mcount_t     *c;
    ngx_http_oip_adm_e         adm;
    ngx_http_oip_loc_conf_t   *olcf;
    ngx_http_oip_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_oip_module);
    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (omcf->metrics == NULL || !olcf->enable || r != r->main) {
        return NGX_OK;
    }

    ctx = ngx_http_oip_get_ctx(r);

    if (ctx && ctx->model.len) {
        model = ctx->model;

    } else if (r->method != NGX_HTTP_POST
               || ngx_http_oip_infer_uri(&r->uri, &model, &version)
                  != NGX_OK)
    {
        return NGX_OK;
    }

    z = omcf->metrics->data;
    status = r->headers_out.status;

    /* a model earns its label when it is known to be there */

    earned = (ctx && ctx->req.signature)
             || (r->upstream && r->upstream->state
                 && r->upstream->state->status
                 && r->upstream->state->status != NGX_HTTP_NOT_FOUND);

    slot = ngx_http_oip_metrics_slot(z, &model, earned);
    c = &slot->c;

    for (code = 0; code < NGX_HTTP_OIP_M_CODES - 1; code++) {
        if (ngx_http_oip_m_codes[code] == status) {
            break;
        }
    }

    if (status == NGX_HTTP_CLIENT_CLOSED_REQUEST || (ctx && ctx->adm.left)) {
        /* its client left: while it waited, or mid-upstream (a stream's
         * status stays the 200 that began it) */
        outcome = NGX_HTTP_OIP_M_CANCELLED;

    } else if (ctx && ctx->error.len) {
        outcome = NGX_HTTP_OIP_M_REJECTED;

    } else if ((ctx == NULL || !ctx->vars.counted)
               && status >= NGX_HTTP_BAD_REQUEST)
    {
        /* refused before the module saw the body */
        outcome = NGX_HTTP_OIP_M_REJECTED;

    } else if (ctx && ctx->vars.counted
               && (ctx->vars.in_form != ctx->vars.upstream_form
                   || ctx->vars.answer == NGX_HTTP_OIP_ANSWER_CONVERTED))
    {
        outcome = NGX_HTTP_OIP_M_CONVERTED;

    } else {
        outcome = NGX_HTTP_OIP_M_PASSED;
    }

    (void) ngx_atomic_fetch_add(&c->requests[outcome][code], 1);

    if (ctx && ctx->vars.sig_lookup) {
        (void) ngx_atomic_fetch_add(
                              &z->sh->lookups[ctx->vars.sig_lookup - 1], 1);
    }

#if (NGX_HTTP_CACHE)
    if (r->upstream && r->upstream->cache_status
        && r->upstream->cache_status <= NGX_HTTP_OIP_M_CACHE)
    {
        (void) ngx_atomic_fetch_add(
                            &c->cache[r->upstream->cache_status - 1], 1);
    }
#endif

    if (ctx && ctx->adm.state != NGX_HTTP_OIP_ADM_NONE) {
        adm = ngx_http_oip_admission_result(ctx);
        (void) ngx_atomic_fetch_add(&c->admission[adm - 1], 1);

        if (adm != NGX_HTTP_OIP_ADM_SHED && ctx->adm.zone) {
            ngx_http_oip_metrics_observe(c, 2,
                              (adm == NGX_HTTP_OIP_ADM_CANCELLED
                               && !ctx->adm.left)
                              ? ngx_http_oip_usec() - ctx->adm.start
                              : ctx->adm.queue_usec);
        }
    }

    if (outcome == NGX_HTTP_OIP_M_CANCELLED) {
        return NGX_OK;
    }

    if (outcome == NGX_HTTP_OIP_M_REJECTED) {
        i = ngx_http_oip_reason(ctx, status);
        (void) ngx_atomic_fetch_add(&c->rejections[i], 1);
        return NGX_OK;
    }

    if (ctx == NULL || !ctx->vars.counted) {
        return NGX_OK;
    }

    /* binary, raw; mixed counted as binary, its larger part mostly */

    if (ctx->vars.in_form != OIP_SHAPE_NONE) {
        (void) ngx_atomic_fetch_add(
                         &c->bytes[0][ctx->vars.in_form != OIP_SHAPE_JSON],
                         ctx->vars.tensor_bytes);
    }

    /* an answer the module read, in the form the client got */

    if (ctx->vars.answer_form != OIP_SHAPE_NONE
        && ctx->vars.answer != NGX_HTTP_OIP_ANSWER_FAILED)
    {
        (void) ngx_atomic_fetch_add(
                         &c->bytes[1][ctx->vars.answer_form != OIP_SHAPE_JSON],
                         ctx->vars.answer_bytes);
    }

    ngx_http_oip_metrics_observe(c, 0, ctx->vars.request_usec);

    if (ctx->vars.answer_timed) {
        ngx_http_oip_metrics_observe(c, 1, ctx->vars.answer_usec);
    }

    if (ctx->stream && ctx->stream->events) {
        ngx_http_oip_metrics_observe(c, 3, ctx->stream->first_usec);
        (void) ngx_atomic_fetch_add(&c->events, ctx->stream->events);
    }

    if (ctx->vars.answer) {
        (void) ngx_atomic_fetch_add(&c->answers[ctx->vars.answer - 1], 1);

    } else if (r->upstream && r->upstream->state
               && r->upstream->state->status)
    {
        /* not held: passed on as it came */
        (void) ngx_atomic_fetch_add(
                          &c->answers[NGX_HTTP_OIP_ANSWER_PASSED - 1], 1);
    }

    return NGX_OK;
}


/*
 * The model's block, or _other's.  Blocks are found without a lock: a
 * block's name is written before it is marked ready, and never again.
 */

static ngx_http_oip_mslot_t *
ngx_http_oip_metrics_slot(ngx_http_oip_mzone_t *z, ngx_str_t *model,
    ngx_uint_t earned)
{
    ngx_uint_t             i, n;
    ngx_http_oip_mslot_t  *s;

    if (model->len > NGX_HTTP_OIP_M_NAME) {
        return &z->sh->slot[0];
    }

    n = z->sh->nslots;

    for (i = 1; i < n; i++) {
        s = &z->sh->slot[i];

        if (s->ready && s->len == model->len
            && ngx_memcmp(s->name, model->data, model->len) == 0)
        {
            return s;
        }
    }

    if (!earned || n > z->models) {
        return &z->sh->slot[0];
    }

    ngx_shmtx_lock(&z->shpool->mutex);

    /* another worker may have added it, or taken the last block */

    for (i = n; i < z->sh->nslots; i++) {
        s = &z->sh->slot[i];

        if (s->len == model->len
            && ngx_memcmp(s->name, model->data, model->len) == 0)
        {
            ngx_shmtx_unlock(&z->shpool->mutex);
            return s;
        }
    }

    if (z->sh->nslots > z->models) {
        ngx_shmtx_unlock(&z->shpool->mutex);
        return &z->sh->slot[0];
    }

    s = &z->sh->slot[z->sh->nslots];
    ngx_memcpy(s->name, model->data, model->len);
    s->len = model->len;

    ngx_memory_barrier();
    s->ready = 1;
    ngx_memory_barrier();

    z->sh->nslots++;

    ngx_shmtx_unlock(&z->shpool->mutex);

    return s;
}


static void
ngx_http_oip_metrics_observe(ngx_http_oip_mcount_t *c, ngx_uint_t direction,
    uint64_t usec)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_OIP_M_BUCKETS - 1; i++) {
        if (usec <= ngx_http_oip_m_le_usec[i]) {
            break;
        }
    }

    (void) ngx_atomic_fetch_add(&c->hist[direction][i], 1);
    (void) ngx_atomic_fetch_add(&c->hist_usec[direction], usec);
}


static ngx_int_t
ngx_http_oip_metrics_handler(ngx_http_request_t *r)
{
    size_t                     size;
    uint64_t                  *sums;
    ngx_int_t                  rc;
    ngx_buf_t                 *b;
    ngx_uint_t                 n;
    ngx_chain_t                out;
    ngx_http_oip_mzone_t      *z;
    ngx_http_oip_main_conf_t  *omcf;

    if (r->method != NGX_HTTP_GET && r->method != NGX_HTTP_HEAD) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_oip_module);

    if (omcf->metrics == NULL) {
        return NGX_HTTP_NOT_FOUND;
    }

    z = omcf->metrics->data;
    n = z->sh->nslots;

    /* a line: the name, labels (a model escaped: 4 times its length at
     * most), a 20-digit value */

    size = 4096 + n * (NGX_HTTP_OIP_M_OUTCOMES * NGX_HTTP_OIP_M_CODES
                       + NGX_HTTP_OIP_M_REASONS
                       + 4 + 4 * (NGX_HTTP_OIP_M_BUCKETS + 2) + 4
                       + NGX_HTTP_OIP_M_CACHE + NGX_HTTP_OIP_ADM_RESULTS + 3
                       + NGX_HTTP_OIP_SEQ_ENDS + 1)
                  * (128 + 4 * NGX_HTTP_OIP_M_NAME);

    /* in flight, per model: summed from the admission zones */

    sums = ngx_pcalloc(r->pool, 4 * n * sizeof(uint64_t));

    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL || sums == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->last = ngx_http_oip_metrics_write(b->last, z, n);
    b->last = ngx_http_oip_metrics_admission(b->last, z, n, omcf->admission,
                                             sums);
    b->last = ngx_http_oip_metrics_sequences(b->last, z, n, omcf->sequences,
                                             sums + 3 * n);
    b->last_buf = (r == r->main);
    b->last_in_chain = 1;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_http_oip_content_type(r, "text/plain; version=0.0.4");

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


/* the exposition: each family's samples, every model's */

static u_char *
ngx_http_oip_metrics_write(u_char *p, ngx_http_oip_mzone_t *z, ngx_uint_t n)
{
    ngx_uint_t             i, o, k, d;
    ngx_atomic_uint_t      v;
    ngx_http_oip_mslot_t  *s;

    /* n blocks, as many as the buffer was sized for: one added since by
     * another worker is in the next scrape */

    ngx_http_oip_head("oip_requests_total", "counter",
                      "Infer requests seen, by outcome and status.");

    for (i = 0; i < n; i++) {
        s = &z->sh->slot[i];

        for (o = 0; o < NGX_HTTP_OIP_M_OUTCOMES; o++) {
            for (k = 0; k < NGX_HTTP_OIP_M_CODES; k++) {
                v = s->c.requests[o][k];

                if (v == 0) {
                    continue;
                }

                p = ngx_http_oip_metrics_start(p, "oip_requests_total", s);

                if (k < NGX_HTTP_OIP_M_CODES - 1) {
                    p = ngx_sprintf(p, "\",outcome=\"%V\",code=\"%ui\"} %uA\n",
                                    &ngx_http_oip_m_outcomes[o],
                                    ngx_http_oip_m_codes[k], v);

                } else {
                    p = ngx_sprintf(p, "\",outcome=\"%V\",code=\"other\"} "
                                    "%uA\n", &ngx_http_oip_m_outcomes[o], v);
                }
            }
        }
    }

    ngx_http_oip_head("oip_rejections_total", "counter",
                      "Infer requests refused, by reason.");

    for (i = 0; i < n; i++) {
        s = &z->sh->slot[i];

        for (k = 0; k < NGX_HTTP_OIP_M_REASONS; k++) {
            v = s->c.rejections[k];

            if (v == 0) {
                continue;
            }

            p = ngx_http_oip_metrics_start(p, "oip_rejections_total", s);
            p = ngx_sprintf(p, "\",reason=\"%V\"} %uA\n",
                            &ngx_http_oip_reasons[k], v);
        }
    }

    ngx_http_oip_head("oip_tensor_bytes_total", "counter",
                      "Tensor bytes of accepted requests and of the answers "
                      "read, in binary size, by the client's form.");

    for (i = 0; i < n; i++) {
        s = &z->sh->slot[i];

        for (d = 0; d < 4; d++) {
            v = s->c.bytes[d / 2][d % 2];

            if (v == 0) {
                continue;
            }

            p = ngx_http_oip_metrics_start(p, "oip_tensor_bytes_total", s);
            p = ngx_sprintf(p, "\",direction=\"%s\",form=\"%s\"} %uA\n",
                            d / 2 ? "response" : "request",
                            d % 2 ? "binary" : "json", v);
        }
    }

    ngx_http_oip_head("oip_conversion_seconds", "histogram",
                      "Time the module spent on a request and its answer.");

    for (i = 0; i < n; i++) {
        p = ngx_http_oip_metrics_histogram(p, &z->sh->slot[i], 0);
        p = ngx_http_oip_metrics_histogram(p, &z->sh->slot[i], 1);
    }

    ngx_http_oip_head("oip_upstream_answers_total", "counter",
                      "Upstream answers to accepted requests, by outcome.");

    for (i = 0; i < n; i++) {
        s = &z->sh->slot[i];

        for (k = 0; k < 3; k++) {
            v = s->c.answers[k];

            if (v == 0) {
                continue;
            }

            p = ngx_http_oip_metrics_start(p, "oip_upstream_answers_total", s);
            p = ngx_sprintf(p, "\",outcome=\"%V\"} %uA\n",
                            &ngx_http_oip_m_answers[k], v);
        }
    }

#if (NGX_HTTP_CACHE)

    ngx_http_oip_head("oip_cache_total", "counter",
                      "Infer requests by $upstream_cache_status.");

    for (i = 0; i < n; i++) {
        s = &z->sh->slot[i];

        for (k = 0; k < NGX_HTTP_OIP_M_CACHE; k++) {
            v = s->c.cache[k];

            if (v == 0) {
                continue;
            }

            p = ngx_http_oip_metrics_start(p, "oip_cache_total", s);
            p = ngx_sprintf(p, "\",status=\"%V\"} %uA\n",
                            &ngx_http_cache_status[k], v);
        }
    }

#endif

    ngx_http_oip_head("oip_signature_lookups_total", "counter",
                      "Model signatures looked up, by result.");

    for (k = 0; k < 3; k++) {
        p = ngx_sprintf(p, "oip_signature_lookups_total{result=\"%V\"} "
                        "%uA\n", &ngx_http_oip_m_lookups[k],
                        z->sh->lookups[k]);
    }

    return p;
}


/* a model's histogram d: buckets, sum and count */

static u_char *
ngx_http_oip_metrics_histogram(u_char *p, ngx_http_oip_mslot_t *s,
    ngx_uint_t d)
{
    u_char             name[64];
    ngx_uint_t         k;
    ngx_atomic_uint_t  v, cum;

    cum = 0;

    for (k = 0; k < NGX_HTTP_OIP_M_BUCKETS; k++) {
        cum += s->c.hist[d][k];
    }

    if (cum == 0) {
        return p;
    }

    cum = 0;

    for (k = 0; k < NGX_HTTP_OIP_M_BUCKETS; k++) {
        cum += s->c.hist[d][k];

        *ngx_sprintf(name, "%s_bucket", ngx_http_oip_m_hist[d]) = '\0';
        p = ngx_http_oip_metrics_start(p, (char *) name, s);
        p = ngx_sprintf(p, "\"%s,le=\"%s\"} %uA\n",
                        ngx_http_oip_m_hist_label[d],
                        k < NGX_HTTP_OIP_M_BUCKETS - 1
                        ? ngx_http_oip_m_le[k] : "+Inf", cum);
    }

    v = s->c.hist_usec[d];

    *ngx_sprintf(name, "%s_sum", ngx_http_oip_m_hist[d]) = '\0';
    p = ngx_http_oip_metrics_start(p, (char *) name, s);
    p = ngx_sprintf(p, "\"%s} %uA.%06uA\n", ngx_http_oip_m_hist_label[d],
                    v / 1000000, v % 1000000);

    *ngx_sprintf(name, "%s_count", ngx_http_oip_m_hist[d]) = '\0';
    p = ngx_http_oip_metrics_start(p, (char *) name, s);
    p = ngx_sprintf(p, "\"%s} %uA\n", ngx_http_oip_m_hist_label[d], cum);

    return p;
}


/*
 * Admission's families: the outcomes, the time waited, and what is in
 * flight or waits now, which the zones hold (a share reclaimed from a
 * worker that died is gone from them too): sums, three per model,
 * zeroed.
 */

static u_char *
ngx_http_oip_metrics_admission(u_char *p, ngx_http_oip_mzone_t *z,
    ngx_uint_t n, ngx_array_t *zones, uint64_t *sums)
{
    ngx_uint_t             i, k;
    ngx_atomic_uint_t      v;
    ngx_shm_zone_t       **zp;
    ngx_http_oip_mslot_t  *s;
    ngx_http_oip_mfind_t   f;

    /* the blocks as they were when the sums were made: n of them */

    f.z = z;
    f.n = n;

    ngx_http_oip_head("oip_admission_total", "counter",
                      "Infer requests under an admission budget, by result.");

    for (i = 0; i < n; i++) {
        s = &z->sh->slot[i];

        for (k = 0; k < NGX_HTTP_OIP_ADM_RESULTS; k++) {
            v = s->c.admission[k];

            if (v == 0) {
                continue;
            }

            p = ngx_http_oip_metrics_start(p, "oip_admission_total", s);
            p = ngx_sprintf(p, "\",result=\"%V\"} %uA\n",
                            &ngx_http_oip_m_admission[k], v);
        }
    }

    ngx_http_oip_head("oip_queue_seconds", "histogram",
                      "Time infer requests waited for their admission.");

    for (i = 0; i < n; i++) {
        p = ngx_http_oip_metrics_histogram(p, &z->sh->slot[i], 2);
    }

    ngx_http_oip_head("oip_time_to_first_event_seconds", "histogram",
                      "Time from a stream's request to its first event.");

    for (i = 0; i < n; i++) {
        p = ngx_http_oip_metrics_histogram(p, &z->sh->slot[i], 3);
    }

    ngx_http_oip_head("oip_stream_events_total", "counter",
                      "Events sent to streams' clients.");

    for (i = 0; i < n; i++) {
        if (z->sh->slot[i].c.events) {
            p = ngx_http_oip_metrics_start(p, "oip_stream_events_total",
                                           &z->sh->slot[i]);
            p = ngx_sprintf(p, "\"} %uA\n", z->sh->slot[i].c.events);
        }
    }

    /* the gauges: with no zone (a runtime's 429s counted alone) none */

    if (zones == NULL) {
        goto done;
    }

    zp = zones->elts;

    for (k = 0; k < zones->nelts; k++) {
        ngx_http_oip_admission_sum(zp[k], ngx_http_oip_metrics_find, &f,
                                   sums, sums + n, sums + 2 * n);
    }

    ngx_http_oip_head("oip_inflight_requests", "gauge",
                      "Infer requests holding an admission share now.");

    for (i = 0; i < n; i++) {
        p = ngx_http_oip_metrics_start(p, "oip_inflight_requests",
                                       &z->sh->slot[i]);
        p = ngx_sprintf(p, "\"} %uL\n", sums[i]);
    }

    ngx_http_oip_head("oip_inflight_bytes", "gauge",
                      "Tensor bytes of the infer requests in flight now.");

    for (i = 0; i < n; i++) {
        p = ngx_http_oip_metrics_start(p, "oip_inflight_bytes",
                                       &z->sh->slot[i]);
        p = ngx_sprintf(p, "\"} %uL\n", sums[n + i]);
    }

    ngx_http_oip_head("oip_queue_requests", "gauge",
                      "Infer requests waiting for an admission share now.");

    for (i = 0; i < n; i++) {
        p = ngx_http_oip_metrics_start(p, "oip_queue_requests",
                                       &z->sh->slot[i]);
        p = ngx_sprintf(p, "\"} %uL\n", sums[2 * n + i]);
    }

done:

    return p;
}


/*
 * The sequence balancer's families: how pins ended, counted in the
 * blocks, and the sequences pinned now, summed from the zones.
 */

static u_char *
ngx_http_oip_metrics_sequences(u_char *p, ngx_http_oip_mzone_t *z,
    ngx_uint_t n, ngx_array_t *zones, uint64_t *active)
{
    ngx_uint_t             i, k;
    ngx_atomic_uint_t      v;
    ngx_shm_zone_t       **zp;
    ngx_http_oip_mslot_t  *s;
    ngx_http_oip_mfind_t   f;

    ngx_http_oip_head("oip_sequences_total", "counter",
                      "Sequences whose pin ended, by how.");

    for (i = 0; i < n; i++) {
        s = &z->sh->slot[i];

        for (k = 0; k < NGX_HTTP_OIP_SEQ_ENDS; k++) {
            v = s->c.sequences[k];

            if (v == 0) {
                continue;
            }

            p = ngx_http_oip_metrics_start(p, "oip_sequences_total", s);
            p = ngx_sprintf(p, "\",end=\"%V\"} %uA\n",
                            &ngx_http_oip_m_sequence_ends[k], v);
        }
    }

    if (zones == NULL) {
        return p;
    }

    f.z = z;
    f.n = n;
    zp = zones->elts;

    for (k = 0; k < zones->nelts; k++) {
        ngx_http_oip_sequence_sum(zp[k], ngx_http_oip_metrics_find, &f,
                                  active);
    }

    p = ngx_cpymem(p, "# HELP oip_sequences_active Sequences pinned to a "
                   "runtime now.\n# TYPE oip_sequences_active gauge\n",
                   sizeof("# HELP oip_sequences_active Sequences pinned to "
                          "a runtime now.\n# TYPE oip_sequences_active "
                          "gauge\n") - 1);

    for (i = 0; i < n; i++) {
        p = ngx_http_oip_metrics_start(p, "oip_sequences_active",
                                       &z->sh->slot[i]);
        p = ngx_sprintf(p, "\"} %uL\n", active[i]);
    }

    return p;
}


/* a pin's end, counted when it ends (the balancer's, any worker's) */

void
ngx_http_oip_metrics_sequence(ngx_http_request_t *r, u_char *model,
    size_t len, ngx_uint_t end)
{
    ngx_str_t                  name;
    ngx_http_oip_mslot_t      *slot;
    ngx_http_oip_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_oip_module);

    if (omcf->metrics == NULL) {
        return;
    }

    name.data = model;
    name.len = len;

    /* a pinned sequence's model was served: it has its block */
    slot = ngx_http_oip_metrics_slot(omcf->metrics->data, &name, 1);

    (void) ngx_atomic_fetch_add(&slot->c.sequences[end], 1);
}


/* a model's block, for the gauges: its index, or _other's */

static ngx_int_t
ngx_http_oip_metrics_find(void *data, u_char *model, size_t len)
{
    ngx_http_oip_mfind_t *f = data;

    ngx_uint_t             i;
    ngx_http_oip_mslot_t  *s;

    for (i = 1; i < f->n; i++) {
        s = &f->z->sh->slot[i];

        if (s->ready && s->len == len && ngx_memcmp(s->name, model, len) == 0)
        {
            return i;
        }
    }

    return 0;
}


/*
 * A sample's start: the metric's name and its model label, the value
 * escaped (backslash, double quote, line feed) as the format requires.
 */

static u_char *
ngx_http_oip_metrics_start(u_char *p, const char *metric,
    ngx_http_oip_mslot_t *s)
{
    size_t   i;
    u_char  *name;

    p = ngx_sprintf(p, "%s{model=\"", metric);
    name = s->name;

    for (i = 0; i < s->len; i++) {
        switch (name[i]) {
        case '\\':
            *p++ = '\\';
            *p++ = '\\';
            break;
        case '"':
            *p++ = '\\';
            *p++ = '"';
            break;
        case '\n':
            *p++ = '\\';
            *p++ = 'n';
            break;
        default:
            *p++ = name[i];
        }
    }

    return p;
}
