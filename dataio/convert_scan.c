/* convert_scan.c — folders of images listed for the image converters (see
 * convert_scan.h). */
#include "convert_scan.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void gr_conv_scan_free(gr_conv_scan *s) {
    for (int64_t k = 0; k < s->nclasses; k++) free(s->classes[k]);
    for (int64_t i = 0; i < s->n; i++) free(s->files[i].path);
    free(s->classes);
    free(s->files);
    memset(s, 0, sizeof *s);
}

static int scan_cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *gr_conv_join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = gr_xmalloc(len);
    snprintf(p, len, "%s/%s", dir, name);
    return p;
}

bool gr_conv_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

gr_status gr_conv_list(const char *dir, char ***names, int64_t *count, int64_t *hidden, gr_error *err) {
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return gr_error_set(err, GR_ERR_DATA, "%s: %s", dir, strerror(errno));
    int64_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (e->d_name[0] == '.') {
            (*hidden)++;
            continue;
        }
        GR_GROW(*names, cap, *count + 1);
        (*names)[(*count)++] = gr_xstrdup(e->d_name);
    }
    closedir(d);
    if (*count) qsort(*names, (size_t)*count, sizeof **names, scan_cmp_names);
    return GR_OK;
}

void gr_conv_list_free(char **names, int64_t count) {
    for (int64_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

bool gr_conv_is_image_name(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 || strcasecmp(dot, ".png") == 0);
}

gr_status gr_conv_scan_add(gr_conv_scan *s, char *path, int32_t label, gr_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        s->skipped++;
        free(path);
        return GR_OK;
    }
    /* an image's name on a FIFO, device or folder: refused, as every input that is not a file
     * (the decoder's fopen would block on a FIFO) */
    gr_status st = gr_check_regular(path, "an image", GR_ERR_DATA, err);
    if (st != GR_OK) {
        free(path);
        return st;
    }
    GR_GROW(s->files, s->cap, s->n + 1);
    s->files[s->n++] = (gr_conv_file){path, label, (int64_t)sb.st_size,
                                      (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec};
    return GR_OK;
}

gr_status gr_conv_scan_class(gr_conv_scan *s, const char *dir, int32_t label, gr_error *err) {
    char **names;
    int64_t count;
    const int64_t n0 = s->n;
    gr_status st = gr_conv_list(dir, &names, &count, &s->skipped, err);
    for (int64_t i = 0; i < count && st == GR_OK; i++) {
        if (!gr_conv_is_image_name(names[i])) {
            s->skipped++;
            continue;
        }
        st = gr_conv_scan_add(s, gr_conv_join(dir, names[i]), label, err);
    }
    if (st == GR_OK && s->n == n0)
        st = gr_error_set(err, GR_ERR_DATA, "%s: no JPEG or PNG images (*.jpg, *.jpeg, *.png) in this class folder",
                          dir);
    gr_conv_list_free(names, count);
    return st;
}

gr_status gr_conv_scan_dir(const char *dir, gr_conv_scan *s, gr_error *err) {
    memset(s, 0, sizeof *s);
    if (!gr_conv_is_dir(dir))
        return gr_error_set(err, GR_ERR_DATA, "%s: no such directory (expected one sub-folder of images per class)",
                            dir);
    char **names;
    int64_t count;
    gr_status st = gr_conv_list(dir, &names, &count, &s->skipped, err);
    for (int64_t i = 0; i < count && st == GR_OK; i++) {
        char *path = gr_conv_join(dir, names[i]);
        if (!gr_conv_is_dir(path)) {
            s->skipped++;
        } else if (s->nclasses == INT32_MAX) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: more than %d class folders", dir, INT32_MAX);
        } else {
            GR_GROW(s->classes, s->classes_cap, s->nclasses + 1);
            s->classes[s->nclasses] = gr_xstrdup(names[i]);
            st = gr_conv_scan_class(s, path, (int32_t)s->nclasses, err);
            s->nclasses++;
        }
        free(path);
    }
    if (st == GR_OK && s->nclasses == 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s: no class sub-folders (expected %s/<class>/<image>.jpg or .png)", dir,
                          dir);
    gr_conv_list_free(names, count);
    if (st != GR_OK) gr_conv_scan_free(s);
    return st;
}
