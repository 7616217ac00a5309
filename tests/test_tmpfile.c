/* test_tmpfile.c — common/tmpfile.h, the private temporaries every writer
 * uses (issue 23 items 3 and 12): a symlink planted at the old fixed name
 * OUT.tmp, or at any name the sequence tries, is never followed (its target
 * keeps its bytes, OUT ends a regular file); two writers of one OUT, in one
 * process or two, hold different temporaries and OUT ends as one of them,
 * whole; every failure removes the temporary; HDF5 reaches the file created
 * even when its name was swapped for a symlink meanwhile. Leftovers (issue
 * 30 item 5): the OFD lock of gr_tmpfile_create_locked outlives HDF5's
 * reopen and close (a classic fcntl lock does not); gr_tmpfile_sweep removes
 * only unlocked regular temporaries of dead writers with exactly matching
 * names, a SIGKILLed child's among them; gr_tmpfile_remove_held unlinks what
 * is held, nothing committed. */
#define _GNU_SOURCE /* F_OFD_GETLK, F_OFD_SETLK, fmemopen */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tmpfile.h"
#include "gr_test.h"

static const char victim_bytes[] = "the victim: a file the writer must never touch\n";

/* GR_TEST_TMP/tmpfile_NAME, a fresh empty directory. */
static const char *fresh_dir(const char *name) {
    static char slots[16][512];
    static int used;
    GR_ASSERT(used < 16);
    char *d = slots[used++];
    snprintf(d, sizeof slots[0], "%s/tmpfile_%s", GR_TEST_TMP, name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    GR_ASSERT(system(cmd) == 0);
    GR_ASSERT(mkdir(d, 0777) == 0);
    return d;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    GR_ASSERT(f);
    fputs(text, f);
    fclose(f);
}

/* The whole content of path ("" when unreadable), in a static buffer. */
static const char *slurp(const char *path) {
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

static bool is_regular(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool is_symlink_to(const char *path, const char *target) {
    char buf[600];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    if (n < 0) return false;
    buf[n] = '\0';
    return strcmp(buf, target) == 0;
}

/* Entries of dir, "." and ".." aside. */
static int entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

/* Writes text through t and commits; the status. */
static gr_status write_commit(gr_tmpfile *t, const char *text, gr_error *err) {
    FILE *f = gr_tmpfile_fdopen(t, "w");
    GR_ASSERT(f);
    fputs(text, f);
    GR_ASSERT(fclose(f) == 0);
    return gr_tmpfile_commit(t, true, GR_ERR_CKPT, err);
}

static void test_basic(void) {
    const char *d = fresh_dir("basic");
    char out[600], prefix[700];
    snprintf(out, sizeof out, "%s/out.txt", d);
    snprintf(prefix, sizeof prefix, "%s.%ld.", out, (long)getpid());
    gr_tmpfile t;
    gr_error err = {0};
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_CKPT, &err) == GR_OK);
    CHECK_MSG(strncmp(t.tmp, prefix, strlen(prefix)) == 0, "%s", t.tmp);
    CHECK(strlen(t.tmp) > 4 && strcmp(t.tmp + strlen(t.tmp) - 4, ".tmp") == 0);
    CHECK(is_regular(t.tmp) && !is_regular(out));
    CHECK(write_commit(&t, "hello\n", &err) == GR_OK);
    CHECK(t.tmp == NULL && t.path == NULL && t.fd == -1);
    CHECK(is_regular(out) && strcmp(slurp(out), "hello\n") == 0);
    CHECK_MSG(entries(d) == 1, "%d entries: the temporary left behind", entries(d));
    gr_tmpfile_abort(&t); /* after a commit: nothing */
    CHECK(is_regular(out));
    /* an existing OUT is replaced whole */
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_CKPT, &err) == GR_OK);
    CHECK(write_commit(&t, "again\n", &err) == GR_OK);
    CHECK(strcmp(slurp(out), "again\n") == 0 && entries(d) == 1);
}

/* A symlink at OUT.tmp (the old fixed name) to a victim file: not followed. */
static void test_old_name_symlink(void) {
    const char *d = fresh_dir("oldname");
    char out[600], link[700], victim[600];
    snprintf(out, sizeof out, "%s/out.h5", d);
    snprintf(link, sizeof link, "%s.tmp", out);
    snprintf(victim, sizeof victim, "%s/victim", d);
    put(victim, victim_bytes);
    CHECK(symlink(victim, link) == 0);
    gr_tmpfile t;
    gr_error err = {0};
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_CKPT, &err) == GR_OK);
    CHECK(strcmp(t.tmp, link) != 0);
    CHECK(write_commit(&t, "payload\n", &err) == GR_OK);
    CHECK_MSG(strcmp(slurp(victim), victim_bytes) == 0, "the victim now holds '%s'", slurp(victim));
    CHECK(is_regular(out) && strcmp(slurp(out), "payload\n") == 0);
    CHECK(is_symlink_to(link, victim));
}

