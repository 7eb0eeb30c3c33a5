
/*
 * Copyright (C) ngx_oip_module authors
 *
 * A request's own parameters, those the gateway reads and those it
 * sets: the request-level "priority" and "timeout", read as Triton
 * reads them; the effective priority (oip_priority, oip_admit's levels)
 * written where it differs from the client's; a place of fixed width
 * for the remaining timeout, which the glue fills in when the request
 * leaves, after its wait; the flags that ask a REST upstream for the
 * outputs' form.
 */


#include "oip_request.h"
#include "oip_number.h"


static int oip_top_edits(oip_req_t *rq, int add_flag, int remove_flag);
static int oip_flag_set(oip_msg_t *m, oip_flagged_t *f, const char *add,
    const char *insert, const char *create);
static int oip_flag_remove(oip_msg_t *m, oip_flagged_t *f);


/*
 * A request-level "priority" or "timeout": an unsigned integer, as
 * Triton reads them (MemberAsUInt: a fraction, a sign, a string are
 * its 500), below 2^63, which gRPC's int64_param carries.  A precise
 * 400 here; the value kept for the glue.
 */

int
oip_request_uint(oip_req_t *rq, const oip_str_t *key)
{
    int             timeout;
    uint64_t        v;
    oip_json_t     *j;
    const uint8_t  *p, *start, *end;

    j = &rq->m.j;
    timeout = (key->len == 7);
    start = j->p;

    if (oip_json_skip(j) != 0) {
        return -1;
    }

    v = 0;

    for (p = start; p < j->p && *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_C(0x7fffffffffffffff) - (uint64_t) (*p - '0')) / 10) {
            break;
        }

        v = v * 10 + (uint64_t) (*p - '0');
    }

    end = p;

    while (p < j->p && oip_json_ws_map[*p]) {
        p++;
    }

    if (p == start || p != j->p) {
        return oip_fail(&rq->m.c, 400, OIP_REASON_DATATYPE, "the request: "
                        "parameter \"%s\" must be an integer from 0 to "
                        "9223372036854775807 (%s), not %.*s",
                        timeout ? "timeout" : "priority",
                        timeout ? "microseconds, 0: none"
                                : "1 the highest level, 0 the default",
                        (int) oip_utf8_cut(start, j->p - start, 32), start);
    }

    /* the digits, where the value the gateway sets is written */

    if (timeout) {
        rq->timeout = v;
        rq->has_timeout = 1;
        rq->timeout_at = start;
        rq->timeout_end = end;

    } else {
        rq->priority = v;
        rq->has_priority = 1;
        rq->priority_at = start;
        rq->priority_end = end;
    }

    return 0;
}


/*
 * A request-level parameter of Triton's sequence batcher, as its HTTP
 * front reads them: "sequence_id" an unsigned 64-bit integer or a
 * string (0 and "" are none), "sequence_start" and "sequence_end"
 * booleans.  A precise 400 for anything else.
 */

int
oip_request_sequence(oip_req_t *rq, const oip_str_t *key)
{
    uint64_t        v;
    oip_json_t     *j;
    const uint8_t  *p, *start;

    j = &rq->m.j;
    start = j->p;

    if (oip_json_str_eq(key, "sequence_start", 14)
        || oip_json_str_eq(key, "sequence_end", 12))
    {
        if (*start != 't' && *start != 'f') {
            if (oip_json_skip(j) != 0) {
                return -1;
            }

            return oip_fail(&rq->m.c, 400, OIP_REASON_DATATYPE, "the "
                            "request: parameter \"%.*s\" must be a "
                            "boolean, not %.*s", (int) key->len, key->data,
                            (int) oip_utf8_cut(start, j->p - start, 32),
                            start);
        }

        if (key->len == 14) {
            rq->sequence_start = (*start == 't');

        } else {
            rq->sequence_end = (*start == 't');
        }

        return oip_json_skip(j);
    }

    if (!oip_json_str_eq(key, "sequence_id", 11)) {
        /* another parameter of that name: the runtime's */
        return oip_json_skip(j);
    }

    if (*start == '"') {
        if (oip_json_string(j, &rq->sequence_str) != 0) {
            return -1;
        }

        rq->sequence_string = 1;
        rq->sequence_id = 0;

        return 0;
    }

    if (oip_json_skip(j) != 0) {
        return -1;
    }

    v = 0;

    for (p = start; p < j->p && *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - (uint64_t) (*p - '0')) / 10) {
            break;
        }

        v = v * 10 + (uint64_t) (*p - '0');
    }

    while (p < j->p && oip_json_ws_map[*p]) {
        p++;
    }

    if (p == start || p != j->p) {
        return oip_fail(&rq->m.c, 400, OIP_REASON_DATATYPE, "the request: "
                        "parameter \"sequence_id\" must be an integer from "
                        "0 to 18446744073709551615 or a string (0 and \"\" "
                        "mean none), not %.*s",
                        (int) oip_utf8_cut(start, j->p - start, 32), start);
    }

    rq->sequence_id = v;
    rq->sequence_string = 0;

    return 0;
}


/* the sequence, for the glue: a string id unescaped */

