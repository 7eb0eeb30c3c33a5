
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Admission control on the request path (oip_admit): once its body is
 * validated and converted, an infer request takes a share of its key's
 * budget of requests and tensor bytes in the admission zone
 * (ngx_http_oip_admission_zone.c), waits for one, parked as limit_req
 * parks a request, or is refused with a 429 and Retry-After.  It gives
 * the share back once: when its upstream is finalized (wrapped here) or
 * when the main request ends (the context's pool cleanup).
 *
 * nginx has no wake-up from one worker to another: a release grants
 * waiters in the zone, and each worker that has parked requests looks at
 * theirs on a 1 ms timer; a grant in the same worker is acted on at once.
 *
 * A waiter of a higher priority goes before any of a lower one, and may
 * take the place of the lowest in a full queue.  A client's deadline
 * (its "timeout") ends its wait with a 504, and what is left of it is
 * written into the request when it leaves.
 */


#include "ngx_http_oip_module.h"


/* the period of the poll for grants made in other workers */
#define NGX_HTTP_OIP_ADM_POLL  1


static ngx_int_t ngx_http_oip_admission_refuse(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, ngx_uint_t status, ngx_uint_t retry,
    u_char *msg, u_char *last);
static u_char *ngx_http_oip_admission_budget(u_char *p, u_char *last,
    ngx_http_oip_admit_t *c);
static void ngx_http_oip_admission_park(ngx_http_request_t *r,
    ngx_http_oip_adm_t *adm);
static void ngx_http_oip_admission_wake(ngx_http_request_t *r);
static void ngx_http_oip_admission_poll(ngx_event_t *ev);
static void ngx_http_oip_admission_look(void);
static void ngx_http_oip_admission_finalize(ngx_http_request_t *r,
    ngx_int_t rc);
static ngx_int_t ngx_http_oip_admission_leaves(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx);
static ngx_int_t ngx_http_oip_admission_expired(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, uint64_t waited);


static ngx_str_t  ngx_http_oip_retry_after = ngx_string("Retry-After");


/* this worker's parked requests, and its poll */
static ngx_queue_t  ngx_http_oip_parked;
static ngx_event_t  ngx_http_oip_poll;


/*
 * oip_admit zone=NAME [key=STRING] [concurrency=N] [bytes=SIZE]
 *     [queue=N] [queue_bytes=SIZE] [wait=TIME] [levels=N]
 *     [default_level=N] | off
 */

char *
ngx_http_oip_admit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_oip_loc_conf_t *olcf = conf;

    off_t                              size;
    ngx_int_t                          n, queue;
    ngx_str_t                         *value, s;
    ngx_msec_t                         wait;
    ngx_uint_t                         i, queue_set;
    ngx_http_oip_admit_t              *a;
    ngx_http_compile_complex_value_t   ccv;

    if (olcf->admit != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        olcf->admit = NULL;
        return NGX_CONF_OK;
    }

    a = ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_admit_t));
    if (a == NULL) {
        return NGX_CONF_ERROR;
    }

    queue = 64;
    queue_set = 0;
    size = -1;
    wait = 10000;

    /* Triton's: 1 goes first, 0 and anything above 2 are level 2 */
    a->levels = 2;
    a->default_level = 0;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {
            s.data = value[i].data + 5;
            s.len = value[i].len - 5;

            if (s.len == 0) {
                goto invalid;
            }

            a->zone = ngx_http_oip_admission_zone_ref(cf, &s);
            if (a->zone == NULL) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "key=", 4) == 0) {
            s.data = value[i].data + 4;
            s.len = value[i].len - 4;

            a->key = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
            if (a->key == NULL) {
                return NGX_CONF_ERROR;
            }

            ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
            ccv.cf = cf;
            ccv.value = &s;
            ccv.complex_value = a->key;

            if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "concurrency=", 12) == 0) {
            n = ngx_atoi(value[i].data + 12, value[i].len - 12);

            if (n <= 0 || n > 1000000) {
                goto invalid;
            }

            a->concurrency = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "bytes=", 6) == 0) {
            s.data = value[i].data + 6;
            s.len = value[i].len - 6;

            if (ngx_parse_offset(&s) <= 0) {
                goto invalid;
            }

            a->bytes = ngx_parse_offset(&s);
            continue;
        }

        if (ngx_strncmp(value[i].data, "queue=", 6) == 0) {
            queue = ngx_atoi(value[i].data + 6, value[i].len - 6);

            if (queue == NGX_ERROR || queue > 1000000) {
                goto invalid;
            }

            queue_set = 1;
            continue;
        }

        if (ngx_strncmp(value[i].data, "queue_bytes=", 12) == 0) {
            s.data = value[i].data + 12;
            s.len = value[i].len - 12;

            size = ngx_parse_offset(&s);

            if (size < 0) {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "levels=", 7) == 0) {
            n = ngx_atoi(value[i].data + 7, value[i].len - 7);

            if (n <= 0 || n > 1000000) {
                goto invalid;
            }

            a->levels = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "default_level=", 14) == 0) {
            n = ngx_atoi(value[i].data + 14, value[i].len - 14);

            if (n <= 0 || n > 1000000) {
                goto invalid;
            }

            a->default_level = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "wait=", 5) == 0) {
            s.data = value[i].data + 5;
            s.len = value[i].len - 5;

            wait = ngx_parse_time(&s, 0);

            if (wait == (ngx_msec_t) NGX_ERROR) {
                goto invalid;
            }

            continue;
        }

        goto invalid;
    }

    if (a->zone == NULL) {
        return "takes zone=NAME";
    }

    if (a->concurrency == 0 && a->bytes == 0) {
        return "needs concurrency=N or bytes=SIZE, or both";
    }

    if (a->default_level == 0) {
        a->default_level = a->levels;

    } else if (a->default_level > a->levels) {
        return "has default_level= above its levels=";
    }

    /* without a wait nothing waits */

    if (wait == 0) {
        if (queue_set && queue) {
            return "has queue= without a wait";
        }

        queue = 0;
    }

    a->queue = queue;
    a->wait = wait;

    /* queued bodies are memory too: at most one more budget's worth */
    a->queue_bytes = (size >= 0) ? (uint64_t) size
                     : a->bytes ? a->bytes : (uint64_t) -1;

    olcf->admit = a;

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"",
                       &value[i]);

    return NGX_CONF_ERROR;
}


