
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The canonical form of a request: exactly what determines the
 * upstream's answer, written the same whatever the encoding the client
 * chose.  Model and version; each input by name order with its datatype,
 * shape, parameters and tensor bytes in their binary little-endian form
 * (JSON data as it converts, nested or flat alike); the outputs asked
 * for, by name order, with their parameters and the form the upstream
 * is asked to answer them in; the request's parameters.  Never "id",
 * never binary_data_size (a property of one encoding), never the
 * request's "priority" and "timeout" (when and whether it is run, not
 * what it answers: a gateway rewrites the timeout on every request).  Parameters are
 * sorted by key; their values are compared as written, strings
 * unescaped.  Every field is length-prefixed: no two requests write the
 * same bytes.  The caller hashes them (oip_digest_t).
 */


#include <stdlib.h>

#include "oip_request.h"


#define OIP_DIGEST_BUF       512


typedef struct {
    const oip_digest_t    *sink;
    size_t                 n;
    const oip_sink_t      *body;       /* the sink of the body's pass */
    const uint8_t         *read;       /* read again up to there */
    uint8_t                buf[OIP_DIGEST_BUF];
} oip_dig_t;


/* a member of a parameters object, an input or an output, by name */

typedef struct {
    oip_key_t              key;
    const uint8_t         *v;          /* a member's value */
    const uint8_t         *end;
    oip_item_t            *it;         /* an input */
    const oip_flagged_t   *out;        /* an output */
} oip_dig_entry_t;


static void oip_dig_put(oip_dig_t *d, const void *p, size_t len);
static void oip_dig_u64(oip_dig_t *d, uint64_t v);
static void oip_dig_str(oip_dig_t *d, const uint8_t *p, size_t len);
static void oip_dig_flush(oip_dig_t *d);
static int oip_dig_input(oip_dig_t *d, oip_msg_t *m, oip_item_t *it,
    const oip_key_t *name);
static int oip_dig_data(oip_dig_t *d, oip_msg_t *m, oip_item_t *it);
static int oip_dig_again(oip_dig_t *d, oip_msg_t *m, oip_item_t *it);
static void oip_dig_bin(oip_dig_t *d, oip_msg_t *m, const uint8_t *p,
    size_t len);
static int oip_dig_sink_write(void *data, const uint8_t *p, size_t len,
    uint64_t off);
static void oip_dig_sink_behind(void *data, const uint8_t *p);
static int oip_dig_params(oip_dig_t *d, oip_msg_t *m, const uint8_t *at,
    const char *skip, size_t skip_len);
static int oip_dig_value(oip_dig_t *d, oip_msg_t *m,
    const oip_dig_entry_t *e);
static int oip_dig_cmp(const void *a, const void *b);
static void oip_dig_free(oip_msg_t *m, oip_dig_entry_t *e, size_t n);


