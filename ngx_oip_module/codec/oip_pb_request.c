
/*
 * A REST request as one framed ModelInferRequest, written from the items
 * oip_request.c read (oip_request_grpc(), the target of opt->grpc): no
 * REST body is made and no JSON read twice.  Names, datatypes and shapes
 * come from the items, parameters from where the scan found them, each
 * input's data is referenced where it lies (a binary chunk, or its JSON
 * data made binary), or written as typed contents; the message is sized,
 * then written.  With a sink, the tensors are in files: raw contents end
 * the message from the sink's file; typed contents are read back from
 * the head file and the inputs' and outputs' entries written to it.
 */


#include "oip_pb.h"
#include "oip_request.h"
#include "oip_number.h"


/* typed contents read from a chunk where it lies, at most this at once */
#define OIP_GREQ_PIECE  (1024 * 1024)


typedef struct {
    const uint8_t         *key;        /* unescaped */
    size_t                 key_len;
    unsigned               kind;       /* OIP_GP_* */
    uint64_t               u;          /* bool, int64 bits, uint64 */
    double                 d;
    const uint8_t         *s;          /* unescaped */
    size_t                 s_len;
    unsigned               slot:1;     /* a varint of 10 bytes, its
                                          place kept */
} oip_gparam_t;


typedef struct {
    oip_gparam_t          *p;
    size_t                 n;
    size_t                 cap;
    uint8_t               *slot;       /* where the slot was written */
} oip_gparams_t;


typedef struct {
    const uint8_t         *name;
    size_t                 name_len;
    const uint8_t         *dt;
    size_t                 dt_len;
    oip_dtype_e            dtype;
    const uint64_t        *shape;
    size_t                 rank;
    oip_gparams_t          params;
    uint64_t               size;       /* its binary size */

    /* its data, as the message carries it */
    oip_seg_t             *data;
    size_t                 ndata;
    oip_seg_t              one;        /* a binary chunk */
    const uint8_t         *typed;      /* typed contents written here */
    size_t                 typed_len;  /* the packed field's payload */
    unsigned               typed_ref:1; /* the payload is data itself */
    oip_item_t            *it;         /* with a sink: typed contents from
                                          its bytes, in the head file or
                                          where its chunk lies */
} oip_ginput_t;


/* typed contents made from binary pieces, as they come */

typedef struct {
    oip_out_t             *o;          /* NULL: only measured */
    uint64_t               len;        /* the contents' bytes */
    uint64_t               left;       /* BYTES: an element's bytes to come */
    uint8_t                el[4];      /* ... its length, as it comes */
    unsigned               nel;
} oip_gtyped_t;


typedef struct {
    oip_ctx_t             *c;
    oip_msg_t             *m;
    oip_json_t             j;          /* parameters, read again */
    const oip_grpc_options_t *g;

    const uint8_t         *id;
    size_t                 id_len;
    oip_gparams_t          params;

    oip_ginput_t          *in;
    size_t                 nin;

    oip_ginput_t          *out;        /* only name and parameters */
    size_t                 nout;

    unsigned               sunk:1;     /* raw contents in the sink's
                                          file, not written here */
    unsigned               filed:1;    /* the inputs and outputs in the
                                          sink's file (typed contents) */
} oip_greq_t;


static int oip_greq_items(oip_greq_t *q, oip_req_t *rq);
static int oip_greq_inputs(oip_greq_t *q, oip_msg_t *m);
static int oip_greq_name(oip_greq_t *q, const oip_str_t *s,
    const uint8_t **name, size_t *len);
static int oip_greq_string(oip_greq_t *q, const uint8_t **s, size_t *len);
static int oip_greq_params(oip_greq_t *q, const uint8_t *at,
    oip_gparams_t *ps, const char *skip, const char *what, oip_ginput_t *t);
static int oip_greq_param_list(oip_greq_t *q, oip_gparams_t *ps,
    const char *skip, const char *what, oip_ginput_t *t);
