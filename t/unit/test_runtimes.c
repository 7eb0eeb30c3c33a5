
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Runtimes as they really answer, and clients as they really ask: null
 * for an optional member (KServe), outputs nobody asked for (MLServer),
 * NaN and Infinity towards a JSON-only runtime, the JSON limit applied
 * only to JSON the codec writes, and error answers in the protocol's
 * shape.
 */


#include "codec_test.h"


#define IN   "{\"name\":\"i\",\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1]}"


/* a request through the codec under o: the exact body the upstream gets */

static void
request_is(const oip_options_t *o, const char *in, const char *want,
    const char *what)
{
    int    st;
    run_t  r;

    st = run_opts(&r, o, in, strlen(in), NULL, 0, -1, OIP_ENC_NONE);

    if (!ok(st == 0 && r.req.rewritten
            && same(r.out, r.len, want, strlen(want), "body"), "%s", what))
    {
        diag("status %d: %s", st, r.req.error);
    }

    run_free(&r);
}


static void
request_refused(const oip_options_t *o, const char *in, const u_char *bin,
    size_t blen, int status, const char *msg)
{
    int    st;
    run_t  r;

    st = run_opts(&r, o, in, strlen(in), bin, blen, blen ? -2 : -1,
                  OIP_ENC_NONE);

    if (!ok(st == status && strstr(r.req.error, msg) != NULL,
            "%d \"%s\"", status, msg))
    {
        diag("got %d: %s", st, r.req.error);
    }

    run_free(&r);
}


static void
test_request_nulls(void)
{
    int            st;
    run_t          r;
    const char    *in;
    oip_options_t  o;

    o = opts;

    /* KServe's InferenceRequest model, dumped: every optional member */

    request_is(&o, "{\"id\":null,\"parameters\":null,\"inputs\":[" IN "],"
               "\"outputs\":null}", "{\"inputs\":[" IN "]}",
               "keep: null id, parameters, outputs dropped");

    request_is(&o, "{\"parameters\":null,\"id\":null,\"inputs\":[" IN "]}",
               "{\"inputs\":[" IN "]}",
               "keep: two nulls first, each with one comma");

    request_is(&o, "{\"inputs\":[" IN "],\"id\":null,\"outputs\":null}",
               "{\"inputs\":[" IN "]}", "keep: two nulls last");

    request_is(&o, "{\"id\":\"7\",\"parameters\":null,\"inputs\":[" IN "],"
               "\"outputs\":[{\"name\":\"o\",\"parameters\":null}]}",
               "{\"id\":\"7\",\"inputs\":[" IN "],\"outputs\":"
               "[{\"name\":\"o\"}]}",
               "keep: an output's null parameters dropped");

    request_is(&o, "{\"inputs\":[{\"name\":\"i\",\"parameters\":null,"
               "\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1]}]}",
               "{\"inputs\":[" IN "]}", "keep: an input's null parameters");

    /* the forms the request is rewritten to find no parameters there */

    o.inputs = OIP_FORM_BINARY;
    request_is(&o, "{\"inputs\":[{\"name\":\"i\",\"shape\":[1],"
               "\"datatype\":\"INT8\",\"parameters\":null,\"data\":[1]}]}",
               "{\"inputs\":[{\"name\":\"i\",\"shape\":[1],"
               "\"datatype\":\"INT8\",\"parameters\":"
               "{\"binary_data_size\":1}}]}\x01",
               "binary: null parameters, then data made binary");

    o.inputs = OIP_FORM_KEEP;
    o.outputs = OIP_FORM_BINARY;
    request_is(&o, "{\"parameters\":null,\"inputs\":[" IN "],\"outputs\":"
               "[{\"name\":\"o\",\"parameters\":null}]}",
               "{\"inputs\":[" IN "],\"outputs\":[{\"name\":\"o\","
               "\"parameters\":{\"binary_data\":true}}]}",
               "outputs binary: asked where parameters were null");

    request_is(&o, "{\"parameters\":null,\"inputs\":[" IN "],"
               "\"outputs\":null}",
               "{\"inputs\":[" IN "],\"parameters\":{\"binary_data_output\""
               ":true}}",
               "outputs binary, none listed: binary_data_output added");

    /* null outputs: nothing listed, the client's wish is the default */

    o = opts;
    in = "{\"inputs\":[" IN "],\"outputs\":null}";
    st = run_opts(&r, &o, in, strlen(in), NULL, 0, -1, OIP_ENC_NONE);
    ok(st == 0 && !r.req.wish.listed && !r.req.wish.binary,
       "null outputs: no list in the wish");
    run_free(&r);

    /* required members stay refused as null */

    request_refused(&o, "{\"inputs\":null}", NULL, 0, 400,
                    "'inputs' must be an array");
    request_refused(&o, "{\"inputs\":[{\"name\":null,\"shape\":[1],"
                    "\"datatype\":\"INT8\",\"data\":[1]}]}", NULL, 0, 400,
                    "'name' must be a string");
    request_refused(&o, "{\"inputs\":[{\"name\":\"i\",\"shape\":null,"
                    "\"datatype\":\"INT8\",\"data\":[1]}]}", NULL, 0, 400,
                    "'shape' must be an array");
    request_refused(&o, "{\"inputs\":[{\"name\":\"i\",\"shape\":[1],"
                    "\"datatype\":null,\"data\":[1]}]}", NULL, 0, 400,
                    "'datatype' must be a string");
    request_refused(&o, "{\"inputs\":[{\"name\":\"i\",\"shape\":[1],"
                    "\"datatype\":\"INT8\",\"data\":null}]}", NULL, 0, 400,
                    "'data' must be an array");
    request_refused(&o, "{\"inputs\":[" IN "],\"outputs\":[{\"name\":null}]}",
                    NULL, 0, 400, "'name' must be a string");

    /* a null value inside parameters is not a member of the protocol's */

    request_refused(&o, "{\"parameters\":{\"x\":null},\"inputs\":[" IN "]}",
                    NULL, 0, 400, "parameter \"x\" must be a string");

    /* broken literals are broken JSON, not nulls */

    request_refused(&o, "{\"id\":nul,\"inputs\":[" IN "]}", NULL, 0, 400,
                    "invalid JSON");
    request_refused(&o, "{\"id\":nullx,\"inputs\":[" IN "]}", NULL, 0, 400,
                    "invalid JSON");
}


