/* convert.h — the `gpurun data ...` converters: source formats to the HDF5
 * layout of DESIGN 1.5. Each writes OUT.tmp and renames it into place, so a
 * failed conversion leaves nothing behind; a killed one's OUT.tmp is removed
 * by the next conversion to OUT (common/tmpfile.h, Leftovers). Those that write /train and /test
 * together refuse an existing OUT unless force, which replaces the whole
 * file; imagefolder writes its groups into an existing OUT, keeping the
 * rest of it (force: to replace a group already there). Errors are
 * GR_ERR_DATA (exit 3) naming the source file. */
#ifndef GR_CONVERT_H
#define GR_CONVERT_H

#include "../common/gr_common.h"

#include <stdatomic.h>

/* Writes /train and /test from the four IDX files in dir (gzipped "*.gz" or
 * not): train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte. images uint8 [N,1,28,28]
 * chunked by whole samples, labels uint8 [N]; group attributes `classes`
 * (names, when known for `dataset`), `mean`, `std` (stored units, over the
 * train split). Writes out.tmp then renames, so a failed conversion leaves
 * nothing; refuses to overwrite an existing out unless force. `dataset` is
 * "fashion-mnist" or "mnist" (it only selects the class names).
 * Errors are exit 3 naming the IDX file ("bad magic", "truncated", ...). */
gr_status gr_data_convert_idx(const char *dataset, const char *dir, const char *out, bool force,
                              bool progress, gr_error *err);

/* Records in each CIFAR-10 binary batch file of the real dataset. */
#define GR_CIFAR10_BATCH_RECORDS 10000

/* Writes /train (data_batch_1.bin .. data_batch_5.bin) and /test
 * (test_batch.bin) from the CIFAR-10 binary version in dir. Each record is 1
 * label byte (0..9) and 3072 pixel bytes: 1024 R, 1024 G, 1024 B, each a
 * row-major 32x32 plane, i.e. exactly one [3,32,32] sample. Each file must
 * hold batch_records records (GR_CIFAR10_BATCH_RECORDS for the real data;
 * tests pass fewer). images uint8 [N,3,32,32] chunked by whole samples,
 * labels uint8 [N]; attributes `classes` (the lines of batches.meta.txt when
 * present, which must name 10 classes, else airplane .. truck), `mean`, `std`
 * (3 values each, stored units, over the train split). Errors are exit 3
 * naming the file: no such file, a size that is not a multiple of 3073 bytes,
 * a record count other than batch_records, a label above 9. */
gr_status gr_data_convert_cifar10(const char *dir, int64_t batch_records, const char *out, bool force,
                                  bool progress, gr_error *err);

/* A synthetic classification dataset whose labels are learnable from the
 * pixels, for benchmarks and tests. */
typedef struct gr_synthetic_config {
    int64_t n;        /* train samples, >= 1 */
    int64_t test;     /* test samples, >= 1; -1: ceil(n / 10) */
    int64_t c, h, w;  /* sample shape, each in [1, 65536], C*H*W <= 2^30 */
    int64_t classes;  /* in [2, 65536] */
    uint64_t seed;
} gr_synthetic_config;

/* Writes /train and /test: images uint8 [N,C,H,W] (chunks of one sample when
 * a sample is >= 64 KiB, else of as many whole samples as fit in 1 MiB; no
 * compression), labels [N] (uint8, or uint16 above 256 classes), attributes
 * `mean`, `std` (per channel, over train). The label of sample i is uniform
 * over the classes; its pixels are a class pattern (per-channel offset plus a
 * low-frequency 2-D cosine whose frequencies and phase depend on the class)
 * plus uniform noise of +-48, all counter-based random numbers of (seed,
 * split, i), so the file is a pure function of the config. The test split
 * does not depend on n. Generated on all cores a block (~64 MiB) at a time
 * and written block by block: memory stays at a few blocks whatever N.
 * Errors: a config outside the ranges above is GR_ERR_USAGE. */
gr_status gr_data_convert_synthetic(const gr_synthetic_config *cfg, const char *out, bool force, bool progress,
                                    gr_error *err);

/* What the imagefolder converter does with an image it cannot decode. */
typedef enum gr_on_error {
    GR_ON_ERROR_FAIL,  /* the conversion fails naming the file (the default) */
    GR_ON_ERROR_SKIP,  /* the file is left out and listed in the report */
} gr_on_error;

