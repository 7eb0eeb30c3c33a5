
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Inference answers, a kind of message for oip_message.c's pipeline:
 * each output given to the client in the form it asked for (SPEC 2's
 * rule, kept from its request), whatever the upstream did.  Outputs
 * already in that form stay byte for byte; an answer that cannot be
 * parsed, its IHCL included, is the upstream's fault: 502.
 */


#include <stdio.h>

#include "oip_pb.h"


typedef struct {
    oip_msg_t              m;
    oip_result_t          *res;
    const oip_wish_t      *wish;
    uint32_t              *table;      /* wish lookup, when it is long */
    size_t                 mask;

    /* the answer's own "id", when it is to be the request's */
    const uint8_t         *id_at;      /* its value, not null, or NULL */
    const uint8_t         *id_end;
    oip_member_t           id;
    const uint8_t         *close;      /* the answer's '}' */
    char                  *id_text;
} oip_resp_t;


static int oip_stream_final(const uint8_t *p, size_t len);
static int oip_response_envelope(oip_msg_t *m);
static oip_act_e oip_response_act(oip_msg_t *m, oip_item_t *it);
static int oip_response_edits(oip_msg_t *m);
static void oip_response_stats(oip_resp_t *rs);
static int oip_wish_binary(oip_resp_t *rs, const oip_key_t *k);
static int oip_wish_index(oip_resp_t *rs);
static int oip_response_verdict(oip_ctx_t *c, oip_result_t *res, int rc);


#define OIP_WISH_LINEAR      16


static const oip_kind_t  oip_response_kind = {
    "response", "output",
    oip_response_envelope, oip_response_act, oip_response_edits,
    "the answer with its binary outputs converted to JSON",
    0,                                  /* nonempty */
    1,                                  /* bytes_stay */
    0                                   /* upstream */
};


int
oip_response_process(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_wish_t *wish, const oip_framing_t *f,
    const uint8_t *body, size_t len)
{
    int             rc;
    oip_ctx_t      *c;
    oip_resp_t      rs;
    oip_envelope_t  env;

    memset(&rs, 0, sizeof(oip_resp_t));
    oip_msg_init(&rs.m, &oip_response_kind, opt, a, res);

    rs.m.data = &rs;
    rs.res = res;
    rs.wish = wish;
    c = &rs.m.c;

    /* tensors to the caller's file: REST answers, read whole already */

    if (opt->sink && opt->sink->block >= 64 && !f->protobuf) {
        c->sink = opt->sink;
        c->told = body;
    }

    rc = oip_wish_index(&rs);

    if (rc == 0 && f->protobuf) {
        /* no JSON to edit: its items, read from protobuf, are written */

        rc = oip_answer_grpc(&rs.m, &env, body, len, f->stream);

        if (rc == 0) {
            oip_response_stats(&rs);
            rc = oip_envelope_write(&rs.m, &env, res);
        }

        /* the segments reference the message and what was made of it */
        oip_msg_done(&rs.m);

    } else if (rc == 0) {
        if (f->ihcl == 0) {
            oip_fail(c, 400, OIP_REASON_SHAPE,
                     "Inference-Header-Content-Length is 0");
            rc = -1;

        } else {
            rc = oip_msg_split(&rs.m, f, body, len);
        }

        if (rc == 0) {
            rc = oip_msg_run(&rs.m, res);
        }
    }

    oip_free(c, rs.table);
    oip_free(c, rs.id_text);

    if (rc == 0 && !f->protobuf) {
        /* a REST answer is rewritten only when reshaped */
        res->reshaped = res->rewritten;
    }

    return oip_response_verdict(c, res, rc);
}


int
oip_response_plan(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_wish_t *wish, const uint8_t *header,
    size_t ihcl, uint64_t blen)
{
    int            rc;
    oip_ctx_t     *c;
    oip_resp_t     rs;
    oip_framing_t  f;

    memset(&rs, 0, sizeof(oip_resp_t));
    memset(&f, 0, sizeof(oip_framing_t));
    oip_msg_init(&rs.m, &oip_response_kind, opt, a, res);

    rs.m.data = &rs;
    rs.m.plan = 1;
    rs.res = res;
    rs.wish = wish;
    c = &rs.m.c;

    f.ihcl = (int64_t) ihcl;

    if (ihcl == 0) {
        /* no JSON header to plan from: held, and refused there */
        return res->status = 0;
    }

    rc = oip_wish_index(&rs);

    if (rc == 0) {
        rc = oip_msg_split(&rs.m, &f, header, ihcl);
    }

    if (rc == 0) {
        /* the binary part is to come: its length alone */
        rs.m.bin = NULL;
        rs.m.blen = (blen == OIP_BLEN_ANY) ? SIZE_MAX : (size_t) blen;

        rc = oip_msg_run(&rs.m, res);
    }

    oip_free(c, rs.table);
    oip_free(c, rs.id_text);

    if (rc == 0) {
        res->reshaped = res->rewritten;
        res->planned = res->rewritten && !rs.m.unplanned && res->nchunks;
    }

    return oip_response_verdict(c, res, rc);
}


