
/*
 * Copyright (C) ngx_oip_module authors
 *
 * libFuzzer target: oip_response_process() on any upstream answer, for a
 * client wish and options taken from the first bytes.  Beyond the
 * sanitizers: the status set, the error text, the segments, and that a
 * rewritten answer is a fixed point for the same wish.  The same bytes
 * go through oip_generate_answer() too (the generate extension).  An
 * answer with an IHCL is planned from its header alone too
 * (oip_response_plan()): when planned, its binary part fed in pieces of
 * a size from the config gives byte for byte what oip_response_process()
 * wrote, or a refusal where it refused; a plan refused is refused there.
 * And every answer runs again with a sink of a small block (an answer
 * held in a file): the same verdict and bytes, its tensors in the file.
 *
 * The input: a config of FZ_RESP_CONFIG bytes, then the body.
 *
 *   c[0]      bit 0: outputs listed; bit 1: binary by default;
 *             bits 2-7: how many names are listed, at most FZ_WISH_MAX
 *   c[1]      max_depth: 1 + c[1] % 200
 *   c[2]      bits 0-1: IHCL (0 none, 1 c[3..6] % (len + 2),
 *             2 len - c[3..6] % (len + 1), 3 zero)
 *             bit 2: allocation c[13] + 1 fails; bit 3: and all after
 *             bit 4: small limits (c[11], c[12])
 *   c[3..6]   the IHCL value, little-endian
 *   c[7..10]  binary_data of listed output i: bit i of c[7..10]
 *   c[11]     small max_json_size: 16 + 16 * c[11]
 *   c[12]     small max_tensor_size: 8 * c[12]
 *   c[13]     which allocation fails
 *   c[14]     the pieces a planned binary part is fed in: 1 + c[14]
 *   c[15]     bit 0: planned of no length (OIP_BLEN_ANY: chunked), the
 *             chunks' sizes taken as they are declared
 *
 * The listed names are the body's own: the first raw "name":"..." values
 * (escapes left as they are, so an escaped name is one the answer does
 * not have), so that a wish matches the outputs however the body mutates.
 */


#include "fuzz.h"
#include "oip_tensor.h"


#define FZ_RESP_CONFIG       16
#define FZ_WISH_MAX          24
#define FZ_DEFAULT_LIMIT     (64 * 1024 * 1024)
#define FZ_REFEED_DEPTH      5


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t fz_wish_names(const u_char *body, size_t len,
    oip_wish_out_t *outs, size_t n, uint32_t bits);

static void fz_response_check(const oip_result_t *resp,
    const arena_t *arena, size_t len, off_t ihcl);
static void fz_response_refeed(const oip_result_t *resp,
    const oip_options_t *opt, const oip_wish_t *wish);
static void fz_response_sink(const oip_result_t *resp,
    oip_options_t *opt, const oip_wish_t *wish, const u_char *p,
    size_t len, off_t ihcl);
static void fz_response_plan(const oip_result_t *resp,
    const oip_options_t *opt, const oip_wish_t *wish, const u_char *p,
    size_t len, off_t ihcl, size_t piece, int any);


/* names point into the body: ASan sees any read past one */

