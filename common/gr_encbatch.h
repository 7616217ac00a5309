/* gr_encbatch.h — a batch of encoded images on its way to a device decoder:
 * what the loader ships instead of pixels when a GPU decodes an encoded
 * split (data.decode, DESIGN 1.4; dataio/loader_payload.c fills it) and what
 * a backend's image decoder reads (kernels/backend.h:
 * gr_backend_decode_images). Plain data, so dataio/ and kernels/ share it
 * without reaching each other.
 *
 * Exports:
 *   gr_enc_sample  one sample: where its JPEG bytes are, its stored shape,
 *                  its transform (drawn as the CPU path draws it);
 *   gr_enc_batch   the batch: the bytes, the samples, the output side and
 *                  the normalization. */
#ifndef GR_ENCBATCH_H
#define GR_ENCBATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gr_enc_sample {
    int64_t index;          /* the sample's index in the split (messages, the host decode) */
    uint64_t off, len;      /* its JPEG bytes: bytes[off, off + len) (len 0 when host) */
    int32_t h, w, c;        /* stored shape (the split's `shapes`): rows, columns, channels (1 or 3) */
    int32_t y0, x0, bh, bw; /* training: the RandomResizedCrop box in stored pixels, augment.c's draw */
    int32_t flip;           /* training: mirrored after the crop */
    int32_t host;           /* 1: not a JPEG (a PNG): the loader decoded it into the batch's x already */
} gr_enc_sample;

typedef struct gr_enc_batch {
    uint8_t *bytes;         /* the JPEG samples' file bytes one after another (page-locked on a GPU) */
    size_t nbytes, cap;
    gr_enc_sample *s;       /* n of them, in the batch's order */
    int64_t n;
    int64_t size;           /* S: every sample becomes [3, S, S] floats */
    int64_t short_side;     /* evaluation: R, the short side the image is resized to before the centre crop */
    bool center;            /* evaluation (no box, no flip); else training (the box, the flip) */
    double mean[3], std[3]; /* per channel, stored units (0..255): out = (v - mean) / std */
    bool decoded;           /* set by the consumer once the batch is on the device (runner/decode.c) */
} gr_enc_batch;

#endif
