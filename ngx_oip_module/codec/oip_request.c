
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Inference requests, a kind of message for oip_message.c's pipeline:
 * its envelope ("inputs",
 * "outputs", "parameters"), input tensors converted to the form the
 * upstream wants, binary_data and binary_data_output set as they should
 * be asked, and the client's own wish for each output kept for the
 * answer.  A compressed body is inflated first; a raw binary request is
 * given the header its declared input (oip_raw_input, or the model's
 * only input) implies.  With the model's signature, each input and each
 * listed output is checked against it.
 */


#include <stdio.h>

#include "oip_inflate.h"
#include "oip_request.h"
#include "oip_number.h"
#include "oip_signature.h"


/*
 * What an error message calls an object: made only when there is an
 * error, the success path pays nothing for it.
 */

typedef struct {
    const char            *text;        /* "the request", or NULL */
    size_t                 index;       /* outputs[index] */
    oip_str_t              name;        /* once known */
    unsigned               named:1;
} oip_label_t;


/* the datatypes as a "datatype" value, for re-typed inputs */

static const char  *oip_dtype_quoted[] = {
    "\"BOOL\"", "\"UINT8\"", "\"UINT16\"", "\"UINT32\"", "\"UINT64\"",
    "\"INT8\"", "\"INT16\"", "\"INT32\"", "\"INT64\"", "\"FP16\"",
    "\"BF16\"", "\"FP32\"", "\"FP64\"", "\"BYTES\""
};


static int oip_request_raw(oip_req_t *rq, const oip_raw_input_t *raw,
    const uint8_t *body, size_t len);
static int oip_request_raw_sig(oip_req_t *rq, oip_raw_input_t *raw);
static int oip_request_envelope(oip_msg_t *m);
static int oip_parse_outputs(oip_req_t *rq);
static int oip_parse_params(oip_req_t *rq, const char *flag,
    const oip_label_t *label, oip_flagged_t *f, oip_walk_t *outer);
static const char *oip_label(const oip_label_t *l, char *buf, size_t size);
static oip_act_e oip_request_act(oip_msg_t *m, oip_item_t *it);
static int oip_request_fit(oip_req_t *rq, oip_item_t *it);
static int oip_request_coerce(oip_req_t *rq, oip_item_t *it,
    const oip_sig_tensor_t *st);
static int oip_request_fit_all(oip_req_t *rq);
static int oip_request_optional(oip_req_t *rq, const uint8_t *name,
    size_t len);
static const char *oip_model(const oip_options_t *opt, char *buf,
    size_t size);
static int oip_request_edits(oip_msg_t *m);
static int oip_request_wish(oip_req_t *rq, oip_result_t *res);
static int oip_request_stats(oip_req_t *rq, oip_result_t *res);


static const oip_kind_t  oip_request_kind = {
    "request", "input",
    oip_request_envelope, oip_request_act, oip_request_edits,
    "the request with its binary inputs converted to JSON",
    1,                                  /* nonempty */
    0,                                  /* bytes_stay */
    1                                   /* upstream */
};


