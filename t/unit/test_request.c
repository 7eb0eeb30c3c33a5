
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The request codec, end to end: JSON -> binary and binary -> JSON for
 * every datatype with the exact bytes the binary extension prescribes,
 * byte-exact passthrough, and each validation rule broken once.
 */


#include "codec_test.h"


/* JSON in, binary out: the exact header and the exact bytes */

static void
to_binary(const char *dt, const char *shape, const char *data,
    const char *hexbytes)
{
    int     st;
    run_t   r;
    char    json[4096], want[4096];
    u_char  bytes[1024];
    size_t  n, wlen;

    snprintf(json, sizeof(json), "{\"inputs\":[{\"name\":\"x\",\"shape\":%s,"
             "\"datatype\":\"%s\",\"data\":%s}]}", shape, dt, data);

    n = hex(hexbytes, bytes);

    wlen = snprintf(want, sizeof(want), "{\"inputs\":[{\"name\":\"x\","
                    "\"shape\":%s,\"datatype\":\"%s\",\"parameters\":"
                    "{\"binary_data_size\":%zu}}]}", shape, dt, n);

    st = run(&r, OIP_FORM_BINARY, json, strlen(json), NULL, 0, -1);

    if (!ok(st == 0, "%s %s -> binary: accepted", dt, data)) {
        diag("error %d: %s", st, r.req.error);
        run_free(&r);
        return;
    }

    ok(r.req.rewritten && r.req.binary && r.req.header_len == wlen
       && r.req.body_len == wlen + n && r.len == wlen + n,
       "%s: lengths (header %zu, body %zu)", dt, r.req.header_len,
       r.req.body_len);

    ok(same(r.out, r.req.header_len, want, wlen, "header"),
       "%s: header has binary_data_size and no data", dt);

    ok(r.len == wlen + n && memcmp(r.out + wlen, bytes, n) == 0,
       "%s: binary bytes are %s", dt, hexbytes);

    run_free(&r);
}


/* binary in, JSON out */

static void
to_json(const char *dt, const char *shape, const char *hexbytes,
    const char *data)
{
    int     st;
    run_t   r;
    char    json[1024], want[4096];
    u_char  bytes[1024];
    size_t  n, wlen;

    n = hex(hexbytes, bytes);

    snprintf(json, sizeof(json), "{\"inputs\":[{\"name\":\"x\",\"shape\":%s,"
             "\"datatype\":\"%s\",\"parameters\":{\"binary_data_size\":%zu}}"
             "]}", shape, dt, n);

    wlen = snprintf(want, sizeof(want), "{\"inputs\":[{\"name\":\"x\","
                    "\"shape\":%s,\"datatype\":\"%s\",\"data\":%s}]}",
                    shape, dt, data);

    st = run(&r, OIP_FORM_JSON, json, strlen(json), bytes, n, -2);

    if (!ok(st == 0, "%s %s -> JSON: accepted", dt, hexbytes)) {
        diag("error %d: %s", st, r.req.error);
        run_free(&r);
        return;
    }

    ok(r.req.rewritten && !r.req.binary && r.req.body_len == wlen
       && r.req.header_len == wlen, "%s -> JSON: no binary left", dt);

    ok(same(r.out, r.len, want, wlen, "body"), "%s -> JSON: data %s", dt,
       data);

    run_free(&r);
}


static void
reject(oip_form_e form, const char *json, size_t jlen, const u_char *bin,
    size_t blen, off_t ihcl, int status, const char *msg)
{
    int    st;
    run_t  r;

    st = run(&r, form, json, jlen, bin, blen, ihcl);

    if (!ok(st == status && strstr(r.req.error, msg) != NULL,
            "%d \"%s\"", status, msg))
    {
        diag("got %d: %s", st, r.req.error);
        diag("request: %.*s", (int) (jlen > 300 ? 300 : jlen), json);
    }

    run_free(&r);
}


#define REJECT(json, status, msg)                                             \
    reject(OIP_FORM_KEEP, json, sizeof(json) - 1, NULL, 0, -1, status, msg)

#define INPUT(fields)                                                         \
    "{\"inputs\":[{\"name\":\"x\"," fields "}]}"


static void
test_datatypes(void)
{
    to_binary("BOOL", "[3]", "[true,false,true]", "01 00 01");
    to_binary("UINT8", "[3]", "[0,255,7]", "00 ff 07");
    to_binary("UINT16", "[3]", "[0,65535,258]", "0000 ffff 0201");
    to_binary("UINT32", "[3]", "[0,4294967295,16909060]",
              "00000000 ffffffff 04030201");
    to_binary("UINT64", "[3]", "[0,18446744073709551615,72623859790382856]",
              "0000000000000000 ffffffffffffffff 0807060504030201");
    to_binary("INT8", "[3]", "[-128,127,-1]", "80 7f ff");
    to_binary("INT16", "[3]", "[-32768,32767,-2]", "0080 ff7f feff");
    to_binary("INT32", "[3]", "[-2147483648,2147483647,-3]",
              "00000080 ffffff7f fdffffff");
    to_binary("INT64", "[3]",
              "[-9223372036854775808,9223372036854775807,-1]",
              "0000000000000080 ffffffffffffff7f ffffffffffffffff");

    /* FP16: 1, -2, max, smallest subnormal, +-0, NaN, +-Infinity */
    to_binary("FP16", "[9]",
              "[1,-2,65504,6e-08,0.0,-0.0,NaN,Infinity,-Infinity]",
              "003c 00c0 ff7b 0100 0000 0080 007e 007c 00fc");

    /* round half to even: 2049 and 2051 sit between representables */
    to_binary("FP16", "[4]", "[2049,2051,65519,0.000030517578125]",
              "0068 0268 ff7b 0002");

    /* BF16: 1+2^-8 ties to 1, 1+3*2^-8 ties to 1+2^-6 */
    to_binary("BF16", "[4]", "[1,1.00390625,1.01171875,-3.0]",
              "803f 803f 823f 40c0");

    to_binary("FP32", "[4]", "[0.1,1e-45,3.4028235e38,-0.0]",
              "cdcccc3d 01000000 ffff7f7f 00000080");
    to_binary("FP32", "[3]", "[NaN,Infinity,-Infinity]",
              "0000c07f 0000807f 000080ff");
    to_binary("FP64", "[3]", "[0.1,5e-324,1.7976931348623157e308]",
              "9a9999999999b93f 0100000000000000 ffffffffffffef7f");

    /* multi-byte UTF-8, an escaped NUL, empty, a surrogate pair */
    to_binary("BYTES", "[4]", "[\"h\xc3\xa9llo\",\"\\u0000a\",\"\","
              "\"\\ud83d\\ude00\"]",
              "06000000 68c3a96c6c6f 02000000 0061 00000000 "
              "04000000 f09f9880");

    to_json("BOOL", "[2]", "01 00", "[true,false]");
    to_json("UINT8", "[2]", "00 ff", "[0,255]");
    to_json("UINT16", "[2]", "0000 ffff", "[0,65535]");
    to_json("UINT32", "[1]", "ffffffff", "[4294967295]");
    to_json("UINT64", "[1]", "ffffffffffffffff", "[18446744073709551615]");
    to_json("INT8", "[2]", "80 7f", "[-128,127]");
    to_json("INT16", "[2]", "0080 ff7f", "[-32768,32767]");
    to_json("INT32", "[2]", "00000080 ffffff7f", "[-2147483648,2147483647]");
    to_json("INT64", "[2]", "0000000000000080 ffffffffffffff7f",
            "[-9223372036854775808,9223372036854775807]");
    to_json("FP16", "[6]", "003c ff7b 0100 0080 007e 00fc",
            "[1.0,65500.0,6e-8,-0.0,NaN,-Infinity]");
    to_json("BF16", "[3]", "803f 823f 40c0", "[1.0,1.016,-3.0]");
    to_json("FP32", "[5]", "cdcccc3d 01000000 ffff7f7f 0000c07f 0000807f",
            "[0.1,1e-45,3.4028235e38,NaN,Infinity]");
    to_json("FP64", "[3]", "9a9999999999b93f 0100000000000000 "
            "ffffffffffffef7f", "[0.1,5e-324,1.7976931348623157e308]");
    to_json("BYTES", "[3]", "06000000 68c3a96c6c6f 02000000 0061 "
            "02000000 225c", "[\"h\xc3\xa9llo\",\"\\u0000a\",\"\\\"\\\\\"]");
}


