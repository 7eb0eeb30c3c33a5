
/*
 * Copyright (C) ngx_oip_module authors
 */


#ifndef _NGX_HTTP_OIP_MODULE_H_INCLUDED_
#define _NGX_HTTP_OIP_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "oip_codec.h"


#define NGX_HTTP_OIP_IHCL    "Inference-Header-Content-Length"


typedef struct {
    ngx_flag_t             enable;
    ngx_uint_t             inputs;          /* oip_form_e */
    ngx_uint_t             outputs;         /* oip_form_e */
    off_t                  max_json_size;
    off_t                  max_tensor_size;
    ngx_uint_t             max_depth;
    oip_raw_input_t       *raw;
    ngx_uint_t             raw_outputs;     /* oip_form_e */
} ngx_http_oip_loc_conf_t;


typedef struct {
    ngx_int_t              status;   /* NGX_DONE while reading the body,
                                        NGX_DECLINED once passed on, or
                                        the HTTP status of an error */
    ngx_str_t              model;
    ngx_str_t              error;
    ngx_str_t              page;     /* JSON for nginx's own error page */

    /* the response path */
    oip_wish_t             wish;
    off_t                  resp_ihcl;
    u_char                *buf;
    size_t                 len;
    size_t                 cap;
    size_t                 limit;

    unsigned               manage:1;
    unsigned               filtering:1;
    unsigned               sent:1;
    unsigned               replace:1;   /* with page, nginx's error page */
} ngx_http_oip_ctx_t;


ngx_int_t ngx_http_oip_request_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_oip_infer_uri(ngx_str_t *uri, ngx_str_t *model);
ngx_int_t ngx_http_oip_response_init(ngx_conf_t *cf);
ngx_http_oip_ctx_t *ngx_http_oip_get_ctx(ngx_http_request_t *r);
ngx_int_t ngx_http_oip_send_error(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *msg);
ngx_table_elt_t *ngx_http_oip_header_find(ngx_list_t *headers,
    const char *name, size_t len, ngx_uint_t *count);
void ngx_http_oip_options(ngx_http_oip_loc_conf_t *olcf,
    oip_options_t *opt);
void ngx_http_oip_allocator(ngx_http_request_t *r, oip_alloc_t *alloc);


extern ngx_module_t  ngx_http_oip_module;


#endif /* _NGX_HTTP_OIP_MODULE_H_INCLUDED_ */
