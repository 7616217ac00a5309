/* test_convert_imagenet.c — unit tests for `gpurun data imagenet`
 * (convert_imagenet*.c) and the MAT-file reader it uses (matfile.c), on a
 * fake ILSVRC2012 tree of three classes made here (small JPEGs, and a PNG
 * named .JPEG as ImageNet has one): val in class folders, Kaggle's layout
 * with a flat val and LOC_val_solution.csv, the devkit's flat val with its
 * ground truth and a meta.mat written here (compressed and not), whose ids
 * are not the sorted wnids' order; the labels checked against the sorted
 * wnids, LOC_synset_mapping.txt's names stored; --splits val, --store raw;
 * the errors (exit 3 naming the file, exit 2 for options). */
#include "convert_images.h"
#include "../dataio/matfile.h"
#include "../dataio/source.h"

#include <zlib.h>

static const char *const WNIDS[3] = {"n01440764", "n01443537", "n02102040"}; /* sorted: labels 0, 1, 2 */
static const char *const NAMES[3] = {"tench, Tinca tinca", "goldfish, Carassius auratus", "English springer"};
static const int DEVKIT_ID[3] = {2, 3, 1};          /* ILSVRC2012_ID of WNIDS[k]: not their sorted order */
static const int VAL_CLASS[6] = {2, 0, 1, 0, 2, 1}; /* ILSVRC2012_val_0000000<i+1>'s class */

static uint8_t px_grad(int x, int y, int c) { return (uint8_t)(x * 9 + y * 5 + c * 70); }

/* mkdir -p. */
static void mkdirs(const char *path) {
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') *s = '\0', mkdir(p, 0755), *s = '/';
    mkdir(p, 0755);
}

static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

/* dir/name kept (join's buffers rotate). */
typedef struct tpath {
    char s[768];
} tpath;
static tpath at(const char *dir, const char *name) {
    tpath p;
    const int n = snprintf(p.s, sizeof p.s, "%s/%s", dir, name);
    GR_ASSERT(n > 0 && n < (int)sizeof p.s);
    return p;
}

/* base/train/<wnid>/: two JPEGs each, class 1 a PNG named .JPEG too. */
static void make_train(const char *base) {
    for (int k = 0; k < 3; k++) {
        char dir[1024], f[1100];
        snprintf(dir, sizeof dir, "%s/train/%s", base, WNIDS[k]);
        mkdirs(dir);
        for (int i = 0; i < 2; i++) {
            snprintf(f, sizeof f, "%s/%s_%d.JPEG", dir, WNIDS[k], i + 1);
            write_jpeg(f, 16 + 4 * k, 12, 3, px_grad);
        }
        if (k == 1) {
            snprintf(f, sizeof f, "%s/%s_3.JPEG", dir, WNIDS[k]);
            write_png(f, 10, 8, PNG_COLOR_TYPE_RGB, 8, px_grad);
        }
    }
}

/* base/val/ILSVRC2012_val_0000000<i>.JPEG, flat; or in class folders. */
static void make_val(const char *base, bool folders) {
    for (int i = 0; i < 6; i++) {
        char dir[1024], f[1100];
        snprintf(dir, sizeof dir, "%s/val%s%s", base, folders ? "/" : "", folders ? WNIDS[VAL_CLASS[i]] : "");
        mkdirs(dir);
        snprintf(f, sizeof f, "%s/ILSVRC2012_val_%08d.JPEG", dir, i + 1);
        write_jpeg(f, 14, 10, 3, px_grad);
    }
}

static void write_mapping(const char *dir) {
    char text[512] = "n01234567 not a class here\n";
    for (int k = 2; k >= 0; k--)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s %s\r\n", WNIDS[k], NAMES[k]);
    write_text(join(dir, "LOC_synset_mapping.txt"), text);
}

/* Kaggle's LOC_val_solution.csv for the six val images (rows shuffled), and
 * extra: one more row, naming an image that is not there. */