int
oip_request_process(oip_result_t *res, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_framing_t *f, const uint8_t *body,
    size_t len)
{
    uint8_t                *plain;
    uint64_t                plain_len;
    oip_req_t               rq;
    oip_ctx_t              *c;
    oip_raw_input_t         sig_raw;
    const oip_raw_input_t  *raw;

    memset(&rq, 0, sizeof(oip_req_t));
    oip_msg_init(&rq.m, &oip_request_kind, opt, a, res);

    rq.m.data = &rq;
    rq.res = res;
    c = &rq.m.c;

    if (opt->grpc) {
        rq.m.target = oip_request_grpc;
    }

    /*
     * Tensors to the caller's file: REST bodies, raw contents, typed
     * ones if the caller can read them back; an encoded body inflated to
     * a file first, if the caller can map it
     */

    if (opt->sink && opt->sink->block >= 64
        && (opt->grpc == NULL || !opt->grpc->typed
            || (opt->sink->head && opt->sink->read))
        && (f->encoding == OIP_ENC_NONE || opt->sink->remap))
    {
        c->sink = opt->sink;
        c->told = body;

        if (opt->grpc && !opt->grpc->typed) {
            rq.m.lead = oip_request_grpc_lead;
        }
    }

    /*
     * The digest reads JSON data made binary: kept in memory, or, with a
     * sink, read again from the body when it is hashed
     */

    rq.m.keep_binary = (opt->digest != NULL && c->sink == NULL);

    if (opt->body_file && f->encoding == OIP_ENC_NONE) {
        /* what is referenced of it is in its file too */
        rq.m.file = body;
        rq.m.file_len = len;
    }

    if (f->encoding != OIP_ENC_NONE && c->sink) {
        /* inflated to the caller's file, and read back from its mapping */

        if (oip_inflate_sink(c, body, len, opt->max_json_size
                                           + opt->max_tensor_size,
                             &plain_len) != 0)
        {
            return res->status = c->status;
        }

        body = c->sink->remap(c->sink->data, plain_len);

        if (body == NULL) {
            oip_fail(c, 500, OIP_REASON_OTHER, "the decompressed body could "
                     "not be read back from its temporary file");
            return res->status = c->status;
        }

        len = (size_t) plain_len;
        c->told = body;
        res->decompressed = 1;

    } else if (f->encoding != OIP_ENC_NONE) {
        /* IHCL and the limits count the bytes after decompression */

        if (oip_inflate(c, body, len, opt->max_json_size
                                      + opt->max_tensor_size,
                        &plain, &len) != 0)
        {
            return res->status = c->status;
        }

        body = plain;
        res->decompressed = 1;
    }

    if (f->ihcl == 0) {
        res->raw = 1;

        /* oip_raw_input first, then the model's signature */

        raw = opt->raw;

        if (raw == NULL && opt->signature && opt->signature->ninputs) {
            if (oip_request_raw_sig(&rq, &sig_raw) != 0) {
                res->misfit = rq.misfit;

                if (res->misfit) {
                    res->reason = OIP_REASON_SIGNATURE;
                }

                return res->status = c->status;
            }

            raw = &sig_raw;
        }

        if (raw == NULL) {
            if (opt->inputs != OIP_FORM_KEEP) {
                oip_fail(c, 400, OIP_REASON_SHAPE, "a raw binary request "
                         "(Inference-Header-Content-Length: 0) needs "
                         "oip_raw_input here");

            } else {
                /* one input; its elements are the runtime's to count */
                res->in_form = OIP_SHAPE_RAW;
                res->out_form = OIP_SHAPE_RAW;
                res->ninputs = 1;
                res->tensor_bytes = len;
            }

            if (c->status == 0 && res->decompressed && c->sink) {
                /* the sink's file holds all after the JSON: here, all */
                if (oip_sink_write(c, body, len, 0) == 0) {
                    res->spooled = len;
                    res->body_len = len;
                    res->rewritten = 1;
                    res->binary = 1;
                    res->content_type = OIP_TYPE_BINARY;
                }

            } else if (c->status == 0 && res->decompressed) {
                /* only the encoding goes: Triton serves raw itself */
                res->segs = oip_alloc(c, sizeof(oip_seg_t));

                if (res->segs) {
                    res->segs->data = body;
                    res->segs->len = len;
                    res->segs->file = -1;
                    res->nsegs = 1;
                    res->body_len = len;
                    res->rewritten = 1;
                    res->binary = 1;
                    res->content_type = OIP_TYPE_BINARY;
                }
            }

            return res->status = c->status;
        }

        if (oip_request_raw(&rq, raw, body, len) != 0) {
            return res->status = c->status;
        }

    } else {
        if (oip_msg_split(&rq.m, f, body, len) != 0) {
            return res->status = c->status;
        }

        if (len == 0) {
            oip_fail(c, 400, OIP_REASON_OTHER, "the request body is empty");
            return res->status = c->status;
        }
    }

    if (c->sink && opt->grpc && opt->grpc->typed) {
        /*
         * after any inflating: the pass's tensors to the head file, read
         * back when their entries are written, which go to the sink's
         * file (oip_pb_request.c)
         */
        oip_msg_head_sink(&rq.m);
    }

    /* a body of another form, even if no tensor changes */

    rq.m.rewrite = (rq.raw || res->decompressed
                    || (opt->inputs == OIP_FORM_JSON && rq.m.has_ihcl));

    if (oip_msg_run(&rq.m, res) != 0) {
        /* digested before the body was built: not for a refusal */
        res->digested = 0;

        if (c->status == 0) {
            /* a failure must never pass for success */
            oip_fail(c, 500, OIP_REASON_OTHER, "internal error in the request "
                     "codec");
        }

        /* broken JSON is said first, and is no reason to refetch */
        res->misfit = rq.misfit && !rq.m.syntax;

        /* whatever broke, a request that does not fit its model's
         * signature is refused for the signature */

        if (res->misfit) {
            res->reason = OIP_REASON_SIGNATURE;
        }

        return res->status = c->status;
    }

    if (opt->grpc) {
        /* its answer is protobuf: always converted back */
        res->manage = 1;
        return res->status = 0;
    }

    /* the answer may have to be reshaped, or outputs dropped from it */

    res->manage = (opt->outputs != OIP_FORM_KEEP || rq.m.edited || rq.raw
                   || res->decompressed || res->wish.listed);

    /*
     * The Content-Type matches the body whenever inputs are not kept as
     * sent: a runtime may go by it.
     */

    if (res->rewritten || (opt->inputs != OIP_FORM_KEEP && !res->raw)) {
        res->content_type = res->binary ? OIP_TYPE_BINARY : OIP_TYPE_JSON;
    }

    return res->status = 0;
}


/*
 * IHCL 0: the body is the bytes of the one declared input.  A header is
 * made for it; the bytes stay where they are (BYTES gets its length).
 */

