
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The pipeline requests and answers both run.  Their tensors are an
 * array of objects ("inputs" or "outputs") whose data is JSON or a
 * binary chunk after the JSON, the chunks in the order of their tensors.
 * The envelope is scanned once, recording where each member lies; each
 * tensor gets an action from its kind of message (leave, check, to
 * binary, to JSON); the chunks are laid out against the binary part;
 * the new message is the old one with edits spliced in, so everything
 * not converted stays byte for byte.  The items are the seam between
 * wire formats: a writer of another one (protobuf) reads them instead.
 */


#include <stdio.h>
#include <stdlib.h>

#include "oip_message.h"
#include "oip_number.h"


static int oip_msg_syntax_first(oip_msg_t *m);
static int oip_msg_names_check(oip_msg_t *m, oip_key_t *names, size_t n);
static oip_tensor_t *oip_item_tensor(oip_msg_t *m, oip_item_t *it);
static int oip_item_parse(oip_msg_t *m, size_t index);
static int oip_item_settle(oip_msg_t *m, oip_item_t *it);
static int oip_item_shape(oip_msg_t *m, oip_item_t *it);
static int oip_item_params(oip_msg_t *m, oip_item_t *it);
static int oip_item_data(oip_msg_t *m, oip_item_t *it, oip_json_t *j);
static int oip_msg_layout(oip_msg_t *m);
static oip_edit_t *oip_edit_add(oip_msg_t *m, const uint8_t *from,
    const uint8_t *to, oip_edit_e kind, oip_item_t *it);
static int oip_msg_edits(oip_msg_t *m);
static int oip_msg_build(oip_msg_t *m, oip_result_t *res);
static int oip_edit_write(oip_msg_t *m, oip_edit_t *e, oip_out_t *o);
static int oip_edit_cmp(const void *a, const void *b);


#define oip_item_name(it)                                                     \
    (int) oip_utf8_cut((it)->name.data, (it)->name.len, OIP_NAME_MAX),        \
    (it)->name.data


void
oip_msg_init(oip_msg_t *m, const oip_kind_t *kind, const oip_options_t *opt,
    const oip_alloc_t *a, oip_result_t *res)
{
    memset(res, 0, sizeof(oip_result_t));
    memset(m, 0, sizeof(oip_msg_t));

    m->kind = kind;
    m->opt = opt;

    oip_ctx_init(&m->c, a, res->error, &res->reason,
                 opt->max_tensor_size);
}


/* the JSON and the binary part of a body, as its IHCL divides it */

int
oip_msg_split(oip_msg_t *m, const oip_framing_t *f, const uint8_t *body,
    size_t len)
{
    size_t  hlen;

    if (f->ihcl > 0 && (uint64_t) f->ihcl > len) {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE,
                        "Inference-Header-Content-Length %lld exceeds the body "
                        "length %zu", (long long) f->ihcl, len);
    }

    hlen = (f->ihcl > 0) ? (size_t) f->ihcl : len;

    if (hlen > m->opt->max_json_size) {
        return oip_fail(&m->c, 413, OIP_REASON_LIMIT, "the JSON of %zu bytes "
                        "exceeds oip_max_json_size (%zu)", hlen,
                        m->opt->max_json_size);
    }

    m->json = body;
    m->jlen = hlen;
    m->bin = body + hlen;
    m->blen = len - hlen;
    m->has_ihcl = (f->ihcl > 0);

    return 0;
}


/*
 * The pipeline: scan the envelope (the kind's), lay the chunks out,
 * make the edits each tensor's action needs and the kind's own, and
 * write the new message if anything changes; or, for another wire
 * format, hand the items to its writer (m->target).  Returns 0, or -1
 * with the error in the context (possibly none: the caller says what).
 */

int
oip_msg_run(oip_msg_t *m, oip_result_t *res)
{
    oip_json_init(&m->j, &m->c, m->json, m->jlen, m->opt->max_depth);

    if (m->kind->envelope(m) != 0) {
        oip_msg_syntax_first(m);
        goto failed;
    }

    if (oip_msg_layout(m) != 0
        || (m->target == NULL && oip_msg_edits(m) != 0)
        || (m->kind->edits && m->kind->edits(m) != 0))
    {
        goto failed;
    }

    m->edited = (m->nedits > 0);

    if (m->c.status != 0) {
        goto failed;
    }

    if (m->target) {
        /* no JSON is written: the items go straight to the target */

        if (m->target(m, res) != 0 || m->c.status != 0) {
            goto failed;
        }

        oip_msg_done(m);
        return 0;
    }

    if (!m->edited && !m->rewrite) {
        /* valid, and nothing to change: the body goes as it came */
        res->binary = m->has_ihcl;
        res->header_len = m->jlen;
        res->body_len = m->jlen + m->blen;

        oip_msg_done(m);
        return 0;
    }

    if (oip_msg_build(m, res) != 0) {
        goto failed;
    }

    res->deadline_at = m->slot;
    res->deadline_len = m->slot_len;
    res->deadline_off = m->slot_off;
    res->deadline_filed = m->slot_filed;

    if (m->to_json && res->header_len > m->opt->max_json_size) {
        oip_fail(&m->c, 413, OIP_REASON_LIMIT, "%s would exceed "
                 "oip_max_json_size (%zu bytes)", m->kind->as_json,
                 m->opt->max_json_size);
        goto failed;
    }

    if (m->c.status != 0) {
        /* a failure recorded on the way must never pass for success */
        goto failed;
    }

    res->rewritten = 1;

    oip_msg_done(m);
    return 0;

failed:

    oip_msg_done(m);
    return -1;
}


