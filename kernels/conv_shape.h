/* conv_shape.h — the shape of one convolution (PyTorch nn.Conv2d, NCHW) as
 * every backend's conv reads it: the CPU's paths (kernels/cpu/conv.h) and
 * the CUDA backend's cuDNN descriptors (kernels/cuda/op_conv.c). */
#ifndef GR_CONV_SHAPE_H
#define GR_CONV_SHAPE_H

#include <stdint.h>

typedef struct gr_conv_shape {
    int64_t n, c, h, w;      /* input [n, c, h, w] (n = this run's batch) */
    int64_t f, ho, wo;       /* output [n, f, ho, wo] */
    int64_t kh, kw, sh, sw, ph, pw, groups;
} gr_conv_shape;

#endif
