
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Tensors: the thirteen datatypes, JSON "data" to little-endian binary
 * and back.  One pass over the tensor text, no allocation per element.
 */


#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "oip_tensor.h"
#include "oip_number_fast.h"


const oip_dtype_t  oip_dtypes[] = {
    { "BOOL",   4, 1 },
    { "UINT8",  5, 1 },
    { "UINT16", 6, 2 },
    { "UINT32", 6, 4 },
    { "UINT64", 6, 8 },
    { "INT8",   4, 1 },
    { "INT16",  5, 2 },
    { "INT32",  5, 4 },
    { "INT64",  5, 8 },
    { "FP16",   4, 2 },
    { "BF16",   4, 2 },
    { "FP32",   4, 4 },
    { "FP64",   4, 8 },
    { "BYTES",  5, 0 },
    { NULL,     0, 0 }
};


/* the largest magnitude of each integer type, positive and negative */

static const uint64_t  oip_int_max[] = {
    [OIP_UINT8] = UINT8_MAX, [OIP_UINT16] = UINT16_MAX,
    [OIP_UINT32] = UINT32_MAX, [OIP_UINT64] = UINT64_MAX,
    [OIP_INT8] = INT8_MAX, [OIP_INT16] = INT16_MAX,
    [OIP_INT32] = INT32_MAX, [OIP_INT64] = INT64_MAX
};

static const uint64_t  oip_int_negmax[] = {
    [OIP_INT8] = 128, [OIP_INT16] = 32768,
    [OIP_INT32] = 2147483648ULL, [OIP_INT64] = 9223372036854775808ULL
};


static int oip_tensor_fail(oip_ctx_t *c, const oip_tensor_t *t, int status,
    oip_reason_e reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
static int oip_leaf(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst,
    uint64_t i, oip_out_t *bytes);
static uint64_t oip_fast_run(oip_json_t *j, const oip_tensor_t *t,
    uint8_t *dst, uint64_t i, uint64_t max);
static int oip_data_flat(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst,
    oip_out_t *bytes, oip_win_t *w);
static int oip_leaf_exact(oip_json_t *j, const oip_tensor_t *t,
    const oip_num_t *n, uint64_t i);
static int oip_binary_finite(oip_ctx_t *c, const oip_tensor_t *t,
    const uint8_t *src, size_t len, int status);
/* elements printed between two reservations of room */
#define OIP_PRINT_BATCH      256

/* an element's printer needs OIP_NUM_MAX bytes of room, after its comma */
#if (OIP_ELEMENT_JSON_MAX < OIP_NUM_MAX + 1)
#error "OIP_ELEMENT_JSON_MAX is less than an element's room"
#endif

static uint8_t *oip_binary_print(int dt, const uint8_t *src, size_t len,
    uint8_t *dst, int first);
static int oip_data_nested(oip_json_t *j, const oip_tensor_t *t,
    uint8_t *dst, oip_out_t *bytes, oip_win_t *w);
static int oip_data_any(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst,
    oip_out_t *bytes, oip_win_t *w);
static int oip_win_at(oip_json_t *j, const oip_tensor_t *t, oip_win_t *w,
    uint64_t i, uint8_t **dst, uint64_t *k, uint64_t *max);


static inline void
oip_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t) v;
    p[1] = (uint8_t) (v >> 8);
}


static inline void
oip_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) v;
    p[1] = (uint8_t) (v >> 8);
    p[2] = (uint8_t) (v >> 16);
    p[3] = (uint8_t) (v >> 24);
}


static inline void
oip_put64(uint8_t *p, uint64_t v)
{
    oip_put32(p, (uint32_t) v);
    oip_put32(p + 4, (uint32_t) (v >> 32));
}


static inline uint16_t
oip_get16(const uint8_t *p)
{
    return (uint16_t) (p[0] | (p[1] << 8));
}


static inline uint32_t
oip_get32(const uint8_t *p)
{
    return (uint32_t) p[0] | ((uint32_t) p[1] << 8)
           | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}


static inline uint64_t
oip_get64(const uint8_t *p)
{
    return (uint64_t) oip_get32(p) | ((uint64_t) oip_get32(p + 4) << 32);
}


oip_dtype_e
oip_dtype_find(const uint8_t *s, size_t len)
{
    int  i;

    for (i = 0; oip_dtypes[i].name; i++) {
        if (oip_dtypes[i].len == len
            && memcmp(oip_dtypes[i].name, s, len) == 0)
        {
            return (oip_dtype_e) i;
        }
    }

    return OIP_DT_NONE;
}


