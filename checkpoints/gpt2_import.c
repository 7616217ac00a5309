/* gpt2_import.c — GPT-2 weights from Hugging Face's safetensors and llm.c's
 * checkpoint, mapped onto gpurun's names (see gpt2_import.h), and the
 * format dispatch of model.init_from. */
#include "gpt2_import.h"
#include "safetensors.h"
#include "weights.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the names ---- */

typedef struct gpt2_name {
    const char *ours;  /* gpurun's, after "h<i>." when per layer */
    const char *hf;    /* Hugging Face's, after "h.<i>." when per layer */
    const char *llmc;  /* llm.c's parameter array */
    bool layer;        /* one per block use */
    bool conv1d;       /* Hugging Face stores it [in, out] (Conv1D) */
} gpt2_name;

/* In llm.c's order (its file holds them so). */
static const gpt2_name gpt2_names[] = {
    {"wte.weight", "wte.weight", "wte", false, false},
    {"wpe.weight", "wpe.weight", "wpe", false, false},
    {"ln_1.weight", "ln_1.weight", "ln1w", true, false},
    {"ln_1.bias", "ln_1.bias", "ln1b", true, false},
    {"c_attn.weight", "attn.c_attn.weight", "qkvw", true, true},
    {"c_attn.bias", "attn.c_attn.bias", "qkvb", true, false},
    {"c_proj.weight", "attn.c_proj.weight", "attprojw", true, true},
    {"c_proj.bias", "attn.c_proj.bias", "attprojb", true, false},
    {"ln_2.weight", "ln_2.weight", "ln2w", true, false},
    {"ln_2.bias", "ln_2.bias", "ln2b", true, false},
    {"c_fc.weight", "mlp.c_fc.weight", "fcw", true, true},
    {"c_fc.bias", "mlp.c_fc.bias", "fcb", true, false},
    {"mlp_proj.weight", "mlp.c_proj.weight", "fcprojw", true, true},
    {"mlp_proj.bias", "mlp.c_proj.bias", "fcprojb", true, false},
    {"ln_f.weight", "ln_f.weight", "lnfw", false, false},
    {"ln_f.bias", "ln_f.bias", "lnfb", false, false},
};
enum { GPT2_N = (int)GR_ARRAY_LEN(gpt2_names), GPT2_WTE = 0 };

/* The row of a model tensor's name and its layer (-1: not per layer);
 * -1 when the table has no such name. "h<i>." is a decimal i without
 * leading zeros. */
static int gpt2_row(const char *name, int *layer) {
    const char *rest = name;
    *layer = -1;
    if (name[0] == 'h' && isdigit((unsigned char)name[1])) {
        char *end;
        long v = strtol(name + 1, &end, 10);
        if (*end != '.' || (name[1] == '0' && end != name + 2) || v > 1 << 24) return -1;
        *layer = (int)v;
        rest = end + 1;
    }
    for (int k = 0; k < GPT2_N; k++)
        if (gpt2_names[k].layer == (*layer >= 0) && !strcmp(rest, gpt2_names[k].ours)) return k;
    return -1;
}

static void gpt2_hf_name(int row, int layer, char *buf, size_t n) {
    if (gpt2_names[row].layer) snprintf(buf, n, "h.%d.%s", layer, gpt2_names[row].hf);
    else snprintf(buf, n, "%s", gpt2_names[row].hf);
}

static gr_status gpt2_no_counterpart(const char *file, const char *format, const gr_tensor *t, gr_error *err) {
    return gr_error_set(err, GR_ERR_CKPT, "%s: the file is a GPT-2 checkpoint (%s), and the model's tensor %s has "
                        "no counterpart in GPT-2 (its tensors: wte.weight, wpe.weight, per block use h<i>: "
                        "ln_1, c_attn, c_proj, ln_2, c_fc, mlp_proj (weight, bias), then ln_f; DESIGN 1.4)",
                        file, format, t->name);
}

/* ---- one tensor from the file into the model ---- */

/* Where a model tensor's values are in the file and how they are stored. */
typedef struct gpt2_src {
    char name[200];                  /* the file's name for it: "h.3.attn.c_attn.weight", "qkvw[3]" */
    int ndim;
    int64_t shape[GR_ST_MAX_DIMS];   /* as stored */
    bool conv1d;                     /* stored [in, out]: transposed into the model's [out, in] */
    int fd;
    uint64_t off;                    /* bytes from the start of the file */
    gr_st_dtype dt;
} gpt2_src;