/* Where a resumable conversion (--store jpeg: its work kept in OUT.partial,
 * DESIGN 1.1) stands, for its caller. The converter writes it; a stop
 * signal's handler (runner/data_cmd.c) reads it with lock-free atomic loads,
 * and the names only after `held` reads 1 (they are set before it). The
 * caller owns it, zeroed. */
#define GR_CONV_STOP_PATH 1100
typedef struct gr_conv_stop {
    atomic_llong files;            /* files OUT.partial holds converted: committed blocks, resumed ones too */
    atomic_int held;               /* 1 while this conversion holds OUT.partial and the names are set */
    atomic_int requested;          /* set by the caller (a test, another thread): the conversion stops once the
                                      block in progress is committed, returning GR_ERR_SIGNAL, its work kept */
    char dir[GR_CONV_STOP_PATH];   /* OUT.partial */
    char index[GR_CONV_STOP_PATH]; /* OUT.partial/index */
    char first[GR_CONV_STOP_PATH]; /* the first split's bytes file: with no file converted, the only other file */
} gr_conv_stop;

/* How the imagefolder converter stores samples. */
typedef enum gr_image_store {
    GR_STORE_RAW,   /* decoded, resized, cropped: images uint8 [N,3,S,S] (the default) */
    GR_STORE_JPEG,  /* encoded: each file's bytes, or a re-encoded JPEG (an encoded image split, DESIGN 1.5) */
} gr_image_store;

typedef struct gr_imagefolder_config {
    const char *dir;       /* one sub-folder per class */
    int64_t size;          /* S: samples are [3,S,S], S in [1, 37837] (a sample is one HDF5 chunk, < 4 GiB) */
    int64_t short_side;    /* R: resize so the short side is R, R in [S, 65536]; 0: R = S */
    const char *group;     /* split group, "/train" when NULL: "/" or "/name[/name...]" */
    gr_on_error on_error;  /* GR_ON_ERROR_FAIL when zeroed */
    double val_fraction;   /* 0: the one group `group`; in (0, 1): /train and /val (gr_split_stratified),
                              and group must be NULL */
    uint64_t seed;         /* the --val-fraction split's seed */
    gr_image_store store;  /* GR_STORE_RAW when zeroed; GR_STORE_JPEG: size and short_side must be 0 */
    int64_t max_side;      /* GR_STORE_JPEG: images with a side over it are resized (long side to it) and
                              re-encoded; 0: every file's bytes kept. In [1, 32768] */
    int quality;           /* GR_STORE_JPEG: the re-encoding's JPEG quality, 1..100; 0: 90 */
    bool restart;          /* GR_STORE_JPEG: OUT.partial's work is discarded, not resumed */
    gr_conv_stop *stop;    /* GR_STORE_JPEG: filled in as the work is committed; may be NULL */
} gr_imagefolder_config;

/* An image left out under GR_ON_ERROR_SKIP. */
typedef struct gr_imagefolder_bad {
    char *path;  /* DIR/<class>/<file> */
    char *why;   /* the decoder's message, as a failed conversion would say it */
} gr_imagefolder_bad;

/* What a conversion did; gr_imagefolder_report_free releases it (after a
 * failure too). */
typedef struct gr_imagefolder_report {
    int64_t samples;          /* samples written, in all groups */
    int64_t val_samples;      /* of them, in /val (val_fraction; else 0) */
    int64_t skipped;          /* entries not taken by their name: not *.jpg|*.jpeg|*.png, hidden, not a folder */
    int64_t resumed;          /* files converted by an earlier, stopped run (OUT.partial), not read again */
    gr_imagefolder_bad *bad;  /* images left out (GR_ON_ERROR_SKIP), in the order converted (/train's, then
                                 /val's; each in file order) */
    int64_t nbad;
    char **warnings;          /* one line each: a group kept in OUT whose `classes` differ from the ones written */
    int64_t nwarnings, warnings_cap;
} gr_imagefolder_report;

void gr_imagefolder_report_free(gr_imagefolder_report *r);

/* The --val-fraction split of an image folder: which of n files go to /val.
 * labels[i] in [0, nclasses) is file i's class, the files in the
 * converter's order (by class, then by name: sorted by path within a class).
 * Per class of m files, in their given order: a Fisher-Yates shuffle drawn
 * from gr_hash64_hd(gr_hash64_hd(seed, class), i) (common/gr_hd.h), and the
 * first k of it go to /val, k = floor(fraction * m + 0.5), at least 1 when
 * m >= 2, at most m - 1 (a class of one file stays in /train). Sets val[i]
 * to 1 (/val) or 0 (/train) and returns the count in /val: a pure function
 * of (labels, fraction, seed). fraction in (0, 1). */
