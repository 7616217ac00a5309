/* convert_imagenet.h — private to `gpurun data imagenet` (convert_imagenet.c):
 * the ground truth of a flat val folder (convert_imagenet_val.c). Not part
 * of the dataio API.
 *
 * Exports:
 *   gr_inet_label     a wnid's label among train's sorted class folders;
 *   gr_inet_flat_val  a flat val folder's files labelled from Kaggle's
 *                     LOC_val_solution.csv or the devkit's ground truth. */
#ifndef GR_CONVERT_IMAGENET_H
#define GR_CONVERT_IMAGENET_H

#include "convert.h"
#include "convert_scan.h"

/* The label of wnid among classes[0..n) (sorted bytewise); -1: none. */
int32_t gr_inet_label(char *const *classes, int64_t n, const char *wnid);

/* Labels val->files (the images of the flat folder valdir, in name order)
 * from the ground truth: cfg->val_labels (LOC_val_solution.csv when its
 * first line starts with ImageId, else the devkit's), else the first found
 * of LOC_val_solution.csv and ILSVRC2012_validation_ground_truth.txt in
 * cfg->dir, cfg->dir/.., the devkit folders (cfg->devkit, and
 * ILSVRC2012_devkit_t12 in those two). The devkit's ids map to wnids through
 * meta.mat, looked for likewise. Every file must have exactly one line, and
 * every line a file; every wnid must be one of classes. *used (allocated)
 * names the ground truth read (and meta.mat). GR_ERR_DATA naming the file
 * and line of what is wrong, or every place looked in. */
gr_status gr_inet_flat_val(const gr_imagenet_config *cfg, const char *valdir, char *const *classes, int64_t nclasses,
                           gr_conv_scan *val, char **used, gr_error *err);

#endif
