
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Model signatures: metadata answers as runtimes write them read into a
 * signature, answers that are not metadata refused, and requests checked
 * against it: undeclared and missing inputs, optional ones, datatype,
 * rank and dimensions, undeclared outputs, re-typing JSON numbers, and
 * raw binary requests sized from the model's only input.
 */


#include "codec_test.h"
#include "oip_signature.h"


static arena_t       sig_arena;
static oip_alloc_t   sig_alloc;


#define SIMPLE                                                                \
    "{\"name\":\"simple\",\"versions\":[\"1\"],\"platform\":"               \
    "\"tensorflow_graphdef\",\"inputs\":["                                   \
    "{\"name\":\"INPUT1\",\"datatype\":\"INT32\",\"shape\":[-1,16]},"         \
    "{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[-1,16]}],"        \
    "\"outputs\":["                                                           \
    "{\"name\":\"OUTPUT0\",\"datatype\":\"INT32\",\"shape\":[-1,16]},"        \
    "{\"name\":\"OUTPUT1\",\"datatype\":\"INT32\",\"shape\":[-1,16]}]}"

#define DATA16  "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]"

#define IN0(dt, shape, data)                                                  \
    "{\"name\":\"INPUT0\",\"datatype\":\"" dt "\",\"shape\":" shape ","      \
    "\"data\":" data "}"

#define IN1(dt, shape, data)                                                  \
    "{\"name\":\"INPUT1\",\"datatype\":\"" dt "\",\"shape\":" shape ","      \
    "\"data\":" data "}"

#define BOTH                                                                  \
    IN0("INT32", "[1,16]", DATA16) "," IN1("INT32", "[1,16]", DATA16)


static oip_signature_t *
sig(const char *json)
{
    oip_result_t      res;
    oip_signature_t  *s;

    if (oip_signature_parse(&res, &sig_alloc, (const u_char *) json,
                            strlen(json), &s)
        != 0)
    {
        diag("metadata refused: %d %s", res.status, res.error);
        return NULL;
    }

    return s;
}


static void
sig_refused(const char *json, const char *msg)
{
    oip_result_t      res;
    oip_signature_t  *s;
    int               st;

    st = oip_signature_parse(&res, &sig_alloc, (const u_char *) json,
                             strlen(json), &s);

    if (!ok(st == 502 && s == NULL && strstr(res.error, msg) != NULL,
            "metadata refused: \"%s\"", msg))
    {
        diag("got %d: %s", st, res.error);
    }
}