/*
 * The request's share, once its body is converted: NGX_DECLINED (on
 * with it: admitted, or not limited), NGX_AGAIN (it waits, parked), or
 * the status of a refusal (ctx->error set).
 */

ngx_int_t
ngx_http_oip_admission(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    u_char                    *p, *last;
    uint64_t                   deadline;
    ngx_int_t                  rc;
    ngx_str_t                  key;
    ngx_http_oip_adm_t        *adm;
    ngx_http_oip_admit_t      *c;
    ngx_http_oip_adm_ask_t     a;
    ngx_http_oip_loc_conf_t   *olcf;
    u_char                     msg[512];

    adm = &ctx->adm;
    adm->asked = 1;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);
    c = olcf->admit;

    if (c == NULL) {
        return ngx_http_oip_admission_leaves(r, ctx);
    }

    if (c->key == NULL) {
        key = ctx->model;

    } else if (ngx_http_complex_value(r, c->key, &key) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (key.len == 0) {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: admission: empty key, not limited");
        return ngx_http_oip_admission_leaves(r, ctx);
    }

    if (key.len > 65535) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "oip: admission key longer than 65535 bytes");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    last = msg + sizeof(msg) - 1;
    adm->zone = c->zone;
    adm->conf = c;
    adm->r = r;
    adm->start = ngx_http_oip_usec();

    a.key = key;
    a.model = ctx->model;
    a.bytes = ctx->vars.tensor_bytes;
    a.level = ctx->vars.has_priority ? ctx->vars.priority : c->default_level;
    a.conf = c;
    a.log = r->connection->log;
    a.shed = 0;

    /* the client's deadline, from its request line: a wait that could
     * only end in a 504 is not begun */

    deadline = 0;

    if (ctx->vars.has_timeout && ctx->vars.timeout) {
        deadline = ngx_http_oip_start_usec(r) + ctx->vars.timeout;

        if (deadline < adm->start + 1000) {
            return ngx_http_oip_admission_expired(r, ctx, 0);
        }
    }

    /* it could never be admitted: waiting would only time out */

    if (c->bytes && a.bytes > c->bytes) {
        adm->state = NGX_HTTP_OIP_ADM_SHED;

        p = ngx_slprintf(msg, last, "a request of %uL tensor bytes is "
                         "larger than model '%V''s admission budget (",
                         a.bytes, &ctx->model);
        p = ngx_http_oip_admission_budget(p, last, c);
        p = ngx_slprintf(p, last, ")");

        ctx->reason = OIP_REASON_LIMIT;

        return ngx_http_oip_admission_refuse(r, ctx,
                                           NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                           0, msg, p);
    }

    rc = ngx_http_oip_admission_take(c->zone, &a, &adm->share);

    ngx_log_debug6(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: admission key \"%V\", %uL bytes, level %ui: %i "
                   "(%ui in flight, %ui waiting)", &key, a.bytes, a.level,
                   rc, a.held, a.waiting);

    adm->level = a.level;

    switch (rc) {

    case NGX_OK:
        adm->state = NGX_HTTP_OIP_ADM_ADMITTED;
        return ngx_http_oip_admission_leaves(r, ctx);

    case NGX_AGAIN:
        adm->state = NGX_HTTP_OIP_ADM_WAITING;
        adm->deadline = adm->start + (uint64_t) c->wait * 1000;

        /* the earlier of the two ends the wait, and says how */

        if (deadline && deadline < adm->deadline) {
            adm->deadline = deadline;
            adm->expires = 1;
        }

        ngx_http_oip_admission_park(r, adm);

        if (a.shed) {
            /* waiters of a lower level gave their place: theirs to tell */
            ngx_http_oip_admission_look();
        }

        return NGX_AGAIN;

    case NGX_BUSY:
        adm->state = NGX_HTTP_OIP_ADM_SHED;

        p = ngx_slprintf(msg, last, "model '%V' is over its admission "
                         "budget (", &ctx->model);
        p = ngx_http_oip_admission_budget(p, last, c);
        p = ngx_slprintf(p, last, "): %ui in flight, and the queue is full "
                         "(%ui waiting)", a.held, a.waiting);

        return ngx_http_oip_admission_refuse(r, ctx,
                                             NGX_HTTP_TOO_MANY_REQUESTS,
                                             a.retry, msg, p);

    default: /* NGX_DECLINED */
        adm->state = NGX_HTTP_OIP_ADM_SHED;

        p = ngx_slprintf(msg, last, "model '%V' cannot be admitted: the "
                         "admission zone is full", &ctx->model);

        return ngx_http_oip_admission_refuse(r, ctx,
                                             NGX_HTTP_TOO_MANY_REQUESTS,
                                             1, msg, p);
    }
}


