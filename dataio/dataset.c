/* dataset.c — one split of an HDF5 dataset (DESIGN 1.5): open and validate
 * `images` and `labels`, keep the labels (and, when they fit under the memory
 * limit, the raw images) in memory, and read normalized C,H,W float batches.
 *
 * Images up to gr_dataset_memory_limit() bytes are read whole at open, and a
 * batch is then plain loops over memory. Larger ones stay on disk: each read
 * selects the union of the (sorted, de-duplicated) sample rows as one HDF5
 * hyperslab selection, so files bigger than RAM work. */
#include "dataio.h"
#include "dataset_priv.h"
#include "h5util.h"
#include "nonfinite.h"
#include "augment.h"
#include "../common/env.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GR_DATA_MEM_LIMIT_DEFAULT ((int64_t)2 << 30) /* 2 GiB */
#define GR_CHUNK_CACHE_BYTES ((size_t)32 << 20)
#define GR_CHUNK_CACHE_SLOTS 12421 /* a prime, about 100x the chunks that fit */

static int64_t g_mem_limit = -1; /* < 0: environment or default */


/* DIRECT_TABLE is used up to this many chunks: HDF5 1.10 finds a chunk's
 * address by walking the whole chunk index, so the lookups, one per chunk
 * on first use, cost O(chunks^2) in all. */
#define GR_DIRECT_TABLE_MAX_CHUNKS 4096

void gr_dataset_set_memory_limit(int64_t bytes) { g_mem_limit = bytes; }

int64_t gr_dataset_memory_limit(void) {
    if (g_mem_limit >= 0) return g_mem_limit;
    int64_t env = gr_env_int(GR_ENV_DATA_MEM_LIMIT, -1);
    if (env >= 0) return env;
    /* 2 GiB, or a quarter of the memory still available on a smaller machine
     * (a split loaded into memory must not push the run into the OOM killer) */
    size_t avail = 0, total = 0;
    if (gr_host_mem_info(&avail, &total) && (int64_t)(avail / 4) < GR_DATA_MEM_LIMIT_DEFAULT)
        return (int64_t)(avail / 4);
    return GR_DATA_MEM_LIMIT_DEFAULT;
}

/* Opens group->name as a dataset, with the messages of dataio.h. */
static gr_status open_member(gr_dataset *ds, const char *name, const char *full, hid_t *out,
                             gr_error *err) {
    htri_t ex = H5Lexists(ds->grp, name, H5P_DEFAULT);
    if (ex < 0) return gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot look up", ds->path, full);
    if (ex == 0) return gr_error_set(err, GR_ERR_DATA, "%s: %s: no such dataset", ds->path, full);
    /* images: a chunk cache large enough for the chunks one batch touches
     * (compressed chunks are inflated once per batch, not once per sample) */
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl >= 0 && strcmp(name, "images") == 0)
        H5Pset_chunk_cache(dapl, GR_CHUNK_CACHE_SLOTS, GR_CHUNK_CACHE_BYTES, 1.0);
    *out = H5Dopen2(ds->grp, name, dapl >= 0 ? dapl : H5P_DEFAULT);
    if (dapl >= 0) H5Pclose(dapl);
    if (*out < 0)
        return gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot open as a dataset", ds->path, full);
    return GR_OK;
}

/* The images dataset again, with no chunk cache (held in memory: read once). */
static hid_t open_images_uncached(const gr_dataset *ds) {
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl < 0) return -1;
    H5Pset_chunk_cache(dapl, 0, 0, 1.0);
    hid_t d = H5Dopen2(ds->grp, "images", dapl);
    H5Pclose(dapl);
    return d;
}

