
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The JSON scanner alone: what RFC 8259 accepts and refuses, UTF-8,
 * escapes and surrogates, duplicate keys at every level and in large
 * objects, nesting limits, and the escaper the error bodies use.
 */


#include "tap.h"
#include "oip_json.h"


/* the reason of check()'s last refusal */
static oip_reason_e  check_reason;


static int
check(const char *s, size_t len, unsigned depth, char *err)
{
    int           rc;
    arena_t       a;
    oip_ctx_t     c;
    oip_json_t    j;
    oip_alloc_t   alloc;
    oip_reason_e  reason;
    char          error[OIP_ERROR_LEN];

    arena_init(&a, &alloc);

    reason = OIP_REASON_NONE;
    oip_ctx_init(&c, &alloc, error, &reason, (size_t) -1);
    error[0] = '\0';

    oip_json_init(&j, &c, (const u_char *) s, len, depth);
    rc = oip_json_check(&j);
    oip_json_done(&j);

    if (err) {
        strcpy(err, error);
    }

    check_reason = reason;
    arena_destroy(&a);

    return rc;
}


#define VALID(s)                                                              \
    ok(check(s, sizeof(s) - 1, 100, NULL) == 0, "valid: %s", s)

#define INVALID(s, msg)                                                       \
    do {                                                                      \
        char  e_[OIP_ERROR_LEN];                                              \
        int   r_ = check(s, sizeof(s) - 1, 100, e_);                          \
        ok(r_ != 0 && strstr(e_, msg)                                         \
           && (strstr(e_, "invalid JSON") == NULL                             \
               || check_reason == OIP_REASON_SYNTAX),                         \
           "invalid: %s (%s)", s, e_);                                        \
    } while (0)