static void
test_parse(void)
{
    size_t                   i;
    char                     buf[96];
    const int64_t           *d;
    oip_signature_t         *s;
    const oip_sig_tensor_t  *t;

    s = sig(SIMPLE);

    if (!ok(s && s->ninputs == 2 && s->noutputs == 2, "Triton's simple")) {
        return;
    }

    t = oip_sig_find(s, 0, (const u_char *) "INPUT1", 6, &i);
    d = t ? oip_sig_dims(s, t) : NULL;

    ok(t && i == 1 && t->dt == OIP_INT32 && t->rank == 2 && d[0] == -1
       && d[1] == 16, "INPUT1: INT32 [-1,16], sorted after INPUT0");

    ok(oip_sig_find(s, 0, (const u_char *) "OUTPUT0", 7, &i) == NULL
       && oip_sig_find(s, 1, (const u_char *) "OUTPUT0", 7, &i) != NULL
       && oip_sig_find(s, 0, (const u_char *) "INPUT", 5, &i) == NULL
       && oip_sig_find(s, 0, (const u_char *) "INPUT00", 7, &i) == NULL,
       "inputs and outputs apart; no prefix matches");

    ok(strcmp(oip_sig_shape_str(s, t, buf, sizeof(buf)), "[-1,16]") == 0,
       "shape printed");

    ok(strcmp(oip_sig_names(s, 0, buf, sizeof(buf)),
              "'INPUT0', 'INPUT1'") == 0, "names listed");

    /* copied anywhere, it is the same signature: no pointers in it */

    {
        u_char  *copy = malloc(s->size);

        memcpy(copy, s, s->size);
        memset(s, 0xa5, s->size);
        s = (oip_signature_t *) copy;
        t = oip_sig_find(s, 0, (const u_char *) "INPUT0", 6, &i);
        ok(t && i == 0 && oip_sig_dims(s, t)[1] == 16, "position-free");
        free(copy);
    }

    /* what runtimes leave out is not checked */

    s = sig("{\"name\":\"m\",\"versions\":null,\"platform\":\"\","
            "\"inputs\":[{\"name\":\"a\",\"datatype\":\"STRING\","
            "\"shape\":null,\"parameters\":null},"
            "{\"name\":\"b\"}],\"outputs\":null}");
    t = s ? oip_sig_find(s, 0, (const u_char *) "a", 1, &i) : NULL;

    ok(t && t->dt == OIP_SIG_ANY_DT && t->rank == OIP_SIG_ANY_RANK
       && s->noutputs == 0,
       "KServe-like: unknown datatype, no shape, null outputs");

    s = sig("{\"inputs\":[{\"name\":\"in\",\"datatype\":\"INVALID\","
            "\"shape\":[]}]}");
    ok(s && oip_sig_tensors(s)->rank == OIP_SIG_ANY_RANK,
       "OVMS MediaPipe: INVALID and [] check nothing");

    s = sig("{\"name\":\"m\",\"versions\":[],\"platform\":\"\","
            "\"inputs\":[],\"outputs\":[],\"parameters\":{}}");
    ok(s && s->ninputs == 0 && s->noutputs == 0, "MLServer-like: nothing");

    s = sig("{\"name\":\"m\"}");
    ok(s && s->ninputs == 0, "no inputs member");

    s = sig("{\"inputs\":[{\"name\":\"x\\u00e9\\\"\",\"datatype\":\"FP16\","
            "\"shape\":[]}]}");
    ok(s && oip_sig_find(s, 0, (const u_char *) "x\xc3\xa9\"", 4, &i)
       && oip_sig_tensors(s)->rank == 0, "escaped name, scalar shape");

    /* answers that are not a model's metadata */

    sig_refused("", "not a JSON object");
    sig_refused("[]", "not a JSON object");
    sig_refused("<html><title>500</title></html>", "not a JSON object");
    sig_refused("{\"inputs\":{}}", "'inputs' must be an array");
    sig_refused("{\"outputs\":7}", "'outputs' must be an array");
    sig_refused("{\"inputs\":[7]}", "inputs[0] must be an object");
    sig_refused("{\"inputs\":[{\"datatype\":\"FP32\"}]}",
                "inputs[0]: 'name' is missing");
    sig_refused("{\"inputs\":[{\"name\":7}]}", "'name' must be a string");
    sig_refused("{\"inputs\":[{\"name\":\"\"}]}", "'name' must be a name");
    sig_refused("{\"inputs\":[{\"name\":\"a\\u0000b\"}]}",
                "'name' must be a name");
    sig_refused("{\"inputs\":[{\"name\":\"a\",\"datatype\":1}]}",
                "'datatype' must be a string");
    sig_refused("{\"inputs\":[{\"name\":\"a\",\"shape\":[\"1\"]}]}",
                "'shape' must hold integers");
    sig_refused("{\"inputs\":[{\"name\":\"a\",\"shape\":[-2]}]}",
                "'shape' must hold integers");
    sig_refused("{\"inputs\":[{\"name\":\"a\",\"shape\":[1.5]}]}",
                "'shape' must hold integers");
    sig_refused("{\"inputs\":[{\"name\":\"a\",\"shape\":{}}]}",
                "'shape' must be an array");
    sig_refused("{\"inputs\":[{\"name\":\"a\"},{\"name\":\"a\"}]}",
                "input \"a\" is declared twice");
    sig_refused("{\"inputs\":[],\"inputs\":[]}", "duplicate");
    sig_refused("{\"inputs\":[{\"name\":\"a\",\"Name\":\"b\","
                "\"name\":\"c\"}]}", "duplicate");
    sig_refused("{\"inputs\":[]} x", "bytes after");
    sig_refused("{\"inputs\":[", "the model's metadata");
    sig_refused("{\"inputs\":[{\"name\":\"\xff\"}]}", "the model's metadata");
}


