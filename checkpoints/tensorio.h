/* tensorio.h — the HDF5 pieces the weights and checkpoint files share:
 * float32 datasets with a `crc32c` attribute (CRC32C of the float32 bytes),
 * read back with their shape and checksum verified, and small text files
 * committed whole (LATEST). Files are committed through common/tmpfile.h.
 * Every failure is GR_ERR_CKPT (exit 6) naming the file and the dataset. */
#ifndef GR_TENSORIO_H
#define GR_TENSORIO_H

#include <hdf5.h>

#include "../common/gr_common.h"

/* Writes data (numel floats of shape[0..ndim)) as dataset `name` (an
 * absolute path; missing parent groups are created). file: for messages. */
gr_status gr_tio_write(hid_t f, const char *file, const char *name, int ndim, const int64_t *shape,
                       const float *data, gr_error *err);

/* Reads dataset `name` into dst after checking it has exactly this shape
 * (any numeric dtype, converted to float32); a `crc32c` attribute must
 * match (required when need_crc); every value must be finite (an inf/NaN
 * weight, BN statistic or optimizer slot is refused). Messages:
 *   "F: /params/conv0/weight: missing"
 *   "F: /params/conv0/weight: shape [64, 3, 3, 3], but [64, 1, 3, 3] is expected"
 *   "F: /params/conv0/weight: crc32c mismatch (stored 0x.., computed 0x..): the file is corrupt"
 *   "F: /params/conv0/weight: element 12 is NaN (1 of 1728 values are not finite); ..." */
gr_status gr_tio_read(hid_t f, const char *file, const char *name, int ndim, const int64_t *shape, float *dst,
                      bool need_crc, gr_error *err);

/* How many values attribute attr holds (< 0 on HDF5 error). H5Aread writes
 * all of them: check it before reading into a fixed-size variable. */
hssize_t gr_tio_attr_count(hid_t attr);

/* Whether every link of an absolute path exists: 1, 0, < 0 on HDF5 error. */
htri_t gr_tio_exists(hid_t f, const char *name);

/* Writes text to path through a private temporary next to it
 * (common/tmpfile.h): fsync, rename, fsync the directory. */
gr_status gr_tio_write_text(const char *path, const char *text, gr_error *err);

#endif
