
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The pipeline that requests and answers both run: an envelope whose
 * "inputs" or "outputs" array holds tensor objects, their data JSON or
 * a binary chunk after the JSON.  oip_request.c and oip_response.c are
 * two kinds of message: what their envelope holds besides the tensors,
 * and what to do with each tensor.
 */


#ifndef _OIP_MESSAGE_H_INCLUDED_
#define _OIP_MESSAGE_H_INCLUDED_


#include "oip_tensor.h"


/* tensors in one message: what a model has, far beyond; bounds memory */
#define OIP_MAX_TENSORS      65536

/* the form of a message's tensors, one more tensor seen */
#define oip_shape_add(all, one)                                               \
    (((all) == OIP_SHAPE_NONE || (all) == (one)) ? (one) : OIP_SHAPE_MIXED)


/* where a member lies, to delete it with one comma next to it */

typedef struct {
    const uint8_t         *key;        /* the key's opening quote */
    const uint8_t         *value_end;
    const uint8_t         *prev_end;   /* the previous value's end, or NULL */
    const uint8_t         *next_key;   /* the next member's key, or NULL */
} oip_member_t;


/*
 * A walk over an object's members that keeps what deleting one needs:
 * where the value before it ends, and, once it is seen, where the key
 * after it starts.  oip_walk_note() keeps the member just passed.
 */

typedef struct {
    oip_obj_t              o;
    oip_str_t              key;
    const uint8_t         *key_start;
    const uint8_t         *prev_end;   /* the value before, or NULL */
    oip_member_t          *pending;    /* waits for the key after it */
    unsigned               started:1;
} oip_walk_t;


/*
 * Null means absent: an optional member whose value is null is taken as
 * missing and deleted from what is sent on.  A walk over an object notes
 * such members here and deletes them once the object is whole (only then
 * is the key after each known).  An object has at most four optional
 * members; more nulls mean a duplicate key, which the scanner refuses.
 */

#define OIP_NULLS_MAX        4

typedef struct {
    oip_member_t           m[OIP_NULLS_MAX];
    oip_member_t           spare;
    size_t                 n;
} oip_nulls_t;


typedef enum {
    OIP_ACT_PASS = 0,        /* leave it; its data is not looked into */
    OIP_ACT_CHECK,           /* leave it; its data is validated */
    OIP_ACT_BINARY,          /* JSON data to a binary chunk */
    OIP_ACT_JSON,            /* a binary chunk to JSON data */
    OIP_ACT_DROP,            /* out, chunk and all: nobody asked for it */
    OIP_ACT_FAIL             /* refused: the error is in the context */
} oip_act_e;


typedef struct {
    oip_str_t              name;
    oip_tensor_t           t;
    size_t                 index;
    oip_member_t           elem;       /* the object in its array */

    /* values looked at once the whole tensor object is known */
    const uint8_t         *dt_at;
    const uint8_t         *dt_end;
    const uint8_t         *shape_at;
    const uint8_t         *params_at;
    const uint8_t         *data_at;

    oip_member_t           data;
    oip_member_t           params;
    oip_member_t           bds;        /* in parameters */
    const uint8_t         *params_close;
    size_t                 params_n;
    const uint8_t         *close;      /* the object's '}' */

    uint64_t               bds_size;
    const uint8_t         *bin;        /* its chunk */

    /* read from protobuf: its parameters as JSON members, no braces */
    oip_seg_t              params_json;

    oip_seg_t             *chunk;      /* its data made binary, or NULL */
    size_t                 nchunk;
    size_t                 chunk_len;
    oip_seg_t              one;        /* ... when it is one piece */

    oip_act_e              act;

    uint64_t               sink_at;    /* its chunk in the sink's file */

    unsigned               has_name:1;
    unsigned               has_bds:1;
    unsigned               has_shm:1;
    unsigned               settled:1;
    unsigned               data_done:1;
    unsigned               spooled:1;  /* converted to the sink's file */
    unsigned               reserved:1; /* its chunk copied there later */
} oip_item_t;


