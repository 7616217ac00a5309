// imgproc.cu — the image decoder's second half (nvjpeg_decode.c decodes):
// each sample's decoded image (8-bit, interleaved RGB or a gray plane, in
// device memory) through its transform into its [3, S, S] row of the input
// tensor. One thread an output pixel writing its three channels through
// kernels/body_image.h, whose bodies tests/test_image_body.c checks on the
// CPU against the host path (dataio/augment.c, dataio/image.c).
#include <stdint.h>

#include "../body_image.h"
#include "cu_check.h"
#include "cu_imgproc.h"

template <bool CENTER>
__global__ void gr_img_kernel(const gr_img_desc *d, gr_img_norm nm, int64_t n, float *dst) {
    const int64_t per = nm.S * nm.S;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * per) return;
    const int64_t b = t / per, p = t % per;
    const gr_img_desc dd = d[b];
    if (dd.skip) return;
    float *out = dst + b * 3 * per;
    if (CENTER) gr_body_img_eval(&dd, &nm, p / nm.S, p % nm.S, out);
    else gr_body_img_train(&dd, &nm, p / nm.S, p % nm.S, out);
}

extern "C" void gr_cu_img_transform(cudaStream_t s, const gr_img_desc *d, int64_t n, const gr_img_norm *nm,
                                    int center, float *dst) {
    if (n <= 0) return;
    const int64_t total = n * nm->S * nm->S;
    if (center) gr_img_kernel<true><<<GR_CU_BLOCKS(total), GR_CU_THREADS, 0, s>>>(d, *nm, n, dst);
    else gr_img_kernel<false><<<GR_CU_BLOCKS(total), GR_CU_THREADS, 0, s>>>(d, *nm, n, dst);
    GR_CU_LAUNCHED();
}