/*
 * The elements of a shape whose dimensions are each at most 2^63-1: 0
 * when one is 0, else their product; -1 when it would be above 2^63-1.
 */

int
oip_shape_count(const uint64_t *shape, size_t rank, uint64_t *count)
{
    int       over;
    size_t    i;
    uint64_t  prod;

    prod = 1;
    over = 0;

    for (i = 0; i < rank; i++) {
        if (shape[i] == 0) {
            *count = 0;
            return 0;
        }

        if (prod > (uint64_t) INT64_MAX / shape[i]) {
            over = 1;

        } else {
            prod *= shape[i];
        }
    }

    *count = prod;

    return over ? -1 : 0;
}


static int
oip_tensor_fail(oip_ctx_t *c, const oip_tensor_t *t, int status,
    oip_reason_e reason, const char *fmt, ...)
{
    char     msg[OIP_ERROR_LEN];
    va_list  args;

    va_start(args, fmt);
    vsnprintf(msg, sizeof(msg), fmt, args);
    va_end(args);

    return oip_fail(c, status, reason, "%s '%.*s': %s", t->what,
                    (int) oip_utf8_cut(t->name->data, t->name->len,
                                       OIP_NAME_MAX),
                    t->name->data, msg);
}


const char *
oip_shape_str(const oip_tensor_t *t, char *buf, size_t size)
{
    size_t  i, n;

    n = 0;
    buf[n++] = '[';

    for (i = 0; i < t->rank && n + 24 < size; i++) {
        n += snprintf(buf + n, size - n, i ? ",%llu" : "%llu",
                      (unsigned long long) t->shape[i]);
    }

    if (i < t->rank) {
        n += snprintf(buf + n, size - n, ",...");
    }

    snprintf(buf + n, size - n, "]");

    return buf;
}