/* 0, or the status of an answer refused: the upstream's fault, 502 */

static int
oip_response_verdict(oip_ctx_t *c, oip_result_t *res, int rc)
{
    char  msg[OIP_ERROR_LEN];

    if (rc == 0) {
        /* the headers say what the body is, whoever answered */
        res->content_type = res->binary ? OIP_TYPE_BINARY : OIP_TYPE_JSON;
        return res->status = 0;
    }

    if (c->status == 500) {
        return res->status = 500;
    }

    /* whatever the check, a bad answer is the upstream's fault */

    if (c->status == 0) {
        snprintf(msg, sizeof(msg), "internal error in the response codec");
        res->reason = OIP_REASON_OTHER;

    } else {
        memcpy(msg, res->error, OIP_ERROR_LEN);
    }

    snprintf(res->error, OIP_ERROR_LEN, "upstream answer: %.*s",
             OIP_ERROR_LEN - 20, msg);

    return res->status = 502;
}


/*
 * One message of a ModelStreamInfer call, framed: its error_message
 * (field 1) is the runtime's word for the request and ends the stream;
 * its infer_response (field 2) an answer like ModelInfer's, written as
 * REST; an empty final response (Triton's "triton_final_response" and
 * no outputs) is no answer.  A message that cannot be read is left to
 * oip_response_process(), which says why (502).
 */

int
oip_stream_process(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_wish_t *wish, const uint8_t *body,
    size_t len, oip_event_e *ev)
{
    int            rc;
    size_t         i, n;
    oip_ctx_t      c;
    oip_pbr_t      r;
    oip_pbf_t      f, error, inner;
    oip_framing_t  fr;

    memset(&error, 0, sizeof(oip_pbf_t));
    memset(&inner, 0, sizeof(oip_pbf_t));

    rc = -1;

    /* a frame that is no message: oip_response_process() says why */
    oip_ctx_init(&c, a, res->error, &res->reason, (size_t) -1);

    if (oip_grpc_unframe(&c, body, len, &r) == 0) {
        while ((rc = oip_pbr_next(&r, &f)) == 1) {
            if (f.type == OIP_PB_LEN && f.field == 1) {
                error = f;

            } else if (f.type == OIP_PB_LEN && f.field == 2) {
                inner = f;
            }
        }
    }

    if (rc == 0 && error.len) {
        memset(res, 0, sizeof(oip_result_t));

        n = oip_utf8_cut(error.data, error.len, OIP_ERROR_LEN - 1);
        memcpy(res->error, error.data, n);
        res->error[n] = '\0';
        res->reason = oip_error_words(error.data, error.len);

        /* words that C strings can carry, and some */

        for (i = 0; i < n; i++) {
            if (res->error[i] == '\0') {
                res->error[i] = ' ';
            }
        }

        if (n == 0) {
            snprintf(res->error, OIP_ERROR_LEN, "the runtime's stream "
                     "ends with an error it does not say");
        }

        *ev = OIP_EVENT_ERROR;
        return 0;
    }

    if (rc == 0 && oip_stream_final(inner.data, inner.len)) {
        memset(res, 0, sizeof(oip_result_t));
        *ev = OIP_EVENT_NONE;
        return 0;
    }

    *ev = OIP_EVENT_DATA;

    memset(&fr, 0, sizeof(oip_framing_t));
    fr.ihcl = -1;
    fr.protobuf = 1;
    fr.stream = 1;

    return oip_response_process(res, a, opt, wish, &fr, body, len);
}


/* an infer_response without outputs, flagged triton_final_response */

