
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Model signatures: a model's metadata answer read into one flat piece
 * of memory (oip_codec.h has its layout), and what a request checks
 * against it.
 */


#ifndef _OIP_SIGNATURE_H_INCLUDED_
#define _OIP_SIGNATURE_H_INCLUDED_


#include "oip_tensor.h"


#define oip_sig_tensors(s)   ((const oip_sig_tensor_t *) ((s) + 1))
#define oip_sig_name(s, t)   ((const uint8_t *) (s) + (t)->name)
#define oip_sig_dims(s, t)   ((const int64_t *) ((const uint8_t *) (s)    \
                                                  + (t)->dims))


/* the declared tensor of that name, or NULL; *index its place */
const oip_sig_tensor_t *oip_sig_find(const oip_signature_t *s, int outputs,
    const uint8_t *name, size_t len, size_t *index);

/* "[-1,16]"; "any shape" when the metadata gave none */
const char *oip_sig_shape_str(const oip_signature_t *s,
    const oip_sig_tensor_t *t, char *buf, size_t size);

/* the names of its inputs or outputs, comma-separated, cut to size */
const char *oip_sig_names(const oip_signature_t *s, int outputs, char *buf,
    size_t size);


#endif /* _OIP_SIGNATURE_H_INCLUDED_ */