static void
test_shapes(void)
{
    /* nested exactly as the shape, and flat: the same bytes */
    to_binary("INT32", "[2,2]", "[[1,2],[3,4]]",
              "01000000 02000000 03000000 04000000");
    to_binary("INT32", "[2,2]", "[1,2,3,4]",
              "01000000 02000000 03000000 04000000");
    to_binary("INT8", "[2,1,2]", "[[[1,2]],[[3,4]]]", "01 02 03 04");

    /* empty tensors and zero dimensions */
    to_binary("FP32", "[0]", "[]", "");
    to_binary("FP32", "[2,0]", "[[],[]]", "");
    to_binary("FP32", "[0,3]", "[]", "");
    to_binary("BYTES", "[0]", "[]", "");
    to_json("FP32", "[0]", "", "[]");
    to_json("BYTES", "[1,0]", "", "[]");

    /* a zero dimension makes any product zero */
    to_binary("INT8", "[0,9223372036854775807,9223372036854775807]", "[]",
              "");

    /* a scalar tensor: shape [], one element */
    to_binary("INT16", "[]", "[7]", "0700");
}


static void
test_passthrough(void)
{
    int          st;
    run_t        r;
    const char  *in, *want;
    u_char       bin[8];

    /* ids, parameters, big integers, unknown fields, odd spacing: kept */

    in = "{ \"id\" : \"r\\u0031\", \"parameters\":"
         "{\"seq\":123456789012345678901234567890,"
         "\"f\":1.50e+3},\n \"x-unknown\":{\"a\":[1,{\"b\":null}]},"
         "\"inputs\":[ {\"name\":\"a\", \"parameters\":{\"p\":\"q\"},"
         "\"datatype\":\"INT8\",\"shape\":[2],\"data\":[1, 2],"
         "\"extra\":[true]} ], \"outputs\":[{\"name\":\"o\",\"parameters\":"
         "{\"binary_data\":true,\"k\":99999999999999999999}}] }  ";

    want = "{ \"id\" : \"r\\u0031\", \"parameters\":"
           "{\"seq\":123456789012345678901234567890,"
           "\"f\":1.50e+3},\n \"x-unknown\":{\"a\":[1,{\"b\":null}]},"
           "\"inputs\":[ {\"name\":\"a\", \"parameters\":{\"p\":\"q\","
           "\"binary_data_size\":2},"
           "\"datatype\":\"INT8\",\"shape\":[2],"
           "\"extra\":[true]} ], \"outputs\":[{\"name\":\"o\",\"parameters\":"
           "{\"binary_data\":true,\"k\":99999999999999999999}}] }  ";

    st = run(&r, OIP_FORM_BINARY, in, strlen(in), NULL, 0, -1);

    ok(st == 0 && same(r.out, r.req.header_len, want, strlen(want),
                       "header"),
       "everything not converted is byte-exact, in order");
    ok(r.len == strlen(want) + 2 && r.out[r.len - 2] == 1
       && r.out[r.len - 1] == 2, "and the chunk follows");

    run_free(&r);

    /* keep: validated, not rewritten */

    st = run(&r, OIP_FORM_KEEP, in, strlen(in), NULL, 0, -1);
    ok(st == 0 && !r.req.rewritten, "keep: valid and untouched");
    run_free(&r);

    /* data first in the input: converted in a second look */

    in = "{\"inputs\":[{\"data\":[[1,2]],\"name\":\"a\",\"shape\":[1,2],"
         "\"datatype\":\"UINT8\"}]}";
    want = "{\"inputs\":[{\"parameters\":{\"binary_data_size\":2},"
           "\"name\":\"a\",\"shape\":[1,2],\"datatype\":\"UINT8\"}]}";

    st = run(&r, OIP_FORM_BINARY, in, strlen(in), NULL, 0, -1);
    ok(st == 0 && same(r.out, r.req.header_len, want, strlen(want),
                       "header"), "data before datatype and shape");
    run_free(&r);

    /* parameters after data, with binary_data_size added to them */

    in = "{\"inputs\":[{\"name\":\"a\",\"shape\":[1],\"datatype\":\"UINT8\","
         "\"data\":[9],\"parameters\":{}}]}";
    want = "{\"inputs\":[{\"name\":\"a\",\"shape\":[1],\"datatype\":"
           "\"UINT8\",\"parameters\":{\"binary_data_size\":1}}]}";

    st = run(&r, OIP_FORM_BINARY, in, strlen(in), NULL, 0, -1);
    ok(st == 0 && same(r.out, r.req.header_len, want, strlen(want),
                       "header"), "empty parameters get binary_data_size");
    run_free(&r);

    /* binary -> JSON: parameters with other entries keep them */

    in = "{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"UINT8\","
         "\"parameters\":{\"binary_data_size\":2,\"keep\":1}}]}";
    want = "{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":"
           "\"UINT8\",\"parameters\":{\"keep\":1},\"data\":[3,4]}]}";
    bin[0] = 3;
    bin[1] = 4;

    st = run(&r, OIP_FORM_JSON, in, strlen(in), bin, 2, -2);
    ok(st == 0 && same(r.out, r.len, want, strlen(want), "body"),
       "binary -> JSON keeps other parameters");
    run_free(&r);

    in = "{\"inputs\":[{\"name\":\"a\",\"parameters\":{\"keep\":1,"
         "\"binary_data_size\":2},\"shape\":[2],\"datatype\":\"UINT8\"}]}";
    want = "{\"inputs\":[{\"name\":\"a\",\"parameters\":{\"keep\":1},"
           "\"shape\":[2],\"datatype\":\"UINT8\",\"data\":[3,4]}]}";

    st = run(&r, OIP_FORM_JSON, in, strlen(in), bin, 2, -2);
    ok(st == 0 && same(r.out, r.len, want, strlen(want), "body"),
       "binary_data_size last among parameters");
    run_free(&r);
}