static int
oip_stream_final(const uint8_t *p, size_t len)
{
    int         final;
    uint64_t    v;
    oip_pbr_t   r, e, b;
    oip_pbf_t   f, k, pv;

    static const char  key[] = "triton_final_response";

    if (p == NULL) {
        return 0;
    }

    final = 0;
    r.p = p;
    r.end = p + len;

    while (oip_pbr_next(&r, &f) == 1) {

        if (f.field == 5) {
            return 0;
        }

        if (f.field != 4 || f.type != OIP_PB_LEN) {
            continue;
        }

        /* a map entry: key 1, value 2 (an InferParameter) */

        e.p = f.data;
        e.end = f.data + f.len;
        v = 0;
        k.len = 0;
        k.data = NULL;

        while (oip_pbr_next(&e, &pv) == 1) {
            if (pv.field == 1 && pv.type == OIP_PB_LEN) {
                k = pv;

            } else if (pv.field == 2 && pv.type == OIP_PB_LEN) {
                b.p = pv.data;
                b.end = pv.data + pv.len;
                v = 0;

                while (oip_pbr_next(&b, &pv) == 1) {
                    if (pv.field == OIP_GP_BOOL
                        && pv.type == OIP_PB_VARINT)
                    {
                        v = pv.v;
                    }
                }
            }
        }

        if (k.len == sizeof(key) - 1 && memcmp(k.data, key, k.len) == 0) {
            final = (v != 0);
        }
    }

    return final;
}


/*
 * The answer's object: its "outputs", and the optional members that
 * runtimes write as null (KServe: "id", "model_version", "parameters"),
 * which are dropped.
 */

static int
oip_response_envelope(oip_msg_t *m)
{
    int           rc, outputs, id;
    oip_resp_t   *rs = m->data;
    oip_json_t   *j;
    oip_walk_t    w;
    oip_nulls_t   nulls;

    j = &m->j;
    nulls.n = 0;

    oip_json_ws(j);

    if (j->p == j->end || *j->p != '{') {
        return oip_fail(&m->c, 400, OIP_REASON_OTHER, "not a JSON object");
    }

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        outputs = oip_json_str_eq(&w.key, "outputs", 7);
        id = !outputs && oip_json_str_eq(&w.key, "id", 2);

        if ((outputs || id
             || oip_json_str_eq(&w.key, "parameters", 10)
             || oip_json_str_eq(&w.key, "model_version", 13))
            && oip_null_member(j, &nulls, &w))
        {
            continue;
        }

        if (id) {
            rs->id_at = j->p;
        }

        if ((outputs ? oip_msg_tensors(m) : oip_json_skip(j)) != 0) {
            return -1;
        }

        if (id) {
            rs->id_end = j->p;
            oip_walk_note(&w, &rs->id, j->p);
        }
    }

    if (rc < 0 || oip_nulls_delete(m, &nulls) != 0) {
        return -1;
    }

    rs->close = j->p - 1;

    oip_json_ws(j);

    if (j->p != j->end) {
        return oip_fail(&m->c, 400, OIP_REASON_SYNTAX, "unexpected bytes "
                        "after the JSON object at byte %zu",
                        (size_t) (j->p - j->start));
    }

    return 0;
}


static oip_act_e
oip_response_act(oip_msg_t *m, oip_item_t *it)
{
    int         binary;
    oip_key_t   k;
    oip_resp_t *rs = m->data;

    if (oip_key_make(&m->c, &it->name, &k) != 0) {
        return OIP_ACT_PASS;
    }

    binary = oip_wish_binary(rs, &k);

    if (k.owned) {
        oip_free(&m->c, (void *) k.data);
    }

    if (binary < 0) {
        /* the client listed its outputs, and not this one */
        return OIP_ACT_DROP;
    }

    if (it->data_at) {
        return binary ? OIP_ACT_BINARY : OIP_ACT_PASS;
    }

    if (it->has_bds) {
        return binary ? OIP_ACT_PASS : OIP_ACT_JSON;
    }

    /* in shared memory: nothing here to convert */

    return OIP_ACT_PASS;
}


/*
 * A cached answer was the answer to another request: its "id" becomes
 * this request's, or goes when this one sent none.  The stats, for the
 * operator.
 */

