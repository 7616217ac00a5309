/* bpe_load.c — a GPT-2 vocabulary directory read and checked (bpe.h's
 * gr_bpe_load): encoder.json through common/json_read.h (one flat object),
 * its keys turned from GPT-2's byte alphabet back into bytes; vocab.bpe line
 * by line into the merge table. Every problem is exit 3 naming the file and
 * the entry (encoder.json, counted from 1) or the line (vocab.bpe). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/json_read.h"
#include "bpe_priv.h"

#define GR_BPE_ALPHA_END 0x144 /* the alphabet's code points are below U+0144 */

typedef struct gr_bpe_ld {
    gr_bpe *b;
    int16_t u2b[GR_BPE_ALPHA_END]; /* alphabet code point -> byte, -1 none */
    uint32_t b2u[256];
    int32_t *str_slot; /* token bytes -> id + 1 (0: empty), open addressing */
    int str_bits;
    char *scratch; /* one symbol's bytes, or a merge's result */
    size_t scratch_cap;
} gr_bpe_ld;

/* GPT-2's bytes_to_unicode: the 188 printable bytes stand for themselves,
 * the other 68 for U+0100.. in byte order. */
static void gr_bpe_alphabet(gr_bpe_ld *L) {
    int extra = 0;
    memset(L->u2b, 0xFF, sizeof L->u2b);
    for (int c = 0; c < 256; c++) {
        int printable = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
        L->b2u[c] = printable ? (uint32_t)c : 0x100u + (uint32_t)extra++;
        L->u2b[L->b2u[c]] = (int16_t)c;
    }
}

/* s (n bytes) for a message: in double quotes, control bytes, '"' and '\\'
 * escaped, cut after 40 bytes (at a character's start) with "...". */
static const char *gr_bpe_quote(const char *s, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    buf[k++] = '"';
    for (size_t i = 0; i < n && k + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= 40 && (c & 0xC0) != 0x80) {
            k += (size_t)snprintf(buf + k, cap - k, "...");
            break;
        }
        if (c < 0x20 || c == 0x7F) k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", c);
        else if (c == '"' || c == '\\') buf[k++] = '\\', buf[k++] = (char)c;
        else buf[k++] = (char)c;
    }
    buf[k++] = '"';
    buf[k] = '\0';
    return buf;
}

/* The bytes that symbol s (n bytes of UTF-8 in GPT-2's alphabet) stands for,
 * into L->scratch + at; their count, or -1 with why. */
static long gr_bpe_unalpha(gr_bpe_ld *L, const char *s, size_t n, size_t at, char *why, size_t why_n) {
    GR_GROW(L->scratch, L->scratch_cap, at + n + 1);
    if (n == 0) return snprintf(why, why_n, "an empty token"), -1;
    size_t k = at;
    for (size_t i = 0, l; i < n; i += l) {
        int32_t cp = gr_bpe_utf8((const uint8_t *)s + i, n - i, &l);
        if (cp < 0) return snprintf(why, why_n, "byte %zu is not UTF-8", i + 1), -1;
        if (cp >= GR_BPE_ALPHA_END || L->u2b[cp] < 0)
            return snprintf(why, why_n, "U+%04X is not a character of GPT-2's byte alphabet", (unsigned)cp), -1;
        L->scratch[k++] = (char)L->u2b[cp];
    }
    return (long)(k - at);
}

static uint64_t gr_bpe_hash(const char *s, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return h;
}

/* The slot of the token whose bytes are s (n of them), or of the empty slot where it would go. */
static size_t gr_bpe_str_slot(const gr_bpe_ld *L, const char *s, size_t n) {
    const gr_bpe *b = L->b;
    size_t mask = ((size_t)1 << L->str_bits) - 1;
    for (size_t i = gr_bpe_hash(s, n) & mask;; i = (i + 1) & mask) {
        int32_t id = L->str_slot[i] - 1;
        if (id < 0 || (b->len[id] == n && memcmp(b->bytes + b->off[id], s, n) == 0)) return i;
    }
}

static int32_t gr_bpe_str_find(const gr_bpe_ld *L, const char *s, size_t n) {
    return L->str_slot[gr_bpe_str_slot(L, s, n)] - 1;
}

