
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The codec is reentrant: oip_thread_pool runs it in several threads at
 * once.  Every kind of conversion (each datatype both ways, gzip, raw
 * binary requests, signatures read and checked, digests, answers, gRPC)
 * runs first alone, then in four threads at once, round after round, and
 * must give the same bytes every time.  Built with ThreadSanitizer (its
 * own flavour in t/Makefile: TSan does not combine with ASan), which
 * fails the run on a data race; also built with the unit tests' ASan.
 *
 * It runs in a locale whose radix character is a comma (LOCALE below,
 * made by build.sh with localedef into LOCPATH): numbers long enough to
 * reach strtod() must still read as the C locale reads them.
 */


#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <locale.h>
#include <pthread.h>
#include <stdlib.h>

#include "codec_test.h"


#define THREADS   4
#define ROUNDS    6
#define LOCALE    "de_DE.UTF-8"


/* long enough that only strtod() decides them: just off a midpoint */

#define FP64_LONG                                                             \
    "1.000000000000000111022302462515654042363166809082031250000000000001"
#define FP64_LONG_EVEN                                                        \
    "1.00000000000000011102230246251565404236316680908203125000000000000"
#define FP32_LONG                                                             \
    "1.0000000596046447753906250000000000000000000000000000000000000001"
#define FP64_SMALL                                                            \
    "2.2250738585072012595738230046895744447456073431447063488e-308"

#define EVERY_TYPE                                                            \
    "{\"id\":\"r\",\"inputs\":["                                              \
    "{\"name\":\"b\",\"shape\":[3],\"datatype\":\"BOOL\","                    \
    "\"data\":[true,false,true]},"                                            \
    "{\"name\":\"u8\",\"shape\":[2],\"datatype\":\"UINT8\",\"data\":[0,255]},"\
    "{\"name\":\"u16\",\"shape\":[2],\"datatype\":\"UINT16\","                \
    "\"data\":[0,65535]},"                                                    \
    "{\"name\":\"u32\",\"shape\":[2],\"datatype\":\"UINT32\","                \
    "\"data\":[1,4294967295]},"                                               \
    "{\"name\":\"u64\",\"shape\":[2],\"datatype\":\"UINT64\","                \
    "\"data\":[2,18446744073709551615]},"                                     \
    "{\"name\":\"i8\",\"shape\":[2],\"datatype\":\"INT8\","                   \
    "\"data\":[-128,127]},"                                                   \
    "{\"name\":\"i16\",\"shape\":[2],\"datatype\":\"INT16\","                 \
    "\"data\":[-32768,32767]},"                                               \
    "{\"name\":\"i32\",\"shape\":[2,2],\"datatype\":\"INT32\","               \
    "\"data\":[[-2147483648,2147483647],[0,-1]]},"                            \
    "{\"name\":\"i64\",\"shape\":[2],\"datatype\":\"INT64\","                 \
    "\"data\":[-9223372036854775808,9223372036854775807]},"                   \
    "{\"name\":\"f16\",\"shape\":[4],\"datatype\":\"FP16\","                  \
    "\"data\":[1.0,0.1,65504,-2.5e-3]},"                                      \
    "{\"name\":\"bf16\",\"shape\":[3],\"datatype\":\"BF16\","                 \
    "\"data\":[1.0,3.14159,-1e30]},"                                          \
    "{\"name\":\"f32\",\"shape\":[4],\"datatype\":\"FP32\",\"data\":["        \
    FP32_LONG ",0.1,3.4028235e38,1e-45]},"                                    \
    "{\"name\":\"f64\",\"shape\":[4],\"datatype\":\"FP64\",\"data\":["        \
    FP64_LONG "," FP64_LONG_EVEN "," FP64_SMALL ",NaN]},"                     \
    "{\"name\":\"s\",\"shape\":[2],\"datatype\":\"BYTES\","                   \
    "\"data\":[\"caf\\u00e9\",\"\"]}],"                                       \
    "\"outputs\":[{\"name\":\"y\"}],\"parameters\":{\"p\":1.5}}"