static gr_status check_images(gr_dataset *ds, gr_error *err) {
    gr_status st = GR_OK;
    hid_t t = -1, sp = -1;
    char tname[64];
    GR_H5_CHECK(t = H5Dget_type(ds->images), err, "%s: %s: cannot read type", ds->path, ds->images_name);
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (cls == H5T_INTEGER && sz == 1 && H5Tget_sign(t) == H5T_SGN_NONE) {
        ds->dtype = GR_DT_UINT8;
        ds->memtype = H5T_NATIVE_UINT8;
    } else if (cls == H5T_FLOAT && sz == 4) {
        ds->dtype = GR_DT_FLOAT32;
        ds->memtype = H5T_NATIVE_FLOAT;
    } else if (cls == H5T_FLOAT && sz == 2 && gr_h5_is_ieee_half(t)) {
        ds->dtype = GR_DT_FLOAT16;
        GR_H5_CHECK(ds->memtype = gr_h5_float16_type(), err, "%s: cannot build the float16 type", ds->path);
    } else {
        gr_h5_describe_type(t, tname, sizeof tname);
        if (cls == H5T_FLOAT && sz == 2) snprintf(tname, sizeof tname, "2-byte float, not IEEE half");
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: unsupported dtype (%s); expected uint8, float16 or float32",
                          ds->path, ds->images_name, tname);
        goto fail;
    }
    ds->elem_size = sz;
    ds->little_endian = sz == 1 || H5Tget_order(t) == H5T_ORDER_LE;
    GR_H5_CHECK(sp = H5Dget_space(ds->images), err, "%s: %s: cannot read shape", ds->path, ds->images_name);
    int rank = H5Sget_simple_extent_ndims(sp);
    GR_H5_CHECK(rank, err, "%s: %s: cannot read shape", ds->path, ds->images_name);
    if (rank != 3 && rank != 4) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: rank %d; expected [N,H,W] or [N,C,H,W] (rank 3 or 4)",
                          ds->path, ds->images_name, rank);
        goto fail;
    }
    ds->rank = rank;
    GR_H5_CHECK(H5Sget_simple_extent_dims(sp, ds->dims, NULL), err, "%s: %s: cannot read shape", ds->path,
                ds->images_name);
    /* layout: on the images dataset, else on the split's group (DESIGN 1.5 allows either reading) */
    char layout[64] = "";
    const char *lwhere = ds->images_name;
    int lr = gr_h5_read_string_attr(ds->images, "layout", layout, sizeof layout);
    if (lr == 0) {
        lwhere = ds->group;
        lr = gr_h5_read_string_attr(ds->grp, "layout", layout, sizeof layout);
    }
    if (lr == -2) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot read attribute layout", ds->path, lwhere);
        goto fail;
    }
    if (lr == -1 || (lr == 1 && strcmp(layout, "NHWC") != 0 && strcmp(layout, "NCHW") != 0)) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: attribute layout: %s%s%s; expected \"NCHW\" or \"NHWC\"",
                          ds->path, lwhere, lr == 1 ? "\"" : "", layout, lr == 1 ? "\"" : "");
        goto fail;
    }
    ds->nhwc = lr == 1 && rank == 4 && strcmp(layout, "NHWC") == 0;
    ds->n = (int64_t)ds->dims[0];
    if (rank == 3) {
        ds->c = 1, ds->h = (int64_t)ds->dims[1], ds->w = (int64_t)ds->dims[2];
    } else if (ds->nhwc) {
        ds->h = (int64_t)ds->dims[1], ds->w = (int64_t)ds->dims[2], ds->c = (int64_t)ds->dims[3];
    } else {
        ds->c = (int64_t)ds->dims[1], ds->h = (int64_t)ds->dims[2], ds->w = (int64_t)ds->dims[3];
    }
    const int64_t dim_max = (int64_t)1 << 24;
    if (ds->n < 1 || ds->c < 1 || ds->h < 1 || ds->w < 1 || ds->c > dim_max || ds->h > dim_max ||
        ds->w > dim_max || ds->dims[0] > (hsize_t)INT64_MAX / 2 || ds->c * ds->h * ds->w > ((int64_t)1 << 32)) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: unusable shape N=%lld C=%lld H=%lld W=%lld%s", ds->path,
                          ds->images_name, (long long)ds->n, (long long)ds->c, (long long)ds->h, (long long)ds->w,
                          ds->n < 1 ? " (no samples)" : "");
        goto fail;
    }
    ds->sample_elems = ds->c * ds->h * ds->w;
fail:
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return st;
}

