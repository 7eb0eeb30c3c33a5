
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Model signatures.  A runtime's metadata answer is small, untrusted
 * JSON: read with the codec's own scanner (strict UTF-8, duplicate keys
 * refused, depth bounded, integers exact, the caller's allocator), every
 * member used type-checked, and what runtimes leave out (outputs,
 * shapes, datatypes this codec does not know) taken as "not checked".
 */


#include <stdio.h>
#include <stdlib.h>

#include "oip_message.h"
#include "oip_number.h"
#include "oip_signature.h"


/* far beyond any model; bounds the memory an answer can take */
#define OIP_SIG_MAX_TENSORS  65536
#define OIP_SIG_MAX_RANK     64
#define OIP_SIG_DEPTH        16


typedef struct {
    oip_key_t              name;
    int32_t                dt;
    uint32_t               rank;
    int64_t               *dims;
} oip_sig_tmp_t;


typedef struct {
    oip_ctx_t              c;
    oip_json_t             j;
    oip_sig_tmp_t         *t[2];       /* inputs, outputs */
    size_t                 n[2];
    size_t                 cap[2];
} oip_sig_parse_t;


static const char  *oip_sig_what[2] = { "input", "output" };


static int oip_sig_root(oip_sig_parse_t *sp);
static int oip_sig_list(oip_sig_parse_t *sp, int side);
static int oip_sig_tensor(oip_sig_parse_t *sp, int side, size_t index);
static int oip_sig_shape(oip_sig_parse_t *sp, oip_sig_tmp_t *t,
    const char *what, size_t index);
static int oip_sig_build(oip_sig_parse_t *sp, oip_signature_t **sig);
static int oip_sig_cmp(const void *a, const void *b);
static int oip_sig_name_cmp(const uint8_t *a, size_t alen,
    const uint8_t *b, size_t blen);
static void oip_sig_done(oip_sig_parse_t *sp);


int
oip_signature_parse(oip_result_t *res, const oip_alloc_t *a,
    const uint8_t *json, size_t len, oip_signature_t **sig)
{
    char             why[OIP_ERROR_LEN];
    oip_sig_parse_t  sp;

    memset(res, 0, sizeof(oip_result_t));
    memset(&sp, 0, sizeof(oip_sig_parse_t));

    *sig = NULL;

    oip_ctx_init(&sp.c, a, res->error, &res->reason, (size_t) -1);
    oip_json_init(&sp.j, &sp.c, json, len, OIP_SIG_DEPTH);

    if (oip_sig_root(&sp) == 0) {
        (void) oip_sig_build(&sp, sig);
    }

    oip_sig_done(&sp);

    if (sp.c.status && sp.c.status != 500) {
        /* what the runtime said is wrong, not what the client sent */
        memcpy(why, res->error, OIP_ERROR_LEN);
        snprintf(res->error, OIP_ERROR_LEN, "the model's metadata: %.*s",
                 OIP_ERROR_LEN - 32, why);
        sp.c.status = 502;
    }

    return res->status = sp.c.status;
}


static int
oip_sig_root(oip_sig_parse_t *sp)
{
    int          rc;
    oip_json_t  *j;
    oip_walk_t   w;

    j = &sp->j;

    oip_json_ws(j);

    if (j->p == j->end || *j->p != '{') {
        return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "not a JSON object");
    }

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        if (oip_json_str_eq(&w.key, "inputs", 6)) {
            rc = oip_sig_list(sp, 0);

        } else if (oip_json_str_eq(&w.key, "outputs", 7)) {
            rc = oip_sig_list(sp, 1);

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
        return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "bytes after the JSON "
                        "object");
    }

    return 0;
}


/* "inputs" or "outputs": null or absent is "not declared" */

