
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The JSON scanner: no tree, spans.  Callers walk objects and arrays
 * with it and record where things are; strings, UTF-8, number tokens,
 * duplicate keys and depth are checked as it goes.
 */


#ifndef _OIP_JSON_H_INCLUDED_
#define _OIP_JSON_H_INCLUDED_


#include "oip_ctx.h"


/* members of one JSON object: each is kept to find duplicates */
#define OIP_MAX_MEMBERS      65536


typedef struct {
    const uint8_t         *data;       /* between the quotes, raw */
    size_t                 len;
    unsigned               escaped:1;
} oip_str_t;


#define OIP_NUM_FINITE       0
#define OIP_NUM_NAN          1
#define OIP_NUM_INF          2

/* a number token, as written: oip_number.h gives its value */

typedef struct {
    const uint8_t         *start;      /* the whole token */
    const uint8_t         *end;
    const uint8_t         *digits;     /* integer part */
    size_t                 ndigits;
    const uint8_t         *frac;       /* fraction digits */
    size_t                 nfrac;
    int64_t                exp;        /* exponent, saturated */
    unsigned               neg:1;
    unsigned               has_frac:1;
    unsigned               has_exp:1;
    unsigned               special:2;
} oip_num_t;


typedef struct {
    const uint8_t         *data;       /* unescaped */
    size_t                 len;
    uint32_t               hash;
    unsigned               owned:1;    /* data was allocated */
} oip_key_t;


typedef struct {
    size_t                 keys_base;
    size_t                 n;
} oip_obj_t;


typedef struct {
    size_t                 n;
} oip_arr_t;


typedef struct {
    union {
        oip_obj_t          o;
        oip_arr_t          a;
    } u;
    unsigned               object:1;
} oip_frame_t;


typedef struct {
    oip_ctx_t             *ctx;
    const uint8_t         *start;
    const uint8_t         *p;
    const uint8_t         *end;
    unsigned               depth;
    unsigned               max_depth;

    oip_key_t             *keys;       /* keys of the open objects */
    size_t                 nkeys;
    size_t                 keys_cap;

    oip_frame_t           *frames;     /* containers open in oip_json_skip */
    size_t                 frames_cap;

    unsigned               nodups:1;   /* a second look: keys were checked */
} oip_json_t;


extern const uint8_t  oip_json_ws_map[256];

/* what may not follow a number: "01", "1.2.3", "1e5e", "NaNa" */
extern const uint8_t  oip_json_num_tail[256];

#define oip_json_ws(j)                                                        \
    while ((j)->p < (j)->end && oip_json_ws_map[*(j)->p]) { (j)->p++; }


void oip_json_init(oip_json_t *j, oip_ctx_t *c, const uint8_t *p, size_t len,
    unsigned max_depth);
void oip_json_done(oip_json_t *j);
int oip_json_error(oip_json_t *j, const char *what);

int oip_json_object(oip_json_t *j, oip_obj_t *o);
int oip_json_member(oip_json_t *j, oip_obj_t *o, oip_str_t *key,
    const uint8_t **key_start);
int oip_json_array(oip_json_t *j, oip_arr_t *a);
int oip_json_element(oip_json_t *j, oip_arr_t *a);
int oip_json_skip(oip_json_t *j);
int oip_json_null(oip_json_t *j);
int oip_json_check(oip_json_t *j);

int oip_json_string(oip_json_t *j, oip_str_t *s);
size_t oip_json_unescape(uint8_t *dst, const oip_str_t *s);
size_t oip_json_unescaped_len(const oip_str_t *s);
int oip_json_str_eq(const oip_str_t *s, const char *lit, size_t len);
int oip_name_controls(const oip_str_t *s);

int oip_json_number(oip_json_t *j, oip_num_t *n);
const uint8_t *oip_num_scan(const uint8_t *p, const uint8_t *end,
    oip_num_t *n);

int oip_key_make(oip_ctx_t *c, const oip_str_t *s, oip_key_t *k);
ptrdiff_t oip_keys_dup(oip_ctx_t *c, oip_key_t *k, size_t n);

int oip_utf8_valid(const uint8_t *p, size_t len);
size_t oip_utf8_cut(const uint8_t *p, size_t len, size_t max);


#endif /* _OIP_JSON_H_INCLUDED_ */