static void gpt2_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Whether the stored shape fits t (as stored, or transposed for a Conv1D
 * weight); *rows_short: the rows of the model's wte past the file's. */
static gr_status gpt2_check_shape(const char *file, const gpt2_src *s, const gr_tensor *t, int row,
                                  int64_t *rows_short, gr_error *err) {
    int64_t eff[GR_ST_MAX_DIMS];
    memcpy(eff, s->shape, sizeof eff);
    const bool tr = s->conv1d && s->ndim == 2;
    if (tr) eff[0] = s->shape[1], eff[1] = s->shape[0];
    bool same = s->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = eff[d] == t->shape[d];
    *rows_short = 0;
    if (!same && row == GPT2_WTE && s->ndim == 2 && t->ndim == 2 && eff[1] == t->shape[1] && eff[0] < t->shape[0]) {
        *rows_short = t->shape[0] - eff[0];
        same = true;
    }
    if (same) return GR_OK;
    char a[96], b[96], m[96];
    gpt2_shape_str(s->ndim, s->shape, a, sizeof a);
    gpt2_shape_str(s->ndim, eff, b, sizeof b);
    gpt2_shape_str(t->ndim, t->shape, m, sizeof m);
    if (tr)
        return gr_error_set(err, GR_ERR_CKPT, "%s: %s: shape %s (stored transposed, Conv1D) gives %s, but the "
                            "model's %s is %s", file, s->name, a, b, t->name, m);
    return gr_error_set(err, GR_ERR_CKPT, "%s: %s: shape %s, but the model's %s is %s", file, s->name, a, t->name, m);
}

static gr_status gpt2_check_finite(const char *file, const gpt2_src *s, const gr_tensor *t, const float *v,
                                   int64_t n, gr_error *err) {
    int64_t bad = -1, count = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) count++, bad = bad < 0 ? i : bad;
    if (bad < 0) return GR_OK;
    return gr_error_set(err, GR_ERR_CKPT, "%s: %s (the model's %s): element %lld is %s (%lld of %lld values are "
                        "not finite); a model cannot start from non-finite weights", file, s->name, t->name,
                        (long long)bad, isnan(v[bad]) ? "NaN" : v[bad] > 0 ? "inf" : "-inf", (long long)count,
                        (long long)n);
}

/* Reads s into t's place in params: converted, checked finite, transposed
 * when Conv1D, the rows of a short wte zero (said once, *told). */
static gr_status gpt2_place(const char *file, const gpt2_src *s, const gr_tensor *t, int row, float *params,
                            bool *told, gr_error *err) {
    int64_t short_rows;
    gr_status st = gpt2_check_shape(file, s, t, row, &short_rows, err);
    if (st) return st;
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
    float *v = gr_xmalloc(((size_t)n + 1) * sizeof *v);
    if (!(st = gr_st_read_values(s->fd, file, s->name, s->off, s->dt, n, v, err)))
        st = gpt2_check_finite(file, s, t, v, n, err);
    float *dst = params + t->param_offset;
    if (!st && s->conv1d && s->ndim == 2) {
        const int64_t in = s->shape[0], out = s->shape[1];
        for (int64_t o = 0; o < out; o++)
            for (int64_t i = 0; i < in; i++) dst[o * in + i] = v[i * out + o];
    } else if (!st) {
        memcpy(dst, v, (size_t)n * sizeof *v);
    }
    free(v);
    if (st || !short_rows) return st;
    memset(dst + n, 0, (size_t)(gr_tensor_numel(t) - n) * sizeof *dst);
    if (!*told)
        fprintf(stderr, "gpurun: %s: %s has %lld rows, the model's %s %lld: rows %lld..%lld are set to zero\n", file,
                s->name, (long long)(t->shape[0] - short_rows), t->name, (long long)t->shape[0],
                (long long)(t->shape[0] - short_rows), (long long)t->shape[0] - 1);
    *told = true;
    return GR_OK;
}

/* The notice of file tensors the model does not have: their count and the first few names. */
typedef struct gpt2_extra {
    int count;
    char list[400];
    size_t k;
} gpt2_extra;

static void gpt2_extra_add(gpt2_extra *x, const char *name) {
    if (x->count++ < 6 && x->k < sizeof x->list)
        x->k += (size_t)snprintf(x->list + x->k, sizeof x->list - x->k, "%s%s", x->k ? ", " : "", name);
}

