
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Inference requests: the envelope is scanned once, recording where each
 * member lies; every rule of the protocol is checked; the new body is
 * the old one with edits spliced in, so everything not converted stays
 * byte for byte as the client sent it.
 */


#include <stdio.h>
#include <stdlib.h>

#include "oip_internal.h"


typedef struct {
    const u_char          *key;        /* the key's opening quote */
    const u_char          *value_end;
    const u_char          *prev_end;   /* the previous value's end, or NULL */
    const u_char          *next_key;   /* the next member's key, or NULL */
} oip_member_t;


typedef struct {
    oip_str_t              name;
    oip_tensor_t           t;
    size_t                 index;

    /* values looked at once the whole input is known */
    const u_char          *dt_at;
    const u_char          *shape_at;
    const u_char          *params_at;
    const u_char          *data_at;

    oip_member_t           data;
    oip_member_t           params;
    oip_member_t           bds;        /* in parameters */
    const u_char          *params_close;
    size_t                 params_n;
    const u_char          *close;      /* the input's '}' */

    uint64_t               bds_size;
    const u_char          *bin;        /* its chunk in the body */

    oip_seg_t             *chunk;      /* its data as binary */
    size_t                 nchunk;
    size_t                 chunk_len;
    oip_seg_t              one;

    unsigned               has_name:1;
    unsigned               has_bds:1;
    unsigned               has_shm:1;
    unsigned               settled:1;
    unsigned               data_done:1;
} oip_input_t;


typedef enum {
    OIP_EDIT_DELETE = 0,
    OIP_EDIT_PARAMS_NEW,     /* "parameters":{"binary_data_size":N} */
    OIP_EDIT_BDS_ADD,        /* ,"binary_data_size":N */
    OIP_EDIT_DATA_REPLACE,   /* "data":[...] */
    OIP_EDIT_DATA_ADD        /* ,"data":[...] */
} oip_edit_e;


typedef struct {
    const u_char          *from;
    const u_char          *to;
    oip_input_t           *in;
    oip_edit_e             kind;
} oip_edit_t;


typedef struct {
    oip_ctx_t              c;
    oip_json_t             j;
    const oip_options_t   *opt;
    const u_char          *body;
    size_t                 len;
    size_t                 hlen;       /* the JSON part */

    oip_input_t           *inputs;
    size_t                 ninputs;
    size_t                 inputs_cap;

    oip_key_t             *names;
    size_t                 nnames;
    size_t                 names_cap;

    unsigned               has_ihcl:1;
    unsigned               seen_inputs:1;
} oip_req_t;


static int oip_request_parse_all(oip_req_t *rq);
static int oip_request_parse(oip_req_t *rq);
static int oip_parse_inputs(oip_req_t *rq);
static int oip_parse_input(oip_req_t *rq, size_t index);
static oip_input_t *oip_input_add(oip_req_t *rq);
static oip_tensor_t *oip_input_tensor(oip_input_t *in);
static void oip_sub(oip_req_t *rq, oip_json_t *sub, const u_char *at);
static int oip_input_settle(oip_req_t *rq, oip_input_t *in);
static int oip_input_shape(oip_req_t *rq, oip_input_t *in);
static int oip_input_params(oip_req_t *rq, oip_input_t *in);
static int oip_input_data(oip_req_t *rq, oip_input_t *in, oip_json_t *j);
static int oip_parse_outputs(oip_req_t *rq);
static int oip_parse_params(oip_req_t *rq, const char *flag,
    const char *label);
static int oip_name_add(oip_req_t *rq, const oip_str_t *name);
static int oip_names_unique(oip_req_t *rq, const char *what);
static int oip_request_layout(oip_req_t *rq);
static int oip_request_rewrite(oip_req_t *rq, oip_request_t *req);
static int oip_edit_write(oip_req_t *rq, oip_edit_t *e, oip_out_t *o);
static void oip_member_range(const oip_member_t *m, oip_edit_t *e);
static int oip_edit_cmp(const void *a, const void *b);


#define oip_input_name(in)                                                    \
    (int) oip_cut((in)->name.data, (in)->name.len, OIP_NAME_MAX),             \
    (in)->name.data


