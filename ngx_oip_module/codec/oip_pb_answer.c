
/*
 * Copyright (C) ngx_oip_module authors
 *
 * A framed ModelInferResponse read straight into an answer's items
 * (oip_answer_grpc()), for the envelope writer: its model name, version,
 * id and parameters as JSON text, each output's name, datatype, shape
 * and parameters, its bytes referenced where they lie in
 * raw_output_contents (typed contents are made binary once).  The
 * answer path then gives each client the form it asked for.
 */


#include "oip_pb.h"
#include "oip_number.h"


typedef struct {
    const uint8_t         *msg;        /* the InferOutputTensor */
    size_t                 len;
    const uint8_t         *raw;        /* raw_output_contents[i] */
    size_t                 raw_len;
    unsigned               has_raw:1;
} oip_gout_t;


static int oip_gres_stream(oip_ctx_t *c, oip_pbr_t *msg);
static int oip_gres_flat(oip_out_t *o, oip_seg_t *seg);
static int oip_gres_params(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg,
    size_t len, unsigned field, int *shm);
static int oip_gres_output(oip_msg_t *m, oip_gout_t *go, size_t index);
static int oip_gres_name(oip_msg_t *m, oip_item_t *it, const oip_pbf_t *f,
    size_t index);
static int oip_gres_dims(oip_msg_t *m, oip_item_t *it, const uint8_t *msg,
    size_t len);
static int oip_gres_contents(oip_ctx_t *c, oip_dtype_e dt,
    const uint8_t *msg, size_t len, uint8_t *dst, size_t *size);


int
oip_answer_grpc(oip_msg_t *m, oip_envelope_t *env, const uint8_t *body,
    size_t len, unsigned stream)
{
    int          rc, shm;
    size_t       i, k, nraw;
    oip_ctx_t   *c;
    oip_out_t    o;
    oip_pbr_t    r, msg;
    oip_pbf_t    f;
    oip_gout_t  *outs, *go;
    size_t       nouts, cap;
    struct {
        const uint8_t  *s;
        size_t          len;
    }            top[4];

    c = &m->c;
    memset(top, 0, sizeof(top));
    memset(env, 0, sizeof(oip_envelope_t));

    if (oip_grpc_unframe(c, body, len, &msg) != 0
        || (stream && oip_gres_stream(c, &msg) != 0))
    {
        return -1;
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
                go = oip_grow(c, outs, nouts, &cap, sizeof(oip_gout_t));
                if (go == NULL) {
                    return -1;
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
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer is not a "
                        "ModelInferResponse");
    }

    if (nraw) {
        if (nraw != nouts) {
            return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has "
                            "%zu raw output contents for %zu outputs", nraw,
                            nouts);
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

    /* the envelope, as JSON text: strings quoted, parameters' members */

    for (i = 1; i <= 3; i++) {
        if (i == 3 && top[3].len == 0) {
            /* an empty id is none */
            break;
        }

        oip_out_init(&o, c, 256);

        if (oip_gres_text(&o, top[i].s, top[i].len) != 0
            || oip_gres_flat(&o, i == 1 ? &env->model_name
                                 : i == 2 ? &env->model_version : &env->id)
               != 0)
        {
            return -1;
        }
    }

    oip_out_init(&o, c, 256);

    if (oip_gres_params(c, &o, msg.p, msg.end - msg.p, 4, &shm) != 0
        || oip_gres_flat(&o, &env->params) != 0)
    {
        return -1;
    }

    for (i = 0; i < nouts; i++) {
        if (oip_gres_output(m, &outs[i], i) != 0) {
            return -1;
        }
    }

    oip_free(c, outs);

    /* then what the REST pipeline checks of every answer */

    if (oip_msg_names(m) != 0) {
        return -1;
    }

    for (i = 0; i < m->nitems; i++) {
        if (oip_msg_chunk(m, &m->items[i], (size_t) -1) != 0) {
            return -1;
        }
    }

    return 0;
}


/*
 * ModelStreamInferResponse: error_message 1, infer_response 2.  A
 * decoupled model's stream carries one a response; an error ends it.
 * The message becomes its infer_response (absent: an empty one).
 */

static int
oip_gres_stream(oip_ctx_t *c, oip_pbr_t *msg)
{
    int           rc;
    oip_pbr_t     r;
    oip_pbf_t     f, error, inner;
    oip_reason_e  reason;

    r = *msg;

    memset(&error, 0, sizeof(oip_pbf_t));
    memset(&inner, 0, sizeof(oip_pbf_t));

    while ((rc = oip_pbr_next(&r, &f)) == 1) {
        if (f.type != OIP_PB_LEN) {
            continue;
        }

        if (f.field == 1) {
            error = f;

        } else if (f.field == 2) {
            inner = f;
        }
    }

    if (rc < 0) {
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer is not a "
                        "ModelStreamInferResponse");
    }

    if (error.len) {
        reason = oip_error_words(error.data, error.len);

        return oip_fail(c, 502, reason ? reason : OIP_REASON_OTHER, "the "
                        "runtime's stream ends with an error: %.*s",
                        (int) oip_utf8_cut(error.data, error.len, 160),
                        error.data);
    }

    /* an absent infer_response is an empty one, read as no fields */

    msg->p = inner.data ? inner.data : (const uint8_t *) "";
    msg->end = msg->p + inner.len;

    return 0;
}