static int
oip_request_raw(oip_req_t *rq, const oip_raw_input_t *raw,
    const uint8_t *body, size_t len)
{
    size_t                   i, size, hlen;
    uint8_t                 *h, *p, *b;
    uint64_t                 known, dims[OIP_RAW_RANK];

    rq->raw = 1;
    size = oip_dtypes[raw->dt].size;

    if (raw->dt == OIP_BYTES) {
        if (len > UINT32_MAX) {
            return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "a raw BYTES "
                            "input is limited to 4 GB");
        }

        b = oip_alloc(&rq->m.c, len + 4);
        if (b == NULL) {
            return -1;
        }

        b[0] = (uint8_t) len;
        b[1] = (uint8_t) (len >> 8);
        b[2] = (uint8_t) (len >> 16);
        b[3] = (uint8_t) (len >> 24);
        memcpy(b + 4, body, len);

        body = b;
        len += 4;

        for (i = 0; i < raw->rank; i++) {
            dims[i] = 1;
        }

    } else {
        known = 1;

        for (i = 0; i < raw->rank; i++) {
            if (raw->dims[i] >= 0) {
                known *= (uint64_t) raw->dims[i];
            }
        }

        if (raw->deduced < 0 && known * size != len) {
            return oip_fail(&rq->m.c, 400, OIP_REASON_SHAPE, "raw input '%s': "
                            "%zu bytes, but shape %s of %s needs %llu",
                            raw->name, len, raw->text, oip_dtypes[raw->dt].name,
                            (unsigned long long) (known * size));
        }

        if (len % (known * size)) {
            return oip_fail(&rq->m.c, 400, OIP_REASON_SHAPE, "raw input '%s': "
                            "%zu bytes are not a whole number of %s elements "
                            "of shape %s", raw->name, len,
                            oip_dtypes[raw->dt].name, raw->text);
        }

        for (i = 0; i < raw->rank; i++) {
            dims[i] = raw->dims[i] >= 0 ? (uint64_t) raw->dims[i]
                                        : len / (known * size);
        }
    }

    hlen = sizeof("{\"inputs\":[{\"name\":\"\",\"shape\":[],\"datatype\":\"\","
                  "\"parameters\":{\"binary_data_size\":}}]}")
           + oip_json_escape(NULL, (const uint8_t *) raw->name,
                             strlen(raw->name))
           + raw->rank * 21 + 8 + 20;

    h = oip_alloc(&rq->m.c, hlen);
    if (h == NULL) {
        return -1;
    }

    p = (uint8_t *) memcpy(h, "{\"inputs\":[{\"name\":\"", 20) + 20;
    p += oip_json_escape(p, (const uint8_t *) raw->name, strlen(raw->name));
    p = (uint8_t *) memcpy(p, "\",\"shape\":[", 11) + 11;

    for (i = 0; i < raw->rank; i++) {
        if (i) {
            *p++ = ',';
        }

        p = oip_print_u64(p, dims[i]);
    }

    p += sprintf((char *) p, "],\"datatype\":\"%s\",\"parameters\":"
                 "{\"binary_data_size\":", oip_dtypes[raw->dt].name);
    p = oip_print_u64(p, len);
    p = (uint8_t *) memcpy(p, "}}]}", 4) + 4;

    rq->m.json = h;
    rq->m.jlen = p - h;
    rq->m.bin = body;
    rq->m.blen = len;
    rq->m.has_ihcl = 1;

    return 0;
}


/*
 * A raw request for a model whose signature has one input: that input,
 * as oip_raw_input would declare it.  Its size fixes one variable
 * dimension at most.
 */

static int
oip_request_raw_sig(oip_req_t *rq, oip_raw_input_t *raw)
{
    char                     model[96], shape[96];
    size_t                   i, n;
    const int64_t           *dims;
    const oip_signature_t   *s;
    const oip_sig_tensor_t  *st;

    s = rq->m.opt->signature;
    st = oip_sig_tensors(s);

    if (s->ninputs != 1) {
        rq->misfit = 1;
        return oip_fail(&rq->m.c, 400, OIP_REASON_SHAPE, "a raw binary request "
                        "(Inference-Header-Content-Length: 0) is the data "
                        "of one input, and %s has %u: it needs oip_raw_input "
                        "here", oip_model(rq->m.opt, model, sizeof(model)),
                        (unsigned) s->ninputs);
    }

    memset(raw, 0, sizeof(oip_raw_input_t));

    if (st->dt == OIP_SIG_ANY_DT || st->rank == OIP_SIG_ANY_RANK
        || st->rank > OIP_RAW_RANK || st->name_len >= OIP_RAW_NAME)
    {
        return oip_fail(&rq->m.c, 400, OIP_REASON_SHAPE, "a raw binary request "
                        "for %s needs oip_raw_input here: its metadata does "
                        "not say the datatype and shape of its input",
                        oip_model(rq->m.opt, model, sizeof(model)));
    }

    memcpy(raw->name, oip_sig_name(s, st), st->name_len);
    raw->dt = st->dt;
    raw->rank = st->rank;
    raw->deduced = -1;

    dims = oip_sig_dims(s, st);
    n = 0;

    for (i = 0; i < st->rank; i++) {
        raw->dims[i] = dims[i];

        if (dims[i] < 0) {
            n++;
            raw->deduced = (int) i;

        } else if (dims[i] == 0
                   || (st->dt == OIP_BYTES && dims[i] != 1))
        {
            n = 2;
        }
    }

    (void) oip_sig_shape_str(s, st, raw->text, sizeof(raw->text));

    if (n > 1) {
        rq->misfit = 1;
        return oip_fail(&rq->m.c, 400, OIP_REASON_SHAPE, "a raw binary request "
                        "cannot be sized for input '%s' of %s, shape %s: it "
                        "needs oip_raw_input here", raw->name,
                        oip_model(rq->m.opt, model, sizeof(model)),
                        oip_sig_shape_str(s, st, shape, sizeof(shape)));
    }

    return 0;
}


