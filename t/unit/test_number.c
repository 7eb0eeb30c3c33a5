
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Numbers: parsing is correctly rounded (checked against glibc's strtof
 * and strtod, which are), printing reads back to the same bits, FP16
 * and BF16 round to nearest even.  OIP_NUMBER_SCALE multiplies the
 * random sample sizes (the bench runs a larger one).
 */


#include <math.h>
#include <float.h>

#include "tap.h"
#include "oip_number_fast.h"
#include "half.h"


static uint64_t  rng = 0x9e3779b97f4a7c15ULL;


static uint64_t
rnd(void)
{
    /* xorshift64*: the same sample every run */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}


static int
parse_d(const char *s, double *v)
{
    oip_num_t  n;

    if (oip_num_scan((const u_char *) s, (const u_char *) s + strlen(s), &n)
        == NULL)
    {
        return -1;
    }

    return oip_num_double(&n, v);
}


static int
parse_f(const char *s, float *v)
{
    oip_num_t  n;

    if (oip_num_scan((const u_char *) s, (const u_char *) s + strlen(s), &n)
        == NULL)
    {
        return -1;
    }

    return oip_num_float(&n, v);
}


/* the same through the fast path the data walkers use, when it takes it */

static int
fast_d(const char *s, double *v)
{
    uint64_t    b;
    oip_fast_t  d;

    if (oip_fast_decimal((const u_char *) s, (const u_char *) s + strlen(s),
                         &d) == NULL
        || oip_fast_double(&d, &b) != 0)
    {
        return -1;
    }

    memcpy(v, &b, 8);

    return 0;
}


static int
fast_f(const char *s, float *v)
{
    uint32_t    b;
    oip_fast_t  d;

    if (oip_fast_decimal((const u_char *) s, (const u_char *) s + strlen(s),
                         &d) == NULL
        || oip_fast_float(&d, &b) != 0)
    {
        return -1;
    }

    memcpy(v, &b, 4);

    return 0;
}


static int
same_d(double a, double b)
{
    return memcmp(&a, &b, sizeof(double)) == 0;
}


static int
same_f(float a, float b)
{
    return memcmp(&a, &b, sizeof(float)) == 0;
}


/* a JSON number from random digits and exponent */

static void
random_number(char *buf, int maxdigits, int erange)
{
    int  i, nd, point, e;
    char  *p;

    p = buf;
    nd = 1 + rnd() % maxdigits;
    point = rnd() % (nd + 1);

    if (rnd() & 1) {
        *p++ = '-';
    }

    for (i = 0; i < nd; i++) {
        if (i == point && i > 0) {
            *p++ = '.';
        }

        *p++ = (char) ('0' + (i == 0 ? 1 + rnd() % 9 : rnd() % 10));
    }

    e = (int) (rnd() % (2 * erange + 1)) - erange;
    sprintf(p, "e%d", e);
}



/*
 * The reference printer: for 1, 2, ... significant digits, the nearest
 * decimal of that length and its two neighbours (at a power of two the
 * interval is lopsided, and the nearest may fall out where a neighbour
 * does not), through printf and strtod; the first length where one
 * reads back to the same bits, and the nearest of those that do.
 * Slow, and plainly right.
 */

#define REF_DOUBLE  0
#define REF_FLOAT   1
#define REF_FP16    2
#define REF_BF16    3

static int
ref_back(const char *text, double v, int kind, uint16_t bits)
{
    switch (kind) {
    case REF_FLOAT:
        return (double) strtof(text, NULL) == v;
    case REF_FP16:
        return (oip_double_to_fp16(strtod(text, NULL)) & 0x7fff) == bits;
    case REF_BF16:
        return (oip_double_to_bf16(strtod(text, NULL)) & 0x7fff) == bits;
    default:
        return strtod(text, NULL) == v;
    }
}


