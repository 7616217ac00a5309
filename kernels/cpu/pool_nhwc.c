/* pool_nhwc.c — maxpool and its backward on channels-last activations
 * (graph.h: gr_layout): a sample is rows of C channels, [H][W][C]. Each
 * channel is pooled as pool.c's NCHW kernel pools its plane: windows scanned
 * in (kh, kw) order from -inf with the index of their first in-bounds
 * element, a later value taken when greater or NaN; indices are ih*W + iw
 * (PyTorch's), stored [Ho][Wo][C]. The results are the NCHW kernel's,
 * transposed, bit for bit. bf16 storage is decoded a sample at a time
 * (exact: a maximum is one of the inputs; the backward sums in fp32 and
 * encodes once). Parallel over samples. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "half_io.h"

typedef struct gr_mpn {
    int64_t c, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
} gr_mpn;

static gr_mpn gr_mpn_of(const gr_kargs *a, const gr_tensor *x, const gr_tensor *y) {
    const gr_attrs *at = &a->node->attrs;
    gr_mpn d = {x->shape[1], x->shape[2], x->shape[3], y->shape[2], y->shape[3], at->kernel[0], at->kernel[1],
                at->stride[0], at->stride[1], at->padding[0], at->padding[1]};
    return d;
}

/* One sample: y [Ho][Wo][C] and idx from x [H][W][C]. */
static void gr_mpn_sample(const gr_mpn *d, const float *restrict x, float *restrict y, int32_t *restrict idx) {
    const int64_t c = d->c;
    for (int64_t oh = 0; oh < d->ho; oh++)
        for (int64_t ow = 0; ow < d->wo; ow++) {
            float *restrict yr = y + (oh * d->wo + ow) * c;
            int32_t *restrict ir = idx + (oh * d->wo + ow) * c;
            const int64_t h0 = oh * d->sh - d->ph, w0 = ow * d->sw - d->pw;
            const int32_t first = (int32_t)((h0 > 0 ? h0 : 0) * d->w + (w0 > 0 ? w0 : 0));
            for (int64_t j = 0; j < c; j++) yr[j] = -INFINITY, ir[j] = first;
            for (int64_t kh = 0; kh < d->kh; kh++) {
                const int64_t ih = h0 + kh;
                if (ih < 0 || ih >= d->h) continue;
                for (int64_t kw = 0; kw < d->kw; kw++) {
                    const int64_t iw = w0 + kw;
                    if (iw < 0 || iw >= d->w) continue;
                    const float *restrict xr = x + (ih * d->w + iw) * c;
                    const int32_t at = (int32_t)(ih * d->w + iw);
                    for (int64_t j = 0; j < c; j++) {
                        bool take = xr[j] > yr[j] || xr[j] != xr[j]; /* NaN propagates, as PyTorch */
                        yr[j] = take ? xr[j] : yr[j];
                        ir[j] = take ? at : ir[j];
                    }
                }
            }
        }
}

void gr_cpu_maxpool_nhwc(const gr_kargs *a) {
    const gr_mpn d = gr_mpn_of(a, a->tin[0], a->tout[0]);
    const bool h = a->ein[0] == GR_BF16;
    const int64_t in_len = d.h * d.w * d.c, out_len = d.ho * d.wo * d.c;
    #pragma omp parallel if (a->n * in_len >= GR_OMP_MIN)
    {
        float *tin = h ? gr_xmalloc((size_t)(in_len + out_len) * sizeof *tin) : NULL;
        float *tout = tin ? tin + in_len : NULL;
        #pragma omp for
        for (int64_t i = 0; i < a->n; i++) {
            const float *x = gr_hio_read(gr_hio_cat(a->in[0], h, i * in_len), h, in_len, tin);
            void *yb = gr_hio_at(a->out[0], h, i * out_len);
            float *y = gr_hio_dst(yb, h, tout);
            gr_mpn_sample(&d, x, y, (int32_t *)a->out[1] + i * out_len);
            gr_hio_write(yb, h, out_len, y);
        }
        free(tin);
    }
}

/* dx = 0, then dx[idx] += dy, channel by channel. */
void gr_cpu_maxpool_bwd_nhwc(const gr_kargs *a) {
    const gr_mpn d = gr_mpn_of(a, a->tout[0], a->tin[0]);
    const bool h = a->ein[0] == GR_BF16;
    const int64_t c = d.c, in_len = d.h * d.w * c, out_len = d.ho * d.wo * c;
    #pragma omp parallel if (a->n * in_len >= GR_OMP_MIN)
    {
        float *tdy = h ? gr_xmalloc((size_t)(in_len + out_len) * sizeof *tdy) : NULL;
        float *tdx = tdy ? tdy + out_len : NULL;
        #pragma omp for
        for (int64_t i = 0; i < a->n; i++) {
            const float *restrict dy = gr_hio_read(gr_hio_cat(a->in[0], h, i * out_len), h, out_len, tdy);
            const int32_t *restrict idx = (const int32_t *)a->in[1] + i * out_len;
            void *dxb = gr_hio_at(a->out[0], h, i * in_len);
            float *restrict dx = gr_hio_dst(dxb, h, tdx);
            memset(dx, 0, (size_t)in_len * sizeof *dx);
            for (int64_t p = 0; p < d.ho * d.wo; p++)
                for (int64_t j = 0; j < c; j++) dx[(int64_t)idx[p * c + j] * c + j] += dy[p * c + j];
            gr_hio_write(dxb, h, in_len, dx);
        }
        free(tdy);
    }
}
