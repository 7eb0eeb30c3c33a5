
/*
 * Copyright (C) ngx_oip_module authors
 *
 * libFuzzer target: conversions that must lose nothing.  A binary
 * request of one tensor made JSON, then binary again, gives back its
 * chunk byte for byte (a NaN may come back as another NaN); that JSON
 * made binary and JSON again is the same text.  With c[2] bit 0 the
 * same is asked of the response path.
 *
 * With c[2] bit 2 it reads number text instead: JSON numbers made FP32
 * or FP64 must have the bits strtof() or strtod() give them, correctly
 * rounded, and only a number beyond the type's range may be refused.
 *
 * The input: a config of FZ_RT_CONFIG bytes, then the elements.
 *
 *   c[0]      datatype: c[0] % 14 (BOOL ... BYTES, as oip_dtypes);
 *             number text: FP32 if c[0] is odd, else FP64
 *   c[1]      element count: c[1] % 33, fewer if the input runs out
 *   c[2]      bit 0: the response path too; bit 1: shape [1,n];
 *             bit 2: number text
 *   c[3]      unused, zero
 *
 * Fixed-size elements are the bytes as they are (BOOL: the low bit);
 * a BYTES element is a length byte L, then L % 24 bytes of which only
 * valid UTF-8 sequences are kept.  Number text: up to FZ_RT_MAX
 * comma-separated JSON numbers; anything else makes the input void.
 */


#include <math.h>

#include "fuzz.h"


#define FZ_RT_CONFIG         4
#define FZ_RT_MAX            32
#define FZ_RT_BYTES_MAX      24
#define FZ_RT_LIMIT          (1024 * 1024)


enum {
    FZ_BOOL = 0, FZ_UINT8, FZ_UINT16, FZ_UINT32, FZ_UINT64, FZ_INT8,
    FZ_INT16, FZ_INT32, FZ_INT64, FZ_FP16, FZ_BF16, FZ_FP32, FZ_FP64,
    FZ_BYTES
};


static const struct {
    const char  *name;
    size_t       size;
} fz_dt[] = {
    { "BOOL", 1 }, { "UINT8", 1 }, { "UINT16", 2 }, { "UINT32", 4 },
    { "UINT64", 8 }, { "INT8", 1 }, { "INT16", 2 }, { "INT32", 4 },
    { "INT64", 8 }, { "FP16", 2 }, { "BF16", 2 }, { "FP32", 4 },
    { "FP64", 8 }, { "BYTES", 0 }
};


typedef struct {
    arena_t       arena;
    oip_alloc_t      alloc;
    u_char          *out;      /* the result, flattened */
    size_t           len;
    size_t           header_len;
    int              binary;
} fz_run_t;


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t fz_utf8_seq(const u_char *p, size_t avail);
static size_t fz_bytes_element(const u_char **pp, const u_char *end,
    u_char *dst);
static int fz_is_nan(int dt, const u_char *p);
static void fz_chunk_same(int dt, const u_char *a, const u_char *b,
    size_t len);
static void fz_request(fz_run_t *r, oip_form_e inputs, const u_char *body,
    size_t len, off_t ihcl);
static void fz_response(fz_run_t *r, int binary, const u_char *body,
    size_t len, off_t ihcl);
static void fz_run_free(fz_run_t *r);
static u_char *fz_roundtrip(int dt, int response, const char *header,
    size_t hlen, const u_char *chunk, size_t clen, size_t *jlen);
static int fz_json_number(const u_char *p, size_t len);
static void fz_numbers(int dt, const u_char *p, const u_char *end);


static const oip_options_t  fz_opts = {
    .inputs = OIP_FORM_KEEP, .outputs = OIP_FORM_KEEP,
    .max_json_size = FZ_RT_LIMIT, .max_tensor_size = FZ_RT_LIMIT,
    .max_depth = 100, .raw_outputs = OIP_FORM_BINARY
};


/* RFC 3629, written apart from the codec's own: 0 if not valid here */

