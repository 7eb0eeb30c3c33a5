
/*
 * Copyright (C) ngx_oip_module authors
 *
 * What the codec's libFuzzer targets share: the unit tests' arena
 * allocator (t/unit/arena.h: a pool that tracks every block and fails
 * on demand), a property check, and checks of what the codec hands
 * back.
 */


#ifndef _OIP_FUZZ_H_INCLUDED_
#define _OIP_FUZZ_H_INCLUDED_


#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oip_codec.h"
#include "../unit/arena.h"


/* a violated property: libFuzzer reports it with the input */

#define fz_assert(cond, what)                                                 \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz property violated at %s:%d: %s\n",          \
                    __FILE__, __LINE__, what);                                \
            abort();                                                          \
        }                                                                     \
    } while (0)


/* what the compiler may not throw away: every output byte is read */

static volatile unsigned  fz_sink;


static inline uint32_t
fz_le32(const u_char *p)
{
    return (uint32_t) p[0] | ((uint32_t) p[1] << 8)
           | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}


/*
 * Segments of a rewritten message: they add up to body_len, the header
 * fits in the body, every byte is readable (ASan checks each one).
 */

static void
fz_segs_check(const oip_seg_t *segs, size_t nsegs, size_t header_len,
    size_t body_len)
{
    size_t         i, j, total;
    unsigned       sum;
    const u_char  *p;

    fz_assert(header_len <= body_len, "header_len > body_len");
    fz_assert(nsegs == 0 || segs != NULL, "segments missing");

    total = 0;
    sum = 0;

    for (i = 0; i < nsegs; i++) {
        fz_assert(segs[i].len == 0 || segs[i].data != NULL,
                  "a segment without data");

        /* the fuzzers give no body that is a file's (opt.body_file) */
        fz_assert(segs[i].file == -1, "a segment says it is in a file");

        p = segs[i].data;

        for (j = 0; j < segs[i].len; j++) {
            sum = sum * 31 + p[j];
        }

        total += segs[i].len;
    }

    fz_assert(total == body_len, "segments do not add up to body_len");

    fz_sink += sum;
}


static void
fz_error_check(int status, const char *error, oip_reason_e reason)
{
    size_t  n;

    n = strnlen(error, OIP_ERROR_LEN);

    fz_assert(n < OIP_ERROR_LEN, "error is not NUL-terminated");

    if (status == 0) {
        /* a failure recorded but not returned would be swallowed */
        fz_assert(n == 0, "status 0 with an error message");
        fz_assert(reason == OIP_REASON_NONE, "status 0 with a reason");

    } else {
        fz_assert(n > 0, "a failure without an error message");

        /* every refusal says why, for programs: one of the codec's */
        fz_assert(reason >= OIP_REASON_SYNTAX && reason <= OIP_REASON_OTHER,
                  "a failure without its reason");
    }
}


/* the segments as one malloc'ed buffer of exactly their length */

static u_char *
fz_flatten(const oip_seg_t *segs, size_t nsegs, size_t total)
{
    size_t   i;
    u_char  *out, *p;

    out = malloc(total ? total : 1);
    fz_assert(out != NULL, "malloc");

    p = out;

    for (i = 0; i < nsegs; i++) {
        if (segs[i].len) {
            memcpy(p, segs[i].data, segs[i].len);
            p += segs[i].len;
        }
    }

    return out;
}


/*
 * An IHCL from the config: absent, an absolute offset (stable when the
 * binary tail mutates), an offset from the end (stable when the JSON
 * mutates), or 0 (a raw binary request).
 */

static inline off_t
fz_ihcl(unsigned mode, const u_char *v, size_t len)
{
    uint64_t  x;

    x = fz_le32(v);

    switch (mode & 3) {

    case 0:
        return -1;

    case 1:
        /* len + 1 is past the end: that error too */
        return (off_t) (x % ((uint64_t) len + 2));

    case 2:
        return (off_t) (len - x % ((uint64_t) len + 1));

    default:
        return 0;
    }
}


/* the sink's file, in memory */

typedef struct {
    u_char               *data;
    size_t                cap;
    size_t                len;       /* the end of what was written */
} fz_file_t;


typedef struct {
    fz_file_t             body;      /* the sink's file */
    size_t                told;      /* how many times behind() was */
    u_char               *inflated;  /* the first file, once remapped */
    fz_file_t             head;      /* the head file */
} fz_spool_t;


static void
fz_file_write(fz_file_t *f, const uint8_t *p, size_t len, uint64_t off)
{
    size_t   cap;
    u_char  *d;

    fz_assert(len > 0, "an empty write");

    if (off + len > f->cap) {
        cap = (off + len) * 2;
        d = realloc(f->data, cap);
        fz_assert(d != NULL, "realloc");
        memset(d + f->cap, 0xee, cap - f->cap);
        f->data = d;
        f->cap = cap;
    }

    memcpy(f->data + off, p, len);

    if (off + len > f->len) {
        f->len = off + len;
    }
}


static int
fz_spool_write(void *data, const uint8_t *p, size_t len, uint64_t off)
{
    fz_spool_t *fs = data;

    fz_file_write(&fs->body, p, len, off);

    return 0;
}


static int
fz_spool_head(void *data, const uint8_t *p, size_t len, uint64_t off)
{
    fz_spool_t *fs = data;

    fz_file_write(&fs->head, p, len, off);

    return 0;
}


