
/*
 * Copyright (C) ngx_oip_module authors
 *
 * A REST request, validated and made binary by oip_request_process(), as
 * one framed ModelInferRequest (oip_grpc_request()): its JSON header read
 * into inputs, outputs and parameters, each input's data referenced where
 * it lies (or written as typed contents), the message sized, then
 * written.
 */


#include "oip_pb.h"
#include "oip_number.h"


typedef struct {
    const uint8_t         *key;        /* unescaped */
    size_t                 key_len;
    unsigned               kind;       /* OIP_GP_* */
    uint64_t               u;          /* bool, int64 bits, uint64 */
    double                 d;
    const uint8_t         *s;          /* unescaped */
    size_t                 s_len;
} oip_gparam_t;


typedef struct {
    oip_gparam_t          *p;
    size_t                 n;
    size_t                 cap;
} oip_gparams_t;


typedef struct {
    const uint8_t         *name;
    size_t                 name_len;
    const uint8_t         *dt;
    size_t                 dt_len;
    oip_dtype_e            dtype;
    uint64_t              *shape;
    size_t                 rank;
    size_t                 shape_cap;
    oip_gparams_t          params;
    uint64_t               size;       /* binary_data_size */
    unsigned               has_size:1;

    /* its data, as the message carries it */
    oip_seg_t             *data;
    size_t                 ndata;
    const uint8_t         *typed;      /* typed contents written here */
    size_t                 typed_len;  /* the packed field's payload */
    unsigned               typed_ref:1; /* the payload is data itself */
} oip_ginput_t;


typedef struct {
    oip_ctx_t              c;
    oip_json_t             j;
    const oip_grpc_options_t *g;

    const uint8_t         *id;
    size_t                 id_len;
    oip_gparams_t          params;

    oip_ginput_t          *in;
    size_t                 nin;
    size_t                 in_cap;

    oip_ginput_t          *out;        /* only name and parameters */
    size_t                 nout;
    size_t                 out_cap;
} oip_greq_t;


static int oip_greq_root(oip_greq_t *q);
static int oip_greq_string(oip_greq_t *q, const uint8_t **s, size_t *len);
static int oip_greq_params(oip_greq_t *q, oip_gparams_t *ps,
    const char *skip, const char *what, oip_ginput_t *t);
static int oip_greq_tensors(oip_greq_t *q, int outputs);
static int oip_greq_tensor(oip_greq_t *q, oip_ginput_t *t, int outputs);
static int oip_greq_data(oip_greq_t *q, const oip_seg_t *segs, size_t nsegs,
    size_t skip);
static int oip_greq_typed(oip_greq_t *q, oip_ginput_t *t);
static void oip_greq_write(oip_greq_t *q, oip_pb_t *w);
static void oip_greq_params_write(oip_pb_t *w, unsigned field,
    const oip_gparams_t *ps);
static size_t oip_greq_tensor_write(oip_greq_t *q, oip_pb_t *w,
    const oip_ginput_t *t);


/* ------------------------------------------------ REST -> ModelInfer */

