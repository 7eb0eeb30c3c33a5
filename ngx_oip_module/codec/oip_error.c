
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Upstream error answers in the protocol's shape, {"error": "..."}: the
 * only one clients such as tritonclient can read.  Runtimes answer
 * otherwise: FastAPI's {"detail": ...} (KServe, MLServer), a text/plain
 * "Internal Server Error" (Starlette), an HTML page (a proxy between),
 * an empty body.  What the body says is made into one line of readable
 * text, bounded; the status stays the upstream's.
 */


#include <stdio.h>

#include "oip_json.h"


/* one line of text, sanitised, cut at OIP_ERROR_LEN with "..." */

typedef struct {
    char                  *buf;
    size_t                 n;
    unsigned               space:1;    /* white space is due */
    unsigned               full:1;
} oip_text_t;


static int oip_error_json(oip_json_t *j, oip_text_t *t);
static int oip_error_detail(oip_json_t *j, oip_text_t *t);
static int oip_error_item(oip_json_t *j, oip_text_t *t);
static int oip_error_string(oip_json_t *j, oip_text_t *t);
static void oip_error_html(const uint8_t *p, const uint8_t *end,
    oip_text_t *t);
static const uint8_t *oip_find_ci(const uint8_t *p, const uint8_t *end,
    const char *s);
static void oip_text_add(oip_text_t *t, const uint8_t *p, size_t len);
static void oip_text_mark(oip_text_t *t, const char *s, int space_after);


#define OIP_ERROR_DEPTH      32


int
oip_response_error(oip_result_t *res, const oip_alloc_t *a, int status,
    const oip_header_t *type, const uint8_t *body, size_t len)
{
    int             rc;
    char            scratch[OIP_ERROR_LEN];
    oip_ctx_t       c;
    oip_reason_e    reason;
    oip_text_t      t;
    oip_json_t      j;
    const uint8_t  *p, *end;

    memset(res, 0, sizeof(oip_result_t));

    t.buf = res->error;
    t.n = 0;
    t.space = 0;
    t.full = 0;

    /* the scanner's own complaints are not the message */
    oip_ctx_init(&c, a, scratch, &reason, 0);

    res->reason = oip_error_words(body, len);

    p = body;
    end = body + len;

    while (p < end && oip_json_ws_map[*p]) {
        p++;
    }

    rc = 1;

    if (p == end) {
        snprintf(res->error, OIP_ERROR_LEN, "the upstream answered %d with "
                 "an empty body", status);
        return 1;
    }

    if (*p == '{' || *p == '"') {
        oip_json_init(&j, &c, body, len, OIP_ERROR_DEPTH);

        if (oip_json_check(&j) == 0) {
            oip_json_done(&j);
            oip_json_init(&j, &c, p, end - p, OIP_ERROR_DEPTH);
            rc = oip_error_json(&j, &t);
            oip_json_done(&j);

            if (rc == 0) {
                /* {"error": "..."} already */
                res->error[0] = '\0';
                return 0;
            }

            if (rc == 1 && t.n) {
                return 1;
            }

            /* -1: memory; or nothing was said: the body as text */
            t.n = 0;
            t.space = 0;
            t.full = 0;

        } else {
            oip_json_done(&j);
        }
    }

    if (*p == '<'
        || (type->count && oip_find_ci(type->data, type->data + type->len,
                                       "html")))
    {
        oip_error_html(p, end, &t);

    } else {
        oip_text_add(&t, p, end - p);
    }

    if (t.n == 0) {
        snprintf(res->error, OIP_ERROR_LEN, "the upstream answered %d",
                 status);
    }

    return 1;
}


/*
 * What a runtime's words say, for programs: the one place that reads
 * them.  Triton's, in its HTTP and gRPC errors: "Request for unknown
 * model", "... has no available versions" (before 2.42, a 400), the
 * dynamic batcher's "Exceeds maximum queue size", the sequence batcher's
 * "... must specify the START flag on the first request of the
 * sequence".  Cased as they come, read without case.
 */

