
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The canonical form behind $oip_digest: the same tensors give the same
 * bytes whatever their encoding (JSON nested or flat, binary, raw, gzip,
 * inputs in any order, any id), and any change that can change the
 * upstream's answer gives other bytes.  The bytes themselves are
 * compared: equal bytes are equal digests, whatever the hash.
 */


#include "codec_test.h"


typedef struct {
    u_char          *p;
    size_t           len;
    size_t           calls;
} canon_t;


static void
canon_update(void *data, const uint8_t *p, size_t len)
{
    canon_t  *c = data;

    c->p = realloc(c->p, c->len + len + 1);
    memcpy(c->p + c->len, p, len);
    c->len += len;
    c->calls++;
}


/* the request's canonical form, or NULL with *st its status */

static canon_t
canon_of(const oip_options_t *base, const char *json, const u_char *bin,
    size_t blen, off_t ihcl, oip_encoding_e enc, int *st)
{
    run_t          r;
    canon_t        c;
    oip_options_t  o;
    oip_digest_t   d;

    memset(&c, 0, sizeof(c));
    d.data = &c;
    d.update = canon_update;

    o = *base;
    o.digest = &d;
    o.model = (const u_char *) "m";
    o.model_len = 1;
    o.version = (const u_char *) "1";
    o.version_len = 1;

    *st = run_opts(&r, &o, json, strlen(json), bin, blen, ihcl, enc);

    if (*st != 0 || !r.req.digested) {
        free(c.p);
        c.p = NULL;
        c.len = 0;
    }

    run_free(&r);

    return c;
}


static int
canon_same(canon_t *a, canon_t *b)
{
    int  eq;

    eq = a->p && b->p && a->len == b->len && memcmp(a->p, b->p, a->len) == 0;

    free(b->p);
    b->p = NULL;

    return eq;
}


#define JSON_FLAT                                                             \
    "{\"id\":\"one\",\"inputs\":["                                            \
    "{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","                  \
    "\"data\":[1,2.5,-3,4]},"                                                 \
    "{\"name\":\"s\",\"shape\":[2],\"datatype\":\"BYTES\","                   \
    "\"data\":[\"ab\",\"\"]}],"                                               \
    "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"k\":3}},{\"name\":\"z\"}],"\
    "\"parameters\":{\"a\":\"A\",\"b\":true}}"


