/* bpe.h — GPT-2's byte-level BPE tokenizer (DESIGN 1.5), equal to OpenAI's
 * encoder.py and tiktoken's "gpt2" encoding, read from the two files of a
 * vocabulary directory:
 *
 *   encoder.json  one JSON object mapping each token, spelled in GPT-2's byte
 *                 alphabet (bytes_to_unicode: the 188 printable bytes '!'..'~',
 *                 '¡'..'¬', '®'..'ÿ' stand for themselves, the other 68 for
 *                 U+0100.. in byte order), to its id; the ids are 0..N-1, each
 *                 once (GPT-2: N = 50257), and every one of the 256 bytes has
 *                 its one-symbol token;
 *   vocab.bpe     "#version: 0.2", then one merge a line, two symbols separated
 *                 by a space, highest priority first; both symbols and their
 *                 concatenation are tokens of encoder.json, no pair twice.
 *
 * Encoding: the text is cut at each "<|endoftext|>" (when encoder.json has
 * that token: GPT-2's id 50256), which becomes that one id (tiktoken's
 * allowed_special="all"); each piece between is split by GPT-2's
 * pre-tokenization regex
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (matched by hand over UTF-8; \s is Unicode's White_Space, \p{L} and \p{N}
 * its general categories L* and N* as of bpe_unicode.c's table; a byte that
 * is not part of valid UTF-8 counts as one character that is none of these),
 * and each pre-token's bytes, one token each, are merged as encoder.py does:
 * the adjacent pair of lowest rank (line in vocab.bpe), all its occurrences
 * left to right, again until no pair has a rank. Any bytes encode (invalid
 * UTF-8 and NUL included) and decode back to themselves.
 *
 * A gr_bpe is read-only once loaded: any number of threads may encode and
 * decode with one at the same time. */
#ifndef GR_BPE_H
#define GR_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/gr_common.h"

typedef struct gr_bpe gr_bpe;

/* Reads DIR/encoder.json and DIR/vocab.bpe. A file missing or unreadable is
 * exit 3 (GR_ERR_DATA) naming it; a malformed one exit 3 naming the file and
 * where: "DIR/encoder.json: expected ':' at byte 17", "DIR/encoder.json:
 * entry 5 (\"ab\"): id 7 repeats entry 2's", "DIR/vocab.bpe:12: not two
 * symbols separated by a space". */
gr_status gr_bpe_load(const char *dir, gr_bpe **out, gr_error *err);
void gr_bpe_free(gr_bpe *b);

/* The number of tokens (ids 0..vocab-1): 50257 for GPT-2. */
int64_t gr_bpe_vocab(const gr_bpe *b);
/* The id of "<|endoftext|>", -1 when the vocabulary has none. */
int32_t gr_bpe_eot(const gr_bpe *b);

/* text's n bytes (any bytes; no terminator needed) into a new array *ids
 * (malloc'd, the caller frees; NULL when *n_ids is 0) of *n_ids token ids.
 * Linear in n (a pre-token of k bytes costs O(k log k)); memory 4 bytes a
 * token plus about 30 bytes per byte of the longest pre-token. GR_OK; exit 3
 * for a pre-token of 2^31 bytes or more (a run of one class, e.g. 2 GiB of
 * '='); exit 1 for a NULL text with n > 0. */
gr_status gr_bpe_encode(const gr_bpe *b, const char *text, size_t n, int32_t **ids, int64_t *n_ids,
                        gr_error *err);

/* The bytes of token id (not NUL-terminated; not necessarily valid UTF-8 on
 * their own) and their count in *len; NULL (and *len 0) when id is not in
 * 0..vocab-1. */
const char *gr_bpe_token(const gr_bpe *b, int32_t id, size_t *len);
/* Token id's bytes copied into buf (at most cap of them; no NUL added);
 * returns the token's length (> cap: buf holds the first cap), 0 when id is
 * not in 0..vocab-1 (no token is empty). */
size_t gr_bpe_decode(const gr_bpe *b, int32_t id, char *buf, size_t cap);
/* The bytes of n tokens into a new NUL-terminated buffer *text (malloc'd),
 * *len bytes before the NUL (the text may hold NULs of its own); an id
 * outside 0..vocab-1 is exit 3 naming it and its position. */
gr_status gr_bpe_decode_all(const gr_bpe *b, const int32_t *ids, int64_t n, char **text, size_t *len,
                            gr_error *err);

/* ---- internals, exported for tests ---- */

/* The class of code point cp for the pre-tokenization: GR_BPE_LETTER
 * (\p{L}), GR_BPE_NUMBER (\p{N}), GR_BPE_SPACE (\s: White_Space) or
 * GR_BPE_OTHER. */
enum { GR_BPE_OTHER = 0, GR_BPE_LETTER = 1, GR_BPE_NUMBER = 2, GR_BPE_SPACE = 3 };
int gr_bpe_char_class(uint32_t cp);
/* The end of the pre-token starting at text[p] (p < n): the regex's match there. */
size_t gr_bpe_pretoken_end(const char *text, size_t p, size_t n);

#endif
