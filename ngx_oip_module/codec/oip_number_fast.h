
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The hot path of JSON numbers to binary, inline where the data walkers
 * call it: a number scanned in one pass, eight digits at a time, and
 * turned into its bits with Clinger's fast path; the rare rest goes to
 * oip_fast_decide() (Eisel-Lemire) in oip_number.c.
 */


#ifndef _OIP_NUMBER_FAST_H_INCLUDED_
#define _OIP_NUMBER_FAST_H_INCLUDED_


#include "oip_number.h"


/* eight ASCII digits at once: the load is little-endian */

static inline uint32_t
oip_parse_8digits(uint64_t v)
{
    v -= 0x3030303030303030ULL;
    v = v * 10 + (v >> 8);
    v = ((v & 0x000000ff000000ffULL) * 0x000f424000000064ULL
         + ((v >> 16) & 0x000000ff000000ffULL) * 0x0000271000000001ULL)
        >> 32;

    return (uint32_t) v;
}


static inline uint64_t
oip_load8(const uint8_t *p)
{
    uint64_t  v;

    memcpy(&v, p, 8);

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif

    return v;
}


static const double  oip_fast_pow10[] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
};


static const uint64_t  oip_pow10u[] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL,
    10000000ULL, 100000000ULL
};


/*
 * How many ASCII digits the 8 bytes at p start with, and their value,
 * with no branch per digit: the first byte that is not a digit found
 * in the word at once, the digits moved up with '0's in front of them.
 */

