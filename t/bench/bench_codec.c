
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The codec's speed, side by side in one run with what it replaces:
 *
 *   simdjson the best JSON library's way (Debian's simdjson 3, On-Demand,
 *            bench_simdjson.cpp): JSON -> binary, envelope and data, the
 *            result checked equal to the expected bytes
 *   cjson    a straightforward cJSON conversion: cJSON_ParseWithLength,
 *            walk child/next, cast; cJSON_CreateDoubleArray and
 *            cJSON_PrintUnformatted to print
 *   libc     a strtof/strtod/strtoll loop; a snprintf("%.9g") loop
 *   limit    memcpy of the JSON text: the physical limit
 *
 * JSON -> binary and binary -> JSON for FP32, FP64, INT64 (full range and
 * small token ids), FP16 and BYTES, at about 1 KB, 1 MB and 40 MB of JSON.
 * MB/s count JSON text in both directions.  Each figure is the best of
 * several runs (the machine is shared and noisy).  The targets of the
 * speed work are checked at the end: ratios within this run.
 *
 * Then FP32 both ways at sizes from 1 KB to the largest, for the plot of
 * throughput against size (OIP_BENCH_DATA names the file the figures go
 * to, one line each: direction, size, contender, MB/s).
 *
 *   bench_codec [seconds per figure] [largest size in MB]
 */


#define _GNU_SOURCE

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "oip_codec.h"
#include "oip_number.h"
#include "../unit/half.h"


#define ngx_max(a, b)  ((a) > (b) ? (a) : (b))

/* the contenders, in the order of the table */
#define NC  5


int bench_simdjson_j2b(const unsigned char *json, size_t len, size_t cap,
    unsigned char *out, size_t *out_len, unsigned char **chunk,
    size_t *chunk_len);


typedef enum { B_FP32, B_FP64, B_INT64, B_IDS, B_FP16, B_BYTES } bkind_e;

static const struct {
    const char  *label;
    const char  *dt;
    size_t       size;
} kinds[] = {
    { "FP32", "FP32", 4 },
    { "FP64", "FP64", 8 },
    { "INT64", "INT64", 8 },
    { "INT64 ids", "INT64", 8 },
    { "FP16", "FP16", 2 },
    { "BYTES", "BYTES", 0 },
};


/*
 * Output memory for every contender: blocks kept from call to call, as a
 * busy worker's malloc keeps its heap.  Fresh pages cost a fault each
 * (about 11 us under the gVisor sandbox this bench runs in, a fifth of
 * a microsecond on a plain kernel), and which contender got fresh pages
 * from malloc depended on the order of the others' malloc and free
 * calls: at 16 MB one faulted 1,500 pages a call, the next one 2.  The
 * conversion is what this bench compares; what a worker pays for its
 * pages is in the end-to-end bench.
 */

#define WARM_N  64

static struct {
    u_char  *p;
    size_t   size;
    int      used;
} warm[WARM_N];


static void *
warm_get(size_t size)
{
    int  i, best;

    best = -1;

    for (i = 0; i < WARM_N; i++) {
        if (warm[i].p && !warm[i].used && warm[i].size >= size
            && (best < 0 || warm[i].size < warm[best].size))
        {
            best = i;
        }
    }

    if (best < 0) {
        for (i = 0; i < WARM_N && warm[i].p; i++) { /* void */ }

        if (i == WARM_N) {
            return malloc(size);
        }

        warm[i].p = malloc(size);
        if (warm[i].p == NULL) {
            return NULL;
        }

        warm[i].size = size;
        best = i;
    }

    warm[best].used = 1;

    return warm[best].p;
}


static void
warm_put(void *p)
{
    int  i;

    for (i = 0; i < WARM_N; i++) {
        if (warm[i].p == p) {
            warm[i].used = 0;
            return;
        }
    }

    free(p);
}


/* between datasets, so that sizes do not pile up */

static void
warm_flush(void)
{
    int  i;

    for (i = 0; i < WARM_N; i++) {
        free(warm[i].p);
        warm[i].p = NULL;
        warm[i].used = 0;
    }
}


/* a bump allocator, as an nginx pool is; large blocks from malloc */

typedef struct big_s  big_t;

struct big_s {
    big_t   *next;
    size_t   size;
};


