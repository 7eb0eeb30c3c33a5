
/*
 * Copyright (C) ngx_oip_module authors
 *
 * What a message's headers say of its body: the JSON header's length
 * (Inference-Header-Content-Length, or the json-header-size parameter
 * of the media types Triton's SageMaker and Vertex AI endpoints use,
 * where custom headers cannot pass) and a request's Content-Encoding.
 */


#include <stdio.h>
#include <string.h>

#include "oip_codec.h"


typedef struct {
    const char            *type;       /* type/subtype, lower case */
    size_t                 len;
} oip_carrier_t;


static const oip_carrier_t  oip_carriers[] = {
    { "", 0 },                                     /* OIP_CARRIER_HEADER */
    { OIP_TYPE_SAGEMAKER, sizeof(OIP_TYPE_SAGEMAKER) - 1 },
    { OIP_TYPE_VERTEX, sizeof(OIP_TYPE_VERTEX) - 1 }
};


#define OIP_HEADER_SIZE      "json-header-size"


static int oip_carrier_parse(const oip_header_t *type,
    oip_carrier_e *carrier, int64_t *size);
static int oip_carrier_merge(oip_result_t *res, oip_framing_t *f,
    const oip_header_t *type, int status, const char *what);
static int oip_same(const uint8_t *p, const char *lower, size_t len);
static int oip_encoding_is(const oip_header_t *h, const char *token,
    size_t len);


int
oip_request_framing(oip_result_t *res, oip_framing_t *f,
    const oip_header_t *ihcl, const oip_header_t *encoding,
    const oip_header_t *type)
{
    uint64_t  n;

    memset(res, 0, sizeof(oip_result_t));

    f->ihcl = -1;
    f->encoding = OIP_ENC_NONE;
    f->carrier = OIP_CARRIER_HEADER;
    f->protobuf = 0;
    f->stream = 0;
    f->stream = 0;

    if (oip_encoding_is(encoding, "gzip", 4)) {
        f->encoding = OIP_ENC_GZIP;

    } else if (oip_encoding_is(encoding, "deflate", 7)) {
        f->encoding = OIP_ENC_DEFLATE;

    } else if (encoding->count && !oip_encoding_is(encoding, "identity", 8))
    {
        snprintf(res->error, OIP_ERROR_LEN, "Content-Encoding must be gzip, "
                 "deflate or identity");
        res->reason = OIP_REASON_ENCODING;
        return res->status = 415;
    }

    if (ihcl->count > 1) {
        snprintf(res->error, OIP_ERROR_LEN, "Inference-Header-Content-Length "
                 "appears more than once");
        res->reason = OIP_REASON_SHAPE;
        return res->status = 400;
    }

    if (ihcl->count == 1) {
        if (oip_ihcl_parse(ihcl->data, ihcl->len, &n) != 0
            || n > (uint64_t) INT64_MAX)
        {
            snprintf(res->error, OIP_ERROR_LEN, "Inference-Header-Content-"
                     "Length must be a decimal number without sign or "
                     "leading zeros");
            res->reason = OIP_REASON_SHAPE;
            return res->status = 400;
        }

        f->ihcl = (int64_t) n;
    }

    return oip_carrier_merge(res, f, type, 400, "");
}


int
oip_response_framing(oip_result_t *res, oip_framing_t *f,
    const oip_header_t *ihcl, const oip_header_t *type)
{
    uint64_t  n;

    memset(res, 0, sizeof(oip_result_t));

    f->ihcl = -1;
    f->encoding = OIP_ENC_NONE;
    f->carrier = OIP_CARRIER_HEADER;
    f->protobuf = 0;

    if (ihcl->count) {
        if (ihcl->count > 1
            || oip_ihcl_parse(ihcl->data, ihcl->len, &n) != 0
            || n > (uint64_t) INT64_MAX)
        {
            snprintf(res->error, OIP_ERROR_LEN, "upstream answer: a bad "
                     "Inference-Header-Content-Length");
            res->reason = OIP_REASON_SHAPE;
            return res->status = 502;
        }

        f->ihcl = (int64_t) n;
    }

    return oip_carrier_merge(res, f, type, 502, "upstream answer: ");
}


/* the media type's json-header-size, checked against the header's IHCL */

static int
oip_carrier_merge(oip_result_t *res, oip_framing_t *f,
    const oip_header_t *type, int status, const char *what)
{
    int64_t  size;

    if (type == NULL) {
        return 0;
    }

    if (oip_carrier_parse(type, &f->carrier, &size) != 0) {
        snprintf(res->error, OIP_ERROR_LEN, "%sthe Content-Type's "
                 OIP_HEADER_SIZE " (its Inference-Header-Content-Length) "
                 "must be one decimal number without sign or leading zeros",
                 what);
        res->reason = OIP_REASON_SHAPE;
        return res->status = status;
    }

    if (size < 0) {
        return 0;
    }

    if (f->ihcl >= 0 && f->ihcl != size) {
        snprintf(res->error, OIP_ERROR_LEN, "%sInference-Header-Content-"
                 "Length %lld and the Content-Type's " OIP_HEADER_SIZE
                 " %lld differ", what, (long long) f->ihcl,
                 (long long) size);
        res->reason = OIP_REASON_SHAPE;
        return res->status = status;
    }

    f->ihcl = size;

    return 0;
}


