/* tokenizer.c — the tokenizer table of tokenizer.h and the one tokenizer
 * built in: `bytes`, whose token is the byte's value (vocabulary 256, so
 * any text, UTF-8 or not, round-trips exactly). */
#include "tokenizer.h"
#include "bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gr_tokens_init(gr_tokens *t, int64_t vocab) {
    GR_ASSERT(vocab >= 1 && vocab <= ((int64_t)1 << 32));
    memset(t, 0, sizeof *t);
    t->esz = vocab <= GR_TOKENS_U16_VOCAB ? 2 : 4;
}

void gr_tokens_push(gr_tokens *t, uint32_t id) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1 << 16;
        t->data = gr_xrealloc(t->data, (size_t)t->cap * (size_t)t->esz);
    }
    if (t->esz == 2) ((uint16_t *)t->data)[t->n++] = (uint16_t)id;
    else ((uint32_t *)t->data)[t->n++] = id;
}

void gr_tokens_free(gr_tokens *t) {
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* ---- bytes: token = byte value ---- */

static gr_status bytes_open(const char *vocab_dir, void **state, int64_t *vocab, gr_error *err) {
    (void)vocab_dir;
    (void)err;
    *state = NULL;
    *vocab = 256;
    return GR_OK;
}

static gr_status bytes_feed(void *state, const uint8_t *text, size_t n, gr_tokens *out, gr_error *err) {
    (void)state;
    (void)err;
    for (size_t i = 0; i < n; i++) gr_tokens_push(out, text[i]);
    return GR_OK;
}

static gr_status bytes_finish(void *state, gr_tokens *out, gr_error *err) {
    (void)state;
    (void)out;
    (void)err;
    return GR_OK;
}

static void bytes_close(void *state) { (void)state; }

/* ---- gpt2: GPT-2's byte-level BPE (bpe.h) over the whole text, encoded at its end ---- */

typedef struct gpt2_state {
    gr_bpe *bpe;
    uint8_t *text;
    size_t n, cap;
} gpt2_state;

static gr_status gpt2_open(const char *vocab_dir, void **state, int64_t *vocab, gr_error *err) {
    gpt2_state *s = gr_xcalloc(1, sizeof *s);
    gr_status st = gr_bpe_load(vocab_dir, &s->bpe, err);
    if (st) {
        free(s);
        return st;
    }
    *vocab = gr_bpe_vocab(s->bpe);
    *state = s;
    return GR_OK;
}

/* the text is held whole: a pre-token may run across the feeds */
static gr_status gpt2_feed(void *state, const uint8_t *text, size_t n, gr_tokens *out, gr_error *err) {
    (void)out;
    (void)err;
    gpt2_state *s = state;
    if (s->n + n > s->cap) {
        s->cap = s->n + n > 2 * s->cap ? s->n + n : 2 * s->cap;
        s->text = gr_xrealloc(s->text, s->cap);
    }
    memcpy(s->text + s->n, text, n);
    s->n += n;
    return GR_OK;
}

static gr_status gpt2_finish(void *state, gr_tokens *out, gr_error *err) {
    gpt2_state *s = state;
    int32_t *ids = NULL;
    int64_t n = 0;
    gr_status st = gr_bpe_encode(s->bpe, (const char *)s->text, s->n, &ids, &n, err);
    for (int64_t i = 0; !st && i < n; i++) gr_tokens_push(out, (uint32_t)ids[i]);
    free(ids);
    return st;
}

static void gpt2_close(void *state) {
    gpt2_state *s = state;
    if (!s) return;
    gr_bpe_free(s->bpe);
    free(s->text);
    free(s);
}

static const gr_tokenizer_kind gr_tokenizers[] = {
    {.name = "bytes", .about = "token = byte value, vocabulary 256", .open = bytes_open, .feed = bytes_feed,
     .finish = bytes_finish, .close = bytes_close},
    {.name = "gpt2", .about = "GPT-2's byte-level BPE, vocabulary 50257, from --vocab DIR (encoder.json, vocab.bpe)",
     .needs_vocab = true, .open = gpt2_open, .feed = gpt2_feed, .finish = gpt2_finish, .close = gpt2_close},
};

const gr_tokenizer_kind *gr_tokenizer_find(const char *name) {
    for (size_t k = 0; k < GR_ARRAY_LEN(gr_tokenizers); k++)
        if (strcmp(gr_tokenizers[k].name, name) == 0) return &gr_tokenizers[k];
    return NULL;
}

void gr_tokenizer_names(char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_tokenizers) && k + 1 < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", gr_tokenizers[i].name);
}
