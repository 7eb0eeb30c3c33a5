
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The response side of the codec, and what the request side does for it:
 * binary_data/binary_data_output edits, the client's wish, raw binary
 * requests, compressed bodies, and answers reshaped to the wish.
 */


#include "codec_test.h"


/* the request's header as the upstream gets it, under opt */

static void
asked(const oip_options_t *o, const char *in, const char *want,
    const char *what)
{
    int    st;
    run_t  r;

    st = run_opts(&r, o, in, strlen(in), NULL, 0, -1, OIP_ENC_NONE);

    if (!ok(st == 0 && same(r.out, r.req.header_len, want, strlen(want),
                            "header"), "%s", what))
    {
        diag("status %d: %s", st, r.req.error);
    }

    run_free(&r);
}


#define IN   "{\"name\":\"i\",\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1]}"


static void
test_outputs_edits(void)
{
    oip_options_t  o;

    o = opts;
    o.outputs = OIP_FORM_BINARY;

    asked(&o, "{\"inputs\":[" IN "],\"outputs\":[{\"name\":\"a\"},"
              "{\"name\":\"b\",\"parameters\":{}},"
              "{\"name\":\"c\",\"parameters\":{\"x\":1}},"
              "{\"name\":\"d\",\"parameters\":{\"binary_data\":false}},"
              "{\"name\":\"e\",\"parameters\":{\"binary_data\":true}}]}",
          "{\"inputs\":[" IN "],\"outputs\":[{\"name\":\"a\","
              "\"parameters\":{\"binary_data\":true}},"
              "{\"name\":\"b\",\"parameters\":{\"binary_data\":true}},"
              "{\"name\":\"c\",\"parameters\":{\"x\":1,\"binary_data\":true}},"
              "{\"name\":\"d\",\"parameters\":{\"binary_data\":true}},"
              "{\"name\":\"e\",\"parameters\":{\"binary_data\":true}}]}",
          "binary: every listed output gets binary_data true");

    asked(&o, "{\"inputs\":[" IN "]}",
          "{\"inputs\":[" IN "],\"parameters\":{\"binary_data_output\":true}}",
          "binary: no outputs listed, binary_data_output added");

    asked(&o, "{\"parameters\":{\"p\":\"q\"},\"inputs\":[" IN "]}",
          "{\"parameters\":{\"p\":\"q\",\"binary_data_output\":true},"
          "\"inputs\":[" IN "]}",
          "binary: into existing parameters");

    asked(&o, "{\"parameters\":{\"binary_data_output\":false},"
              "\"inputs\":[" IN "],\"outputs\":[]}",
          "{\"parameters\":{\"binary_data_output\":true},"
          "\"inputs\":[" IN "],\"outputs\":[]}",
          "binary: false made true; an empty outputs array lists nothing");

    o.outputs = OIP_FORM_JSON;

    asked(&o, "{\"inputs\":[" IN "],\"outputs\":[{\"name\":\"a\","
              "\"parameters\":{\"binary_data\":true}},{\"parameters\":"
              "{\"k\":1,\"binary_data\":true},\"name\":\"b\"},"
              "{\"name\":\"c\",\"parameters\":{\"binary_data\":true,"
              "\"k\":2}}],\"parameters\":{\"binary_data_output\":true}}",
          "{\"inputs\":[" IN "],\"outputs\":[{\"name\":\"a\"},"
              "{\"parameters\":{\"k\":1},\"name\":\"b\"},"
              "{\"name\":\"c\",\"parameters\":{\"k\":2}}]}",
          "json: binary_data and binary_data_output removed");

    asked(&o, "{\"parameters\":{\"binary_data_output\":true},"
              "\"inputs\":[" IN "]}",
          "{\"inputs\":[" IN "]}",
          "json: a parameters object left empty goes");

    o.outputs = OIP_FORM_KEEP;

    asked(&o, "{\"parameters\":{\"binary_data_output\":true},"
              "\"inputs\":[" IN "],\"outputs\":[{\"name\":\"a\"}]}",
          "{\"parameters\":{\"binary_data_output\":true},"
              "\"inputs\":[" IN "],\"outputs\":[{\"name\":\"a\"}]}",
          "keep: as sent");
}