int
oip_grpc_request(oip_result_t *res, const oip_alloc_t *a,
    const oip_grpc_options_t *g, const oip_seg_t *segs, size_t nsegs,
    size_t header_len)
{
    size_t       i, len, total;
    uint8_t     *hdr, *p, frame[5];
    oip_pb_t     w;
    oip_out_t    o;
    oip_greq_t   q;

    memset(&q, 0, sizeof(oip_greq_t));

    q.g = g;
    oip_ctx_init(&q.c, a, res->error, &res->reason, (size_t) -1);

    /* the header, in one piece: it is small, and it is walked twice */

    hdr = oip_alloc(&q.c, header_len ? header_len : 1);
    if (hdr == NULL) {
        return res->status = q.c.status;
    }

    p = hdr;
    len = header_len;

    for (i = 0; i < nsegs && len; i++) {
        p = (uint8_t *) memcpy(p, segs[i].data, oip_min(len, segs[i].len))
            + oip_min(len, segs[i].len);
        len -= oip_min(len, segs[i].len);
    }

    if (len) {
        oip_fail(&q.c, 500, OIP_REASON_OTHER, "the binary request is shorter "
                 "than its header");
        return res->status = q.c.status;
    }

    oip_json_init(&q.j, &q.c, hdr, header_len, 64);

    if (oip_greq_root(&q) != 0
        || oip_greq_data(&q, segs, nsegs, header_len) != 0)
    {
        oip_json_done(&q.j);

        if (q.c.status == 0) {
            res->reason = OIP_REASON_OTHER;
        }

        return res->status = q.c.status ? q.c.status : 500;
    }

    oip_json_done(&q.j);

    for (i = 0; g->typed && i < q.nin; i++) {
        if (oip_greq_typed(&q, &q.in[i]) != 0) {
            return res->status = q.c.status;
        }
    }

    /* sized first: the frame's length leads the message */

    memset(&w, 0, sizeof(oip_pb_t));
    oip_greq_write(&q, &w);
    total = w.n;

    if (total > g->max_message) {
        oip_fail(&q.c, 413, OIP_REASON_LIMIT, "the gRPC message of %zu bytes "
                 "exceeds oip_grpc_max_message (%zu bytes)", total,
                 g->max_message);
        return res->status = q.c.status;
    }

    oip_out_init(&o, &q.c, 4096);

    oip_grpc_frame(frame, total);

    memset(&w, 0, sizeof(oip_pb_t));
    w.o = &o;

    oip_pb_raw(&w, frame, 5);
    oip_greq_write(&q, &w);

    if (w.err || oip_out_cut(&o) != 0) {
        if (q.c.status == 0) {
            res->reason = OIP_REASON_OTHER;
        }

        return res->status = q.c.status ? q.c.status : 500;
    }

    if (w.n != total + 5) {
        oip_fail(&q.c, 500, OIP_REASON_OTHER, "internal error in the gRPC "
                 "encoder");
        return res->status = q.c.status;
    }

    res->segs = o.segs;
    res->nsegs = o.nsegs;
    res->body_len = o.total;
    res->header_len = 0;
    res->binary = 0;
    res->rewritten = 1;
    res->content_type = OIP_TYPE_GRPC;

    return res->status = 0;
}


static int
oip_greq_root(oip_greq_t *q)
{
    int          rc;
    oip_json_t  *j;
    oip_walk_t   w;

    j = &q->j;

    oip_json_ws(j);

    if (j->p == j->end || *j->p != '{') {
        return oip_fail(&q->c, 500, OIP_REASON_OTHER, "the binary request's "
                        "header is not an object");
    }

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        if (*j->p == 'n' && oip_json_null(j)) {
            /* null is absent */
            continue;
        }

        if (oip_json_str_eq(&w.key, "id", 2)) {
            rc = oip_greq_string(q, &q->id, &q->id_len);

        } else if (oip_json_str_eq(&w.key, "parameters", 10)) {
            rc = oip_greq_params(q, &q->params, "binary_data_output",
                                 "request", NULL);

        } else if (oip_json_str_eq(&w.key, "inputs", 6)) {
            rc = oip_greq_tensors(q, 0);

        } else if (oip_json_str_eq(&w.key, "outputs", 7)) {
            rc = oip_greq_tensors(q, 1);

        } else {
            /* nothing else has a place in a ModelInferRequest */
            rc = oip_json_skip(j);
        }

        if (rc != 0) {
            return -1;
        }
    }

    return (rc < 0) ? -1 : 0;
}


static int
oip_greq_string(oip_greq_t *q, const uint8_t **s, size_t *len)
{
    uint8_t    *p;
    oip_str_t   str;

    if (*q->j.p != '"') {
        return oip_fail(&q->c, 400, OIP_REASON_DATATYPE,
                        "a string was expected");
    }

    if (oip_json_string(&q->j, &str) != 0) {
        return -1;
    }

    if (!str.escaped) {
        *s = str.data;
        *len = str.len;
        return 0;
    }

    p = oip_alloc(&q->c, oip_json_unescaped_len(&str) + 1);
    if (p == NULL) {
        return -1;
    }

    *len = oip_json_unescape(p, &str);
    *s = p;

    return 0;
}


/*
 * A parameters object as InferParameters: a bool, an integer (int64, or
 * uint64 above it), another number (double: Triton's; KServe's proto has
 * no such field), a string.  An object or an array has no InferParameter.
 */