static void
test_encodings(void)
{
    int            st;
    size_t         n;
    u_char         z[4096], bin[64];
    canon_t        base, c;
    oip_options_t  o;
    oip_form_e     forms[3] = { OIP_FORM_KEEP, OIP_FORM_BINARY,
                                OIP_FORM_JSON };
    const char    *j;
    unsigned       f;

    o = opts;
    base = canon_of(&o, JSON_FLAT, NULL, 0, -1, OIP_ENC_NONE, &st);

    if (!ok(st == 0 && base.p && base.len > 16, "a JSON request digested")) {
        return;
    }

    for (f = 0; f < 3; f++) {
        o = opts;
        o.inputs = forms[f];

        /* nested, inputs and parameters in another order, another id */
        j = "{\"parameters\":{\"b\":true,\"a\":\"\\u0041\"},"
            "\"outputs\":[{\"name\":\"z\"},{\"parameters\":{\"k\":3},"
            "\"name\":\"y\"}],\"inputs\":["
            "{\"name\":\"s\",\"shape\":[2],\"datatype\":\"BYTES\","
            "\"data\":[\"ab\",\"\"]},"
            "{\"datatype\":\"FP32\",\"name\":\"x\",\"shape\":[2,2],"
            "\"data\":[[1.0,2.5],[-3e0,4]]}],\"id\":\"two\"}";
        c = canon_of(&o, j, NULL, 0, -1, OIP_ENC_NONE, &st);
        ok(canon_same(&base, &c), "form %u: nested, reordered, another id", f);

        /* binary: FP32 1, 2.5, -3, 4 and BYTES "ab", "" */
        memcpy(bin, "\x00\x00\x80\x3f\x00\x00\x20\x40\x00\x00\x40\xc0"
               "\x00\x00\x80\x40" "\x02\x00\x00\x00" "ab" "\x00\x00\x00\x00",
               26);
        j = "{\"inputs\":["
            "{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
            "\"parameters\":{\"binary_data_size\":16}},"
            "{\"name\":\"s\",\"shape\":[2],\"datatype\":\"BYTES\","
            "\"parameters\":{\"binary_data_size\":10}}],"
            "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"k\":3}},"
            "{\"name\":\"z\"}],\"parameters\":{\"a\":\"A\",\"b\":true}}";
        c = canon_of(&o, j, bin, 26, -2, OIP_ENC_NONE, &st);
        ok(canon_same(&base, &c), "form %u: the binary extension", f);

        n = compress_with(15 + 16, JSON_FLAT, strlen(JSON_FLAT), z, sizeof(z));
        c = canon_of(&o, "", z, n, -1, OIP_ENC_GZIP, &st);
        ok(canon_same(&base, &c), "form %u: gzip", f);

        /* when and whether it runs is not what it answers */
        c = canon_of(&o, "{\"id\":\"one\",\"inputs\":["
            "{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
            "\"data\":[1,2.5,-3,4]},"
            "{\"name\":\"s\",\"shape\":[2],\"datatype\":\"BYTES\","
            "\"data\":[\"ab\",\"\"]}],"
            "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"k\":3}},"
            "{\"name\":\"z\"}],\"parameters\":{\"timeout\":70000,"
            "\"a\":\"A\",\"priority\":1,\"b\":true}}", NULL, 0, -1,
            OIP_ENC_NONE, &st);
        ok(canon_same(&base, &c), "form %u: a priority and a timeout", f);
    }

    free(base.p);
}


static void
test_changes(void)
{
    int            st;
    unsigned       i;
    canon_t        base, c;
    oip_options_t  o;

    static const char  *changed[] = {
        /* a value */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"data\":[1,2.5,-3,5]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":3}},{\"name\":\"z\"}],\"parameters\":"
        "{\"a\":\"A\",\"b\":true}}",
        /* a shape, same bytes */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[4],\"datatype\":\"FP32\","
        "\"data\":[1,2.5,-3,4]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":3}},{\"name\":\"z\"}],\"parameters\":"
        "{\"a\":\"A\",\"b\":true}}",
        /* a name */
        "{\"inputs\":[{\"name\":\"X\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"data\":[1,2.5,-3,4]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":3}},{\"name\":\"z\"}],\"parameters\":"
        "{\"a\":\"A\",\"b\":true}}",
        /* a datatype of the same size */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"INT32\","
        "\"data\":[1,2,-3,4]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":3}},{\"name\":\"z\"}],\"parameters\":"
        "{\"a\":\"A\",\"b\":true}}",
        /* a string moved between elements */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"data\":[1,2.5,-3,4]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"a\",\"b\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":3}},{\"name\":\"z\"}],\"parameters\":"
        "{\"a\":\"A\",\"b\":true}}",
        /* an output less */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"data\":[1,2.5,-3,4]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":3}}],\"parameters\":"
        "{\"a\":\"A\",\"b\":true}}",
        /* an output's parameter */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"data\":[1,2.5,-3,4]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":4}},{\"name\":\"z\"}],\"parameters\":"
        "{\"a\":\"A\",\"b\":true}}",
        /* the request's parameter */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"data\":[1,2.5,-3,4]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":3}},{\"name\":\"z\"}],\"parameters\":"
        "{\"a\":\"A\",\"b\":false}}",
        /* an input's parameter */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"parameters\":{\"q\":1},\"data\":[1,2.5,-3,4]},{\"name\":\"s\","
        "\"shape\":[2],\"datatype\":\"BYTES\",\"data\":[\"ab\",\"\"]}],"
        "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"k\":3}},"
        "{\"name\":\"z\"}],\"parameters\":{\"a\":\"A\",\"b\":true}}",
        /* an output asked as binary (the upstream's form, kept) */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"FP32\","
        "\"data\":[1,2.5,-3,4]},{\"name\":\"s\",\"shape\":[2],\"datatype\":"
        "\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"k\":3,\"binary_data\":true}},{\"name\":\"z\"}],"
        "\"parameters\":{\"a\":\"A\",\"b\":true}}"
    };

    o = opts;
    base = canon_of(&o, JSON_FLAT, NULL, 0, -1, OIP_ENC_NONE, &st);

    for (i = 0; i < sizeof(changed) / sizeof(changed[0]); i++) {
        c = canon_of(&o, changed[i], NULL, 0, -1, OIP_ENC_NONE, &st);
        ok(st == 0 && c.p && !canon_same(&base, &c),
           "change %u: another digest", i);
    }

    /* the model and its version */

    c = canon_of(&o, JSON_FLAT, NULL, 0, -1, OIP_ENC_NONE, &st);
    ok(canon_same(&base, &c), "the same request: the same digest");

    o.model = (const u_char *) "n";
    o.version_len = 0;
    {
        run_t         r;
        canon_t       m;
        oip_digest_t  d;

        memset(&m, 0, sizeof(m));
        d.data = &m;
        d.update = canon_update;
        o.digest = &d;
        o.model_len = 1;

        st = run_opts(&r, &o, JSON_FLAT, strlen(JSON_FLAT), NULL, 0, -1,
                      OIP_ENC_NONE);
        ok(st == 0 && r.req.digested && !canon_same(&base, &m),
           "another model: another digest");
        run_free(&r);
    }

    free(base.p);
}