static int
oip_leaf(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst, uint64_t i,
    oip_out_t *bytes)
{
    float          f;
    double         d;
    size_t         len;
    uint8_t        c;
    uint16_t       h;
    uint32_t       u;
    uint64_t       m;
    oip_str_t      s;
    oip_num_t      n;
    oip_dtype_e    dt;

    dt = t->dt;
    c = *j->p;

    if (dt == OIP_BOOL) {
        if (c == 't' && j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0) {
            j->p += 4;
            if (dst) {
                dst[0] = 1;
            }
            return 0;
        }

        if (c == 'f' && j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0)
        {
            j->p += 5;
            if (dst) {
                dst[0] = 0;
            }
            return 0;
        }

        return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_DATATYPE,
                               "element %llu: expected true or false",
                               (unsigned long long) i);
    }

    if (dt == OIP_BYTES) {
        if (c != '"') {
            return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_DATATYPE,
                                   "element %llu: expected a string",
                                   (unsigned long long) i);
        }

        if (oip_json_string(j, &s) != 0) {
            return -1;
        }

        if (bytes == NULL) {
            return oip_count_tensor(j->ctx, 4 + oip_json_unescaped_len(&s));
        }

        if (oip_out_reserve(bytes, 4 + s.len) != 0) {
            return -1;
        }

        len = oip_json_unescape(bytes->pos + 4, &s);

        if (len > UINT32_MAX) {
            return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_OTHER, "element "
                                   "%llu: a BYTES element is limited to 4 GB",
                                   (unsigned long long) i);
        }

        oip_put32(bytes->pos, (uint32_t) len);
        bytes->pos += 4 + len;

        return oip_count_tensor(j->ctx, 4 + len);
    }

    if (c == 'n' && t->null_nan && dt >= OIP_FP16 && oip_json_null(j)) {
        /* an answer's null float: the NaN its runtime could not write */
        if (dst) {
            switch (dt) {
            case OIP_FP16:
                oip_put16(dst, 0x7e00);
                break;
            case OIP_BF16:
                oip_put16(dst, 0x7fc0);
                break;
            case OIP_FP32:
                oip_put32(dst, 0x7fc00000);
                break;
            default:
                oip_put64(dst, 0x7ff8000000000000ULL);
            }
        }

        return 0;
    }

    if (c != '-' && (c < '0' || c > '9') && c != 'N' && c != 'I') {
        return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_DATATYPE,
                               "element %llu: expected a number",
                               (unsigned long long) i);
    }

    if (oip_json_number(j, &n) != 0) {
        return -1;
    }

    if (n.special && t->finite && dt >= OIP_FP16) {
        return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_OTHER,
                               "element %llu is %.*s; " OIP_NONFINITE_WHY,
                               (unsigned long long) i, (int) (n.end - n.start),
                               n.start);
    }

    if (t->exact && oip_leaf_exact(j, t, &n, i) != 0) {
        return -1;
    }

    switch (dt) {

    case OIP_FP32:
        oip_num_float(&n, &f);

        if (isinf(f) && !n.special) {
            goto range;
        }

        if (dst) {
            memcpy(&u, &f, 4);
            oip_put32(dst, u);
        }

        return 0;

    case OIP_FP64:
        oip_num_double(&n, &d);

        if (isinf(d) && !n.special) {
            goto range;
        }

        if (dst) {
            memcpy(&m, &d, 8);
            oip_put64(dst, m);
        }

        return 0;

    case OIP_FP16:
    case OIP_BF16:
        oip_num_double(&n, &d);

        if (dt == OIP_FP16) {
            h = oip_double_to_fp16(d);

            if ((h & 0x7fff) == 0x7c00 && !n.special) {
                goto range;
            }

        } else {
            h = oip_double_to_bf16(d);

            if ((h & 0x7fff) == 0x7f80 && !n.special) {
                goto range;
            }
        }

        if (dst) {
            oip_put16(dst, h);
        }

        return 0;

    default:
        break;
    }

    /* integers, exactly */

    switch (oip_num_u64(&n, &m)) {

    case OIP_NUM_NOT_INT:
        return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_DATATYPE,
                               "element %llu: %.*s is not an integer",
                               (unsigned long long) i,
                               (int) oip_min(n.end - n.start, 40),
                               n.start);

    case OIP_NUM_RANGE:
        goto range;
    }

    if (n.neg) {
        if (dt < OIP_INT8 || m > oip_int_negmax[dt]) {
            goto range;
        }

        m = (uint64_t) 0 - m;

    } else if (m > oip_int_max[dt]) {
        goto range;
    }

    if (dst) {
        switch (oip_dtypes[dt].size) {
        case 1:
            dst[0] = (uint8_t) m;
            break;
        case 2:
            oip_put16(dst, (uint16_t) m);
            break;
        case 4:
            oip_put32(dst, (uint32_t) m);
            break;
        default:
            oip_put64(dst, m);
        }
    }

    return 0;

range:

    return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_DATATYPE,
                           "element %llu: %.*s is out of range for %s",
                           (unsigned long long) i,
                           (int) oip_min(n.end - n.start, 40), n.start,
                           oip_dtypes[dt].name);
}


/*
 * An input declared with an integer datatype, re-typed to the model's
 * float one: each value must be an integer that the float holds
 * exactly (its significant bits fit the significand).
 */

static int
oip_leaf_exact(oip_json_t *j, const oip_tensor_t *t, const oip_num_t *n,
    uint64_t i)
{
    int       rc, bits;
    uint64_t  m;

    static const int  significand[] = {
        [OIP_FP16] = 11, [OIP_BF16] = 8, [OIP_FP32] = 24, [OIP_FP64] = 53
    };

    rc = n->special ? OIP_NUM_NOT_INT : oip_num_u64(n, &m);

    if (rc == OIP_NUM_NOT_INT) {
        return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_DATATYPE, "element "
                               "%llu: %.*s is not an integer",
                               (unsigned long long) i,
                               (int) oip_min(n->end - n->start, 40), n->start);
    }

    if (rc == OIP_NUM_OK && m != 0) {
        bits = (64 - __builtin_clzll(m)) - __builtin_ctzll(m);

        if (bits <= significand[t->dt]) {
            return 0;
        }

    } else if (rc == OIP_NUM_OK) {
        return 0;
    }

    return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_OTHER, "element %llu: "
                           "%.*s has no exact %s value", (unsigned long long) i,
                           (int) oip_min(n->end - n->start, 40), n->start,
                           oip_dtypes[t->dt].name);
}


/*
 * One element for the fast path: its bits, and the position after it;
 * NULL leaves it to the general path (a token, white space, a number
 * out of range), which converts it or says what is wrong with it.
 */