/* cur and peak: bytes handed out, to measure a conversion's memory */

typedef struct {
    u_char  *base, *pos, *end;
    big_t   *big;
    size_t   cur, peak;
} pool_t;


static void *
pool_alloc(void *data, size_t size)
{
    pool_t  *p = data;
    big_t   *b;

    size = (size + 15) & ~(size_t) 15;

    p->cur += size;

    if (p->cur > p->peak) {
        p->peak = p->cur;
    }

    if (size > 4096) {
        b = warm_get(32 + size);
        if (b == NULL) {
            return NULL;
        }
        b->next = p->big;
        b->size = size;
        p->big = b;
        return (u_char *) b + 32;
    }

    if ((size_t) (p->end - p->pos) < size) {
        return NULL;
    }

    p->pos += size;

    return p->pos - size;
}


static void
pool_free(void *data, void *ptr)
{
    pool_t  *p = data;
    big_t  **bp, *b;

    for (bp = &p->big; (b = *bp) != NULL; bp = &b->next) {
        if ((u_char *) b + 32 == ptr) {
            *bp = b->next;
            p->cur -= b->size;
            warm_put(b);
            return;
        }
    }
}


static void
pool_reset(pool_t *p)
{
    big_t  *b, *next;

    for (b = p->big; b; b = next) {
        next = b->next;
        warm_put(b);
    }

    p->big = NULL;
    p->pos = p->base;
    p->cur = 0;
}


static uint64_t  rng = 88172645463325252ULL;

static uint64_t
rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}


static double
now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


/* one dataset: the JSON request, the binary one, the raw values */

typedef struct {
    bkind_e     kind;
    size_t      n;
    u_char     *json;       /* the whole request */
    size_t      jlen;
    size_t      jcap;       /* readable to, for simdjson's padding */
    u_char     *data;       /* its "data": [ ... ] */
    size_t      dlen;
    u_char     *bin;        /* the binary request: header + chunk */
    size_t      blen;
    size_t      hlen;
    u_char     *chunk;
    size_t      clen;
} set_t;


static void
make_set(set_t *s, bkind_e kind, size_t target)
{
    size_t    i, cap, len;
    u_char   *p, *q;
    float     f;
    double    d;
    uint16_t  h;
    int64_t   v;
    char      str[32];

    memset(s, 0, sizeof(set_t));
    s->kind = kind;

    cap = target + 4096;
    s->json = malloc(cap + 64);
    s->jcap = cap + 64;
    s->chunk = malloc(cap * 3 + 64);

    p = s->json + sprintf((char *) s->json, "{\"inputs\":[{\"name\":\"x\","
                          "\"shape\":[%20s],\"datatype\":\"%s\",\"data\":",
                          "", kinds[kind].dt);
    s->data = p;
    *p++ = '[';
    q = s->chunk;

    for (i = 0; (size_t) (p - s->json) < target - 32 || i == 0; i++) {
        if (i) {
            *p++ = ',';
        }

        switch (kind) {

        case B_FP32:
            /* weights-like values, shortest text (~10 characters) */
            f = (float) ((double) (rnd() >> 11) / 9007199254740992.0 * 4 - 2);
            p = oip_print_float(p, f);
            memcpy(q, &f, 4);
            q += 4;
            break;

        case B_FP64:
            d = (double) (rnd() >> 11) / 9007199254740992.0 * 200 - 100;
            p = oip_print_double(p, d);
            memcpy(q, &d, 8);
            q += 8;
            break;

        case B_INT64:
            v = (int64_t) rnd();
            p = oip_print_i64(p, v);
            memcpy(q, &v, 8);
            q += 8;
            break;

        case B_IDS:
            v = (int64_t) (rnd() % 50000);
            p = oip_print_i64(p, v);
            memcpy(q, &v, 8);
            q += 8;
            break;

        case B_FP16:
            h = oip_double_to_fp16(((double) (rnd() >> 11)
                                    / 9007199254740992.0) * 8 - 4);
            p = oip_print_fp16(p, h);
            memcpy(q, &h, 2);
            q += 2;
            break;

        default: /* B_BYTES */
            len = 5 + rnd() % 16;
            for (size_t k = 0; k < len; k++) {
                str[k] = (char) ('a' + rnd() % 26);
            }
            *p++ = '"';
            memcpy(p, str, len);
            p += len;
            *p++ = '"';
            q[0] = (u_char) len;
            q[1] = q[2] = q[3] = 0;
            memcpy(q + 4, str, len);
            q += 4 + len;
        }
    }

    *p++ = ']';
    s->dlen = p - s->data;
    p += sprintf((char *) p, "}]}");
    s->jlen = p - s->json;
    s->n = i;
    s->clen = q - s->chunk;

    /* the shape, now that the count is known */

    q = (u_char *) strstr((char *) s->json, "\"shape\":[") + 9;
    len = sprintf(str, "%zu", s->n);
    memset(q, ' ', 20);
    memcpy(q, str, len);

    s->bin = malloc(s->clen + 256);
    s->hlen = sprintf((char *) s->bin, "{\"inputs\":[{\"name\":\"x\","
                      "\"shape\":[%zu],\"datatype\":\"%s\",\"parameters\":"
                      "{\"binary_data_size\":%zu}}]}", s->n, kinds[kind].dt,
                      s->clen);
    memcpy(s->bin + s->hlen, s->chunk, s->clen);
    s->blen = s->hlen + s->clen;
}


