
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Numbers: integers from their digits (never through a double), floats
 * correctly rounded, FP16/BF16 rounded to nearest even from the double
 * (numpy's astype), and printing in the shortest text that reads back
 * to the same bits.
 *
 * Reading is Clinger's fast path, then Eisel and Lemire's algorithm
 * ("Number parsing at a gigabyte per second", 2021; with 19 digits or
 * fewer it needs no fallback: Mushtak and Lemire, 2023), then strtod for
 * the rare long input it cannot decide, given digits and an exponent
 * without a radix character, which every locale reads alike.  Printing is
 * Giulietti's Schubfach ("The Schubfach way to render doubles", 2020).
 * The tables of powers come from oip_tables.py.
 */


#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "oip_number.h"
#include "oip_tables.h"


/* enough significant digits to decide any rounding, then a sticky one */
#define OIP_DIGITS_MAX       800


/* the high 64 bits of a 64 x 64 product, and the low */

#if defined(__SIZEOF_INT128__)

static inline uint64_t
oip_mul128(uint64_t a, uint64_t b, uint64_t *lo)
{
    unsigned __int128  p;

    p = (unsigned __int128) a * b;
    *lo = (uint64_t) p;

    return (uint64_t) (p >> 64);
}

#else

static inline uint64_t
oip_mul128(uint64_t a, uint64_t b, uint64_t *lo)
{
    uint64_t  a0, a1, b0, b1, p00, p01, p10, p11, mid;

    a0 = (uint32_t) a;
    a1 = a >> 32;
    b0 = (uint32_t) b;
    b1 = b >> 32;

    p00 = a0 * b0;
    p01 = a0 * b1;
    p10 = a1 * b0;
    p11 = a1 * b1;

    mid = (p00 >> 32) + (uint32_t) p01 + (uint32_t) p10;
    *lo = (mid << 32) | (uint32_t) p00;

    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

#endif


typedef struct {
    uint64_t               w;          /* first significant digits */
    int                    nd;         /* how many are in w */
    int64_t                e10;        /* value ~ w * 10^e10 */
    int                    inexact;    /* nonzero digits were dropped */
} oip_dec_t;


/* an IEEE binary format, for Eisel-Lemire */

typedef struct {
    int                    mbits;      /* explicit mantissa bits */
    int                    min_exp;    /* minimum_exponent: -bias */
    int                    inf_pow;    /* the biased exponent of inf */
    int                    min_q;      /* below: zero */
    int                    max_q;      /* above: infinity */
    int                    even_min;   /* q where halfway cases exist */
    int                    even_max;
} oip_fmt_t;


static const oip_fmt_t  oip_fmt64 = { 52, -1023, 0x7ff, -342, 308, -4, 23 };
static const oip_fmt_t  oip_fmt32 = { 23, -127, 0xff, -64, 38, -17, 10 };


static void oip_dec_make(const oip_num_t *n, oip_dec_t *d);
static int oip_num_exact(const oip_num_t *n, oip_dec_t *d, double *x);
static int oip_num_text(const oip_num_t *n, char *buf, size_t size);
static uint64_t oip_eisel_lemire(const oip_fmt_t *f, uint64_t w, int64_t q);
static int oip_decide(const oip_fmt_t *f, const oip_dec_t *d,
    uint64_t *bits);
static uint16_t oip_double_to_half(double d, unsigned mbits, unsigned ebits);
static uint8_t *oip_print_special(uint8_t *p, int neg, int inf);
static uint8_t *oip_print_decimal(uint8_t *p, uint64_t f, int e);
static inline uint8_t *oip_schubfach_pick(uint8_t *p, uint64_t vb,
    uint64_t vbl, uint64_t vbr, int out, int k);
static uint8_t *oip_schubfach64(uint8_t *p, uint64_t bits);
static uint8_t *oip_schubfach32(uint8_t *p, uint32_t c, int q, int p_bits,
    int q_min);


static const double  oip_pow10[] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
};

static const float  oip_pow10f[] = {
    1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f
};


static const char  oip_digits2[] =
    "00010203040506070809101112131415161718192021222324252627282930313233"
    "34353637383940414243444546474849505152535455565758596061626364656667"
    "68697071727374757677787980818283848586878889909192939495969798"
    "99";


int
oip_num_u64(const oip_num_t *n, uint64_t *v)
{
    uint64_t       x, d;
    const uint8_t *p, *end;

    if (n->special || n->has_frac || n->has_exp) {
        return OIP_NUM_NOT_INT;
    }

    x = 0;
    p = n->digits;
    end = p + n->ndigits;

    for ( /* void */ ; p < end; p++) {
        d = *p - '0';

        if (x > (UINT64_MAX - d) / 10) {
            return OIP_NUM_RANGE;
        }

        x = x * 10 + d;
    }

    *v = x;

    return OIP_NUM_OK;
}


static void
oip_dec_make(const oip_num_t *n, oip_dec_t *d)
{
    const uint8_t *p, *end;

    d->w = 0;
    d->nd = 0;
    d->e10 = n->exp;
    d->inexact = 0;

    for (p = n->digits, end = p + n->ndigits; p < end; p++) {
        if (d->nd == 0 && *p == '0') {
            continue;
        }

        if (d->nd < 19) {
            d->w = d->w * 10 + (*p - '0');
            d->nd++;

        } else {
            d->e10++;
            d->inexact |= (*p != '0');
        }
    }

    for (p = n->frac, end = p + n->nfrac; p < end; p++) {
        if (d->nd == 0 && *p == '0') {
            d->e10--;
            continue;
        }

        if (d->nd < 19) {
            d->w = d->w * 10 + (*p - '0');
            d->nd++;
            d->e10--;

        } else {
            d->inexact |= (*p != '0');
        }
    }
}


/*
 * The number as "DDDDe±X" for strtod: at most OIP_DIGITS_MAX digits and
 * a sticky 1 if anything nonzero was cut, which keeps the rounding.  No
 * radix character: strtod() reads it by LC_NUMERIC, which a host process
 * may have set, and a locale of the codec's own would be process-wide
 * state, created once and shared by the threads of oip_thread_pool.
 */

static int
oip_num_text(const oip_num_t *n, char *buf, size_t size)
{
    int64_t        point;
    size_t         nd;
    const uint8_t *p, *end;
    int            seen, sticky;

    nd = 0;
    seen = 0;
    sticky = 0;
    point = 0;

    for (p = n->digits, end = p + n->ndigits; p < end; p++) {
        if (!seen && *p == '0') {
            continue;
        }

        seen = 1;
        point++;

        if (nd < OIP_DIGITS_MAX) {
            buf[nd++] = *p;

        } else {
            sticky |= (*p != '0');
        }
    }

    for (p = n->frac, end = p + n->nfrac; p < end; p++) {
        if (!seen && *p == '0') {
            point--;
            continue;
        }

        seen = 1;

        if (nd < OIP_DIGITS_MAX) {
            buf[nd++] = *p;

        } else {
            sticky |= (*p != '0');
        }
    }

    if (!seen) {
        return -1;
    }

    if (sticky) {
        buf[nd++] = '1';
    }

    /* 0.DDDD * 10^(point + exp), with the point moved past the digits */

    snprintf(buf + nd, size - nd, "e%lld",
             (long long) (point + n->exp - (int64_t) nd));

    return 0;
}


/*
 * w * 10^q in the format f, rounded to nearest even: the bits of its
 * absolute value.  Exact for w of 19 digits or fewer.
 */

static uint64_t
oip_eisel_lemire(const oip_fmt_t *f, uint64_t w, int64_t q)
{
    int        lz, upper, shift;
    int64_t    power2;
    uint64_t   m, hi, lo, lo2, mask, hi2;

    if (w == 0 || q < f->min_q) {
        return 0;
    }

    if (q > f->max_q) {
        return (uint64_t) f->inf_pow << f->mbits;
    }

    lz = __builtin_clzll(w);
    w <<= lz;

    /* the product with 5^q, to the precision the format needs */

    hi = oip_mul128(w, oip_pow5[q - OIP_POW5_MIN][0], &lo);

    mask = UINT64_MAX >> (f->mbits + 3);

    if ((hi & mask) == mask) {
        hi2 = oip_mul128(w, oip_pow5[q - OIP_POW5_MIN][1], &lo2);
        lo += hi2;

        if (hi2 > lo) {
            hi++;
        }
    }

    upper = (int) (hi >> 63);
    shift = upper + 64 - f->mbits - 3;
    m = hi >> shift;

    /* floor(log2(10^q)) + 63, then the format's bias */

    power2 = ((((152170 + 65536) * q) >> 16) + 63) + upper - lz - f->min_exp;

    if (power2 <= 0) {
        /* subnormal */

        if (-power2 + 1 >= 64) {
            return 0;
        }

        m >>= -power2 + 1;
        m += m & 1;
        m >>= 1;

        /* a carry into the smallest normal is its right bit pattern */
        return m;
    }

    /* exactly halfway, and the lower one is even: do not round up */

    if (lo <= 1 && q >= f->even_min && q <= f->even_max && (m & 3) == 1
        && (m << shift) == hi)
    {
        m &= ~(uint64_t) 1;
    }

    m += m & 1;
    m >>= 1;

    if (m >= ((uint64_t) 2 << f->mbits)) {
        m = (uint64_t) 1 << f->mbits;
        power2++;
    }

    m &= ~((uint64_t) 1 << f->mbits);

    if (power2 >= f->inf_pow) {
        return (uint64_t) f->inf_pow << f->mbits;
    }

    return ((uint64_t) power2 << f->mbits) | m;
}


/*
 * With nonzero digits cut after the 19th, the value lies between w and
 * w + 1 ulp of the last digit kept: when both round alike, that is it.
 */

static int
oip_decide(const oip_fmt_t *f, const oip_dec_t *d, uint64_t *bits)
{
    uint64_t  b;

    b = oip_eisel_lemire(f, d->w, d->e10);

    if (d->inexact && oip_eisel_lemire(f, d->w + 1, d->e10) != b) {
        return -1;
    }

    *bits = b;

    return 0;
}


/* the fast path's slow cases: Eisel-Lemire on w * 10^e10 */

int
oip_fast_decide(uint64_t w, int64_t e10, int inexact, int bits64,
    uint64_t *bits)
{
    oip_dec_t  dec;

    dec.w = w;
    dec.e10 = e10;
    dec.inexact = inexact;

    return oip_decide(bits64 ? &oip_fmt64 : &oip_fmt32, &dec, bits);
}


/*
 * The values that no format rounds: NaN, the infinities and the zeros.
 * Returns 1 with *x set, or 0 with the decimal in d.
 */

static int
oip_num_exact(const oip_num_t *n, oip_dec_t *d, double *x)
{
    if (n->special) {
        *x = (n->special == OIP_NUM_NAN) ? NAN : INFINITY;

    } else {
        oip_dec_make(n, d);

        if (d->w != 0 || d->inexact) {
            return 0;
        }

        *x = 0.0;
    }

    *x = n->neg ? -*x : *x;

    return 1;
}


int
oip_num_double(const oip_num_t *n, double *v)
{
    double     x;
    uint64_t   bits;
    oip_dec_t  d;
    char       buf[OIP_DIGITS_MAX + 48];

    if (oip_num_exact(n, &d, v)) {
        return OIP_NUM_OK;
    }

    /* Clinger's fast path: both operands exact, one rounding */

    if (!d.inexact && d.w <= (1ULL << 53) && d.e10 >= -22 && d.e10 <= 22) {
        x = (d.e10 >= 0) ? (double) d.w * oip_pow10[d.e10]
                         : (double) d.w / oip_pow10[-d.e10];

    } else if (oip_decide(&oip_fmt64, &d, &bits) == 0) {
        memcpy(&x, &bits, sizeof(double));

    } else if (oip_num_text(n, buf, sizeof(buf)) != 0) {
        x = 0.0;

    } else {
        x = fabs(strtod(buf, NULL));
    }

    *v = n->neg ? -x : x;

    return OIP_NUM_OK;
}


int
oip_num_float(const oip_num_t *n, float *v)
{
    float      x;
    double     y;
    uint32_t   b32;
    uint64_t   bits;
    oip_dec_t  d;
    char       buf[OIP_DIGITS_MAX + 48];

    if (oip_num_exact(n, &d, &y)) {
        *v = (float) y;     /* exact: NaN, an infinity or a zero */
        return OIP_NUM_OK;
    }

    if (!d.inexact && d.w <= (1ULL << 24) && d.e10 >= -10 && d.e10 <= 10) {
        x = (d.e10 >= 0) ? (float) d.w * oip_pow10f[d.e10]
                         : (float) d.w / oip_pow10f[-d.e10];

    } else if (oip_decide(&oip_fmt32, &d, &bits) == 0) {
        b32 = (uint32_t) bits;
        memcpy(&x, &b32, sizeof(float));

    } else if (oip_num_text(n, buf, sizeof(buf)) != 0) {
        x = 0.0f;

    } else {
        x = fabsf(strtof(buf, NULL));
    }

    *v = n->neg ? -x : x;

    return OIP_NUM_OK;
}


/*
 * A double to a 16-bit float with mbits of mantissa and ebits of
 * exponent (FP16: 10, 5; BF16: 7, 8), rounding once, to nearest even.
 */

static uint16_t
oip_double_to_half(double d, unsigned mbits, unsigned ebits)
{
    int       e, bias;
    uint16_t  sign, inf;
    uint64_t  b, sig, keep, half;
    unsigned  shift;

    memcpy(&b, &d, sizeof(b));

    bias = (1 << (ebits - 1)) - 1;
    inf = (uint16_t) (((1u << ebits) - 1) << mbits);
    sign = (uint16_t) ((b >> 63) << (mbits + ebits));

    e = (int) ((b >> 52) & 0x7ff);
    sig = b & ((1ULL << 52) - 1);

    if (e == 0x7ff) {
        return sign | inf | (sig ? (uint16_t) (1u << (mbits - 1)) : 0);
    }

    if (e == 0) {
        return sign;    /* double subnormals are far below any half */
    }

    sig |= 1ULL << 52;
    e -= 1023;

    if (e > bias) {
        return sign | inf;
    }

    if (e >= 1 - bias) {
        shift = 52 - mbits;

    } else {
        /* a subnormal half: count units of 2^(1 - bias - mbits) */
        shift = 52 - mbits + (unsigned) (1 - bias - e);

        if (shift > 60) {
            return sign;
        }
    }

    /* to nearest, ties to even, with no branch: the rest is random */

    half = 1ULL << (shift - 1);
    keep = (sig + (half - 1) + ((sig >> shift) & 1)) >> shift;

    if (e < 1 - bias) {
        /* a carry into the smallest normal is its right bit pattern */
        return sign | (uint16_t) keep;
    }

    /* keep holds the implicit bit; a carry out of it bumps the exponent */

    return sign | (uint16_t) (((uint64_t) (e + bias) << mbits)
                              + keep - (1ULL << mbits));
}


uint16_t
oip_double_to_fp16(double d)
{
    return oip_double_to_half(d, 10, 5);
}


uint16_t
oip_double_to_bf16(double d)
{
    return oip_double_to_half(d, 7, 8);
}


uint8_t *
oip_print_u64(uint8_t *p, uint64_t v)
{
    int      n;
    uint8_t  tmp[20], *t;

    t = tmp + sizeof(tmp);

    while (v >= 100) {
        n = (int) (v % 100) * 2;
        v /= 100;
        *--t = (uint8_t) oip_digits2[n + 1];
        *--t = (uint8_t) oip_digits2[n];
    }

    if (v >= 10) {
        n = (int) v * 2;
        *--t = (uint8_t) oip_digits2[n + 1];
        *--t = (uint8_t) oip_digits2[n];

    } else {
        *--t = (uint8_t) ('0' + v);
    }

    n = (int) (tmp + sizeof(tmp) - t);
    memcpy(p, t, n);

    return p + n;
}


uint8_t *
oip_print_i64(uint8_t *p, int64_t v)
{
    uint64_t  neg;

    neg = (uint64_t) v >> 63;

    *p = '-';

    return oip_print_u64(p + neg, ((uint64_t) v ^ (0 - neg)) + neg);
}


static uint8_t *
oip_print_special(uint8_t *p, int neg, int inf)
{
    if (!inf) {
        memcpy(p, "NaN", 3);
        return p + 3;
    }

    if (neg) {
        *p++ = '-';
    }

    memcpy(p, "Infinity", 8);

    return p + 8;
}


static const uint8_t  oip_zeros[] = "000000000000000000000000";


/*
 * The eight decimal digits of v < 10^8, one a byte, the first in the
 * lowest byte, with no division: v split in halves of four digits,
 * those in pairs, the pairs in digits, all lanes at once (quotients by
 * 100 and 10 as multiplications that are exact in these ranges).
 */

static inline uint64_t
oip_8digits(uint32_t v)
{
    uint64_t  x, hi, y;

    x = (v / 10000) | ((uint64_t) (v % 10000) << 32);
    hi = ((x * 10486) >> 20) & 0x0000007f0000007fULL;
    y = hi | ((x - hi * 100) << 16);
    hi = ((y * 103) >> 10) & 0x000f000f000f000fULL;

    return hi | ((y - hi * 10) << 8);
}


static inline void
oip_store_digits(uint8_t *p, uint64_t w)
{
    w += 0x3030303030303030ULL;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif

    memcpy(p, &w, 8);
}


/*
 * f * 10^e, f > 0, in the form JSON readers and people expect: fixed
 * notation from 1e-6 up to 1e21 with ".0" on integral values, exponent
 * notation outside it.  The digits are written once, 24 places wide,
 * their leading and trailing zeros counted from the words' zero bytes;
 * then placed with copies of a fixed size: the caller reserved
 * OIP_NUM_MAX bytes, and what lands past the number is overwritten by
 * what follows it.
 */

static uint8_t *
oip_print_decimal(uint8_t *p, uint64_t f, int e)
{
    int       nd, n, lz, tz;
    uint64_t  w0, w1, w2;
    uint8_t   buf[64], *d;

    w0 = 0;
    w1 = 0;

    if (f >= 100000000) {
        if (f >= 10000000000000000ULL) {
            w0 = oip_8digits((uint32_t) (f / 10000000000000000ULL));
            f %= 10000000000000000ULL;
        }

        w1 = oip_8digits((uint32_t) (f / 100000000));
        f %= 100000000;
    }

    w2 = oip_8digits((uint32_t) f);

    lz = w0 ? __builtin_ctzll(w0) >> 3
            : w1 ? 8 + (__builtin_ctzll(w1) >> 3)
                 : 16 + (__builtin_ctzll(w2) >> 3);

    tz = w2 ? __builtin_clzll(w2) >> 3
            : w1 ? 8 + (__builtin_clzll(w1) >> 3)
                 : 16 + (__builtin_clzll(w0) >> 3);

    nd = 24 - lz - tz;
    e += tz;

    /* the value is 0.DIGITS * 10^n */

    n = e + nd;

    memset(buf, '0', 8);
    oip_store_digits(buf + 8, w0);
    oip_store_digits(buf + 16, w1);
    oip_store_digits(buf + 24, w2);
    memset(buf + 32, '0', 32);

    d = buf + 8 + lz;

    if (n > 21 || n <= -6) {
        p[0] = d[0];
        p[1] = '.';
        memcpy(p + 2, d + 1, 24);

        p += (nd > 1) ? nd + 1 : 1;
        *p++ = 'e';

        return oip_print_i64(p, n - 1);
    }

    if (n <= 0) {
        /* 0.000DIGITS */
        memcpy(p, "0.00000", 8);
        memcpy(p + 2 - n, d, 24);

        return p + 2 - n + nd;
    }

    if (n < nd) {
        memcpy(p, d, 24);
        memcpy(p + n + 1, d + n, 24);
        p[n] = '.';

        return p + nd + 1;
    }

    /* integral: the digits, zeros up to the point, ".0" */

    memcpy(p, d, 24);
    memcpy(p + nd, oip_zeros, 24);
    p += n;
    *p++ = '.';
    *p++ = '0';

    return p;
}


/* Schubfach's floor(log10(2^e)), floor(log10(3/4 2^e)), floor(log2(10^e)) */

#define oip_flog10pow2(e)                                                     \
    ((int) (((int64_t) (e) * 661971961083LL) >> 41))
#define oip_flog10threequarters(e)                                            \
    ((int) (((int64_t) (e) * 661971961083LL - 274743187321LL) >> 41))
#define oip_flog2pow10(e)                                                     \
    ((int) (((int64_t) (e) * 913124641741LL) >> 38))


/* round to odd of g * cp / 2^127, g = g1 2^63 + g0 */

static inline uint64_t
oip_rop64(uint64_t g1, uint64_t g0, uint64_t cp)
{
    uint64_t  x0, x1, y0, y1, z, vbp;

    x1 = oip_mul128(g0, cp, &x0);
    y1 = oip_mul128(g1, cp, &y0);
    z = (y0 >> 1) + x1;
    vbp = y1 + (z >> 63);

    return vbp | (((z & 0x7fffffffffffffffULL) + 0x7fffffffffffffffULL)
                  >> 63);
}


static inline uint32_t
oip_rop32(uint64_t g, uint64_t cp)
{
    uint64_t  x0, x1;

    x1 = oip_mul128(g, cp, &x0);

    return (uint32_t) ((x1 >> 31) | (((x1 & 0xffffffff) + 0xffffffff)
                                     >> 32));
}


/*
 * Schubfach's last step, for both widths: the shortest decimal whose
 * scaled value 4 * d lies in [vbl, vbr] (out: the ends count), one
 * digit fewer first, else the nearer of s and s + 1, ties to even.
 * From s >= 10 rather than Schubfach's 100: subnormals get their
 * shortest too; the interval is narrower than 10^(k+1), so there is at
 * most one such candidate.
 */

static inline uint8_t *
oip_schubfach_pick(uint8_t *p, uint64_t vb, uint64_t vbl, uint64_t vbr,
    int out, int k)
{
    int       upin, wpin, uin, win;
    int64_t   cmp;
    uint64_t  s, t, sp10, tp10;

    s = vb >> 2;

    if (s >= 10) {
        sp10 = 10 * (s / 10);
        tp10 = sp10 + 10;
        upin = vbl + out <= sp10 << 2;
        wpin = (tp10 << 2) + out <= vbr;

        if (upin != wpin) {
            return oip_print_decimal(p, upin ? sp10 : tp10, k);
        }
    }

    t = s + 1;
    uin = vbl + out <= s << 2;
    win = (t << 2) + out <= vbr;

    if (uin != win) {
        return oip_print_decimal(p, uin ? s : t, k);
    }

    cmp = (int64_t) (vb - ((s + t) << 1));

    return oip_print_decimal(p, (cmp < 0 || (cmp == 0 && (s & 1) == 0))
                                ? s : t, k);
}


/* the shortest decimal that reads back to the double's bits */

static uint8_t *
oip_schubfach64(uint8_t *p, uint64_t bits)
{
    int       q, bq, k, h, out, mq;
    uint64_t  t, c, cb, cbl, cbr, vb, vbl, vbr;

    t = bits & ((1ULL << 52) - 1);
    bq = (int) (bits >> 52) & 0x7ff;


    if (bq != 0) {
        mq = 1075 - bq;
        c = (1ULL << 52) | t;

        /* an integer below 2^53: its digits are the answer */

        if (mq > 0 && mq < 53 && ((c >> mq) << mq) == c) {
            return oip_print_decimal(p, c >> mq, 0);
        }

        q = -mq;

    } else {
        /*
         * subnormal; Schubfach scales the tiniest by 10 here, for Java's
         * "at least two digits" (4.9E-324): a narrower interval than the
         * value's, and a longer answer than the shortest (5e-324)
         */

        q = -1074;
        c = t;
    }

    out = (int) (c & 1);
    cb = c << 2;
    cbr = cb + 2;

    if (c != (1ULL << 52) || q == -1074) {
        cbl = cb - 2;
        k = oip_flog10pow2(q);

    } else {
        /* irregular spacing below a power of two */
        cbl = cb - 1;
        k = oip_flog10threequarters(q);
    }

    h = q + oip_flog2pow10(-k) + 2;

    vb = oip_rop64(oip_g[k - OIP_G_MIN][0], oip_g[k - OIP_G_MIN][1],
                   cb << h);
    vbl = oip_rop64(oip_g[k - OIP_G_MIN][0], oip_g[k - OIP_G_MIN][1],
                    cbl << h);
    vbr = oip_rop64(oip_g[k - OIP_G_MIN][0], oip_g[k - OIP_G_MIN][1],
                    cbr << h);

    return oip_schubfach_pick(p, vb, vbl, vbr, out, k);
}


/*
 * The same for a value c 2^q of a format with p_bits of precision and a
 * smallest exponent q_min: FP32 (24, -149), FP16 (11, -24), BF16 (8,
 * -133).  FP32's 64-bit arithmetic suffices for all three; the unit
 * tests check every FP16 and BF16 value.
 */

static uint8_t *
oip_schubfach32(uint8_t *p, uint32_t c, int q, int p_bits, int q_min)
{
    int       k, h, out, mq;
    uint32_t  c_min, vb, vbl, vbr;
    uint64_t  cb, cbl, cbr, g;

    c_min = 1u << (p_bits - 1);

    /* no scaling of the tiniest subnormals: see oip_schubfach64() */

    if (c >= c_min) {
        mq = -q;

        if (mq > 0 && mq < p_bits && ((c >> mq) << mq) == c) {
            return oip_print_decimal(p, c >> mq, 0);
        }
    }

    out = (int) (c & 1);
    cb = (uint64_t) c << 2;
    cbr = cb + 2;

    if (c != c_min || q == q_min) {
        cbl = cb - 2;
        k = oip_flog10pow2(q);

    } else {
        cbl = cb - 1;
        k = oip_flog10threequarters(q);
    }

    h = q + oip_flog2pow10(-k) + 33;
    g = oip_g[k - OIP_G_MIN][0] + 1;

    vb = oip_rop32(g, cb << h);
    vbl = oip_rop32(g, cbl << h);
    vbr = oip_rop32(g, cbr << h);

    return oip_schubfach_pick(p, vb, vbl, vbr, out, k);
}


uint8_t *
oip_print_double(uint8_t *p, double v)
{
    uint64_t  bits;

    memcpy(&bits, &v, sizeof(double));

    if (((bits >> 52) & 0x7ff) == 0x7ff) {
        return oip_print_special(p, (int) (bits >> 63),
                                 (bits & ((1ULL << 52) - 1)) == 0);
    }

    /* no branch on the sign: tensors have as many of each */

    *p = '-';
    p += bits >> 63;

    if ((bits & 0x7fffffffffffffffULL) == 0) {
        memcpy(p, "0.0", 3);
        return p + 3;
    }

    return oip_schubfach64(p, bits & 0x7fffffffffffffffULL);
}


/* bits of a binary format with ebits of exponent and mbits of mantissa */

static uint8_t *
oip_print_small(uint8_t *p, uint32_t bits, int mbits, int ebits, int q_min)
{
    int       be;
    uint32_t  t, emask;

    emask = (1u << ebits) - 1;
    be = (int) (bits >> mbits) & emask;
    t = bits & ((1u << mbits) - 1);

    if (be == (int) emask) {
        return oip_print_special(p, (int) (bits >> (mbits + ebits)), t == 0);
    }

    *p = '-';
    p += bits >> (mbits + ebits);

    if (be == 0 && t == 0) {
        memcpy(p, "0.0", 3);
        return p + 3;
    }

    if (be == 0) {
        return oip_schubfach32(p, t, q_min, mbits + 1, q_min);
    }

    return oip_schubfach32(p, t | (1u << mbits), be - 1 + q_min, mbits + 1,
                           q_min);
}


uint8_t *
oip_print_float(uint8_t *p, float v)
{
    uint32_t  bits;

    memcpy(&bits, &v, sizeof(float));

    return oip_print_small(p, bits, 23, 8, -149);
}


uint8_t *
oip_print_fp16(uint8_t *p, uint16_t h)
{
    return oip_print_small(p, h, 10, 5, -24);
}


uint8_t *
oip_print_bf16(uint8_t *p, uint16_t h)
{
    return oip_print_small(p, h, 7, 8, -133);
}
