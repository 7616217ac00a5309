/* safetensors.h — Hugging Face's safetensors format, read strictly.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON (one
 * object: for each tensor "name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, and an optional "__metadata__" object of
 * strings), then the data: each tensor's bytes, little-endian, row-major, at
 * [begin, end) counted from the end of the header.
 *
 * The JSON is parsed by a small strict parser of its own, for exactly this
 * shape (RFC 8259's strings and numbers: UTF-8, escapes, no trailing
 * commas, no comments, nothing else nested; trailing spaces, which writers
 * add to align the data, are fine). A header is refused when it is over
 * 100,000,000 bytes, holds a key twice (at the top, in a tensor's entry or
 * in __metadata__), a tensor
 * entry with another key or without one of its three, a dimension or offset
 * that is not a non-negative integer, a shape of more than GR_ST_MAX_DIMS
 * dimensions, offsets past the data or not tiling it (every byte of the data
 * belongs to exactly one tensor, in some order: no overlap, no gap, as the
 * reference implementation checks), or a known dtype whose shape's product
 * times its size is not end - begin. A dtype this reader does not know is
 * kept (its size unchecked) and only refused when the tensor is read. */
#ifndef GR_SAFETENSORS_H
#define GR_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/gr_common.h"

#define GR_ST_MAX_DIMS 8
#define GR_ST_MAX_HEADER 100000000ull

/* The element types gr_st_read converts to float32; GR_ST_OTHER is any
 * other (known: sized; unknown: elem_size 0). */
typedef enum gr_st_dtype { GR_ST_F32, GR_ST_F16, GR_ST_BF16, GR_ST_OTHER } gr_st_dtype;

typedef struct gr_st_tensor {
    char *name;                      /* as in the file, decoded (UTF-8) */
    char dtype[16];                  /* as in the file: "F32", "I64", ... */
    gr_st_dtype dt;
    int elem_size;                   /* bytes; 0: a dtype this reader does not know */
    int ndim;
    int64_t shape[GR_ST_MAX_DIMS];
    uint64_t begin, end;             /* bytes, from the start of the data */
} gr_st_tensor;

typedef struct gr_st_file {
    int fd;                          /* -1: none (gr_st_parse alone) */
    uint64_t data_start;             /* 8 + N */
    uint64_t data_size;              /* bytes after the header */
    gr_st_tensor *t;                 /* sorted by name */
    int n;
} gr_st_file;

/* Opens path and reads its header into *f (closed again on failure).
 * Errors (GR_ERR_CKPT) name the file and what is wrong: "F: not a
 * safetensors file: ...", "F: truncated: ...", "F: bad safetensors
 * header: tensor 'x': expected ',' or ']' at byte 57 of the JSON". */
gr_status gr_st_open(gr_st_file *f, const char *path, gr_error *err);

/* The header checks alone, on json[0..n) with data_size bytes of data after
 * it (f->fd is left -1); errors as gr_st_open's, file naming it. */
gr_status gr_st_parse(gr_st_file *f, const char *file, const char *json, size_t n, uint64_t data_size,
                      gr_error *err);

/* The tensor named name; NULL when the file has none. */
const gr_st_tensor *gr_st_find(const gr_st_file *f, const char *name);

/* Its values as float32 into dst (numel floats, the stored order). A dtype
 * other than F32, F16 and BF16 is refused naming it; a short read is
 * "F: truncated". */
gr_status gr_st_read(const gr_st_file *f, const char *file, const gr_st_tensor *t, float *dst, gr_error *err);

void gr_st_close(gr_st_file *f);

/* n little-endian values of type dt (F32, F16 or BF16) at byte offset off
 * of fd, converted into dst; what names the values in messages. Shared
 * with llm.c's checkpoint reader (gpt2_import.c). */
gr_status gr_st_read_values(int fd, const char *file, const char *what, uint64_t off, gr_st_dtype dt, int64_t n,
                            float *dst, gr_error *err);

#endif