static int oip_greq_typed(oip_greq_t *q, oip_ginput_t *t);
static int oip_greq_typed_read(oip_greq_t *q, const oip_ginput_t *t,
    oip_out_t *o, uint64_t *len);
static int oip_greq_typed_piece(oip_gtyped_t *st, oip_dtype_e dt,
    const uint8_t *p, size_t len);
static int oip_greq_filed(oip_greq_t *q, uint64_t *len);
static int oip_greq_packed(oip_dtype_e dt);
static void oip_greq_write(oip_greq_t *q, oip_pb_t *w);
static void oip_greq_entries(oip_greq_t *q, oip_pb_t *w);
static int oip_greq_top(oip_greq_t *q, oip_req_t *rq);
static int oip_greq_leads(oip_greq_t *q, oip_msg_t *m);
static uint8_t *oip_greq_varint10(uint8_t *p, uint64_t v);
static void oip_greq_params_write(oip_pb_t *w, unsigned field,
    const oip_gparams_t *ps, uint8_t **slot);
static size_t oip_greq_tensor_write(oip_greq_t *q, oip_pb_t *w,
    const oip_ginput_t *t);


/* ------------------------------------------------ REST -> ModelInfer */

int
oip_request_grpc(oip_msg_t *m, oip_result_t *res)
{
    size_t       i, total, spooled;
    uint8_t      frame[5];
    oip_pb_t     w;
    oip_out_t    o;
    oip_greq_t   q;

    memset(&q, 0, sizeof(oip_greq_t));

    q.g = m->opt->grpc;
    q.m = m;
    q.c = &m->c;

    /* with a sink, the raw contents are in its file, after the rest;
     * typed ones in the head file, read back (oip_request_process()) */
    q.sunk = (m->c.sink != NULL && m->lead != NULL);
    q.filed = (m->c.sink != NULL && q.g->typed);
    spooled = q.sunk ? m->sink_off : 0;

    if (oip_greq_items(&q, m->data) != 0
        || oip_greq_inputs(&q, m) != 0)
    {
        return -1;
    }

    for (i = 0; q.g->typed && i < q.nin; i++) {
        if (oip_greq_typed(&q, &q.in[i]) != 0) {
            return -1;
        }
    }

    /* sized first: the frame's length leads the message */

    memset(&w, 0, sizeof(oip_pb_t));
    oip_greq_write(&q, &w);
    oip_greq_entries(&q, &w);
    total = w.n + spooled;

    if (total > q.g->max_message) {
        return oip_fail(q.c, 413, OIP_REASON_LIMIT, "the gRPC message of %zu "
                        "bytes exceeds oip_grpc_max_message (%zu bytes)",
                        total, q.g->max_message);
    }

    if ((q.sunk && oip_greq_leads(&q, m) != 0)
        || (q.filed && oip_greq_filed(&q, &spooled) != 0))
    {
        return -1;
    }

    oip_out_init(&o, q.c, 4096);

    o.file = m->file;
    o.file_len = m->file_len;

    oip_grpc_frame(frame, total);

    memset(&w, 0, sizeof(oip_pb_t));
    w.o = &o;

    oip_pb_raw(&w, frame, 5);
    oip_greq_write(&q, &w);

    if (!q.filed) {
        oip_greq_entries(&q, &w);
    }

    if (w.err || oip_out_cut(&o) != 0) {
        return -1;
    }

    if (w.n + spooled != total + 5) {
        return oip_fail(q.c, 500, OIP_REASON_OTHER, "internal error in the "
                        "gRPC encoder");
    }

    res->segs = o.segs;
    res->nsegs = o.nsegs;
    res->header_len = (q.sunk || q.filed) ? o.total : 0;
    res->spooled = spooled;
    res->body_len = o.total + spooled;
    res->deadline_at = q.params.slot;
    res->deadline_len = q.params.slot ? 10 : 0;
    res->deadline_pb = (q.params.slot != NULL);
    res->binary = 0;
    res->rewritten = 1;
    res->content_type = OIP_TYPE_GRPC;

    return 0;
}


