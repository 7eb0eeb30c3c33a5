
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The JSON scanner: RFC 8259 over UTF-8, plus the NaN, Infinity and
 * -Infinity tokens that Triton reads and writes.  It builds no tree: the
 * envelope code walks objects and arrays with it and records where
 * things are.  Duplicate keys are an error at every level, compared
 * after unescaping, so that no upstream can resolve them differently.
 */


#include "oip_json.h"


#define OIP_DUPS_LINEAR      16


const uint8_t  oip_json_ws_map[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1
};


/* string bytes: 0 plain, 1 quote, 2 backslash, 3 control, 4 non-ASCII */

static const uint8_t  oip_str_map[256] = {
    [0x00 ... 0x1f] = 3, ['"'] = 1, ['\\'] = 2, [0x80 ... 0xff] = 4
};


/* what may not follow a number: "01", "1.2.3", "1e5e", "NaNa" */

const uint8_t  oip_json_num_tail[256] = {
    ['0' ... '9'] = 1, ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1,
    ['.'] = 1, ['+'] = 1, ['-'] = 1, ['_'] = 1
};


static const uint8_t  oip_value_start[256] = {
    ['{'] = 1, ['['] = 1, ['"'] = 1, ['-'] = 1, ['0' ... '9'] = 1,
    ['t'] = 1, ['f'] = 1, ['n'] = 1, ['N'] = 1, ['I'] = 1
};


/* hex digit values plus one; 0 is not a hex digit */

