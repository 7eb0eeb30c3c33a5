
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Inference requests: every rule of the protocol checked, input tensors
 * converted to the form the upstream wants, binary_data and
 * binary_data_output set as it should be asked, and the client's own
 * wish for each output kept for the response.  A raw binary request is
 * first given the header its declared input implies.
 */


#include <stdio.h>

#include "oip_internal.h"


/* an object that may carry a boolean flag in its "parameters" */

typedef struct {
    const u_char          *close;       /* the object's '}' */
    oip_member_t           params;
    const u_char          *params_close;
    size_t                 params_n;
    oip_member_t           flag;
    const u_char          *flag_at;     /* the flag's value */
    unsigned               has_params:1;
    unsigned               has_flag:1;
    unsigned               flag_true:1;
} oip_flagged_t;


typedef struct {
    oip_ctx_t              c;
    oip_msg_t              m;
    const oip_options_t   *opt;

    oip_flagged_t          top;
    oip_flagged_t         *outs;
    oip_key_t             *out_names;
    size_t                 nouts;
    size_t                 outs_cap;

    unsigned               outputs_seen:1;
    unsigned               raw:1;
} oip_req_t;


static int oip_request_raw(oip_req_t *rq, const u_char *body, size_t len);
static int oip_request_parse(oip_req_t *rq);
static int oip_parse_outputs(oip_req_t *rq);
static int oip_parse_params(oip_req_t *rq, const char *flag,
    const char *label, oip_flagged_t *f, const u_char *key_start,
    const u_char *prev_end);
static oip_act_e oip_request_act(oip_msg_t *m, oip_item_t *it);
static int oip_outputs_edits(oip_req_t *rq);
static int oip_flag_set(oip_msg_t *m, oip_flagged_t *f, const char *add,
    const char *insert, const char *create);
static int oip_flag_remove(oip_msg_t *m, oip_flagged_t *f);
static int oip_request_wish(oip_req_t *rq, oip_request_t *req);


int
oip_request_process(oip_request_t *req, const oip_alloc_t *a,
    const oip_options_t *opt, const u_char *body, size_t len, off_t ihcl,
    oip_encoding_e enc)
{
    int         binary;
    size_t      hlen;
    u_char     *plain;
    oip_req_t   rq;

    memset(req, 0, sizeof(oip_request_t));
    memset(&rq, 0, sizeof(oip_req_t));

    rq.c.alloc = a;
    rq.c.error = req->error;
    rq.c.max_tensor_size = opt->max_tensor_size;
    rq.opt = opt;

    if (enc != OIP_ENC_NONE) {
        /* IHCL and the limits count the bytes after decompression */

        if (oip_inflate(&rq.c, body, len, opt->max_json_size
                                          + opt->max_tensor_size,
                        &plain, &len) != 0)
        {
            return req->status = rq.c.status;
        }

        body = plain;
        req->decompressed = 1;
    }

    if (ihcl == 0) {
        req->raw = 1;

        if (opt->raw == NULL) {
            if (opt->inputs != OIP_FORM_KEEP) {
                oip_fail(&rq.c, 400, "a raw binary request "
                         "(Inference-Header-Content-Length: 0) needs "
                         "oip_raw_input here");

            } else if (req->decompressed) {
                /* only the encoding goes: Triton serves raw itself */
                req->rewritten = 1;
                req->segs = oip_alloc(&rq.c, sizeof(oip_seg_t));

                if (req->segs) {
                    req->segs->data = body;
                    req->segs->len = len;
                    req->nsegs = 1;
                    req->body_len = len;
                    req->binary = 1;
                }
            }

            return req->status = rq.c.status;
        }

        if (oip_request_raw(&rq, body, len) != 0) {
            return req->status = rq.c.status;
        }

    } else {
        if (ihcl > 0 && (uint64_t) ihcl > len) {
            oip_fail(&rq.c, 400, "Inference-Header-Content-Length %lld "
                     "exceeds the body length %zu", (long long) ihcl, len);
            return req->status = rq.c.status;
        }

        if (len == 0) {
            oip_fail(&rq.c, 400, "the request body is empty");
            return req->status = rq.c.status;
        }

        hlen = (ihcl > 0) ? (size_t) ihcl : len;

        if (hlen > opt->max_json_size) {
            oip_fail(&rq.c, 413, "the JSON of %zu bytes exceeds "
                     "oip_max_json_size (%zu)", hlen, opt->max_json_size);
            return req->status = rq.c.status;
        }

        oip_msg_init(&rq.m, &rq.c, body, hlen, body + hlen, len - hlen,
                     opt->max_depth);
        rq.m.has_ihcl = (ihcl > 0);
    }

    rq.m.what = "input";
    rq.m.nonempty = 1;
    rq.m.act = oip_request_act;
    rq.m.data = &rq;

    if (oip_request_parse(&rq) != 0) {
        oip_msg_syntax_first(&rq.m);
        goto failed;
    }

    if (oip_msg_layout(&rq.m) != 0
        || oip_msg_edits(&rq.m) != 0
        || oip_outputs_edits(&rq) != 0
        || oip_request_wish(&rq, req) != 0)
    {
        goto failed;
    }

    req->manage = (opt->outputs != OIP_FORM_KEEP || rq.m.nedits > 0
                   || rq.raw || req->decompressed);

    if (rq.m.nedits == 0 && !rq.raw && !req->decompressed
        && !(opt->inputs == OIP_FORM_JSON && rq.m.has_ihcl))
    {
        /* valid, and nothing to change */
        req->binary = rq.m.has_ihcl;
        req->header_len = rq.m.jlen;
        req->body_len = len;
        goto done;
    }

    if (oip_msg_build(&rq.m, opt->max_json_size, &req->segs, &req->nsegs,
                      &req->header_len, &req->body_len, &binary)
        != 0)
    {
        goto failed;
    }

    if (req->header_len > opt->max_json_size) {
        oip_fail(&rq.c, 413, "the request as JSON would be %zu bytes, over "
                 "oip_max_json_size (%zu)", req->header_len,
                 opt->max_json_size);
        goto failed;
    }

    req->rewritten = 1;
    req->binary = binary;

done:

    oip_msg_done(&rq.m);

    return req->status = rq.c.status;

failed:

    if (rq.c.status == 0) {
        /* a failure must never pass for success */
        oip_fail(&rq.c, 500, "internal error in the request codec");
    }

    oip_msg_done(&rq.m);

    return req->status = rq.c.status;
}


