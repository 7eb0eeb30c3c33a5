
/*
 * Copyright (C) ngx_oip_module authors
 *
 * libFuzzer target: the gRPC transport (oip_grpc.c, oip_pb*.c,
 * oip_envelope.c) on any bytes.  Answers: oip_grpc_answer() on any
 * upstream message of the other calls; an infer answer through
 * oip_response_process() (f.protobuf), read into items and written as
 * REST, which the REST pipeline must then read as it is.  Requests: a
 * body through oip_request_process() with opt.grpc (inputs binary),
 * which writes the ModelInferRequest from its items: its frame prefix
 * must say its length; without failed allocations, once more with a
 * sink of a small block (oip_buffer's path): the same verdict and the
 * same message, its raw contents, or its inputs' and outputs' entries
 * with typed contents, in the sink's file.
 *
 * The input: a config of FZ_GRPC_CONFIG bytes, then the body.
 *
 *   c[0]   bits 0-2: the rpc, % 6 (oip_rpc_e; 5 is ModelInfer)
 *          bit 3: allocation c[1] + 1 fails; bit 4: and all after
 *          bit 5: the request direction instead of the answer's
 *          bit 6: typed contents (requests)
 *          bit 7: the client wants binary outputs (answers)
 *   c[1]   which allocation fails
 *   c[2]   oip_grpc_max_message: 64 * c[2], 0 for 64 MB (requests)
 *   c[3]   IHCL: 0 none, else c[3] - 1 if within the body (requests);
 *          bit 0: a ModelStreamInferResponse (answers), also read as
 *          one event of a stream (oip_stream_process())
 */


#include "fuzz.h"


#define FZ_GRPC_CONFIG       4
#define FZ_LIMIT             (64 * 1024 * 1024)


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fz_grpc_answer(const u_char *c, const u_char *p, size_t len,
    arena_t *arena, oip_alloc_t *alloc);
static void fz_grpc_request(const u_char *c, const u_char *p, size_t len,
    arena_t *arena, oip_alloc_t *alloc);
static void fz_grpc_sink_same(const oip_result_t *call, oip_options_t *opt,
    oip_framing_t *framing, const u_char *p, size_t len);
static void fz_status_check(const oip_result_t *res, const arena_t *arena,
    int allowed);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    arena_t       arena;
    oip_alloc_t   alloc;

    if (size < FZ_GRPC_CONFIG) {
        return 0;
    }

    arena_init(&arena, &alloc);

    if (data[0] & 0x08) {
        arena.fail_at = 1 + (size_t) data[1];
        arena.fail_all = (data[0] & 0x10) ? 1 : 0;
    }

    if (data[0] & 0x20) {
        fz_grpc_request(data, data + FZ_GRPC_CONFIG, size - FZ_GRPC_CONFIG,
                        &arena, &alloc);

    } else {
        fz_grpc_answer(data, data + FZ_GRPC_CONFIG, size - FZ_GRPC_CONFIG,
                       &arena, &alloc);
    }

    arena_destroy(&arena);

    return 0;
}


static void
fz_grpc_answer(const u_char *c, const u_char *p, size_t len, arena_t *arena,
    oip_alloc_t *alloc)
{
    int             truth;
    u_char         *rest;
    oip_rpc_e       rpc;
    oip_wish_t      wish;
    oip_event_e     ev;
    oip_result_t    res, resp, again;
    oip_options_t   opt;

    rpc = (oip_rpc_e) ((c[0] & 7) % 6);

    if (rpc != OIP_RPC_MODEL_INFER) {
        truth = 7;

        oip_grpc_answer(&res, alloc, rpc, p, len, &truth);

        fz_status_check(&res, arena, 502);

        if (res.status == 0) {
            fz_segs_check(res.segs, res.nsegs, 0, res.body_len);
            fz_assert(rpc <= OIP_RPC_MODEL_READY ? (truth == 0 || truth == 1)
                                                 : truth == -1,
                      "a health answer's truth is neither");
        }

        return;
    }

    /* read into items and written as REST, as the response path does */

    memset(&wish, 0, sizeof(oip_wish_t));
    wish.binary = (c[0] >> 7) & 1;

    memset(&opt, 0, sizeof(oip_options_t));
    opt.max_depth = 100;
    opt.max_json_size = FZ_LIMIT;
    opt.max_tensor_size = FZ_LIMIT;
    opt.raw_outputs = OIP_FORM_BINARY;

    oip_response_process(&resp, alloc, &opt, &wish,
                         &(oip_framing_t) { -1, OIP_ENC_NONE,
                                            OIP_CARRIER_HEADER, 1,
                                            c[3] & 1 },
                         p, len);

#ifdef FZ_DEBUG
    fprintf(stderr, "answer %zu bytes: %d %s\n", len, resp.status,
            resp.error);
#endif

    if (c[3] & 1) {
        /* one event of a stream: an answer, the runtime's error, none */

        oip_stream_process(&again, alloc, &opt, &wish, p, len, &ev);

        if (again.status == 0 && ev == OIP_EVENT_ERROR) {
            /* the runtime's words, status 0: they are not ours */
            fz_assert(again.error[0] != '\0', "an error event says nothing");
            fz_assert(strnlen(again.error, OIP_ERROR_LEN) < OIP_ERROR_LEN,
                      "error is not NUL-terminated");

        } else {
            fz_status_check(&again, arena, 502);
        }

        if (again.status == 0 && ev == OIP_EVENT_DATA) {
            fz_segs_check(again.segs, again.nsegs, again.header_len,
                          again.body_len);
        }
    }

    fz_status_check(&resp, arena, 502);

    if (resp.status != 0) {
        return;
    }

    fz_assert(resp.rewritten, "a gRPC answer not written as REST");
    fz_segs_check(resp.segs, resp.nsegs, resp.header_len, resp.body_len);

    /*
     * What the envelope writer wrote, the REST pipeline reads as it is:
     * each output already in the wished form, so nothing changes.
     */

    rest = fz_flatten(resp.segs, resp.nsegs, resp.body_len);

    oip_response_process(&again, alloc, &opt, &wish,
                         &(oip_framing_t) { resp.binary
                                            ? (int64_t) resp.header_len : -1,
                                            OIP_ENC_NONE,
                                            OIP_CARRIER_HEADER, 0, 0 },
                         rest, resp.body_len);

    fz_assert(again.status == 0 || (again.status == 500 && arena->failed),
              "the REST pipeline refuses what the envelope writer wrote");
    fz_assert(again.status != 0 || !again.rewritten,
              "the REST pipeline changes what the envelope writer wrote");

    free(rest);
}


