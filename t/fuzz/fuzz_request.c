
/*
 * Copyright (C) ngx_oip_module authors
 *
 * libFuzzer target: oip_request_process() on any body, under options
 * taken from the first bytes.  Beyond the sanitizers it checks what a
 * caller relies on: the status set, the error text, the segments, and
 * that a rewritten request is a fixed point, i.e. the codec accepts its
 * own output unchanged under the same options.
 *
 * The input: a config of FZ_REQ_CONFIG bytes, then the body.
 *
 *   c[0]      bits 0-1: inputs form (0 keep, 1 binary, 2 json, 3 keep)
 *             bits 2-3: outputs form, the same way
 *             bits 4-5: encoding (0 none, 1 gzip, 2 deflate, 3 none)
 *             bit 6: small limits (c[11], c[12]); bit 7: oip_raw_input
 *   c[1]      max_depth: 1 + c[1] % 200
 *   c[2]      bits 0-1: IHCL (0 none, 1 c[3..6] % (len + 2),
 *             2 len - c[3..6] % (len + 1), 3 zero: raw)
 *             bit 2: allocation c[13] + 1 fails; bit 3: and all after
 *             bit 4: raw_outputs json (else binary)
 *             bit 5: NaN and Infinity refused in JSON sent upstream
 *             bit 6: a model signature: the body starts with its
 *             metadata JSON, two bytes of length (little-endian) first
 *             bit 7: oip_signature_coerce on
 *   c[3..6]   the IHCL value, little-endian
 *   c[7]      raw datatype: c[7] % 16 (14 and 15: unknown ones); bit
 *             7: with a signature, the body is a generate request: the
 *             infer request oip_generate_request() makes goes on
 *   c[8]      raw rank: 1 + (c[8] & 3); the -1 at (c[8] >> 2) & 7, if
 *             below the rank; bits 5-6: the name (3: not UTF-8);
 *             bit 7: dims as chosen for BYTES too (else "1")
 *   c[9..10]  raw dimensions, a nibble each, plus one
 *   c[11]     small max_json_size: 16 + 16 * c[11]
 *   c[12]     small max_tensor_size: 8 * c[12]
 *   c[13]     which allocation fails
 *   c[14]     bits 0-4: if not 0, the raw dimensions are that many
 *             first bytes of the body, as text; bit 5: levels 2,
 *             default level 2 (oip_admit's); bits 6-7: if not 0, the
 *             priority oip_priority gives
 *   c[15]     bits 0-4: oip_ihcl_parse() and the framing functions
 *             are checked on that many first bytes of the body, as an
 *             IHCL value and as a Content-Encoding; bits 5-6: how many
 *             times each header came (0 to 3); bit 7: a digest asked
 *             (its canonical form read byte by byte; the request gives
 *             the same verdict and body without it)
 *
 * Without failed allocations, every body runs
 * once more with a sink of a small block (oip_buffer's path): the same
 * verdict, and the same bytes sent, its JSON in segments and the rest
 * in the sink's file, which nothing is written past; an encoded body
 * inflated into the sink; a digest of the same bytes.
 */


#include <strings.h>

#include "fuzz.h"
#include "oip_signature.h"


#define FZ_REQ_CONFIG        16
#define FZ_DEFAULT_LIMIT     (64 * 1024 * 1024)

/* deep enough for anything the codec adds: parameters of an output */
#define FZ_REFEED_DEPTH      5


static const char  *fz_dtypes[] = {
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
    "INT64", "FP16", "BF16", "FP32", "FP64", "BYTES", "FP8", "fp32"
};

static const char  *fz_raw_names[] = {
    "INPUT0", "IN\"0", "\xe5\x90\x8d\\", "\xff"
};


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fz_raw_config(const u_char *c, const u_char *body, size_t len,
    oip_raw_input_t *raw);
static const oip_signature_t *fz_signature(const oip_alloc_t *alloc,
    const u_char **body, size_t *len);
static void fz_ihcl_parse_check(const u_char *v, size_t len);
static void fz_framing_check(const u_char *v, size_t len, unsigned count);
static void fz_carrier_check(const oip_header_t *h);
static void fz_request_check(const oip_result_t *req,
    const oip_options_t *opt, const arena_t *arena, const u_char *body,
    size_t len, off_t ihcl);