int
oip_request_process(oip_request_t *req, const oip_alloc_t *a,
    const oip_options_t *opt, const u_char *body, size_t len, off_t ihcl)
{
    size_t      i;
    oip_req_t   rq;

    memset(req, 0, sizeof(oip_request_t));
    memset(&rq, 0, sizeof(oip_req_t));

    rq.c.alloc = a;
    rq.c.error = req->error;
    rq.c.max_tensor_size = opt->max_tensor_size;
    rq.opt = opt;
    rq.body = body;
    rq.len = len;

    if (ihcl == 0) {
        /* raw binary: the body is the bytes of the one input */

        req->raw = 1;

        if (opt->inputs != OIP_FORM_KEEP) {
            oip_fail(&rq.c, 400, "a raw binary request "
                     "(Inference-Header-Content-Length: 0) needs "
                     "oip_raw_input here");
        }

        return req->status = rq.c.status;
    }

    if (ihcl > 0) {
        if ((uint64_t) ihcl > len) {
            oip_fail(&rq.c, 400, "Inference-Header-Content-Length %lld "
                     "exceeds the body length %zu", (long long) ihcl, len);
            return req->status = rq.c.status;
        }

        rq.hlen = (size_t) ihcl;
        rq.has_ihcl = 1;

    } else {
        rq.hlen = len;
    }

    if (len == 0) {
        oip_fail(&rq.c, 400, "the request body is empty");
        return req->status = rq.c.status;
    }

    if (rq.hlen > opt->max_json_size) {
        oip_fail(&rq.c, 413, "the JSON of %zu bytes exceeds "
                 "oip_max_json_size (%zu)", rq.hlen, opt->max_json_size);
        return req->status = rq.c.status;
    }

    oip_json_init(&rq.j, &rq.c, body, rq.hlen, opt->max_depth);

    if ((oip_request_parse_all(&rq) != 0
         || oip_request_layout(&rq) != 0
         || oip_request_rewrite(&rq, req) != 0)
        && rq.c.status == 0)
    {
        /* a failure must never pass for success */
        oip_fail(&rq.c, 500, "internal error in the request codec");
    }

    oip_json_done(&rq.j);

    for (i = 0; i < rq.ninputs; i++) {
        oip_free(&rq.c, (void *) rq.inputs[i].t.shape);
    }

    oip_free(&rq.c, rq.inputs);

    return req->status = rq.c.status;
}


static int
oip_request_parse_all(oip_req_t *rq)
{
    int         status;
    char        error[OIP_ERROR_LEN];
    oip_json_t  check;

    if (oip_request_parse(rq) == 0) {
        return 0;
    }

    if (rq->c.status == 500) {
        return -1;
    }

    /* broken JSON is reported as such, wherever it breaks */

    status = rq->c.status;
    memcpy(error, rq->c.error, OIP_ERROR_LEN);
    rq->c.status = 0;

    oip_json_init(&check, &rq->c, rq->body, rq->hlen, rq->opt->max_depth);

    if (oip_json_check(&check) == 0) {
        rq->c.status = status;
        memcpy(rq->c.error, error, OIP_ERROR_LEN);
    }

    oip_json_done(&check);

    return -1;
}


