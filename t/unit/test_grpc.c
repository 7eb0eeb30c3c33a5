
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The gRPC transport's protobuf: REST requests as ModelInferRequest
 * bytes, written out by hand from the field numbers (raw and typed
 * contents, parameters of each kind, what gRPC cannot carry), and
 * ModelInferResponse bytes read into items and written as REST answers
 * (raw and typed, packed and not, broken messages refused; each
 * client's form, dropped outputs, a cached answer's id), health and
 * metadata.
 * Each message's bytes were checked once against python3-protobuf's
 * parse of the same message (map entries are in the order written).
 */


#include "codec_test.h"


static char  grpc_err[OIP_ERROR_LEN];

static oip_grpc_options_t  gopt = {
    (const u_char *) "m", 1, (const u_char *) "", 0, 4 << 20, 0
};


/* a JSON request as a ModelInfer message, from its items: its bytes */

static int
to_grpc(run_t *r, const char *json, const oip_grpc_options_t *g,
    u_char **out, size_t *len)
{
    int            st;
    oip_options_t  o = opts;

    o.inputs = OIP_FORM_BINARY;
    o.grpc = g;

    st = run_opts(r, &o, json, strlen(json), NULL, 0, -1, OIP_ENC_NONE);
    if (st) {
        memcpy(grpc_err, r->req.error, OIP_ERROR_LEN);
        return st;
    }

    /* run_opts flattened the message into r->out */

    *out = malloc(r->len ? r->len : 1);
    memcpy(*out, r->out, r->len);
    *len = r->len;

    if (!ok(r->req.rewritten && *len == r->req.body_len
            && strcmp(r->req.content_type, OIP_TYPE_GRPC) == 0,
            "gRPC body length and type"))
    {
        diag("%zu against %zu", *len, r->req.body_len);
    }

    return 0;
}


static void
grpc_is(const char *json, const oip_grpc_options_t *g, const char *want,
    const char *what)
{
    run_t    r;
    u_char  *got, exp[1024];
    size_t   len, n;

    if (to_grpc(&r, json, g, &got, &len) != 0) {
        ok(0, "%s", what);
        diag("refused: %s %s", r.req.error, grpc_err);
        run_free(&r);
        return;
    }

    n = hex(want, exp);

    if (!ok(len == n && memcmp(got, exp, n) == 0, "%s", what)) {
        diag("got %zu bytes:", len);
        for (size_t i = 0; i < len; i++) {
            printf("%02x%s", got[i], (i % 32 == 31) ? "\n" : "");
        }
        printf("\n");
    }

    free(got);
    run_free(&r);
}


static void
grpc_refused(const char *json, const oip_grpc_options_t *g, int status,
    const char *msg)
{
    run_t    r;
    u_char  *got;
    size_t   len;
    int      st;

    got = NULL;
    grpc_err[0] = '\0';
    st = to_grpc(&r, json, g, &got, &len);

    if (!ok(st == status && (msg == NULL || strstr(r.req.error, msg)
                             || strstr(grpc_err, msg)),
            "refused %d: %s", status, msg ? msg : ""))
    {
        diag("got %d: %s %s", st, r.req.error, grpc_err);
    }

    free(got);
    run_free(&r);
}


