/* rundir.c — see rundir.h. */
#define _GNU_SOURCE
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

gr_status gr_rundir_mkdirs(const char *path, const char *what, gr_status code, gr_error *err) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            struct stat sb;
            if (mkdir(buf, 0777) != 0 && (errno != EEXIST || (stat(buf, &sb) == 0 && !S_ISDIR(sb.st_mode))))
                return gr_error_set(err, code, "%s: cannot create the %s %s: %s", buf, what, path,
                                    errno == EEXIST ? "a file is in the way" : strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    return GR_OK;
}

/* The directories this process made to lock, newest last, for
 * gr_rundir_undo_made (a signal handler's: it reads a slot's paths only
 * while the slot is set, and they are written only while it is not). */
#define GR_MADE_MAX 4
static struct {
    atomic_bool set;
    char lock[1100], dir[1024];
} gr_made[GR_MADE_MAX];

static void gr_made_note(const gr_rundir_lock *l, const char *lock) {
    for (int i = 0; i < GR_MADE_MAX; i++)
        if (!atomic_load(&gr_made[i].set)) {
            snprintf(gr_made[i].lock, sizeof gr_made[i].lock, "%s", lock);
            snprintf(gr_made[i].dir, sizeof gr_made[i].dir, "%s", l->dir);
            atomic_store(&gr_made[i].set, true);
            return;
        }
}

static void gr_made_forget(const gr_rundir_lock *l) {
    for (int i = GR_MADE_MAX - 1; i >= 0; i--)
        if (atomic_load(&gr_made[i].set) && strcmp(gr_made[i].dir, l->dir) == 0) {
            atomic_store(&gr_made[i].set, false);
            return;
        }
}

void gr_rundir_undo_made(void) {
    for (int i = GR_MADE_MAX - 1; i >= 0; i--)
        if (atomic_load(&gr_made[i].set)) {
            unlink(gr_made[i].lock);
            rmdir(gr_made[i].dir); /* fails, harmlessly, if anything else is there */
        }
}

void gr_rundir_host_now(char *host, size_t host_n, char *when, size_t when_n) {
    snprintf(host, host_n, "?");
    snprintf(when, when_n, "?");
    gethostname(host, host_n - 1);
    host[host_n - 1] = '\0';
    time_t now = time(NULL);
    struct tm tmv;
    if (gmtime_r(&now, &tmv)) strftime(when, when_n, "%Y-%m-%dT%H:%M:%SZ", &tmv);
}

/* What a lock covers, as its messages name it. */
static const struct {
    const char *what, *other; /* the directory; what to pass instead of waiting */
} gr_lock_kinds[] = {
    [GR_LOCK_RUN] = {"run directory", "pass another --run-dir"},
    [GR_LOCK_CKPT] = {"checkpoint directory", "set another checkpoint.dir"},
};

gr_status gr_rundir_lock_take(gr_rundir_lock *l, const char *dir, gr_error *err) {
    return gr_rundir_lock_take_as(l, dir, GR_LOCK_RUN, err);
}

gr_status gr_rundir_lock_take_as(gr_rundir_lock *l, const char *dir, gr_lock_kind kind, gr_error *err) {
    const char *what = gr_lock_kinds[kind].what;
    l->fd = -1;
    snprintf(l->dir, sizeof l->dir, "%s", dir);
    struct stat sb;
    l->made_dir = stat(dir, &sb) != 0;
    gr_status st = gr_rundir_mkdirs(dir, what, GR_ERR_CKPT, err);
    if (st) return st;
    char path[1100];
    snprintf(path, sizeof path, "%s/" GR_RUNDIR_LOCK, dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    if (fd < 0)
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot make the %s's lock file: %s (the %s must be writable)",
                            path, what, strerror(errno), what);
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: the %s's lock is not a regular file; remove it", path, what);
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        char who[600];
        if (e == EACCES || e == EAGAIN) {
            gr_lockfile_holder(fd, who, sizeof who);
            close(fd);
            return gr_error_set(err, GR_ERR_CKPT, "%s: locked by another run (%s); one process writes a %s at a "
                                "time: wait for it or stop it, or %s; nothing was changed", dir, who, what,
                                gr_lock_kinds[kind].other);
        }
        close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot lock the %s: %s (on NFS, the lock service must run)",
                            path, what, strerror(e));
    }
    char host[256], when[64], text[600];
    gr_rundir_host_now(host, sizeof host, when, sizeof when);
    int len = snprintf(text, sizeof text, "host %s, pid %ld, started %s\n", host, (long)getpid(), when);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
        int e = errno;
        close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot write the %s's lock file: %s", path, what, strerror(e));
    }
    l->fd = fd;
    if (l->made_dir) gr_made_note(l, path);
    return GR_OK;
}

void gr_rundir_lock_release(gr_rundir_lock *l, bool undo) {
    if (l->fd < 0) return;
    gr_made_forget(l);
    if (undo && l->made_dir) {
        char path[1100];
        snprintf(path, sizeof path, "%s/" GR_RUNDIR_LOCK, l->dir);
        unlink(path);
        rmdir(l->dir); /* fails, harmlessly, if anything else is there */
    }
    close(l->fd);
    l->fd = -1;
}

gr_status gr_rundir_open_append(const char *path, FILE **out, gr_error *err) {
    *out = NULL;
    gr_status st = gr_check_regular(path, "a run directory's file", GR_ERR_CKPT, err);
    if (st) return st;
    /* never through a symbolic link (a planted metrics.jsonl -> ~/.profile would be appended to) */
    const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == ELOOP)
        return gr_error_set(err, GR_ERR_CKPT, "%s: a run directory's file is a symbolic link; gpurun does not "
                            "write through one (remove it)", path);
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        const int e = errno;
        if (fd >= 0) close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot write: %s", path, strerror(e));
    }
    *out = f;
    return GR_OK;
}

gr_status gr_rundir_flush(FILE *f, const char *path, gr_error *err) {
    errno = 0;
    if (fflush(f) != 0 || ferror(f)) {
        int e = errno ? errno : EIO;
        clearerr(f);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot write: %s", path, strerror(e));
    }
    return GR_OK;
}

gr_status gr_rundir_write_file(const char *dir, const char *name, void (*fill)(FILE *f, const void *ctx),
                               const void *ctx, gr_error *err) {
    char path[1100], tmp[1120];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp); /* a leftover (or a symlink planted there) is replaced, never followed */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot write: %s", tmp, strerror(e));
    }
    fill(f, ctx);
    errno = 0;
    bool bad = fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0;
    int e = errno ? errno : EIO;
    if (fclose(f) != 0 && !bad) bad = true, e = errno;
    if (!bad && rename(tmp, path) != 0) bad = true, e = errno;
    if (bad) {
        unlink(tmp);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot write: %s", path, strerror(e));
    }
    return GR_OK;
}
