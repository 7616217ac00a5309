/* bpe.c — GPT-2's byte-level BPE (bpe.h): the pre-tokenization regex matched
 * by hand over UTF-8, the merges of each pre-token, and decoding. The
 * vocabulary is read by bpe_load.c; the character classes are
 * bpe_unicode.c's. */
#include <stdlib.h>
#include <string.h>

#include "bpe_priv.h"

/* ---- pre-tokenization ---- */

/* The class of the character at s[p] (p < n) and its length in *len; a byte
 * that does not start valid UTF-8 is one character of class "other". */
static inline int gr_bpe_unit(const uint8_t *s, size_t p, size_t n, size_t *len) {
    uint8_t c = s[p];
    if (c < 0x80) {
        *len = 1;
        if ((unsigned)((c | 0x20) - 'a') < 26u) return GR_BPE_LETTER;
        if ((unsigned)(c - '0') < 10u) return GR_BPE_NUMBER;
        if (c == ' ' || (unsigned)(c - '\t') < 5u) return GR_BPE_SPACE;
        return GR_BPE_OTHER;
    }
    int32_t cp = gr_bpe_utf8(s + p, n - p, len);
    return cp < 0 ? GR_BPE_OTHER : gr_bpe_char_class((uint32_t)cp);
}

/* The regex's alternatives in their order:
 *   's|'t|'re|'ve|'m|'ll|'d    a contraction, whatever follows it;
 *    ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+    a run of one class, with the
 *                              one space (U+0020) before it;
 *   \s+(?!\S)                  whitespace up to the end, or all of a run but
 *                              its last character when that one is followed
 *                              by something (the last then starts the next
 *                              pre-token: " word", or itself alone);
 *   \s+                        a single whitespace character before something. */
size_t gr_bpe_pretoken_end(const char *text, size_t p, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    if (s[p] == '\'' && p + 1 < n) {
        uint8_t c1 = s[p + 1], c2 = p + 2 < n ? s[p + 2] : 0;
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return p + 2;
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return p + 3;
    }
    size_t len, q = p;
    int k = gr_bpe_unit(s, p, n, &len);
    if (s[p] == ' ' && p + 1 < n) {
        size_t l2;
        int k2 = gr_bpe_unit(s, p + 1, n, &l2);
        if (k2 != GR_BPE_SPACE) k = k2, q = p + 1, len = l2;
    }
    size_t e = q + len;
    if (k != GR_BPE_SPACE) {
        while (e < n && gr_bpe_unit(s, e, n, &len) == k) e += len;
        return e;
    }
    size_t last = p; /* the start of the run's last character */
    while (e < n && gr_bpe_unit(s, e, n, &len) == GR_BPE_SPACE) last = e, e += len;
    if (e == n) return n;
    return last > p ? last : e;
}

/* ---- merging ---- */

/* An encode call's scratch: one pre-token's symbols as a linked list over
 * its bytes (sym[i]: the token starting at byte i, -1 once merged into the
 * one before), the heap of candidate merges, and the output. */
typedef struct gr_bpe_ws {
    int32_t *sym, *nxt, *prv;
    size_t cap;
    uint64_t *heap; /* (rank << 32 | position), the smallest first */
    size_t heap_n, heap_cap;
    uint64_t *round; /* the heap's entries of one rank */
    size_t round_cap;
    int32_t *out;
    size_t out_n, out_cap;
} gr_bpe_ws;

static void gr_bpe_heap_push(gr_bpe_ws *w, uint64_t v) {
    GR_GROW(w->heap, w->heap_cap, w->heap_n + 1);
    size_t i = w->heap_n++;
    while (i > 0 && w->heap[(i - 1) / 2] > v) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = v;
}

static uint64_t gr_bpe_heap_pop(gr_bpe_ws *w) {
    uint64_t top = w->heap[0], v = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && w->heap[c + 1] < w->heap[c]) c++;
        if (w->heap[c] >= v) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = v;
    return top;
}

/* The pair of symbols at i and j (next to each other) as a candidate, if vocab.bpe merges it. */
static void gr_bpe_candidate(const gr_bpe *b, gr_bpe_ws *w, int32_t i, int32_t j) {
    int32_t r = gr_bpe_pair_rank(b, w->sym[i], w->sym[j]);
    if (r >= 0) gr_bpe_heap_push(w, (uint64_t)r << 32 | (uint32_t)i);
}

/* Merges the pair of rank r at position i, if it is still there. */
static void gr_bpe_merge_at(const gr_bpe *b, gr_bpe_ws *w, int32_t r, int32_t i) {
    int32_t j = w->nxt[i];
    if (w->sym[i] != b->m_a[r] || j < 0 || w->sym[j] != b->m_b[r]) return; /* stale */
    w->sym[i] = b->m_res[r];
    w->sym[j] = -1;
    w->nxt[i] = w->nxt[j];
    if (w->nxt[i] >= 0) w->prv[w->nxt[i]] = i;
    if (w->prv[i] >= 0) gr_bpe_candidate(b, w, w->prv[i], i);
    if (w->nxt[i] >= 0) gr_bpe_candidate(b, w, i, w->nxt[i]);
}

/* One pre-token's n bytes (1 <= n < 2^31) as tokens appended to w->out.
 * encoder.py's loop: the pair of lowest rank, every occurrence of it left to
 * right (an occurrence overlapping the one before, as in "aaa", is not one),
 * again. A heap ordered by (rank, position) gives each rank's occurrences in
 * order; the new pairs a merge makes are of other ranks and wait for the
 * next round. */