static int
oip_response_edits(oip_msg_t *m)
{
    char                 *p;
    size_t                len;
    oip_resp_t           *rs = m->data;
    const oip_options_t  *opt;

    oip_response_stats(rs);

    opt = m->opt;

    if (!opt->answer_id_set) {
        return 0;
    }

    if (opt->answer_id == NULL) {
        return rs->id_at ? oip_edit_delete(m, &rs->id) : 0;
    }

    len = oip_json_escape(NULL, opt->answer_id, opt->answer_id_len);

    rs->id_text = oip_alloc(&m->c, len + sizeof(",\"id\":\"\""));
    if (rs->id_text == NULL) {
        return -1;
    }

    p = rs->id_text;

    if (rs->id_at == NULL) {
        p = (char *) memcpy(p, ",\"id\":", 6) + 6;
    }

    *p++ = '"';
    p += oip_json_escape((uint8_t *) p, opt->answer_id, opt->answer_id_len);
    *p++ = '"';
    *p = '\0';

    if (rs->id_at) {
        return oip_edit_text(m, rs->id_at, rs->id_end, rs->id_text);
    }

    /* before the '}': a null "id" deleted at its start is out of the way */

    return oip_edit_text(m, rs->close, rs->close, rs->id_text);
}


/* the outputs given to the client: how many, their bytes, their forms */

static void
oip_response_stats(oip_resp_t *rs)
{
    size_t         i, size;
    uint64_t       bytes;
    oip_item_t    *it;
    oip_shape_e    in, out;
    oip_result_t  *res;

    res = rs->res;
    in = OIP_SHAPE_NONE;
    out = OIP_SHAPE_NONE;

    for (i = 0; i < rs->m.nitems; i++) {
        it = &rs->m.items[i];

        if (it->act == OIP_ACT_DROP || !it->settled
            || (it->data_at == NULL && !it->has_bds))
        {
            continue;
        }

        res->ninputs++;
        res->elements += it->t.count;

        in = oip_shape_add(in, oip_item_in_form(it));
        out = oip_shape_add(out, oip_item_out_form(it));

        size = oip_dtypes[it->t.dt].size;

        if (size) {
            /* an upstream's shape, never trusted to fit */
            bytes = (it->t.count > UINT64_MAX / size) ? UINT64_MAX
                                                      : it->t.count * size;

        } else if (it->has_bds) {
            bytes = it->bds_size;

        } else {
            bytes = (it->act == OIP_ACT_BINARY) ? it->chunk_len : 0;
        }

        res->tensor_bytes = (bytes > SIZE_MAX - res->tensor_bytes)
                            ? SIZE_MAX : res->tensor_bytes + bytes;
    }

    res->in_form = in;
    res->out_form = out;
}


/*
 * SPEC 2: listed outputs by their own binary_data, every output by
 * binary_data_output when none is listed; -1 for an output the client
 * did not list when it listed some.
 */

static int
oip_wish_binary(oip_resp_t *rs, const oip_key_t *k)
{
    size_t                 i;
    uint32_t               slot;
    const oip_wish_out_t  *w;

    if (!rs->wish->listed) {
        return rs->wish->binary;
    }

    if (rs->table == NULL) {
        for (i = 0; i < rs->wish->n; i++) {
            w = &rs->wish->outputs[i];

            if (w->len == k->len && memcmp(w->name, k->data, k->len) == 0) {
                return w->binary;
            }
        }

        return -1;
    }

    for (i = k->hash & rs->mask; (slot = rs->table[i]) != 0;
         i = (i + 1) & rs->mask)
    {
        w = &rs->wish->outputs[slot - 1];

        if (w->len == k->len && memcmp(w->name, k->data, k->len) == 0) {
            return w->binary;
        }
    }

    return -1;
}


static int
oip_wish_index(oip_resp_t *rs)
{
    size_t      i, m, size;
    oip_key_t   k;
    oip_str_t   s;

    if (!rs->wish->listed || rs->wish->n <= OIP_WISH_LINEAR) {
        return 0;
    }

    for (size = 64; size < 2 * rs->wish->n; size *= 2) { /* void */ }

    rs->table = oip_alloc(&rs->m.c, size * sizeof(uint32_t));
    if (rs->table == NULL) {
        return -1;
    }

    memset(rs->table, 0, size * sizeof(uint32_t));
    rs->mask = size - 1;

    for (i = 0; i < rs->wish->n; i++) {
        s.data = rs->wish->outputs[i].name;
        s.len = rs->wish->outputs[i].len;
        s.escaped = 0;

        (void) oip_key_make(&rs->m.c, &s, &k);

        for (m = k.hash & rs->mask; rs->table[m]; m = (m + 1) & rs->mask) {
            /* void */
        }

        rs->table[m] = (uint32_t) (i + 1);
    }

    return 0;
}
