/* onednn.h — what the CPU backend's oneDNN paths share: the status check
 * and the backend's engine and stream (made with the conv path's state,
 * conv_onednn.c, on first use). */
#ifndef GR_CPU_ONEDNN_H
#define GR_CPU_ONEDNN_H

#include <stdio.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "../../common/gr_common.h"

#define GR_DNNL_CHECK(call) do { \
    dnnl_status_t st_ = (call); \
    if (st_ != dnnl_success) { \
        fprintf(stderr, "oneDNN: %s: %s\n", #call, dnnl_status2str(st_)); \
        gr_assert_fail(#call, __FILE__, __LINE__); \
    } \
} while (0)

typedef struct gr_cpu gr_cpu;

/* attr gets a sum post-op: the primitive adds its result into dst (dst += ...) */
static inline void gr_dnnl_attr_sum(dnnl_primitive_attr_t attr) {
    dnnl_post_ops_t ops;
    GR_DNNL_CHECK(dnnl_post_ops_create(&ops));
    GR_DNNL_CHECK(dnnl_post_ops_append_sum(ops, 1.0f));
    GR_DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, ops));
    GR_DNNL_CHECK(dnnl_post_ops_destroy(ops));
}

/* cpu's oneDNN engine and stream */
void gr_cpu_onednn_handles(gr_cpu *cpu, dnnl_engine_t *engine, dnnl_stream_t *stream);

#endif