/* a request under o with the signature: 0 or the status, error in err */

static int
check(oip_options_t *o, const char *json, const u_char *bin, size_t blen,
    off_t ihcl, run_t *r)
{
    return run_opts(r, o, json, strlen(json), bin, blen, ihcl, OIP_ENC_NONE);
}


static void
fits(oip_options_t *o, const char *json, const char *what)
{
    int    st;
    run_t  r;

    st = check(o, json, NULL, 0, -1, &r);

    if (!ok(st == 0, "fits: %s", what)) {
        diag("%d: %s", st, r.req.error);
    }

    run_free(&r);
}


static void
misfit(oip_options_t *o, const char *json, const char *msg)
{
    int    st;
    run_t  r;

    st = check(o, json, NULL, 0, -1, &r);

    if (!ok(st == 400 && r.req.misfit
            && r.req.reason == OIP_REASON_SIGNATURE
            && strstr(r.req.error, msg) != NULL,
            "refused: \"%s\"", msg))
    {
        diag("got %d (misfit %d): %s", st, r.req.misfit, r.req.error);
    }

    run_free(&r);
}


static void
test_check(void)
{
    int               st;
    run_t             r;
    oip_options_t     o;
    oip_optional_t    opt[2];
    const char       *in;

    o = opts;
    o.signature = sig(SIMPLE);
    o.model = (const u_char *) "simple";
    o.model_len = 6;

    fits(&o, "{\"inputs\":[" BOTH "]}", "both inputs");
    fits(&o, "{\"inputs\":[" IN1("INT32", "[1,16]", DATA16) ","
         IN0("INT32", "[1,16]", DATA16) "],\"outputs\":[{\"name\":"
         "\"OUTPUT1\"}]}", "any order, a declared output");
    fits(&o, "{\"inputs\":[" IN0("INT32", "[0,16]", "[]") ","
         IN1("INT32", "[0,16]", "[]") "]}", "-1 matches any size, 0 too");
    fits(&o, "{\"inputs\":[{\"name\":\"INP\\u0055T0\",\"datatype\":\"INT32\","
         "\"shape\":[1,16],\"data\":" DATA16 "},"
         IN1("INT32", "[1,16]", DATA16) "]}", "an escaped name");

    st = check(&o, "{\"inputs\":[" BOTH "," IN0("INT32", "[1,16]", DATA16)
               "]}", NULL, 0, -1, &r);
    ok(st == 400 && strstr(r.req.error, "appears twice"),
       "a name twice, each fitting: refused as before");
    run_free(&r);
    misfit(&o, "{\"inputs\":[" IN0("INT32", "[1,16]", DATA16) ","
           "{\"name\":\"INPUT2\",\"datatype\":\"INT32\",\"shape\":[1],"
           "\"data\":[1]}]}",
           "model 'simple' has no input 'INPUT2'; its inputs: 'INPUT0', "
           "'INPUT1'");
    misfit(&o, "{\"inputs\":[" IN0("INT32", "[1,16]", DATA16) "]}",
           "model 'simple' needs input 'INPUT1', missing from the request");
    misfit(&o, "{\"inputs\":[" IN0("FP32", "[1,16]", DATA16) ","
           IN1("INT32", "[1,16]", DATA16) "]}",
           "input 'INPUT0' is FP32, model 'simple' expects INT32");
    misfit(&o, "{\"inputs\":[" IN0("INT32", "[1,15]",
           "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]") ","
           IN1("INT32", "[1,16]", DATA16) "]}",
           "input 'INPUT0': shape [1,15] does not fit [-1,16] of model "
           "'simple'");
    misfit(&o, "{\"inputs\":[" IN0("INT32", "[16]", DATA16) ","
           IN1("INT32", "[1,16]", DATA16) "]}",
           "input 'INPUT0': shape [16] does not fit [-1,16]");
    misfit(&o, "{\"inputs\":[" IN0("INT32", "[1,16,1]", DATA16) ","
           IN1("INT32", "[1,16]", DATA16) "]}",
           "shape [1,16,1] does not fit [-1,16]");
    misfit(&o, "{\"inputs\":[" BOTH "],\"outputs\":[{\"name\":\"OUTPUT0\"},"
           "{\"name\":\"OUTPUT9\"}]}",
           "model 'simple' has no output 'OUTPUT9'; its outputs: 'OUTPUT0', "
           "'OUTPUT1'");

    /* binary data is checked the same way */

    {
        const char  *h = "{\"inputs\":[" IN0("INT32", "[1,16]", DATA16)
                         ",{\"name\":\"INPUT1\",\"datatype\":\"INT16\","
                         "\"shape\":[1,16],\"parameters\":"
                         "{\"binary_data_size\":32}}]}";
        u_char       bin[32] = { 0 };

        st = check(&o, h, bin, 32, -2, &r);
        ok(st == 400 && r.req.misfit
           && strstr(r.req.error, "input 'INPUT1' is INT16") != NULL,
           "a binary input's datatype");
        run_free(&r);
    }

    /* broken JSON is said first, and is no misfit */

    in = "{\"inputs\":[" IN0("INT32", "[1,16]", DATA16) "],\"x\":}";
    st = check(&o, in, NULL, 0, -1, &r);
    ok(st == 400 && !r.req.misfit && strstr(r.req.error, "invalid JSON"),
       "broken JSON after a missing input: syntax, not misfit");
    run_free(&r);

    /* a bad request that fits is no misfit either */

    in = "{\"inputs\":[" IN0("INT32", "[1,16]", "[1]") ","
         IN1("INT32", "[1,16]", DATA16) "]}";
    st = check(&o, in, NULL, 0, -1, &r);
    ok(st == 400 && !r.req.misfit && strstr(r.req.error, "data has 1"),
       "data short of its shape: not a misfit");
    run_free(&r);

    /* optional inputs: any model's, or one model's */

    opt[0].model = NULL;
    opt[0].input = (const u_char *) "INPUT1";
    opt[0].input_len = 6;
    o.optional = opt;
    o.noptional = 1;
    fits(&o, "{\"inputs\":[" IN0("INT32", "[1,16]", DATA16) "]}",
         "INPUT1 optional for any model");

    opt[0].model = (const u_char *) "other";
    opt[0].model_len = 5;
    misfit(&o, "{\"inputs\":[" IN0("INT32", "[1,16]", DATA16) "]}",
           "needs input 'INPUT1'");

    opt[1].model = (const u_char *) "simple";
    opt[1].model_len = 6;
    opt[1].input = (const u_char *) "INPUT1";
    opt[1].input_len = 6;
    o.noptional = 2;
    fits(&o, "{\"inputs\":[" IN0("INT32", "[1,16]", DATA16) "]}",
         "simple:INPUT1 optional");

    /* no inputs declared: nothing checked; no outputs: outputs not */

    o = opts;
    o.signature = sig("{\"name\":\"m\",\"inputs\":[],\"outputs\":"
                      "[{\"name\":\"o\"}]}");
    fits(&o, "{\"inputs\":[{\"name\":\"any\",\"datatype\":\"BOOL\","
         "\"shape\":[1],\"data\":[true]}],\"outputs\":[{\"name\":\"z\"}]}",
         "a model declaring no inputs is not checked");

    o.signature = sig("{\"inputs\":[{\"name\":\"a\",\"datatype\":\"BF16\"}]}");
    fits(&o, "{\"inputs\":[{\"name\":\"a\",\"datatype\":\"BF16\","
         "\"shape\":[2,2],\"data\":[1,2,3,4]}],\"outputs\":[{\"name\":"
         "\"z\"}]}", "any shape, outputs not declared");
    misfit(&o, "{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP16\","
           "\"shape\":[1],\"data\":[1]}]}", "the model expects BF16");
}