static void write_csv(const char *path, bool extra, bool drop_last) {
    char text[2048] = "ImageId,PredictionString\n";
    for (int j = 0; j < 6 + extra; j++) {
        const int i = (j * 5 + 2) % 6;
        if (j == 6) snprintf(text + strlen(text), sizeof text - strlen(text), "ILSVRC2012_val_00000099,%s 1 2 3 4\n",
                             WNIDS[0]);
        else if (!(drop_last && i == 5))
            snprintf(text + strlen(text), sizeof text - strlen(text), "ILSVRC2012_val_%08d,%s 3 4 50 60 %s 1 1 2 2\n",
                     i + 1, WNIDS[VAL_CLASS[i]], WNIDS[VAL_CLASS[i]]);
    }
    write_text(path, text);
}

/* ---- a MAT-file of level 5, written here ---- */
typedef struct mbuf {
    uint8_t *p;
    size_t n, cap;
} mbuf;

static void mput(mbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) b->p = realloc(b->p, b->cap = 2 * (b->n + n) + 64);
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void mput32(mbuf *b, uint32_t v) { mput(b, &v, 4); } /* the host is little-endian, as the file */

/* A data element: the small form for up to 4 bytes, else tag, data, padding. */
static void melem(mbuf *b, uint32_t type, const void *d, size_t n) {
    static const uint8_t zero[8];
    if (n <= 4) {
        mput32(b, (uint32_t)n << 16 | type);
        mput(b, d, n);
        mput(b, zero, 4 - n);
        return;
    }
    mput32(b, type);
    mput32(b, (uint32_t)n);
    mput(b, d, n);
    mput(b, zero, (8 - n % 8) % 8);
}

/* An miMATRIX of class cls, rows x cols, named name, its class data in body. */
static void mmatrix(mbuf *b, uint32_t cls, int rows, int cols, const char *name, const mbuf *body) {
    mbuf m = {0};
    const uint32_t flags[2] = {cls, 0};
    const int32_t dims[2] = {rows, cols};
    melem(&m, 6, flags, 8);
    melem(&m, 5, dims, 8);
    melem(&m, 1, name, strlen(name));
    mput(&m, body->p, body->n);
    mput32(b, 14);
    mput32(b, (uint32_t)m.n);
    mput(b, m.p, m.n);
    free(m.p);
}

/* A 1 x n char array, as MATLAB writes it: UTF-16 units (Latin-1 here). */
static void mchar(mbuf *b, const char *latin1) {
    mbuf body = {0};
    uint16_t u[128];
    const size_t n = strlen(latin1);
    for (size_t i = 0; i < n; i++) u[i] = (uint8_t)latin1[i];
    melem(&body, 4, u, 2 * n);
    mmatrix(b, 4, 1, (int)n, "", &body);
    free(body.p);
}

/* A 1 x 1 double, stored as miUINT16 (MATLAB stores small integers so) or miDOUBLE. */
static void mdouble(mbuf *b, double v, bool compact) {
    mbuf body = {0};
    const uint16_t u = (uint16_t)v;
    if (compact) melem(&body, 4, &u, 2);
    else melem(&body, 9, &v, 8);
    mmatrix(b, 6, 1, 1, "", &body);
    free(body.p);
}

/* synsets: a 4 x 1 struct array (the three classes, then a parent synset),
 * fields ILSVRC2012_ID, WNID, words, num_children; after a variable `other`. */
