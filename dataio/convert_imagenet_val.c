/* convert_imagenet_val.c — the ground truth of ILSVRC2012's flat val folder
 * (see convert_imagenet.h): Kaggle's LOC_val_solution.csv (a header line,
 * then "ILSVRC2012_val_00008726,n02119789 255 142 454 329 ..." per image:
 * the wnid is PredictionString's first token), or the devkit's
 * ILSVRC2012_validation_ground_truth.txt (line i: the ILSVRC2012_ID of
 * ILSVRC2012_val_<i, 8 digits>) with data/meta.mat (the struct array
 * `synsets`, whose ILSVRC2012_ID and WNID fields map ids to wnids). Note
 * the devkit's ids are not the sorted wnids' order: labels always go
 * through the wnid to train's sorted class folders. */
#include "convert_imagenet.h"
#include "matfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INET_CSV "LOC_val_solution.csv"
#define INET_TXT "ILSVRC2012_validation_ground_truth.txt"
#define INET_META "meta.mat"
#define INET_DEVKIT "ILSVRC2012_devkit_t12"
#define INET_MAX_ID 1000000
#define INET_LOOKED_MAX 4096

/* One line of ground truth: the image's name without extension, its label. */
typedef struct inet_truth {
    char *stem;
    int32_t label;
    int64_t line;
    int64_t file;   /* the val file it labelled; -1 before */
} inet_truth;

typedef struct inet_truths {
    inet_truth *v;
    int64_t n, cap;
} inet_truths;

static void inet_truths_free(inet_truths *t) {
    for (int64_t i = 0; i < t->n; i++) free(t->v[i].stem);
    free(t->v);
    memset(t, 0, sizeof *t);
}

int32_t gr_inet_label(char *const *classes, int64_t n, const char *wnid) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const int c = strcmp(classes[mid], wnid);
        if (c == 0) return (int32_t)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* ---- where the files are ---- */

static bool inet_is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The first of dirs[k]/name that is a file (allocated), else NULL; each path
 * tried is added to looked (", " between). */
static char *inet_look(const char *const *dirs, int ndirs, const char *name, char *looked) {
    for (int k = 0; k < ndirs; k++) {
        if (!dirs[k]) continue;
        char *path = gr_conv_join(dirs[k], name);
        if (inet_is_file(path)) return path;
        const size_t used = strlen(looked);
        snprintf(looked + used, INET_LOOKED_MAX - used, "%s%s", used ? ", " : "", path);
        free(path);
    }
    return NULL;
}

/* Where the devkit's files may be: the --devkit folder and its data/, the
 * root, its parent, and ILSVRC2012_devkit_t12/data in both; [0] is `near`. */
static int inet_devkit_dirs(const gr_imagenet_config *cfg, const char *near, char *dirs[8]) {
    int n = 0;
    dirs[n++] = near ? gr_xstrdup(near) : NULL;
    if (cfg->devkit) dirs[n++] = gr_conv_join(cfg->devkit, "data"), dirs[n++] = gr_xstrdup(cfg->devkit);
    char *up = gr_conv_join(cfg->dir, "..");
    dirs[n++] = gr_xstrdup(cfg->dir);
    dirs[n++] = gr_xstrdup(up);
    dirs[n++] = gr_conv_join(cfg->dir, INET_DEVKIT "/data");
    dirs[n++] = gr_conv_join(up, INET_DEVKIT "/data");
    free(up);
    return n;
}

static void inet_dirs_free(char **dirs, int n) {
    for (int k = 0; k < n; k++) free(dirs[k]);
}

/* ---- reading them ---- */

/* The next line of f into *line without its end (CR LF or LF) and, on the
 * first, a UTF-8 byte order mark; false at the end. */
static bool inet_line(FILE *f, char **line, size_t *cap, int64_t *lineno) {
    ssize_t n = getline(line, cap, f);
    if (n < 0) return false;
    while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r')) (*line)[--n] = '\0';
    if (++*lineno == 1 && strncmp(*line, "\xef\xbb\xbf", 3) == 0) memmove(*line, *line + 3, (size_t)n - 2);
    return true;
}