static void
answer_is(const oip_wish_t *w, const char *json, const u_char *bin,
    size_t blen, const char *want, size_t wlen, int binary, const char *what)
{
    int     st;
    rrun_t  r;

    st = respond(&r, w, json, bin, blen, blen ? -2 : -1);

    if (!ok(st == 0 && r.resp.binary == binary
            && same(r.out, r.len, want, wlen, "answer"), "%s", what))
    {
        diag("status %d: %s", st, r.resp.error);
    }

    rrun_free(&r);
}


#define KSERVE_OUT(name, data)                                                \
    "{\"name\":\"" name "\",\"shape\":[2],\"datatype\":\"INT16\","            \
    "\"parameters\":null,\"data\":" data "}"

#define OUT(name, data)                                                       \
    "{\"name\":\"" name "\",\"shape\":[2],\"datatype\":\"INT16\","            \
    "\"data\":" data "}"

#define OUT_CHUNK(name)                                                       \
    "{\"name\":\"" name "\",\"shape\":[2],\"datatype\":\"INT16\","            \
    "\"parameters\":{\"binary_data_size\":4}}"


static void
test_answer_nulls(void)
{
    int         st;
    rrun_t      r;
    const char  *want;
    oip_wish_t  w;

    memset(&w, 0, sizeof(oip_wish_t));

    /* KServe's JSON answer, as its test suite shows the bytes */

    want = "{\"model_name\":\"m\",\"id\":\"1\",\"outputs\":["
           OUT("a", "[1,2]") "]}";
    answer_is(&w, "{\"model_name\":\"m\",\"model_version\":null,\"id\":\"1\","
              "\"parameters\":null,\"outputs\":[" KSERVE_OUT("a", "[1,2]")
              "]}", NULL, 0, want, strlen(want), 0,
              "KServe's JSON answer: its nulls dropped");

    /* made binary for a binary client, where parameters were null */

    w.binary = 1;
    want = "{\"model_name\":\"m\",\"outputs\":[" OUT_CHUNK("a") "]}"
           "\x01\x00\x02\x00";
    answer_is(&w, "{\"model_name\":\"m\",\"model_version\":null,"
              "\"outputs\":[" KSERVE_OUT("a", "[1,2]") "]}", NULL, 0, want,
              strlen(want) + 3, 1,
              "KServe's JSON answer made binary: parameters made anew");

    /* orjson's null for a NaN, in a float output */

    w.binary = 1;
    st = respond(&r, &w, "{\"outputs\":[{\"name\":\"f\",\"shape\":[2],"
                 "\"datatype\":\"FP32\",\"parameters\":null,"
                 "\"data\":[1.5,null]}]}", NULL, 0, -1);
    ok(st == 0 && r.resp.binary && r.len >= 8
       && memcmp(r.out + r.len - 8, "\x00\x00\xc0\x3f\x00\x00\xc0\x7f", 8)
          == 0,
       "an answer's null float is NaN when made binary");
    rrun_free(&r);

    w.binary = 0;
    st = respond(&r, &w, "{\"outputs\":[{\"name\":\"i\",\"shape\":[1],"
                 "\"datatype\":\"INT32\",\"parameters\":{\"binary_data_size\""
                 ":4}}],\"id\":null}", (const u_char *) "\x07\0\0\0", 4, -2);
    ok(st == 0 && !r.resp.binary
       && memmem(r.out, r.len, "\"data\":[7]", 10) != NULL
       && memmem(r.out, r.len, "null", 4) == NULL,
       "a null id dropped from an answer made JSON");
    rrun_free(&r);
}