static void
test_mixed(void)
{
    int          st;
    run_t        r;
    const char  *in, *want;
    u_char       bin[6] = { 0xaa, 0xbb, 1, 0, 0, 0 };

    /* a binary input, a JSON input, a binary input: chunks in order */

    in = "{\"inputs\":["
         "{\"name\":\"a\",\"shape\":[2],\"datatype\":\"UINT8\","
         "\"parameters\":{\"binary_data_size\":2}},"
         "{\"name\":\"b\",\"shape\":[1],\"datatype\":\"INT16\","
         "\"data\":[-1]},"
         "{\"name\":\"c\",\"shape\":[1],\"datatype\":\"INT32\","
         "\"parameters\":{\"binary_data_size\":4}}]}";

    want = "{\"inputs\":["
           "{\"name\":\"a\",\"shape\":[2],\"datatype\":\"UINT8\","
           "\"parameters\":{\"binary_data_size\":2}},"
           "{\"name\":\"b\",\"shape\":[1],\"datatype\":\"INT16\","
           "\"parameters\":{\"binary_data_size\":2}},"
           "{\"name\":\"c\",\"shape\":[1],\"datatype\":\"INT32\","
           "\"parameters\":{\"binary_data_size\":4}}]}";

    st = run(&r, OIP_FORM_BINARY, in, strlen(in), bin, 6, -2);

    ok(st == 0 && same(r.out, r.req.header_len, want, strlen(want),
                       "header"), "mixed -> binary: header");
    ok(r.len == strlen(want) + 8
       && memcmp(r.out + strlen(want), "\xaa\xbb\xff\xff\x01\0\0\0", 8)
          == 0, "mixed -> binary: chunks a, b, c in order");
    run_free(&r);

    want = "{\"inputs\":["
           "{\"name\":\"a\",\"shape\":[2],\"datatype\":\"UINT8\","
           "\"data\":[170,187]},"
           "{\"name\":\"b\",\"shape\":[1],\"datatype\":\"INT16\","
           "\"data\":[-1]},"
           "{\"name\":\"c\",\"shape\":[1],\"datatype\":\"INT32\","
           "\"data\":[1]}]}";

    st = run(&r, OIP_FORM_JSON, in, strlen(in), bin, 6, -2);
    ok(st == 0 && same(r.out, r.len, want, strlen(want), "body"),
       "mixed -> JSON");
    run_free(&r);

    st = run(&r, OIP_FORM_KEEP, in, strlen(in), bin, 6, -2);
    ok(st == 0 && !r.req.rewritten, "mixed, keep: untouched");
    run_free(&r);

    /* a shared-memory input is neither converted nor counted */

    in = "{\"inputs\":[{\"name\":\"s\",\"shape\":[4],\"datatype\":\"FP32\","
         "\"parameters\":{\"shared_memory_region\":\"r\","
         "\"shared_memory_byte_size\":16}}]}";

    st = run(&r, OIP_FORM_BINARY, in, strlen(in), NULL, 0, -1);
    ok(st == 0 && !r.req.rewritten, "shared memory passes through");
    run_free(&r);

    /* JSON mode with an IHCL but no binary: only headers change */

    in = "{\"inputs\":[{\"name\":\"j\",\"shape\":[1],\"datatype\":\"FP32\","
         "\"data\":[1]}]}";

    st = run(&r, OIP_FORM_JSON, in, strlen(in), NULL, 0, -2);
    ok(st == 0 && r.req.rewritten && !r.req.binary
       && same(r.out, r.len, in, strlen(in), "body"),
       "json: IHCL with all-JSON inputs is dropped, body kept");
    run_free(&r);
}


static void
test_many_inputs(void)
{
    int     st;
    char   *json, *p;
    size_t  i, n;
    run_t   r;

    /* enough inputs that their array grows while chunks are made */

    n = 300;
    json = malloc(n * 96 + 32);
    p = json + sprintf(json, "{\"inputs\":[");

    for (i = 0; i < n; i++) {
        p += sprintf(p, "%s{\"name\":\"in%zu\",\"shape\":[2],"
                     "\"datatype\":\"%s\",\"data\":%s}", i ? "," : "", i,
                     (i % 3) ? "INT16" : "BYTES",
                     (i % 3) ? "[1,-1]" : "[\"ab\",\"\"]");
    }

    strcpy(p, "]}");

    st = run(&r, OIP_FORM_BINARY, json, strlen(json), NULL, 0, -1);
    ok(st == 0 && r.len == r.req.header_len + (n / 3) * 10 + (n - n / 3) * 4
       && memcmp(r.out + r.req.header_len, "\2\0\0\0ab\0\0\0\0\1\0\xff\xff",
                 14) == 0
       && memcmp(r.out + r.len - 4, "\1\0\xff\xff", 4) == 0,
       "%zu inputs converted, chunks in order", n);
    run_free(&r);

    free(json);
}


