
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Helpers for the codec's unit tests: run a request or a response
 * through the codec and flatten what comes out.
 */


#ifndef _OIP_CODEC_TEST_H_INCLUDED_
#define _OIP_CODEC_TEST_H_INCLUDED_


#include "tap.h"

#include <zlib.h>


typedef struct {
    arena_t          arena;
    oip_alloc_t      alloc;
    oip_result_t     req;
    u_char          *body;
    u_char          *out;
    size_t           len;
} run_t;


static oip_options_t  opts = {
    .inputs = OIP_FORM_KEEP, .outputs = OIP_FORM_KEEP,
    .max_json_size = 64 * 1024 * 1024, .max_tensor_size = 64 * 1024 * 1024,
    .max_depth = 100, .raw_outputs = OIP_FORM_BINARY
};


static size_t
hex(const char *s, u_char *out)
{
    size_t        n;
    unsigned int  v;

    for (n = 0; *s; ) {
        if (*s == ' ') {
            s++;
            continue;
        }

        sscanf(s, "%2x", &v);
        out[n++] = (u_char) v;
        s += 2;
    }

    return n;
}


static void
run_free(run_t *r)
{
    arena_destroy(&r->arena);
    free(r->body);
    free(r->out);
    r->body = NULL;
    r->out = NULL;
}


/* ihcl: -1 none, -2 the JSON's length, else that value */

static u_char *
flatten(oip_seg_t *segs, size_t n, size_t total, size_t *len)
{
    size_t   i;
    u_char  *out, *p;

    out = malloc(total + 1);
    p = out;

    for (i = 0; i < n; i++) {
        memcpy(p, segs[i].data, segs[i].len);
        p += segs[i].len;
    }

    *len = p - out;

    return out;
}


static int
run_opts(run_t *r, const oip_options_t *opt, const char *json, size_t jlen,
    const u_char *bin, size_t blen, off_t ihcl, oip_encoding_e enc)
{
    memset(r, 0, sizeof(run_t));
    arena_init(&r->arena, &r->alloc);

    /* exactly the body's length: ASan sees a read one byte past it */

    r->body = malloc(jlen + blen ? jlen + blen : 1);
    memcpy(r->body, json, jlen);
    if (blen) {
        memcpy(r->body + jlen, bin, blen);
    }

    if (ihcl == -2) {
        ihcl = (off_t) jlen;
    }

    oip_request_process(&r->req, &r->alloc, opt,
                        &(oip_framing_t) { ihcl, enc, OIP_CARRIER_HEADER,
                                           0, 0 },
                        r->body,
                        jlen + blen);

    if (r->req.status) {
        return r->req.status;
    }

    if (!r->req.rewritten) {
        r->out = malloc(jlen + blen + 1);
        memcpy(r->out, r->body, jlen + blen);
        r->len = jlen + blen;
        return 0;
    }

    r->out = flatten(r->req.segs, r->req.nsegs, r->req.body_len, &r->len);

    return 0;
}


static int
run(run_t *r, oip_form_e form, const char *json, size_t jlen,
    const u_char *bin, size_t blen, off_t ihcl)
{
    oip_options_t  o;

    o = opts;
    o.inputs = form;

    return run_opts(r, &o, json, jlen, bin, blen, ihcl, OIP_ENC_NONE);
}


typedef struct {
    arena_t          arena;
    oip_alloc_t      alloc;
    oip_result_t     resp;
    u_char          *body;
    u_char          *out;
    size_t           len;
} rrun_t;


static void
rrun_free(rrun_t *r)
{
    arena_destroy(&r->arena);
    free(r->body);
    free(r->out);
}


/* an upstream answer (JSON + binary) given to a client with wish w */

static int
respond(rrun_t *r, const oip_wish_t *w, const char *json, const u_char *bin,
    size_t blen, off_t ihcl)
{
    size_t  jlen;

    memset(r, 0, sizeof(rrun_t));
    arena_init(&r->arena, &r->alloc);

    jlen = strlen(json);
    r->body = malloc(jlen + blen ? jlen + blen : 1);
    memcpy(r->body, json, jlen);
    if (blen) {
        memcpy(r->body + jlen, bin, blen);
    }

    if (ihcl == -2) {
        ihcl = (off_t) jlen;
    }

    oip_response_process(&r->resp, &r->alloc, &opts, w,
                         &(oip_framing_t) { ihcl, OIP_ENC_NONE,
                                            OIP_CARRIER_HEADER, 0, 0 },
                         r->body,
                         jlen + blen);

    if (r->resp.status) {
        return r->resp.status;
    }

    if (r->resp.rewritten) {
        r->out = flatten(r->resp.segs, r->resp.nsegs, r->resp.body_len,
                         &r->len);

    } else {
        r->out = malloc(jlen + blen + 1);
        memcpy(r->out, r->body, jlen + blen);
        r->len = jlen + blen;
    }

    return 0;
}


static int
same(const u_char *a, size_t alen, const char *b, size_t blen,
    const char *what)
{
    if (alen == blen && memcmp(a, b, alen) == 0) {
        return 1;
    }

    diag("%s differs:", what);
    diag("     got: %.*s", (int) alen, a);
    diag("expected: %.*s", (int) blen, b);

    return 0;
}



/* in, deflated: wbits 15 + 16 is gzip, 15 zlib, -15 raw */

static size_t
compress_with(int wbits, const char *in, size_t len, u_char *out, size_t cap)
{
    z_stream  z;

    memset(&z, 0, sizeof(z));
    deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY);
    z.next_in = (u_char *) in;
    z.avail_in = (uInt) len;
    z.next_out = out;
    z.avail_out = (uInt) cap;
    deflate(&z, Z_FINISH);
    deflateEnd(&z);

    return cap - z.avail_out;
}


#endif /* _OIP_CODEC_TEST_H_INCLUDED_ */
