/* convert_encoded.h — private to the imagefolder converter: the writer of an
 * encoded image split (`gpurun data imagefolder --store jpeg`, DESIGN 1.5),
 * convert_encoded.c. Not part of the dataio API.
 *
 * Exports:
 *   gr_conv_encoded_split      one split from a list of image files;
 *   gr_imagefolder_report_bad  adds a file left out to the report
 *                              (convert_imagefolder.c). */
#ifndef GR_CONVERT_ENCODED_H
#define GR_CONVERT_ENCODED_H

#include "convert.h"
#include "convert_out.h"

/* Writes group `name` of o from the n files paths[i] of class labels[i]:
 * `encoded`, `offsets`, `shapes`, `formats`, `labels` and the attributes
 * `storage` and `classes` (names[0..nclasses)). Each file is read and
 * checked on all cores a block at a time, its stored bytes appended to a
 * second private temporary next to OUT (a contiguous dataset needs its size
 * up front), which is copied into `encoded` at the end and removed. A file
 * that cannot be decoded follows cfg->on_error as the raw writer's do; the
 * split's samples are then the others. */
gr_status gr_conv_encoded_split(const gr_conv_out *o, const char *name, const char *const *paths,
                                const int32_t *labels, int64_t n, const char *const *names, int64_t nclasses,
                                const gr_imagefolder_config *cfg, gr_imagefolder_report *report, gr_error *err);

/* Adds path (copied) and why (taken) to r->bad. */
void gr_imagefolder_report_bad(gr_imagefolder_report *r, const char *path, char *why);

#endif
