/* test_gpt2_import.c — model.init_from of GPT-2 weights as people have them
 * (checkpoints/gpt2_import.h, checkpoints/safetensors.h), on a tiny
 * GPT-2-shaped graph built by hand (tests/gpt2_fixture.h: L 2, C 8, a wte of
 * 16 rows (Vp), maxT 8), files written here in both formats (V 11, NH 2),
 * every value a known function of its tensor and index:
 *   - Hugging Face safetensors in F32 (bare names, extras listed), F16 and
 *     BF16 (under "transformer."): every tensor in its place, the Conv1D
 *     weights transposed, wte's rows 11..15 zero (said once);
 *   - llm.c's checkpoint, version 3 (fp32) and 5 (bf16); HDF5 still read;
 *   - each error, exit 6 (GR_ERR_CKPT), its message naming the file and the
 *     tensor: missing, mis-shaped, non-finite, an unsupported dtype, a model
 *     tensor with no GPT-2 counterpart, names both bare and prefixed; a
 *     malformed file (bad JSON, duplicate keys, offsets, sizes, truncation,
 *     a bad magic, version or size);
 *   - the JSON parser's strictness on headers given whole (gr_st_parse). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "checkpoints/gpt2_import.h"
#include "checkpoints/safetensors.h"
#include "checkpoints/weights.h"
#include "common/gr_half.h"
#include "gpt2_fixture.h"
#include "gr_test.h"

enum { L = 2, C = 8, NH = 2, V = 11, VP = 16, MAXT = 8 };
#define TMP(name) GR_TEST_TMP "/gpt2_import_" name

/* ---- the oracle: its own copy of the names (in llm.c's order) ---- */

static const struct { const char *ours, *hf, *llmc; bool layer, conv1d; } tmap[16] = {
    {"wte.weight", "wte.weight", "wte", false, false}, {"wpe.weight", "wpe.weight", "wpe", false, false},
    {"ln_1.weight", "ln_1.weight", "ln1w", true, false}, {"ln_1.bias", "ln_1.bias", "ln1b", true, false},
    {"c_attn.weight", "attn.c_attn.weight", "qkvw", true, true}, {"c_attn.bias", "attn.c_attn.bias", "qkvb", true, false},
    {"c_proj.weight", "attn.c_proj.weight", "attprojw", true, true},
    {"c_proj.bias", "attn.c_proj.bias", "attprojb", true, false},
    {"ln_2.weight", "ln_2.weight", "ln2w", true, false}, {"ln_2.bias", "ln_2.bias", "ln2b", true, false},
    {"c_fc.weight", "mlp.c_fc.weight", "fcw", true, true}, {"c_fc.bias", "mlp.c_fc.bias", "fcb", true, false},
    {"mlp_proj.weight", "mlp.c_proj.weight", "fcprojw", true, true},
    {"mlp_proj.bias", "mlp.c_proj.bias", "fcprojb", true, false},
    {"ln_f.weight", "ln_f.weight", "lnfw", false, false}, {"ln_f.bias", "ln_f.bias", "lnfb", false, false},
};

/* The row and layer of a model tensor's name (-1 none). */
static int trow(const char *name, int *layer) {
    *layer = -1;
    if (name[0] == 'h') *layer = atoi(name + 1), name = strchr(name, '.') + 1;
    for (int k = 0; k < 16; k++)
        if (tmap[k].layer == (*layer >= 0) && !strcmp(name, tmap[k].ours)) return k;
    return -1;
}

/* Element e (in gpurun's [out, in] order) of row k, layer l: distinct everywhere, exact in fp32. */
static float val(int k, int l, int64_t e) {
    float v = (float)((k * 8 + l + 1) * 512 + e) / 8.0f;
    return e % 3 == 1 ? -v : v;
}

typedef enum { AS_F32, AS_F16, AS_BF16 } as_t;
static float as_round(as_t a, float v) {
    return a == AS_F16 ? gr_round_fp16_hd(v) : a == AS_BF16 ? gr_round_bf16_hd(v) : v;
}

