/* convert_csv.c — `gpurun data csv OUT.h5 --from FILE.csv --target COL[,COL...]`:
 * a numeric CSV table (a header row of column names, then one row per
 * sample) to a table split (DESIGN 1.5): `features` float32 [N, k] (the
 * non-target columns in file order) and `targets` float32 [N, m] (the
 * --target columns in the order given), with the column names as group
 * attributes and the train split's per-column mean and std on each dataset.
 * The whole table is parsed into memory first (4 bytes a cell), so a bad
 * cell anywhere fails the conversion before anything is written. */
#include "convert.h"
#include "convert_out.h"
#include "h5util.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CSV_MAX_COLUMNS (1 << 20)
#define CSV_SHOW 40 /* characters of a bad cell quoted in a message */

/* The parsed table. */
typedef struct csv_table {
    char **names;       /* ncols column names */
    int64_t ncols;
    float *cells;       /* rows * ncols, row-major */
    int64_t rows, cap;
} csv_table;

static void csv_table_free(csv_table *t) {
    for (int64_t c = 0; c < t->ncols; c++) free(t->names[c]);
    free(t->names);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

/* A cell [b, e) with spaces and one pair of double quotes around it removed. */
static void csv_trim(char **b, char **e) {
    while (*b < *e && (**b == ' ' || **b == '\t')) (*b)++;
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t')) (*e)--;
    if (*e - *b >= 2 && **b == '"' && (*e)[-1] == '"') (*b)++, (*e)--;
}

/* Cells of line (NUL-terminated, no line end): the start of each in
 * starts[], ends[] (grown as needed); returns the count. */
static int64_t csv_split(char *line, char ***starts, char ***ends, int64_t *cap) {
    int64_t n = 0;
    for (char *p = line;; p++) {
        char *b = p;
        while (*p && *p != ',') p++;
        if (n == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            *starts = gr_xrealloc(*starts, (size_t)*cap * sizeof **starts);
            *ends = gr_xrealloc(*ends, (size_t)*cap * sizeof **ends);
        }
        (*starts)[n] = b;
        (*ends)[n] = p;
        n++;
        if (!*p) return n;
    }
}

/* The header line into t->names: GR_ERR_DATA for an empty or repeated name. */
static gr_status csv_header(const char *path, char *line, csv_table *t, char ***st, char ***en, int64_t *cap,
                            gr_error *err) {
    if ((unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB && (unsigned char)line[2] == 0xBF)
        memmove(line, line + 3, strlen(line + 3) + 1); /* a UTF-8 byte order mark */
    const int64_t n = csv_split(line, st, en, cap);
    if (n > CSV_MAX_COLUMNS)
        return gr_error_set(err, GR_ERR_DATA, "%s:1: %lld columns; at most %d", path, (long long)n, CSV_MAX_COLUMNS);
    t->names = gr_xcalloc((size_t)n, sizeof *t->names);
    t->ncols = n;
    for (int64_t c = 0; c < n; c++) {
        char *b = (*st)[c], *e = (*en)[c];
        csv_trim(&b, &e);
        if (b == e)
            return gr_error_set(err, GR_ERR_DATA, "%s:1:%lld: column %lld has no name (the first line is the header: "
                                "one name per column)", path, (long long)((*st)[c] - line + 1), (long long)c + 1);
        t->names[c] = gr_xmalloc((size_t)(e - b) + 1);
        memcpy(t->names[c], b, (size_t)(e - b));
        t->names[c][e - b] = '\0';
        for (int64_t d = 0; d < c; d++)
            if (strcmp(t->names[d], t->names[c]) == 0)
                return gr_error_set(err, GR_ERR_DATA, "%s:1:%lld: column name '%s' repeats column %lld", path,
                                    (long long)((*st)[c] - line + 1), t->names[c], (long long)d + 1);
    }
    return GR_OK;
}

/* One data line (number lineno) appended to t->cells. */
static gr_status csv_row(const char *path, int64_t lineno, char *line, csv_table *t, char ***st, char ***en,
                         int64_t *cap, gr_error *err) {
    const int64_t n = csv_split(line, st, en, cap);
    if (n != t->ncols)
        return gr_error_set(err, GR_ERR_DATA, "%s:%lld: %lld cells, but the header has %lld columns (every row needs "
                            "one value per column)", path, (long long)lineno, (long long)n, (long long)t->ncols);
    if (t->rows == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->cells = gr_xrealloc(t->cells, (size_t)t->cap * (size_t)t->ncols * sizeof *t->cells);
    }
    float *row = t->cells + t->rows * t->ncols;
    for (int64_t c = 0; c < n; c++) {
        char *b = (*st)[c], *e = (*en)[c];
        csv_trim(&b, &e);
        const long long col = (long long)((*st)[c] - line + 1);
        const char saved = *e;
        *e = '\0';
        char *end = NULL;
        errno = 0;
        const double v = b == e ? 0 : strtod(b, &end);
        const bool number = b != e && end == e;
        *e = saved;
        if (!number)
            return gr_error_set(err, GR_ERR_DATA, "%s:%lld:%lld: %s%.*s%s in column %lld (%s) is not a number", path,
                                (long long)lineno, col, b == e ? "an empty cell" : "'", (int)GR_MIN(e - b, CSV_SHOW),
                                b, b == e ? "" : "'", (long long)c + 1, t->names[c]);
        if (!isfinite(v) || fabs(v) > FLT_MAX)
            return gr_error_set(err, GR_ERR_DATA, "%s:%lld:%lld: '%.*s' in column %lld (%s) is not a finite float32 "
                                "value", path, (long long)lineno, col, (int)GR_MIN(e - b, CSV_SHOW), b, (long long)c + 1,
                                t->names[c]);
        row[c] = (float)v;
    }
    t->rows++;
    return GR_OK;
}

/* Reads and parses the whole file. */
static gr_status csv_read(const char *path, csv_table *t, gr_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: %s", path, errno == ENOENT ? "no such file" : strerror(errno));
    gr_status st = gr_check_regular(path, "the CSV file", GR_ERR_DATA, err);
    if (st != GR_OK) return st;
    FILE *f = fopen(path, "rb");
    if (!f) return gr_error_set(err, GR_ERR_DATA, "%s: %s", path, strerror(errno));
    char *line = NULL, **starts = NULL, **ends = NULL;
    size_t lcap = 0;
    int64_t cap = 0, lineno = 0;
    ssize_t len;
    while (st == GR_OK && (len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            st = gr_error_set(err, GR_ERR_DATA, "%s:%lld: a NUL byte: not a text file", path, (long long)lineno);
            break;
        }
        if (strspn(line, " \t") == (size_t)len) continue; /* blank lines */
        st = t->names ? csv_row(path, lineno, line, t, &starts, &ends, &cap, err)
                      : csv_header(path, line, t, &starts, &ends, &cap, err);
    }
    if (st == GR_OK && ferror(f)) st = gr_error_set(err, GR_ERR_DATA, "%s: read failed: %s", path, strerror(errno));
    if (st == GR_OK && !t->names) st = gr_error_set(err, GR_ERR_DATA, "%s: empty (expected a header row of column "
                                                    "names, then one row of numbers per sample)", path);
    if (st == GR_OK && t->rows == 0) st = gr_error_set(err, GR_ERR_DATA, "%s: a header but no rows of data", path);
    free(line);
    free(starts);
    free(ends);
    fclose(f);
    return st;
}

/* A string-list attribute of obj. */
static gr_status csv_attr_names(const gr_conv_out *o, hid_t obj, const char *where, const char *name,
                                const char *const *v, int64_t n, gr_error *err) {
    gr_status st = GR_OK;
    hid_t str_t = -1, sp = -1, a = -1;
    const hsize_t dim = (hsize_t)n;
    GR_H5_CHECK(str_t = H5Tcopy(H5T_C_S1), err, "%s: %s: attribute %s", o->tmp, where, name);
    GR_H5_CHECK(H5Tset_size(str_t, H5T_VARIABLE), err, "%s: %s: attribute %s", o->tmp, where, name);
    GR_H5_CHECK(H5Tset_cset(str_t, H5T_CSET_UTF8), err, "%s: %s: attribute %s", o->tmp, where, name);
    GR_H5_CHECK(sp = H5Screate_simple(1, &dim, NULL), err, "%s: %s: attribute %s", o->tmp, where, name);
    GR_H5_CHECK(a = H5Acreate2(obj, name, str_t, sp, H5P_DEFAULT, H5P_DEFAULT), err, "%s: %s: attribute %s", o->tmp,
                where, name);
    GR_H5_CHECK(H5Awrite(a, str_t, v), err, "%s: %s: attribute %s", o->tmp, where, name);
fail:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (str_t >= 0) H5Tclose(str_t);
    return st;
}

/* A float64 [n] attribute of obj. */
static gr_status csv_attr_doubles(const gr_conv_out *o, hid_t obj, const char *where, const char *name,
                                  const double *v, int64_t n, gr_error *err) {
    gr_status st = GR_OK;
    hid_t sp = -1, a = -1;
    const hsize_t dim = (hsize_t)n;
    GR_H5_CHECK(sp = H5Screate_simple(1, &dim, NULL), err, "%s: %s: attribute %s", o->tmp, where, name);
    GR_H5_CHECK(a = H5Acreate2(obj, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s: attribute %s", o->tmp, where, name);
    GR_H5_CHECK(H5Awrite(a, H5T_NATIVE_DOUBLE, v), err, "%s: %s: attribute %s", o->tmp, where, name);
fail:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    return st;
}

/* What the two datasets of a split take of the table: its columns, their
 * names, the train split's statistics. */
typedef struct csv_part {
    const char *name;        /* "features", "targets" */
    const int64_t *cols;     /* table columns, in dataset order */
    int64_t n;
    const char **names;
    double *mean, *std;
} csv_part;

/* Dataset part->name [rows, part->n] of group g from the rows of t whose
 * keep[] equals want, with part's mean/std attributes. */
static gr_status csv_dataset(const gr_conv_out *o, hid_t g, const char *gname, const csv_table *t, const uint8_t *keep,
                             uint8_t want, int64_t rows, const csv_part *part, gr_error *err) {
    gr_status st = GR_OK;
    hid_t sp = -1, dcpl = -1, d = -1;
    char where[256];
    snprintf(where, sizeof where, "%s/%s", strcmp(gname, "/") ? gname : "", part->name);
    float *buf = gr_xmalloc((size_t)rows * (size_t)part->n * sizeof *buf);
    for (int64_t r = 0, i = 0; r < t->rows; r++) {
        if ((keep ? keep[r] : 0) != want) continue;
        for (int64_t c = 0; c < part->n; c++) buf[i * part->n + c] = t->cells[r * t->ncols + part->cols[c]];
        i++;
    }
    const hsize_t dims[2] = {(hsize_t)rows, (hsize_t)part->n};
    const hsize_t chunk[2] = {(hsize_t)gr_conv_chunk_samples(rows, part->n * 4), (hsize_t)part->n};
    GR_H5_CHECK(sp = H5Screate_simple(2, dims, NULL), err, "%s: %s: cannot create", o->tmp, where);
    GR_H5_CHECK(dcpl = H5Pcreate(H5P_DATASET_CREATE), err, "%s: %s: cannot create", o->tmp, where);
    GR_H5_CHECK(H5Pset_chunk(dcpl, 2, chunk), err, "%s: %s: cannot create", o->tmp, where);
    GR_H5_CHECK(d = H5Dcreate2(g, part->name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT), err,
                "%s: %s: cannot create", o->tmp, where);
    GR_H5_CHECK(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), err, "%s: %s: write failed",
                o->tmp, where);
    if ((st = csv_attr_doubles(o, d, where, "mean", part->mean, part->n, err)) != GR_OK) goto fail;
    st = csv_attr_doubles(o, d, where, "std", part->std, part->n, err);
fail:
    free(buf);
    if (d >= 0) H5Dclose(d);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    return st;
}

/* Group gname: the rows of t whose keep[] equals want (keep NULL: all). */
static gr_status csv_group(const gr_conv_out *o, const char *gname, const csv_table *t, const uint8_t *keep,
                           uint8_t want, int64_t rows, const csv_part parts[2], gr_error *err) {
    gr_status st = GR_OK;
    hid_t g = -1, lcpl = -1;
    GR_H5_CHECK(lcpl = H5Pcreate(H5P_LINK_CREATE), err, "%s: cannot create group %s", o->tmp, gname);
    GR_H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1), err, "%s: cannot create group %s", o->tmp, gname);
    GR_H5_CHECK(g = H5Gcreate2(o->file, gname, lcpl, H5P_DEFAULT, H5P_DEFAULT), err, "%s: cannot create group %s",
                o->tmp, gname);
    for (int k = 0; k < 2 && st == GR_OK; k++)
        st = csv_dataset(o, g, gname, t, keep, want, rows, &parts[k], err);
    if (st == GR_OK) st = csv_attr_names(o, g, gname, "feature_names", parts[0].names, parts[0].n, err);
    if (st == GR_OK) st = csv_attr_names(o, g, gname, "target_names", parts[1].names, parts[1].n, err);
fail:
    if (g >= 0) H5Gclose(g);
    if (lcpl >= 0) H5Pclose(lcpl);
    return st;
}

/* Per-column mean and population std (0 becomes 1) of part's columns over
 * the rows of t whose keep[] is 0 (the train split; keep NULL: all). */
static void csv_stats(const csv_table *t, const uint8_t *keep, csv_part *part) {
    for (int64_t c = 0; c < part->n; c++) {
        double s = 0, s2 = 0, cnt = 0;
        for (int64_t r = 0; r < t->rows; r++) {
            if (keep && keep[r]) continue;
            const double v = t->cells[r * t->ncols + part->cols[c]];
            s += v, cnt += 1;
        }
        const double mean = cnt > 0 ? s / cnt : 0;
        for (int64_t r = 0; r < t->rows; r++) {
            if (keep && keep[r]) continue;
            const double v = t->cells[r * t->ncols + part->cols[c]] - mean;
            s2 += v * v;
        }
        const double sd = cnt > 0 ? sqrt(s2 / cnt) : 0;
        part->mean[c] = mean;
        part->std[c] = sd > 0 ? sd : 1;
    }
}

/* The --target names against the header: which columns are targets. */
static gr_status csv_columns(const gr_csv_config *cfg, const csv_table *t, int64_t *fcols, int64_t *tcols,
                             gr_error *err) {
    uint8_t *is_target = gr_xcalloc((size_t)t->ncols, 1);
    gr_status st = GR_OK;
    for (int k = 0; k < cfg->ntargets && st == GR_OK; k++) {
        int64_t c = 0;
        while (c < t->ncols && strcmp(t->names[c], cfg->targets[k]) != 0) c++;
        if (c == t->ncols) {
            char cols[512];
            size_t n = 0;
            cols[0] = '\0';
            for (int64_t i = 0; i < t->ncols && n + 1 < sizeof cols; i++)
                n += (size_t)snprintf(cols + n, sizeof cols - n, "%s%s", i ? ", " : "", t->names[i]);
            st = gr_error_set(err, GR_ERR_USAGE, "data csv: --target %s: %s has no such column (its columns: %s)",
                              cfg->targets[k], cfg->from, cols);
        } else if (is_target[c]) {
            st = gr_error_set(err, GR_ERR_USAGE, "data csv: --target names column %s twice", cfg->targets[k]);
        } else {
            is_target[c] = 1;
            tcols[k] = c;
        }
    }
    int64_t nf = 0;
    for (int64_t c = 0; c < t->ncols; c++)
        if (!is_target[c]) fcols[nf++] = c;
    if (st == GR_OK && nf == 0)
        st = gr_error_set(err, GR_ERR_USAGE, "data csv: every column of %s is a --target; at least one must be left "
                          "as a feature", cfg->from);
    free(is_target);
    return st;
}

gr_status gr_data_convert_csv(const gr_csv_config *cfg, const char *out, bool force, bool progress,
                              gr_csv_report *rep, gr_error *err) {
    if (rep) memset(rep, 0, sizeof *rep);
    if (!cfg->from || cfg->ntargets < 1 || !cfg->targets)
        return gr_error_set(err, GR_ERR_USAGE, "data csv: --from FILE.csv and --target COL[,COL...] are required");
    if (cfg->val_fraction != 0 && !(cfg->val_fraction > 0 && cfg->val_fraction < 1))
        return gr_error_set(err, GR_ERR_USAGE, "data csv: --val-fraction must be in (0, 1), got %g",
                            cfg->val_fraction);
    csv_table t = {0};
    gr_status st = csv_read(cfg->from, &t, err);
    int64_t *fcols = gr_xcalloc((size_t)GR_MAX(t.ncols, 1), sizeof *fcols);
    int64_t *tcols = gr_xcalloc((size_t)GR_MAX(cfg->ntargets, 1), sizeof *tcols);
    if (st == GR_OK) st = csv_columns(cfg, &t, fcols, tcols, err);
    const int64_t m = cfg->ntargets, k = t.ncols - m;
    uint8_t *val = NULL;
    int64_t nval = 0;
    if (st == GR_OK && cfg->val_fraction > 0) {
        if (t.rows < 2) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: 1 row: --val-fraction needs at least 2 (one for /train, one for "
                              "/val)", cfg->from);
        } else { /* one class: a seeded shuffle of all rows, the first round(F * N) to /val */
            int32_t *zero = gr_xcalloc((size_t)t.rows, sizeof *zero);
            val = gr_xmalloc((size_t)t.rows);
            nval = gr_split_stratified(zero, t.rows, 1, cfg->val_fraction, cfg->seed, val);
            free(zero);
        }
    }
    gr_conv_out o = {.file = -1, .old = -1};
    const char **fnames = gr_xcalloc((size_t)GR_MAX(k, 1), sizeof *fnames);
    const char **tnames = gr_xcalloc((size_t)GR_MAX(m, 1), sizeof *tnames);
    double *stats = gr_xcalloc(2 * (size_t)GR_MAX(t.ncols, 1), sizeof *stats);
    if (st == GR_OK) {
        for (int64_t c = 0; c < k; c++) fnames[c] = t.names[fcols[c]];
        for (int64_t c = 0; c < m; c++) tnames[c] = t.names[tcols[c]];
        csv_part parts[2] = {{"features", fcols, k, fnames, stats, stats + k},
                             {"targets", tcols, m, tnames, stats + 2 * k, stats + 2 * k + m}};
        csv_stats(&t, val, &parts[0]);
        csv_stats(&t, val, &parts[1]);
        if ((st = gr_conv_out_begin(&o, out, force, progress, err)) == GR_OK) {
            st = csv_group(&o, "/train", &t, val, 0, t.rows - nval, parts, err);
            if (st == GR_OK && val) st = csv_group(&o, "/val", &t, val, 1, nval, parts, err);
            if (st == GR_OK) st = gr_conv_out_commit(&o, err);
            gr_conv_out_abort(&o); /* after a commit: nothing to do */
        }
    }
    if (st == GR_OK && rep) *rep = (gr_csv_report){t.rows - nval, nval, k, m};
    if (st == GR_OK && progress) {
        char vs[64] = "";
        if (val) snprintf(vs, sizeof vs, ", /val %lld", (long long)nval);
        fprintf(stderr, "gpurun data: %s: /train %lld%s rows of %lld features and %lld targets from %s\n", out,
                (long long)(t.rows - nval), vs, (long long)k, (long long)m, cfg->from);
    }
    free(stats);
    free(fnames);
    free(tnames);
    free(val);
    free(fcols);
    free(tcols);
    csv_table_free(&t);
    return st;
}
