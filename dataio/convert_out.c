/* convert_out.c — the output side of the `gpurun data` converters: OUT's
 * private temporary created exclusively, synced and renamed into place, split groups appended to block by block
 * with hyperslab writes, per-channel statistics, the progress bar. */
#include "convert_out.h"
#include "h5util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONV_CHUNK_BYTES ((int64_t)1 << 20)   /* ~ bytes per chunk of small samples */
#define CONV_ONE_SAMPLE_BYTES ((int64_t)64 << 10) /* samples this big: one per chunk */
#define CONV_BLOCK_BYTES ((int64_t)64 << 20)  /* ~ bytes per write block */
#define CONV_STATS_RUN 4096 /* 4096 * 255^2 fits uint32 */

gr_status gr_conv_out_begin(gr_conv_out *o, const char *out, bool force, bool progress, gr_error *err) {
    memset(o, 0, sizeof *o);
    o->file = o->old = -1;
    gr_status st = gr_check_regular(out, "the output file", GR_ERR_DATA, err);
    if (st != GR_OK) return st;
    struct stat sb;
    if (stat(out, &sb) == 0 && !force)
        return gr_error_set(err, GR_ERR_USAGE, "%s: already exists (pass --force to overwrite); this converter "
                            "writes the whole file, so --force replaces all of it (data imagefolder --group G "
                            "adds a group to an existing file)", out);
    return gr_conv_out_create(o, out, progress, err);
}

gr_status gr_conv_out_create(gr_conv_out *o, const char *out, bool progress, gr_error *err) {
    gr_h5_init();
    /* a killed conversion's temporary goes now (tmpfile.h, Leftovers); ours
     * holds its lock until the commit, so the next one's sweep keeps it */
    gr_tmpfile_sweep(out, stderr);
    gr_status st = gr_tmpfile_create_locked(&o->tf, out, GR_ERR_DATA, err);
    if (st != GR_OK) return st;
    o->tmp = o->tf.tmp;
    char reopen[64];
    /* File format 1.8 or later: attributes over 64 KiB (`classes` of a
     * dataset with thousands of classes) need its dense attribute storage. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0) H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST);
#if H5_VERSION_GE(1, 10, 7)
    /* no HDF5 file lock on a private temporary: where flock() is emulated by
     * byte-range locks (NFS) it would conflict with the OFD lock held on it */
    if (fapl >= 0) H5Pset_file_locking(fapl, false, true);
#endif
    o->file = H5Fcreate(gr_tmpfile_reopen_path(&o->tf, reopen, sizeof reopen), H5F_ACC_TRUNC, H5P_DEFAULT,
                        fapl >= 0 ? fapl : H5P_DEFAULT);
    if (fapl >= 0) H5Pclose(fapl);
    if (o->file < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: cannot create", o->tmp);
        gr_tmpfile_abort(&o->tf);
        o->tmp = NULL;
        return st;
    }
    o->path = gr_xstrdup(out);
    o->progress = progress;
    return GR_OK;
}

void gr_conv_out_abort(gr_conv_out *o) {
    if (o->file >= 0) H5Fclose(o->file);
    if (o->old >= 0) H5Fclose(o->old);
    gr_tmpfile_abort(&o->tf); /* removes the temporary unless committed */
    free(o->path);
    for (int g = 0; g < o->ngroups; g++) free(o->groups[g]);
    free(o->groups);
    memset(o, 0, sizeof *o);
    o->file = o->old = -1;
}

gr_status gr_conv_out_commit(gr_conv_out *o, gr_error *err) {
    gr_status st = o->old >= 0 ? gr_conv_out_keep(o, err) : GR_OK;
    if (st != GR_OK) {
        gr_conv_out_abort(o);
        return st;
    }
    if (o->old >= 0) H5Fclose(o->old);
    o->old = -1;
    herr_t cr = H5Fclose(o->file);
    o->file = -1;
    if (cr < 0) st = gr_h5_fail(err, GR_ERR_DATA, "%s: closing failed", o->tmp);
    else st = gr_tmpfile_commit(&o->tf, true, GR_ERR_DATA, err);
    gr_conv_out_abort(o);
    return st;
}