void
oip_msg_done(oip_msg_t *m)
{
    size_t  i;

    oip_json_done(&m->j);

    for (i = 0; i < m->nitems; i++) {
        oip_free(&m->c, (void *) m->items[i].t.shape);
    }

    oip_free(&m->c, m->items);
    oip_free(&m->c, m->edits);
    oip_free(&m->c, m->win);

    m->win = NULL;
    m->items = NULL;
    m->edits = NULL;
    m->nitems = 0;
    m->nedits = 0;
}


/*
 * Validates the whole document: semantic rules are reported as the scan
 * meets them, but broken JSON is always reported as such, wherever it
 * breaks.  Only the error path pays for this second look.
 */

static int
oip_msg_syntax_first(oip_msg_t *m)
{
    int           status;
    char          error[OIP_ERROR_LEN];
    oip_json_t    check;
    oip_reason_e  reason;

    if (m->c.status == 500) {
        return -1;
    }

    status = m->c.status;
    reason = *m->c.reason;
    memcpy(error, m->c.error, OIP_ERROR_LEN);
    m->c.status = 0;

    oip_json_init(&check, &m->c, m->json, m->jlen, m->j.max_depth);

    if (oip_json_check(&check) == 0) {
        m->c.status = status;
        *m->c.reason = reason;
        memcpy(m->c.error, error, OIP_ERROR_LEN);

    } else {
        m->syntax = 1;
    }

    oip_json_done(&check);

    return -1;
}