static void
test_request(void)
{
    int                 st;
    oip_grpc_options_t  g;

#define IN_INT32                                                              \
    "{\"inputs\":[{\"name\":\"I\",\"datatype\":\"INT32\",\"shape\":[2],"      \
    "\"data\":[1,-2]}]}"

    /* model_name; inputs[0]: name, datatype, packed shape; raw contents */
    grpc_is(IN_INT32, &gopt,
            "00 0000001c"
            "0a 01 6d"
            "2a 0d 0a 01 49 12 05 494e543332 1a 01 02"
            "3a 08 01000000 feffffff",
            "INT32 request, raw contents");

    /* the version, the id, parameters of each kind, requested outputs */
    g = gopt;
    g.version = (const u_char *) "3";
    g.version_len = 1;

    grpc_is("{\"id\":\"r\\u0031\",\"parameters\":{\"i\":-1,\"b\":false,"
            "\"s\":\"x\",\"d\":0.5,\"u\":18446744073709551615,"
            "\"binary_data_output\":true},"
            "\"inputs\":[{\"name\":\"I\",\"datatype\":\"BOOL\","
            "\"shape\":[1],\"data\":[true],"
            "\"parameters\":{\"p\":\"q\"}}],"
            "\"outputs\":[{\"name\":\"O\",\"parameters\":"
            "{\"binary_data\":true,\"k\":7}},{\"name\":\"P\"}]}",
            &g,
            "00 0000007f"
            "0a 01 6d 12 01 33 1a 02 7231"
            /* i: int64 -1, a ten-byte varint */
            "22 10 0a 01 69 12 0b 10 ffffffffffffffffff01"
            /* b: false is written: a oneof member is present */
            "22 07 0a 01 62 12 02 08 00"
            "22 08 0a 01 73 12 03 1a 01 78"
            "22 0e 0a 01 64 12 09 21 000000000000e03f"
            /* u: above int64, uint64_param */
            "22 10 0a 01 75 12 0b 28 ffffffffffffffffff01"
            "2a 16 0a 01 49 12 04 424f4f4c 1a 01 01"
            "22 08 0a 01 70 12 03 1a 01 71"
            "32 0c 0a 01 4f 12 07 0a 01 6b 12 02 10 07"
            "32 03 0a 01 50"
            "3a 01 01",
            "version, id, parameters of each kind, outputs");

    /* the effective priority as int64_param, replaced or added; the
     * timeout in ten bytes, its place given */
    {
        run_t          r;
        const char    *json;
        u_char        *got;
        size_t         len;
        oip_options_t  o = opts;

        o.inputs = OIP_FORM_BINARY;
        o.grpc = &gopt;
        o.levels = 2;
        o.default_level = 2;

        json = "{\"parameters\":{\"priority\":5,\"timeout\":300},"
               "\"inputs\":[{\"name\":\"I\",\"datatype\":\"BOOL\","
               "\"shape\":[1],\"data\":[true]}]}";
        st = run_opts(&r, &o, json, strlen(json), NULL, 0, -1, OIP_ENC_NONE);
        got = r.out;
        len = r.len;
        ok(st == 0 && r.req.deadline_pb && r.req.deadline_len == 10
           && memmem(got, len, "\x22\x0e\x0a\x08priority\x12\x02\x10\x02",
                     15) != NULL
           && memmem(got, len, "\x22\x16\x0a\x07timeout\x12\x0b\x10"
                     "\xac\x82\x80\x80\x80\x80\x80\x80\x80\x00", 23) != NULL
           && r.req.deadline_at[0] == 0xac && r.req.deadline_at[9] == 0,
           "gRPC: the priority by the levels, the timeout in ten bytes");
        run_free(&r);

        o.levels = 0;
        o.priority_set = 1;
        o.priority = 1;
        st = run_opts(&r, &o, IN_INT32, strlen(IN_INT32), NULL, 0, -1,
                      OIP_ENC_NONE);
        ok(st == 0 && r.req.deadline_at == NULL
           && memmem(r.out, r.len, "\x22\x0e\x0a\x08priority\x12\x02\x10\x01",
                     15) != NULL,
           "gRPC: oip_priority's value added as int64_param");
        run_free(&r);
    }

    /* a sequence id above INT64_MAX as the int64_param Triton takes,
     * a string id as string_param, the flags as bool_param */
    grpc_is("{\"parameters\":{\"sequence_id\":18446744073709551615,"
            "\"sequence_start\":true},\"inputs\":[{\"name\":\"I\","
            "\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[true]}]}",
            &gopt,
            "00 00000046"
            "0a 01 6d"
            "22 1a 0a 0b 73657175656e63655f6964 12 0b 10 ffffffffffffffffff01"
            "22 14 0a 0e 73657175656e63655f7374617274 12 02 08 01"
            "2a 0c 0a 01 49 12 04 424f4f4c 1a 01 01"
            "3a 01 01",
            "a sequence id above INT64_MAX: int64_param");
    grpc_is("{\"parameters\":{\"sequence_id\":\"s1\",\"sequence_end\":true},"
            "\"inputs\":[{\"name\":\"I\",\"datatype\":\"BOOL\","
            "\"shape\":[1],\"data\":[true]}]}",
            &gopt,
            "00 0000003d"
            "0a 01 6d"
            "22 13 0a 0b 73657175656e63655f6964 12 04 1a 02 7331"
            "22 12 0a 0c 73657175656e63655f656e64 12 02 08 01"
            "2a 0c 0a 01 49 12 04 424f4f4c 1a 01 01"
            "3a 01 01",
            "a string sequence id: string_param");

    /* typed: int_contents as varints, negatives in ten bytes */
    g = gopt;
    g.typed = 1;

    grpc_is(IN_INT32, &g,
            "00 00000021"
            "0a 01 6d"
            "2a 1c 0a 01 49 12 05 494e543332 1a 01 02"
            "2a 0d 12 0b 01 feffffffffffffffff01",
            "INT32 request, typed contents");

    /* typed FP32: the packed field is the binary bytes */
    grpc_is("{\"inputs\":[{\"name\":\"I\",\"datatype\":\"FP32\","
            "\"shape\":[2],\"data\":[1,2]}]}", &g,
            "00 0000001d"
            "0a 01 6d"
            "2a 18 0a 01 49 12 04 46503332 1a 01 02"
            "2a 0a 32 08 0000803f 00000040",
            "FP32 request, typed contents");

    /* typed BYTES: one field an element */
    grpc_is("{\"inputs\":[{\"name\":\"I\",\"datatype\":\"BYTES\","
            "\"shape\":[2],\"data\":[\"ab\",\"\"]}]}", &g,
            "00 0000001a"
            "0a 01 6d"
            "2a 15 0a 01 49 12 05 4259544553 1a 01 02"
            "2a 06 42 02 6162 42 00",
            "BYTES request, typed contents");

    /* raw BYTES keep their length prefixes, as Triton reads them */
    grpc_is("{\"inputs\":[{\"name\":\"I\",\"datatype\":\"BYTES\","
            "\"shape\":[1],\"data\":[\"ab\"]}]}", &gopt,
            "00 0000001a"
            "0a 01 6d"
            "2a 0d 0a 01 49 12 05 4259544553 1a 01 01"
            "3a 06 02000000 6162",
            "BYTES request, raw contents");

    /* an empty tensor still has its raw entry: they pair by index */
    grpc_is("{\"inputs\":[{\"name\":\"I\",\"datatype\":\"FP32\","
            "\"shape\":[0],\"data\":[]}]}", &gopt,
            "00 00000013"
            "0a 01 6d"
            "2a 0c 0a 01 49 12 04 46503332 1a 01 00"
            "3a 00",
            "empty tensor");

    grpc_refused("{\"inputs\":[{\"name\":\"I\",\"datatype\":\"FP16\","
                 "\"shape\":[1],\"data\":[1]}]}", &g, 400,
                 "FP16 has no typed contents");


    grpc_refused("{\"inputs\":[{\"name\":\"I\",\"datatype\":\"FP32\","
                 "\"shape\":[1],\"data\":[1],\"parameters\":{\"l\":[]}}]}",
                 &gopt, 400, "input 'I' parameter 'l'");

    grpc_refused("{\"inputs\":[{\"name\":\"I\",\"datatype\":\"FP32\","
                 "\"shape\":[1],\"parameters\":"
                 "{\"shared_memory_region\":\"r\","
                 "\"shared_memory_byte_size\":4}}]}",
                 &gopt, 400, "shared memory is not carried");

    g = gopt;
    g.max_message = 27;
    grpc_refused(IN_INT32, &g, 413, "exceeds oip_grpc_max_message (27");
    g.max_message = 28;
    grpc_is(IN_INT32, &g,
            "00 0000001c 0a 01 6d 2a 0d 0a 01 49 12 05 494e543332 1a 01 02"
            "3a 08 01000000 feffffff", "exactly oip_grpc_max_message");
}