static int
oip_request_parse(oip_req_t *rq)
{
    int         rc;
    oip_obj_t   o;
    oip_str_t   key;
    oip_json_t *j;

    j = &rq->j;

    oip_json_ws(j);

    if (j->p == j->end) {
        return oip_fail(&rq->c, 400, "the request holds no JSON");
    }

    if (*j->p != '{') {
        return oip_fail(&rq->c, 400, "the request must be a JSON object");
    }

    if (oip_json_object(j, &o) != 0) {
        return -1;
    }

    while ((rc = oip_json_member(j, &o, &key, NULL)) == 1) {

        if (oip_json_str_eq(&key, "inputs", 6)) {
            rc = oip_parse_inputs(rq);

        } else if (oip_json_str_eq(&key, "outputs", 7)) {
            rc = oip_parse_outputs(rq);

        } else if (oip_json_str_eq(&key, "parameters", 10)) {
            rc = oip_parse_params(rq, "binary_data_output", NULL);

        } else {
            rc = oip_json_skip(j);
        }

        if (rc != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return -1;
    }

    oip_json_ws(j);

    if (j->p != j->end) {
        return oip_fail(&rq->c, 400, "unexpected bytes after the JSON object "
                        "at byte %zu%s", (size_t) (j->p - j->start),
                        rq->has_ihcl ? "" : " (binary data needs an "
                        "Inference-Header-Content-Length header)");
    }

    if (!rq->seen_inputs) {
        return oip_fail(&rq->c, 400, "'inputs' is missing");
    }

    return 0;
}


static int
oip_parse_inputs(oip_req_t *rq)
{
    int          rc;
    size_t       i;
    oip_arr_t    a;
    oip_json_t  *j;

    j = &rq->j;

    if (*j->p != '[') {
        return oip_fail(&rq->c, 400, "'inputs' must be an array");
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    while ((rc = oip_json_element(j, &a)) == 1) {

        if (*j->p != '{') {
            return oip_fail(&rq->c, 400, "inputs[%zu] must be an object",
                            a.n - 1);
        }

        if (oip_parse_input(rq, a.n - 1) != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return -1;
    }

    if (a.n == 0) {
        return oip_fail(&rq->c, 400, "'inputs' must not be empty");
    }

    rq->seen_inputs = 1;

    /* names are unique, compared unescaped */

    rq->nnames = 0;

    for (i = 0; i < rq->ninputs; i++) {
        if (oip_name_add(rq, &rq->inputs[i].name) != 0) {
            return -1;
        }
    }

    return oip_names_unique(rq, "input");
}


static oip_input_t *
oip_input_add(oip_req_t *rq)
{
    size_t        cap;
    oip_input_t  *inputs, *in;

    if (rq->ninputs == rq->inputs_cap) {
        cap = rq->inputs_cap ? rq->inputs_cap * 2 : 4;

        inputs = oip_alloc(&rq->c, cap * sizeof(oip_input_t));
        if (inputs == NULL) {
            return NULL;
        }

        if (rq->ninputs) {
            memcpy(inputs, rq->inputs, rq->ninputs * sizeof(oip_input_t));
        }

        oip_free(&rq->c, rq->inputs);

        rq->inputs = inputs;
        rq->inputs_cap = cap;
    }

    in = &rq->inputs[rq->ninputs++];
    memset(in, 0, sizeof(oip_input_t));
    in->t.dt = OIP_DT_NONE;

    return in;
}


static oip_tensor_t *
oip_input_tensor(oip_input_t *in)
{
    /* the array of inputs may have moved since the name was set */
    in->t.name = &in->name;
    return &in->t;
}


static void
oip_sub(oip_req_t *rq, oip_json_t *sub, const u_char *at)
{
    /* a second look at a value the main scan has validated */

    oip_json_init(sub, &rq->c, rq->j.start, rq->hlen, rq->j.max_depth);

    sub->p = at;
    sub->depth = 3;
    sub->nodups = 1;
}


static int
oip_parse_input(oip_req_t *rq, size_t index)
{
    int            rc, n;
    oip_obj_t      o;
    oip_str_t      key;
    oip_json_t    *j, sub;
    oip_input_t   *in;
    oip_member_t  *m, *pending;
    const u_char  *key_start, *prev_end;

    j = &rq->j;

    in = oip_input_add(rq);
    if (in == NULL) {
        return -1;
    }

    in->index = index;

    if (oip_json_object(j, &o) != 0) {
        return -1;
    }

    pending = NULL;
    prev_end = NULL;

    while ((rc = oip_json_member(j, &o, &key, &key_start)) == 1) {

        if (pending) {
            pending->next_key = key_start;
            pending = NULL;
        }

        m = NULL;

        if (oip_json_str_eq(&key, "name", 4)) {
            if (*j->p != '"') {
                return oip_fail(&rq->c, 400, "inputs[%zu]: 'name' must be "
                                "a string", index);
            }

            if (oip_json_string(j, &in->name) != 0) {
                return -1;
            }

            if (in->name.len == 0) {
                return oip_fail(&rq->c, 400, "inputs[%zu]: 'name' must not "
                                "be empty", index);
            }

            in->has_name = 1;
            rc = 0;

        } else if (oip_json_str_eq(&key, "datatype", 8)) {
            in->dt_at = j->p;
            rc = oip_json_skip(j);

        } else if (oip_json_str_eq(&key, "shape", 5)) {
            in->shape_at = j->p;
            rc = oip_json_skip(j);

        } else if (oip_json_str_eq(&key, "parameters", 10)) {
            m = &in->params;
            in->params_at = j->p;
            rc = oip_json_skip(j);

        } else if (oip_json_str_eq(&key, "data", 4)) {
            m = &in->data;
            in->data_at = j->p;

            /* the usual order: convert in this very pass */

            if (in->has_name && in->dt_at && in->shape_at) {
                rc = oip_input_settle(rq, in);

                if (rc == 0) {
                    rc = oip_input_data(rq, in, j);
                }

            } else {
                rc = oip_json_skip(j);
            }

        } else {
            rc = oip_json_skip(j);
        }

        if (rc != 0) {
            return -1;
        }

        if (m) {
            m->key = key_start;
            m->value_end = j->p;
            m->prev_end = prev_end;
            m->next_key = NULL;
            pending = m;
        }

        prev_end = j->p;
    }

    if (rc < 0) {
        return -1;
    }

    in->close = j->p - 1;

    if (oip_input_settle(rq, in) != 0 || oip_input_params(rq, in) != 0) {
        return -1;
    }

    n = (in->data_at != NULL) + in->has_bds + in->has_shm;

    if (n == 0) {
        return oip_fail(&rq->c, 400, "input '%.*s' has no data: it needs "
                        "'data', a binary_data_size or a "
                        "shared_memory_region", oip_input_name(in));
    }

    if (n > 1) {
        return oip_fail(&rq->c, 400, "input '%.*s' has more than one of "
                        "'data', binary_data_size and shared_memory_region",
                        oip_input_name(in));
    }

    if (in->data_at && !in->data_done) {
        oip_sub(rq, &sub, in->data_at);
        rc = oip_input_data(rq, in, &sub);
        oip_json_done(&sub);

        return rc;
    }

    return 0;
}


static int
oip_input_settle(oip_req_t *rq, oip_input_t *in)
{
    size_t       len;
    u_char       buf[64];
    oip_str_t    s;
    oip_json_t   sub;

    if (in->settled) {
        return 0;
    }

    if (!in->has_name) {
        return oip_fail(&rq->c, 400, "inputs[%zu]: 'name' is missing",
                        in->index);
    }

    if (in->dt_at == NULL) {
        return oip_fail(&rq->c, 400, "input '%.*s': 'datatype' is missing",
                        oip_input_name(in));
    }

    if (in->shape_at == NULL) {
        return oip_fail(&rq->c, 400, "input '%.*s': 'shape' is missing",
                        oip_input_name(in));
    }

    if (*in->dt_at != '"') {
        return oip_fail(&rq->c, 400, "input '%.*s': 'datatype' must be a "
                        "string", oip_input_name(in));
    }

    oip_sub(rq, &sub, in->dt_at);

    if (oip_json_string(&sub, &s) != 0) {
        return -1;
    }

    len = oip_json_unescaped_len(&s);

    if (len <= sizeof(buf)) {
        oip_json_unescape(buf, &s);
        in->t.dt = oip_dtype_find(buf, len);
    }

    if (in->t.dt == OIP_DT_NONE) {
        return oip_fail(&rq->c, 400, "input '%.*s': unknown datatype "
                        "\"%.*s\"", oip_input_name(in),
                        (int) oip_cut(s.data, s.len, 32), s.data);
    }

    if (oip_input_shape(rq, in) != 0) {
        return -1;
    }

    in->settled = 1;

    return 0;
}


static int
oip_input_shape(oip_req_t *rq, oip_input_t *in)
{
    int          rc, zero, over;
    size_t       cap;
    uint64_t     dim, prod, *shape, *dims;
    oip_arr_t    a;
    oip_num_t    n;
    oip_json_t   sub;

    if (*in->shape_at != '[') {
        return oip_fail(&rq->c, 400, "input '%.*s': 'shape' must be an "
                        "array of integers", oip_input_name(in));
    }

    oip_sub(rq, &sub, in->shape_at);

    if (oip_json_array(&sub, &a) != 0) {
        return -1;
    }

    shape = NULL;
    cap = 0;
    prod = 1;
    zero = 0;
    over = 0;

    while ((rc = oip_json_element(&sub, &a)) == 1) {

        if (*sub.p != '-' && (*sub.p < '0' || *sub.p > '9')) {
            goto invalid;
        }

        if (oip_json_number(&sub, &n) != 0) {
            goto failed;
        }

        if (oip_num_u64(&n, &dim) != OIP_NUM_OK || n.neg
            || dim > (uint64_t) INT64_MAX)
        {
            oip_fail(&rq->c, 400, "input '%.*s': shape dimension %.*s is "
                     "not an integer from 0 to 2^63-1", oip_input_name(in),
                     (int) oip_min(n.end - n.start, 40), n.start);
            goto failed;
        }

        if (a.n > cap) {
            cap = cap ? cap * 2 : 8;

            dims = oip_alloc(&rq->c, cap * sizeof(uint64_t));
            if (dims == NULL) {
                goto failed;
            }

            if (shape) {
                memcpy(dims, shape, (a.n - 1) * sizeof(uint64_t));
                oip_free(&rq->c, shape);
            }

            shape = dims;
        }

        shape[a.n - 1] = dim;

        if (dim == 0) {
            zero = 1;

        } else if (prod > (uint64_t) INT64_MAX / dim) {
            over = 1;

        } else {
            prod *= dim;
        }
    }

    if (rc < 0) {
        goto failed;
    }

    in->t.shape = shape;
    in->t.rank = a.n;

    if (zero) {
        in->t.count = 0;

    } else if (over) {
        return oip_fail(&rq->c, 400, "input '%.*s': the product of its "
                        "shape overflows 2^63-1", oip_input_name(in));

    } else {
        in->t.count = prod;
    }

    return 0;

invalid:

    oip_fail(&rq->c, 400, "input '%.*s': 'shape' must be an array of "
             "integers", oip_input_name(in));

failed:

    oip_free(&rq->c, shape);

    return -1;
}


static int
oip_input_params(oip_req_t *rq, oip_input_t *in)
{
    int            rc;
    oip_obj_t      o;
    oip_str_t      key;
    oip_num_t      n;
    oip_json_t     sub;
    oip_member_t  *pending;
    const u_char  *key_start, *prev_end;

    if (in->params_at == NULL) {
        return 0;
    }

    if (*in->params_at != '{') {
        return oip_fail(&rq->c, 400, "input '%.*s': 'parameters' must be an "
                        "object", oip_input_name(in));
    }

    oip_sub(rq, &sub, in->params_at);

    if (oip_json_object(&sub, &o) != 0) {
        return -1;
    }

    pending = NULL;
    prev_end = NULL;

    while ((rc = oip_json_member(&sub, &o, &key, &key_start)) == 1) {

        if (pending) {
            pending->next_key = key_start;
            pending = NULL;
        }

        if (oip_json_str_eq(&key, "binary_data_size", 16)) {
            /* the main scan validated the number's syntax */

            if ((*sub.p != '-' && (*sub.p < '0' || *sub.p > '9'))
                || oip_num_scan(sub.p, sub.end, &n) == NULL
                || oip_num_u64(&n, &in->bds_size) != OIP_NUM_OK
                || n.neg)
            {
                return oip_fail(&rq->c, 400, "input '%.*s': binary_data_size "
                                "must be a non-negative integer",
                                oip_input_name(in));
            }

            sub.p = n.end;

            in->has_bds = 1;
            in->bds.key = key_start;
            in->bds.value_end = sub.p;
            in->bds.prev_end = prev_end;
            in->bds.next_key = NULL;
            pending = &in->bds;

        } else {
            if (oip_json_str_eq(&key, "shared_memory_region", 20)) {
                in->has_shm = 1;
            }

            if (oip_json_skip(&sub) != 0) {
                return -1;
            }
        }

        prev_end = sub.p;
    }

    if (rc < 0) {
        return -1;
    }

    in->params_n = o.n;
    in->params_close = sub.p - 1;

    oip_json_done(&sub);

    return 0;
}


static int
oip_input_data(oip_req_t *rq, oip_input_t *in, oip_json_t *j)
{
    int            rc;
    size_t         size;
    u_char        *dst;
    oip_out_t      w;
    oip_tensor_t  *t;

    t = oip_input_tensor(in);
    size = oip_dtypes[t->dt].size;
    in->data_done = 1;

    if (size == 0) {
        /* BYTES count as they are decoded */

        if (rq->opt->inputs != OIP_FORM_BINARY) {
            return oip_data_to_binary(j, t, NULL, NULL);
        }

        oip_out_init(&w, &rq->c, 4096);

        rc = oip_data_to_binary(j, t, NULL, &w);

        if (rc == 0) {
            rc = oip_out_cut(&w);
        }

        in->chunk = w.segs;
        in->nchunk = w.nsegs;
        in->chunk_len = w.total;

        return rc;
    }

    /* fixed-size tensors count before a byte is spent on them */

    if (t->count > (rq->c.max_tensor_size - rq->c.tensor_bytes) / size) {
        return oip_fail(&rq->c, 413, "input '%.*s': %llu elements of %s take "
                        "the tensor data over oip_max_tensor_size "
                        "(%zu bytes)", oip_input_name(in),
                        (unsigned long long) t->count,
                        oip_dtypes[t->dt].name, rq->c.max_tensor_size);
    }

    rq->c.tensor_bytes += t->count * size;

    if (rq->opt->inputs != OIP_FORM_BINARY) {
        return oip_data_to_binary(j, t, NULL, NULL);
    }

    dst = oip_alloc(&rq->c, t->count * size);
    if (dst == NULL) {
        return -1;
    }

    in->one.data = dst;
    in->one.len = t->count * size;
    in->chunk = &in->one;
    in->nchunk = 1;
    in->chunk_len = in->one.len;

    return oip_data_to_binary(j, t, dst, NULL);
}


static int
oip_parse_outputs(oip_req_t *rq)
{
    int          rc, named;
    char         label[96];
    oip_arr_t    a;
    oip_obj_t    o;
    oip_str_t    key, name;
    oip_json_t  *j;

    j = &rq->j;

    if (*j->p != '[') {
        return oip_fail(&rq->c, 400, "'outputs' must be an array");
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    rq->nnames = 0;

    while ((rc = oip_json_element(j, &a)) == 1) {

        if (*j->p != '{') {
            return oip_fail(&rq->c, 400, "outputs[%zu] must be an object",
                            a.n - 1);
        }

        if (oip_json_object(j, &o) != 0) {
            return -1;
        }

        named = 0;
        snprintf(label, sizeof(label), "outputs[%zu]", a.n - 1);

        while ((rc = oip_json_member(j, &o, &key, NULL)) == 1) {

            if (oip_json_str_eq(&key, "name", 4)) {
                if (*j->p != '"') {
                    return oip_fail(&rq->c, 400, "%s: 'name' must be a "
                                    "string", label);
                }

                if (oip_json_string(j, &name) != 0) {
                    return -1;
                }

                if (name.len == 0) {
                    return oip_fail(&rq->c, 400, "%s: 'name' must not be "
                                    "empty", label);
                }

                if (oip_name_add(rq, &name) != 0) {
                    return -1;
                }

                named = 1;
                snprintf(label, sizeof(label), "output '%.*s'",
                         (int) oip_cut(name.data, name.len, OIP_NAME_MAX),
                         name.data);

            } else if (oip_json_str_eq(&key, "parameters", 10)) {
                rc = oip_parse_params(rq, "binary_data", label);

            } else {
                rc = oip_json_skip(j);
            }

            if (rc < 0) {
                return -1;
            }
        }

        if (rc < 0) {
            return -1;
        }

        if (!named) {
            return oip_fail(&rq->c, 400, "%s: 'name' is missing", label);
        }
    }

    if (rc < 0) {
        return -1;
    }

    return oip_names_unique(rq, "output");
}


/*
 * The request's parameters and an output's: strings, numbers and
 * booleans only; the binary flag, if there, a boolean.
 */

static int
oip_parse_params(oip_req_t *rq, const char *flag, const char *label)
{
    int          rc;
    size_t       flen;
    u_char       c;
    oip_obj_t    o;
    oip_str_t    key;
    oip_json_t  *j;

    j = &rq->j;

    if (label == NULL) {
        label = "the request";
    }

    if (*j->p != '{') {
        return oip_fail(&rq->c, 400, "%s: 'parameters' must be an object",
                        label);
    }

    if (oip_json_object(j, &o) != 0) {
        return -1;
    }

    flen = strlen(flag);

    while ((rc = oip_json_member(j, &o, &key, NULL)) == 1) {

        c = *j->p;

        if (c == '{' || c == '[' || c == 'n') {
            return oip_fail(&rq->c, 400, "%s: parameter \"%.*s\" must be a "
                            "string, number or boolean", label,
                            (int) oip_cut(key.data, key.len, OIP_NAME_MAX),
                            key.data);
        }

        if (oip_json_str_eq(&key, flag, flen) && c != 't' && c != 'f') {
            return oip_fail(&rq->c, 400, "%s: %s must be a boolean", label,
                            flag);
        }

        if (oip_json_skip(j) != 0) {
            return -1;
        }
    }

    return rc < 0 ? -1 : 0;
}


static int
oip_name_add(oip_req_t *rq, const oip_str_t *name)
{
    size_t      cap;
    oip_key_t  *names;

    if (rq->nnames == rq->names_cap) {
        cap = rq->names_cap ? rq->names_cap * 2 : 16;

        names = oip_alloc(&rq->c, cap * sizeof(oip_key_t));
        if (names == NULL) {
            return -1;
        }

        if (rq->nnames) {
            memcpy(names, rq->names, rq->nnames * sizeof(oip_key_t));
        }

        oip_free(&rq->c, rq->names);

        rq->names = names;
        rq->names_cap = cap;
    }

    if (oip_key_make(&rq->c, name, &rq->names[rq->nnames]) != 0) {
        return -1;
    }

    rq->nnames++;

    return 0;
}


static int
oip_names_unique(oip_req_t *rq, const char *what)
{
    size_t      i;
    ssize_t     dup;
    oip_key_t  *k;

    dup = oip_keys_dup(&rq->c, rq->names, rq->nnames);

    if (dup >= 0) {
        k = &rq->names[dup];
        oip_fail(&rq->c, 400, "%s name \"%.*s\" appears twice", what,
                 (int) oip_cut(k->data, k->len, OIP_NAME_MAX), k->data);
    }

    for (i = 0; i < rq->nnames; i++) {
        if (rq->names[i].owned) {
            oip_free(&rq->c, (void *) rq->names[i].data);
        }
    }

    oip_free(&rq->c, rq->names);

    rq->names = NULL;
    rq->nnames = 0;
    rq->names_cap = 0;

    return dup == -1 ? 0 : -1;
}


/* binary chunks follow the JSON in the order of their inputs */

static int
oip_request_layout(oip_req_t *rq)
{
    size_t         i, rest, size;
    oip_input_t   *in;
    oip_tensor_t  *t;
    const u_char  *p;

    p = rq->body + rq->hlen;
    rest = rq->len - rq->hlen;

    for (i = 0; i < rq->ninputs; i++) {
        in = &rq->inputs[i];

        if (!in->has_bds) {
            continue;
        }

        t = oip_input_tensor(in);

        if (!rq->has_ihcl) {
            return oip_fail(&rq->c, 400, "input '%.*s' has a "
                            "binary_data_size, but the request has no "
                            "Inference-Header-Content-Length header",
                            oip_input_name(in));
        }

        size = oip_dtypes[t->dt].size;

        if (size && (t->count > UINT64_MAX / size
                     || t->count * size != in->bds_size))
        {
            return oip_fail(&rq->c, 400, "input '%.*s': binary_data_size "
                            "is %llu, but %llu elements of %s need %s%llu",
                            oip_input_name(in),
                            (unsigned long long) in->bds_size,
                            (unsigned long long) t->count,
                            oip_dtypes[t->dt].name,
                            t->count > UINT64_MAX / size ? "more than " : "",
                            (unsigned long long)
                            (t->count > UINT64_MAX / size ? UINT64_MAX
                                                          : t->count * size));
        }

        if (in->bds_size > rest) {
            return oip_fail(&rq->c, 400, "input '%.*s': binary_data_size %llu "
                            "runs past the end of the body",
                            oip_input_name(in),
                            (unsigned long long) in->bds_size);
        }

        if (oip_count_tensor(&rq->c, in->bds_size) != 0) {
            return -1;
        }

        in->bin = p;
        p += in->bds_size;
        rest -= in->bds_size;

        if (oip_binary_check(&rq->c, t, in->bin, in->bds_size, 400) != 0) {
            return -1;
        }
    }

    if (rest) {
        return oip_fail(&rq->c, 400, "%zu bytes after the JSON header are "
                        "not claimed by any binary_data_size", rest);
    }

    return 0;
}


static void
oip_member_range(const oip_member_t *m, oip_edit_t *e)
{
    /* a member and one comma next to it */

    if (m->prev_end) {
        e->from = m->prev_end;
        e->to = m->value_end;

    } else if (m->next_key) {
        e->from = m->key;
        e->to = m->next_key;

    } else {
        e->from = m->key;
        e->to = m->value_end;
    }
}


static int
oip_edit_cmp(const void *a, const void *b)
{
    const oip_edit_t  *x = a, *y = b;

    if (x->from != y->from) {
        return x->from < y->from ? -1 : 1;
    }

    return (x->to > y->to) - (x->to < y->to);
}


static int
oip_request_rewrite(oip_req_t *rq, oip_request_t *req)
{
    size_t         i, k, n, s;
    oip_out_t      o;
    oip_edit_t    *edits, *e;
    oip_form_e     form;
    oip_input_t   *in;
    const u_char  *pos;

    form = rq->opt->inputs;
    n = 0;

    for (i = 0; i < rq->ninputs; i++) {
        in = &rq->inputs[i];

        if ((form == OIP_FORM_BINARY && in->data_at)
            || (form == OIP_FORM_JSON && in->has_bds))
        {
            n += 2;
        }
    }

    req->binary = rq->has_ihcl;

    if (n == 0) {
        if (form == OIP_FORM_JSON && rq->has_ihcl) {
            /* all JSON already: only the headers change */

            oip_out_init(&o, &rq->c, 0);
            req->binary = 0;

            if (oip_out_ref(&o, rq->body, rq->len) != 0
                || oip_out_cut(&o) != 0)
            {
                return -1;
            }

            goto done;
        }

        return 0;
    }

    edits = oip_alloc(&rq->c, n * sizeof(oip_edit_t));
    if (edits == NULL) {
        return -1;
    }

    k = 0;

    for (i = 0; i < rq->ninputs; i++) {
        in = &rq->inputs[i];
        e = &edits[k];

        if (form == OIP_FORM_BINARY && in->data_at) {

            if (in->params.key == NULL) {
                e->from = in->data.key;
                e->to = in->data.value_end;
                e->kind = OIP_EDIT_PARAMS_NEW;
                e->in = in;
                k++;
                continue;
            }

            oip_member_range(&in->data, e);
            e->kind = OIP_EDIT_DELETE;
            e->in = in;

            e++;
            e->from = in->params_close;
            e->to = in->params_close;
            e->kind = OIP_EDIT_BDS_ADD;
            e->in = in;
            k += 2;

        } else if (form == OIP_FORM_JSON && in->has_bds) {

            if (in->params_n == 1) {
                e->from = in->params.key;
                e->to = in->params.value_end;
                e->kind = OIP_EDIT_DATA_REPLACE;
                e->in = in;
                k++;
                continue;
            }

            oip_member_range(&in->bds, e);
            e->kind = OIP_EDIT_DELETE;
            e->in = in;

            e++;
            e->from = in->close;
            e->to = in->close;
            e->kind = OIP_EDIT_DATA_ADD;
            e->in = in;
            k += 2;
        }
    }

    qsort(edits, k, sizeof(oip_edit_t), oip_edit_cmp);

    oip_out_init(&o, &rq->c, 4096);
    pos = rq->body;

    for (i = 0; i < k; i++) {
        e = &edits[i];

        if (oip_out_ref(&o, pos, e->from - pos) != 0
            || oip_edit_write(rq, e, &o) != 0)
        {
            return -1;
        }

        pos = e->to;
    }

    if (oip_out_ref(&o, pos, rq->body + rq->hlen - pos) != 0
        || oip_out_cut(&o) != 0)
    {
        return -1;
    }

    oip_free(&rq->c, edits);

    req->header_len = o.total;

    if (form == OIP_FORM_JSON) {
        req->binary = 0;

        if (o.total > rq->opt->max_json_size) {
            return oip_fail(&rq->c, 413, "the request as JSON would be %zu "
                            "bytes, over oip_max_json_size (%zu)", o.total,
                            rq->opt->max_json_size);
        }

        goto done;
    }

    req->binary = 1;

    for (i = 0; i < rq->ninputs; i++) {
        in = &rq->inputs[i];

        if (in->data_at) {
            for (s = 0; s < in->nchunk; s++) {
                if (oip_out_ref(&o, in->chunk[s].data, in->chunk[s].len)
                    != 0)
                {
                    return -1;
                }
            }

        } else if (in->has_bds) {
            if (oip_out_ref(&o, in->bin, in->bds_size) != 0) {
                return -1;
            }
        }
    }

    if (oip_out_cut(&o) != 0) {
        return -1;
    }

done:

    req->rewritten = 1;
    req->segs = o.segs;
    req->nsegs = o.nsegs;
    req->body_len = o.total;

    if (!req->binary) {
        req->header_len = o.total;
    }

    return 0;
}


static int
oip_edit_write(oip_req_t *rq, oip_edit_t *e, oip_out_t *o)
{
    u_char       *p;
    oip_input_t  *in;

    in = e->in;

    switch (e->kind) {

    case OIP_EDIT_DELETE:
        return 0;

    case OIP_EDIT_PARAMS_NEW:
    case OIP_EDIT_BDS_ADD:
        if (oip_out_reserve(o, 64) != 0) {
            return -1;
        }

        p = o->pos;

        if (e->kind == OIP_EDIT_PARAMS_NEW) {
            p = (u_char *) memcpy(p, "\"parameters\":{", 14) + 14;

        } else if (in->params_n) {
            *p++ = ',';
        }

        p = (u_char *) memcpy(p, "\"binary_data_size\":", 19) + 19;
        p = oip_print_u64(p, in->chunk_len);

        if (e->kind == OIP_EDIT_PARAMS_NEW) {
            *p++ = '}';
        }

        o->pos = p;

        return 0;

    default: /* OIP_EDIT_DATA_REPLACE, OIP_EDIT_DATA_ADD */
        if (oip_out_write(o, e->kind == OIP_EDIT_DATA_ADD ? ",\"data\":"
                                                          : "\"data\":",
                          e->kind == OIP_EDIT_DATA_ADD ? 8 : 7)
            != 0)
        {
            return -1;
        }

        return oip_binary_to_data(&rq->c, oip_input_tensor(in), in->bin,
                                  in->bds_size, o, 400);
    }
}