static int
oip_greq_params(oip_greq_t *q, oip_gparams_t *ps, const char *skip,
    const char *what, oip_ginput_t *t)
{
    int            rc;
    uint64_t       u;
    oip_num_t      n;
    oip_json_t    *j;
    oip_walk_t     w;
    oip_gparam_t  *p;

    j = &q->j;

    if (*j->p != '{') {
        return oip_fail(&q->c, 400, OIP_REASON_OTHER, "'parameters' must be an "
                        "object");
    }

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        if (*j->p == 'n' && oip_json_null(j)) {
            continue;
        }

        if (oip_json_str_eq(&w.key, skip, strlen(skip))) {
            /* the binary extension's own: nothing to tell over gRPC */

            if (t && strcmp(skip, "binary_data_size") == 0) {
                /* an input's: how much of the binary part is its own */
                if (oip_json_number(j, &n) != 0
                    || oip_num_u64(&n, &u) != OIP_NUM_OK || n.neg)
                {
                    return oip_fail(&q->c, 400, OIP_REASON_SHAPE,
                                    "'binary_data_size' must be a non-negative "
                                    "integer");
                }

                t->size = u;
                t->has_size = 1;

            } else if (oip_json_skip(j) != 0) {
                return -1;
            }

            continue;
        }

        if (ps->n == ps->cap) {
            p = oip_grow(&q->c, ps->p, ps->n, &ps->cap,
                         sizeof(oip_gparam_t));
            if (p == NULL) {
                return -1;
            }

            ps->p = p;
        }

        p = &ps->p[ps->n];
        memset(p, 0, sizeof(oip_gparam_t));

        if (w.key.escaped) {
            p->key = oip_alloc(&q->c, oip_json_unescaped_len(&w.key) + 1);
            if (p->key == NULL) {
                return -1;
            }

            p->key_len = oip_json_unescape((uint8_t *) p->key, &w.key);

        } else {
            p->key = w.key.data;
            p->key_len = w.key.len;
        }

        switch (*j->p) {

        case '"':
            p->kind = OIP_GP_STRING;
            rc = oip_greq_string(q, &p->s, &p->s_len);
            break;

        case 't':
        case 'f':
            p->kind = OIP_GP_BOOL;
            p->u = (*j->p == 't');
            rc = oip_json_skip(j);
            break;

        case '{':
        case '[':
            return oip_fail(&q->c, 400, OIP_REASON_OTHER, "%s%s%.*s%s "
                            "parameter '%.*s': a gRPC InferParameter holds a "
                            "bool, a number or a string, not %s", what,
                            t ? " '" : "",
                            t ? (int) oip_min(t->name_len, 64) : 0,
                            t ? (const char *) t->name : "", t ? "'" : "",
                            (int) oip_min(p->key_len, 64), p->key,
                            *j->p == '{' ? "an object" : "an array");

        default:
            rc = oip_json_number(j, &n);

            if (rc != 0) {
                break;
            }

            if (oip_num_u64(&n, &u) == OIP_NUM_OK
                && (!n.neg || u <= (uint64_t) INT64_MAX + 1))
            {
                if (n.neg) {
                    p->kind = OIP_GP_INT64;
                    p->u = (uint64_t) 0 - u;

                } else {
                    p->kind = (u > INT64_MAX) ? OIP_GP_UINT64 : OIP_GP_INT64;
                    p->u = u;
                }

            } else {
                p->kind = OIP_GP_DOUBLE;

                if (oip_num_double(&n, &p->d) != 0) {
                    return oip_fail(&q->c, 400, OIP_REASON_DATATYPE, "%s "
                                    "parameter '%.*s': a number out of range",
                                    what, (int) oip_min(p->key_len, 64),
                                    p->key);
                }
            }
        }

        if (rc != 0) {
            return -1;
        }

        ps->n++;
    }

    return (rc < 0) ? -1 : 0;
}