static void gr_bpe_word(const gr_bpe *b, gr_bpe_ws *w, const uint8_t *s, int32_t n) {
    GR_GROW(w->out, w->out_cap, w->out_n + (size_t)n);
    if (n == 1) {
        w->out[w->out_n++] = b->byte_id[s[0]];
        return;
    }
    if ((size_t)n > w->cap) {
        w->cap = GR_MAX((size_t)n, 2 * w->cap);
        w->sym = gr_xrealloc(w->sym, w->cap * sizeof *w->sym);
        w->nxt = gr_xrealloc(w->nxt, w->cap * sizeof *w->nxt);
        w->prv = gr_xrealloc(w->prv, w->cap * sizeof *w->prv);
    }
    for (int32_t i = 0; i < n; i++) w->sym[i] = b->byte_id[s[i]], w->nxt[i] = i + 1, w->prv[i] = i - 1;
    w->nxt[n - 1] = -1;
    w->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++) gr_bpe_candidate(b, w, i, i + 1);
    while (w->heap_n) {
        uint64_t rank = w->heap[0] >> 32;
        size_t k = 0;
        while (w->heap_n && w->heap[0] >> 32 == rank) {
            GR_GROW(w->round, w->round_cap, k + 1);
            w->round[k++] = gr_bpe_heap_pop(w);
        }
        for (size_t t = 0; t < k; t++) gr_bpe_merge_at(b, w, (int32_t)rank, (int32_t)(uint32_t)w->round[t]);
    }
    for (int32_t i = 0; i >= 0; i = w->nxt[i]) w->out[w->out_n++] = w->sym[i];
}

/* The first "<|endoftext|>" in s (n bytes), NULL when none. */
static const char *gr_bpe_find_eot(const char *s, size_t n) {
    const size_t k = sizeof GR_BPE_EOT_TEXT - 1;
    for (const char *p = s, *end = s + n; (size_t)(end - p) >= k; p++) {
        p = memchr(p, '<', (size_t)(end - p) - k + 1);
        if (!p) return NULL;
        if (memcmp(p, GR_BPE_EOT_TEXT, k) == 0) return p;
    }
    return NULL;
}

gr_status gr_bpe_encode(const gr_bpe *b, const char *text, size_t n, int32_t **ids, int64_t *n_ids,
                        gr_error *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && n) return gr_error_set(err, GR_ERR_INTERNAL, "gr_bpe_encode: no text");
    gr_bpe_ws w = {0};
    gr_status st = GR_OK;
    for (size_t seg = 0; !st && seg < n;) {
        const char *hit = b->eot >= 0 ? gr_bpe_find_eot(text + seg, n - seg) : NULL;
        size_t end = hit ? (size_t)(hit - text) : n;
        for (size_t p = seg, e; p < end; p = e) {
            e = gr_bpe_pretoken_end(text, p, end);
            if (e - p > INT32_MAX) {
                st = gr_error_set(err, GR_ERR_DATA, "a pre-token of %zu bytes at byte %zu (a run of one kind of "
                                  "character): at most 2^31 - 1 are encoded", e - p, p);
                break;
            }
            gr_bpe_word(b, &w, (const uint8_t *)text + p, (int32_t)(e - p));
        }
        if (hit) {
            GR_GROW(w.out, w.out_cap, w.out_n + 1);
            w.out[w.out_n++] = b->eot;
            end += sizeof GR_BPE_EOT_TEXT - 1;
        }
        seg = end;
    }
    free(w.sym);
    free(w.nxt);
    free(w.prv);
    free(w.heap);
    free(w.round);
    if (st || !w.out_n) {
        free(w.out);
        return st;
    }
    *ids = w.out;
    *n_ids = (int64_t)w.out_n;
    return GR_OK;
}

/* ---- the rest of the API ---- */

int64_t gr_bpe_vocab(const gr_bpe *b) { return b->n_tok; }

int32_t gr_bpe_eot(const gr_bpe *b) { return b->eot; }

const char *gr_bpe_token(const gr_bpe *b, int32_t id, size_t *len) {
    if (id < 0 || id >= b->n_tok) {
        *len = 0;
        return NULL;
    }
    *len = b->len[id];
    return b->bytes + b->off[id];
}

size_t gr_bpe_decode(const gr_bpe *b, int32_t id, char *buf, size_t cap) {
    size_t len;
    const char *t = gr_bpe_token(b, id, &len);
    if (t) memcpy(buf, t, GR_MIN(len, cap));
    return len;
}

gr_status gr_bpe_decode_all(const gr_bpe *b, const int32_t *ids, int64_t n, char **text, size_t *len,
                            gr_error *err) {
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= b->n_tok)
            return gr_error_set(err, GR_ERR_DATA, "token %lld: id %d is outside the vocabulary (0..%d)",
                                (long long)i, ids[i], b->n_tok - 1);
        total += b->len[ids[i]];
    }
    char *t = gr_xmalloc(total + 1);
    size_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy(t + k, b->bytes + b->off[ids[i]], b->len[ids[i]]);
        k += b->len[ids[i]];
    }
    t[k] = '\0';
    *text = t;
    *len = k;
    return GR_OK;
}
