/* half_io.c — the conversion spans and bf16 elementwise spans of half_io.h. */
#include "half_io.h"

#include "../../common/gr_half.h"

GR_ISA_CLONES void gr_hio_decode_bf16(const uint16_t *restrict h, float *restrict f, int64_t n) {
    for (int64_t i = 0; i < n; i++) f[i] = gr_bf16_decode_hd(h[i]);
}

GR_ISA_CLONES void gr_hio_encode_bf16(const float *restrict f, uint16_t *restrict h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = gr_bf16_encode_hd(f[i]);
}

GR_ISA_CLONES void gr_hio_decode_fp16(const uint16_t *restrict h, float *restrict f, int64_t n) {
    for (int64_t i = 0; i < n; i++) f[i] = gr_fp16_decode_hd(h[i]);
}

GR_ISA_CLONES void gr_hio_encode_fp16(const float *restrict f, uint16_t *restrict h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = gr_fp16_encode_hd(f[i]);
}

/* relu(NaN) = NaN as on fp32 (PyTorch's clamp_min) */
GR_ISA_CLONES void gr_hio_relu_bf16(const uint16_t *restrict x, uint16_t *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = gr_bf16_decode_hd(x[i]);
        y[i] = gr_bf16_encode_hd(v <= 0.0f ? 0.0f : v);
    }
}

GR_ISA_CLONES void gr_hio_relu_bwd_bf16(const uint16_t *restrict dy, const uint16_t *restrict y,
                                        uint16_t *restrict dx, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float g = gr_bf16_decode_hd(dy[i]);
        dx[i] = gr_bf16_encode_hd(gr_bf16_decode_hd(y[i]) <= 0.0f ? 0.0f : g);
    }
}

GR_ISA_CLONES void gr_hio_add2_bf16(const uint16_t *restrict x0, const uint16_t *restrict x1, uint16_t *restrict y,
                                    int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = gr_bf16_encode_hd(gr_bf16_decode_hd(x0[i]) + gr_bf16_decode_hd(x1[i]));
}