static int
oip_sig_list(oip_sig_parse_t *sp, int side)
{
    int            rc;
    ptrdiff_t      dup;
    size_t         i;
    oip_arr_t      a;
    oip_key_t     *keys;
    oip_json_t    *j;

    j = &sp->j;

    if (*j->p == 'n' && oip_json_null(j)) {
        return 0;
    }

    if (*j->p != '[') {
        return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "'%ss' must be an array",
                        oip_sig_what[side]);
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    while ((rc = oip_json_element(j, &a)) == 1) {
        if (oip_sig_tensor(sp, side, a.n - 1) != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return -1;
    }

    keys = oip_alloc(&sp->c, oip_max(sp->n[side], 1) * sizeof(oip_key_t));
    if (keys == NULL) {
        return -1;
    }

    for (i = 0; i < sp->n[side]; i++) {
        keys[i] = sp->t[side][i].name;
    }

    dup = oip_keys_dup(&sp->c, keys, sp->n[side]);

    oip_free(&sp->c, keys);

    if (dup >= 0) {
        return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "%s \"%.*s\" is "
                        "declared twice", oip_sig_what[side],
                        (int) oip_utf8_cut(sp->t[side][dup].name.data,
                                           sp->t[side][dup].name.len,
                                           OIP_NAME_MAX),
                        sp->t[side][dup].name.data);
    }

    return dup == -2 ? -1 : 0;
}


static int
oip_sig_tensor(oip_sig_parse_t *sp, int side, size_t index)
{
    int             rc, named;
    size_t          len;
    uint8_t         buf[64];
    oip_str_t       s;
    oip_json_t     *j;
    oip_walk_t      w;
    oip_sig_tmp_t  *t, *ts;
    const char     *what;

    j = &sp->j;
    what = oip_sig_what[side];

    if (*j->p != '{') {
        return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "%ss[%zu] must be an "
                        "object", what, index);
    }

    if (sp->n[side] == OIP_SIG_MAX_TENSORS) {
        return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "more than %d %ss",
                        OIP_SIG_MAX_TENSORS, what);
    }

    if (sp->n[side] == sp->cap[side]) {
        ts = oip_grow(&sp->c, sp->t[side], sp->n[side], &sp->cap[side],
                      sizeof(oip_sig_tmp_t));
        if (ts == NULL) {
            return -1;
        }

        sp->t[side] = ts;
    }

    t = &sp->t[side][sp->n[side]++];
    memset(t, 0, sizeof(oip_sig_tmp_t));
    t->dt = OIP_SIG_ANY_DT;
    t->rank = OIP_SIG_ANY_RANK;

    named = 0;

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        if (oip_json_str_eq(&w.key, "name", 4)) {
            if (*j->p != '"' || oip_json_string(j, &s) != 0) {
                return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "%ss[%zu]: "
                                "'name' must be a string", what, index);
            }

            if (s.len == 0 || oip_name_controls(&s)) {
                return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "%ss[%zu]: "
                                "'name' must be a name", what, index);
            }

            if (oip_key_make(&sp->c, &s, &t->name) != 0) {
                return -1;
            }

            named = 1;

        } else if (oip_json_str_eq(&w.key, "datatype", 8)) {
            if (*j->p == 'n' && oip_json_null(j)) {
                continue;
            }

            if (*j->p != '"' || oip_json_string(j, &s) != 0) {
                return oip_fail(&sp->c, 502, OIP_REASON_DATATYPE, "%ss[%zu]: "
                                "'datatype' must be a string", what, index);
            }

            /* a datatype unknown here ("STRING"...) is not checked */

            len = oip_json_unescaped_len(&s);

            if (len <= sizeof(buf)) {
                oip_json_unescape(buf, &s);
                t->dt = oip_dtype_find(buf, len);

                if (t->dt == OIP_DT_NONE) {
                    t->dt = OIP_SIG_ANY_DT;
                }
            }

        } else if (oip_json_str_eq(&w.key, "shape", 5)) {
            if (*j->p == 'n' && oip_json_null(j)) {
                continue;
            }

            if (oip_sig_shape(sp, t, what, index) != 0) {
                return -1;
            }

        } else if (oip_json_skip(j) != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return -1;
    }

    if (!named) {
        return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "%ss[%zu]: 'name' is "
                        "missing", what, index);
    }

    if (t->dt == OIP_SIG_ANY_DT && t->rank == 0) {
        /* OVMS's MediaPipe streams: "INVALID", [] says nothing */
        t->rank = OIP_SIG_ANY_RANK;
    }

    return 0;
}