static const uint8_t  oip_hex[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6,
    ['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10,
    ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16
};


static size_t oip_utf8_seq(const uint8_t *p, const uint8_t *end);
static int oip_hex4(const uint8_t *p);
static uint8_t *oip_utf8_put(uint8_t *d, uint32_t cp);
static uint32_t oip_hash(const uint8_t *p, size_t len);
static int oip_key_init(oip_ctx_t *c, const oip_str_t *s, oip_key_t *k);
static int oip_json_push_key(oip_json_t *j, const oip_str_t *key);
static int oip_json_dups(oip_json_t *j, size_t base);
static int oip_json_literal(oip_json_t *j);


void
oip_json_init(oip_json_t *j, oip_ctx_t *c, const uint8_t *p, size_t len,
    unsigned max_depth)
{
    memset(j, 0, sizeof(oip_json_t));

    j->ctx = c;
    j->start = p;
    j->p = p;
    j->end = p + len;
    j->max_depth = max_depth;
}


void
oip_json_done(oip_json_t *j)
{
    size_t  i;

    for (i = 0; i < j->nkeys; i++) {
        if (j->keys[i].owned) {
            oip_free(j->ctx, (void *) j->keys[i].data);
        }
    }

    oip_free(j->ctx, j->keys);
    oip_free(j->ctx, j->frames);

    j->keys = NULL;
    j->frames = NULL;
    j->nkeys = 0;
    j->keys_cap = 0;
    j->frames_cap = 0;
}


int
oip_json_error(oip_json_t *j, const char *what)
{
    if (j->p >= j->end) {
        return oip_fail(j->ctx, 400, OIP_REASON_SYNTAX, "invalid JSON: %s at "
                        "the end", what);
    }

    return oip_fail(j->ctx, 400, OIP_REASON_SYNTAX, "invalid JSON at byte %zu: "
                    "%s", (size_t) (j->p - j->start), what);
}


static size_t
oip_utf8_seq(const uint8_t *p, const uint8_t *end)
{
    uint8_t c, lo, hi;
    size_t  avail;

    /* RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF */

    c = p[0];
    avail = end - p;

    if (c < 0x80) {
        return 1;
    }

    if (c < 0xc2) {
        return 0;
    }

    if (c < 0xe0) {
        return (avail >= 2 && (p[1] & 0xc0) == 0x80) ? 2 : 0;
    }

    if (c < 0xf0) {
        if (avail < 3) {
            return 0;
        }

        lo = (c == 0xe0) ? 0xa0 : 0x80;
        hi = (c == 0xed) ? 0x9f : 0xbf;

        if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80) {
            return 0;
        }

        return 3;
    }

    if (c < 0xf5) {
        if (avail < 4) {
            return 0;
        }

        lo = (c == 0xf0) ? 0x90 : 0x80;
        hi = (c == 0xf4) ? 0x8f : 0xbf;

        if (p[1] < lo || p[1] > hi
            || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
        {
            return 0;
        }

        return 4;
    }

    return 0;
}


int
oip_utf8_valid(const uint8_t *p, size_t len)
{
    size_t         n;
    const uint8_t *end;

    end = p + len;

    while (p < end) {

        if (*p < 0x80) {
            p++;
            continue;
        }

        n = oip_utf8_seq(p, end);
        if (n == 0) {
            return 0;
        }

        p += n;
    }

    return 1;
}


/* a name cut to max bytes for a message, not inside a UTF-8 sequence */

size_t
oip_utf8_cut(const uint8_t *p, size_t len, size_t max)
{
    if (len <= max) {
        return len;
    }

    while (max > 0 && (p[max] & 0xc0) == 0x80) {
        max--;
    }

    return max;
}


static int
oip_hex4(const uint8_t *p)
{
    int  a, b, c, d;

    a = oip_hex[p[0]];
    b = oip_hex[p[1]];
    c = oip_hex[p[2]];
    d = oip_hex[p[3]];

    if (a == 0 || b == 0 || c == 0 || d == 0) {
        return -1;
    }

    return ((a - 1) << 12) | ((b - 1) << 8) | ((c - 1) << 4) | (d - 1);
}


int
oip_json_string(oip_json_t *j, oip_str_t *s)
{
    int            cp, lo;
    size_t         n;
    const uint8_t *p, *end;

    p = j->p + 1;
    end = j->end;

    s->data = p;
    s->escaped = 0;

    for ( ;; ) {

        while (p < end && oip_str_map[*p] == 0) {
            p++;
        }

        if (p == end) {
            j->p = p;
            return oip_json_error(j, "unterminated string");
        }

        switch (oip_str_map[*p]) {

        case 1:
            s->len = p - s->data;
            j->p = p + 1;
            return 0;

        case 2:
            s->escaped = 1;

            if (end - p < 2) {
                j->p = p;
                return oip_json_error(j, "unterminated string");
            }

            switch (p[1]) {

            case '"': case '\\': case '/': case 'b':
            case 'f': case 'n': case 'r': case 't':
                p += 2;
                continue;

            case 'u':
                cp = (end - p >= 6) ? oip_hex4(p + 2) : -1;

                if (cp < 0) {
                    j->p = p;
                    return oip_json_error(j, "invalid \\u escape");
                }

                if (cp >= 0xdc00 && cp <= 0xdfff) {
                    j->p = p;
                    return oip_json_error(j, "unpaired low surrogate");
                }

                if (cp >= 0xd800 && cp <= 0xdbff) {
                    lo = (end - p >= 12 && p[6] == '\\' && p[7] == 'u')
                         ? oip_hex4(p + 8) : -1;

                    if (lo < 0xdc00 || lo > 0xdfff) {
                        j->p = p;
                        return oip_json_error(j, "unpaired high surrogate");
                    }

                    p += 12;
                    continue;
                }

                p += 6;
                continue;

            default:
                j->p = p;
                return oip_json_error(j, "invalid escape in string");
            }

        case 3:
            j->p = p;
            return oip_json_error(j, "control character in string");

        default: /* 4 */
            n = oip_utf8_seq(p, end);

            if (n == 0) {
                j->p = p;
                return oip_json_error(j, "invalid UTF-8 in string");
            }

            p += n;
        }
    }
}


static uint8_t *
oip_utf8_put(uint8_t *d, uint32_t cp)
{
    if (cp < 0x80) {
        *d++ = (uint8_t) cp;

    } else if (cp < 0x800) {
        *d++ = (uint8_t) (0xc0 | (cp >> 6));
        *d++ = (uint8_t) (0x80 | (cp & 0x3f));

    } else if (cp < 0x10000) {
        *d++ = (uint8_t) (0xe0 | (cp >> 12));
        *d++ = (uint8_t) (0x80 | ((cp >> 6) & 0x3f));
        *d++ = (uint8_t) (0x80 | (cp & 0x3f));

    } else {
        *d++ = (uint8_t) (0xf0 | (cp >> 18));
        *d++ = (uint8_t) (0x80 | ((cp >> 12) & 0x3f));
        *d++ = (uint8_t) (0x80 | ((cp >> 6) & 0x3f));
        *d++ = (uint8_t) (0x80 | (cp & 0x3f));
    }

    return d;
}


size_t
oip_json_unescape(uint8_t *dst, const oip_str_t *s)
{
    size_t         n;
    uint8_t       *d;
    uint32_t       cp;
    const uint8_t *p, *end, *bs;

    if (!s->escaped) {
        memcpy(dst, s->data, s->len);
        return s->len;
    }

    /* the string was validated by oip_json_string() */

    d = dst;
    p = s->data;
    end = p + s->len;

    while (p < end) {

        bs = memchr(p, '\\', end - p);
        n = (bs ? bs : end) - p;

        memcpy(d, p, n);
        d += n;
        p += n;

        if (p == end) {
            break;
        }

        switch (p[1]) {
        case 'b': *d++ = '\b'; p += 2; break;
        case 'f': *d++ = '\f'; p += 2; break;
        case 'n': *d++ = '\n'; p += 2; break;
        case 'r': *d++ = '\r'; p += 2; break;
        case 't': *d++ = '\t'; p += 2; break;

        case 'u':
            cp = oip_hex4(p + 2);
            p += 6;

            if (cp >= 0xd800 && cp <= 0xdbff) {
                cp = 0x10000 + ((cp - 0xd800) << 10)
                     + ((uint32_t) oip_hex4(p + 2) - 0xdc00);
                p += 6;
            }

            d = oip_utf8_put(d, cp);
            break;

        default: /* '"', '\\', '/' */
            *d++ = p[1];
            p += 2;
        }
    }

    return d - dst;
}


int
oip_json_str_eq(const oip_str_t *s, const char *lit, size_t len)
{
    uint8_t buf[256];

    if (!s->escaped) {
        return s->len == len && memcmp(s->data, lit, len) == 0;
    }

    /* an escape is at most 6 bytes for 1, or 12 for 4 */

    if (s->len > 6 * len || s->len > sizeof(buf)) {
        return 0;
    }

    return oip_json_unescape(buf, s) == len && memcmp(buf, lit, len) == 0;
}


static uint32_t
oip_hash(const uint8_t *p, size_t len)
{
    uint32_t  h;

    h = 2166136261u;

    while (len--) {
        h = (h ^ *p++) * 16777619u;
    }

    return h;
}


/* a key without its hash: object keys are hashed only when many */

static int
oip_key_init(oip_ctx_t *c, const oip_str_t *s, oip_key_t *k)
{
    uint8_t *d;

    k->owned = 0;
    k->hash = 0;

    if (s->escaped) {
        d = oip_alloc(c, s->len);
        if (d == NULL) {
            return -1;
        }

        k->data = d;
        k->len = oip_json_unescape(d, s);
        k->owned = 1;

    } else {
        k->data = s->data;
        k->len = s->len;
    }

    return 0;
}


int
oip_key_make(oip_ctx_t *c, const oip_str_t *s, oip_key_t *k)
{
    if (oip_key_init(c, s, k) != 0) {
        return -1;
    }

    k->hash = oip_hash(k->data, k->len);

    return 0;
}


ptrdiff_t
oip_keys_dup(oip_ctx_t *c, oip_key_t *k, size_t n)
{
    size_t     i, m, size, mask;
    ptrdiff_t  dup;
    uint32_t  *table, slot;

    if (n <= OIP_DUPS_LINEAR) {
        for (i = 1; i < n; i++) {
            for (m = 0; m < i; m++) {
                if (k[i].len == k[m].len
                    && memcmp(k[i].data, k[m].data, k[i].len) == 0)
                {
                    return i;
                }
            }
        }

        return -1;
    }

    /* open addressing; slots hold index + 1 */

    for (size = 64; size < 2 * n; size *= 2) { /* void */ }

    table = oip_alloc(c, size * sizeof(uint32_t));
    if (table == NULL) {
        return -2;
    }

    memset(table, 0, size * sizeof(uint32_t));

    mask = size - 1;
    dup = -1;

    for (i = 0; i < n; i++) {

        k[i].hash = oip_hash(k[i].data, k[i].len);

        for (m = k[i].hash & mask; (slot = table[m]) != 0; m = (m + 1) & mask)
        {
            if (k[slot - 1].hash == k[i].hash && k[slot - 1].len == k[i].len
                && memcmp(k[slot - 1].data, k[i].data, k[i].len) == 0)
            {
                dup = i;
                goto done;
            }
        }

        table[m] = (uint32_t) (i + 1);
    }

done:

    oip_free(c, table);

    return dup;
}


static int
oip_json_push_key(oip_json_t *j, const oip_str_t *key)
{
    oip_key_t  *keys;

    if (j->nodups) {
        return 0;
    }

    if (j->nkeys == j->keys_cap) {
        keys = oip_grow(j->ctx, j->keys, j->nkeys, &j->keys_cap,
                        sizeof(oip_key_t));
        if (keys == NULL) {
            return -1;
        }

        j->keys = keys;
    }

    if (oip_key_init(j->ctx, key, &j->keys[j->nkeys]) != 0) {
        return -1;
    }

    j->nkeys++;

    return 0;
}


static int
oip_json_dups(oip_json_t *j, size_t base)
{
    size_t      i;
    ptrdiff_t   dup;
    oip_key_t  *k;

    if (j->nodups || j->nkeys == base) {
        return 0;
    }

    dup = oip_keys_dup(j->ctx, j->keys + base, j->nkeys - base);

    if (dup == -2) {
        return -1;
    }

    if (dup >= 0) {
        k = &j->keys[base + dup];
        oip_fail(j->ctx, 400, OIP_REASON_SYNTAX, "invalid JSON: duplicate key "
                 "\"%.*s\"", (int) oip_utf8_cut(k->data, k->len, 64), k->data);
    }

    for (i = base; i < j->nkeys; i++) {
        if (j->keys[i].owned) {
            oip_free(j->ctx, (void *) j->keys[i].data);
        }
    }

    j->nkeys = base;

    return dup >= 0 ? -1 : 0;
}


const uint8_t *
oip_num_scan(const uint8_t *p, const uint8_t *end, oip_num_t *n)
{
    int64_t  e;
    int      eneg;

    /* empty spans point at p, not NULL: NULL + 0 is undefined */

    n->start = p;
    n->neg = 0;
    n->has_frac = 0;
    n->has_exp = 0;
    n->special = OIP_NUM_FINITE;
    n->digits = p;
    n->ndigits = 0;
    n->frac = p;
    n->nfrac = 0;
    n->exp = 0;

    if (p < end && *p == '-') {
        n->neg = 1;
        p++;
    }

    if (p == end) {
        return NULL;
    }

    if (*p == 'N') {
        if (n->neg || end - p < 3 || memcmp(p, "NaN", 3) != 0) {
            return NULL;
        }

        n->special = OIP_NUM_NAN;
        p += 3;
        goto done;
    }

    if (*p == 'I') {
        if (end - p < 8 || memcmp(p, "Infinity", 8) != 0) {
            return NULL;
        }

        n->special = OIP_NUM_INF;
        p += 8;
        goto done;
    }

    n->digits = p;

    if (*p == '0') {
        p++;

    } else if (*p >= '1' && *p <= '9') {
        do {
            p++;
        } while (p < end && *p >= '0' && *p <= '9');

    } else {
        return NULL;
    }

    n->ndigits = p - n->digits;
    n->frac = p;

    if (p < end && *p == '.') {
        p++;
        n->frac = p;

        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }

        n->nfrac = p - n->frac;

        if (n->nfrac == 0) {
            return NULL;
        }

        n->has_frac = 1;
    }

    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        eneg = 0;

        if (p < end && (*p == '+' || *p == '-')) {
            eneg = (*p == '-');
            p++;
        }

        if (p == end || *p < '0' || *p > '9') {
            return NULL;
        }

        /* saturate: 1e999999999999 is simply out of every range */

        e = 0;

        do {
            if (e < 1000000000000LL) {
                e = e * 10 + (*p - '0');
            }

            p++;
        } while (p < end && *p >= '0' && *p <= '9');

        n->exp = eneg ? -e : e;
        n->has_exp = 1;
    }