static void
free_set(set_t *s)
{
    free(s->json);
    free(s->chunk);
    free(s->bin);
    warm_flush();
}


static pool_t       pool;
static oip_alloc_t  alloc = { pool_alloc, pool_free, &pool };
static volatile uint64_t  sink;


/* -------------------------------------------------------- the module */

static int
ours_j2b(set_t *s)
{
    oip_result_t   req;
    oip_options_t  opt = { .inputs = OIP_FORM_BINARY, .outputs = OIP_FORM_KEEP,
                           .max_json_size = SIZE_MAX / 4,
                           .max_tensor_size = SIZE_MAX / 4, .max_depth = 100,
                           .raw_outputs = OIP_FORM_BINARY };

    oip_request_process(&req, &alloc, &opt,
                        &(oip_framing_t) { -1, OIP_ENC_NONE,
                                           OIP_CARRIER_HEADER, 0, 0 },
                        s->json,
                        s->jlen);
    sink += req.body_len;
    pool_reset(&pool);

    return req.status;
}


static int
ours_b2j(set_t *s)
{
    oip_result_t   req;
    oip_options_t  opt = { .inputs = OIP_FORM_JSON, .outputs = OIP_FORM_KEEP,
                           .max_json_size = SIZE_MAX / 4,
                           .max_tensor_size = SIZE_MAX / 4, .max_depth = 100,
                           .raw_outputs = OIP_FORM_BINARY };

    oip_request_process(&req, &alloc, &opt,
                        &(oip_framing_t) { (int64_t) s->hlen, OIP_ENC_NONE,
                                           OIP_CARRIER_HEADER, 0, 0 },
                        s->bin, s->blen);
    sink += req.body_len;
    pool_reset(&pool);

    return req.status;
}


static int
ours_validate(set_t *s)
{
    oip_result_t   req;
    oip_options_t  opt = { .inputs = OIP_FORM_KEEP, .outputs = OIP_FORM_KEEP,
                           .max_json_size = SIZE_MAX / 4,
                           .max_tensor_size = SIZE_MAX / 4, .max_depth = 100,
                           .raw_outputs = OIP_FORM_BINARY };

    oip_request_process(&req, &alloc, &opt,
                        &(oip_framing_t) { (int64_t) s->hlen, OIP_ENC_NONE,
                                           OIP_CARRIER_HEADER, 0, 0 },
                        s->bin, s->blen);
    sink += req.body_len;
    pool_reset(&pool);

    return req.status;
}


/* -------------------------------------------------------- simdjson */

static int  checking;     /* the first call: the result compared */


/* its output in memory of its own each time, as every contender's */

static int
simd_j2b(set_t *s)
{
    int      rc;
    size_t   len, clen;
    u_char  *out, *chunk;

    out = warm_get(s->clen + 8192);
    if (out == NULL) {
        return -1;
    }

    rc = bench_simdjson_j2b(s->json, s->jlen, s->jcap, out, &len, &chunk,
                            &clen);

    if (rc == 0 && checking
        && (clen != s->clen || memcmp(chunk, s->chunk, clen) != 0))
    {
        fprintf(stderr, "simdjson: %s at %zu bytes differs from the "
                "expected bytes: left out\n", kinds[s->kind].label, s->jlen);
        rc = -1;
    }

    sink += len;
    warm_put(out);

    return rc;
}