static void gpt2_extra_say(const gpt2_extra *x, const char *file) {
    if (!x->count) return;
    fprintf(stderr, "gpurun: %s: %d tensor(s) the model does not have were ignored: %s%s\n", file, x->count,
            x->list, x->count > 6 ? ", ..." : "");
}

/* ---- Hugging Face's safetensors ---- */

/* The file's tensor for a Hugging Face name, bare or under "transformer."
 * (NULL: neither; both is an error). */
static gr_status gpt2_st_lookup(const gr_st_file *f, const char *file, const char *hf, const gr_st_tensor **out,
                                gr_error *err) {
    char pre[220];
    snprintf(pre, sizeof pre, "transformer.%s", hf);
    const gr_st_tensor *a = gr_st_find(f, hf), *b = gr_st_find(f, pre);
    if (a && b)
        return gr_error_set(err, GR_ERR_CKPT, "%s: holds both %s and %s: which one the model's tensor is, is "
                            "unclear", file, hf, pre);
    *out = a ? a : b;
    return GR_OK;
}

static gr_status gpt2_st_tensor(const gr_st_file *f, const char *file, const gr_tensor *t, float *params, bool *used,
                                bool *told, gr_error *err) {
    int layer, row = gpt2_row(t->name, &layer);
    if (row < 0) return gpt2_no_counterpart(file, "Hugging Face safetensors", t, err);
    char hf[200];
    gpt2_hf_name(row, layer, hf, sizeof hf);
    const gr_st_tensor *ft = NULL;
    gr_status st = gpt2_st_lookup(f, file, hf, &ft, err);
    if (st) return st;
    if (!ft)
        return gr_error_set(err, GR_ERR_CKPT, "%s: the model's %s is %s in a GPT-2 safetensors file (or "
                            "transformer.%s), which this one does not have", file, t->name, hf, hf);
    used[ft - f->t] = true;
    if (ft->dt == GR_ST_OTHER)
        return gr_error_set(err, GR_ERR_CKPT, "%s: %s (the model's %s): dtype %s, which gpurun does not read (F32, "
                            "F16 or BF16)", file, ft->name, t->name, ft->dtype);
    gpt2_src s = {.ndim = ft->ndim, .conv1d = gpt2_names[row].conv1d, .fd = f->fd,
                  .off = f->data_start + ft->begin, .dt = ft->dt};
    snprintf(s.name, sizeof s.name, "%s", ft->name);
    memcpy(s.shape, ft->shape, sizeof s.shape);
    return gpt2_place(file, &s, t, row, params, told, err);
}

gr_status gr_gpt2_load_safetensors(const char *path, const gr_graph *g, float *params, gr_error *err) {
    gr_st_file f;
    gr_status st = gr_st_open(&f, path, err);
    if (st) return st;
    bool *used = gr_xcalloc((size_t)f.n + 1, sizeof *used), told = false;
    for (int i = 0; i < g->n_tensors && !st; i++)
        if (gr_weights_tensor(&g->tensors[i]))
            st = gpt2_st_tensor(&f, path, &g->tensors[i], params, used, &told, err);
    if (!st) {
        gpt2_extra x = {0};
        for (int k = 0; k < f.n; k++)
            if (!used[k]) gpt2_extra_add(&x, f.t[k].name);
        gpt2_extra_say(&x, path);
    }
    free(used);
    gr_st_close(&f);
    return st;
}

/* ---- llm.c's checkpoint ---- */

typedef struct gpt2_llmc {
    int fd;
    int version;
    int64_t maxT, V, L, NH, C, Vp;
    gr_st_dtype dt;
    uint64_t base[GPT2_N];           /* each array's first byte */
} gpt2_llmc;

/* Row k's shape for one layer (or the whole, when not per layer); its numel. */
static int64_t gpt2_llmc_shape(const gpt2_llmc *h, int k, int *ndim, int64_t *shape) {
    const int64_t C = h->C;
    static const struct { int rows, cols; } mult[GPT2_N] = {
        {0, 1}, {0, 1}, {1, 0}, {1, 0}, {3, 1}, {3, 0}, {1, 1}, {1, 0},
        {1, 0}, {1, 0}, {4, 1}, {4, 0}, {1, 4}, {1, 0}, {1, 0}, {1, 0},
    };
    if (k == 0 || k == 1) shape[0] = k == 0 ? h->Vp : h->maxT, shape[1] = C, *ndim = 2;
    else if (mult[k].cols) shape[0] = mult[k].rows * C, shape[1] = mult[k].cols * C, *ndim = 2;
    else shape[0] = mult[k].rows * C, *ndim = 1;
    return *ndim == 2 ? shape[0] * shape[1] : shape[0];
}