int
oip_msg_tensors(oip_msg_t *m)
{
    int             rc;
    oip_arr_t       a;
    oip_json_t     *j;
    oip_item_t     *it;
    const uint8_t  *start, *prev_end;

    j = &m->j;

    if (*j->p != '[') {
        return oip_fail(&m->c, 400, OIP_REASON_OTHER, "'%ss' must be an array",
                        m->kind->what);
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    prev_end = NULL;

    while ((rc = oip_json_element(j, &a)) == 1) {

        if (*j->p != '{') {
            return oip_fail(&m->c, 400, OIP_REASON_OTHER, "%ss[%zu] must be an "
                            "object", m->kind->what, a.n - 1);
        }

        start = j->p;

        if (m->nitems) {
            /* the one before may be dropped with the comma after it */
            m->items[m->nitems - 1].elem.next_key = start;
        }

        if (oip_item_parse(m, a.n - 1) != 0) {
            return -1;
        }

        it = &m->items[m->nitems - 1];
        oip_member_set(&it->elem, start, j->p, prev_end);
        prev_end = j->p;

        if (m->c.sink) {
            oip_item_reserve(m, it);
        }
    }

    if (rc < 0) {
        return -1;
    }

    if (a.n == 0 && m->kind->nonempty) {
        return oip_fail(&m->c, 400, OIP_REASON_OTHER, "'%ss' must not be empty",
                        m->kind->what);
    }

    m->seen = 1;

    return oip_msg_names(m);
}


/* names are unique, compared unescaped */

int
oip_msg_names(oip_msg_t *m)
{
    int          rc;
    size_t       i;
    oip_key_t   *names;

    names = oip_alloc(&m->c, oip_max(m->nitems, 1) * sizeof(oip_key_t));
    if (names == NULL) {
        return -1;
    }

    for (i = 0; i < m->nitems; i++) {
        if (oip_key_make(&m->c, &m->items[i].name, &names[i]) != 0) {
            break;
        }
    }

    /* the keys made are freed either way; a key not made is a failure */

    rc = oip_msg_names_check(m, names, i);

    oip_free(&m->c, names);

    return i < m->nitems ? -1 : rc;
}


static int
oip_msg_names_check(oip_msg_t *m, oip_key_t *names, size_t n)
{
    size_t      i;
    ptrdiff_t   dup;
    oip_key_t  *k;

    dup = oip_keys_dup(&m->c, names, n);

    if (dup >= 0) {
        k = &names[dup];
        oip_fail(&m->c, 400, OIP_REASON_OTHER, "%s name \"%.*s\" appears twice",
                 m->kind->what,
                 (int) oip_utf8_cut(k->data, k->len, OIP_NAME_MAX), k->data);
    }

    for (i = 0; i < n; i++) {
        if (names[i].owned) {
            oip_free(&m->c, (void *) names[i].data);
        }
    }

    return dup == -1 ? 0 : -1;
}


oip_item_t *
oip_msg_item_add(oip_msg_t *m)
{
    oip_item_t  *items, *it;

    if (m->nitems == OIP_MAX_TENSORS) {
        oip_fail(&m->c, 413, OIP_REASON_LIMIT, "more than %d %ss",
                 OIP_MAX_TENSORS, m->kind->what);
        return NULL;
    }

    if (m->nitems == m->items_cap) {
        items = oip_grow(&m->c, m->items, m->nitems, &m->items_cap,
                         sizeof(oip_item_t));
        if (items == NULL) {
            return NULL;
        }

        m->items = items;
    }

    it = &m->items[m->nitems++];
    memset(it, 0, sizeof(oip_item_t));
    it->t.dt = OIP_DT_NONE;

    return it;
}


static oip_tensor_t *
oip_item_tensor(oip_msg_t *m, oip_item_t *it)
{
    /* the array of items may have moved since the name was set */
    it->t.name = &it->name;
    it->t.what = m->kind->what;

    /* values that go upstream as JSON, to a reader that may refuse */
    it->t.finite = m->kind->upstream && m->opt->finite_upstream
                   && (it->act == OIP_ACT_CHECK || it->act == OIP_ACT_JSON);

    /* KServe's encoder (orjson) writes NaN and infinities as null */
    it->t.null_nan = !m->kind->upstream;

    return &it->t;
}


void
oip_msg_sub(oip_msg_t *m, oip_json_t *sub, const uint8_t *at)
{
    /* a second look at a value the main scan has validated */

    oip_json_init(sub, &m->c, m->json, m->jlen, m->j.max_depth);

    sub->p = at;
    sub->depth = 3;
    sub->nodups = 1;
}


void
oip_member_set(oip_member_t *mb, const uint8_t *key, const uint8_t *end,
    const uint8_t *prev_end)
{
    mb->key = key;
    mb->value_end = end;
    mb->prev_end = prev_end;
    mb->next_key = NULL;
}


static int
oip_item_parse(oip_msg_t *m, size_t index)
{
    int            rc, n;
    oip_json_t    *j, sub;
    oip_walk_t     w;
    oip_item_t    *it;
    oip_nulls_t    nulls;
    oip_member_t  *mb;

    j = &m->j;
    nulls.n = 0;

    it = oip_msg_item_add(m);
    if (it == NULL) {
        return -1;
    }

    it->index = index;

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        mb = NULL;
        rc = 0;

        if (oip_json_str_eq(&w.key, "name", 4)) {
            if (*j->p != '"') {
                return oip_fail(&m->c, 400, OIP_REASON_OTHER, "%ss[%zu]: "
                                "'name' must be a string", m->kind->what,
                                index);
            }

            if (oip_json_string(j, &it->name) != 0) {
                return -1;
            }

            if (it->name.len == 0) {
                return oip_fail(&m->c, 400, OIP_REASON_OTHER, "%ss[%zu]: "
                                "'name' must not be empty", m->kind->what,
                                index);
            }

            if (oip_name_controls(&it->name)) {
                return oip_fail(&m->c, 400, OIP_REASON_OTHER, "%ss[%zu]: "
                                "'name' must not hold control characters",
                                m->kind->what, index);
            }

            it->has_name = 1;

        } else if (oip_json_str_eq(&w.key, "datatype", 8)) {
            it->dt_at = j->p;
            rc = oip_json_skip(j);

        } else if (oip_json_str_eq(&w.key, "shape", 5)) {
            it->shape_at = j->p;
            rc = oip_json_skip(j);

        } else if (oip_json_str_eq(&w.key, "parameters", 10)) {
            if (!oip_null_member(j, &nulls, &w)) {
                mb = &it->params;
                it->params_at = j->p;
                rc = oip_json_skip(j);
            }

        } else if (oip_json_str_eq(&w.key, "data", 4)) {
            mb = &it->data;
            it->data_at = j->p;

            /* the usual order: convert in this very pass */

            if (it->has_name && it->dt_at && it->shape_at) {
                rc = oip_item_settle(m, it);

                if (rc == 0) {
                    rc = oip_item_data(m, it, j);
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

        if (mb) {
            oip_walk_note(&w, mb, j->p);
        }
    }

    if (rc < 0) {
        return -1;
    }

    it->close = j->p - 1;

    if (oip_nulls_delete(m, &nulls) != 0
        || oip_item_settle(m, it) != 0
        || oip_item_params(m, it) != 0)
    {
        return -1;
    }

    n = (it->data_at != NULL) + it->has_bds + it->has_shm;

    if (n == 0) {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s' has no data: "
                        "it needs 'data', a binary_data_size or a "
                        "shared_memory_region", m->kind->what,
                        oip_item_name(it));
    }

    if (n > 1) {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s' has more than "
                        "one of 'data', binary_data_size and "
                        "shared_memory_region", m->kind->what,
                        oip_item_name(it));
    }

    if (it->data_at && !it->data_done) {
        oip_msg_sub(m, &sub, it->data_at);
        rc = oip_item_data(m, it, &sub);
        oip_json_done(&sub);

        return rc;
    }

    if (it->data_at == NULL) {
        /* binary data or shared memory: what to do is known now */
        it->act = m->kind->act(m, it);

        if (it->act == OIP_ACT_FAIL) {
            return -1;
        }
    }

    return 0;
}


static int
oip_item_settle(oip_msg_t *m, oip_item_t *it)
{
    size_t       len;
    uint8_t      buf[64];
    oip_str_t    s;
    oip_json_t   sub;

    if (it->settled) {
        return 0;
    }

    if (!it->has_name) {
        return oip_fail(&m->c, 400, OIP_REASON_OTHER, "%ss[%zu]: 'name' is "
                        "missing", m->kind->what, it->index);
    }

    if (it->dt_at == NULL) {
        return oip_fail(&m->c, 400, OIP_REASON_DATATYPE, "%s '%.*s': "
                        "'datatype' is missing", m->kind->what,
                        oip_item_name(it));
    }

    if (it->shape_at == NULL) {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s': 'shape' is "
                        "missing", m->kind->what, oip_item_name(it));
    }

    if (*it->dt_at != '"') {
        return oip_fail(&m->c, 400, OIP_REASON_DATATYPE, "%s '%.*s': "
                        "'datatype' must be a string", m->kind->what,
                        oip_item_name(it));
    }

    oip_msg_sub(m, &sub, it->dt_at);

    if (oip_json_string(&sub, &s) != 0) {
        return -1;
    }

    it->dt_end = sub.p;
    len = oip_json_unescaped_len(&s);

    if (len <= sizeof(buf)) {
        oip_json_unescape(buf, &s);
        it->t.dt = oip_dtype_find(buf, len);
    }

    if (it->t.dt == OIP_DT_NONE) {
        return oip_fail(&m->c, 400, OIP_REASON_DATATYPE, "%s '%.*s': unknown "
                        "datatype \"%.*s\"", m->kind->what, oip_item_name(it),
                        (int) oip_utf8_cut(s.data, s.len, 32), s.data);
    }

    if (oip_item_shape(m, it) != 0) {
        return -1;
    }

    it->settled = 1;

    return 0;
}