static void
request_is_sig(oip_options_t *o, const char *in, const char *want,
    size_t wlen, int binary, const char *what)
{
    int    st;
    run_t  r;

    st = check(o, in, NULL, 0, -1, &r);

    if (!ok(st == 0 && r.req.coerced && r.req.binary == binary
            && same(r.out, r.len, want, wlen, "body"), "%s", what))
    {
        diag("%d: %s", st, r.req.error);
    }

    run_free(&r);
}


#define ONE(dt, shape)                                                        \
    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"" dt "\",\"shape\":"       \
    shape "}]}"

#define X(dt, data)                                                           \
    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"" dt "\",\"shape\":[2],"   \
    "\"data\":" data "}]}"


static void
test_coerce(void)
{
    int            st;
    run_t          r;
    oip_options_t  o;
    const char    *in, *want;

    o = opts;
    o.coerce = 1;

    /* keep: the datatype takes the model's, the numbers stay */

    o.signature = sig(ONE("INT32", "[-1]"));
    request_is_sig(&o, X("INT64", "[1,-2147483648]"),
                   X("INT32", "[1,-2147483648]"), strlen(X("INT32", "")) + 15,
                   0, "INT64 -> INT32 within range, keep");

    request_is_sig(&o, X("FP32", "[1,2]"), X("INT32", "[1,2]"),
                   strlen(X("INT32", "[1,2]")), 0,
                   "FP32 -> INT32: integers, keep");
    st = check(&o, X("INT64", "[1,2147483648]"), NULL, 0, -1, &r);
    ok(st == 400 && !r.req.misfit
       && strstr(r.req.error, "element 1: 2147483648 is out of range for "
                 "INT32"), "INT64 -> INT32 out of range: first value named");
    run_free(&r);

    /* floats to integers: integers only */

    o.signature = sig(ONE("INT16", "[2]"));
    st = check(&o, X("FP32", "[1,1.5]"), NULL, 0, -1, &r);
    ok(st == 400 && strstr(r.req.error, "element 1: 1.5 is not an integer"),
       "FP32 -> INT16: 1.5 refused");
    run_free(&r);

    /* integers to floats: exactly */

    o.signature = sig(ONE("FP32", "[2]"));
    request_is_sig(&o, X("INT64", "[16777216,-3]"),
                   X("FP32", "[16777216,-3]"), strlen(X("FP32", "")) + 13, 0,
                   "INT64 -> FP32, exact values");

    st = check(&o, X("INT64", "[1,16777217]"), NULL, 0, -1, &r);
    ok(st == 400 && strstr(r.req.error, "element 1: 16777217 has no exact "
                           "FP32 value"), "16777217 has no FP32 value");
    run_free(&r);

    o.signature = sig(ONE("FP64", "[2]"));
    st = check(&o, X("UINT64", "[9007199254740993,1]"), NULL, 0, -1, &r);
    ok(st == 400 && strstr(r.req.error, "no exact FP64 value"),
       "2^53+1 has no FP64 value");
    run_free(&r);

    /* FP16 and BF16: binary whatever the upstream reads */

    o.signature = sig(ONE("FP16", "[2]"));
    in = X("FP32", "[1.0,0.1]");
    want = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP16\",\"shape\":"
           "[2],\"parameters\":{\"binary_data_size\":4}}]}"
           "\x00\x3c\x66\x2e";
    request_is_sig(&o, in, want, strlen(want) + 4, 1,
                   "FP32 -> FP16: binary, rounded to nearest even");

    o.inputs = OIP_FORM_JSON;
    request_is_sig(&o, in, want, strlen(want) + 4, 1,
                   "FP32 -> FP16 under json: binary still");
    o.inputs = OIP_FORM_KEEP;

    st = check(&o, X("FP32", "[1,65520]"), NULL, 0, -1, &r);
    ok(st == 400 && strstr(r.req.error, "65520 is out of range for FP16"),
       "FP32 -> FP16 overflow refused");
    run_free(&r);

    o.signature = sig(ONE("BF16", "[2]"));
    st = check(&o, X("INT8", "[1,257]"), NULL, 0, -1, &r);
    ok(st == 400 && strstr(r.req.error, "257 has no exact BF16 value"),
       "INT8 (well, 257) -> BF16: 257 has 9 significant bits");
    run_free(&r);

    /* binary upstream: converted with the model's datatype */

    o.signature = sig(ONE("INT16", "[2]"));
    o.inputs = OIP_FORM_BINARY;
    want = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT16\",\"shape\":"
           "[2],\"parameters\":{\"binary_data_size\":4}}]}"
           "\x07\x00\xff\xff";
    request_is_sig(&o, X("INT64", "[7,-1]"), want, strlen(want) + 3, 1,
                   "INT64 -> INT16 made binary");

    /* not re-typed: BOOL, BYTES, binary data, coercion off */

    o.inputs = OIP_FORM_KEEP;
    o.signature = sig(ONE("INT8", "[2]"));
    misfit(&o, X("BOOL", "[true,false]"), "is BOOL");
    o.signature = sig(ONE("BOOL", "[2]"));
    misfit(&o, X("INT8", "[1,0]"), "is INT8");
    o.signature = sig(ONE("BYTES", "[2]"));
    misfit(&o, X("INT8", "[1,0]"), "is INT8");
    o.coerce = 0;
    o.signature = sig(ONE("INT32", "[2]"));
    misfit(&o, X("INT64", "[1,0]"), "input 'x' is INT64, the model expects "
           "INT32");
}


