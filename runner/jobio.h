/* jobio.h — a job whose graph's inputs and target are named (model.inputs,
 * model.targets: config/spec.h's gr_io_decl): its splits read as HDF5
 * tables (dataio's gr_source_table: every [N, ...] dataset a field), each
 * declared item bound to the field it names, the loader delivering those
 * fields (inputs, then the target) and the graph's io (job.h: j->io) made
 * from their shapes and types. A float input takes the normalization its
 * dataset's `mean`/`std` attributes give (one value, or one per column of
 * its last axis: what `gpurun data csv` writes); targets are used as stored.
 * Today's image jobs (no model.inputs) never come here. */
#ifndef GR_JOBIO_H
#define GR_JOBIO_H

#include "job.h"

/* Opens the train split (and val when need_val and data.val is given) as
 * tables and fills j->byname and j->io. Errors: a declared field the split
 * lacks (exit 2, at the item, listing the split's fields), a field of rank
 * over 3 or of a size that varies, a val split whose fields differ (exit 3). */
gr_status gr_jobio_compile(gr_job *j, gr_cache_mode cache, bool need_val, gr_error *err);
/* After the graph: token data's vocab_size against the model (exit 2): every
 * embedding layer reading the token ids has at least that many rows, and
 * the loss at least that many classes (a target beyond them has no logit). */
gr_status gr_jobio_check_vocab(const gr_job *j, gr_error *err);
void gr_jobio_free(struct gr_jobio *b);
/* Samples in the train split; whether a val split is open. */
int64_t gr_jobio_train_len(const gr_job *j);
bool gr_jobio_has_val(const gr_job *j);
/* The loaders of both splits with the fields listed (tl, vl: the job's configs). */
gr_status gr_jobio_open_loaders(gr_job *j, gr_loader_config *tl, gr_loader_config *vl, gr_error *err);
/* `gpurun eval`'s loader (into j->val_ld) over the val split, or the train split. */
gr_status gr_jobio_open_eval(gr_job *j, bool val, gr_loader_config *lc, gr_error *err);
/* Host memory of the sources and their loaders (hostmem.c). */
size_t gr_jobio_host_bytes(const gr_job *j, const gr_loader_config *tl, const gr_loader_config *vl, size_t *loaders);

#endif