int64_t gr_split_stratified(const int32_t *labels, int64_t n, int64_t nclasses, double fraction, uint64_t seed,
                            uint8_t *val);

/* Writes one split (cfg->group) from a folder of class folders: the
 * sub-folders of dir sorted by name (bytewise) are labels 0..K-1 and the
 * `classes` attribute; every *.jpg, *.jpeg (libjpeg) and *.png (libpng) file
 * in them (extension case-insensitive; names sorted) is one sample. Other
 * entries (and hidden ones, starting with '.') are skipped and counted in
 * report->skipped. The name only selects the files: each is decoded by what
 * its first bytes say it is (JPEG FF D8 FF, PNG's signature; else "not a
 * JPEG or PNG file"). Each image is decoded to RGB (grayscale copied to 3
 * channels, CMYK and YCCK JPEGs converted (Adobe's inverted CMYK: R =
 * C*K/255; plain CMYK: R = (255-C)*(255-K)/255), PNG palette and low bit
 * depths expanded, 16 bits cut to 8, alpha dropped; large JPEGs are decoded
 * at 1/2, 1/4 or 1/8 scale while their short side stays >= R), resized so its short side is R (area averaging when
 * shrinking, bilinear with half-pixel centres when growing, separable), and
 * centre-cropped to SxS (offset floor((side - S) / 2)). images uint8
 * [N,3,S,S] chunked by whole samples, labels [N], `mean`, `std` (3 values,
 * stored units). Decoded on all cores a block at a time, written block by
 * block. An image that cannot be decoded: a corrupt or truncated file (scan
 * data ending early is an error, not a grey bottom), one that is neither
 * JPEG nor PNG, or a header claiming a side over 32768 or over 2^28 pixels.
 * Under GR_ON_ERROR_FAIL it fails the conversion; under GR_ON_ERROR_SKIP it
 * is left out (its class keeps its label) and listed in report->bad, and
 * the split holds the others. Errors (exit 3): "DIR: no class sub-folders",
 * "DIR/cls: no JPEG or PNG images", "DIR/cls/x.jpg: cannot decode: <why>",
 * "DIR: none of the N images could be decoded" (skip). Bad sizes or group
 * are GR_ERR_USAGE. report may be NULL.
 *
 * With cfg->val_fraction, writes /train and /val (gr_split_stratified of the
 * files by cfg->seed), each image decoded once; both get the `classes`,
 * /val the `mean` and `std` of /train. /val empty (every class has one image)
 * is an error (exit 3).
 *
 * OUT need not be new: when it exists it must be an HDF5 file (else exit 3
 * naming it, untouched), and the groups written replace only themselves
 * there (gr_conv_out_begin_groups: the rest of OUT is kept, and OUT is
 * replaced whole by the rename of OUT.tmp, or not at all). A group already
 * in OUT needs force (else GR_ERR_USAGE naming OUT and the group). A group
 * kept in OUT whose `classes` attribute differs from the one written adds a
 * line to report->warnings.
 *
 * With cfg->store GR_STORE_JPEG, each split is an encoded image split
 * (DESIGN 1.5; convert_encoded.c): a file's bytes as they are when both its
 * sides are <= max_side (or max_side is 0), else the image decoded, resized
 * so its long side is max_side and encoded as a JPEG at `quality` (RGB, or
 * gray for a grayscale image). Every file is decoded once (a kept JPEG at
 * 1/8 scale) so a corrupt or truncated one meets --on-error as above. No
 * `mean`/`std` are written. Such a conversion is resumable
 * (convert_partial.h): the files are converted a block at a time into
 * OUT.partial, which a stopped or failed conversion keeps; the same
 * conversion started again goes on after its last committed block (their
 * files not read again: report->resumed); another one is GR_ERR_USAGE
 * unless cfg->restart. OUT.partial is removed once OUT is written.
 * cfg->stop, when given, is kept up to date for a signal handler and can
 * ask for a stop (GR_ERR_SIGNAL). */
gr_status gr_data_convert_imagefolder(const gr_imagefolder_config *cfg, const char *out, bool force, bool progress,
                                      gr_imagefolder_report *report, gr_error *err);