static void
test_wish(void)
{
    int            st;
    run_t          r;
    oip_options_t  o;
    const char    *j;

    o = opts;
    o.outputs = OIP_FORM_BINARY;

    j = "{\"inputs\":[" IN "],\"parameters\":{\"binary_data_output\":true},"
        "\"outputs\":[{\"name\":\"a\"},{\"name\":\"\\u0062\","
        "\"parameters\":{\"binary_data\":true}},{\"name\":\"c\","
        "\"parameters\":{\"binary_data\":false}}]}";

    st = run_opts(&r, &o, j, strlen(j), NULL, 0, -1, OIP_ENC_NONE);

    ok(st == 0 && r.req.wish.listed && r.req.wish.n == 3
       && r.req.wish.binary == 1
       && !r.req.wish.outputs[0].binary
       && r.req.wish.outputs[1].binary
       && r.req.wish.outputs[1].len == 1
       && r.req.wish.outputs[1].name[0] == 'b'
       && !r.req.wish.outputs[2].binary && r.req.manage,
       "wish: listed outputs by their own binary_data, names unescaped");

    run_free(&r);

    j = "{\"inputs\":[" IN "]}";
    o.outputs = OIP_FORM_KEEP;
    st = run_opts(&r, &o, j, strlen(j), NULL, 0, -1, OIP_ENC_NONE);
    ok(st == 0 && !r.req.wish.listed && !r.req.wish.binary
       && !r.req.manage, "wish: nothing listed, JSON; nothing to manage");
    run_free(&r);
}