oip_reason_e
oip_error_words(const uint8_t *body, size_t len)
{
    const uint8_t  *end;

    end = body + len;

    if (len == 0) {
        return OIP_REASON_NONE;
    }

    if (oip_find_ci(body, end, "unknown model")
        || oip_find_ci(body, end, "no available versions"))
    {
        return OIP_REASON_UNKNOWN_MODEL;
    }

    if (oip_find_ci(body, end, "exceeds maximum queue size")) {
        return OIP_REASON_QUEUE_FULL;
    }

    if (oip_find_ci(body, end, "must specify the start flag")) {
        return OIP_REASON_SEQUENCE_START;
    }

    return OIP_REASON_NONE;
}


/*
 * A JSON body, valid: 0 if it is {"error": string}; 1 with what it says
 * in t; -1 when out of memory.
 */

static int
oip_error_json(oip_json_t *j, oip_text_t *t)
{
    int             rc;
    oip_obj_t       o;
    oip_str_t       key;
    const uint8_t  *error, *detail, *message, *v;

    if (*j->p == '"') {
        return oip_error_string(j, t) == 0 ? 1 : -1;
    }

    error = NULL;
    detail = NULL;
    message = NULL;

    if (oip_json_object(j, &o) != 0) {
        return -1;
    }

    while ((rc = oip_json_member(j, &o, &key, NULL)) == 1) {

        v = j->p;

        if (oip_json_str_eq(&key, "error", 5)) {
            error = v;

        } else if (oip_json_str_eq(&key, "detail", 6)) {
            detail = v;

        } else if (oip_json_str_eq(&key, "message", 7)) {
            message = v;
        }

        if (oip_json_skip(j) != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return -1;
    }

    if (error && *error == '"') {
        return 0;
    }

    /* {"error": {"message": ...}}, as some gateways write it */

    if (error && *error == '{') {
        j->p = error;
        return oip_error_json(j, t);
    }

    if (detail) {
        j->p = detail;
        return oip_error_detail(j, t) == 0 ? 1 : -1;
    }

    if (message && *message == '"') {
        j->p = message;
        return oip_error_string(j, t) == 0 ? 1 : -1;
    }

    /* nothing known: the JSON itself says it best */

    oip_text_add(t, j->start, j->end - j->start);

    return 1;
}


/*
 * FastAPI's "detail": a string, or a list of {"loc": [...], "msg": ...}
 * (one per field that failed validation), joined with "; ".
 */

static int
oip_error_detail(oip_json_t *j, oip_text_t *t)
{
    int        rc, n;
    oip_arr_t  a;

    if (*j->p == '"') {
        return oip_error_string(j, t);
    }

    if (*j->p != '[') {
        oip_text_add(t, j->p, j->end - j->p);
        return 0;
    }

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    n = 0;

    while ((rc = oip_json_element(j, &a)) == 1) {

        if (n++) {
            oip_text_mark(t, ";", 1);
        }

        rc = (*j->p == '{') ? oip_error_item(j, t) : oip_error_string(j, t);

        if (rc != 0) {
            return -1;
        }
    }

    return rc;
}


/* {"loc": ["body", "inputs", 0], "msg": "...", ...}: msg (at body.inputs.0) */

static int
oip_error_item(oip_json_t *j, oip_text_t *t)
{
    int             rc, n;
    oip_arr_t       a;
    oip_obj_t       o;
    oip_str_t       key, s;
    const uint8_t  *loc, *msg, *start;

    loc = NULL;
    msg = NULL;
    start = j->p;

    if (oip_json_object(j, &o) != 0) {
        return -1;
    }

    while ((rc = oip_json_member(j, &o, &key, NULL)) == 1) {

        if (oip_json_str_eq(&key, "loc", 3)) {
            loc = j->p;

        } else if (oip_json_str_eq(&key, "msg", 3)) {
            msg = j->p;
        }

        if (oip_json_skip(j) != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return -1;
    }

    if (msg == NULL || *msg != '"') {
        oip_text_add(t, start, j->p - start);
        return 0;
    }

    start = j->p;
    j->p = msg;

    if (oip_error_string(j, t) != 0) {
        return -1;
    }

    if (loc && *loc == '[') {
        j->p = loc;

        if (oip_json_array(j, &a) != 0) {
            return -1;
        }

        t->space = 1;
        oip_text_add(t, (const uint8_t *) "(at", 3);
        t->space = 1;
        n = 0;

        while ((rc = oip_json_element(j, &a)) == 1) {
            if (n++) {
                oip_text_mark(t, ".", 0);
            }

            if (*j->p == '"') {
                if (oip_json_string(j, &s) != 0) {
                    return -1;
                }

                oip_text_add(t, s.data, s.len);
                continue;
            }

            s.data = j->p;

            if (oip_json_skip(j) != 0) {
                return -1;
            }

            oip_text_add(t, s.data, j->p - s.data);
        }

        if (rc < 0) {
            return -1;
        }

        oip_text_mark(t, ")", 0);
    }

    j->p = start;

    return 0;
}


static int
oip_error_string(oip_json_t *j, oip_text_t *t)
{
    size_t      n;
    uint8_t    *buf;
    oip_str_t   s;

    if (oip_json_string(j, &s) != 0) {
        return -1;
    }

    if (!s.escaped) {
        oip_text_add(t, s.data, s.len);
        return 0;
    }

    buf = oip_alloc(j->ctx, s.len);
    if (buf == NULL) {
        return -1;
    }

    n = oip_json_unescape(buf, &s);
    oip_text_add(t, buf, n);
    oip_free(j->ctx, buf);

    return 0;
}


/* an HTML page: its title, or its text without the tags */

static void
oip_error_html(const uint8_t *p, const uint8_t *end, oip_text_t *t)
{
    const uint8_t  *q, *e;

    q = oip_find_ci(p, end, "<title");

    if (q) {
        for (q += 6; q < end && *q != '>'; q++) { /* void */ }

        e = (q < end) ? oip_find_ci(q, end, "</title") : NULL;

        if (e) {
            oip_text_add(t, q + 1, e - (q + 1));

            if (t->n) {
                return;
            }
        }
    }

    while (p < end && !t->full) {
        q = memchr(p, '<', end - p);
        e = q ? q : end;

        oip_text_add(t, p, e - p);

        if (q == NULL) {
            break;
        }

        t->space = 1;
        q = memchr(q, '>', end - q);
        p = q ? q + 1 : end;
    }
}


static const uint8_t *
oip_find_ci(const uint8_t *p, const uint8_t *end, const char *s)
{
    size_t  i, n;

    n = strlen(s);

    for ( /* void */ ; (size_t) (end - p) >= n; p++) {
        for (i = 0; i < n && (p[i] | 0x20) == (uint8_t) s[i]; i++) {
            /* void */
        }

        if (i == n) {
            return p;
        }
    }

    return NULL;
}


/*
 * Text added to the line: runs of white space and control characters
 * become one space, a byte that is not UTF-8 becomes '?', and a line too
 * long is cut at a character boundary and ends with "...".
 */

static void
oip_text_add(oip_text_t *t, const uint8_t *p, size_t len)
{
    int             bad;
    size_t          seq, need;
    const uint8_t  *end;

    end = p + len;

    while (p < end && !t->full) {

        if (*p <= 0x20 || *p == 0x7f) {
            t->space = 1;
            p++;
            continue;
        }

        seq = (*p < 0x80) ? 1 : (*p < 0xe0) ? 2 : (*p < 0xf0) ? 3 : 4;
        bad = (seq > (size_t) (end - p) || !oip_utf8_valid(p, seq));

        if (bad) {
            seq = 1;
        }

        need = seq + (t->space && t->n);

        /* room for "..." and the NUL */

        if (need > OIP_ERROR_LEN - 4 - t->n) {
            memcpy(t->buf + t->n, "...", 4);
            t->n += 3;
            t->full = 1;
            return;
        }

        if (t->space && t->n) {
            t->buf[t->n++] = ' ';
        }

        t->space = 0;

        if (bad) {
            t->buf[t->n++] = '?';

        } else {
            memcpy(t->buf + t->n, p, seq);
            t->n += seq;
        }

        p += seq;
    }

    t->buf[t->n] = '\0';
}


/* a mark glued to what is before it: ";", ")", "." */

static void
oip_text_mark(oip_text_t *t, const char *s, int space_after)
{
    t->space = 0;
    oip_text_add(t, (const uint8_t *) s, strlen(s));
    t->space = space_after;
}
