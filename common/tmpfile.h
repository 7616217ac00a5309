/* tmpfile.h — the private temporary through which a file is written whole:
 * created exclusively next to the file, written, synced, renamed over it.
 * Checkpoints, weights, LATEST, TensorBoard rewrites and the outputs of
 * `gpurun data` and `gpurun plot` are written this way.
 *
 * The temporary of PATH is PATH.<pid>.<12 hex digits>.tmp, created with
 * O_CREAT | O_EXCL | O_NOFOLLOW (mode 0666 less the umask). A name that is
 * taken (another writer's temporary, a leftover, or a symlink planted there)
 * is never opened: the next name of the sequence is tried, up to
 * GR_TMPFILE_TRIES. So a symlink in a shared output directory cannot
 * redirect a write, and two processes writing the same PATH never share a
 * temporary: each renames a complete file of its own, the last one stays.
 * The name ends in `.tmp`, as the fixed `PATH.tmp` of earlier versions did:
 * whatever recognises an unfinished write by that suffix still does.
 *
 * Exports:
 *   gr_tmpfile               one write's temporary (path, tmp, fd)
 *   gr_tmpfile_create        creates it; _seeded: from a given seed (tests)
 *   gr_tmpfile_name          the k-th name of a seed's sequence
 *   gr_tmpfile_reopen_path   a name that opens this very file (for HDF5)
 *   gr_tmpfile_fdopen        a stdio stream on it, with its own descriptor
 *   gr_tmpfile_commit        fsync, rename over PATH, fsync the directory
 *   gr_tmpfile_abort         closes and removes it; idempotent */
#ifndef GR_TMPFILE_H
#define GR_TMPFILE_H

#include <stdio.h>

#include "gr_common.h"

#define GR_TMPFILE_TRIES 100

typedef struct gr_tmpfile {
    char *path; /* the file written: PATH */
    char *tmp;  /* its temporary, created by this process; NULL when none is held */
    int fd;     /* the temporary, open for writing; -1 when closed */
} gr_tmpfile;

/* Creates the temporary of path. Errors (status `code`, *t then holds
 * nothing): "PATH: cannot create a temporary file next to it: REASON". */
gr_status gr_tmpfile_create(gr_tmpfile *t, const char *path, gr_status code, gr_error *err);
gr_status gr_tmpfile_create_seeded(gr_tmpfile *t, const char *path, uint64_t seed, gr_status code,
                                   gr_error *err);

/* The k-th (0 <= k < GR_TMPFILE_TRIES) name gr_tmpfile_create_seeded tries
 * for path and seed, in this process; allocated. */
char *gr_tmpfile_name(const char *path, uint64_t seed, int k);

/* A name under which a library that opens by name (HDF5's H5Fcreate with
 * H5F_ACC_TRUNC) reaches the very file t holds, whatever happened to its
 * directory entry since: /proc/self/fd/N (in buf), else t->tmp. */
const char *gr_tmpfile_reopen_path(const gr_tmpfile *t, char *buf, size_t cap);

/* A stream writing the temporary (mode "w" or "wb": no truncation), on a
 * duplicate of t->fd: fclose it, checking the result, before the commit.
 * NULL with errno set on failure. */
FILE *gr_tmpfile_fdopen(const gr_tmpfile *t, const char *mode);

/* The written (and closed, by whoever wrote it) temporary becomes path:
 * fsync, rename, and with sync_dir an fsync of path's directory. Releases
 * *t whatever happens; on a failure before the rename the temporary is
 * removed. Errors (status `code`): "TMP: cannot sync: REASON", "TMP: removed
 * or replaced while being written; not renamed to PATH" (its directory entry
 * is no longer the file created), "TMP: cannot rename to PATH: REASON",
 * "DIR: cannot sync: REASON". */
gr_status gr_tmpfile_commit(gr_tmpfile *t, bool sync_dir, gr_status code, gr_error *err);

/* Closes and removes the temporary, releases *t. A no-op on a *t that holds
 * nothing (after a commit, a failed create, or zeroed). */
void gr_tmpfile_abort(gr_tmpfile *t);

#endif