/* the request's object: "inputs", "outputs" and "parameters" */

static int
oip_request_envelope(oip_msg_t *m)
{
    int           rc;
    oip_req_t    *rq;
    oip_json_t   *j;
    oip_walk_t    w;
    oip_nulls_t   nulls;

    static const oip_label_t  request = { "the request", 0, { NULL, 0, 0 },
                                          0 };

    rq = m->data;
    j = &m->j;
    nulls.n = 0;

    oip_json_ws(j);

    if (j->p == j->end) {
        return oip_fail(&rq->m.c, 400, OIP_REASON_SYNTAX, "the request holds "
                        "no JSON");
    }

    if (*j->p != '{') {
        return oip_fail(&rq->m.c, 400, OIP_REASON_SYNTAX, "the request must be "
                        "a JSON object");
    }

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    while ((rc = oip_walk_next(j, &w)) == 1) {

        rc = 0;

        if (oip_json_str_eq(&w.key, "inputs", 6)) {
            rc = oip_msg_tensors(&rq->m);

        } else if (oip_json_str_eq(&w.key, "outputs", 7)) {
            if (!oip_null_member(j, &nulls, &w)) {
                rc = oip_parse_outputs(rq);
            }

        } else if (oip_json_str_eq(&w.key, "parameters", 10)) {
            if (!oip_null_member(j, &nulls, &w)) {
                rc = oip_parse_params(rq, "binary_data_output", &request,
                                      &rq->top, &w);
            }

        } else if (oip_json_str_eq(&w.key, "id", 2)) {
            if (*j->p == '"') {
                rc = oip_json_string(j, &rq->id);

            } else if (!oip_null_member(j, &nulls, &w)) {
                rq->id_other = 1;
                rc = oip_json_skip(j);
            }

        } else {
            rc = oip_json_skip(j);
        }

        if (rc != 0) {
            return -1;
        }
    }

    if (rc < 0 || oip_nulls_delete(m, &nulls) != 0) {
        return -1;
    }

    rq->top.close = j->p - 1;

    oip_json_ws(j);

    if (j->p != j->end) {
        /* within an IHCL, broken JSON; without one, binary data unframed */
        return oip_fail(&rq->m.c, 400,
                        rq->m.has_ihcl ? OIP_REASON_SYNTAX : OIP_REASON_SHAPE,
                        "unexpected bytes after the JSON object at byte %zu%s",
                        (size_t) (j->p - j->start),
                        rq->m.has_ihcl ? "" : " (binary data needs an "
                        "Inference-Header-Content-Length header)");
    }

    if (!rq->m.seen) {
        return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "'inputs' is missing");
    }

    if (m->opt->signature && m->opt->signature->ninputs) {
        return oip_request_fit_all(rq);
    }

    return 0;
}