/* Every model tensor of g as the file gave it; wte_rows: the rows that came from the file (the rest 0). */
static void check_model(const gr_graph *g, const float *p, as_t a, int64_t wte_rows) {
    int bad = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        int l, k = trow(t->name, &l);
        CHECK_MSG(k >= 0, "%s", t->name);
        for (int64_t e = 0; k >= 0 && e < gr_tensor_numel(t); e++) {
            float want = k == 0 && e >= wte_rows * C ? 0.0f : as_round(a, val(k, l, e));
            if (p[t->param_offset + e] != want && bad++ < 5)
                fprintf(stderr, "%s[%lld] = %g, want %g\n", t->name, (long long)e, p[t->param_offset + e], want);
        }
    }
    CHECK_MSG(bad == 0, "%d values out of place", bad);
}

/* ---- safetensors files ---- */

typedef struct ent {
    char name[128], dtype[12];
    int ndim;
    int64_t shape[4];
    float v[256];
    int64_t n;
} ent;
typedef struct ents { ent e[48]; int n; } ents;

static ent *ents_find(ents *s, const char *name) {
    for (int k = 0; k < s->n; k++)
        if (!strcmp(s->e[k].name, name)) return &s->e[k];
    return NULL;
}

static void ents_drop(ents *s, const char *name) {
    ent *e = ents_find(s, name);
    CHECK(e != NULL);
    if (e) *e = s->e[--s->n];
}

static ent *ents_add(ents *s, const char *name, const char *dtype, int ndim, const int64_t *shape) {
    ent *e = &s->e[s->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->dtype, sizeof e->dtype, "%s", dtype);
    e->ndim = ndim;
    e->n = 1;
    for (int d = 0; d < ndim; d++) e->shape[d] = shape[d], e->n *= shape[d];
    return e;
}

/* Hugging Face's tensors for g's model: wte of V rows, Conv1D weights [in, out]. */
static void hf_ents(const gr_graph *g, ents *s, const char *prefix, const char *dtype) {
    s->n = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        int l, k = trow(t->name, &l);
        char name[128];
        if (l >= 0) snprintf(name, sizeof name, "%sh.%d.%s", prefix, l, tmap[k].hf);
        else snprintf(name, sizeof name, "%s%s", prefix, tmap[k].hf);
        int64_t sh[2] = {t->shape[0], t->ndim == 2 ? t->shape[1] : 0};
        if (k == 0) sh[0] = V;
        if (tmap[k].conv1d) sh[0] = t->shape[1], sh[1] = t->shape[0];
        ent *e = ents_add(s, name, dtype, t->ndim, sh);
        for (int64_t j = 0; j < e->n; j++)
            e->v[j] = tmap[k].conv1d ? val(k, l, (j % sh[1]) * sh[0] + j / sh[1]) : val(k, l, j);
    }
}

static void put_le(unsigned char *b, uint64_t v, int n) {
    for (int k = 0; k < n; k++) b[k] = (unsigned char)(v >> (8 * k));
}

static void write_file(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(a, 1, na, f) == na && (nb == 0 || fwrite(b, 1, nb, f) == nb));
    if (f) fclose(f);
}

/* A safetensors file: 8-byte length, json (as given), data. */
static void write_raw(const char *path, const char *json, const void *data, size_t n) {
    size_t h = strlen(json);
    unsigned char *b = malloc(8 + h + n + 1);
    put_le(b, h, 8);
    memcpy(b + 8, json, h);
    if (n) memcpy(b + 8 + h, data, n);
    write_file(path, b, 8 + h + n, NULL, 0);
    free(b);
}

static size_t dtype_size(const char *d) { return !strcmp(d, "F32") || !strcmp(d, "I32") ? 4 : 2; }