static size_t
fz_utf8_seq(const u_char *p, size_t avail)
{
    size_t  n, i;
    u_char  c, lo, hi;

    c = p[0];

    if (c < 0x80) {
        return 1;
    }

    lo = 0x80;
    hi = 0xbf;

    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;

    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = (c == 0xe0) ? 0xa0 : 0x80;
        hi = (c == 0xed) ? 0x9f : 0xbf;

    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = (c == 0xf0) ? 0x90 : 0x80;
        hi = (c == 0xf4) ? 0x8f : 0xbf;

    } else {
        return 0;
    }

    if (avail < n || p[1] < lo || p[1] > hi) {
        return 0;
    }

    for (i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf) {
            return 0;
        }
    }

    return n;
}


/* one BYTES element: its valid UTF-8 sequences, invalid bytes dropped */

static size_t
fz_bytes_element(const u_char **pp, const u_char *end, u_char *dst)
{
    size_t         want, n, seq;
    const u_char  *p, *stop;

    p = *pp;
    want = *p++ % FZ_RT_BYTES_MAX;
    stop = ((size_t) (end - p) < want) ? end : p + want;

    for (n = 0; p < stop; ) {
        seq = fz_utf8_seq(p, stop - p);

        if (seq == 0) {
            p++;
            continue;
        }

        memcpy(dst + n, p, seq);
        n += seq;
        p += seq;
    }

    *pp = p;

    return n;
}