static void
test_errors(void)
{
    u_char       bin[16];
    const char  *j;

    /* IHCL and framing */
    j = INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1]");
    reject(OIP_FORM_KEEP, j, strlen(j), NULL, 0, (off_t) strlen(j) + 1,
           400, "exceeds the body length");
    reject(OIP_FORM_BINARY, "", 0, NULL, 0, 0, 400, "raw binary");
    reject(OIP_FORM_KEEP, "", 0, NULL, 0, -1, 400, "body is empty");
    reject(OIP_FORM_KEEP, j, strlen(j), (u_char *) "xx", 2, -1, 400,
           "unexpected bytes after the JSON");
    reject(OIP_FORM_KEEP, j, strlen(j), (u_char *) "xx", 2, -2, 400,
           "not claimed by any binary_data_size");

    /* JSON syntax */
    REJECT("   ", 400, "invalid JSON");
    REJECT("[]", 400, "must be a JSON object");
    REJECT("{\"inputs\":[}", 400, "invalid JSON");
    REJECT("{\"inputs\":[],}", 400, "invalid JSON");
    REJECT("{\"a\":1,\"a\":2,\"inputs\":[]}", 400, "duplicate key \"a\"");
    REJECT("{\"a\":1,\"\\u0061\":2}", 400, "duplicate key \"a\"");
    REJECT(INPUT("\"shape\":[1],\"shape\":[1],\"datatype\":\"INT8\","
                 "\"data\":[1]"), 400, "duplicate key \"shape\"");
    REJECT("{\"x\":{\"p\":{\"q\":1,\"q\":1}},\"inputs\":[]}", 400,
           "duplicate key \"q\"");
    REJECT("{\"x\":\"\xc0\xaf\"}", 400, "invalid UTF-8");
    REJECT("{\"x\":\"\xed\xa0\x80\"}", 400, "invalid UTF-8");
    REJECT("{\"x\":\"\\ud800\"}", 400, "unpaired high surrogate");
    REJECT("{\"x\":\"\\udc00\"}", 400, "unpaired low surrogate");
    REJECT("{\"x\":\"a\tb\"}", 400, "control character");
    REJECT("{\"x\":01}", 400, "invalid number");
    REJECT("{\"x\":1.}", 400, "invalid number");
    REJECT("{\"x\":.5}", 400, "expected a value");
    REJECT("{\"x\":1e}", 400, "invalid number");
    REJECT("{\"x\":-NaN}", 400, "invalid number");
    REJECT("{\"x\":tru}", 400, "invalid literal");
    REJECT("{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
           "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]"
           "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
           "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 400, "oip_max_depth");

    /* inputs */
    REJECT("{}", 400, "'inputs' is missing");
    REJECT("{\"inputs\":{}}", 400, "'inputs' must be an array");
    REJECT("{\"inputs\":[]}", 400, "'inputs' must not be empty");
    REJECT("{\"inputs\":[1]}", 400, "inputs[0] must be an object");
    REJECT("{\"inputs\":[{\"shape\":[1],\"datatype\":\"INT8\","
           "\"data\":[1]}]}", 400, "inputs[0]: 'name' is missing");
    REJECT("{\"inputs\":[{\"name\":\"\",\"shape\":[1],"
           "\"datatype\":\"INT8\",\"data\":[1]}]}", 400, "must not be empty");
    REJECT("{\"inputs\":[{\"name\":7}]}", 400, "'name' must be a string");
    REJECT("{\"inputs\":[{\"name\":\"a\\u0000b\",\"shape\":[1],"
           "\"datatype\":\"INT8\",\"data\":[1]}]}", 400,
           "must not hold control characters");
    REJECT("{\"inputs\":[{\"name\":\"a\\nb\",\"shape\":[1],"
           "\"datatype\":\"INT8\",\"data\":[1]}]}", 400,
           "must not hold control characters");
    REJECT("{\"outputs\":[{\"name\":\"\\u001f\"}],\"inputs\":[]}", 400,
           "must not hold control characters");
    REJECT("{\"inputs\":[{\"name\":\"a\\\\u0000b\",\"shape\":[1],"
           "\"datatype\":\"INT8\"}]}", 400, "has no data");
    REJECT("{\"inputs\":[{\"name\":\"a\",\"shape\":[1],\"datatype\":\"INT8\","
           "\"data\":[1]},{\"name\":\"\\u0061\",\"shape\":[1],"
           "\"datatype\":\"INT8\",\"data\":[1]}]}", 400,
           "input name \"a\" appears twice");
    REJECT(INPUT("\"shape\":[1],\"data\":[1]"), 400,
           "input 'x': 'datatype' is missing");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"int8\",\"data\":[1]"), 400,
           "input 'x': unknown datatype \"int8\"");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"FP8\",\"data\":[1]"), 400,
           "unknown datatype");
    REJECT(INPUT("\"datatype\":\"INT8\",\"data\":[1]"), 400,
           "input 'x': 'shape' is missing");
    REJECT(INPUT("\"shape\":[-1],\"datatype\":\"INT8\",\"data\":[1]"), 400,
           "shape dimension -1 is not an integer");
    REJECT(INPUT("\"shape\":[1.0],\"datatype\":\"INT8\",\"data\":[1]"), 400,
           "shape dimension 1.0");
    REJECT(INPUT("\"shape\":[9223372036854775808],\"datatype\":\"INT8\","
                 "\"data\":[1]"), 400, "shape dimension");
    REJECT(INPUT("\"shape\":\"1\",\"datatype\":\"INT8\",\"data\":[1]"), 400,
           "'shape' must be an array");
    REJECT(INPUT("\"shape\":[4294967296,4294967296],\"datatype\":\"INT8\","
                 "\"data\":[1]"), 400, "overflows");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\""), 400,
           "input 'x' has no data");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1],"
                 "\"parameters\":{\"binary_data_size\":1}"), 400,
           "more than one of");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1],"
                 "\"parameters\":{\"shared_memory_region\":\"r\"}"), 400,
           "more than one of");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"parameters\":[]"),
           400, "'parameters' must be an object");

    /* data */
    REJECT(INPUT("\"shape\":[3],\"datatype\":\"INT8\",\"data\":[1,2]"), 400,
           "input 'x': data has 2 elements, shape [3] needs 3");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1,2,3]"), 400,
           "data has 3 elements");
    REJECT(INPUT("\"shape\":[2,2],\"datatype\":\"INT8\","
                 "\"data\":[[1,2],[3]]"), 400, "not nested as its shape");
    REJECT(INPUT("\"shape\":[2,2],\"datatype\":\"INT8\","
                 "\"data\":[[1,2],3,4]"), 400, "not nested as its shape");
    REJECT(INPUT("\"shape\":[4],\"datatype\":\"INT8\","
                 "\"data\":[[1,2],[3,4]]"), 400, "not nested as its shape");
    REJECT(INPUT("\"shape\":[2,2],\"datatype\":\"INT8\","
                 "\"data\":[1,2,[3,4]]"), 400, "not nested as its shape");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":5"), 400,
           "'data' must be an array");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT32\",\"data\":[1.0]"), 400,
           "element 0: 1.0 is not an integer");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT32\",\"data\":[1e2]"), 400,
           "1e2 is not an integer");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT32\",\"data\":[NaN]"), 400,
           "is not an integer");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT32\",\"data\":[\"1\"]"),
           400, "expected a number");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[128]"), 400,
           "128 is out of range for INT8");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[-129]"), 400,
           "out of range for INT8");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"UINT8\",\"data\":[-1]"), 400,
           "out of range for UINT8");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"UINT32\",\"data\":[-0]"), 400,
           "out of range for UINT32");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"UINT64\","
                 "\"data\":[18446744073709551616]"), 400, "out of range");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT64\","
                 "\"data\":[9223372036854775808]"), 400, "out of range");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT64\","
                 "\"data\":[-9223372036854775809]"), 400, "out of range");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"BOOL\",\"data\":[1]"), 400,
           "expected true or false");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[true]"), 400,
           "expected a number");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1e39]"), 400,
           "1e39 is out of range for FP32");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"FP64\",\"data\":[1e309]"), 400,
           "out of range for FP64");

    /* 20 digits and an exponent: past the bound that spares a check */

    REJECT(INPUT("\"shape\":[2],\"datatype\":\"FP32\","
                 "\"data\":[1.5,99999999999999999999e19]"), 400,
           "out of range for FP32");
    REJECT(INPUT("\"shape\":[2],\"datatype\":\"FP64\","
                 "\"data\":[1.5,99999999999999999999e289]"), 400,
           "out of range for FP64");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"FP16\",\"data\":[65520]"), 400,
           "65520 is out of range for FP16");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"BF16\",\"data\":[3.4e38]"),
           400, "out of range for BF16");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[1]"), 400,
           "expected a string");

    /* binary_data_size */
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\","
                 "\"parameters\":{\"binary_data_size\":-1}"), 400,
           "binary_data_size must be a non-negative integer");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\","
                 "\"parameters\":{\"binary_data_size\":1.5}"), 400,
           "non-negative integer");
    REJECT(INPUT("\"shape\":[1],\"datatype\":\"INT8\","
                 "\"parameters\":{\"binary_data_size\":1}"), 400,
           "no Inference-Header-Content-Length");

    j = INPUT("\"shape\":[2],\"datatype\":\"INT32\","
              "\"parameters\":{\"binary_data_size\":4}");
    memset(bin, 0, sizeof(bin));
    reject(OIP_FORM_KEEP, j, strlen(j), bin, 4, -2, 400,
           "binary_data_size is 4, but 2 elements of INT32 need 8");

    j = INPUT("\"shape\":[2],\"datatype\":\"INT32\","
              "\"parameters\":{\"binary_data_size\":8}");
    reject(OIP_FORM_KEEP, j, strlen(j), bin, 4, -2, 400,
           "runs past the end");
    reject(OIP_FORM_KEEP, j, strlen(j), bin, 9, -2, 400,
           "1 bytes after the JSON header are not claimed");

    j = INPUT("\"shape\":[2305843009213693952],\"datatype\":\"INT64\","
              "\"parameters\":{\"binary_data_size\":0}");
    reject(OIP_FORM_KEEP, j, strlen(j), NULL, 0, -2, 400,
           "need more than");

    j = INPUT("\"shape\":[2],\"datatype\":\"BOOL\","
              "\"parameters\":{\"binary_data_size\":2}");
    reject(OIP_FORM_KEEP, j, strlen(j), (u_char *) "\1\2", 2, -2, 400,
           "BOOL element 1 is 2");

    j = INPUT("\"shape\":[2],\"datatype\":\"BYTES\","
              "\"parameters\":{\"binary_data_size\":9}");
    reject(OIP_FORM_KEEP, j, strlen(j), (u_char *) "\1\0\0\0a\5\0\0\0", 9,
           -2, 400, "BYTES element 1: its length 5 runs past");
    j = INPUT("\"shape\":[2],\"datatype\":\"BYTES\","
              "\"parameters\":{\"binary_data_size\":7}");
    reject(OIP_FORM_KEEP, j, strlen(j), (u_char *) "\1\0\0\0a\0\0", 7,
           -2, 400, "BYTES element 1 is cut off");
    j = INPUT("\"shape\":[1],\"datatype\":\"BYTES\","
              "\"parameters\":{\"binary_data_size\":6}");
    reject(OIP_FORM_KEEP, j, strlen(j), (u_char *) "\1\0\0\0ab", 6,
           -2, 400, "1 bytes after its 1 elements");
    j = INPUT("\"shape\":[1],\"datatype\":\"BYTES\","
              "\"parameters\":{\"binary_data_size\":5}");
    reject(OIP_FORM_JSON, j, strlen(j), (u_char *) "\1\0\0\0\xff", 5,
           -2, 400, "not valid UTF-8 and cannot be JSON");

    /* bodies that end inside nested data (fuzzing found a read past
     * them); the exact-size allocation makes ASan see it */
    REJECT("{\"inputs\":[{\"name\":\"n\",\"datatype\":\"INT8\","
           "\"shape\":[1,1],\"data\":[[300", 400, "invalid JSON");
    REJECT("{\"inputs\":[{\"name\":\"n\",\"datatype\":\"BYTES\","
           "\"shape\":[1,1],\"data\":[[\"abc", 400, "invalid JSON");
    REJECT("{\"inputs\":[{\"name\":\"n\",\"datatype\":\"INT32\","
           "\"shape\":[2,3],\"data\":[[1,2,18446744073709551615", 400,
           "invalid JSON");
    REJECT("{}", 400, "'inputs' is missing");

    /* outputs and parameters */
    REJECT("{\"inputs\":[{\"name\":\"a\",\"shape\":[1],\"datatype\":\"INT8\","
           "\"data\":[1]}],\"outputs\":{}}", 400, "'outputs' must be an array");
    REJECT("{\"outputs\":[{\"name\":\"o\"},{\"name\":\"o\"}],\"inputs\":[]}",
           400, "output name \"o\" appears twice");
    REJECT("{\"outputs\":[{\"parameters\":{}}],\"inputs\":[]}", 400,
           "outputs[0]: 'name' is missing");
    REJECT("{\"outputs\":[{\"name\":\"\"}],\"inputs\":[]}", 400,
           "must not be empty");
    REJECT("{\"outputs\":[{\"name\":\"o\",\"parameters\":{\"binary_data\":1}}"
           "],\"inputs\":[]}", 400, "output 'o': binary_data must be a bool");
    REJECT("{\"outputs\":[{\"name\":\"o\",\"parameters\":{\"x\":[1]}}],"
           "\"inputs\":[]}", 400, "parameter \"x\" must be a string");
    REJECT("{\"parameters\":{\"binary_data_output\":\"yes\"},\"inputs\":[]}",
           400, "binary_data_output must be a boolean");
    REJECT("{\"parameters\":{\"x\":null},\"inputs\":[]}", 400,
           "the request: parameter \"x\" must be a string");

    /* limits */
    {
        oip_options_t  saved = opts;

        opts.max_json_size = 10;
        j = INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1]");
        reject(OIP_FORM_KEEP, j, strlen(j), NULL, 0, -1, 413,
               "oip_max_json_size");
        opts = saved;

        opts.max_tensor_size = 3;
        j = INPUT("\"shape\":[1],\"datatype\":\"INT32\",\"data\":[1]");
        reject(OIP_FORM_BINARY, j, strlen(j), NULL, 0, -1, 413,
               "oip_max_tensor_size");
        j = INPUT("\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"a\"]");
        reject(OIP_FORM_BINARY, j, strlen(j), NULL, 0, -1, 413,
               "oip_max_tensor_size");
        reject(OIP_FORM_KEEP, j, strlen(j), NULL, 0, -1, 413,
               "oip_max_tensor_size");
        j = INPUT("\"shape\":[4],\"datatype\":\"UINT8\","
                  "\"parameters\":{\"binary_data_size\":4}");
        reject(OIP_FORM_KEEP, j, strlen(j), bin, 4, -2, 413,
               "oip_max_tensor_size");

        /* a huge shape costs nothing: refused before allocating */
        j = INPUT("\"shape\":[1000000000000],\"datatype\":\"FP64\","
                  "\"data\":[1]");
        reject(OIP_FORM_BINARY, j, strlen(j), NULL, 0, -1, 413,
               "oip_max_tensor_size");
        opts = saved;

        opts.max_depth = 3;
        j = INPUT("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[1]");
        reject(OIP_FORM_KEEP, j, strlen(j), NULL, 0, -1, 400,
               "oip_max_depth (3)");
        opts = saved;
    }
}