static gr_status read_labels(gr_dataset *ds, hid_t lab, gr_error *err) {
    gr_status st = GR_OK;
    hid_t t = -1, sp = -1;
    int64_t *tmp = NULL;
    GR_H5_CHECK(t = H5Dget_type(lab), err, "%s: %s: cannot read type", ds->path, ds->labels_name);
    if (H5Tget_class(t) != H5T_INTEGER) {
        char tname[64];
        gr_h5_describe_type(t, tname, sizeof tname);
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: unsupported dtype (%s); expected an integer type", ds->path,
                          ds->labels_name, tname);
        goto fail;
    }
    GR_H5_CHECK(sp = H5Dget_space(lab), err, "%s: %s: cannot read shape", ds->path, ds->labels_name);
    int rank = H5Sget_simple_extent_ndims(sp);
    GR_H5_CHECK(rank, err, "%s: %s: cannot read shape", ds->path, ds->labels_name);
    if (rank != 1) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: rank %d; expected [N] (rank 1)", ds->path, ds->labels_name,
                          rank);
        goto fail;
    }
    hsize_t n = 0;
    GR_H5_CHECK(H5Sget_simple_extent_dims(sp, &n, NULL), err, "%s: %s: cannot read shape", ds->path,
                ds->labels_name);
    if ((int64_t)n != ds->n) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: images has N=%lld but labels has N=%lld", ds->path, ds->group,
                          (long long)ds->n, (long long)n);
        goto fail;
    }
    tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) {
        st = gr_error_set(err, GR_ERR_OOM, "%s: %s: out of memory: %llu bytes for labels", ds->path,
                          ds->labels_name, (unsigned long long)n * 8);
        goto fail;
    }
    GR_H5_CHECK(H5Dread(lab, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp), err, "%s: %s: read failed",
                ds->path, ds->labels_name);
    ds->labels = gr_xmalloc((size_t)n * sizeof *ds->labels);
    for (int64_t i = 0; i < (int64_t)n; i++) {
        if (tmp[i] < 0) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: %s[%lld]: label %lld is negative", ds->path, ds->labels_name,
                              (long long)i, (long long)tmp[i]);
            goto fail;
        }
        if (tmp[i] > INT32_MAX) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: %s[%lld]: label %lld is too large (over %d)", ds->path,
                              ds->labels_name, (long long)i, (long long)tmp[i], INT32_MAX);
            goto fail;
        }
        ds->labels[i] = (int32_t)tmp[i];
    }
fail:
    free(tmp);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return st;
}

static gr_status read_direct(gr_dataset *ds, int64_t idx, void *dst, gr_error *err);

/* What the inf/NaN scan (nonfinite.h) needs to know of the images. */
static gr_images gr_dataset_images_of(const gr_dataset *ds) {
    gr_images im = {ds->path, ds->images_name, ds->dtype, ds->sample_elems, ds->elem_size, NULL};
    return im;
}

/* Direct reads need the images stored raw: no filters, no external files,
 * the machine's byte order, and (chunked) chunks of whole samples. Then:
 *   LINEAR  contiguous storage: sample i is at base + i * bytes, read with
 *           pread, in parallel, without HDF5's global lock;
 *   TABLE   chunks of several samples, at most GR_DIRECT_TABLE_MAX_CHUNKS of
 *           them: each chunk's address is asked of HDF5 once, then pread;
 *   CHUNK   one sample per chunk: H5Dread_chunk, the raw chunk by a B-tree
 *           lookup (HDF5's lock held for the read, but none of the
 *           selection and conversion machinery of H5Dread).
 * The pread modes are proven at open on samples 0 and N-1 against H5Dread;
 * any doubt, and GPURUN_DATA_DIRECT=0, leaves DIRECT_NONE: H5Dread of
 * hyperslabs. */