int
oip_request_digest(oip_req_t *rq)
{
    int                   rc, binary, deflt;
    size_t                i, n;
    oip_dig_t             d;
    oip_msg_t            *m;
    oip_item_t           *it;
    oip_dig_entry_t      *in, *out;
    const oip_flagged_t  *f;

    m = &rq->m;

    for (i = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (it->has_shm || (it->data_at == NULL && !it->has_bds)) {
            /* the tensor is not in the request: nothing to key on */
            return 0;
        }
    }

    d.sink = m->opt->digest;
    d.n = 0;

    oip_dig_put(&d, "oip-digest/1", 12);
    oip_dig_str(&d, m->opt->model, m->opt->model_len);
    oip_dig_str(&d, m->opt->version, m->opt->version_len);

    /* the inputs, by name */

    n = m->nitems;

    in = oip_alloc(&m->c, (n ? n : 1) * sizeof(oip_dig_entry_t));
    if (in == NULL) {
        return -1;
    }

    for (i = 0; i < n; i++) {
        in[i].it = &m->items[i];

        if (oip_key_make(&m->c, &in[i].it->name, &in[i].key) != 0) {
            oip_dig_free(m, in, i);
            return -1;
        }
    }

    qsort(in, n, sizeof(oip_dig_entry_t), oip_dig_cmp);

    oip_dig_u64(&d, n);
    rc = 0;

    for (i = 0; i < n && rc == 0; i++) {
        rc = oip_dig_input(&d, m, in[i].it, &in[i].key);
    }

    oip_dig_free(m, in, n);

    if (rc != 0) {
        return -1;
    }

    /*
     * The outputs and the form the upstream is asked for: fixed by
     * oip_upstream_outputs, or the client's own flags going on.
     */

    switch (m->opt->outputs) {
    case OIP_FORM_BINARY:
        deflt = 1;
        break;
    case OIP_FORM_JSON:
        deflt = 0;
        break;
    default:
        deflt = rq->top.has_flag && rq->top.flag_true;
    }

    n = rq->nouts;

    out = oip_alloc(&m->c, (n ? n : 1) * sizeof(oip_dig_entry_t));
    if (out == NULL) {
        return -1;
    }

    for (i = 0; i < n; i++) {
        out[i].key = rq->out_names[i];
        out[i].key.owned = 0;
        out[i].out = &rq->outs[i];
    }

    qsort(out, n, sizeof(oip_dig_entry_t), oip_dig_cmp);

    oip_dig_u64(&d, n);

    for (i = 0; i < n && rc == 0; i++) {
        f = out[i].out;

        binary = deflt;

        if (m->opt->outputs == OIP_FORM_KEEP && f->has_flag) {
            binary = f->flag_true;
        }

        oip_dig_str(&d, out[i].key.data, out[i].key.len);
        oip_dig_u64(&d, binary);

        rc = oip_dig_params(&d, m, f->has_params ? f->params_at : NULL,
                            "binary_data", 11);
    }

    oip_free(&m->c, out);

    if (rc != 0) {
        return -1;
    }

    oip_dig_u64(&d, deflt);

    if (oip_dig_params(&d, m, rq->top.has_params ? rq->top.params_at : NULL,
                       NULL, 0)
        != 0)
    {
        return -1;
    }

    oip_dig_flush(&d);

    return 1;
}


/* an input: its name, datatype, shape, parameters and bytes */

static int
oip_dig_input(oip_dig_t *d, oip_msg_t *m, oip_item_t *it,
    const oip_key_t *name)
{
    size_t            i, nsegs;
    uint64_t          len;
    const oip_seg_t  *segs;

    oip_dig_str(d, name->data, name->len);
    oip_dig_str(d, (const uint8_t *) oip_dtypes[it->t.dt].name,
                oip_dtypes[it->t.dt].len);

    oip_dig_u64(d, it->t.rank);

    for (i = 0; i < it->t.rank; i++) {
        oip_dig_u64(d, it->t.shape[i]);
    }

    if (oip_dig_params(d, m, it->params_at, "binary_data_size", 16) != 0) {
        return -1;
    }

    if (it->data_at && m->c.sink) {
        /* a body of any size: its JSON data is not kept made binary */
        return oip_dig_data(d, m, it);
    }

    if (it->data_at) {
        /* JSON data, made binary as it was read (keep_binary) */
        segs = it->chunk ? it->chunk : &it->one;
        nsegs = it->nchunk;
        len = it->chunk_len;

    } else {
        segs = NULL;
        nsegs = 0;
        len = it->bds_size;
    }

    oip_dig_u64(d, len);

    if (segs == NULL) {
        oip_dig_bin(d, m, it->bin, it->bds_size);
        return 0;
    }

    for (i = 0; i < nsegs; i++) {
        oip_dig_put(d, segs[i].data, segs[i].len);
    }

    return 0;
}


/*
 * With a sink, JSON data made binary is in the sink's file, or nowhere
 * (sent as JSON): it is read again from the body, made binary a window
 * at a time, each window hashed as it is written (they come in order).
 * BYTES are measured first: their length goes before their bytes.
 */