static void
test_ihcl(void)
{
    uint64_t  n;

    ok(oip_ihcl_parse((u_char *) "123", 3, &n) == 0 && n == 123, "IHCL 123");
    ok(oip_ihcl_parse((u_char *) "0", 1, &n) == 0 && n == 0, "IHCL 0");
    ok(oip_ihcl_parse((u_char *) "00", 2, &n) == -1, "IHCL 00");
    ok(oip_ihcl_parse((u_char *) "012", 3, &n) == -1, "IHCL 012");
    ok(oip_ihcl_parse((u_char *) "+1", 2, &n) == -1, "IHCL +1");
    ok(oip_ihcl_parse((u_char *) "-1", 2, &n) == -1, "IHCL -1");
    ok(oip_ihcl_parse((u_char *) " 1", 2, &n) == -1, "IHCL space");
    ok(oip_ihcl_parse((u_char *) "", 0, &n) == -1, "IHCL empty");
    ok(oip_ihcl_parse((u_char *) "18446744073709551615", 20, &n) == 0
       && n == UINT64_MAX, "IHCL 2^64-1");
    ok(oip_ihcl_parse((u_char *) "18446744073709551616", 20, &n) == -1,
       "IHCL 2^64");
}


/* the JSON's length in Triton's SageMaker and Vertex AI media types */

static int
carrier(const char *type, const char *ihcl, oip_framing_t *f, int answer)
{
    oip_header_t  t, h, none;
    oip_result_t  res;

    memset(&none, 0, sizeof(oip_header_t));

    t.data = (const u_char *) type;
    t.len = strlen(type);
    t.count = 1;

    h.data = (const u_char *) ihcl;
    h.len = ihcl ? strlen(ihcl) : 0;
    h.count = (ihcl != NULL);

    if (answer) {
        return oip_response_framing(&res, f, &h, &t);
    }

    return oip_request_framing(&res, f, &h, &none, &t);
}


static void
test_carriers(void)
{
    char           buf[OIP_CARRIER_TYPE_LEN];
    oip_framing_t  f;

    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=42", NULL, &f, 0) == 0
       && f.ihcl == 42 && f.carrier == OIP_CARRIER_SAGEMAKER,
       "sagemaker: json-header-size is the IHCL");
    ok(carrier(OIP_TYPE_VERTEX ";json-header-size=0", NULL, &f, 0) == 0
       && f.ihcl == 0 && f.carrier == OIP_CARRIER_VERTEX,
       "vertex: 0 is a raw request");
    ok(carrier(" Application/VND.Vertex-AI-Triton.Binary+JSON ; charset=x ;"
               " JSON-Header-Size=\"7\"", NULL, &f, 0) == 0
       && f.ihcl == 7 && f.carrier == OIP_CARRIER_VERTEX,
       "any case, spaces, other parameters, a quoted value");
    ok(carrier(OIP_TYPE_SAGEMAKER, NULL, &f, 0) == 0 && f.ihcl == -1
       && f.carrier == OIP_CARRIER_SAGEMAKER,
       "no json-header-size: JSON, the answer in that type");
    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=42", "42", &f, 0) == 0
       && f.ihcl == 42, "the same length twice");
    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=42", "41", &f, 0)
       == 400, "two lengths that differ: 400");
    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=42", "41", &f, 1)
       == 502, "two lengths that differ in an answer: 502");
    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=-1", NULL, &f, 0)
       == 400, "a negative size");
    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=012", NULL, &f, 0)
       == 400, "a leading zero");
    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=", NULL, &f, 0)
       == 400, "an empty size");
    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=1;json-header-size=1",
               NULL, &f, 0) == 400, "a size twice");
    ok(carrier(OIP_TYPE_SAGEMAKER ";json-header-size=\"1", NULL, &f, 0)
       == 400, "an unclosed quote");
    ok(carrier(OIP_TYPE_SAGEMAKER "x;json-header-size=5", NULL, &f, 0) == 0
       && f.ihcl == -1 && f.carrier == OIP_CARRIER_HEADER,
       "another media type is not read");
    ok(carrier("x/" OIP_TYPE_VERTEX ";json-header-size=5", NULL, &f, 0) == 0
       && f.ihcl == -1 && f.carrier == OIP_CARRIER_HEADER,
       "nor one that only holds it");
    ok(carrier("application/json;json-header-size=5", "3", &f, 0) == 0
       && f.ihcl == 3 && f.carrier == OIP_CARRIER_HEADER,
       "json-header-size means nothing in application/json");
    ok(carrier(OIP_TYPE_VERTEX ";json-header-size=9", NULL, &f, 1) == 0
       && f.ihcl == 9 && f.carrier == OIP_CARRIER_VERTEX,
       "an answer's media type");

    ok(oip_carrier_type(OIP_CARRIER_SAGEMAKER, 123, buf, sizeof(buf)) > 0
       && strcmp(buf, OIP_TYPE_SAGEMAKER ";json-header-size=123") == 0,
       "the gateway's sagemaker type");
    ok(oip_carrier_type(OIP_CARRIER_VERTEX, -1, buf, sizeof(buf)) > 0
       && strcmp(buf, OIP_TYPE_VERTEX) == 0, "without a size");
    ok(oip_carrier_type(OIP_CARRIER_VERTEX, INT64_MAX, buf, sizeof(buf))
       > 0, "the largest size fits");
    ok(oip_carrier_type(OIP_CARRIER_VERTEX, 1, buf, 10) == 0,
       "a buffer too small");
}


