/* rundir.h — the run directory (DESIGN 1.3): one writer at a time, and
 * storage failures that say so.
 *
 * A run holds an exclusive fcntl lock on DIR/.lock for its whole life: the
 * kernel drops it when the process dies (SIGKILL included), and NFS honours
 * it (lockd / NFSv4). The file holds the holder's host, pid and start time,
 * so a second process refuses at once naming them, before it reads or writes
 * anything else in the directory. Every failure to make or write the run
 * directory (read-only, full, permission, something in the way) is exit 6,
 * naming the path and the system's reason. */
#ifndef GR_RUNDIR_H
#define GR_RUNDIR_H

#include <stdbool.h>
#include <stdio.h>

#include "../common/gr_common.h"
#include "../common/lockfile.h"

typedef struct gr_rundir_lock {
    int fd;        /* -1: not held */
    bool made_dir; /* this process created the directory */
    char dir[1024];
} gr_rundir_lock;

/* This host's name and the time now (UTC, 2026-12-02T10:00:00Z), as a
 * lock file or a checkpoint directory's .owner record them ("?" when
 * unknown). */
void gr_rundir_host_now(char *host, size_t host_n, char *when, size_t when_n);

/* mkdir -p PATH; `what` names it in the error ("run directory"). */
gr_status gr_rundir_mkdirs(const char *path, const char *what, gr_status code, gr_error *err);

/* Makes dir if missing and takes its lock; exit 6 when another live process
 * holds it ("locked by another run: host H, pid P, started T"), or when the
 * lock file cannot be made (read-only directory, no locks on this file
 * system). */
gr_status gr_rundir_lock_take(gr_rundir_lock *l, const char *dir, gr_error *err);
/* The same lock on another kind of directory: a checkpoint directory
 * (ckptdir.h) is locked as a run directory is, its messages naming it. */
typedef enum gr_lock_kind { GR_LOCK_RUN, GR_LOCK_CKPT } gr_lock_kind;
gr_status gr_rundir_lock_take_as(gr_rundir_lock *l, const char *dir, gr_lock_kind kind, gr_error *err);


/* For a stop during set-up (signals.c), before anything but the locks was
 * written: removes the lock files and directories this process made to
 * lock and still holds, newest first (a checkpoint directory inside the run
 * directory before it). Async-signal-safe: unlink and rmdir only. */
void gr_rundir_undo_made(void);

/* Releases the lock. With `undo`, a directory this process made and left
 * holding nothing but the lock file is removed again (a run that failed
 * before writing anything leaves no trace). */
void gr_rundir_lock_release(gr_rundir_lock *l, bool undo);

/* A metrics sink of the run directory (metrics.jsonl): must be a regular
 * file when it exists (a symlink to /dev/full, a FIFO: exit 6), and not a
 * symbolic link to one (exit 6: nothing is written through it), opened for
 * append. */
gr_status gr_rundir_open_append(const char *path, FILE **out, gr_error *err);

/* The outcome of writes to f since it was opened: exit 6 naming path and
 * the error (ENOSPC, EIO...) when a write or the flush failed. */
gr_status gr_rundir_flush(FILE *f, const char *path, gr_error *err);

/* Writes dir/name through name.tmp and a rename, with `write` filling the
 * file; exit 6 naming the path on any failure (the old file stays). */
gr_status gr_rundir_write_file(const char *dir, const char *name, void (*fill)(FILE *f, const void *ctx),
                               const void *ctx, gr_error *err);

#endif