/* what was written, in one piece */

static int
oip_gres_flat(oip_out_t *o, oip_seg_t *seg)
{
    size_t    i;
    uint8_t  *p;

    if (oip_out_cut(o) != 0) {
        return -1;
    }

    if (o->nsegs <= 1) {
        seg->data = o->nsegs ? o->segs[0].data : (const uint8_t *) "";
        seg->len = o->nsegs ? o->segs[0].len : 0;
        return 0;
    }

    p = oip_alloc(o->ctx, o->total);
    if (p == NULL) {
        return -1;
    }

    seg->data = p;
    seg->len = o->total;

    for (i = 0; i < o->nsegs; i++) {
        p = (uint8_t *) memcpy(p, o->segs[i].data, o->segs[i].len)
            + o->segs[i].len;
    }

    return 0;
}


/*
 * The map<string, InferParameter> entries of a message (its field
 * 'field') as the members of a JSON object, without its braces; *shm
 * says whether one is "shared_memory_region".
 */

static int
oip_gres_params(oip_ctx_t *c, oip_out_t *o, const uint8_t *msg, size_t len,
    unsigned field, int *shm)
{
    int        rc, n;
    double     d;
    uint8_t    num[OIP_NUM_MAX];
    oip_pbr_t  r, e, v;
    oip_pbf_t  f, ef, vf, key, val;

    r.p = msg;
    r.end = msg + len;
    n = 0;
    *shm = 0;

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

        if ((n && oip_out_write(o, ",", 1) != 0)
            || oip_gres_text(o, key.data, key.len) != 0
            || oip_out_write(o, ":", 1) != 0)
        {
            return -1;
        }

        n++;

        if (key.len == 20
            && memcmp(key.data, "shared_memory_region", 20) == 0)
        {
            *shm = 1;
        }

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
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has broken "
                        "parameters");
    }

    return 0;
}


/*
 * An InferOutputTensor as an item: name 1, datatype 2, shape 3,
 * parameters 4, contents 5; its bytes in raw_output_contents or made
 * binary from its typed contents.
 */