/* an answer read, every output binary: its JSON and bytes, or its status */

static int
from_grpc(const char *hexmsg, char *json, u_char *data, size_t *dlen)
{
    u_char         msg[2048], *all;
    size_t         n, len;
    arena_t        arena;
    oip_wish_t     wish;
    oip_alloc_t    alloc;
    oip_result_t   res;
    oip_options_t  o = opts;

    arena_init(&arena, &alloc);

    n = hex(hexmsg, msg);

    /* exactly its length, for ASan */
    u_char *body = malloc(n ? n : 1);
    memcpy(body, msg, n);

    /* a client that wants every output binary: every output as it came */

    memset(&wish, 0, sizeof(oip_wish_t));
    wish.binary = 1;

    if (oip_response_process(&res, &alloc, &o, &wish,
                             &(oip_framing_t) { -1, OIP_ENC_NONE,
                                                OIP_CARRIER_HEADER, 1, 0 },
                             body, n)
        != 0)
    {
        snprintf(json, 512, "%d %s", res.status, res.error);
        free(body);
        arena_destroy(&arena);
        return res.status;
    }

    all = flatten(res.segs, res.nsegs, res.body_len, &len);

    memcpy(json, all, res.header_len);
    json[res.header_len] = '\0';
    *dlen = len - res.header_len;
    memcpy(data, all + res.header_len, *dlen);
    free(all);

    free(body);
    arena_destroy(&arena);

    return 0;
}


