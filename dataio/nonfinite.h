/* nonfinite.h — inf/NaN in float16/float32 images is a data error (exit 3)
 * naming the file, the images dataset, the sample and its first bad element:
 * a non-finite pixel would turn the loss NaN, or worse only some weights.
 * dataset.c scans a split held in memory once at open, and the rows read
 * from the file as each batch's samples arrive. uint8 images pass as they are.
 * The table source (source_table.c) checks its float fields the same way. */
#ifndef GR_NONFINITE_H
#define GR_NONFINITE_H

#include <stdint.h>

#include "../common/gr_common.h"
#include "augment.h"

typedef struct gr_images {
    const char *path, *name; /* for messages: "data/f.h5", "/train/images" */
    gr_dtype dtype;
    int64_t sample_elems;    /* stored elements per sample */
    size_t elem_size;
    const char *kind;        /* what the message says must be finite: NULL "images", or "fields" */
} gr_images;

/* Checks n samples stored back to back at base. ids NULL: sample i is
 * sample i of the split (scanned in parallel; the message counts the other
 * bad ones); else ids[i] is its index (the first bad one is named). */
gr_status gr_images_check_finite(gr_images im, const uint8_t *base, int64_t n, const int64_t *ids, gr_error *err);

#endif