/*
 * With a sink, ModelInferRequest's raw_input_contents (7) end the
 * message from its file: each input's bytes there, in the order of the
 * inputs, led by the tag and length written here into the place the
 * pass kept (oip_request_grpc_lead()); the chunks that stay binary are
 * copied into theirs.  The message is the one memory would write, byte
 * for byte.
 */

size_t
oip_request_grpc_lead(uint64_t len)
{
    return 1 + oip_pb_varint_len(len);
}


static int
oip_greq_leads(oip_greq_t *q, oip_msg_t *m)
{
    size_t       i, n;
    uint8_t      lead[16], *p;
    uint64_t     end;
    oip_item_t  *it;

    end = 0;

    for (i = 0; i < q->nin; i++) {
        it = &m->items[i];

        p = lead;
        *p++ = (uint8_t) ((7 << 3) | OIP_PB_LEN);
        p = oip_pb_varint_put(p, q->in[i].size);
        n = p - lead;

        /* each where the one before ends */

        if ((!it->spooled && !it->reserved) || it->sink_at - n != end) {
            goto misplaced;
        }

        end = it->sink_at + q->in[i].size;

        if (oip_sink_write(q->c, lead, n, it->sink_at - n) != 0
            || (it->reserved && oip_item_copy(m, it) != 0))
        {
            return -1;
        }
    }

    if (end == m->sink_off) {
        return 0;
    }

misplaced:

    return oip_fail(q->c, 500, OIP_REASON_OTHER, "internal error: raw "
                    "contents out of their places");
}


/* the request's id and parameters, and the outputs it names */

static int
oip_greq_items(oip_greq_t *q, oip_req_t *rq)
{
    size_t         i;
    oip_ginput_t  *t;

    if (rq->id_other) {
        /* a ModelInferRequest's id is a string */
        return oip_fail(q->c, 400, OIP_REASON_DATATYPE, "a string was "
                        "expected");
    }

    if (rq->id.data && oip_greq_name(q, &rq->id, &q->id, &q->id_len) != 0) {
        return -1;
    }

    if (rq->top.has_params
        && oip_greq_params(q, rq->top.params_at, &q->params,
                           "binary_data_output", "request", NULL)
           != 0)
    {
        return -1;
    }

    if ((rq->priority_new || rq->top.has_params) && oip_greq_top(q, rq) != 0)
    {
        return -1;
    }

    if (rq->nouts == 0) {
        return 0;
    }

    q->out = oip_alloc(q->c, rq->nouts * sizeof(oip_ginput_t));
    if (q->out == NULL) {
        return -1;
    }

    memset(q->out, 0, rq->nouts * sizeof(oip_ginput_t));
    q->nout = rq->nouts;

    for (i = 0; i < rq->nouts; i++) {
        t = &q->out[i];
        t->name = rq->out_names[i].data;
        t->name_len = rq->out_names[i].len;

        if (rq->outs[i].has_params
            && oip_greq_params(q, rq->outs[i].params_at, &t->params,
                               "binary_data", "output", t)
               != 0)
        {
            return -1;
        }
    }

    return 0;
}


/*
 * The inputs, from the items: parameters first, then the data, each
 * input's binary chunk or its JSON data made binary, referenced.
 */

