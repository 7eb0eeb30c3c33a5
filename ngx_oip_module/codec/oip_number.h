
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Numbers: a JSON number token's value as an integer or a correctly
 * rounded float, FP16/BF16 from a double, and the shortest printing.
 * oip_number_fast.h is the inlined hot path of reading.
 */


#ifndef _OIP_NUMBER_H_INCLUDED_
#define _OIP_NUMBER_H_INCLUDED_


#include "oip_json.h"


#define OIP_NUM_OK           0
#define OIP_NUM_NOT_INT      1
#define OIP_NUM_RANGE        2

int oip_num_u64(const oip_num_t *n, uint64_t *v);
int oip_num_double(const oip_num_t *n, double *v);
int oip_num_float(const oip_num_t *n, float *v);
uint16_t oip_double_to_fp16(double d);
uint16_t oip_double_to_bf16(double d);


/* a decimal of up to 19 significant digits, for the hot path */

typedef struct {
    uint64_t               w;          /* up to 19 significant digits */
    int64_t                e10;        /* the value is w * 10^e10 */
    int                    neg;
    int                    inexact;    /* nonzero digits were cut */
} oip_fast_t;

int oip_fast_decide(uint64_t w, int64_t e10, int inexact, int bits64,
    uint64_t *bits);


/*
 * Printers need OIP_NUM_MAX bytes of room: they write past the number
 * (the longest is 24 bytes) to place digits with fixed-size copies.
 */
#define OIP_NUM_MAX          64

uint8_t *oip_print_u64(uint8_t *p, uint64_t v);
uint8_t *oip_print_i64(uint8_t *p, int64_t v);
uint8_t *oip_print_double(uint8_t *p, double v);
uint8_t *oip_print_float(uint8_t *p, float v);
uint8_t *oip_print_fp16(uint8_t *p, uint16_t h);
uint8_t *oip_print_bf16(uint8_t *p, uint16_t h);


#endif /* _OIP_NUMBER_H_INCLUDED_ */