static int
oip_gres_output(oip_msg_t *m, oip_gout_t *go, size_t index)
{
    int           rc, shm;
    size_t        size;
    uint8_t      *dst;
    oip_ctx_t    *c;
    oip_out_t     o;
    oip_pbr_t     r;
    oip_pbf_t     f, name, dt, contents;
    oip_item_t   *it;

    c = &m->c;
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
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has a "
                        "broken output");
    }

    it = oip_msg_item_add(m);
    if (it == NULL) {
        return -1;
    }

    it->index = index;
    it->t.dt = oip_dtype_find(dt.data, dt.len);

    if (it->t.dt == OIP_DT_NONE) {
        return oip_fail(c, 502, OIP_REASON_DATATYPE, "the gRPC answer's output "
                        "'%.*s' has the datatype '%.*s'",
                        (int) oip_min(name.len, 64), name.data,
                        (int) oip_min(dt.len, 16), dt.data);
    }

    if (oip_gres_name(m, it, &name, index) != 0
        || oip_gres_dims(m, it, go->msg, go->len) != 0)
    {
        return -1;
    }

    oip_out_init(&o, c, 256);

    if (oip_gres_params(c, &o, go->msg, go->len, 4, &shm) != 0
        || oip_gres_flat(&o, &it->params_json) != 0)
    {
        return -1;
    }

    if (shm) {
        /* a REST answer would claim both: the pipeline refuses that */
        return oip_fail(c, 400, OIP_REASON_SHAPE, "output '%.*s' has more "
                        "than one of 'data', binary_data_size and "
                        "shared_memory_region",
                        (int) oip_utf8_cut(name.data, name.len, OIP_NAME_MAX),
                        name.data);
    }

    /*
     * raw_output_contents has one entry per output or none: an empty one
     * stands for an output carried in contents (a runtime that mixes).
     */

    if (go->has_raw && (go->raw_len || contents.data == NULL)) {
        it->bin = go->raw;
        size = go->raw_len;

    } else {
        if (oip_gres_contents(c, it->t.dt, contents.data, contents.len, NULL,
                              &size) != 0)
        {
            return -1;
        }

        dst = oip_alloc(c, size ? size : 1);
        if (dst == NULL) {
            return -1;
        }

        if (oip_gres_contents(c, it->t.dt, contents.data, contents.len, dst,
                              &size) != 0)
        {
            return -1;
        }

        it->bin = dst;
    }

    it->has_bds = 1;
    it->bds_size = size;
    it->settled = 1;
    it->data_done = 1;

    it->act = m->kind->act(m, it);

    return (it->act == OIP_ACT_FAIL) ? -1 : 0;
}


/* the name, as the REST pipeline would have it */

static int
oip_gres_name(oip_msg_t *m, oip_item_t *it, const oip_pbf_t *f,
    size_t index)
{
    size_t  i;

    if (f->len && !oip_utf8_valid(f->data, f->len)) {
        return oip_fail(&m->c, 502, OIP_REASON_OTHER, "the gRPC answer has a "
                        "string that is not UTF-8");
    }

    if (f->len == 0) {
        return oip_fail(&m->c, 400, OIP_REASON_OTHER, "outputs[%zu]: 'name' "
                        "must not be empty", index);
    }

    for (i = 0; i < f->len; i++) {
        if (f->data[i] < 0x20) {
            return oip_fail(&m->c, 400, OIP_REASON_OTHER, "outputs[%zu]: "
                            "'name' must not hold control characters", index);
        }
    }

    it->name.data = f->data;
    it->name.len = f->len;
    it->name.escaped = 0;
    it->has_name = 1;

    return 0;
}


/* the shape (field 3, packed or not): each dimension 0 to 2^63-1 */

static int
oip_gres_dims(oip_msg_t *m, oip_item_t *it, const uint8_t *msg, size_t len)
{
    size_t     i, n;
    uint64_t  *dims;

    if (oip_pbr_shape(&m->c, msg, len, 3, &dims, &n) != 0) {
        return -1;
    }

    it->t.shape = dims;
    it->t.rank = n;

    for (i = 0; i < n; i++) {
        if (dims[i] > (uint64_t) INT64_MAX) {
            return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "output '%.*s': "
                            "shape dimension %lld is not an integer from 0 "
                            "to 2^63-1",
                            (int) oip_utf8_cut(it->name.data, it->name.len,
                                               OIP_NAME_MAX),
                            it->name.data, (long long) (int64_t) dims[i]);
        }
    }

    if (oip_shape_count(dims, n, &it->t.count) != 0) {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "output '%.*s': the "
                        "product of its shape overflows 2^63-1",
                        (int) oip_utf8_cut(it->name.data, it->name.len,
                                           OIP_NAME_MAX), it->name.data);
    }

    return 0;
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
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has typed "
                        "contents for a %s output, which has none",
                        oip_dtypes[dt].name);
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
                return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has "
                                "broken bytes_contents");
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
            return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer's typed "
                            "contents do not fit a %s output",
                            oip_dtypes[dt].name);
        }

        if (wire != OIP_PB_VARINT) {
            /* fixed: the packed bytes are the binary ones */
            if (packed && f.len % el) {
                return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has "
                                "broken %s contents", oip_dtypes[dt].name);
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
                    return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer "
                                    "has broken %s contents",
                                    oip_dtypes[dt].name);
                }
            }

            if (!oip_grpc_fits(dt, v)) {
                return oip_fail(c, 502, OIP_REASON_DATATYPE, "the gRPC answer "
                                "has a value out of range for a %s output",
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
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has broken "
                        "contents");
    }

    *size = n;

    return 0;
}

