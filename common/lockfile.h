/* lockfile.h — a run directory's lock file (DESIGN 1.3), as every room
 * reads it: the training runs that take it (runner/rundir.c) and the
 * offline tools that only ask whether a run is live (tools/summarize).
 *
 * The lock is a POSIX record lock (fcntl F_SETLK, so NFS with its lock
 * service too) on <dir>/.lock, whose text names the holder: "host h, pid p,
 * started t". */
#ifndef GR_LOCKFILE_H
#define GR_LOCKFILE_H

#include <stdbool.h>
#include <stddef.h>

#define GR_RUNDIR_LOCK ".lock"

/* Whether a live process holds dir's lock (F_GETLK: the directory is not
 * written), and then its holder text in holder (NULL: not wanted). */
bool gr_lockfile_held(const char *dir, char *holder, size_t n);
/* The holder text of the lock file open as fd: its first line, else the
 * kernel's idea of the holder's pid (which NFS may not know). */
void gr_lockfile_holder(int fd, char *buf, size_t n);

#endif