#define METADATA                                                              \
    "{\"name\":\"m\",\"versions\":[\"1\"],\"platform\":\"x\",\"inputs\":["   \
    "{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[-1,3]},"                \
    "{\"name\":\"b\",\"datatype\":\"INT64\",\"shape\":[-1]}],"                \
    "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP64\",\"shape\":[-1]}]}"

#define FITS                                                                  \
    "{\"inputs\":[{\"name\":\"a\",\"shape\":[2,3],\"datatype\":\"FP32\","     \
    "\"data\":[1,2,3,4,5," FP32_LONG "]},"                                    \
    "{\"name\":\"b\",\"shape\":[1],\"datatype\":\"INT64\",\"data\":[7]}]}"

#define ANSWER_JSON                                                           \
    "{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":["             \
    "{\"name\":\"y\",\"shape\":[3],\"datatype\":\"FP64\","                    \
    "\"data\":[" FP64_LONG ",0.5," FP64_SMALL "]},"                           \
    "{\"name\":\"z\",\"shape\":[2],\"datatype\":\"FP16\","                    \
    "\"data\":[0.1,-7]}]}"


/* what a conversion gave: its status and bytes, and the digest's bytes */

typedef struct {
    u_char          *p;
    size_t           len;
    size_t           cap;
} buf_t;


/*
 * The inputs some conversions take, made by the codec itself: each
 * thread makes its own, at once with the others, so that no thread finds
 * anything the codec might make lazily already made by another.
 */

typedef struct {
    u_char           binary[4096];   /* EVERY_TYPE, binary */
    size_t           binary_len;
    size_t           binary_ihcl;
    u_char           gzip[4096];     /* EVERY_TYPE, gzip */
    size_t           gzip_len;
    u_char           answer[4096];   /* ANSWER_JSON, binary */
    size_t           answer_len;
    size_t           answer_ihcl;
} inputs_t;


typedef int (*case_fn)(buf_t *out, const inputs_t *in);

typedef struct {
    const char      *name;
    case_fn          run;
    buf_t            want;       /* computed alone, after the threads */
} case_t;


static pthread_barrier_t  start;


static void
put(buf_t *b, const void *p, size_t len)
{
    if (len == 0) {
        return;
    }

    if (b->len + len > b->cap) {
        b->cap = (b->len + len) * 2;
        b->p = realloc(b->p, b->cap);
    }

    memcpy(b->p + b->len, p, len);
    b->len += len;
}


static void
put_status(buf_t *b, int status, const oip_result_t *res)
{
    char  line[OIP_ERROR_LEN + 64];
    int   n;

    n = snprintf(line, sizeof(line), "%d %s|%zu %zu|", status, res->error,
                 res->header_len, res->tensor_bytes);
    put(b, line, (size_t) n);
}


static void
put_segs(buf_t *b, const oip_result_t *res, const u_char *body, size_t len)
{
    size_t  i;

    if (!res->rewritten) {
        put(b, body, len);
        return;
    }

    for (i = 0; i < res->nsegs; i++) {
        put(b, res->segs[i].data, res->segs[i].len);
    }
}


static void
digest_update(void *data, const uint8_t *p, size_t len)
{
    put(data, p, len);
}


/*
 * A message through the codec, alone: a request, or an answer when w is
 * set.  res holds the verdict (its segments are gone), out the bytes.
 */

static int
codec(oip_result_t *res, buf_t *out, const oip_options_t *opt,
    const oip_wish_t *w, const u_char *body, size_t len, int64_t ihcl,
    oip_encoding_e enc)
{
    int            st;
    arena_t        arena;
    oip_alloc_t    alloc;
    oip_framing_t  f;

    memset(res, 0, sizeof(oip_result_t));
    arena_init(&arena, &alloc);

    f.ihcl = ihcl;
    f.encoding = enc;
    f.carrier = OIP_CARRIER_HEADER;
    f.protobuf = 0;
    f.stream = 0;

    st = w ? oip_response_process(res, &alloc, opt, w, &f, body, len)
           : oip_request_process(res, &alloc, opt, &f, body, len);

    if (st == 0) {
        put_segs(out, res, body, len);
    }

    arena_destroy(&arena);

    return st;
}


/* a request's verdict, new body and digest; or an answer's */

static int
request(buf_t *out, const oip_options_t *base, const u_char *body,
    size_t len, int64_t ihcl, oip_encoding_e enc)
{
    int             st;
    buf_t           dg, got;
    oip_result_t    res;
    oip_digest_t    d;
    oip_options_t   o;

    memset(&dg, 0, sizeof(dg));
    memset(&got, 0, sizeof(got));

    d.data = &dg;
    d.update = digest_update;

    o = *base;
    o.digest = &d;
    o.model = (const u_char *) "m";
    o.model_len = 1;

    st = codec(&res, &got, &o, NULL, body, len, ihcl, enc);

    put_status(out, st, &res);
    put(out, got.p, got.len);
    put(out, "|", 1);
    put(out, dg.p, dg.len);

    free(got.p);
    free(dg.p);

    return st;
}


static int
answer(buf_t *out, const oip_wish_t *w, const u_char *body, size_t len,
    int64_t ihcl)
{
    int            st;
    buf_t          got;
    oip_result_t   res;

    memset(&got, 0, sizeof(got));

    st = codec(&res, &got, &opts, w, body, len, ihcl, OIP_ENC_NONE);

    put_status(out, st, &res);
    put(out, got.p, got.len);
    free(got.p);

    return st;
}


static int
json_to_binary(buf_t *out, const inputs_t *in)
{
    oip_options_t  o;

    o = opts;
    o.inputs = OIP_FORM_BINARY;
    o.outputs = OIP_FORM_BINARY;

    return request(out, &o, (const u_char *) EVERY_TYPE, strlen(EVERY_TYPE),
                   -1, OIP_ENC_NONE);
}


static int
binary_to_json(buf_t *out, const inputs_t *in)
{
    oip_options_t  o;

    o = opts;
    o.inputs = OIP_FORM_JSON;
    o.outputs = OIP_FORM_JSON;

    return request(out, &o, in->binary, in->binary_len,
                   (int64_t) in->binary_ihcl, OIP_ENC_NONE);
}


static int
gzip_keep(buf_t *out, const inputs_t *in)
{
    oip_options_t  o;

    o = opts;
    o.finite_upstream = 1;

    /* NaN in an FP64 input: refused for a finite upstream, after inflate */

    return request(out, &o, in->gzip, in->gzip_len, -1, OIP_ENC_GZIP) != 400;
}


static int
raw(buf_t *out, const inputs_t *in)
{
    int              st, i;
    char             err[128];
    u_char           body[48];
    oip_options_t    o;
    oip_raw_input_t  r;

    if (oip_raw_input_init(&r, (const u_char *) "IMG", 3,
                           (const u_char *) "FP32", 4,
                           (const u_char *) "-1,3", 4, err, sizeof(err))
        != 0)
    {
        put(out, err, strlen(err));
        return -1;
    }

    for (i = 0; i < 48; i++) {
        body[i] = (u_char) (i * 37 + 11);
    }

    o = opts;
    o.raw = &r;
    o.inputs = OIP_FORM_JSON;
    o.raw_outputs = OIP_FORM_JSON;

    st = request(out, &o, body, sizeof(body), 0, OIP_ENC_NONE);

    o.inputs = OIP_FORM_BINARY;
    o.raw_outputs = OIP_FORM_BINARY;

    return st | request(out, &o, body, sizeof(body), 0, OIP_ENC_NONE);
}


static int
signature(buf_t *out, const inputs_t *in)
{
    int               st;
    arena_t           arena;
    oip_alloc_t       alloc;
    oip_result_t      res;
    oip_options_t     o;
    oip_signature_t  *sig;

    static const char  misfit[] =
        "{\"inputs\":[{\"name\":\"a\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"data\":[1,2,3,4]}]}";

    memset(&res, 0, sizeof(res));
    arena_init(&arena, &alloc);

    st = oip_signature_parse(&res, &alloc, (const u_char *) METADATA,
                             strlen(METADATA), &sig);
    put_status(out, st, &res);

    if (st == 0) {
        put(out, sig, sig->size);

        o = opts;
        o.signature = sig;
        o.coerce = 1;
        o.inputs = OIP_FORM_BINARY;

        st = request(out, &o, (const u_char *) FITS, strlen(FITS), -1,
                     OIP_ENC_NONE);

        /* a misfit: a shape and a missing input, refused with a 400 */

        st |= (request(out, &o, (const u_char *) misfit, strlen(misfit), -1,
                       OIP_ENC_NONE)
               != 400);
    }

    arena_destroy(&arena);

    return st;
}


static int
answer_to_binary(buf_t *out, const inputs_t *in)
{
    oip_wish_t  w;

    memset(&w, 0, sizeof(w));
    w.binary = 1;

    return answer(out, &w, (const u_char *) ANSWER_JSON, strlen(ANSWER_JSON),
                  -1);
}


static int
answer_to_json(buf_t *out, const inputs_t *in)
{
    oip_wish_t  w;

    memset(&w, 0, sizeof(w));

    return answer(out, &w, in->answer, in->answer_len,
                  (int64_t) in->answer_ihcl);
}


static int
error_answer(buf_t *out, const inputs_t *in)
{
    arena_t        arena;
    oip_alloc_t    alloc;
    oip_result_t   res;

    static const char  html[] =
        "<html><head><title>502 Bad Gateway</title></head></html>";
    static const char  detail[] = "{\"detail\":[{\"msg\":\"field required\","
                                  "\"loc\":[\"body\",\"inputs\"]}]}";

    memset(&res, 0, sizeof(res));
    arena_init(&arena, &alloc);

    put_status(out, oip_response_error(&res, &alloc, 502,
                                       &(oip_header_t) {
                                           (const u_char *) "text/html", 9,
                                           1 },
                                       (const u_char *) html,
                                       sizeof(html) - 1),
               &res);
    put_status(out, oip_response_error(&res, &alloc, 422,
                                       &(oip_header_t) {
                                           (const u_char *) OIP_TYPE_JSON,
                                           sizeof(OIP_TYPE_JSON) - 1, 1 },
                                       (const u_char *) detail,
                                       sizeof(detail) - 1),
               &res);

    arena_destroy(&arena);

    return 0;
}


static int
grpc(buf_t *out, const inputs_t *in)
{
    int                  st;
    oip_result_t         res;
    oip_options_t        o;
    oip_grpc_options_t   g;

    memset(&g, 0, sizeof(g));

    g.model = (const u_char *) "m";
    g.model_len = 1;
    g.max_message = 1 << 20;

    o = opts;
    o.inputs = OIP_FORM_BINARY;
    o.grpc = &g;

    st = codec(&res, out, &o, NULL, in->binary, in->binary_len,
               in->binary_ihcl, OIP_ENC_NONE);
    put_status(out, st, &res);

    /* typed contents have no field for FP16: a 400 */

    g.typed = 1;

    st |= (codec(&res, out, &o, NULL, in->binary, in->binary_len,
                 in->binary_ihcl, OIP_ENC_NONE)
           != 400);
    put_status(out, res.status, &res);

    return st;
}


static case_t  cases[] = {
    { "every datatype, JSON to binary, with its digest", json_to_binary,
      { NULL, 0, 0 } },
    { "every datatype, binary to JSON", binary_to_json, { NULL, 0, 0 } },
    { "a gzip body, inflated and checked", gzip_keep, { NULL, 0, 0 } },
    { "raw binary requests, to JSON and to binary", raw, { NULL, 0, 0 } },
    { "a signature read, a request re-typed and one refused", signature,
      { NULL, 0, 0 } },
    { "a JSON answer to binary", answer_to_binary, { NULL, 0, 0 } },
    { "a binary answer to JSON", answer_to_json, { NULL, 0, 0 } },
    { "error answers as {\"error\"}", error_answer, { NULL, 0, 0 } },
    { "a binary request as a ModelInferRequest, raw and typed", grpc,
      { NULL, 0, 0 } },
};

#define NCASES  (sizeof(cases) / sizeof(cases[0]))


typedef struct {
    pthread_t        tid;
    int              n;
    int              failed;         /* prepare() failed */
    inputs_t         in;
    buf_t            first[NCASES];  /* each case's first round */
    int              differ[NCASES]; /* later rounds unlike the first */
} worker_t;


/* the inputs the conversions take, made by the codec */

static int
prepare(inputs_t *in)
{
    int            st;
    buf_t          b;
    oip_result_t   res;
    oip_options_t  o;
    oip_wish_t     w;

    memset(&b, 0, sizeof(b));

    o = opts;
    o.inputs = OIP_FORM_BINARY;

    st = codec(&res, &b, &o, NULL, (const u_char *) EVERY_TYPE,
               strlen(EVERY_TYPE), -1, OIP_ENC_NONE);

    if (st != 0 || b.len > sizeof(in->binary)) {
        free(b.p);
        return -1;
    }

    memcpy(in->binary, b.p, b.len);
    in->binary_len = b.len;
    in->binary_ihcl = res.header_len;

    in->gzip_len = compress_with(15 + 16, EVERY_TYPE, strlen(EVERY_TYPE),
                                 in->gzip, sizeof(in->gzip));

    /* the answer, binary: the JSON answer given to a binary wish */

    b.len = 0;
    memset(&w, 0, sizeof(w));
    w.binary = 1;

    st = codec(&res, &b, &opts, &w, (const u_char *) ANSWER_JSON,
               strlen(ANSWER_JSON), -1, OIP_ENC_NONE);

    if (st != 0 || b.len > sizeof(in->answer) || res.header_len == 0) {
        free(b.p);
        return -1;
    }

    memcpy(in->answer, b.p, b.len);
    in->answer_len = b.len;
    in->answer_ihcl = res.header_len;
    free(b.p);

    return 0;
}


static void *
worker(void *data)
{
    int        round;
    size_t     i, k;
    buf_t      got;
    worker_t  *w = data;

    pthread_barrier_wait(&start);

    if (prepare(&w->in) != 0) {
        w->failed = 1;
        return NULL;
    }

    for (round = 0; round < ROUNDS; round++) {
        for (k = 0; k < NCASES; k++) {

            /* each thread in its own order, so that they meet */

            i = (k + (size_t) w->n * 3 + (size_t) round) % NCASES;

            if (round == 0) {
                cases[i].run(&w->first[i], &w->in);
                continue;
            }

            memset(&got, 0, sizeof(got));
            cases[i].run(&got, &w->in);

            if (got.len != w->first[i].len
                || memcmp(got.p, w->first[i].p, got.len) != 0)
            {
                w->differ[i]++;
            }

            free(got.p);
        }
    }

    return NULL;
}


static int
same_buf(const buf_t *a, const buf_t *b)
{
    return a->len == b->len && memcmp(a->p, b->p, a->len) == 0;
}


/* the FP32 and FP64 chunks of the binary request, against strtod_l's */

static void
numbers_as_c_reads_them(const inputs_t *in, locale_t c)
{
    double         d[3];
    float          f;
    const u_char  *p;

    static const char  f64[] = "\"name\":\"f64\"";

    /* chunks follow the header in input order: f64 is the 13th */

    p = in->binary + in->binary_ihcl
        + 3 + 2 + 4 + 8 + 16 + 2 + 4 + 16 + 16 + 8 + 6 + 16;

    memcpy(&f, p - 16, sizeof(float));
    memcpy(d, p, sizeof(d));

    ok(memmem(in->binary, in->binary_ihcl, f64, sizeof(f64) - 1) != NULL
       && f == strtof_l(FP32_LONG, NULL, c)
       && d[0] == strtod_l(FP64_LONG, NULL, c)
       && d[1] == strtod_l(FP64_LONG_EVEN, NULL, c)
       && d[2] == strtod_l(FP64_SMALL, NULL, c)
       && d[0] != d[1] && d[0] > 1.0 && d[2] > 0.0,
       "numbers past 19 digits read as the C locale reads them, in %s",
       LOCALE);
}


int
main(void)
{
    int        i, st, differ, unlike, failed;
    size_t     k;
    buf_t     *want;
    locale_t   c;
    inputs_t   in;
    worker_t  *w;

    if (setlocale(LC_ALL, LOCALE) == NULL
        || strcmp(localeconv()->decimal_point, ",") != 0)
    {
        printf("Bail out! no locale %s with a decimal comma (LOCPATH=%s): "
               "build.sh makes it with localedef\n", LOCALE,
               getenv("LOCPATH") ? getenv("LOCPATH") : "unset");
        return 1;
    }

    ok(strtod("0.5", NULL) == 0.0,
       "the locale is in force: strtod(\"0.5\") stops at the '.'");

    /* the threads first: the codec has run nowhere before them */

    w = calloc(THREADS, sizeof(worker_t));
    pthread_barrier_init(&start, NULL, THREADS);

    for (i = 0; i < THREADS; i++) {
        w[i].n = i;
        pthread_create(&w[i].tid, NULL, worker, &w[i]);
    }

    for (i = 0; i < THREADS; i++) {
        pthread_join(w[i].tid, NULL);
    }

    pthread_barrier_destroy(&start);

    /* then each conversion alone, and what the threads got against it */

    memset(&in, 0, sizeof(in));

    if (prepare(&in) != 0) {
        printf("Bail out! the inputs could not be made\n");
        return 1;
    }

    failed = 0;

    for (i = 0; i < THREADS; i++) {
        failed += w[i].failed
                  || w[i].in.binary_len != in.binary_len
                  || memcmp(w[i].in.binary, in.binary, in.binary_len) != 0
                  || w[i].in.answer_len != in.answer_len
                  || memcmp(w[i].in.answer, in.answer, in.answer_len) != 0;
    }

    ok(failed == 0, "%d threads at once made the same inputs as one alone",
       THREADS);

    c = newlocale(LC_ALL_MASK, "C", (locale_t) 0);
    numbers_as_c_reads_them(&in, c);
    freelocale(c);

    for (k = 0; k < NCASES; k++) {
        want = &cases[k].want;
        st = cases[k].run(want, &in);

        if (!ok(st == 0 && want->len > 0, "alone: %s (%zu bytes)",
                cases[k].name, want->len))
        {
            diag("%.*s", (int) (want->len < 300 ? want->len : 300),
                 want->p);
        }

        differ = 0;
        unlike = 0;

        for (i = 0; i < THREADS; i++) {
            differ += w[i].differ[k];
            unlike += !w[i].failed && !same_buf(&w[i].first[k], want);
            free(w[i].first[k].p);
        }

        ok(differ == 0 && unlike == 0, "%d threads at once, %d rounds: %s, "
           "the bytes alone (%d rounds differ, %d threads)", THREADS, ROUNDS,
           cases[k].name, differ, unlike);

        free(want->p);
    }

    free(w);

    return tap_done();
}
