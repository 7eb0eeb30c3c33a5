
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Inference responses: each output given to the client in the form it
 * asked for (SPEC 2's rule, kept from its request), whatever the upstream
 * did.  Outputs already in that form stay byte for byte; an answer that
 * cannot be parsed is the upstream's fault: 502.
 */


#include <stdio.h>

#include "oip_internal.h"


typedef struct {
    oip_ctx_t              c;
    oip_msg_t              m;
    const oip_wish_t      *wish;
    uint32_t              *table;      /* wish lookup, when it is long */
    size_t                 mask;
} oip_resp_t;


static int oip_response_parse(oip_resp_t *rs);
static oip_act_e oip_response_act(oip_msg_t *m, oip_item_t *it);
static int oip_wish_binary(oip_resp_t *rs, const oip_key_t *k);
static int oip_wish_index(oip_resp_t *rs);


#define OIP_WISH_LINEAR      16


int
oip_response_process(oip_response_t *resp, const oip_alloc_t *a,
    const oip_options_t *opt, const oip_wish_t *wish, const u_char *body,
    size_t len, off_t ihcl)
{
    int          binary;
    char         msg[OIP_ERROR_LEN];
    size_t       hlen;
    oip_resp_t   rs;

    memset(resp, 0, sizeof(oip_response_t));
    memset(&rs, 0, sizeof(oip_resp_t));

    rs.c.alloc = a;
    rs.c.error = resp->error;
    rs.c.max_tensor_size = opt->max_tensor_size;
    rs.wish = wish;

    if (ihcl > 0 && (uint64_t) ihcl > len) {
        oip_fail(&rs.c, 400, "Inference-Header-Content-Length %lld exceeds "
                 "the body length %zu", (long long) ihcl, len);
        goto failed;
    }

    if (ihcl == 0) {
        oip_fail(&rs.c, 400, "Inference-Header-Content-Length is 0");
        goto failed;
    }

    hlen = (ihcl > 0) ? (size_t) ihcl : len;

    if (hlen > opt->max_json_size) {
        oip_fail(&rs.c, 400, "the JSON of %zu bytes exceeds "
                 "oip_max_json_size (%zu)", hlen, opt->max_json_size);
        goto failed;
    }

    oip_msg_init(&rs.m, &rs.c, body, hlen, body + hlen, len - hlen,
                 opt->max_depth);

    rs.m.has_ihcl = (ihcl > 0);
    rs.m.what = "output";
    rs.m.bytes_stay = 1;
    rs.m.act = oip_response_act;
    rs.m.data = &rs;

    if (oip_wish_index(&rs) != 0) {
        goto failed;
    }

    if (oip_response_parse(&rs) != 0) {
        oip_msg_syntax_first(&rs.m);
        goto failed;
    }

    if (oip_msg_layout(&rs.m) != 0 || oip_msg_edits(&rs.m) != 0) {
        goto failed;
    }

    if (rs.m.nedits == 0) {
        /* every output is in the form asked for already */
        resp->binary = rs.m.has_ihcl;
        resp->header_len = hlen;
        resp->body_len = len;
        goto done;
    }

    if (oip_msg_build(&rs.m, opt->max_json_size, &resp->segs, &resp->nsegs,
                      &resp->header_len, &resp->body_len, &binary)
        != 0)
    {
        goto failed;
    }

    if (resp->header_len > opt->max_json_size) {
        oip_fail(&rs.c, 413, "as JSON it would exceed oip_max_json_size "
                 "(%zu bytes)", opt->max_json_size);
        goto failed;
    }

    resp->rewritten = 1;
    resp->binary = binary;

done:

    oip_msg_done(&rs.m);
    oip_free(&rs.c, rs.table);

    return resp->status = 0;

failed:

    oip_msg_done(&rs.m);
    oip_free(&rs.c, rs.table);

    if (rs.c.status == 500) {
        return resp->status = 500;
    }

    /* whatever the check, a bad answer is the upstream's fault */

    if (rs.c.status == 0) {
        snprintf(msg, sizeof(msg), "internal error in the response codec");
    } else {
        memcpy(msg, resp->error, OIP_ERROR_LEN);
    }

    snprintf(resp->error, OIP_ERROR_LEN, "upstream answer: %.*s",
             OIP_ERROR_LEN - 20, msg);

    return resp->status = 502;
}


static int
oip_response_parse(oip_resp_t *rs)
{
    int          rc;
    oip_obj_t    o;
    oip_str_t    key;
    oip_json_t  *j;

    j = &rs->m.j;

    oip_json_ws(j);

    if (j->p == j->end || *j->p != '{') {
        return oip_fail(&rs->c, 400, "not a JSON object");
    }

    if (oip_json_object(j, &o) != 0) {
        return -1;
    }

    while ((rc = oip_json_member(j, &o, &key, NULL)) == 1) {

        if (oip_json_str_eq(&key, "outputs", 7)) {
            rc = oip_msg_tensors(&rs->m);

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
        return oip_fail(&rs->c, 400, "unexpected bytes after the JSON object "
                        "at byte %zu", (size_t) (j->p - j->start));
    }

    return 0;
}


static oip_act_e
oip_response_act(oip_msg_t *m, oip_item_t *it)
{
    int         binary;
    oip_key_t   k;
    oip_resp_t *rs = m->data;

    if (oip_key_make(m->c, &it->name, &k) != 0) {
        return OIP_ACT_PASS;
    }

    binary = oip_wish_binary(rs, &k);

    if (k.owned) {
        oip_free(m->c, (void *) k.data);
    }

    if (it->data_at) {
        return binary ? OIP_ACT_BINARY : OIP_ACT_PASS;
    }

    return binary ? OIP_ACT_PASS : OIP_ACT_JSON;
}


/* SPEC 2: listed outputs by their own binary_data, others by default */

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

        return rs->wish->binary;
    }

    for (i = k->hash & rs->mask; (slot = rs->table[i]) != 0;
         i = (i + 1) & rs->mask)
    {
        w = &rs->wish->outputs[slot - 1];

        if (w->len == k->len && memcmp(w->name, k->data, k->len) == 0) {
            return w->binary;
        }
    }

    return rs->wish->binary;
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

    rs->table = oip_alloc(&rs->c, size * sizeof(uint32_t));
    if (rs->table == NULL) {
        return -1;
    }

    memset(rs->table, 0, size * sizeof(uint32_t));
    rs->mask = size - 1;

    for (i = 0; i < rs->wish->n; i++) {
        s.data = rs->wish->outputs[i].name;
        s.len = rs->wish->outputs[i].len;
        s.escaped = 0;

        (void) oip_key_make(&rs->c, &s, &k);

        for (m = k.hash & rs->mask; rs->table[m]; m = (m + 1) & rs->mask) {
            /* void */
        }

        rs->table[m] = (uint32_t) (i + 1);
    }

    return 0;
}