int
oip_request_sequence_result(oip_req_t *rq, oip_result_t *res)
{
    uint8_t  *s;

    res->sequence_start = rq->sequence_start;
    res->sequence_end = rq->sequence_end;

    if (!rq->sequence_string) {
        res->sequence_id = rq->sequence_id;
        res->has_sequence = (rq->sequence_id != 0);
        return 0;
    }

    if (rq->sequence_str.len == 0) {
        return 0;
    }

    res->has_sequence = 1;

    if (!rq->sequence_str.escaped) {
        res->sequence_str = rq->sequence_str.data;
        res->sequence_str_len = rq->sequence_str.len;
        return 0;
    }

    s = oip_alloc(&rq->m.c, oip_json_unescaped_len(&rq->sequence_str));
    if (s == NULL) {
        return -1;
    }

    res->sequence_str_len = oip_json_unescape(s, &rq->sequence_str);
    res->sequence_str = s;

    return 0;
}


/*
 * The priority that goes upstream: oip_priority's, else the client's;
 * with levels, 0 and anything above them the default level (Triton's
 * rule).  Written when it differs from what the client sent.
 */

void
oip_request_priority(oip_req_t *rq)
{
    int                   has;
    uint64_t              v;
    const oip_options_t  *opt;

    opt = rq->m.opt;
    has = rq->has_priority;
    v = rq->priority;

    if (opt->priority_set) {
        has = 1;
        v = opt->priority;
    }

    if (has && opt->levels && (v == 0 || v > opt->levels)) {
        v = opt->default_level;
    }

    rq->priority_out = v;
    rq->priority_given = has;
    rq->priority_new = has && (!rq->has_priority || v != rq->priority);
}


/*
 * The edits of a REST request's parameters: the flags that ask the
 * upstream for the outputs in the form oip_upstream_outputs says, the
 * effective priority, the place of the remaining timeout.
 */

int
oip_request_params_edits(oip_req_t *rq)
{
    int     add;
    size_t  i;

    add = 0;

    switch (rq->m.opt->outputs) {

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

            break;
        }

        /* added with the priority, if it is added too */

        if (rq->top.has_flag) {
            if (!rq->top.flag_true
                && oip_edit_text(&rq->m, rq->top.flag_at,
                                 rq->top.flag.value_end, "true")
                   != 0)
            {
                return -1;
            }

            break;
        }

        add = 1;
        break;

    case OIP_FORM_JSON:
        for (i = 0; i < rq->nouts; i++) {
            if (oip_flag_remove(&rq->m, &rq->outs[i]) != 0) {
                return -1;
            }
        }

        return oip_top_edits(rq, 0, rq->top.has_flag);

    default:
        break;
    }

    return oip_top_edits(rq, add, 0);
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


/*
 * The request-level parameters the gateway sets: the priority replaced
 * or added, with binary_data_output when that is added too (one
 * "parameters" made for both), and the timeout's digits written apart,
 * so that the glue finds them in the new body.
 */

static int
oip_top_edits(oip_req_t *rq, int add_flag, int remove_flag)
{
    int             add;
    char           *text, *p;
    oip_msg_t      *m;
    oip_flagged_t  *f;

    m = &rq->m;
    f = &rq->top;

    if (rq->has_timeout && rq->timeout
        && oip_edit_slot(m, rq->timeout_at, rq->timeout_end) != 0)
    {
        return -1;
    }

    if (!rq->priority_new || rq->has_priority) {
        if (add_flag
            && oip_flag_set(m, f, ",\"binary_data_output\":true",
                            "\"binary_data_output\":true",
                            ",\"parameters\":{\"binary_data_output\":true}")
               != 0)
        {
            return -1;
        }

        if (remove_flag && oip_flag_remove(m, f) != 0) {
            return -1;
        }

        if (!rq->priority_new) {
            return 0;
        }
    }

    /* "parameters":{"binary_data_output":true,"priority":N} at most */

    text = oip_alloc(&m->c, 64);
    if (text == NULL) {
        return -1;
    }

    if (rq->has_priority) {
        *oip_print_u64((uint8_t *) text, rq->priority_out) = '\0';

        return oip_edit_text(m, rq->priority_at, rq->priority_end, text);
    }

    p = text;
    add = 1;

    if (remove_flag && f->params_n == 1) {
        /* the flag alone in "parameters": the priority takes its place */
        add = 0;

    } else if (remove_flag && oip_flag_remove(m, f) != 0) {
        return -1;
    }

    if (add && !f->has_params) {
        p = (char *) memcpy(p, ",\"parameters\":{", 15) + 15;

    } else if (add && f->params_n) {
        *p++ = ',';
    }

    if (add_flag) {
        p = (char *) memcpy(p, "\"binary_data_output\":true,", 26) + 26;
    }

    p = (char *) memcpy(p, "\"priority\":", 11) + 11;
    p = (char *) oip_print_u64((uint8_t *) p, rq->priority_out);

    if (add && !f->has_params) {
        *p++ = '}';
    }

    *p = '\0';

    if (!add) {
        return oip_edit_text(m, f->flag.key, f->flag.value_end, text);
    }

    return oip_edit_text(m, f->has_params ? f->params_close : f->close,
                         f->has_params ? f->params_close : f->close, text);
}
