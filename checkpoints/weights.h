/* weights.h — a model's parameters and state in HDF5, in the layout of a
 * checkpoint's /params and /state groups (DESIGN 1.6): one float32 dataset
 * per tensor, /params/<layer>/<tensor> (trainable) and /state/<layer>/<tensor>
 * (batchnorm running stats), in PyTorch's shapes, each with a `crc32c`
 * attribute (uint32, over its bytes). A tensor's state_dict key is
 * "<layer>.<tensor>", so h5py reads such a file straight into PyTorch.
 *
 * Used by model.init_from (load) and by the run's final export
 * `weights.h5` (save); the checkpoint writer builds on it. */
#ifndef GR_WEIGHTS_H
#define GR_WEIGHTS_H

#include <hdf5.h>

#include "../graph/graph.h"

/* Writes every PARAM and STATE tensor of g from params (the host copy of
 * the params arena) to path, through a private temporary next to it
 * (common/tmpfile.h) + fsync + rename.
 * Errors: GR_ERR_CKPT naming the file. */
gr_status gr_weights_save(const char *path, const gr_graph *g, const float *params, gr_error *err);

/* Reads every PARAM and STATE tensor of g from path into params. Each must
 * be present with its shape (any float or integer dtype; converted to
 * float32); a `crc32c` attribute, when present, must match the stored
 * float32 bytes. Tensors in the file that the model lacks are listed on
 * stderr and ignored. Errors (GR_ERR_CKPT, exit 6) name the file and the
 * tensor: "w.h5: /params/conv0/weight: shape [64, 3, 3, 3], but [64, 1, 3, 3]
 * is expected", "... : missing", "... : crc32c mismatch (stored 0x...,
 * computed 0x...)". */
gr_status gr_weights_load(const char *path, const gr_graph *g, float *params, gr_error *err);

/* Whether path is a weights file (gr_weights_save's: /params, no checkpoint
 * `format` attribute), rather than a checkpoint. */
bool gr_weights_is_export(const char *path);

/* The pieces, for the checkpoint writer: whether t is saved, its dataset
 * name, and all of them into / out of an open file (file: for messages). */
bool gr_weights_tensor(const gr_tensor *t);
void gr_weights_name(const gr_graph *g, const gr_tensor *t, char *buf, size_t n);
gr_status gr_weights_put(hid_t f, const char *file, const gr_graph *g, const float *params, gr_error *err);
gr_status gr_weights_get(hid_t f, const char *file, const gr_graph *g, float *params, bool need_crc,
                         gr_error *err);

#endif