typedef enum {
    OIP_EDIT_DELETE = 0,
    OIP_EDIT_TEXT,           /* static text */
    OIP_EDIT_PARAMS_NEW,     /* "parameters":{"binary_data_size":N} */
    OIP_EDIT_BDS_ADD,        /* ,"binary_data_size":N */
    OIP_EDIT_DATA_REPLACE,   /* "data":[...] */
    OIP_EDIT_DATA_ADD,       /* ,"data":[...] */
    OIP_EDIT_SLOT            /* the bytes as they are, their place kept */
} oip_edit_e;


typedef struct {
    const uint8_t         *from;       /* the JSON bytes replaced */
    const uint8_t         *to;
    oip_edit_e             kind;
    oip_item_t            *item;
    const char            *text;
    size_t                 len;
    oip_member_t           mb;         /* what a deletion deletes */
} oip_edit_t;


typedef struct oip_msg_s  oip_msg_t;


/* a kind of message: a request or an answer */

typedef struct {
    const char            *name;       /* "request" or "response" */
    const char            *what;       /* "input" or "output" */

    /* the top-level object: oip_msg_tensors() for the tensor array */
    int                  (*envelope)(oip_msg_t *m);

    /* what to do with a tensor, once its datatype and shape are known */
    oip_act_e            (*act)(oip_msg_t *m, oip_item_t *it);

    /* edits of its own, after the tensors' (NULL: none) */
    int                  (*edits)(oip_msg_t *m);

    /* what would be too large when binary tensors are written as JSON */
    const char            *as_json;

    unsigned               nonempty:1; /* the array may not be empty */
    unsigned               bytes_stay:1; /* non-UTF-8 BYTES stay binary */
    unsigned               upstream:1;   /* it goes to the upstream */
} oip_kind_t;


struct oip_msg_s {
    oip_ctx_t              c;
    const oip_kind_t      *kind;
    const oip_options_t   *opt;
    void                  *data;       /* the kind's own state */

    oip_json_t             j;
    const uint8_t         *json;       /* the JSON part */
    size_t                 jlen;
    const uint8_t         *bin;        /* what follows it */
    size_t                 blen;

    oip_item_t            *items;
    size_t                 nitems;
    size_t                 items_cap;

    oip_edit_t            *edits;
    size_t                 nedits;
    size_t                 edits_cap;

    /* another wire format, written from the items (NULL: by the edits) */
    int                  (*target)(oip_msg_t *m, oip_result_t *res);

    /*
     * with a sink, the target's bytes kept before each tensor's in its
     * file, for a tensor of len bytes (gRPC: its field's tag and length);
     * NULL: none
     */
    size_t               (*lead)(uint64_t len);

    /* where the OIP_EDIT_SLOT's bytes were written, or NULL */
    uint8_t               *slot;
    size_t                 slot_len;
    uint64_t               slot_off;     /* ... or, written to the sink's
                                            file, its offset there */
    unsigned               slot_filed:1;

    /* the body as it came, when it is also a file's (opt->body_file) */
    const uint8_t         *file;
    size_t                 file_len;

    /* with a sink: the end of what its file holds, the window, the
     * binary part's bytes claimed so far */
    uint64_t               sink_off;
    uint64_t               bin_seen;
    uint8_t               *win;
    const oip_sink_t      *body_sink;  /* the sink, while the JSON goes
                                          to head, its head file */
    oip_sink_t             head;
    uint64_t               head_off;

    unsigned               has_ihcl:1;
    unsigned               rewrite:1;    /* a new body even without edits */
    unsigned               edited:1;     /* there were edits */
    unsigned               to_json:1;    /* a tensor is written as JSON */
    unsigned               seen:1;       /* the tensor array was there */
    unsigned               syntax:1;     /* the error is broken JSON */
    unsigned               keep_binary:1; /* JSON data kept as JSON is
                                            also made binary (the digest
                                            reads it) */
    unsigned               plan:1;       /* the binary part is to come
                                            (oip_response_plan()) */
    unsigned               unplanned:1;  /* ... and the answer must be
                                            held after all */
    unsigned               headed:1;     /* the JSON written to the
                                            sink's head file */
};


