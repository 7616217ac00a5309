/* loader_fields.h — private to the loader (loader.c, loader_fields.c): the
 * fields a loader delivers (gr_loader_config.fields) checked against a
 * source, and one sample's field converted into a batch. Not part of the
 * dataio API.
 *
 * Exports:
 *   gr_loader_image, gr_loader_image_check  the image field the decoder
 *                     reads (x's `image`, or the GR_DELIVER_IMAGE field);
 *   gr_loader_out, gr_loader_outs_make, gr_loader_outs_free  the delivered
 *                     fields, resolved once at open;
 *   gr_loader_out_convert  one sample's FLOAT32 or INT32 field into the batch;
 *   gr_enc_scratch, gr_loader_decode_encoded
 *                     one sample of an encoded image split decoded and
 *                     cropped (loader_encoded.c). */
#ifndef GR_LOADER_FIELDS_H
#define GR_LOADER_FIELDS_H

#include "dataio.h"

/* The image a loader decodes: source field index (-1: none), its shape in
 * C,H,W meaning, stored type and layout. */
typedef struct gr_loader_image {
    int field;
    int64_t chw[3];
    gr_dtype dtype;
    bool nhwc;
} gr_loader_image;

/* Field `field` of src as an image the decoder reads (uint8, float16 or
 * float32; [C,H,W] "CHW" or [H,W,C] "HWC"; sides >= 1) into *im, else
 * GR_ERR_DATA naming the source, the dataset and the field. */
gr_status gr_loader_image_check(const gr_source *src, int field, gr_loader_image *im, gr_error *err);

/* One delivered field, resolved. */
typedef struct gr_loader_out {
    int src;              /* the source's field index */
    gr_deliver as;
    gr_ftype from;        /* its element type */
    int64_t elems;        /* stored elements per sample */
    int64_t ncol;         /* FLOAT32 normalization: statistics index = element % ncol */
    double *mean, *std;   /* FLOAT32 with n_norm: ncol values each; else NULL */
    gr_batch_field desc;  /* what the batch holds (data NULL; name owned) */
} gr_loader_out;

/* cfg->fields resolved against src into *outs (cfg->nfields of them; free
 * with gr_loader_outs_free), and the GR_DELIVER_IMAGE field into *im
 * (im->field -1 when none). Errors: gr_loader_fields_describe's. */
gr_status gr_loader_outs_make(const gr_source *src, const gr_loader_config *cfg, gr_loader_out **outs,
                              gr_loader_image *im, gr_error *err);
void gr_loader_outs_free(gr_loader_out *outs, int n);

/* Sample `sample`'s stored field (at p, o->elems elements of o->from) into
 * dst as o->as says (FLOAT32 or INT32). An int64 value outside int32 is
 * GR_ERR_DATA naming the file, the dataset, the sample and the value. */
gr_status gr_loader_out_convert(const gr_loader_out *o, const gr_source *src, const void *p, int64_t sample,
                                void *dst, gr_error *err);

/* A decode worker's buffers for encoded samples (zeroed to start). */
typedef struct gr_enc_scratch {
    void *rs;           /* the resize's scratch */
    size_t rs_cap;
    uint8_t *planes;    /* the centre crop, [3,S,S] */
} gr_enc_scratch;
void gr_enc_scratch_free(gr_enc_scratch *sc);
/* Host memory one worker's decode takes for crops of size x size (an
 * estimate: decoded sizes vary per image). */
size_t gr_enc_scratch_estimate(int64_t size);
/* Sample `sample` of src (its field `field` holds the n encoded bytes at
 * bytes; hwc its stored shape) decoded into dst as 3 x S x S floats, S =
 * dec->oh: aug's crop `resized` (training) or `center` (evaluation), then
 * dec's normalization. GR_ERR_DATA naming the file, the dataset and the
 * sample when the bytes do not decode (or to another shape than stored). */
gr_status gr_loader_decode_encoded(const gr_decoder *dec, const gr_augment *aug, const gr_source *src, int field,
                                   const void *bytes, size_t n, const uint16_t hwc[3], uint64_t seed, int64_t epoch,
                                   int64_t sample, float *dst, gr_enc_scratch *sc, gr_error *err);

#endif
