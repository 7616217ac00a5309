/* half_io.h — bf16 (and fp16) storage in the CPU backend: the conversion
 * spans its casts and its native kernels use (half_io.c), and the block
 * helpers of kernels that read and write bf16 natively
 * (cpu_backend.c: gr_cpu_native_half).
 *
 * A native kernel computes in fp32 exactly as on fp32 storage: it decodes
 * what it reads and encodes (round to nearest even, common/gr_half.h) what
 * it writes, so its results are bit for bit those of the staged path, with
 * half the memory traffic and no staging copies. The spans are built for
 * AVX-512 and AVX2 too (GR_ISA_CLONES): the library's baseline x86-64 build
 * does not vectorize 16-bit conversions. Offsets are in elements of the
 * storage type. */
#ifndef GR_CPU_HALF_IO_H
#define GR_CPU_HALF_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "../../common/gr_common.h"
#include "../../common/gr_half.h"

/* Elements per task when a conversion or a native elementwise kernel is
 * split over threads. */
#define GR_HIO_CHUNK ((int64_t)1 << 14)

/* f[0..n) = decode(h[0..n)) and h[0..n) = encode(f[0..n)), one thread */
void gr_hio_decode_bf16(const uint16_t *restrict h, float *restrict f, int64_t n);
void gr_hio_encode_bf16(const float *restrict f, uint16_t *restrict h, int64_t n);
void gr_hio_decode_fp16(const uint16_t *restrict h, float *restrict f, int64_t n);
void gr_hio_encode_fp16(const float *restrict f, uint16_t *restrict h, int64_t n);

/* The elementwise kernels on bf16 spans, one thread: relu, its backward
 * (dy where y > 0 or NaN, else 0), and the sum of two. */
void gr_hio_relu_bf16(const uint16_t *restrict x, uint16_t *restrict y, int64_t n);
void gr_hio_relu_bwd_bf16(const uint16_t *restrict dy, const uint16_t *restrict y, uint16_t *restrict dx, int64_t n);
void gr_hio_add2_bf16(const uint16_t *restrict x0, const uint16_t *restrict x1, uint16_t *restrict y, int64_t n);
/* y = relu(x0 + x1) in bf16 (a relu fused after the add: the unfused pair's bits, the rounding keeping the sign) */
void gr_hio_add2_relu_bf16(const uint16_t *restrict x0, const uint16_t *restrict x1, uint16_t *restrict y, int64_t n);
/* y = the bf16 sum x0 + x1 where m > 0 or NaN, else 0 (a relu's backward folded into a sum of gradients:
 * the sum's rounding, then relu_bwd's bits) */
void gr_hio_add2_mask_bf16(const uint16_t *restrict x0, const uint16_t *restrict x1, const uint16_t *restrict m,
                           uint16_t *restrict y, int64_t n);

/* p advanced by off elements of fp32 (bf16 false) or bf16 storage */
static inline void *gr_hio_at(void *p, bool bf16, int64_t off) { return (char *)p + off * (bf16 ? 2 : 4); }
static inline const void *gr_hio_cat(const void *p, bool bf16, int64_t off) {
    return (const char *)p + off * (bf16 ? 2 : 4);
}

/* element i of p (fp32, or bf16 when bf16) as fp32 */
static inline float gr_hio_get(const void *p, bool bf16, int64_t i) {
    return bf16 ? gr_bf16_decode_hd(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* len values of p as fp32: p itself, or decoded into tmp (len floats) */
static inline const float *gr_hio_read(const void *p, bool bf16, int64_t len, float *tmp) {
    if (!bf16) return p;
    gr_hio_decode_bf16(p, tmp, len);
    return tmp;
}

/* Where len fp32 results for p go: p itself, or tmp (then gr_hio_write) */
static inline float *gr_hio_dst(void *p, bool bf16, float *tmp) { return bf16 ? tmp : p; }

/* tmp's len values stored into p when it is bf16 (nothing for fp32) */
static inline void gr_hio_write(void *p, bool bf16, int64_t len, const float *tmp) {
    if (bf16) gr_hio_encode_bf16(tmp, p, len);
}

#endif