static int
oip_greq_tensors(oip_greq_t *q, int outputs)
{
    int            rc;
    size_t        *n, *cap;
    oip_arr_t      a;
    oip_json_t    *j;
    oip_ginput_t  *t, **ts;

    j = &q->j;

    if (*j->p != '[') {
        return oip_fail(&q->c, 400, OIP_REASON_OTHER, "'%s' must be an array",
                        outputs ? "outputs" : "inputs");
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    ts = outputs ? &q->out : &q->in;
    n = outputs ? &q->nout : &q->nin;
    cap = outputs ? &q->out_cap : &q->in_cap;

    while ((rc = oip_json_element(j, &a)) == 1) {

        if (*n == *cap) {
            t = oip_grow(&q->c, *ts, *n, cap, sizeof(oip_ginput_t));
            if (t == NULL) {
                return -1;
            }

            *ts = t;
        }

        t = &(*ts)[*n];
        memset(t, 0, sizeof(oip_ginput_t));
        t->dtype = OIP_DT_NONE;

        if (oip_greq_tensor(q, t, outputs) != 0) {
            return -1;
        }

        (*n)++;
    }

    return (rc < 0) ? -1 : 0;
}


static int
oip_greq_tensor(oip_greq_t *q, oip_ginput_t *t, int outputs)
{
    int          rc;
    uint64_t     u, *s;
    oip_num_t    n;
    oip_arr_t    a;
    oip_json_t  *j;
    oip_walk_t   w;

    j = &q->j;

    if (*j->p != '{') {
        return oip_fail(&q->c, 400, OIP_REASON_OTHER, "a tensor must be an "
                        "object");
    }

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        if (*j->p == 'n' && oip_json_null(j)) {
            continue;
        }

        if (oip_json_str_eq(&w.key, "name", 4)) {
            rc = oip_greq_string(q, &t->name, &t->name_len);

        } else if (outputs) {
            if (oip_json_str_eq(&w.key, "parameters", 10)) {
                rc = oip_greq_params(q, &t->params, "binary_data",
                                     "output", t);
            } else {
                rc = oip_json_skip(j);
            }

        } else if (oip_json_str_eq(&w.key, "datatype", 8)) {
            rc = oip_greq_string(q, &t->dt, &t->dt_len);

            if (rc == 0) {
                t->dtype = oip_dtype_find(t->dt, t->dt_len);
            }

        } else if (oip_json_str_eq(&w.key, "shape", 5)) {
            if (*j->p != '[' || oip_json_array(j, &a) != 0) {
                return oip_fail(&q->c, 400, OIP_REASON_SHAPE, "'shape' must be "
                                "an array");
            }

            while ((rc = oip_json_element(j, &a)) == 1) {
                if (oip_json_number(j, &n) != 0
                    || oip_num_u64(&n, &u) != OIP_NUM_OK || n.neg
                    || u > INT64_MAX)
                {
                    return oip_fail(&q->c, 400, OIP_REASON_SHAPE,
                                    "a dimension of a shape must be a "
                                    "non-negative integer");
                }

                if (t->rank == t->shape_cap) {
                    s = oip_grow(&q->c, t->shape, t->rank, &t->shape_cap,
                                 sizeof(uint64_t));
                    if (s == NULL) {
                        return -1;
                    }

                    t->shape = s;
                }

                t->shape[t->rank++] = u;
            }

            rc = (rc < 0) ? -1 : 0;

        } else if (oip_json_str_eq(&w.key, "parameters", 10)) {
            /* binary_data_size is read there */
            rc = oip_greq_params(q, &t->params, "binary_data_size", "input",
                                 t);

        } else {
            /* "data" cannot be here: the request was made binary */
            rc = oip_json_skip(j);
        }

        if (rc != 0) {
            return -1;
        }
    }

    return (rc < 0) ? -1 : 0;
}


/* the raw contents: the chunks after the header, input by input */

static int
oip_greq_data(oip_greq_t *q, const oip_seg_t *segs, size_t nsegs,
    size_t skip)
{
    size_t         i, k, off, need, take, cap;
    oip_seg_t     *d;
    oip_ginput_t  *t;

    k = 0;
    off = skip;

    for (i = 0; i < q->nin; i++) {
        t = &q->in[i];

        if (!t->has_size) {
            return oip_fail(&q->c, 400, OIP_REASON_OTHER, "input '%.*s' has no "
                            "data in the request: shared memory is not carried "
                            "to a gRPC upstream",
                            (int) oip_min(t->name_len, 64), t->name);
        }

        need = t->size;
        cap = 0;

        while (need) {
            while (k < nsegs && off >= segs[k].len) {
                off -= segs[k].len;
                k++;
            }

            if (k == nsegs) {
                return oip_fail(&q->c, 500, OIP_REASON_OTHER, "the binary "
                                "request is shorter than its tensors");
            }

            take = oip_min(need, segs[k].len - off);

            if (t->ndata == cap) {
                d = oip_grow(&q->c, t->data, t->ndata, &cap,
                             sizeof(oip_seg_t));
                if (d == NULL) {
                    return -1;
                }

                t->data = d;
            }

            t->data[t->ndata].data = segs[k].data + off;
            t->data[t->ndata].len = take;
            t->ndata++;

            off += take;
            need -= take;
        }
    }

    return 0;
}