static void write_meta(const char *path, bool compressed) {
    static const char *const fields[4] = {"ILSVRC2012_ID", "WNID", "words", "num_children"};
    mbuf s = {0}, var = {0}, file = {0};
    const int32_t len = 32;
    char names[4 * 32] = {0};
    for (int f = 0; f < 4; f++) memcpy(names + 32 * f, fields[f], strlen(fields[f]));
    melem(&s, 5, &len, 4);
    melem(&s, 1, names, sizeof names);
    for (int e = 0; e < 4; e++) {
        int k = 0;
        while (e < 3 && DEVKIT_ID[k] != e + 1) k++; /* elements in id order, as the devkit's */
        mdouble(&s, e + 1, true);
        mchar(&s, e < 3 ? WNIDS[k] : "n00001740");
        mchar(&s, e < 3 ? NAMES[k] : "entit\xe9"); /* é in Latin-1: read back as UTF-8 */
        mdouble(&s, e < 3 ? 0 : 3, false);
    }
    mbuf seven = {0};
    const double v7 = 7;
    melem(&seven, 9, &v7, 8);
    mmatrix(&var, 2, 4, 1, "synsets", &s);
    char head[128] = "MATLAB 5.0 MAT-file, written by test_convert_imagenet";
    memset(head + strlen(head), ' ', 116 - strlen(head));
    memset(head + 116, 0, 8);
    head[124] = 0, head[125] = 1, head[126] = 'I', head[127] = 'M';
    mput(&file, head, 128);
    mmatrix(&file, 6, 1, 1, "other", &seven);
    if (compressed) {
        uLongf zn = compressBound(var.n);
        uint8_t *z = malloc(zn);
        GR_ASSERT(compress2(z, &zn, var.p, var.n, 6) == Z_OK);
        mput32(&file, 15);
        mput32(&file, (uint32_t)zn);
        mput(&file, z, zn);
        free(z);
    } else {
        mput(&file, var.p, var.n);
    }
    write_bytes(path, file.p, file.n);
    free(s.p), free(var.p), free(file.p), free(seven.p);
}