static inline __attribute__((always_inline)) const uint8_t *
oip_fast_fp32(const uint8_t *p, const uint8_t *end, int check,
    uint32_t *bits)
{
    oip_fast_t  d;

    p = oip_fast_decimal(p, end, &d);

    if (p == NULL) {
        return NULL;
    }

    /*
     * Only checked: w < 10^20, so a decimal with e10 <= 18 is below
     * 10^38, a finite float; no need to round it.
     */

    if (check && d.e10 <= 18) {
        return p;
    }

    if (oip_fast_float(&d, bits) != 0 || (*bits & 0x7fffffff) == 0x7f800000)
    {
        return NULL;
    }

    return p;
}


static inline __attribute__((always_inline)) const uint8_t *
oip_fast_fp64(const uint8_t *p, const uint8_t *end, int check,
    uint64_t *bits)
{
    oip_fast_t  d;

    p = oip_fast_decimal(p, end, &d);

    if (p == NULL) {
        return NULL;
    }

    /* as for FP32: below 10^308 */

    if (check && d.e10 <= 288) {
        return p;
    }

    if (oip_fast_double(&d, bits) != 0
        || (*bits & 0x7fffffffffffffffULL) == 0x7ff0000000000000ULL)
    {
        return NULL;
    }

    return p;
}


static inline __attribute__((always_inline)) const uint8_t *
oip_fast_half(const uint8_t *p, const uint8_t *end, int bf16, uint16_t *h)
{
    double      x;
    uint64_t    b;
    oip_fast_t  d;

    p = oip_fast_decimal(p, end, &d);

    if (p == NULL || oip_fast_double(&d, &b) != 0) {
        return NULL;
    }

    memcpy(&x, &b, 8);

    if (bf16) {
        *h = oip_double_to_bf16(x);
        return ((*h & 0x7fff) == 0x7f80) ? NULL : p;
    }

    *h = oip_double_to_fp16(x);

    return ((*h & 0x7fff) == 0x7c00) ? NULL : p;
}


/* an integer within [-nlim, lim], as its two's complement bits */

static inline __attribute__((always_inline)) const uint8_t *
oip_fast_int(const uint8_t *p, const uint8_t *end, uint64_t lim,
    uint64_t nlim, uint64_t *v)
{
    int       neg;
    uint64_t  mag;

    p = oip_fast_integer(p, end, &mag, &neg);

    if (p == NULL || mag > (neg ? nlim : lim) || (neg && nlim == 0)) {
        return NULL;
    }

    *v = neg ? (uint64_t) 0 - mag : mag;

    return p;
}


/*
 * The common case, fast: plain numbers separated by a bare ',', for the
 * numeric types.  Converts from j->p while it can, at most max elements,
 * and returns how many; it stops before anything the fast path leaves
 * to the general one.  One loop per datatype and element size: the
 * switch is out of the loop.
 */

static uint64_t
oip_fast_run(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst, uint64_t i,
    uint64_t max)
{
    uint16_t        h;
    uint32_t        b32;
    uint64_t        k, b64, lim, nlim;
    const uint8_t  *p, *q, *start, *end;

#define OIP_FAST_LOOP(element, store)                                         \
    for ( ;; ) {                                                              \
        q = element;                                                          \
                                                                              \
        if (q == NULL) {                                                      \
            break;                                                            \
        }                                                                     \
                                                                              \
        if (dst) {                                                            \
            store;                                                            \
        }                                                                     \
                                                                              \
        p = q;                                                                \
                                                                              \
        if (++k == max || end - p < 2 || *p != ',') {                         \
            break;                                                            \
        }                                                                     \
                                                                              \
        start = p + 1;                                                        \
    }

    if (t->exact) {
        /* each value checked: the general path */
        return 0;
    }

    end = j->end;
    p = j->p;
    start = p;
    k = 0;

    switch (t->dt) {

    case OIP_FP32:
        OIP_FAST_LOOP(oip_fast_fp32(start, end, dst == NULL, &b32),
                      oip_put32(dst + (i + k) * 4, b32))
        break;

    case OIP_FP64:
        OIP_FAST_LOOP(oip_fast_fp64(start, end, dst == NULL, &b64),
                      oip_put64(dst + (i + k) * 8, b64))
        break;

    case OIP_FP16:
        OIP_FAST_LOOP(oip_fast_half(start, end, 0, &h),
                      oip_put16(dst + (i + k) * 2, h))
        break;

    case OIP_BF16:
        OIP_FAST_LOOP(oip_fast_half(start, end, 1, &h),
                      oip_put16(dst + (i + k) * 2, h))
        break;

    case OIP_BOOL:
    case OIP_BYTES:
    case OIP_DT_NONE:
        break;

    default:
        /* the integers: exactly, within the type's range */

        lim = oip_int_max[t->dt];
        nlim = (t->dt >= OIP_INT8) ? oip_int_negmax[t->dt] : 0;

        switch (oip_dtypes[t->dt].size) {

        case 1:
            OIP_FAST_LOOP(oip_fast_int(start, end, lim, nlim, &b64),
                          dst[i + k] = (uint8_t) b64)
            break;

        case 2:
            OIP_FAST_LOOP(oip_fast_int(start, end, lim, nlim, &b64),
                          oip_put16(dst + (i + k) * 2, (uint16_t) b64))
            break;

        case 4:
            OIP_FAST_LOOP(oip_fast_int(start, end, lim, nlim, &b64),
                          oip_put32(dst + (i + k) * 4, (uint32_t) b64))
            break;

        default:
            OIP_FAST_LOOP(oip_fast_int(start, end, lim, nlim, &b64),
                          oip_put64(dst + (i + k) * 8, b64))
        }
    }

#undef OIP_FAST_LOOP

    j->p = p;

    return k;
}