/* Symlinks at the first names of the sequence, and another writer's file at
 * the next: each is skipped, none opened. */
static void test_predictable_names(void) {
    const char *d = fresh_dir("predict");
    char out[600], victim[600];
    snprintf(out, sizeof out, "%s/out.png", d);
    snprintf(victim, sizeof victim, "%s/victim", d);
    put(victim, victim_bytes);
    const uint64_t seed = 0x1234;
    char *names[5];
    for (int k = 0; k < 5; k++) names[k] = gr_tmpfile_name(out, seed, k);
    for (int k = 0; k < 4; k++) CHECK(strcmp(names[k], names[k + 1]) != 0);
    for (int k = 0; k < 3; k++) CHECK(symlink(victim, names[k]) == 0);
    put(names[3], "another writer's temporary");
    gr_tmpfile t;
    gr_error err = {0};
    CHECK(gr_tmpfile_create_seeded(&t, out, seed, GR_ERR_DATA, &err) == GR_OK);
    CHECK_MSG(t.tmp && strcmp(t.tmp, names[4]) == 0, "took %s", t.tmp ? t.tmp : "(none)");
    CHECK(write_commit(&t, "mine\n", &err) == GR_OK);
    CHECK(strcmp(slurp(victim), victim_bytes) == 0);
    for (int k = 0; k < 3; k++) CHECK(is_symlink_to(names[k], victim));
    CHECK(strcmp(slurp(names[3]), "another writer's temporary") == 0);
    CHECK(is_regular(out) && strcmp(slurp(out), "mine\n") == 0);
    for (int k = 0; k < 5; k++) free(names[k]);
}