static size_t
fz_wish_names(const u_char *body, size_t len, oip_wish_out_t *outs,
    size_t n, uint32_t bits)
{
    size_t         i;
    const u_char  *p, *q, *end;

    p = body;
    end = body + len;

    for (i = 0; i < n && p < end; p = q + 1) {
        p = memmem(p, end - p, "\"name\":\"", 8);
        if (p == NULL) {
            break;
        }

        p += 8;

        q = memchr(p, '"', end - p);
        if (q == NULL) {
            break;
        }

        if (q == p) {
            continue;
        }

        outs[i].name = p;
        outs[i].len = q - p;
        outs[i].binary = (bits >> i) & 1;
        i++;
    }

    return i;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    off_t            ihcl;
    size_t           n, len;
    oip_wish_t       wish;
    oip_alloc_t      alloc;
    arena_t       arena;
    const u_char    *c, *p;
    oip_options_t    opt;
    oip_result_t     resp;
    oip_wish_out_t   outs[FZ_WISH_MAX];

    if (size < FZ_RESP_CONFIG) {
        return 0;
    }

    c = data;
    p = data + FZ_RESP_CONFIG;
    len = size - FZ_RESP_CONFIG;

    memset(&wish, 0, sizeof(oip_wish_t));
    memset(outs, 0, sizeof(outs));

    wish.listed = c[0] & 1;
    wish.binary = (c[0] >> 1) & 1;

    n = wish.listed ? (size_t) (c[0] >> 2) % (FZ_WISH_MAX + 1) : 0;
    n = fz_wish_names(p, len, outs, n, fz_le32(c + 7));

    wish.outputs = n ? outs : NULL;
    wish.n = n;

    memset(&opt, 0, sizeof(oip_options_t));

    opt.inputs = OIP_FORM_KEEP;
    opt.outputs = OIP_FORM_KEEP;
    opt.max_depth = 1 + c[1] % 200;
    opt.raw_outputs = OIP_FORM_BINARY;

    if (c[2] & 0x10) {
        opt.max_json_size = 16 + 16 * (size_t) c[11];
        opt.max_tensor_size = 8 * (size_t) c[12];

    } else {
        opt.max_json_size = FZ_DEFAULT_LIMIT;
        opt.max_tensor_size = FZ_DEFAULT_LIMIT;
    }

    ihcl = fz_ihcl(c[2], c + 3, len);

    arena_init(&arena, &alloc);

    if (c[2] & 0x04) {
        arena.fail_at = 1 + (size_t) c[13];
        arena.fail_all = (c[2] & 0x08) ? 1 : 0;
    }

    oip_response_process(&resp, &alloc, &opt, &wish,
                         &(oip_framing_t) { ihcl, OIP_ENC_NONE,
                                            OIP_CARRIER_HEADER, 0, 0 },
                         p, len);


#ifdef FZ_DEBUG
    /* -DFZ_DEBUG: what each input gives, to check seeds by eye */
    fprintf(stderr, "ihcl %lld, status %d%s%s, %s\n", (long long) ihcl,
            resp.status, resp.rewritten ? ", rewritten" : "",
            resp.binary ? ", binary" : "", resp.error);
#endif

    fz_response_check(&resp, &arena, len, ihcl);

    if (resp.status == 0 && resp.rewritten) {
        fz_response_refeed(&resp, &opt, &wish);
    }

    if (ihcl > 0 && (size_t) ihcl <= len && !(c[2] & 0x04)) {
        fz_response_plan(&resp, &opt, &wish, p, len, ihcl, 1 + c[14],
                         c[15] & 1);
    }

    if (!(c[2] & 0x04)) {
        fz_response_sink(&resp, &opt, &wish, p, len, ihcl);
    }

    /* the same bytes as an infer answer to make a generate answer of */

    oip_generate_answer(&resp, &alloc, &opt, p, len);

    fz_assert(resp.status == 0 || resp.status == 502
              || (resp.status == 500 && arena.failed),
              "a generate answer's unexpected status");
    fz_error_check(resp.status, resp.error, resp.reason == OIP_REASON_NONE
                   && resp.status ? OIP_REASON_OTHER : resp.reason);

    if (resp.status == 0) {
        fz_segs_check(resp.segs, resp.nsegs, resp.body_len, resp.body_len);
    }

    arena_destroy(&arena);

    return 0;
}