static ngx_int_t
ngx_http_oip_admission_refuse(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    ngx_uint_t status, ngx_uint_t retry, u_char *msg, u_char *last)
{
    u_char     *p;
    ngx_str_t   value;

    *last = '\0';

    if (retry) {
        p = ngx_pnalloc(r->pool, NGX_INT_T_LEN);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        value.data = p;
        value.len = ngx_sprintf(p, "%ui", retry) - p;

        if (ngx_http_oip_header_push(&r->headers_out.headers,
                                     &ngx_http_oip_retry_after, &value)
            == NULL)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    return ngx_http_oip_fail(r, ctx, status,
                             (status == NGX_HTTP_TOO_MANY_REQUESTS)
                             ? OIP_REASON_QUEUE_FULL : OIP_REASON_LIMIT,
                             (char *) msg);
}


static u_char *
ngx_http_oip_admission_budget(u_char *p, u_char *last,
    ngx_http_oip_admit_t *c)
{
    if (c->concurrency) {
        p = ngx_slprintf(p, last, "concurrency=%ui", c->concurrency);
    }

    if (c->bytes) {
        p = ngx_slprintf(p, last, "%sbytes=%uL", c->concurrency ? ", " : "",
                         c->bytes);
    }

    return p;
}


/* as limit_req parks one: a client that leaves is noticed, 499 */

static void
ngx_http_oip_admission_park(ngx_http_request_t *r, ngx_http_oip_adm_t *adm)
{
    if (ngx_http_oip_poll.handler == NULL) {
        ngx_queue_init(&ngx_http_oip_parked);

        /* not cancelable: a worker that quits lets its waiters finish */
        ngx_http_oip_poll.handler = ngx_http_oip_admission_poll;
        ngx_http_oip_poll.data = &ngx_http_oip_parked;
    }

    ngx_queue_insert_tail(&ngx_http_oip_parked, &adm->parked);

    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_oip_admission_wake;

    /* a client that left while its body was read: its edge came then */
    ngx_post_event(r->connection->read, &ngx_posted_events);

    if (!ngx_http_oip_poll.timer_set) {
        /* the cycle's log: one process alone reloads into a new cycle */
        ngx_http_oip_poll.log = ngx_cycle->log;
        ngx_add_timer(&ngx_http_oip_poll, NGX_HTTP_OIP_ADM_POLL);
    }
}


/* a parked request's write event: granted, its wait over, or neither */

static void
ngx_http_oip_admission_wake(ngx_http_request_t *r)
{
    u_char              *p, *last;
    uint64_t             now, granted;
    ngx_int_t            rc;
    ngx_uint_t           retry, grants, admitted, shed;
    ngx_http_oip_ctx_t  *ctx;
    ngx_http_oip_adm_t  *adm;
    u_char               msg[512];

    ctx = ngx_http_oip_get_ctx(r);
    adm = &ctx->adm;

    if (adm->state != NGX_HTTP_OIP_ADM_WAITING) {
        return;
    }

    now = ngx_http_oip_usec();
    granted = 0;
    grants = 0;
    retry = 1;
    shed = 0;

    if (ngx_http_oip_admission_granted(adm->share, &granted)) {
        admitted = 1;

    } else if (now < adm->deadline
               && !ngx_http_oip_admission_shed(adm->share))
    {
        /* its own connection's event: it waits on */
        return;

    } else {
        /* NGX_DONE: a release granted it as its wait ran out;
         * NGX_DECLINED: a request of a higher level took its place */

        rc = ngx_http_oip_admission_leave(adm->zone, adm->share, &retry,
                                          &grants);
        admitted = (rc == NGX_DONE);
        shed = (rc == NGX_DECLINED);

        if (admitted) {
            (void) ngx_http_oip_admission_granted(adm->share, &granted);
        }
    }

    ngx_queue_remove(&adm->parked);
    adm->queue_usec = now - adm->start;

    if (admitted) {
        adm->state = NGX_HTTP_OIP_ADM_QUEUED;

        if (granted && now >= granted) {
            adm->handover_usec = now - granted;
            adm->handed = 1;
        }

        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: admitted after %uL us, hand-over %uL us",
                       adm->queue_usec, adm->handover_usec);

        rc = ngx_http_oip_admission_leaves(r, ctx);

        if (rc != NGX_DECLINED) {
            ctx->req.status = rc;
            ctx->req.phase = NGX_HTTP_OIP_PHASE_REFUSED;
        }

    } else if (adm->expires && !shed) {
        adm->share = NULL;
        ctx->req.status = ngx_http_oip_admission_expired(r, ctx,
                                                         adm->queue_usec);
        ctx->req.phase = NGX_HTTP_OIP_PHASE_REFUSED;

    } else {
        adm->share = NULL;
        adm->state = shed ? NGX_HTTP_OIP_ADM_SHED : NGX_HTTP_OIP_ADM_TIMEOUT;

        last = msg + sizeof(msg) - 1;

        if (shed) {
            p = ngx_slprintf(msg, last, "model '%V' is over its admission "
                             "budget (", &ctx->model);
            p = ngx_http_oip_admission_budget(p, last, adm->conf);
            p = ngx_slprintf(p, last, ") and its queue is full: a request "
                             "of a higher priority took the place of this "
                             "one (priority %ui) after %M ms", adm->level,
                             (ngx_msec_t) (adm->queue_usec / 1000));

        } else {
            p = ngx_slprintf(msg, last, "model '%V' waited %M ms for its "
                             "admission budget (", &ctx->model,
                             (ngx_msec_t) (adm->queue_usec / 1000));
            p = ngx_http_oip_admission_budget(p, last, adm->conf);
            p = ngx_slprintf(p, last, ") and was not admitted");
        }

        ctx->req.status = ngx_http_oip_admission_refuse(r, ctx,
                                                NGX_HTTP_TOO_MANY_REQUESTS,
                                                retry, msg, p);
        ctx->req.phase = NGX_HTTP_OIP_PHASE_REFUSED;

        if (grants) {
            ngx_http_oip_admission_look();
        }
    }

    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;

    ngx_http_core_run_phases(r);
}