static void
answer_is(const char *hexmsg, const char *want_json, const char *want_hex,
    const char *what)
{
    char    json[1024];
    u_char  data[512], exp[512];
    size_t  dlen, n;
    int     st;

    st = from_grpc(hexmsg, json, data, &dlen);
    n = hex(want_hex, exp);

    if (!ok(st == 0 && strcmp(json, want_json) == 0 && dlen == n
            && memcmp(data, exp, n) == 0, "%s", what))
    {
        diag("got %d: %s (%zu bytes)", st, json, st ? 0 : dlen);
    }
}


static void
answer_refused(const char *hexmsg, const char *msg)
{
    char    json[1024];
    u_char  data[512];
    size_t  dlen;
    int     st;

    st = from_grpc(hexmsg, json, data, &dlen);

    if (!ok(st == 502 && strstr(json, msg) != NULL, "answer refused: %s",
            msg))
    {
        diag("got %d: %s", st, st ? json : "");
    }
}


#define OUT_FP32                                                              \
    "0a 01 4f 12 04 46503332 1a 01 02"

static void
test_response(void)
{
    /* Triton's way: raw_output_contents */
    answer_is("00 00000021"
              "0a 01 6d 12 01 31 1a 01 78"
              "2a 0c " OUT_FP32
              "32 08 0000803f 00000040",
              "{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"x\","
              "\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP32\","
              "\"shape\":[2],\"parameters\":{\"binary_data_size\":8}}]}",
              "0000803f 00000040", "raw output contents");

    /* typed, packed; parameters of each kind, on the answer and output */
    answer_is("00 0000005b"
              "0a 01 6d"
              "22 10 0a 01 75 12 0b 28 ffffffffffffffffff01"
              "22 07 0a 01 62 12 02 08 01"
              "22 0e 0a 01 64 12 09 21 000000000000f87f"
              "22 08 0a 01 73 12 03 1a 01 78"
              "2a 21 " OUT_FP32 " 22 07 0a 01 6b 12 02 10 7f"
              " 2a 0a 32 08 0000803f 00000040",
              "{\"model_name\":\"m\",\"model_version\":\"\","
              "\"parameters\":{\"u\":18446744073709551615,\"b\":true,"
              "\"d\":null,\"s\":\"x\"},"
              "\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP32\","
              "\"shape\":[2],\"parameters\":{\"k\":127,"
              "\"binary_data_size\":8}}]}",
              "0000803f 00000040", "typed contents, parameters");

    /* typed, not packed: one field an element; shape unpacked too */
    answer_is("00 00000028"
              "2a 26 0a 01 4f 12 05 494e543332 18 03"
              " 2a 18 10 05 10 feffffffffffffffff01 10 80808080f8ffffffff01",
              "{\"model_name\":\"\",\"model_version\":\"\","
              "\"outputs\":[{\"name\":\"O\",\"datatype\":\"INT32\","
              "\"shape\":[3],\"parameters\":{\"binary_data_size\":12}}]}",
              "05000000 feffffff 00000080", "unpacked int_contents");

    answer_is("00 00000016"
              "2a 14 0a 01 42 12 05 4259544553 1a 01 02"
              " 2a 05 42 01 61 42 00",
              "{\"model_name\":\"\",\"model_version\":\"\","
              "\"outputs\":[{\"name\":\"B\",\"datatype\":\"BYTES\","
              "\"shape\":[2],\"parameters\":{\"binary_data_size\":9}}]}",
              "01000000 61 00000000", "bytes_contents");

    answer_is("00 00000000",
              "{\"model_name\":\"\",\"model_version\":\"\",\"outputs\":[]}",
              "", "an empty message");

    answer_refused("00 00000003 0a 05 6d", "not a ModelInferResponse");
    answer_refused("01 00000003 0a 01 6d", "compressed");
    answer_refused("00 00000004 0a 01 6d", "message of 4 bytes comes with 3");
    answer_refused("00 0000", "holds no message");
    answer_refused("00 00000014 2a 0c " OUT_FP32 " 32 01 00 32 01 00",
                   "2 raw output contents for 1 outputs");
    answer_refused("00 00000012 2a 10 0a 01 4f 12 04 46503136 1a 01 01"
                   " 2a 02 32 00", "typed contents for a FP16 output");
    answer_refused("00 00000011 2a 0f 0a 01 4f 12 04 494e5438 2a 04 12 02"
                   "ff01", "out of range for a INT8 output");
    answer_refused("00 0000000f 2a 0d 0a 01 4f 12 04 46503332 2a 02 30 02",
                   "do not fit a FP32 output");
    /* a group's wire type: not in proto3 */
    answer_refused("00 00000002 0b 0c", "not a ModelInferResponse");
    answer_refused("00 0000000b 2a 09 0a 01 4f 12 04 46503939",
                   "datatype 'FP99'");
}