static void inet_add(inet_truths *t, char *stem, int32_t label, int64_t line) {
    GR_GROW(t->v, t->cap, t->n + 1);
    t->v[t->n++] = (inet_truth){stem, label, line, -1};
}

/* Kaggle's LOC_val_solution.csv. */
static gr_status inet_read_csv(const char *path, char *const *classes, int64_t nclasses, inet_truths *t,
                               gr_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return gr_error_set(err, GR_ERR_DATA, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int64_t no = 0;
    gr_status st = GR_OK;
    if (!inet_line(f, &line, &cap, &no) || strncmp(line, "ImageId,", 8) != 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s:1: expected the header 'ImageId,PredictionString' of Kaggle's "
                          INET_CSV, path);
    while (st == GR_OK && inet_line(f, &line, &cap, &no)) {
        if (!line[0]) continue;
        const char *comma = strchr(line, ','), *w = comma ? comma + 1 : NULL;
        while (w && *w == ' ') w++;
        const size_t wl = w ? strcspn(w, " ") : 0;
        if (!comma || comma == line || wl == 0) {
            st = gr_error_set(err, GR_ERR_DATA, "%s:%lld: expected ImageId,PredictionString with a wnid first in "
                              "PredictionString, got '%.200s'", path, (long long)no, line);
            break;
        }
        char *wnid = strndup(w, wl);
        const int32_t label = gr_inet_label(classes, nclasses, wnid);
        if (label < 0)
            st = gr_error_set(err, GR_ERR_DATA, "%s:%lld: %.*s's wnid %s is not a class of train (no class folder "
                              "of that name)", path, (long long)no, (int)(comma - line), line, wnid);
        else inet_add(t, strndup(line, (size_t)(comma - line)), label, no);
        free(wnid);
    }
    free(line);
    fclose(f);
    return st;
}

/* meta.mat's synsets: ids[i] the wnid of ILSVRC2012_ID i (allocated; NULL
 * where none), for i < *nids. */
static gr_status inet_read_meta(const char *path, char ***ids, int64_t *nids, gr_error *err) {
    gr_mat_array *s = NULL;
    *ids = NULL, *nids = 0;
    gr_status st = gr_mat_read(path, "synsets", &s, err);
    if (st != GR_OK) return st;
    if (s->cls != GR_MAT_STRUCT || !gr_mat_field(s, 0, "ILSVRC2012_ID") || !gr_mat_field(s, 0, "WNID"))
        st = gr_error_set(err, GR_ERR_DATA, "%s: 'synsets' is not a struct array with the fields ILSVRC2012_ID and "
                          "WNID (the devkit's data/meta.mat)", path);
    for (int64_t e = 0; st == GR_OK && e < s->numel; e++) {
        const gr_mat_array *id = gr_mat_field(s, e, "ILSVRC2012_ID"), *wnid = gr_mat_field(s, e, "WNID");
        const double v = id && id->cls == GR_MAT_NUMERIC && id->numel == 1 ? id->num[0] : -1;
        if (!(v >= 1 && v <= INET_MAX_ID && v == (int64_t)v) || !wnid || wnid->cls != GR_MAT_CHAR) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: synsets(%lld): ILSVRC2012_ID is not an id in 1..%d, or WNID "
                              "is not text", path, (long long)e + 1, INET_MAX_ID);
            break;
        }
        const int64_t k = (int64_t)v;
        if (k >= *nids) {
            *ids = gr_xrealloc(*ids, (size_t)(k + 1) * sizeof **ids);
            memset(*ids + *nids, 0, (size_t)(k + 1 - *nids) * sizeof **ids);
            *nids = k + 1;
        }
        if ((*ids)[k]) st = gr_error_set(err, GR_ERR_DATA, "%s: synsets(%lld): ILSVRC2012_ID %lld is given twice",
                                         path, (long long)e + 1, (long long)k);
        else (*ids)[k] = gr_xstrdup(wnid->text);
    }
    gr_mat_free(s);
    return st;
}