static void
ngx_http_oip_admission_poll(ngx_event_t *ev)
{
    ngx_http_oip_admission_look();

    if (!ngx_queue_empty(&ngx_http_oip_parked)) {
        ev->log = ngx_cycle->log;
        ngx_add_timer(ev, NGX_HTTP_OIP_ADM_POLL);
    }
}


/* this worker's parked requests that are granted, or whose wait is over */

static void
ngx_http_oip_admission_look(void)
{
    uint64_t             now, granted;
    ngx_queue_t         *q;
    ngx_http_oip_adm_t  *adm;

    if (ngx_http_oip_poll.handler == NULL) {
        return;
    }

    now = ngx_http_oip_usec();

    for (q = ngx_queue_head(&ngx_http_oip_parked);
         q != ngx_queue_sentinel(&ngx_http_oip_parked);
         q = ngx_queue_next(q))
    {
        adm = ngx_queue_data(q, ngx_http_oip_adm_t, parked);

        if (ngx_http_oip_admission_granted(adm->share, &granted)
            || now >= adm->deadline
            || ngx_http_oip_admission_shed(adm->share))
        {
            ngx_post_event(adm->r->connection->write, &ngx_posted_events);
        }
    }
}


/*
 * its answer's headers are here: its upstream's end gives the share back,
 * and says whether its client left first (a stream's too, with no share)
 */

