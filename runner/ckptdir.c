/* ckptdir.c — see ckptdir.h. */
#define _GNU_SOURCE
#include "ckptdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../checkpoints/ckpt.h"

/* path's absolute form in out (cap bytes): false when it cannot be resolved or does not fit. realpath
 * with a buffer would need PATH_MAX bytes (a fortified libc aborts on a smaller one), so it allocates. */
static bool gr_abs_path(const char *path, char *out, size_t cap) {
    char *abs = realpath(path, NULL);
    const bool ok = abs && strlen(abs) < cap;
    if (ok) memcpy(out, abs, strlen(abs) + 1);
    else if (abs) errno = ENAMETOOLONG;
    free(abs);
    if (!ok && cap) out[0] = '\0';
    return ok;
}

/* Whether a and b are one directory (both exist). */
static bool gr_same_dir(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

gr_status gr_ckptdir_lock(gr_job *j, gr_error *err) {
    j->ckpt_lock.fd = -1;
    if (!gr_job_writer(j)) return GR_OK;
    gr_status st = gr_rundir_lock_take(&j->lock, j->run_dir, err);
    if (st || gr_same_dir(j->ckpt_dir, j->run_dir)) return st;
    return gr_rundir_lock_take_as(&j->ckpt_lock, j->ckpt_dir, GR_LOCK_CKPT, err);
}

void gr_ckptdir_release(gr_job *j, bool undo) { gr_rundir_lock_release(&j->ckpt_lock, undo); }

/* "run DIR\n...": the record's first line is this run directory, by its absolute path. */
static bool gr_ckptdir_mine(const char *rec, const char *self) {
    size_t n = strlen(self);
    return self[0] && strncmp(rec, "run ", 4) == 0 && strncmp(rec + 4, self, n) == 0 && rec[4 + n] == '\n';
}

/* The record's run directory, in buf: its first line less "run "; "" when absent or unreadable. */
static void gr_ckptdir_owner(const char *dir, char *rec, size_t cap, char *who, size_t who_n) {
    char path[GR_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" GR_CKPTDIR_OWNER, dir);
    rec[0] = who[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t r = fread(rec, 1, cap - 1, f);
    fclose(f);
    rec[r] = '\0';
    if (strncmp(rec, "run ", 4) != 0) return;
    snprintf(who, who_n, "%.*s", (int)strcspn(rec + 4, "\n"), rec + 4);
}

/* Whether the resumed checkpoint was one of dir's own. */
static bool gr_ckptdir_resumed_here(const gr_job *j, const gr_run_options *opt) {
    if (!j->pre_found) return false;
    if (strcmp(opt->resume, "auto") == 0) return true;
    char parent[sizeof j->pre_path];
    snprintf(parent, sizeof parent, "%s", j->pre_path);
    char *slash = strrchr(parent, '/');
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) slash[1] = '\0';
    else *slash = '\0';
    return gr_same_dir(parent, j->ckpt_dir);
}

gr_status gr_ckptdir_check(gr_job *j, const gr_run_options *opt, gr_error *err) {
    j->ckpt_claim = false;
    /* a run directory holding a run is refused without --resume as such (exit 2, gr_job_open_run_dir) */
    if (!gr_job_writer(j) || (!opt->resume && gr_job_dir_holds_run(j))) return GR_OK;
    char self[GR_PATH_MAX], rec[2 * GR_PATH_MAX], who[GR_PATH_MAX + 8];
    gr_abs_path(j->run_dir, self, sizeof self); /* made by the lock: there */
    gr_ckptdir_owner(j->ckpt_dir, rec, sizeof rec, who, sizeof who);
    const bool mine = gr_ckptdir_mine(rec, self);
    int64_t steps[3];
    const int n = gr_ckpt_committed(j->ckpt_dir, steps, 3);
    j->ckpt_claim = !mine;
    if (n == 0) return GR_OK;
    if (gr_ckptdir_resumed_here(j, opt)) {
        if (who[0] && !mine && !opt->quiet)
            fprintf(stderr, "gpurun: checkpoint.dir %s was written by the run %s; this run (%s) resumed from its "
                    "checkpoint and carries it on (%s/" GR_CKPTDIR_OWNER " now names it)\n", j->ckpt_dir, who, self,
                    j->ckpt_dir);
        return GR_OK;
    }
    if (mine && j->pre_found) return GR_OK; /* its own directory, resumed from a file elsewhere */
    char names[200] = "";
    for (int i = 0, len = 0; i < n && i < 3; i++) {
        char name[64];
        gr_ckpt_filename(steps[i], name, sizeof name);
        len += snprintf(names + len, sizeof names - (size_t)len, "%s%s", i ? ", " : "", name);
    }
    const char *more = n > 3 ? ", ..." : "";
    if (mine)
        return gr_error_set(err, GR_ERR_CKPT, "%s: holds %d committed checkpoint%s (%s%s) of an earlier run of %s: "
                            "resume it (--resume auto), or remove them to start over; nothing was changed",
                            j->ckpt_dir, n, n == 1 ? "" : "s", names, more, j->run_dir);
    char owner[sizeof who + sizeof j->ckpt_dir + 64];
    if (who[0]) snprintf(owner, sizeof owner, "the run %s (%s/" GR_CKPTDIR_OWNER ")", who, j->ckpt_dir);
    else snprintf(owner, sizeof owner, "another run (no %s record: an earlier gpurun wrote them)", GR_CKPTDIR_OWNER);
    return gr_error_set(err, GR_ERR_CKPT, "%s: holds %d committed checkpoint%s (%s%s) of %s; a checkpoint "
                        "directory belongs to one run: set another checkpoint.dir for this one%s%s%s; nothing "
                        "was changed", j->ckpt_dir, n, n == 1 ? "" : "s", names, more, owner,
                        who[0] ? ", or continue that run (--run-dir " : "", who[0] ? who : "",
                        who[0] ? " --resume auto)" : "");
}

typedef struct gr_owner_ctx {
    const char *self;
} gr_owner_ctx;

static void gr_ckptdir_fill(FILE *f, const void *ctx) {
    const gr_owner_ctx *c = ctx;
    char host[256], when[64];
    gr_rundir_host_now(host, sizeof host, when, sizeof when);
    fprintf(f, "run %s\nhost %s, since %s\n", c->self, host, when);
}

gr_status gr_ckptdir_claim(gr_job *j, gr_error *err) {
    if (!gr_job_writer(j) || !j->ckpt_claim) return GR_OK;
    char self[GR_PATH_MAX];
    if (!gr_abs_path(j->run_dir, self, sizeof self))
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot resolve the run directory's path: %s", j->run_dir,
                            strerror(errno));
    gr_owner_ctx c = {self};
    return gr_rundir_write_file(j->ckpt_dir, GR_CKPTDIR_OWNER, gr_ckptdir_fill, &c, err);
}