done:

    if (p < end && oip_json_num_tail[*p]) {
        return NULL;
    }

    n->end = p;

    return p;
}


int
oip_json_number(oip_json_t *j, oip_num_t *n)
{
    const uint8_t *p;

    p = oip_num_scan(j->p, j->end, n);

    if (p == NULL) {
        return oip_json_error(j, "invalid number");
    }

    j->p = p;

    return 0;
}


static int
oip_json_literal(oip_json_t *j)
{
    size_t       len;
    const char  *lit;

    switch (*j->p) {
    case 't':
        lit = "true";
        len = 4;
        break;

    case 'f':
        lit = "false";
        len = 5;
        break;

    default:
        lit = "null";
        len = 4;
    }

    if ((size_t) (j->end - j->p) < len || memcmp(j->p, lit, len) != 0) {
        return oip_json_error(j, "invalid literal");
    }

    j->p += len;

    return 0;
}


int
oip_json_object(oip_json_t *j, oip_obj_t *o)
{
    if (++j->depth > j->max_depth) {
        return oip_fail(j->ctx, 400, OIP_REASON_OTHER, "JSON nesting is deeper "
                        "than oip_max_depth (%u)", j->max_depth);
    }

    j->p++;
    o->keys_base = j->nkeys;
    o->n = 0;

    return 0;
}


