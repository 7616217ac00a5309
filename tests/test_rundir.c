/* test_rundir.c — the run directory's lock and storage errors
 * (runner/rundir.c), and which spec keys make a checkpoint another job's
 * (runner/spec_diff.c). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner/rundir.h"
#include "../runner/spec_diff.h"
#include "gr_test.h"

static char tmp[512];

static void test_lock_two_processes(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/rundir_lock/a/b", tmp);
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pid_t child = fork();
    if (child == 0) { /* the first run: takes the lock and holds it until told */
        gr_rundir_lock l;
        gr_error e;
        char c = gr_rundir_lock_take(&l, dir, &e) == GR_OK ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1) _exit(2);
        if (read(go[0], &c, 1) != 1) _exit(2);
        _exit(0);
    }
    char c = 0;
    CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
    gr_rundir_lock l;
    gr_error e;
    gr_status st = gr_rundir_lock_take(&l, dir, &e);
    CHECK(st == GR_ERR_CKPT);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld,", (long)child);
    CHECK_STR_CONTAINS(e.msg, "locked by another run");
    CHECK_STR_CONTAINS(e.msg, pid);
    CHECK_STR_CONTAINS(e.msg, "host ");
    CHECK_STR_CONTAINS(e.msg, dir);
    /* the holder dies without unlocking (as SIGKILL would): the kernel releases it */
    kill(child, SIGKILL);
    int ws;
    waitpid(child, &ws, 0);
    st = gr_rundir_lock_take(&l, dir, &e);
    CHECK_MSG(st == GR_OK, "%s", e.msg);
    gr_rundir_lock_release(&l, true); /* not made by this process: stays */
    struct stat sb;
    CHECK(stat(dir, &sb) == 0);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
}

static void test_lock_undo(void) {
    char dir[600], lockf[700];
    snprintf(dir, sizeof dir, "%s/rundir_undo", tmp);
    rmdir(dir);
    gr_rundir_lock l;
    gr_error e;
    CHECK(gr_rundir_lock_take(&l, dir, &e) == GR_OK);
    CHECK(l.made_dir);
    snprintf(lockf, sizeof lockf, "%s/" GR_RUNDIR_LOCK, dir);
    struct stat sb;
    CHECK(stat(lockf, &sb) == 0 && sb.st_size > 0);
    gr_rundir_lock_release(&l, true); /* a failed fresh start leaves no directory */
    CHECK(stat(dir, &sb) != 0);
}

static void test_storage_errors(void) {
    gr_error e;
    FILE *f = NULL;
    /* metrics.jsonl as a symlink to /dev/full: refused before anything is read or written */
    char link[600];
    snprintf(link, sizeof link, "%s/rundir_full.jsonl", tmp);
    unlink(link);
    CHECK(symlink("/dev/full", link) == 0);
    CHECK(gr_rundir_open_append(link, &f, &e) == GR_ERR_CKPT && f == NULL);
    CHECK_STR_CONTAINS(e.msg, "not a regular file");
    unlink(link);
    /* ... and as a symlink to a regular file: refused, the file untouched */
    char target[600];
    snprintf(target, sizeof target, "%s/rundir_target.txt", tmp);
    FILE *t = fopen(target, "w");
    CHECK(t != NULL);
    if (t) fclose(t);
    CHECK(symlink(target, link) == 0);
    CHECK(gr_rundir_open_append(link, &f, &e) == GR_ERR_CKPT && f == NULL);
    CHECK_STR_CONTAINS(e.msg, "is a symbolic link; gpurun does not write through one");
    struct stat tsb;
    CHECK(stat(target, &tsb) == 0 && tsb.st_size == 0);
    unlink(link);
    unlink(target);
    /* a write that fails (ENOSPC) is exit 6 naming the file */
    f = fopen("/dev/full", "w");
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "{\"kind\":\"train\"}\n");
        CHECK(gr_rundir_flush(f, "/dev/full", &e) == GR_ERR_CKPT);
        CHECK_STR_CONTAINS(e.msg, "/dev/full: cannot write: No space left on device");
        fclose(f);
    }
    /* summary.json.tmp occupied by a directory: exit 6, the old summary.json stays */
    char dir[600], p[700];
    snprintf(dir, sizeof dir, "%s/rundir_store", tmp);
    mkdir(dir, 0777);
    snprintf(p, sizeof p, "%s/summary.json.tmp", dir);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/summary.json.tmp/x", dir);
    FILE *x = fopen(p, "w");
    if (x) fclose(x);
    CHECK(gr_rundir_write_file(dir, "summary.json", NULL, NULL, &e) == GR_ERR_CKPT);
    CHECK_STR_CONTAINS(e.msg, "summary.json.tmp: cannot write");
}

static const char *base =
    "name: a\nseed: 1\ndevice: auto\nprecision: fp32\n"
    "data:\n  train:\n    path: d.h5\n  workers: 2\n  prefetch: 4\n"
    "model:\n  layers:\n    - flatten\n    - dense:\n        units: 10\n"
    "train:\n  batch_size: 8\n  steps: 100\n  optimizer:\n    type: sgd\n    lr: 0.1\n"
    "checkpoint:\n  every_steps: 10\nlog:\n  every_steps: 5\n";

static int diff_with(const char *from, const char *to, char *out, size_t n) {
    char *job = gr_xstrdup(base);
    char *at = strstr(job, from);
    GR_ASSERT(at != NULL);
    size_t len = strlen(job) + strlen(to) + 1;
    char *edited = gr_xmalloc(len);
    snprintf(edited, len, "%.*s%s%s", (int)(at - job), job, to, at + strlen(from));
    int d = gr_spec_diff(base, edited, out, n);
    free(job);
    free(edited);
    return d;
}

static void test_spec_diff(void) {
    char out[512];
    CHECK(gr_spec_diff(base, base, out, sizeof out) == 0 && out[0] == '\0');
    /* free to change between restarts */
    CHECK(diff_with("workers: 2", "workers: 7", out, sizeof out) == 0);
    CHECK(diff_with("steps: 100", "steps: 500", out, sizeof out) == 0);
    CHECK(diff_with("every_steps: 5", "every_steps: 1", out, sizeof out) == 0);
    CHECK(diff_with("every_steps: 10", "every_steps: 3", out, sizeof out) == 0);
    CHECK(diff_with("device: auto", "device: cpu", out, sizeof out) == 0);
    CHECK(diff_with("name: a", "name: b", out, sizeof out) == 0);
    /* trajectory keys are named with both values */
    CHECK(diff_with("seed: 1", "seed: 2", out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "seed (checkpoint 1, job 2)");
    CHECK(diff_with("lr: 0.1", "lr: 0.2", out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "train.optimizer.lr (checkpoint 0.1, job 0.2)");
    CHECK(diff_with("units: 10", "units: 12", out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "model.layers.1.dense.units");
    CHECK(diff_with("path: d.h5", "path: e.h5", out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "data.train.path");
    CHECK(diff_with("precision: fp32", "precision: bf16", out, sizeof out) == 1);
    /* a key only one side has */
    CHECK(diff_with("    type: sgd\n", "    type: sgd\n    momentum: 0.9\n", out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "train.optimizer.momentum (checkpoint (absent), job 0.9)");
    CHECK(diff_with("    - flatten\n", "    - flatten\n    - relu\n", out, sizeof out) >= 1);
    CHECK(gr_spec_diff("a: [", base, out, sizeof out) == -1);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s", GR_TEST_TMP);
    test_lock_two_processes();
    test_lock_undo();
    test_storage_errors();
    test_spec_diff();
    return gr_test_report();
}