static int
fz_is_nan(int dt, const u_char *p)
{
    uint16_t  h;
    uint32_t  f;
    uint64_t  d;

    switch (dt) {

    case FZ_FP16:
        h = (uint16_t) (p[0] | (p[1] << 8));
        return (h & 0x7c00) == 0x7c00 && (h & 0x03ff);

    case FZ_BF16:
        h = (uint16_t) (p[0] | (p[1] << 8));
        return (h & 0x7f80) == 0x7f80 && (h & 0x007f);

    case FZ_FP32:
        f = fz_le32(p);
        return (f & 0x7f800000) == 0x7f800000 && (f & 0x007fffff);

    case FZ_FP64:
        d = fz_le32(p) | ((uint64_t) fz_le32(p + 4) << 32);
        return (d & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL
               && (d & 0x000fffffffffffffULL);

    default:
        return 0;
    }
}


/* a NaN may come back as any NaN; every other bit as it was */

static void
fz_chunk_same(int dt, const u_char *a, const u_char *b, size_t len)
{
    size_t  i, size;

    size = fz_dt[dt].size;

    if (dt < FZ_FP16 || dt > FZ_FP64) {
        if (memcmp(a, b, len) != 0) {
            fprintf(stderr, "%s chunk of %zu bytes differs\n",
                    fz_dt[dt].name, len);
        }

        fz_assert(memcmp(a, b, len) == 0, "the chunk came back changed");
        return;
    }

    for (i = 0; i < len; i += size) {
        if (fz_is_nan(dt, a + i)) {
            fz_assert(fz_is_nan(dt, b + i), "a NaN came back a number");
            continue;
        }

        if (memcmp(a + i, b + i, size) != 0) {
            fprintf(stderr, "%s element %zu differs\n", fz_dt[dt].name,
                    i / size);
        }

        fz_assert(memcmp(a + i, b + i, size) == 0,
                  "a number came back changed");
    }
}


static void
fz_run_free(fz_run_t *r)
{
    arena_destroy(&r->arena);
    free(r->out);
    r->out = NULL;
}


static void
fz_request(fz_run_t *r, oip_form_e inputs, const u_char *body, size_t len,
    off_t ihcl)
{
    oip_options_t   o;
    oip_result_t    req;

    o = fz_opts;
    o.inputs = inputs;

    arena_init(&r->arena, &r->alloc);

    oip_request_process(&req, &r->alloc, &o,
                        &(oip_framing_t) { ihcl, OIP_ENC_NONE,
                                           OIP_CARRIER_HEADER, 0, 0 },
                        body, len);

    fz_error_check(req.status, req.error, req.reason);

    if (req.status != 0) {
        fprintf(stderr, "request refused: %d %s\n", req.status, req.error);
        fprintf(stderr, "body: %.*s\n", (int) len, body);
    }

    fz_assert(req.status == 0, "a valid request refused");
    fz_assert(req.rewritten, "a conversion that changed nothing");

    fz_segs_check(req.segs, req.nsegs, req.header_len, req.body_len);

    r->out = fz_flatten(req.segs, req.nsegs, req.body_len);
    r->len = req.body_len;
    r->header_len = req.header_len;
    r->binary = req.binary;
}


static void
fz_response(fz_run_t *r, int binary, const u_char *body, size_t len,
    off_t ihcl)
{
    oip_wish_t      w;
    oip_result_t    resp;

    memset(&w, 0, sizeof(oip_wish_t));
    w.binary = binary;

    arena_init(&r->arena, &r->alloc);

    oip_response_process(&resp, &r->alloc, &fz_opts, &w,
                         &(oip_framing_t) { ihcl, OIP_ENC_NONE,
                                            OIP_CARRIER_HEADER, 0, 0 },
                         body, len);

    fz_error_check(resp.status, resp.error, resp.reason);

    if (resp.status != 0) {
        fprintf(stderr, "answer refused: %d %s\n", resp.status, resp.error);
        fprintf(stderr, "body: %.*s\n", (int) len, body);
    }

    fz_assert(resp.status == 0, "a valid answer refused");
    fz_assert(resp.rewritten, "a conversion that changed nothing");

    fz_segs_check(resp.segs, resp.nsegs, resp.header_len, resp.body_len);

    r->out = fz_flatten(resp.segs, resp.nsegs, resp.body_len);
    r->len = resp.body_len;
    r->header_len = resp.header_len;
    r->binary = resp.binary;
}


/*
 * header + chunk, binary -> JSON -> binary: the same header and chunk;
 * that JSON -> binary -> JSON: the same text, which is returned.
 */

static u_char *
fz_roundtrip(int dt, int response, const char *header, size_t hlen,
    const u_char *chunk, size_t clen, size_t *jlen)
{
    u_char    *body, *text;
    fz_run_t   json, bin, json2;

    /* exactly its length: ASan sees a read one byte past the body */

    body = malloc(hlen + clen);
    fz_assert(body != NULL, "malloc");

    memcpy(body, header, hlen);
    memcpy(body + hlen, chunk, clen);

    /* binary -> JSON */

    if (response) {
        fz_response(&json, 0, body, hlen + clen, (off_t) hlen);

    } else {
        fz_request(&json, OIP_FORM_JSON, body, hlen + clen, (off_t) hlen);
    }

    fz_assert(!json.binary && json.header_len == json.len,
              "JSON asked for, binary given");

    /* JSON -> binary: the header and the chunk as they were */

    if (response) {
        fz_response(&bin, 1, json.out, json.len, -1);

    } else {
        fz_request(&bin, OIP_FORM_BINARY, json.out, json.len, -1);
    }

    if (bin.header_len != hlen || memcmp(bin.out, header, hlen) != 0) {
        fprintf(stderr, "header: %.*s\n    was: %.*s\n",
                (int) bin.header_len, bin.out, (int) hlen, header);
    }

    fz_assert(bin.binary, "binary asked for, JSON given");
    fz_assert(bin.header_len == hlen && memcmp(bin.out, header, hlen) == 0,
              "the header came back changed");
    fz_assert(bin.len - bin.header_len == clen,
              "the chunk came back with another length");

    fz_chunk_same(dt, chunk, bin.out + hlen, clen);

    /* binary again -> JSON: the very same text */

    if (response) {
        fz_response(&json2, 0, bin.out, bin.len, (off_t) bin.header_len);

    } else {
        fz_request(&json2, OIP_FORM_JSON, bin.out, bin.len,
                   (off_t) bin.header_len);
    }

    if (json2.len != json.len || memcmp(json2.out, json.out, json.len) != 0)
    {
        fprintf(stderr, "JSON: %.*s\n was: %.*s\n", (int) json2.len,
                json2.out, (int) json.len, json.out);
    }

    fz_assert(json2.len == json.len
              && memcmp(json2.out, json.out, json.len) == 0,
              "JSON -> binary -> JSON changed the text");

    text = json.out;
    *jlen = json.len;
    json.out = NULL;

    fz_run_free(&json);
    fz_run_free(&bin);
    fz_run_free(&json2);
    free(body);

    return text;
}


/* RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? and no more */

static int
fz_json_number(const u_char *p, size_t len)
{
    size_t  i, d;

    i = (len && p[0] == '-');

    if (i < len && p[i] == '0') {
        i++;

    } else if (i < len && p[i] >= '1' && p[i] <= '9') {
        while (i < len && p[i] >= '0' && p[i] <= '9') {
            i++;
        }

    } else {
        return 0;
    }

    if (i < len && p[i] == '.') {
        for (d = ++i; i < len && p[i] >= '0' && p[i] <= '9'; i++) {
            /* void */
        }

        if (i == d) {
            return 0;
        }
    }

    if (i < len && (p[i] == 'e' || p[i] == 'E')) {
        i++;

        if (i < len && (p[i] == '+' || p[i] == '-')) {
            i++;
        }

        for (d = i; i < len && p[i] >= '0' && p[i] <= '9'; i++) {
            /* void */
        }

        if (i == d) {
            return 0;
        }
    }

    return i == len;
}


/*
 * Number text to FP32 or FP64: the bits strtof() or strtod() give (the
 * process is in the C locale), refused only if a number overflows.
 */

static void
fz_numbers(int dt, const u_char *p, const u_char *end)
{
    int             over;
    char           *tok, head[128];
    float           f;
    double          d;
    size_t          n, i, size, len, tlen;
    u_char         *json, *q, *bin, want[8];
    fz_run_t        r;
    const u_char   *t[FZ_RT_MAX], *e, *comma;
    size_t          tl[FZ_RT_MAX];
    oip_options_t   o;
    oip_result_t    req;

    size = fz_dt[dt].size;

    for (n = 0; n < FZ_RT_MAX && p < end; n++) {
        comma = memchr(p, ',', end - p);
        e = comma ? comma : end;

        if (!fz_json_number(p, e - p)) {
            return;
        }

        t[n] = p;
        tl[n] = e - p;
        p = comma ? e + 1 : end;
    }

    if (n == 0) {
        return;
    }

    /* exactly its length: ASan sees a read one byte past the JSON */

    len = snprintf(head, sizeof(head), "{\"inputs\":[{\"name\":\"x\","
                   "\"shape\":[%zu],\"datatype\":\"%s\",\"data\":[", n,
                   fz_dt[dt].name);

    for (i = 0; i < n; i++) {
        len += tl[i] + (i ? 1 : 0);
    }

    len += sizeof("]}]}") - 1;

    json = malloc(len);
    fz_assert(json != NULL, "malloc");

    q = (u_char *) memcpy(json, head, strlen(head)) + strlen(head);

    for (i = 0; i < n; i++) {
        if (i) {
            *q++ = ',';
        }

        memcpy(q, t[i], tl[i]);
        q += tl[i];
    }

    q = (u_char *) memcpy(q, "]}]}", 4) + 4;

    fz_assert((size_t) (q - json) == len, "number text: length");

    o = fz_opts;
    o.inputs = OIP_FORM_BINARY;

    arena_init(&r.arena, &r.alloc);

    oip_request_process(&req, &r.alloc, &o,
                        &(oip_framing_t) { -1, OIP_ENC_NONE,
                                           OIP_CARRIER_HEADER, 0, 0 },
                        json,
                        q - json);

    fz_error_check(req.status, req.error, req.reason);

    bin = NULL;

    if (req.status == 0) {
        fz_assert(req.rewritten && req.binary
                  && req.body_len - req.header_len == n * size,
                  "numbers made binary: not one chunk of n elements");

        bin = fz_flatten(req.segs, req.nsegs, req.body_len);
    }

    over = 0;

    for (i = 0; i < n; i++) {
        tlen = tl[i];
        tok = malloc(tlen + 1);
        fz_assert(tok != NULL, "malloc");

        memcpy(tok, t[i], tlen);
        tok[tlen] = '\0';

        if (dt == FZ_FP32) {
            f = strtof(tok, NULL);
            over |= isinf(f);
            memcpy(want, &f, 4);

        } else {
            d = strtod(tok, NULL);
            over |= isinf(d);
            memcpy(want, &d, 8);
        }

        if (bin && memcmp(bin + req.header_len + i * size, want, size) != 0)
        {
            fprintf(stderr, "%s: %s is not read as strto%s reads it\n",
                    fz_dt[dt].name, tok, dt == FZ_FP32 ? "f" : "d");
            fz_assert(0, "a number read with other bits than strtod's");
        }

        free(tok);
    }

    if (req.status != 0) {
        fprintf(stderr, "numbers refused: %d %s\n", req.status, req.error);
        fz_assert(req.status == 400 && over, "valid numbers refused");

    } else {
        fz_assert(!over, "a number beyond the type's range accepted");
    }

    free(bin);
    arena_destroy(&r.arena);
    free(json);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int             dt;
    char            header[256], shape[32];
    size_t          n, i, clen, elen, hlen, qlen, alen;
    u_char          chunk[FZ_RT_MAX * (4 + FZ_RT_BYTES_MAX)], *q, *a;
    const u_char   *p, *end;

    if (size < FZ_RT_CONFIG) {
        return 0;
    }

    dt = data[0] % 14;
    n = data[1] % (FZ_RT_MAX + 1);
    p = data + FZ_RT_CONFIG;
    end = data + size;

    if (data[2] & 4) {
        fz_numbers((data[0] & 1) ? FZ_FP32 : FZ_FP64, p, end);
        return 0;
    }

    clen = 0;

    if (dt == FZ_BYTES) {
        for (i = 0; i < n && p < end; i++) {
            elen = fz_bytes_element(&p, end, chunk + clen + 4);

            chunk[clen] = (u_char) elen;
            chunk[clen + 1] = 0;
            chunk[clen + 2] = 0;
            chunk[clen + 3] = 0;
            clen += 4 + elen;
        }

        n = i;

    } else {
        if (n > (size_t) (end - p) / fz_dt[dt].size) {
            n = (size_t) (end - p) / fz_dt[dt].size;
        }

        clen = n * fz_dt[dt].size;

        for (i = 0; i < clen; i++) {
            chunk[i] = (dt == FZ_BOOL) ? (p[i] & 1) : p[i];
        }
    }

    if (data[2] & 2) {
        snprintf(shape, sizeof(shape), "1,%zu", n);

    } else {
        snprintf(shape, sizeof(shape), "%zu", n);
    }

    hlen = snprintf(header, sizeof(header), "{\"%s\":[{\"name\":\"x\","
                    "\"shape\":[%s],\"datatype\":\"%s\",\"parameters\":"
                    "{\"binary_data_size\":%zu}}]}", "inputs", shape,
                    fz_dt[dt].name, clen);

    q = fz_roundtrip(dt, 0, header, hlen, chunk, clen, &qlen);

    if (data[2] & 1) {
        hlen = snprintf(header, sizeof(header), "{\"%s\":[{\"name\":\"x\","
                        "\"shape\":[%s],\"datatype\":\"%s\",\"parameters\":"
                        "{\"binary_data_size\":%zu}}]}", "outputs", shape,
                        fz_dt[dt].name, clen);

        a = fz_roundtrip(dt, 1, header, hlen, chunk, clen, &alen);

        /* both paths write the same data: past {"inputs" / {"outputs" */

        fz_assert(qlen - 9 == alen - 10
                  && memcmp(q + 9, a + 10, qlen - 9) == 0,
                  "requests and answers write data differently");

        free(a);
    }

    free(q);

    return 0;
}