static void
ref_shortest(char *out, double v, int kind, uint16_t bits)
{
    int                  prec, maxp, nd, e, n, i, c, best;
    char                 buf[64], cand[3][64], digits[32], *s, *o;
    long long            m;
    unsigned long long   um[3];

    o = out;

    if (isnan(v)) {
        strcpy(out, "NaN");
        return;
    }

    if (isinf(v)) {
        strcpy(out, v < 0 ? "-Infinity" : "Infinity");
        return;
    }

    if (signbit(v)) {
        *o++ = '-';
        v = -v;
    }

    if (v == 0.0) {
        strcpy(o, "0.0");
        return;
    }

    maxp = (kind == REF_DOUBLE) ? 17 : 9;
    best = -1;
    e = 0;

    for (prec = 1; prec <= maxp && best < 0; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);

        /* the digits as an integer m, the value m 10^e */

        m = 0;

        for (s = buf; *s != 'e'; s++) {
            if (*s != '.') {
                m = m * 10 + (*s - '0');
            }
        }

        e = atoi(s + 1) - (prec - 1);

        /* printf rounds exactly, ties to even: the nearest comes first;
         * the neighbours lie on either side, one at most can be in */

        um[0] = m;
        um[1] = m + 1;
        um[2] = m - 1;

        for (c = 0; c < 3 && best < 0; c++) {
            if (um[c] == 0) {
                continue;
            }

            snprintf(cand[c], sizeof(cand[c]), "%llue%d", um[c], e);

            if (ref_back(cand[c], v, kind, bits)) {
                best = c;
            }
        }
    }

    /* the chosen digits, then the same layout as the module's */

    nd = snprintf(digits, sizeof(digits), "%llu", um[best]);

    while (nd > 1 && digits[nd - 1] == '0') {
        nd--;
        e++;
    }

    n = e + nd;

    if (n > 21 || n <= -6) {
        o += sprintf(o, "%c", digits[0]);
        if (nd > 1) {
            o += sprintf(o, ".%.*s", nd - 1, digits + 1);
        }
        sprintf(o, "e%d", n - 1);

    } else if (n <= 0) {
        o += sprintf(o, "0.");
        for (i = 0; i < -n; i++) {
            *o++ = '0';
        }
        sprintf(o, "%.*s", nd, digits);

    } else if (nd <= n) {
        o += sprintf(o, "%.*s", nd, digits);
        for (i = nd; i < n; i++) {
            *o++ = '0';
        }
        strcpy(o, ".0");

    } else {
        sprintf(o, "%.*s.%.*s", n, digits, nd - n, digits + n);
    }
}


static int
same_text(const char *what, const u_char *buf, const u_char *end,
    const char *ref)
{
    if ((size_t) (end - buf) == strlen(ref)
        && memcmp(buf, ref, end - buf) == 0)
    {
        return 1;
    }

    diag("%s: printed %.*s, the reference says %s", what, (int) (end - buf),
         buf, ref);

    return 0;
}


static void
test_parse_random(long scale)
{
    long    i, bad_d, bad_f;
    char    buf[128];
    float   f;
    double  d;

    bad_d = 0;
    bad_f = 0;

    for (i = 0; i < 100000 * scale; i++) {
        random_number(buf, (i & 1) ? 25 : 9, (i & 2) ? 330 : 45);

        parse_d(buf, &d);
        if (!same_d(d, strtod(buf, NULL)) && bad_d++ < 5) {
            diag("double %s: %.17g vs %.17g", buf, d, strtod(buf, NULL));
        }

        if (fast_d(buf, &d) == 0 && !same_d(d, strtod(buf, NULL))
            && bad_d++ < 5)
        {
            diag("fast double %s: %.17g vs %.17g", buf, d,
                 strtod(buf, NULL));
        }

        parse_f(buf, &f);
        if (!same_f(f, strtof(buf, NULL)) && bad_f++ < 5) {
            diag("float %s: %.9g vs %.9g", buf, f, strtof(buf, NULL));
        }

        if (fast_f(buf, &f) == 0 && !same_f(f, strtof(buf, NULL))
            && bad_f++ < 5)
        {
            diag("fast float %s: %.9g vs %.9g", buf, f, strtof(buf, NULL));
        }
    }

    ok(bad_d == 0, "%ld random numbers parse to strtod's double", i);
    ok(bad_f == 0, "%ld random numbers parse to strtof's float", i);
}


/*
 * Exact midpoints between neighbouring floats (and doubles), and the
 * numbers just either side: the cases that double rounding gets wrong.
 */