/* -------------------------------------------------------- cJSON */

static int
cjson_j2b(set_t *s)
{
    u_char   *out, *o;
    cJSON    *root, *data, *e;
    float     f;
    double    d;
    int64_t   v;
    uint16_t  h;
    size_t    len;

    root = cJSON_ParseWithLength((const char *) s->json, s->jlen);
    data = cJSON_GetObjectItemCaseSensitive(
               cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root,
                                                                   "inputs"),
                                  0), "data");
    out = warm_get(s->clen + 16);
    o = out;

    for (e = data->child; e; e = e->next) {
        switch (s->kind) {
        case B_FP32:
            f = (float) e->valuedouble;
            memcpy(o, &f, 4);
            o += 4;
            break;
        case B_FP64:
            d = e->valuedouble;
            memcpy(o, &d, 8);
            o += 8;
            break;
        case B_INT64:
        case B_IDS:
            v = (int64_t) e->valuedouble;
            memcpy(o, &v, 8);
            o += 8;
            break;
        case B_FP16:
            h = oip_double_to_fp16(e->valuedouble);
            memcpy(o, &h, 2);
            o += 2;
            break;
        default:
            len = strlen(e->valuestring);
            o[0] = (u_char) len;
            o[1] = o[2] = o[3] = 0;
            memcpy(o + 4, e->valuestring, len);
            o += 4 + len;
        }
    }

    sink += o - out;
    warm_put(out);
    cJSON_Delete(root);

    return 0;
}


static int
cjson_b2j(set_t *s)
{
    char     *text, **strs;
    float     f;
    double   *vals;
    int64_t   v;
    uint16_t  h;
    cJSON    *arr;
    size_t    i, len;
    u_char   *p;

    if (s->kind == B_BYTES) {
        strs = malloc(s->n * sizeof(char *));
        p = s->chunk;

        for (i = 0; i < s->n; i++) {
            len = p[0];
            strs[i] = strndup((char *) p + 4, len);
            p += 4 + len;
        }

        arr = cJSON_CreateStringArray((const char *const *) strs, (int) s->n);

        for (i = 0; i < s->n; i++) {
            free(strs[i]);
        }

        free(strs);

    } else {
        vals = warm_get(s->n * sizeof(double));

        for (i = 0; i < s->n; i++) {
            switch (s->kind) {
            case B_FP32:
                memcpy(&f, s->chunk + 4 * i, 4);
                vals[i] = f;
                break;
            case B_FP64:
                memcpy(&vals[i], s->chunk + 8 * i, 8);
                break;
            case B_FP16:
                memcpy(&h, s->chunk + 2 * i, 2);
                vals[i] = oip_fp16_to_double(h);
                break;
            default:
                memcpy(&v, s->chunk + 8 * i, 8);
                vals[i] = (double) v;
            }
        }

        arr = cJSON_CreateDoubleArray(vals, (int) s->n);
        warm_put(vals);
    }

    text = cJSON_PrintUnformatted(arr);
    sink += strlen(text);
    free(text);
    cJSON_Delete(arr);

    return 0;
}


/* -------------------------------------------------------- libc loops */

static int
libc_j2b(set_t *s)
{
    char      *p, *end, *q;
    u_char    *out, *o;
    float      f;
    double     d;
    long long  v;
    uint16_t   h;
    size_t     len;

    if (s->kind == B_BYTES) {
        return -1;
    }

    out = warm_get(s->clen + 16);
    o = out;
    p = (char *) s->data + 1;

    for ( ;; ) {
        switch (s->kind) {
        case B_FP32:
            f = strtof(p, &end);
            memcpy(o, &f, 4);
            o += 4;
            break;
        case B_FP64:
            d = strtod(p, &end);
            memcpy(o, &d, 8);
            o += 8;
            break;
        case B_FP16:
            h = oip_double_to_fp16(strtod(p, &end));
            memcpy(o, &h, 2);
            o += 2;
            break;
        default:
            v = strtoll(p, &end, 10);
            memcpy(o, &v, 8);
            o += 8;
        }

        p = end;

        if (*p++ != ',') {
            break;
        }
    }

    (void) q;
    (void) len;
    sink += o - out;
    warm_put(out);

    return 0;
}