static void
raw_is(oip_options_t *o, const u_char *bin, size_t len, const char *want,
    const char *what)
{
    int    st;
    run_t  r;

    st = check(o, "", bin, len, 0, &r);

    if (!ok(st == 0 && r.req.rewritten
            && r.len == strlen(want) + len
            && memcmp(r.out, want, strlen(want)) == 0
            && memcmp(r.out + strlen(want), bin, len) == 0, "raw: %s", what))
    {
        diag("%d: %s %.*s", st, r.req.error, (int) r.len, r.out);
    }

    run_free(&r);
}


static void
raw_refused(oip_options_t *o, size_t len, const char *msg)
{
    int     st;
    run_t   r;
    u_char  bin[64] = { 0 };

    st = check(o, "", bin, len, 0, &r);

    if (!ok(st == 400 && strstr(r.req.error, msg) != NULL,
            "raw refused: \"%s\"", msg))
    {
        diag("got %d: %s", st, r.req.error);
    }

    run_free(&r);
}


static void
test_raw(void)
{
    char              err[128];
    u_char            bin[24];
    oip_options_t     o;
    oip_raw_input_t   raw;

    memset(bin, 0x3f, sizeof(bin));

    o = opts;
    o.signature = sig(ONE("FP32", "[-1,3]"));
    o.model = (const u_char *) "m";
    o.model_len = 1;

    raw_is(&o, bin, 24, "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,3],"
           "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":24}}]}",
           "the model's only input, -1 deduced");

    raw_refused(&o, 20, "not a whole number of FP32 elements of shape "
                "[-1,3]");

    o.signature = sig(ONE("UINT8", "[2,3]"));
    raw_refused(&o, 5, "5 bytes, but shape [2,3] of UINT8 needs 6");

    o.signature = sig(ONE("BYTES", "[-1]"));
    {
        int          st;
        run_t        r;
        const char  *want = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
                            "\"datatype\":\"BYTES\",\"parameters\":"
                            "{\"binary_data_size\":9}}]}\x05";

        st = check(&o, "", (const u_char *) "hello", 5, 0, &r);
        ok(st == 0 && r.len == strlen(want) + 8
           && memcmp(r.out, want, strlen(want)) == 0
           && memcmp(r.out + r.len - 5, "hello", 5) == 0,
           "raw: BYTES, the body one element");
        run_free(&r);
    }

    o.signature = sig(ONE("FP32", "[-1,-1]"));
    raw_refused(&o, 24, "cannot be sized for input 'x' of model 'm', shape "
                "[-1,-1]");

    o.signature = sig(ONE("FP32", "[0,3]"));
    raw_refused(&o, 24, "cannot be sized");

    o.signature = sig(ONE("STRING", "[1]"));
    raw_refused(&o, 24, "its metadata does not say");

    o.signature = sig(SIMPLE);
    raw_refused(&o, 24, "the data of one input, and model 'm' has 2: it "
                "needs oip_raw_input here");

    /* oip_raw_input first */

    ok(oip_raw_input_init(&raw, (const u_char *) "r", 1,
                          (const u_char *) "UINT8", 5,
                          (const u_char *) "-1", 2, err, sizeof(err)) == 0,
       "oip_raw_input r UINT8 -1");

    o.signature = sig(ONE("UINT8", "[-1]"));
    o.raw = &raw;
    raw_refused(&o, 24, "model 'm' has no input 'r'");

    o.signature = sig("{\"inputs\":[{\"name\":\"r\",\"datatype\":\"UINT8\","
                      "\"shape\":[-1]},{\"name\":\"s\",\"datatype\":\"UINT8\","
                      "\"shape\":[-1]}]}");
    raw_refused(&o, 24, "needs input 's', missing");

    o.signature = sig("{\"inputs\":[]}");
    o.raw = NULL;
    {
        int    st;
        run_t  r;

        st = check(&o, "", bin, 24, 0, &r);
        ok(st == 0 && !r.req.rewritten, "no inputs declared: raw passes on "
           "under keep, as without a signature");
        run_free(&r);
    }
}