/* Every name taken: a failure naming OUT, nothing opened or left. */
static void test_all_taken(void) {
    const char *d = fresh_dir("taken");
    char out[600], victim[600];
    snprintf(out, sizeof out, "%s/out", d);
    snprintf(victim, sizeof victim, "%s/victim", d);
    put(victim, victim_bytes);
    for (int k = 0; k < GR_TMPFILE_TRIES; k++) {
        char *n = gr_tmpfile_name(out, 99, k);
        CHECK(symlink(victim, n) == 0);
        free(n);
    }
    gr_tmpfile t;
    gr_error err = {0};
    CHECK(gr_tmpfile_create_seeded(&t, out, 99, GR_ERR_DATA, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "out: cannot create a temporary file next to it: 100 names tried, all taken");
    CHECK(t.tmp == NULL && t.path == NULL && t.fd == -1);
    CHECK(strcmp(slurp(victim), victim_bytes) == 0);
    CHECK(entries(d) == GR_TMPFILE_TRIES + 1);
}

/* Two writers of one OUT at once: in this process, then in two processes
 * (a fork) that both hold theirs before either commits. */
static void test_concurrent(void) {
    const char *d = fresh_dir("concurrent");
    char out[600];
    snprintf(out, sizeof out, "%s/out", d);
    gr_tmpfile a, b;
    gr_error err = {0};
    CHECK(gr_tmpfile_create(&a, out, GR_ERR_CKPT, &err) == GR_OK);
    CHECK(gr_tmpfile_create(&b, out, GR_ERR_CKPT, &err) == GR_OK);
    CHECK(strcmp(a.tmp, b.tmp) != 0);
    char big_a[20000], big_b[20000];
    memset(big_a, 'a', sizeof big_a - 1), big_a[sizeof big_a - 1] = '\0';
    memset(big_b, 'b', sizeof big_b - 1), big_b[sizeof big_b - 1] = '\0';
    CHECK(write_commit(&b, big_b, &err) == GR_OK);
    CHECK(write_commit(&a, big_a, &err) == GR_OK);
    CHECK(strcmp(slurp(out), big_a) == 0 && entries(d) == 1);

    int to_child[2], to_parent[2];
    GR_ASSERT(pipe(to_child) == 0 && pipe(to_parent) == 0);
    fflush(NULL);
    pid_t pid = fork();
    GR_ASSERT(pid >= 0);
    char name[700] = "";
    if (pid == 0) {
        gr_tmpfile c;
        gr_error ce;
        int ok = gr_tmpfile_create(&c, out, GR_ERR_CKPT, &ce) == GR_OK;
        snprintf(name, sizeof name, "%s", ok ? c.tmp : "");
        ok = ok && write(to_parent[1], name, sizeof name) == (ssize_t)sizeof name;
        char go;
        ok = ok && read(to_child[0], &go, 1) == 1; /* the parent holds its temporary too */
        ok = ok && write_commit(&c, big_b, &ce) == GR_OK;
        _exit(ok ? 0 : 1);
    }
    CHECK(gr_tmpfile_create(&a, out, GR_ERR_CKPT, &err) == GR_OK);
    CHECK(read(to_parent[0], name, sizeof name) == (ssize_t)sizeof name);
    CHECK_MSG(name[0] && strcmp(name, a.tmp) != 0, "child %s, parent %s", name, a.tmp);
    FILE *f = gr_tmpfile_fdopen(&a, "w");
    fputs(big_a, f);
    CHECK(fclose(f) == 0);
    CHECK(write(to_child[1], "g", 1) == 1);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(gr_tmpfile_commit(&a, true, GR_ERR_CKPT, &err) == GR_OK);
    const char *got = slurp(out);
    CHECK_MSG(strcmp(got, big_a) == 0 || strcmp(got, big_b) == 0, "OUT holds %zu bytes of mixed content",
              strlen(got));
    CHECK(entries(d) == 1);
    close(to_child[0]), close(to_child[1]), close(to_parent[0]), close(to_parent[1]);
}

static void test_failures(void) {
    const char *d = fresh_dir("fail");
    char out[600], victim[600];
    gr_tmpfile t;
    gr_error err = {0};
    /* no such directory: named, nothing made */
    snprintf(out, sizeof out, "%s/nodir/out", d);
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_DATA, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "nodir/out: cannot create a temporary file next to it: No such file or directory");
    CHECK_STR_CONTAINS(err.msg, "/nodir does not exist: create it first)");
    CHECK(t.tmp == NULL && entries(d) == 0);
    /* abort: the temporary goes */
    snprintf(out, sizeof out, "%s/out", d);
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_CKPT, &err) == GR_OK);
    gr_tmpfile_abort(&t);
    CHECK(entries(d) == 0 && t.tmp == NULL);
    gr_tmpfile_abort(&t); /* twice: harmless */
    /* the rename fails (OUT a directory): said, the temporary goes, OUT stays */
    snprintf(out, sizeof out, "%s/outdir", d);
    CHECK(mkdir(out, 0777) == 0);
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_CKPT, &err) == GR_OK);
    CHECK(write_commit(&t, "x", &err) == GR_ERR_CKPT);
    CHECK_STR_CONTAINS(err.msg, "cannot rename to");
    CHECK(entries(d) == 1 && t.tmp == NULL);
    /* the temporary's name swapped for a symlink while writing: not renamed
     * over OUT (OUT would become the symlink), the victim untouched */
    snprintf(out, sizeof out, "%s/swapped", d);
    snprintf(victim, sizeof victim, "%s/victim", d);
    put(victim, victim_bytes);
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_CKPT, &err) == GR_OK);
    CHECK(unlink(t.tmp) == 0 && symlink(victim, t.tmp) == 0);
    CHECK(write_commit(&t, "payload", &err) == GR_ERR_CKPT);
    CHECK_STR_CONTAINS(err.msg, "removed or replaced while being written; not renamed to");
    CHECK(strcmp(slurp(victim), victim_bytes) == 0);
    CHECK(access(out, F_OK) != 0 && entries(d) == 2); /* outdir, victim */
}

/* HDF5 creates the file through gr_tmpfile_reopen_path: the very file made,
 * and never a symlink's target when its name was swapped in between. */
static void test_hdf5(void) {
    const char *d = fresh_dir("hdf5");
    char out[600], victim[600], buf[64];
    snprintf(out, sizeof out, "%s/out.h5", d);
    snprintf(victim, sizeof victim, "%s/victim", d);
    put(victim, victim_bytes);
    gr_tmpfile t;
    gr_error err = {0};
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_CKPT, &err) == GR_OK);
    hid_t f = H5Fcreate(gr_tmpfile_reopen_path(&t, buf, sizeof buf), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(f >= 0 && H5Gclose(H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) >= 0);
    CHECK(H5Fclose(f) >= 0);
    CHECK(gr_tmpfile_commit(&t, true, GR_ERR_CKPT, &err) == GR_OK);
    f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0 && H5Lexists(f, "g", H5P_DEFAULT) > 0);
    if (f >= 0) H5Fclose(f);
    CHECK(entries(d) == 2);
    /* swapped before HDF5 opens it */
    CHECK(gr_tmpfile_create(&t, out, GR_ERR_CKPT, &err) == GR_OK);
    const char *p = gr_tmpfile_reopen_path(&t, buf, sizeof buf);
    CHECK(strncmp(p, "/proc/self/fd/", 14) == 0);
    CHECK(unlink(t.tmp) == 0 && symlink(victim, t.tmp) == 0);
    /* HDF5 opens the file created, or (1.10: the realpath of a deleted
     * file's /proc link fails) nothing: never the symlink's target */
    H5E_BEGIN_TRY {
        f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    } H5E_END_TRY;
    if (f >= 0) H5Fclose(f);
    CHECK(strcmp(slurp(victim), victim_bytes) == 0);
    CHECK(gr_tmpfile_commit(&t, true, GR_ERR_CKPT, &err) == GR_ERR_CKPT);
    CHECK(is_regular(out) && strcmp(slurp(victim), victim_bytes) == 0);
}