static void
test_alloc_failures(void)
{
    int          st;
    size_t       k;
    run_t        r;
    oip_options_t  o;
    const char  *j;
    int          all500, refused;

    /* every allocation failing in turn gives a clean 500, never a crash */

    j = "{\"inputs\":[{\"name\":\"a\",\"shape\":[3],\"datatype\":\"BYTES\","
        "\"data\":[\"x\",\"y\",\"\\u00e9\"]},{\"name\":\"b\",\"shape\":[2,2],"
        "\"datatype\":\"FP32\",\"data\":[[1,2],[3,4]]}],\"outputs\":"
        "[{\"name\":\"o\"}],\"x\":{\"k\":1,\"\\u006b2\":2}}";

    all500 = 1;
    refused = 0;

    for (k = 1; k < 40; k++) {
        memset(&r, 0, sizeof(run_t));
        arena_init(&r.arena, &r.alloc);
        r.arena.fail_at = k;
        r.arena.fail_all = 1;

        o = opts;
        o.inputs = OIP_FORM_BINARY;

        st = oip_request_process(&r.req, &r.alloc, &o,
                                 &(oip_framing_t) { -1, OIP_ENC_NONE,
                                                    OIP_CARRIER_HEADER, 0, 0 },
                                 (u_char *) j, strlen(j));

        /* a refused allocation is a 500, and only that is */

        if (st != (r.arena.failed ? 500 : 0)) {
            all500 = 0;
            diag("allocation %zu failing gave %d: %s", k, st, r.req.error);
        }

        refused += r.arena.failed;

        arena_destroy(&r.arena);
    }

    ok(all500, "allocation failures end in 500 out of memory");
    ok(refused >= 10, "%d of the request's allocations made to fail",
       refused);
}


/* what an accepted request reports for the operator's variables */

static void
test_stats(void)
{
    int            st;
    run_t          r;
    u_char         bin[4] = { 1, 0, 2, 0 };
    oip_options_t  o;
    const char    *j;

    o = opts;
    o.inputs = OIP_FORM_BINARY;

    j = "{\"id\":\"a\\u00e9\\\"b\",\"inputs\":["
        "{\"name\":\"x\",\"shape\":[2,3],\"datatype\":\"FP32\","
        "\"data\":[1,2,3,4,5,6]},"
        "{\"name\":\"y\",\"shape\":[2],\"datatype\":\"INT16\","
        "\"parameters\":{\"binary_data_size\":4}}]}";
    st = run_opts(&r, &o, j, strlen(j), bin, 4, -2, OIP_ENC_NONE);
    ok(st == 0 && r.req.ninputs == 2 && r.req.elements == 8
       && r.req.tensor_bytes == 28 && r.req.in_form == OIP_SHAPE_MIXED
       && r.req.out_form == OIP_SHAPE_BINARY
       && r.req.id_len == 5 && memcmp(r.req.id, "a\xc3\xa9\"b", 5) == 0,
       "stats: mixed in, binary up, id unescaped");
    run_free(&r);

    o.inputs = OIP_FORM_JSON;
    st = run_opts(&r, &o, j, strlen(j), bin, 4, -2, OIP_ENC_NONE);
    ok(st == 0 && r.req.in_form == OIP_SHAPE_MIXED
       && r.req.out_form == OIP_SHAPE_JSON, "stats: json up");
    run_free(&r);

    o.inputs = OIP_FORM_KEEP;
    j = "{\"id\":7,\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
        "\"datatype\":\"BOOL\",\"data\":[true]}]}";
    st = run_opts(&r, &o, j, strlen(j), NULL, 0, -1, OIP_ENC_NONE);
    ok(st == 0 && r.req.id == NULL && r.req.in_form == OIP_SHAPE_JSON
       && r.req.out_form == OIP_SHAPE_JSON && r.req.elements == 1,
       "stats: a number id is no id; json kept");
    run_free(&r);

    st = run_opts(&r, &o, "", 0, bin, 4, 0, OIP_ENC_NONE);
    ok(st == 0 && r.req.in_form == OIP_SHAPE_RAW
       && r.req.out_form == OIP_SHAPE_RAW && r.req.ninputs == 1
       && r.req.tensor_bytes == 4, "stats: raw passed on");
    run_free(&r);
}


/* each refusal says why for programs, where it is decided */

static void
reason_is(const char *json, off_t ihcl, oip_encoding_e enc, size_t max_json,
    oip_reason_e want)
{
    int            st;
    run_t          r;
    oip_options_t  o;

    o = opts;
    o.inputs = OIP_FORM_BINARY;

    if (max_json) {
        o.max_json_size = max_json;
    }

    st = run_opts(&r, &o, json, strlen(json), NULL, 0, ihcl, enc);

    if (!ok(st != 0 && r.req.reason == want, "refused, reason %d: %.50s",
            (int) want, json))
    {
        diag("status %d, reason %d: %s", st, (int) r.req.reason,
             r.req.error);
    }

    run_free(&r);
}