static int
oip_data_flat(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst,
    oip_out_t *bytes, oip_win_t *w)
{
    int        rc;
    char       buf[96];
    uint8_t   *d;
    uint64_t   i, k, n, max;
    oip_arr_t  a;

    if (oip_json_array(j, &a) != 0) {
        return -1;
    }

    for (i = 0; (rc = oip_json_element(j, &a)) == 1; i++) {

        if (*j->p == '[') {
            return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_SHAPE, "data is "
                                   "not nested as its shape %s",
                                   oip_shape_str(t, buf, sizeof(buf)));
        }

        if (i < t->count) {
            d = dst;
            k = i;
            max = t->count - i;

            if (j->ctx->sink && oip_win_at(j, t, w, i, &d, &k, &max) != 0) {
                return -1;
            }

            n = oip_fast_run(j, t, d, k, max);

            if (n) {
                /* element() counted the first of them */
                i += n - 1;
                a.n += n - 1;
                continue;
            }

            rc = oip_leaf(j, t, d ? d + k * oip_dtypes[t->dt].size : NULL,
                          i, bytes);

        } else {
            /* keep counting, to say how many there are */
            rc = oip_json_skip(j);
        }

        if (rc != 0) {
            return -1;
        }
    }

    if (rc < 0) {
        return -1;
    }

    if (i != t->count) {
        return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_SHAPE, "data has "
                               "%llu elements, shape %s needs %llu",
                               (unsigned long long) i,
                               oip_shape_str(t, buf, sizeof(buf)),
                               (unsigned long long) t->count);
    }

    return 0;
}


static int
oip_data_nested(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst,
    oip_out_t *bytes, oip_win_t *w)
{
    int         rc;
    char        buf[96];
    size_t      level;
    uint8_t    *d;
    uint64_t    i, k, n, max;
    oip_arr_t  *arr;

    arr = oip_alloc(j->ctx, t->rank * sizeof(oip_arr_t));
    if (arr == NULL) {
        return -1;
    }

    level = 0;
    i = 0;
    rc = -1;

    if (oip_json_array(j, &arr[0]) != 0) {
        goto done;
    }

    for ( ;; ) {

        rc = oip_json_element(j, &arr[level]);

        if (rc < 0) {
            goto done;
        }

        if (rc == 0) {
            if (arr[level].n != t->shape[level]) {
                goto mismatch;
            }

            if (level == 0) {
                break;
            }

            level--;
            continue;
        }

        if (arr[level].n > t->shape[level]) {
            goto mismatch;
        }

        if (level + 1 < t->rank) {
            if (*j->p != '[') {
                goto mismatch;
            }

            if (oip_json_array(j, &arr[++level]) != 0) {
                rc = -1;
                goto done;
            }

            continue;
        }

        if (*j->p == '[') {
            goto mismatch;
        }

        d = dst;
        k = i;
        max = t->shape[level] - arr[level].n + 1;

        if (j->ctx->sink && oip_win_at(j, t, w, i, &d, &k, &max) != 0) {
            rc = -1;
            goto done;
        }

        n = oip_fast_run(j, t, d, k, max);

        if (n) {
            i += n;
            arr[level].n += n - 1;
            continue;
        }

        /* a failed leaf may leave j->p at the end: not looked at again */

        if (oip_leaf(j, t, d ? d + k * oip_dtypes[t->dt].size : NULL, i++,
                     bytes)
            != 0)
        {
            rc = -1;
            goto done;
        }
    }

    rc = 0;
    goto done;

mismatch:

    rc = oip_tensor_fail(j->ctx, t, 400, OIP_REASON_SHAPE, "data is not nested "
                         "as its shape %s (at depth %zu)",
                         oip_shape_str(t, buf, sizeof(buf)), level + 1);

done:

    oip_free(j->ctx, arr);

    return rc;
}