static void
test_parse_halfway(long scale)
{
    int          k, bad;
    long         i;
    char         buf[1200];
    float        x, f;
    double       mid, d, y;
    uint32_t     u;
    uint64_t     b;
    long double  lmid;

    bad = 0;

    for (i = 0; i < 20000 * scale; i++) {
        u = (uint32_t) rnd() & 0x7f7fffff;
        memcpy(&x, &u, 4);
        mid = ((double) x + (double) nextafterf(x, INFINITY)) / 2;

        for (k = -1; k <= 1; k++) {
            d = (k == 0) ? mid : nextafter(mid, k * INFINITY);
            snprintf(buf, sizeof(buf), "%.*e", 800, d);
            parse_f(buf, &f);

            if (!same_f(f, strtof(buf, NULL)) && bad++ < 5) {
                diag("float near midpoint %.30e: %a vs %a", d, f,
                     strtof(buf, NULL));
            }

            if (fast_f(buf, &f) == 0 && !same_f(f, strtof(buf, NULL))
                && bad++ < 5)
            {
                diag("fast float near midpoint %.30e: %a", d, f);
            }

            /* and as the short text a client would send: up to 17 digits */

            snprintf(buf, sizeof(buf), "%.16e", d);

            if (fast_f(buf, &f) == 0 && !same_f(f, strtof(buf, NULL))
                && bad++ < 5)
            {
                diag("fast float %s: %a vs %a", buf, f, strtof(buf, NULL));
            }
        }
    }

    ok(bad == 0, "float midpoints and their neighbours round right");

    bad = 0;

    for (i = 0; i < 5000 * scale; i++) {
        b = rnd() & 0x7fefffffffffffffULL;
        memcpy(&y, &b, 8);
        lmid = ((long double) y + (long double) nextafter(y, INFINITY)) / 2;

        snprintf(buf, sizeof(buf), "%.*Le", 800, lmid);
        parse_d(buf, &d);

        if (!same_d(d, strtod(buf, NULL)) && bad++ < 5) {
            diag("double midpoint %.30Le: %a vs %a", lmid, d,
                 strtod(buf, NULL));
        }

        if (fast_d(buf, &d) == 0 && !same_d(d, strtod(buf, NULL))
            && bad++ < 5)
        {
            diag("fast double midpoint %.30Le: %a", lmid, d);
        }
    }

    ok(bad == 0, "double midpoints round to even");
}


/*
 * Float midpoints that are short decimals: the fast FP32 path goes
 * through a double, and must not round twice.  m = (2k+1) 2^e / 2, for
 * small k, printed exactly (a few dozen digits at most).
 */

static void
test_fast_float_midpoints(long scale)
{
    int       bad, e;
    long      i;
    char      buf[128];
    float     f;
    double    m;
    uint32_t  k;

    bad = 0;

    for (i = 0; i < 20000 * scale; i++) {
        k = (uint32_t) (rnd() & 0xffffff) | 0x800000;
        e = (int) (rnd() % 60) - 40;
        m = ldexp(2.0 * k + 1, e - 1);

        snprintf(buf, sizeof(buf), "%.40g", m);

        if (fast_f(buf, &f) == 0 && !same_f(f, strtof(buf, NULL))
            && bad++ < 5)
        {
            diag("fast float, exact midpoint %s: %a vs %a", buf, f,
                 strtof(buf, NULL));
        }

        snprintf(buf, sizeof(buf), "%.17g", m);

        if (fast_f(buf, &f) == 0 && !same_f(f, strtof(buf, NULL))
            && bad++ < 5)
        {
            diag("fast float, near midpoint %s: %a vs %a", buf, f,
                 strtof(buf, NULL));
        }
    }

    /*
     * Short decimals (at most 16 digits) a few double ulps from a float
     * midpoint: where a product by an inexact 10^-k could round the
     * wrong way.
     */

    for (i = 0; i < 20000 * scale; i++) {
        k = (uint32_t) (rnd() & 0xffffff) | 0x800000;
        e = (int) (rnd() % 60) - 40;
        m = ldexp(2.0 * k + 1, e - 1);

        snprintf(buf, sizeof(buf), "%.*g", 14 + (int) (i % 3), m);

        if (fast_f(buf, &f) == 0 && !same_f(f, strtof(buf, NULL))
            && bad++ < 5)
        {
            diag("fast float, short and near a midpoint %s: %a vs %a",
                 buf, f, strtof(buf, NULL));
        }
    }

    ok(bad == 0, "the fast FP32 path rounds float midpoints once");
}