/*
 * An answer given to a client with a wish (and, for a cached answer,
 * the request's id): the whole body, binary bytes as hex after a '|',
 * and whether it was reshaped.
 */

/* the answers below are ModelStreamInferResponses when it is set */
static unsigned  stream_answers;


static void
answer_for(const char *hexmsg, const oip_wish_t *w, const char *id,
    const char *want, int reshaped, const char *what)
{
    char           got[1024];
    u_char         msg[512], *all;
    size_t         n, len, i;
    arena_t        arena;
    oip_alloc_t    alloc;
    oip_result_t   res;
    oip_options_t  o = opts;

    arena_init(&arena, &alloc);
    n = hex(hexmsg, msg);

    if (id) {
        o.answer_id_set = 1;
        o.answer_id = *id ? (const u_char *) id : NULL;
        o.answer_id_len = strlen(id);
    }

    if (oip_response_process(&res, &alloc, &o, w,
                             &(oip_framing_t) { -1, OIP_ENC_NONE,
                                                OIP_CARRIER_HEADER, 1,
                                                stream_answers },
                             msg, n)
        != 0)
    {
        snprintf(got, sizeof(got), "%d %s (%d)", res.status, res.error,
                 (int) res.reason);

    } else {
        all = flatten(res.segs, res.nsegs, res.body_len, &len);
        n = snprintf(got, sizeof(got), "%.*s", (int) res.header_len,
                     (char *) all);

        if (res.binary) {
            n += snprintf(got + n, sizeof(got) - n, "|");

            for (i = res.header_len; i < len; i++) {
                n += snprintf(got + n, sizeof(got) - n, "%02x", all[i]);
            }
        }

        free(all);
    }

    if (!ok(strcmp(got, want) == 0
            && (res.status || res.reshaped == (unsigned) reshaped),
            "%s", what))
    {
        diag("got %s (reshaped %d)", got, res.reshaped);
    }

    arena_destroy(&arena);
}


/* a JSON answer from items: "data" where the REST pipeline puts it */

#define TWO_OUTS                                                              \
    "00 00000042 0a 01 6d 12 01 31 1a 01 78"                                  \
    " 2a 15 " OUT_FP32 " 22 07 0a 01 6b 12 02 10 07"                          \
    " 2a 0f 0a 01 42 12 05 4259544553 1a 01 01 22 00"                         \
    " 32 08 0000803f 00000040 32 05 01000000 61"