/*
 * Converts the "data" value at j->p: into dst (count * size bytes) for
 * fixed-size types, into bytes for BYTES, or only validates when both
 * are NULL.  Flat data, or nested exactly as the shape.
 */

int
oip_data_to_binary(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst,
    oip_out_t *bytes)
{
    return oip_data_any(j, t, dst, bytes, NULL);
}


/*
 * A fixed-size tensor's "data" converted through the window (requests of
 * any size): each full window is written to the sink's file, then the
 * rest; w->off ends after the tensor's bytes.
 */

int
oip_data_to_sink(oip_json_t *j, const oip_tensor_t *t, oip_win_t *w)
{
    size_t  len;

    w->base = 0;

    if (oip_data_any(j, t, w->buf, NULL, w) != 0) {
        return -1;
    }

    len = (t->count - w->base) * oip_dtypes[t->dt].size;

    if (len && oip_sink_write(j->ctx, w->buf, len, w->off) != 0) {
        return -1;
    }

    w->off += len;

    return 0;
}


/*
 * Where element i goes, with a sink: into the window (written out when
 * full) when there is one, else nowhere (only checked); max cut so that
 * the pass tells its progress every OIP_SINK_RUN elements at most.
 */

static int
oip_win_at(oip_json_t *j, const oip_tensor_t *t, oip_win_t *w, uint64_t i,
    uint8_t **dst, uint64_t *k, uint64_t *max)
{
    size_t  size;

    oip_progress(j->ctx, j->p);

    *max = oip_min(*max, OIP_SINK_RUN);

    if (w == NULL) {
        return 0;
    }

    size = oip_dtypes[t->dt].size;

    if (i - w->base == w->cap) {
        if (oip_sink_write(j->ctx, w->buf, w->cap * size, w->off) != 0) {
            return -1;
        }

        w->off += w->cap * size;
        w->base = i;
    }

    *dst = w->buf;
    *k = i - w->base;
    *max = oip_min(*max, w->cap - *k);

    return 0;
}


static int
oip_data_any(oip_json_t *j, const oip_tensor_t *t, uint8_t *dst,
    oip_out_t *bytes, oip_win_t *w)
{
    const uint8_t *q;

    if (*j->p != '[') {
        return oip_tensor_fail(j->ctx, t, 400, OIP_REASON_OTHER, "'data' must "
                               "be an array");
    }

    for (q = j->p + 1; q < j->end && oip_json_ws_map[*q]; q++) {
        /* void */
    }

    if (t->rank >= 2 && q < j->end && *q == '[') {
        return oip_data_nested(j, t, dst, bytes, w);
    }

    return oip_data_flat(j, t, dst, bytes, w);
}


