/* dataset_mem.c — a split whose images are already in memory (dataio.h's
 * gr_dataset_wrap): what `gpurun predict` makes of image files, so that they
 * go through the same loader, normalization and crop as a file's split. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dataio.h"
#include "dataset_priv.h"

gr_dataset *gr_dataset_wrap(const char *name, const uint8_t *images, int64_t n, int64_t c, int64_t h, int64_t w) {
    GR_ASSERT(n >= 1 && c >= 1 && h >= 1 && w >= 1);
    gr_dataset *ds = gr_xcalloc(1, sizeof *ds);
    ds->file = ds->grp = ds->images = ds->memtype = -1;
    ds->fd = -1;
    pthread_mutex_init(&ds->addr_mu, NULL);
    ds->path = gr_xstrdup(name);
    ds->group = gr_xstrdup("/");
    ds->images_name = gr_xstrdup("images");
    ds->labels_name = gr_xstrdup("labels");
    ds->dtype = GR_DT_UINT8;
    ds->rank = 4;
    ds->n = n, ds->c = c, ds->h = h, ds->w = w;
    ds->dims[0] = (hsize_t)n, ds->dims[1] = (hsize_t)c, ds->dims[2] = (hsize_t)h, ds->dims[3] = (hsize_t)w;
    ds->elem_size = 1;
    ds->sample_elems = c * h * w;
    ds->little_endian = true;
    ds->direct = DIRECT_NONE;
    const size_t bytes = (size_t)(n * c * h * w);
    ds->mem = gr_aligned_alloc(bytes);
    memcpy(ds->mem, images, bytes);
    ds->labels = gr_xcalloc((size_t)n, sizeof *ds->labels); /* all 0: nothing is scored */
    return ds;
}