static void test_matfile(const char *dir) {
    for (int compressed = 0; compressed < 2; compressed++) {
        const char *path = join(dir, compressed ? "meta_z.mat" : "meta.mat");
        write_meta(path, compressed);
        gr_mat_array *a = NULL;
        gr_error err = {0};
        CHECK_MSG(gr_mat_read(path, "synsets", &a, &err) == GR_OK, "%s", err.msg);
        if (!a) continue;
        CHECK(a->cls == GR_MAT_STRUCT && a->numel == 4 && a->nfields == 4 && a->dims[0] == 4);
        const gr_mat_array *id = gr_mat_field(a, 0, "ILSVRC2012_ID"), *w = gr_mat_field(a, 0, "WNID");
        CHECK(id && id->cls == GR_MAT_NUMERIC && id->num[0] == 1 && w && strcmp(w->text, WNIDS[2]) == 0);
        const gr_mat_array *words = gr_mat_field(a, 3, "words"), *kids = gr_mat_field(a, 3, "num_children");
        CHECK(words && strcmp(words->text, "entit\xc3\xa9") == 0 && kids && kids->num[0] == 3);
        CHECK(gr_mat_field(a, 4, "WNID") == NULL && gr_mat_field(a, 0, "gloss") == NULL);
        gr_mat_free(a);
        CHECK(gr_mat_read(path, "other", &a, &err) == GR_OK && a && a->cls == GR_MAT_NUMERIC && a->num[0] == 7);
        gr_mat_free(a);
        CHECK(gr_mat_read(path, "nope", &a, &err) == GR_ERR_DATA && !a);
        CHECK_STR_CONTAINS(err.msg, "no variable named 'nope'");
    }
    /* cut short, in the compressed stream and in a plain one; a v7.3 header; not a MAT-file */
    uint8_t buf[4096];
    for (int compressed = 0; compressed < 2; compressed++) {
        const size_t n = read_bytes(join(dir, compressed ? "meta_z.mat" : "meta.mat"), buf, sizeof buf);
        write_bytes(join(dir, "cut.mat"), buf, n - 30);
        gr_mat_array *a = NULL;
        gr_error err = {0};
        CHECK(gr_mat_read(join(dir, "cut.mat"), "synsets", &a, &err) == GR_ERR_DATA && !a);
        CHECK_STR_CONTAINS(err.msg, "cut.mat: not a MAT-file MATLAB can read, or damaged");
    }
    buf[124] = 0, buf[125] = 2;
    write_bytes(join(dir, "v73.mat"), buf, 512);
    gr_mat_array *a = NULL;
    gr_error err = {0};
    CHECK(gr_mat_read(join(dir, "v73.mat"), "synsets", &a, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "version 7.3");
    write_text(join(dir, "text.mat"), "hello");
    CHECK(gr_mat_read(join(dir, "text.mat"), "synsets", &a, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "not a MAT-file of level 5");
}

/* ---- the converter ---- */

/* Converts cfg into out: status, and the message into err. */
static gr_status convert(gr_imagenet_config *cfg, const char *out, gr_imagefolder_report *rep, gr_error *err) {
    remove(out);
    return gr_data_convert_imagenet(cfg, out, false, false, rep, err);
}

/* The labels and formats of split group of out. */
static int64_t read_labels(const char *out, const char *group, int32_t *labels, uint8_t *formats, int64_t max) {
    gr_error err = {0};
    gr_source *s = gr_source_encoded(out, group, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    if (!s) return -1;
    gr_source_reader r;
    gr_source_reader_init(&r, s);
    for (int64_t i = 0; i < s->n && i < max; i++) {
        CHECK(gr_source_read(&r, i, gr_source_find(s, "label"), &labels[i], &err) == GR_OK);
        CHECK(gr_source_read(&r, i, gr_source_find(s, "format"), &formats[i], &err) == GR_OK);
    }
    gr_source_reader_free(&r);
    const int64_t n = s->n;
    gr_source_close(s);
    return n;
}

/* Val's labels in file order: flat, the images' classes; in class folders, sorted. */
static const int32_t VAL_FLAT[6] = {2, 0, 1, 0, 2, 1}, VAL_FOLDERS[6] = {0, 0, 1, 1, 2, 2};

/* /train: 7 images, the PNG (format 1) third of class 1; /val: val_y. */
static void check_out(const char *out, const int32_t *val_y, bool named) {
    int32_t y[8];
    uint8_t fmt[8];
    static const int32_t train_y[7] = {0, 0, 1, 1, 1, 2, 2};
    CHECK(read_labels(out, "/train", y, fmt, 8) == 7);
    CHECK(memcmp(y, train_y, sizeof train_y) == 0 && fmt[4] == 1 && fmt[3] == 0);
    CHECK(read_labels(out, "/val", y, fmt, 8) == 6);
    for (int i = 0; i < 6; i++) CHECK_MSG(y[i] == val_y[i], "val %d: label %d, expected %d", i, y[i], val_y[i]);
    char classes[3][32];
    CHECK(read_classes(out, "/val", classes, 3) == 3);
    for (int k = 0; k < 3; k++) CHECK_STR_CONTAINS(classes[k], named ? NAMES[k] : WNIDS[k]);
    CHECK(!tmp_exists(out));
}

static void test_class_folders(const char *root) {
    const tpath dp = at(root, "folders");
    const char *d = dp.s;
    make_train(d);
    make_val(d, true);
    write_mapping(root); /* in DIR/.. */
    const char *out = tmp_path("inet_folders.h5");
    gr_imagenet_config cfg = {.dir = d, .images = {.store = GR_STORE_JPEG}};
    gr_imagefolder_report rep = {0};
    gr_error err = {0};
    CHECK_MSG(convert(&cfg, out, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.samples == 13 && rep.val_samples == 6 && rep.resumed == 0);
    check_out(out, VAL_FOLDERS, true);
    char partial[600];
    snprintf(partial, sizeof partial, "%s.partial", out);
    CHECK_MSG(!file_exists(partial), "%s left", partial);
    gr_imagefolder_report_free(&rep);
    /* --splits val: the labels still by train's folders, which are listed, not read */
    cfg.no_train = true;
    CHECK_MSG(convert(&cfg, out, NULL, &err) == GR_OK, "%s", err.msg);
    int32_t y[8];
    uint8_t fmt[8];
    CHECK(read_labels(out, "/val", y, fmt, 8) == 6 && memcmp(y, VAL_FOLDERS, sizeof VAL_FOLDERS) == 0);
    gr_source *s = gr_source_encoded(out, "/train", &err);
    CHECK(s == NULL);
    /* --store raw: decoded 8x8 samples, the same labels */
    cfg = (gr_imagenet_config){.dir = d, .images = {.store = GR_STORE_RAW, .size = 8}};
    CHECK_MSG(convert(&cfg, out, NULL, &err) == GR_OK, "%s", err.msg);
    split_data sd;
    CHECK(read_split(out, "/val", &sd) && sd.n == 6 && sd.chw[1] == 8 && sd.y[0] == 0 && sd.y[5] == 2);
    split_free(&sd);
    remove(join(root, "LOC_synset_mapping.txt"));
}

static void test_kaggle(const char *root) {
    const tpath dp = at(root, "kaggle"), cp = at(dp.s, "ILSVRC/Data/CLS-LOC");
    const char *d = dp.s, *cls = cp.s;
    make_train(cls);
    make_val(cls, false);
    write_csv(join(d, "LOC_val_solution.csv"), false, false);
    write_mapping(d);
    const char *out = tmp_path("inet_kaggle.h5");
    gr_imagenet_config cfg = {.dir = d, .images = {.store = GR_STORE_JPEG}};
    gr_error err = {0};
    CHECK_MSG(convert(&cfg, out, NULL, &err) == GR_OK, "%s", err.msg);
    check_out(out, VAL_FLAT, true);
    /* a row naming an image not there; an image without a row */
    write_csv(join(d, "LOC_val_solution.csv"), true, false);
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "LOC_val_solution.csv:8: ILSVRC2012_val_00000099 names "
                 "no image in", out);
    write_csv(join(d, "LOC_val_solution.csv"), false, true);
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "ILSVRC2012_val_00000006.JPEG: no ground truth for this "
                 "image in", out);
    /* a wnid not in train; the mapping without one of train's */
    write_text(join(d, "LOC_val_solution.csv"),
               "ImageId,PredictionString\nILSVRC2012_val_00000001,n09999999 1 2 3 4\n");
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "LOC_val_solution.csv:2: ILSVRC2012_val_00000001's wnid "
                 "n09999999 is not a class of train", out);
    write_csv(join(d, "LOC_val_solution.csv"), false, false);
    write_text(join(d, "LOC_synset_mapping.txt"), "n01440764 tench\n");
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "LOC_synset_mapping.txt: no name for n01443537", out);
}