static void
fz_response_check(const oip_result_t *resp, const arena_t *arena,
    size_t len, off_t ihcl)
{
    fz_assert(resp->status == 0 || resp->status == 502
              || resp->status == 500,
              "response status not 0, 502 or 500");

    fz_error_check(resp->status, resp->error, resp->reason);

    if (resp->status == 500) {
        fz_assert(arena->failed, "500 without an allocation failure");
    }

    if (resp->status == 502) {
        fz_assert(strncmp(resp->error, "upstream answer: ", 17) == 0,
                  "502 without its prefix");
        /* the codec's own words for a failure without a status */
        fz_assert(strcmp(resp->error, "upstream answer: internal error in "
                         "the response codec") != 0,
                  "a check failed without a status");
    }

    if (resp->status != 0) {
        return;
    }

    if (resp->rewritten) {
        fz_segs_check(resp->segs, resp->nsegs, resp->header_len,
                      resp->body_len);

        fz_assert(resp->binary || resp->header_len == resp->body_len,
                  "JSON-only answer with header_len != body_len");
        fz_assert(resp->header_len > 0, "an empty JSON header");

    } else {
        fz_assert(resp->body_len == len, "untouched, but body_len != len");
        fz_assert(resp->header_len == (ihcl > 0 ? (size_t) ihcl : len),
                  "untouched, but header_len is not the IHCL");
        fz_assert(resp->binary == (ihcl > 0), "untouched: binary flag");
        fz_assert(resp->nsegs == 0, "untouched, but segments");
    }
}


/* the answer as the client gets it, fed back: nothing left to change */

static void
fz_response_refeed(const oip_result_t *resp, const oip_options_t *opt,
    const oip_wish_t *wish)
{
    off_t            ihcl;
    u_char          *out;
    oip_alloc_t      alloc;
    arena_t       arena;
    oip_options_t    o;
    oip_result_t     again;

    out = fz_flatten(resp->segs, resp->nsegs, resp->body_len);

    o = *opt;

    if (o.max_depth < FZ_REFEED_DEPTH) {
        o.max_depth = FZ_REFEED_DEPTH;
    }

    /*
     * The codec's own additions (binary_data_size, a raw request's
     * header) may take a message past oip_max_json_size: the limit
     * bounds what comes in, never what the gateway adds.
     */

    if (o.max_json_size < resp->header_len) {
        o.max_json_size = resp->header_len;
    }

    ihcl = resp->binary ? (off_t) resp->header_len : -1;

    arena_init(&arena, &alloc);

    oip_response_process(&again, &alloc, &o, wish,
                         &(oip_framing_t) { ihcl, OIP_ENC_NONE,
                                            OIP_CARRIER_HEADER, 0, 0 },
                         out,
                         resp->body_len);

    if (again.status != 0 || again.rewritten) {
        fprintf(stderr, "refeed: %d %s\n", again.status, again.error);
        fprintf(stderr, "rewritten (%zu, header %zu): %.*s\n",
                resp->body_len, resp->header_len, (int) resp->header_len,
                out);
    }

    fz_assert(again.status == 0, "the codec refuses its own answer");
    fz_assert(!again.rewritten, "the codec's own answer rewritten again");

    arena_destroy(&arena);
    free(out);
}


/*
 * The answer streamed as the glue streams it: the text up to a hole, the
 * chunks' bytes in pieces (a partial element carried), each kept chunk
 * printed into the next hole, dropped ones skipped.
 */