/* the head file's bytes read back: only what was written, whole pieces */

static int
fz_spool_read(void *data, uint8_t *p, size_t len, uint64_t off)
{
    fz_spool_t *fs = data;

    fz_assert(len > 0 && off <= fs->head.len && len <= fs->head.len - off,
              "read back what was not written");

    memcpy(p, fs->head.data + off, len);

    return 0;
}


static void
fz_spool_behind(void *data, const uint8_t *p)
{
    fz_spool_t *fs = data;

    fz_assert(p != NULL, "told of no place");
    fs->told++;
}


/* bytes read again (a digest's), let go: the sink's body holds them */

static void
fz_spool_drop(void *data, const uint8_t *p, size_t len)
{
    fz_spool_t *fs = data;

    fz_assert(p != NULL && len > 0, "let go of nothing");
    fs->told++;
}


/* the inflated body written so far, "mapped": writes go on anew */

static const uint8_t *
fz_spool_remap(void *data, uint64_t len)
{
    fz_spool_t *fs = data;

    fz_assert(fs->inflated == NULL, "remapped twice");
    fz_assert(len == fs->body.len,
              "remapped at another length than written");

    fs->inflated = fs->body.data ? fs->body.data : malloc(1);
    fz_assert(fs->inflated != NULL, "malloc");
    fs->body.data = NULL;
    fs->body.cap = 0;
    fs->body.len = 0;

    return fs->inflated;
}


/* a sink of a small block over fs, its block from the body's length */

static void
fz_spool_init(oip_sink_t *sink, fz_spool_t *fs, size_t len)
{
    memset(fs, 0, sizeof(fz_spool_t));

    sink->data = fs;
    sink->write = fz_spool_write;
    sink->behind = fz_spool_behind;
    sink->block = 64 + (len % 7) * 8;
    sink->what = "message";
    sink->remap = fz_spool_remap;
    sink->drop = fz_spool_drop;

    /* a head file, or the JSON in memory, by the body's length too */
    sink->head = (len & 8) ? fz_spool_head : NULL;
    sink->read = (len & 8) ? fz_spool_read : NULL;
}


static void
fz_spool_free(fz_spool_t *fs)
{
    free(fs->body.data);
    free(fs->inflated);
    free(fs->head.data);
}


/*
 * A message made again with a sink (res, its file fs) against the same
 * made without (plain): the same verdict, framing and bytes, its JSON in
 * segments and the rest in the file (all in the file when all is JSON;
 * a ModelInferRequest's raw contents in the file, the rest in segments),
 * nothing written past it.
 */

static void
fz_spooled_same(const oip_result_t *req, const oip_result_t *r,
    const fz_spool_t *fs)
{
    size_t   flen;
    u_char  *plain, *spooled, *file;

    fz_assert(r->status == req->status, "a sink changed the verdict");
    fz_assert(r->status != 0 || !r->head || (fs->head.len == r->header_len
                                             && r->nsegs == 0),
              "the head file is not the JSON");
    fz_assert(r->status == 0 || strcmp(r->error, req->error) == 0,
              "a sink changed the error");

    if (r->status == 0) {
        fz_assert(r->rewritten == req->rewritten
                  && r->body_len == req->body_len
                  && r->binary == req->binary
                  && (r->header_len == req->header_len
                      || (r->header_len == 0 && r->nsegs == 0
                          && r->spooled == r->body_len)
                      || (req->header_len == 0 && req->content_type
                          && strcmp(req->content_type, OIP_TYPE_GRPC)
                             == 0)),
                  "a sink changed the body's framing");
        fz_assert(r->rewritten || r->spooled == 0,
                  "a body kept as it came, yet something spooled");

        /* the deadline's place: where its digits are, memory or file */

        file = r->head ? fs->head.data : fs->body.data;
        flen = r->head ? fs->head.len : fs->body.len;

        fz_assert(r->deadline_len == req->deadline_len
                  && (r->deadline_len == 0
                      || (r->deadline_filed
                          ? r->deadline_at == NULL
                            && r->deadline_off <= flen
                            && r->deadline_len <= flen - r->deadline_off
                            && memcmp(file + r->deadline_off,
                                      req->deadline_at, r->deadline_len)
                               == 0
                          : r->deadline_at != NULL
                            && memcmp(r->deadline_at, req->deadline_at,
                                      r->deadline_len) == 0)),
                  "a sink lost the deadline's place");
    }

    if (r->status == 0 && r->rewritten) {
        fz_assert(r->spooled == fs->body.len
                  && r->body_len == r->header_len + r->spooled,
                  "the sink's file is not the body after its JSON");
        fz_segs_check(r->segs, r->nsegs, r->head ? 0 : r->header_len,
                      r->head ? 0 : r->header_len);

        plain = fz_flatten(req->segs, req->nsegs, req->body_len);
        spooled = r->head ? fz_flatten(&(oip_seg_t) { fs->head.data,
                                                      r->header_len, -1 },
                                       1, r->header_len)
                          : fz_flatten(r->segs, r->nsegs, r->header_len);

        fz_assert(memcmp(plain, spooled, r->header_len) == 0
                  && (fs->body.len == 0
                      || memcmp(plain + r->header_len, fs->body.data,
                                fs->body.len)
                         == 0),
                  "a sink changed the bytes sent");

        free(plain);
        free(spooled);
    }
}


#endif /* _OIP_FUZZ_H_INCLUDED_ */