static void setup_direct(gr_dataset *ds, int64_t file_size) {
    ds->direct = DIRECT_NONE;
    ds->fd = -1;
    ds->file_size = file_size;
    if (!ds->little_endian || !gr_env_bool(GR_ENV_DATA_DIRECT, true)) return;
    const uint64_t sb = (uint64_t)ds->sample_elems * ds->elem_size;
    hid_t dcpl = H5Dget_create_plist(ds->images);
    if (dcpl < 0) return;
    bool ok = H5Pget_nfilters(dcpl) == 0 && H5Pget_external_count(dcpl) == 0;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    if (ok && layout == H5D_CHUNKED) {
        hsize_t chunk[4];
        ok = H5Pget_chunk(dcpl, ds->rank, chunk) == ds->rank && chunk[0] >= 1;
        for (int d = 1; ok && d < ds->rank; d++) ok = chunk[d] == ds->dims[d];
        ds->per_chunk = ok ? (int64_t)chunk[0] : 0;
    } else if (!(ok && layout == H5D_CONTIGUOUS)) {
        ok = false;
    }
    H5Pclose(dcpl);
    if (!ok) return;
    /* a chunk never written reads as the fill value through HDF5 but has no
     * address to pread: direct reads only when every chunk exists (counted:
     * H5Dget_space_status says "partly" for complete datasets with an edge chunk) */
    if (layout == H5D_CHUNKED) {
        hsize_t have = 0;
        hid_t fsp = H5Dget_space(ds->images);
        herr_t e = fsp < 0 ? -1 : H5Dget_num_chunks(ds->images, fsp, &have);
        if (fsp >= 0) H5Sclose(fsp);
        if (e < 0 || (int64_t)have != (ds->n + ds->per_chunk - 1) / ds->per_chunk) return;
    }
    if (layout == H5D_CONTIGUOUS) {
        haddr_t a = H5Dget_offset(ds->images);
        if (a == HADDR_UNDEF || (uint64_t)a + (uint64_t)ds->n * sb > (uint64_t)file_size) return;
        ds->base = (uint64_t)a;
        ds->direct = DIRECT_LINEAR;
    } else if (ds->per_chunk == 1) {
        ds->direct = DIRECT_CHUNK;
        return;
    } else {
        const int64_t chunks = (ds->n + ds->per_chunk - 1) / ds->per_chunk;
        if (chunks > GR_DIRECT_TABLE_MAX_CHUNKS) return;
        ds->chunk_addr = gr_xcalloc((size_t)chunks, sizeof *ds->chunk_addr);
        ds->direct = DIRECT_TABLE;
    }
    ds->fd = open(ds->path, O_RDONLY | O_CLOEXEC);
    uint8_t *a = gr_aligned_alloc(sb), *b = gr_aligned_alloc(sb);
    bool same = ds->fd >= 0 && a && b;
    for (int k = 0; k < 2 && same; k++) {
        const int64_t i = k == 0 ? 0 : ds->n - 1;
        gr_error e;
        hid_t fsp = H5Dget_space(ds->images), msp = -1;
        hsize_t start[4] = {(hsize_t)i, 0, 0, 0}, count[4] = {1, 0, 0, 0}, total = (hsize_t)ds->sample_elems;
        for (int d = 1; d < ds->rank; d++) count[d] = ds->dims[d];
        same = fsp >= 0 && read_direct(ds, i, a, &e) == GR_OK &&
               H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
               (msp = H5Screate_simple(1, &total, NULL)) >= 0 &&
               H5Dread(ds->images, ds->memtype, msp, fsp, H5P_DEFAULT, b) >= 0 && memcmp(a, b, sb) == 0;
        if (msp >= 0) H5Sclose(msp);
        if (fsp >= 0) H5Sclose(fsp);
    }
    gr_aligned_free(a);
    gr_aligned_free(b);
    if (!same) { /* the mutex stays: gr_dataset_close destroys it */
        if (ds->fd >= 0) close(ds->fd);
        free(ds->chunk_addr);
        ds->chunk_addr = NULL;
        ds->fd = -1;
        ds->direct = DIRECT_NONE;
    }
}

/* An encoded split: its source (which checks the layout; the bytes stay in
 * the file, read per batch), 3 channels of uint8 whatever the stored image
 * (grayscale decodes to 3), its labels read as an image split's are. */
static gr_status open_encoded(gr_dataset *ds, hid_t *lab, gr_error *err) {
    if (!(ds->enc = gr_source_encoded(ds->path, ds->group, err))) return err ? err->status : GR_ERR_DATA;
    free(ds->images_name);
    ds->images_name = gr_h5_join(ds->group, "encoded");
    ds->n = ds->enc->n;
    ds->c = 3;
    ds->dtype = GR_DT_UINT8;
    ds->elem_size = 1;
    gr_status st = open_member(ds, "labels", ds->labels_name, lab, err);
    return st != GR_OK ? st : read_labels(ds, *lab, err);
}