/* `gpurun data imagenet`: the ILSVRC2012 classification images. */
typedef struct gr_imagenet_config {
    const char *dir;        /* the root: train/ and val/, or Kaggle's ILSVRC/Data/CLS-LOC/{train,val} */
    const char *val_labels; /* a flat val/'s ground truth, LOC_val_solution.csv or
                               ILSVRC2012_validation_ground_truth.txt; NULL: looked for */
    const char *devkit;     /* the devkit folder (data/meta.mat, data/ILSVRC2012_validation_ground_truth.txt);
                               NULL: looked for */
    bool no_train, no_val;  /* --splits: a split not written (not both) */
    gr_imagefolder_config images; /* how images are stored, as imagefolder's: store, size, short_side,
                                     max_side, quality, on_error, restart, stop; dir, group, val_fraction
                                     and seed must be zero */
} gr_imagenet_config;

/* Writes /train and /val (those not left out) of an encoded (or, with
 * GR_STORE_RAW, decoded) image split each, as imagefolder does, from the
 * ILSVRC2012 layouts (DESIGN 1.1): DIR/train/<wnid>/<image>.JPEG (or
 * DIR/ILSVRC/Data/CLS-LOC/train, Kaggle's); val in class folders
 * DIR/val/<wnid>/, or flat DIR/val/<image>.JPEG with Kaggle's LOC_val_solution.csv
 * (ImageId, then the wnid first in PredictionString) or the devkit's
 * ILSVRC2012_validation_ground_truth.txt (the ILSVRC2012_ID of
 * ILSVRC2012_val_<8 digits> on line <that number>) and data/meta.mat
 * (`synsets`: ILSVRC2012_ID to WNID; matfile.h). Labels are the train
 * folders' wnids sorted bytewise (torchvision's ImageFolder), in both splits,
 * also when only val is written. `classes`: LOC_synset_mapping.txt's names
 * when it is in DIR or DIR/.., else the wnids. Errors (GR_ERR_DATA, exit 3)
 * name the file and what is wrong: no train folder, an empty class folder, a
 * flat val without ground truth (the files looked for named), a ground truth
 * naming a file that is not there or a wnid not in train, a val file without
 * ground truth, an unreadable meta.mat. GR_ERR_USAGE: bad options. report
 * may be NULL. */
gr_status gr_data_convert_imagenet(const gr_imagenet_config *cfg, const char *out, bool force, bool progress,
                                   gr_imagefolder_report *report, gr_error *err);

/* A numeric CSV table to a table split (`gpurun data csv`). */
typedef struct gr_csv_config {
    const char *from;                /* the CSV file */
    const char *const *targets;      /* the target columns' names, ntargets >= 1 */
    int ntargets;
    double val_fraction;             /* 0: /train only; in (0, 1): /train and /val */
    uint64_t seed;                   /* the /val split's */
} gr_csv_config;

/* What a CSV conversion wrote. */
typedef struct gr_csv_report {
    int64_t train, val;              /* rows in /train, /val */
    int64_t features, targets;       /* columns: k, m */
} gr_csv_report;

/* Reads cfg->from: a header line of column names (unique, non-empty; a
 * UTF-8 byte order mark, spaces and double quotes around a name are
 * dropped), then one line per sample of as many cells, each a number
 * strtod reads whole and float32 holds finitely (spaces and double quotes
 * around it allowed). Blank lines are skipped; cells are separated by
 * commas, and a quoted cell holds no comma. Writes, as one new file (OUT.tmp
 * renamed; an existing OUT needs force and is replaced whole), group /train
 * and, with val_fraction, /val: the rows split by gr_split_stratified with
 * one class (a Fisher-Yates shuffle of the rows by seed; round(F * N) of them,
 * at least 1 and at most N - 1, to /val), each split in file order. A split
 * holds `features` float32 [n, k] (the columns not named as targets, in file
 * order) and `targets` float32 [n, m] (in the order of cfg->targets), chunked
 * by whole rows; group attributes `feature_names` and `target_names` (UTF-8
 * string lists); attributes `mean` and `std` (float64 [k] and [m]: per column
 * over /train, population std, 0 made 1) on each of the two datasets, the
 * same in /val. Errors: GR_ERR_DATA (exit 3) naming the file, and for a cell
 * FILE:LINE:COLUMN (the cell's first character, 1-based), its text and
 * column name ("f.csv:17:9: 'abc' in column 3 (x3) is not a number"), for
 * a ragged row FILE:LINE and both counts; an empty file, one without data
 * rows, a repeated or empty column name. GR_ERR_USAGE: a target that is no
 * column (the message lists them), one named twice, no feature column left,
 * val_fraction outside [0, 1). rep may be NULL. */