static int
libc_b2j(set_t *s)
{
    char      *text, *p;
    float      f;
    double     d;
    int64_t    v;
    uint16_t   h;
    size_t     i;

    if (s->kind == B_BYTES) {
        return -1;
    }

    text = warm_get(s->n * 26 + 16);
    p = text;
    *p++ = '[';

    for (i = 0; i < s->n; i++) {
        if (i) {
            *p++ = ',';
        }

        switch (s->kind) {
        case B_FP32:
            memcpy(&f, s->chunk + 4 * i, 4);
            p += sprintf(p, "%.9g", f);
            break;
        case B_FP64:
            memcpy(&d, s->chunk + 8 * i, 8);
            p += sprintf(p, "%.17g", d);
            break;
        case B_FP16:
            memcpy(&h, s->chunk + 2 * i, 2);
            p += sprintf(p, "%.5g", oip_fp16_to_double(h));
            break;
        default:
            memcpy(&v, s->chunk + 8 * i, 8);
            p += sprintf(p, "%lld", (long long) v);
        }
    }

    *p++ = ']';
    sink += p - text;
    warm_put(text);

    return 0;
}


/* -------------------------------------------------------- the limit */

static u_char  *copy_buf;


static int
limit_j2b(set_t *s)
{
    memcpy(copy_buf, s->json, s->jlen);
    sink += copy_buf[s->jlen / 3];
    return 0;
}

static int
limit_b2j(set_t *s)
{
    memcpy(copy_buf, s->json, s->jlen);
    sink += copy_buf[s->jlen / 2];
    return 0;
}


static int
limit_binary(set_t *s)
{
    memcpy(copy_buf, s->bin, s->blen);
    sink += copy_buf[s->blen / 2];
    return 0;
}


/*
 * Seconds per call of each of four contenders, the best of rounds, each
 * long enough to measure; the contenders take turns within a round so
 * that the machine's moods fall on all of them alike.
 */

static double  budget = 0.3;

#define ROUNDS  7

static void
measure(int (*fn[NC])(set_t *), set_t *s, double best[NC])
{
    int     r, c, reps;
    double  t0, t;

    checking = 1;

    for (c = 0; c < NC; c++) {
        best[c] = (fn[c] && fn[c](s) == 0) ? 1e9 : -1;
    }

    checking = 0;

    for (r = 0; r < ROUNDS; r++) {
        for (c = 0; c < NC; c++) {
            if (best[c] < 0) {
                continue;
            }

            reps = 0;
            t0 = now();

            do {
                fn[c](s);
                reps++;
                t = now() - t0;
            } while (t < budget / ROUNDS / NC);

            if (t / reps < best[c]) {
                best[c] = t / reps;
            }
        }
    }
}


typedef struct {
    double  ours, simd, cjson, libc, limit;
} row_t;


static void
print_row(const char *dir, set_t *s, row_t *r)
{
    double  mb;

    mb = s->jlen / 1e6;

    printf("%-6s %-10s %8.1f KB | %9.1f MB/s %7.1f Mv/s |", dir,
           kinds[s->kind].label, s->jlen / 1024.0, mb / r->ours,
           s->n / r->ours / 1e6);

    if (r->simd > 0) {
        printf(" %7.1f MB/s %5.2fx |", mb / r->simd, r->simd / r->ours);
    } else {
        printf("         -          |");
    }

    if (r->cjson > 0) {
        printf(" %7.1f MB/s %5.1fx |", mb / r->cjson, r->cjson / r->ours);
    } else {
        printf("         -          |");
    }

    if (r->libc > 0) {
        printf(" %7.1f MB/s %5.1fx |", mb / r->libc, r->libc / r->ours);
    } else {
        printf("         -          |");
    }

    printf(" %8.1f MB/s %5.2fx\n", mb / r->limit, r->limit / r->ours);
}


/*
 * FP32 both ways from 1 KB to the largest size, every contender, for the
 * plot: "direction bytes contender MB/s" lines in the file.
 */

