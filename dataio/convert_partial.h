/* convert_partial.h — private to the encoded-split writer (convert_encoded.c)
 * and the converters that call it: a conversion's resumable work, kept in a
 * directory OUT.partial next to OUT (DESIGN 1.1, "Resumable conversions").
 * Not part of the dataio API.
 *
 * OUT.partial/ holds
 *   index       a text header saying what is converted (the options that
 *               shape the output; per split its group, file count and a
 *               64-bit hash of its files' paths, labels, sizes and
 *               modification times), then one binary record per committed
 *               block: its split, its first file, and per file the stored
 *               size, shape and format, or the reason it was left out
 *               (--on-error skip); each record carries its length and its
 *               CRC-32C, so one torn by a crash reads as absent;
 *   NAME.bytes  per split (/train: train.bytes), the stored bytes of its
 *               committed blocks in order, perhaps followed by part of an
 *               uncommitted block (cut off at the next start).
 * A block's bytes are written as it is done, its record kept in memory; the
 * records are committed every GR_CONV_COMMIT_S seconds (and when asked:
 * at a split's end, a pause, a stop, a failure): the bytes files synced,
 * then the records appended and synced, so what the index says is always
 * on disk, and a flush per block does not hold up the decoding. A stop
 * loses at most the blocks since the last commit. The writer holds an
 * open-file-description write lock on `index` for its life, so a second
 * conversion to the same OUT is refused while one runs.
 *
 * Opening it with a header equal to this conversion's resumes: the records
 * are read back into the splits' tables (offsets, shapes, formats, labels;
 * the files left out into the report), the bytes files cut to what the
 * records cover, and the conversion goes on at the first file not done. A
 * different header is a usage error naming both, unless `restart` (or the
 * directory holds no committed file: nothing is lost) starts over.
 *
 * Exports:
 *   gr_conv_stored        one file as stored (or why not);
 *   gr_conv_part          one split: its group and files, what is done;
 *   gr_conv_partial       the directory and its splits;
 *   gr_conv_partial_open, gr_conv_partial_add, gr_conv_partial_commit,
 *   gr_conv_partial_bytes_fd,
 *   gr_conv_partial_done (OUT written: removes it), gr_conv_partial_close
 *   (keeps it when it holds committed work, else removes it);
 *   gr_imagefolder_report_bad  a file left out, into the report
 *   (convert_imagefolder.c). */
#ifndef GR_CONVERT_PARTIAL_H
#define GR_CONVERT_PARTIAL_H

#include "convert.h"
#include "convert_scan.h"

/* The suffix of OUT's resumable work directory. */
#define GR_CONV_PARTIAL_SUFFIX ".partial"
/* Seconds between commits of the blocks done. */
#define GR_CONV_COMMIT_S 5.0

/* One file as the encoded writer stores it. */
typedef struct gr_conv_stored {
    uint8_t *bytes;    /* the stored bytes (malloc'd) */
    size_t n;
    uint16_t shape[3]; /* H, W, C of the stored image */
    uint8_t format;    /* gr_image_format */
    char *why;         /* not NULL: the file failed, this says why (malloc'd) */
} gr_conv_stored;

/* One split: the caller fills name, files and n; the rest is the partial's. */
typedef struct gr_conv_part {
    const char *name;           /* the group, "/train" */
    const gr_conv_file *files;  /* in order, each with its label */
    int64_t n;
    int64_t done;               /* files looked at (and added: committed or pending) */
    int64_t kept;               /* of them stored (the others left out) */
    uint64_t *offsets;          /* kept + 1, in the bytes file */
    uint16_t *shapes;           /* kept * 3 */
    uint8_t *formats;           /* kept */
    int32_t *labels;            /* kept */
    int64_t first_bad;          /* the report's index of its first file left out; -1: none */
    char *bytes_path;           /* OUT.partial/NAME.bytes */
    int bytes_fd;               /* open once the split is begun; -1 before */
} gr_conv_part;

typedef struct gr_conv_partial {
    char *dir;                  /* OUT.partial */
    char *index_path;           /* OUT.partial/index */
    int index_fd;
    gr_conv_part *parts;
    int nparts;
    int64_t total, done;        /* files in all splits; added */
    int64_t committed;          /* of them committed */
    int64_t resumed;            /* files done when it was opened */
    uint8_t *pending;           /* the records added since the last commit */
    size_t npending, pending_cap;
    double committed_at;        /* gr_now() of the last commit */
    gr_conv_stop *stop;         /* may be NULL */
} gr_conv_partial;

/* Opens or makes OUT.partial for the nparts splits (parts[k].name, files,
 * n filled in; n >= 1), `options` a one-line text of the options that shape
 * what is stored (store, max_side, quality, on_error). Resumes what a
 * matching header holds (above), adding its left-out files to report->bad;
 * with restart discards it. Says "resuming" or "starting over" on stderr
 * when progress. Errors: GR_ERR_USAGE "OUT.partial: holds another
 * conversion's work ... --restart"; GR_ERR_DATA: OUT.partial not a
 * directory, locked by a running conversion, unreadable, inconsistent, or
 * its bytes shorter than its records say. On failure *p needs no close. */
gr_status gr_conv_partial_open(gr_conv_partial *p, const char *out, gr_conv_part *parts, int nparts,
                               const char *options, bool restart, gr_conv_stop *stop, bool progress,
                               gr_imagefolder_report *report, gr_error *err);

/* Adds the next `count` files of split k (files [done, done + count)):
 * the stored bytes of those without `why` appended to its bytes file, the
 * block's record kept for the next commit; the tables and p->done grow.
 * Those with `why` are listed in report->bad (why taken; the caller checked
 * --on-error). es' bytes are left to the caller. Commits when the last
 * commit is GR_CONV_COMMIT_S old. GR_ERR_DATA naming the file on a failed
 * write or sync. */
gr_status gr_conv_partial_add(gr_conv_partial *p, int k, gr_conv_stored *es, int64_t count,
                              gr_imagefolder_report *report, gr_error *err);

/* Commits what was added: the bytes files synced, then the records appended
 * to the index and synced; p->committed and stop->files become p->done. */
gr_status gr_conv_partial_commit(gr_conv_partial *p, gr_error *err);

/* Split k's bytes file, for reading back its offsets[kept] bytes. */
int gr_conv_partial_bytes_fd(const gr_conv_partial *p, int k);

/* OUT is written: removes OUT.partial and releases *p. A part that cannot
 * be removed adds a line to report->warnings. */
void gr_conv_partial_done(gr_conv_partial *p, gr_imagefolder_report *report);

/* Releases *p after a failure or a stop: what was added is committed (as
 * far as that goes), then OUT.partial stays when it holds committed files,
 * else it is removed. A no-op on a zeroed or released *p. */
void gr_conv_partial_close(gr_conv_partial *p);

/* Adds path (copied) and why (taken) to r->bad. */
void gr_imagefolder_report_bad(gr_imagefolder_report *r, const char *path, char *why);

#endif