static gr_status gr_bpe_read_file(const char *path, char **text, size_t *n, gr_error *err) {
    *text = NULL;
    gr_status st = gr_check_regular(path, "a tokenizer's vocabulary file", GR_ERR_DATA, err);
    if (st) return st;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot open (%s; a GPT-2 vocabulary directory holds "
                            "encoder.json and vocab.bpe)", path, strerror(errno));
    size_t cap = 1 << 16, k = 0, got;
    char *t = gr_xmalloc(cap);
    while ((got = fread(t + k, 1, cap - k - 1, f)) > 0) {
        k += got;
        if (cap - k - 1 == 0) t = gr_xrealloc(t, cap *= 2);
    }
    int bad = ferror(f), e = errno;
    fclose(f);
    if (bad) {
        free(t);
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot read (%s)", path, strerror(e));
    }
    t[k] = '\0';
    *text = t;
    *n = k;
    return GR_OK;
}

/* The id of entry i (a JSON integer in 0..n_tok-1), or -1 with why. */
static int64_t gr_bpe_entry_id(const gr_jval *v, int32_t n_tok, char *why, size_t why_n) {
    if (v->kind != GR_J_NUM) return snprintf(why, why_n, "the id is not a number"), -1;
    const char *t = v->text + (v->text[0] == '-');
    if (strspn(t, "0123456789") != strlen(t)) return snprintf(why, why_n, "id %s is not an integer", v->text), -1;
    errno = 0;
    long long id = strtoll(v->text, NULL, 10);
    if (errno || id < 0 || id >= n_tok)
        return snprintf(why, why_n, "id %s is outside 0..%d (the ids of %d tokens)", v->text, n_tok - 1, n_tok), -1;
    return id;
}

/* Entry i of encoder.json (from 0) into the tables; entry_of[id] is the entry that took each id. */
static gr_status gr_bpe_encoder_entry(gr_bpe_ld *L, const char *path, const gr_jfield *f, int i,
                                      int32_t *entry_of, gr_error *err) {
    gr_bpe *b = L->b;
    char why[160], q[200];
    size_t kn = strlen(f->key);
    int64_t id = gr_bpe_entry_id(&f->val, b->n_tok, why, sizeof why);
    long k = id < 0 ? -1 : gr_bpe_unalpha(L, f->key, kn, 0, why, sizeof why);
    if (id >= 0 && k >= 0 && entry_of[id] >= 0)
        snprintf(why, sizeof why, "id %lld repeats entry %d's", (long long)id, entry_of[id] + 1), k = -1;
    if (k < 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: entry %d (%s): %s", path, i + 1,
                            gr_bpe_quote(f->key, kn, q, sizeof q), why);
    b->off[id] = b->off[b->n_tok]; /* off[n_tok]: the bytes used so far */
    b->len[id] = (uint32_t)k;
    memcpy(b->bytes + b->off[id], L->scratch, (size_t)k);
    b->off[b->n_tok] += (size_t)k;
    entry_of[id] = i;
    size_t s = gr_bpe_str_slot(L, b->bytes + b->off[id], (size_t)k);
    if (L->str_slot[s])
        return gr_error_set(err, GR_ERR_DATA, "%s: entry %d (%s): the token repeats entry %d", path, i + 1,
                            gr_bpe_quote(f->key, kn, q, sizeof q), entry_of[L->str_slot[s] - 1] + 1);
    L->str_slot[s] = (int32_t)id + 1;
    return GR_OK;
}

