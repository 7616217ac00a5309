/* convert_out.h — private to the `gpurun data` converters (dataio/convert*.c):
 * the output side they share. Not part of the dataio API.
 *
 * Exports:
 *   gr_conv_out     the output file: gr_conv_out_begin refuses an existing OUT
 *                   that is not a regular file, and any existing OUT unless
 *                   force, and creates OUT's private temporary
 *                   (OUT.<pid>.<hex>.tmp, common/tmpfile.h; "OUT.tmp" below);
 *                   gr_conv_out_begin_groups (convert_keep.c) instead adds
 *                   groups to an existing OUT, copying the rest of it into
 *                   OUT.tmp at the commit; gr_conv_out_commit closes OUT.tmp,
 *                   syncs it and renames it to OUT; gr_conv_out_abort closes
 *                   and removes OUT.tmp (call it on every failure path; it is
 *                   a no-op after a commit).
 *   gr_conv_out_classes_check  the groups kept from an existing OUT whose
 *                   `classes` differ from the ones written, as messages.
 *   gr_conv_split   one split group (DESIGN 1.5): images uint8 [N,C,H,W]
 *                   chunked by whole samples, labels [N] (uint8 when the
 *                   class count fits, else uint16 / int32), appended to block
 *                   by block with hyperslab writes; optional per-channel
 *                   statistics of what was written; a progress bar on stderr;
 *                   gr_conv_split_end writes the `classes`, `mean`, `std`
 *                   group attributes and closes the split.
 *   gr_conv_group_create, gr_conv_write_classes  a split's group (the
 *                   root opened, else created with its parents) and its
 *                   `classes` attribute, for splits of other layouts.
 *   gr_conv_chunk_samples  samples per HDF5 chunk: 1 when a sample is >= 64 KiB,
 *                   else as many whole samples as fit in 1 MiB (at most N).
 *   gr_conv_block_samples  samples per write block: a multiple of the chunk
 *                   of about 64 MiB (at most N), so blocks fill whole chunks.
 *   gr_conv_max_side  the largest side S of a C x S x S sample that fits in
 *                   one chunk (GR_CONV_CHUNK_MAX bytes, HDF5's limit).
 *   gr_conv_tokens  one token split (DESIGN 1.5, `data text`, `data tokens`):
 *                   group /name holding `tokens` [n], appended to in pieces,
 *                   with its `vocab_size` and `tokenizer` attributes.
 *   gr_conv_open_input  an input file opened for reading, with the checks and
 *                   messages every converter gives. */
#ifndef GR_CONVERT_OUT_H
#define GR_CONVERT_OUT_H

#include <hdf5.h>
#include <stdio.h>

#include "../common/gr_common.h"
#include "../common/tmpfile.h"

typedef struct gr_conv_out {
    char *path;      /* OUT */
    const char *tmp; /* tf.tmp: OUT.<pid>.<hex>.tmp, the file being written */
    gr_tmpfile tf;   /* the temporary, created exclusively */
    hid_t file;
    bool progress;
    hid_t old;       /* the existing OUT, read-only, when groups are added to it; else -1 */
    char **groups;   /* the groups written (gr_conv_out_begin_groups), left out of the copy of `old` */
    int ngroups;
} gr_conv_out;

/* For converters that write a whole file. Errors: "OUT: the output file is a
 * FIFO, not a regular file" (GR_ERR_DATA, whatever force says; OUT
 * untouched), "OUT: already exists (pass --force to overwrite); ..."
 * (GR_ERR_USAGE), "OUT: cannot create a temporary file next to it: ..." or
 * "OUT.<pid>.<hex>.tmp: cannot create (HDF5: ...)" (GR_ERR_DATA). On failure
 * *o needs no abort. */
gr_status gr_conv_out_begin(gr_conv_out *o, const char *out, bool force, bool progress, gr_error *err);
/* Creates OUT.tmp with no check of OUT (gr_conv_out_begin's second half); *o as
 * gr_conv_out_begin leaves it before that (zeroed, file and old -1). */
gr_status gr_conv_out_create(gr_conv_out *o, const char *out, bool progress, gr_error *err);
/* For converters that write some groups (absolute paths without empty, "."
 * or ".." parts). When OUT does not exist: a new file. An existing OUT must
 * be an HDF5 file ("OUT: exists and is not an HDF5 file ..." GR_ERR_DATA,
 * whatever force says; OUT untouched). When one of groups is "/", the whole
 * file is written, as gr_conv_out_begin (force to replace OUT). Else a
 * group already in OUT needs force ("OUT: already has group /val; --force
 * replaces it ..." GR_ERR_USAGE); OUT stays open read-only in
 * o->old, and gr_conv_out_commit copies all of it but those groups into
 * OUT.tmp first: the other groups and datasets with H5Ocopy (their data,
 * chunking and attributes as they are), the groups holding a written one
 * made again with their attributes, soft and external links made again. On
 * failure *o needs no abort. */
gr_status gr_conv_out_begin_groups(gr_conv_out *o, const char *out, const char *const *groups, int ngroups,
                                   bool force, bool progress, gr_error *err);
