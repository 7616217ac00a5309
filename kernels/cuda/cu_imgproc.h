/* cu_imgproc.h — launcher of the image decoder's second half (imgproc.cu):
 * decoded images through their transforms into the input tensor, one
 * thread an output pixel (kernels/body_image.h's bodies). */
#ifndef GR_CU_IMGPROC_H
#define GR_CU_IMGPROC_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../body_image.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] ([3, S, S] floats, S = nm->S) for the n samples of d (device
 * memory, n descriptors): evaluation's short side and centre crop when
 * center, else the training box, resize and flip; samples with skip set are
 * left alone. On stream s; no sync, no allocation. Nothing for n <= 0. */
void gr_cu_img_transform(cudaStream_t s, const gr_img_desc *d, int64_t n, const gr_img_norm *nm, int center,
                         float *dst);

#ifdef __cplusplus
}
#endif

#endif