static int
oip_parse_outputs(oip_req_t *rq)
{
    int             rc;
    char            buf[96];
    ptrdiff_t       dup;
    oip_arr_t       a;
    oip_str_t       name;
    oip_key_t      *names, *k;
    oip_json_t     *j;
    oip_walk_t      w;
    oip_label_t     label;
    oip_nulls_t     nulls;
    oip_flagged_t  *f, *outs;

    j = &rq->m.j;

    if (*j->p != '[') {
        return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "'outputs' must be an "
                        "array");
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    rq->nouts = 0;

    while ((rc = oip_json_element(j, &a)) == 1) {

        if (*j->p != '{') {
            return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "outputs[%zu] "
                            "must be an object", a.n - 1);
        }

        if (rq->nouts == OIP_MAX_TENSORS) {
            return oip_fail(&rq->m.c, 413, OIP_REASON_LIMIT, "more than %d "
                            "outputs", OIP_MAX_TENSORS);
        }

        if (rq->nouts == rq->outs_cap) {
            outs = oip_grow(&rq->m.c, rq->outs, rq->nouts, &rq->outs_cap,
                            sizeof(oip_flagged_t));
            if (outs == NULL) {
                return -1;
            }

            rq->outs = outs;
        }

        if (rq->nouts == rq->names_cap) {
            names = oip_grow(&rq->m.c, rq->out_names, rq->nouts,
                             &rq->names_cap, sizeof(oip_key_t));
            if (names == NULL) {
                return -1;
            }

            rq->out_names = names;
        }

        f = &rq->outs[rq->nouts];
        memset(f, 0, sizeof(oip_flagged_t));

        if (oip_walk_start(j, &w) != 0) {
            return -1;
        }

        nulls.n = 0;

        label.text = NULL;
        label.index = a.n - 1;
        label.named = 0;

        while ((rc = oip_walk_next(j, &w)) == 1) {

            rc = 0;

            if (oip_json_str_eq(&w.key, "name", 4)) {
                if (*j->p != '"') {
                    return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s: "
                                    "'name' must be a string",
                                    oip_label(&label, buf, sizeof(buf)));
                }

                if (oip_json_string(j, &name) != 0) {
                    return -1;
                }

                if (name.len == 0) {
                    return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s: "
                                    "'name' must not be empty",
                                    oip_label(&label, buf, sizeof(buf)));
                }

                if (oip_name_controls(&name)) {
                    return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s: "
                                    "'name' must not hold control characters",
                                    oip_label(&label, buf, sizeof(buf)));
                }

                if (oip_key_make(&rq->m.c, &name, &rq->out_names[rq->nouts])
                    != 0)
                {
                    return -1;
                }

                label.name = name;
                label.named = 1;

            } else if (oip_json_str_eq(&w.key, "parameters", 10)) {
                if (!oip_null_member(j, &nulls, &w)) {
                    rc = oip_parse_params(rq, "binary_data", &label, f, &w);
                }

            } else {
                rc = oip_json_skip(j);
            }

            if (rc < 0) {
                return -1;
            }
        }

        if (rc < 0) {
            return -1;
        }

        if (!label.named) {
            return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s: 'name' is "
                            "missing", oip_label(&label, buf, sizeof(buf)));
        }

        if (oip_nulls_delete(&rq->m, &nulls) != 0) {
            return -1;
        }

        f->close = j->p - 1;
        rq->nouts++;
    }

    if (rc < 0) {
        return -1;
    }

    /* the names stay: they are the keys of the client's wish */

    dup = oip_keys_dup(&rq->m.c, rq->out_names, rq->nouts);

    if (dup >= 0) {
        k = &rq->out_names[dup];
        return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "output name \"%.*s\" "
                        "appears twice",
                        (int) oip_utf8_cut(k->data, k->len, OIP_NAME_MAX),
                        k->data);
    }

    return dup == -2 ? -1 : 0;
}


static const char *
oip_label(const oip_label_t *l, char *buf, size_t size)
{
    if (l->text) {
        return l->text;
    }

    if (l->named) {
        snprintf(buf, size, "output '%.*s'",
                 (int) oip_utf8_cut(l->name.data, l->name.len, OIP_NAME_MAX),
                 l->name.data);

    } else {
        snprintf(buf, size, "outputs[%zu]", l->index);
    }

    return buf;
}


/*
 * The request's parameters and an output's: strings, numbers and
 * booleans only; the flag, if there, a boolean.  Records where the
 * "parameters" member (key at key_start) and the flag are.
 */

static int
oip_parse_params(oip_req_t *rq, const char *flag, const oip_label_t *label,
    oip_flagged_t *f, oip_walk_t *outer)
{
    int          rc, is_flag;
    char         buf[96];
    size_t       flen;
    uint8_t      c;
    oip_json_t  *j;
    oip_walk_t   w;

    j = &rq->m.j;

    if (*j->p != '{') {
        return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s: 'parameters' "
                        "must be an object",
                        oip_label(label, buf, sizeof(buf)));
    }

    f->params_at = j->p;

    if (oip_walk_start(j, &w) != 0) {
        return -1;
    }

    flen = strlen(flag);

    while ((rc = oip_walk_next(j, &w)) == 1) {

        c = *j->p;

        if (c == '{' || c == '[' || c == 'n') {
            return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s: parameter "
                            "\"%.*s\" must be a string, number or boolean",
                            oip_label(label, buf, sizeof(buf)),
                            (int) oip_utf8_cut(w.key.data, w.key.len,
                                               OIP_NAME_MAX), w.key.data);
        }

        is_flag = oip_json_str_eq(&w.key, flag, flen);

        if (f == &rq->top
            && (oip_json_str_eq(&w.key, "priority", 8)
                || oip_json_str_eq(&w.key, "timeout", 7)))
        {
            if (oip_request_uint(rq, &w.key) != 0) {
                return -1;
            }

            continue;
        }

        if (f == &rq->top && w.key.len >= 11
            && memcmp(w.key.data, "sequence_", 9) == 0)
        {
            if (oip_request_sequence(rq, &w.key) != 0) {
                return -1;
            }

            continue;
        }

        if (is_flag) {
            if (c != 't' && c != 'f') {
                return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s: %s must "
                                "be a boolean",
                                oip_label(label, buf, sizeof(buf)), flag);
            }

            f->has_flag = 1;
            f->flag_true = (c == 't');
            f->flag_at = j->p;
        }

        if (oip_json_skip(j) != 0) {
            return -1;
        }

        if (is_flag) {
            oip_walk_note(&w, &f->flag, j->p);
        }
    }

    if (rc < 0) {
        return -1;
    }

    f->has_params = 1;
    f->params_n = w.o.n;
    f->params_close = j->p - 1;

    /* the "parameters" member itself, in the object it is a member of */
    oip_walk_note(outer, &f->params, j->p);

    return 0;
}