/* generate (oip_generate.c): the infer request a generate one makes
 * (s set), or the generate answer an infer answer makes (s NULL) */

static void
gen_check(const oip_signature_t *s, const char *body, const char *want,
    const char *what)
{
    int            rc;
    char           got[1024];
    u_char        *all;
    size_t         len;
    oip_result_t   res;
    oip_options_t  o;

    memset(&o, 0, sizeof(oip_options_t));
    o.signature = s;
    o.model = (const u_char *) "m";
    o.model_len = 1;
    o.max_depth = 64;
    o.max_tensor_size = 1 << 20;

    rc = s ? oip_generate_request(&res, &sig_alloc, &o, (const u_char *) body,
                                  strlen(body))
           : oip_generate_answer(&res, &sig_alloc, &o, (const u_char *) body,
                                 strlen(body));

    if (rc != 0) {
        snprintf(got, sizeof(got), "%d %s", res.status, res.error);

    } else {
        all = flatten(res.segs, res.nsegs, res.body_len, &len);
        snprintf(got, sizeof(got), "%.*s", (int) len, (char *) all);
        free(all);
    }

    if (!ok(strcmp(got, want) == 0, "generate %s: %s",
            s ? "request" : "answer", what))
    {
        diag("got  %s", got);
        diag("want %s", want);
    }
}

