/* convert.c — `gpurun data fashion-mnist|mnist OUT.h5`: IDX files (gzipped
 * or plain, read through zlib, which passes plain files through) to the HDF5
 * layout of DESIGN 1.5, written to OUT.tmp and renamed into place. */
#include "dataio.h"
#include "convert.h"
#include "h5util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_READ_CHUNK ((size_t)16 << 20)
#define IDX_CHUNK_SAMPLES 1024

static const char *const fashion_classes[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
static const char *const mnist_classes[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

typedef struct idx_file {
    char *path;         /* the file actually read */
    uint32_t dims[3];   /* N [, H, W] */
    int ndims;
    uint8_t *data;      /* N [* H * W] bytes */
    size_t bytes;
} idx_file;

static void idx_free(idx_file *f) {
    free(f->path);
    free(f->data);
    memset(f, 0, sizeof *f);
}

static const char *gz_message(gzFile gz) {
    int code = 0;
    const char *m = gzerror(gz, &code);
    return code == Z_ERRNO ? strerror(errno) : (m && *m ? m : "read error");
}

/* Reads exactly n bytes (in <= 1 GiB pieces). Returns bytes read, or -1 on
 * a zlib error (corrupt gzip stream). */
static int64_t gz_read_all(gzFile gz, void *dst, size_t n) {
    size_t got = 0;
    while (got < n) {
        size_t want = GR_MIN(n - got, (size_t)1 << 30);
        int r = gzread(gz, (uint8_t *)dst + got, (unsigned)want);
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (int64_t)got;
}

/* Opens dir/name.gz, else dir/name; reads and checks header and payload. */
static gr_status idx_read(const char *dir, const char *name, uint32_t magic, bool progress, idx_file *f,
                          gr_error *err) {
    memset(f, 0, sizeof *f);
    size_t len = strlen(dir) + strlen(name) + 8;
    f->path = gr_xmalloc(len);
    snprintf(f->path, len, "%s/%s.gz", dir, name);
    if (access(f->path, F_OK) != 0) {
        snprintf(f->path, len, "%s/%s", dir, name);
        if (access(f->path, F_OK) != 0)
            return gr_error_set(err, GR_ERR_DATA, "%s/%s.gz: no such file (nor %s)", dir, name, name);
    }
    gzFile gz = gzopen(f->path, "rb");
    if (!gz) return gr_error_set(err, GR_ERR_DATA, "%s: %s", f->path, errno ? strerror(errno) : "cannot open");
    gr_status st = GR_OK;
    uint8_t hdr[16];
    const int ndims = magic == IDX_MAGIC_IMAGES ? 3 : 1;
    const size_t hlen = 4 + 4 * (size_t)ndims;
    int64_t got = gz_read_all(gz, hdr, hlen);
    if (got < 0) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: corrupt (%s)", f->path, gz_message(gz));
        goto done;
    }
    if (got < 4) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: truncated: %lld bytes, shorter than an IDX header", f->path,
                          (long long)got);
        goto done;
    }
    uint32_t m = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (m != magic) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: bad magic 0x%08x; expected 0x%08x (IDX %s)", f->path, m, magic,
                          magic == IDX_MAGIC_IMAGES ? "uint8 images [N,H,W]" : "uint8 labels [N]");
        goto done;
    }
    if ((size_t)got < hlen) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: truncated: header cut short after %lld bytes", f->path,
                          (long long)got);
        goto done;
    }
    f->ndims = ndims;
    size_t total = 1;
    for (int d = 0; d < ndims; d++) {
        const uint8_t *p = hdr + 4 + 4 * d;
        f->dims[d] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (f->dims[d] == 0 || (d > 0 && f->dims[d] > 65536)) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: bad dimension %d = %u in the header", f->path, d, f->dims[d]);
            goto done;
        }
        total *= f->dims[d];
    }
    /* Grow while reading, so a corrupt header claiming huge counts fails as
     * "truncated" instead of allocating what it claims. */
    size_t cap = GR_MIN(total, IDX_READ_CHUNK), have = 0;
    f->data = gr_xmalloc(cap);
    while (have < total) {
        if (have == cap) {
            cap = GR_MIN(total, cap * 2);
            f->data = gr_xrealloc(f->data, cap);
        }
        size_t want = GR_MIN(cap - have, IDX_READ_CHUNK);
        int64_t r = gz_read_all(gz, f->data + have, want);
        if (r < 0) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: corrupt (%s)", f->path, gz_message(gz));
            goto done;
        }
        have += (size_t)r;
        if ((size_t)r < want) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: truncated: %zu of %zu data bytes (header says %u items)",
                              f->path, have, total, f->dims[0]);
            goto done;
        }
        if (progress)
            fprintf(stderr, "\rgpurun data: reading %s: %3d%%", f->path, (int)(100.0 * (double)have / (double)total));
    }
    if (progress) fputc('\n', stderr);
    uint8_t extra;
    int64_t r = gz_read_all(gz, &extra, 1);
    if (r != 0) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s after the %zu bytes the header announces", f->path,
                          r < 0 ? "corrupt data" : "unexpected extra data", total);
        goto done;
    }
    f->bytes = total;