static int
oip_item_shape(oip_msg_t *m, oip_item_t *it)
{
    int          rc;
    size_t       cap;
    uint64_t     dim, *shape, *dims;
    oip_arr_t    a;
    oip_num_t    n;
    oip_json_t   sub;

    if (*it->shape_at != '[') {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s': 'shape' must "
                        "be an array of integers", m->kind->what,
                        oip_item_name(it));
    }

    oip_msg_sub(m, &sub, it->shape_at);

    if (oip_json_array(&sub, &a) != 0) {
        return -1;
    }

    shape = NULL;
    cap = 0;

    while ((rc = oip_json_element(&sub, &a)) == 1) {

        if (*sub.p != '-' && (*sub.p < '0' || *sub.p > '9')) {
            oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s': 'shape' must be "
                     "an array of integers", m->kind->what, oip_item_name(it));
            goto failed;
        }

        if (oip_json_number(&sub, &n) != 0) {
            goto failed;
        }

        if (oip_num_u64(&n, &dim) != OIP_NUM_OK || n.neg
            || dim > (uint64_t) INT64_MAX)
        {
            oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s': shape dimension "
                     "%.*s is not an integer from 0 to 2^63-1", m->kind->what,
                     oip_item_name(it), (int) oip_min(n.end - n.start, 40),
                     n.start);
            goto failed;
        }

        if (a.n > cap) {
            dims = oip_grow(&m->c, shape, a.n - 1, &cap, sizeof(uint64_t));
            if (dims == NULL) {
                goto failed;
            }

            shape = dims;
        }

        shape[a.n - 1] = dim;
    }

    if (rc < 0) {
        goto failed;
    }

    it->t.shape = shape;
    it->t.rank = a.n;

    if (oip_shape_count(shape, a.n, &it->t.count) != 0) {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s': the product "
                        "of its shape overflows 2^63-1", m->kind->what,
                        oip_item_name(it));
    }

    return 0;