static void fz_request_refeed(const oip_result_t *req,
    const oip_options_t *opt);
static void fz_digest_update(void *data, const uint8_t *p, size_t len);
static int fz_segs_equal(const oip_seg_t *a, size_t na, const oip_seg_t *b,
    size_t nb);
static void fz_digest_same(const oip_result_t *req, oip_options_t *opt,
    const u_char *body, size_t len, off_t ihcl, oip_encoding_e enc);
static void fz_sink_same(const oip_result_t *req, oip_options_t *opt,
    const u_char *body, size_t len, off_t ihcl, oip_encoding_e enc,
    uint64_t sum);



static oip_form_e
fz_form(unsigned v)
{
    switch (v & 3) {
    case 1:
        return OIP_FORM_BINARY;
    case 2:
        return OIP_FORM_JSON;
    default:
        return OIP_FORM_KEEP;
    }
}


/* an oip_raw_input declaration from the config; -1 if it is refused */

static int
fz_raw_config(const u_char *c, const u_char *body, size_t len,
    oip_raw_input_t *raw)
{
    int            rc;
    char           buf[64], err[128];
    size_t         i, rank, n, deduced;
    unsigned       dim;
    const char    *name, *dt;
    const u_char  *dims;

    dt = fz_dtypes[c[7] % 16];
    name = fz_raw_names[(c[8] >> 5) & 3];

    rank = 1 + (c[8] & 3);
    deduced = (c[8] >> 2) & 7;

    n = 0;
    dims = (const u_char *) buf;

    if (c[14] & 0x1f) {
        /* any text, read in place: the parser's own refusals */
        n = (c[14] & 0x1f) < len ? (c[14] & 0x1f) : len;
        dims = body;

    } else if (c[7] % 16 == 13 && !(c[8] & 0x80)) {
        /* BYTES is one element; the other dims test the refusal */
        buf[n++] = '1';

    } else {
        for (i = 0; i < rank; i++) {
            dim = 1 + ((c[9 + i / 2] >> ((i % 2) * 4)) & 15);

            n += snprintf(buf + n, sizeof(buf) - n, "%s%d", i ? "," : "",
                          i == deduced ? -1 : (int) dim);
        }
    }

    memset(err, 0, sizeof(err));

    rc = oip_raw_input_init(raw, (const u_char *) name, strlen(name),
                            (const u_char *) dt, strlen(dt),
                            dims, n, err, sizeof(err));

    fz_assert(rc == 0 || (rc == -1 && err[0] != '\0'),
              "oip_raw_input_init failed without a message");
    fz_assert(strnlen(err, sizeof(err)) < sizeof(err),
              "oip_raw_input_init: error not NUL-terminated");

    if (rc == 0) {
        fz_assert(raw->rank >= 1 && raw->rank <= OIP_RAW_RANK, "raw rank");
        fz_assert(strnlen(raw->text, sizeof(raw->text)) < sizeof(raw->text),
                  "raw text not NUL-terminated");
    }

    return rc;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    off_t             ihcl;
    size_t            len, n;
    oip_alloc_t       alloc;
    arena_t        arena;
    const u_char     *c, *body;
    oip_options_t     opt;
    u_char           *made;
    oip_result_t      req, gen;
    oip_encoding_e    enc;
    oip_digest_t      dg;
    oip_raw_input_t   raw;
    oip_header_t      hd;
    uint64_t          sum;

    if (size < FZ_REQ_CONFIG) {
        return 0;
    }

    c = data;
    body = data + FZ_REQ_CONFIG;
    len = size - FZ_REQ_CONFIG;

    memset(&opt, 0, sizeof(oip_options_t));

    opt.inputs = fz_form(c[0]);
    opt.outputs = fz_form(c[0] >> 2);
    opt.max_depth = 1 + c[1] % 200;
    opt.raw_outputs = (c[2] & 0x10) ? OIP_FORM_JSON : OIP_FORM_BINARY;
    opt.finite_upstream = (c[2] & 0x20) ? 1 : 0;

    if (c[14] & 0x20) {
        opt.levels = 2;
        opt.default_level = 2;
    }

    if (c[14] >> 6) {
        opt.priority = c[14] >> 6;
        opt.priority_set = 1;
    }

    if (c[0] & 0x40) {
        opt.max_json_size = 16 + 16 * (size_t) c[11];
        opt.max_tensor_size = 8 * (size_t) c[12];

    } else {
        opt.max_json_size = FZ_DEFAULT_LIMIT;
        opt.max_tensor_size = FZ_DEFAULT_LIMIT;
    }

    switch ((c[0] >> 4) & 3) {
    case 1:
        enc = OIP_ENC_GZIP;
        break;
    case 2:
        enc = OIP_ENC_DEFLATE;
        break;
    default:
        enc = OIP_ENC_NONE;
    }

    if ((c[0] & 0x80) && fz_raw_config(c, body, len, &raw) == 0) {
        opt.raw = &raw;
    }

    if (c[15] & 0x1f) {
        n = (c[15] & 0x1f) < len ? (c[15] & 0x1f) : len;
        fz_ihcl_parse_check(body, n);
        fz_framing_check(body, n, (c[15] >> 5) & 3);
    }

    if ((c[15] & 0x1f) == 0x1f) {
        /* long enough for a media type */
        hd.data = body;
        hd.len = len < 160 ? len : 160;
        hd.count = 1;
        fz_carrier_check(&hd);
    }

    arena_init(&arena, &alloc);
    made = NULL;

    if (c[2] & 0x40) {
        opt.signature = fz_signature(&alloc, &body, &len);
        opt.coerce = (c[2] & 0x80) ? 1 : 0;
        opt.model = (const u_char *) "m";
        opt.model_len = 1;
    }

    ihcl = fz_ihcl(c[2], c + 3, len);

    if ((c[7] & 0x80) && opt.signature) {
        /* a generate request: the infer request it makes goes on */

        oip_generate_request(&gen, &alloc, &opt, body, len);

        fz_assert(gen.status == 0 || gen.status == 400 || gen.status == 413
                  || gen.status == 500, "a generate request's status");
        fz_error_check(gen.status, gen.error, gen.reason == OIP_REASON_NONE
                       && gen.status ? OIP_REASON_OTHER : gen.reason);

        if (gen.status != 0) {
            arena_destroy(&arena);
            return 0;
        }

        fz_segs_check(gen.segs, gen.nsegs, gen.body_len, gen.body_len);

        body = fz_flatten(gen.segs, gen.nsegs, gen.body_len);
        len = gen.body_len;
        made = (u_char *) body;
        ihcl = -1;
        enc = OIP_ENC_NONE;
    }

    sum = 0;

    if (c[15] & 0x80) {
        dg.data = &sum;
        dg.update = fz_digest_update;
        opt.digest = &dg;
        opt.version = (const u_char *) "1";
        opt.version_len = 1;
    }

    if (c[2] & 0x04) {
        arena.fail_at = 1 + (size_t) c[13];
        arena.fail_all = (c[2] & 0x08) ? 1 : 0;
    }

    oip_request_process(&req, &alloc, &opt,
                        &(oip_framing_t) { ihcl, enc, OIP_CARRIER_HEADER,
                                           0, 0 },
                        body, len);


#ifdef FZ_DEBUG
    /* -DFZ_DEBUG: what each input gives, to check seeds by eye */
    fprintf(stderr, "ihcl %lld, status %d%s%s, %s\n", (long long) ihcl,
            req.status, req.rewritten ? ", rewritten" : "",
            req.binary ? ", binary" : "", req.error);
#endif

    fz_request_check(&req, &opt, &arena, body, len, ihcl);

    fz_assert(!req.digested || (req.status == 0 && opt.digest),
              "digested without a digest asked, or refused");

    if (opt.digest && !(c[2] & 0x04)) {
        fz_digest_same(&req, &opt, body, len, ihcl, enc);
    }

    if (!(c[2] & 0x04)) {
        fz_sink_same(&req, &opt, body, len, ihcl, enc, sum);
    }

    /* an input re-typed to FP16 goes binary, which json would convert */

    if (req.status == 0 && req.rewritten
        && !(req.coerced && opt.inputs == OIP_FORM_JSON))
    {
        fz_request_refeed(&req, &opt);
    }

    free(made);
    arena_destroy(&arena);

    return 0;
}