static void
test_unlisted(void)
{
    u_char          bin[12];
    const char     *want;
    oip_wish_t      w;
    oip_wish_out_t  outs[2];

    memcpy(bin, "\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x00", 12);

    memset(&w, 0, sizeof(oip_wish_t));
    memset(outs, 0, sizeof(outs));
    outs[0].name = (const u_char *) "b";
    outs[0].len = 1;
    outs[0].binary = 1;
    w.outputs = outs;
    w.n = 1;
    w.listed = 1;

    /* MLServer answers every output; only b was asked for, binary */

    want = "{\"outputs\":[" OUT_CHUNK("b") "]}\x03\x00\x04\x00";
    answer_is(&w, "{\"outputs\":[" OUT_CHUNK("a") "," OUT_CHUNK("b") ","
              OUT_CHUNK("c") "]}", bin, 12, want, strlen(want) + 3, 1,
              "first and last dropped, chunks and all");

    want = "{\"outputs\":[" OUT_CHUNK("b") "]}\x01\x00\x02\x00";
    answer_is(&w, "{\"outputs\":[" OUT_CHUNK("b") "," OUT_CHUNK("a") ","
              OUT("c", "[1,2]") "]}", bin, 8, want, strlen(want) + 3, 1,
              "the two after it dropped, one binary, one JSON");

    want = "{\"outputs\":[" OUT_CHUNK("b") "]}\x01\x00\x02\x00";
    answer_is(&w, "{\"outputs\":[" OUT("a", "[9,9]") "," OUT("b", "[1,2]")
              "]}", NULL, 0, want, strlen(want) + 3, 1,
              "MLServer's JSON: the unlisted one dropped, the listed one "
              "made binary");

    /* nothing the client listed: an empty list, and no binary left */

    outs[0].name = (const u_char *) "z";
    want = "{\"outputs\":[]}";
    answer_is(&w, "{\"outputs\":[" OUT_CHUNK("a") "," OUT_CHUNK("b") "]}",
              bin, 8, want, strlen(want), 0,
              "every output dropped: JSON, no IHCL");

    /* not listed at all: every output is the client's */

    w.listed = 0;
    w.n = 0;
    w.binary = 0;
    want = "{\"outputs\":[" OUT("a", "[1,2]") "," OUT("b", "[3,4]") "]}";
    answer_is(&w, "{\"outputs\":[" OUT_CHUNK("a") "," OUT_CHUNK("b") "]}",
              bin, 8, want, strlen(want), 0,
              "no list: nothing dropped");
}


