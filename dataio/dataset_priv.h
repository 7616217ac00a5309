/* dataset_priv.h — what a gr_dataset holds, for the dataio sources that
 * build or read one (dataset.c opens a split of a file, dataset_mem.c wraps
 * images in memory, dataset_attrs.c reads a split's attributes). Not part of
 * the dataio API. */
#ifndef GR_DATASET_PRIV_H
#define GR_DATASET_PRIV_H

#include <hdf5.h>
#include <pthread.h>

#include "dataio.h"

struct gr_dataset {
    char *path;
    char *group;          /* normalized: "/" or "/train" */
    char *images_name;    /* "/train/images" (for messages) */
    char *labels_name;
    hid_t file, grp, images;
    hid_t memtype;        /* native type images are read as */
    gr_dtype dtype;
    int rank;
    hsize_t dims[4];      /* file dims of images */
    int64_t n, c, h, w;
    bool nhwc;
    size_t elem_size;     /* bytes per stored element */
    int64_t sample_elems; /* C*H*W */
    int32_t *labels;      /* n */
    uint8_t *mem;         /* all raw images, or NULL (on-disk path) */
    gr_rows rows;         /* gr_dataset_read's scratch for the on-disk path */
    /* direct reads of raw-stored samples (setup_direct) */
    bool little_endian;   /* stored byte order is the machine's (x86: LE) */
    enum { DIRECT_NONE, DIRECT_LINEAR, DIRECT_TABLE, DIRECT_CHUNK } direct;
    int fd;               /* LINEAR, TABLE: the file, for pread */
    uint64_t base;        /* LINEAR: file offset of sample 0 */
    int64_t per_chunk;    /* TABLE: samples per chunk */
    uint64_t *chunk_addr; /* TABLE: per chunk, 0 until looked up */
    pthread_mutex_t addr_mu;
    int64_t file_size;
    /* an encoded image split (DESIGN 1.5, storage = "encoded"): its source,
     * which the loader decodes; c = 3, h = w = 0 (sizes vary per sample) */
    gr_source *enc;
};

#endif
