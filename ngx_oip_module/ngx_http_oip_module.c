
/*
 * Copyright (C) ngx_oip_module authors
 *
 * ngx_http_oip_module: an Open Inference Protocol gateway.  Directives,
 * configuration and the registration of the request handler; the work
 * is in ngx_http_oip_request.c and in the nginx-free codec (oip_*.c).
 */


#include "ngx_http_oip_module.h"


static char *ngx_http_oip_raw_input(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static void *ngx_http_oip_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_oip_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static ngx_int_t ngx_http_oip_init(ngx_conf_t *cf);


static ngx_conf_enum_t  ngx_http_oip_forms[] = {
    { ngx_string("keep"), OIP_FORM_KEEP },
    { ngx_string("binary"), OIP_FORM_BINARY },
    { ngx_string("json"), OIP_FORM_JSON },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_oip_raw_forms[] = {
    { ngx_string("binary"), OIP_FORM_BINARY },
    { ngx_string("json"), OIP_FORM_JSON },
    { ngx_null_string, 0 }
};


static ngx_conf_num_bounds_t  ngx_http_oip_depth_bounds = {
    ngx_conf_check_num_bounds, 1, 100000
};


static ngx_command_t  ngx_http_oip_commands[] = {

    { ngx_string("oip"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, enable),
      NULL },

    { ngx_string("oip_upstream_inputs"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, inputs),
      &ngx_http_oip_forms },

    { ngx_string("oip_upstream_outputs"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, outputs),
      &ngx_http_oip_forms },

    { ngx_string("oip_raw_input"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE13,
      ngx_http_oip_raw_input,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("oip_raw_outputs"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, raw_outputs),
      &ngx_http_oip_raw_forms },

    { ngx_string("oip_max_json_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_off_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, max_json_size),
      NULL },

    { ngx_string("oip_max_tensor_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_off_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, max_tensor_size),
      NULL },

    { ngx_string("oip_max_depth"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, max_depth),
      &ngx_http_oip_depth_bounds },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_oip_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_oip_init,                     /* postconfiguration */

    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_oip_create_loc_conf,          /* create location configuration */
    ngx_http_oip_merge_loc_conf            /* merge location configuration */
};


ngx_module_t  ngx_http_oip_module = {
    NGX_MODULE_V1,
    &ngx_http_oip_module_ctx,              /* module context */
    ngx_http_oip_commands,                 /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static void *
ngx_http_oip_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_oip_loc_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_loc_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    conf->enable = NGX_CONF_UNSET;
    conf->inputs = NGX_CONF_UNSET_UINT;
    conf->outputs = NGX_CONF_UNSET_UINT;
    conf->raw = NGX_CONF_UNSET_PTR;
    conf->raw_outputs = NGX_CONF_UNSET_UINT;
    conf->max_json_size = NGX_CONF_UNSET;
    conf->max_tensor_size = NGX_CONF_UNSET;
    conf->max_depth = NGX_CONF_UNSET_UINT;

    return conf;
}


static char *
ngx_http_oip_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_oip_loc_conf_t *prev = parent;
    ngx_http_oip_loc_conf_t *conf = child;

    ngx_conf_merge_value(conf->enable, prev->enable, 0);
    ngx_conf_merge_uint_value(conf->inputs, prev->inputs, OIP_FORM_KEEP);
    ngx_conf_merge_uint_value(conf->outputs, prev->outputs, OIP_FORM_KEEP);
    ngx_conf_merge_ptr_value(conf->raw, prev->raw, NULL);
    ngx_conf_merge_uint_value(conf->raw_outputs, prev->raw_outputs,
                              OIP_FORM_BINARY);
    ngx_conf_merge_off_value(conf->max_json_size, prev->max_json_size,
                             64 * 1024 * 1024);
    ngx_conf_merge_off_value(conf->max_tensor_size, prev->max_tensor_size,
                             64 * 1024 * 1024);

    if ((uint64_t) conf->max_json_size > NGX_MAX_SIZE_T_VALUE / 4
        || (uint64_t) conf->max_tensor_size > NGX_MAX_SIZE_T_VALUE / 4)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "oip_max_json_size and oip_max_tensor_size "
                           "must be below %uz", NGX_MAX_SIZE_T_VALUE / 4);
        return NGX_CONF_ERROR;
    }
    ngx_conf_merge_uint_value(conf->max_depth, prev->max_depth, 100);

    return NGX_CONF_OK;
}


/* oip_raw_input NAME DATATYPE DIMS | off */

static char *
ngx_http_oip_raw_input(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_oip_loc_conf_t *olcf = conf;

    char        err[128];
    ngx_str_t  *value;

    if (olcf->raw != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2) {
        if (ngx_strcmp(value[1].data, "off") != 0) {
            return "takes NAME DATATYPE DIMS, or off";
        }

        olcf->raw = NULL;
        return NGX_CONF_OK;
    }

    olcf->raw = ngx_palloc(cf->pool, sizeof(oip_raw_input_t));
    if (olcf->raw == NULL) {
        return NGX_CONF_ERROR;
    }

    if (oip_raw_input_init(olcf->raw, value[1].data, value[1].len,
                           value[2].data, value[2].len, value[3].data,
                           value[3].len, err, sizeof(err))
        != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "oip_raw_input: %s", err);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


void
ngx_http_oip_options(ngx_http_oip_loc_conf_t *olcf, oip_options_t *opt)
{
    opt->inputs = olcf->inputs;
    opt->outputs = olcf->outputs;
    opt->max_json_size = (size_t) olcf->max_json_size;
    opt->max_tensor_size = (size_t) olcf->max_tensor_size;
    opt->max_depth = olcf->max_depth;
    opt->raw = olcf->raw;
    opt->raw_outputs = olcf->raw_outputs;
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


void
ngx_http_oip_allocator(ngx_http_request_t *r, oip_alloc_t *alloc)
{
    alloc->alloc = ngx_http_oip_alloc;
    alloc->free = ngx_http_oip_free;
    alloc->data = r->pool;
}


/* the first header of that name (any case), and how many there are */

ngx_table_elt_t *
ngx_http_oip_header_find(ngx_list_t *headers, const char *name, size_t len,
    ngx_uint_t *count)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h, *found;

    found = NULL;
    *count = 0;

    part = &headers->part;
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

        if (h[i].hash != 0 && h[i].key.len == len
            && ngx_strncasecmp(h[i].key.data, (u_char *) name, len) == 0)
        {
            if ((*count)++ == 0) {
                found = &h[i];
            }
        }
    }

    return found;
}


static ngx_int_t
ngx_http_oip_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_oip_request_handler;

    return ngx_http_oip_response_init(cf);
}