failed:

    oip_free(&m->c, shape);

    return -1;
}


static int
oip_item_params(oip_msg_t *m, oip_item_t *it)
{
    int          rc;
    oip_num_t    n;
    oip_json_t   sub;
    oip_walk_t   w;

    if (it->params_at == NULL) {
        return 0;
    }

    if (*it->params_at != '{') {
        return oip_fail(&m->c, 400, OIP_REASON_OTHER, "%s '%.*s': 'parameters' "
                        "must be an object", m->kind->what, oip_item_name(it));
    }

    oip_msg_sub(m, &sub, it->params_at);

    if (oip_walk_start(&sub, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(&sub, &w)) == 1) {

        if (oip_json_str_eq(&w.key, "binary_data_size", 16)) {

            /* the main scan validated the number's syntax */

            if ((*sub.p != '-' && (*sub.p < '0' || *sub.p > '9'))
                || oip_num_scan(sub.p, sub.end, &n) == NULL
                || oip_num_u64(&n, &it->bds_size) != OIP_NUM_OK
                || n.neg)
            {
                return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s': "
                                "binary_data_size must be a non-negative "
                                "integer", m->kind->what, oip_item_name(it));
            }

            sub.p = n.end;
            it->has_bds = 1;
            oip_walk_note(&w, &it->bds, sub.p);

        } else {
            if (oip_json_str_eq(&w.key, "shared_memory_region", 20)) {
                it->has_shm = 1;
            }

            if (oip_json_skip(&sub) != 0) {
                return -1;
            }
        }
    }

    if (rc < 0) {
        return -1;
    }

    it->params_n = w.o.n;
    it->params_close = sub.p - 1;

    oip_json_done(&sub);

    return 0;
}


static int
oip_item_data(oip_msg_t *m, oip_item_t *it, oip_json_t *j)
{
    int            rc, binary;
    size_t         size;
    uint8_t       *dst;
    oip_out_t      w;
    oip_tensor_t  *t;

    it->data_done = 1;
    it->act = m->kind->act(m, it);

    if (it->act == OIP_ACT_FAIL) {
        return -1;
    }

    t = oip_item_tensor(m, it);
    size = oip_dtypes[t->dt].size;

    if (it->act == OIP_ACT_PASS || it->act == OIP_ACT_DROP) {
        return oip_json_skip(j);
    }

    /* made binary: to send so, or for the digest to read */
    binary = (it->act == OIP_ACT_BINARY
              || (m->keep_binary && it->act == OIP_ACT_CHECK));

    if (size == 0) {
        /* BYTES count as they are decoded */

        if (!binary) {
            return oip_data_to_binary(j, t, NULL, NULL);
        }

        if (m->c.sink) {
            return oip_item_spool(m, it, j, t);
        }

        oip_out_init(&w, &m->c, 4096);

        rc = oip_data_to_binary(j, t, NULL, &w);

        if (rc == 0) {
            rc = oip_out_cut(&w);
        }

        it->chunk = w.segs;
        it->nchunk = w.nsegs;
        it->chunk_len = w.total;

        return rc;
    }

    /* fixed-size tensors count before a byte is spent on them */

    if (t->count > (m->c.max_tensor_size - m->c.tensor_bytes) / size) {
        return oip_fail(&m->c, 413, OIP_REASON_LIMIT, "%s '%.*s': %llu "
                        "elements of %s take the tensor data over "
                        "oip_max_tensor_size (%zu bytes)", m->kind->what,
                        oip_item_name(it), (unsigned long long) t->count,
                        oip_dtypes[t->dt].name, m->c.max_tensor_size);
    }

    m->c.tensor_bytes += t->count * size;

    if (!binary) {
        return oip_data_to_binary(j, t, NULL, NULL);
    }

    if (m->c.sink) {
        return oip_item_spool(m, it, j, t);
    }

    dst = oip_alloc(&m->c, t->count * size);
    if (dst == NULL) {
        return -1;
    }

    /* not a pointer to it->one: the array of items may move */

    it->one.data = dst;
    it->one.len = t->count * size;
    it->chunk = NULL;
    it->nchunk = 1;
    it->chunk_len = it->one.len;

    return oip_data_to_binary(j, t, dst, NULL);
}


/* binary chunks follow the JSON in the order of their tensors */