static gr_status gr_bpe_check_bytes(gr_bpe_ld *L, const char *path, gr_error *err) {
    for (int c = 0; c < 256; c++) {
        char one = (char)c;
        L->b->byte_id[c] = gr_bpe_str_find(L, &one, 1);
        if (L->b->byte_id[c] < 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: no token for byte 0x%02X (U+%04X in GPT-2's byte "
                                "alphabet): every byte needs its one-character token", path, c, L->b2u[c]);
    }
    L->b->eot = gr_bpe_str_find(L, GR_BPE_EOT_TEXT, strlen(GR_BPE_EOT_TEXT));
    return GR_OK;
}

static gr_status gr_bpe_read_encoder(gr_bpe_ld *L, const char *path, gr_error *err) {
    gr_bpe *b = L->b;
    char *text, why[128];
    size_t n;
    gr_status st = gr_bpe_read_file(path, &text, &n, err);
    if (st) return st;
    gr_jobj o;
    bool ok = gr_json_object_read(text, n, &o, why, sizeof why);
    free(text);
    if (!ok)
        return gr_error_set(err, GR_ERR_DATA, "%s: %s (encoder.json is one JSON object: token -> id)", path, why);
    if (o.n == 0) st = gr_error_set(err, GR_ERR_DATA, "%s: no tokens (an empty object)", path);
    size_t total = 0;
    for (int i = 0; i < o.n; i++) total += strlen(o.f[i].key);
    b->n_tok = o.n;
    b->bytes = gr_xmalloc(total + 1);
    b->off = gr_xcalloc((size_t)o.n + 1, sizeof *b->off);
    b->len = gr_xcalloc((size_t)o.n + 1, sizeof *b->len);
    for (L->str_bits = 4; ((size_t)1 << L->str_bits) < 2 * (size_t)o.n;) L->str_bits++;
    L->str_slot = gr_xcalloc((size_t)1 << L->str_bits, sizeof *L->str_slot);
    int32_t *entry_of = gr_xmalloc(((size_t)o.n + 1) * sizeof *entry_of);
    memset(entry_of, 0xFF, ((size_t)o.n + 1) * sizeof *entry_of);
    for (int i = 0; !st && i < o.n; i++) st = gr_bpe_encoder_entry(L, path, &o.f[i], i, entry_of, err);
    free(entry_of);
    gr_jobj_free(&o);
    return st ? st : gr_bpe_check_bytes(L, path, err);
}

/* One symbol of line ln of vocab.bpe (s, n bytes) as its token's id *id. */
static gr_status gr_bpe_symbol(gr_bpe_ld *L, const char *path, int ln, const char *s, size_t n, int32_t *id,
                               gr_error *err) {
    char why[160], q[200];
    long k = gr_bpe_unalpha(L, s, n, 0, why, sizeof why);
    if (k < 0)
        return gr_error_set(err, GR_ERR_DATA, "%s:%d: symbol %s: %s", path, ln, gr_bpe_quote(s, n, q, sizeof q), why);
    if ((*id = gr_bpe_str_find(L, L->scratch, (size_t)k)) < 0)
        return gr_error_set(err, GR_ERR_DATA, "%s:%d: symbol %s is not a token of encoder.json", path, ln,
                            gr_bpe_quote(s, n, q, sizeof q));
    return GR_OK;
}

/* Line ln of vocab.bpe, s (n bytes, no line end), as the merge of the next rank. */
static gr_status gr_bpe_merge_line(gr_bpe_ld *L, const char *path, int ln, const char *s, size_t n, gr_error *err) {
    gr_bpe *b = L->b;
    char q[200];
    const char *sp = memchr(s, ' ', n);
    if (!sp || sp == s || sp == s + n - 1 || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)))
        return gr_error_set(err, GR_ERR_DATA, "%s:%d: %s is not two symbols separated by one space", path, ln,
                            gr_bpe_quote(s, n, q, sizeof q));
    int32_t x, y;
    gr_status st = gr_bpe_symbol(L, path, ln, s, (size_t)(sp - s), &x, err);
    if (st || (st = gr_bpe_symbol(L, path, ln, sp + 1, (size_t)(s + n - sp - 1), &y, err))) return st;
    size_t lx = b->len[x], ly = b->len[y];
    GR_GROW(L->scratch, L->scratch_cap, lx + ly);
    memcpy(L->scratch, b->bytes + b->off[x], lx);
    memcpy(L->scratch + lx, b->bytes + b->off[y], ly);
    int32_t res = gr_bpe_str_find(L, L->scratch, lx + ly);
    if (res < 0) {
        char joined[200];
        snprintf(joined, sizeof joined, "%.*s%.*s", (int)(sp - s), s, (int)(s + n - sp - 1), sp + 1);
        return gr_error_set(err, GR_ERR_DATA, "%s:%d: the merge's result %s is not a token of encoder.json", path,
                            ln, gr_bpe_quote(joined, strlen(joined), q, sizeof q));
    }
    uint64_t key = (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
    size_t mask = ((size_t)1 << b->pair_bits) - 1, i = gr_bpe_pair_slot(key, b->pair_bits);
    for (; b->pair_rank[i] >= 0; i = (i + 1) & mask)
        if (b->pair_key[i] == key)
            return gr_error_set(err, GR_ERR_DATA, "%s:%d: repeats the merge of line %d", path, ln,
                                b->pair_rank[i] + 2);
    int32_t r = b->n_merges++;
    b->pair_key[i] = key;
    b->pair_rank[i] = r;
    b->m_a[r] = x, b->m_b[r] = y, b->m_res[r] = res;
    return GR_OK;
}

