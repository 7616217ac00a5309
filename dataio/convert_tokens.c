/* convert_tokens.c — token splits (DESIGN 1.5): the writer the token
 * converters share (convert_out.h's gr_conv_tokens), and `gpurun data tokens
 * OUT.h5 --from TRAIN.bin [--val VAL.bin] [--vocab-size V]`, which imports
 * llm.c's and nanoGPT's uint16 token files (convert.h) piece by piece. */
#include "convert.h"
#include "convert_out.h"
#include "h5util.h"
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TOK_CHUNK_BYTES ((int64_t)1 << 20)  /* bytes of tokens per HDF5 chunk */
#define TOK_READ_TOKENS ((int64_t)1 << 22)  /* tokens per read of a .bin (8 MiB) */

/* ---- the writer ---- */

static void tokens_release(gr_conv_tokens *t) {
    if (t->dset >= 0) H5Dclose(t->dset);
    if (t->group >= 0) H5Gclose(t->group);
    t->dset = t->group = -1;
}

/* A scalar UTF-8 string attribute. */
static gr_status tokens_attr_str(const gr_conv_tokens *t, const char *name, const char *value, gr_error *err) {
    gr_status st = GR_OK;
    hid_t type = -1, sp = -1, a = -1;
    const char *f = t->out->tmp;
    GR_H5_CHECK(type = H5Tcopy(H5T_C_S1), err, "%s: %s/tokens: attribute %s", f, t->name, name);
    GR_H5_CHECK(H5Tset_size(type, H5T_VARIABLE), err, "%s: %s/tokens: attribute %s", f, t->name, name);
    GR_H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8), err, "%s: %s/tokens: attribute %s", f, t->name, name);
    GR_H5_CHECK(sp = H5Screate(H5S_SCALAR), err, "%s: %s/tokens: attribute %s", f, t->name, name);
    GR_H5_CHECK(a = H5Acreate2(t->dset, name, type, sp, H5P_DEFAULT, H5P_DEFAULT), err, "%s: %s/tokens: attribute %s",
                f, t->name, name);
    GR_H5_CHECK(H5Awrite(a, type, &value), err, "%s: %s/tokens: attribute %s", f, t->name, name);
fail:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (type >= 0) H5Tclose(type);
    return st;
}