int
oip_binary_check(oip_ctx_t *c, const oip_tensor_t *t, const uint8_t *src,
    size_t len, int status)
{
    size_t         i;
    uint32_t       n;
    const uint8_t *p, *end;

    if (t->dt == OIP_BOOL) {
        for (i = 0; i < len; i++) {
            if ((i & 0xfffff) == 0) {
                /* a chunk of any size: what is checked of it may go */
                oip_progress(c, src + i);
            }

            if (src[i] > 1) {
                return oip_tensor_fail(c, t, status, OIP_REASON_OTHER, "BOOL "
                                       "element %zu is %u, not 0 or 1", i,
                                       src[i]);
            }
        }

        return 0;
    }

    if (t->dt != OIP_BYTES) {
        return 0;
    }

    /* each element: a 4-byte little-endian length, then the bytes */

    p = src;
    end = src + len;

    for (i = 0; i < t->count; i++) {

        if (end - p < 4) {
            return oip_tensor_fail(c, t, status, OIP_REASON_SHAPE, "BYTES "
                                   "element %zu is cut off: the binary data "
                                   "holds %zu elements, shape needs %llu", i, i,
                                   (unsigned long long) t->count);
        }

        n = oip_get32(p);
        p += 4;

        if (n > (size_t) (end - p)) {
            return oip_tensor_fail(c, t, status, OIP_REASON_OTHER, "BYTES "
                                   "element %zu: its length %u runs past the "
                                   "binary data", i, n);
        }

        p += n;

        oip_progress(c, p);
    }

    if (p != end) {
        return oip_tensor_fail(c, t, status, OIP_REASON_SHAPE, "BYTES binary "
                               "data has %zu bytes after its %llu elements",
                               (size_t) (end - p),
                               (unsigned long long) t->count);
    }

    return 0;
}


/*
 * A float tensor whose values go upstream as JSON, to a reader without
 * NaN and Infinity: the first such value is refused, by its index.
 */

static int
oip_binary_finite(oip_ctx_t *c, const oip_tensor_t *t, const uint8_t *src,
    size_t len, int status)
{
    size_t    i, size;
    uint64_t  v, exp, mant, sign;

    switch (t->dt) {
    case OIP_FP16:
        exp = 0x7c00;
        mant = 0x3ff;
        break;
    case OIP_BF16:
        exp = 0x7f80;
        mant = 0x7f;
        break;
    case OIP_FP32:
        exp = 0x7f800000;
        mant = 0x7fffff;
        break;
    case OIP_FP64:
        exp = 0x7ff0000000000000ULL;
        mant = 0xfffffffffffffULL;
        break;
    default:
        return 0;
    }

    size = oip_dtypes[t->dt].size;
    sign = (uint64_t) 1 << (size * 8 - 1);

    for (i = 0; i + size <= len; i += size) {
        if ((i & 0xfffff) == 0) {
            oip_progress(c, src + i);
        }

        v = (size == 2) ? oip_get16(src + i)
            : (size == 4) ? oip_get32(src + i) : oip_get64(src + i);

        if ((v & exp) == exp) {
            return oip_tensor_fail(c, t, status, OIP_REASON_OTHER,
                                   "element %zu is %s; " OIP_NONFINITE_WHY,
                                   i / size,
                                   (v & mant) ? "NaN"
                                   : (v & sign) ? "-Infinity" : "Infinity");
        }
    }

    return 0;
}


/*
 * A BYTES chunk holds only valid UTF-8; one not checked yet (a sink's
 * early look) is read no further than its end, and what is cut short
 * is left to the check, which refuses it.
 */

int
oip_bytes_utf8(const uint8_t *src, size_t len)
{
    uint32_t       n;
    const uint8_t *p, *end;

    p = src;
    end = src + len;

    while (end - p >= 4) {
        n = oip_get32(p);
        p += 4;

        if (n > (size_t) (end - p)) {
            return 1;
        }

        if (!oip_utf8_valid(p, n)) {
            return 0;
        }

        p += n;
    }

    return 1;
}


/* writes the binary tensor as a flat JSON array */

int
oip_binary_to_data(oip_ctx_t *c, const oip_tensor_t *t, const uint8_t *src,
    size_t len, oip_out_t *o, int status)
{
    size_t         i, n, size;
    uint8_t       *p;
    const uint8_t *s;

    if (oip_binary_check(c, t, src, len, status) != 0
        || (t->finite && oip_binary_finite(c, t, src, len, status) != 0))
    {
        return -1;
    }

    if (oip_out_write(o, "[", 1) != 0) {
        return -1;
    }

    if (t->dt == OIP_BYTES) {
        s = src;

        for (i = 0; i < t->count; i++) {
            n = oip_get32(s);
            s += 4;

            if (!oip_utf8_valid(s, n)) {
                return oip_tensor_fail(c, t, status, OIP_REASON_OTHER, "BYTES "
                                       "element %zu is not valid UTF-8 and "
                                       "cannot be JSON", i);
            }

            if (oip_out_reserve(o, oip_json_escape(NULL, s, n) + 3) != 0) {
                return -1;
            }

            p = o->pos;

            if (i) {
                *p++ = ',';
            }

            *p++ = '"';
            p += oip_json_escape(p, s, n);
            *p++ = '"';

            o->pos = p;
            s += n;

            oip_progress(o->ctx, s);
        }

        return oip_out_write(o, "]", 1);
    }

    /* room reserved for some elements at a time: blocks stay small */

    size = oip_dtypes[t->dt].size;

    for (i = 0; i < len; i += n) {
        n = oip_min(len - i, OIP_PRINT_BATCH * size);

        if (oip_out_reserve(o, n / size * OIP_ELEMENT_JSON_MAX) != 0) {
            return -1;
        }

        o->pos = oip_binary_print(t->dt, src + i, n, o->pos, i == 0);

        /* a chunk of any size: what is printed of it may go */
        oip_progress(o->ctx, src + i + n);
    }

    return oip_out_write(o, "]", 1);
}


