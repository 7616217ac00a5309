/* tmpfile.c — private temporaries created exclusively (see tmpfile.h). */
#define _GNU_SOURCE /* F_OFD_SETLK, F_OFD_GETLK */
#include "tmpfile.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The temporaries this process holds, for gr_tmpfile_remove_held (which may
 * run in a signal handler: it reads a slot's name only while the slot is
 * HELD, and a name is written only while its slot is CLAIMED). */
enum { TMPFILE_FREE, TMPFILE_CLAIMED, TMPFILE_HELD };
static struct {
    atomic_int state;
    char name[GR_TMPFILE_NAME_MAX];
} tmpfile_held[GR_TMPFILE_HELD_MAX];

/* Notes name as held; a name too long, or every slot taken, goes unnoted. */
static void tmpfile_note(const char *name) {
    const size_t len = strlen(name);
    if (len >= GR_TMPFILE_NAME_MAX) return;
    for (int i = 0; i < GR_TMPFILE_HELD_MAX; i++) {
        int want = TMPFILE_FREE;
        if (!atomic_compare_exchange_strong(&tmpfile_held[i].state, &want, TMPFILE_CLAIMED)) continue;
        memcpy(tmpfile_held[i].name, name, len + 1);
        atomic_store(&tmpfile_held[i].state, TMPFILE_HELD);
        return;
    }
}

static void tmpfile_forget(const char *name) {
    for (int i = 0; i < GR_TMPFILE_HELD_MAX; i++)
        if (atomic_load(&tmpfile_held[i].state) == TMPFILE_HELD && strcmp(tmpfile_held[i].name, name) == 0) {
            atomic_store(&tmpfile_held[i].state, TMPFILE_FREE);
            return;
        }
}

int gr_tmpfile_remove_held(void) {
    int removed = 0;
    for (int i = 0; i < GR_TMPFILE_HELD_MAX; i++)
        if (atomic_load(&tmpfile_held[i].state) == TMPFILE_HELD && unlink(tmpfile_held[i].name) == 0) removed++;
    return removed;
}

/* A seed no other process can guess: the kernel's random bytes, else the
 * clock, the pid and a stack address mixed. */
static uint64_t tmpfile_seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) == (ssize_t)sizeof s) return s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t key = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)&s;
    return gr_hash64(key, (uint64_t)getpid());
}

char *gr_tmpfile_name(const char *path, uint64_t seed, int k) {
    const unsigned long long r = gr_hash64(seed, (uint64_t)k) & 0xffffffffffffULL;
    const size_t n = strlen(path) + 48;
    char *name = gr_xmalloc(n);
    snprintf(name, n, "%s.%ld.%012llx.tmp", path, (long)getpid(), r);
    return name;
}

/* An open-file-description lock of `type` on the whole of fd's file, not
 * waiting: 0, or the errno (EAGAIN/EACCES: another description holds a
 * conflicting one). */
static int tmpfile_lock(int fd, short type) {
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : errno;
}

/* Whether name (lstat: not followed) is the file fd holds. */
static bool tmpfile_same(int fd, int dirfd, const char *name) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Creates the k-th name; with lock, holds its write lock. -1 with errno
 * EEXIST also when a sweeper (gr_tmpfile_sweep) got the new file first: the
 * next name is then tried. */
static int tmpfile_open(const char *name, bool lock) {
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 || !lock) return fd;
    const int e = tmpfile_lock(fd, F_WRLCK);
    /* EAGAIN/EACCES: a sweeper holds it and removes it; no lock and no
     * sweeper (a file system without locks: sweepers cannot lock it either)
     * is fine; gone or replaced: a sweeper removed it before the lock */
    if (e == EAGAIN || e == EACCES || !tmpfile_same(fd, AT_FDCWD, name)) {
        close(fd);
        errno = EEXIST;
        return -1;
    }
    return fd;
}

static gr_status tmpfile_create(gr_tmpfile *t, const char *path, uint64_t seed, bool lock, gr_status code,
                                gr_error *err) {
    t->path = t->tmp = NULL;
    t->fd = -1;
    int e = EEXIST;
    for (int k = 0; k < GR_TMPFILE_TRIES && e == EEXIST; k++) {
        char *name = gr_tmpfile_name(path, seed, k);
        int fd = tmpfile_open(name, lock);
        if (fd >= 0) {
            t->path = gr_xstrdup(path);
            t->tmp = name;
            t->fd = fd;
            tmpfile_note(name);
            return GR_OK;
        }
        e = errno;
        free(name);
    }
    if (e == EEXIST)
        return gr_error_set(err, code, "%s: cannot create a temporary file next to it: %d names tried, all taken",
                            path, GR_TMPFILE_TRIES);
    if (e == ENOENT) { /* the usual mistake: a folder that is not there yet */
        const char *slash = strrchr(path, '/');
        const int n = !slash ? 1 : slash == path ? 1 : (int)(slash - path);
        return gr_error_set(err, code, "%s: cannot create a temporary file next to it: %s (the directory %.*s "
                            "does not exist: create it first)", path, strerror(e), n, !slash ? "." : path);
    }
    return gr_error_set(err, code, "%s: cannot create a temporary file next to it: %s", path, strerror(e));
}

gr_status gr_tmpfile_create_seeded(gr_tmpfile *t, const char *path, uint64_t seed, gr_status code,
                                   gr_error *err) {
    return tmpfile_create(t, path, seed, false, code, err);
}

gr_status gr_tmpfile_create(gr_tmpfile *t, const char *path, gr_status code, gr_error *err) {
    return tmpfile_create(t, path, tmpfile_seed(), false, code, err);
}

