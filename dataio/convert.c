/* convert.c — `gpurun data fashion-mnist|mnist OUT.h5`: IDX files (gzipped
 * or plain, read through zlib, which passes plain files through) to the HDF5
 * layout of DESIGN 1.5, written to OUT.tmp and renamed into place. */
#include "dataio.h"
#include "convert.h"
#include "convert_out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_READ_CHUNK ((size_t)16 << 20)

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
    gr_status rs = gr_check_regular(f->path, "an IDX file", GR_ERR_DATA, err); /* gzopen blocks on a FIFO */
    if (rs) return rs;
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

/* Writes one split from an images/labels pair already read and checked;
 * with stats, also fills mean/std (one channel) from it first. */
static gr_status idx_write_split(const gr_conv_out *o, const char *name, const idx_file *img, const idx_file *lab,
                                 const char *const *classes, bool stats, double *mean, double *std, gr_error *err) {
    const int64_t n = img->dims[0];
    gr_conv_split s;
    gr_status st = gr_conv_split_create(o, name, n, 1, img->dims[1], img->dims[2], 10, stats, &s, err);
    if (st != GR_OK) return st;
    int32_t *labels = gr_xmalloc((size_t)n * sizeof *labels);
    for (int64_t i = 0; i < n; i++) labels[i] = lab->data[i];
    st = gr_conv_split_write(&s, n, img->data, labels, err);
    free(labels);
    return gr_conv_split_end(&s, st, classes, 10, mean, std, err);
}

gr_status gr_data_convert_idx(const char *dataset, const char *dir, const char *out, bool force, bool progress,
                              gr_error *err) {
    const char *const *classes;
    if (strcmp(dataset, "fashion-mnist") == 0) classes = fashion_classes;
    else if (strcmp(dataset, "mnist") == 0) classes = mnist_classes;
    else
        return gr_error_set(err, GR_ERR_USAGE, "data: unknown IDX dataset \"%s\"; expected fashion-mnist or mnist",
                            dataset);
    gr_conv_out o;
    gr_status st = gr_conv_out_begin(&o, out, force, progress, err);
    if (st != GR_OK) return st;
    static const char *const names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    idx_file f[4];
    memset(f, 0, sizeof f);
    double mean = 0, stdv = 1;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: no such directory (expected the IDX files there)", dir);
        goto done;
    }
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
    /* mean / std over the train images, in stored units (population std) */
    if ((st = idx_write_split(&o, "/train", &f[0], &f[1], classes, true, &mean, &stdv, err)) != GR_OK) goto done;
    if ((st = idx_write_split(&o, "/test", &f[2], &f[3], classes, false, &mean, &stdv, err)) != GR_OK) goto done;
    if ((st = gr_conv_out_commit(&o, err)) != GR_OK) goto done;
    if (progress)
        fprintf(stderr, "gpurun data: %s: /train %u, /test %u samples of 1x%ux%u; mean %.2f std %.2f\n", out,
                f[0].dims[0], f[2].dims[0], f[0].dims[1], f[0].dims[2], mean, stdv);
done:
    gr_conv_out_abort(&o);
    for (int k = 0; k < 4; k++) idx_free(&f[k]);
    return st;
}