void
ngx_http_oip_admission_upstream(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx)
{
    ngx_http_upstream_t  *u;

    u = r->upstream;

    if (ctx->adm.finalize || u == NULL || u->finalize_request == NULL) {
        return;
    }

    ctx->adm.finalize = u->finalize_request;
    u->finalize_request = ngx_http_oip_admission_finalize;
}


static void
ngx_http_oip_admission_finalize(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_get_ctx(r);

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: upstream finalized (%i), admission share released",
                   rc);

    if (rc == NGX_HTTP_CLIENT_CLOSED_REQUEST) {
        /* its runtime's call is cancelled: the connection is closed */
        ctx->adm.left = 1;
    }

    ngx_http_oip_admission_end(ctx);
    ctx->adm.finalize(r, rc);
}


/*
 * The share given back, once: at its upstream's end, or at the end of
 * the main request (the context's pool cleanup); a waiter whose client
 * left leaves the queue.
 */

void
ngx_http_oip_admission_end(ngx_http_oip_ctx_t *ctx)
{
    ngx_int_t            rc;
    ngx_uint_t           grants, retry;
    ngx_http_oip_adm_t  *adm;

    adm = &ctx->adm;

    if (adm->share == NULL) {
        return;
    }

    if (adm->state == NGX_HTTP_OIP_ADM_WAITING) {
        ngx_queue_remove(&adm->parked);
        adm->state = NGX_HTTP_OIP_ADM_CANCELLED;

        rc = ngx_http_oip_admission_leave(adm->zone, adm->share, &retry,
                                          &grants);

        if (rc == NGX_DONE) {
            /* granted meanwhile: given back at once */
            grants = ngx_http_oip_admission_release(adm->zone, adm->share);
        }

    } else {
        grants = ngx_http_oip_admission_release(adm->zone, adm->share);
    }

    adm->share = NULL;

    if (grants) {
        ngx_http_oip_admission_look();
    }
}