/*
 * Typed contents, for runtimes that read no raw contents (TorchServe):
 * FP32, FP64 and BOOL are packed as their binary bytes already; the
 * integers become varints; BYTES one field per element.
 */

static int
oip_greq_typed(oip_greq_t *q, oip_ginput_t *t)
{
    size_t          i, n, len, size, el;
    int64_t         v;
    uint64_t        u;
    uint8_t        *dst, *p;
    const uint8_t  *src, *s, *end;

    if (t->dtype >= OIP_DT_NONE || oip_grpc_typed_field[t->dtype] == 0) {
        return oip_fail(&q->c, 400, OIP_REASON_OTHER, "input '%.*s': %.*s has "
                        "no typed contents field in gRPC (oip_grpc_contents "
                        "typed); it travels as raw contents only",
                        (int) oip_min(t->name_len, 64), t->name,
                        (int) oip_min(t->dt_len, 16), t->dt);
    }

    if (t->ndata > 1) {
        /* gathered, to be read element by element */
        dst = oip_alloc(&q->c, t->size);
        if (dst == NULL) {
            return -1;
        }

        for (i = 0, p = dst; i < t->ndata; i++) {
            memcpy(p, t->data[i].data, t->data[i].len);
            p += t->data[i].len;
        }

        t->data[0].data = dst;
        t->data[0].len = t->size;
        t->ndata = 1;
    }

    src = t->ndata ? t->data[0].data : NULL;
    size = t->size;

    switch (t->dtype) {

    case OIP_BOOL:
    case OIP_FP32:
    case OIP_FP64:
        t->typed = src;
        t->typed_len = size;
        t->typed_ref = 1;
        return 0;

    case OIP_BYTES:
        /* each element: a tag, its length, its bytes */
        len = 0;

        for (s = src, end = src + size; s < end; s += 4 + el) {
            el = (size_t) s[0] | (size_t) s[1] << 8 | (size_t) s[2] << 16
                 | (size_t) s[3] << 24;
            len += 1 + oip_pb_varint_len(el) + el;
        }

        dst = oip_alloc(&q->c, len ? len : 1);
        if (dst == NULL) {
            return -1;
        }

        for (s = src, p = dst; s < end; s += 4 + el) {
            el = (size_t) s[0] | (size_t) s[1] << 8 | (size_t) s[2] << 16
                 | (size_t) s[3] << 24;
            *p++ = 8 << 3 | OIP_PB_LEN;
            p = oip_pb_varint_put(p, el);
            memcpy(p, s + 4, el);
            p += el;
        }

        t->typed = dst;
        t->typed_len = len;
        return 0;

    default:
        break;
    }

    /* the integers, as varints: int32's negatives take ten bytes */

    el = oip_dtypes[t->dtype].size;
    n = size / el;

    for (i = 0, len = 0; i < n; i++) {
        oip_grpc_load_int(t->dtype, src + i * el, &v, &u);
        len += oip_pb_varint_len(u);
    }

    dst = oip_alloc(&q->c, len ? len : 1);
    if (dst == NULL) {
        return -1;
    }

    for (i = 0, p = dst; i < n; i++) {
        oip_grpc_load_int(t->dtype, src + i * el, &v, &u);
        p = oip_pb_varint_put(p, u);
    }

    t->typed = dst;
    t->typed_len = len;

    return 0;
}


/*
 * ModelInferRequest: model_name 1, model_version 2, id 3, parameters 4,
 * inputs 5, outputs 6, raw_input_contents 7.
 */

static void
oip_greq_write(oip_greq_t *q, oip_pb_t *w)
{
    size_t    i, k, len;
    oip_pb_t  count;

    oip_pb_str(w, 1, q->g->model, q->g->model_len);
    oip_pb_str(w, 2, q->g->version, q->g->version_len);
    oip_pb_str(w, 3, q->id, q->id_len);
    oip_greq_params_write(w, 4, &q->params);

    for (i = 0; i < q->nin; i++) {
        memset(&count, 0, sizeof(oip_pb_t));
        len = oip_greq_tensor_write(q, &count, &q->in[i]);

        oip_pb_tag(w, 5, OIP_PB_LEN);
        oip_pb_varint(w, len);
        (void) oip_greq_tensor_write(q, w, &q->in[i]);
    }

    for (i = 0; i < q->nout; i++) {
        memset(&count, 0, sizeof(oip_pb_t));
        oip_pb_str(&count, 1, q->out[i].name, q->out[i].name_len);
        oip_greq_params_write(&count, 2, &q->out[i].params);

        oip_pb_tag(w, 6, OIP_PB_LEN);
        oip_pb_varint(w, count.n);
        oip_pb_str(w, 1, q->out[i].name, q->out[i].name_len);
        oip_greq_params_write(w, 2, &q->out[i].params);
    }

    if (q->g->typed) {
        return;
    }

    /* every input has its entry, an empty tensor's too: they go by index */

    for (i = 0; i < q->nin; i++) {
        oip_pb_tag(w, 7, OIP_PB_LEN);
        oip_pb_varint(w, q->in[i].size);

        for (k = 0; k < q->in[i].ndata; k++) {
            oip_pb_ref(w, q->in[i].data[k].data, q->in[i].data[k].len);
        }
    }
}


