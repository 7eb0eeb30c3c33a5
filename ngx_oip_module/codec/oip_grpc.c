
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The protocol's gRPC transport (inference.GRPCInferenceService), for
 * runtimes that serve gRPC only or best.  A REST request, validated and
 * made binary by oip_request_process(), becomes a ModelInfer call; the
 * ModelInferResponse becomes the binary REST answer it stands for, which
 * the answer path then gives each client in the form it asked for.
 *
 * Protobuf is written and read here, from the field numbers of the
 * protocol's grpc_predict_v2.proto and Triton's two more parameter kinds
 * (double, uint64).  Going up, tensors are referenced where they lie;
 * coming back, the outputs are copied once behind the header they get.
 */


#include <stdio.h>

#include "oip_grpc.h"
#include "oip_number.h"


/* wire types */
#define OIP_PB_VARINT        0
#define OIP_PB_FIXED64       1
#define OIP_PB_LEN           2
#define OIP_PB_FIXED32       5

/* InferParameter's oneof, by field number */
#define OIP_GP_BOOL          1
#define OIP_GP_INT64         2
#define OIP_GP_STRING        3
#define OIP_GP_DOUBLE        4
#define OIP_GP_UINT64        5

/* InferTensorContents' fields, by datatype (0: none, raw only) */
static const unsigned  oip_grpc_typed_field[] = {
    1,  /* BOOL:   bool_contents */
    4,  /* UINT8:  uint_contents */
    4,  /* UINT16 */
    4,  /* UINT32 */
    5,  /* UINT64: uint64_contents */
    2,  /* INT8:   int_contents */
    2,  /* INT16 */
    2,  /* INT32 */
    3,  /* INT64:  int64_contents */
    0,  /* FP16 */
    0,  /* BF16 */
    6,  /* FP32:   fp32_contents */
    7,  /* FP64:   fp64_contents */
    8   /* BYTES:  bytes_contents */
};


const char  *const oip_grpc_paths[] = {
    "/inference.GRPCInferenceService/ServerLive",
    "/inference.GRPCInferenceService/ServerReady",
    "/inference.GRPCInferenceService/ModelReady",
    "/inference.GRPCInferenceService/ServerMetadata",
    "/inference.GRPCInferenceService/ModelMetadata",
    "/inference.GRPCInferenceService/ModelInfer"
};


/* a protobuf writer; without an out it only counts, to size what nests */

typedef struct {
    oip_out_t             *o;          /* NULL: count */
    size_t                 n;
    int                    err;
} oip_pb_t;


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


static void oip_pb_raw(oip_pb_t *w, const void *data, size_t len);
static void oip_pb_ref(oip_pb_t *w, const uint8_t *data, size_t len);
static void oip_pb_varint(oip_pb_t *w, uint64_t v);
static void oip_pb_tag(oip_pb_t *w, unsigned field, unsigned type);
static void oip_pb_str(oip_pb_t *w, unsigned field, const uint8_t *s,
    size_t len);
static size_t oip_pb_varint_len(uint64_t v);

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


/* ---------------------------------------------------------- writing */

/* gRPC's length prefix: not compressed, then the length, big-endian */

static void
oip_grpc_frame(uint8_t *p, size_t len)
{
    p[0] = 0;
    p[1] = (uint8_t) (len >> 24);
    p[2] = (uint8_t) (len >> 16);
    p[3] = (uint8_t) (len >> 8);
    p[4] = (uint8_t) len;
}


static void
oip_pb_raw(oip_pb_t *w, const void *data, size_t len)
{
    w->n += len;

    if (w->o && !w->err && oip_out_write(w->o, data, len) != 0) {
        w->err = 1;
    }
}


static void
oip_pb_ref(oip_pb_t *w, const uint8_t *data, size_t len)
{
    w->n += len;

    if (w->o && !w->err && oip_out_ref(w->o, data, len) != 0) {
        w->err = 1;
    }
}


static size_t
oip_pb_varint_len(uint64_t v)
{
    size_t  n;

    for (n = 1; v >= 0x80; v >>= 7) {
        n++;
    }

    return n;
}


static uint8_t *
oip_pb_varint_put(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t) (v | 0x80);
        v >>= 7;
    }

    *p++ = (uint8_t) v;

    return p;
}


static void
oip_pb_varint(oip_pb_t *w, uint64_t v)
{
    uint8_t  buf[10];

    if (w->o == NULL) {
        w->n += oip_pb_varint_len(v);
        return;
    }

    oip_pb_raw(w, buf, oip_pb_varint_put(buf, v) - buf);
}


static void
oip_pb_tag(oip_pb_t *w, unsigned field, unsigned type)
{
    oip_pb_varint(w, (uint64_t) field << 3 | type);
}