static void test_devkit(const char *root) {
    const tpath dp = at(root, "devkit"), kp = at(root, "ILSVRC2012_devkit_t12/data"), op = at(root, "kit2");
    const char *d = dp.s, *kit = kp.s, *other = op.s;
    make_train(d);
    make_val(d, false);
    const char *out = tmp_path("inet_devkit.h5");
    gr_imagenet_config cfg = {.dir = d, .images = {.store = GR_STORE_JPEG}};
    gr_error err = {0};
    /* nothing to label the flat val by: every place looked in is named */
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "holds the val images flat (no class folders), and no "
                 "ground truth", out);
    CHECK_STR_CONTAINS(err.msg, "/devkit/LOC_val_solution.csv");
    CHECK_STR_CONTAINS(err.msg, "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt");
    /* the devkit next to DIR (DIR/../ILSVRC2012_devkit_t12/data): found; its ids mapped through meta.mat */
    mkdirs(kit);
    char truth[64] = "";
    for (int i = 0; i < 6; i++)
        snprintf(truth + strlen(truth), sizeof truth - strlen(truth), "%d\n", DEVKIT_ID[VAL_CLASS[i]]);
    write_text(join(kit, "ILSVRC2012_validation_ground_truth.txt"), truth);
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "no meta.mat was found", out);
    write_meta(join(kit, "meta.mat"), true);
    CHECK_MSG(convert(&cfg, out, NULL, &err) == GR_OK, "%s", err.msg);
    check_out(out, VAL_FLAT, false);
    /* --devkit elsewhere, an uncompressed meta.mat; a ground truth line past the images */
    mkdirs(join(other, "data"));
    write_meta(join(other, "data/meta.mat"), false);
    write_text(join(other, "data/ILSVRC2012_validation_ground_truth.txt"), truth);
    remove(join(kit, "meta.mat"));
    remove(join(kit, "ILSVRC2012_validation_ground_truth.txt"));
    cfg.devkit = other;
    CHECK_MSG(convert(&cfg, out, NULL, &err) == GR_OK, "%s", err.msg);
    check_out(out, VAL_FLAT, false);
    strcat(truth, "3\n");
    write_text(join(other, "data/ILSVRC2012_validation_ground_truth.txt"), truth);
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "ILSVRC2012_validation_ground_truth.txt:7: "
                 "ILSVRC2012_val_00000007 names no image", out);
    write_text(join(other, "data/ILSVRC2012_validation_ground_truth.txt"), "1\n2\n9\n");
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "ILSVRC2012_validation_ground_truth.txt:3: expected an "
                 "ILSVRC2012_ID that", out);
    /* --val-labels names it: a file that is not a MAT-file as meta.mat */
    write_text(join(other, "data/meta.mat"), "not a mat file, certainly not one of 128 bytes or more .............");
    const tpath vl = at(other, "data/ILSVRC2012_validation_ground_truth.txt");
    cfg.val_labels = vl.s;
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "meta.mat: not a MAT-file of level 5", out);
}