static void
test_parse_edges(void)
{
    size_t       i;
    char        *big;
    float        f;
    double       d;

    static const char  *cases[] = {
        "0", "-0", "0.0", "1", "-1", "0.1", "0.3", "1e-45", "1.4e-45",
        "7e-46", "7.1e-46", "1e-400", "1e400", "-1e400",
        "2.4703282292062327e-324", "2.4703282292062328e-324",
        "4.9406564584124654e-324", "2.2250738585072011e-308",
        "2.2250738585072012e-308", "1.7976931348623157e308",
        "1.7976931348623158e308", "1.7976931348623159e308",
        "3.4028235e38", "3.40282356e38", "3.4028236e38",
        "1.17549435e-38", "9007199254740993", "9007199254740992.5",
        "16777217", "16777216.5", "123456789012345678901234567890",
        "0.000000000000000000000000000001", "1e22", "1e23", "8.5e37",
        "1e-10", "4294967296e-5", "1e1000000000000", "1e-1000000000000",
        "100000000000000000000000000000000000000000000000000000000e-50",
        NULL
    };

    for (i = 0; cases[i]; i++) {
        parse_d(cases[i], &d);
        parse_f(cases[i], &f);

        ok(same_d(d, strtod(cases[i], NULL))
           && same_f(f, strtof(cases[i], NULL)), "parse %s", cases[i]);
    }

    /* 2000 digits: past what rounding needs, with a sticky tail */

    big = malloc(2100);
    memset(big, '0', 2100);
    big[0] = '1';
    big[1] = '.';
    memcpy(big + 2, "00000000000000011102230246251565404236316680908203125",
           53);
    big[1990] = '1';
    big[2000] = '\0';

    parse_d(big, &d);
    ok(same_d(d, strtod(big, NULL)) && d == 1.0000000000000002,
       "2000 digits just above a double midpoint round up");

    big[1990] = '0';
    parse_d(big, &d);
    ok(same_d(d, strtod(big, NULL)) && d == 1.0,
       "and exactly on it round to even");

    free(big);

    parse_d("NaN", &d);
    ok(isnan(d), "NaN");
    parse_d("-Infinity", &d);
    ok(isinf(d) && d < 0, "-Infinity");
    parse_f("Infinity", &f);
    ok(isinf(f) && f > 0, "Infinity as float");
}


static void
test_print_roundtrip(long scale)
{
    long      i, bad;
    char      ref[64];
    u_char    buf[64], *e;
    float     f, g;
    double    d, h;
    uint32_t  u;
    uint64_t  b;

    bad = 0;

    for (i = 0; i < 100000 * scale; i++) {
        u = (uint32_t) rnd();
        memcpy(&f, &u, 4);

        if (isnan(f)) {
            continue;
        }

        e = oip_print_float(buf, f);
        *e = '\0';

        if ((parse_f((char *) buf, &g) != 0 || !same_f(f, g)) && bad++ < 5) {
            diag("float %a printed as %s", f, buf);
        }

        ref_shortest(ref, f, REF_FLOAT, 0);
        if (!same_text("float", buf, e, ref)) {
            bad++;
        }
    }

    ok(bad == 0, "random FP32 print and read back to the same bits");

    bad = 0;

    for (i = 0; i < 50000 * scale; i++) {
        b = rnd();
        memcpy(&d, &b, 8);

        if (isnan(d)) {
            continue;
        }

        e = oip_print_double(buf, d);
        *e = '\0';

        if ((parse_d((char *) buf, &h) != 0 || !same_d(d, h)) && bad++ < 5) {
            diag("double %a printed as %s", d, buf);
        }

        ref_shortest(ref, d, REF_DOUBLE, 0);
        if (!same_text("double", buf, e, ref)) {
            bad++;
        }
    }

    ok(bad == 0, "random FP64 print and read back to the same bits");
}


/* the edges a random sample never reaches: subnormals, powers of two */

