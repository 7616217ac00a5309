/* body_half.h — how kernel bodies read and write activations stored in
 * fp32, bf16 or fp16 (the plan's element types under mixed precision).
 *
 * A body that takes an element type e reads element i of p as a float
 * (gr_ld_hd: a half pattern decoded exactly) and writes a float result
 * (gr_st_hd: encoded with round to nearest even), with common/gr_half.h's
 * integer conversions, which the CPU backend uses too: both backends store
 * the same bits for the same float result. The CUDA kernels pass e as a
 * template constant, so the switch folds away; the CPU tests pass it as a
 * value. The math in between stays fp32 (or double), as in fp32 storage. */
#ifndef GR_BODY_HALF_H
#define GR_BODY_HALF_H

#include <stdint.h>

#include "../common/gr_half.h"
#include "body.h"

/* graph.h's gr_elem values of the float storage types (bodies are also C++
 * and do not include graph.h; kernels/backend.c checks that they agree) */
enum { GR_BODY_F32 = 0, GR_BODY_BF16 = 3, GR_BODY_F16 = 4 };

GR_HD float gr_ld_hd(const void *p, int e, int64_t i) {
    if (e == GR_BODY_BF16) return gr_bf16_decode_hd(((const uint16_t *)p)[i]);
    if (e == GR_BODY_F16) return gr_fp16_decode_hd(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

GR_HD void gr_st_hd(void *p, int e, int64_t i, float v) {
    if (e == GR_BODY_BF16) ((uint16_t *)p)[i] = gr_bf16_encode_hd(v);
    else if (e == GR_BODY_F16) ((uint16_t *)p)[i] = gr_fp16_encode_hd(v);
    else ((float *)p)[i] = v;
}

#endif
