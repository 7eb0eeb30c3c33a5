
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Numbers: integers from their digits (never through a double), floats
 * correctly rounded, FP16/BF16 rounded to nearest even from the double
 * (numpy's astype), and printing in the shortest text that reads back
 * to the same bits.
 */


#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "oip_internal.h"


/* enough significant digits to decide any rounding, then a sticky one */
#define OIP_DIGITS_MAX       800


typedef struct {
    uint64_t               w;          /* first significant digits */
    int                    nd;         /* how many are in w */
    int64_t                e10;        /* value ~ w * 10^e10 */
    int                    inexact;    /* nonzero digits were dropped */
} oip_dec_t;


static void oip_dec_make(const oip_num_t *n, oip_dec_t *d);
static int oip_num_text(const oip_num_t *n, char *buf, size_t size);
static locale_t oip_c_locale(void);
static double oip_strtod(const char *s);
static float oip_strtof(const char *s);
static uint16_t oip_double_to_half(double d, unsigned mbits, unsigned ebits);
static double oip_half_to_double(uint16_t h, unsigned mbits,
    unsigned ebits);
static u_char *oip_print_digits(u_char *p, const char *digits, int nd,
    int n);
static u_char *oip_print_shortest(u_char *p, double v, int maxp, int kind,
    uint16_t bits);


static const double  oip_pow10[] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
};

static const float  oip_pow10f[] = {
    1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f
};


