
/*
 * Copyright (C) ngx_oip_module authors
 *
 * FP16 and BF16 bits to the double they stand for, for the tests and
 * the bench: the codec itself never needs this direction (it prints
 * halves from their bits), so the reference lives with its users, and
 * is written independently of the codec's rounding code.
 */


#ifndef _OIP_HALF_H_INCLUDED_
#define _OIP_HALF_H_INCLUDED_


#include <math.h>
#include <stdint.h>


/* a 16-bit float with mbits of mantissa and ebits of exponent */

static double
half_to_double(uint16_t h, unsigned mbits, unsigned ebits)
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


static double
oip_fp16_to_double(uint16_t h)
{
    return half_to_double(h, 10, 5);
}


static double
oip_bf16_to_double(uint16_t h)
{
    return half_to_double(h, 7, 8);
}


#endif /* _OIP_HALF_H_INCLUDED_ */