/* Whether another open file description of path sees a lock on it (an OFD
 * lock, or a classic fcntl lock of any process: the two kinds conflict). */
static bool locked(const char *path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW);
    if (fd < 0) return false;
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    const bool held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    close(fd);
    return held;
}

/* The lock of gr_tmpfile_create_locked outlives HDF5 opening and closing the
 * file by another descriptor (gr_tmpfile_reopen_path); a classic fcntl lock
 * does not (the contrast: why the OFD kind). */
static void test_lock_reopen(void) {
    const char *d = fresh_dir("lock");
    char out[600], plain[600], buf[64];
    snprintf(out, sizeof out, "%s/out.h5", d);
    gr_tmpfile t;
    gr_error err = {0};
    CHECK(gr_tmpfile_create_locked(&t, out, GR_ERR_DATA, &err) == GR_OK);
    CHECK(locked(t.tmp));
    const char *p = gr_tmpfile_reopen_path(&t, buf, sizeof buf);
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0 && close(fd) == 0);
    CHECK_MSG(locked(t.tmp), "the lock went with another descriptor's close");
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(f >= 0 && H5Fclose(f) >= 0);
    CHECK_MSG(locked(t.tmp), "the lock went with HDF5's close");
    const int removed = gr_tmpfile_sweep(out, NULL); /* our own: kept */
    CHECK(removed == 0 && is_regular(t.tmp));
    CHECK(gr_tmpfile_commit(&t, true, GR_ERR_DATA, &err) == GR_OK);
    CHECK(!locked(out) && entries(d) == 1);
    /* a classic lock: dropped by the close of any descriptor of the file */
    snprintf(plain, sizeof plain, "%s/plain", d);
    put(plain, "x");
    int a = open(plain, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    CHECK(a >= 0 && fcntl(a, F_SETLK, &fl) == 0 && locked(plain));
    fd = open(plain, O_RDONLY);
    CHECK(fd >= 0 && close(fd) == 0);
    CHECK_MSG(!locked(plain), "a classic fcntl lock survived another descriptor's close");
    close(a);
}

/* A pid no process has (a child reaped). */
static long dead_pid(void) {
    pid_t pid = fork();
    GR_ASSERT(pid >= 0);
    if (pid == 0) _exit(0);
    GR_ASSERT(waitpid(pid, NULL, 0) == pid);
    return (long)pid;
}

/* gr_tmpfile_sweep: removes an unlocked temporary of a dead writer, says so;
 * keeps one locked (a live writer elsewhere), a live child's, symlinks,
 * directories and names that do not match exactly; once the child is
 * killed (SIGKILL: no cleanup of its own), its temporary goes too. */