static void
test_print_edges(void)
{
    int       bad, e;
    char      ref[64];
    float     f;
    double    d;
    u_char    buf[64], *end;
    uint32_t  u;
    uint64_t  b;

    bad = 0;

    for (u = 1; u < 4096; u++) {
        memcpy(&f, &u, 4);
        end = oip_print_float(buf, f);
        ref_shortest(ref, f, REF_FLOAT, 0);
        bad += !same_text("FP32 subnormal", buf, end, ref);
    }

    for (b = 1; b < 4096; b++) {
        memcpy(&d, &b, 8);
        end = oip_print_double(buf, d);
        ref_shortest(ref, d, REF_DOUBLE, 0);
        bad += !same_text("FP64 subnormal", buf, end, ref);
    }

    for (e = -149; e < 128; e++) {
        f = ldexpf(1.0f, e);
        end = oip_print_float(buf, f);
        ref_shortest(ref, f, REF_FLOAT, 0);
        bad += !same_text("FP32 2^e", buf, end, ref);

        f = nextafterf(f, 0.0f);
        end = oip_print_float(buf, f);
        ref_shortest(ref, f, REF_FLOAT, 0);
        bad += !same_text("FP32 below 2^e", buf, end, ref);
    }

    for (e = -1074; e < 1024; e++) {
        d = ldexp(1.0, e);
        end = oip_print_double(buf, d);
        ref_shortest(ref, d, REF_DOUBLE, 0);
        bad += !same_text("FP64 2^e", buf, end, ref);
    }

    ok(bad == 0, "the lowest 4095 subnormals and every power of two of "
       "FP32 and FP64 print as the reference does");
}


static void
test_half_exhaustive(void)
{
    int       bad16, badbf, nan16, nanbf;
    char      ref[64];
    u_char    buf[64], *e;
    double    d;
    uint32_t  h;
    uint16_t  back;

    bad16 = 0;
    badbf = 0;
    nan16 = 0;
    nanbf = 0;

    for (h = 0; h < 65536; h++) {

        e = oip_print_fp16(buf, (uint16_t) h);
        *e = '\0';
        parse_d((char *) buf, &d);
        back = oip_double_to_fp16(d);

        ref_shortest(ref, oip_fp16_to_double((uint16_t) h), REF_FP16,
                     h & 0x7fff);
        if (!same_text("FP16", buf, e, ref) && bad16++ < 5) {
            diag("FP16 %04x", h);
        }

        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            nan16 += !(isnan(d) && strcmp((char *) buf, "NaN") == 0);

        } else if (back != h && bad16++ < 5) {
            diag("FP16 %04x printed as %s reads back as %04x", h, buf, back);
        }

        e = oip_print_bf16(buf, (uint16_t) h);
        *e = '\0';
        parse_d((char *) buf, &d);
        back = oip_double_to_bf16(d);

        ref_shortest(ref, oip_bf16_to_double((uint16_t) h), REF_BF16,
                     h & 0x7fff);
        if (!same_text("BF16", buf, e, ref) && badbf++ < 5) {
            diag("BF16 %04x", h);
        }

        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) {
            nanbf += !(isnan(d) && strcmp((char *) buf, "NaN") == 0);

        } else if (back != h && badbf++ < 5) {
            diag("BF16 %04x printed as %s reads back as %04x", h, buf, back);
        }
    }

    ok(bad16 == 0 && nan16 == 0,
       "all 65536 FP16 patterns print and read back to the same bits");
    ok(badbf == 0 && nanbf == 0,
       "all 65536 BF16 patterns print and read back to the same bits");
}


/* every pair of neighbours: below, on and above their midpoint */

static void
test_half_rounding(void)
{
    int       bad, tie;
    double    a, b, mid;
    uint16_t  h, even, r;

    bad = 0;

    for (h = 0; h < 0x7bff; h++) {
        a = oip_fp16_to_double(h);
        b = oip_fp16_to_double(h + 1);
        mid = (a + b) / 2;
        even = (h & 1) ? h + 1 : h;

        tie = oip_double_to_fp16(mid) == even
              && oip_double_to_fp16(nextafter(mid, -1.0)) == h
              && oip_double_to_fp16(nextafter(mid, 2.0 * b)) == h + 1
              && oip_double_to_fp16(-mid) == (uint16_t) (even | 0x8000);

        if (!tie && bad++ < 5) {
            diag("FP16 between %04x and %04x: got %04x", h, h + 1,
                 oip_double_to_fp16(mid));
        }
    }

    ok(bad == 0, "FP16 rounds to nearest, ties to even, everywhere");

    /* past the largest finite: 65520 is the midpoint to infinity */
    ok(oip_double_to_fp16(65519.99) == 0x7bff
       && oip_double_to_fp16(65520.0) == 0x7c00
       && oip_double_to_fp16(1e300) == 0x7c00
       && oip_double_to_fp16(ldexp(1.0, -25)) == 0x0000
       && oip_double_to_fp16(nextafter(ldexp(1.0, -25), 1.0)) == 0x0001
       && oip_double_to_fp16(ldexp(3.0, -25)) == 0x0002
       && oip_double_to_fp16(5e-324) == 0x0000,
       "FP16 overflow and underflow edges");

    bad = 0;

    for (h = 0; h < 0x7f7f; h++) {
        a = oip_bf16_to_double(h);
        b = oip_bf16_to_double(h + 1);
        mid = (a + b) / 2;
        even = (h & 1) ? h + 1 : h;

        r = oip_double_to_bf16(mid);

        if ((r != even || oip_double_to_bf16(nextafter(mid, -1.0)) != h
             || oip_double_to_bf16(nextafter(mid, 2.0 * b)) != h + 1)
            && bad++ < 5)
        {
            diag("BF16 between %04x and %04x: got %04x", h, h + 1, r);
        }
    }

    ok(bad == 0, "BF16 rounds to nearest, ties to even, everywhere");

    /* from the double: no double rounding through FP32 */
    ok(oip_double_to_bf16(1.0 + 1.0 / 256 + 1e-12) == 0x3f81,
       "BF16 rounds the double once, not through FP32");
    ok(oip_double_to_bf16(NAN) == 0x7fc0 && oip_double_to_fp16(NAN) == 0x7e00
       && oip_double_to_bf16(-INFINITY) == 0xff80,
       "NaN and infinities");
}


