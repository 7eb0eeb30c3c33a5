
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The envelope writer: an answer read from another wire format (a
 * ModelInferResponse) has no JSON to splice edits into, so its REST form
 * is written from its envelope and its items, each output in the form
 * its action says: binary outputs referenced after the JSON, JSON ones
 * written as "data".  It writes what the REST pipeline would make of the
 * same answer, byte for byte (t/unit/golden holds it to that): outputs
 * dropped with their comma, binary_data_size last in "parameters", and
 * "data" in their place when it was their only member.
 */


#include "oip_message.h"
#include "oip_number.h"


static int oip_envelope_id(oip_msg_t *m, oip_out_t *o, int here,
    const oip_envelope_t *env);
static int oip_envelope_output(oip_msg_t *m, oip_out_t *o, oip_item_t *it);


int
oip_envelope_write(oip_msg_t *m, const oip_envelope_t *env,
    oip_result_t *res)
{
    size_t       i, n;
    oip_out_t    o;
    oip_item_t  *it;

    oip_out_init(&o, &m->c, 1024);

    for (i = 0; i < m->nitems; i++) {
        if (m->items[i].act == OIP_ACT_JSON) {
            m->to_json = 1;
        }

        if (m->items[i].act == OIP_ACT_JSON
            || m->items[i].act == OIP_ACT_DROP)
        {
            res->reshaped = 1;
        }
    }

    if (m->opt->answer_id_set
        && (env->id.len || m->opt->answer_id != NULL))
    {
        res->reshaped = 1;
    }

    /* binary tensors written as JSON are bounded as they are written */

    if (m->to_json) {
        o.limit = m->opt->max_json_size;
        o.over = m->kind->as_json;
    }

    if (oip_out_write(&o, "{\"model_name\":", 14) != 0
        || oip_out_write(&o, env->model_name.data, env->model_name.len) != 0
        || oip_out_write(&o, ",\"model_version\":", 17) != 0
        || oip_out_write(&o, env->model_version.data,
                         env->model_version.len) != 0
        || oip_envelope_id(m, &o, 1, env) != 0)
    {
        return -1;
    }

    if (env->params.len
        && (oip_out_write(&o, ",\"parameters\":{", 15) != 0
            || oip_out_write(&o, env->params.data, env->params.len) != 0
            || oip_out_write(&o, "}", 1) != 0))
    {
        return -1;
    }

    if (oip_out_write(&o, ",\"outputs\":[", 12) != 0) {
        return -1;
    }

    for (i = 0, n = 0; i < m->nitems; i++) {
        it = &m->items[i];

        if (it->act == OIP_ACT_DROP) {
            continue;
        }

        if ((n++ && oip_out_write(&o, ",", 1) != 0)
            || oip_envelope_output(m, &o, it) != 0)
        {
            return -1;
        }
    }

    if (oip_out_write(&o, "]", 1) != 0
        || oip_envelope_id(m, &o, 0, env) != 0
        || oip_out_write(&o, "}", 1) != 0
        || oip_out_cut(&o) != 0)
    {
        return -1;
    }

    if (o.total > m->opt->max_json_size) {
        if (m->to_json) {
            return oip_fail(&m->c, 413, OIP_REASON_LIMIT, "%s would exceed "
                            "oip_max_json_size (%zu bytes)", m->kind->as_json,
                            m->opt->max_json_size);
        }

        return oip_fail(&m->c, 413, OIP_REASON_LIMIT, "the JSON of %zu bytes "
                        "exceeds oip_max_json_size (%zu)", o.total,
                        m->opt->max_json_size);
    }

    if (oip_msg_chunks(m, &o, res) != 0) {
        return -1;
    }

    res->rewritten = 1;

    return 0;
}


/*
 * The "id": the answer's own, where it was; or, for a cached answer,
 * this request's (oip_options_t's answer_id), in the answer's place or
 * last when the answer had none, or nothing.
 */

static int
oip_envelope_id(oip_msg_t *m, oip_out_t *o, int here,
    const oip_envelope_t *env)
{
    size_t                len;
    const oip_options_t  *opt;

    opt = m->opt;

    if (here != (env->id.len != 0)) {
        /* its place is where it was, or last when it was not there */
        return 0;
    }

    if (!opt->answer_id_set) {
        if (!here) {
            return 0;
        }

        if (oip_out_write(o, ",\"id\":", 6) != 0
            || oip_out_write(o, env->id.data, env->id.len) != 0)
        {
            return -1;
        }

        return 0;
    }

    if (opt->answer_id == NULL) {
        return 0;
    }

    len = oip_json_escape(NULL, opt->answer_id, opt->answer_id_len);

    if (oip_out_write(o, ",\"id\":\"", 7) != 0
        || oip_out_reserve(o, len + 1) != 0)
    {
        return -1;
    }

    o->pos += oip_json_escape(o->pos, opt->answer_id, opt->answer_id_len);
    *o->pos++ = '"';

    return 0;
}


/* {"name":...,"datatype":...,"shape":[...], parameters and data} */

static int
oip_envelope_output(oip_msg_t *m, oip_out_t *o, oip_item_t *it)
{
    size_t    i, n;
    uint8_t   num[OIP_NUM_MAX];

    n = oip_json_escape(NULL, it->name.data, it->name.len);

    if (oip_out_write(o, "{\"name\":\"", 9) != 0
        || oip_out_reserve(o, n + 1) != 0)
    {
        return -1;
    }

    o->pos += oip_json_escape(o->pos, it->name.data, it->name.len);
    *o->pos++ = '"';

    if (oip_out_write(o, ",\"datatype\":\"", 13) != 0
        || oip_out_write(o, oip_dtypes[it->t.dt].name,
                         oip_dtypes[it->t.dt].len) != 0
        || oip_out_write(o, "\",\"shape\":[", 11) != 0)
    {
        return -1;
    }

    for (i = 0; i < it->t.rank; i++) {
        if ((i && oip_out_write(o, ",", 1) != 0)
            || oip_out_write(o, num, oip_print_u64(num, it->t.shape[i]) - num)
               != 0)
        {
            return -1;
        }
    }

    if (oip_out_write(o, "]", 1) != 0) {
        return -1;
    }

    if (it->act != OIP_ACT_JSON) {
        /* binary: binary_data_size, after the output's own parameters */

        if (oip_out_write(o, ",\"parameters\":{", 15) != 0
            || oip_out_write(o, it->params_json.data, it->params_json.len)
               != 0
            || (it->params_json.len && oip_out_write(o, ",", 1) != 0)
            || oip_out_write(o, "\"binary_data_size\":", 19) != 0
            || oip_out_write(o, num, oip_print_u64(num, it->bds_size) - num)
               != 0)
        {
            return -1;
        }

        return oip_out_write(o, "}}", 2);
    }

    if (it->params_json.len
        && (oip_out_write(o, ",\"parameters\":{", 15) != 0
            || oip_out_write(o, it->params_json.data, it->params_json.len)
               != 0
            || oip_out_write(o, "}", 1) != 0))
    {
        return -1;
    }

    if (oip_out_write(o, ",\"data\":", 8) != 0
        || oip_binary_to_data(&m->c, &it->t, it->bin, it->bds_size, o, 400)
           != 0)
    {
        return -1;
    }

    return oip_out_write(o, "}", 1);
}