static void
test_grammar(void)
{
    VALID("{}");
    VALID("[]");
    VALID(" \t\r\n{ \"a\" : [ 1 , -2.5e+3 , true , false , null ] } \n");
    VALID("0");
    VALID("-0");
    VALID("1E5");
    VALID("1e-5");
    VALID("[NaN,Infinity,-Infinity]");
    VALID("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\"");
    VALID("\"\\ud83d\\ude00\"");
    VALID("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"");
    VALID("\"\xed\x9f\xbf\xee\x80\x80\"");

    INVALID("", "missing value");
    INVALID("{", "unterminated");
    INVALID("[1,]", "expected a value");
    INVALID("[,1]", "expected a value");
    INVALID("{\"a\"}", "expected ':'");
    INVALID("{\"a\":}", "expected a value");
    INVALID("{a:1}", "expected a string key");
    INVALID("{\"a\":1 \"b\":2}", "expected ',' or '}'");
    INVALID("[1 2]", "expected ',' or ']'");
    INVALID("{} {}", "unexpected bytes");
    INVALID("01", "invalid number");
    INVALID("-", "invalid number");
    INVALID("1.", "invalid number");
    INVALID("1.e5", "invalid number");
    INVALID("1e", "invalid number");
    INVALID("1e+", "invalid number");
    INVALID("+1", "expected a value");
    INVALID("0x10", "invalid number");
    INVALID("1_000", "invalid number");
    INVALID("nan", "invalid literal");
    INVALID("NaNa", "invalid number");
    INVALID("-NaN", "invalid number");
    INVALID("Infinit", "invalid number");
    INVALID("True", "expected a value");
    INVALID("nul", "invalid literal");
    INVALID("'a'", "expected a value");
    INVALID("\"abc", "unterminated string");
    INVALID("\"\\x\"", "invalid escape");
    INVALID("\"\\u12\"", "invalid \\u escape");
    INVALID("\"\\u12g4\"", "invalid \\u escape");
    INVALID("\"\\ud800\"", "unpaired high surrogate");
    INVALID("\"\\ud800\\u0041\"", "unpaired high surrogate");
    INVALID("\"\\udfff\"", "unpaired low surrogate");
    INVALID("\"\\ude00\\ud83d\"", "unpaired low surrogate");
    INVALID("\"a\nb\"", "control character");
    INVALID("\"\x7f\x80\"", "invalid UTF-8");
    INVALID("\"\xc1\xbf\"", "invalid UTF-8");
    INVALID("\"\xe0\x80\xaf\"", "invalid UTF-8");
    INVALID("\"\xed\xa0\x80\"", "invalid UTF-8");
    INVALID("\"\xf0\x80\x80\xaf\"", "invalid UTF-8");
    INVALID("\"\xf4\x90\x80\x80\"", "invalid UTF-8");
    INVALID("\"\xf8\x88\x80\x80\x80\"", "invalid UTF-8");
    INVALID("\"\xc3\"", "invalid UTF-8");
    INVALID("\xef\xbb\xbf{}", "expected a value");
    INVALID("[1]\x00", "unexpected bytes");
}


static void
test_dups(void)
{
    int     i, n;
    char   *s, *p, err[OIP_ERROR_LEN];

    INVALID("{\"a\":1,\"a\":1}", "duplicate key \"a\"");
    INVALID("{\"a\":1,\"\\u0061\":1}", "duplicate key \"a\"");
    INVALID("[{\"x\":{\"y\":[{\"k\":1,\"k\":2}]}}]", "duplicate key \"k\"");
    INVALID("{\"\\u0000\":1,\"\\u0000\":1}", "duplicate key");
    VALID("{\"a\":1,\"A\":1,\"a \":1}");
    VALID("{\"a\":{\"a\":{\"a\":1}},\"b\":{\"a\":1}}");

    /* a large object takes the hashed path; the duplicate is the last */

    n = 60000;
    s = malloc(n * 16 + 64);
    p = s;
    *p++ = '{';

    for (i = 0; i < n; i++) {
        p += sprintf(p, "%s\"k%d\":%d", i ? "," : "", i, i);
    }

    strcpy(p, "}");
    ok(check(s, strlen(s), 100, NULL) == 0, "%d distinct keys", n);

    sprintf(p, ",\"k%d\":0}", n / 2);
    ok(check(s, strlen(s), 100, err) != 0 && strstr(err, "duplicate"),
       "%d keys and one duplicate: %s", n + 1, err);

    free(s);
}


static void
test_members(void)
{
    int    i, n;
    char  *s, *p, err[OIP_ERROR_LEN];

    n = 65537;
    s = malloc(n * 16 + 64);
    p = s;
    *p++ = '{';

    for (i = 0; i < n; i++) {
        p += sprintf(p, "%s\"k%d\":0", i ? "," : "", i);
    }

    strcpy(p, "}");

    ok(check(s, strlen(s), 100, err) != 0 && strstr(err, "65536 members"),
       "an object of 65537 members: %s", err);

    free(s);
}


static void
test_depth(void)
{
    int    i, n;
    char  *s, err[OIP_ERROR_LEN];

    ok(check("[[[1]]]", 7, 3, NULL) == 0, "depth 3 within a limit of 3");
    ok(check("[[[[1]]]]", 9, 3, err) != 0 && strstr(err, "oip_max_depth"),
       "depth 4 over a limit of 3: %s", err);
    ok(check("{\"a\":{\"b\":{}}}", 14, 2, err) != 0,
       "objects count toward depth");

    /* 10^5 levels: refused by the limit, and no C stack is spent on it */

    n = 100000;
    s = malloc(2 * n + 1);

    for (i = 0; i < n; i++) {
        s[i] = '[';
        s[2 * n - 1 - i] = ']';
    }

    ok(check(s, 2 * n, 100, err) != 0 && strstr(err, "oip_max_depth"),
       "10^5 levels refused");
    ok(check(s, 2 * n, 200000, NULL) == 0,
       "10^5 levels accepted when the limit allows them");

    free(s);
}


static void
test_unescape(void)
{
    size_t       n;
    u_char       out[64];
    oip_str_t    s;
    oip_json_t   j;
    oip_ctx_t    c;
    const char  *in;

    memset(&c, 0, sizeof(c));   /* no error is expected: none is kept */

    in = "\"a\\u0000b\\n\\\"\\u00e9\\u20ac\\ud83d\\ude00\\/\"";
    oip_json_init(&j, &c, (const u_char *) in, strlen(in), 10);
    ok(oip_json_string(&j, &s) == 0 && s.escaped, "escaped string scanned");

    n = oip_json_unescape(out, &s);
    ok(n == oip_json_unescaped_len(&s) && n == 15
       && memcmp(out, "a\0b\n\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/", 15)
          == 0, "unescaped to the right %zu bytes", n);

    ok(oip_json_str_eq(&s, "a\0b\n\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/",
                       15), "compares equal after unescaping");
}


static void
test_escape(void)
{
    size_t  n;
    u_char  out[64];

    n = oip_json_escape(out, (const u_char *) "a\"b\\c\n\x01\xc3\xa9\xff", 10);
    ok(n == oip_json_escape(NULL, (const u_char *) "a\"b\\c\n\x01\xc3\xa9\xff",
                            10)
       && n == 18 && memcmp(out, "a\\\"b\\\\c\\n\\u0001\xc3\xa9?", 18) == 0,
       "escaped: %.*s", (int) n, out);
}


int
main(void)
{
    test_grammar();
    test_dups();
    test_members();
    test_depth();
    test_unescape();
    test_escape();

    return tap_done();
}
