
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The generate extension emulated, as Triton's HTTP front maps it
 * (http_server.cc ConvertGenerateRequest, ExactMappingInput,
 * ExactMappingOutput): a generate request made the infer request it
 * stands for, from the model's signature, and an infer answer made the
 * generate answer.  Where Triton answers a misfit with a 500 (its JSON
 * reader's words), this says which input and why, with a 400.
 */


#include <stdio.h>
#include <stdlib.h>

#include "oip_signature.h"


#define OIP_GEN_KEYS_MAX     4096


typedef struct {
    oip_ctx_t              c;
    oip_json_t             j;
    const oip_options_t   *opt;
    oip_out_t              inputs;     /* the inputs' JSON, comma-led */
    oip_out_t              params;     /* the parameters' JSON, comma-led */
    uint64_t               leaves;     /* of the input being written */
    oip_str_t              id;         /* the request's, or none */
    unsigned               has_id:1;
    uint8_t               *seen;       /* an input given: 1 */
} oip_gen_t;


/* a member of the generate answer, to be sorted by key */

typedef struct {
    const uint8_t         *key;        /* unescaped */
    size_t                 key_len;
    const uint8_t         *val;        /* JSON text */
    size_t                 val_len;
    unsigned               rank;       /* 0 reserved, 1 parameter, 2 output */
} oip_gen_member_t;


static int oip_gen_member(oip_gen_t *g, const oip_str_t *key,
    unsigned nested);
static int oip_gen_input(oip_gen_t *g, const oip_str_t *key, size_t index,
    const oip_sig_tensor_t *t);
static int oip_gen_leaf(oip_gen_t *g, const oip_str_t *name,
    oip_dtype_e dt);
static int oip_gen_values(oip_gen_t *g, const oip_str_t *name,
    oip_dtype_e dt, uint64_t *n, unsigned outer);
static int oip_gen_param(oip_gen_t *g, const oip_str_t *key);
static int oip_gen_flatten(oip_json_t *j, oip_out_t *o, size_t *n);
static int oip_gen_cmp(const void *a, const void *b);
static int oip_gen_finish(oip_result_t *res, oip_out_t *o);


static const char  *oip_gen_kinds[] = {
    "true or false", "an integer >= 0", "an integer >= 0", "an integer >= 0",
    "an integer >= 0", "an integer", "an integer", "an integer",
    "an integer", "a number", "a number", "a number", "a number",
    "a string"
};


int
oip_generate_request(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const uint8_t *body, size_t len)
{
    int                      rc;
    oip_gen_t                g;
    oip_obj_t                o, po;
    oip_str_t                key, pkey;
    oip_out_t                out;
    oip_json_t              *j;
    const uint8_t           *ks, *pks;
    const oip_signature_t   *sig;

    memset(res, 0, sizeof(oip_result_t));
    memset(&g, 0, sizeof(oip_gen_t));

    g.opt = opt;
    sig = opt->signature;
    j = &g.j;

    oip_ctx_init(&g.c, a, res->error, &res->reason, opt->max_tensor_size);
    oip_json_init(j, &g.c, body, len, opt->max_depth ? opt->max_depth : 64);
    oip_out_init(&g.inputs, &g.c, 256);
    oip_out_init(&g.params, &g.c, 128);

    rc = -1;

    if (sig == NULL || sig->ninputs == 0) {
        oip_fail(&g.c, 500, OIP_REASON_OTHER, "generate: model '%.*s' has "
                 "no inputs known to map a generate request to",
                 (int) oip_utf8_cut(opt->model, opt->model_len,
                                    OIP_NAME_MAX), opt->model);
        goto done;
    }

    g.seen = oip_alloc(&g.c, sig->ninputs);
    if (g.seen == NULL) {
        goto done;
    }

    memset(g.seen, 0, sig->ninputs);

    oip_json_ws(j);

    if (j->p == j->end || *j->p != '{') {
        oip_fail(&g.c, 400, OIP_REASON_SYNTAX, "a generate request is a "
                 "JSON object");
        goto done;
    }

    if (oip_json_object(j, &o) != 0) {
        goto done;
    }

    /* the keys in their order, Triton's: each an input or a parameter */

    while ((rc = oip_json_member(j, &o, &key, &ks)) == 1) {

        if (!oip_json_str_eq(&key, "parameters", 10)) {
            if (oip_gen_member(&g, &key, 0) != 0) {
                rc = -1;
                goto done;
            }

            continue;
        }

        if (oip_sig_find(sig, 0, (const uint8_t *) "parameters", 10, NULL)) {
            oip_fail(&g.c, 400, OIP_REASON_SIGNATURE, "Keyword "
                     "'parameters' for nested schema also given as input "
                     "tensor name");
            rc = -1;
            goto done;
        }

        if (*j->p != '{') {
            oip_fail(&g.c, 400, OIP_REASON_SYNTAX, "generate: 'parameters' "
                     "must be a JSON object");
            rc = -1;
            goto done;
        }

        if (oip_json_object(j, &po) != 0) {
            rc = -1;
            goto done;
        }

        while ((rc = oip_json_member(j, &po, &pkey, &pks)) == 1) {
            if (oip_gen_member(&g, &pkey, 1) != 0) {
                rc = -1;
                goto done;
            }
        }

        if (rc < 0) {
            goto done;
        }
    }

    if (rc < 0) {
        goto done;
    }

    oip_json_ws(j);

    if (j->p != j->end) {
        oip_fail(&g.c, 400, OIP_REASON_SYNTAX, "bytes after the generate "
                 "request's JSON object");
        rc = -1;
        goto done;
    }

    /* {"id":...,"inputs":[...],"parameters":{...}} */

    oip_out_init(&out, &g.c, 64 + oip_out_len(&g.inputs)
                             + oip_out_len(&g.params) + g.id.len);

    rc = oip_out_write(&out, "{", 1);

    if (rc == 0 && g.has_id) {
        rc = oip_out_write(&out, "\"id\":\"", 6);
        rc = rc ? rc : oip_out_write(&out, g.id.data, g.id.len);
        rc = rc ? rc : oip_out_write(&out, "\",", 2);
    }

    rc = rc ? rc : oip_out_write(&out, "\"inputs\":[", 10);
    rc = rc ? rc : oip_gen_flatten(NULL, &g.inputs, NULL);

    if (rc == 0 && g.inputs.nsegs) {
        /* the first comma dropped */
        rc = oip_out_write(&out, g.inputs.segs[0].data + 1,
                           g.inputs.segs[0].len - 1);
    }

    rc = rc ? rc : oip_out_write(&out, "]", 1);
    rc = rc ? rc : oip_gen_flatten(NULL, &g.params, NULL);

    if (rc == 0 && g.params.nsegs) {
        rc = oip_out_write(&out, ",\"parameters\":{", 15);
        rc = rc ? rc : oip_out_write(&out, g.params.segs[0].data + 1,
                                     g.params.segs[0].len - 1);
        rc = rc ? rc : oip_out_write(&out, "}", 1);
    }

    rc = rc ? rc : oip_out_write(&out, "}", 1);
    rc = rc ? rc : oip_gen_finish(res, &out);

done:

    if (g.c.status) {
        rc = -1;
    }

    oip_json_done(j);
    oip_free(&g.c, g.seen);

    if (rc != 0 && g.c.status == 0) {
        oip_fail(&g.c, 500, OIP_REASON_OTHER, "generate: out of memory");
    }

    return res->status = (rc == 0) ? 0 : g.c.status;
}


/* a key and its value: an input of the model's, else a parameter */

static int
oip_gen_member(oip_gen_t *g, const oip_str_t *key, unsigned nested)
{
    size_t                   index, n;
    uint8_t                  name[OIP_NAME_MAX * 4];
    const uint8_t           *k;
    const oip_sig_tensor_t  *t;

    k = key->data;
    n = key->len;

    if (key->escaped) {
        /* names are compared unescaped */
        n = oip_json_unescaped_len(key);

        if (n > sizeof(name)) {
            return oip_gen_param(g, key);
        }

        n = oip_json_unescape(name, key);
        k = name;
    }

    t = oip_sig_find(g->opt->signature, 0, k, n, &index);

    if (t) {
        return oip_gen_input(g, key, index, t);
    }

    if (!nested && oip_json_str_eq(key, "id", 2)) {
        /* the request's id, and a parameter too, as Triton sets both */

        if (*g->j.p != '"') {
            return oip_fail(&g->c, 400, OIP_REASON_SYNTAX, "generate: "
                            "'id' must be a string");
        }

        k = g->j.p;

        if (oip_json_string(&g->j, &g->id) != 0) {
            return -1;
        }

        /* read again as the parameter */
        g->has_id = 1;
        g->j.p = k;
    }

    return oip_gen_param(g, key);
}


/*
 * An input: its values (a scalar, or an array, nested arrays flattened
 * but counted by the outer one), typed by its datatype, and its shape:
 * fixed dimensions must divide the count, the innermost -1 takes what
 * is left, other -1 are 1 (a batching model's -1 first, Triton's).
 */

static int
oip_gen_input(oip_gen_t *g, const oip_str_t *key, size_t index,
    const oip_sig_tensor_t *t)
{
    char                    buf[32];
    size_t                  i, rank;
    int64_t                 d;
    uint64_t                n, left, dims[64];
    oip_out_t              *o;
    oip_dtype_e             dt;
    const int64_t          *sdims;
    const oip_signature_t  *sig;

    sig = g->opt->signature;
    o = &g->inputs;

    if (g->seen[index]) {
        return oip_fail(&g->c, 400, OIP_REASON_SIGNATURE, "generate: input "
                        "'%.*s' is given twice", (int) oip_utf8_cut(key->data,
                        key->len, OIP_NAME_MAX), key->data);
    }

    g->seen[index] = 1;

    if (t->dt < 0 || t->dt >= OIP_DT_NONE) {
        return oip_fail(&g->c, 400, OIP_REASON_SIGNATURE, "generate: input "
                        "'%.*s' has a datatype this gateway does not know",
                        (int) oip_utf8_cut(key->data, key->len, OIP_NAME_MAX),
                        key->data);
    }

    dt = (oip_dtype_e) t->dt;

    if (oip_out_write(o, ",{\"name\":\"", 10) != 0
        || oip_out_write(o, key->data, key->len) != 0
        || oip_out_write(o, "\",\"datatype\":\"", 14) != 0
        || oip_out_write(o, oip_dtypes[dt].name, oip_dtypes[dt].len) != 0
        || oip_out_write(o, "\",\"data\":[", 10) != 0)
    {
        return -1;
    }

    n = 0;
    g->leaves = 0;

    if (oip_gen_values(g, key, dt, &n, 1) != 0) {
        return -1;
    }

    /* the shape */

    rank = (t->rank == OIP_SIG_ANY_RANK) ? 1 : t->rank;

    if (rank > 64) {
        return oip_fail(&g->c, 400, OIP_REASON_SHAPE, "generate: input "
                        "'%.*s' has too many dimensions", (int)
                        oip_utf8_cut(key->data, key->len, OIP_NAME_MAX),
                        key->data);
    }

    sdims = (t->rank == OIP_SIG_ANY_RANK) ? NULL : oip_sig_dims(sig, t);
    left = n;

    for (i = rank; i-- > 0; /* void */) {
        d = sdims ? sdims[i] : -1;

        if (d >= 0 && (d == 0 ? left != 0 : left % (uint64_t) d != 0)) {
            goto misfit;
        }

        if (d > 0) {
            left /= (uint64_t) d;
        }

        dims[i] = (d >= 0) ? (uint64_t) d : 0;
    }

    for (i = rank; i-- > 0; /* void */) {
        if ((sdims ? sdims[i] : -1) < 0) {
            dims[i] = left;
            left = 1;
        }
    }

    if (left != 1 && n != 0) {
        goto misfit;
    }

    if (oip_out_write(o, "],\"shape\":[", 11) != 0) {
        return -1;
    }

    for (i = 0; i < rank; i++) {
        snprintf(buf, sizeof(buf), "%s%llu", i ? "," : "",
                 (unsigned long long) dims[i]);

        if (oip_out_write(o, buf, strlen(buf)) != 0) {
            return -1;
        }
    }

    return oip_out_write(o, "]}", 2);

misfit:

    return oip_fail(&g->c, 400, OIP_REASON_SHAPE, "generate: input '%.*s' "
                    "of model '%.*s' cannot take %llu values: its shape is "
                    "%s", (int) oip_utf8_cut(key->data, key->len,
                                             OIP_NAME_MAX), key->data,
                    (int) oip_utf8_cut(g->opt->model, g->opt->model_len,
                                       OIP_NAME_MAX), g->opt->model,
                    (unsigned long long) n,
                    oip_sig_shape_str(sig, t, buf, sizeof(buf)));
}


/* a value or an array of them: the leaves written, *n the outer count */

static int
oip_gen_values(oip_gen_t *g, const oip_str_t *name, oip_dtype_e dt,
    uint64_t *n, unsigned outer)
{
    int          rc;
    oip_arr_t    a;
    oip_json_t  *j;

    j = &g->j;

    if (*j->p != '[') {
        *n = 1;
        return oip_gen_leaf(g, name, dt);
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    while ((rc = oip_json_element(j, &a)) == 1) {
        rc = (*j->p == '[') ? oip_gen_values(g, name, dt, n, 0)
                            : oip_gen_leaf(g, name, dt);
        if (rc != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return -1;
    }

    if (outer) {
        /* Triton counts the outer array; the leaves must be as many */
        if (g->leaves != a.n) {
            return oip_fail(&g->c, 400, OIP_REASON_SHAPE, "generate: input "
                            "'%.*s' has %llu values in an array of %llu",
                            (int) oip_utf8_cut(name->data, name->len,
                                               OIP_NAME_MAX), name->data,
                            (unsigned long long) g->leaves,
                            (unsigned long long) a.n);
        }

        *n = a.n;
    }

    return 0;
}


/* one value, checked against the datatype, written as it is */

static int
oip_gen_leaf(oip_gen_t *g, const oip_str_t *name, oip_dtype_e dt)
{
    int             ok;
    oip_num_t       num;
    oip_str_t       s;
    oip_json_t     *j;
    const uint8_t  *start;

    j = &g->j;
    start = j->p;

    switch (*j->p) {

    case '"':
        ok = (dt == OIP_BYTES) && oip_json_string(j, &s) == 0;
        break;

    case 't':
    case 'f':
        ok = (dt == OIP_BOOL) && oip_json_skip(j) == 0;
        break;

    case '{':
    case '[':
    case 'n':
        ok = 0;
        break;

    default:
        if (dt == OIP_BOOL || dt == OIP_BYTES
            || oip_json_number(j, &num) != 0)
        {
            ok = 0;
            break;
        }

        if (dt >= OIP_FP16 && dt <= OIP_FP64) {
            ok = 1;

        } else {
            ok = !num.has_frac && !num.has_exp && !num.special
                 && (dt >= OIP_INT8 || !num.neg);
        }
    }

    if (!ok) {
        if (g->c.status) {
            return -1;
        }

        return oip_fail(&g->c, 400, OIP_REASON_DATATYPE, "generate: input "
                        "'%.*s' of model '%.*s' is %s: each value must be %s",
                        (int) oip_utf8_cut(name->data, name->len,
                                           OIP_NAME_MAX), name->data,
                        (int) oip_utf8_cut(g->opt->model, g->opt->model_len,
                                           OIP_NAME_MAX), g->opt->model,
                        oip_dtypes[dt].name, oip_gen_kinds[dt]);
    }

    if (g->leaves++ && oip_out_write(&g->inputs, ",", 1) != 0) {
        return -1;
    }

    return oip_out_write(&g->inputs, start, j->p - start);
}


/* a request parameter: a string, a number or a boolean, as it is */

static int
oip_gen_param(oip_gen_t *g, const oip_str_t *key)
{
    oip_json_t     *j;
    const uint8_t  *start;

    j = &g->j;
    start = j->p;

    if (*j->p == '{' || *j->p == '[' || *j->p == 'n') {
        return oip_fail(&g->c, 400, OIP_REASON_SYNTAX, "parameter '%.*s' has "
                        "invalid type. It should be either 'int', 'bool', or "
                        "'string'.", (int) oip_utf8_cut(key->data, key->len,
                                                        OIP_NAME_MAX),
                        key->data);
    }

    if (oip_json_skip(j) != 0) {
        return -1;
    }

    return (oip_out_write(&g->params, ",\"", 2) != 0
            || oip_out_write(&g->params, key->data, key->len) != 0
            || oip_out_write(&g->params, "\":", 2) != 0
            || oip_out_write(&g->params, start, j->p - start) != 0)
           ? -1 : 0;
}


/*
 * o's segments as one (j NULL); or, with j, the leaves of the value at
 * j->p written comma-separated into o, *n counted.
 */

static int
oip_gen_flatten(oip_json_t *j, oip_out_t *o, size_t *n)
{
    int             rc;
    size_t          i, len;
    uint8_t        *p;
    oip_arr_t       a;
    const uint8_t  *start;

    if (j == NULL) {
        if (oip_out_cut(o) != 0) {
            return -1;
        }

        if (o->nsegs <= 1) {
            return 0;
        }

        len = o->total;

        p = oip_alloc(o->ctx, len);
        if (p == NULL) {
            return -1;
        }

        for (len = 0, i = 0; i < o->nsegs; i++) {
            memcpy(p + len, o->segs[i].data, o->segs[i].len);
            len += o->segs[i].len;
        }

        o->segs[0].data = p;
        o->segs[0].len = len;
        o->nsegs = 1;

        return 0;
    }

    if (*j->p != '[') {
        start = j->p;

        if (oip_json_skip(j) != 0) {
            return -1;
        }

        if (*n && oip_out_write(o, ",", 1) != 0) {
            return -1;
        }

        (*n)++;

        return oip_out_write(o, start, j->p - start);
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    while ((rc = oip_json_element(j, &a)) == 1) {
        if (oip_gen_flatten(j, o, n) != 0) {
            return -1;
        }
    }

    return (rc < 0) ? -1 : 0;
}


/*
 * An infer answer (JSON, every output's data in it) as Triton's generate
 * answer: its id when not empty, model_name, model_version, each
 * response parameter and each output at the top level, an output of one
 * element as that element, in the keys' byte order; a key that is taken
 * stays with the first: reserved, then parameters, then outputs.
 */

int
oip_generate_answer(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const uint8_t *json, size_t len)
{
    int                rc;
    size_t             i, k, n, nm, cap;
    oip_ctx_t          c;
    oip_obj_t          o, po, oo;
    oip_arr_t          arr;
    oip_str_t          key, s, name;
    oip_out_t          vals, out;
    oip_json_t         j;
    const uint8_t     *ks, *start;
    oip_gen_member_t  *m, *mm;

    memset(res, 0, sizeof(oip_result_t));

    oip_ctx_init(&c, a, res->error, &res->reason, (size_t) -1);
    oip_json_init(&j, &c, json, len, opt->max_depth ? opt->max_depth : 64);
    oip_out_init(&vals, &c, len + 64);

    m = NULL;
    nm = 0;
    cap = 0;
    rc = -1;

    oip_json_ws((&j));

    if (j.p == j.end || *j.p != '{') {
        oip_fail(&c, 502, OIP_REASON_OTHER, "the answer is not a JSON object");
        goto done;
    }

    if (oip_json_object(&j, &o) != 0) {
        goto done;
    }

#define oip_gen_add(kdata, klen, vstart, vlen, r)                             \
    if (nm == cap) {                                                          \
        mm = oip_grow(&c, m, nm, &cap, sizeof(oip_gen_member_t));             \
        if (mm == NULL) {                                                     \
            goto done;                                                        \
        }                                                                     \
        m = mm;                                                               \
    }                                                                         \
    m[nm].key = (kdata);                                                      \
    m[nm].key_len = (klen);                                                   \
    m[nm].val = (vstart);                                                     \
    m[nm].val_len = (vlen);                                                   \
    m[nm].rank = (r);                                                         \
    nm++

    while ((rc = oip_json_member(&j, &o, &key, &ks)) == 1) {
        start = j.p;

        if (oip_json_str_eq(&key, "id", 2)
            || oip_json_str_eq(&key, "model_name", 10)
            || oip_json_str_eq(&key, "model_version", 13))
        {
            if (oip_json_skip(&j) != 0) {
                goto done;
            }

            /* null is none (KServe), and an empty id */
            if (*start == 'n' || (key.len == 2 && j.p - start <= 2)) {
                continue;
            }

            oip_gen_add(key.data, key.len, start, j.p - start, 0);

        } else if (oip_json_str_eq(&key, "parameters", 10) && *j.p == '{') {
            if (oip_json_object(&j, &po) != 0) {
                goto done;
            }

            while ((rc = oip_json_member(&j, &po, &s, &ks)) == 1) {
                start = j.p;

                if (oip_json_skip(&j) != 0) {
                    goto done;
                }

                oip_gen_add(s.data, s.len, start, j.p - start, 1);
            }

            if (rc < 0) {
                goto done;
            }

        } else if (oip_json_str_eq(&key, "outputs", 7) && *j.p == '[') {
            if (oip_json_array(&j, &arr) != 0) {
                goto done;
            }

            while ((rc = oip_json_element(&j, &arr)) == 1) {
                if (*j.p != '{' || oip_json_object(&j, &oo) != 0) {
                    oip_fail(&c, 502, OIP_REASON_OTHER, "an output is not "
                             "a JSON object");
                    goto done;
                }

                name.data = NULL;
                name.len = 0;
                k = 0;
                start = NULL;
                n = oip_out_len(&vals);

                while ((rc = oip_json_member(&j, &oo, &s, &ks)) == 1) {
                    if (oip_json_str_eq(&s, "name", 4) && *j.p == '"') {
                        if (oip_json_string(&j, &name) != 0) {
                            goto done;
                        }

                    } else if (oip_json_str_eq(&s, "data", 4)) {
                        /* its leaves, one after the other */
                        start = (const uint8_t *) "";
                        k = 0;

                        if (oip_gen_flatten(&j, &vals, &k) != 0) {
                            goto done;
                        }

                    } else if (oip_json_skip(&j) != 0) {
                        goto done;
                    }
                }

                if (rc < 0 || name.data == NULL || start == NULL) {
                    oip_fail(&c, 502, OIP_REASON_OTHER, "an output without "
                             "its name or its data as JSON");
                    goto done;
                }

                /* offsets for now: vals may move as it grows */
                oip_gen_add(name.data, name.len, (const uint8_t *) n,
                            oip_out_len(&vals) - n, k == 1 ? 3 : 2);
            }

            if (rc < 0) {
                goto done;
            }

        } else if (oip_json_skip(&j) != 0) {
            goto done;
        }
    }

#undef oip_gen_add

    if (rc < 0 || oip_gen_flatten(NULL, &vals, NULL) != 0) {
        goto done;
    }

    for (i = 0; i < nm; i++) {
        if (m[i].rank >= 2) {
            m[i].val = (vals.nsegs ? vals.segs[0].data
                                   : (const uint8_t *) "")
                       + (size_t) m[i].val;
        }
    }

    if (nm) {
        qsort(m, nm, sizeof(oip_gen_member_t), oip_gen_cmp);
    }

    oip_out_init(&out, &c, len + 64);
    rc = oip_out_write(&out, "{", 1);

    for (i = 0; rc == 0 && i < nm; i++) {
        if (i > 0 && m[i].key_len == m[i - 1].key_len
            && memcmp(m[i].key, m[i - 1].key, m[i].key_len) == 0)
        {
            /* taken already, by what ranks first */
            continue;
        }

        rc = oip_out_write(&out, i ? ",\"" : "\"", i ? 2 : 1);
        rc = rc ? rc : oip_out_write(&out, m[i].key, m[i].key_len);
        rc = rc ? rc : oip_out_write(&out, "\":", 2);

        if (m[i].rank == 2) {
            rc = rc ? rc : oip_out_write(&out, "[", 1);
        }

        rc = rc ? rc : oip_out_write(&out, m[i].val, m[i].val_len);

        if (m[i].rank == 2) {
            rc = rc ? rc : oip_out_write(&out, "]", 1);
        }
    }

    rc = rc ? rc : oip_out_write(&out, "}", 1);
    rc = rc ? rc : oip_gen_finish(res, &out);

done:

    if (c.status) {
        rc = -1;
    }

    oip_json_done(&j);
    oip_free(&c, m);

    if (rc != 0 && c.status == 0) {
        oip_fail(&c, 500, OIP_REASON_OTHER, "generate: out of memory");
    }

    if (rc != 0 && c.status != 500) {
        /* what the runtime answered, not what the client sent */
        c.status = 502;
    }

    return res->status = (rc == 0) ? 0 : c.status;
}


/* by key, bytewise (Triton's std::map), then by rank */

static int
oip_gen_cmp(const void *a, const void *b)
{
    int                      r;
    size_t                   n;
    const oip_gen_member_t  *x = a, *y = b;

    n = (x->key_len < y->key_len) ? x->key_len : y->key_len;
    r = memcmp(x->key, y->key, n);

    if (r != 0) {
        return r;
    }

    if (x->key_len != y->key_len) {
        return (x->key_len < y->key_len) ? -1 : 1;
    }

    return (int) (x->rank > 1 ? 2 : x->rank) - (int) (y->rank > 1 ? 2
                                                                : y->rank);
}


static int
oip_gen_finish(oip_result_t *res, oip_out_t *o)
{
    if (oip_out_cut(o) != 0) {
        return -1;
    }

    res->segs = o->segs;
    res->nsegs = o->nsegs;
    res->body_len = o->total;
    res->header_len = o->total;
    res->rewritten = 1;
    res->content_type = OIP_TYPE_JSON;

    return 0;
}
