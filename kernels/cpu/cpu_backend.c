/* cpu_backend.c — the CPU backend: host memory, the kernel table generated
 * from ops.def, optimizer updates; GEMMs through gemm.h (oneDNN by default);
 * its state (cpu.h) in be->impl. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include "../../common/env.h"
#include "half_io.h"
#include "cpu.h"
#include "cpu_kernels.h"
#include "optim.h"

static const gr_kernel_fn gr_cpu_kernels[GR_OP_COUNT] = {
#define X(E, name, ...) [GR_OP_##E] = gr_cpu_##name,
#include "../../graph/ops.def"
#undef X
};

/* The arenas, each with its size in a 64-byte header (the alignment kept),
 * so the bytes held are known: GPURUN_MEMORY_LIMIT makes the CPU a device
 * of that size, whose allocations past it fail as out of memory (exit 4). */
#define GR_CPU_HDR 64
/* be->impl: NULL for the tests' backends built on the CPU's table (no accounting then) */
static void *gr_cpu_alloc(gr_backend *be, size_t bytes) {
    gr_cpu *cpu = be->impl;
    if (cpu && cpu->cap && bytes > cpu->cap - cpu->held) return NULL;
    char *p = gr_aligned_alloc(bytes + GR_CPU_HDR);
    if (!p) return NULL;
    memcpy(p, &bytes, sizeof bytes);
    if (cpu) {
        cpu->held += bytes;
        if (cpu->held > cpu->held_peak) cpu->held_peak = cpu->held;
    }
    return p + GR_CPU_HDR;
}

static void gr_cpu_dealloc(gr_backend *be, void *p) {
    if (!p) return;
    gr_cpu *cpu = be->impl;
    char *q = (char *)p - GR_CPU_HDR;
    size_t bytes;
    memcpy(&bytes, q, sizeof bytes);
    if (cpu) cpu->held -= bytes;
    gr_aligned_free(q);
}
void *gr_cpu_scratch_alloc(gr_cpu *cpu, size_t bytes, bool capped) {
    if (cpu && capped && cpu->cap && bytes > cpu->cap - GR_MIN(cpu->held, cpu->cap)) return NULL;
    void *p = gr_aligned_alloc(bytes);
    if (p && cpu) {
        cpu->held += bytes;
        if (cpu->held > cpu->held_peak) cpu->held_peak = cpu->held;
    }
    return p;
}

void gr_cpu_scratch_free(gr_cpu *cpu, void *p, size_t bytes) {
    if (!p) return;
    if (cpu) cpu->held -= bytes;
    gr_aligned_free(p);
}

/* The largest conv scratch of s's steps at its micro-batch (the primitives
 * are made now, as the first step would). */
static bool gr_cpu_workspace(gr_backend *be, const gr_steps *s, size_t *bytes) {
    gr_cpu *cpu = be->impl;
    if (!cpu) return false; /* the tests' backends on the CPU's table */
    for (int i = 0; i < s->n; i++) {
        size_t b = gr_cpu_conv_workspace(cpu, &s->step[i], s->micro_batch);
        if (b > *bytes) *bytes = b;
    }
    return true;
}

/* Whether s has a backward step: under oneDNN only the backward passes call
 * sgemm (dense's products; its forward runs on the matmul primitive). */
static bool gr_cpu_steps_backward(const gr_steps *s) {
    for (int i = 0; i < s->n; i++)
        if (s->step[i].node->fwd >= 0) return true;
    return false;
}

/* The GEMM library's kernels made for a plan that trains (an evaluation's
 * does not call sgemm), and the conv scratch reserved, before the first
 * step, under the memory limit (s->workspace: what gr_cpu_workspace found
 * when the plan was compiled). */
static gr_status gr_cpu_prepare(gr_backend *be, gr_steps *s, gr_error *err) {
    gr_cpu *cpu = be->impl;
    const size_t need = s->workspace;
    if (cpu && gr_cpu_steps_backward(s)) gr_cpu_gemm_warm(cpu);
    if (!cpu || gr_cpu_conv_reserve(cpu, need)) return GR_OK;
    return gr_error_set(err, GR_ERR_OOM, "out of memory on cpu: the convolutions' scratch needs %zu bytes at "
                        "micro-batch %lld; %zu free of the %zu GPURUN_MEMORY_LIMIT allows (lower train.micro_batch)",
                        need, (long long)s->micro_batch, cpu->cap - GR_MIN(cpu->held, cpu->cap), cpu->cap);
}