static gr_status gpt2_llmc_header(gpt2_llmc *h, const char *file, uint64_t size, const unsigned char *b,
                                  gr_error *err) {
    int32_t v[8];
    for (int k = 0; k < 8; k++)
        v[k] = (int32_t)((uint32_t)b[4 * k] | (uint32_t)b[4 * k + 1] << 8 | (uint32_t)b[4 * k + 2] << 16 |
                         (uint32_t)b[4 * k + 3] << 24);
    if (v[0] != GR_LLMC_MAGIC)
        return gr_error_set(err, GR_ERR_CKPT, "%s: not llm.c's GPT-2 checkpoint: magic %d, expected %d", file, v[0],
                            GR_LLMC_MAGIC);
    if (v[1] != 3 && v[1] != 5)
        return gr_error_set(err, GR_ERR_CKPT, "%s: llm.c checkpoint version %d, which gpurun does not read (3: fp32, "
                            "5: bf16 parameters)", file, v[1]);
    static const char *const names[8] = {"", "", "maxT", "V", "L", "NH", "C", "Vp"};
    for (int k = 2; k < 8; k++)
        if (v[k] < 1 || v[k] > (k == 4 ? 4096 : k == 5 || k == 6 ? 1 << 16 : 1 << 24))
            return gr_error_set(err, GR_ERR_CKPT, "%s: bad llm.c header: %s = %d (header[%d]) is out of range", file,
                                names[k], v[k], k);
    if (v[3] > v[7] || v[6] % v[5])
        return gr_error_set(err, GR_ERR_CKPT, "%s: bad llm.c header: %s", file, v[3] > v[7] ?
                            "the vocabulary V is larger than its padded size Vp" : "NH does not divide C");
    *h = (gpt2_llmc){.fd = -1, .version = v[1], .maxT = v[2], .V = v[3], .L = v[4], .NH = v[5], .C = v[6],
                     .Vp = v[7], .dt = v[1] == 3 ? GR_ST_F32 : GR_ST_BF16};
    const uint64_t es = h->dt == GR_ST_F32 ? 4 : 2;
    uint64_t at = GR_LLMC_HEADER_INTS * 4;
    for (int k = 0; k < GPT2_N; k++) {
        int nd;
        int64_t sh[2];
        h->base[k] = at;
        at += (uint64_t)gpt2_llmc_shape(h, k, &nd, sh) * (gpt2_names[k].layer ? (uint64_t)h->L : 1) * es;
    }
    if (at != size)
        return gr_error_set(err, GR_ERR_CKPT, "%s: %llu bytes, but llm.c's version %d checkpoint of maxT %lld, V %lld "
                            "(padded %lld), L %lld, NH %lld, C %lld is %llu bytes (%s)", file,
                            (unsigned long long)size, h->version, (long long)h->maxT, (long long)h->V,
                            (long long)h->Vp, (long long)h->L, (long long)h->NH, (long long)h->C,
                            (unsigned long long)at, size < at ? "truncated" : "more than its parameters follow");
    return GR_OK;
}

static gr_status gpt2_llmc_tensor(const gpt2_llmc *h, const char *file, const gr_tensor *t, float *params,
                                  bool *used, bool *told, gr_error *err) {
    int layer, row = gpt2_row(t->name, &layer);
    if (row < 0) return gpt2_no_counterpart(file, "llm.c", t, err);
    gpt2_src s = {.fd = h->fd, .dt = h->dt};
    int64_t n = gpt2_llmc_shape(h, row, &s.ndim, s.shape);
    if (layer >= 0 && layer >= h->L)
        return gr_error_set(err, GR_ERR_CKPT, "%s: the model's %s is %s[%d] in llm.c's checkpoint, which has %lld "
                            "layers (L = %lld)", file, t->name, gpt2_names[row].llmc, layer, (long long)h->L,
                            (long long)h->L);
    if (layer >= 0) snprintf(s.name, sizeof s.name, "%s[%d]", gpt2_names[row].llmc, layer);
    else snprintf(s.name, sizeof s.name, "%s", gpt2_names[row].llmc);
    s.off = h->base[row] + (uint64_t)(layer > 0 ? layer : 0) * (uint64_t)n * (h->dt == GR_ST_F32 ? 4 : 2);
    used[row * h->L + (layer > 0 ? layer : 0)] = true;
    return gpt2_place(file, &s, t, row, params, told, err);
}