/*
 * IHCL 0: the body is the bytes of the one declared input.  A header is
 * made for it; the bytes stay where they are (BYTES gets its length).
 */

static int
oip_request_raw(oip_req_t *rq, const u_char *body, size_t len)
{
    size_t                   i, size, hlen;
    u_char                  *h, *p, *b;
    uint64_t                 known, dims[OIP_RAW_RANK];
    const oip_raw_input_t   *raw;

    raw = rq->opt->raw;
    rq->raw = 1;
    size = oip_dtypes[raw->dt].size;

    if (raw->dt == OIP_BYTES) {
        if (len > UINT32_MAX) {
            return oip_fail(&rq->c, 400, "a raw BYTES input is limited to "
                            "4 GB");
        }

        b = oip_alloc(&rq->c, len + 4);
        if (b == NULL) {
            return -1;
        }

        b[0] = (u_char) len;
        b[1] = (u_char) (len >> 8);
        b[2] = (u_char) (len >> 16);
        b[3] = (u_char) (len >> 24);
        memcpy(b + 4, body, len);

        body = b;
        len += 4;
        dims[0] = 1;

    } else {
        known = 1;

        for (i = 0; i < raw->rank; i++) {
            if (raw->dims[i] >= 0) {
                known *= (uint64_t) raw->dims[i];
            }
        }

        if (raw->deduced < 0 && known * size != len) {
            return oip_fail(&rq->c, 400, "raw input '%s': %zu bytes, but "
                            "shape %s of %s needs %llu", raw->name, len,
                            raw->text, oip_dtypes[raw->dt].name,
                            (unsigned long long) (known * size));
        }

        if (len % (known * size)) {
            return oip_fail(&rq->c, 400, "raw input '%s': %zu bytes are not "
                            "a whole number of %s elements of shape %s",
                            raw->name, len, oip_dtypes[raw->dt].name,
                            raw->text);
        }

        for (i = 0; i < raw->rank; i++) {
            dims[i] = raw->dims[i] >= 0 ? (uint64_t) raw->dims[i]
                                        : len / (known * size);
        }
    }

    hlen = sizeof("{\"inputs\":[{\"name\":\"\",\"shape\":[],\"datatype\":\"\","
                  "\"parameters\":{\"binary_data_size\":}}]}")
           + oip_json_escape(NULL, (const u_char *) raw->name,
                             strlen(raw->name))
           + raw->rank * 21 + 8 + 20;

    h = oip_alloc(&rq->c, hlen);
    if (h == NULL) {
        return -1;
    }

    p = (u_char *) memcpy(h, "{\"inputs\":[{\"name\":\"", 20) + 20;
    p += oip_json_escape(p, (const u_char *) raw->name, strlen(raw->name));
    p = (u_char *) memcpy(p, "\",\"shape\":[", 11) + 11;

    for (i = 0; i < (raw->dt == OIP_BYTES ? 1 : raw->rank); i++) {
        if (i) {
            *p++ = ',';
        }

        p = oip_print_u64(p, dims[i]);
    }

    p += sprintf((char *) p, "],\"datatype\":\"%s\",\"parameters\":"
                 "{\"binary_data_size\":", oip_dtypes[raw->dt].name);
    p = oip_print_u64(p, len);
    p = (u_char *) memcpy(p, "}}]}", 4) + 4;

    oip_msg_init(&rq->m, &rq->c, h, p - h, body, len, rq->opt->max_depth);
    rq->m.has_ihcl = 1;

    return 0;
}


