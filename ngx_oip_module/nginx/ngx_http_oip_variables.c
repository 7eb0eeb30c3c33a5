
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Variables for nginx's own engines: log_format, limit_req_zone, map,
 * split_clients, proxy_cache_key.  $oip_model and $oip_model_version
 * come from the URI and are there from the first phase; the others
 * describe the body and are there once the request path has processed
 * it (empty before, and for a refused request but $oip_error).
 */


#include "ngx_http_oip_module.h"


typedef enum {
    NGX_HTTP_OIP_VAR_INPUTS = 0,
    NGX_HTTP_OIP_VAR_ELEMENTS,
    NGX_HTTP_OIP_VAR_TENSOR_BYTES,
    NGX_HTTP_OIP_VAR_PRIORITY,
    NGX_HTTP_OIP_VAR_TIMEOUT,
    NGX_HTTP_OIP_VAR_EVENTS
} ngx_http_oip_var_count_e;


static ngx_int_t ngx_http_oip_var_model(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_string(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_reason(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_count(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_form(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_convert_time(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_sequence(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_admission(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_queue_time(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_first_event(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_oip_var_seconds(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uint64_t usec, ngx_uint_t micro);
static ngx_http_oip_ctx_t *ngx_http_oip_var_ctx(ngx_http_request_t *r);
static u_char *ngx_http_oip_var_decimal(u_char *p, uint64_t n, size_t width);
static void ngx_http_oip_var_str(ngx_http_variable_value_t *v, u_char *data,
    size_t len);


static ngx_http_variable_t  ngx_http_oip_vars[] = {

    { ngx_string("oip_model"), NULL, ngx_http_oip_var_model, 0,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_model_version"), NULL, ngx_http_oip_var_model, 1,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_request_id"), NULL, ngx_http_oip_var_string,
      offsetof(ngx_http_oip_ctx_t, vars.id), NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_inputs"), NULL, ngx_http_oip_var_count,
      NGX_HTTP_OIP_VAR_INPUTS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_elements"), NULL, ngx_http_oip_var_count,
      NGX_HTTP_OIP_VAR_ELEMENTS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_tensor_bytes"), NULL, ngx_http_oip_var_count,
      NGX_HTTP_OIP_VAR_TENSOR_BYTES, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_in_form"), NULL, ngx_http_oip_var_form, 0,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_upstream_form"), NULL, ngx_http_oip_var_form, 1,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_error"), NULL, ngx_http_oip_var_string,
      offsetof(ngx_http_oip_ctx_t, error), NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_reason"), NULL, ngx_http_oip_var_reason, 0,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_convert_time"), NULL, ngx_http_oip_var_convert_time,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_digest"), NULL, ngx_http_oip_var_string,
      offsetof(ngx_http_oip_ctx_t, vars.digest), NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_priority"), NULL, ngx_http_oip_var_count,
      NGX_HTTP_OIP_VAR_PRIORITY, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_timeout"), NULL, ngx_http_oip_var_count,
      NGX_HTTP_OIP_VAR_TIMEOUT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_sequence_id"), NULL, ngx_http_oip_var_sequence, 0,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_sequence_start"), NULL, ngx_http_oip_var_sequence, 1,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_sequence_end"), NULL, ngx_http_oip_var_sequence, 2,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_admission"), NULL, ngx_http_oip_var_admission, 0,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_queue_time"), NULL, ngx_http_oip_var_queue_time, 0,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_handover_time"), NULL, ngx_http_oip_var_queue_time, 1,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_stream_events"), NULL, ngx_http_oip_var_count,
      NGX_HTTP_OIP_VAR_EVENTS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("oip_first_event_time"), NULL,
      ngx_http_oip_var_first_event, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


static ngx_str_t  ngx_http_oip_forms[] = {
    ngx_null_string,                     /* OIP_SHAPE_NONE */
    ngx_string("json"),
    ngx_string("binary"),
    ngx_string("mixed"),
    ngx_string("raw")
};


ngx_int_t
ngx_http_oip_variables_add(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_oip_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/*
 * From the URI of any infer request, oip on or not, from the first
 * phase: limit_req_zone and map key on it.
 */

static ngx_int_t
ngx_http_oip_var_model(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_str_t            model, version;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    /* a context made only for nginx's error page has no model */

    if (ctx && ctx->model.len) {
        model = ctx->model;
        version = ctx->version;

    } else if (ngx_http_oip_infer_uri(&r->uri, &model, &version) != NGX_OK) {
        v->not_found = 1;
        return NGX_OK;
    }

    if (data) {
        model = version;
    }

    if (model.len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    ngx_http_oip_var_str(v, model.data, model.len);

    return NGX_OK;
}


/* a string of the context: the id (set once processed), the error */

static ngx_int_t
ngx_http_oip_var_string(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_str_t           *str;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    if (ctx == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    str = (ngx_str_t *) ((u_char *) ctx + data);

    if (str->len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    ngx_http_oip_var_str(v, str->data, str->len);

    return NGX_OK;
}


/*
 * Why the module refused the request, as the metrics' reason label
 * says it (syntax, shape, datatype, limit, signature, encoding, other);
 * empty when it did not refuse it
 */

static ngx_int_t
ngx_http_oip_var_reason(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_str_t           *name;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    if (ctx == NULL || ctx->error.len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    name = &ngx_http_oip_reasons[ngx_http_oip_reason(ctx,
                                                     r->headers_out.status)];

    ngx_http_oip_var_str(v, name->data, name->len);

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_var_count(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    u_char              *p;
    uint64_t             n;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    if (ctx == NULL || !ctx->vars.counted) {
        v->not_found = 1;
        return NGX_OK;
    }

    switch (data) {
    case NGX_HTTP_OIP_VAR_INPUTS:
        n = ctx->vars.ninputs;
        break;
    case NGX_HTTP_OIP_VAR_ELEMENTS:
        n = ctx->vars.elements;
        break;
    case NGX_HTTP_OIP_VAR_PRIORITY:
        n = ctx->vars.priority;
        break;
    case NGX_HTTP_OIP_VAR_TIMEOUT:
        n = ctx->vars.timeout;
        break;
    case NGX_HTTP_OIP_VAR_EVENTS:
        n = ctx->stream ? ctx->stream->events : 0;
        break;
    default:
        n = ctx->vars.tensor_bytes;
    }

    /* an absent priority; an absent timeout, or 0: none */

    if ((data == NGX_HTTP_OIP_VAR_PRIORITY && !ctx->vars.has_priority)
        || (data == NGX_HTTP_OIP_VAR_TIMEOUT && n == 0)
        || (data == NGX_HTTP_OIP_VAR_EVENTS && !ctx->req.stream))
    {
        v->not_found = 1;
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_http_oip_var_str(v, p, ngx_http_oip_var_decimal(p, n, 1) - p);

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_var_form(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_uint_t           form;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    form = (ctx == NULL || !ctx->vars.counted) ? OIP_SHAPE_NONE
           : data ? ctx->vars.upstream_form : ctx->vars.in_form;

    if (form == OIP_SHAPE_NONE || form > OIP_SHAPE_RAW) {
        v->not_found = 1;
        return NGX_OK;
    }

    ngx_http_oip_var_str(v, ngx_http_oip_forms[form].data,
                         ngx_http_oip_forms[form].len);

    return NGX_OK;
}


/* the request's and the answer's conversions, as $request_time says */

static ngx_int_t
ngx_http_oip_var_convert_time(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char              *p, *q;
    uint64_t             ms;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    if (ctx == NULL || !ctx->vars.counted) {
        v->not_found = 1;
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_TIME_T_LEN + 4);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ms = (ctx->vars.request_usec + ctx->vars.answer_usec + 500) / 1000;

    q = ngx_http_oip_var_decimal(p, ms / 1000, 1);
    *q++ = '.';
    q = ngx_http_oip_var_decimal(q, ms % 1000, 3);

    ngx_http_oip_var_str(v, p, q - p);

    return NGX_OK;
}


/*
 * Triton's sequence batcher's parameters: the id (its digits, or the
 * string unescaped; empty for none, 0 or ""), and (data 1, 2) "1" for
 * sequence_start or sequence_end true, else empty.
 */

static ngx_int_t
ngx_http_oip_var_sequence(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char              *p;
    ngx_uint_t           flag;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    if (ctx == NULL || !ctx->vars.counted) {
        v->not_found = 1;
        return NGX_OK;
    }

    if (data) {
        flag = (data == 1) ? ctx->vars.sequence_start
                           : ctx->vars.sequence_end;

        if (!flag) {
            v->not_found = 1;
            return NGX_OK;
        }

        ngx_http_oip_var_str(v, (u_char *) "1", 1);
        return NGX_OK;
    }

    if (!ctx->vars.has_sequence) {
        v->not_found = 1;
        return NGX_OK;
    }

    if (ctx->vars.sequence_str.len) {
        ngx_http_oip_var_str(v, ctx->vars.sequence_str.data,
                             ctx->vars.sequence_str.len);
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_http_oip_var_str(v, p, ngx_sprintf(p, "%uL", ctx->vars.sequence_id)
                               - p);

    return NGX_OK;
}


/* what admission made of it: empty when no budget applied */

static ngx_int_t
ngx_http_oip_var_admission(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_oip_ctx_t  *ctx;
    ngx_http_oip_adm_e   result;

    static ngx_str_t  results[] = {
        ngx_string("admitted"), ngx_string("queued"), ngx_string("shed"),
        ngx_string("timeout"), ngx_string("cancelled"), ngx_string("runtime"),
        ngx_string("expired")
    };

    ctx = ngx_http_oip_var_ctx(r);
    result = ctx ? ngx_http_oip_admission_result(ctx) : 0;

    if (result == NGX_HTTP_OIP_ADM_NONE) {
        v->not_found = 1;
        return NGX_OK;
    }

    ngx_http_oip_var_str(v, results[result - 1].data,
                         results[result - 1].len);

    return NGX_OK;
}


/*
 * How long it waited for its share (seconds, milliseconds as
 * $request_time says), or (data 1) how long from the release that
 * granted it to its resumption (seconds, microseconds); empty when it
 * did not wait, or was not granted.
 */

static ngx_int_t
ngx_http_oip_var_queue_time(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    uint64_t             usec;
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    if (ctx == NULL || ctx->adm.zone == NULL
        || ctx->adm.state == NGX_HTTP_OIP_ADM_SHED
        || (data && !ctx->adm.handed))
    {
        v->not_found = 1;
        return NGX_OK;
    }

    if (data) {
        usec = ctx->adm.handover_usec;

    } else if (ctx->adm.state == NGX_HTTP_OIP_ADM_WAITING
               || ctx->adm.state == NGX_HTTP_OIP_ADM_CANCELLED)
    {
        /* its client left: until now */
        usec = ngx_http_oip_usec() - ctx->adm.start;

    } else {
        usec = ctx->adm.queue_usec;
    }

    return ngx_http_oip_var_seconds(r, v, usec, data);
}


/* from the request line to its stream's first event; empty without one */

static ngx_int_t
ngx_http_oip_var_first_event(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_oip_ctx_t  *ctx;

    ctx = ngx_http_oip_var_ctx(r);

    if (ctx == NULL || ctx->stream == NULL || ctx->stream->events == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    return ngx_http_oip_var_seconds(r, v, ctx->stream->first_usec, 0);
}


/* seconds: milliseconds as $request_time says, or (micro) microseconds */

static ngx_int_t
ngx_http_oip_var_seconds(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uint64_t usec, ngx_uint_t micro)
{
    u_char  *p, *q;

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN + 8);
    if (p == NULL) {
        return NGX_ERROR;
    }

    if (!micro) {
        usec = (usec + 500) / 1000 * 1000;
    }

    q = ngx_http_oip_var_decimal(p, usec / 1000000, 1);
    *q++ = '.';
    q = micro ? ngx_http_oip_var_decimal(q, usec % 1000000, 6)
              : ngx_http_oip_var_decimal(q, usec % 1000000 / 1000, 3);

    ngx_http_oip_var_str(v, p, q - p);

    return NGX_OK;
}


static ngx_http_oip_ctx_t *
ngx_http_oip_var_ctx(ngx_http_request_t *r)
{
    return ngx_http_oip_get_ctx(r->main);
}


/*
 * n in decimal, at least width digits: ngx_sprintf() parses its format
 * on every call, which costs an access log line more than the numbers.
 */

static u_char *
ngx_http_oip_var_decimal(u_char *p, uint64_t n, size_t width)
{
    u_char    *q, *end;
    size_t     len;
    uint64_t   m;

    /* the digits counted, then written in place from the last */

    for (len = 1, m = n; m >= 10; m /= 10) {
        len++;
    }

    end = p + ngx_max(len, width);

    for (q = end; q > p; n /= 10) {
        *--q = (u_char) ('0' + n % 10);
    }

    return end;
}


static void
ngx_http_oip_var_str(ngx_http_variable_value_t *v, u_char *data, size_t len)
{
    v->data = data;
    v->len = len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
}