int64_t gr_conv_max_side(int64_t channels) {
    GR_ASSERT(channels >= 1);
    int64_t s = (int64_t)sqrt((double)(GR_CONV_CHUNK_MAX / channels));
    while (channels * (s + 1) * (s + 1) <= GR_CONV_CHUNK_MAX) s++;
    while (s > 0 && channels * s * s > GR_CONV_CHUNK_MAX) s--;
    return s;
}

int64_t gr_conv_chunk_samples(int64_t n, int64_t sample_bytes) {
    int64_t k = sample_bytes >= CONV_ONE_SAMPLE_BYTES ? 1 : CONV_CHUNK_BYTES / GR_MAX(sample_bytes, 1);
    return GR_MAX(GR_MIN(k, n), 1);
}

int64_t gr_conv_block_samples(int64_t n, int64_t sample_bytes) {
    int64_t chunk = gr_conv_chunk_samples(n, sample_bytes);
    int64_t chunks = GR_MAX(CONV_BLOCK_BYTES / GR_MAX(chunk * sample_bytes, 1), 1);
    return GR_MAX(GR_MIN(chunks * chunk, n), 1);
}

gr_status gr_conv_group_create(const gr_conv_out *o, const char *name, hid_t *group, gr_error *err) {
    gr_status st = GR_OK;
    hid_t lcpl = -1;
    const char *f = o->tmp;
    *group = -1;
    if (strcmp(name, "/") == 0) {
        GR_H5_CHECK(*group = H5Gopen2(o->file, "/", H5P_DEFAULT), err, "%s: cannot open group /", f);
    } else {
        GR_H5_CHECK(lcpl = H5Pcreate(H5P_LINK_CREATE), err, "%s: cannot create group %s", f, name);
        GR_H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1), err, "%s: cannot create group %s", f, name);
        GR_H5_CHECK(*group = H5Gcreate2(o->file, name, lcpl, H5P_DEFAULT, H5P_DEFAULT), err,
                    "%s: cannot create group %s", f, name);
    }
fail:
    if (lcpl >= 0) H5Pclose(lcpl);
    return st;
}