/*
 * A media type (RFC 9110: type "/" subtype *(OWS ";" OWS name "="
 * value), names in any case, a value a token or a quoted string).  Not
 * one of the carriers: 0, OIP_CARRIER_HEADER.  One: its json-header-size,
 * or -1 without one.  -1: the size is not a number, or comes twice.
 */

static int
oip_carrier_parse(const oip_header_t *type, oip_carrier_e *carrier,
    int64_t *size)
{
    size_t          i, n;
    uint64_t        v;
    const uint8_t  *p, *end, *name, *value;

    *carrier = OIP_CARRIER_HEADER;
    *size = -1;

    if (type->count == 0) {
        return 0;
    }

    p = type->data;
    end = p + type->len;

    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }

    for (i = 1; i < sizeof(oip_carriers) / sizeof(oip_carriers[0]); i++) {
        n = oip_carriers[i].len;

        if ((size_t) (end - p) >= n && oip_same(p, oip_carriers[i].type, n)
            && (p + n == end || p[n] == ';' || p[n] == ' ' || p[n] == '\t'))
        {
            break;
        }
    }

    if (i == sizeof(oip_carriers) / sizeof(oip_carriers[0])) {
        return 0;
    }

    *carrier = (oip_carrier_e) i;
    p += oip_carriers[i].len;

    for ( ;; ) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ';')) {
            p++;
        }

        if (p == end) {
            return 0;
        }

        name = p;

        while (p < end && *p != '=' && *p != ';') {
            p++;
        }

        if (p == end || *p == ';') {
            /* a parameter without a value: not one we read */
            continue;
        }

        n = p - name;
        value = ++p;

        if (p < end && *p == '"') {
            value = ++p;

            while (p < end && *p != '"') {
                p += (*p == '\\' && p + 1 < end) ? 2 : 1;
            }

            if (p >= end) {
                return -1;
            }

            v = p++ - value;

        } else {
            while (p < end && *p != ';' && *p != ' ' && *p != '\t') {
                p++;
            }

            v = p - value;
        }

        if (n != sizeof(OIP_HEADER_SIZE) - 1
            || !oip_same(name, OIP_HEADER_SIZE, n))
        {
            continue;
        }

        if (*size >= 0) {
            return -1;
        }

        if (oip_ihcl_parse(value, (size_t) v, &v) != 0
            || v > (uint64_t) INT64_MAX)
        {
            return -1;
        }

        *size = (int64_t) v;
    }
}


size_t
oip_carrier_type(oip_carrier_e carrier, int64_t size, char *buf,
    size_t len)
{
    int  n;

    if (size < 0) {
        n = snprintf(buf, len, "%s", oip_carriers[carrier].type);

    } else {
        n = snprintf(buf, len, "%s;" OIP_HEADER_SIZE "=%lld",
                     oip_carriers[carrier].type, (long long) size);
    }

    return (n < 0 || (size_t) n >= len) ? 0 : (size_t) n;
}


int
oip_ihcl_parse(const uint8_t *v, size_t len, uint64_t *n)
{
    size_t    i;
    uint64_t  x;

    /* digits only; "0" alone, never "00" or "+1" or " 1" */

    if (len == 0 || (v[0] == '0' && len > 1)) {
        return -1;
    }

    x = 0;

    for (i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9'
            || x > (UINT64_MAX - (v[i] - '0')) / 10)
        {
            return -1;
        }

        x = x * 10 + (v[i] - '0');
    }

    *n = x;

    return 0;
}


/* p holds lower, in any case */

static int
oip_same(const uint8_t *p, const char *lower, size_t len)
{
    size_t   i;
    uint8_t  c;

    for (i = 0; i < len; i++) {
        c = p[i];

        if (c >= 'A' && c <= 'Z') {
            c |= 0x20;
        }

        if (c != (uint8_t) lower[i]) {
            return 0;
        }
    }

    return 1;
}


/* the header came once, and is that token (any case) */

static int
oip_encoding_is(const oip_header_t *h, const char *token, size_t len)
{
    size_t  i;

    if (h->count != 1 || h->len != len) {
        return 0;
    }

    for (i = 0; i < len; i++) {
        if ((h->data[i] | 0x20) != (uint8_t) token[i]) {
            return 0;
        }
    }

    return 1;
}