gr_status gr_dataset_open(const char *path, const char *group, gr_dataset **out, gr_error *err) {
    return gr_dataset_open_cache(path, group, GR_CACHE_AUTO, out, err);
}

gr_status gr_dataset_open_cache(const char *path, const char *group, gr_cache_mode cache, gr_dataset **out,
                                gr_error *err) {
    *out = NULL;
    gr_h5_init();
    struct stat sb;
    gr_status pre = gr_h5_check_input(path, &sb, err);
    if (pre != GR_OK) return pre;

    gr_status st = GR_OK;
    hid_t lab = -1;
    gr_dataset *ds = gr_xcalloc(1, sizeof *ds);
    ds->file = ds->grp = ds->images = ds->memtype = -1;
    ds->fd = -1;
    pthread_mutex_init(&ds->addr_mu, NULL);
    ds->path = gr_xstrdup(path);
    ds->group = gr_h5_normalize_group(group);
    ds->images_name = gr_h5_join(ds->group, "images");
    ds->labels_name = gr_h5_join(ds->group, "labels");

    ds->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (ds->file < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: not an HDF5 file or corrupt", path);
        goto fail;
    }
    htri_t ex = gr_h5_path_exists(ds->file, ds->group);
    if (ex < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: group %s: cannot look up (corrupt file?)", path, ds->group);
        goto fail;
    }
    if (ex == 0) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: group %s: no such group", path, ds->group);
        goto fail;
    }
    ds->grp = H5Gopen2(ds->file, ds->group, H5P_DEFAULT);
    if (ds->grp < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: group %s: cannot open as a group", path, ds->group);
        goto fail;
    }
    if (gr_h5_is_encoded(ds->grp)) {
        st = open_encoded(ds, &lab, err);
        goto done;
    }
    if ((st = open_member(ds, "images", ds->images_name, &ds->images, err)) != GR_OK) goto fail;
    if ((st = open_member(ds, "labels", ds->labels_name, &lab, err)) != GR_OK) goto fail;
    if ((st = check_images(ds, err)) != GR_OK) goto fail;
    if ((st = read_labels(ds, lab, err)) != GR_OK) goto fail;
    setup_direct(ds, (int64_t)sb.st_size);

    const int64_t sample_bytes = ds->sample_elems * (int64_t)ds->elem_size; /* <= 2^34 */
    const int64_t limit = gr_dataset_memory_limit();
    const bool fits = ds->n <= limit / sample_bytes; /* n * sample_bytes <= limit, without overflow */
    if (cache == GR_CACHE_MEMORY || (cache == GR_CACHE_AUTO && fits)) {
        if (ds->n > (int64_t)(SIZE_MAX / 2) / sample_bytes) {
            st = gr_error_set(err, GR_ERR_OOM, "%s: %s: %lld samples of %lld bytes do not fit in memory (data.cache: "
                              "memory)", path, ds->images_name, (long long)ds->n, (long long)sample_bytes);
            goto fail;
        }
        const int64_t bytes = ds->n * sample_bytes;
        ds->mem = gr_aligned_alloc((size_t)bytes);
        if (!ds->mem) {
            st = gr_error_set(err, GR_ERR_OOM, "%s: %s: out of memory: %lld bytes to hold the images%s", path,
                              ds->images_name, (long long)bytes,
                              cache == GR_CACHE_MEMORY ? " (data.cache: memory; set none to read from the file)"
                                                       : "");
            goto fail;
        }
        /* through a handle without a chunk cache: the whole read would leave up to
         * GR_CHUNK_CACHE_BYTES of chunks cached next to the copy in memory */
        H5Dclose(ds->images);
        if ((ds->images = open_images_uncached(ds)) < 0) {
            st = gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot open as a dataset", path, ds->images_name);
            goto fail;
        }
        GR_H5_CHECK(H5Dread(ds->images, ds->memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, ds->mem), err,
                    "%s: %s: read failed (corrupt file?)", path, ds->images_name);
        if ((st = gr_images_check_finite(gr_dataset_images_of(ds), ds->mem, ds->n, NULL, err)) != GR_OK) goto fail;
    }