int
oip_json_member(oip_json_t *j, oip_obj_t *o, oip_str_t *key,
    const uint8_t **key_start)
{
    oip_json_ws(j);

    if (j->p == j->end) {
        return oip_json_error(j, "unterminated object");
    }

    if (*j->p == '}') {
        j->p++;
        j->depth--;
        return oip_json_dups(j, o->keys_base);
    }

    if (o->n) {
        if (*j->p != ',') {
            return oip_json_error(j, "expected ',' or '}'");
        }

        /* every member is remembered until the object ends */

        if (o->n == OIP_MAX_MEMBERS) {
            return oip_fail(j->ctx, 413, OIP_REASON_LIMIT, "a JSON object with "
                            "more than %d members", OIP_MAX_MEMBERS);
        }

        j->p++;
        oip_json_ws(j);

        if (j->p == j->end) {
            return oip_json_error(j, "unterminated object");
        }
    }

    if (*j->p != '"') {
        return oip_json_error(j, "expected a string key");
    }

    if (key_start) {
        *key_start = j->p;
    }

    if (oip_json_string(j, key) != 0 || oip_json_push_key(j, key) != 0) {
        return -1;
    }

    oip_json_ws(j);

    if (j->p == j->end || *j->p != ':') {
        return oip_json_error(j, "expected ':'");
    }

    j->p++;
    oip_json_ws(j);

    if (j->p == j->end || !oip_value_start[*j->p]) {
        return oip_json_error(j, "expected a value");
    }

    o->n++;

    return 1;
}