/* The devkit's ILSVRC2012_validation_ground_truth.txt, ids mapped by meta. */
static gr_status inet_read_txt(const char *path, const char *meta, char *const *ids, int64_t nids,
                               char *const *classes, int64_t nclasses, inet_truths *t, gr_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return gr_error_set(err, GR_ERR_DATA, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL, *end;
    size_t cap = 0;
    int64_t no = 0;
    gr_status st = GR_OK;
    while (st == GR_OK && inet_line(f, &line, &cap, &no)) {
        errno = 0;
        const long long id = strtoll(line, &end, 10);
        while (*end == ' ' || *end == '\t') end++;
        if (errno || end == line || *end || id < 1 || id >= nids || !ids[id]) {
            st = gr_error_set(err, GR_ERR_DATA, "%s:%lld: expected an ILSVRC2012_ID that %s has, got '%.100s'", path,
                              (long long)no, meta, line);
            break;
        }
        const int32_t label = gr_inet_label(classes, nclasses, ids[id]);
        char stem[48];
        snprintf(stem, sizeof stem, "ILSVRC2012_val_%08lld", (long long)no);
        if (label < 0)
            st = gr_error_set(err, GR_ERR_DATA, "%s:%lld: %s's ILSVRC2012_ID %lld is wnid %s (%s), not a class of "
                              "train (no class folder of that name)", path, (long long)no, stem, id, ids[id], meta);
        else inet_add(t, gr_xstrdup(stem), label, no);
    }
    free(line);
    fclose(f);
    return st;
}

/* ---- matching lines and files ---- */

static int inet_cmp_stem(const void *a, const void *b) {
    return strcmp(((const inet_truth *)a)->stem, ((const inet_truth *)b)->stem);
}

/* The line for a file named stem[0, len); NULL when none. */
static inet_truth *inet_find(inet_truths *t, const char *stem, size_t len) {
    int64_t lo = 0, hi = t->n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        int c = strncmp(t->v[mid].stem, stem, len);
        if (c == 0) c = t->v[mid].stem[len] ? 1 : 0;
        if (c == 0) return &t->v[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* Each val file's label from its line; every line used once. */
static gr_status inet_match(inet_truths *t, const char *truth, const char *valdir, gr_conv_scan *val, gr_error *err) {
    if (t->n) qsort(t->v, (size_t)t->n, sizeof *t->v, inet_cmp_stem);
    for (int64_t i = 1; i < t->n; i++)
        if (strcmp(t->v[i].stem, t->v[i - 1].stem) == 0) {
            const int64_t a = GR_MIN(t->v[i].line, t->v[i - 1].line), b = GR_MAX(t->v[i].line, t->v[i - 1].line);
            return gr_error_set(err, GR_ERR_DATA, "%s:%lld: %s again (line %lld names it too)", truth, (long long)b,
                                t->v[i].stem, (long long)a);
        }
    for (int64_t i = 0; i < val->n; i++) {
        const char *path = val->files[i].path, *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        const char *dot = strrchr(base, '.');
        inet_truth *e = inet_find(t, base, dot ? (size_t)(dot - base) : strlen(base));
        if (!e) return gr_error_set(err, GR_ERR_DATA, "%s: no ground truth for this image in %s", path, truth);
        if (e->file >= 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: its ground truth (%s:%lld) is also %s's", path, truth,
                                (long long)e->line, val->files[e->file].path);
        e->file = i;
        val->files[i].label = e->label;
    }
    int64_t unused = 0;
    const inet_truth *first = NULL;
    for (int64_t i = 0; i < t->n; i++)
        if (t->v[i].file < 0 && (unused++, !first || t->v[i].line < first->line)) first = &t->v[i];
    if (first)
        return gr_error_set(err, GR_ERR_DATA, "%s:%lld: %s names no image in %s (%lld lines name none; a partial val "
                            "folder needs a ground truth of its own images)", truth, (long long)first->line,
                            first->stem, valdir, (long long)unused);
    return GR_OK;
}

/* The devkit's ground truth at txt: its meta.mat found, read, applied. */
static gr_status inet_devkit(const gr_imagenet_config *cfg, const char *txt, char *const *classes, int64_t nclasses,
                             inet_truths *t, char **used, gr_error *err) {
    char *near = gr_xstrdup(txt), *slash = strrchr(near, '/'), looked[INET_LOOKED_MAX] = "", *dirs[8];
    if (slash) *slash = '\0';
    const int ndirs = inet_devkit_dirs(cfg, slash ? near : ".", dirs);
    char *meta = inet_look((const char *const *)dirs, ndirs, INET_META, looked);
    inet_dirs_free(dirs, ndirs);
    free(near);
    if (!meta)
        return gr_error_set(err, GR_ERR_DATA, "%s: the devkit's ground truth gives ILSVRC2012_IDs, which its "
                            "data/meta.mat maps to wnids, and no meta.mat was found (looked for %s); give --devkit DIR",
                            txt, looked);
    char **ids;
    int64_t nids;
    gr_status st = inet_read_meta(meta, &ids, &nids, err);
    if (st == GR_OK) st = inet_read_txt(txt, meta, ids, nids, classes, nclasses, t, err);
    for (int64_t i = 0; i < nids; i++) free(ids[i]);
    free(ids);
    const size_t len = strlen(txt) + strlen(meta) + 16;
    *used = gr_xmalloc(len);
    snprintf(*used, len, "%s with %s", txt, meta);
    free(meta);
    return st;
}

/* Whether path's first line starts with ImageId (Kaggle's CSV). */
static bool inet_is_csv(const char *path) {
    char head[16] = "";
    FILE *f = fopen(path, "r");
    if (f && fgets(head, sizeof head, f)) {}
    if (f) fclose(f);
    const char *h = strncmp(head, "\xef\xbb\xbf", 3) == 0 ? head + 3 : head;
    return strncmp(h, "ImageId", 7) == 0;
}

gr_status gr_inet_flat_val(const gr_imagenet_config *cfg, const char *valdir, char *const *classes, int64_t nclasses,
                           gr_conv_scan *val, char **used, gr_error *err) {
    char looked[INET_LOOKED_MAX] = "", *dirs[8], *truth = NULL;
    *used = NULL;
    if (cfg->val_labels) {
        if (!inet_is_file(cfg->val_labels))
            return gr_error_set(err, GR_ERR_DATA, "%s: --val-labels: no such file", cfg->val_labels);
        truth = gr_xstrdup(cfg->val_labels);
    }
    char *up = gr_conv_join(cfg->dir, "..");
    const char *roots[2] = {cfg->dir, up};
    const bool csv = truth ? inet_is_csv(truth) : (truth = inet_look(roots, 2, INET_CSV, looked)) != NULL;
    free(up);
    int ndirs = 0;
    if (!truth) {
        ndirs = inet_devkit_dirs(cfg, NULL, dirs);
        truth = inet_look((const char *const *)dirs, ndirs, INET_TXT, looked);
        inet_dirs_free(dirs, ndirs);
    }
    if (!truth)
        return gr_error_set(err, GR_ERR_DATA, "%s: holds the val images flat (no class folders), and no ground truth "
                            "for them was found (looked for %s); give --val-labels FILE (Kaggle's " INET_CSV " or "
                            "the devkit's " INET_TXT ", with --devkit DIR for its meta.mat)", valdir, looked);
    inet_truths t = {0};
    gr_status st;
    if (csv) {
        st = inet_read_csv(truth, classes, nclasses, &t, err);
        *used = gr_xstrdup(truth);
    } else {
        st = inet_devkit(cfg, truth, classes, nclasses, &t, used, err);
    }
    if (st == GR_OK) st = inet_match(&t, truth, valdir, val, err);
    inet_truths_free(&t);
    free(truth);
    return st;
}