static oip_act_e
oip_request_act(oip_msg_t *m, oip_item_t *it)
{
    oip_req_t  *rq = m->data;

    if (m->opt->signature && m->opt->signature->ninputs) {

        switch (oip_request_fit(rq, it)) {

        case 0:
            break;

        case 1:
            /* re-typed to FP16 or BF16: no runtime reads them as JSON */
            return OIP_ACT_BINARY;

        default:
            return OIP_ACT_FAIL;
        }
    }

    switch (rq->m.opt->inputs) {

    case OIP_FORM_BINARY:
        return it->data_at ? OIP_ACT_BINARY : OIP_ACT_CHECK;

    case OIP_FORM_JSON:
        return it->has_bds ? OIP_ACT_JSON : OIP_ACT_CHECK;

    default:
        return OIP_ACT_CHECK;
    }
}


/*
 * An input against the model's signature: declared, of its datatype (or
 * re-typed to it), of its rank and fixed dimensions.  Returns 0; 1 when
 * it was re-typed to FP16 or BF16; -1 when it does not fit.
 */

static int
oip_request_fit(oip_req_t *rq, oip_item_t *it)
{
    int                      rc;
    char                     model[96], buf[160], want[96];
    size_t                   i, index, len;
    uint8_t                 *name;
    const int64_t           *dims;
    const oip_signature_t   *s;
    const oip_sig_tensor_t  *st;

    s = rq->m.opt->signature;

    name = (uint8_t *) it->name.data;
    len = it->name.len;

    if (it->name.escaped) {
        name = oip_alloc(&rq->m.c, len);
        if (name == NULL) {
            return -1;
        }

        len = oip_json_unescape(name, &it->name);
    }

    st = oip_sig_find(s, 0, name, len, &index);

    if (it->name.escaped) {
        oip_free(&rq->m.c, name);
    }

    rq->misfit = 1;

    if (st == NULL) {
        return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s has no input "
                        "'%.*s'; its inputs: %s",
                        oip_model(rq->m.opt, model, sizeof(model)),
                        (int) oip_utf8_cut(it->name.data, it->name.len,
                                           OIP_NAME_MAX), it->name.data,
                        oip_sig_names(s, 0, buf, sizeof(buf)));
    }

    if (rq->sig_seen == NULL) {
        rq->sig_seen = oip_alloc(&rq->m.c, s->ninputs);
        if (rq->sig_seen == NULL) {
            return -1;
        }

        memset(rq->sig_seen, 0, s->ninputs);
    }

    rq->sig_seen[index] = 1;
    rc = 0;

    if (st->dt != OIP_SIG_ANY_DT && st->dt != (int32_t) it->t.dt) {
        rc = oip_request_coerce(rq, it, st);

        if (rc < 0) {
            return -1;
        }

        if (rc == 0) {
            return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "input '%.*s' is "
                            "%s, %s expects %s",
                            (int) oip_utf8_cut(it->name.data,
                                               it->name.len,
                                               OIP_NAME_MAX), it->name.data,
                            oip_dtypes[it->t.dt].name,
                            oip_model(rq->m.opt, model, sizeof(model)),
                            oip_dtypes[st->dt].name);
        }

        rc = (st->dt == OIP_FP16 || st->dt == OIP_BF16);
    }

    if (st->rank != OIP_SIG_ANY_RANK) {
        dims = oip_sig_dims(s, st);

        for (i = 0; i < st->rank && i < it->t.rank; i++) {
            if (dims[i] >= 0 && (uint64_t) dims[i] != it->t.shape[i]) {
                break;
            }
        }

        if (st->rank != it->t.rank || i < st->rank) {
            return oip_fail(&rq->m.c, 400, OIP_REASON_SHAPE, "input '%.*s': "
                            "shape %s does not fit %s of %s",
                            (int) oip_utf8_cut(it->name.data, it->name.len,
                                               OIP_NAME_MAX), it->name.data,
                            oip_shape_str(&it->t, buf, sizeof(buf)),
                            oip_sig_shape_str(s, st, want, sizeof(want)),
                            oip_model(rq->m.opt, model, sizeof(model)));
        }
    }

    rq->misfit = 0;

    return rc;
}