/* every byte of the canonical form is read: ASan sees a bad pointer */

static void
fz_digest_update(void *data, const uint8_t *p, size_t len)
{
    size_t     i;
    uint64_t  *sum = data;

    for (i = 0; i < len; i++) {
        *sum = *sum * 31 + p[i];
    }
}


/* two lists of segments hold the same bytes, boundaries aside */

static int
fz_segs_equal(const oip_seg_t *a, size_t na, const oip_seg_t *b, size_t nb)
{
    size_t  ia, ib, oa, ob, n;

    ia = 0;
    ib = 0;
    oa = 0;
    ob = 0;

    for ( ;; ) {
        while (ia < na && oa == a[ia].len) {
            ia++;
            oa = 0;
        }

        while (ib < nb && ob == b[ib].len) {
            ib++;
            ob = 0;
        }

        if (ia == na || ib == nb) {
            return ia == na && ib == nb;
        }

        n = a[ia].len - oa < b[ib].len - ob ? a[ia].len - oa
                                            : b[ib].len - ob;

        if (memcmp(a[ia].data + oa, b[ib].data + ob, n) != 0) {
            return 0;
        }

        oa += n;
        ob += n;
    }
}


/* asking for a digest changes nothing of what is sent */

static void
fz_digest_same(const oip_result_t *req, oip_options_t *opt,
    const u_char *body, size_t len, off_t ihcl, oip_encoding_e enc)
{
    arena_t              arena;
    oip_alloc_t          alloc;
    oip_result_t         plain;
    const oip_digest_t  *asked;

    arena_init(&arena, &alloc);
    asked = opt->digest;
    opt->digest = NULL;

    oip_request_process(&plain, &alloc, opt,
                        &(oip_framing_t) { ihcl, enc, OIP_CARRIER_HEADER,
                                           0, 0 },
                        body, len);

    fz_assert(plain.status == req->status, "a digest changed the verdict");
    fz_assert(plain.rewritten == req->rewritten
              && plain.body_len == req->body_len
              && plain.header_len == req->header_len,
              "a digest changed the body");

    if (plain.status == 0 && plain.rewritten) {
        fz_assert(fz_segs_equal(plain.segs, plain.nsegs, req->segs,
                                req->nsegs),
                  "a digest changed the bytes sent");
    }

    opt->digest = asked;

    arena_destroy(&arena);
}