static inline int
oip_digit_run(const uint8_t *p, uint64_t *val)
{
    int       n;
    uint64_t  v, x, mask;

    v = oip_load8(p);

    /* bytes '0'..'9' become 0..9; anything else has its top bit set */

    x = v ^ 0x3030303030303030ULL;
    mask = ((x + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;

    n = mask ? __builtin_ctzll(mask) >> 3 : 8;

    if (n == 0) {
        *val = 0;
        return 0;
    }

    if (n < 8) {
        v = (v << (8 * (8 - n))) | (0x3030303030303030ULL >> (8 * n));
    }

    *val = oip_parse_8digits(v);

    return n;
}


/*
 * Digits from p in runs of up to 8, while 19 still fit in *w (*nd of
 * them so far): where they stop.  A run shorter than 8 stopped at
 * something else than a digit.
 */

static inline __attribute__((always_inline)) const uint8_t *
oip_digit_runs(const uint8_t *p, const uint8_t *end, uint64_t *w, int *nd)
{
    int       n;
    uint64_t  run;

    while (end - p >= 8 && *nd <= 11) {
        n = oip_digit_run(p, &run);
        *w = *w * oip_pow10u[n] + run;
        *nd += n;
        p += n;

        if (n < 8) {
            break;
        }
    }

    return p;
}


/*
 * The common number in one pass: an optional '-', digits, a fraction,
 * an exponent, and a delimiter after it.  NULL for anything else (the
 * tokens, bad grammar): the caller's general path says what is wrong.
 */

static inline __attribute__((always_inline)) const uint8_t *
oip_fast_decimal(const uint8_t *p, const uint8_t *end, oip_fast_t *d)
{
    int             neg, n;
    int64_t         e, ex;
    uint64_t        w;
    int             nd, inexact, eneg;
    uint8_t         c;
    const uint8_t  *q;

    neg = 0;
    w = 0;
    nd = 0;
    e = 0;
    inexact = 0;

    /* no branch on the sign: half the values of a tensor may have one */

    neg = (*p == '-');
    p += neg;

    if (p == end) {
        return NULL;
    }

    if (*p == '0') {
        p++;

    } else if (end - p >= 2 && p[1] == '.' && (uint8_t) (*p - '0') <= 9) {
        /* the usual tensor value has one digit before its point */
        w = *p - '0';
        nd = 1;
        p++;

    } else if (*p >= '1' && *p <= '9') {
        p = oip_digit_runs(p, end, &w, &nd);

        for ( /* void */ ; p < end && (c = *p - '0') <= 9; p++) {
            if (nd < 19) {
                w = w * 10 + c;
                nd++;

            } else {
                e++;
                inexact |= (c != 0);
            }
        }

    } else {
        return NULL;
    }

    if (p < end && *p == '.') {
        p++;

        if (p == end || (uint8_t) (*p - '0') > 9) {
            return NULL;
        }

        if (nd == 0) {
            /* leading zeros of 0.000x are not significant */
            while (p < end && *p == '0') {
                p++;
                e--;
            }
        }

        q = oip_digit_runs(p, end, &w, &nd);
        n = (int) (q - p);
        e -= n;
        p = q;

        if (n & 7) {
            /* a short run: it stopped at something else than a digit */
            goto fraction_done;
        }

        for ( /* void */ ; p < end && (c = *p - '0') <= 9; p++) {
            if (nd < 19) {
                w = w * 10 + c;
                nd++;
                e--;

            } else {
                inexact |= (c != 0);
            }
        }
    }

fraction_done:


    if (p < end && *p == ',') {
        /* the usual end: no exponent, and a delimiter */
        goto done;
    }

    if (p < end && (*p | 0x20) == 'e') {
        p++;
        eneg = 0;

        if (p < end && (*p == '+' || *p == '-')) {
            eneg = (*p == '-');
            p++;
        }

        if (p == end || (uint8_t) (*p - '0') > 9) {
            return NULL;
        }

        for (ex = 0; p < end && (c = *p - '0') <= 9; p++) {
            if (ex < 1000000000000LL) {
                ex = ex * 10 + c;
            }
        }

        e += eneg ? -ex : ex;
    }

    if (p < end && oip_json_num_tail[*p]) {
        return NULL;
    }

done:

    d->w = w;
    d->e10 = e;
    d->neg = neg;
    d->inexact = inexact;

    return p;
}


/*
 * A plain JSON integer, exactly: its magnitude and sign.  NULL for
 * anything else, or a magnitude past 2^64 - 1.
 */

static inline __attribute__((always_inline)) const uint8_t *
oip_fast_integer(const uint8_t *p, const uint8_t *end, uint64_t *mag,
    int *neg)
{
    uint64_t  w;
    uint8_t   c;
    int       nd;

    *neg = (*p == '-');
    p += *neg;

    if (p == end) {
        return NULL;
    }

    w = 0;
    nd = 0;

    if (*p == '0') {
        p++;

    } else if (*p >= '1' && *p <= '9') {
        p = oip_digit_runs(p, end, &w, &nd);

        for ( /* void */ ; p < end && (c = *p - '0') <= 9; p++) {
            if (w > (UINT64_MAX - c) / 10) {
                return NULL;
            }

            w = w * 10 + c;
        }

    } else {
        return NULL;
    }

    if (p < end && oip_json_num_tail[*p]) {
        return NULL;
    }

    *mag = w;

    return p;
}


/* the bits of a decimal as FP64 / FP32; -1 when the slow path must say */

static inline int
oip_fast_double(const oip_fast_t *d, uint64_t *bits)
{
    double    x;

    if (d->w == 0 && !d->inexact) {
        *bits = (uint64_t) d->neg << 63;
        return 0;
    }

    if (!d->inexact && d->w <= (1ULL << 53)
        && (uint64_t) (d->e10 + 22) <= 44)
    {
        x = (d->e10 >= 0) ? (double) d->w * oip_fast_pow10[d->e10]
                          : (double) d->w / oip_fast_pow10[-d->e10];
        memcpy(bits, &x, 8);

    } else if (oip_fast_decide(d->w, d->e10, d->inexact, 1, bits) != 0) {
        return -1;
    }

    *bits |= (uint64_t) d->neg << 63;

    return 0;
}


static inline int
oip_fast_float(const oip_fast_t *d, uint32_t *bits)
{
    float      x;
    double     y;
    uint64_t   b, yb;

    if (d->w == 0 && !d->inexact) {
        *bits = (uint32_t) d->neg << 31;
        return 0;
    }

    if (!d->inexact && d->w <= (1ULL << 53)
        && (uint64_t) (d->e10 + 22) <= 44)
    {
        /*
         * The double is correctly rounded; so is the float made from it,
         * unless the double lies exactly on a float midpoint (the decimal
         * may be on either side of it) or among float subnormals.
         */

        y = (d->e10 >= 0) ? (double) d->w * oip_fast_pow10[d->e10]
                          : (double) d->w / oip_fast_pow10[-d->e10];
        memcpy(&yb, &y, 8);

        if ((yb & 0x1fffffff) != 0x10000000 && y >= 0x1p-126) {
            x = (float) y;
            memcpy(bits, &x, 4);
            *bits |= (uint32_t) d->neg << 31;
            return 0;
        }
    }

    if (oip_fast_decide(d->w, d->e10, d->inexact, 0, &b) != 0) {
        return -1;
    }

    *bits = (uint32_t) b;

    *bits |= (uint32_t) d->neg << 31;

    return 0;
}


#endif /* _OIP_NUMBER_FAST_H_INCLUDED_ */