static void
test_answer_forms(void)
{
    oip_wish_t      w;
    oip_wish_out_t  b;

    memset(&w, 0, sizeof(oip_wish_t));

    answer_for(TWO_OUTS, &w, NULL,
               "{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"x\","
               "\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP32\","
               "\"shape\":[2],\"parameters\":{\"k\":7},\"data\":[1.0,2.0]},"
               "{\"name\":\"B\",\"datatype\":\"BYTES\",\"shape\":[1],"
               "\"data\":[\"a\"]}]}", 1,
               "JSON client: parameters kept, \"data\" last");

    w.binary = 1;

    answer_for(TWO_OUTS, &w, NULL,
               "{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"x\","
               "\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP32\","
               "\"shape\":[2],\"parameters\":{\"k\":7,"
               "\"binary_data_size\":8}},"
               "{\"name\":\"B\",\"datatype\":\"BYTES\",\"shape\":[1],"
               "\"parameters\":{\"binary_data_size\":5}}]}"
               "|0000803f000000400100000061", 0,
               "binary client: already as asked, not reshaped");

    /* listed: B as binary, O dropped */

    b.name = (const u_char *) "B";
    b.len = 1;
    b.binary = 1;
    w.outputs = &b;
    w.n = 1;
    w.listed = 1;

    answer_for(TWO_OUTS, &w, NULL,
               "{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"x\","
               "\"outputs\":[{\"name\":\"B\",\"datatype\":\"BYTES\","
               "\"shape\":[1],\"parameters\":{\"binary_data_size\":5}}]}"
               "|0100000061", 1, "an output not listed is dropped");

    /* a cached answer: the request's id in its place, or last, or none */

    w.listed = 0;

    answer_for(TWO_OUTS, &w, "r\"1",
               "{\"model_name\":\"m\",\"model_version\":\"1\","
               "\"id\":\"r\\\"1\",\"outputs\":[{\"name\":\"O\","
               "\"datatype\":\"FP32\",\"shape\":[2],\"parameters\":{\"k\":7,"
               "\"binary_data_size\":8}},{\"name\":\"B\","
               "\"datatype\":\"BYTES\",\"shape\":[1],\"parameters\":"
               "{\"binary_data_size\":5}}]}|0000803f000000400100000061", 1,
               "a cached answer: the request's id where the answer's was");
    answer_for("00 00000000", &w, "",
               "{\"model_name\":\"\",\"model_version\":\"\",\"outputs\":[]}",
               0, "a cached answer without an id, for a request without");
    answer_for("00 00000000", &w, "q",
               "{\"model_name\":\"\",\"model_version\":\"\",\"outputs\":[],"
               "\"id\":\"q\"}", 1, "the request's id, last");

    /* what the REST pipeline refuses in an answer, refused alike */

    answer_for("00 00000011 2a 0f 0a 00 12 04 46503332 1a 01 00 2a 02 12 00",
               &w, NULL, "502 upstream answer: outputs[0]: 'name' must not "
               "be empty (7)", 0, "an output without a name");
    answer_for("00 00000017 2a 15 0a 01 4f 12 04 46503332"
               " 1a 0a ffffffffffffffffff01", &w, NULL,
               "502 upstream answer: output 'O': shape dimension -1 is not "
               "an integer from 0 to 2^63-1 (2)", 0, "a negative dimension");
    answer_for("00 00000020 2a 0c " OUT_FP32 " 2a 0c " OUT_FP32
               " 32 00 32 00", &w, NULL,
               "502 upstream answer: output name \"O\" appears twice (7)", 0,
               "an output named twice");
    answer_for("00 00000011 2a 0c " OUT_FP32 " 32 01 00", &w, NULL,
               "502 upstream answer: output 'O': binary_data_size is 1, but "
               "2 elements of FP32 need 8 (2)", 0, "bytes that do not fit the "
               "shape");

    /*
     * A decoupled model's stream: each ModelStreamInferResponse is its
     * infer_response (field 2), written as the same answer; its
     * error_message (field 1) ends the stream, its words read.
     */

    stream_answers = 1;
    w.listed = 0;
    w.binary = 0;

    answer_for("00 00000044 12 42 0a 01 6d 12 01 31 1a 01 78"
               " 2a 15 " OUT_FP32 " 22 07 0a 01 6b 12 02 10 07"
               " 2a 0f 0a 01 42 12 05 4259544553 1a 01 01 22 00"
               " 32 08 0000803f 00000040 32 05 01000000 61", &w, NULL,
               "{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"x\","
               "\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP32\","
               "\"shape\":[2],\"parameters\":{\"k\":7},\"data\":[1.0,2.0]},"
               "{\"name\":\"B\",\"datatype\":\"BYTES\",\"shape\":[1],"
               "\"data\":[\"a\"]}]}", 1,
               "a stream's response: its infer_response, as an answer");
    answer_for("00 0000001c 0a 1a 45786365656473206d6178696d756d2071756575"
               "652073697a65", &w, NULL,
               "502 upstream answer: the runtime's stream ends with an "
               "error: Exceeds maximum queue size (9)", 0,
               "a stream's error_message: a refusal, its words read");
    answer_for("00 00000000", &w, NULL,
               "{\"model_name\":\"\",\"model_version\":\"\",\"outputs\":[]}",
               0, "a stream's empty response: an answer without outputs");
    answer_for("00 00000002 12 05", &w, NULL,
               "502 upstream answer: the gRPC answer is not a "
               "ModelStreamInferResponse (7)", 0, "a broken stream response");

    stream_answers = 0;
}