static void
test_reasons(void)
{
    run_t  r;

    static const char  good[] = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
                                "\"datatype\":\"INT8\",\"data\":[1]}]}";

    reason_is("{\"inputs\": [", -1, OIP_ENC_NONE, 0, OIP_REASON_SYNTAX);
    reason_is("[1, 2]", -1, OIP_ENC_NONE, 0, OIP_REASON_SYNTAX);
    reason_is("{\"inputs\":[{\"name\":\"x\",\"shape\":[3],"
              "\"datatype\":\"INT32\",\"data\":[1]}]}", -1, OIP_ENC_NONE, 0,
              OIP_REASON_SHAPE);
    reason_is("{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
              "\"datatype\":\"FP8\",\"data\":[1]}]}", -1, OIP_ENC_NONE, 0,
              OIP_REASON_DATATYPE);
    reason_is("{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
              "\"datatype\":\"INT8\",\"data\":[300]}]}", -1, OIP_ENC_NONE, 0,
              OIP_REASON_DATATYPE);
    reason_is("{\"inputs\":[]}", -1, OIP_ENC_NONE, 0, OIP_REASON_OTHER);
    reason_is("{\"inputs\":[], \"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
              -1, OIP_ENC_NONE, 16, OIP_REASON_LIMIT);
    reason_is("this is no gzip stream", -1, OIP_ENC_GZIP, 0,
              OIP_REASON_ENCODING);

    /* bytes after the JSON, within an IHCL or without one: broken JSON */

    reason_is("{\"inputs\":[]} xy", 16, OIP_ENC_NONE, 0, OIP_REASON_SYNTAX);
    reason_is("{\"inputs\":[]} xy", -1, OIP_ENC_NONE, 0, OIP_REASON_SYNTAX);

    /* an IHCL past the body: the binary framing */

    reason_is("{\"inputs\":[]}", 99, OIP_ENC_NONE, 0, OIP_REASON_SHAPE);

    /* and none for a request accepted */

    ok(run(&r, OIP_FORM_BINARY, good, strlen(good), NULL, 0, -1) == 0
       && r.req.reason == OIP_REASON_NONE, "accepted: no reason");
    run_free(&r);
}


/*
 * A body that is also a file's (opt.body_file, nginx's spilled body):
 * every segment that references the body says where it lies in the
 * file, and only those; the same with the gRPC writer; none when the
 * body was decompressed (its file holds other bytes).
 */

static int
file_segs_check(run_t *r, size_t body_len, int with_file)
{
    size_t            i, found;
    int64_t           want;
    const oip_seg_t  *sg;

    found = 0;

    for (i = 0; i < r->req.nsegs; i++) {
        sg = &r->req.segs[i];

        if (sg->data >= r->body && sg->data < r->body + body_len) {
            want = with_file ? sg->data - r->body : -1;
            found += (sg->len == 1024);

        } else {
            want = -1;
        }

        if (sg->file != want) {
            return 0;
        }
    }

    /* the binary chunk was referenced, not copied */
    return found == 1;
}


static void
test_body_file(void)
{
    int                 st;
    size_t              i, jlen;
    u_char              bin[1024];
    run_t               r;
    oip_options_t       o;
    oip_grpc_options_t  g;

    static const char  json[] =
        "{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"FP32\","
        "\"data\":[1,2]},{\"name\":\"b\",\"shape\":[256],"
        "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":1024}}]}";

    for (i = 0; i < sizeof(bin); i++) {
        bin[i] = (u_char) i;
    }

    jlen = sizeof(json) - 1;

    o = opts;
    o.inputs = OIP_FORM_BINARY;
    o.body_file = 1;

    st = run_opts(&r, &o, json, jlen, bin, sizeof(bin), -2, OIP_ENC_NONE);
    ok(st == 0 && r.req.rewritten && file_segs_check(&r, jlen + 1024, 1),
       "body_file: the chunk referenced says its offset, written bytes "
       "none");
    run_free(&r);

    o.body_file = 0;

    st = run_opts(&r, &o, json, jlen, bin, sizeof(bin), -2, OIP_ENC_NONE);
    ok(st == 0 && file_segs_check(&r, jlen + 1024, 0),
       "without body_file: no offsets");
    run_free(&r);

    memset(&g, 0, sizeof(g));
    g.model = (const u_char *) "m";
    g.model_len = 1;
    g.max_message = 1 << 20;

    o.body_file = 1;
    o.grpc = &g;

    st = run_opts(&r, &o, json, jlen, bin, sizeof(bin), -2, OIP_ENC_NONE);
    ok(st == 0 && file_segs_check(&r, jlen + 1024, 1),
       "body_file: raw contents referenced from the body say their offset");
    run_free(&r);
}


/* the request-level priority and timeout, read as Triton reads them */

static void
test_priority_timeout(void)
{
    int          st;
    run_t        r;
    const char  *json;

    static const char *bad[] = {
        "-1", "1.0", "1e3", "\"1\"", "true", "9223372036854775808",
        "18446744073709551616"
    };
    size_t  i;
    char    buf[256];

    json = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
           "\"datatype\":\"INT32\",\"data\":[1]}],\"parameters\":"
           "{\"priority\":2,\"timeout\": 9223372036854775807 }}";
    st = run(&r, OIP_FORM_KEEP, json, strlen(json), NULL, 0, -1);
    ok(st == 0 && r.req.has_priority && r.req.priority == 2
       && r.req.has_timeout && r.req.timeout == UINT64_C(9223372036854775807),
       "priority 2 and the largest timeout read");
    run_free(&r);

    json = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
           "\"datatype\":\"INT32\",\"data\":[1],\"parameters\":"
           "{\"priority\":\"x\"}}]}";
    st = run(&r, OIP_FORM_KEEP, json, strlen(json), NULL, 0, -1);
    ok(st == 0 && !r.req.has_priority && !r.req.has_timeout,
       "an input's \"priority\" is the input's own, not read");
    run_free(&r);

    json = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
           "\"datatype\":\"INT32\",\"data\":[1]}],\"parameters\":"
           "{\"priority\":0}}";
    st = run(&r, OIP_FORM_KEEP, json, strlen(json), NULL, 0, -1);
    ok(st == 0 && r.req.has_priority && r.req.priority == 0
       && !r.req.has_timeout, "priority 0 kept as 0, no timeout");
    run_free(&r);

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(buf, sizeof(buf), "{\"inputs\":[{\"name\":\"x\","
                 "\"shape\":[1],\"datatype\":\"INT32\",\"data\":[1]}],"
                 "\"parameters\":{\"%s\":%s}}",
                 (i % 2) ? "timeout" : "priority", bad[i]);
        reject(OIP_FORM_KEEP, buf, strlen(buf), NULL, 0, -1, 400,
               (i % 2) ? "parameter \"timeout\" must be an integer from 0 "
                         "to 9223372036854775807"
                       : "parameter \"priority\" must be an integer from 0 "
                         "to 9223372036854775807");
    }
}


/* what goes upstream: the effective priority, the timeout's place */

static void
prio_is(const oip_options_t *o, const char *params, const char *want,
    uint64_t eff, int given, const char *what)
{
    int     st;
    run_t   r;
    char    json[512];

    snprintf(json, sizeof(json), "{\"inputs\":[{\"name\":\"x\",\"shape\":"
             "[1],\"datatype\":\"INT32\",\"data\":[1]}]%s}", params);

    st = run_opts(&r, o, json, strlen(json), NULL, 0, -1, OIP_ENC_NONE);

    if (!ok(st == 0 && strstr((char *) r.out, want) != NULL
            && r.req.priority == eff && r.req.has_priority == given
            && (strcmp(want, params) != 0 || !r.req.rewritten),
            "%s", what))
    {
        diag("%d: %.*s (priority %llu, %d)", st, (int) r.len, r.out,
             (unsigned long long) r.req.priority, r.req.has_priority);
    }

    run_free(&r);
}


