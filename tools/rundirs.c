/* rundirs.c — the run directories named by a tool's arguments (rundirs.h). */
#include "rundirs.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/gr_common.h"

typedef struct gr_rundirs {
    char **dir;
    int n, cap;
} gr_rundirs;

static bool gr_rundirs_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* dir/name, allocated */
static char *gr_rundirs_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = gr_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool gr_rundirs_has(const char *dir, const char *name) {
    char *path = gr_rundirs_join(dir, name);
    struct stat sb;
    bool has = stat(path, &sb) == 0;
    free(path);
    return has;
}

static bool gr_rundirs_is_run(const char *dir) {
    return gr_rundirs_has(dir, "config.yaml") || gr_rundirs_has(dir, "metrics.jsonl");
}

static void gr_rundirs_add(gr_rundirs *r, const char *path) {
    GR_GROW(r->dir, r->cap, r->n + 2);
    r->dir[r->n++] = gr_xstrdup(path);
    r->dir[r->n] = NULL;
}

static int gr_rundirs_name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of dir's subdirectories (not . and ..), sorted; NULL when it cannot be read. */
static char **gr_rundirs_subdirs(const char *dir, int *n) {
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) return NULL;
    char **names = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *path = gr_rundirs_join(dir, e->d_name);
        bool is_dir = gr_rundirs_is_dir(path);
        free(path);
        if (!is_dir) continue;
        GR_GROW(names, cap, *n + 1);
        names[(*n)++] = gr_xstrdup(e->d_name);
    }
    closedir(d);
    if (*n) qsort(names, (size_t)*n, sizeof *names, gr_rundirs_name_cmp);
    return names;
}

/* Adds the run directories below dir (not dir itself), depth levels at most. */
static void gr_rundirs_below(gr_rundirs *r, const char *dir, int depth) {
    int n;
    char **names = gr_rundirs_subdirs(dir, &n);
    for (int i = 0; i < n; i++) {
        char *path = gr_rundirs_join(dir, names[i]);
        if (gr_rundirs_is_run(path)) gr_rundirs_add(r, path);
        else if (depth > 1) gr_rundirs_below(r, path, depth - 1);
        free(path);
        free(names[i]);
    }
    free(names);
}

char **gr_rundirs_expand(const char *cmd, const char *const *args, int n, int *n_out) {
    gr_rundirs r = {0};
    GR_GROW(r.dir, r.cap, 1);
    r.dir[0] = NULL;
    for (int i = 0; i < n; i++) {
        struct stat sb;
        if (stat(args[i], &sb) != 0 || (S_ISDIR(sb.st_mode) && gr_rundirs_is_run(args[i]))) {
            gr_rundirs_add(&r, args[i]);
            continue;
        }
        int before = r.n;
        if (S_ISDIR(sb.st_mode)) {
            char *base = gr_xstrdup(args[i]);
            for (size_t k = strlen(base); k > 1 && base[k - 1] == '/'; k--) base[k - 1] = '\0';
            gr_rundirs_below(&r, base, GR_RUNDIRS_DEPTH);
            free(base);
        }
        if (r.n > before) continue;
        if (n == 1) gr_rundirs_add(&r, args[i]);
        else fprintf(stderr, "gpurun: %s: skipped %s (not a run directory)\n", cmd, args[i]);
    }
    *n_out = r.n;
    return r.dir;
}

void gr_rundirs_free(char **dirs, int n) {
    for (int i = 0; i < n; i++) free(dirs[i]);
    free(dirs);
}