int
oip_num_u64(const oip_num_t *n, uint64_t *v)
{
    uint64_t       x, d;
    const u_char  *p, *end;

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
    const u_char  *p, *end;

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
 * The number as "0.DDDDe±X" for strtod: at most OIP_DIGITS_MAX digits
 * and a sticky 1 if anything nonzero was cut, which keeps the rounding.
 */

static int
oip_num_text(const oip_num_t *n, char *buf, size_t size)
{
    int64_t        point;
    size_t         nd;
    const u_char  *p, *end;
    int            seen, sticky;

    nd = 0;
    seen = 0;
    sticky = 0;
    point = 0;

    buf[nd++] = '0';
    buf[nd++] = '.';

    for (p = n->digits, end = p + n->ndigits; p < end; p++) {
        if (!seen && *p == '0') {
            continue;
        }

        seen = 1;
        point++;

        if (nd < OIP_DIGITS_MAX + 2) {
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

        if (nd < OIP_DIGITS_MAX + 2) {
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

    snprintf(buf + nd, size - nd, "e%lld", (long long) (point + n->exp));

    return 0;
}


static locale_t
oip_c_locale(void)
{
    static locale_t  loc;

    /* strtod() obeys LC_NUMERIC; a host process may have set it */

    if (loc == (locale_t) 0) {
        loc = newlocale(LC_ALL_MASK, "C", (locale_t) 0);
    }

    return loc;
}


static double
oip_strtod(const char *s)
{
    locale_t  loc;

    loc = oip_c_locale();

    return loc ? strtod_l(s, NULL, loc) : strtod(s, NULL);
}


static float
oip_strtof(const char *s)
{
    locale_t  loc;

    loc = oip_c_locale();

    return loc ? strtof_l(s, NULL, loc) : strtof(s, NULL);
}


int
oip_num_double(const oip_num_t *n, double *v)
{
    double     x;
    uint64_t   w;
    oip_dec_t  d;
    char       buf[OIP_DIGITS_MAX + 48];

    if (n->special) {
        x = (n->special == OIP_NUM_NAN) ? NAN : INFINITY;
        *v = n->neg ? -x : x;
        return OIP_NUM_OK;
    }

    oip_dec_make(n, &d);

    if (d.w == 0 && !d.inexact) {
        *v = n->neg ? -0.0 : 0.0;
        return OIP_NUM_OK;
    }

    /* Clinger's fast path: both operands exact, one rounding */

    if (!d.inexact && d.w <= (1ULL << 53)) {

        if (d.e10 >= 0 && d.e10 <= 22) {
            x = (double) d.w * oip_pow10[d.e10];
            goto done;
        }

        if (d.e10 < 0 && d.e10 >= -22) {
            x = (double) d.w / oip_pow10[-d.e10];
            goto done;
        }

        if (d.e10 > 22 && d.e10 <= 22 + 15) {
            w = d.w;

            for (d.e10 -= 22; d.e10 > 0 && w <= (1ULL << 53); d.e10--) {
                w *= 10;
            }

            if (w <= (1ULL << 53)) {
                x = (double) w * 1e22;
                goto done;
            }
        }
    }

    if (oip_num_text(n, buf, sizeof(buf)) != 0) {
        x = 0.0;

    } else {
        x = oip_strtod(buf);
    }

done:

    *v = n->neg ? -x : x;

    return OIP_NUM_OK;
}


int
oip_num_float(const oip_num_t *n, float *v)
{
    float      x;
    oip_dec_t  d;
    char       buf[OIP_DIGITS_MAX + 48];

    if (n->special) {
        x = (n->special == OIP_NUM_NAN) ? NAN : INFINITY;
        *v = n->neg ? -x : x;
        return OIP_NUM_OK;
    }

    oip_dec_make(n, &d);

    if (d.w == 0 && !d.inexact) {
        *v = n->neg ? -0.0f : 0.0f;
        return OIP_NUM_OK;
    }

    if (!d.inexact && d.w <= (1ULL << 24) && d.e10 >= -10 && d.e10 <= 10) {
        x = (d.e10 >= 0) ? (float) d.w * oip_pow10f[d.e10]
                         : (float) d.w / oip_pow10f[-d.e10];

    } else if (oip_num_text(n, buf, sizeof(buf)) != 0) {
        x = 0.0f;

    } else {
        x = oip_strtof(buf);
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
    uint64_t  b, sig, keep, rem, half;
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

    keep = sig >> shift;
    rem = sig & ((1ULL << shift) - 1);
    half = 1ULL << (shift - 1);

    if (rem > half || (rem == half && (keep & 1))) {
        keep++;
    }

    if (e < 1 - bias) {
        /* a carry into the smallest normal is its right bit pattern */
        return sign | (uint16_t) keep;
    }

    /* keep holds the implicit bit; a carry out of it bumps the exponent */

    return sign | (uint16_t) (((uint64_t) (e + bias) << mbits)
                              + keep - (1ULL << mbits));
}


static double
oip_half_to_double(uint16_t h, unsigned mbits, unsigned ebits)
{
    int       e, bias;
    double    v;
    unsigned  m, emask;

    bias = (1 << (ebits - 1)) - 1;
    emask = (1u << ebits) - 1;

    e = (h >> mbits) & emask;
    m = h & ((1u << mbits) - 1);

    if (e == (int) emask) {
        v = m ? NAN : INFINITY;

    } else if (e == 0) {
        v = ldexp((double) m, 1 - bias - (int) mbits);

    } else {
        v = ldexp((double) (m | (1u << mbits)), e - bias - (int) mbits);
    }

    return (h >> (mbits + ebits)) ? -v : v;
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


double
oip_fp16_to_double(uint16_t h)
{
    return oip_half_to_double(h, 10, 5);
}


double
oip_bf16_to_double(uint16_t h)
{
    return oip_half_to_double(h, 7, 8);
}


u_char *
oip_print_u64(u_char *p, uint64_t v)
{
    u_char   tmp[20], *t;

    t = tmp + sizeof(tmp);

    do {
        *--t = (u_char) ('0' + v % 10);
        v /= 10;
    } while (v);

    memcpy(p, t, tmp + sizeof(tmp) - t);

    return p + (tmp + sizeof(tmp) - t);
}


u_char *
oip_print_i64(u_char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return oip_print_u64(p, (uint64_t) 0 - (uint64_t) v);
    }

    return oip_print_u64(p, (uint64_t) v);
}


/*
 * Shortest digits (nd of them, the value being 0.DIGITS * 10^n) in the
 * form JSON readers and people expect: fixed notation from 1e-6 up to
 * 1e21 with ".0" on integral values, exponential notation outside it.
 */

static u_char *
oip_print_digits(u_char *p, const char *digits, int nd, int n)
{
    int  i;

    if (n > 21 || n <= -6) {
        *p++ = (u_char) digits[0];

        if (nd > 1) {
            *p++ = '.';
            memcpy(p, digits + 1, nd - 1);
            p += nd - 1;
        }

        *p++ = 'e';
        return oip_print_i64(p, n - 1);
    }

    if (n <= 0) {
        *p++ = '0';
        *p++ = '.';

        for (i = 0; i < -n; i++) {
            *p++ = '0';
        }

        memcpy(p, digits, nd);
        return p + nd;
    }

    if (nd <= n) {
        memcpy(p, digits, nd);
        p += nd;

        for (i = nd; i < n; i++) {
            *p++ = '0';
        }

        *p++ = '.';
        *p++ = '0';

        return p;
    }

    memcpy(p, digits, n);
    p += n;
    *p++ = '.';
    memcpy(p, digits + n, nd - n);

    return p + nd - n;
}


#define OIP_KIND_DOUBLE      0
#define OIP_KIND_FLOAT       1
#define OIP_KIND_FP16        2
#define OIP_KIND_BF16        3


/*
 * Tries 1, 2, ... significant digits until the text reads back to the
 * same bits, as this codec reads numbers.
 */

static u_char *
oip_print_shortest(u_char *p, double v, int maxp, int kind, uint16_t bits)
{
    int     prec, nd, e;
    char    buf[40], digits[24], *s;
    float   f;

    if (isnan(v)) {
        memcpy(p, "NaN", 3);
        return p + 3;
    }

    if (isinf(v)) {
        if (v < 0) {
            memcpy(p, "-Infinity", 9);
            return p + 9;
        }

        memcpy(p, "Infinity", 8);
        return p + 8;
    }

    if (signbit(v)) {
        *p++ = '-';
        v = -v;
    }

    if (v == 0.0) {
        memcpy(p, "0.0", 3);
        return p + 3;
    }

    for (prec = 1; prec <= maxp; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);

        if (prec == maxp) {
            break;
        }

        switch (kind) {

        case OIP_KIND_FLOAT:
            f = oip_strtof(buf);
            if ((double) f == v) {
                goto found;
            }
            break;

        case OIP_KIND_FP16:
            if ((oip_double_to_fp16(oip_strtod(buf)) & 0x7fff) == bits) {
                goto found;
            }
            break;

        case OIP_KIND_BF16:
            if ((oip_double_to_bf16(oip_strtod(buf)) & 0x7fff) == bits) {
                goto found;
            }
            break;

        default:
            if (oip_strtod(buf) == v) {
                goto found;
            }
        }
    }

found:

    /* buf is "D.DDDDe±X" */

    nd = 0;
    s = buf;

    for ( /* void */ ; *s != 'e'; s++) {
        if (*s != '.') {
            digits[nd++] = *s;
        }
    }

    e = atoi(s + 1);

    while (nd > 1 && digits[nd - 1] == '0') {
        nd--;
    }

    return oip_print_digits(p, digits, nd, e + 1);
}


u_char *
oip_print_double(u_char *p, double v)
{
    return oip_print_shortest(p, v, 17, OIP_KIND_DOUBLE, 0);
}


u_char *
oip_print_float(u_char *p, float v)
{
    return oip_print_shortest(p, v, 9, OIP_KIND_FLOAT, 0);
}


u_char *
oip_print_fp16(u_char *p, uint16_t h)
{
    return oip_print_shortest(p, oip_fp16_to_double(h), 5, OIP_KIND_FP16,
                              h & 0x7fff);
}


u_char *
oip_print_bf16(u_char *p, uint16_t h)
{
    return oip_print_shortest(p, oip_bf16_to_double(h), 9, OIP_KIND_BF16,
                              h & 0x7fff);
}
