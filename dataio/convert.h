/* convert.h — the `gpurun data ...` converters: source formats to the HDF5
 * layout of DESIGN 1.5. Each writes OUT.tmp and renames it into place, so a
 * failed conversion leaves nothing behind, and refuses to overwrite an
 * existing OUT unless force. Errors are GR_ERR_DATA (exit 3) naming the
 * source file. */
#ifndef GR_CONVERT_H
#define GR_CONVERT_H

#include "../common/gr_common.h"

/* Writes /train and /test from the four IDX files in dir (gzipped "*.gz" or
 * not): train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte. images uint8 [N,1,28,28]
 * chunked by whole samples, labels uint8 [N]; group attributes `classes`
 * (names, when known for `dataset`), `mean`, `std` (stored units, over the
 * train split). Writes out.tmp then renames, so a failed conversion leaves
 * nothing; refuses to overwrite an existing out unless force. `dataset` is
 * "fashion-mnist" or "mnist" (it only selects the class names).
 * Errors are exit 3 naming the IDX file ("bad magic", "truncated", ...). */
gr_status gr_data_convert_idx(const char *dataset, const char *dir, const char *out, bool force,
                              bool progress, gr_error *err);

#endif
