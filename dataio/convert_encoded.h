/* convert_encoded.h — private to the image converters (convert_imagefolder.c,
 * convert_imagenet.c): the writer of encoded image splits (`--store jpeg`,
 * DESIGN 1.5), convert_encoded.c, resumable through OUT.partial
 * (convert_partial.h). Not part of the dataio API.
 *
 * Exports:
 *   gr_conv_encoded_write      the splits of one conversion, OUT committed. */
#ifndef GR_CONVERT_ENCODED_H
#define GR_CONVERT_ENCODED_H

#include "convert.h"
#include "convert_out.h"
#include "convert_partial.h"

/* Writes the nparts splits parts[k] (name, files, n >= 1 filled in) as
 * groups of o: `encoded`, `offsets`, `shapes`, `formats`, `labels` and the
 * attributes `storage` and `classes` (names[0..nclasses)); then commits o
 * (gr_conv_out_commit) and removes OUT.partial. Each file is read and checked
 * on all cores a block at a time and committed to OUT.partial (resumed from
 * there, or started over with cfg->restart, as convert_partial.h says); at
 * the end each split's bytes are copied into its contiguous `encoded`. A
 * file that cannot be decoded follows cfg->on_error as the raw writer's do;
 * the split's samples are then the others. report->samples, ->resumed grow.
 * On failure (or a stop cfg->stop asked for: GR_ERR_SIGNAL) OUT.partial
 * keeps what was committed, and o is left to the caller's abort. */
gr_status gr_conv_encoded_write(gr_conv_out *o, gr_conv_part *parts, int nparts, const char *const *names,
                                int64_t nclasses, const gr_imagefolder_config *cfg, gr_imagefolder_report *report,
                                gr_error *err);

#endif