static void
test_upstream_form(void)
{
    int            st;
    canon_t        a, b;
    oip_options_t  o;
    const char    *bin_out;

    bin_out = "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":"
              "\"FP32\",\"data\":[1,2.5,-3,4]},{\"name\":\"s\",\"shape\":[2],"
              "\"datatype\":\"BYTES\",\"data\":[\"ab\",\"\"]}],\"outputs\":"
              "[{\"name\":\"y\",\"parameters\":{\"k\":3,\"binary_data\":"
              "true}},{\"name\":\"z\",\"parameters\":{\"binary_data\":"
              "false}}],\"parameters\":{\"a\":\"A\",\"b\":true}}";

    /* fixed by oip_upstream_outputs: the client's flags do not matter */

    o = opts;
    o.outputs = OIP_FORM_BINARY;
    a = canon_of(&o, JSON_FLAT, NULL, 0, -1, OIP_ENC_NONE, &st);
    b = canon_of(&o, bin_out, NULL, 0, -1, OIP_ENC_NONE, &st);
    ok(canon_same(&a, &b), "upstream outputs binary: one digest for all flags");

    o.outputs = OIP_FORM_JSON;
    b = canon_of(&o, bin_out, NULL, 0, -1, OIP_ENC_NONE, &st);
    ok(!canon_same(&a, &b), "... and another when they are asked as JSON");
    free(a.p);

    /* kept: binary_data_output false is no flag */

    o.outputs = OIP_FORM_KEEP;
    a = canon_of(&o, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
                 "\"datatype\":\"INT8\",\"data\":[1]}]}", NULL, 0, -1,
                 OIP_ENC_NONE, &st);
    b = canon_of(&o, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
                 "\"datatype\":\"INT8\",\"data\":[1]}],\"parameters\":"
                 "{\"binary_data_output\":false}}", NULL, 0, -1,
                 OIP_ENC_NONE, &st);
    ok(canon_same(&a, &b), "binary_data_output false: as none");

    b = canon_of(&o, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
                 "\"datatype\":\"INT8\",\"data\":[1]}],\"parameters\":"
                 "{\"binary_data_output\":true}}", NULL, 0, -1,
                 OIP_ENC_NONE, &st);
    ok(!canon_same(&a, &b), "binary_data_output true, kept: another digest");
    free(a.p);
}