static void
test_raw(void)
{
    int              st;
    run_t            r;
    char             err[128];
    oip_options_t    o;
    oip_raw_input_t  raw;
    const char      *want;
    u_char           body[24];

    ok(oip_raw_input_init(&raw, (u_char *) "IMG", 3, (u_char *) "UINT8", 5,
                          (u_char *) "-1,2,3", 6, err, sizeof(err)) == 0
       && raw.rank == 3 && raw.deduced == 0 && raw.dims[2] == 3,
       "raw: -1,2,3");

    ok(oip_raw_input_init(&raw, (u_char *) "X", 1, (u_char *) "FP8", 3,
                          (u_char *) "1", 1, err, sizeof(err)) == -1
       && strstr(err, "unknown datatype"), "raw: unknown datatype");
    ok(oip_raw_input_init(&raw, (u_char *) "X", 1, (u_char *) "FP32", 4,
                          (u_char *) "-1,-1", 5, err, sizeof(err)) == -1,
       "raw: two -1");
    ok(oip_raw_input_init(&raw, (u_char *) "X", 1, (u_char *) "FP32", 4,
                          (u_char *) "0,2", 3, err, sizeof(err)) == -1,
       "raw: a zero dimension");
    ok(oip_raw_input_init(&raw, (u_char *) "X", 1, (u_char *) "FP32", 4,
                          (u_char *) "1,,2", 4, err, sizeof(err)) == -1,
       "raw: empty dimension");
    ok(oip_raw_input_init(&raw, (u_char *) "X", 1, (u_char *) "FP32", 4,
                          (u_char *) "-2", 2, err, sizeof(err)) == -1,
       "raw: -2");
    ok(oip_raw_input_init(&raw, (u_char *) "X", 1, (u_char *) "BYTES", 5,
                          (u_char *) "2", 1, err, sizeof(err)) == -1
       && strstr(err, "BYTES"), "raw: BYTES must be 1");

    o = opts;
    o.raw = &raw;

    /* FP32, -1,2: 24 bytes are 3 rows */

    oip_raw_input_init(&raw, (u_char *) "IN\"0", 4, (u_char *) "FP32", 4,
                       (u_char *) "-1,2", 4, err, sizeof(err));
    memset(body, 7, sizeof(body));

    st = run_opts(&r, &o, "", 0, body, 24, 0, OIP_ENC_NONE);
    want = "{\"inputs\":[{\"name\":\"IN\\\"0\",\"shape\":[3,2],\"datatype\":"
           "\"FP32\",\"parameters\":{\"binary_data_size\":24}}]}";
    ok(st == 0 && r.req.rewritten && r.req.binary && r.req.raw
       && same(r.out, r.req.header_len, want, strlen(want), "header")
       && r.len == strlen(want) + 24
       && memcmp(r.out + strlen(want), body, 24) == 0
       && r.req.wish.binary && !r.req.wish.listed,
       "raw FP32: header made, body kept, binary wished");
    run_free(&r);

    st = run_opts(&r, &o, "", 0, body, 20, 0, OIP_ENC_NONE);
    ok(st == 400 && strstr(r.req.error, "not a whole number"),
       "raw: 20 bytes are not rows of 2 FP32: %s", r.req.error);
    run_free(&r);

    o.raw_outputs = OIP_FORM_JSON;
    o.inputs = OIP_FORM_JSON;
    st = run_opts(&r, &o, "", 0, body, 8, 0, OIP_ENC_NONE);
    ok(st == 0 && !r.req.binary && !r.req.wish.binary
       && memmem(r.out, r.len, "\"data\":[", 8) != NULL,
       "raw to a JSON upstream: data, and JSON wished");
    run_free(&r);

    /* BYTES: the body is one element, its length added */

    o = opts;
    o.raw = &raw;
    o.outputs = OIP_FORM_BINARY;
    oip_raw_input_init(&raw, (u_char *) "TXT", 3, (u_char *) "BYTES", 5,
                       (u_char *) "1", 1, err, sizeof(err));

    st = run_opts(&r, &o, "", 0, (u_char *) "hey", 3, 0, OIP_ENC_NONE);
    want = "{\"inputs\":[{\"name\":\"TXT\",\"shape\":[1],\"datatype\":"
           "\"BYTES\",\"parameters\":{\"binary_data_size\":7}}],"
           "\"parameters\":{\"binary_data_output\":true}}";
    ok(st == 0 && same(r.out, r.req.header_len, want, strlen(want), "header")
       && memcmp(r.out + strlen(want), "\3\0\0\0hey", 7) == 0,
       "raw BYTES: 4-byte length added; outputs asked binary");
    run_free(&r);

    /* fixed dimensions: the size must match exactly */

    oip_raw_input_init(&raw, (u_char *) "V", 1, (u_char *) "INT16", 5,
                       (u_char *) "2,2", 3, err, sizeof(err));
    st = run_opts(&r, &o, "", 0, body, 6, 0, OIP_ENC_NONE);
    ok(st == 400, "raw: 6 bytes for [2,2] INT16: %s", r.req.error);
    run_free(&r);

    /* undeclared: passes under keep, refused otherwise */

    o = opts;
    st = run_opts(&r, &o, "", 0, body, 6, 0, OIP_ENC_NONE);
    ok(st == 0 && !r.req.rewritten && r.req.raw && !r.req.manage,
       "raw undeclared, keep: passes untouched");
    run_free(&r);
}


