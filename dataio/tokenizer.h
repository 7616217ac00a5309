/* tokenizer.h — the tokenizers of `gpurun data text` (convert_text.c), as a
 * table: one row per `--tokenizer NAME`, each with what it needs and its
 * functions. A tokenizer turns the text (the input files' bytes, concatenated
 * in the order given, as one text) into token ids in [0, vocab).
 *
 * Adding one (the GPT-2 BPE, `--tokenizer gpt2 --vocab DIR`) is filling its
 * row's functions in tokenizer.c and clearing its `unavailable`; nothing else
 * changes: the converter, the layout it writes and the token-window source
 * know a tokenizer by its row alone.
 *
 * Exports:
 *   gr_tokens                      a growable token buffer: uint16 elements
 *                                  when the vocabulary fits 16 bits, else
 *                                  uint32 (what the file stores, DESIGN 1.5);
 *   gr_tokens_init, gr_tokens_push, gr_tokens_free;
 *   gr_tokenizer_kind              a row: name, vocabulary, functions;
 *   gr_tokenizer_find              the row of a name, or NULL;
 *   gr_tokenizer_names             the names ("bytes, gpt2"), for messages. */
#ifndef GR_TOKENIZER_H
#define GR_TOKENIZER_H

#include "../common/gr_common.h"

/* The largest vocabulary stored as uint16 tokens (ids 0..65535). */
#define GR_TOKENS_U16_VOCAB ((int64_t)1 << 16)

typedef struct gr_tokens {
    void *data;       /* n elements of esz bytes */
    int64_t n, cap;
    int esz;          /* 2: uint16_t, 4: uint32_t */
} gr_tokens;

/* An empty buffer for ids below vocab (1..2^32). */
void gr_tokens_init(gr_tokens *t, int64_t vocab);
/* Appends one id (below the vocab of gr_tokens_init: the tokenizer's contract). */
void gr_tokens_push(gr_tokens *t, uint32_t id);
void gr_tokens_free(gr_tokens *t);

typedef struct gr_tokenizer_kind {
    const char *name;        /* --tokenizer NAME, and the `tokenizer` attribute written */
    const char *about;       /* what it does, one phrase */
    bool needs_vocab;        /* takes --vocab DIR (its vocabulary files); else --vocab is refused */
    /* Not NULL: this build lacks it; why, for the exit-2 message. */
    const char *unavailable;
    /* Opens it (vocab_dir: --vocab, NULL when not given); its vocabulary
     * size into *vocab. Errors: GR_ERR_DATA naming the vocabulary's file. */
    gr_status (*open)(const char *vocab_dir, void **state, int64_t *vocab, gr_error *err);
    /* Appends the tokens of the next n bytes of the text to out; may hold
     * back an unfinished piece (a word cut by the buffer) for the next feed. */
    gr_status (*feed)(void *state, const uint8_t *text, size_t n, gr_tokens *out, gr_error *err);
    /* The text's end: appends what was held back. */
    gr_status (*finish)(void *state, gr_tokens *out, gr_error *err);
    void (*close)(void *state);
} gr_tokenizer_kind;

/* The row named name, or NULL (then gr_tokenizer_names lists them). */
const gr_tokenizer_kind *gr_tokenizer_find(const char *name);
/* The names, "bytes, gpt2", into buf[0..n). */
void gr_tokenizer_names(char *buf, size_t n);

#endif