/*
 * An upstream error that says the runtime's own queue is full (a 429,
 * or a 503 in Triton's words, REST's or gRPC's), read by the response
 * path: the client may come back, a 429.
 */

ngx_int_t
ngx_http_oip_admission_overloaded(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, oip_result_t *res)
{
    if (r->headers_out.status == NGX_HTTP_TOO_MANY_REQUESTS
        || (r->headers_out.status == NGX_HTTP_SERVICE_UNAVAILABLE
            && res->reason == OIP_REASON_QUEUE_FULL))
    {
        return ngx_http_oip_admission_overload(r, ctx);
    }

    return NGX_OK;
}


/*
 * The runtime answered that its own queue is full (a 429, or Triton's
 * 503 "Exceeds maximum queue size"): a 429 to the client, with the
 * runtime's Retry-After or 1, counted as the runtime's refusal.
 */

ngx_int_t
ngx_http_oip_admission_overload(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx)
{
    ngx_str_t     value;
    oip_header_t  h;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: the runtime's queue is full (%ui): 429",
                   r->headers_out.status);

    ctx->adm.state = NGX_HTTP_OIP_ADM_RUNTIME;
    r->headers_out.status = NGX_HTTP_TOO_MANY_REQUESTS;
    ngx_str_null(&r->headers_out.status_line);

    /* the runtime's own, else 1 */

    if (ngx_http_oip_header(&r->headers_out.headers,
                            &ngx_http_oip_retry_after, &h))
    {
        return NGX_OK;
    }

    ngx_str_set(&value, "1");

    return ngx_http_oip_header_push(&r->headers_out.headers,
                                    &ngx_http_oip_retry_after, &value)
           ? NGX_OK : NGX_ERROR;
}


/*
 * The codec's part of the priority: oip_priority's value, which
 * overrides the client's, and the location's levels.  NGX_ERROR: the
 * value is not a priority (logged: the configuration's fault).
 */

ngx_int_t
ngx_http_oip_admission_options(ngx_http_request_t *r, oip_options_t *opt)
{
    u_char                   *p;
    uint64_t                  v;
    ngx_str_t                 s;
    ngx_http_oip_loc_conf_t  *olcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (olcf->admit) {
        opt->levels = olcf->admit->levels;
        opt->default_level = olcf->admit->default_level;
    }

    if (olcf->priority == NULL) {
        return NGX_OK;
    }

    if (ngx_http_complex_value(r, olcf->priority, &s) != NGX_OK) {
        return NGX_ERROR;
    }

    /* empty (a map's default, say): the client's own */

    if (s.len == 0) {
        return NGX_OK;
    }

    v = 0;

    for (p = s.data; p < s.data + s.len; p++) {
        if (*p < '0' || *p > '9'
            || v > (0x7fffffffffffffffULL - (uint64_t) (*p - '0')) / 10)
        {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "oip_priority \"%V\" is not a priority: an "
                          "integer from 0 to 9223372036854775807 is", &s);
            return NGX_ERROR;
        }

        v = v * 10 + (uint64_t) (*p - '0');
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: oip_priority %uL", v);

    opt->priority = v;
    opt->priority_set = 1;

    return NGX_OK;
}


/*
 * It leaves for its upstream: what is left of its client's deadline
 * written where the timeout was (ngx_http_oip_request.c kept the
 * place), or a 504 with less than a millisecond left.
 */