gr_status gr_conv_tokens_create(const gr_conv_out *o, const char *name, int64_t n, int64_t vocab,
                                const char *tokenizer, gr_conv_tokens *t, gr_error *err) {
    GR_ASSERT(n >= 1 && vocab >= 1 && vocab <= ((int64_t)1 << 32));
    memset(t, 0, sizeof *t);
    t->out = o;
    t->name = name;
    t->group = t->dset = -1;
    t->n = n;
    t->esz = vocab <= GR_TOKENS_U16_VOCAB ? 2 : 4;
    gr_status st = GR_OK;
    hid_t sp = -1, dcpl = -1, lcpl = -1, asp = -1, a = -1;
    const char *f = o->tmp;
    const hsize_t dims[1] = {(hsize_t)n};
    const hsize_t chunk[1] = {(hsize_t)gr_conv_chunk_samples(n, t->esz)};
    const int64_t v = vocab;
    GR_ASSERT(chunk[0] * (hsize_t)t->esz <= (hsize_t)TOK_CHUNK_BYTES);
    GR_H5_CHECK(lcpl = H5Pcreate(H5P_LINK_CREATE), err, "%s: cannot create group %s", f, name);
    GR_H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1), err, "%s: cannot create group %s", f, name);
    GR_H5_CHECK(t->group = H5Gcreate2(o->file, name, lcpl, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: cannot create group %s", f, name);
    GR_H5_CHECK(sp = H5Screate_simple(1, dims, NULL), err, "%s: %s/tokens: cannot create", f, name);
    GR_H5_CHECK(dcpl = H5Pcreate(H5P_DATASET_CREATE), err, "%s: %s/tokens: cannot create", f, name);
    GR_H5_CHECK(H5Pset_chunk(dcpl, 1, chunk), err, "%s: %s/tokens: cannot create", f, name);
    GR_H5_CHECK(t->dset = H5Dcreate2(t->group, "tokens", t->esz == 2 ? H5T_STD_U16LE : H5T_STD_U32LE, sp,
                                     H5P_DEFAULT, dcpl, H5P_DEFAULT),
                err, "%s: %s/tokens: cannot create", f, name);
    GR_H5_CHECK(asp = H5Screate(H5S_SCALAR), err, "%s: %s/tokens: attribute vocab_size", f, name);
    GR_H5_CHECK(a = H5Acreate2(t->dset, "vocab_size", H5T_STD_I64LE, asp, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s/tokens: attribute vocab_size", f, name);
    GR_H5_CHECK(H5Awrite(a, H5T_NATIVE_INT64, &v), err, "%s: %s/tokens: attribute vocab_size", f, name);
    st = tokens_attr_str(t, "tokenizer", tokenizer, err);
fail:
    if (a >= 0) H5Aclose(a);
    if (asp >= 0) H5Sclose(asp);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (sp >= 0) H5Sclose(sp);
    if (st != GR_OK) tokens_release(t);
    return st;
}

gr_status gr_conv_tokens_write(gr_conv_tokens *t, const void *tokens, int64_t count, gr_error *err) {
    if (count <= 0) return GR_OK;
    GR_ASSERT(t->next + count <= t->n);
    gr_status st = GR_OK;
    hid_t fsp = -1, msp = -1;
    const hsize_t start[1] = {(hsize_t)t->next}, cnt[1] = {(hsize_t)count};
    GR_H5_CHECK(fsp = H5Dget_space(t->dset), err, "%s: %s/tokens: write failed", t->out->tmp, t->name);
    GR_H5_CHECK(H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, cnt, NULL), err,
                "%s: %s/tokens: write failed", t->out->tmp, t->name);
    GR_H5_CHECK(msp = H5Screate_simple(1, cnt, NULL), err, "%s: %s/tokens: write failed", t->out->tmp, t->name);
    GR_H5_CHECK(H5Dwrite(t->dset, t->esz == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32, msp, fsp, H5P_DEFAULT,
                         tokens),
                err, "%s: %s/tokens: write failed (disk full?)", t->out->tmp, t->name);
    t->next += count;
fail:
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    return st;
}

gr_status gr_conv_tokens_end(gr_conv_tokens *t, gr_status st, gr_error *err) {
    if (st == GR_OK && t->next != t->n)
        st = gr_error_set(err, GR_ERR_INTERNAL, "%s: %s/tokens: %lld of %lld tokens written (a bug)", t->out->tmp,
                          t->name, (long long)t->next, (long long)t->n);
    tokens_release(t);
    return st;
}

/* ---- inputs ---- */

gr_status gr_conv_open_input(const char *path, const char *what, FILE **f, int64_t *bytes, gr_error *err) {
    struct stat sb;
    *f = NULL;
    if (stat(path, &sb) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: %s", path, errno == ENOENT ? "no such file" : strerror(errno));
    gr_status st = gr_check_regular(path, what, GR_ERR_DATA, err);
    if (st != GR_OK) return st;
    if (!(*f = fopen(path, "rb"))) return gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
    *bytes = (int64_t)sb.st_size;
    return GR_OK;
}

/* ---- `data tokens`: llm.c / nanoGPT .bin files ---- */

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Where a .bin's tokens are: after llm.c's header, or from byte 0. */
static gr_status bin_layout(const char *path, FILE *f, int64_t size, int64_t *first, int64_t *ntok, bool *header,
                            gr_error *err) {
    uint8_t h[12];
    *header = size >= GR_LLMC_HEADER_BYTES && fread(h, 1, sizeof h, f) == sizeof h && le32(h) == GR_LLMC_MAGIC;
    if (*header) {
        const int32_t version = (int32_t)le32(h + 4), count = (int32_t)le32(h + 8);
        if (version != GR_LLMC_VERSION)
            return gr_error_set(err, GR_ERR_DATA, "%s: an llm.c token file of version %d; this reads version %d "
                                "(GPT-2's uint16 tokens)", path, version, GR_LLMC_VERSION);
        if (count < 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: the llm.c header says %d tokens", path, count);
        const int64_t want = GR_LLMC_HEADER_BYTES + 2 * (int64_t)count;
        if (size != want)
            return gr_error_set(err, GR_ERR_DATA, "%s: the llm.c header says %d tokens, %lld bytes with the header, "
                                "but the file has %lld bytes (truncated, or not an llm.c token file)", path, count,
                                (long long)want, (long long)size);
        *first = GR_LLMC_HEADER_BYTES;
        *ntok = count;
    } else {
        if (size % 2)
            return gr_error_set(err, GR_ERR_DATA, "%s: %lld bytes, an odd size: not uint16 tokens (nor an llm.c token "
                                "file: it does not start with the magic %d)", path, (long long)size, GR_LLMC_MAGIC);
        *first = 0;
        *ntok = size / 2;
    }
    if (*ntok == 0) return gr_error_set(err, GR_ERR_DATA, "%s: empty: no tokens", path);
    if (fseeko(f, (off_t)*first, SEEK_SET) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot seek: %s", path, strerror(errno));
    return GR_OK;
}

/* One .bin into group `group`, checking every token < vocab. */
static gr_status bin_import(const gr_conv_out *o, const char *group, const char *path, int64_t vocab,
                            const char *tokenizer, int64_t *ntok_out, gr_error *err) {
    FILE *f;
    int64_t size, first = 0, ntok = 0;
    bool header = false;
    gr_status st = gr_conv_open_input(path, "the token file", &f, &size, err);
    if (st != GR_OK) return st;
    if ((st = bin_layout(path, f, size, &first, &ntok, &header, err)) != GR_OK) {
        fclose(f);
        return st;
    }
    gr_conv_tokens t;
    if ((st = gr_conv_tokens_create(o, group, ntok, vocab, tokenizer, &t, err)) != GR_OK) {
        fclose(f);
        return st;
    }
    uint8_t *raw = gr_xmalloc((size_t)TOK_READ_TOKENS * 2);
    uint16_t *tok = gr_xmalloc((size_t)TOK_READ_TOKENS * sizeof *tok);
    int last_pct = -1;
    for (int64_t pos = 0; pos < ntok && st == GR_OK;) {
        const int64_t m = GR_MIN(TOK_READ_TOKENS, ntok - pos);
        const size_t got = fread(raw, 2, (size_t)m, f);
        if ((int64_t)got != m) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: read failed after %lld of %lld tokens: %s", path,
                              (long long)(pos + (int64_t)got), (long long)ntok,
                              ferror(f) ? strerror(errno) : "the file shrank while read");
            break;
        }
        for (int64_t i = 0; i < m && st == GR_OK; i++) {
            tok[i] = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
            if (tok[i] >= vocab)
                st = gr_error_set(err, GR_ERR_DATA, "%s: token %u at position %lld is >= the vocab_size %lld%s", path,
                                  tok[i], (long long)(pos + i), (long long)vocab,
                                  vocab == GR_GPT2_VOCAB ? " (GPT-2's; --vocab-size V sets another)"
                                                         : " (--vocab-size)");
        }
        if (st == GR_OK) st = gr_conv_tokens_write(&t, tok, m, err);
        pos += m;
        const int pct = (int)(100.0 * (double)pos / (double)ntok);
        if (o->progress && st == GR_OK && pct != last_pct) {
            fprintf(stderr, "\rgpurun data: reading %s: %3d%%", path, pct);
            last_pct = pct;
        }
    }
    if (o->progress && last_pct >= 0) fputc('\n', stderr);
    free(raw);
    free(tok);
    fclose(f);
    *ntok_out = ntok;
    if (st == GR_OK && o->progress)
        fprintf(stderr, "gpurun data: %s: %s, %lld tokens\n", path,
                header ? "llm.c header (version 1)" : "no header (nanoGPT's layout)", (long long)ntok);
    return gr_conv_tokens_end(&t, st, err);
}

gr_status gr_data_convert_tokens(const gr_bin_config *cfg, const char *out, bool force, bool progress,
                                 gr_tokens_report *rep, gr_error *err) {
    if (rep) memset(rep, 0, sizeof *rep);
    const int64_t vocab = cfg->vocab_size ? cfg->vocab_size : GR_GPT2_VOCAB;
    if (!cfg->train) return gr_error_set(err, GR_ERR_USAGE, "data tokens: --from TRAIN.bin is required");
    if (vocab < 1 || vocab > GR_TOKENS_U16_VOCAB)
        return gr_error_set(err, GR_ERR_USAGE, "data tokens: --vocab-size must be in 1..65536 (the tokens are "
                            "uint16), got %lld", (long long)vocab);
    const char *tokenizer = vocab == GR_GPT2_VOCAB ? "gpt2" : "unknown";
    gr_conv_out o;
    gr_status st = gr_conv_out_begin(&o, out, force, progress, err);
    if (st != GR_OK) return st;
    int64_t ntrain = 0, nval = 0;
    st = bin_import(&o, "/train", cfg->train, vocab, tokenizer, &ntrain, err);
    if (st == GR_OK && cfg->val) st = bin_import(&o, "/val", cfg->val, vocab, tokenizer, &nval, err);
    if (st == GR_OK) st = gr_conv_out_commit(&o, err);
    gr_conv_out_abort(&o); /* after a commit: nothing to do */
    if (st != GR_OK) return st;
    if (rep) {
        *rep = (gr_tokens_report){.train = ntrain, .val = nval, .vocab = vocab};
        snprintf(rep->tokenizer, sizeof rep->tokenizer, "%s", tokenizer);
    }
    if (progress) {
        char vs[64] = "";
        if (cfg->val) snprintf(vs, sizeof vs, ", /val %lld", (long long)nval);
        fprintf(stderr, "gpurun data: %s: /train %lld%s tokens, vocab_size %lld, tokenizer %s\n", out,
                (long long)ntrain, vs, (long long)vocab, tokenizer);
    }
    return GR_OK;
}