static int
oip_msg_layout(oip_msg_t *m)
{
    size_t         i, rest;
    oip_item_t    *it;
    const uint8_t *p;

    p = m->bin;
    rest = m->blen;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (!it->has_bds) {
            continue;
        }

        if (!m->has_ihcl && it->bds_size) {
            return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s' has a "
                            "binary_data_size, but there is no "
                            "Inference-Header-Content-Length header",
                            m->kind->what, oip_item_name(it));
        }

        /* planned, the bytes are still to come: nowhere yet */
        it->bin = m->plan ? NULL : p;

        if (oip_msg_chunk(m, it, rest) != 0) {
            return -1;
        }

        if (!m->plan) {
            p += it->bds_size;
        }

        rest -= it->bds_size;
    }

    if (m->plan && m->blen == SIZE_MAX) {
        /* planned of no length: the chunks say it, the bytes will tell */
        m->blen -= rest;
        return 0;
    }

    if (rest) {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%zu bytes after the "
                        "JSON header are not claimed by any binary_data_size",
                        rest);
    }

    return 0;
}


/*
 * A tensor's binary chunk (it->bin, bds_size; rest bytes are there):
 * its size against its shape, the tensor limit, its bytes checked; a
 * BYTES tensor to be JSON must be UTF-8, or stay binary in an answer.
 */

int
oip_msg_chunk(oip_msg_t *m, oip_item_t *it, size_t rest)
{
    size_t         size;
    oip_tensor_t  *t;

    t = oip_item_tensor(m, it);
    size = oip_dtypes[t->dt].size;

    if (size && (t->count > UINT64_MAX / size
                 || t->count * size != it->bds_size))
    {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s': "
                        "binary_data_size is %llu, but %llu elements of %s "
                        "need %s%llu", m->kind->what, oip_item_name(it),
                        (unsigned long long) it->bds_size,
                        (unsigned long long) t->count,
                        oip_dtypes[t->dt].name,
                        t->count > UINT64_MAX / size ? "more than " : "",
                        (unsigned long long)
                        (t->count > UINT64_MAX / size ? UINT64_MAX
                                                      : t->count * size));
    }

    if (it->bds_size > rest) {
        return oip_fail(&m->c, 400, OIP_REASON_SHAPE, "%s '%.*s': "
                        "binary_data_size %llu runs past the end of the "
                        "body", m->kind->what, oip_item_name(it),
                        (unsigned long long) it->bds_size);
    }

    if (m->plan) {
        /* the bytes are checked as they come; BYTES are not planned */

        if (it->act == OIP_ACT_JSON && t->dt == OIP_BYTES) {
            m->unplanned = 1;
        }

        return oip_count_tensor(&m->c, it->bds_size);
    }

    if (oip_count_tensor(&m->c, it->bds_size) != 0
        || oip_binary_check(&m->c, t, it->bin, it->bds_size, 400) != 0)
    {
        return -1;
    }

    if (it->act == OIP_ACT_JSON && t->dt == OIP_BYTES
        && !oip_bytes_utf8(it->bin, it->bds_size))
    {
        if (!m->kind->bytes_stay) {
            return oip_fail(&m->c, 400, OIP_REASON_OTHER, "%s '%.*s': a "
                            "BYTES element is not valid UTF-8 and cannot "
                            "be JSON", m->kind->what, oip_item_name(it));
        }

        /* this tensor keeps its binary form */
        it->act = OIP_ACT_PASS;
    }

    return 0;
}


static oip_edit_t *
oip_edit_add(oip_msg_t *m, const uint8_t *from, const uint8_t *to,
    oip_edit_e kind, oip_item_t *it)
{
    oip_edit_t  *edits, *e;

    if (m->nedits == m->edits_cap) {
        edits = oip_grow(&m->c, m->edits, m->nedits, &m->edits_cap,
                         sizeof(oip_edit_t));
        if (edits == NULL) {
            return NULL;
        }

        m->edits = edits;
    }

    e = &m->edits[m->nedits++];

    e->from = from;
    e->to = to;
    e->kind = kind;
    e->item = it;
    e->text = NULL;
    e->len = 0;
    memset(&e->mb, 0, sizeof(oip_member_t));

    return e;
}


int
oip_edit_text(oip_msg_t *m, const uint8_t *from, const uint8_t *to,
    const char *text)
{
    oip_edit_t  *e;

    e = oip_edit_add(m, from, to, OIP_EDIT_TEXT, NULL);
    if (e == NULL) {
        return -1;
    }

    e->text = text;
    e->len = strlen(text);

    return 0;
}


/* bytes written as they are, where the glue can find them (m->slot) */

int
oip_edit_slot(oip_msg_t *m, const uint8_t *from, const uint8_t *to)
{
    oip_edit_t  *e;

    e = oip_edit_add(m, from, to, OIP_EDIT_SLOT, NULL);
    if (e == NULL) {
        return -1;
    }

    e->text = (const char *) from;
    e->len = to - from;

    return 0;
}