/*
 * InferInputTensor: name 1, datatype 2, shape 3 (packed int64),
 * parameters 4, contents 5 (InferTensorContents).  Returns its length.
 */

static size_t
oip_greq_tensor_write(oip_greq_t *q, oip_pb_t *w, const oip_ginput_t *t)
{
    size_t    i, start, len;
    unsigned  field;

    start = w->n;

    oip_pb_str(w, 1, t->name, t->name_len);
    oip_pb_str(w, 2, t->dt, t->dt_len);

    if (t->rank) {
        for (i = 0, len = 0; i < t->rank; i++) {
            len += oip_pb_varint_len(t->shape[i]);
        }

        oip_pb_tag(w, 3, OIP_PB_LEN);
        oip_pb_varint(w, len);

        for (i = 0; i < t->rank; i++) {
            oip_pb_varint(w, t->shape[i]);
        }
    }

    oip_greq_params_write(w, 4, &t->params);

    if (q->g->typed && t->typed_len) {
        field = oip_grpc_typed_field[t->dtype];

        if (t->dtype == OIP_BYTES) {
            /* repeated bytes: the elements are fields of their own */
            len = t->typed_len;

        } else {
            len = 1 + oip_pb_varint_len(t->typed_len) + t->typed_len;
        }

        oip_pb_tag(w, 5, OIP_PB_LEN);
        oip_pb_varint(w, len);

        if (t->dtype != OIP_BYTES) {
            oip_pb_tag(w, field, OIP_PB_LEN);
            oip_pb_varint(w, t->typed_len);
        }

        oip_pb_ref(w, t->typed, t->typed_len);
    }

    return w->n - start;
}


/* map<string, InferParameter>: one entry each, key 1 and value 2 */

static void
oip_greq_params_write(oip_pb_t *w, unsigned field, const oip_gparams_t *ps)
{
    size_t               i, vlen;
    uint8_t              d[8];
    uint64_t             bits;
    const oip_gparam_t  *p;

    for (i = 0; i < ps->n; i++) {
        p = &ps->p[i];

        switch (p->kind) {
        case OIP_GP_STRING:
            vlen = 1 + oip_pb_varint_len(p->s_len) + p->s_len;
            break;
        case OIP_GP_DOUBLE:
            vlen = 1 + 8;
            break;
        default:
            vlen = 1 + oip_pb_varint_len(p->u);
        }

        oip_pb_tag(w, field, OIP_PB_LEN);
        oip_pb_varint(w, 1 + oip_pb_varint_len(p->key_len) + p->key_len
                         + 1 + oip_pb_varint_len(vlen) + vlen);

        /* the key even when empty: an entry's key is not optional */
        oip_pb_tag(w, 1, OIP_PB_LEN);
        oip_pb_varint(w, p->key_len);
        oip_pb_raw(w, p->key, p->key_len);

        oip_pb_tag(w, 2, OIP_PB_LEN);
        oip_pb_varint(w, vlen);

        switch (p->kind) {

        case OIP_GP_STRING:
            /* a oneof member is written even when it is "" */
            oip_pb_tag(w, OIP_GP_STRING, OIP_PB_LEN);
            oip_pb_varint(w, p->s_len);
            oip_pb_raw(w, p->s, p->s_len);
            break;

        case OIP_GP_DOUBLE:
            memcpy(&bits, &p->d, 8);
            oip_grpc_put64(d, bits);
            oip_pb_tag(w, OIP_GP_DOUBLE, OIP_PB_FIXED64);
            oip_pb_raw(w, d, 8);
            break;

        default:
            oip_pb_tag(w, p->kind, OIP_PB_VARINT);
            oip_pb_varint(w, p->u);
        }
    }
}