/* s as a safetensors file, each tensor's values in its dtype, the header padded to 8 bytes. */
static void write_st(const char *path, const ents *s) {
    char *json = malloc(65536), *data = malloc(1 << 20);
    size_t k = (size_t)sprintf(json, "{\"__metadata__\":{\"format\":\"pt\"}"), at = 0;
    for (int i = 0; i < s->n; i++) {
        const ent *e = &s->e[i];
        size_t es = dtype_size(e->dtype), b = at;
        for (int64_t j = 0; j < e->n; j++, at += es) {
            uint32_t u = !strcmp(e->dtype, "F16") ? gr_fp16_encode_hd(e->v[j])
                       : !strcmp(e->dtype, "BF16") ? gr_bf16_encode_hd(e->v[j]) : gr_half_bits_hd(e->v[j]);
            put_le((unsigned char *)data + at, u, (int)es);
        }
        k += (size_t)sprintf(json + k, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", e->name, e->dtype);
        for (int d = 0; d < e->ndim; d++) k += (size_t)sprintf(json + k, "%s%lld", d ? "," : "", (long long)e->shape[d]);
        k += (size_t)sprintf(json + k, "],\"data_offsets\":[%zu,%zu]}", b, at);
    }
    k += (size_t)sprintf(json + k, "}");
    while (k % 8) json[k++] = ' ';
    json[k] = 0;
    write_raw(path, json, data, at);
    free(json);
    free(data);
}

/* ---- llm.c's file ---- */

static void write_llmc(const char *path, int version, int nl, int64_t extra_bytes) {
    int32_t h[256] = {20240326, version, MAXT, V, nl, NH, C, VP};
    FILE *f = fopen(path, "wb");
    unsigned char hb[1024];
    for (int k = 0; k < 256; k++) put_le(hb + 4 * k, (uint32_t)h[k], 4);
    CHECK(f && fwrite(hb, 1, sizeof hb, f) == sizeof hb);
    static const int64_t rows[16] = {VP, MAXT, 1, 1, 3 * C, 3 * C, C, 1, 1, 1, 4 * C, 4 * C, C, 1, 1, 1};
    static const int64_t cols[16] = {C, C, C, C, C, 1, C, C, C, C, C, 1, 4 * C, C, C, C};
    for (int k = 0; k < 16 && f; k++)
        for (int l = tmap[k].layer ? 0 : -1; l < (tmap[k].layer ? nl : 0); l++)
            for (int64_t e = 0; e < rows[k] * cols[k]; e++) {
                unsigned char b[4];
                put_le(b, version == 3 ? gr_half_bits_hd(val(k, l, e)) : gr_bf16_encode_hd(val(k, l, e)), 4);
                fwrite(b, 1, version == 3 ? 4 : 2, f);
            }
    for (int64_t k = 0; k < extra_bytes && f; k++) fputc(0, f);
    if (f) fclose(f);
}

/* ---- loading, stderr captured ---- */

static char captured[8192];

static gr_status load(const gr_graph *g, const char *path, float *p, gr_error *err) {
    for (int64_t i = 0; i < g->n_params; i++) p[i] = 12345.0f; /* anything left unwritten shows */
    memset(err, 0, sizeof *err);
    fflush(stderr);
    int saved = dup(2), fd = open(TMP("stderr"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    gr_status st = gr_init_from_load(path, g, p, err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(TMP("stderr"), "r");
    size_t n = f ? fread(captured, 1, sizeof captured - 1, f) : 0;
    captured[n] = 0;
    if (f) fclose(f);
    return st;
}

/* Loading path into g fails with exit 6, the message naming path and each of the NULL-ended parts. */
static void expect_fail(int line, const gr_graph *g, const char *path, ...) {
    float *p = malloc((size_t)g->n_params * sizeof *p);
    gr_error err;
    gr_status st = load(g, path, p, &err);
    CHECK_MSG(st == GR_ERR_CKPT && err.status == GR_ERR_CKPT, "line %d: status %d (%s)", line, st, err.msg);
    CHECK_MSG(!strncmp(err.msg, path, strlen(path)), "line %d: %s", line, err.msg);
    va_list ap;
    va_start(ap, path);
    for (const char *part; (part = va_arg(ap, const char *));)
        CHECK_MSG(strstr(err.msg, part) != NULL, "line %d: \"%s\" lacks \"%s\"", line, err.msg, part);
    va_end(ap);
    free(p);
}
#define EXPECT_FAIL(g, path, ...) expect_fail(__LINE__, g, path, __VA_ARGS__, (const char *)NULL)

/* ---- the cases ---- */

static void test_safetensors_ok(const gr_graph *g, float *p) {
    ents s;
    gr_error err;
    /* F32, bare names, the extras Hugging Face's files hold */
    hf_ents(g, &s, "", "F32");
    int64_t one = 1, mask[4] = {1, 1, MAXT, MAXT}, wt[2] = {V, C};
    ents_add(&s, "lm_head.weight", "F32", 2, wt);
    ents_add(&s, "h.0.attn.bias", "F32", 4, mask);
    ents_add(&s, "h.0.attn.masked_bias", "F32", 1, &one);
    ents_add(&s, "h.1.attn.quant", "Q4", 1, &one); /* an unknown dtype the model does not need */
    s.e[s.n - 1].n = 0;
    write_st(TMP("f32.safetensors"), &s);
    CHECK_MSG(load(g, TMP("f32.safetensors"), p, &err) == GR_OK, "%s", err.msg);
    check_model(g, p, AS_F32, V);
    CHECK_STR_CONTAINS(captured, "4 tensor(s) the model does not have were ignored");
    CHECK_STR_CONTAINS(captured, "lm_head.weight");
    CHECK_STR_CONTAINS(captured, "h.0.attn.masked_bias");
    CHECK_STR_CONTAINS(captured, "wte.weight has 11 rows, the model's wte.weight 16: rows 11..15 are set to zero");
    const char *first = strstr(captured, "set to zero");
    CHECK(first && !strstr(first + 1, "set to zero")); /* said once */

    /* F16 under GPT2LMHeadModel's "transformer." prefix */
    hf_ents(g, &s, "transformer.", "F16");
    write_st(TMP("f16.safetensors"), &s);
    CHECK_MSG(load(g, TMP("f16.safetensors"), p, &err) == GR_OK, "%s", err.msg);
    check_model(g, p, AS_F16, V);
    CHECK(!strstr(captured, "ignored"));

    /* BF16, a vocabulary as large as the model's (no padding said) */
    hf_ents(g, &s, "", "BF16");
    ent *w = ents_find(&s, "wte.weight");
    w->shape[0] = VP, w->n = VP * C;
    for (int64_t j = 0; j < w->n; j++) w->v[j] = val(0, -1, j);
    write_st(TMP("bf16.safetensors"), &s);
    CHECK_MSG(load(g, TMP("bf16.safetensors"), p, &err) == GR_OK, "%s", err.msg);
    check_model(g, p, AS_BF16, VP);
    CHECK(!strstr(captured, "set to zero"));
}

static void test_llmc_ok(const gr_graph *g, float *p) {
    gr_error err;
    write_llmc(TMP("v3.bin"), 3, L, 0);
    CHECK_MSG(load(g, TMP("v3.bin"), p, &err) == GR_OK, "%s", err.msg);
    check_model(g, p, AS_F32, VP);
    CHECK(captured[0] == 0);
    write_llmc(TMP("v5.bin"), 5, L, 0);
    CHECK_MSG(load(g, TMP("v5.bin"), p, &err) == GR_OK, "%s", err.msg);
    check_model(g, p, AS_BF16, VP);

    /* a model of one block use: the second layer's arrays are listed */
    gr_graph g1;
    g2_gpt2(&g1, 1, C, VP, MAXT);
    float *p1 = malloc((size_t)g1.n_params * sizeof *p1);
    CHECK_MSG(load(&g1, TMP("v3.bin"), p1, &err) == GR_OK, "%s", err.msg);
    check_model(&g1, p1, AS_F32, VP);
    CHECK_STR_CONTAINS(captured, "12 tensor(s) the model does not have were ignored: ln1w[1], ln1b[1], qkvw[1]");
    free(p1);
    gr_graph_free(&g1);

    /* HDF5 (gpurun's weights.h5) still goes to gr_weights_load */
    CHECK_MSG(load(g, TMP("v3.bin"), p, &err) == GR_OK, "%s", err.msg);
    CHECK_MSG(gr_weights_save(TMP("w.h5"), g, p, &err) == GR_OK, "%s", err.msg);
    CHECK_MSG(load(g, TMP("w.h5"), p, &err) == GR_OK, "%s", err.msg);
    check_model(g, p, AS_F32, VP);
}

static void test_safetensors_errors(const gr_graph *g) {
    ents s;
    const char *f = TMP("bad.safetensors");
    hf_ents(g, &s, "", "F32");
    ents_drop(&s, "h.1.ln_2.bias");
    write_st(f, &s);
    EXPECT_FAIL(g, f, "the model's h1.ln_2.bias is h.1.ln_2.bias", "does not have");

    hf_ents(g, &s, "", "F32");
    ent *e = ents_find(&s, "h.1.attn.c_attn.weight");
    e->shape[0] = 4, e->shape[1] = 24, e->n = 96;
    write_st(f, &s);
    EXPECT_FAIL(g, f, "h.1.attn.c_attn.weight: shape [4, 24] (stored transposed, Conv1D) gives [24, 4], but the "
                "model's h1.c_attn.weight is [24, 8]");
    hf_ents(g, &s, "", "F32");
    e = ents_find(&s, "h.0.ln_1.weight");
    e->shape[0] = 6, e->n = 6;
    write_st(f, &s);
    EXPECT_FAIL(g, f, "h.0.ln_1.weight: shape [6], but the model's h0.ln_1.weight is [8]");
    hf_ents(g, &s, "", "F32");
    e = ents_find(&s, "wte.weight");
    e->shape[0] = VP + 1, e->n = (VP + 1) * C;
    write_st(f, &s);
    EXPECT_FAIL(g, f, "wte.weight: shape [17, 8], but the model's wte.weight is [16, 8]");

    hf_ents(g, &s, "", "F32");
    ents_find(&s, "h.0.mlp.c_fc.bias")->v[5] = NAN;
    ents_find(&s, "h.0.mlp.c_fc.bias")->v[7] = INFINITY;
    write_st(f, &s);
    EXPECT_FAIL(g, f, "h.0.mlp.c_fc.bias (the model's h0.c_fc.bias): element 5 is NaN (2 of 32 values are not finite)");

    hf_ents(g, &s, "", "F32");
    snprintf(ents_find(&s, "ln_f.bias")->dtype, 12, "I32");
    write_st(f, &s);
    EXPECT_FAIL(g, f, "ln_f.bias (the model's ln_f.bias): dtype I32, which gpurun does not read");

    hf_ents(g, &s, "", "F32");
    ents_add(&s, "transformer.wpe.weight", "F32", 2, ents_find(&s, "wpe.weight")->shape);
    write_st(f, &s);
    EXPECT_FAIL(g, f, "holds both wpe.weight and transformer.wpe.weight");

    /* a model that is not GPT-2 shaped */
    gr_graph g3;
    g2_gpt2_layers(&g3, L, C, VP, MAXT);
    g2_add(&g3, "head", V, C, V);
    g2_finish(&g3);
    hf_ents(g, &s, "", "F32");
    write_st(f, &s);
    EXPECT_FAIL(&g3, f, "the file is a GPT-2 checkpoint", "the model's tensor head.weight has no counterpart");
    gr_graph_free(&g3);
}

static void test_malformed(const gr_graph *g) {
    const char *f = TMP("raw.safetensors");
    static const char d8[8] = {0};
    write_raw(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}", d8, 8);
    EXPECT_FAIL(g, f, "bad safetensors header", "expected '\"' at byte 54 of the JSON");
    write_raw(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", d8, 8);
    EXPECT_FAIL(g, f, "key 'a' appears twice");
    write_raw(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", d8, 8);
    EXPECT_FAIL(g, f, "tensors 'a' and 'b' overlap");
    write_raw(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", d8, 8);
    EXPECT_FAIL(g, f, "tensor 'a': data_offsets [0, 12] are out of range (the data has 8 bytes)");
    write_raw(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d8, 8);
    EXPECT_FAIL(g, f, "tensor 'a': its shape holds 12 bytes of F32, but data_offsets [0, 8] give 8");
    write_raw(f, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", d8, 8);
    EXPECT_FAIL(g, f, "bytes [4, 8) of the data belong to no tensor");
    write_raw(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", d8, 8);
    EXPECT_FAIL(g, f, "expected ',' or '}'");
    unsigned char big[9];
    put_le(big, 200000000, 8);
    big[8] = '{';
    write_file(f, big, 9, NULL, 0);
    EXPECT_FAIL(g, f, "a JSON header of 200000000 bytes, not 2 to 100000000");
    put_le(big, 4096, 8);
    write_file(f, big, 9, NULL, 0);
    EXPECT_FAIL(g, f, "truncated: a safetensors header of 4096 bytes, but only 1 follow");
    write_file(f, "abc", 3, NULL, 0);
    EXPECT_FAIL(g, f, "not a weights file gpurun reads", "shorter than 8 bytes");

    /* the data cut short after a valid header: out of range */
    ents s;
    hf_ents(g, &s, "", "F32");
    write_st(f, &s);
    FILE *fp = fopen(f, "r+b");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    CHECK(truncate(f, size - 4) == 0);
    EXPECT_FAIL(g, f, "are out of range");
}

static void test_llmc_errors(const gr_graph *g) {
    const char *f = TMP("bad.bin");
    write_llmc(f, 3, L, 4);
    EXPECT_FAIL(g, f, "bytes, but llm.c's version 3 checkpoint of maxT 8, V 11 (padded 16), L 2, NH 2, C 8 is",
                "more than its parameters follow");
    write_llmc(f, 3, L, 0);
    FILE *fp = fopen(f, "r+b");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    CHECK(truncate(f, size - 2) == 0);
    EXPECT_FAIL(g, f, "(truncated)");
    CHECK(truncate(f, 100) == 0);
    EXPECT_FAIL(g, f, "truncated: 100 bytes, shorter than llm.c's 1024-byte header");
    write_llmc(f, 4, L, 0);
    EXPECT_FAIL(g, f, "llm.c checkpoint version 4, which gpurun does not read");

    unsigned char b[1024] = {0};
    put_le(b, 20240327, 4);
    write_file(f, b, sizeof b, NULL, 0);
    EXPECT_FAIL(g, f, "an llm.c debug state file (magic 20240327), not its model checkpoint");
    put_le(b, 20240226, 4);
    put_le(b + 4, 3, 4);
    write_file(f, b, sizeof b, NULL, 0);
    EXPECT_FAIL(g, f, "not a weights file gpurun reads", "its first int32 is 20240226, not the magic 20240326");
    put_le(b, 20240326, 4);
    write_file(f, b, sizeof b, NULL, 0);
    EXPECT_FAIL(g, f, "bad llm.c header: maxT = 0 (header[2]) is out of range");

    /* a model of three block uses from a file of two */
    gr_graph g3;
    g2_gpt2(&g3, 3, C, VP, MAXT);
    write_llmc(f, 3, L, 0);
    EXPECT_FAIL(&g3, f, "the model's h2.ln_1.weight is ln1w[2] in llm.c's checkpoint, which has 2 layers (L = 2)");
    gr_graph_free(&g3);
    g2_gpt2(&g3, L, 2 * C, VP, MAXT);
    EXPECT_FAIL(&g3, f, "wte: shape [16, 8], but the model's wte.weight is [16, 16]");
    gr_graph_free(&g3);
    g2_gpt2_layers(&g3, L, C, VP, MAXT);
    g2_add(&g3, "h0.extra", C, 0, 0);
    g2_finish(&g3);
    EXPECT_FAIL(&g3, f, "GPT-2 checkpoint (llm.c)", "the model's tensor h0.extra.weight has no counterpart");
    gr_graph_free(&g3);
}

/* Headers given whole to gr_st_parse: what the strict parser takes and refuses. */
static void test_json(void) {
    static const char *const good[] = {
        "{}",
        "{ \"__metadata__\" : { \"k\" : \"v\", \"k2\": \"\\u00e9\\ud83d\\ude00\" } }   ",
        "{\"a\\\"b\\\\c\\/\\u0041\":{\"shape\":[],\"data_offsets\":[0,4],\"dtype\":\"F32\"}}",
        "{\"\xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"q\":{\"dtype\":\"NEW8\",\"shape\":[1,2,3],\"data_offsets\":[0,4]}}",
    };
    static const struct { const char *json, *why; } bad[] = {
        {"", "expected '{'"},
        {"[]", "expected '{'"},
        {"{\"a\":1}", "expected '{'"},
        {"{\"__metadata__\":{\"k\":1}}", "__metadata__: expected an object of strings"},
        {"{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", "key 'k' appears twice in __metadata__"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", "'__metadata__' appears twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":0}}", "tensor 'a': unknown key"},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "a key appears twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", "tensor 'a': no data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "shape: expected a non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", "shape: expected a non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", "expected ',' or ']'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", "more than 8 values"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", "expected [begin, end]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", "out of range"},
        {"{\"a\\x\":{}}", "bad escape"},
        {"{\"a\\ud800\":{}}", "a lone high surrogate"},
        {"{\"a\\u0000\":{}}", "U+0000"},
        {"{\"\xc0\xaf\":{}}", "invalid UTF-8"},
        {"{\"a\tb\":{}}", "a control character"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", "more after the header's object"},
        {"{\"__metadata__\":{\"k\":\"v\"}, }", "expected '\"'"},
        {"{/*c*/}", "expected '\"'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", "expected ',' or '}'"},
    };
    gr_st_file f;
    gr_error err;
    for (size_t k = 0; k < GR_ARRAY_LEN(good); k++) {
        gr_status st = gr_st_parse(&f, "h", good[k], strlen(good[k]), k >= 2 ? 4 : 0, &err);
        CHECK_MSG(st == GR_OK, "good[%zu]: %s", k, err.msg);
        if (!st) gr_st_close(&f);
    }
    CHECK(gr_st_parse(&f, "h", good[2], strlen(good[2]), 4, &err) == GR_OK && f.n == 1 &&
          !strcmp(f.t[0].name, "a\"b\\c/A") && f.t[0].ndim == 0 && f.t[0].dt == GR_ST_F32);
    gr_st_close(&f);
    CHECK(gr_st_parse(&f, "h", good[4], strlen(good[4]), 4, &err) == GR_OK && f.t[0].elem_size == 0 &&
          !strcmp(f.t[0].dtype, "NEW8") && f.t[0].dt == GR_ST_OTHER && f.t[0].shape[2] == 3);
    gr_st_close(&f);
    for (size_t k = 0; k < GR_ARRAY_LEN(bad); k++) {
        gr_status st = gr_st_parse(&f, "h", bad[k].json, strlen(bad[k].json), 4, &err);
        CHECK_MSG(st == GR_ERR_CKPT && strstr(err.msg, bad[k].why), "bad[%zu]: %s", k, st ? err.msg : "accepted");
    }
}

int main(void) {
    gr_graph g;
    g2_gpt2(&g, L, C, VP, MAXT);
    float *p = malloc((size_t)g.n_params * sizeof *p);
    test_safetensors_ok(&g, p);
    test_llmc_ok(&g, p);
    test_safetensors_errors(&g);
    test_malformed(&g);
    test_llmc_errors(&g);
    test_json();
    free(p);
    gr_graph_free(&g);
    return gr_test_report();
}