#define gen_req(s, body, want, what)  gen_check(s, body, want, what)
#define gen_ans(body, want, what)     gen_check(NULL, body, want, what)


#define GEN                                                                   \
    "{\"name\":\"m\",\"inputs\":["                                            \
    "{\"name\":\"PROMPT\",\"datatype\":\"BYTES\",\"shape\":[-1,1]},"      \
    "{\"name\":\"K\",\"datatype\":\"INT32\",\"shape\":[-1,-1]},"          \
    "{\"name\":\"P\",\"datatype\":\"FP32\",\"shape\":[2,-1]},"            \
    "{\"name\":\"U\",\"datatype\":\"UINT8\",\"shape\":[3]},"              \
    "{\"name\":\"B\",\"datatype\":\"BOOL\",\"shape\":[1]}],"              \
    "\"outputs\":[]}"

static void
test_generate(void)
{
    oip_signature_t  *s;

    s = sig(GEN);

    gen_req(s, "{\"PROMPT\":\"hi\",\"id\":\"q\",\"temperature\":0.5}",
            "{\"id\":\"q\",\"inputs\":[{\"name\":\"PROMPT\",\"datatype\":"
            "\"BYTES\",\"data\":[\"hi\"],\"shape\":[1,1]}],\"parameters\":"
            "{\"id\":\"q\",\"temperature\":0.5}}",
            "an input, the id (a parameter too), a parameter");
    gen_req(s, "{\"parameters\":{\"K\":[1,2,3],\"top\":true}}",
            "{\"inputs\":[{\"name\":\"K\",\"datatype\":\"INT32\",\"data\":"
            "[1,2,3],\"shape\":[1,3]}],\"parameters\":{\"top\":true}}",
            "an input inside parameters; the innermost -1 takes the count");
    gen_req(s, "{\"P\":[[1],[2.5],[3],[4]]}",
            "{\"inputs\":[{\"name\":\"P\",\"datatype\":\"FP32\",\"data\":"
            "[1,2.5,3,4],\"shape\":[2,2]}]}",
            "nested arrays flattened; a fixed dimension divides the count");
    gen_req(s, "{\"P\":[1,2,3]}",
            "400 generate: input 'P' of model 'm' cannot take 3 values: its "
            "shape is [2,-1]", "a count the shape cannot take");
    gen_req(s, "{\"U\":[1,-2,3]}",
            "400 generate: input 'U' of model 'm' is UINT8: each value must "
            "be an integer >= 0", "a negative unsigned");
    gen_req(s, "{\"B\":1}",
            "400 generate: input 'B' of model 'm' is BOOL: each value must "
            "be true or false", "a number for a boolean");
    gen_req(s, "{\"K\":[[1,2]]}",
            "400 generate: input 'K' has 2 values in an array of 1",
            "more leaves than the outer array holds");
    gen_req(s, "{\"K\":1,\"K2\":null}",
            "400 parameter 'K2' has invalid type. It should be either "
            "'int', 'bool', or 'string'.", "a null parameter");
    gen_req(s, "{\"parameters\":{\"K\":1,\"parameters\":{}}}",
            "400 parameter 'parameters' has invalid type. It should be "
            "either 'int', 'bool', or 'string'.",
            "parameters inside parameters: an object parameter");
    gen_req(s, "{\"B\":true,\"B\":false}",
            "400 generate: input 'B' is given twice", "an input twice");
    gen_req(s, "{}", "{\"inputs\":[]}",
            "nothing: the signature check says what is missing");

    gen_ans("{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"q\","
            "\"parameters\":{\"z\":1,\"OUT\":\"p\"},\"outputs\":["
            "{\"name\":\"OUT\",\"datatype\":\"BYTES\",\"shape\":[1,1],"
            "\"data\":[[\"a\"]]},{\"name\":\"V\",\"datatype\":\"FP32\","
            "\"shape\":[2],\"data\":[1.0,2.0]},{\"name\":\"E\",\"datatype\":"
            "\"INT8\",\"shape\":[0],\"data\":[]}]}",
            "{\"E\":[],\"OUT\":\"p\",\"V\":[1.0,2.0],\"id\":\"q\","
            "\"model_name\":\"m\",\"model_version\":\"1\",\"z\":1}",
            "keys in byte order, one element unwrapped, a parameter before "
            "an output of its name");
    gen_ans("{\"model_name\":\"m\",\"id\":\"\",\"model_version\":null,"
            "\"outputs\":[{\"name\":\"x\",\"data\":[1]}]}",
            "{\"model_name\":\"m\",\"x\":1}",
            "an empty id and a null version are none");
    gen_ans("[1]", "502 the answer is not a JSON object",
            "not an answer");
    gen_ans("{\"outputs\":[{\"name\":\"x\"}]}",
            "502 an output without its name or its data as JSON",
            "an output without data");
}


int
main(void)
{
    arena_init(&sig_arena, &sig_alloc);

    test_parse();
    test_check();
    test_coerce();
    test_raw();
    test_generate();

    arena_destroy(&sig_arena);

    return tap_done();
}