static int
oip_greq_inputs(oip_greq_t *q, oip_msg_t *m)
{
    size_t         i;
    oip_item_t    *it;
    oip_ginput_t  *t;

    q->in = oip_alloc(q->c, (m->nitems ? m->nitems : 1)
                            * sizeof(oip_ginput_t));
    if (q->in == NULL) {
        return -1;
    }

    memset(q->in, 0, (m->nitems ? m->nitems : 1) * sizeof(oip_ginput_t));
    q->nin = m->nitems;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];
        t = &q->in[i];

        if (oip_greq_name(q, &it->name, &t->name, &t->name_len) != 0) {
            return -1;
        }

        /* re-typed to the signature's, perhaps: the item's datatype */

        t->dtype = it->t.dt;
        t->dt = (const uint8_t *) oip_dtypes[t->dtype].name;
        t->dt_len = oip_dtypes[t->dtype].len;
        t->shape = it->t.shape;
        t->rank = it->t.rank;

        if (it->params_at
            && oip_greq_params(q, it->params_at, &t->params,
                               "binary_data_size", "input", t)
               != 0)
        {
            return -1;
        }
    }

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];
        t = &q->in[i];

        t->it = q->filed ? it : NULL;

        if (it->act == OIP_ACT_BINARY) {
            t->data = it->chunk ? it->chunk : &it->one;
            t->ndata = it->nchunk;
            t->size = it->chunk_len;

        } else if (it->has_bds) {
            t->data = &t->one;
            t->data->data = it->bin;
            t->data->len = it->bds_size;
            t->ndata = 1;
            t->size = it->bds_size;

        } else {
            return oip_fail(q->c, 400, OIP_REASON_OTHER, "input '%.*s' has "
                            "no data in the request: shared memory is not "
                            "carried to a gRPC upstream",
                            (int) oip_min(t->name_len, 64), t->name);
        }
    }

    return 0;
}


/* a name or an id, unescaped */

static int
oip_greq_name(oip_greq_t *q, const oip_str_t *s, const uint8_t **name,
    size_t *len)
{
    uint8_t  *p;

    if (!s->escaped) {
        *name = s->data;
        *len = s->len;
        return 0;
    }

    p = oip_alloc(q->c, oip_json_unescaped_len(s) + 1);
    if (p == NULL) {
        return -1;
    }

    *len = oip_json_unescape(p, s);
    *name = p;

    return 0;
}


static int
oip_greq_string(oip_greq_t *q, const uint8_t **s, size_t *len)
{
    oip_str_t  str;

    /* the reader stands on a string value: the scan checked it */

    if (oip_json_string(&q->j, &str) != 0) {
        return -1;
    }

    return oip_greq_name(q, &str, s, len);
}


/*
 * A parameters object as InferParameters: a bool, an integer (int64, or
 * uint64 above it), another number (double: Triton's; KServe's proto has
 * no such field), a string.  An object or an array has no InferParameter.
 */

static int
oip_greq_params(oip_greq_t *q, const uint8_t *at, oip_gparams_t *ps,
    const char *skip, const char *what, oip_ginput_t *t)
{
    int  rc;

    /* a second look where the scan found an object */

    oip_msg_sub(q->m, &q->j, at);

    rc = oip_greq_param_list(q, ps, skip, what, t);

    oip_json_done(&q->j);

    return rc;
}


