/* convert_imagefolder.h — private to the image converters: what the
 * imagefolder converter (convert_imagefolder.c) lends the imagenet one
 * (convert_imagenet.c). Not part of the dataio API.
 *
 * Exports:
 *   gr_conv_check_images  the store options of a gr_imagefolder_config;
 *   gr_conv_raw_split     one split decoded, resized and cropped (--store raw). */
#ifndef GR_CONVERT_IMAGEFOLDER_H
#define GR_CONVERT_IMAGEFOLDER_H

#include "convert.h"
#include "convert_out.h"
#include "convert_scan.h"

/* --store and what goes with it: --size, --short-side (raw); --max-side,
 * --quality, --restart (jpeg); --on-error. GR_ERR_USAGE naming the option,
 * prefixed "data WHAT: ". */
gr_status gr_conv_check_images(const gr_imagefolder_config *cfg, const char *what, gr_error *err);

/* Writes files[0..n) as split `name` of o (images uint8 [N,3,S,S], labels),
 * decoded on all cores a block at a time (gr_data_convert_imagefolder's
 * raw store). stats: fills mean/std (3 each) from what was written; else
 * writes the given ones. Files that fail follow cfg->on_error; all failing
 * is an error naming cfg->dir. */
gr_status gr_conv_raw_split(const gr_conv_out *o, const char *name, const gr_conv_file *files, int64_t n,
                            const char *const *classes, int64_t nclasses, const gr_imagefolder_config *cfg,
                            bool stats, double *mean, double *std, gr_imagefolder_report *report, gr_error *err);

#endif