/* Zeroing and copies of a MiB or more in chunks over the threads: the training step's gradients
 * arena is zeroed every step (2 MiB on the Fashion-MNIST MLP, 16 us on one thread of an AMD EPYC)
 * and a batch copied in; one core's stores do not fill the memory bandwidth. */
#define GR_CPU_MEM_CHUNK ((size_t)1 << 18)

static void gr_cpu_zero(gr_backend *be, void *p, size_t bytes) {
    (void)be;
    const int64_t n = (int64_t)((bytes + GR_CPU_MEM_CHUNK - 1) / GR_CPU_MEM_CHUNK);
    #pragma omp parallel for schedule(static) if (bytes >= 4 * GR_CPU_MEM_CHUNK)
    for (int64_t i = 0; i < n; i++)
        memset((char *)p + (size_t)i * GR_CPU_MEM_CHUNK, 0, GR_MIN(GR_CPU_MEM_CHUNK, bytes - (size_t)i * GR_CPU_MEM_CHUNK));
}

static void gr_cpu_copy(gr_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    const int64_t n = (int64_t)((bytes + GR_CPU_MEM_CHUNK - 1) / GR_CPU_MEM_CHUNK);
    #pragma omp parallel for schedule(static) if (bytes >= 4 * GR_CPU_MEM_CHUNK)
    for (int64_t i = 0; i < n; i++) {
        const size_t o = (size_t)i * GR_CPU_MEM_CHUNK;
        memcpy((char *)dst + o, (const char *)src + o, GR_MIN(GR_CPU_MEM_CHUNK, bytes - o));
    }
}
static void gr_cpu_sync(gr_backend *be) { (void)be; }

static void gr_cpu_sgd(gr_backend *be, float *w, float *g, float *buf, int64_t n, const gr_sgd_hparams *h,
                       double *sumsq, bool *cleared) {
    (void)be;
    if (cleared) *cleared = gr_cpu_sgd_update_clear(w, g, buf, n, h, sumsq);
    else gr_cpu_sgd_update(w, g, buf, n, h, sumsq);
}

static void gr_cpu_adamw(gr_backend *be, float *w, float *g, float *m, float *v, int64_t n,
                         const gr_adamw_hparams *h, double *sumsq, bool *cleared) {
    (void)be;
    if (cleared) *cleared = gr_cpu_adamw_update_clear(w, g, m, v, n, h, sumsq);
    else gr_cpu_adamw_update(w, g, m, v, n, h, sumsq);
}

static double gr_cpu_sumsq_be(gr_backend *be, const float *g, int64_t n) {
    (void)be;
    return gr_cpu_sumsq(g, n);
}

/* Half storage to and from fp32 (gr_backend_cast), in chunks over the threads. */
static void gr_cpu_cast(gr_backend *be, void *dst, gr_elem dt, const void *src, gr_elem st, int64_t n) {
    (void)be;
    const bool to_half = dt != GR_F32, bf16 = (to_half ? dt : st) == GR_BF16;
    #pragma omp parallel for if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i += GR_HIO_CHUNK) {
        int64_t len = GR_MIN(GR_HIO_CHUNK, n - i);
        if (to_half && bf16) gr_hio_encode_bf16((const float *)src + i, (uint16_t *)dst + i, len);
        else if (to_half) gr_hio_encode_fp16((const float *)src + i, (uint16_t *)dst + i, len);
        else if (bf16) gr_hio_decode_bf16((const uint16_t *)src + i, (float *)dst + i, len);
        else gr_hio_decode_fp16((const uint16_t *)src + i, (float *)dst + i, len);
    }
}

static void gr_cpu_destroy(gr_backend *be) {
    gr_cpu *cpu = be->impl;
    gr_cpu_dense_onednn_free(cpu);
    gr_cpu_conv_free(cpu);
    free(cpu);
    free(be);
}

static size_t gr_cpu_mem_peak(gr_backend *be) {
    const gr_cpu *cpu = be->impl;
    return cpu ? cpu->held_peak : 0;
}