gr_status gr_conv_write_classes(const gr_conv_out *o, hid_t group, const char *g, const char *const *names,
                                int64_t nclasses, gr_error *err) {
    gr_status st = GR_OK;
    hid_t sp = -1, a = -1, str_t = -1;
    const char *f = o->tmp;
    const hsize_t nc = (hsize_t)nclasses;
    GR_H5_CHECK(str_t = H5Tcopy(H5T_C_S1), err, "%s: %s: attribute classes", f, g);
    GR_H5_CHECK(H5Tset_size(str_t, H5T_VARIABLE), err, "%s: %s: attribute classes", f, g);
    GR_H5_CHECK(H5Tset_cset(str_t, H5T_CSET_UTF8), err, "%s: %s: attribute classes", f, g);
    GR_H5_CHECK(sp = H5Screate_simple(1, &nc, NULL), err, "%s: %s: attribute classes", f, g);
    GR_H5_CHECK(a = H5Acreate2(group, "classes", str_t, sp, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s: attribute classes", f, g);
    GR_H5_CHECK(H5Awrite(a, str_t, names), err, "%s: %s: attribute classes", f, g);
fail:
    if (str_t >= 0) H5Tclose(str_t);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    return st;
}

void gr_conv_split_free(gr_conv_split *s) {
    if (s->images >= 0) H5Dclose(s->images);
    if (s->labels >= 0) H5Dclose(s->labels);
    if (s->group >= 0) H5Gclose(s->group);
    free(s->sum);
    free(s->sum2);
    s->images = s->labels = s->group = -1;
    s->sum = s->sum2 = NULL;
}

gr_status gr_conv_split_create(const gr_conv_out *o, const char *name, int64_t n, int64_t c, int64_t h, int64_t w,
                               int64_t classes, bool stats, gr_conv_split *s, gr_error *err) {
    memset(s, 0, sizeof *s);
    s->out = o;
    s->name = name;
    s->group = s->images = s->labels = -1;
    s->n = n, s->c = c, s->h = h, s->w = w;
    s->chunk = gr_conv_chunk_samples(n, c * h * w);
    s->last_pct = -1;
    if (stats) {
        s->sum = gr_xcalloc((size_t)c, sizeof *s->sum);
        s->sum2 = gr_xcalloc((size_t)c, sizeof *s->sum2);
    }
    gr_status st = GR_OK;
    hid_t sp = -1, dcpl = -1, dapl = -1;
    const char *f = o->tmp;
    const hsize_t dims[4] = {(hsize_t)n, (hsize_t)c, (hsize_t)h, (hsize_t)w};
    const hsize_t chunk[4] = {(hsize_t)s->chunk, (hsize_t)c, (hsize_t)h, (hsize_t)w};
    if ((st = gr_conv_group_create(o, name, &s->group, err)) != GR_OK) goto fail;
    GR_H5_CHECK(sp = H5Screate_simple(4, dims, NULL), err, "%s: %s/images: cannot create", f, name);
    GR_H5_CHECK(dcpl = H5Pcreate(H5P_DATASET_CREATE), err, "%s: %s/images: cannot create", f, name);
    GR_H5_CHECK(H5Pset_chunk(dcpl, 4, chunk), err, "%s: %s/images: cannot create", f, name);
    /* every byte gets written: skip HDF5's fill pass */
    GR_H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), err, "%s: %s/images: cannot create", f, name);
    /* no chunk cache: blocks are whole chunks, written straight to the file
     * (a chunk a block boundary cuts is read back and completed, which is
     * correct, only slower) */
    GR_H5_CHECK(dapl = H5Pcreate(H5P_DATASET_ACCESS), err, "%s: %s/images: cannot create", f, name);
    GR_H5_CHECK(H5Pset_chunk_cache(dapl, 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT), err, "%s: %s/images: cannot create", f,
                name);
    GR_H5_CHECK(s->images = H5Dcreate2(s->group, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, dapl), err,
                "%s: %s/images: cannot create", f, name);
    H5Sclose(sp), sp = -1;
    GR_H5_CHECK(sp = H5Screate_simple(1, dims, NULL), err, "%s: %s/labels: cannot create", f, name);
    hid_t ltype = classes <= 256 ? H5T_STD_U8LE : classes <= 65536 ? H5T_STD_U16LE : H5T_STD_I32LE;
    GR_H5_CHECK(s->labels = H5Dcreate2(s->group, "labels", ltype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s/labels: cannot create", f, name);
fail:
    if (sp >= 0) H5Sclose(sp);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (dapl >= 0) H5Pclose(dapl);
    if (st != GR_OK) gr_conv_split_free(s);
    return st;
}

/* Adds the per-channel sums of count samples to s->sum / s->sum2. */
static void split_accumulate(gr_conv_split *s, int64_t count, const uint8_t *images) {
    const int64_t C = s->c, hw = s->h * s->w, planes = count * C;
    uint64_t *sum = s->sum, *sum2 = s->sum2;
    #pragma omp parallel for reduction(+ : sum[:C], sum2[:C]) if (planes * hw >= GR_OMP_MIN)
    for (int64_t k = 0; k < planes; k++) {
        const uint8_t *p = images + k * hw;
        uint64_t a = 0, b = 0;
        for (int64_t j0 = 0; j0 < hw; j0 += CONV_STATS_RUN) {
            const int64_t j1 = GR_MIN(hw, j0 + CONV_STATS_RUN);
            uint32_t ra = 0, rb = 0;
            for (int64_t j = j0; j < j1; j++) {
                ra += p[j];
                rb += (uint32_t)p[j] * p[j];
            }
            a += ra, b += rb;
        }
        sum[k % C] += a;
        sum2[k % C] += b;
    }
}

static void split_progress(gr_conv_split *s) {
    if (!s->out->progress) return;
    const int pct = (int)(100 * s->next / s->n);
    if (pct == s->last_pct) return;
    s->last_pct = pct;
    char bar[41];
    memset(bar, '#', (size_t)(pct * 40 / 100));
    memset(bar + pct * 40 / 100, '.', (size_t)(40 - pct * 40 / 100));
    bar[40] = '\0';
    fprintf(stderr, "\rgpurun data: %s %s [%s] %3d%% %lld/%lld", s->out->path, s->name, bar, pct,
            (long long)s->next, (long long)s->n);
    if (s->next == s->n) fputc('\n', stderr);
    fflush(stderr);
}

/* Writes rows [first, first + count) of dataset d (rank 4 or 1) from buf. */
static gr_status split_write_rows(const gr_conv_split *s, hid_t d, const char *what, int rank, int64_t count,
                                  hid_t memtype, const void *buf, gr_error *err) {
    gr_status st = GR_OK;
    hid_t fsp = -1, msp = -1;
    const char *f = s->out->tmp, *g = s->name;
    const hsize_t start[4] = {(hsize_t)s->next, 0, 0, 0};
    const hsize_t cnt[4] = {(hsize_t)count, (hsize_t)s->c, (hsize_t)s->h, (hsize_t)s->w};
    GR_H5_CHECK(fsp = H5Dget_space(d), err, "%s: %s/%s: write failed", f, g, what);
    GR_H5_CHECK(H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, cnt, NULL), err, "%s: %s/%s: write failed", f,
                g, what);
    GR_H5_CHECK(msp = H5Screate_simple(rank, cnt, NULL), err, "%s: %s/%s: write failed", f, g, what);
    GR_H5_CHECK(H5Dwrite(d, memtype, msp, fsp, H5P_DEFAULT, buf), err, "%s: %s/%s: write failed", f, g, what);
fail:
    if (fsp >= 0) H5Sclose(fsp);
    if (msp >= 0) H5Sclose(msp);
    return st;
}

gr_status gr_conv_split_write(gr_conv_split *s, int64_t count, const uint8_t *images, const int32_t *labels,
                              gr_error *err) {
    GR_ASSERT(count >= 1 && s->next + count <= s->n);
    gr_status st = split_write_rows(s, s->images, "images", 4, count, H5T_NATIVE_UINT8, images, err);
    if (st == GR_OK) st = split_write_rows(s, s->labels, "labels", 1, count, H5T_NATIVE_INT32, labels, err);
    if (st != GR_OK) return st;
    if (s->sum) split_accumulate(s, count, images);
    s->next += count;
    split_progress(s);
    return GR_OK;
}

static void split_stats(const gr_conv_split *s, double *mean, double *std) {
    const double cnt = (double)s->next * (double)(s->h * s->w);
    for (int64_t c = 0; c < s->c; c++) {
        mean[c] = cnt > 0 ? (double)s->sum[c] / cnt : 0;
        double var = cnt > 0 ? (double)s->sum2[c] / cnt - mean[c] * mean[c] : 0;
        std[c] = var > 0 ? sqrt(var) : 0;
        if (std[c] == 0) std[c] = 1;
    }
}

gr_status gr_conv_split_end(gr_conv_split *s, gr_status st, const char *const *names, int64_t nclasses,
                            double *mean, double *std, gr_error *err) {
    hid_t sp = -1, a = -1;
    const char *f = s->out->tmp, *g = s->name;
    if (st != GR_OK) goto fail;
    if (s->next != s->n) {
        st = gr_error_set(err, GR_ERR_INTERNAL, "%s: %s: %lld of %lld samples written", f, g, (long long)s->next,
                          (long long)s->n);
        goto fail;
    }
    if (s->sum) split_stats(s, mean, std);
    if (names && (st = gr_conv_write_classes(s->out, s->group, g, names, nclasses, err)) != GR_OK) goto fail;
    const hsize_t nch = (hsize_t)s->c;
    const char *attr[2] = {"mean", "std"};
    const double *vals[2] = {mean, std};
    for (int k = 0; k < 2; k++) {
        GR_H5_CHECK(sp = H5Screate_simple(1, &nch, NULL), err, "%s: %s: attribute %s", f, g, attr[k]);
        GR_H5_CHECK(a = H5Acreate2(s->group, attr[k], H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT), err,
                    "%s: %s: attribute %s", f, g, attr[k]);
        GR_H5_CHECK(H5Awrite(a, H5T_NATIVE_DOUBLE, vals[k]), err, "%s: %s: attribute %s", f, g, attr[k]);
        H5Aclose(a), a = -1;
        H5Sclose(sp), sp = -1;
    }
fail:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    gr_conv_split_free(s);
    return st;
}