done:
    gzclose(gz);
    return st;
}

static gr_status write_split(hid_t file, const char *out, const char *gname, const idx_file *img,
                             const idx_file *lab, const char *const *classes, const double *mean,
                             const double *stdv, gr_error *err) {
    gr_status st = GR_OK;
    hid_t g = -1, sp = -1, dcpl = -1, d = -1, a = -1, st_t = -1;
    const hsize_t n = img->dims[0];
    hsize_t dims[4] = {n, 1, img->dims[1], img->dims[2]};
    hsize_t chunk[4] = {GR_MIN(n, (hsize_t)IDX_CHUNK_SAMPLES), 1, img->dims[1], img->dims[2]};
    GR_H5_CHECK(g = H5Gcreate2(file, gname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: cannot create group %s", out, gname);
    GR_H5_CHECK(sp = H5Screate_simple(4, dims, NULL), err, "%s: %s/images: cannot create", out, gname);
    GR_H5_CHECK(dcpl = H5Pcreate(H5P_DATASET_CREATE), err, "%s: %s/images: cannot create", out, gname);
    GR_H5_CHECK(H5Pset_chunk(dcpl, 4, chunk), err, "%s: %s/images: cannot create", out, gname);
    GR_H5_CHECK(d = H5Dcreate2(g, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT), err,
                "%s: %s/images: cannot create", out, gname);
    GR_H5_CHECK(H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, img->data), err,
                "%s: %s/images: write failed", out, gname);
    H5Dclose(d), d = -1;
    H5Sclose(sp), sp = -1;

    GR_H5_CHECK(sp = H5Screate_simple(1, &n, NULL), err, "%s: %s/labels: cannot create", out, gname);
    GR_H5_CHECK(d = H5Dcreate2(g, "labels", H5T_STD_U8LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s/labels: cannot create", out, gname);
    GR_H5_CHECK(H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, lab->data), err,
                "%s: %s/labels: write failed", out, gname);
    H5Dclose(d), d = -1;
    H5Sclose(sp), sp = -1;

    if (classes) {
        hsize_t nc = 10;
        GR_H5_CHECK(st_t = H5Tcopy(H5T_C_S1), err, "%s: %s: attribute classes", out, gname);
        GR_H5_CHECK(H5Tset_size(st_t, H5T_VARIABLE), err, "%s: %s: attribute classes", out, gname);
        GR_H5_CHECK(H5Tset_cset(st_t, H5T_CSET_UTF8), err, "%s: %s: attribute classes", out, gname);
        GR_H5_CHECK(sp = H5Screate_simple(1, &nc, NULL), err, "%s: %s: attribute classes", out, gname);
        GR_H5_CHECK(a = H5Acreate2(g, "classes", st_t, sp, H5P_DEFAULT, H5P_DEFAULT), err,
                    "%s: %s: attribute classes", out, gname);
        GR_H5_CHECK(H5Awrite(a, st_t, classes), err, "%s: %s: attribute classes", out, gname);
        H5Aclose(a), a = -1;
        H5Sclose(sp), sp = -1;
    }
    const hsize_t one = 1;
    const char *names[2] = {"mean", "std"};
    const double *vals[2] = {mean, stdv};
    for (int k = 0; k < 2; k++) {
        GR_H5_CHECK(sp = H5Screate_simple(1, &one, NULL), err, "%s: %s: attribute %s", out, gname, names[k]);
        GR_H5_CHECK(a = H5Acreate2(g, names[k], H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT), err,
                    "%s: %s: attribute %s", out, gname, names[k]);
        GR_H5_CHECK(H5Awrite(a, H5T_NATIVE_DOUBLE, vals[k]), err, "%s: %s: attribute %s", out, gname, names[k]);
        H5Aclose(a), a = -1;
        H5Sclose(sp), sp = -1;
    }
fail:
    if (st_t >= 0) H5Tclose(st_t);
    if (a >= 0) H5Aclose(a);
    if (d >= 0) H5Dclose(d);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    if (g >= 0) H5Gclose(g);
    return st;
}

gr_status gr_data_convert_idx(const char *dataset, const char *dir, const char *out, bool force, bool progress,
                              gr_error *err) {
    gr_h5_init();
    const char *const *classes;
    if (strcmp(dataset, "fashion-mnist") == 0) classes = fashion_classes;
    else if (strcmp(dataset, "mnist") == 0) classes = mnist_classes;
    else
        return gr_error_set(err, GR_ERR_USAGE, "data: unknown IDX dataset \"%s\"; expected fashion-mnist or mnist",
                            dataset);
    struct stat sb;
    if (stat(out, &sb) == 0 && !force)
        return gr_error_set(err, GR_ERR_USAGE, "%s: already exists (pass --force to overwrite)", out);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return gr_error_set(err, GR_ERR_DATA, "%s: no such directory (expected the IDX files there)", dir);

    static const char *const names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    idx_file f[4];
    memset(f, 0, sizeof f);
    gr_status st = GR_OK;
    char *tmp = NULL;
    hid_t file = -1;
    for (int k = 0; k < 4 && st == GR_OK; k++)
        st = idx_read(dir, names[k], k % 2 == 0 ? IDX_MAGIC_IMAGES : IDX_MAGIC_LABELS, progress, &f[k], err);
    if (st != GR_OK) goto done;
    for (int k = 0; k < 4; k += 2) {
        if (f[k].dims[0] != f[k + 1].dims[0]) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: count mismatch: %u images but %s has %u labels", f[k].path,
                              f[k].dims[0], f[k + 1].path, f[k + 1].dims[0]);
            goto done;
        }
    }
    if (f[0].dims[1] != f[2].dims[1] || f[0].dims[2] != f[2].dims[2]) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: images are %ux%u but %s has %ux%u", f[2].path, f[2].dims[1],
                          f[2].dims[2], f[0].path, f[0].dims[1], f[0].dims[2]);
        goto done;
    }
    for (int k = 1; k < 4; k += 2)
        for (size_t i = 0; i < f[k].bytes; i++)
            if (f[k].data[i] > 9) {
                st = gr_error_set(err, GR_ERR_DATA, "%s: label %u at index %zu is outside [0, 10)", f[k].path,
                                  f[k].data[i], i);
                goto done;
            }

    /* mean / std over the train images, in stored units (population std). */
    uint64_t sum = 0, sum2 = 0;
    for (size_t i = 0; i < f[0].bytes; i++) {
        uint64_t v = f[0].data[i];
        sum += v;
        sum2 += v * v;
    }
    const double cnt = (double)f[0].bytes;
    double mean = (double)sum / cnt;
    double var = (double)sum2 / cnt - mean * mean;
    double stdv = sqrt(var > 0 ? var : 0);
    if (stdv == 0) stdv = 1;

    size_t tl = strlen(out) + 5;
    tmp = gr_xmalloc(tl);
    snprintf(tmp, tl, "%s.tmp", out);
    if (progress) fprintf(stderr, "gpurun data: writing %s\n", out);
    file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: cannot create", tmp);
        goto done;
    }
    if ((st = write_split(file, tmp, "/train", &f[0], &f[1], classes, &mean, &stdv, err)) != GR_OK) goto done;
    if ((st = write_split(file, tmp, "/test", &f[2], &f[3], classes, &mean, &stdv, err)) != GR_OK) goto done;
    herr_t cr = H5Fclose(file);
    file = -1;
    if (cr < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: closing failed", tmp);
        goto done;
    }
    if (rename(tmp, out) != 0) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: cannot rename to %s: %s", tmp, out, strerror(errno));
        goto done;
    }
    if (progress)
        fprintf(stderr, "gpurun data: %s: /train %u, /test %u samples of 1x%ux%u; mean %.2f std %.2f\n", out,
                f[0].dims[0], f[2].dims[0], f[0].dims[1], f[0].dims[2], mean, stdv);
done:
    if (file >= 0) H5Fclose(file);
    if (st != GR_OK && tmp) remove(tmp);
    free(tmp);
    for (int k = 0; k < 4; k++) idx_free(&f[k]);
    return st;
}