static int
oip_request_parse(oip_req_t *rq)
{
    int            rc;
    oip_obj_t      o;
    oip_str_t      key;
    oip_json_t    *j;
    const u_char  *key_start, *prev_end;

    j = &rq->m.j;

    oip_json_ws(j);

    if (j->p == j->end) {
        return oip_fail(&rq->c, 400, "the request holds no JSON");
    }

    if (*j->p != '{') {
        return oip_fail(&rq->c, 400, "the request must be a JSON object");
    }

    if (oip_json_object(j, &o) != 0) {
        return -1;
    }

    prev_end = NULL;

    while ((rc = oip_json_member(j, &o, &key, &key_start)) == 1) {

        if (rq->top.has_params && rq->top.params.next_key == NULL
            && rq->top.params.value_end == prev_end)
        {
            rq->top.params.next_key = key_start;
        }

        if (oip_json_str_eq(&key, "inputs", 6)) {
            rc = oip_msg_tensors(&rq->m);

        } else if (oip_json_str_eq(&key, "outputs", 7)) {
            rc = oip_parse_outputs(rq);

        } else if (oip_json_str_eq(&key, "parameters", 10)) {
            rc = oip_parse_params(rq, "binary_data_output", "the request",
                                  &rq->top, key_start, prev_end);

        } else {
            rc = oip_json_skip(j);
        }

        if (rc != 0) {
            return -1;
        }

        prev_end = j->p;
    }

    if (rc < 0) {
        return -1;
    }

    rq->top.close = j->p - 1;

    oip_json_ws(j);

    if (j->p != j->end) {
        return oip_fail(&rq->c, 400, "unexpected bytes after the JSON object "
                        "at byte %zu%s", (size_t) (j->p - j->start),
                        rq->m.has_ihcl ? "" : " (binary data needs an "
                        "Inference-Header-Content-Length header)");
    }

    if (!rq->m.seen) {
        return oip_fail(&rq->c, 400, "'inputs' is missing");
    }

    return 0;
}