/*
 * A member, or an element of an array, and one comma next to it: the one
 * before it if it has one, else the one after.  When the member before
 * is deleted too and took the comma after it, oip_msg_build() takes this
 * one's comma after instead.
 */

int
oip_edit_delete(oip_msg_t *m, const oip_member_t *mb)
{
    oip_edit_t     *e;
    const uint8_t  *from, *to;

    if (mb->prev_end) {
        from = mb->prev_end;
        to = mb->value_end;

    } else if (mb->next_key) {
        from = mb->key;
        to = mb->next_key;

    } else {
        from = mb->key;
        to = mb->value_end;
    }

    e = oip_edit_add(m, from, to, OIP_EDIT_DELETE, NULL);
    if (e == NULL) {
        return -1;
    }

    e->mb = *mb;

    return 0;
}


int
oip_walk_start(oip_json_t *j, oip_walk_t *w)
{
    w->prev_end = NULL;
    w->pending = NULL;
    w->started = 0;

    return oip_json_object(j, &w->o);
}


/* the next member: 1, with its key, its value at j->p; 0 at the end */

int
oip_walk_next(oip_json_t *j, oip_walk_t *w)
{
    int  rc;

    if (w->started) {
        w->prev_end = j->p;
    }

    w->started = 1;

    rc = oip_json_member(j, &w->o, &w->key, &w->key_start);

    if (rc == 1 && w->pending) {
        w->pending->next_key = w->key_start;
        w->pending = NULL;
    }

    return rc;
}


/* the member just passed, its value ending at end, kept for an edit */

void
oip_walk_note(oip_walk_t *w, oip_member_t *mb, const uint8_t *end)
{
    oip_member_set(mb, w->key_start, end, w->prev_end);
    w->pending = mb;
}


/*
 * The value at j->p, of an optional member: if it is null, it is passed
 * and the member is noted for deletion (1); else 0, nothing passed.
 */

int
oip_null_member(oip_json_t *j, oip_nulls_t *nl, oip_walk_t *w)
{
    if (*j->p != 'n' || !oip_json_null(j)) {
        return 0;
    }

    oip_walk_note(w, (nl->n < OIP_NULLS_MAX) ? &nl->m[nl->n++] : &nl->spare,
                  j->p);

    return 1;
}


int
oip_nulls_delete(oip_msg_t *m, oip_nulls_t *nl)
{
    size_t  i;

    for (i = 0; i < nl->n; i++) {
        if (oip_edit_delete(m, &nl->m[i]) != 0) {
            return -1;
        }
    }

    nl->n = 0;

    return 0;
}


/* the edits that carry out each tensor's action */

static int
oip_msg_edits(oip_msg_t *m)
{
    size_t       i;
    oip_item_t  *it;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (it->act == OIP_ACT_BINARY) {

            if (it->params.key == NULL) {
                if (oip_edit_add(m, it->data.key, it->data.value_end,
                                 OIP_EDIT_PARAMS_NEW, it) == NULL)
                {
                    return -1;
                }

                continue;
            }

            if (oip_edit_delete(m, &it->data) != 0
                || oip_edit_add(m, it->params_close, it->params_close,
                                OIP_EDIT_BDS_ADD, it) == NULL)
            {
                return -1;
            }

        } else if (it->act == OIP_ACT_DROP) {

            if (oip_edit_delete(m, &it->elem) != 0) {
                return -1;
            }

        } else if (it->act == OIP_ACT_JSON) {

            m->to_json = 1;

            /* no parameters are left if binary_data_size was the only */

            if (it->params_n == 1) {
                if (oip_edit_add(m, it->params.key, it->params.value_end,
                                 OIP_EDIT_DATA_REPLACE, it) == NULL)
                {
                    return -1;
                }

                continue;
            }

            if (oip_edit_delete(m, &it->bds) != 0
                || oip_edit_add(m, it->close, it->close, OIP_EDIT_DATA_ADD,
                                it) == NULL)
            {
                return -1;
            }
        }
    }

    return 0;
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


/*
 * The new message as segments: the JSON with the edits spliced in, then
 * the chunks (oip_msg_chunks()).
 */