static void
fz_response_plan(const oip_result_t *resp, const oip_options_t *opt,
    const oip_wish_t *wish, const u_char *p, size_t len, off_t ihcl,
    size_t piece, int any)
{
    long            w;
    char            err[OIP_ERROR_LEN];
    size_t          i, s, k, n, size, left, out_len, cap, have;
    u_char         *out, *want, carry[8];
    uint64_t        at;
    arena_t         arena;
    oip_alloc_t     alloc;
    oip_result_t    plan;
    const u_char   *bin, *q;
    oip_chunk_t    *ch;

    arena_init(&arena, &alloc);

    oip_response_plan(&plan, &alloc, opt, wish, p, (size_t) ihcl,
                      any ? OIP_BLEN_ANY : len - (size_t) ihcl);

    fz_assert(plan.status == 0 || plan.status == 502,
              "a plan's unexpected status");

    if (plan.status != 0) {
        fz_assert(resp->status != 0, "a plan refused an answer accepted");
        arena_destroy(&arena);
        return;
    }

    if (!plan.planned) {
        arena_destroy(&arena);
        return;
    }

    /* every element as 65 bytes at most, the text besides */
    cap = (len + 1) * OIP_ELEMENT_JSON_MAX + 64;

    for (i = 0; i < plan.nsegs; i++) {
        cap += plan.segs[i].data ? plan.segs[i].len : 0;
    }

    out = malloc(cap);
    fz_assert(out != NULL, "malloc");

    out_len = 0;
    bin = p + ihcl;
    left = len - (size_t) ihcl;
    s = 0;
    k = 0;
    have = 0;
    at = 0;

    /* the text before the first hole */

    for ( /* void */ ; s < plan.nsegs && plan.segs[s].data; s++) {
        memcpy(out + out_len, plan.segs[s].data, plan.segs[s].len);
        out_len += plan.segs[s].len;
    }

    while (k < plan.nchunks) {
        ch = &plan.chunks[k];
        size = ch->size;

        fz_assert(size == oip_dtypes[ch->dt].size && (size > 0 || ch->drop),
                  "a planned chunk's element size");

        if (size == 0) {
            /* BYTES, dropped: bytes skipped one by one */
            size = 1;
        }

        /* the chunk's bytes, as they come in pieces */

        n = ch->len - at * size - have;

        if (n == 0) {
            fz_assert(have == 0, "a partial element at a chunk's end");

            if (!ch->drop) {
                fz_assert(s < plan.nsegs && plan.segs[s].data == NULL
                          && plan.segs[s].len == ch->len,
                          "a kept chunk without its hole");

                for (s++; s < plan.nsegs && plan.segs[s].data; s++) {
                    memcpy(out + out_len, plan.segs[s].data,
                           plan.segs[s].len);
                    out_len += plan.segs[s].len;
                }
            }

            k++;
            at = 0;
            continue;
        }

        if (left == 0) {
            break;
        }

        n = n < piece ? n : piece;
        n = n < left ? n : left;
        q = bin;
        bin += n;
        left -= n;

        if (ch->drop) {
            at += n / size;
            have += n % size;
            at += have / size;
            have %= size;
            continue;
        }

        while (n) {
            if (have || n < size) {
                i = size - have < n ? size - have : n;
                memcpy(carry + have, q, i);
                have += i;
                q += i;
                n -= i;

                if (have < size) {
                    break;
                }

                w = oip_chunk_json(ch, at, carry, 1, out + out_len, err);
                have = 0;

            } else {
                i = n / size;
                w = oip_chunk_json(ch, at, q, i, out + out_len, err);
                q += i * size;
                n -= i * size;
                at += i - 1;
            }

            if (w < 0) {
                fz_assert(resp->status != 0, "a chunk refused that the "
                          "answer's conversion accepted");
                free(out);
                arena_destroy(&arena);
                return;
            }

            out_len += (size_t) w;
            at++;
        }
    }

    if (resp->status != 0) {
        /* refused for what only the whole answer shows (its JSON's size) */
        free(out);
        arena_destroy(&arena);
        return;
    }

    fz_assert(k == plan.nchunks && s == plan.nsegs && left == 0,
              "a planned answer not streamed whole");

    want = fz_flatten(resp->segs, resp->nsegs, resp->body_len);

    fz_assert(out_len == resp->body_len
              && memcmp(out, want, out_len) == 0,
              "a planned answer differs from the one converted whole");

    free(want);
    free(out);
    arena_destroy(&arena);
}


static void
fz_response_sink(const oip_result_t *resp, oip_options_t *opt,
    const oip_wish_t *wish, const u_char *p, size_t len, off_t ihcl)
{
    arena_t        arena;
    fz_spool_t     fs;
    oip_sink_t     sink;
    oip_alloc_t    alloc;
    oip_result_t   res;

    arena_init(&arena, &alloc);
    fz_spool_init(&sink, &fs, len);

    opt->sink = &sink;

    oip_response_process(&res, &alloc, opt, wish,
                         &(oip_framing_t) { ihcl, OIP_ENC_NONE,
                                            OIP_CARRIER_HEADER, 0, 0 },
                         p, len);

    opt->sink = NULL;

    fz_spooled_same(resp, &res, &fs);

    fz_spool_free(&fs);
    arena_destroy(&arena);
}
