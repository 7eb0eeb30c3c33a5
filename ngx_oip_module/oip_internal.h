
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Declarations shared by the codec's files; not part of its API.
 */


#ifndef _OIP_INTERNAL_H_INCLUDED_
#define _OIP_INTERNAL_H_INCLUDED_


#include <string.h>
#include "oip_codec.h"


#define oip_min(a, b)        ((a) < (b) ? (a) : (b))
#define oip_max(a, b)        ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define oip_likely(x)        __builtin_expect(!!(x), 1)
#define oip_unlikely(x)      __builtin_expect(!!(x), 0)
#else
#define oip_likely(x)        (x)
#define oip_unlikely(x)      (x)
#endif


/* one conversion: the allocator and where an error goes */

typedef struct {
    const oip_alloc_t     *alloc;
    int                    status;
    char                  *error;
    size_t                 tensor_bytes;
    size_t                 max_tensor_size;
} oip_ctx_t;


void *oip_alloc(oip_ctx_t *c, size_t size);
void oip_free(oip_ctx_t *c, void *p);
int oip_fail(oip_ctx_t *c, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int oip_count_tensor(oip_ctx_t *c, size_t n);
size_t oip_cut(const u_char *p, size_t len, size_t max);

/* names in messages are cut to this many bytes */
#define OIP_NAME_MAX         64


/* JSON scanning */

typedef struct {
    const u_char          *data;       /* between the quotes, raw */
    size_t                 len;
    unsigned               escaped:1;
} oip_str_t;


#define OIP_NUM_FINITE       0
#define OIP_NUM_NAN          1
#define OIP_NUM_INF          2

typedef struct {
    const u_char          *start;      /* the whole token */
    const u_char          *end;
    const u_char          *digits;     /* integer part */
    size_t                 ndigits;
    const u_char          *frac;       /* fraction digits */
    size_t                 nfrac;
    int64_t                exp;        /* exponent, saturated */
    unsigned               neg:1;
    unsigned               has_frac:1;
    unsigned               has_exp:1;
    unsigned               special:2;
} oip_num_t;


typedef struct {
    const u_char          *data;       /* unescaped */
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
    const u_char          *start;
    const u_char          *p;
    const u_char          *end;
    unsigned               depth;
    unsigned               max_depth;

    oip_key_t             *keys;       /* keys of the open objects */
    size_t                 nkeys;
    size_t                 keys_cap;

    oip_frame_t           *frames;     /* containers open in oip_json_skip */
    size_t                 frames_cap;

    unsigned               nodups:1;   /* a second look: keys were checked */
} oip_json_t;


extern const u_char  oip_json_ws_map[256];

#define oip_json_ws(j)                                                        \
    while ((j)->p < (j)->end && oip_json_ws_map[*(j)->p]) { (j)->p++; }


void oip_json_init(oip_json_t *j, oip_ctx_t *c, const u_char *p, size_t len,
    unsigned max_depth);
void oip_json_done(oip_json_t *j);
int oip_json_error(oip_json_t *j, const char *what);
int oip_json_string(oip_json_t *j, oip_str_t *s);
size_t oip_json_unescape(u_char *dst, const oip_str_t *s);
size_t oip_json_unescaped_len(const oip_str_t *s);
int oip_name_controls(const oip_str_t *s);
int oip_json_str_eq(const oip_str_t *s, const char *lit, size_t len);
int oip_key_make(oip_ctx_t *c, const oip_str_t *s, oip_key_t *k);
ssize_t oip_keys_dup(oip_ctx_t *c, oip_key_t *k, size_t n);
int oip_json_number(oip_json_t *j, oip_num_t *n);
const u_char *oip_num_scan(const u_char *p, const u_char *end, oip_num_t *n);
int oip_json_skip(oip_json_t *j);
int oip_json_check(oip_json_t *j);
int oip_json_object(oip_json_t *j, oip_obj_t *o);
int oip_json_member(oip_json_t *j, oip_obj_t *o, oip_str_t *key,
    const u_char **key_start);
int oip_json_array(oip_json_t *j, oip_arr_t *a);
int oip_json_element(oip_json_t *j, oip_arr_t *a);
int oip_utf8_valid(const u_char *p, size_t len);


/* numbers */

typedef struct {
    uint64_t               w;          /* up to 19 significant digits */
    int64_t                e10;        /* the value is w * 10^e10 */
    int                    neg;
    int                    inexact;    /* nonzero digits were cut */
} oip_fast_t;

int oip_fast_decide(uint64_t w, int64_t e10, int inexact, int bits64,
    uint64_t *bits);

#define OIP_NUM_OK           0
#define OIP_NUM_NOT_INT      1
#define OIP_NUM_RANGE        2

int oip_num_u64(const oip_num_t *n, uint64_t *v);
int oip_num_double(const oip_num_t *n, double *v);
int oip_num_float(const oip_num_t *n, float *v);
uint16_t oip_double_to_fp16(double d);
uint16_t oip_double_to_bf16(double d);
double oip_fp16_to_double(uint16_t h);
double oip_bf16_to_double(uint16_t h);

/*
 * Printers need OIP_NUM_MAX bytes of room: they write past the number
 * (the longest is 24 bytes) to place digits with fixed-size copies.
 */
#define OIP_NUM_MAX          64

u_char *oip_print_u64(u_char *p, uint64_t v);
u_char *oip_print_i64(u_char *p, int64_t v);
u_char *oip_print_double(u_char *p, double v);
u_char *oip_print_float(u_char *p, float v);
u_char *oip_print_fp16(u_char *p, uint16_t h);
u_char *oip_print_bf16(u_char *p, uint16_t h);


/* output: a list of segments, copied or referenced */

typedef struct {
    oip_ctx_t             *ctx;
    u_char                *pos;        /* free space of the current block */
    u_char                *end;
    u_char                *mark;       /* start of bytes not yet in segs */
    oip_seg_t             *segs;
    size_t                 nsegs;
    size_t                 cap;
    size_t                 next;       /* size of the next block */
    size_t                 total;      /* bytes in segs */
    size_t                 limit;      /* at most this many bytes; 0: any */
} oip_out_t;


/* pieces shorter than this are copied rather than referenced */
#define OIP_REF_MIN          512

/* tensors in one message: what a model has, far beyond; bounds memory */
#define OIP_MAX_TENSORS      65536

/* members of one JSON object: each is kept to find duplicates */
#define OIP_MAX_MEMBERS      65536

void oip_out_init(oip_out_t *o, oip_ctx_t *c, size_t first);
int oip_out_grow(oip_out_t *o, size_t n);
int oip_out_write(oip_out_t *o, const void *data, size_t len);
int oip_out_ref(oip_out_t *o, const u_char *data, size_t len);
int oip_out_cut(oip_out_t *o);

#define oip_out_reserve(o, n)                                                 \
    ((size_t) ((o)->end - (o)->pos) >= (n) ? 0 : oip_out_grow(o, n))

#define oip_out_len(o)       ((o)->total + (size_t) ((o)->pos - (o)->mark))


/* tensors */

typedef enum {
    OIP_BOOL = 0,
    OIP_UINT8,
    OIP_UINT16,
    OIP_UINT32,
    OIP_UINT64,
    OIP_INT8,
    OIP_INT16,
    OIP_INT32,
    OIP_INT64,
    OIP_FP16,
    OIP_BF16,
    OIP_FP32,
    OIP_FP64,
    OIP_BYTES,
    OIP_DT_NONE
} oip_dtype_e;


typedef struct {
    const char            *name;
    size_t                 len;
    size_t                 size;       /* 0 for BYTES */
} oip_dtype_t;


extern const oip_dtype_t  oip_dtypes[];


typedef struct {
    const oip_str_t       *name;       /* for messages */
    const char            *what;       /* "input" or "output" */
    oip_dtype_e            dt;
    const uint64_t        *shape;
    size_t                 rank;
    uint64_t               count;      /* product of shape */
} oip_tensor_t;


oip_dtype_e oip_dtype_find(const u_char *s, size_t len);
int oip_data_to_binary(oip_json_t *j, const oip_tensor_t *t, u_char *dst,
    oip_out_t *bytes);
int oip_binary_check(oip_ctx_t *c, const oip_tensor_t *t, const u_char *src,
    size_t len, int status);
int oip_binary_to_data(oip_ctx_t *c, const oip_tensor_t *t,
    const u_char *src, size_t len, oip_out_t *o, int status);
int oip_bytes_utf8(const u_char *src, size_t len);


/* messages: a request's inputs, a response's outputs */

typedef struct {
    const u_char          *key;        /* the key's opening quote */
    const u_char          *value_end;
    const u_char          *prev_end;   /* the previous value's end, or NULL */
    const u_char          *next_key;   /* the next member's key, or NULL */
} oip_member_t;


typedef enum {
    OIP_ACT_PASS = 0,        /* leave it; its data is not looked into */
    OIP_ACT_CHECK,           /* leave it; its data is validated */
    OIP_ACT_BINARY,          /* JSON data to a binary chunk */
    OIP_ACT_JSON             /* a binary chunk to JSON data */
} oip_act_e;


typedef struct {
    oip_str_t              name;
    oip_tensor_t           t;
    size_t                 index;

    /* values looked at once the whole tensor object is known */
    const u_char          *dt_at;
    const u_char          *shape_at;
    const u_char          *params_at;
    const u_char          *data_at;

    oip_member_t           data;
    oip_member_t           params;
    oip_member_t           bds;        /* in parameters */
    const u_char          *params_close;
    size_t                 params_n;
    const u_char          *close;      /* the object's '}' */

    uint64_t               bds_size;
    const u_char          *bin;        /* its chunk */

    oip_seg_t             *chunk;      /* its data made binary, or NULL */
    size_t                 nchunk;
    size_t                 chunk_len;
    oip_seg_t              one;        /* ... when it is one piece */

    oip_act_e              act;

    unsigned               has_name:1;
    unsigned               has_bds:1;
    unsigned               has_shm:1;
    unsigned               settled:1;
    unsigned               data_done:1;
} oip_item_t;


typedef enum {
    OIP_EDIT_DELETE = 0,
    OIP_EDIT_TEXT,           /* static text */
    OIP_EDIT_PARAMS_NEW,     /* "parameters":{"binary_data_size":N} */
    OIP_EDIT_BDS_ADD,        /* ,"binary_data_size":N */
    OIP_EDIT_DATA_REPLACE,   /* "data":[...] */
    OIP_EDIT_DATA_ADD        /* ,"data":[...] */
} oip_edit_e;


typedef struct {
    const u_char          *from;       /* the JSON bytes replaced */
    const u_char          *to;
    oip_edit_e             kind;
    oip_item_t            *item;
    const char            *text;
    size_t                 len;
} oip_edit_t;


typedef struct oip_msg_s  oip_msg_t;

struct oip_msg_s {
    oip_ctx_t             *c;
    oip_json_t             j;
    const u_char          *json;       /* the JSON part */
    size_t                 jlen;
    const u_char          *bin;        /* what follows it */
    size_t                 blen;

    const char            *what;       /* "input" or "output" */
    oip_act_e            (*act)(oip_msg_t *m, oip_item_t *it);
    void                  *data;

    oip_item_t            *items;
    size_t                 nitems;
    size_t                 items_cap;

    oip_edit_t            *edits;
    size_t                 nedits;
    size_t                 edits_cap;

    unsigned               has_ihcl:1;
    unsigned               nonempty:1;   /* the array may not be empty */
    unsigned               bytes_stay:1; /* non-UTF-8 BYTES stay binary */
    unsigned               seen:1;
};


void oip_msg_init(oip_msg_t *m, oip_ctx_t *c, const u_char *json,
    size_t jlen, const u_char *bin, size_t blen, unsigned max_depth);
void oip_msg_done(oip_msg_t *m);
int oip_msg_syntax_first(oip_msg_t *m);
int oip_msg_tensors(oip_msg_t *m);
int oip_msg_layout(oip_msg_t *m);
int oip_msg_edits(oip_msg_t *m);
int oip_msg_assemble(oip_msg_t *m, oip_out_t *o, size_t *header_len,
    int *binary);
int oip_msg_build(oip_msg_t *m, size_t json_limit, oip_seg_t **segs,
    size_t *nsegs, size_t *header_len, size_t *body_len, int *binary);
oip_tensor_t *oip_item_tensor(oip_msg_t *m, oip_item_t *it);
void oip_member_set(oip_member_t *mb, const u_char *key, const u_char *end,
    const u_char *prev_end);
oip_edit_t *oip_edit_add(oip_msg_t *m, const u_char *from, const u_char *to,
    oip_edit_e kind, oip_item_t *it);
int oip_edit_text(oip_msg_t *m, const u_char *from, const u_char *to,
    const char *text);
int oip_edit_delete(oip_msg_t *m, const oip_member_t *mb);
int oip_names_check(oip_ctx_t *c, oip_key_t *names, size_t n,
    const char *what);

int oip_inflate(oip_ctx_t *c, const u_char *src, size_t len, size_t limit,
    u_char **out, size_t *outlen);


#endif /* _OIP_INTERNAL_H_INCLUDED_ */
