/* convert_scan.h — private to the image converters (convert_imagefolder.c,
 * convert_imagenet*.c, convert_encoded.c): folders of images listed, each
 * image file with its label and what a resumable conversion's fingerprint
 * takes from it (convert_partial.h). Not part of the dataio API.
 *
 * Exports:
 *   gr_conv_file          one image file: path, label, size, modification time;
 *   gr_conv_scan          class names and their files, in label order;
 *   gr_conv_scan_dir      a folder of class folders: sub-folders sorted
 *                         bytewise are the labels 0..K-1;
 *   gr_conv_scan_class    one folder's images added under a given label;
 *   gr_conv_scan_add      one image file added (stat'ed: a regular file);
 *   gr_conv_scan_free;
 *   gr_conv_list          a folder's entries but hidden ones, sorted bytewise;
 *   gr_conv_list_free, gr_conv_join, gr_conv_is_image_name, gr_conv_is_dir. */
#ifndef GR_CONVERT_SCAN_H
#define GR_CONVERT_SCAN_H

#include "../common/gr_common.h"

typedef struct gr_conv_file {
    char *path;
    int32_t label;
    int64_t size;      /* bytes, from the scan's stat */
    int64_t mtime_ns;  /* modification time, ns since the epoch */
} gr_conv_file;

typedef struct gr_conv_scan {
    char **classes;     /* names, by label */
    int64_t nclasses, classes_cap;
    gr_conv_file *files;
    int64_t n, cap;
    int64_t skipped;    /* entries not taken: not *.jpg|*.jpeg|*.png, hidden, not a folder */
} gr_conv_scan;

/* Scans dir: its sub-folders sorted bytewise are the classes, every
 * *.jpg, *.jpeg, *.png in them (case-insensitive, names sorted) a file of
 * that class. Errors (GR_ERR_DATA): "DIR: no such directory ...", "DIR: no
 * class sub-folders ...", "DIR/cls: no JPEG or PNG images ...", an image
 * name on something that is not a regular file. On failure *s is freed. */
gr_status gr_conv_scan_dir(const char *dir, gr_conv_scan *s, gr_error *err);

/* Adds the images of folder dir (sorted by name) with label `label`; an
 * empty one is the error above ("DIR: no JPEG or PNG images ... in this
 * class folder"). Entries not taken add to s->skipped. */
gr_status gr_conv_scan_class(gr_conv_scan *s, const char *dir, int32_t label, gr_error *err);

/* Adds path (taken: freed by gr_conv_scan_free) with `label` when it names
 * a regular file; GR_ERR_DATA naming it when it names something else. A
 * path that cannot be stat'ed is skipped and counted. */
gr_status gr_conv_scan_add(gr_conv_scan *s, char *path, int32_t label, gr_error *err);

void gr_conv_scan_free(gr_conv_scan *s);

/* The entries of dir but ".", ".." and hidden ones (counted in *hidden),
 * sorted bytewise. GR_ERR_DATA "DIR: <strerror>" when it cannot be read. */
gr_status gr_conv_list(const char *dir, char ***names, int64_t *count, int64_t *hidden, gr_error *err);
void gr_conv_list_free(char **names, int64_t count);

/* "dir/name", allocated. */
char *gr_conv_join(const char *dir, const char *name);
/* Whether name ends in .jpg, .jpeg or .png (any case). */
bool gr_conv_is_image_name(const char *name);
/* Whether path is a directory (followed). */
bool gr_conv_is_dir(const char *path);

#endif