int
oip_json_array(oip_json_t *j, oip_arr_t *a)
{
    if (++j->depth > j->max_depth) {
        return oip_fail(j->ctx, 400, OIP_REASON_OTHER, "JSON nesting is deeper "
                        "than oip_max_depth (%u)", j->max_depth);
    }

    j->p++;
    a->n = 0;

    return 0;
}


int
oip_json_element(oip_json_t *j, oip_arr_t *a)
{
    oip_json_ws(j);

    if (j->p == j->end) {
        return oip_json_error(j, "unterminated array");
    }

    if (*j->p == ']') {
        j->p++;
        j->depth--;
        return 0;
    }

    if (a->n) {
        if (*j->p != ',') {
            return oip_json_error(j, "expected ',' or ']'");
        }

        j->p++;
        oip_json_ws(j);

        if (j->p == j->end) {
            return oip_json_error(j, "unterminated array");
        }
    }

    if (!oip_value_start[*j->p]) {
        return oip_json_error(j, "expected a value");
    }

    a->n++;

    return 1;
}


/* the value at j->p is the literal null: 1, and it is passed; else 0 */

int
oip_json_null(oip_json_t *j)
{
    if (j->end - j->p < 4 || memcmp(j->p, "null", 4) != 0) {
        return 0;
    }

    /* what follows is the caller's to check: "nullx" is broken there */

    j->p += 4;

    return 1;
}


/*
 * Validates the whole document: the request code reports semantic
 * errors as it meets them, and calls this first so that broken JSON is
 * always reported as such, whatever came before the break.
 */

int
oip_json_check(oip_json_t *j)
{
    j->p = j->start;
    j->depth = 0;

    oip_json_ws(j);

    if (oip_json_skip(j) != 0) {
        return -1;
    }

    oip_json_ws(j);

    if (j->p != j->end) {
        return oip_json_error(j, "unexpected bytes after the JSON value");
    }

    return 0;
}


/*
 * Skips one value, validating all of it.  Iterative: the nesting limit
 * is the operator's to set and must not become a C stack limit.
 */