static int
oip_dig_data(oip_dig_t *d, oip_msg_t *m, oip_item_t *it)
{
    int                rc;
    uint64_t           len;
    oip_sink_t         hash;
    const oip_sink_t  *sink;

    sink = m->c.sink;

    hash = *sink;
    hash.data = d;
    hash.write = oip_dig_sink_write;
    hash.behind = oip_dig_sink_behind;

    d->body = sink;
    m->c.sink = &hash;

    /* the array of items may have moved since the pass set it */
    it->t.name = &it->name;

    if (oip_dtypes[it->t.dt].size == 0) {
        rc = oip_item_measure(m, it->data_at, &it->t, &len);
        oip_dig_u64(d, len);

    } else {
        rc = 0;
        oip_dig_u64(d, it->t.count * oip_dtypes[it->t.dt].size);
    }

    if (rc == 0) {
        rc = oip_dig_again(d, m, it);
    }

    m->c.sink = sink;

    return rc;
}


/* the data made binary once more, to the sink (of the digest) */

static int
oip_dig_again(oip_dig_t *d, oip_msg_t *m, oip_item_t *it)
{
    int             rc;
    size_t          size, counted;
    uint64_t        off;
    oip_out_t       w;
    oip_win_t       win;
    oip_json_t      sub;
    const uint8_t  *told;

    size = oip_dtypes[it->t.dt].size;

    /* the pass counted these bytes: they are not counted twice */
    counted = m->c.tensor_bytes;

    /* the progress told again from the data on: what is read again goes */
    told = m->c.told;
    m->c.told = it->data_at;
    d->read = it->data_at;

    oip_msg_sub(m, &sub, it->data_at);

    if (size == 0) {
        off = 0;
        oip_out_init(&w, &m->c, 0);
        oip_out_sink(&w, &off);

        rc = oip_data_to_binary(&sub, &it->t, NULL, &w);

        if (rc == 0) {
            rc = oip_out_cut(&w);
        }

        oip_free(&m->c, w.block);

    } else {
        if (m->win == NULL) {
            m->win = oip_alloc(&m->c, m->c.sink->block);
            if (m->win == NULL) {
                oip_json_done(&sub);
                return -1;
            }
        }

        win.buf = m->win;
        win.cap = m->c.sink->block / size;
        win.off = 0;

        rc = oip_data_to_sink(&sub, &it->t, &win);
    }

    oip_dig_sink_behind(d, sub.p);
    oip_json_done(&sub);

    m->c.tensor_bytes = counted;
    m->c.told = told;

    return rc;
}


/* a binary chunk of the body hashed, let go as it is read */

static void
oip_dig_bin(oip_dig_t *d, oip_msg_t *m, const uint8_t *p, size_t len)
{
    size_t  n, block;

    if (m->c.sink == NULL || m->c.sink->drop == NULL) {
        oip_dig_put(d, p, len);
        return;
    }

    block = m->c.sink->block;

    for ( /* void */ ; len; p += n, len -= n) {
        n = oip_min(len, block);
        oip_dig_put(d, p, n);
        m->c.sink->drop(m->c.sink->data, p, n);
    }
}


static int
oip_dig_sink_write(void *data, const uint8_t *p, size_t len, uint64_t off)
{
    oip_dig_t *d = data;

    (void) off;

    oip_dig_put(d, p, len);

    return 0;
}


/* the data read again up to p: its pages may go again */

static void
oip_dig_sink_behind(void *data, const uint8_t *p)
{
    oip_dig_t *d = data;

    if (d->body->drop && p > d->read) {
        d->body->drop(d->body->data, d->read, p - d->read);
        d->read = p;
    }
}


/*
 * A parameters object (or none), by key, but for one key; skip NULL:
 * the request's, without binary_data_output and the scheduling keys.
 */

