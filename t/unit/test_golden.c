
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The ModelInferRequests the module sends are the golden ones: the bytes
 * the real module sent a gRPC runtime for every infer request of the
 * integration tests that reached it (t/unit/golden/grpc/, taken by
 * t/unit/golden/take.py), and those the codec makes of the gRPC fuzz
 * seeds that are requests (t/unit/golden/grpc-fuzz/).  Each REST request
 * goes through the codec as the glue takes it there: its framing
 * headers, the location's options, the request in binary form, then its
 * ModelInferRequest, compared byte for byte.  The way back too: each
 * ModelInferResponse the runtime answered a 200 with, read as the glue
 * reads it and given the client's wish, must be what the client got
 * (its body, its IHCL, its Content-Type).
 *
 * The taken goldens are the messages as the runtime read them (no frame
 * prefix); the fuzz seeds' are framed, or "refused: STATUS MESSAGE".
 * OIP_GOLDEN_WRITE=1 writes the fuzz seeds' goldens instead of comparing
 * them: once, before a change to the gRPC transport.
 */


#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>

#include "codec_test.h"


#ifndef OIP_GOLDEN_DIR
#error OIP_GOLDEN_DIR: t/Makefile gives it
#endif

#define OIP_FUZZ_SEEDS       OIP_GOLDEN_DIR "/../../fuzz/corpus/grpc"

/* the module's defaults (ngx_http_oip_merge_loc_conf()) */
#define OIP_DEFAULT_LIMIT    (64 * 1024 * 1024)
#define OIP_DEFAULT_MESSAGE  (4 * 1024 * 1024)


typedef struct {
    u_char          *p;
    size_t           len;
} file_t;


static int
file_read(const char *path, file_t *f)
{
    long   n;
    FILE  *fp;

    f->p = NULL;
    f->len = 0;

    fp = fopen(path, "rb");
    if (fp == NULL) {
        return -1;
    }

    fseek(fp, 0, SEEK_END);
    n = ftell(fp);
    fseek(fp, 0, SEEK_SET);

    f->p = malloc(n > 0 ? (size_t) n : 1);
    f->len = (size_t) n;

    if (n > 0 && fread(f->p, 1, (size_t) n, fp) != (size_t) n) {
        free(f->p);
        f->p = NULL;
        fclose(fp);
        return -1;
    }

    fclose(fp);

    return 0;
}


/* a golden case's file: grpc/NAME.EXT */

static int
golden_read(const char *name, const char *ext, file_t *f)
{
    char  path[2048];

    snprintf(path, sizeof(path), "%s/grpc/%s.%s", OIP_GOLDEN_DIR, name, ext);

    return file_read(path, f);
}


static int
file_write(const char *path, const u_char *p, size_t len)
{
    FILE  *fp;
    int    rc;

    fp = fopen(path, "wb");
    if (fp == NULL) {
        return -1;
    }

    rc = (fwrite(p, 1, len, fp) == len) ? 0 : -1;

    return (fclose(fp) == 0) ? rc : -1;
}


/* the names in dir ending in suffix, sorted; NULL-terminated */

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}


static char **
names(const char *dir, const char *prefix, const char *suffix, size_t *n)
{
    DIR            *d;
    char          **out;
    size_t          len, slen;
    struct dirent  *e;

    *n = 0;
    out = calloc(1024, sizeof(char *));
    slen = strlen(suffix);

    d = opendir(dir);
    if (d == NULL) {
        return out;
    }

    while ((e = readdir(d)) != NULL && *n < 1023) {
        len = strlen(e->d_name);

        if (len > slen && strcmp(e->d_name + len - slen, suffix) == 0
            && strncmp(e->d_name, prefix, strlen(prefix)) == 0)
        {
            out[(*n)++] = strndup(e->d_name, len - slen);
        }
    }

    closedir(d);

    qsort(out, *n, sizeof(char *), name_cmp);

    return out;
}


static void
names_free(char **v, size_t n)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        free(v[i]);
    }

    free(v);
}


/* a case: the location's options and headers, as NAME.rest says them */

typedef struct {
    char                 path[1024];
    oip_options_t        opt;
    oip_grpc_options_t   g;
    oip_raw_input_t      raw;
    oip_header_t         ihcl, encoding, type;
    char                 hv[3][256];
    const u_char        *body;
    size_t               len;
} case_t;