static void test_errors(const char *root) {
    const tpath dp = at(root, "bad");
    const char *d = dp.s, *out = tmp_path("inet_bad.h5");
    gr_imagenet_config cfg = {.dir = d, .images = {.store = GR_STORE_JPEG}};
    gr_error err = {0};
    mkdirs(d);
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "no train folder (looked for", out);
    CHECK_STR_CONTAINS(err.msg, "ILSVRC/Data/CLS-LOC/train");
    make_train(d);
    mkdirs(join(d, "train/n03000000"));
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "n03000000: no JPEG or PNG images", out);
    rm_rf(join(d, "train/n03000000"));
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "/val: no val folder (pass --splits train", out);
    make_val(d, true);
    mkdirs(join(d, "val/n09999999"));
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "class folder n09999999 is not a class of train", out);
    rm_rf(join(d, "val/n09999999"));
    write_jpeg(join(d, "val/ILSVRC2012_val_00000001.JPEG"), 8, 8, 3, px_grad);
    CHECK_FAILED(convert(&cfg, out, NULL, &err), GR_ERR_DATA, "holds both class folders (3) and images (1)", out);
    const gr_imagenet_config usage[] = {
        {.dir = d, .no_train = true, .no_val = true, .images = {.store = GR_STORE_JPEG}},
        {.dir = d, .images = {.store = GR_STORE_JPEG, .size = 8}},
        {.dir = d, .images = {.store = GR_STORE_RAW, .size = 8, .restart = true}},
        {.dir = d, .images = {.store = GR_STORE_JPEG, .group = "/x"}},
    };
    const char *needle[] = {"--splits leaves nothing to write",
                            "data imagenet: --size does not apply with --store jpeg",
                            "data imagenet: --restart applies only with --store jpeg", "are ILSVRC2012's own"};
    for (size_t k = 0; k < GR_ARRAY_LEN(usage); k++) {
        gr_imagenet_config c = usage[k];
        CHECK_FAILED(convert(&c, out, NULL, &err), GR_ERR_USAGE, needle[k], out);
    }
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const char *root = tmp_path("inet");
    rm_rf(root);
    mkdirs(root);
    const tpath mat = at(root, "mat");
    mkdirs(mat.s);
    test_matfile(mat.s);
    test_class_folders(root);
    test_kaggle(root);
    test_devkit(root);
    test_errors(root);
    rm_rf(root);
    return gr_test_report();
}