static void gr_bpe_merges_alloc(gr_bpe *b, size_t max_merges) {
    b->m_a = gr_xmalloc((max_merges + 1) * sizeof *b->m_a);
    b->m_b = gr_xmalloc((max_merges + 1) * sizeof *b->m_b);
    b->m_res = gr_xmalloc((max_merges + 1) * sizeof *b->m_res);
    for (b->pair_bits = 4; ((size_t)1 << b->pair_bits) < 2 * max_merges;) b->pair_bits++;
    b->pair_key = gr_xcalloc((size_t)1 << b->pair_bits, sizeof *b->pair_key);
    b->pair_rank = gr_xmalloc(((size_t)1 << b->pair_bits) * sizeof *b->pair_rank);
    memset(b->pair_rank, 0xFF, ((size_t)1 << b->pair_bits) * sizeof *b->pair_rank);
}

/* "#version: 0.2", alone or followed by a space and anything. */
static bool gr_bpe_version_ok(const char *s, size_t n) {
    static const char v[] = "#version: 0.2";
    size_t k = sizeof v - 1;
    return n >= k && memcmp(s, v, k) == 0 && (n == k || s[k] == ' ');
}

static gr_status gr_bpe_read_merges(gr_bpe_ld *L, const char *path, gr_error *err) {
    char *text, q[200];
    size_t n, lines = 1;
    gr_status st = gr_bpe_read_file(path, &text, &n, err);
    if (st) return st;
    for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
    if (lines > INT32_MAX) {
        free(text);
        return gr_error_set(err, GR_ERR_DATA, "%s: more than 2^31 lines", path);
    }
    gr_bpe_merges_alloc(L->b, lines);
    int ln = 0, blank = 0; /* blank: the first empty line, fine only at the end */
    for (size_t p = 0; !st && p <= n; ln++) {
        const char *s = text + p, *nl = memchr(s, '\n', n - p);
        size_t len = nl ? (size_t)(nl - s) : n - p;
        p += len + 1;
        if (len && s[len - 1] == '\r') len--;
        if (ln == 0) {
            if (!gr_bpe_version_ok(s, len))
                st = gr_error_set(err, GR_ERR_DATA, "%s:1: %s is not \"#version: 0.2\" (the first line of GPT-2's "
                                  "vocab.bpe)", path, gr_bpe_quote(s, len, q, sizeof q));
        } else if (len == 0) {
            if (!blank) blank = ln + 1;
        } else if (blank) {
            st = gr_error_set(err, GR_ERR_DATA, "%s:%d: an empty line between merges", path, blank);
        } else {
            st = gr_bpe_merge_line(L, path, ln + 1, s, len, err);
        }
    }
    free(text);
    return st;
}

static char *gr_bpe_join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    char *p = gr_xmalloc(n + strlen(name) + 2);
    sprintf(p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
    return p;
}

gr_status gr_bpe_load(const char *dir, gr_bpe **out, gr_error *err) {
    *out = NULL;
    gr_bpe *b = gr_xcalloc(1, sizeof *b);
    gr_bpe_ld L = {.b = b};
    gr_bpe_alphabet(&L);
    char *pe = gr_bpe_join(dir, "encoder.json"), *pv = gr_bpe_join(dir, "vocab.bpe");
    gr_status st = gr_bpe_read_encoder(&L, pe, err);
    if (!st) st = gr_bpe_read_merges(&L, pv, err);
    free(pe);
    free(pv);
    free(L.str_slot);
    free(L.scratch);
    if (st) gr_bpe_free(b);
    else *out = b;
    return st;
}

void gr_bpe_free(gr_bpe *b) {
    if (!b) return;
    free(b->bytes);
    free(b->off);
    free(b->len);
    free(b->m_a);
    free(b->m_b);
    free(b->m_res);
    free(b->pair_key);
    free(b->pair_rank);
    free(b);
}
