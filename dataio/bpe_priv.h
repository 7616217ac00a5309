/* bpe_priv.h — what bpe_load.c (reading the vocabulary) and bpe.c (encoding
 * and decoding with it) share: the tokenizer's tables. */
#ifndef GR_BPE_PRIV_H
#define GR_BPE_PRIV_H

#include "bpe.h"

#define GR_BPE_EOT_TEXT "<|endoftext|>"

struct gr_bpe {
    int32_t n_tok;
    char *bytes;      /* every token's bytes, back to back */
    size_t *off;      /* token id: bytes[off[id] .. off[id] + len[id]) */
    uint32_t *len;
    int32_t byte_id[256]; /* the one-byte token of each byte */
    int32_t eot;          /* "<|endoftext|>", -1 when none */
    /* the merges by rank (line of vocab.bpe, from 0): m_a[r] m_b[r] -> m_res[r] */
    int32_t n_merges;
    int32_t *m_a, *m_b, *m_res;
    /* (a, b) -> rank: open addressing, key (uint64)a << 32 | b, rank -1 empty */
    uint64_t *pair_key;
    int32_t *pair_rank;
    int pair_bits;
};

static inline size_t gr_bpe_pair_slot(uint64_t key, int bits) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

/* The rank of merging tokens a and b, -1 when vocab.bpe has no such merge. */
static inline int32_t gr_bpe_pair_rank(const gr_bpe *b, int32_t x, int32_t y) {
    uint64_t key = (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
    size_t mask = ((size_t)1 << b->pair_bits) - 1;
    for (size_t s = gr_bpe_pair_slot(key, b->pair_bits);; s = (s + 1) & mask) {
        if (b->pair_rank[s] < 0) return -1;
        if (b->pair_key[s] == key) return b->pair_rank[s];
    }
}

/* The code point of the UTF-8 character at s (n >= 1 bytes there) and its
 * length in *len; -1 (and *len 1) when s[0] does not start a valid one: a
 * stray continuation byte, an overlong form, a surrogate, above U+10FFFF, cut
 * short. */
static inline int32_t gr_bpe_utf8(const uint8_t *s, size_t n, size_t *len) {
    uint8_t c = s[0];
    *len = 1;
    if (c < 0x80) return c;
    size_t k;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) k = 1, cp = c & 0x1Fu, min = 0x80;
    else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0Fu, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) k = 3, cp = c & 0x07u, min = 0x10000;
    else return -1;
    if (n <= k) return -1;
    for (size_t i = 1; i <= k; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    *len = k + 1;
    return (int32_t)cp;
}

#endif