static bool gr_cpu_mem_info(gr_backend *be, size_t *free_bytes, size_t *total_bytes) {
    const gr_cpu *cpu = be->impl;
    if (cpu && cpu->cap) { /* the device GPURUN_MEMORY_LIMIT makes of the CPU */
        *free_bytes = cpu->cap - cpu->held;
        *total_bytes = cpu->cap;
        return true;
    }
    return gr_host_mem_info(free_bytes, total_bytes);
}

/* oneDNN 2.x's dnnl_cpu_isa_t values, by name (a value this table does not
 * know is printed in hex). */
static const char *gr_cpu_isa_name(int isa, char *buf, size_t n) {
    static const struct { int v; const char *name; } isas[] = {
        {0x1, "sse41"}, {0x3, "avx"}, {0x7, "avx2"}, {0x407, "avx2_vnni"}, {0xf, "avx512_mic"},
        {0x1f, "avx512_mic_4ops"}, {0x27, "avx512_core"}, {0x67, "avx512_core_vnni"},
        {0xe7, "avx512_core_bf16"}, {0x3e7, "avx512_core_amx"},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(isas); i++)
        if (isas[i].v == isa) return isas[i].name;
    snprintf(buf, n, "isa 0x%x", (unsigned)isa);
    return buf;
}

/* oneDNN's bf16 kernels want AVX-512 BF16 (or AMX): dnnl_cpu_isa_t values
 * are bit sets, each holding the ones below it. Below that, oneDNN would
 * emulate bf16 on AVX-512 slower than fp32. */
static bool gr_cpu_isa_bf16(void) {
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & 0xe7u) == 0xe7u;
}

static void gr_cpu_configure(gr_backend *be, const gr_backend_opts *o) {
    gr_cpu *cpu = gr_cpu_backend_state(be);
    const char *h = gr_env_str(GR_ENV_HALF);
    cpu->bf16_native = o->precision == GR_PREC_BF16 && gr_cpu_isa_bf16() && cpu->conv_path == GR_CONV_ONEDNN &&
                       !(h && strcmp(h, "staged") == 0);
}

/* Whether every batched tensor of the step that holds floats is in bf16
 * (parameters, statistics, masks and indices are as built). */
static bool gr_cpu_all_bf16(const gr_kargs *a) {
    for (int k = 0; k < a->node->nin + a->node->nout; k++) {
        bool in = k < a->node->nin;
        const gr_tensor *t = in ? a->tin[k] : a->tout[k - a->node->nin];
        gr_elem e = in ? a->ein[k] : a->eout[k - a->node->nin];
        if (t->batched && (e == GR_F32 || e == GR_F16)) return false;
    }
    return true;
}

/* What the CPU kernel of each op takes: ops.def's cpu column. */
static const unsigned gr_cpu_caps[GR_OP_COUNT] = {
#define X(E, name, flags, bwd, cpu, cuda) [GR_OP_##E] = (cpu),
#include "../../graph/ops.def"
#undef X
};

/* The steps the CPU computes on bf16 storage as it is (the cpu column's
 * half bits): the oneDNN convolutions (an fp32 input batch is converted by
 * their reorders) and dense layers (oneDNN matmul; an fp32 input batch is
 * encoded), and relu, add, batchnorm, maxpool and global_avgpool with every
 * activation in bf16 (half_io.h). fp16 is always staged (no fp16 kernel is
 * used on the CPU). */
static bool gr_cpu_native_half(gr_backend *be, const gr_kargs *a) {
    const gr_cpu *cpu = gr_cpu_backend_state(be);
    if (!cpu->bf16_native) return false;
    for (int k = 0; k < a->node->nin; k++)
        if (a->ein[k] == GR_F16) return false;
    for (int k = 0; k < a->node->nout; k++)
        if (a->eout[k] == GR_F16) return false;
    const unsigned cap = gr_cpu_caps[a->node->op];
    if (cap & GR_CAP_HALF) return true;
    if (cap & GR_CAP_HALF_IN0) return a->ein[0] == GR_BF16;
    if (cap & GR_CAP_HALF_ALL) return gr_cpu_all_bf16(a);
    return false;
}

/* Channels-last with native bf16 (oneDNN's bf16 convolutions run on nhwc
 * without reordering activations; its fp32 ones have only reference
 * kernels for some nhwc shapes), as the cpu column says: the convolutions
 * and global_avgpool take each tensor in either layout, relu, add,
 * batchnorm and maxpool a shared one. */