static void
test_inflate(void)
{
    int            st;
    run_t          r;
    size_t         n;
    char          *big;
    u_char         z[4096];
    oip_options_t  o;
    const char    *j;

    j = "{\"inputs\":[{\"name\":\"x\",\"shape\":[2],\"datatype\":\"INT16\","
        "\"data\":[1,-1]}]}";

    o = opts;
    o.inputs = OIP_FORM_BINARY;

    n = compress_with(15 + 16, j, strlen(j), z, sizeof(z));
    st = run_opts(&r, &o, "", 0, z, n, -1, OIP_ENC_GZIP);
    ok(st == 0 && r.req.decompressed && r.req.rewritten && r.req.binary
       && r.len == r.req.header_len + 4
       && memcmp(r.out + r.req.header_len, "\1\0\xff\xff", 4) == 0,
       "gzip body inflated, then converted");
    run_free(&r);

    n = compress_with(15, j, strlen(j), z, sizeof(z));
    o.inputs = OIP_FORM_KEEP;
    st = run_opts(&r, &o, "", 0, z, n, -1, OIP_ENC_DEFLATE);
    ok(st == 0 && r.req.rewritten && r.len == strlen(j)
       && memcmp(r.out, j, r.len) == 0,
       "deflate (zlib) body inflated; keep sends it plain");
    run_free(&r);

    n = compress_with(-15, j, strlen(j), z, sizeof(z));
    st = run_opts(&r, &o, "", 0, z, n, -1, OIP_ENC_DEFLATE);
    ok(st == 400 && strstr(r.req.error, "cannot be decompressed"),
       "raw deflate without the zlib wrapper: %s", r.req.error);
    run_free(&r);

    n = compress_with(15 + 16, j, strlen(j), z, sizeof(z));
    st = run_opts(&r, &o, "", 0, z, n - 5, -1, OIP_ENC_GZIP);
    ok(st == 400 && strstr(r.req.error, "cut short"), "truncated gzip: %s",
       r.req.error);
    run_free(&r);

    memcpy(z + n, "junk", 4);
    st = run_opts(&r, &o, "", 0, z, n + 4, -1, OIP_ENC_GZIP);
    ok(st == 400 && strstr(r.req.error, "follow the end"), "trailing bytes: %s",
       r.req.error);
    run_free(&r);

    st = run_opts(&r, &o, "", 0, (u_char *) "not gzip", 8, -1, OIP_ENC_GZIP);
    ok(st == 400, "not gzip at all: %s", r.req.error);
    run_free(&r);

    st = run_opts(&r, &o, "", 0, (u_char *) "", 0, -1, OIP_ENC_GZIP);
    ok(st == 400 && strstr(r.req.error, "empty"), "empty gzip body");
    run_free(&r);

    /* a bomb: 1 MB of spaces in a few KB, with limits of 64 KB */

    big = malloc(1 << 20);
    memset(big, ' ', 1 << 20);
    n = compress_with(15 + 16, big, 1 << 20, z, sizeof(z));
    free(big);

    o.max_json_size = 32 * 1024;
    o.max_tensor_size = 32 * 1024;
    st = run_opts(&r, &o, "", 0, z, n, -1, OIP_ENC_GZIP);
    ok(st == 413 && r.arena.peak < 200 * 1024,
       "a gzip bomb stops at the limit (413, peak %zu bytes)", r.arena.peak);
    run_free(&r);

    /* IHCL counts the decompressed bytes */

    o = opts;
    {
        u_char  plain[256];
        size_t  jl;

        j = "{\"inputs\":[{\"name\":\"x\",\"shape\":[2],\"datatype\":\"UINT8\","
            "\"parameters\":{\"binary_data_size\":2}}]}";
        jl = strlen(j);
        memcpy(plain, j, jl);
        plain[jl] = 4;
        plain[jl + 1] = 5;

        n = compress_with(15 + 16, (char *) plain, jl + 2, z, sizeof(z));
        st = run_opts(&r, &o, "", 0, z, n, (off_t) jl, OIP_ENC_GZIP);
        ok(st == 0 && r.len == jl + 2 && r.out[jl] == 4,
           "IHCL counts decompressed bytes");
        run_free(&r);
    }
}


#define OUT_JSON(name, data)                                                  \
    "{\"name\":\"" name "\",\"datatype\":\"INT16\",\"shape\":[2],"            \
    "\"data\":" data "}"