static void
test_print_format(void)
{
    size_t   i;
    u_char   buf[64], *e;

    static const struct {
        double       v;
        const char  *s;
    } cases[] = {
        { 0.0, "0.0" }, { -0.0, "-0.0" }, { 1.0, "1.0" }, { -2.5, "-2.5" },
        { 0.1, "0.1" }, { 100.0, "100.0" }, { 123.456, "123.456" },
        { 1e20, "100000000000000000000.0" }, { 1e21, "1e21" },
        { 1.5e300, "1.5e300" }, { 1e-6, "0.000001" }, { 1e-7, "1e-7" },
        { 1.25e-7, "1.25e-7" }, { 5e-324, "5e-324" },
        { 1.7976931348623157e308, "1.7976931348623157e308" },
        { 9007199254740993.0, "9007199254740992.0" },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        e = oip_print_double(buf, cases[i].v);
        *e = '\0';
        ok(strcmp((char *) buf, cases[i].s) == 0, "%s printed as %s",
           cases[i].s, buf);
    }

    e = oip_print_float(buf, 0.1f);
    *e = '\0';
    ok(strcmp((char *) buf, "0.1") == 0, "FP32 0.1 is \"0.1\", not %s", buf);

    e = oip_print_float(buf, 16777216.0f);
    *e = '\0';
    ok(strcmp((char *) buf, "16777216.0") == 0, "FP32 2^24: %s", buf);
}


static void
test_integers(long scale)
{
    long      i, bad;
    char      want[32];
    u_char    buf[32], *e;
    int64_t   v;
    uint64_t  u, back;
    oip_num_t n;

    bad = 0;

    for (i = 0; i < 100000 * scale; i++) {
        u = rnd() >> (rnd() % 64);
        v = (int64_t) rnd() >> (rnd() % 64);

        e = oip_print_u64(buf, u);
        *e = '\0';
        snprintf(want, sizeof(want), "%llu", (unsigned long long) u);
        bad += strcmp((char *) buf, want) != 0;

        oip_num_scan(buf, e, &n);
        bad += oip_num_u64(&n, &back) != OIP_NUM_OK || back != u;

        e = oip_print_i64(buf, v);
        *e = '\0';
        snprintf(want, sizeof(want), "%lld", (long long) v);
        bad += strcmp((char *) buf, want) != 0;
    }

    ok(bad == 0, "integers print and parse exactly");

    e = oip_print_i64(buf, INT64_MIN);
    *e = '\0';
    ok(strcmp((char *) buf, "-9223372036854775808") == 0, "INT64_MIN");
}


int
main(void)
{
    long         scale;
    const char  *s;

    s = getenv("OIP_NUMBER_SCALE");
    scale = s ? atol(s) : 1;

    test_parse_edges();
    test_parse_random(scale);
    test_parse_halfway(scale);
    test_fast_float_midpoints(scale);
    test_print_roundtrip(scale);
    test_print_edges();
    test_half_exhaustive();
    test_half_rounding();
    test_print_format();
    test_integers(scale);

    return tap_done();
}