static void
test_nonfinite(void)
{
    int            st;
    run_t          r;
    u_char         bin[12];
    const char    *in;
    oip_options_t  o;

    o = opts;
    o.finite_upstream = 1;

    /* JSON data that goes upstream as it came */

    request_refused(&o, "{\"inputs\":[{\"name\":\"x\",\"shape\":[3],"
                    "\"datatype\":\"FP32\",\"data\":[1.5,NaN,2]}]}", NULL, 0,
                    400, "input 'x': element 1 is NaN; the upstream reads "
                    "JSON without NaN or Infinity (oip_upstream_nonfinite "
                    "refuse)");
    request_refused(&o, "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],"
                    "\"datatype\":\"FP64\",\"data\":[[1,2],[-Infinity,3]]}]}",
                    NULL, 0, 400, "element 2 is -Infinity");
    request_refused(&o, "{\"inputs\":[{\"name\":\"h\",\"shape\":[1],"
                    "\"datatype\":\"FP16\",\"data\":[Infinity]}]}", NULL, 0,
                    400, "input 'h': element 0 is Infinity");

    /* binary data that would go upstream as JSON */

    o.inputs = OIP_FORM_JSON;
    memcpy(bin, "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x80\x7f", 12);
    request_refused(&o, "{\"inputs\":[{\"name\":\"b\",\"shape\":[3],"
                    "\"datatype\":\"FP32\",\"parameters\":"
                    "{\"binary_data_size\":12}}]}", bin, 12, 400,
                    "input 'b': element 2 is Infinity");
    memcpy(bin, "\x01\x7c\x00\x3c", 4);
    request_refused(&o, "{\"inputs\":[{\"name\":\"b\",\"shape\":[2],"
                    "\"datatype\":\"FP16\",\"parameters\":"
                    "{\"binary_data_size\":4}}]}", bin, 4, 400,
                    "element 0 is NaN");

    /* made binary: the upstream reads bits, not tokens */

    o.inputs = OIP_FORM_BINARY;
    in = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\","
         "\"data\":[NaN]}]}";
    st = run_opts(&r, &o, in, strlen(in), NULL, 0, -1, OIP_ENC_NONE);
    ok(st == 0 && r.req.binary, "refuse: NaN made binary is fine");
    run_free(&r);

    /* pass, the default: Triton reads the tokens */

    o = opts;
    st = run_opts(&r, &o, in, strlen(in), NULL, 0, -1, OIP_ENC_NONE);
    ok(st == 0, "pass: NaN goes upstream as sent");
    run_free(&r);
}


static void
test_json_limit(void)
{
    int            st;
    run_t          r;
    char           json[256];
    size_t         n;
    const char    *in;
    oip_options_t  o;

    /*
     * 1 KB of JSON, within the limit: made binary, its header grows by
     * the parameters it gets; that is the gateway's own doing.
     */

    n = snprintf(json, sizeof(json), "{\"inputs\":[{\"name\":\"x\","
                 "\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1]}]}");

    o = opts;
    o.inputs = OIP_FORM_BINARY;
    o.max_json_size = n;

    st = run_opts(&r, &o, json, n, NULL, 0, -1, OIP_ENC_NONE);
    ok(st == 0 && r.req.header_len > n,
       "a request at the limit, made binary, grows past it: accepted");
    run_free(&r);

    o.max_json_size = n - 1;
    st = run_opts(&r, &o, json, n, NULL, 0, -1, OIP_ENC_NONE);
    ok(st == 413 && strstr(r.req.error, "the JSON of") != NULL,
       "one byte over the limit as sent: 413");
    run_free(&r);

    /* binary made JSON: what the codec writes stays bounded, and says so */

    /* six thirds print as 0.33333334: more JSON than the header they had */

    in = "{\"inputs\":[{\"name\":\"b\",\"shape\":[6],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":24}}]}";

    o = opts;
    o.inputs = OIP_FORM_JSON;
    o.max_json_size = strlen(in);
    request_refused(&o, in,
                    (const u_char *) "\xab\xaa\xaa\x3e\xab\xaa\xaa\x3e"
                    "\xab\xaa\xaa\x3e\xab\xaa\xaa\x3e\xab\xaa\xaa\x3e"
                    "\xab\xaa\xaa\x3e", 24, 413,
                    "the request with its binary inputs converted to JSON "
                    "would exceed oip_max_json_size");
}


static void
error_is(int status, const char *type, const char *body, int want_rc,
    const char *want)
{
    int           rc;
    arena_t       arena;
    oip_alloc_t   alloc;
    oip_result_t  res;
    oip_header_t  h;

    arena_init(&arena, &alloc);

    h.data = (const u_char *) type;
    h.len = type ? strlen(type) : 0;
    h.count = type ? 1 : 0;

    rc = oip_response_error(&res, &alloc, status, &h, (const u_char *) body,
                            strlen(body));

    if (!ok(rc == want_rc && strcmp(res.error, want) == 0, "%d %.40s -> %s",
            status, body, want_rc ? want : "as it is"))
    {
        diag("got %d: \"%s\"", rc, res.error);
    }

    arena_destroy(&arena);
}