static int
oip_sig_shape(oip_sig_parse_t *sp, oip_sig_tmp_t *t, const char *what,
    size_t index)
{
    int          rc;
    size_t       cap;
    int64_t     *dims;
    uint64_t     v;
    oip_arr_t    a;
    oip_num_t    n;
    oip_json_t  *j;

    j = &sp->j;

    if (*j->p != '[' || oip_json_array(j, &a) != 0) {
        return oip_fail(&sp->c, 502, OIP_REASON_SHAPE, "%ss[%zu]: 'shape' must "
                        "be an array", what, index);
    }

    cap = 0;
    t->rank = 0;

    while ((rc = oip_json_element(j, &a)) == 1) {

        if ((*j->p != '-' && (*j->p < '0' || *j->p > '9'))
            || oip_json_number(j, &n) != 0
            || oip_num_u64(&n, &v) != OIP_NUM_OK
            || (n.neg && v != 1)
            || v > (uint64_t) INT64_MAX)
        {
            return oip_fail(&sp->c, 502, OIP_REASON_SHAPE, "%ss[%zu]: 'shape' "
                            "must hold integers from -1 up", what, index);
        }

        if (t->rank == OIP_SIG_MAX_RANK) {
            return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "%ss[%zu]: more "
                            "than %d dimensions", what, index,
                            OIP_SIG_MAX_RANK);
        }

        if (t->rank == cap) {
            dims = oip_grow(&sp->c, t->dims, t->rank, &cap, sizeof(int64_t));
            if (dims == NULL) {
                return -1;
            }

            t->dims = dims;
        }

        t->dims[t->rank++] = n.neg ? -1 : (int64_t) v;
    }

    return rc < 0 ? -1 : 0;
}


/* the flat signature: header, tensors, dimensions, names */

static int
oip_sig_build(oip_sig_parse_t *sp, oip_signature_t **sig)
{
    int                side;
    size_t             i, size, dims_at, names_at;
    uint8_t           *p;
    oip_sig_tmp_t     *t;
    oip_sig_tensor_t  *st;
    oip_signature_t   *s;

    size = sizeof(oip_signature_t)
           + (sp->n[0] + sp->n[1]) * sizeof(oip_sig_tensor_t);
    size = (size + 7) & ~(size_t) 7;
    dims_at = size;

    for (side = 0; side < 2; side++) {
        for (i = 0; i < sp->n[side]; i++) {
            t = &sp->t[side][i];

            if (t->rank != OIP_SIG_ANY_RANK) {
                size += t->rank * sizeof(int64_t);
            }
        }
    }

    names_at = size;

    for (side = 0; side < 2; side++) {
        for (i = 0; i < sp->n[side]; i++) {
            size += sp->t[side][i].name.len;
        }

        if (sp->n[side] > 1) {
            qsort(sp->t[side], sp->n[side], sizeof(oip_sig_tmp_t),
                  oip_sig_cmp);
        }
    }

    if (size > UINT32_MAX) {
        return oip_fail(&sp->c, 502, OIP_REASON_OTHER, "too large");
    }

    s = oip_alloc(&sp->c, size);
    if (s == NULL) {
        return -1;
    }

    memset(s, 0, size);

    s->size = (uint32_t) size;
    s->ninputs = (uint32_t) sp->n[0];
    s->noutputs = (uint32_t) sp->n[1];

    st = (oip_sig_tensor_t *) (s + 1);

    for (side = 0; side < 2; side++) {
        for (i = 0; i < sp->n[side]; i++, st++) {
            t = &sp->t[side][i];

            st->dt = t->dt;
            st->rank = t->rank;
            st->name = (uint32_t) names_at;
            st->name_len = (uint32_t) t->name.len;

            p = (uint8_t *) s + names_at;
            memcpy(p, t->name.data, t->name.len);
            names_at += t->name.len;

            if (t->rank != OIP_SIG_ANY_RANK) {
                st->dims = (uint32_t) dims_at;

                if (t->rank) {
                    p = (uint8_t *) s + dims_at;
                    memcpy(p, t->dims, t->rank * sizeof(int64_t));
                }

                dims_at += t->rank * sizeof(int64_t);
            }
        }
    }

    *sig = s;

    return 0;
}