static void
fz_sink_same(const oip_result_t *req, oip_options_t *opt,
    const u_char *body, size_t len, off_t ihcl, oip_encoding_e enc,
    uint64_t sum)
{
    arena_t              arena;
    uint64_t             again;
    fz_spool_t           fs;
    oip_sink_t           sink;
    oip_alloc_t          alloc;
    oip_digest_t         dg;
    oip_result_t         res;
    const oip_digest_t  *asked;

    arena_init(&arena, &alloc);
    fz_spool_init(&sink, &fs, len);

    opt->sink = &sink;

    /* a digest hashes the same bytes, its JSON data read again */

    asked = opt->digest;
    again = 0;

    if (asked) {
        dg.data = &again;
        dg.update = fz_digest_update;
        opt->digest = &dg;
    }

    oip_request_process(&res, &alloc, opt,
                        &(oip_framing_t) { ihcl, enc,
                                           OIP_CARRIER_HEADER, 0, 0 },
                        body, len);

    opt->sink = NULL;
    opt->digest = asked;

    fz_assert(enc == OIP_ENC_NONE || res.status != 0 || fs.inflated,
              "an encoded body converted, not inflated to the sink");
    fz_assert(res.digested == req->digested
              && (!req->digested || again == sum),
              "a sink changed the digest");

    fz_spooled_same(req, &res, &fs);

    fz_spool_free(&fs);
    arena_destroy(&arena);
}


/*
 * A model's metadata read into a signature, or NULL when it is refused:
 * a signature found is whole (every offset inside it, every name found
 * where the lookup says), and copied elsewhere it is the same.
 */

