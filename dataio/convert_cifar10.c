/* convert_cifar10.c — `gpurun data cifar10 OUT.h5 --from DIR`: the CIFAR-10
 * binary batches to the HDF5 layout of DESIGN 1.5. A record (1 label byte,
 * then the R, G and B planes of 32x32) is already one [3,32,32] sample, so
 * conversion is a split of each record into its label and its pixels. */
#include "convert.h"
#include "convert_out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_PIXELS 3072
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10
#define CIFAR_TRAIN_FILES 5
#define CIFAR_NAME_MAX 256

static const char *const cifar_default_classes[CIFAR_CLASSES] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};

static const char *const cifar_files[CIFAR_TRAIN_FILES + 1] = {
    "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin",
    "test_batch.bin"};

static char *cifar_path(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = gr_xmalloc(len);
    snprintf(p, len, "%s/%s", dir, name);
    return p;
}

/* Class names: the non-empty lines of dir/batches.meta.txt (trailing white
 * space cut), which must be exactly 10; the defaults when the file is absent. */
static gr_status cifar_classes(const char *dir, char names[CIFAR_CLASSES][CIFAR_NAME_MAX], gr_error *err) {
    char *path = cifar_path(dir, "batches.meta.txt");
    gr_status rs = gr_check_regular(path, "the class names file", GR_ERR_DATA, err); /* fopen blocks on a FIFO */
    if (rs) {
        free(path);
        return rs;
    }
    FILE *fp = fopen(path, "r");
    if (!fp) {
        gr_status st = GR_OK;
        if (errno != ENOENT) st = gr_error_set(err, GR_ERR_DATA, "%s: %s", path, strerror(errno));
        for (int k = 0; k < CIFAR_CLASSES; k++) snprintf(names[k], CIFAR_NAME_MAX, "%s", cifar_default_classes[k]);
        free(path);
        return st;
    }
    gr_status st = GR_OK;
    char line[CIFAR_NAME_MAX];
    int count = 0;
    while (fgets(line, sizeof line, fp)) {
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            st = gr_error_set(err, GR_ERR_DATA, "%s: line %d is longer than %d bytes", path, count + 1,
                              CIFAR_NAME_MAX - 2);
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                           line[len - 1] == '\t'))
            line[--len] = '\0';
        if (len == 0) continue;
        if (count < CIFAR_CLASSES) memcpy(names[count], line, len + 1);
        count++;
    }
    if (st == GR_OK && count != CIFAR_CLASSES)
        st = gr_error_set(err, GR_ERR_DATA, "%s: %d class names; expected %d (one per line)", path, count,
                          CIFAR_CLASSES);
    fclose(fp);
    free(path);
    return st;
}

/* Checks that dir/name exists and holds exactly `records` records. */
static gr_status cifar_check_size(const char *path, int64_t records, gr_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: %s", path, errno == ENOENT ? "no such file" : strerror(errno));
    gr_status rs = gr_check_regular(path, "a CIFAR-10 batch file", GR_ERR_DATA, err);
    if (rs) return rs;
    const int64_t size = (int64_t)sb.st_size;
    if (size == 0 || size % CIFAR_RECORD != 0)
        return gr_error_set(err, GR_ERR_DATA,
                            "%s: size %lld is not a multiple of %d bytes (1 label + %d pixels per record): "
                            "not the CIFAR-10 binary version, or truncated",
                            path, (long long)size, CIFAR_RECORD, CIFAR_PIXELS);
    if (size / CIFAR_RECORD != records)
        return gr_error_set(err, GR_ERR_DATA, "%s: holds %lld records; expected %lld", path,
                            (long long)(size / CIFAR_RECORD), (long long)records);
    return GR_OK;
}

/* Reads one batch file (size already checked) into images / labels and
 * appends it to the split. raw holds records * CIFAR_RECORD bytes. */