/*
 * oip_signature_coerce: JSON numbers declared with another numeric
 * datatype take the model's, each value checked as it is read (range,
 * exactness).  Returns 1 re-typed, 0 not possible, -1 failure.
 */

static int
oip_request_coerce(oip_req_t *rq, oip_item_t *it, const oip_sig_tensor_t *st)
{
    oip_dtype_e  from, to;

    from = it->t.dt;
    to = (oip_dtype_e) st->dt;

    if (!rq->m.opt->coerce || it->data_at == NULL
        || from == OIP_BOOL || from == OIP_BYTES
        || to == OIP_BOOL || to == OIP_BYTES)
    {
        return 0;
    }

    if (oip_edit_text(&rq->m, it->dt_at, it->dt_end, oip_dtype_quoted[to])
        != 0)
    {
        return -1;
    }

    it->t.dt = to;
    it->t.exact = (from < OIP_FP16 && to >= OIP_FP16);
    rq->res->coerced = 1;

    return 1;
}


/* what the whole request must have: every input, declared outputs */

static int
oip_request_fit_all(oip_req_t *rq)
{
    char                     model[96], buf[160];
    size_t                   i, index;
    const oip_signature_t   *s;
    const oip_sig_tensor_t  *st;

    s = rq->m.opt->signature;
    st = oip_sig_tensors(s);

    for (i = 0; i < s->ninputs; i++) {

        if ((rq->sig_seen && rq->sig_seen[i])
            || oip_request_optional(rq, oip_sig_name(s, &st[i]),
                                    st[i].name_len))
        {
            continue;
        }

        rq->misfit = 1;

        return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s needs input "
                        "'%.*s', missing from the request",
                        oip_model(rq->m.opt, model, sizeof(model)),
                        (int) oip_utf8_cut(oip_sig_name(s, &st[i]),
                                           st[i].name_len, OIP_NAME_MAX),
                        oip_sig_name(s, &st[i]));
    }

    if (s->noutputs == 0) {
        return 0;
    }

    for (i = 0; i < rq->nouts; i++) {
        if (oip_sig_find(s, 1, rq->out_names[i].data, rq->out_names[i].len,
                         &index)
            == NULL)
        {
            rq->misfit = 1;

            return oip_fail(&rq->m.c, 400, OIP_REASON_OTHER, "%s has no output "
                            "'%.*s'; its outputs: %s",
                            oip_model(rq->m.opt, model, sizeof(model)),
                            (int) oip_utf8_cut(rq->out_names[i].data,
                                               rq->out_names[i].len,
                                               OIP_NAME_MAX),
                            rq->out_names[i].data,
                            oip_sig_names(s, 1, buf, sizeof(buf)));
        }
    }

    return 0;
}


/* oip_signature_optional: INPUT for any model, MODEL:INPUT for one */

static int
oip_request_optional(oip_req_t *rq, const uint8_t *name, size_t len)
{
    size_t                 i;
    const oip_options_t   *opt;
    const oip_optional_t  *o;

    opt = rq->m.opt;

    for (i = 0; i < opt->noptional; i++) {
        o = &opt->optional[i];

        if (o->input_len == len && memcmp(o->input, name, len) == 0
            && (o->model == NULL
                || (o->model_len == opt->model_len
                    && memcmp(o->model, opt->model, opt->model_len) == 0)))
        {
            return 1;
        }
    }

    return 0;
}


static const char *
oip_model(const oip_options_t *opt, char *buf, size_t size)
{
    if (opt->model == NULL) {
        return "the model";
    }

    snprintf(buf, size, "model '%.*s'",
             (int) oip_utf8_cut(opt->model, opt->model_len, OIP_NAME_MAX),
             opt->model);

    return buf;
}


/* the request's own edits, after the inputs', and the client's wish */

static int
oip_request_edits(oip_msg_t *m)
{
    oip_req_t  *rq = m->data;

    oip_request_priority(rq);

    /* the flags that ask a REST upstream for binary outputs, the
     * priority and the timeout's place */

    if ((m->target == NULL && oip_request_params_edits(rq) != 0)
        || oip_request_stats(rq, rq->res) != 0)
    {
        return -1;
    }

    if (m->opt->digest) {
        rq->res->digested = oip_request_digest(rq);

        if (m->c.status) {
            return -1;
        }
    }

    return oip_request_wish(rq, rq->res);
}


/* what the request held and in what form, for the operator's variables */