#define OUT_BIN(name)                                                         \
    "{\"name\":\"" name "\",\"datatype\":\"INT16\",\"shape\":[2],"            \
    "\"parameters\":{\"binary_data_size\":4}}"


static void
test_response(void)
{
    int              st;
    rrun_t           r;
    oip_wish_t       w;
    oip_wish_out_t   outs[2];
    const char      *want;
    u_char           bin[8] = { 1, 0, 2, 0, 0xff, 0xff, 0, 0x80 };

    /* listed: a JSON, b binary; the upstream sent both binary */

    outs[0].name = (u_char *) "a";
    outs[0].len = 1;
    outs[0].binary = 0;
    outs[1].name = (u_char *) "b";
    outs[1].len = 1;
    outs[1].binary = 1;

    w.outputs = outs;
    w.n = 2;
    w.listed = 1;
    w.binary = 1;

    st = respond(&r, &w, "{\"model_name\":\"m\",\"outputs\":[" OUT_BIN("a")
                 "," OUT_BIN("b") "]}", bin, 8, -2);
    want = "{\"model_name\":\"m\",\"outputs\":[" OUT_JSON("a", "[1,2]") ","
           OUT_BIN("b") "]}";
    ok(st == 0 && r.resp.rewritten && r.resp.binary
       && same(r.out, r.resp.header_len, want, strlen(want), "header")
       && r.len == strlen(want) + 4
       && memcmp(r.out + strlen(want), bin + 4, 4) == 0,
       "a to JSON (parameters dropped), b stays binary");
    rrun_free(&r);

    /* the upstream sent JSON (a JSON-only runtime): b made binary */

    st = respond(&r, &w, "{\"outputs\":[" OUT_JSON("a", "[1,2]") ","
                 OUT_JSON("b", "[-1,-32768]") "]}", NULL, 0, -1);
    want = "{\"outputs\":[" OUT_JSON("a", "[1,2]") "," OUT_BIN("b") "]}";
    ok(st == 0 && r.resp.binary
       && same(r.out, r.resp.header_len, want, strlen(want), "header")
       && memcmp(r.out + strlen(want), bin + 4, 4) == 0,
       "JSON from the upstream made binary where asked");
    rrun_free(&r);

    /* already as asked: untouched */

    st = respond(&r, &w, "{\"outputs\":[" OUT_JSON("a", "[1,2]") ","
                 OUT_BIN("b") "]}", bin, 4, -2);
    ok(st == 0 && !r.resp.rewritten, "already right: passed as it came");
    rrun_free(&r);

    /* nothing listed, JSON wished; outputs not listed use the default */

    w.listed = 0;
    w.binary = 0;
    st = respond(&r, &w, "{\"outputs\":[" OUT_BIN("x") "]}", bin, 4, -2);
    want = "{\"outputs\":[" OUT_JSON("x", "[1,2]") "]}";
    ok(st == 0 && !r.resp.binary && same(r.out, r.len, want, strlen(want),
                                         "body"),
       "unlisted: binary_data_output false gives JSON");
    rrun_free(&r);

    /* a zero-size binary output without IHCL is fine */

    st = respond(&r, &w, "{\"outputs\":[{\"name\":\"z\",\"datatype\":\"FP32\","
                 "\"shape\":[0],\"parameters\":{\"binary_data_size\":0}}]}",
                 NULL, 0, -1);
    ok(st == 0 && memmem(r.out, r.len, "\"data\":[]", 9),
       "zero-size binary output without IHCL");
    rrun_free(&r);

    /* BYTES that are not UTF-8 keep their binary form */

    st = respond(&r, &w, "{\"outputs\":[{\"name\":\"s\",\"datatype\":\"BYTES\","
                 "\"shape\":[1],\"parameters\":{\"binary_data_size\":5}}]}",
                 (u_char *) "\1\0\0\0\xff", 5, -2);
    ok(st == 0 && !r.resp.rewritten, "non-UTF-8 BYTES stay binary");
    rrun_free(&r);

    /* malformed answers: 502 */

    st = respond(&r, &w, "{\"outputs\":[" OUT_BIN("x") "]}", bin, 4, 500);
    ok(st == 502 && strstr(r.resp.error, "upstream answer:"),
       "IHCL past the end: %s", r.resp.error);
    rrun_free(&r);

    st = respond(&r, &w, "{\"outputs\":[" OUT_BIN("x") "]}", bin, 6, -2);
    ok(st == 502 && strstr(r.resp.error, "not claimed"),
       "sizes that do not add up: %s", r.resp.error);
    rrun_free(&r);

    st = respond(&r, &w, "{\"outputs\":[" OUT_BIN("x") "]}", bin, 2, -2);
    ok(st == 502 && strstr(r.resp.error, "runs past"), "short chunk: %s",
       r.resp.error);
    rrun_free(&r);

    st = respond(&r, &w, "{\"outputs\":[", NULL, 0, -1);
    ok(st == 502 && strstr(r.resp.error, "invalid JSON"), "bad JSON: %s",
       r.resp.error);
    rrun_free(&r);

    st = respond(&r, &w, "{\"outputs\":[{\"name\":\"b\",\"datatype\":\"BOOL\","
                 "\"shape\":[2],\"parameters\":{\"binary_data_size\":2}}]}",
                 (u_char *) "\1\2", 2, -2);
    ok(st == 502 && strstr(r.resp.error, "BOOL element 1 is 2"),
       "BOOL byte 2: %s", r.resp.error);
    rrun_free(&r);

    st = respond(&r, &w, "{\"outputs\":[" OUT_JSON("x", "[1]") "]}", NULL,
                 0, -1);
    ok(st == 0, "JSON left as JSON is not looked into");
    rrun_free(&r);

    w.binary = 1;
    st = respond(&r, &w, "{\"outputs\":[" OUT_JSON("x", "[1]") "]}", NULL,
                 0, -1);
    ok(st == 502 && strstr(r.resp.error, "output 'x': data has 1"),
       "JSON to convert is checked: %s", r.resp.error);
    rrun_free(&r);
}