int
oip_json_skip(oip_json_t *j)
{
    int              rc;
    size_t           top;
    oip_str_t        s;
    oip_num_t        n;
    oip_frame_t     *f, *frames;

    top = 0;
    f = NULL;

value:

    if (j->p == j->end) {
        return oip_json_error(j, "missing value");
    }

    if (!oip_value_start[*j->p]) {
        return oip_json_error(j, "expected a value");
    }

    switch (*j->p) {

    case '{':
    case '[':
        if (top == j->frames_cap) {
            frames = oip_grow(j->ctx, j->frames, top, &j->frames_cap,
                              sizeof(oip_frame_t));
            if (frames == NULL) {
                return -1;
            }

            j->frames = frames;
        }

        f = &j->frames[top++];
        f->object = (*j->p == '{');

        if (f->object) {
            if (oip_json_object(j, &f->u.o) != 0) {
                return -1;
            }

        } else if (oip_json_array(j, &f->u.a) != 0) {
            return -1;
        }

        goto next;

    case '"':
        if (oip_json_string(j, &s) != 0) {
            return -1;
        }

        break;

    case 't':
    case 'f':
    case 'n':
        if (oip_json_literal(j) != 0) {
            return -1;
        }

        break;

    default:
        if (oip_json_number(j, &n) != 0) {
            return -1;
        }
    }

    if (top == 0) {
        return 0;
    }

next:

    /* a large value skipped: the input behind it may go */
    oip_progress(j->ctx, j->p);

    f = &j->frames[top - 1];

    rc = f->object ? oip_json_member(j, &f->u.o, &s, NULL)
                   : oip_json_element(j, &f->u.a);

    if (rc < 0) {
        return -1;
    }

    if (rc == 1) {
        goto value;
    }

    if (--top == 0) {
        return 0;
    }

    goto next;
}


/*
 * A name with a control character (\u0000 above all) may be cut short by
 * C code upstream: two names distinct here would be one there.
 */

int
oip_name_controls(const oip_str_t *s)
{
    size_t         i;
    const uint8_t *p;

    /* raw control bytes cannot be in a valid string: only escapes can */

    p = s->data;

    for (i = 0; s->escaped && i + 1 < s->len; i++) {

        if (p[i] != '\\') {
            continue;
        }

        switch (p[i + 1]) {

        case 'b': case 'f': case 'n': case 'r': case 't':
            return 1;

        case 'u':
            if (p[i + 2] == '0' && p[i + 3] == '0'
                && (p[i + 4] == '0' || p[i + 4] == '1'))
            {
                return 1;
            }
        }

        i++;    /* past the escaped character */
    }

    return 0;
}


size_t
oip_json_unescaped_len(const oip_str_t *s)
{
    size_t         n;
    int            cp;
    const uint8_t *p, *end;

    if (!s->escaped) {
        return s->len;
    }

    n = 0;
    p = s->data;
    end = p + s->len;

    while (p < end) {

        if (*p != '\\') {
            n++;
            p++;
            continue;
        }

        if (p[1] != 'u') {
            n++;
            p += 2;
            continue;
        }

        cp = oip_hex4(p + 2);

        if (cp >= 0xd800 && cp <= 0xdbff) {
            n += 4;
            p += 12;

        } else {
            n += (cp < 0x80) ? 1 : (cp < 0x800) ? 2 : 3;
            p += 6;
        }
    }

    return n;
}


/*
 * Escapes bytes for a JSON string.  Invalid UTF-8 becomes '?': callers
 * check BYTES first, and an error message must never break its JSON.
 */

size_t
oip_json_escape(uint8_t *dst, const uint8_t *src, size_t len)
{
    size_t         n, seq;
    uint8_t        c;
    const uint8_t *end;

    static const uint8_t hex[] = "0123456789abcdef";

    n = 0;
    end = src + len;

    while (src < end) {
        c = *src;

        if (c >= 0x80) {
            seq = oip_utf8_seq(src, end);

            if (seq == 0) {
                if (dst) {
                    dst[n] = '?';
                }

                n++;
                src++;
                continue;
            }

            if (dst) {
                memcpy(dst + n, src, seq);
            }

            n += seq;
            src += seq;
            continue;
        }

        src++;

        if (c >= 0x20 && c != '"' && c != '\\') {
            if (dst) {
                dst[n] = c;
            }

            n++;
            continue;
        }

        if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t'
            || c == '\b' || c == '\f')
        {
            if (dst) {
                dst[n] = '\\';
                dst[n + 1] = (c == '\n') ? 'n' : (c == '\r') ? 'r'
                             : (c == '\t') ? 't' : (c == '\b') ? 'b'
                             : (c == '\f') ? 'f' : c;
            }

            n += 2;
            continue;
        }

        if (dst) {
            memcpy(dst + n, "\\u00", 4);
            dst[n + 4] = hex[c >> 4];
            dst[n + 5] = hex[c & 0xf];
        }

        n += 6;
    }

    return n;
}