/* one message of a stream as oip_stream_process() reads it */

static void
event_for(const char *hexmsg, oip_event_e want_ev, const char *want,
    const char *what)
{
    char           got[1024];
    u_char         msg[512], *all;
    size_t         n, len;
    arena_t        arena;
    oip_event_e    ev;
    oip_alloc_t    alloc;
    oip_wish_t     w;
    oip_result_t   res;

    arena_init(&arena, &alloc);
    memset(&w, 0, sizeof(oip_wish_t));
    n = hex(hexmsg, msg);
    ev = (oip_event_e) -1;

    if (oip_stream_process(&res, &alloc, &opts, &w, msg, n, &ev) != 0) {
        snprintf(got, sizeof(got), "%d %s", res.status, res.error);

    } else if (ev == OIP_EVENT_DATA) {
        all = flatten(res.segs, res.nsegs, res.body_len, &len);
        snprintf(got, sizeof(got), "%.*s", (int) len, (char *) all);
        free(all);

    } else {
        snprintf(got, sizeof(got), "%s (%d)", res.error, (int) res.reason);
    }

    if (!ok(strcmp(got, want) == 0 && ev == want_ev, "%s", what)) {
        diag("got %s (event %d)", got, (int) ev);
    }

    arena_destroy(&arena);
}


/* "triton_final_response": a map entry of ModelInferResponse.parameters */
#define FINAL(b)                                                              \
    " 22 1b 0a 15 747269746f6e5f66696e616c5f726573706f6e7365"                 \
    " 12 02 08 0" b

static void
test_stream_events(void)
{
    event_for("00 00000044 12 42 0a 01 6d 12 01 31 1a 01 78"
              " 2a 15 " OUT_FP32 " 22 07 0a 01 6b 12 02 10 07"
              " 2a 0f 0a 01 42 12 05 4259544553 1a 01 01 22 00"
              " 32 08 0000803f 00000040 32 05 01000000 61", OIP_EVENT_DATA,
              "{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"x\","
              "\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP32\","
              "\"shape\":[2],\"parameters\":{\"k\":7},\"data\":[1.0,2.0]},"
              "{\"name\":\"B\",\"datatype\":\"BYTES\",\"shape\":[1],"
              "\"data\":[\"a\"]}]}",
              "a stream's answer: one event, its outputs as JSON");
    event_for("00 0000001c 0a 1a 45786365656473206d6178696d756d2071756575"
              "652073697a65", OIP_EVENT_ERROR,
              "Exceeds maximum queue size (9)",
              "a stream's error_message: the runtime's words, read");
    event_for("00 00000027 0a 03 626164 12 20 1a 01 78" FINAL("1"),
              OIP_EVENT_ERROR, "bad (0)",
              "an error_message with an answer beside it: the error");
    event_for("00 0000001f 12 1d" FINAL("1"), OIP_EVENT_NONE, " (0)",
              "an empty final answer: no event");
    event_for("00 0000001f 12 1d" FINAL("0"), OIP_EVENT_DATA,
              "{\"model_name\":\"\",\"model_version\":\"\",\"parameters\":"
              "{\"triton_final_response\":false},\"outputs\":[]}",
              "an empty answer that is not the last: an event");
    event_for("00 00000037 12 35" FINAL("1") " 2a 0c " OUT_FP32
              " 32 08 0000803f 00000040", OIP_EVENT_DATA,
              "{\"model_name\":\"\",\"model_version\":\"\",\"parameters\":"
              "{\"triton_final_response\":true},\"outputs\":[{\"name\":"
              "\"O\",\"datatype\":\"FP32\",\"shape\":[2],"
              "\"data\":[1.0,2.0]}]}",
              "the last answer with outputs: an event");
    event_for("00 00000002 12 05", OIP_EVENT_DATA,
              "502 upstream answer: the gRPC answer is not a "
              "ModelStreamInferResponse",
              "a broken message: the upstream's fault");
    event_for("01 00000000", OIP_EVENT_DATA,
              "502 upstream answer: the gRPC answer is compressed "
              "(grpc-encoding), which is not supported",
              "a compressed message: refused");
}