done:
    if (st != GR_OK) goto fail;
    H5Dclose(lab);
    *out = ds;
    return GR_OK;
fail:
    if (lab >= 0) H5Dclose(lab);
    gr_dataset_close(ds);
    return st;
}

void gr_dataset_close(gr_dataset *ds) {
    if (!ds) return;
    gr_source_close(ds->enc);
    if (ds->dtype == GR_DT_FLOAT16 && ds->memtype >= 0) H5Tclose(ds->memtype);
    if (ds->images >= 0) H5Dclose(ds->images);
    if (ds->grp >= 0) H5Gclose(ds->grp);
    if (ds->file >= 0) H5Fclose(ds->file);
    gr_aligned_free(ds->mem);
    free(ds->labels);
    gr_rows_free(&ds->rows);
    if (ds->fd >= 0) close(ds->fd);
    free(ds->chunk_addr);
    pthread_mutex_destroy(&ds->addr_mu);
    free(ds->images_name);
    free(ds->labels_name);
    free(ds->group);
    free(ds->path);
    free(ds);
}

int64_t gr_dataset_len(const gr_dataset *ds) { return ds->n; }

void gr_dataset_sample_shape(const gr_dataset *ds, int64_t chw[3]) {
    chw[0] = ds->c, chw[1] = ds->h, chw[2] = ds->w;
}

gr_dtype gr_dataset_dtype(const gr_dataset *ds) { return ds->dtype; }

const int32_t *gr_dataset_labels(const gr_dataset *ds) { return ds->labels; }

bool gr_dataset_in_memory(const gr_dataset *ds) { return ds->mem != NULL; }
bool gr_dataset_reads_direct(const gr_dataset *ds) { return ds->direct != DIRECT_NONE; }

size_t gr_dataset_host_bytes(const gr_dataset *ds) {
    if (ds->enc) /* labels twice (here and the source's), offsets, shapes, formats */
        return (size_t)ds->n * (2 * sizeof *ds->labels + sizeof(uint64_t) + 3 * sizeof(uint16_t) + 1);
    const size_t sb = gr_dataset_sample_bytes(ds), images = (size_t)ds->n * sb;
    size_t bytes = (size_t)ds->n * sizeof *ds->labels;
    if (ds->mem) return bytes + images;
    if (ds->direct == DIRECT_NONE) return bytes + GR_MIN(images, GR_CHUNK_CACHE_BYTES);
    hsize_t chunk[4] = {1, 0, 0, 0}; /* the check's two samples, through the cache: two chunks */
    hid_t plist = H5Dget_create_plist(ds->images);
    if (plist >= 0 && H5Pget_layout(plist) == H5D_CHUNKED) H5Pget_chunk(plist, 4, chunk);
    if (plist >= 0) H5Pclose(plist);
    bytes += GR_MIN(images, 2 * (size_t)chunk[0] * sb);
    if (ds->direct == DIRECT_TABLE) bytes += (size_t)((ds->n + ds->per_chunk - 1) / ds->per_chunk) * sizeof(uint64_t);
    return bytes;
}

gr_status gr_dataset_check_labels(const gr_dataset *ds, int64_t classes, gr_error *err) {
    for (int64_t i = 0; i < ds->n; i++)
        if (ds->labels[i] >= classes)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s[%lld]: label %d is outside [0, %lld) (the model has %lld outputs)",
                                ds->path, ds->labels_name, (long long)i, ds->labels[i], (long long)classes,
                                (long long)classes);
    return GR_OK;
}


void gr_rows_free(gr_rows *r) {
    free(r->sorted);
    gr_aligned_free(r->raw);
    memset(r, 0, sizeof *r);
}

/* On-disk path: the distinct rows of idx, sorted, so that reads go through
 * the file in order and the samples of one chunk are read one after the
 * other: directly (pread, setup_direct), or through HDF5, one regular
 * hyperslab per run of consecutive rows. (A single union-of-hyperslabs
 * selection would be one call, but HDF5 1.10 maps irregular selections onto
 * chunks element by element: about 100x slower.) A compressed chunk is
 * inflated into the chunk cache, which is sized to hold the chunks of a
 * batch, so it is inflated once per batch, not once per sample. */