static int
case_header(case_t *c, char *line)
{
    char   *v;
    char    err[128], name[256], dt[64], dims[256];
    size_t  i;

    static const char  *framing[] = {
        "inference-header-content-length: ", "content-encoding: ",
        "content-type: "
    };

    if (strncmp(line, "path ", 5) == 0) {
        snprintf(c->path, sizeof(c->path), "%s", line + 5);
        return 0;
    }

    if (strcmp(line, "typed") == 0) {
        c->g.typed = 1;
        return 0;
    }

    if (strncmp(line, "max_message ", 12) == 0) {
        c->g.max_message = (size_t) strtoull(line + 12, NULL, 10);
        return 0;
    }

    if (sscanf(line, "raw %255s %63s %255s", name, dt, dims) == 3) {
        if (oip_raw_input_init(&c->raw, (u_char *) name, strlen(name),
                               (u_char *) dt, strlen(dt), (u_char *) dims,
                               strlen(dims), err, sizeof(err))
            != 0)
        {
            diag("raw input: %s", err);
            return -1;
        }

        c->opt.raw = &c->raw;
        return 0;
    }

    if (strncmp(line, "header ", 7) == 0) {
        for (i = 0; i < 3; i++) {
            if (strncmp(line + 7, framing[i], strlen(framing[i])) == 0) {
                v = line + 7 + strlen(framing[i]);
                snprintf(c->hv[i], sizeof(c->hv[i]), "%s", v);
                *(i == 0 ? &c->ihcl : i == 1 ? &c->encoding : &c->type) =
                    (oip_header_t) { (u_char *) c->hv[i], strlen(c->hv[i]),
                                     1 };
                return 0;
            }
        }
    }

    diag("a line not understood: %s", line);

    return -1;
}


/* the model and version of an infer path: "…/v2/models/M[/versions/V]" */

static void
case_model(case_t *c)
{
    char  *m, *end, *v;

    m = strstr(c->path, "/v2/models/");
    end = strstr(c->path, "/infer");

    if (m == NULL || end == NULL) {
        return;
    }

    m += sizeof("/v2/models/") - 1;
    v = strstr(m, "/versions/");

    c->g.model = (u_char *) m;
    c->g.model_len = (size_t) ((v && v < end ? v : end) - m);

    if (v && v < end) {
        v += sizeof("/versions/") - 1;
        c->g.version = (u_char *) v;
        c->g.version_len = (size_t) (end - v);
    }
}


static int
case_parse(case_t *c, file_t *f)
{
    char    *line;
    u_char  *p, *end, *nl;

    memset(c, 0, sizeof(case_t));

    /* a location with oip on, translated to gRPC: binary inputs */

    c->opt = opts;
    c->opt.inputs = OIP_FORM_BINARY;
    c->opt.max_json_size = OIP_DEFAULT_LIMIT;
    c->opt.max_tensor_size = OIP_DEFAULT_LIMIT;
    c->g.max_message = OIP_DEFAULT_MESSAGE;

    p = f->p;
    end = f->p + f->len;

    for ( ;; ) {
        nl = memchr(p, '\n', (size_t) (end - p));
        if (nl == NULL) {
            return -1;
        }

        if (nl == p) {
            break;
        }

        line = strndup((char *) p, (size_t) (nl - p));
        if (case_header(c, line) != 0) {
            free(line);
            return -1;
        }

        free(line);
        p = nl + 1;
    }

    c->body = nl + 1;
    c->len = (size_t) (end - c->body);

    /* the path is part of the case, and must stay in it: it is copied */

    case_model(c);

    return 0;
}


/*
 * The REST request through the codec as the glue takes it to gRPC (the
 * gRPC transport's prepare(): inputs binary, opt.grpc set): the framed
 * ModelInferRequest in out, or the status of a refusal.
 */

static int
to_grpc(case_t *c, u_char **out, size_t *len, char *error, size_t elen)
{
    int            st;
    arena_t        arena;
    oip_alloc_t    alloc;
    oip_result_t   res;
    oip_options_t  opt;
    oip_framing_t  f;

    arena_init(&arena, &alloc);
    memset(&res, 0, sizeof(res));

    *out = NULL;
    *len = 0;
    error[0] = '\0';

    opt = c->opt;
    opt.grpc = &c->g;

    st = oip_request_framing(&res, &f, &c->ihcl, &c->encoding, &c->type);

    if (st == 0) {
        st = oip_request_process(&res, &alloc, &opt, &f, c->body, c->len);
    }

    if (st == 0) {
        *out = flatten(res.segs, res.nsegs, res.body_len, len);

    } else {
        snprintf(error, elen, "%s", res.error);
    }

    arena_destroy(&arena);

    return st;
}


/*
 * The runtime's answer (unframed) to the case's request, as the glue
 * gives it to the client (the gRPC transport's answer(), then
 * ngx_http_oip_convert()): the request read for its wish, the answer
 * framed as it came, read into items and written in the client's form.
 */