static void
test_wish_many(void)
{
    int              st;
    char            *json, *p;
    size_t           i, n;
    rrun_t           r;
    oip_wish_t       w;
    oip_wish_out_t  *outs;
    char            *names;

    /* more listed outputs than a linear search suits */

    n = 200;
    outs = malloc(n * sizeof(oip_wish_out_t));
    names = malloc(n * 8);
    json = malloc(n * 128 + 64);

    p = json + sprintf(json, "{\"outputs\":[");

    for (i = 0; i < n; i++) {
        outs[i].len = sprintf(names + i * 8, "o%zu", i);
        outs[i].name = (u_char *) names + i * 8;
        outs[i].binary = (i % 2);

        p += sprintf(p, "%s{\"name\":\"o%zu\",\"datatype\":\"INT8\","
                     "\"shape\":[1],\"data\":[%zu]}", i ? "," : "", i,
                     i % 100);
    }

    strcpy(p, "]}");

    w.outputs = outs;
    w.n = n;
    w.listed = 1;
    w.binary = 0;

    st = respond(&r, &w, json, NULL, 0, -1);
    ok(st == 0 && r.resp.binary
       && r.len == r.resp.header_len + n / 2
       && r.out[r.resp.header_len] == 1 && r.out[r.len - 1] == 99,
       "%zu listed outputs: the odd ones binary", n);
    rrun_free(&r);

    free(outs);
    free(names);
    free(json);
}

