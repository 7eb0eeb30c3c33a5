
/*
 * Copyright (C) ngx_oip_module authors
 */


#ifndef _NGX_HTTP_OIP_MODULE_H_INCLUDED_
#define _NGX_HTTP_OIP_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "oip_codec.h"


typedef struct {
    ngx_flag_t             enable;
    ngx_uint_t             inputs;          /* oip_form_e */
    off_t                  max_json_size;
    off_t                  max_tensor_size;
    ngx_uint_t             max_depth;
} ngx_http_oip_loc_conf_t;


typedef struct {
    ngx_int_t              status;   /* NGX_DONE while reading the body,
                                        NGX_DECLINED once passed on, or
                                        the HTTP status of an error */
    ngx_str_t              model;
    ngx_str_t              error;
} ngx_http_oip_ctx_t;


ngx_int_t ngx_http_oip_request_handler(ngx_http_request_t *r);
ngx_http_oip_ctx_t *ngx_http_oip_get_ctx(ngx_http_request_t *r);
ngx_int_t ngx_http_oip_send_error(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *msg);


extern ngx_module_t  ngx_http_oip_module;


#endif /* _NGX_HTTP_OIP_MODULE_H_INCLUDED_ */