static int
oip_parse_outputs(oip_req_t *rq)
{
    int             rc, named;
    char            label[96];
    size_t          cap;
    ssize_t         dup;
    oip_arr_t       a;
    oip_obj_t       o;
    oip_str_t       key, name;
    oip_key_t      *names, *k;
    oip_json_t     *j;
    oip_flagged_t  *f, *outs;
    const u_char   *key_start, *prev_end;

    j = &rq->m.j;

    if (*j->p != '[') {
        return oip_fail(&rq->c, 400, "'outputs' must be an array");
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    rq->nouts = 0;
    rq->outputs_seen = 1;

    while ((rc = oip_json_element(j, &a)) == 1) {

        if (*j->p != '{') {
            return oip_fail(&rq->c, 400, "outputs[%zu] must be an object",
                            a.n - 1);
        }

        if (rq->nouts == OIP_MAX_TENSORS) {
            return oip_fail(&rq->c, 413, "more than %d outputs",
                            OIP_MAX_TENSORS);
        }

        if (rq->nouts == rq->outs_cap) {
            cap = rq->outs_cap ? rq->outs_cap * 2 : 8;

            outs = oip_alloc(&rq->c, cap * sizeof(oip_flagged_t));
            names = oip_alloc(&rq->c, cap * sizeof(oip_key_t));

            if (outs == NULL || names == NULL) {
                return -1;
            }

            if (rq->nouts) {
                memcpy(outs, rq->outs, rq->nouts * sizeof(oip_flagged_t));
                memcpy(names, rq->out_names, rq->nouts * sizeof(oip_key_t));
            }

            oip_free(&rq->c, rq->outs);
            oip_free(&rq->c, rq->out_names);

            rq->outs = outs;
            rq->out_names = names;
            rq->outs_cap = cap;
        }

        f = &rq->outs[rq->nouts];
        memset(f, 0, sizeof(oip_flagged_t));

        if (oip_json_object(j, &o) != 0) {
            return -1;
        }

        named = 0;
        prev_end = NULL;
        snprintf(label, sizeof(label), "outputs[%zu]", a.n - 1);

        while ((rc = oip_json_member(j, &o, &key, &key_start)) == 1) {

            if (f->has_params && f->params.next_key == NULL
                && f->params.value_end == prev_end)
            {
                f->params.next_key = key_start;
            }

            if (oip_json_str_eq(&key, "name", 4)) {
                if (*j->p != '"') {
                    return oip_fail(&rq->c, 400, "%s: 'name' must be a "
                                    "string", label);
                }

                if (oip_json_string(j, &name) != 0) {
                    return -1;
                }

                if (name.len == 0) {
                    return oip_fail(&rq->c, 400, "%s: 'name' must not be "
                                    "empty", label);
                }

                if (oip_name_controls(&name)) {
                    return oip_fail(&rq->c, 400, "%s: 'name' must not hold "
                                    "control characters", label);
                }

                if (oip_key_make(&rq->c, &name, &rq->out_names[rq->nouts])
                    != 0)
                {
                    return -1;
                }

                named = 1;
                snprintf(label, sizeof(label), "output '%.*s'",
                         (int) oip_cut(name.data, name.len, OIP_NAME_MAX),
                         name.data);

            } else if (oip_json_str_eq(&key, "parameters", 10)) {
                rc = oip_parse_params(rq, "binary_data", label, f,
                                      key_start, prev_end);

            } else {
                rc = oip_json_skip(j);
            }

            if (rc < 0) {
                return -1;
            }

            prev_end = j->p;
        }

        if (rc < 0) {
            return -1;
        }

        if (!named) {
            return oip_fail(&rq->c, 400, "%s: 'name' is missing", label);
        }

        f->close = j->p - 1;
        rq->nouts++;
    }

    if (rc < 0) {
        return -1;
    }

    /* the names stay: they are the keys of the client's wish */

    dup = oip_keys_dup(&rq->c, rq->out_names, rq->nouts);

    if (dup >= 0) {
        k = &rq->out_names[dup];
        return oip_fail(&rq->c, 400, "output name \"%.*s\" appears twice",
                        (int) oip_cut(k->data, k->len, OIP_NAME_MAX),
                        k->data);
    }

    return dup == -2 ? -1 : 0;
}


/*
 * The request's parameters and an output's: strings, numbers and
 * booleans only; the flag, if there, a boolean.  Records where the
 * "parameters" member (key at key_start) and the flag are.
 */

static int
oip_parse_params(oip_req_t *rq, const char *flag, const char *label,
    oip_flagged_t *f, const u_char *key_start, const u_char *prev_end)
{
    int            rc, is_flag;
    size_t         flen;
    u_char         c;
    oip_obj_t      o;
    oip_str_t      key;
    oip_json_t    *j;
    oip_member_t  *pending;
    const u_char  *start, *prev;

    j = &rq->m.j;

    if (*j->p != '{') {
        return oip_fail(&rq->c, 400, "%s: 'parameters' must be an object",
                        label);
    }

    if (oip_json_object(j, &o) != 0) {
        return -1;
    }

    flen = strlen(flag);
    pending = NULL;
    prev = NULL;

    while ((rc = oip_json_member(j, &o, &key, &start)) == 1) {

        if (pending) {
            pending->next_key = start;
            pending = NULL;
        }

        c = *j->p;

        if (c == '{' || c == '[' || c == 'n') {
            return oip_fail(&rq->c, 400, "%s: parameter \"%.*s\" must be a "
                            "string, number or boolean", label,
                            (int) oip_cut(key.data, key.len, OIP_NAME_MAX),
                            key.data);
        }

        is_flag = oip_json_str_eq(&key, flag, flen);

        if (is_flag) {
            if (c != 't' && c != 'f') {
                return oip_fail(&rq->c, 400, "%s: %s must be a boolean",
                                label, flag);
            }

            f->has_flag = 1;
            f->flag_true = (c == 't');
            f->flag_at = j->p;
        }

        if (oip_json_skip(j) != 0) {
            return -1;
        }

        if (is_flag) {
            oip_member_set(&f->flag, start, j->p, prev);
            pending = &f->flag;
        }

        prev = j->p;
    }

    if (rc < 0) {
        return -1;
    }

    f->has_params = 1;
    f->params_n = o.n;
    f->params_close = j->p - 1;
    oip_member_set(&f->params, key_start, j->p, prev_end);

    return 0;
}


static oip_act_e
oip_request_act(oip_msg_t *m, oip_item_t *it)
{
    oip_req_t  *rq = m->data;

    switch (rq->opt->inputs) {

    case OIP_FORM_BINARY:
        return it->data_at ? OIP_ACT_BINARY : OIP_ACT_CHECK;

    case OIP_FORM_JSON:
        return it->has_bds ? OIP_ACT_JSON : OIP_ACT_CHECK;

    default:
        return OIP_ACT_CHECK;
    }
}


/* ask the upstream for the outputs in the form oip_upstream_outputs says */

static int
oip_outputs_edits(oip_req_t *rq)
{
    size_t  i;

    switch (rq->opt->outputs) {

    case OIP_FORM_BINARY:
        if (rq->nouts) {
            for (i = 0; i < rq->nouts; i++) {
                if (oip_flag_set(&rq->m, &rq->outs[i], ",\"binary_data\":true",
                                 "\"binary_data\":true",
                                 ",\"parameters\":{\"binary_data\":true}")
                    != 0)
                {
                    return -1;
                }
            }

            return 0;
        }

        return oip_flag_set(&rq->m, &rq->top, ",\"binary_data_output\":true",
                            "\"binary_data_output\":true",
                            ",\"parameters\":{\"binary_data_output\":true}");

    case OIP_FORM_JSON:
        for (i = 0; i < rq->nouts; i++) {
            if (oip_flag_remove(&rq->m, &rq->outs[i]) != 0) {
                return -1;
            }
        }

        return oip_flag_remove(&rq->m, &rq->top);

    default:
        return 0;
    }
}


static int
oip_flag_set(oip_msg_t *m, oip_flagged_t *f, const char *add,
    const char *insert, const char *create)
{
    if (f->has_flag) {
        if (f->flag_true) {
            return 0;
        }

        return oip_edit_text(m, f->flag_at, f->flag.value_end, "true");
    }

    if (f->has_params) {
        return oip_edit_text(m, f->params_close, f->params_close,
                             f->params_n ? add : insert);
    }

    /* every object here has a member already: a comma is right */

    return oip_edit_text(m, f->close, f->close, create);
}


static int
oip_flag_remove(oip_msg_t *m, oip_flagged_t *f)
{
    if (!f->has_flag) {
        return 0;
    }

    /* "parameters" holding only the flag goes with it */

    return oip_edit_delete(m, f->params_n > 1 ? &f->flag : &f->params);
}


/* the client's own wish, by SPEC 2's rule, for the response path */

static int
oip_request_wish(oip_req_t *rq, oip_request_t *req)
{
    size_t  i;

    if (rq->raw) {
        req->wish.listed = 0;
        req->wish.binary = (rq->opt->raw_outputs != OIP_FORM_JSON);
        return 0;
    }

    req->wish.binary = rq->top.flag_true;

    if (rq->nouts == 0) {
        return 0;
    }

    req->wish.outputs = oip_alloc(&rq->c, rq->nouts * sizeof(oip_wish_out_t));
    if (req->wish.outputs == NULL) {
        return -1;
    }

    for (i = 0; i < rq->nouts; i++) {
        req->wish.outputs[i].name = rq->out_names[i].data;
        req->wish.outputs[i].len = rq->out_names[i].len;
        req->wish.outputs[i].binary = rq->outs[i].flag_true;
    }

    req->wish.n = rq->nouts;
    req->wish.listed = 1;

    return 0;
}