static gr_status cifar_write_file(gr_conv_split *s, const char *path, int64_t records, uint8_t *raw,
                                  uint8_t *images, int32_t *labels, gr_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return gr_error_set(err, GR_ERR_DATA, "%s: %s", path, strerror(errno));
    const size_t want = (size_t)records * CIFAR_RECORD;
    size_t got = fread(raw, 1, want, fp);
    bool io_error = ferror(fp) != 0;
    fclose(fp);
    if (io_error) return gr_error_set(err, GR_ERR_DATA, "%s: read error", path);
    if (got != want)
        return gr_error_set(err, GR_ERR_DATA, "%s: truncated while reading: %zu of %zu bytes", path, got, want);
    for (int64_t r = 0; r < records; r++) {
        const uint8_t *rec = raw + r * CIFAR_RECORD;
        if (rec[0] >= CIFAR_CLASSES)
            return gr_error_set(err, GR_ERR_DATA, "%s: record %lld: label %u is outside [0, %d)", path,
                                (long long)r, rec[0], CIFAR_CLASSES);
        labels[r] = rec[0];
        memcpy(images + r * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
    }
    return gr_conv_split_write(s, records, images, labels, err);
}

/* One split from files[0..nfiles); with stats, fills mean/std from it. */
static gr_status cifar_split(const gr_conv_out *o, const char *dir, const char *name, const char *const *files,
                             int nfiles, int64_t records, const char *const *classes, bool stats, double *mean,
                             double *std, gr_error *err) {
    gr_conv_split s;
    gr_status st = gr_conv_split_create(o, name, nfiles * records, 3, 32, 32, CIFAR_CLASSES, stats, &s, err);
    if (st != GR_OK) return st;
    uint8_t *raw = gr_xmalloc((size_t)records * CIFAR_RECORD);
    uint8_t *images = gr_xmalloc((size_t)records * CIFAR_PIXELS);
    int32_t *labels = gr_xmalloc((size_t)records * sizeof *labels);
    for (int k = 0; k < nfiles && st == GR_OK; k++) {
        char *path = cifar_path(dir, files[k]);
        st = cifar_write_file(&s, path, records, raw, images, labels, err);
        free(path);
    }
    free(raw);
    free(images);
    free(labels);
    return gr_conv_split_end(&s, st, classes, CIFAR_CLASSES, mean, std, err);
}

gr_status gr_data_convert_cifar10(const char *dir, int64_t batch_records, const char *out, bool force,
                                  bool progress, gr_error *err) {
    if (batch_records < 1)
        return gr_error_set(err, GR_ERR_USAGE, "data cifar10: records per batch file must be >= 1, got %lld",
                            (long long)batch_records);
    gr_conv_out o;
    gr_status st = gr_conv_out_begin(&o, out, force, progress, err);
    if (st != GR_OK) return st;
    char names[CIFAR_CLASSES][CIFAR_NAME_MAX];
    const char *classes[CIFAR_CLASSES];
    double mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: no such directory (expected the CIFAR-10 binary batches there)",
                          dir);
        goto done;
    }
    /* every file checked before anything is written */
    for (int k = 0; k <= CIFAR_TRAIN_FILES && st == GR_OK; k++) {
        char *path = cifar_path(dir, cifar_files[k]);
        st = cifar_check_size(path, batch_records, err);
        free(path);
    }
    if (st != GR_OK || (st = cifar_classes(dir, names, err)) != GR_OK) goto done;
    for (int k = 0; k < CIFAR_CLASSES; k++) classes[k] = names[k];
    st = cifar_split(&o, dir, "/train", cifar_files, CIFAR_TRAIN_FILES, batch_records, classes, true, mean, std, err);
    if (st != GR_OK) goto done;
    st = cifar_split(&o, dir, "/test", cifar_files + CIFAR_TRAIN_FILES, 1, batch_records, classes, false, mean, std,
                     err);
    if (st != GR_OK || (st = gr_conv_out_commit(&o, err)) != GR_OK) goto done;
    if (progress)
        fprintf(stderr,
                "gpurun data: %s: /train %lld, /test %lld samples of 3x32x32; mean %.2f %.2f %.2f, "
                "std %.2f %.2f %.2f\n",
                out, (long long)(CIFAR_TRAIN_FILES * batch_records), (long long)batch_records, mean[0], mean[1],
                mean[2], std[0], std[1], std[2]);
done:
    gr_conv_out_abort(&o);
    return st;
}
