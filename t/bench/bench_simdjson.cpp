
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The bench's best-library contender: simdjson's On-Demand API
 * (Debian's libsimdjson-dev) doing what the codec does to a JSON
 * request, JSON -> binary: read the request's envelope (each input's
 * name, shape, datatype), convert its "data" to little-endian bytes, and
 * write the binary request (its JSON header, then the chunks).  In the
 * bench only, never in the module.
 */


#include <simdjson.h>

#include <charconv>
#include <cstring>
#include <string_view>


extern "C" {

#include <stdint.h>

uint16_t oip_double_to_fp16(double d);

int bench_simdjson_j2b(const unsigned char *json, size_t len, size_t cap,
    unsigned char *out, size_t *out_len, unsigned char **chunk,
    size_t *chunk_len);

}


using namespace simdjson;


/* the header as fast as it goes: memcpy and to_chars, no printf */

static inline char *
put(char *p, std::string_view s)
{
    memcpy(p, s.data(), s.size());
    return p + s.size();
}


static inline char *
put_u(char *p, uint64_t v)
{
    return std::to_chars(p, p + 20, v).ptr;
}


/*
 * json: len bytes, readable to cap (SIMDJSON_PADDING beyond len); out:
 * room for the binary request.  0, or -1 when simdjson refused it.
 */

int
bench_simdjson_j2b(const unsigned char *json, size_t len, size_t cap,
    unsigned char *out, size_t *out_len, unsigned char **chunk,
    size_t *chunk_len)
{
    static ondemand::parser  parser;

    char              *h;
    size_t             n;
    uint64_t           dims[8];
    unsigned char     *o;
    std::string_view   name, dt;

    /* the header is written at the front, the chunk after its room */

    h = (char *) out;
    o = out + 4096;
    n = 0;

    padded_string_view  text((const char *) json, len, cap);

    ondemand::document  doc;

    if (parser.iterate(text).get(doc)) {
        return -1;
    }

    ondemand::array  inputs;

    if (doc["inputs"].get_array().get(inputs)) {
        return -1;
    }

    h = put(h, "{\"inputs\":[");

    for (auto in : inputs) {
        ondemand::object  obj;
        unsigned char    *start = o;

        if (in.get_object().get(obj)) {
            return -1;
        }

        for (auto field : obj) {
            /* compared raw, not unescaped: On-Demand's fast way */

            ondemand::raw_json_string  key;

            if (field.key().get(key)) {
                return -1;
            }

            if (key == "name") {
                if (field.value().get_string().get(name)) {
                    return -1;
                }

            } else if (key == "datatype") {
                if (field.value().get_string().get(dt)) {
                    return -1;
                }

            } else if (key == "shape") {
                n = 0;

                for (auto d : field.value().get_array()) {
                    uint64_t  v;

                    if (n == 8 || d.get_uint64().get(v)) {
                        return -1;
                    }

                    dims[n++] = v;
                }

            } else if (key == "data") {
                ondemand::array  arr;

                if (field.value().get_array().get(arr)) {
                    return -1;
                }

                /* the datatype chosen once, not per element */

                if (dt == "FP32") {
                    for (auto e : arr) {
                        double  d;
                        float   f;

                        if (e.get_double().get(d)) {
                            return -1;
                        }
                        f = (float) d;
                        memcpy(o, &f, 4);
                        o += 4;
                    }

                } else if (dt == "FP64") {
                    for (auto e : arr) {
                        double  d;

                        if (e.get_double().get(d)) {
                            return -1;
                        }
                        memcpy(o, &d, 8);
                        o += 8;
                    }

                } else if (dt == "INT64") {
                    for (auto e : arr) {
                        int64_t  v;

                        if (e.get_int64().get(v)) {
                            return -1;
                        }
                        memcpy(o, &v, 8);
                        o += 8;
                    }

                } else if (dt == "FP16") {
                    for (auto e : arr) {
                        double    d;
                        uint16_t  hf;

                        if (e.get_double().get(d)) {
                            return -1;
                        }
                        hf = oip_double_to_fp16(d);
                        memcpy(o, &hf, 2);
                        o += 2;
                    }

                } else if (dt == "BYTES") {
                    for (auto e : arr) {
                        std::string_view  sv;
                        uint32_t          l;

                        if (e.get_string().get(sv)) {
                            return -1;
                        }
                        l = (uint32_t) sv.size();
                        memcpy(o, &l, 4);
                        memcpy(o + 4, sv.data(), sv.size());
                        o += 4 + sv.size();
                    }

                } else {
                    return -1;
                }
            }
        }

        if (h != (char *) out + 11) {
            *h++ = ',';
        }

        h = put(h, "{\"name\":\"");
        h = put(h, name);
        h = put(h, "\",\"shape\":[");

        for (size_t i = 0; i < n; i++) {
            if (i) {
                *h++ = ',';
            }
            h = put_u(h, dims[i]);
        }

        h = put(h, "],\"datatype\":\"");
        h = put(h, dt);
        h = put(h, "\",\"parameters\":{\"binary_data_size\":");
        h = put_u(h, (uint64_t) (o - start));
        h = put(h, "}}");
    }

    h = put(h, "]}");

    *out_len = (size_t) (h - (char *) out) + (size_t) (o - (out + 4096));
    *chunk = out + 4096;
    *chunk_len = (size_t) (o - (out + 4096));

    return 0;
}