static int
oip_request_stats(oip_req_t *rq, oip_result_t *res)
{
    size_t         i;
    uint8_t       *id;
    oip_item_t    *it;
    oip_shape_e    in, up;

    res->ninputs = rq->m.nitems;
    res->tensor_bytes = rq->m.c.tensor_bytes;
    res->elements = 0;

    in = OIP_SHAPE_NONE;
    up = OIP_SHAPE_NONE;

    for (i = 0; i < rq->m.nitems; i++) {
        it = &rq->m.items[i];

        res->elements += it->t.count;

        if (it->data_at == NULL && !it->has_bds) {
            continue;
        }

        in = oip_shape_add(in, oip_item_in_form(it));
        up = oip_shape_add(up, oip_item_out_form(it));
    }

    res->in_form = rq->raw ? OIP_SHAPE_RAW : in;
    res->out_form = up;

    res->priority = rq->priority_out;
    res->timeout = rq->timeout;
    res->has_priority = rq->priority_given;
    res->has_timeout = rq->has_timeout;

    if (oip_request_sequence_result(rq, res) != 0) {
        return -1;
    }

    if (rq->id.data == NULL) {
        return 0;
    }

    if (!rq->id.escaped) {
        res->id = rq->id.data;
        res->id_len = rq->id.len;
        return 0;
    }

    id = oip_alloc(&rq->m.c, oip_json_unescaped_len(&rq->id));
    if (id == NULL) {
        return -1;
    }

    res->id_len = oip_json_unescape(id, &rq->id);
    res->id = id;

    return 0;
}


/* the client's own wish, by SPEC 2's rule, for the response path */

static int
oip_request_wish(oip_req_t *rq, oip_result_t *res)
{
    size_t  i;

    if (rq->raw) {
        res->wish.listed = 0;
        res->wish.binary = (rq->m.opt->raw_outputs != OIP_FORM_JSON);
        return 0;
    }

    res->wish.binary = rq->top.flag_true;

    if (rq->nouts == 0) {
        return 0;
    }

    res->wish.outputs = oip_alloc(&rq->m.c, rq->nouts * sizeof(oip_wish_out_t));
    if (res->wish.outputs == NULL) {
        return -1;
    }

    for (i = 0; i < rq->nouts; i++) {
        res->wish.outputs[i].name = rq->out_names[i].data;
        res->wish.outputs[i].len = rq->out_names[i].len;
        res->wish.outputs[i].binary = rq->outs[i].flag_true;
    }

    res->wish.n = rq->nouts;
    res->wish.listed = 1;

    return 0;
}


/* the known datatypes, for oip_raw_input */

int
oip_raw_input_init(oip_raw_input_t *raw, const uint8_t *name, size_t name_len,
    const uint8_t *dt, size_t dt_len, const uint8_t *dims, size_t dims_len,
    char *err, size_t err_len)
{
    int            neg;
    size_t         i;
    int64_t        v;
    const uint8_t *p, *end;

    memset(raw, 0, sizeof(oip_raw_input_t));

    if (name_len == 0 || name_len >= OIP_RAW_NAME
        || !oip_utf8_valid(name, name_len))
    {
        snprintf(err, err_len, "the input name must be 1 to %d bytes of "
                 "UTF-8", OIP_RAW_NAME - 1);
        return -1;
    }

    memcpy(raw->name, name, name_len);

    raw->dt = oip_dtype_find(dt, dt_len);

    if (raw->dt == OIP_DT_NONE) {
        snprintf(err, err_len, "unknown datatype \"%.*s\"",
                 (int) oip_min(dt_len, 32), dt);
        return -1;
    }

    if (dims_len == 0 || dims_len >= sizeof(raw->text)) {
        goto invalid;
    }

    memcpy(raw->text + 1, dims, dims_len);
    raw->text[0] = '[';
    raw->text[dims_len + 1] = ']';

    raw->deduced = -1;
    p = dims;
    end = dims + dims_len;

    for (i = 0; p < end; i++) {

        if (i == OIP_RAW_RANK) {
            snprintf(err, err_len, "at most %d dimensions", OIP_RAW_RANK);
            return -1;
        }

        neg = (*p == '-');
        p += neg;

        if (p == end || *p < '0' || *p > '9'
            || (*p == '0' && !neg && p + 1 < end && p[1] != ','))
        {
            goto invalid;
        }

        for (v = 0; p < end && *p >= '0' && *p <= '9'; p++) {
            if (v > (INT64_MAX - (*p - '0')) / 10) {
                goto invalid;
            }

            v = v * 10 + (*p - '0');
        }

        if (neg) {
            if (v != 1 || raw->deduced >= 0) {
                snprintf(err, err_len, "one dimension at most may be -1, "
                         "the others 1 or more");
                return -1;
            }

            raw->deduced = (int) i;
            v = -1;

        } else if (v == 0) {
            snprintf(err, err_len, "a dimension must be 1 or more, or -1");
            return -1;
        }

        raw->dims[i] = v;

        if (p < end) {
            if (*p != ',' || p + 1 == end) {
                goto invalid;
            }

            p++;
        }
    }

    raw->rank = i;

    if (raw->dt == OIP_BYTES && (raw->rank != 1 || raw->dims[0] != 1)) {
        snprintf(err, err_len, "a BYTES input is one element: its "
                 "dimensions must be \"1\"");
        return -1;
    }

    return 0;

invalid:

    snprintf(err, err_len, "dimensions must be integers separated by "
             "commas, as in \"-1,3\"");
    return -1;
}