static int
from_grpc(case_t *c, file_t *answer, file_t *client, char *why,
    size_t wlen)
{
    int            st;
    char           line[256], size[64];
    u_char        *framed, *got, *p, *nl;
    size_t         len, ihcl;
    arena_t        arena;
    oip_alloc_t    alloc;
    oip_result_t   req, res;
    oip_framing_t  f;
    oip_carrier_e  carrier;
    const char    *type;

    arena_init(&arena, &alloc);
    memset(&req, 0, sizeof(req));
    memset(&res, 0, sizeof(res));
    got = NULL;
    type = NULL;
    ihcl = 0;

    st = oip_request_framing(&req, &f, &c->ihcl, &c->encoding, &c->type);
    carrier = f.carrier;

    if (st == 0) {
        st = oip_request_process(&req, &alloc, &c->opt, &f, c->body,
                                 c->len);
    }

    framed = malloc(answer->len + 5);
    framed[0] = 0;
    framed[1] = (u_char) (answer->len >> 24);
    framed[2] = (u_char) (answer->len >> 16);
    framed[3] = (u_char) (answer->len >> 8);
    framed[4] = (u_char) answer->len;
    memcpy(framed + 5, answer->p, answer->len);

    if (st == 0) {
        /* as the gRPC transport's answer() frames it for the codec */

        f.ihcl = -1;
        f.encoding = OIP_ENC_NONE;
        f.carrier = OIP_CARRIER_HEADER;
        f.protobuf = 1;
        f.stream = 0;

        st = oip_response_process(&res, &alloc, &c->opt, &req.wish, &f,
                                  framed, answer->len + 5);
    }

    if (st != 0 || !res.rewritten) {
        snprintf(why, wlen, "status %d: %s", st,
                 req.status ? req.error : st ? res.error : "not rewritten");
        goto done;
    }

    got = flatten(res.segs, res.nsegs, res.body_len, &len);

    type = res.content_type;
    ihcl = res.binary ? res.header_len : 0;

    /*
     * the client's: "status N", "header name: value" lines, the body; a
     * carrier's client gets the carrier's media type (the glue's part)
     */

    st = -1;
    p = client->p;

    for ( ;; ) {
        nl = memchr(p, '\n', (size_t) (client->p + client->len - p));

        if (nl == NULL) {
            snprintf(why, wlen, "the .client file has no body");
            goto done;
        }

        if (nl == p) {
            break;
        }

        snprintf(line, sizeof(line), "%.*s", (int) (nl - p), p);

        if (strncmp(line, "header inference-header-content-length: ", 40)
            == 0)
        {
            if ((size_t) strtoull(line + 40, NULL, 10) != ihcl) {
                snprintf(why, wlen, "IHCL %zu, the client got %s", ihcl,
                         line + 40);
                goto done;
            }

            ihcl = 0;

        } else if (strncmp(line, "header content-type: ", 21) == 0) {

            if (carrier == OIP_CARRIER_HEADER
                && (type == NULL || strcmp(type, line + 21) != 0))
            {
                snprintf(why, wlen, "Content-Type %s, the client got %s",
                         type ? type : "(none)", line + 21);
                goto done;
            }

            /* a carrier's client: the header's length in the media type */

            if (carrier != OIP_CARRIER_HEADER && ihcl) {
                snprintf(size, sizeof(size), "json-header-size=%zu", ihcl);

                if (strstr(line, size) == NULL) {
                    snprintf(why, wlen, "%s, the client got %s", size,
                             line + 21);
                    goto done;
                }

                ihcl = 0;
            }
        }

        p = nl + 1;
    }

    p = nl + 1;

    if (ihcl != 0) {
        snprintf(why, wlen, "IHCL %zu, the client got none", ihcl);

    } else if (len != (size_t) (client->p + client->len - p)
               || memcmp(got, p, len) != 0)
    {
        snprintf(why, wlen, "%zu bytes, the client got %zu", len,
                 (size_t) (client->p + client->len - p));

    } else {
        st = 0;
    }

done:

    free(got);
    free(framed);
    arena_destroy(&arena);

    return st;
}


/* a framed message: its 5-byte prefix says its length, uncompressed */

static int
framed(const u_char *p, size_t len)
{
    return len >= 5 && p[0] == 0
           && (((size_t) p[1] << 24) | ((size_t) p[2] << 16)
               | ((size_t) p[3] << 8) | p[4]) == len - 5;
}


static void
test_taken(void)
{
    int      st;
    char     error[OIP_ERROR_LEN];
    char   **v;
    size_t   i, n, len;
    u_char  *got;
    file_t   rest, pb;
    case_t   c;

    v = names(OIP_GOLDEN_DIR "/grpc", "", ".rest", &n);

    ok(n >= 40, "%zu golden cases taken from the module", n);

    for (i = 0; i < n; i++) {
        st = golden_read(v[i], "rest", &rest);
        st |= golden_read(v[i], "pb", &pb);

        if (st != 0 || case_parse(&c, &rest) != 0) {
            ok(0, "%s: the case reads", v[i]);
            free(rest.p);
            free(pb.p);
            continue;
        }

        st = to_grpc(&c, &got, &len, error, sizeof(error));

        if (!ok(st == 0 && framed(got, len) && len - 5 == pb.len
                && memcmp(got + 5, pb.p, pb.len) == 0,
                "%s: the ModelInferRequest the module sent", v[i]))
        {
            diag("status %d %s; %zu bytes against %zu", st, error,
                 len ? len - 5 : 0, pb.len);
        }

        free(got);
        free(rest.p);
        free(pb.p);
    }

    names_free(v, n);
}