gr_status gr_data_convert_csv(const gr_csv_config *cfg, const char *out, bool force, bool progress,
                              gr_csv_report *rep, gr_error *err);

/* ---- token datasets for language models (DESIGN 1.5, token splits) ---- */

/* What a token conversion wrote. */
typedef struct gr_tokens_report {
    int64_t train, val;              /* tokens in /train, /val (0: no /val) */
    int64_t vocab;                   /* the vocab_size attribute */
    char tokenizer[32];              /* the tokenizer attribute */
} gr_tokens_report;

/* `gpurun data text`. */
typedef struct gr_text_config {
    const char *const *from;         /* the text files, read in this order as one text; nfrom >= 1 */
    int nfrom;
    double val_fraction;             /* [0, 0.5]: the last fraction of the token stream goes to /val; 0: none */
    const char *tokenizer;           /* a row of tokenizer.h's table; NULL: "bytes" */
    const char *vocab;               /* --vocab DIR, for a tokenizer that needs_vocab; else NULL */
} gr_text_config;

/* Reads the files (each a regular file, read whole, in the order given: their
 * bytes concatenated are the text), tokenizes the text with cfg->tokenizer
 * (tokenizer.h; `bytes`: token = byte value, vocabulary 256) into memory (2
 * bytes a token, 4 above 65536 ids), then writes as one new file (OUT.tmp
 * renamed; an existing OUT needs force and is replaced whole) the split
 * /train holding the first floor(n (1 - F)) of the n tokens and, when F > 0,
 * /val holding the rest: the last fraction F of the stream, as nanoGPT's
 * prepare.py cuts its train.bin and val.bin (`data[:int(n*0.9)]`). Each is a
 * gr_conv_tokens split: `tokens` [n] with `vocab_size` and `tokenizer`.
 * Errors, before anything is written: GR_ERR_USAGE for val_fraction outside
 * [0, 0.5], an unknown tokenizer (the message lists them), one this build
 * lacks (its `unavailable` reason), --vocab missing for a tokenizer that needs
 * one or given to one that does not; GR_ERR_DATA naming the file for a file
 * missing, unreadable or not a regular file, for a text that is empty, and for
 * a split that would hold fewer than 2 tokens (one window of seq_len 1). rep
 * may be NULL. */
gr_status gr_data_convert_text(const gr_text_config *cfg, const char *out, bool force, bool progress,
                               gr_tokens_report *rep, gr_error *err);

/* llm.c's token file header: 256 int32 (1024 bytes), then uint16 tokens. */
#define GR_LLMC_MAGIC 20240520
#define GR_LLMC_VERSION 1
#define GR_LLMC_HEADER_BYTES 1024
/* GPT-2's vocabulary: `data tokens`' default --vocab-size. */
#define GR_GPT2_VOCAB 50257

/* `gpurun data tokens`. */
typedef struct gr_bin_config {
    const char *train;               /* --from TRAIN.bin */
    const char *val;                 /* --val VAL.bin, or NULL */
    int64_t vocab_size;              /* 1..65536; 0: GR_GPT2_VOCAB */
} gr_bin_config;

/* Imports llm.c / nanoGPT token files: uint16 little-endian tokens, after
 * llm.c's 1024-byte header (256 int32 LE: [0] magic 20240520, [1] version 1,
 * [2] the token count; the file's size must be 1024 + 2 x count) when the
 * file starts with that magic, else headerless (nanoGPT's train.bin, val.bin:
 * the whole file tokens, an even size). Writes, as one new file (force as
 * above), /train from cfg->train and, with cfg->val, /val from it: each a
 * gr_conv_tokens split with `vocab_size` cfg->vocab_size and `tokenizer`
 * "gpt2" when that is 50257, else "unknown" (the ids are kept; what they
 * mean is not known). Read and written in pieces: memory stays small
 * whatever the file's size. Errors (GR_ERR_DATA naming the file): missing,
 * unreadable, not a regular file; empty; an llm.c header of another version
 * or a negative count; a size that is not the header's (both sizes named) or
 * odd; a token >= vocab_size (its position, 0-based, in the file's tokens).
 * GR_ERR_USAGE: vocab_size outside 1..65536. rep may be NULL. */
gr_status gr_data_convert_tokens(const gr_bin_config *cfg, const char *out, bool force, bool progress,
                                 gr_tokens_report *rep, gr_error *err);

#endif