static ngx_int_t
ngx_http_oip_admission_leaves(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    u_char    *p, *end;
    uint64_t   deadline, now, left;
    u_char     digits[NGX_INT64_LEN], text[NGX_INT64_LEN];

    if (!ctx->vars.has_timeout || ctx->vars.timeout == 0) {
        return NGX_DECLINED;
    }

    now = ngx_http_oip_usec();
    deadline = ngx_http_oip_start_usec(r) + ctx->vars.timeout;
    left = (deadline > now) ? deadline - now : 0;

    if (left < 1000) {
        return ngx_http_oip_admission_expired(r, ctx, ctx->adm.queue_usec);
    }

    if (ctx->req.deadline_at == NULL && ctx->req.deadline_file == NULL) {
        return NGX_DECLINED;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: timeout %uL us, %uL left: forwarded",
                   ctx->vars.timeout, left);

    /* written here, then where the body holds it: memory or its file */

    p = text;

    if (ctx->req.deadline_pb) {
        /* a varint of ten bytes, as the codec wrote it */

        for (end = p + 9; p < end; p++) {
            *p = (u_char) ((left & 0x7f) | 0x80);
            left >>= 7;
        }

        *p = (u_char) left;

    } else {
        /* fewer digits than the client's, or as many: spaces after */

        end = ngx_sprintf(digits, "%uL", left);

        if ((size_t) (end - digits) > ctx->req.deadline_len
            || ctx->req.deadline_len > sizeof(text))
        {
            return NGX_DECLINED;
        }

        p = ngx_cpymem(p, digits, end - digits);
        ngx_memset(p, ' ', ctx->req.deadline_len - (end - digits));
    }

    if (ctx->req.deadline_at) {
        ngx_memcpy(ctx->req.deadline_at, text, ctx->req.deadline_len);
        return NGX_DECLINED;
    }

    if (ngx_write_file(ctx->req.deadline_file, text, ctx->req.deadline_len,
                       ctx->req.deadline_off)
        != (ssize_t) ctx->req.deadline_len)
    {
        /* the client's own deadline goes: the runtime's is later */
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "oip: the remaining timeout could not be written "
                      "to \"%V\"", &ctx->req.deadline_file->name);
    }

    return NGX_DECLINED;
}


/* its client's deadline passed: a 504, never forwarded, its share back */

static ngx_int_t
ngx_http_oip_admission_expired(ngx_http_request_t *r,
    ngx_http_oip_ctx_t *ctx, uint64_t waited)
{
    u_char  *p;
    u_char   msg[256];

    ngx_http_oip_admission_end(ctx);
    ctx->adm.state = NGX_HTTP_OIP_ADM_EXPIRED;

    if (waited) {
        p = ngx_snprintf(msg, sizeof(msg) - 1, "model '%V': the request's "
                         "deadline (timeout %uL us) passed after %M ms in "
                         "the admission queue: not forwarded", &ctx->model,
                         ctx->vars.timeout, (ngx_msec_t) (waited / 1000));

    } else {
        p = ngx_snprintf(msg, sizeof(msg) - 1, "model '%V': the request's "
                         "deadline (timeout %uL us) passed before it could "
                         "be forwarded", &ctx->model, ctx->vars.timeout);
    }

    *p = '\0';

    return ngx_http_oip_fail(r, ctx, NGX_HTTP_GATEWAY_TIME_OUT,
                             OIP_REASON_OTHER, (char *) msg);
}


/* its outcome, for the variables and the metrics */

ngx_http_oip_adm_e
ngx_http_oip_admission_result(ngx_http_oip_ctx_t *ctx)
{
    /* still waiting when logged, or gone before its answer ended: its
     * client left */

    return (ctx->adm.state == NGX_HTTP_OIP_ADM_WAITING || ctx->adm.left)
           ? NGX_HTTP_OIP_ADM_CANCELLED : ctx->adm.state;
}