static void
test_answers(void)
{
    int      st;
    char     why[512];
    char   **v;
    size_t   i, n;
    file_t   rest, answer, client;
    case_t   c;

    v = names(OIP_GOLDEN_DIR "/grpc", "", ".answer", &n);

    ok(n >= 40, "%zu golden answers taken from the module", n);

    for (i = 0; i < n; i++) {
        st = golden_read(v[i], "rest", &rest);
        st |= golden_read(v[i], "answer", &answer);
        st |= golden_read(v[i], "client", &client);

        if (st != 0 || case_parse(&c, &rest) != 0) {
            ok(0, "%s: the case reads", v[i]);

        } else if (!ok(from_grpc(&c, &answer, &client, why, sizeof(why))
                       == 0,
                       "%s: the client's answer, from the runtime's", v[i]))
        {
            diag("%s", why);
        }

        free(rest.p);
        free(answer.p);
        free(client.p);
    }

    names_free(v, n);
}


/*
 * The gRPC fuzz seeds that are requests (c[0] bit 5), as fuzz_grpc.c
 * takes them: its config bytes, then the body.
 */

static void
test_fuzz_seeds(int write)
{
    int      st;
    char     path[2048], error[OIP_ERROR_LEN], *text;
    char   **v;
    size_t   i, n, len, made;
    u_char  *got;
    file_t   seed, pb;
    case_t   c;

    v = names(OIP_FUZZ_SEEDS, "request", "", &n);
    made = 0;
    pb.p = NULL;

    ok(n >= 4, "%zu gRPC fuzz seeds of requests", n);

    for (i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s", OIP_FUZZ_SEEDS, v[i]);

        if (file_read(path, &seed) != 0 || seed.len < 4
            || !(seed.p[0] & 0x20))
        {
            free(seed.p);
            continue;
        }

        memset(&c, 0, sizeof(case_t));

        c.opt = opts;
        c.opt.inputs = OIP_FORM_BINARY;
        c.opt.outputs = OIP_FORM_KEEP;
        c.opt.max_json_size = OIP_DEFAULT_LIMIT;
        c.opt.max_tensor_size = OIP_DEFAULT_LIMIT;
        c.g.model = (const u_char *) "m";
        c.g.model_len = 1;
        c.g.version = (const u_char *) "2";
        c.g.version_len = seed.p[0] & 1;
        c.g.max_message = seed.p[2] ? 64 * (size_t) seed.p[2]
                                    : OIP_DEFAULT_LIMIT;
        c.g.typed = (seed.p[0] >> 6) & 1;
        c.body = seed.p + 4;
        c.len = seed.len - 4;

        if (seed.p[3] && (size_t) seed.p[3] - 1 <= c.len) {
            snprintf(c.hv[0], sizeof(c.hv[0]), "%d", seed.p[3] - 1);
            c.ihcl = (oip_header_t) { (u_char *) c.hv[0], strlen(c.hv[0]),
                                      1 };
        }

        st = to_grpc(&c, &got, &len, error, sizeof(error));

        if (st != 0) {
            /* a refusal: its status and message are the golden */

            free(got);
            len = (size_t) asprintf(&text, "refused: %d %s", st, error);
            got = (u_char *) text;
            st = 0;
        }

        snprintf(path, sizeof(path), "%s/grpc-fuzz/%s.pb", OIP_GOLDEN_DIR,
                 v[i]);

        if (write) {
            ok(st == 0 && file_write(path, got, len) == 0,
               "%s: golden written (%zu bytes)", v[i], len);

        } else if (!ok(st == 0 && file_read(path, &pb) == 0
                       && pb.len == len && memcmp(got, pb.p, len) == 0,
                       "%s: its ModelInferRequest as golden", v[i]))
        {
            diag("status %d %s; %zu bytes against %zu", st, error, len,
                 pb.len);
        }

        made++;
        free(got);
        free(pb.p);
        pb.p = NULL;
        free(seed.p);
    }

    ok(made >= 4, "%zu of them are requests", made);

    names_free(v, n);
}


int
main(void)
{
    const char  *w;

    w = getenv("OIP_GOLDEN_WRITE");

    test_taken();
    test_answers();
    test_fuzz_seeds(w != NULL && strcmp(w, "1") == 0);

    return tap_done();
}