static gr_status read_rows(gr_dataset *ds, const int64_t *idx, int64_t n, gr_rows *r, gr_error *err) {
    const int64_t k = r->n = gr_rows_sorted_distinct(idx, n, &r->sorted, &r->cap);
    size_t need = (size_t)k * (size_t)ds->sample_elems * ds->elem_size;
    if (need > r->raw_cap) {
        gr_aligned_free(r->raw);
        r->raw = gr_aligned_alloc(need);
        r->raw_cap = r->raw ? need : 0;
        if (!r->raw)
            return gr_error_set(err, GR_ERR_OOM, "%s: %s: out of memory: %zu bytes for a batch", ds->path,
                                ds->images_name, need);
    }
    if (ds->direct != DIRECT_NONE) {
        const size_t sb = (size_t)ds->sample_elems * ds->elem_size;
        for (int64_t i = 0; i < k; i++) {
            gr_status st = read_direct(ds, r->sorted[i], r->raw + (size_t)i * sb, err);
            if (st != GR_OK) return st;
        }
        return GR_OK;
    }
    gr_status st = GR_OK;
    hid_t fsp = -1, msp = -1;
    GR_H5_CHECK(fsp = H5Dget_space(ds->images), err, "%s: %s: cannot read shape", ds->path, ds->images_name);
    hsize_t start[4] = {0, 0, 0, 0}, count[4];
    for (int d = 1; d < ds->rank; d++) count[d] = ds->dims[d];
    const size_t sb = (size_t)ds->sample_elems * ds->elem_size;
    for (int64_t i = 0; i < k;) {
        int64_t j = i;
        while (j + 1 < k && r->sorted[j + 1] == r->sorted[j] + 1) j++;
        start[0] = (hsize_t)r->sorted[i];
        count[0] = (hsize_t)(j - i + 1);
        GR_H5_CHECK(H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL), err,
                    "%s: %s: selection failed", ds->path, ds->images_name);
        /* the memory space has the selection's shape: HDF5 then maps it
         * onto chunks by blocks (a flat one costs a callback per element) */
        GR_H5_CHECK(msp = H5Screate_simple(ds->rank, count, NULL), err, "%s: %s: selection failed", ds->path,
                    ds->images_name);
        GR_H5_CHECK(H5Dread(ds->images, ds->memtype, msp, fsp, H5P_DEFAULT, r->raw + (size_t)i * sb), err,
                    "%s: %s: reading samples %lld-%lld failed (truncated or corrupt file?)", ds->path,
                    ds->images_name, (long long)r->sorted[i], (long long)r->sorted[j]);
        H5Sclose(msp);
        msp = -1;
        i = j + 1;
    }
fail:
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    return st;
}

static gr_status read_direct(gr_dataset *ds, int64_t idx, void *dst, gr_error *err) {
    const size_t sb = (size_t)ds->sample_elems * ds->elem_size;
    uint64_t at = 0;
    if (ds->direct == DIRECT_CHUNK) {
        hsize_t off[4] = {(hsize_t)idx, 0, 0, 0};
        uint32_t filters = 0;
        gr_h5_init();
        if (H5Dread_chunk(ds->images, H5P_DEFAULT, off, &filters, dst) < 0)
            return gr_h5_fail(err, GR_ERR_DATA, "%s: %s: reading sample %lld failed (truncated or corrupt file?)",
                              ds->path, ds->images_name, (long long)idx);
        return GR_OK;
    }
    if (ds->direct == DIRECT_LINEAR) {
        at = ds->base + (uint64_t)idx * sb;
    } else {
        const int64_t c = idx / ds->per_chunk;
        pthread_mutex_lock(&ds->addr_mu);
        if (!ds->chunk_addr[c]) {
            hsize_t off[4] = {(hsize_t)(c * ds->per_chunk), 0, 0, 0};
            unsigned mask = 0;
            haddr_t a = HADDR_UNDEF;
            hsize_t size = 0;
            gr_h5_init();
            if (H5Dget_chunk_info_by_coord(ds->images, off, &mask, &a, &size) >= 0 && a != HADDR_UNDEF)
                ds->chunk_addr[c] = (uint64_t)a;
        }
        at = ds->chunk_addr[c];
        pthread_mutex_unlock(&ds->addr_mu);
        if (!at)
            return gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot locate the chunk of sample %lld (truncated or "
                              "corrupt file?)", ds->path, ds->images_name, (long long)idx);
        at += (uint64_t)(idx - c * ds->per_chunk) * sb;
    }
    size_t got = 0;
    while (got < sb) {
        ssize_t r = pread(ds->fd, (uint8_t *)dst + got, sb - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s: reading sample %lld: %s", ds->path, ds->images_name,
                                (long long)idx, strerror(errno));
        if (r == 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld lies past the end of the file (byte %llu "
                                "of %lld): the file is truncated", ds->path, ds->images_name, (long long)idx,
                                (unsigned long long)(at + sb), (long long)ds->file_size);
        got += (size_t)r;
    }
    return GR_OK;
}

gr_status gr_dataset_fetch(gr_dataset *ds, const int64_t *idx, int64_t n, gr_rows *rows, gr_error *err) {
    gr_h5_init();
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= ds->n)
            return gr_error_set(err, GR_ERR_INTERNAL, "%s: %s: sample index %lld is outside [0, %lld)", ds->path,
                                ds->images_name, (long long)idx[i], (long long)ds->n);
    if (ds->mem || n == 0) return GR_OK; /* checked at open */
    gr_status st = read_rows(ds, idx, n, rows, err);
    return st != GR_OK ? st : gr_images_check_finite(gr_dataset_images_of(ds), rows->raw, rows->n, rows->sorted, err);
}