static void
test_answer_id(void)
{
    int            st;
    rrun_t         r;
    oip_wish_t     w;
    oip_options_t  saved;
    const char    *o, *e;

#define OUT1 "\"outputs\":[{\"name\":\"y\",\"shape\":[1],\"datatype\":" \
             "\"INT8\",\"data\":[1]}]"

    saved = opts;
    memset(&w, 0, sizeof(w));

    opts.answer_id_set = 1;
    opts.answer_id = (const u_char *) "mine\"\xc3\xa9";
    opts.answer_id_len = 7;

    o = "{\"id\":\"theirs\",\"model_name\":\"m\"," OUT1 "}";
    e = "{\"id\":\"mine\\\"\xc3\xa9\",\"model_name\":\"m\"," OUT1 "}";
    st = respond(&r, &w, o, NULL, 0, -1);
    ok(st == 0 && same(r.out, r.len, e, strlen(e), "answer"),
       "a cached answer's id becomes the request's");
    rrun_free(&r);

    o = "{\"id\":null,\"model_name\":\"m\"," OUT1 "}";
    e = "{\"model_name\":\"m\"," OUT1 ",\"id\":\"mine\\\"\xc3\xa9\"}";
    st = respond(&r, &w, o, NULL, 0, -1);
    ok(st == 0 && same(r.out, r.len, e, strlen(e), "answer"),
       "a null id: the request's added");
    rrun_free(&r);

    o = "{" OUT1 "}";
    e = "{" OUT1 ",\"id\":\"mine\\\"\xc3\xa9\"}";
    st = respond(&r, &w, o, NULL, 0, -1);
    ok(st == 0 && same(r.out, r.len, e, strlen(e), "answer"),
       "no id: the request's added");
    rrun_free(&r);

    opts.answer_id = NULL;
    opts.answer_id_len = 0;

    o = "{\"model_name\":\"m\"," OUT1 ",\"id\":\"theirs\"}";
    e = "{\"model_name\":\"m\"," OUT1 "}";
    st = respond(&r, &w, o, NULL, 0, -1);
    ok(st == 0 && same(r.out, r.len, e, strlen(e), "answer"),
       "the request sent none: the cached one goes");
    rrun_free(&r);

    o = "{\"id\":7," OUT1 "}";
    e = "{" OUT1 "}";
    st = respond(&r, &w, o, NULL, 0, -1);
    ok(st == 0 && same(r.out, r.len, e, strlen(e), "answer"),
       "... whatever its type");
    rrun_free(&r);

    opts = saved;

    o = "{\"id\":\"theirs\"," OUT1 "}";
    st = respond(&r, &w, o, NULL, 0, -1);
    ok(st == 0 && !r.resp.rewritten, "not cached: the id stays");
    rrun_free(&r);

#undef OUT1
}


static void
test_answer_stats(void)
{
    int          st;
    rrun_t       r;
    oip_wish_t   w;
    u_char       bin[8] = { 1, 0, 0, 0, 2, 0, 0, 0 };
    const char  *o;

    memset(&w, 0, sizeof(w));

    /* a binary INT32 output and a JSON FP64 one, all to JSON */

    o = "{\"outputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"INT32\","
        "\"parameters\":{\"binary_data_size\":8}},{\"name\":\"b\",\"shape\":"
        "[1,3],\"datatype\":\"FP64\",\"data\":[1,2,3]}]}";
    st = respond(&r, &w, o, bin, 8, -2);
    ok(st == 0 && r.resp.ninputs == 2 && r.resp.elements == 5
       && r.resp.tensor_bytes == 32 && r.resp.in_form == OIP_SHAPE_MIXED
       && r.resp.out_form == OIP_SHAPE_JSON,
       "answer stats: mixed in, JSON out, 8 + 24 bytes");
    rrun_free(&r);

    w.binary = 1;
    st = respond(&r, &w, o, bin, 8, -2);
    ok(st == 0 && r.resp.tensor_bytes == 32
       && r.resp.out_form == OIP_SHAPE_BINARY, "answer stats: binary out");
    rrun_free(&r);
}


int
main(void)
{
    test_outputs_edits();
    test_wish();
    test_raw();
    test_inflate();
    test_response();
    test_wish_many();
    test_answer_id();
    test_answer_stats();

    return tap_done();
}