static const oip_signature_t *
fz_signature(const oip_alloc_t *alloc, const u_char **body, size_t *len)
{
    int                      rc;
    size_t                   n, i, index, count;
    const u_char            *name;
    oip_result_t             res;
    oip_signature_t         *sig;
    const oip_sig_tensor_t  *t;

    if (*len < 2) {
        return NULL;
    }

    n = (*body)[0] | ((size_t) (*body)[1] << 8);
    n = n < *len - 2 ? n : *len - 2;

    rc = oip_signature_parse(&res, alloc, *body + 2, n, &sig);

    *body += 2 + n;
    *len -= 2 + n;

    fz_assert(rc == res.status, "the status returned is the status set");

    if (rc != 0) {
        fz_assert(rc == 502 || rc == 500, "metadata refused: not 502/500");
        fz_assert(sig == NULL, "a refused signature returned");
        fz_assert(strlen(res.error) > 0, "a refusal without a message");
        return NULL;
    }

    count = (size_t) sig->ninputs + sig->noutputs;
    fz_assert(sizeof(oip_signature_t) + count * sizeof(oip_sig_tensor_t)
              <= sig->size, "the tensors past the signature's end");

    t = oip_sig_tensors(sig);

    for (i = 0; i < count; i++) {
        fz_assert(t[i].name + (size_t) t[i].name_len <= sig->size,
                  "a name past the signature's end");
        fz_assert(t[i].rank == OIP_SIG_ANY_RANK
                  || t[i].dims + t[i].rank * sizeof(int64_t) <= sig->size,
                  "dimensions past the signature's end");
        fz_assert(t[i].dt == OIP_SIG_ANY_DT
                  || (t[i].dt >= 0 && t[i].dt < 14), "a datatype unknown");

        name = oip_sig_name(sig, &t[i]);
        fz_assert(oip_sig_find(sig, i >= sig->ninputs, name, t[i].name_len,
                               &index) == &t[i],
                  "a declared name not found where it is");
    }

    return sig;
}


/* oip_ihcl_parse() against a plain reading of what it documents */

static void
fz_ihcl_parse_check(const u_char *v, size_t len)
{
    int       ok, rc;
    size_t    i;
    uint64_t  x, n, d;

    /* decimal digits only, no leading zero but a lone "0", in 64 bits */

    ok = (len > 0 && !(v[0] == '0' && len > 1));
    x = 0;

    for (i = 0; ok && i < len; i++) {
        if (v[i] < '0' || v[i] > '9') {
            ok = 0;
            break;
        }

        d = v[i] - '0';

        if (x > UINT64_MAX / 10 || x * 10 > UINT64_MAX - d) {
            ok = 0;
            break;
        }

        x = x * 10 + d;
    }

    n = 12345;
    rc = oip_ihcl_parse(v, len, &n);

    fz_assert(rc == (ok ? 0 : -1), "oip_ihcl_parse: wrong verdict");
    fz_assert(!ok || n == x, "oip_ihcl_parse: wrong value");
}


/*
 * The framing headers, as a request and as an answer carry them: the
 * verdict of each follows from oip_ihcl_parse() and the encodings the
 * protocol names, and a refusal always says why.
 */

static void
fz_framing_check(const u_char *v, size_t len, unsigned count)
{
    int            ihcl_ok, enc, rc;
    size_t         i;
    uint64_t       n;
    oip_header_t   h, none;
    oip_result_t   res;
    oip_framing_t  f;

    static const char  *encodings[] = { "gzip", "deflate", "identity" };

    memset(&none, 0, sizeof(oip_header_t));

    n = 0;
    h.data = v;
    h.len = len;
    h.count = count;

    ihcl_ok = (count == 0
               || (count == 1 && oip_ihcl_parse(v, len, &n) == 0
                   && n <= (uint64_t) INT64_MAX));

    /* as an IHCL, on a request and on an answer */

    rc = oip_request_framing(&res, &f, &h, &none, NULL);

    fz_assert(rc == res.status, "request framing: status returned");
    fz_assert(rc == (ihcl_ok ? 0 : 400), "request framing: IHCL verdict");
    fz_assert(rc == 0 || res.error[0] != '\0', "request framing: no error");
    fz_assert(rc != 0 || f.ihcl == (count ? (int64_t) n : -1),
              "request framing: IHCL value");
    fz_assert(rc != 0 || f.encoding == OIP_ENC_NONE,
              "request framing: an encoding out of nothing");

    rc = oip_response_framing(&res, &f, &h, NULL);

    fz_assert(rc == (ihcl_ok ? 0 : 502), "answer framing: IHCL verdict");
    fz_assert(rc == 0 || strncmp(res.error, "upstream answer: ", 17) == 0,
              "answer framing: 502 without its prefix");

    /* as a Content-Encoding: one of three tokens, any case, once */

    enc = -1;

    for (i = 0; count == 1 && i < 3; i++) {
        if (strlen(encodings[i]) == len
            && strncasecmp(encodings[i], (const char *) v, len) == 0)
        {
            enc = (int) i;
        }
    }

    rc = oip_request_framing(&res, &f, &none, &h, &none);

    fz_assert(rc == ((count == 0 || enc >= 0) ? 0 : 415),
              "request framing: encoding verdict");
    fz_assert(rc != 0 || f.ihcl == -1, "request framing: an IHCL out of "
              "nothing");
    fz_assert(rc != 0 || f.encoding == (enc == 0 ? OIP_ENC_GZIP
                                        : enc == 1 ? OIP_ENC_DEFLATE
                                        : OIP_ENC_NONE),
              "request framing: which encoding");
}


