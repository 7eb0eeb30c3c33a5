
/*
 * Copyright (C) ngx_oip_module authors
 *
 * ngx_http_oip_module: an Open Inference Protocol gateway.  This file
 * owns the directives and the configuration, and registers the two
 * paths: the request (ngx_http_oip_request.c) and the response
 * (ngx_http_oip_response.c).  The request path asks
 * ngx_http_oip_signature.c for the model's signature, whose directives
 * are there too; the helpers every file uses are ngx_http_oip_util.c's.
 * The protocol itself is the nginx-free codec's (../codec/).
 */


#include "ngx_http_oip_module.h"


static char *ngx_http_oip_raw_input(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_oip_signatures(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_oip_signature_optional(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static void *ngx_http_oip_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_oip_create_srv_conf(ngx_conf_t *cf);
static void *ngx_http_oip_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_oip_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static ngx_int_t ngx_http_oip_init(ngx_conf_t *cf);
static ngx_int_t ngx_http_oip_init_process(ngx_cycle_t *cycle);


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


static ngx_conf_enum_t  ngx_http_oip_nonfinite[] = {
    { ngx_string("pass"), NGX_HTTP_OIP_NONFINITE_PASS },
    { ngx_string("refuse"), NGX_HTTP_OIP_NONFINITE_REFUSE },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_oip_errors[] = {
    { ngx_string("rewrite"), NGX_HTTP_OIP_ERRORS_REWRITE },
    { ngx_string("pass"), NGX_HTTP_OIP_ERRORS_PASS },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_oip_sig_fail[] = {
    { ngx_string("open"), NGX_HTTP_OIP_SIG_OPEN },
    { ngx_string("closed"), NGX_HTTP_OIP_SIG_CLOSED },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_oip_protocols[] = {
    { ngx_string("http"), NGX_HTTP_OIP_PROTOCOL_HTTP },
    { ngx_string("grpc"), NGX_HTTP_OIP_PROTOCOL_GRPC },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_oip_generates[] = {
    { ngx_string("native"), NGX_HTTP_OIP_GENERATE_NATIVE },
    { ngx_string("emulate"), NGX_HTTP_OIP_GENERATE_EMULATE },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_oip_grpc_contents[] = {
    { ngx_string("raw"), 0 },
    { ngx_string("typed"), 1 },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_oip_carriers[] = {
    { ngx_string("header"), OIP_CARRIER_HEADER },
    { ngx_string("sagemaker"), OIP_CARRIER_SAGEMAKER },
    { ngx_string("vertex"), OIP_CARRIER_VERTEX },
    { ngx_null_string, 0 }
};


static ngx_conf_num_bounds_t  ngx_http_oip_depth_bounds = {
    ngx_conf_check_num_bounds, 1, 100000
};

/* a window holds a few elements of any type, and a page to release */
static ngx_conf_num_bounds_t  ngx_http_oip_buffer_bounds = {
    ngx_conf_check_num_bounds, 64 * 1024, -1
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

    { ngx_string("oip_upstream_nonfinite"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, nonfinite),
      &ngx_http_oip_nonfinite },

    { ngx_string("oip_upstream_errors"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, errors),
      &ngx_http_oip_errors },

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

    { ngx_string("oip_signature_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_oip_signature_zone,
      0,
      0,
      NULL },

    { ngx_string("oip_signatures"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE12,
      ngx_http_oip_signatures,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("oip_signature_fail"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, sig_fail),
      &ngx_http_oip_sig_fail },

    { ngx_string("oip_signature_optional"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_oip_signature_optional,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("oip_signature_coerce"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, sig_coerce),
      NULL },

    { ngx_string("oip_upstream_protocol"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, protocol),
      &ngx_http_oip_protocols },

    { ngx_string("oip_generate"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, generate),
      &ngx_http_oip_generates },

    { ngx_string("oip_grpc_contents"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, grpc_typed),
      &ngx_http_oip_grpc_contents },

    { ngx_string("oip_upstream_header_carrier"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, carrier),
      &ngx_http_oip_carriers },

    { ngx_string("oip_grpc_max_message"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, grpc_max_message),
      NULL },

    { ngx_string("oip_stream_idle"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, stream_idle),
      NULL },

    { ngx_string("oip_buffer"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, buffer),
      &ngx_http_oip_buffer_bounds },

    { ngx_string("oip_thread_pool"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE12,
      ngx_http_oip_thread_pool,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("oip_admission_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_oip_admission_zone,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("oip_admit"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_oip_admit,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("oip_sequence"),
      NGX_HTTP_UPS_CONF|NGX_CONF_1MORE,
      ngx_http_oip_sequence,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("oip_priority"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_oip_loc_conf_t, priority),
      NULL },

    { ngx_string("oip_metrics_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_oip_metrics_zone,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("oip_metrics"),
      NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_oip_metrics,
      0,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_oip_module_ctx = {
    ngx_http_oip_variables_add,            /* preconfiguration */
    ngx_http_oip_init,                     /* postconfiguration */

    ngx_http_oip_create_main_conf,         /* create main configuration */
    NULL,                                  /* init main configuration */

    ngx_http_oip_create_srv_conf,          /* create server configuration */
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
    ngx_http_oip_init_process,             /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static void *
ngx_http_oip_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_oip_main_conf_t  *omcf;

    omcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_main_conf_t));
    if (omcf == NULL) {
        return NULL;
    }

    /*
     * valid from the start, in whichever process runs the configuration:
     * one process (master_process off) reloads without init_process
     */

    ngx_http_oip_signature_init(omcf);

    return omcf;
}


/* a server's: an upstream {} block's, where oip_sequence goes */

static void *
ngx_http_oip_create_srv_conf(ngx_conf_t *cf)
{
    return ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_srv_conf_t));
}


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
    conf->nonfinite = NGX_CONF_UNSET_UINT;
    conf->errors = NGX_CONF_UNSET_UINT;
    conf->max_json_size = NGX_CONF_UNSET;
    conf->max_tensor_size = NGX_CONF_UNSET;
    conf->max_depth = NGX_CONF_UNSET_UINT;
    conf->sig_zone = NGX_CONF_UNSET_PTR;
    conf->sig_fail = NGX_CONF_UNSET_UINT;
    conf->sig_optional = NGX_CONF_UNSET_PTR;
    conf->sig_coerce = NGX_CONF_UNSET;
    conf->protocol = NGX_CONF_UNSET_UINT;
    conf->grpc_typed = NGX_CONF_UNSET_UINT;
    conf->carrier = NGX_CONF_UNSET_UINT;
    conf->grpc_max_message = NGX_CONF_UNSET_SIZE;
    conf->stream_idle = NGX_CONF_UNSET_MSEC;
    conf->generate = NGX_CONF_UNSET_UINT;
    conf->thread_pool = NGX_CONF_UNSET_PTR;
    conf->thread_threshold = NGX_CONF_UNSET_SIZE;
    conf->buffer = NGX_CONF_UNSET_SIZE;
    conf->admit = NGX_CONF_UNSET_PTR;
    conf->priority = NGX_CONF_UNSET_PTR;

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

    /* Triton, the protocol's reference, reads NaN and Infinity */
    ngx_conf_merge_uint_value(conf->nonfinite, prev->nonfinite,
                              NGX_HTTP_OIP_NONFINITE_PASS);
    ngx_conf_merge_uint_value(conf->errors, prev->errors,
                              NGX_HTTP_OIP_ERRORS_REWRITE);
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

    if (conf->sig_zone == NGX_CONF_UNSET_PTR) {
        conf->sig_zone = prev->sig_zone;
        conf->sig_uri = prev->sig_uri;
    }

    ngx_conf_merge_ptr_value(conf->sig_zone, NULL, NULL);

    /* the runtime checks each request itself: its metadata failing must
     * not stop inference (closed is for fleets that would rather not) */
    ngx_conf_merge_uint_value(conf->sig_fail, prev->sig_fail,
                              NGX_HTTP_OIP_SIG_OPEN);
    ngx_conf_merge_ptr_value(conf->sig_optional, prev->sig_optional, NULL);
    ngx_conf_merge_value(conf->sig_coerce, prev->sig_coerce, 0);

    ngx_conf_merge_uint_value(conf->protocol, prev->protocol,
                              NGX_HTTP_OIP_PROTOCOL_HTTP);

    /* the transport is chosen here, once: the paths call its table */
    conf->transport = (conf->protocol == NGX_HTTP_OIP_PROTOCOL_GRPC)
                      ? &ngx_http_oip_grpc_transport
                      : &ngx_http_oip_http_transport;

    /* what runs today keeps running: emulation needs the signatures */
    ngx_conf_merge_uint_value(conf->generate, prev->generate,
                              NGX_HTTP_OIP_GENERATE_NATIVE);

    if (conf->enable && conf->generate == NGX_HTTP_OIP_GENERATE_EMULATE
        && conf->sig_zone == NULL)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"oip_generate emulate\" "
                           "needs oip_signatures in the location: a "
                           "generate request is mapped by its model's "
                           "inputs");
        return NGX_CONF_ERROR;
    }

    ngx_conf_merge_uint_value(conf->grpc_typed, prev->grpc_typed, 0);
    ngx_conf_merge_uint_value(conf->carrier, prev->carrier,
                              OIP_CARRIER_HEADER);

    /* gRPC servers' own default for the largest message they take */
    ngx_conf_merge_size_value(conf->grpc_max_message, prev->grpc_max_message,
                              4 * 1024 * 1024);

    ngx_conf_merge_msec_value(conf->stream_idle, prev->stream_idle, 0);

    if (ngx_http_oip_stream_check(cf, conf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    /*
     * bodies above it go through files: 16 MB keeps bodies of some
     * megabytes on the faster path in memory, and three of it (the
     * input mapped, the window, the JSON) stay under 64 MB
     */
    ngx_conf_merge_size_value(conf->buffer, prev->buffer, 16 * 1024 * 1024);

    /* below that, posting costs more than converting in the worker */
    ngx_conf_merge_ptr_value(conf->thread_pool, prev->thread_pool, NULL);
    ngx_conf_merge_size_value(conf->thread_threshold, prev->thread_threshold,
                              256 * 1024);

    ngx_conf_merge_ptr_value(conf->admit, prev->admit, NULL);
    ngx_conf_merge_ptr_value(conf->priority, prev->priority, NULL);

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


static ngx_int_t
ngx_http_oip_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    if (ngx_http_oip_request_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_oip_metrics_log;

    if (ngx_http_oip_digest_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    /* under the response path's: it passes streams on to them */
    if (ngx_http_oip_stream_init(cf) != NGX_OK
        || ngx_http_oip_flow_init(cf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_oip_response_init(cf);
}

/* a worker's own state: it starts with nothing in flight */

static ngx_int_t
ngx_http_oip_init_process(ngx_cycle_t *cycle)
{
    ngx_http_oip_main_conf_t  *omcf;

    omcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_oip_module);

    if (omcf) {
        ngx_http_oip_signature_init(omcf);
        ngx_http_oip_admission_start(cycle, omcf->admission);
    }

    return NGX_OK;
}


/* oip_signatures URI zone=NAME | off */

static char *
ngx_http_oip_signatures(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_oip_loc_conf_t *olcf = conf;

    ngx_str_t  *value, name;

    if (olcf->sig_zone != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2) {
        if (ngx_strcmp(value[1].data, "off") != 0) {
            return "takes URI zone=NAME, or off";
        }

        olcf->sig_zone = NULL;
        return NGX_CONF_OK;
    }

    if (value[1].len < 2 || value[1].data[0] != '/'
        || value[1].data[value[1].len - 1] == '/')
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\": the URI starts with \"/\" and does not "
                           "end with one (\"/v2/models/M\" is appended)",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    if (ngx_strncmp(value[2].data, "zone=", 5) != 0 || value[2].len == 5) {
        return "takes URI zone=NAME, or off";
    }

    name.data = value[2].data + 5;
    name.len = value[2].len - 5;

    olcf->sig_uri = value[1];

    /* declared by oip_signature_zone, before or after */
    olcf->sig_zone = ngx_shared_memory_add(cf, &name, 0,
                                           &ngx_http_oip_module);
    if (olcf->sig_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* oip_signature_optional [MODEL:]INPUT ... */

static char *
ngx_http_oip_signature_optional(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_oip_loc_conf_t *olcf = conf;

    u_char          *colon;
    ngx_str_t       *value;
    ngx_uint_t       i;
    oip_optional_t  *o;

    if (olcf->sig_optional != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    olcf->sig_optional = ngx_array_create(cf->pool, cf->args->nelts - 1,
                                          sizeof(oip_optional_t));
    if (olcf->sig_optional == NULL) {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {

        o = ngx_array_push(olcf->sig_optional);
        if (o == NULL) {
            return NGX_CONF_ERROR;
        }

        ngx_memzero(o, sizeof(oip_optional_t));

        /* the first colon: model names rarely hold one, inputs may */

        colon = ngx_strlchr(value[i].data, value[i].data + value[i].len, ':');

        if (colon) {
            o->model = value[i].data;
            o->model_len = colon - value[i].data;
            o->input = colon + 1;
            o->input_len = value[i].data + value[i].len - (colon + 1);

        } else {
            o->input = value[i].data;
            o->input_len = value[i].len;
        }

        if (o->input_len == 0 || (colon && o->model_len == 0)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" is not [MODEL:]INPUT", &value[i]);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/* zone=NAME:SIZE, for the directives that declare a zone */

char *
ngx_http_oip_zone_arg(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *name,
    ssize_t *size)
{
    u_char     *p;
    ngx_str_t   s;

    name->data = arg->data + 5;

    p = (u_char *) ngx_strchr(name->data, ':');

    if (p == NULL) {
        return "takes zone=NAME:SIZE";
    }

    name->len = p - name->data;

    s.data = p + 1;
    s.len = arg->data + arg->len - s.data;

    *size = ngx_parse_size(&s);

    if (*size == NGX_ERROR || name->len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid zone \"%V\"", arg);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}