/*
 * An answer's envelope read from another wire format (protobuf), for the
 * envelope writer: each member's value as JSON text; an empty id or
 * params is absent (params: the members, without braces).
 */

typedef struct {
    oip_seg_t              model_name;
    oip_seg_t              model_version;
    oip_seg_t              id;
    oip_seg_t              params;
} oip_envelope_t;


/* a tensor's data as it came, and as it goes on (its action done) */
#define oip_item_in_form(it)                                                  \
    ((it)->data_at ? OIP_SHAPE_JSON : OIP_SHAPE_BINARY)
#define oip_item_out_form(it)                                                 \
    ((it)->act == OIP_ACT_BINARY ? OIP_SHAPE_BINARY                           \
     : (it)->act == OIP_ACT_JSON ? OIP_SHAPE_JSON : oip_item_in_form(it))


void oip_msg_init(oip_msg_t *m, const oip_kind_t *kind,
    const oip_options_t *opt, const oip_alloc_t *a, oip_result_t *res);
int oip_msg_split(oip_msg_t *m, const oip_framing_t *f, const uint8_t *body,
    size_t len);
int oip_msg_run(oip_msg_t *m, oip_result_t *res);
void oip_msg_done(oip_msg_t *m);

int oip_msg_tensors(oip_msg_t *m);
int oip_msg_names(oip_msg_t *m);
int oip_msg_chunk(oip_msg_t *m, oip_item_t *it, size_t rest);
int oip_msg_chunks(oip_msg_t *m, oip_out_t *o, oip_result_t *res);
oip_item_t *oip_msg_item_add(oip_msg_t *m);

/* with a sink (oip_sink.c) */
int oip_item_spool(oip_msg_t *m, oip_item_t *it, oip_json_t *j,
    const oip_tensor_t *t);
void oip_item_reserve(oip_msg_t *m, oip_item_t *it);
int oip_item_copy(oip_msg_t *m, oip_item_t *it);
int oip_item_measure(oip_msg_t *m, const uint8_t *at, const oip_tensor_t *t,
    uint64_t *len);
void oip_msg_sunk(oip_msg_t *m, oip_out_t *o);
void oip_msg_head_sink(oip_msg_t *m);
int oip_msg_chunks_spooled(oip_msg_t *m, oip_out_t *o, oip_result_t *res);
int oip_msg_chunks_planned(oip_msg_t *m, oip_out_t *o, oip_result_t *res);

/*
 * The envelope writer (oip_envelope.c): an answer read from protobuf,
 * its items' actions set, written as the REST answer the client reads:
 * JSON, then the chunks of the outputs that stay binary, referenced.
 * Returns 0, or -1 with the error in the context.
 */
int oip_envelope_write(oip_msg_t *m, const oip_envelope_t *env,
    oip_result_t *res);
void oip_msg_sub(oip_msg_t *m, oip_json_t *sub, const uint8_t *at);
void oip_member_set(oip_member_t *mb, const uint8_t *key,
    const uint8_t *end, const uint8_t *prev_end);
int oip_edit_text(oip_msg_t *m, const uint8_t *from, const uint8_t *to,
    const char *text);
int oip_edit_delete(oip_msg_t *m, const oip_member_t *mb);
int oip_edit_slot(oip_msg_t *m, const uint8_t *from, const uint8_t *to);
int oip_walk_start(oip_json_t *j, oip_walk_t *w);
int oip_walk_next(oip_json_t *j, oip_walk_t *w);
void oip_walk_note(oip_walk_t *w, oip_member_t *mb, const uint8_t *end);
int oip_null_member(oip_json_t *j, oip_nulls_t *nl, oip_walk_t *w);
int oip_nulls_delete(oip_msg_t *m, oip_nulls_t *nl);


#endif /* _OIP_MESSAGE_H_INCLUDED_ */