static int
oip_sig_cmp(const void *a, const void *b)
{
    const oip_sig_tmp_t  *x = a, *y = b;

    return oip_sig_name_cmp(x->name.data, x->name.len, y->name.data,
                            y->name.len);
}


static int
oip_sig_name_cmp(const uint8_t *a, size_t alen, const uint8_t *b,
    size_t blen)
{
    int  rc;

    rc = memcmp(a, b, oip_min(alen, blen));

    if (rc) {
        return rc;
    }

    return (alen > blen) - (alen < blen);
}


static void
oip_sig_done(oip_sig_parse_t *sp)
{
    int     side;
    size_t  i;

    for (side = 0; side < 2; side++) {
        for (i = 0; i < sp->n[side]; i++) {
            if (sp->t[side][i].name.owned) {
                oip_free(&sp->c, (void *) sp->t[side][i].name.data);
            }

            oip_free(&sp->c, sp->t[side][i].dims);
        }

        oip_free(&sp->c, sp->t[side]);
    }

    oip_json_done(&sp->j);
}


const oip_sig_tensor_t *
oip_sig_find(const oip_signature_t *s, int outputs, const uint8_t *name,
    size_t len, size_t *index)
{
    int                      rc;
    size_t                   lo, hi, mid;
    const oip_sig_tensor_t  *t;

    t = oip_sig_tensors(s) + (outputs ? s->ninputs : 0);
    lo = 0;
    hi = outputs ? s->noutputs : s->ninputs;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;

        rc = oip_sig_name_cmp(name, len, oip_sig_name(s, &t[mid]),
                              t[mid].name_len);

        if (rc == 0) {
            *index = mid;
            return &t[mid];
        }

        if (rc < 0) {
            hi = mid;

        } else {
            lo = mid + 1;
        }
    }

    return NULL;
}


const char *
oip_sig_shape_str(const oip_signature_t *s, const oip_sig_tensor_t *t,
    char *buf, size_t size)
{
    size_t          i, n;
    const int64_t  *dims;

    if (t->rank == OIP_SIG_ANY_RANK) {
        return "any shape";
    }

    dims = oip_sig_dims(s, t);
    n = 0;
    buf[n++] = '[';

    for (i = 0; i < t->rank && n + 24 < size; i++) {
        n += snprintf(buf + n, size - n, i ? ",%lld" : "%lld",
                      (long long) dims[i]);
    }

    if (i < t->rank) {
        n += snprintf(buf + n, size - n, ",...");
    }

    snprintf(buf + n, size - n, "]");

    return buf;
}


const char *
oip_sig_names(const oip_signature_t *s, int outputs, char *buf, size_t size)
{
    size_t                   i, n, count;
    const oip_sig_tensor_t  *t;

    t = oip_sig_tensors(s) + (outputs ? s->ninputs : 0);
    count = outputs ? s->noutputs : s->ninputs;
    n = 0;
    buf[0] = '\0';

    for (i = 0; i < count && n < size; i++) {
        n += snprintf(buf + n, size - n, "%s'%.*s'", i ? ", " : "",
                      (int) oip_utf8_cut(oip_sig_name(s, &t[i]),
                                         t[i].name_len, OIP_NAME_MAX),
                      oip_sig_name(s, &t[i]));
    }

    return buf;
}