/*
 * As a Content-Type: a carrier's json-header-size is read as an IHCL,
 * the same on a request and on an answer, and the media type the
 * gateway writes for it reads back the same.
 */

static void
fz_carrier_check(const oip_header_t *h)
{
    int            rc, rc2;
    char           buf[OIP_CARRIER_TYPE_LEN], num[24];
    oip_header_t   none, t, ih;
    oip_result_t   res;
    oip_framing_t  f, g;

    memset(&none, 0, sizeof(oip_header_t));

    rc = oip_request_framing(&res, &f, &none, &none, h);

    fz_assert(rc == 0 || rc == 400, "carrier: request verdict");
    fz_assert(rc == 0 || res.error[0] != '\0', "carrier: no error");
    fz_assert(rc != 0 || f.carrier != OIP_CARRIER_HEADER || f.ihcl == -1,
              "carrier: an IHCL from another media type");

    rc2 = oip_response_framing(&res, &g, &none, h);

    fz_assert(rc2 == (rc ? 502 : 0), "carrier: answer verdict");
    fz_assert(rc != 0 || (g.carrier == f.carrier && g.ihcl == f.ihcl),
              "carrier: an answer read otherwise");

    if (rc != 0 || f.carrier == OIP_CARRIER_HEADER) {
        return;
    }

    t.data = (const u_char *) buf;
    t.len = oip_carrier_type(f.carrier, f.ihcl, buf, sizeof(buf));
    t.count = 1;

    fz_assert(t.len > 0, "carrier: its media type does not fit");

    rc = oip_request_framing(&res, &g, &none, &none, &t);

    fz_assert(rc == 0 && g.carrier == f.carrier && g.ihcl == f.ihcl,
              "carrier: its media type reads otherwise");

    if (f.ihcl < 0 || f.ihcl == INT64_MAX) {
        return;
    }

    /* an IHCL header that says another length */

    ih.data = (const u_char *) num;
    ih.len = snprintf(num, sizeof(num), "%lld", (long long) f.ihcl + 1);
    ih.count = 1;

    rc = oip_request_framing(&res, &g, &ih, &none, &t);

    fz_assert(rc == 400, "carrier: two lengths that differ accepted");
}


