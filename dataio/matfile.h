/* matfile.h — a MATLAB MAT-file of level 5 (what MATLAB's -v6 and -v7 save,
 * and scipy.io.savemat) read into memory: the classes a dataset's metadata
 * needs (the ILSVRC2012 devkit's data/meta.mat): numeric arrays of any
 * stored integer or float type, read as double; char arrays, read as UTF-8;
 * struct arrays and cell arrays; each variable compressed (miCOMPRESSED,
 * zlib) or not. Little-endian files only (what every MATLAB platform
 * writes); v7.3 files (HDF5) are refused naming their version.
 *
 * Exports:
 *   gr_mat_array  one array: class, dimensions, values;
 *   gr_mat_read   the top-level variable of a name, from a file;
 *   gr_mat_field  a struct array's field of one element;
 *   gr_mat_free. */
#ifndef GR_MATFILE_H
#define GR_MATFILE_H

#include "../common/gr_common.h"

#define GR_MAT_MAX_DIMS 8
#define GR_MAT_MAX_BYTES ((size_t)256 << 20) /* the largest file, and variable once inflated, read */

typedef enum gr_mat_class {
    GR_MAT_NUMERIC,  /* double, single, int8 .. uint64, logical: values as double */
    GR_MAT_CHAR,
    GR_MAT_STRUCT,
    GR_MAT_CELL,
    GR_MAT_OTHER,    /* sparse, objects, functions: present, not read */
} gr_mat_class;

typedef struct gr_mat_array {
    gr_mat_class cls;
    char *name;                   /* the variable's name; "" inside a struct or cell */
    int ndims;
    int64_t dims[GR_MAT_MAX_DIMS];
    int64_t numel;                /* the product of dims */
    double *num;                  /* NUMERIC: numel values in MATLAB's column-major order (the real part) */
    char *text;                   /* CHAR: the characters in column-major order, UTF-8, NUL-terminated */
    int nfields;                  /* STRUCT */
    char **fields;                /* STRUCT: the field names */
    struct gr_mat_array **elems;  /* STRUCT: numel * nfields, element e's field f at e * nfields + f;
                                     CELL: numel */
} gr_mat_array;

/* The top-level variable `name` of the MAT-file at path into *out
 * (gr_mat_free). GR_ERR_DATA naming the file: not a MAT-file, v7.3,
 * big-endian, truncated or malformed (what and where), bad compressed data,
 * larger than GR_MAT_MAX_BYTES, no variable of that name. */
gr_status gr_mat_read(const char *path, const char *name, gr_mat_array **out, gr_error *err);

/* Element e's field `field` of struct array s; NULL when s is no struct,
 * has no such field, or e is out of range. */
const gr_mat_array *gr_mat_field(const gr_mat_array *s, int64_t e, const char *field);

void gr_mat_free(gr_mat_array *a);

#endif
