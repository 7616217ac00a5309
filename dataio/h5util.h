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
 *   gr_h5_half_to_float  binary16 bits -> float. */
#ifndef GR_H5UTIL_H
#define GR_H5UTIL_H

#include <hdf5.h>

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

#endif