static int
oip_msg_build(oip_msg_t *m, oip_result_t *res)
{
    size_t          i;
    oip_out_t       o;
    oip_edit_t     *e;
    const uint8_t  *pos;

    /*
     * The limit bounds what clients send and upstreams answer (checked
     * as they come), and the JSON the codec writes from binary tensors,
     * 2.5 times their size for FP32; never the few bytes an edit adds.
     */

    oip_out_init(&o, &m->c, 1024);

    o.file = m->file;
    o.file_len = m->file_len;

    if (m->to_json) {
        o.limit = m->opt->max_json_size;
        o.over = m->kind->as_json;
    }

    /* with a sink, its JSON may be written to a file (oip_sink.c) */

    if (m->c.sink) {
        oip_msg_sunk(m, &o);
    }

    if (m->nedits > 1) {
        qsort(m->edits, m->nedits, sizeof(oip_edit_t), oip_edit_cmp);
    }

    pos = m->json;

    for (i = 0; i < m->nedits; i++) {
        e = &m->edits[i];

        if (e->from < pos && e->to <= pos) {
            /* inside what an earlier edit deleted: nothing is left */
            continue;
        }

        if (e->from < pos) {
            /* the comma before it went with the member before it */

            if (e->kind != OIP_EDIT_DELETE || e->mb.key < pos) {
                return oip_fail(&m->c, 500, OIP_REASON_OTHER, "internal error: "
                                "edits overlap");
            }

            e->from = e->mb.key;
            e->to = e->mb.next_key ? e->mb.next_key : e->mb.value_end;
        }

        if (oip_out_ref(&o, pos, e->from - pos) != 0
            || oip_edit_write(m, e, &o) != 0)
        {
            return -1;
        }

        pos = e->to;
    }

    if (oip_out_ref(&o, pos, m->json + m->jlen - pos) != 0
        || oip_out_cut(&o) != 0)
    {
        return -1;
    }

    return oip_msg_chunks(m, &o, res);
}


/*
 * After the JSON the writer holds: the chunks of the tensors that are
 * binary now, converted or as they came, referenced; and the lengths
 * the headers give.
 */

int
oip_msg_chunks(oip_msg_t *m, oip_out_t *o, oip_result_t *res)
{
    size_t       i, s;
    oip_seg_t   *segs;
    oip_item_t  *it;

    if (m->c.sink) {
        return oip_msg_chunks_spooled(m, o, res);
    }

    if (m->plan) {
        return oip_msg_chunks_planned(m, o, res);
    }

    /* the limit is on JSON: the chunks are bounded by the tensor limit */

    o->limit = 0;
    res->header_len = o->total;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (it->act == OIP_ACT_BINARY) {
            res->binary = 1;

            segs = it->chunk ? it->chunk : &it->one;

            for (s = 0; s < it->nchunk; s++) {
                if (oip_out_ref(o, segs[s].data, segs[s].len) != 0) {
                    return -1;
                }
            }

        } else if (it->has_bds && it->act != OIP_ACT_JSON
                   && it->act != OIP_ACT_DROP)
        {
            res->binary = 1;

            if (oip_out_ref(o, it->bin, it->bds_size) != 0) {
                return -1;
            }
        }
    }

    if (oip_out_cut(o) != 0) {
        return -1;
    }

    res->segs = o->segs;
    res->nsegs = o->nsegs;
    res->body_len = o->total;

    return 0;
}


static int
oip_edit_write(oip_msg_t *m, oip_edit_t *e, oip_out_t *o)
{
    uint8_t     *p;
    oip_item_t  *it;

    it = e->item;

    switch (e->kind) {

    case OIP_EDIT_DELETE:
        return 0;

    case OIP_EDIT_TEXT:
        return oip_out_write(o, e->text, e->len);

    case OIP_EDIT_SLOT:
        if (oip_out_reserve(o, e->len) != 0) {
            return -1;
        }

        m->slot = o->pos;
        m->slot_len = e->len;

        if (o->off) {
            /* the block goes to the file at *off: the place is there */
            m->slot = NULL;
            m->slot_off = *o->off + (o->pos - o->block);
            m->slot_filed = 1;
        }

        return oip_out_write(o, e->text, e->len);

    case OIP_EDIT_PARAMS_NEW:
    case OIP_EDIT_BDS_ADD:
        if (oip_out_reserve(o, 64) != 0) {
            return -1;
        }

        p = o->pos;

        if (e->kind == OIP_EDIT_PARAMS_NEW) {
            p = (uint8_t *) memcpy(p, "\"parameters\":{", 14) + 14;

        } else if (it->params_n) {
            *p++ = ',';
        }

        p = (uint8_t *) memcpy(p, "\"binary_data_size\":", 19) + 19;
        p = oip_print_u64(p, it->chunk_len);

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

        if (m->plan) {
            /* the data's brackets, and a hole between them */
            return oip_out_write(o, "[", 1) == 0
                   && oip_out_hole(o, it->bds_size) == 0
                   && oip_out_write(o, "]", 1) == 0 ? 0 : -1;
        }

        return oip_binary_to_data(&m->c, oip_item_tensor(m, it), it->bin,
                                  it->bds_size, o, 400);
    }
}
