/* tmpfile.c — private temporaries created exclusively (see tmpfile.h). */
#include "tmpfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

gr_status gr_tmpfile_create_seeded(gr_tmpfile *t, const char *path, uint64_t seed, gr_status code,
                                   gr_error *err) {
    t->path = t->tmp = NULL;
    t->fd = -1;
    int e = EEXIST;
    for (int k = 0; k < GR_TMPFILE_TRIES && e == EEXIST; k++) {
        char *name = gr_tmpfile_name(path, seed, k);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            t->path = gr_xstrdup(path);
            t->tmp = name;
            t->fd = fd;
            return GR_OK;
        }
        e = errno;
        free(name);
    }
    if (e == EEXIST)
        return gr_error_set(err, code, "%s: cannot create a temporary file next to it: %d names tried, all taken",
                            path, GR_TMPFILE_TRIES);
    return gr_error_set(err, code, "%s: cannot create a temporary file next to it: %s", path, strerror(e));
}

gr_status gr_tmpfile_create(gr_tmpfile *t, const char *path, gr_status code, gr_error *err) {
    return gr_tmpfile_create_seeded(t, path, tmpfile_seed(), code, err);
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
static bool tmpfile_still_ours(const gr_tmpfile *t) {
    struct stat a, b;
    return fstat(t->fd, &a) == 0 && lstat(t->tmp, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

gr_status gr_tmpfile_commit(gr_tmpfile *t, bool sync_dir, gr_status code, gr_error *err) {
    GR_ASSERT(t->tmp && t->fd >= 0);
    gr_status st = GR_OK;
    int e = fsync(t->fd) != 0 ? errno : 0;
    const bool ours = e || tmpfile_still_ours(t);
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
        return st;
    }
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
    }
    free(t->tmp);
    free(t->path);
    t->path = t->tmp = NULL;
    t->fd = -1;
}
