
/*
 * Copyright (C) ngx_oip_module authors
 *
 * A framed ModelInferResponse as the binary REST answer it stands for
 * (oip_grpc_response()): a JSON header written from its fields, the
 * outputs' bytes copied once behind it, from raw or typed contents; the
 * answer path then gives each client the form it asked for.
 */


#include "oip_pb.h"
#include "oip_number.h"


/* -------------------------------------- ModelInferResponse -> REST */

typedef struct {
    const uint8_t         *msg;        /* the InferOutputTensor */
    size_t                 len;
    const uint8_t         *raw;        /* raw_output_contents[i] */
    size_t                 raw_len;
    unsigned               has_raw:1;
} oip_gout_t;




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
    oip_ctx_init(&c, a, res->error, &res->reason, (size_t) -1);

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
        oip_fail(&c, 502, OIP_REASON_OTHER, "the gRPC answer is not a "
                 "ModelInferResponse");
        return res->status = c.status;
    }

    if (nraw) {
        if (nraw != nouts) {
            oip_fail(&c, 502, OIP_REASON_OTHER, "the gRPC answer has %zu raw "
                     "output contents for %zu outputs", nraw, nouts);
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
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has broken "
                        "parameters");
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
        return oip_fail(c, 502, OIP_REASON_OTHER, "the gRPC answer has a "
                        "broken output");
    }

    dtype = oip_dtype_find(dt.data, dt.len);

    if (dtype == OIP_DT_NONE) {
        return oip_fail(c, 502, OIP_REASON_DATATYPE, "the gRPC answer's output "
                        "'%.*s' has the datatype '%.*s'",
                        (int) oip_min(name.len, 64), name.data,
                        (int) oip_min(dt.len, 16), dt.data);
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