const void *gr_rows_sample(const gr_dataset *ds, const gr_rows *rows, int64_t idx) {
    const size_t sample_bytes = (size_t)ds->sample_elems * ds->elem_size;
    if (ds->mem) return ds->mem + (size_t)idx * sample_bytes;
    int64_t lo = 0, hi = rows->n - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (rows->sorted[mid] < idx) lo = mid + 1;
        else hi = mid;
    }
    GR_ASSERT(rows->n > 0 && rows->sorted[lo] == idx);
    return rows->raw + (size_t)lo * sample_bytes;
}

gr_status gr_dataset_read(gr_dataset *ds, const int64_t *idx, int64_t n, const double *mean, const double *std,
                          float *x, int32_t *y, gr_error *err) {
    for (int64_t c = 0; c < ds->c; c++) {
        double m = mean ? mean[c] : 0.0, s = std ? std[c] : 1.0;
        if (!isfinite(m) || !isfinite(s) || s == 0.0)
            return gr_error_set(err, GR_ERR_USAGE, "%s: %s: normalize channel %lld: mean %g / std %g is unusable",
                                ds->path, ds->images_name, (long long)c, m, s);
    }
    gr_status st = gr_dataset_fetch(ds, idx, n, &ds->rows, err);
    if (st != GR_OK) return st;
    const int64_t chw[3] = {ds->c, ds->h, ds->w};
    gr_decoder dec;
    gr_decoder_init(&dec, ds->dtype, chw, ds->nhwc, ds->h, ds->w, mean, std);
    const gr_xform whole = {0, 0, ds->h, ds->w, false};
    const bool par = n * ds->sample_elems >= GR_OMP_MIN; /* decode on all cores for big batches */
    #pragma omp parallel for if (par)
    for (int64_t i = 0; i < n; i++)
        gr_decode_sample(&dec, gr_rows_sample(ds, &ds->rows, idx[i]), &whole, x + i * ds->sample_elems, NULL);
    gr_decoder_free(&dec);
    if (y)
        for (int64_t i = 0; i < n; i++) y[i] = ds->labels[idx[i]];
    return GR_OK;
}

size_t gr_dataset_sample_bytes(const gr_dataset *ds) { return (size_t)ds->sample_elems * ds->elem_size; }
bool gr_dataset_nhwc(const gr_dataset *ds) { return ds->nhwc; }
const char *gr_dataset_path(const gr_dataset *ds) { return ds->path; }
const char *gr_dataset_group(const gr_dataset *ds) { return ds->group; }
const char *gr_dataset_images_name(const gr_dataset *ds) { return ds->images_name; }
bool gr_dataset_encoded(const gr_dataset *ds) { return ds->enc != NULL; }