gr_status gr_gpt2_load_llmc(const char *path, const gr_graph *g, float *params, gr_error *err) {
    int fd = open(path, O_RDONLY);
    struct stat sb;
    unsigned char b[32];
    if (fd < 0 || fstat(fd, &sb) != 0) {
        gr_status st = gr_error_set(err, GR_ERR_CKPT, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return st;
    }
    gpt2_llmc h = {.fd = -1};
    gr_status st = GR_OK;
    if (sb.st_size < GR_LLMC_HEADER_INTS * 4 || pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b)
        st = gr_error_set(err, GR_ERR_CKPT, "%s: truncated: %lld bytes, shorter than llm.c's %d-byte header", path,
                          (long long)sb.st_size, GR_LLMC_HEADER_INTS * 4);
    if (!st) st = gpt2_llmc_header(&h, path, (uint64_t)sb.st_size, b, err);
    if (st) {
        close(fd);
        return st;
    }
    h.fd = fd;
    bool *used = gr_xcalloc((size_t)(GPT2_N * h.L), sizeof *used), told = false;
    for (int i = 0; i < g->n_tensors && !st; i++)
        if (gr_weights_tensor(&g->tensors[i])) st = gpt2_llmc_tensor(&h, path, &g->tensors[i], params, used, &told, err);
    if (!st) {
        gpt2_extra x = {0};
        for (int k = 0; k < GPT2_N; k++)
            for (int l = 0; l < (gpt2_names[k].layer ? h.L : 1); l++) {
                char name[64];
                if (gpt2_names[k].layer) snprintf(name, sizeof name, "%s[%d]", gpt2_names[k].llmc, l);
                else snprintf(name, sizeof name, "%s", gpt2_names[k].llmc);
                if (!used[k * h.L + l]) gpt2_extra_add(&x, name);
            }
        gpt2_extra_say(&x, path);
    }
    free(used);
    close(fd);
    return st;
}

/* ---- the dispatch ---- */

gr_status gr_init_from_load(const char *path, const gr_graph *g, float *params, gr_error *err) {
    unsigned char b[8] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return gr_error_set(err, GR_ERR_CKPT, "%s: %s", path, strerror(errno));
    size_t got = fread(b, 1, sizeof b, fp);
    fclose(fp);
    if (got == 8 && !memcmp(b, "\x89HDF\r\n\x1a\n", 8)) return gr_weights_load(path, g, params, err);
    const int32_t magic = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                    (uint32_t)b[3] << 24);
    if (got >= 4 && magic == GR_LLMC_MAGIC) return gr_gpt2_load_llmc(path, g, params, err);
    static const struct { int32_t magic; const char *what; } others[] = {
        {20240327, "debug state"}, {20240328, "tokenizer"}, {20240520, "token data"}};
    for (size_t k = 0; got >= 4 && k < GR_ARRAY_LEN(others); k++)
        if (magic == others[k].magic)
            return gr_error_set(err, GR_ERR_CKPT, "%s: an llm.c %s file (magic %d), not its model checkpoint (magic "
                                "%d)", path, others[k].what, magic, GR_LLMC_MAGIC);
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) n = n << 8 | b[k];
    if (got < 8 || n > GR_ST_MAX_HEADER || n < 2) {
        char why[96] = "shorter than 8 bytes";
        if (got == 8)
            snprintf(why, sizeof why, "its first 8 bytes give a JSON header of %llu bytes, not 2 to %llu",
                     (unsigned long long)n, GR_ST_MAX_HEADER);
        return gr_error_set(err, GR_ERR_CKPT, "%s: not a weights file gpurun reads: not HDF5 (no signature "
                            "\\x89HDF\\r\\n\\x1a\\n), not llm.c's GPT-2 checkpoint (its first int32 is %d, not the "
                            "magic %d), not safetensors (%s)", path, got >= 4 ? magic : 0, GR_LLMC_MAGIC, why);
    }
    return gr_gpt2_load_safetensors(path, g, params, err);
}