static void
test_raw_and_none(void)
{
    int               st;
    char              err[128];
    canon_t           a, b;
    oip_options_t     o;
    oip_raw_input_t   raw;
    static u_char     bin[8] = { 1, 0, 2, 0, 3, 0, 4, 0 };

    o = opts;
    ok(oip_raw_input_init(&raw, (const u_char *) "x", 1,
                          (const u_char *) "INT16", 5,
                          (const u_char *) "-1,2", 4, err, sizeof(err)) == 0,
       "raw input declared");
    o.raw = &raw;

    a = canon_of(&o, "", bin, 8, 0, OIP_ENC_NONE, &st);
    b = canon_of(&o, "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],"
                 "\"datatype\":\"INT16\",\"data\":[1,2,3,4]}]}", NULL, 0, -1,
                 OIP_ENC_NONE, &st);
    ok(canon_same(&a, &b), "raw binary and its JSON: one digest");
    free(a.p);

    /* shared memory: the tensor is not in the request */

    o = opts;
    a = canon_of(&o, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],"
                 "\"datatype\":\"INT8\",\"parameters\":"
                 "{\"shared_memory_region\":\"r\","
                 "\"shared_memory_byte_size\":1}}]}", NULL, 0, -1,
                 OIP_ENC_NONE, &st);
    ok(st == 0 && a.p == NULL, "shared memory: no digest");

    /* large tensors go to the sink without a copy into its buffer */

    {
        size_t   i;
        char    *j, *p;

        j = malloc(128 + 4096 * 4);
        p = j + sprintf(j, "{\"inputs\":[{\"name\":\"x\",\"shape\":[4096],"
                        "\"datatype\":\"UINT8\",\"data\":[");

        for (i = 0; i < 4096; i++) {
            p += sprintf(p, "%s%u", i ? "," : "", (unsigned) (i & 0x7f));
        }

        strcpy(p, "]}]}");

        a = canon_of(&o, j, NULL, 0, -1, OIP_ENC_NONE, &st);
        ok(st == 0 && a.p && a.len > 4096 && a.calls <= 4,
           "4 KB of tensor: %zu bytes in %zu calls", a.len, a.calls);
        free(a.p);
        free(j);
    }
}


static void
test_alloc_failures(void)
{
    int            st;
    size_t         i;
    run_t          r;
    canon_t        c;
    oip_options_t  o;
    oip_digest_t   d;

    /* every allocation failing in turn: a 500, never a crash or a leak */

    for (i = 1; i < 64; i++) {
        memset(&c, 0, sizeof(c));
        d.data = &c;
        d.update = canon_update;

        o = opts;
        o.digest = &d;

        memset(&r, 0, sizeof(r));
        arena_init(&r.arena, &r.alloc);
        r.arena.fail_at = i;

        st = oip_request_process(&r.req, &r.alloc, &o,
                                 &(oip_framing_t) { -1, OIP_ENC_NONE,
                                                    OIP_CARRIER_HEADER, 0, 0 },
                                 (const u_char *) JSON_FLAT,
                                 strlen(JSON_FLAT));

        if (!r.arena.failed) {
            ok(st == 0 && r.req.digested, "no allocation fails past %zu", i);
            arena_destroy(&r.arena);
            free(c.p);
            break;
        }

        if (st != 500) {
            ok(0, "allocation %zu failing: %d", i, st);
        }

        arena_destroy(&r.arena);
        free(c.p);
    }
}


int
main(void)
{
    test_encodings();
    test_changes();
    test_upstream_form();
    test_raw_and_none();
    test_alloc_failures();

    return tap_done();
}