static void
test_priority_edits(void)
{
    int            st;
    run_t          r;
    const char    *json;
    oip_options_t  o;

    o = opts;
    o.levels = 2;
    o.default_level = 2;

    prio_is(&o, ",\"parameters\":{\"priority\":1}",
            ",\"parameters\":{\"priority\":1}", 1, 1,
            "a level in range goes as it came");
    prio_is(&o, ",\"parameters\":{\"priority\":7,\"a\":1}",
            ",\"parameters\":{\"priority\":2,\"a\":1}", 2, 1,
            "above the levels: the default level, written");
    prio_is(&o, ",\"parameters\":{\"priority\":0}",
            ",\"parameters\":{\"priority\":2}", 2, 1,
            "0: the default level, written");
    prio_is(&o, "", "\"data\":[1]}]}", 0, 0,
            "none: none upstream (the runtime's default)");

    /* oip_priority: overrides both ways, added where the client had none */

    o.priority_set = 1;
    o.priority = 1;
    prio_is(&o, ",\"parameters\":{\"priority\":2}",
            ",\"parameters\":{\"priority\":1}", 1, 1,
            "oip_priority raises a request");
    prio_is(&o, "", "\"data\":[1]}],\"parameters\":{\"priority\":1}}", 1, 1,
            "oip_priority added, \"parameters\" made");
    prio_is(&o, ",\"parameters\":{\"a\":1}",
            ",\"parameters\":{\"a\":1,\"priority\":1}", 1, 1,
            "oip_priority added to the parameters");
    prio_is(&o, ",\"parameters\":{}", ",\"parameters\":{\"priority\":1}", 1, 1,
            "oip_priority added to empty parameters");
    o.priority = 9;
    prio_is(&o, ",\"parameters\":{\"priority\":1}",
            ",\"parameters\":{\"priority\":2}", 2, 1,
            "oip_priority lowers a request, the level rule after it");

    /* with the outputs' flag: one "parameters" for both */

    o.priority = 1;
    o.outputs = OIP_FORM_BINARY;
    prio_is(&o, "", ",\"parameters\":{\"binary_data_output\":true,"
            "\"priority\":1}}", 1, 1, "flag and priority made together");
    prio_is(&o, ",\"parameters\":{\"a\":1}",
            ",\"parameters\":{\"a\":1,\"binary_data_output\":true,"
            "\"priority\":1}}", 1, 1, "flag and priority added together");
    prio_is(&o, ",\"parameters\":{\"priority\":2}",
            ",\"parameters\":{\"priority\":1,\"binary_data_output\":true}}",
            1, 1, "flag added, priority replaced");

    o.outputs = OIP_FORM_JSON;
    prio_is(&o, ",\"parameters\":{\"binary_data_output\":true}",
            ",\"parameters\":{\"priority\":1}}", 1, 1,
            "the flag alone: the priority takes its place");
    prio_is(&o, ",\"parameters\":{\"binary_data_output\":true,\"a\":1}",
            ",\"parameters\":{\"a\":1,\"priority\":1}}", 1, 1,
            "the flag removed, the priority added");

    /* the timeout: its digits where the glue writes the remaining time */

    json = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":"
           "\"INT32\",\"data\":[1]}],\"parameters\":{\"timeout\":50000 }}";
    st = run(&r, OIP_FORM_KEEP, json, strlen(json), NULL, 0, -1);
    ok(st == 0 && r.req.rewritten && r.req.deadline_len == 5
       && !r.req.deadline_pb && memcmp(r.req.deadline_at, "50000", 5) == 0,
       "a timeout: rewritten, its digits' place given");
    memcpy(r.req.deadline_at, "123  ", 5);
    free(r.out);
    r.out = flatten(r.req.segs, r.req.nsegs, r.req.body_len, &r.len);
    ok(r.len == strlen(json)
       && strstr((char *) r.out, "{\"timeout\":123   }}") != NULL,
       "the remaining time written in place, padded");
    run_free(&r);

    json = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":"
           "\"INT32\",\"data\":[1]}],\"parameters\":{\"timeout\":0}}";
    st = run(&r, OIP_FORM_KEEP, json, strlen(json), NULL, 0, -1);
    ok(st == 0 && !r.req.rewritten && r.req.deadline_at == NULL,
       "timeout 0 is none: nothing to write");
    run_free(&r);
}


/* Triton's sequence batcher's parameters: read, refused precisely */

static void
seq_is(const char *params, int has, uint64_t id, const char *str, int start,
    int end, const char *what)
{
    int     st;
    run_t   r;
    char    json[512];

    snprintf(json, sizeof(json), "{\"inputs\":[{\"name\":\"x\",\"shape\":"
             "[1],\"datatype\":\"INT32\",\"data\":[1]}],\"parameters\":%s}",
             params);

    st = run(&r, OIP_FORM_KEEP, json, strlen(json), NULL, 0, -1);

    if (!ok(st == 0 && r.req.has_sequence == has && r.req.sequence_id == id
            && (str == NULL ? r.req.sequence_str == NULL
                : (r.req.sequence_str_len == strlen(str)
                   && memcmp(r.req.sequence_str, str, strlen(str)) == 0))
            && r.req.sequence_start == start && r.req.sequence_end == end
            && !r.req.rewritten, "%s", what))
    {
        diag("%d %s: has %d, id %llu", st, r.req.error, r.req.has_sequence,
             (unsigned long long) r.req.sequence_id);
    }

    run_free(&r);
}


static void
test_sequence(void)
{
    size_t  i;
    char    buf[256];

    static const char *bad_id[] = {
        "-1", "1.0", "1e3", "true", "18446744073709551616", "{}"
    };
    static const char *bad_flag[] = { "1", "\"true\"", "0" };

    seq_is("{\"sequence_id\":42,\"sequence_start\":true}", 1, 42, NULL, 1, 0,
           "an integer id, the start");
    seq_is("{\"sequence_id\":18446744073709551615,\"sequence_end\":true}", 1,
           UINT64_C(18446744073709551615), NULL, 0, 1,
           "the largest id, the end");
    seq_is("{\"sequence_id\":\"s-\\u00e9\",\"sequence_start\":false}", 1, 0,
           "s-\xc3\xa9", 0, 0, "a string id, unescaped");
    seq_is("{\"sequence_id\":\"1\"}", 1, 0, "1", 0, 0,
           "the string \"1\" is a string");
    seq_is("{\"sequence_id\":0,\"sequence_start\":true}", 0, 0, NULL, 1, 0,
           "0: none");
    seq_is("{\"sequence_id\":\"\"}", 0, 0, NULL, 0, 0, "\"\": none");
    seq_is("{\"sequence_idx\":\"x\"}", 0, 0, NULL, 0, 0,
           "another parameter is the runtime's");
    seq_is("{\"a\":1}", 0, 0, NULL, 0, 0, "none");

    for (i = 0; i < sizeof(bad_id) / sizeof(bad_id[0]); i++) {
        snprintf(buf, sizeof(buf), "{\"inputs\":[{\"name\":\"x\",\"shape\":"
                 "[1],\"datatype\":\"INT32\",\"data\":[1]}],\"parameters\":"
                 "{\"sequence_id\":%s}}", bad_id[i]);
        reject(OIP_FORM_KEEP, buf, strlen(buf), NULL, 0, -1, 400,
               i == 5 ? "must be a string, number or boolean"
                      : "parameter \"sequence_id\" must be an integer from 0 "
                        "to 18446744073709551615 or a string");
    }

    for (i = 0; i < sizeof(bad_flag) / sizeof(bad_flag[0]); i++) {
        snprintf(buf, sizeof(buf), "{\"inputs\":[{\"name\":\"x\",\"shape\":"
                 "[1],\"datatype\":\"INT32\",\"data\":[1]}],\"parameters\":"
                 "{\"sequence_%s\":%s}}", i % 2 ? "end" : "start",
                 bad_flag[i]);
        reject(OIP_FORM_KEEP, buf, strlen(buf), NULL, 0, -1, 400,
               i % 2 ? "parameter \"sequence_end\" must be a boolean"
                     : "parameter \"sequence_start\" must be a boolean");
    }
}


int
main(void)
{
    test_datatypes();
    test_shapes();
    test_passthrough();
    test_mixed();
    test_many_inputs();
    test_errors();
    test_ihcl();
    test_carriers();
    test_alloc_failures();
    test_stats();
    test_reasons();
    test_body_file();
    test_priority_timeout();
    test_priority_edits();
    test_sequence();

    return tap_done();
}