static void
fz_grpc_request(const u_char *c, const u_char *p, size_t len, arena_t *arena,
    oip_alloc_t *alloc)
{
    uint32_t            n;
    oip_result_t        call;
    oip_options_t       opt;
    oip_framing_t       framing;
    oip_grpc_options_t  g;

    memset(&g, 0, sizeof(oip_grpc_options_t));
    g.model = (const uint8_t *) "m";
    g.model_len = 1;
    g.version = (const uint8_t *) "2";
    g.version_len = c[0] & 1;
    g.max_message = c[2] ? 64 * (size_t) c[2] : FZ_LIMIT;
    g.typed = (c[0] >> 6) & 1;

    memset(&opt, 0, sizeof(oip_options_t));
    opt.inputs = OIP_FORM_BINARY;
    opt.max_depth = 100;
    opt.max_json_size = FZ_LIMIT;
    opt.max_tensor_size = FZ_LIMIT;
    opt.raw_outputs = OIP_FORM_BINARY;
    opt.grpc = &g;

    framing.ihcl = (c[3] && (size_t) c[3] - 1 <= len) ? c[3] - 1 : -1;
    framing.encoding = OIP_ENC_NONE;
    framing.carrier = OIP_CARRIER_HEADER;
    framing.protobuf = 0;
    framing.stream = 0;

    oip_request_process(&call, alloc, &opt, &framing, p, len);

    fz_status_check(&call, arena, 400);

    /* typed contents go through files with a head file (len & 8) */
    if (!(c[0] & 0x08) && (!g.typed || (len & 8))) {
        fz_grpc_sink_same(&call, &opt, &framing, p, len);
    }

    if (call.status != 0) {
        return;
    }

    fz_assert(call.rewritten && call.content_type
              && strcmp(call.content_type, OIP_TYPE_GRPC) == 0,
              "a gRPC request not rewritten as one");
    fz_segs_check(call.segs, call.nsegs, 0, call.body_len);
    fz_assert(call.body_len >= 5 && call.segs[0].len >= 5,
              "no frame prefix");

    n = ((uint32_t) call.segs[0].data[1] << 24)
        | ((uint32_t) call.segs[0].data[2] << 16)
        | ((uint32_t) call.segs[0].data[3] << 8) | call.segs[0].data[4];

    fz_assert(call.segs[0].data[0] == 0, "a compressed frame");
    fz_assert(n == call.body_len - 5, "the frame prefix is not the length");
    fz_assert(call.body_len - 5 <= g.max_message, "over max_message");
}


static void
fz_grpc_sink_same(const oip_result_t *call, oip_options_t *opt,
    oip_framing_t *framing, const u_char *p, size_t len)
{
    arena_t        arena;
    fz_spool_t     fs;
    oip_sink_t     sink;
    oip_alloc_t    alloc;
    oip_result_t   res;

    arena_init(&arena, &alloc);
    fz_spool_init(&sink, &fs, len);

    opt->sink = &sink;
    oip_request_process(&res, &alloc, opt, framing, p, len);
    opt->sink = NULL;

    fz_spooled_same(call, &res, &fs);

    fz_spool_free(&fs);
    arena_destroy(&arena);
}


/* allowed: the one failure status besides 500 (and 413 for requests) */

static void
fz_status_check(const oip_result_t *res, const arena_t *arena, int allowed)
{
    int  status;

    status = res->status;

    fz_error_check(status, res->error, res->reason);

    fz_assert(status == 0 || status == 500 || status == allowed
              || (allowed == 400 && status == 413),
              "an unexpected status");

    if (status == 500) {
        fz_assert(arena->failed, "500 without an allocation failure");
    }
}