/* The copy of gr_conv_out_begin_groups (called by gr_conv_out_commit). */
gr_status gr_conv_out_keep(gr_conv_out *o, gr_error *err);
gr_status gr_conv_out_commit(gr_conv_out *o, gr_error *err);
void gr_conv_out_abort(gr_conv_out *o);

/* For each group kept from o->old (recursively, to a small depth) with a
 * `classes` attribute that differs from names[0..n), or is not a list of
 * strings, one message naming OUT, `written` (the groups written, as the
 * message says them) and that group, appended to *msgs (GR_GROW over *cap,
 * *count). Nothing when o->old is -1. */
void gr_conv_out_classes_check(const gr_conv_out *o, const char *written, const char *const *names, int64_t n,
                               char ***msgs, int64_t *count, int64_t *cap);

typedef struct gr_conv_split {
    const gr_conv_out *out;
    const char *name;          /* "/train" */
    hid_t group, images, labels;
    int64_t n, c, h, w;        /* images [n, c, h, w] */
    int64_t next;              /* samples written so far */
    int64_t chunk;             /* samples per chunk */
    uint64_t *sum, *sum2;      /* per channel, when stats were asked for */
    int last_pct;              /* progress bar state */
} gr_conv_split;

/* HDF5's limit on the bytes of one chunk (4 GiB - 1): a sample is never
 * split across chunks, so no sample may be larger. */
#define GR_CONV_CHUNK_MAX ((int64_t)0xffffffff)
int64_t gr_conv_max_side(int64_t channels);
int64_t gr_conv_chunk_samples(int64_t n, int64_t sample_bytes);
int64_t gr_conv_block_samples(int64_t n, int64_t sample_bytes);

/* Creates group `name` with its two datasets. `classes` is the label range
 * [0, classes) (it picks the labels' file type); stats: accumulate
 * per-channel sums of everything written, for gr_conv_split_end. On
 * failure the split is already released. */
gr_status gr_conv_split_create(const gr_conv_out *o, const char *name, int64_t n, int64_t c, int64_t h, int64_t w,
                               int64_t classes, bool stats, gr_conv_split *s, gr_error *err);
/* Group `name` of OUT.tmp into *group: "/" opened, another created with its
 * parents. */
gr_status gr_conv_group_create(const gr_conv_out *o, const char *name, hid_t *group, gr_error *err);
/* The `classes` attribute on group (g its name, for messages): nclasses
 * UTF-8 strings. */
gr_status gr_conv_write_classes(const gr_conv_out *o, hid_t group, const char *g, const char *const *names,
                                int64_t nclasses, gr_error *err);
/* Appends `count` samples: images count*C*H*W bytes, labels count values. */
gr_status gr_conv_split_write(gr_conv_split *s, int64_t count, const uint8_t *images, const int32_t *labels,
                              gr_error *err);
/* Ends the split. When st is not GR_OK: releases it and returns st. Else
 * checks that all N samples were written (an internal error otherwise); when
 * the split kept stats, fills mean/std (C values each: per-channel mean and
 * population std of what was written, stored units; a std of 0 becomes 1) from
 * them, else takes them as given; writes attributes `classes` (when names is
 * not NULL: nclasses UTF-8 strings), `mean` and `std`; releases the split. */
gr_status gr_conv_split_end(gr_conv_split *s, gr_status st, const char *const *names, int64_t nclasses,
                            double *mean, double *std, gr_error *err);
/* Releases without writing attributes (failure paths); idempotent. */
void gr_conv_split_free(gr_conv_split *s);

/* A token split being written: group `name` ("/train") holding the dataset
 * `tokens` [n], uint16 little-endian when vocab <= 65536 (ids 0..65535), else
 * uint32, chunked by 1 MiB (at most n), no compression; on it the attributes
 * `vocab_size` (int64) and `tokenizer` (a UTF-8 string). */
typedef struct gr_conv_tokens {
    const gr_conv_out *out;
    const char *name;
    hid_t group, dset;
    int64_t n, next;           /* tokens in all; written so far */
    int esz;                   /* bytes a token as stored (and as passed to write) */
} gr_conv_tokens;

/* Creates the group, its dataset and attributes (n >= 1, vocab in
 * [1, 2^32]). On failure it is already released. */
gr_status gr_conv_tokens_create(const gr_conv_out *o, const char *name, int64_t n, int64_t vocab,
                                const char *tokenizer, gr_conv_tokens *t, gr_error *err);
/* Appends count tokens: uint16_t (esz 2) or uint32_t (esz 4) values. */
gr_status gr_conv_tokens_write(gr_conv_tokens *t, const void *tokens, int64_t count, gr_error *err);
/* Ends the split (st not GR_OK: releases it and returns st); all n written,
 * else an internal error. */
gr_status gr_conv_tokens_end(gr_conv_tokens *t, gr_status st, gr_error *err);

/* Opens path for reading into *f, its size in *bytes. GR_ERR_DATA: "PATH: no
 * such file", "PATH: WHAT is a directory, not a regular file" (any other
 * kind likewise), "PATH: cannot read: <strerror>". */
gr_status gr_conv_open_input(const char *path, const char *what, FILE **f, int64_t *bytes, gr_error *err);

#endif
