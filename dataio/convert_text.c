/* convert_text.c — `gpurun data text OUT.h5 --from FILE... [--val-fraction F]
 * [--tokenizer bytes]`: text files, read in the order given as one text,
 * tokenized by a row of tokenizer.h's table into one token stream held in
 * memory, written as the token splits of DESIGN 1.5: /train the stream's
 * first floor(n (1 - F)) tokens, /val the rest (convert.h). */
#include "convert.h"
#include "convert_out.h"
#include "tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_READ_BYTES ((size_t)1 << 20)

/* The tokenizer of cfg, checked against --vocab: GR_ERR_USAGE when unknown,
 * missing from this build, or given --vocab wrongly. */
static gr_status text_tokenizer(const gr_text_config *cfg, const gr_tokenizer_kind **kind, gr_error *err) {
    const char *name = cfg->tokenizer ? cfg->tokenizer : "bytes";
    char names[128];
    gr_tokenizer_names(names, sizeof names);
    const gr_tokenizer_kind *k = *kind = gr_tokenizer_find(name);
    if (!k) return gr_error_set(err, GR_ERR_USAGE, "data text: --tokenizer: unknown tokenizer '%s' (%s)", name, names);
    if (k->unavailable) return gr_error_set(err, GR_ERR_USAGE, "data text: --tokenizer %s: %s", name, k->unavailable);
    if (k->needs_vocab && !cfg->vocab)
        return gr_error_set(err, GR_ERR_USAGE, "data text: --tokenizer %s needs --vocab DIR (%s)", name, k->about);
    if (!k->needs_vocab && cfg->vocab)
        return gr_error_set(err, GR_ERR_USAGE, "data text: --vocab does not apply to --tokenizer %s (%s)", name,
                            k->about);
    return GR_OK;
}

/* Every file's bytes through the tokenizer into out. Each file is checked
 * before any is read, so a missing one is said before the work starts. */
static gr_status text_read(const gr_text_config *cfg, const gr_tokenizer_kind *k, void *state, bool progress,
                           gr_tokens *out, int64_t *bytes_total, gr_error *err) {
    gr_status st = GR_OK;
    int64_t total = 0;
    for (int i = 0; i < cfg->nfrom && st == GR_OK; i++) {
        FILE *f;
        int64_t bytes;
        if ((st = gr_conv_open_input(cfg->from[i], "the input", &f, &bytes, err)) == GR_OK) fclose(f);
    }
    uint8_t *buf = gr_xmalloc(TEXT_READ_BYTES);
    for (int i = 0; i < cfg->nfrom && st == GR_OK; i++) {
        FILE *f;
        int64_t bytes;
        const char *path = cfg->from[i];
        if ((st = gr_conv_open_input(path, "the input", &f, &bytes, err)) != GR_OK) break;
        size_t got;
        while (st == GR_OK && (got = fread(buf, 1, TEXT_READ_BYTES, f)) > 0) {
            st = k->feed(state, buf, got, out, err);
            total += (int64_t)got;
        }
        if (st == GR_OK && ferror(f)) st = gr_error_set(err, GR_ERR_DATA, "%s: read failed: %s", path, strerror(errno));
        fclose(f);
        if (progress && st == GR_OK)
            fprintf(stderr, "\rgpurun data: read %d of %d files, %lld bytes", i + 1, cfg->nfrom, (long long)total);
    }
    if (progress && cfg->nfrom > 0) fputc('\n', stderr);
    free(buf);
    if (st == GR_OK) st = k->finish(state, out, err);
    *bytes_total = total;
    return st;
}

/* One split of the stream: tokens [first, first + n). */
static gr_status text_split(const gr_conv_out *o, const char *group, const gr_tokens *tok, int64_t first, int64_t n,
                            int64_t vocab, const char *tokenizer, gr_error *err) {
    gr_conv_tokens t;
    gr_status st = gr_conv_tokens_create(o, group, n, vocab, tokenizer, &t, err);
    if (st != GR_OK) return st;
    st = gr_conv_tokens_write(&t, (const uint8_t *)tok->data + (size_t)first * (size_t)tok->esz, n, err);
    return gr_conv_tokens_end(&t, st, err);
}

gr_status gr_data_convert_text(const gr_text_config *cfg, const char *out, bool force, bool progress,
                               gr_tokens_report *rep, gr_error *err) {
    if (rep) memset(rep, 0, sizeof *rep);
    if (cfg->nfrom < 1 || !cfg->from)
        return gr_error_set(err, GR_ERR_USAGE, "data text: --from FILE... is required (the text files, in order)");
    const double F = cfg->val_fraction;
    if (!(F >= 0 && F <= 0.5))
        return gr_error_set(err, GR_ERR_USAGE, "data text: --val-fraction must be in [0, 0.5] (the last share of the "
                            "token stream that goes to /val; 0: no /val), got %g", F);
    const gr_tokenizer_kind *k;
    gr_status st = text_tokenizer(cfg, &k, err);
    if (st != GR_OK) return st;
    void *state = NULL;
    int64_t vocab = 0, bytes = 0;
    if ((st = k->open(cfg->vocab, &state, &vocab, err)) != GR_OK) return st;
    gr_conv_out o;
    if ((st = gr_conv_out_begin(&o, out, force, progress, err)) != GR_OK) {
        k->close(state);
        return st;
    }
    gr_tokens tok;
    gr_tokens_init(&tok, vocab);
    st = text_read(cfg, k, state, progress, &tok, &bytes, err);
    k->close(state);
    const int64_t n = tok.n, ntrain = (int64_t)floor((double)n * (1.0 - F)), nval = n - ntrain;
    if (st == GR_OK && n == 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s%s: empty: no text to tokenize", cfg->from[0],
                          cfg->nfrom > 1 ? " and the other files given" : "");
    else if (st == GR_OK && (ntrain < 2 || (F > 0 && nval < 2)))
        st = gr_error_set(err, GR_ERR_DATA, "%s%s: %lld tokens make a /train of %lld and a /val of %lld "
                          "(--val-fraction %g); each split needs at least 2 tokens (one window of seq_len 1)",
                          cfg->from[0], cfg->nfrom > 1 ? " and the other files given" : "", (long long)n,
                          (long long)ntrain, (long long)(F > 0 ? nval : 0), F);
    if (st == GR_OK) st = text_split(&o, "/train", &tok, 0, ntrain, vocab, k->name, err);
    if (st == GR_OK && F > 0) st = text_split(&o, "/val", &tok, ntrain, nval, vocab, k->name, err);
    if (st == GR_OK) st = gr_conv_out_commit(&o, err);
    gr_conv_out_abort(&o); /* after a commit: nothing to do */
    gr_tokens_free(&tok);
    if (st != GR_OK) return st;
    if (rep) {
        *rep = (gr_tokens_report){.train = ntrain, .val = F > 0 ? nval : 0, .vocab = vocab};
        snprintf(rep->tokenizer, sizeof rep->tokenizer, "%s", k->name);
    }
    if (progress) {
        char vs[64] = "";
        if (F > 0) snprintf(vs, sizeof vs, ", /val %lld", (long long)nval);
        fprintf(stderr, "gpurun data: %s: /train %lld%s tokens (tokenizer %s, vocab_size %lld) from %lld bytes of %d "
                "file%s\n", out, (long long)ntrain, vs, k->name, (long long)vocab, (long long)bytes, cfg->nfrom,
                cfg->nfrom == 1 ? "" : "s");
    }
    return GR_OK;
}