/*
 * len bytes of whole fixed-size elements as JSON numbers at dst, which
 * has room for OIP_ELEMENT_JSON_MAX each; first: no comma before the
 * first.  Returns where the text ends.
 */

static uint8_t *
oip_binary_print(int dt, const uint8_t *src, size_t len, uint8_t *dst,
    int first)
{
    float          f;
    double         d;
    size_t         i, size;
    uint8_t       *p;
    uint32_t       v;
    uint64_t       v64;
    const uint8_t *s;

    size = oip_dtypes[dt].size;
    p = dst;

    /* one loop per type: the switch is out of the loop */

#define OIP_PRINT_LOOP(stmt)                                                  \
    for (i = 0; i < len; i += size) {                                         \
        *p = ',';                                                             \
        p += (i != 0 || !first);                                              \
        s = src + i;                                                          \
        stmt;                                                                 \
    }

    switch (dt) {

    case OIP_BOOL:
        OIP_PRINT_LOOP(p = *s ? (uint8_t *) memcpy(p, "true", 4) + 4
                              : (uint8_t *) memcpy(p, "false", 5) + 5)
        break;

    case OIP_UINT8:
        OIP_PRINT_LOOP(p = oip_print_u64(p, *s))
        break;
    case OIP_UINT16:
        OIP_PRINT_LOOP(p = oip_print_u64(p, oip_get16(s)))
        break;
    case OIP_UINT32:
        OIP_PRINT_LOOP(p = oip_print_u64(p, oip_get32(s)))
        break;
    case OIP_UINT64:
        OIP_PRINT_LOOP(p = oip_print_u64(p, oip_get64(s)))
        break;
    case OIP_INT8:
        OIP_PRINT_LOOP(p = oip_print_i64(p, (int8_t) *s))
        break;
    case OIP_INT16:
        OIP_PRINT_LOOP(p = oip_print_i64(p, (int16_t) oip_get16(s)))
        break;
    case OIP_INT32:
        OIP_PRINT_LOOP(p = oip_print_i64(p, (int32_t) oip_get32(s)))
        break;
    case OIP_INT64:
        OIP_PRINT_LOOP(p = oip_print_i64(p, (int64_t) oip_get64(s)))
        break;
    case OIP_FP16:
        OIP_PRINT_LOOP(p = oip_print_fp16(p, oip_get16(s)))
        break;
    case OIP_BF16:
        OIP_PRINT_LOOP(p = oip_print_bf16(p, oip_get16(s)))
        break;

    case OIP_FP32:
        OIP_PRINT_LOOP(v = oip_get32(s); memcpy(&f, &v, 4);
                       p = oip_print_float(p, f))
        break;

    default: /* OIP_FP64 */
        OIP_PRINT_LOOP(v64 = oip_get64(s); memcpy(&d, &v64, 8);
                       p = oip_print_double(p, d))
    }

#undef OIP_PRINT_LOOP

    return p;
}


long
oip_chunk_json(const oip_chunk_t *ch, uint64_t at, const uint8_t *src,
    size_t n, uint8_t *dst, char *error)
{
    size_t  i;

    if (ch->dt == OIP_BOOL) {
        for (i = 0; i < n; i++) {
            if (src[i] > 1) {
                snprintf(error, OIP_ERROR_LEN, "BOOL element %llu is %u, not "
                         "0 or 1", (unsigned long long) (at + i), src[i]);
                return -1;
            }
        }
    }

    return oip_binary_print(ch->dt, src, n * oip_dtypes[ch->dt].size, dst,
                            at == 0) - dst;
}