static unsigned gr_cpu_op_caps(gr_backend *be, gr_op op) {
    (void)be;
    return gr_cpu_caps[op];
}

static void gr_cpu_layout_caps(gr_backend *be, gr_layout_cap *caps) {
    if (!gr_cpu_backend_state(be)->bf16_native) return;
    for (int i = 0; i < GR_OP_COUNT; i++) {
        if (gr_cpu_caps[i] & GR_CAP_NHWC_ANY) caps[i] = GR_LAYOUT_CAP_ANY;
        if (gr_cpu_caps[i] & GR_CAP_NHWC_SAME) caps[i] = GR_LAYOUT_CAP_SAME;
    }
}

static void gr_cpu_describe(gr_backend *be, char *buf, size_t n) {
    const gr_cpu *cpu = gr_cpu_backend_state(be);
    const dnnl_version_t *v = dnnl_version();
    char isa[32];
    snprintf(buf, n, "oneDNN %d.%d.%d, ISA %s; GEMM %s, conv %s; bf16 %s", v->major, v->minor, v->patch,
             gr_cpu_isa_name((int)dnnl_get_effective_cpu_isa(), isa, sizeof isa),
             cpu->gemm == GR_GEMM_OPENBLAS ? "openblas" : "onednn", cpu->conv_path == GR_CONV_REF ? "ref" : "onednn",
             !gr_cpu_isa_bf16() ? "staged (no AVX-512 BF16 or AMX)" : cpu->bf16_native ? "native" : "available");
    int blocked = gr_cpu_conv_onednn_nhwc_fallbacks(cpu);
    size_t len = strlen(buf);
    if (blocked && len < n)
        snprintf(buf + len, n - len, "; %d conv primitive%s blocked (oneDNN has no nhwc kernel for the shape)",
                 blocked, blocked == 1 ? "" : "s");
}

static const gr_backend_vtable gr_cpu_vtable = {
    .name = "cpu",
    .host_addressable = true,
    .kernels = gr_cpu_kernels,
    .alloc = gr_cpu_alloc,
    .dealloc = gr_cpu_dealloc,
    .zero = gr_cpu_zero,
    .upload = gr_cpu_copy,
    .download = gr_cpu_copy,
    .sync = gr_cpu_sync,
    .sgd = gr_cpu_sgd,
    .adamw = gr_cpu_adamw,
    .sumsq = gr_cpu_sumsq_be,
    .cast = gr_cpu_cast,
    .mem_info = gr_cpu_mem_info,
    .mem_peak = gr_cpu_mem_peak,
    .prepare = gr_cpu_prepare,
    .workspace = gr_cpu_workspace,
    .describe = gr_cpu_describe,
    .configure = gr_cpu_configure,
    .native_half = gr_cpu_native_half,
    .layout_caps = gr_cpu_layout_caps,
    .op_caps = gr_cpu_op_caps,
    .peak = gr_cpu_peak,
    .destroy = gr_cpu_destroy,
};

gr_cpu *gr_cpu_backend_state(gr_backend *be) {
    GR_ASSERT(be && be->vt == &gr_cpu_vtable && be->impl);
    return be->impl;
}

gr_status gr_cpu_backend_create(int threads, gr_backend **out, gr_error *err) {
    if (threads <= 0) threads = gr_host_cpus(); /* the affinity mask's (taskset, cpusets) */
    if (threads <= 0) threads = 1;
    /* checked here too: tests and benchmarks make backends without gr_env_check */
    gr_status st = gr_env_check_one(GR_ENV_GEMM, err);
    if (!st) st = gr_env_check_one(GR_ENV_CONV, err);
    if (st) return st;
    gr_cpu *cpu = gr_xcalloc(1, sizeof *cpu);
    bool known = gr_cpu_gemm_init(cpu, gr_env_str(GR_ENV_GEMM), threads) &&
                 gr_cpu_conv_set_path(cpu, gr_env_str(GR_ENV_CONV));
    GR_ASSERT(known); /* the table's names are the ones they take */
    cpu->cap = (size_t)gr_env_int(GR_ENV_MEMORY_LIMIT, 0);
    gr_backend *be = gr_xcalloc(1, sizeof *be);
    be->vt = &gr_cpu_vtable;
    be->impl = cpu;
    be->threads = threads;
    *out = be;
    return GR_OK;
}