static void
test_simple(void)
{
    int                 truth;
    u_char              msg[256];
    size_t              n, len;
    arena_t             arena;
    oip_alloc_t         alloc;
    oip_result_t        res;
    oip_grpc_options_t  g;
    u_char             *got;

    arena_init(&arena, &alloc);

    g = gopt;
    g.version = (const u_char *) "2";
    g.version_len = 1;

    oip_grpc_call(&res, &alloc, &g, OIP_RPC_MODEL_METADATA);
    got = flatten(res.segs, res.nsegs, res.body_len, &len);
    n = hex("00 00000006 0a 01 6d 12 01 32", msg);
    ok(len == n && memcmp(got, msg, n) == 0, "ModelMetadataRequest");
    free(got);

    oip_grpc_call(&res, &alloc, &g, OIP_RPC_SERVER_LIVE);
    ok(res.body_len == 5 && memcmp(res.segs[0].data, "\0\0\0\0\0", 5) == 0,
       "ServerLiveRequest: empty");

    n = hex("00 00000002 08 01", msg);
    oip_grpc_answer(&res, &alloc, OIP_RPC_SERVER_LIVE, msg, n, &truth);
    got = flatten(res.segs, res.nsegs, res.body_len, &len);
    ok(truth == 1 && len == 13 && memcmp(got, "{\"live\":true}", 13) == 0,
       "ServerLiveResponse");
    free(got);

    n = hex("00 00000000", msg);
    oip_grpc_answer(&res, &alloc, OIP_RPC_MODEL_READY, msg, n, &truth);
    got = flatten(res.segs, res.nsegs, res.body_len, &len);
    ok(truth == 0 && len == 15 && memcmp(got, "{\"ready\":false}", 15) == 0,
       "ModelReadyResponse: false is absent");
    free(got);

    n = hex("00 00000030 0a 01 6d 12 01 31 1a 02 7466"
            " 22 16 0a 01 49 12 04 46503332 1a 0b ffffffffffffffffff01 0f"
            " 2a 0c 0a 01 4f 12 04 46503332 1a 01 03", msg);
    oip_grpc_answer(&res, &alloc, OIP_RPC_MODEL_METADATA, msg, n, &truth);
    got = flatten(res.segs, res.nsegs, res.body_len, &len);
    got[len] = '\0';
    ok(res.status == 0
       && strcmp((char *) got, "{\"name\":\"m\",\"versions\":[\"1\"],"
                 "\"platform\":\"tf\",\"inputs\":[{\"name\":\"I\","
                 "\"datatype\":\"FP32\",\"shape\":[-1,15]}],"
                 "\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP32\","
                 "\"shape\":[3]}]}") == 0, "ModelMetadataResponse");
    free(got);

    n = hex("00 00000002 0a 05", msg);
    ok(oip_grpc_answer(&res, &alloc, OIP_RPC_SERVER_METADATA, msg, n,
                       &truth) == 502
       && strstr(res.error, "not a ServerMetadata response"),
       "a broken ServerMetadataResponse");

    ok(oip_grpc_http_status(3) == 400 && oip_grpc_http_status(5) == 404
       && oip_grpc_http_status(14) == 503 && oip_grpc_http_status(8) == 429
       && oip_grpc_http_status(4) == 504 && oip_grpc_http_status(13) == 500
       && oip_grpc_http_status(99) == 502, "grpc-status as HTTP");

    arena_destroy(&arena);
}


int
main(void)
{
    test_request();
    test_response();
    test_answer_forms();
    test_stream_events();
    test_simple();

    return tap_done();
}