static void test_sweep(void) {
    const char *d = fresh_dir("sweep");
    char out[600], victim[600], path[800], stale[800], held[800], child_tmp[700] = "";
    snprintf(out, sizeof out, "%s/o.h5", d);
    snprintf(victim, sizeof victim, "%s/victim", d);
    put(victim, victim_bytes);
    const long dead = dead_pid();
    snprintf(stale, sizeof stale, "%s.%ld.0123456789ab.tmp", out, dead);
    put(stale, "left by a killed writer");
    snprintf(held, sizeof held, "%s.%ld.00000000cafe.tmp", out, dead);
    put(held, "a live writer's, on another host");
    int hfd = open(held, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    CHECK(hfd >= 0 && fcntl(hfd, F_OFD_SETLK, &fl) == 0);
    snprintf(path, sizeof path, "%s.%ld.fedcba987654.tmp", out, dead);
    CHECK(symlink(victim, path) == 0);
    snprintf(path, sizeof path, "%s.%ld.aaaaaaaaaaaa.tmp", out, dead);
    CHECK(mkdir(path, 0777) == 0);
    const char *keep[] = {"o.h5.%ld.0123456789AB.tmp", "o.h5.%ld.0123456789a.tmp", "o.h5.%ld.0123456789abc.tmp",
                          "o.h5.%ld.0123456789ab.tmp.bak", "o.h5.%ld.0123456789ab.TMP", "xo.h5.%ld.0123456789ab.tmp",
                          "o.h5x.%ld.0123456789ab.tmp", "o.h5.-%ld.0123456789ab.tmp", "o.h5.tmp", "o.h5..0123456789ab.tmp"};
    for (size_t k = 0; k < sizeof keep / sizeof *keep; k++) {
        char name[200];
        snprintf(name, sizeof name, keep[k], dead);
        snprintf(path, sizeof path, "%s/%s", d, name);
        put(path, "not a temporary of o.h5");
    }
    int to_parent[2], to_child[2];
    GR_ASSERT(pipe(to_parent) == 0 && pipe(to_child) == 0);
    fflush(NULL);
    pid_t pid = fork();
    GR_ASSERT(pid >= 0);
    if (pid == 0) {
        gr_tmpfile c;
        gr_error ce;
        char name[700] = "";
        if (gr_tmpfile_create_locked(&c, out, GR_ERR_DATA, &ce) == GR_OK) snprintf(name, sizeof name, "%s", c.tmp);
        char go;
        if (write(to_parent[1], name, sizeof name) != (ssize_t)sizeof name || read(to_child[0], &go, 1) != 1) _exit(1);
        for (;;) pause(); /* holds it until killed */
    }
    CHECK(read(to_parent[0], child_tmp, sizeof child_tmp) == (ssize_t)sizeof child_tmp && child_tmp[0]);
    const int before = entries(d);
    char said[4096] = "";
    FILE *say = fmemopen(said, sizeof said - 1, "w");
    GR_ASSERT(say);
    CHECK(gr_tmpfile_sweep(out, say) == 1);
    fclose(say);
    char want[1000];
    snprintf(want, sizeof want, "gpurun: removed a stale temporary %s left by an interrupted write\n", stale);
    CHECK_MSG(strcmp(said, want) == 0, "said '%s'", said);
    CHECK(access(stale, F_OK) != 0 && entries(d) == before - 1);
    CHECK(is_regular(held) && is_regular(child_tmp) && is_regular(victim));
    CHECK(strcmp(slurp(victim), victim_bytes) == 0);
    snprintf(path, sizeof path, "%s.%ld.fedcba987654.tmp", out, dead);
    CHECK(is_symlink_to(path, victim));
    CHECK(gr_tmpfile_sweep(out, NULL) == 0); /* again: nothing more */
    /* the child killed outright: its temporary is stale now */
    CHECK(kill(pid, SIGKILL) == 0 && waitpid(pid, NULL, 0) == pid);
    CHECK(is_regular(child_tmp));
    CHECK(gr_tmpfile_sweep(out, NULL) == 1 && access(child_tmp, F_OK) != 0);
    /* the other writer gone: its lock too */
    close(hfd);
    CHECK(gr_tmpfile_sweep(out, NULL) == 1 && access(held, F_OK) != 0);
    CHECK(entries(d) == before - 3);
    close(to_parent[0]), close(to_parent[1]), close(to_child[0]), close(to_child[1]);
}

/* gr_tmpfile_remove_held unlinks the temporaries held, locked or not, and
 * none committed or aborted. */
static void test_remove_held(void) {
    const char *d = fresh_dir("held");
    char out[600];
    snprintf(out, sizeof out, "%s/o", d);
    gr_tmpfile a, b, c;
    gr_error err = {0};
    CHECK(gr_tmpfile_create(&a, out, GR_ERR_DATA, &err) == GR_OK);
    CHECK(gr_tmpfile_create_locked(&b, out, GR_ERR_DATA, &err) == GR_OK);
    CHECK(gr_tmpfile_create(&c, out, GR_ERR_DATA, &err) == GR_OK);
    CHECK(write_commit(&c, "c\n", &err) == GR_OK);
    CHECK(entries(d) == 3);
    CHECK(gr_tmpfile_remove_held() == 2);
    CHECK(entries(d) == 1 && is_regular(out));
    gr_tmpfile_abort(&a);
    gr_tmpfile_abort(&b);
    CHECK(gr_tmpfile_remove_held() == 0 && entries(d) == 1);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    test_basic();
    test_old_name_symlink();
    test_predictable_names();
    test_all_taken();
    test_concurrent();
    test_failures();
    test_hdf5();
    test_lock_reopen();
    test_sweep();
    test_remove_held();
    return gr_test_report();
}