gr_status gr_tmpfile_create_locked(gr_tmpfile *t, const char *path, gr_status code, gr_error *err) {
    return tmpfile_create(t, path, tmpfile_seed(), true, code, err);
}

/* Whether name is `base.<digits>.<12 lowercase hex>.tmp`; the pid in *pid. */
static bool tmpfile_match(const char *name, const char *base, long *pid) {
    const size_t b = strlen(base);
    if (strncmp(name, base, b) != 0 || name[b] != '.') return false;
    const char *p = name + b + 1, *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (q == p || q - p > 18 || *q != '.') return false;
    *pid = strtol(p, NULL, 10);
    for (int i = 1; i <= 12; i++)
        if (!isdigit((unsigned char)q[i]) && !(q[i] >= 'a' && q[i] <= 'f')) return false;
    return strcmp(q + 13, ".tmp") == 0;
}

/* Removes dir/name when it is a stale temporary: a regular file (not
 * followed), no lock on it (taking a read lock ourselves, held through the
 * unlink, so a writer cannot lock it meanwhile), written by no live process
 * of this host. */
static bool tmpfile_sweep_one(int dirfd, const char *name, long pid) {
    if (pid > 0 && (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno == EPERM)) return false;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat sb;
    bool gone = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && tmpfile_lock(fd, F_RDLCK) == 0 &&
                tmpfile_same(fd, dirfd, name) && unlinkat(dirfd, name, 0) == 0;
    close(fd);
    return gone;
}

int gr_tmpfile_sweep(const char *path, FILE *say) {
    char *dcopy = gr_xstrdup(path), *bcopy = gr_xstrdup(path);
    const char *dir = dirname(dcopy), *base = basename(bcopy);
    DIR *d = opendir(dir);
    int removed = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        long pid = 0;
        if (!tmpfile_match(e->d_name, base, &pid) || !tmpfile_sweep_one(dirfd(d), e->d_name, pid)) continue;
        removed++;
        const bool here = strcmp(dir, ".") == 0, slash = dir[strlen(dir) - 1] == '/';
        if (say)
            fprintf(say, "gpurun: removed a stale temporary %s%s%s left by an interrupted write\n", here ? "" : dir,
                    here || slash ? "" : "/", e->d_name);
    }
    if (d) closedir(d);
    free(dcopy);
    free(bcopy);
    return removed;
}

const char *gr_tmpfile_reopen_path(const gr_tmpfile *t, char *buf, size_t cap) {
    struct stat a, b;
    if (!t->tmp || t->fd < 0 || snprintf(buf, cap, "/proc/self/fd/%d", t->fd) >= (int)cap) return t->tmp;
    if (stat(buf, &a) == 0 && fstat(t->fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return buf;
    return t->tmp;
}

FILE *gr_tmpfile_fdopen(const gr_tmpfile *t, const char *mode) {
    if (!t->tmp || t->fd < 0) {
        errno = EBADF;
        return NULL;
    }
    int fd = fcntl(t->fd, F_DUPFD_CLOEXEC, 0);
    FILE *f = fd >= 0 ? fdopen(fd, mode) : NULL;
    if (!f && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

static gr_status tmpfile_sync_dir(const char *path, gr_status code, gr_error *err) {
    char *copy = gr_xstrdup(path);
    const char *dir = dirname(copy);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    gr_status st = GR_OK;
    if (fd < 0 || fsync(fd) != 0) st = gr_error_set(err, code, "%s: cannot sync: %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    free(copy);
    return st;
}

/* Whether t->tmp is still the file t->fd holds (not removed or replaced
 * since it was created: a rename would then move someone else's entry). */
static bool tmpfile_still_ours(const gr_tmpfile *t) { return tmpfile_same(t->fd, AT_FDCWD, t->tmp); }

gr_status gr_tmpfile_commit(gr_tmpfile *t, bool sync_dir, gr_status code, gr_error *err) {
    GR_ASSERT(t->tmp && t->fd >= 0);
    gr_status st = GR_OK;
    int e = fsync(t->fd) != 0 ? errno : 0;
    const bool ours = e || tmpfile_still_ours(t);
    /* the lock (gr_tmpfile_create_locked) stays until the rename is done:
     * it belongs to the open file description, which `hold` keeps open */
    const int hold = fcntl(t->fd, F_DUPFD_CLOEXEC, 0);
    if (close(t->fd) != 0 && !e) e = errno;
    t->fd = -1; /* closed either way */
    if (e) st = gr_error_set(err, code, "%s: cannot sync: %s", t->tmp, strerror(e));
    else if (!ours)
        st = gr_error_set(err, code, "%s: removed or replaced while being written; not renamed to %s", t->tmp,
                          t->path);
    else if (rename(t->tmp, t->path) != 0)
        st = gr_error_set(err, code, "%s: cannot rename to %s: %s", t->tmp, t->path, strerror(errno));
    if (st != GR_OK) {
        gr_tmpfile_abort(t);
        if (hold >= 0) close(hold);
        return st;
    }
    if (hold >= 0) close(hold);
    tmpfile_forget(t->tmp);
    free(t->tmp);
    t->tmp = NULL; /* renamed: nothing to remove */
    if (sync_dir) st = tmpfile_sync_dir(t->path, code, err);
    gr_tmpfile_abort(t);
    return st;
}

void gr_tmpfile_abort(gr_tmpfile *t) {
    if (t->tmp) {
        if (t->fd >= 0) close(t->fd);
        unlink(t->tmp);
        tmpfile_forget(t->tmp);
    }
    free(t->tmp);
    free(t->path);
    t->path = t->tmp = NULL;
    t->fd = -1;
}