static int
oip_greq_param_list(oip_greq_t *q, oip_gparams_t *ps, const char *skip,
    const char *what, oip_ginput_t *t)
{
    int            rc;
    uint64_t       u;
    oip_num_t      n;
    oip_json_t    *j;
    oip_walk_t     w;
    oip_gparam_t  *p;

    j = &q->j;

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        if (*j->p == 'n' && oip_json_null(j)) {
            continue;
        }

        if (oip_json_str_eq(&w.key, skip, strlen(skip))) {
            /* the binary extension's own: nothing to tell over gRPC */

            if (oip_json_skip(j) != 0) {
                return -1;
            }

            continue;
        }

        if (ps->n == ps->cap) {
            p = oip_grow(q->c, ps->p, ps->n, &ps->cap,
                         sizeof(oip_gparam_t));
            if (p == NULL) {
                return -1;
            }

            ps->p = p;
        }

        p = &ps->p[ps->n];
        memset(p, 0, sizeof(oip_gparam_t));

        if (w.key.escaped) {
            p->key = oip_alloc(q->c, oip_json_unescaped_len(&w.key) + 1);
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
            return oip_fail(q->c, 400, OIP_REASON_OTHER, "%s%s%.*s%s "
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
                    return oip_fail(q->c, 400, OIP_REASON_DATATYPE, "%s "
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
        return oip_fail(q->c, 400, OIP_REASON_OTHER, "input '%.*s': %.*s has "
                        "no typed contents field in gRPC (oip_grpc_contents "
                        "typed); it travels as raw contents only",
                        (int) oip_min(t->name_len, 64), t->name,
                        (int) oip_min(t->dt_len, 16), t->dt);
    }

    if (t->it) {
        /* measured now, written with its entry */
        if (oip_greq_typed_read(q, t, NULL, &u) != 0) {
            return -1;
        }

        t->typed_len = (size_t) u;
        return 0;
    }

    if (t->ndata > 1) {
        /* gathered, to be read element by element */
        dst = oip_alloc(q->c, t->size);
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

    if (oip_greq_packed(t->dtype)) {
        t->typed = src;
        t->typed_len = size;
        t->typed_ref = 1;
        return 0;
    }

    switch (t->dtype) {

    case OIP_BYTES:
        /* each element: a tag, its length, its bytes */
        len = 0;

        for (s = src, end = src + size; s < end; s += 4 + el) {
            el = (size_t) s[0] | (size_t) s[1] << 8 | (size_t) s[2] << 16
                 | (size_t) s[3] << 24;
            len += 1 + oip_pb_varint_len(el) + el;
        }

        dst = oip_alloc(q->c, len ? len : 1);
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

    dst = oip_alloc(q->c, len ? len : 1);
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
 * Typed contents with a sink: the input's binary bytes, from the head
 * file (JSON data the pass made binary) or where its chunk lies, a block
 * at a time, made typed contents as they come; measured (o NULL: the
 * length into t->typed_len), or written to o.
 */

static int
oip_greq_typed_read(oip_greq_t *q, const oip_ginput_t *t, oip_out_t *o,
    uint64_t *len)
{
    size_t             n, k, cap;
    oip_item_t        *it;
    oip_gtyped_t       st;
    const uint8_t     *p;
    const oip_sink_t  *sink;

    it = t->it;
    sink = q->c->sink;

    if (!it->reserved && !it->spooled) {
        goto wrong;
    }

    if (o == NULL && oip_greq_packed(t->dtype)) {
        /* packed as their bytes: as long */
        *len = t->size;
        return 0;
    }

    memset(&st, 0, sizeof(oip_gtyped_t));
    st.o = o;

    /* whole elements in each piece: a block is a multiple of 8 */
    cap = sink->block & ~(size_t) 7;

    if (it->reserved) {
        /* where it lies: let go a little at a time */
        cap = oip_min(cap, OIP_GREQ_PIECE);
    }

    for (n = 0; n < t->size; n += k) {
        k = (size_t) oip_min(t->size - n, cap);

        if (it->reserved) {
            p = it->bin + n;

        } else {
            if (q->m->win == NULL) {
                /* the pass's window, its work done, or one as large */
                q->m->win = oip_alloc(q->c, sink->block);
                if (q->m->win == NULL) {
                    return -1;
                }
            }

            if (sink->read(sink->data, q->m->win, k, it->sink_at + n) != 0) {
                return oip_fail(q->c, 500, OIP_REASON_OTHER, "the request's "
                                "tensors could not be read back from their "
                                "temporary file");
            }

            p = q->m->win;
        }

        if (oip_greq_typed_piece(&st, t->dtype, p, k) != 0) {
            return -1;
        }

        if (it->reserved && sink->drop) {
            /* read out of the pass's order, and twice: let go each time */
            sink->drop(sink->data, p, k);
        }
    }

    if (st.nel || (o && st.len != t->typed_len)) {
        goto wrong;
    }

    *len = st.len;

    return 0;

wrong:

    return oip_fail(q->c, 500, OIP_REASON_OTHER, "internal error: typed "
                    "contents not where the pass put them");
}


/* a piece of an input's binary bytes, whole elements but for BYTES */

static int
oip_greq_typed_piece(oip_gtyped_t *st, oip_dtype_e dt, const uint8_t *p,
    size_t len)
{
    size_t    i, n, size;
    int64_t   v;
    uint64_t  u;
    uint8_t   buf[16], *b;

    if (oip_greq_packed(dt)) {
        st->len += len;
        return st->o ? oip_out_ref(st->o, p, len) : 0;
    }

    size = oip_dtypes[dt].size;

    if (size) {
        for (i = 0; i < len; i += size) {
            oip_grpc_load_int(dt, p + i, &v, &u);

            if (st->o == NULL) {
                st->len += oip_pb_varint_len(u);
                continue;
            }

            b = oip_pb_varint_put(buf, u);
            st->len += b - buf;

            if (oip_out_write(st->o, buf, b - buf) != 0) {
                return -1;
            }
        }

        return 0;
    }

    /* BYTES: each element's 4-byte length, then its bytes, cut anywhere */

    while (len) {
        if (st->nel < 4) {
            st->el[st->nel++] = *p++;
            len--;

            if (st->nel < 4) {
                continue;
            }

            st->left = (uint64_t) st->el[0] | (uint64_t) st->el[1] << 8
                       | (uint64_t) st->el[2] << 16
                       | (uint64_t) st->el[3] << 24;

            b = buf;
            *b++ = 8 << 3 | OIP_PB_LEN;
            b = oip_pb_varint_put(b, st->left);
            st->len += (b - buf) + st->left;

            if (st->o && oip_out_write(st->o, buf, b - buf) != 0) {
                return -1;
            }

        } else {
            n = (size_t) oip_min(st->left, len);

            if (st->o && oip_out_ref(st->o, p, n) != 0) {
                return -1;
            }

            p += n;
            len -= n;
            st->left -= n;
        }

        if (st->left == 0) {
            st->nel = 0;
        }
    }

    return 0;
}


/*
 * Typed contents with a sink: the inputs' entries, their contents read
 * back, and the outputs' are written to the sink's file, which follows
 * the rest of the message; the head file was the pass's.
 */

static int
oip_greq_filed(oip_greq_t *q, uint64_t *len)
{
    int        rc;
    oip_pb_t   w;
    oip_out_t  o;

    q->c->sink = q->m->body_sink;

    *len = 0;
    oip_out_init(&o, q->c, 0);
    oip_out_sink(&o, len);

    memset(&w, 0, sizeof(oip_pb_t));
    w.o = &o;

    oip_greq_entries(q, &w);

    rc = (w.err || oip_out_cut(&o) != 0) ? -1 : 0;

    oip_free(q->c, o.block);

    return rc;
}


/* FP32, FP64 and BOOL: packed typed contents as their binary bytes */

static int
oip_greq_packed(oip_dtype_e dt)
{
    return dt == OIP_BOOL || dt == OIP_FP32 || dt == OIP_FP64;
}


/*
 * ModelInferRequest: model_name 1, model_version 2, id 3, parameters 4,
 * then inputs 5, outputs 6, raw_input_contents 7.
 */

static void
oip_greq_write(oip_greq_t *q, oip_pb_t *w)
{
    oip_pb_str(w, 1, q->g->model, q->g->model_len);
    oip_pb_str(w, 2, q->g->version, q->g->version_len);
    oip_pb_str(w, 3, q->id, q->id_len);
    oip_greq_params_write(w, 4, &q->params, &q->params.slot);
}


/* what follows: the inputs, the outputs, the raw contents */

static void
oip_greq_entries(oip_greq_t *q, oip_pb_t *w)
{
    size_t    i, k, len;
    oip_pb_t  count;

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
        oip_greq_params_write(&count, 2, &q->out[i].params, NULL);

        oip_pb_tag(w, 6, OIP_PB_LEN);
        oip_pb_varint(w, count.n);
        oip_pb_str(w, 1, q->out[i].name, q->out[i].name_len);
        oip_greq_params_write(w, 2, &q->out[i].params, NULL);
    }

    if (q->g->typed || q->sunk) {
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
    uint64_t  u;
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

    oip_greq_params_write(w, 4, &t->params, NULL);

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

        if (t->typed || w->o == NULL) {
            oip_pb_ref(w, t->typed, t->typed_len);

        } else {
            /* with a sink: read back into the sink's file */
            w->n += t->typed_len;

            if (!w->err && oip_greq_typed_read(q, t, w->o, &u) != 0) {
                w->err = 1;
            }
        }
    }

    return w->n - start;
}


/* map<string, InferParameter>: one entry each, key 1 and value 2 */

static void
oip_greq_params_write(oip_pb_t *w, unsigned field, const oip_gparams_t *ps,
    uint8_t **slot)
{
    size_t               i, vlen;
    uint8_t              d[10];
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
            vlen = 1 + (p->slot ? 10 : oip_pb_varint_len(p->u));
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

            if (!p->slot) {
                oip_pb_varint(w, p->u);
                break;
            }

            /* written again when the request leaves: a fixed width,
             * which protobuf's readers take (up to 10 bytes) */

            if (w->o && !w->err && slot) {
                if (oip_out_reserve(w->o, 10) != 0) {
                    w->err = 1;
                    break;
                }

                *slot = w->o->pos;
            }

            oip_pb_raw(w, oip_greq_varint10(d, p->u), 10);
        }
    }
}


/* a varint in 10 bytes, whatever its value: continuation bits set */

static uint8_t *
oip_greq_varint10(uint8_t *p, uint64_t v)
{
    unsigned  i;

    for (i = 0; i < 9; i++) {
        p[i] = (uint8_t) ((v >> (7 * i)) & 0x7f) | 0x80;
    }

    p[9] = (uint8_t) (v >> 63);

    return p;
}


/*
 * The request-level parameters the gateway sets: the effective priority
 * as an int64_param (Triton reads int64 or uint64), the timeout in a
 * varint of fixed width for the glue to rewrite, a sequence id above
 * INT64_MAX as the int64_param Triton takes.
 */

static int
oip_greq_top(oip_greq_t *q, oip_req_t *rq)
{
    size_t         i;
    unsigned       found;
    oip_gparam_t  *p;

    found = 0;

    for (i = 0; i < q->params.n; i++) {
        p = &q->params.p[i];

        if (p->key_len == 8 && memcmp(p->key, "priority", 8) == 0) {
            if (rq->priority_new) {
                p->kind = OIP_GP_INT64;
                p->u = rq->priority_out;
            }

            found = 1;

        } else if (p->key_len == 7 && memcmp(p->key, "timeout", 7) == 0
                   && rq->timeout)
        {
            p->slot = 1;

        } else if (p->key_len == 11 && memcmp(p->key, "sequence_id", 11) == 0
                   && p->kind == OIP_GP_UINT64)
        {
            /* Triton's gRPC front takes an id as int64_param or
             * string_param only: the same 64 bits, which it reads back
             * as its unsigned correlation id */
            p->kind = OIP_GP_INT64;
        }
    }

    if (found || !rq->priority_new) {
        return 0;
    }

    if (q->params.n == q->params.cap) {
        p = oip_grow(q->c, q->params.p, q->params.n, &q->params.cap,
                     sizeof(oip_gparam_t));
        if (p == NULL) {
            return -1;
        }

        q->params.p = p;
    }

    p = &q->params.p[q->params.n++];
    memset(p, 0, sizeof(oip_gparam_t));

    p->key = (const uint8_t *) "priority";
    p->key_len = 8;
    p->kind = OIP_GP_INT64;
    p->u = rq->priority_out;

    return 0;
}