static void
test_errors(void)
{
    char  big[1024];

    error_is(400, "application/json", "{\"error\":\"input 'x' is bad\"}", 0,
             "");
    error_is(500, NULL, " {\"model\":\"m\",\"error\":\"boom\"} ", 0, "");

    /* FastAPI, as MLServer and KServe answer a validation failure */

    error_is(422, "application/json",
             "{\"detail\":[{\"loc\":[\"body\",\"inputs\",0,\"data\"],"
             "\"msg\":\"field required\",\"type\":\"value_error.missing\"}]}",
             1, "field required (at body.inputs.0.data)");
    error_is(422, "application/json",
             "{\"detail\":[{\"loc\":[\"body\",\"inputs\"],\"msg\":\"a\"},"
             "{\"loc\":[\"body\",\"id\"],\"msg\":\"b\\u00e9\\n c\"}]}",
             1, "a (at body.inputs); b\xc3\xa9 c (at body.id)");
    error_is(422, NULL, "{\"detail\":[{\"type\":\"json_invalid\",\"loc\":"
             "[\"body\",41],\"msg\":\"JSON decode error\",\"input\":{}}]}",
             1, "JSON decode error (at body.41)");
    error_is(400, NULL, "{\"detail\":\"There was an error parsing the "
             "body\"}", 1, "There was an error parsing the body");
    error_is(404, NULL, "{\"detail\":[\"x\",\"y\"]}", 1, "x; y");

    /* other JSON */

    error_is(429, NULL, "{\"error\":{\"message\":\"quota exceeded\","
             "\"code\":429}}", 1, "quota exceeded");
    error_is(500, NULL, "{\"message\":\"no model\"}", 1, "no model");
    error_is(500, NULL, "{\"error\":null,\"code\":7}", 1,
             "{\"error\":null,\"code\":7}");
    error_is(500, NULL, "\"just a string\"", 1, "just a string");

    /* Starlette's text, a proxy's page, nothing */

    error_is(500, "text/plain; charset=utf-8", "Internal Server Error", 1,
             "Internal Server Error");
    error_is(502, "text/html", "<html>\r\n<head><title>502 Bad Gateway"
             "</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
             "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>",
             1, "502 Bad Gateway");
    error_is(503, NULL, "<p>Service <b>down</b>\nfor now</p>", 1,
             "Service down for now");
    error_is(503, NULL, "", 1, "the upstream answered 503 with an empty "
             "body");
    error_is(503, NULL, " \r\n", 1, "the upstream answered 503 with an "
             "empty body");
    error_is(500, NULL, "{\"detail\":", 1, "{\"detail\":");
    error_is(500, NULL, "bad \xff byte\x01\x02!", 1, "bad ? byte !");

    /* bounded, at a character boundary */

    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    big[251] = '\xc3';
    big[252] = '\xa9';
    error_is(500, NULL, big, 1,
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
             "...");
}


/* a runtime's words, read for programs: the reason of its error answer */

static void
reason_is(int status, const char *body, oip_reason_e want)
{
    arena_t       arena;
    oip_alloc_t   alloc;
    oip_result_t  res;
    oip_header_t  h;

    arena_init(&arena, &alloc);
    memset(&h, 0, sizeof(h));

    (void) oip_response_error(&res, &alloc, status, &h, (const u_char *) body,
                              strlen(body));

    ok(res.reason == want, "%d %.60s: reason %d", status, body,
       (int) res.reason);

    arena_destroy(&arena);
}


static void
test_error_reasons(void)
{
    /* Triton's words, read in its source (model_repository_manager.cc,
     * dynamic_batch_scheduler.cc, sequence_batch_scheduler.cc) */

    reason_is(404, "{\"error\":\"Request for unknown model: 'm' is not "
              "found\"}", OIP_REASON_UNKNOWN_MODEL);
    reason_is(400, "{\"error\":\"Request for unknown model: 'm' has no "
              "available versions\"}", OIP_REASON_UNKNOWN_MODEL);
    reason_is(503, "{\"error\":\"Exceeds maximum queue size\"}",
              OIP_REASON_QUEUE_FULL);
    reason_is(400, "{\"error\":\"inference request for sequence 7 to model "
              "'seq' must specify the START flag on the first request of "
              "the sequence\"}", OIP_REASON_SEQUENCE_START);
    reason_is(400, "text: EXCEEDS MAXIMUM QUEUE SIZE", OIP_REASON_QUEUE_FULL);

    /* others' words say nothing a program reads */

    reason_is(404, "{\"detail\":\"Model m not found\"}", OIP_REASON_NONE);
    reason_is(422, "{\"detail\":[{\"msg\":\"field required\"}]}",
              OIP_REASON_NONE);
    reason_is(500, "", OIP_REASON_NONE);
}


int
main(void)
{
    test_request_nulls();
    test_answer_nulls();
    test_unlisted();
    test_nonfinite();
    test_json_limit();
    test_errors();
    test_error_reasons();

    return tap_done();
}