static void
curve(const char *path, size_t largest, int (*j2b_fns[NC])(set_t *),
    int (*b2j_fns[NC])(set_t *))
{
    int          c, d;
    FILE        *f;
    set_t        s;
    size_t       size;
    double       t[NC];
    const char  *names[NC] = { "ngx_oip_module", "simdjson", "cJSON",
                               "libc", "memcpy" };

    f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        return;
    }

    printf("\nFP32 from 1 KB to %.0f MB, for the plot: %s\n",
           largest / 1048576.0, path);

    for (size = 1024; ; size *= 4) {
        if (size > largest) {
            size = largest;
        }

        make_set(&s, B_FP32, size);

        for (d = 0; d < 2; d++) {
            measure(d ? b2j_fns : j2b_fns, &s, t);

            for (c = 0; c < NC; c++) {
                if (t[c] > 0) {
                    fprintf(f, "%s %zu %s %.1f\n", d ? "b2j" : "j2b",
                            s.jlen, names[c], s.jlen / 1e6 / t[c]);
                }
            }
        }

        free_set(&s);

        if (size == largest) {
            break;
        }
    }

    fclose(f);
}


int
main(int argc, char **argv)
{
    int          k, z, fails;
    const char  *only;
    size_t       sizes[3];
    set_t    s;
    row_t    j2b[6][3], b2j[6][3], val[3];
    double   maxmb, t4[NC], mem[6][2];
    char     label[64];
    int    (*j2b_fns[NC])(set_t *) = { ours_j2b, simd_j2b, cjson_j2b,
                                       libc_j2b, limit_j2b };
    int    (*b2j_fns[NC])(set_t *) = { ours_b2j, NULL, cjson_b2j,
                                       libc_b2j, limit_b2j };
    int    (*val_fns[NC])(set_t *) = { ours_validate, NULL, NULL, NULL,
                                       limit_binary };

    if (argc > 1) {
        budget = atof(argv[1]);
    }

    maxmb = (argc > 2) ? atof(argv[2]) : 40;
    only = getenv("OIP_BENCH_ONLY");

    memset(j2b, 0, sizeof(j2b));
    memset(b2j, 0, sizeof(b2j));
    memset(val, 0, sizeof(val));

    sizes[0] = 1024;
    sizes[1] = 1024 * 1024;
    sizes[2] = (size_t) (maxmb * 1024 * 1024);

    pool.base = malloc(64 << 20);
    pool.pos = pool.base;
    pool.end = pool.base + (64 << 20);

    copy_buf = malloc(sizes[2] * 3 + 4096);

    printf("%-6s %-10s %11s | %-27s | %-19s | %-19s | %-19s | %s\n", "",
           "", "JSON size", "ngx_oip_module", "simdjson (ratio)",
           "cJSON (ratio)", "strtof/%.9g loop", "memcpy");

    for (k = 0; k < 6; k++) {
        if (only && strcmp(only, kinds[k].label) != 0) {
            continue;
        }

        for (z = 0; z < 3; z++) {
            make_set(&s, (bkind_e) k, sizes[z]);

            measure(j2b_fns, &s, t4);
            j2b[k][z] = (row_t) { t4[0], t4[1], t4[2], t4[3], t4[4] };
            print_row("J->B", &s, &j2b[k][z]);

            measure(b2j_fns, &s, t4);
            b2j[k][z] = (row_t) { t4[0], t4[1], t4[2], t4[3], t4[4] };
            print_row("B->J", &s, &b2j[k][z]);

            if (k == B_FP32 || k == B_BYTES) {
                /* fixed-size tensors are checked by their sizes alone */
                measure(val_fns, &s, t4);
                printf("%-6s %-10s %8.1f KB | %9.1f MB/s of binary "
                       "request, %5.2fx memcpy%s\n", "check",
                       kinds[k].label, s.blen / 1024.0, s.blen / 1e6 / t4[0],
                       t4[4] / t4[0],
                       k == B_FP32 ? " (sizes only)" : " (every element)");

                if (k == B_FP32) {
                    val[z].ours = t4[0];
                    val[z].limit = t4[4];
                }
            }

            free_set(&s);
            fflush(stdout);
        }
    }

    /*
     * Memory: what the codec holds at its peak during one conversion at
     * the largest size, beyond the input (nginx's copy of the body),
     * against the larger of input and output.
     */

    printf("\nmemory at %.0f MB: the codec's peak allocation / the larger "
           "of input and output\n", maxmb);

    for (k = 0; k < 6; k++) {
        if (only && strcmp(only, kinds[k].label) != 0) {
            continue;
        }

        make_set(&s, (bkind_e) k, sizes[2]);

        pool.peak = 0;
        ours_j2b(&s);
        mem[k][0] = (double) pool.peak / (double) ngx_max(s.jlen, s.blen);

        pool.peak = 0;
        ours_b2j(&s);
        mem[k][1] = (double) pool.peak / (double) ngx_max(s.jlen, s.blen);

        printf("  %-10s JSON->binary %5.2fx   binary->JSON %5.2fx\n",
               kinds[k].label, mem[k][0], mem[k][1]);

        free_set(&s);
    }

    if (getenv("OIP_BENCH_DATA") && !only) {
        curve(getenv("OIP_BENCH_DATA"), sizes[2], j2b_fns, b2j_fns);
    }

    /* the targets, at 1 MB and at the largest size */

    fails = 0;
    printf("\ntargets (1 MB and %.0f MB):\n", maxmb);

#define TARGET(what, value, min)                                              \
    do {                                                                      \
        double  v_ = (value);                                                 \
        printf("  %-48s %6.2f  (>= %.1f)  %s\n", what, v_, (double) (min),    \
               v_ >= (min) ? "ok" : "MISSED");                                \
        fails += v_ < (min);                                                  \
    } while (0)

#define TARGET_MAX(what, value, max)                                          \
    do {                                                                      \
        double  v_ = (value);                                                 \
        printf("  %-48s %6.2f  (<= %.1f)  %s\n", what, v_, (double) (max),    \
               v_ <= (max) ? "ok" : "MISSED");                                \
        fails += v_ > (max);                                                  \
    } while (0)

    for (z = 1; z < 3 && !only; z++) {
        TARGET("JSON->binary FP32 / cJSON conversion",
               j2b[B_FP32][z].cjson / j2b[B_FP32][z].ours, 8);
        TARGET("JSON->binary FP32 / strtof loop",
               j2b[B_FP32][z].libc / j2b[B_FP32][z].ours, 2.5);
        TARGET("JSON->binary INT64 / strtoll loop",
               j2b[B_INT64][z].libc / j2b[B_INT64][z].ours, 5);
        TARGET("binary->JSON FP32 / cJSON printing",
               b2j[B_FP32][z].cjson / b2j[B_FP32][z].ours, 12);
        TARGET("binary->JSON FP32 / %.9g loop",
               b2j[B_FP32][z].libc / b2j[B_FP32][z].ours, 4);
        TARGET("binary request validation / memcpy",
               val[z].limit / val[z].ours, 0.5);
    }

    /* against the best JSON library, and small against big */

    if (!only) {
        printf("targets (1 KB and %.0f MB, issue 14):\n", maxmb);
        TARGET("JSON->binary FP32 1 KB / simdjson On-Demand",
               j2b[B_FP32][0].simd > 0
               ? j2b[B_FP32][0].simd / j2b[B_FP32][0].ours : 0, 1.0);
        TARGET("JSON->binary FP32 largest / simdjson On-Demand",
               j2b[B_FP32][2].simd > 0
               ? j2b[B_FP32][2].simd / j2b[B_FP32][2].ours : 0, 1.5);
        TARGET("binary->JSON FP32 1 KB / %.9g, as at the largest",
               (b2j[B_FP32][0].libc / b2j[B_FP32][0].ours)
               / (b2j[B_FP32][2].libc / b2j[B_FP32][2].ours), 1.0);
    }

    for (k = 0; k < 6; k++) {
        if (only && strcmp(only, kinds[k].label) != 0) {
            continue;
        }

        snprintf(label, sizeof(label), "peak memory / max(in, out), %s",
                 kinds[k].label);
        TARGET_MAX(label, ngx_max(mem[k][0], mem[k][1]), 2);
    }

    printf("%s\n", fails ? "SOME TARGETS MISSED" : "all targets met");

    return fails ? 1 : 0;
}
