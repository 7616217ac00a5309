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
 * Leftovers. Every temporary this process holds is noted in a fixed table
 * (GR_TMPFILE_HELD_MAX slots, from create to commit or abort), and
 * gr_tmpfile_remove_held, async-signal-safe, unlinks them all: the stop
 * handler of `gpurun data` calls it before _exit(75). A writer killed
 * outright (SIGKILL, a crash, a power cut) still leaves its temporary; the
 * writers that sweep (the `data` converters and `plot`) create theirs with
 * gr_tmpfile_create_locked, which holds an open-file-description write lock
 * (F_OFD_SETLK) on it for its life. Such a lock belongs to the descriptor
 * created, not to the process: HDF5 opening and closing the file by another
 * descriptor (gr_tmpfile_reopen_path) does not drop it, as it would a classic
 * fcntl lock. gr_tmpfile_sweep(PATH), called before writing PATH, removes
 * PATH's stale temporaries: names `<basename of PATH>.<digits>.<12 lowercase
 * hex>.tmp` in PATH's directory that are regular files (symlinks are never
 * followed or removed), written by no live process of this host (the pid in
 * the name) and locked by no one: it takes a read lock itself and unlinks
 * holding it, and a writer whose lock fails, or whose name is gone once
 * locked, takes the next name, so a live writer's temporary is never
 * removed. A file system without locks makes the sweep remove nothing.
 * Checkpoints, weights and TensorBoard rewrites do not sweep (a committed
 * checkpoint clears its own leftovers; their HDF5 writes keep HDF5's own
 * file locking, which on NFS would conflict with an OFD lock).
 *
 * Exports:
 *   gr_tmpfile               one write's temporary (path, tmp, fd)
 *   gr_tmpfile_create        creates it; _seeded: from a given seed (tests);
 *                            _locked: holding its OFD write lock
 *   gr_tmpfile_sweep         removes PATH's stale temporaries, saying so
 *   gr_tmpfile_remove_held   unlinks every temporary held (signal handlers)
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
#define GR_TMPFILE_HELD_MAX 16    /* temporaries gr_tmpfile_remove_held knows of */
#define GR_TMPFILE_NAME_MAX 1100  /* the longest name it knows of, NUL included */

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

/* gr_tmpfile_create, also holding an open-file-description write lock on
 * the temporary until commit or abort (see Leftovers above). */
gr_status gr_tmpfile_create_locked(gr_tmpfile *t, const char *path, gr_status code, gr_error *err);

/* Removes path's stale temporaries (see Leftovers above), each said on say
 * (when not NULL) in one line: "gpurun: removed a stale temporary TMP left by
 * an interrupted write". Returns how many were removed. */
int gr_tmpfile_sweep(const char *path, FILE *say);

/* Unlinks every temporary this process holds (created, not yet committed or
 * aborted); the count unlinked. Async-signal-safe: atomics and unlink only.
 * The writers' gr_tmpfile values are left as they are: for a handler that
 * then calls _exit. */
int gr_tmpfile_remove_held(void);

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