static void
fz_request_check(const oip_result_t *req, const oip_options_t *opt,
    const arena_t *arena, const u_char *body, size_t len, off_t ihcl)
{
    size_t    i, j;
    unsigned  sum;

    fz_assert(req->status == 0 || req->status == 400 || req->status == 413
              || req->status == 415 || req->status == 500,
              "request status not 0, 400, 413, 415 or 500");

    fz_error_check(req->status, req->error, req->reason);

    if (req->status == 500) {
        /* 500 is for memory only; else a check failed without a status */
        fz_assert(arena->failed, "500 without an allocation failure");
    }

    if (req->status != 0) {
        return;
    }

    fz_assert(!req->raw || ihcl == 0, "raw without IHCL 0");
    fz_assert(!req->decompressed || req->rewritten,
              "decompressed but sent as it came");

    /* the timeout's place: in the new body, the client's digits there */

    fz_assert(!req->deadline_at || (req->rewritten && req->has_timeout
                                    && req->timeout > 0
                                    && req->deadline_len >= 1
                                    && req->deadline_len <= 19),
              "a timeout's place without a timeout");

    if (req->deadline_at) {
        for (i = 0, sum = 0; i < req->nsegs; i++) {
            sum |= (req->deadline_at >= req->segs[i].data
                    && req->deadline_at + req->deadline_len
                       <= req->segs[i].data + req->segs[i].len);
        }

        fz_assert(sum, "a timeout's place outside the new body");

        for (j = 0; j < req->deadline_len; j++) {
            fz_assert(req->deadline_at[j] >= '0'
                      && req->deadline_at[j] <= '9',
                      "a timeout's place holds other than its digits");
        }
    }

    if (req->rewritten) {
        fz_segs_check(req->segs, req->nsegs, req->header_len,
                      req->body_len);

        fz_assert(req->binary || req->header_len == req->body_len,
                  "JSON-only body with header_len != body_len");

        /* only a raw pass-through has no JSON header */
        fz_assert(req->header_len > 0 || (req->raw && opt->raw == NULL),
                  "an empty JSON header");

    } else if (!req->raw) {
        fz_assert(req->body_len == len, "untouched, but body_len != len");
        fz_assert(req->header_len == (ihcl > 0 ? (size_t) ihcl : len),
                  "untouched, but header_len is not the IHCL");
        fz_assert(req->binary == (ihcl > 0), "untouched: binary flag");
        fz_assert(req->nsegs == 0, "untouched, but segments");

        /* the body is the caller's: ASan checks it is still readable */
        for (sum = 0, i = 0; i < len; i++) {
            sum += body[i];
        }

        fz_sink += sum;
    }

    fz_assert(req->wish.n == 0 || (req->wish.listed
                                   && req->wish.outputs != NULL),
              "wish outputs without a list");

    for (i = 0; i < req->wish.n; i++) {
        fz_assert(req->wish.outputs[i].len > 0, "a wished output without "
                  "a name");

        for (sum = 0, j = 0; j < req->wish.outputs[i].len; j++) {
            sum = sum * 31 + req->wish.outputs[i].name[j];
        }

        fz_sink += sum;
    }
}


/*
 * The rewritten request, as the upstream gets it, fed back under the
 * same options: valid, and nothing left to change.
 */

static void
fz_request_refeed(const oip_result_t *req, const oip_options_t *opt)
{
    off_t           ihcl;
    u_char         *out, *again_out;
    oip_alloc_t     alloc;
    arena_t      arena;
    oip_options_t   o;
    oip_result_t    again;

    out = fz_flatten(req->segs, req->nsegs, req->body_len);

    o = *opt;
    o.raw = NULL;

    if (o.max_depth < FZ_REFEED_DEPTH) {
        o.max_depth = FZ_REFEED_DEPTH;
    }

    /*
     * The codec's own additions (binary_data_size, a raw request's
     * header) may take a message past oip_max_json_size: the limit
     * bounds what comes in, never what the gateway adds.
     */

    if (o.max_json_size < req->header_len) {
        o.max_json_size = req->header_len;
    }

    ihcl = req->binary ? (off_t) req->header_len : -1;

    arena_init(&arena, &alloc);

    oip_request_process(&again, &alloc, &o,
                        &(oip_framing_t) { ihcl, OIP_ENC_NONE,
                                           OIP_CARRIER_HEADER, 0, 0 },
                        out,
                        req->body_len);

    if (again.status != 0) {
        fprintf(stderr, "refeed: %d %s\n", again.status, again.error);
        fprintf(stderr, "rewritten (%zu, header %zu): %.*s\n", req->body_len,
                req->header_len, (int) req->header_len, out);
    }

    fz_assert(again.status == 0, "the codec refuses its own request");

    /* a timeout's place is written anew, the same bytes */

    if (again.rewritten && again.deadline_at) {
        again_out = fz_flatten(again.segs, again.nsegs, again.body_len);
        fz_assert(again.body_len == req->body_len
                  && memcmp(again_out, out, req->body_len) == 0,
                  "the codec's own request with a timeout changed again");
        free(again_out);

    } else {
        fz_assert(!again.rewritten,
                  "the codec's own request rewritten again");
    }

    arena_destroy(&arena);
    free(out);
}