/* a string or bytes field; proto3 leaves out what is empty */

static void
oip_pb_str(oip_pb_t *w, unsigned field, const uint8_t *s, size_t len)
{
    if (len == 0) {
        return;
    }

    oip_pb_tag(w, field, OIP_PB_LEN);
    oip_pb_varint(w, len);
    oip_pb_raw(w, s, len);
}


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
    oip_ctx_init(&q.c, a, res->error, (size_t) -1);

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
        oip_fail(&q.c, 500, "the binary request is shorter than its header");
        return res->status = q.c.status;
    }

    oip_json_init(&q.j, &q.c, hdr, header_len, 64);

    if (oip_greq_root(&q) != 0
        || oip_greq_data(&q, segs, nsegs, header_len) != 0)
    {
        oip_json_done(&q.j);
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
        oip_fail(&q.c, 413, "the gRPC message of %zu bytes exceeds "
                 "oip_grpc_max_message (%zu bytes)", total, g->max_message);
        return res->status = q.c.status;
    }

    oip_out_init(&o, &q.c, 4096);

    oip_grpc_frame(frame, total);

    memset(&w, 0, sizeof(oip_pb_t));
    w.o = &o;

    oip_pb_raw(&w, frame, 5);
    oip_greq_write(&q, &w);

    if (w.err || oip_out_cut(&o) != 0) {
        return res->status = q.c.status ? q.c.status : 500;
    }

    if (w.n != total + 5) {
        oip_fail(&q.c, 500, "internal error in the gRPC encoder");
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
        return oip_fail(&q->c, 500, "the binary request's header is not "
                        "an object");
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
        return oip_fail(&q->c, 400, "a string was expected");
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
        return oip_fail(&q->c, 400, "'parameters' must be an object");
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
                    return oip_fail(&q->c, 400, "'binary_data_size' must "
                                    "be a non-negative integer");
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
            return oip_fail(&q->c, 400, "%s%s%.*s%s parameter '%.*s': a "
                            "gRPC InferParameter holds a bool, a number "
                            "or a string, not %s", what,
                            t ? " '" : "",
                            t ? (int) oip_min(t->name_len, 64) : 0,
                            t ? (const char *) t->name : "",
                            t ? "'" : "", (int) oip_min(p->key_len, 64),
                            p->key, *j->p == '{' ? "an object"
                                                 : "an array");

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
                    return oip_fail(&q->c, 400, "%s parameter '%.*s': "
                                    "a number out of range", what,
                                    (int) oip_min(p->key_len, 64), p->key);
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
        return oip_fail(&q->c, 400, "'%s' must be an array",
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
        return oip_fail(&q->c, 400, "a tensor must be an object");
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
                return oip_fail(&q->c, 400, "'shape' must be an array");
            }

            while ((rc = oip_json_element(j, &a)) == 1) {
                if (oip_json_number(j, &n) != 0
                    || oip_num_u64(&n, &u) != OIP_NUM_OK || n.neg
                    || u > INT64_MAX)
                {
                    return oip_fail(&q->c, 400, "a dimension of a shape "
                                    "must be a non-negative integer");
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
            return oip_fail(&q->c, 400, "input '%.*s' has no data in the "
                            "request: shared memory is not carried to a "
                            "gRPC upstream", (int) oip_min(t->name_len, 64),
                            t->name);
        }

        need = t->size;
        cap = 0;

        while (need) {
            while (k < nsegs && off >= segs[k].len) {
                off -= segs[k].len;
                k++;
            }

            if (k == nsegs) {
                return oip_fail(&q->c, 500, "the binary request is shorter "
                                "than its tensors");
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
        return oip_fail(&q->c, 400, "input '%.*s': %.*s has no typed "
                        "contents field in gRPC (oip_grpc_contents typed); "
                        "it travels as raw contents only",
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


/* ------------------------------------------------------------ reading */

typedef struct {
    const uint8_t         *p;
    const uint8_t         *end;
} oip_pbr_t;


typedef struct {
    unsigned               field;
    unsigned               type;
    uint64_t               v;          /* a varint's value */
    const uint8_t         *data;       /* LEN and fixed: the bytes */
    size_t                 len;
} oip_pbf_t;


static int
oip_pbr_varint(oip_pbr_t *r, uint64_t *v)
{
    unsigned  shift;
    uint64_t  x;

    x = 0;

    for (shift = 0; shift < 64; shift += 7) {
        if (r->p == r->end) {
            return -1;
        }

        x |= (uint64_t) (*r->p & 0x7f) << shift;

        if ((*r->p++ & 0x80) == 0) {
            *v = x;
            return 0;
        }
    }

    return -1;
}


/* the next field; 0 at the end, -1 for what is not protobuf */

static int
oip_pbr_next(oip_pbr_t *r, oip_pbf_t *f)
{
    uint64_t  tag, len;

    if (r->p == r->end) {
        return 0;
    }

    if (oip_pbr_varint(r, &tag) != 0 || (tag >> 3) == 0
        || (tag >> 3) > 0x1fffffff)
    {
        return -1;
    }

    f->field = (unsigned) (tag >> 3);
    f->type = (unsigned) (tag & 7);
    f->v = 0;
    f->data = NULL;
    f->len = 0;

    switch (f->type) {

    case OIP_PB_VARINT:
        return (oip_pbr_varint(r, &f->v) == 0) ? 1 : -1;

    case OIP_PB_FIXED64:
    case OIP_PB_FIXED32:
        len = (f->type == OIP_PB_FIXED64) ? 8 : 4;
        break;

    case OIP_PB_LEN:
        if (oip_pbr_varint(r, &len) != 0) {
            return -1;
        }

        break;

    default:
        /* groups: not in this protocol */
        return -1;
    }

    if (len > (uint64_t) (r->end - r->p)) {
        return -1;
    }

    f->data = r->p;
    f->len = (size_t) len;
    r->p += len;

    return 1;
}


/* one gRPC message, as its 5-byte prefix frames it */

static int
oip_grpc_unframe(oip_ctx_t *c, const uint8_t *body, size_t len,
    oip_pbr_t *r)
{
    size_t  mlen;

    if (len < 5) {
        return oip_fail(c, 502, "the gRPC answer holds no message "
                        "(%zu bytes)", len);
    }

    if (body[0] != 0) {
        return oip_fail(c, 502, "the gRPC answer is compressed "
                        "(grpc-encoding), which is not supported");
    }

    mlen = (size_t) body[1] << 24 | (size_t) body[2] << 16
           | (size_t) body[3] << 8 | body[4];

    if (mlen != len - 5) {
        return oip_fail(c, 502, "the gRPC answer's message of %zu bytes "
                        "comes with %zu", mlen, len - 5);
    }

    r->p = body + 5;
    r->end = body + len;

    return 0;
}


/*
 * A repeated int64 field (a shape) as a JSON array: packed, or one field
 * a dimension, or both, as protobuf parsers must take it.
 */

static int
oip_gres_shape(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field)
{
    int        nd;
    uint8_t    num[24];
    uint64_t   v;
    oip_pbr_t  r, s;
    oip_pbf_t  f;

    r.p = msg;
    r.end = msg + len;
    nd = 0;

    if (oip_out_write(o, "[", 1) != 0) {
        return -1;
    }

    while (oip_pbr_next(&r, &f) == 1) {
        if (f.field != field) {
            continue;
        }

        s.p = f.data;
        s.end = f.data ? f.data + f.len : NULL;

        while (f.type == OIP_PB_VARINT || s.p < s.end) {
            if (f.type == OIP_PB_VARINT) {
                v = f.v;

            } else if (f.type != OIP_PB_LEN || oip_pbr_varint(&s, &v) != 0) {
                return oip_fail(c, 502, "the gRPC answer has a broken "
                                "shape");
            }

            if ((nd++ && oip_out_write(o, ",", 1) != 0)
                || oip_out_write(o, num,
                                 oip_print_i64(num, (int64_t) v) - num)
                   != 0)
            {
                return -1;
            }

            if (f.type == OIP_PB_VARINT) {
                break;
            }
        }
    }

    return oip_out_write(o, "]", 1);
}


/* -------------------------------------- ModelInferResponse -> REST */

typedef struct {
    const uint8_t         *msg;        /* the InferOutputTensor */
    size_t                 len;
    const uint8_t         *raw;        /* raw_output_contents[i] */
    size_t                 raw_len;
    unsigned               has_raw:1;
} oip_gout_t;


static int oip_gres_text(oip_out_t *o, const uint8_t *s, size_t len);
static int oip_gres_params(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg,
    size_t len, unsigned field, uint64_t bds, int with_bds);
static int oip_gres_output(oip_ctx_t *c, oip_out_t *o, oip_gout_t *go,
    uint8_t *dst, size_t *size);
static int oip_gres_contents(oip_ctx_t *c, oip_dtype_e dt,
    const uint8_t *msg, size_t len, uint8_t *dst, size_t *size);


int
oip_grpc_response(oip_result_t *res, const oip_alloc_t *a,
    const uint8_t *body, size_t len, oip_seg_t *answer, size_t *header_len)
{
    int          rc;
    size_t       i, k, nraw, data_len, size;
    uint8_t     *all, *p;
    oip_ctx_t    c;
    oip_out_t    o;
    oip_pbr_t    r, msg;
    oip_pbf_t    f;
    oip_gout_t  *outs, *go;
    size_t       nouts, cap;
    struct {
        const uint8_t  *s;
        size_t          len;
    }            top[4];

    memset(res, 0, sizeof(oip_result_t));
    memset(top, 0, sizeof(top));
    oip_ctx_init(&c, a, res->error, (size_t) -1);

    if (oip_grpc_unframe(&c, body, len, &msg) != 0) {
        return res->status = c.status;
    }

    r = msg;
    outs = NULL;
    nouts = 0;
    cap = 0;
    nraw = 0;

    /* first the outputs and their raw contents, which pair by index */

    while ((rc = oip_pbr_next(&r, &f)) == 1) {

        if (f.field <= 3 && f.type == OIP_PB_LEN) {
            /* model_name, model_version, id */
            top[f.field].s = f.data;
            top[f.field].len = f.len;

        } else if (f.field == 5 && f.type == OIP_PB_LEN) {
            if (nouts == cap) {
                go = oip_grow(&c, outs, nouts, &cap, sizeof(oip_gout_t));
                if (go == NULL) {
                    return res->status = c.status;
                }

                outs = go;
            }

            memset(&outs[nouts], 0, sizeof(oip_gout_t));
            outs[nouts].msg = f.data;
            outs[nouts].len = f.len;
            nouts++;

        } else if (f.field == 6 && f.type == OIP_PB_LEN) {
            nraw++;
        }
    }

    if (rc < 0) {
        oip_fail(&c, 502, "the gRPC answer is not a ModelInferResponse");
        return res->status = c.status;
    }

    if (nraw) {
        if (nraw != nouts) {
            oip_fail(&c, 502, "the gRPC answer has %zu raw output contents "
                     "for %zu outputs", nraw, nouts);
            return res->status = c.status;
        }

        r = msg;

        for (k = 0; oip_pbr_next(&r, &f) == 1; /* void */) {
            if (f.field == 6 && f.type == OIP_PB_LEN) {
                outs[k].raw = f.data;
                outs[k].raw_len = f.len;
                outs[k].has_raw = 1;
                k++;
            }
        }
    }

    /* the header, then the outputs' bytes behind it, in one piece */

    oip_out_init(&o, &c, 1024);

    if (oip_out_write(&o, "{\"model_name\":", 14) != 0
        || oip_gres_text(&o, top[1].s, top[1].len) != 0
        || oip_out_write(&o, ",\"model_version\":", 17) != 0
        || oip_gres_text(&o, top[2].s, top[2].len) != 0)
    {
        return res->status = c.status;
    }

    if (top[3].len
        && (oip_out_write(&o, ",\"id\":", 6) != 0
            || oip_gres_text(&o, top[3].s, top[3].len) != 0))
    {
        return res->status = c.status;
    }

    if (oip_gres_params(&c, &o, msg.p, msg.end - msg.p, 4, 0, 0) != 0
        || oip_out_write(&o, ",\"outputs\":[", 12) != 0)
    {
        return res->status = c.status;
    }

    data_len = 0;

    for (i = 0; i < nouts; i++) {
        if ((i && oip_out_write(&o, ",", 1) != 0)
            || oip_gres_output(&c, &o, &outs[i], NULL, &size) != 0)
        {
            return res->status = c.status;
        }

        data_len += size;
    }

    if (oip_out_write(&o, "]}", 2) != 0 || oip_out_cut(&o) != 0) {
        return res->status = c.status;
    }

    all = oip_alloc(&c, o.total + data_len + 1);
    if (all == NULL) {
        return res->status = c.status;
    }

    for (i = 0, p = all; i < o.nsegs; i++) {
        memcpy(p, o.segs[i].data, o.segs[i].len);
        p += o.segs[i].len;
    }

    for (i = 0; i < nouts; i++) {
        if (oip_gres_output(&c, NULL, &outs[i], p, &size) != 0) {
            return res->status = c.status;
        }

        p += size;
    }

    answer->data = all;
    answer->len = o.total + data_len;
    *header_len = o.total;

    return res->status = 0;
}


/* a protobuf string as a JSON string */

static int
oip_gres_text(oip_out_t *o, const uint8_t *s, size_t len)
{
    size_t  n;

    if (len == 0) {
        /* an absent field: s may be NULL */
        return oip_out_write(o, "\"\"", 2);
    }

    if (!oip_utf8_valid(s, len)) {
        return oip_fail(o->ctx, 502, "the gRPC answer has a string that is "
                        "not UTF-8");
    }

    n = oip_json_escape(NULL, s, len);

    if (oip_out_reserve(o, n + 2) != 0) {
        return -1;
    }

    *o->pos++ = '"';
    o->pos += oip_json_escape(o->pos, s, len);
    *o->pos++ = '"';

    return 0;
}


/*
 * The map<string, InferParameter> entries of a message (its field
 * 'field') as ,"parameters":{...}; an output's gets binary_data_size.
 * Nothing is written when there is nothing to write.
 */

static int
oip_gres_params(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field, uint64_t bds, int with_bds)
{
    int        rc, n;
    double     d;
    uint8_t    num[40];
    oip_pbr_t  r, e, v;
    oip_pbf_t  f, ef, vf, key, val;

    r.p = msg;
    r.end = msg + len;
    n = 0;

    while ((rc = oip_pbr_next(&r, &f)) == 1) {
        if (f.field != field || f.type != OIP_PB_LEN) {
            continue;
        }

        e.p = f.data;
        e.end = f.data + f.len;
        memset(&key, 0, sizeof(oip_pbf_t));
        memset(&val, 0, sizeof(oip_pbf_t));

        while ((rc = oip_pbr_next(&e, &ef)) == 1) {
            if (ef.field == 1 && ef.type == OIP_PB_LEN) {
                key = ef;

            } else if (ef.field == 2 && ef.type == OIP_PB_LEN) {
                val = ef;
            }
        }

        if (rc < 0) {
            break;
        }

        /* the oneof: the last member seen wins, as protobuf has it */

        v.p = val.data;
        v.end = val.data ? val.data + val.len : NULL;
        memset(&vf, 0, sizeof(oip_pbf_t));

        while ((rc = oip_pbr_next(&v, &ef)) == 1) {
            if (ef.field >= OIP_GP_BOOL && ef.field <= OIP_GP_UINT64) {
                vf = ef;
            }
        }

        if (rc < 0) {
            break;
        }

        if (vf.field == 0) {
            /* a kind this proto does not know: nothing to say */
            continue;
        }

        if (oip_out_write(o, n ? "," : ",\"parameters\":{", n ? 1 : 15) != 0
            || oip_gres_text(o, key.data, key.len) != 0
            || oip_out_write(o, ":", 1) != 0)
        {
            return -1;
        }

        n++;

        switch (vf.field) {

        case OIP_GP_BOOL:
            rc = vf.v ? oip_out_write(o, "true", 4)
                      : oip_out_write(o, "false", 5);
            break;

        case OIP_GP_STRING:
            rc = (vf.type == OIP_PB_LEN) ? oip_gres_text(o, vf.data, vf.len)
                                         : oip_out_write(o, "null", 4);
            break;

        case OIP_GP_DOUBLE:
            if (vf.type != OIP_PB_FIXED64) {
                rc = oip_out_write(o, "null", 4);
                break;
            }

            memcpy(&d, vf.data, 8);

            /* JSON has no NaN or Infinity: KServe's REST writes null */
            rc = (d - d == 0)
                 ? oip_out_write(o, num, oip_print_double(num, d) - num)
                 : oip_out_write(o, "null", 4);
            break;

        case OIP_GP_INT64:
            rc = oip_out_write(o, num,
                               oip_print_i64(num, (int64_t) vf.v) - num);
            break;

        default:
            rc = oip_out_write(o, num, oip_print_u64(num, vf.v) - num);
        }

        if (rc != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return oip_fail(c, 502, "the gRPC answer has broken parameters");
    }

    if (with_bds) {
        if (oip_out_write(o, n ? "," : ",\"parameters\":{", n ? 1 : 15) != 0
            || oip_out_write(o, "\"binary_data_size\":", 19) != 0
            || oip_out_write(o, num, oip_print_u64(num, bds) - num) != 0)
        {
            return -1;
        }

        n++;
    }

    return (n && oip_out_write(o, "}", 1) != 0) ? -1 : 0;
}


/*
 * An InferOutputTensor: name 1, datatype 2, shape 3, parameters 4,
 * contents 5.  With o, its JSON is written and *size is its bytes' length;
 * with dst, its bytes are.
 */

static int
oip_gres_output(oip_ctx_t *c, oip_out_t *o, oip_gout_t *go, uint8_t *dst,
    size_t *size)
{
    int             rc;
    oip_pbr_t       r;
    oip_pbf_t       f, name, dt, contents;
    oip_dtype_e     dtype;

    r.p = go->msg;
    r.end = go->msg + go->len;

    memset(&name, 0, sizeof(oip_pbf_t));
    memset(&dt, 0, sizeof(oip_pbf_t));
    memset(&contents, 0, sizeof(oip_pbf_t));

    while ((rc = oip_pbr_next(&r, &f)) == 1) {
        if (f.type != OIP_PB_LEN) {
            continue;
        }

        if (f.field == 1) {
            name = f;
        } else if (f.field == 2) {
            dt = f;
        } else if (f.field == 5) {
            contents = f;
        }
    }

    if (rc < 0) {
        return oip_fail(c, 502, "the gRPC answer has a broken output");
    }

    dtype = oip_dtype_find(dt.data, dt.len);

    if (dtype == OIP_DT_NONE) {
        return oip_fail(c, 502, "the gRPC answer's output '%.*s' has the "
                        "datatype '%.*s'", (int) oip_min(name.len, 64),
                        name.data, (int) oip_min(dt.len, 16), dt.data);
    }

    /*
     * raw_output_contents has one entry per output or none: an empty one
     * stands for an output carried in contents (a runtime that mixes).
     */

    if (go->has_raw && go->raw_len == 0 && contents.data != NULL) {
        go->has_raw = 0;
    }

    if (o == NULL) {
        /* the bytes */
        if (go->has_raw) {
            memcpy(dst, go->raw, go->raw_len);
            *size = go->raw_len;
            return 0;
        }

        return oip_gres_contents(c, dtype, contents.data, contents.len, dst,
                                 size);
    }

    if (go->has_raw) {
        *size = go->raw_len;

    } else if (oip_gres_contents(c, dtype, contents.data, contents.len, NULL,
                                 size) != 0)
    {
        return -1;
    }

    if (oip_out_write(o, "{\"name\":", 8) != 0
        || oip_gres_text(o, name.data, name.len) != 0
        || oip_out_write(o, ",\"datatype\":", 12) != 0
        || oip_gres_text(o, dt.data, dt.len) != 0
        || oip_out_write(o, ",\"shape\":", 9) != 0
        || oip_gres_shape(c, o, go->msg, go->len, 3) != 0
        || oip_gres_params(c, o, go->msg, go->len, 4, *size, 1) != 0)
    {
        return -1;
    }

    return oip_out_write(o, "}", 1);
}


/*
 * Typed contents to little-endian bytes: *size counted (dst NULL) or
 * written.  Only the field of the output's datatype counts; packed and
 * unpacked both, as protobuf parsers must take them.
 */

static int
oip_gres_contents(oip_ctx_t *c, oip_dtype_e dt, const uint8_t *msg,
    size_t len, uint8_t *dst, size_t *size)
{
    int        rc, packed;
    size_t     n, el;
    unsigned   field, wire;
    uint64_t   v;
    oip_pbr_t  r, s;
    oip_pbf_t  f;

    *size = 0;

    if (msg == NULL) {
        return 0;
    }

    field = oip_grpc_typed_field[dt];
    el = oip_dtypes[dt].size;

    if (field == 0) {
        return oip_fail(c, 502, "the gRPC answer has typed contents for "
                        "a %s output, which has none", oip_dtypes[dt].name);
    }

    wire = (dt == OIP_FP32) ? OIP_PB_FIXED32
           : (dt == OIP_FP64) ? OIP_PB_FIXED64 : OIP_PB_VARINT;

    r.p = msg;
    r.end = msg + len;
    n = 0;

    while ((rc = oip_pbr_next(&r, &f)) == 1) {
        if (f.field != field) {
            continue;
        }

        if (dt == OIP_BYTES) {
            if (f.type != OIP_PB_LEN || f.len > UINT32_MAX) {
                return oip_fail(c, 502, "the gRPC answer has broken "
                                "bytes_contents");
            }

            if (dst) {
                oip_grpc_put32(dst + n, (uint32_t) f.len);
                memcpy(dst + n + 4, f.data, f.len);
            }

            n += 4 + f.len;
            continue;
        }

        packed = (f.type == OIP_PB_LEN);

        if (!packed && f.type != wire) {
            return oip_fail(c, 502, "the gRPC answer's typed contents do "
                            "not fit a %s output", oip_dtypes[dt].name);
        }

        if (wire != OIP_PB_VARINT) {
            /* fixed: the packed bytes are the binary ones */
            if (packed && f.len % el) {
                return oip_fail(c, 502, "the gRPC answer has broken "
                                "%s contents", oip_dtypes[dt].name);
            }

            if (dst) {
                memcpy(dst + n, f.data, f.len);
            }

            n += f.len;
            continue;
        }

        s.p = packed ? f.data : NULL;
        s.end = packed ? f.data + f.len : NULL;
        v = f.v;

        for ( ;; ) {
            if (packed) {
                if (s.p == s.end) {
                    break;
                }

                if (oip_pbr_varint(&s, &v) != 0) {
                    return oip_fail(c, 502, "the gRPC answer has broken "
                                    "%s contents", oip_dtypes[dt].name);
                }
            }

            if (!oip_grpc_fits(dt, v)) {
                return oip_fail(c, 502, "the gRPC answer has a value out of "
                                "range for a %s output",
                                oip_dtypes[dt].name);
            }

            if (dst) {
                oip_grpc_store_int(dst + n, el, v);
            }

            n += el;

            if (!packed) {
                break;
            }
        }
    }

    if (rc < 0) {
        return oip_fail(c, 502, "the gRPC answer has broken contents");
    }

    *size = n;

    return 0;
}


/* ------------------------------------------- health and metadata */

int
oip_grpc_call(oip_result_t *res, const oip_alloc_t *a,
    const oip_grpc_options_t *g, oip_rpc_e rpc)
{
    size_t      len;
    uint8_t    *p;
    oip_ctx_t   c;
    oip_seg_t  *seg;

    memset(res, 0, sizeof(oip_result_t));
    oip_ctx_init(&c, a, res->error, (size_t) -1);

    /* ModelReadyRequest, ModelMetadataRequest: name 1, version 2 */

    len = 0;

    if (rpc == OIP_RPC_MODEL_READY || rpc == OIP_RPC_MODEL_METADATA) {
        len += g->model_len ? 1 + oip_pb_varint_len(g->model_len)
                              + g->model_len : 0;
        len += g->version_len ? 1 + oip_pb_varint_len(g->version_len)
                                + g->version_len : 0;
    }

    seg = oip_alloc(&c, sizeof(oip_seg_t));
    p = oip_alloc(&c, 5 + len);

    if (seg == NULL || p == NULL) {
        return res->status = c.status;
    }

    seg->data = p;
    seg->len = 5 + len;

    oip_grpc_frame(p, len);
    p += 5;

    if (len && g->model_len) {
        *p++ = 1 << 3 | OIP_PB_LEN;
        p = oip_pb_varint_put(p, g->model_len);
        p = (uint8_t *) memcpy(p, g->model, g->model_len) + g->model_len;
    }

    if (len && g->version_len) {
        *p++ = 2 << 3 | OIP_PB_LEN;
        p = oip_pb_varint_put(p, g->version_len);
        memcpy(p, g->version, g->version_len);
    }

    res->segs = seg;
    res->nsegs = 1;
    res->body_len = seg->len;
    res->rewritten = 1;
    res->content_type = OIP_TYPE_GRPC;

    return res->status = 0;
}


/* repeated string field as a JSON array */

static int
oip_gans_strings(oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field)
{
    int        rc, n;
    oip_pbr_t  r;
    oip_pbf_t  f;

    r.p = msg;
    r.end = msg + len;
    n = 0;

    if (oip_out_write(o, "[", 1) != 0) {
        return -1;
    }

    while ((rc = oip_pbr_next(&r, &f)) == 1) {
        if (f.field == field && f.type == OIP_PB_LEN) {
            if ((n++ && oip_out_write(o, ",", 1) != 0)
                || oip_gres_text(o, f.data, f.len) != 0)
            {
                return -1;
            }
        }
    }

    return oip_out_write(o, "]", 1);
}


/* the string field 'field' of a message, "" when absent */

static int
oip_gans_string(oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field)
{
    oip_pbr_t  r;
    oip_pbf_t  f, s;

    r.p = msg;
    r.end = msg + len;
    memset(&s, 0, sizeof(oip_pbf_t));

    while (oip_pbr_next(&r, &f) == 1) {
        if (f.field == field && f.type == OIP_PB_LEN) {
            s = f;
        }
    }

    return oip_gres_text(o, s.data, s.len);
}


/* ModelMetadataResponse.TensorMetadata: name 1, datatype 2, shape 3 */

static int
oip_gans_tensors(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field)
{
    int         n;
    oip_pbr_t   r;
    oip_pbf_t   f;

    r.p = msg;
    r.end = msg + len;
    n = 0;

    if (oip_out_write(o, "[", 1) != 0) {
        return -1;
    }

    while (oip_pbr_next(&r, &f) == 1) {
        if (f.field != field || f.type != OIP_PB_LEN) {
            continue;
        }

        if ((n++ && oip_out_write(o, ",", 1) != 0)
            || oip_out_write(o, "{\"name\":", 8) != 0
            || oip_gans_string(o, f.data, f.len, 1) != 0
            || oip_out_write(o, ",\"datatype\":", 12) != 0
            || oip_gans_string(o, f.data, f.len, 2) != 0
            || oip_out_write(o, ",\"shape\":", 9) != 0
            || oip_gres_shape(c, o, f.data, f.len, 3) != 0
            || oip_out_write(o, "}", 1) != 0)
        {
            return -1;
        }
    }

    return oip_out_write(o, "]", 1);
}


int
oip_grpc_answer(oip_result_t *res, const oip_alloc_t *a, oip_rpc_e rpc,
    const uint8_t *body, size_t len, int *truth)
{
    int          rc;
    size_t       mlen;
    oip_ctx_t    c;
    oip_out_t    o;
    oip_pbr_t    r;
    oip_pbf_t    f;
    const char  *key;
    const uint8_t  *msg;

    memset(res, 0, sizeof(oip_result_t));
    oip_ctx_init(&c, a, res->error, (size_t) -1);

    *truth = -1;

    if (oip_grpc_unframe(&c, body, len, &r) != 0) {
        return res->status = c.status;
    }

    msg = r.p;
    mlen = r.end - r.p;

    /* all of it read once: what is not protobuf is said as such */

    while ((rc = oip_pbr_next(&r, &f)) == 1) { /* void */ }

    if (rc < 0) {
        oip_fail(&c, 502, "the gRPC answer is not a %s response",
                 oip_grpc_paths[rpc] + sizeof("/inference."
                                              "GRPCInferenceService/") - 1);
        return res->status = c.status;
    }

    oip_out_init(&o, &c, 256);

    switch (rpc) {

    case OIP_RPC_SERVER_LIVE:
    case OIP_RPC_SERVER_READY:
    case OIP_RPC_MODEL_READY:
        /* one bool, field 1 */
        *truth = 0;
        r.p = msg;

        while (oip_pbr_next(&r, &f) == 1) {
            if (f.field == 1 && f.type == OIP_PB_VARINT) {
                *truth = (f.v != 0);
            }
        }

        key = (rpc == OIP_RPC_SERVER_LIVE) ? "{\"live\":" : "{\"ready\":";

        rc = oip_out_write(&o, key, strlen(key)) != 0
             || oip_out_write(&o, *truth ? "true}" : "false}",
                              *truth ? 5 : 6) != 0;
        break;

    case OIP_RPC_SERVER_METADATA:
        /* name 1, version 2, extensions 3 */
        rc = oip_out_write(&o, "{\"name\":", 8) != 0
             || oip_gans_string(&o, msg, mlen, 1) != 0
             || oip_out_write(&o, ",\"version\":", 11) != 0
             || oip_gans_string(&o, msg, mlen, 2) != 0
             || oip_out_write(&o, ",\"extensions\":", 14) != 0
             || oip_gans_strings(&o, msg, mlen, 3) != 0
             || oip_out_write(&o, "}", 1) != 0;
        break;

    default:
        /* ModelMetadataResponse: name 1, versions 2, platform 3,
           inputs 4, outputs 5 */
        rc = oip_out_write(&o, "{\"name\":", 8) != 0
             || oip_gans_string(&o, msg, mlen, 1) != 0
             || oip_out_write(&o, ",\"versions\":", 12) != 0
             || oip_gans_strings(&o, msg, mlen, 2) != 0
             || oip_out_write(&o, ",\"platform\":", 12) != 0
             || oip_gans_string(&o, msg, mlen, 3) != 0
             || oip_out_write(&o, ",\"inputs\":", 10) != 0
             || oip_gans_tensors(&c, &o, msg, mlen, 4) != 0
             || oip_out_write(&o, ",\"outputs\":", 11) != 0
             || oip_gans_tensors(&c, &o, msg, mlen, 5) != 0
             || oip_out_write(&o, "}", 1) != 0;
    }

    if (rc || oip_out_cut(&o) != 0) {
        return res->status = c.status ? c.status : 500;
    }

    res->segs = o.segs;
    res->nsegs = o.nsegs;
    res->body_len = o.total;
    res->rewritten = 1;
    res->content_type = OIP_TYPE_JSON;

    return res->status = 0;
}


/*
 * grpc-status as HTTP, as google.rpc.Code documents each code's HTTP
 * mapping; CANCELLED, which it maps to 499 (the client closed), is the
 * upstream's here: 502.
 */

int
oip_grpc_http_status(unsigned code)
{
    static const int  http[] = {
        200,    /* OK */
        502,    /* CANCELLED */
        500,    /* UNKNOWN */
        400,    /* INVALID_ARGUMENT */
        504,    /* DEADLINE_EXCEEDED */
        404,    /* NOT_FOUND */
        409,    /* ALREADY_EXISTS */
        403,    /* PERMISSION_DENIED */
        429,    /* RESOURCE_EXHAUSTED */
        400,    /* FAILED_PRECONDITION */
        409,    /* ABORTED */
        400,    /* OUT_OF_RANGE */
        501,    /* UNIMPLEMENTED */
        500,    /* INTERNAL */
        503,    /* UNAVAILABLE */
        500,    /* DATA_LOSS */
        401     /* UNAUTHENTICATED */
    };

    return (code < sizeof(http) / sizeof(http[0])) ? http[code] : 502;
}