static int
oip_dig_params(oip_dig_t *d, oip_msg_t *m, const uint8_t *at,
    const char *skip, size_t skip_len)
{
    int               rc;
    size_t            i, n, cap;
    oip_json_t        sub;
    oip_walk_t        w;
    oip_dig_entry_t  *e, *grown;

    if (at == NULL) {
        oip_dig_u64(d, 0);
        return 0;
    }

    oip_msg_sub(m, &sub, at);

    if (oip_walk_start(&sub, &w) != 0) {
        oip_json_done(&sub);
        return -1;
    }

    e = NULL;
    n = 0;
    cap = 0;

    while ((rc = oip_walk_next(&sub, &w)) == 1) {

        if (skip ? oip_json_str_eq(&w.key, skip, skip_len)
                 : (oip_json_str_eq(&w.key, "binary_data_output", 18)
                    || oip_json_str_eq(&w.key, "priority", 8)
                    || oip_json_str_eq(&w.key, "timeout", 7)))
        {
            if (oip_json_skip(&sub) != 0) {
                rc = -1;
                break;
            }

            continue;
        }

        if (n == cap) {
            grown = oip_grow(&m->c, e, n, &cap, sizeof(oip_dig_entry_t));
            if (grown == NULL) {
                rc = -1;
                break;
            }

            e = grown;
        }

        if (oip_key_make(&m->c, &w.key, &e[n].key) != 0) {
            rc = -1;
            break;
        }

        e[n].v = sub.p;

        if (oip_json_skip(&sub) != 0) {
            rc = -1;
            n++;
            break;
        }

        e[n++].end = sub.p;
    }

    oip_json_done(&sub);

    if (rc < 0) {
        oip_dig_free(m, e, n);
        return -1;
    }

    if (n > 1) {
        qsort(e, n, sizeof(oip_dig_entry_t), oip_dig_cmp);
    }

    oip_dig_u64(d, n);

    for (i = 0; i < n && rc == 0; i++) {
        oip_dig_str(d, e[i].key.data, e[i].key.len);
        rc = oip_dig_value(d, m, &e[i]);
    }

    oip_dig_free(m, e, n);

    return rc;
}


/* a string by what it says, anything else as written */

static int
oip_dig_value(oip_dig_t *d, oip_msg_t *m, const oip_dig_entry_t *e)
{
    size_t      len;
    uint8_t    *buf;
    oip_str_t   s;

    if (*e->v != '"') {
        oip_dig_put(d, "v", 1);
        oip_dig_str(d, e->v, e->end - e->v);
        return 0;
    }

    s.data = e->v + 1;
    s.len = e->end - e->v - 2;
    s.escaped = (memchr(s.data, '\\', s.len) != NULL);

    oip_dig_put(d, "s", 1);

    if (!s.escaped) {
        oip_dig_str(d, s.data, s.len);
        return 0;
    }

    buf = oip_alloc(&m->c, s.len);
    if (buf == NULL) {
        return -1;
    }

    len = oip_json_unescape(buf, &s);
    oip_dig_str(d, buf, len);

    oip_free(&m->c, buf);

    return 0;
}


static int
oip_dig_cmp(const void *a, const void *b)
{
    int                     rc;
    const oip_dig_entry_t  *x = a, *y = b;

    rc = memcmp(x->key.data, y->key.data, oip_min(x->key.len, y->key.len));

    if (rc != 0) {
        return rc;
    }

    return (x->key.len > y->key.len) - (x->key.len < y->key.len);
}


static void
oip_dig_free(oip_msg_t *m, oip_dig_entry_t *e, size_t n)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        if (e[i].key.owned) {
            oip_free(&m->c, (void *) e[i].key.data);
        }
    }

    oip_free(&m->c, e);
}


static void
oip_dig_put(oip_dig_t *d, const void *p, size_t len)
{
    if (len > OIP_DIGEST_BUF - d->n) {
        oip_dig_flush(d);

        if (len >= OIP_DIGEST_BUF / 2) {
            /* tensor bytes go as they are */
            d->sink->update(d->sink->data, p, len);
            return;
        }
    }

    if (len) {
        memcpy(d->buf + d->n, p, len);
        d->n += len;
    }
}


static void
oip_dig_u64(oip_dig_t *d, uint64_t v)
{
    int      i;
    uint8_t  b[8];

    for (i = 0; i < 8; i++) {
        b[i] = (uint8_t) (v >> (8 * i));
    }

    oip_dig_put(d, b, 8);
}


static void
oip_dig_str(oip_dig_t *d, const uint8_t *p, size_t len)
{
    oip_dig_u64(d, len);
    oip_dig_put(d, p, len);
}


static void
oip_dig_flush(oip_dig_t *d)
{
    if (d->n) {
        d->sink->update(d->sink->data, d->buf, d->n);
        d->n = 0;
    }
}
