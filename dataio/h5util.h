/* h5util.h — private HDF5 helpers shared by the dataio sources (not part of the
 * dataio API).
 *
 * Exports:
 *   gr_h5_init        switches off HDF5's automatic error-stack printing;
 *                     every entry point of dataio calls it before HDF5.
 *   gr_h5_fail        fills a gr_error with a formatted message followed by
 *                     " (HDF5: <innermost message>)" from the current stack.
 *   GR_H5_CHECK       checks one HDF5 call (negative = failure) and jumps to
 *                     the caller's `fail:` label with `st` set.
 *   gr_h5_float16_type  an IEEE binary16 little-endian type (HDF5 1.10 has no
 *                     predefined one); the caller closes it with H5Tclose.
 *   gr_h5_half_to_float  binary16 bits -> float.
 *   gr_h5_check_input, gr_h5_normalize_group, gr_h5_path_exists,
 *   gr_h5_describe_type, gr_h5_is_ieee_half, gr_h5_read_string_attr,
 *   gr_h5_is_encoded, gr_h5_refuse_encoded
 *                     what the readers of a split (dataset.c,
 *                     source_table.c) check before and while opening one. */
#ifndef GR_H5UTIL_H
#define GR_H5UTIL_H

#include <hdf5.h>
#include <sys/stat.h>

#include "../common/gr_common.h"

void gr_h5_init(void);

gr_status gr_h5_fail(gr_error *err, gr_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies the innermost message of HDF5's current error stack into buf
 * ("" when the stack is empty). */
void gr_h5_last_error(char *buf, size_t n);

/* Needs `gr_status st` and a `fail:` label in the calling function. */
#define GR_H5_CHECK(expr, err, ...) do { \
    if ((expr) < 0) { st = gr_h5_fail((err), GR_ERR_DATA, __VA_ARGS__); goto fail; } \
} while (0)

hid_t gr_h5_float16_type(void);

/* group/name ("/" + name for the root), allocated: an object's HDF5 path. */
char *gr_h5_join(const char *group, const char *name);

/* An input file before H5Fopen, its stat in *sb: "PATH: no such file", "PATH: is a
 * directory, not an HDF5 file", not a regular file (gr_check_regular: a FIFO
 * would block the open), not readable (GR_ERR_DATA). */
gr_status gr_h5_check_input(const char *path, struct stat *sb, gr_error *err);
/* "" / NULL -> "/", "train/" -> "/train", collapses repeated slashes (allocated). */
char *gr_h5_normalize_group(const char *g);
/* Every link along an absolute path exists (H5Lexists on "/a/b" fails when
 * "/a" is missing, so walk the components). 1 yes, 0 no, <0 HDF5 error. */
htri_t gr_h5_path_exists(hid_t file, const char *path);
/* A stored type in words for messages: "uint16", "float64", "string", ... */
void gr_h5_describe_type(hid_t t, char *buf, size_t n);
/* Reads a scalar string attribute of obj into buf. 1 read, 0 absent,
 * -1 not a single string (buf then holds the reason), -2 HDF5 failure. */
int gr_h5_read_string_attr(hid_t obj, const char *name, char *buf, size_t n);
/* Whether grp is an encoded image split (its `storage` attribute says
 * "encoded", DESIGN 1.5): dataset.c opens those through gr_source_encoded. */
bool gr_h5_is_encoded(hid_t grp);
/* GR_ERR_DATA naming path and group when grp is an encoded image split: a
 * table (model.inputs) does not take one, and must say so rather than
 * misread it. */
gr_status gr_h5_refuse_encoded(hid_t grp, const char *path, const char *group, gr_error *err);
/* Whether a 2-byte float type is IEEE binary16. */
bool gr_h5_is_ieee_half(hid_t t);

static inline float gr_h5_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {                       /* inf / nan */
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {                   /* normal */
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {                   /* +-0 */
        bits = sign;
    } else {                                 /* subnormal: renormalize */
        uint32_t e = 113u;
        while (!(man & 0x400u)) { man <<= 1; e--; }
        bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    union { uint32_t u; float f; } v = { bits };
    return v.f;
}

/* The distinct values of idx[0..n) in ascending order into *sorted (grown
 * to *cap as needed): the rows a batch reads, each once and in file order.
 * Returns their count. */
int64_t gr_rows_sorted_distinct(const int64_t *idx, int64_t n, int64_t **sorted, int64_t *cap);

#endif
