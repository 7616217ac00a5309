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
 *                     cropped (loader_encoded.c);
 *   gr_payload_*      an encoded split's batches as bytes and transforms
 *                     for a device to decode (loader_payload.c). */
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

/* ---- loader_payload.c: gr_loader_config.encoded_payload ---- */

typedef struct gr_payload gr_payload;
/* The payload of an encoded split src (fields f_enc `encoded`, f_shape
 * `shape`, f_label `label`; its `format` found here) read through cfg's
 * crop (resized or center; size S), normalized by mean/std (3 each); dec
 * (the loader's, borrowed) decodes the samples kept on the host. */
gr_status gr_payload_open(gr_source *src, int f_enc, int f_shape, int f_label, const gr_loader_config *cfg,
                          const gr_decoder *dec, const double *mean, const double *std, gr_payload **out,
                          gr_error *err);
void gr_payload_close(gr_payload *p);
/* A slot's payload (cfg's batch samples, no bytes yet), and its release. */
gr_enc_batch *gr_payload_batch_new(const gr_payload *p);
void gr_payload_batch_free(const gr_payload *p, gr_enc_batch *e);
/* Batch b (b->n samples idx[], fetched by rd; b->epoch set) into b->enc and
 * b->y: each JPEG's bytes appended (the buffer grown through cfg's
 * host_alloc: GR_ERR_OOM naming the bytes), its stored shape and its
 * transform (gr_augment_draw of (seed, epoch, sample), as
 * gr_loader_decode_encoded draws it); any other format decoded into its row
 * of b->x with sc (its errors; under skip a stand-in read through sub,
 * which must not be rd). */
gr_status gr_payload_fill(gr_payload *p, gr_source_reader *rd, gr_source_reader *sub, const int64_t *idx,
                          gr_batch *b, gr_enc_scratch *sc, gr_error *err);
/* gr_loader_decode_host's work. */
gr_status gr_payload_decode_host(gr_payload *p, gr_batch *b, int64_t i, gr_error *err);

/* An encoded split's fields: the bytes, the stored shape, the label. */
typedef struct gr_enc_fields {
    int enc, shape, label;
} gr_enc_fields;
/* data.on_error skip: sample s of b's epoch did not decode (first says
 * why); the next sample in file order that decodes (s+1, s+2, ... mod N, at
 * most GR_LOADER_SKIP_MAX tried, read through rd) takes its place: its
 * pixels into dst, its label into *label, its own draws, so the batch stays
 * a pure function of (seed, epoch, index). Counted in b->skipped (the first
 * one's error in b->skip_first); GR_ERR_DATA when none of them decodes. */
#define GR_LOADER_SKIP_MAX 64
gr_status gr_loader_stand_in(const gr_decoder *dec, const gr_augment *aug, gr_source *src, const gr_enc_fields *f,
                             gr_source_reader *rd, uint64_t seed, gr_batch *b, int64_t s, const gr_error *first,
                             float *dst, int32_t *label, gr_enc_scratch *sc, gr_error *err);

#endif
