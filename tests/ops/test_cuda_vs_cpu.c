/* test_cuda_vs_cpu.c — every op of graph/ops.def on the CUDA backend against
 * the CPU reference, through the real pipeline (graph -> autodiff -> plan ->
 * gr_train_micro_step). Label `gpu`: exits 77 (skipped) without a device.
 *
 * Each case is a small model run on both backends from the same parameters
 * and batches: two training micro-steps accumulating into the grads arena
 * (dropout masks must match, both backends drawing them from the same
 * counter-based stream), then the eval plan on a full and a partial batch.
 * Every activation arena is filled with NaN before each run. Compared: the
 * loss stats of each run, the input's gradient (autodiff asked for it), every
 * parameter gradient, the batchnorm running stats, and the eval logits.
 * A second table runs each loss alone on the input batch (loss_graph.h:
 * mse, bce with logits, cross-entropy over the last axis of [n, T, C] with
 * ignored tokens and the accuracy metric top-k on the same logits),
 * comparing both stats, the metric's exactly (the same logits reach both)
 * and the input's gradient. A third runs models on int32 token ids
 * (token_graph.h: embedding, pos_embedding, a head tied to the embedding),
 * comparing the loss and every parameter gradient of a training pass and
 * the loss of an eval pass on a partial batch.
 * Afterwards every op of ops.def must have been in some case's graph.
 *
 * The table runs five times: strict fp32 and tf32 with cuDNN's heuristics,
 * fp32 with cudnn_benchmark (measured algorithms), then bf16 and fp16: the
 * graph stores its activations in half (graph/precision.c) on both
 * backends; the CPU computes them as it does for that precision (native
 * bf16 where the CPU has it, else fp32 on decoded copies), the GPU runs its
 * convs, GEMMs, batchnorm, activations and adds natively on the half arrays
 * (tensor cores, fp32 accumulation, the weights rounded to half) and stages
 * the rest; each half pass also checks that those steps did run natively
 * (ops_check_native). The input gradient and the logits are compared
 * decoded. Errors are NMSE =
 * sum((a-b)^2) / sum(b^2) per tensor, b the CPU's.
 *   fp32: forward results (logits, running stats) <= 1e-9, gradients <= 1e-8.
 *     Both sides round in fp32 but sum in different orders: the CPU's two
 *     paths (oneDNN; im2col + OpenBLAS) differ by at most 2e-13 forward and
 *     6e-12 in gradients on this table. TF32 used by mistake is ~1e-7, so
 *     the bounds sit between the two.
 *   tf32: forward <= 1e-5 (10-bit mantissas: NMSE ~1e-7 per GEMM), gradients
 *     <= 1e-3: rounding can move a relu input or a maxpool winner across its
 *     kink, and one such flip moves a whole element of an activation
 *     gradient, ~3e-4 in a small conv's weight gradient; a wrong kernel is
 *     off by 1e-2 or more.
 *   bf16/fp16: the GPU's TF32 products (~2^-11 relative) tip the rounding of
 *     a share of the stored values by one half-precision ulp (2^-8 for bf16,
 *     2^-11 for fp16): forward <= 1e-4 / 1e-5, gradients <= 1e-2 / 1e-3.
 *     Some models amplify that rounding in their gradients (batchnorm over a
 *     few values after relu kinks: the CPU's own bf16 gradients are up to
 *     0.07 from its fp32 ones in the ResNet blocks, 0.01 for a batchnorm
 *     after a conv; an H200's were 0.09 and 0.03 from the CPU's bf16 ones,
 *     out of the bounds above), so each half pass
 *     also trains the fp32 graph on the CPU, and a gradient out of bounds
 *     still passes when the device's is within HALF_SLACK times the CPU's
 *     half gradient's distance from the fp32 one: as accurate as the
 *     reference, only rounded elsewhere. A wrong kernel is far from both.
 *     The half passes start from parameters already rounded to the half
 *     type (ops_half_params): the GPU reads its convs' and GEMMs' weights
 *     as half copies, the CPU's staged fp16 path reads them in fp32, and
 *     that rounding alone moved the ResNet blocks' fp16 gradients 0.001 to
 *     0.01 from the fp32 run's on an H200 (the CPU's: 1e-4 to 3e-3), out
 *     of the rule above; on half values both sides read the same weights.
 * Such a flip is rare in fp32 (about once per hundred tables) but possible;
 * a failing case is therefore run once more on fresh parameters and inputs,
 * and fails the test only when that fails too — a real bug fails both. */
#include "cuda_cmp.h"
#include "loss_graph.h"
#include "token_graph.h"

#define N 6 /* micro-batch */

typedef struct ops_case {
    const char *name;
    const char *layers;     /* YAML flow list */
    int ndim;
    int64_t shape[3];       /* per sample */
    double label_smoothing;
    const char *blocks;     /* YAML flow map of model.blocks, or NULL */
} ops_case;

static const char *const resnet_blocks =
    "{basic: {args: {out: 8}, layers: ["
    "{conv: {filters: $out, kernel: 3, padding: 1, bias: false}}, batchnorm, relu, "
    "{conv: {filters: $out, kernel: 3, padding: 1, bias: false}}, batchnorm, "
    "{add: {}, input: [input, batchnorm1]}, relu]}, "
    "down: {args: {out: 8}, layers: ["
    "{conv: {filters: $out, kernel: 3, stride: 2, padding: 1, bias: false}}, batchnorm, relu, "
    "{conv: {filters: $out, kernel: 3, padding: 1, bias: false}}, batchnorm, "
    "{conv: {filters: $out, kernel: 1, stride: 2, bias: false}, input: input, name: proj}, "
    "{batchnorm: {}, name: proj_bn}, {add: {}, input: [batchnorm1, proj_bn]}, relu]}}";

/* No case puts a layer with a bias right before a batchnorm: that bias's
 * gradient is zero up to rounding, which no relative error can judge. */
static const ops_case cases[] = {
    /* dense and the elementwise activations */
    {"dense relu (flatten of a 3-D input)", "[flatten, {dense: {units: 16}}, relu, {dense: {units: 5}}]", 3,
     {2, 3, 4}, 0.0, NULL},
    {"dense without bias, sigmoid", "[{dense: {units: 12, bias: false}}, sigmoid, {dense: {units: 4}}]", 1, {10},
     0.1, NULL},
    {"tanh", "[{dense: {units: 12}}, tanh, {dense: {units: 4}}]", 1, {9}, 0.0, NULL},
    {"gelu", "[{dense: {units: 12}}, gelu, {dense: {units: 4}}]", 1, {9}, 0.1, NULL},
    {"gelu_tanh", "[{dense: {units: 12}}, gelu_tanh, {dense: {units: 4}}]", 1, {9}, 0.0, NULL},
    {"mlp chain", "[{dense: {units: 24}}, gelu, {dense: {units: 16}}, tanh, {dense: {units: 12}}, sigmoid, "
     "{dense: {units: 6}}]", 1, {33}, 0.1, NULL},
    /* attention: causal, and not, over more positions than a CPU tile */
    {"attention causal", "[{dense: {units: 24}}, {attention: {heads: 2}}, flatten, {dense: {units: 4}}]", 2, {6, 5},
     0.1, NULL},
    {"attention 70 positions, not causal", "[{dense: {units: 12}}, {attention: {heads: 1, causal: false}}, "
     "flatten, {dense: {units: 3}}]", 2, {70, 3}, 0.0, NULL},
    /* dropout: the masks must be the same bits on both backends */
    {"dropout after dense", "[{dense: {units: 32}}, {dropout: {rate: 0.3}}, relu, {dense: {units: 4}}]", 1, {10},
     0.0, NULL},
    {"dropout on the input and on feature maps", "[{dropout: {rate: 0.2}}, {conv: {filters: 6, kernel: 3, "
     "padding: 1}}, {dropout: {rate: 0.5}}, tanh, flatten, {dense: {units: 5}}]", 3, {3, 6, 6}, 0.1, NULL},
    /* conv geometries */
    {"conv 3x3 pad 1", "[{conv: {filters: 8, kernel: 3, padding: 1}}, relu, flatten, {dense: {units: 5}}]", 3,
     {3, 8, 8}, 0.0, NULL},
    {"conv 3x3 stride 2 pad 1 no bias", "[{conv: {filters: 6, kernel: 3, stride: 2, padding: 1, bias: false}}, "
     "tanh, flatten, {dense: {units: 5}}]", 3, {4, 9, 7}, 0.1, NULL},
    {"conv 1x1", "[{conv: {filters: 8, kernel: 1}}, sigmoid, flatten, {dense: {units: 4}}]", 3, {5, 4, 5}, 0.0,
     NULL},
    {"conv 1x1 stride 2 no bias", "[{conv: {filters: 4, kernel: 1, stride: 2, bias: false}}, tanh, flatten, "
     "{dense: {units: 4}}]", 3, {6, 7, 7}, 0.0, NULL},
    {"conv groups 2", "[{conv: {filters: 8, kernel: 3, padding: 1, groups: 2}}, tanh, flatten, "
     "{dense: {units: 5}}]", 3, {4, 6, 6}, 0.0, NULL},
    {"conv depthwise x2", "[{conv: {filters: 12, kernel: 3, padding: 1, groups: 6}}, gelu, flatten, "
     "{dense: {units: 5}}]", 3, {6, 5, 5}, 0.0, NULL},
    {"conv non-square kernels, strides, pads", "[{conv: {filters: 5, kernel: [3, 1], stride: [2, 1], "
     "padding: [1, 0]}}, tanh, {conv: {filters: 4, kernel: [2, 3], stride: [1, 2], padding: [0, 2]}}, flatten, "
     "{dense: {units: 4}}]", 3, {3, 8, 7}, 0.0, NULL},
    {"conv 7x7 stride 2 pad 3", "[{conv: {filters: 8, kernel: 7, stride: 2, padding: 3}}, relu, flatten, "
     "{dense: {units: 5}}]", 3, {3, 19, 17}, 0.0, NULL},
    {"conv 16 -> 32 -> 32 channels", "[{conv: {filters: 32, kernel: 3, padding: 1}}, tanh, {conv: {filters: 32, "
     "kernel: 3, stride: 2, padding: 1}}, flatten, {dense: {units: 10}}]", 3, {16, 12, 12}, 0.1, NULL},
    /* batchnorm: batch statistics in training, running stats in eval */
    {"batchnorm after conv", "[{conv: {filters: 8, kernel: 3, padding: 1, bias: false}}, batchnorm, relu, "
     "flatten, {dense: {units: 5}}]", 3, {3, 6, 6}, 0.0, NULL},
    {"batchnorm on the input, momentum 0.3 eps 0.01", "[{batchnorm: {momentum: 0.3, eps: 0.01}}, tanh, flatten, "
     "{dense: {units: 4}}]", 3, {3, 4, 5}, 0.0, NULL},
    {"batchnorm 2-D after dense", "[{dense: {units: 10, bias: false}}, batchnorm, tanh, {dense: {units: 4}}]", 1,
     {7}, 0.1, NULL},
    /* layernorm: over the last axis, C = 13 and a GPT-style block (dense, layernorm, gelu_tanh) */
    {"layernorm [n, 3, 13]", "[layernorm, flatten, {dense: {units: 4}}]", 2, {3, 13}, 0.0, NULL},
    {"layernorm block, no bias, eps 1e-3", "[{dense: {units: 16}}, layernorm, gelu_tanh, {layernorm: {bias: false, "
     "eps: 1e-3}}, flatten, {dense: {units: 4}}]", 2, {5, 7}, 0.1, NULL},
    /* pooling */
    {"maxpool 2x2 after conv", "[{conv: {filters: 4, kernel: 3, padding: 1}}, {maxpool: {kernel: 2}}, flatten, "
     "{dense: {units: 5}}]", 3, {3, 8, 8}, 0.0, NULL},
    {"maxpool 3x3 stride 2 pad 1", "[{maxpool: {kernel: 3, stride: 2, padding: 1}}, flatten, {dense: {units: 4}}]",
     3, {2, 9, 9}, 0.0, NULL},
    {"maxpool [2,3] stride [1,2] pad [1,1]", "[{maxpool: {kernel: [2, 3], stride: [1, 2], padding: [1, 1]}}, "
     "flatten, {dense: {units: 4}}]", 3, {2, 5, 6}, 0.0, NULL},
    {"avgpool 2x2", "[{avgpool: {kernel: 2}}, flatten, {dense: {units: 4}}]", 3, {2, 6, 6}, 0.0, NULL},
    {"avgpool 3x3 stride 2 pad 1, pad counted", "[{avgpool: {kernel: 3, stride: 2, padding: 1}}, flatten, "
     "{dense: {units: 4}}]", 3, {2, 7, 7}, 0.0, NULL},
    {"avgpool 3x3 stride 2 pad 1, pad not counted", "[{avgpool: {kernel: 3, stride: 2, padding: 1, "
     "count_include_pad: false}}, flatten, {dense: {units: 4}}]", 3, {2, 7, 7}, 0.0, NULL},
    {"avgpool [3,2] stride [2,1] pad [1,0], pad not counted", "[{avgpool: {kernel: [3, 2], stride: [2, 1], "
     "padding: [1, 0], count_include_pad: false}}, flatten, {dense: {units: 4}}]", 3, {2, 6, 4}, 0.0, NULL},
    {"global_avgpool after conv", "[{conv: {filters: 6, kernel: 3}}, relu, global_avgpool, flatten, "
     "{dense: {units: 5}}]", 3, {3, 7, 6}, 0.0, NULL},
    {"global_avgpool on the input", "[global_avgpool, flatten, {dense: {units: 4}}]", 3, {5, 3, 4}, 0.1, NULL},
    /* graphs: fan-out (partial gradients summed), add, concat, blocks */
    {"add: conv residual", "[{conv: {filters: 4, kernel: 3, padding: 1}, name: a}, relu, {conv: {filters: 4, "
     "kernel: 3, padding: 1}}, {add: {}, input: [a, conv1]}, flatten, {dense: {units: 5}}]", 3, {3, 6, 6}, 0.0,
     NULL},
    {"add of three, one tensor read thrice", "[flatten, {dense: {units: 5}, name: a}, {sigmoid: {}, input: a, "
     "name: s}, {tanh: {}, input: a, name: t}, {add: {}, input: [a, s, t]}, {dense: {units: 3}}]", 3, {1, 2, 3},
     0.0, NULL},
    {"the model input read twice", "[{conv: {filters: 4, kernel: 3, padding: 1}, name: a}, {conv: {filters: 4, "
     "kernel: 1}, input: input}, {add: {}, input: [a, conv1]}, flatten, {dense: {units: 3}}]", 3, {3, 5, 5}, 0.0,
     NULL},
    {"concat of three along channels", "[{conv: {filters: 3, kernel: 3, padding: 1}, name: a}, {conv: {filters: 5, "
     "kernel: 1}, input: input, name: b}, {avgpool: {kernel: 3, stride: 1, padding: 1}, input: input, name: c}, "
     "{concat: {}, input: [a, b, c]}, relu, flatten, {dense: {units: 5}}]", 3, {2, 5, 5}, 0.0, NULL},
    {"concat of dense features", "[flatten, {dense: {units: 4}, name: a}, {dense: {units: 3}, name: b}, gelu, "
     "{concat: {}, input: [a, gelu0]}, {dense: {units: 3}}]", 3, {1, 2, 3}, 0.0, NULL},
    /* shapes: reshape, permute, slice; a split rejoined along another axis; broadcast add and mul */
    {"permute, slice, reshape", "[{conv: {filters: 4, kernel: 3, padding: 1}}, {permute: {axes: [0, 2, 3, 1]}}, "
     "tanh, {slice: {axis: 2, start: 1, end: 5}}, {reshape: {shape: [-1, 4]}}, flatten, {dense: {units: 5}}]", 3,
     {3, 6, 6}, 0.0, NULL},
    {"split by slices, concat along axis 2", "[{conv: {filters: 4, kernel: 1}, name: c}, {slice: {axis: 2, end: 2}, "
     "name: a}, {slice: {axis: 2, start: 2, end: 5}, input: c, name: b}, {concat: {axis: 2}, input: [b, a]}, "
     "sigmoid, flatten, {dense: {units: 4}}]", 3, {3, 5, 4}, 0.0, NULL},
    {"broadcast mul and add: channel gating", "[{conv: {filters: 6, kernel: 3, padding: 1}, name: x}, "
     "global_avgpool, sigmoid, {mul: {}, input: [x, sigmoid0]}, {add: {}, input: [mul0, global_avgpool0]}, relu, "
     "flatten, {dense: {units: 5}}]", 3, {3, 6, 6}, 0.0, NULL},
    {"broadcast mul and add of features, concat -1", "[{dense: {units: 12}}, {reshape: {shape: [3, 4]}, name: a}, "
     "{dense: {units: 4}, input: input}, {reshape: {shape: [1, 4]}, name: b}, {mul: {}, input: [a, b]}, "
     "{add: {}, input: [mul0, b]}, tanh, {concat: {axis: -1}, input: [tanh0, a]}, flatten, {dense: {units: 4}}]", 1,
     {10}, 0.1, NULL},
    {"pos_embedding on dense features", "[{dense: {units: 12}}, {reshape: {shape: [4, 3]}}, "
     "{pos_embedding: {max_len: 6}}, tanh, flatten, {dense: {units: 5}}]", 1, {10}, 0.0, NULL},
    {"blocks: ResNet basic and down blocks", "[{conv: {filters: 8, kernel: 3, padding: 1, bias: false}}, "
     "batchnorm, relu, {basic: {out: 8}, repeat: 2}, {down: {out: 12}}, global_avgpool, flatten, "
     "{dense: {units: 5}}]", 3, {3, 8, 8}, 0.1, resnet_blocks},
    {"small CNN with everything", "[{conv: {filters: 8, kernel: 3, padding: 1, bias: false}}, batchnorm, relu, "
     "{maxpool: {kernel: 3, stride: 2, padding: 1}}, {conv: {filters: 12, kernel: 3, padding: 1}}, gelu, "
     "{avgpool: {kernel: 2}}, {dropout: {rate: 0.25}}, flatten, {dense: {units: 16}}, sigmoid, "
     "{dense: {units: 7}}]", 3, {3, 12, 12}, 0.1, NULL},
};

typedef struct ops_pass {
    const char *name;
    gr_backend_opts opts;
    double fwd_tol, bwd_tol;  /* NMSE of forward results / of gradients */
    int train_correct_slack;  /* how far the training runs' correct counts may differ */
} ops_pass;

static const ops_pass passes[] = {
    /* tf32: a sample whose two top logits are within rounding of each other
     * may count as correct on one backend only */
    {"fp32", {.precision = GR_PREC_FP32, .cudnn_benchmark = false, .cuda_graph = false}, 1e-9, 1e-8, 0},
    {"tf32", {.precision = GR_PREC_TF32, .cudnn_benchmark = false, .cuda_graph = false}, 1e-5, 1e-3, 1},
    {"fp32+benchmark", {.precision = GR_PREC_FP32, .cudnn_benchmark = true, .cuda_graph = false}, 1e-9, 1e-8, 0},
    /* half storage (emulated, both backends) with the GPU's GEMMs and convs on TF32 */
    {"bf16", {.precision = GR_PREC_BF16, .cudnn_benchmark = false, .cuda_graph = false}, 1e-4, 1e-2, 1},
    {"fp16", {.precision = GR_PREC_FP16, .cudnn_benchmark = false, .cuda_graph = false}, 1e-5, 1e-3, 1},
};

/* The largest errors seen in a pass, and where. */
typedef struct ops_worst {
    double fwd, bwd;
    char fwd_at[512], bwd_at[512];
} ops_worst;

/* One comparison of an attempt: prints and counts it when out of bounds,
 * keeps the pass's worst. */
typedef struct ops_ctx {
    const ops_case *c;
    const ops_pass *ps;
    ops_worst *worst;
    int bad, attempt;
    double fwd, bwd;        /* this attempt's largest */
    int excused;            /* gradients out of bounds but as near the fp32 run's as the CPU's */
} ops_ctx;

#define HALF_SLACK 4.0

/* A half pass's parameters, rounded to its half type in place (what the
 * device's weight casts then leave as they are); fp32/tf32: unchanged. */
static void ops_half_params(float *host, int64_t n, gr_precision p) {
    const gr_half_fmt f = p == GR_PREC_FP16 ? GR_HALF_FP16 : p == GR_PREC_BF16 ? GR_HALF_BF16 : GR_HALF_NONE;
    for (int64_t i = 0; f != GR_HALF_NONE && i < n; i++) host[i] = gr_round_half_hd(f, host[i]);
}

/* Keeps the attempt's and the pass's largest errors. */
static void ops_record(ops_ctx *x, const char *what, double nmse, bool fwd) {
    double *w = fwd ? &x->worst->fwd : &x->worst->bwd;
    char *at = fwd ? x->worst->fwd_at : x->worst->bwd_at;
    double *mine = fwd ? &x->fwd : &x->bwd;
    if (!(nmse <= *mine)) *mine = nmse;
    if (!(nmse <= *w)) { /* also takes the first NaN/inf */
        *w = nmse;
        snprintf(at, sizeof x->worst->fwd_at, "%s: %s", x->c->name, what);
    }
}

static void ops_check(ops_ctx *x, const char *what, double nmse, bool fwd) {
    const double tol = fwd ? x->ps->fwd_tol : x->ps->bwd_tol;
    ops_record(x, what, nmse, fwd);
    if (!(nmse <= tol)) {
        x->bad++;
        fprintf(stderr, "  %s [%s, attempt %d]: %s: NMSE %.3g > %.1g\n", x->c->name, x->ps->name, x->attempt, what,
                nmse, tol);
    }
}

/* A gradient of n values: the device's against the CPU's, and, out of
 * bounds in a half pass, both against the CPU's fp32 run's (f32). */
static void ops_check_grad(ops_ctx *x, const char *what, const float *dev, const float *cpu, const float *f32,
                           int64_t n) {
    const double e = gr_cmp_nmse(dev, cpu, n);
    if (f32 && !(e <= x->ps->bwd_tol) && isfinite(e)) {
        const double ed = gr_cmp_nmse(dev, f32, n), ec = gr_cmp_nmse(cpu, f32, n);
        const bool near = ed <= HALF_SLACK * ec;
        fprintf(stderr, "  %s [%s, attempt %d]: %s: NMSE %.3g > %.1g; from the fp32 run: device %.3g, cpu %.3g%s\n",
                x->c->name, x->ps->name, x->attempt, what, e, x->ps->bwd_tol, ed, ec,
                near ? " (as near: passes)" : "");
        ops_record(x, what, e, false);
        if (near) x->excused++;
        else x->bad++;
        return;
    }
    ops_check(x, what, e, false);
}

/* Loss sums agree to the square root of the forward NMSE bound, relative. */
static void ops_check_loss(ops_ctx *x, const char *what, double dev, double ref) {
    double rel = fabs(dev - ref) / GR_MAX(fabs(ref), 1e-6);
    if (!(rel <= sqrt(x->ps->fwd_tol)) || !isfinite(dev)) {
        x->bad++;
        fprintf(stderr, "  %s [%s, attempt %d]: %s: loss sum %.9g, cpu %.9g\n", x->c->name, x->ps->name, x->attempt,
                what, dev, ref);
    }
}

static void ops_check_correct(ops_ctx *x, const char *what, double dev, double ref, int slack) {
    if (!(fabs(dev - ref) <= slack)) {
        x->bad++;
        fprintf(stderr, "  %s [%s, attempt %d]: %s: %g correct, cpu %g (%d allowed apart)\n", x->c->name,
                x->ps->name, x->attempt, what, dev, ref, slack);
    }
}

/* One run of a case on fresh parameters and inputs from seed; returns the
 * number of comparisons out of bounds (or 1 when it cannot even run). be[0]
 * is the CPU reference, be[1] the device. */
/* Half passes: the device's train plan runs every conv, dense, batchnorm,
 * activation and add step whose activations are all in the one half type
 * natively (not staged through fp32 copies). */
static void ops_check_native(ops_ctx *x, const gr_plan *p) {
    for (int i = 0; i < p->steps.n; i++) {
        const gr_kargs *a = &p->steps.step[i];
        switch (a->node->op) {
        case GR_OP_CONV: case GR_OP_CONV_BWD_DATA: case GR_OP_DENSE: case GR_OP_DENSE_BWD_DATA:
        case GR_OP_BATCHNORM: case GR_OP_BATCHNORM_BWD: case GR_OP_RELU: case GR_OP_RELU_BWD: case GR_OP_ADD: break;
        default: continue;
        }
        bool all_half = true;
        gr_elem h = a->eout[0];
        for (int k = 0; k < a->node->nin + a->node->nout; k++) {
            bool in = k < a->node->nin;
            const gr_tensor *t = in ? a->tin[k] : a->tout[k - a->node->nin];
            gr_elem e = in ? a->ein[k] : a->eout[k - a->node->nin];
            if (t->batched && e != GR_I32 && e != GR_U8 && (e != h || e == GR_F32)) all_half = false;
        }
        if (all_half && a->staged) {
            x->bad++;
            fprintf(stderr, "  %s [%s]: step %s (%s) is staged, not run on its half storage\n", x->c->name,
                    x->ps->name, gr_op_name(a->node->op), gr_elem_name(h));
        }
    }
}

/* A half pass's case as an fp32 graph, trained on the CPU beside the two
 * runs from the same parameters and batches (ops_check_grad's f32). */
typedef struct ops_ref32 {
    gr_backend *be;  /* NULL: none */
    gr_cmp_model cm;
    gr_model m;
    gr_plan tp;
    int gx_t;
} ops_ref32;

static void ref32_open(ops_ref32 *r, gr_backend *be, const ops_case *c, const gr_graph *g, const float *host) {
    gr_error err = {0};
    memset(r, 0, sizeof *r);
    if (!be) return;
    bool ok = gr_cmp_model_build(&r->cm, c->layers, c->blocks, c->shape, c->ndim, N, c->label_smoothing, true,
                                 GR_PREC_FP32, &err) == GR_OK;
    ok = ok && r->cm.g.n_params == g->n_params && r->cm.g.n_trainable == g->n_trainable &&
         gr_model_init(&r->m, &r->cm.g, be, 0, &err) == GR_OK &&
         gr_plan_compile(&r->tp, &r->m, &r->cm.g, GR_PLAN_TRAIN, true, &err) == GR_OK;
    r->gx_t = ok ? r->cm.g.tensors[r->cm.g.input].grad : -1;
    if (r->gx_t < 0) {
        fprintf(stderr, "  %s: no fp32 run to judge the half gradients by: %s\n", c->name, err.msg);
        return;
    }
    gr_backend_upload(be, r->m.params, host, (size_t)g->n_params * sizeof(float));
    r->be = be;
}

/* One training micro-step of the fp32 graph: its input gradient (n values), or NULL */
static float *ref32_step(ops_ref32 *r, const gr_batch *bt, gr_exec_ctx *ctx, int64_t n) {
    if (!r->be) return NULL;
    double loss = 0.0, correct = 0.0;
    gr_train_micro_step(&r->tp, bt, ctx, &loss, &correct);
    return gr_cmp_fetch(r->be, gr_plan_ptr(&r->tp, r->gx_t), n);
}

static void ref32_close(ops_ref32 *r) {
    gr_plan_free(&r->tp);
    gr_model_free(&r->m);
    gr_cmp_model_free(&r->cm);
}

static int ops_attempt(const ops_case *c, const ops_pass *ps, gr_backend *const be[2], gr_backend *ref_be,
                       uint64_t seed, int attempt, bool covered[GR_OP_COUNT], ops_worst *worst) {
    ops_ctx x = {c, ps, worst, 0, attempt, 0.0, 0.0, 0};
    gr_error err = {0};
    gr_cmp_model cm;
    if (gr_cmp_model_build(&cm, c->layers, c->blocks, c->shape, c->ndim, N, c->label_smoothing, true,
                           ps->opts.precision, &err)) {
        fprintf(stderr, "  %s: %s\n", c->name, err.msg);
        gr_cmp_model_free(&cm);
        return 1;
    }
    const gr_graph *g = &cm.g;
    const int64_t per = gr_tensor_sample_numel(&g->tensors[g->input]), k = g->n_classes;
    const int gx_t = g->tensors[g->input].grad;
    float *host = gr_cmp_init_params(g, seed);
    ops_half_params(host, g->n_params, ps->opts.precision);
    gr_model m[2];
    gr_plan tp[2], ep[2];
    memset(m, 0, sizeof m);
    memset(tp, 0, sizeof tp);
    memset(ep, 0, sizeof ep);
    float *xb = gr_xmalloc((size_t)(N * per) * sizeof *xb);
    int32_t yb[N];
    bool ready = gx_t >= 0;
    if (gx_t < 0) fprintf(stderr, "  %s: the input has no gradient\n", c->name);
    for (int b = 0; b < 2 && ready; b++) {
        if (gr_model_init(&m[b], g, be[b], 0, &err) || gr_plan_compile(&tp[b], &m[b], g, GR_PLAN_TRAIN, true, &err) ||
            gr_plan_compile(&ep[b], &m[b], g, GR_PLAN_EVAL, true, &err)) {
            fprintf(stderr, "  %s on %s: %s\n", c->name, gr_backend_name(be[b]), err.msg);
            ready = false;
            break;
        }
        gr_backend_upload(be[b], m[b].params, host, (size_t)g->n_params * sizeof(float));
    }
    if (!ready) x.bad = 1;
    else
        for (int i = 0; i < g->n_nodes; i++) covered[g->nodes[i].op] = true;
    if (ready) ops_check_native(&x, &tp[1]);
    ops_ref32 r32;
    ref32_open(&r32, ready ? ref_be : NULL, c, g, host);

    /* training: two micro-steps adding into the same grads */
    for (int s = 0; s < 2 && ready; s++) {
        gr_cmp_batch(g, N, gr_hash64(seed, 100u + (uint64_t)s), xb, yb);
        gr_batch bt = {.x = xb, .y = yb, .n = N};
        gr_exec_ctx ctx = {.training = true, .rng_key = gr_hash64(seed, 200u + (uint64_t)s),
                           .grad_scale = 1.0f / (float)(2 * N)};
        double loss[2] = {0.0, 0.0}, correct[2] = {0.0, 0.0};
        float *gx[2];
        for (int b = 0; b < 2; b++) {
            gr_cmp_poison(&tp[b]);
            gr_train_micro_step(&tp[b], &bt, &ctx, &loss[b], &correct[b]);
            gx[b] = gr_cmp_fetch_as(be[b], gr_plan_ptr(&tp[b], gx_t), g->tensors[gx_t].elem, N * per);
        }
        char what[64];
        snprintf(what, sizeof what, "train micro-step %d", s);
        ops_check_loss(&x, what, loss[1], loss[0]);
        ops_check_correct(&x, what, correct[1], correct[0], ps->train_correct_slack);
        float *gx32 = ref32_step(&r32, &bt, &ctx, N * per);
        snprintf(what, sizeof what, "input gradient, micro-step %d", s);
        ops_check_grad(&x, what, gx[1], gx[0], gx32, N * per);
        free(gx[0]);
        free(gx[1]);
        free(gx32);
    }
    if (ready) {
        float *gw[2], *pw[2];
        for (int b = 0; b < 2; b++) {
            gw[b] = gr_cmp_fetch(be[b], m[b].grads, g->n_trainable);
            pw[b] = gr_cmp_fetch(be[b], m[b].params, g->n_params);
        }
        float *gw32 = r32.be ? gr_cmp_fetch(r32.be, r32.m.grads, g->n_trainable) : NULL;
        for (int t = 0; t < g->n_tensors; t++) {
            const gr_tensor *tt = &g->tensors[t];
            const int64_t o = tt->param_offset;
            if (tt->kind == GR_TK_PARAM)
                ops_check_grad(&x, tt->name, gw[1] + o, gw[0] + o, gw32 ? gw32 + o : NULL, gr_tensor_numel(tt));
            else if (tt->kind == GR_TK_STATE)
                ops_check(&x, tt->name, gr_cmp_nmse(pw[1] + tt->param_offset, pw[0] + tt->param_offset,
                                                    gr_tensor_numel(tt)), true);
        }
        /* a pass reads the weights and must leave them as they were */
        if (memcmp(pw[1], host, (size_t)g->n_trainable * sizeof(float)) != 0) {
            x.bad++;
            fprintf(stderr, "  %s [%s]: the training passes changed the device's weights\n", c->name, ps->name);
        }
        for (int b = 0; b < 2; b++) {
            free(gw[b]);
            free(pw[b]);
        }
        free(gw32);
    }
    ref32_close(&r32);

    /* eval: running stats, dropout off; a full batch, then a partial one */
    for (int e = 0; e < 2 && ready; e++) {
        const int64_t n = e == 0 ? N : N - 2;
        gr_cmp_batch(g, n, gr_hash64(seed, 300u + (uint64_t)e), xb, yb);
        gr_batch bt = {.x = xb, .y = yb, .n = n};
        gr_exec_ctx ctx = {.training = false, .rng_key = 0, .grad_scale = 0.0f};
        double loss[2] = {0.0, 0.0}, correct[2] = {0.0, 0.0};
        float *z[2];
        for (int b = 0; b < 2; b++) {
            gr_cmp_poison(&ep[b]);
            gr_train_micro_step(&ep[b], &bt, &ctx, &loss[b], &correct[b]);
            z[b] = gr_cmp_fetch_as(be[b], gr_plan_ptr(&ep[b], g->logits), g->tensors[g->logits].elem, n * k);
        }
        double zmax = 0.0;
        for (int64_t i = 0; i < n * k; i++) zmax = GR_MAX(zmax, fabs((double)z[0][i]));
        char what[64];
        snprintf(what, sizeof what, "eval logits, n %lld", (long long)n);
        ops_check(&x, what, gr_cmp_nmse(z[1], z[0], n * k), true);
        snprintf(what, sizeof what, "eval, n %lld", (long long)n);
        ops_check_loss(&x, what, loss[1], loss[0]);
        ops_check_correct(&x, what, correct[1], correct[0],
                          gr_cmp_near_ties(z[0], n, k, 20.0 * sqrt(ps->fwd_tol) * (zmax + 1e-3)));
        free(z[0]);
        free(z[1]);
    }

    for (int b = 0; b < 2; b++) {
        gr_plan_free(&ep[b]);
        gr_plan_free(&tp[b]);
        gr_model_free(&m[b]);
    }
    free(xb);
    free(host);
    gr_cmp_model_free(&cm);
    /* one line per attempt, flushed: when a kernel aborts, the case after
     * the last line is the one that ran it */
    printf("%-15s %-56s forward %-9.3g gradients %-9.3g%s%s\n", ps->name, c->name, x.fwd, x.bwd,
           x.bad ? "  out of bounds" : "", x.excused ? "  (some as near the fp32 run as the cpu's)" : "");
    fflush(stdout);
    return x.bad;
}

/* ---- the losses alone: the input batch is the prediction ---- */

static const gr_lg_case loss_cases[] = {
    {"loss: mse [n, 7]", GR_OP_MSE, 1, {7}, 0.0, -100, 0, 0},
    {"loss: mse [n, 3, 5, 4]", GR_OP_MSE, 3, {3, 5, 4}, 0.0, -100, 0, 0},
    {"loss: bce_with_logits [n, 9]", GR_OP_BCE_WITH_LOGITS, 1, {9}, 0.0, -100, 0, 0},
    {"loss: bce_with_logits [n, 4, 300]", GR_OP_BCE_WITH_LOGITS, 2, {4, 300}, 0.0, -100, 0, 0},
    {"loss: cross-entropy [n, 12, 33] smoothing 0.1, ignore -100, top-5", GR_OP_SOFTMAX_CE, 2, {12, 33}, 0.1, -100,
     4, 5},
    {"loss: cross-entropy [n, 40, 10] ignore 3, top-1", GR_OP_SOFTMAX_CE, 2, {40, 10}, 0.0, 3, 0, 1},
    {"loss: cross-entropy [n, 2, 3, 50] all ignored", GR_OP_SOFTMAX_CE, 3, {2, 3, 50}, 0.0, -100, 1, 2},
};

/* The two stats pairs (loss, metric) of one run, the count and metric exact. */
static void loss_check_stats(ops_ctx *x, const char *what, const float dev[4], const float ref[4]) {
    if (ref[1] > 0.0f) ops_check_loss(x, what, dev[0], ref[0]);
    else if (dev[0] != 0.0f || ref[0] != 0.0f) { /* nothing counted: a zero sum */
        x->bad++;
        fprintf(stderr, "  %s [%s]: %s: nothing counted, loss sum %g, cpu %g\n", x->c->name, x->ps->name, what, dev[0],
                ref[0]);
    }
    if (dev[1] != ref[1] || dev[2] != ref[2] || dev[3] != ref[3]) {
        x->bad++;
        fprintf(stderr, "  %s [%s]: %s: count %g, metric [%g, %g]; cpu %g, [%g, %g]\n", x->c->name, x->ps->name, what,
                dev[1], dev[2], dev[3], ref[1], ref[2], ref[3]);
    }
}

static int loss_attempt(const gr_lg_case *c, const ops_pass *ps, gr_backend *const be[2], uint64_t seed, int attempt,
                        bool covered[GR_OP_COUNT], ops_worst *worst) {
    const ops_case oc = {c->name, NULL, 0, {0}, 0.0, NULL};
    ops_ctx x = {&oc, ps, worst, 0, attempt, 0.0, 0.0, 0};
    gr_error err = {0};
    gr_graph g;
    if (gr_lg_build(c, N, &g, &err)) {
        fprintf(stderr, "  %s: %s\n", c->name, err.msg);
        gr_graph_free(&g);
        return 1;
    }
    gr_autodiff(&g, true);
    gr_graph_set_precision(&g, ps->opts.precision);
    const int gx_t = g.tensors[g.input].grad;
    gr_model m[2];
    gr_plan tp[2], ep[2];
    memset(m, 0, sizeof m);
    memset(tp, 0, sizeof tp);
    memset(ep, 0, sizeof ep);
    bool ready = gx_t >= 0;
    for (int b = 0; b < 2 && ready; b++)
        if (gr_model_init(&m[b], &g, be[b], 0, &err) || gr_plan_compile(&tp[b], &m[b], &g, GR_PLAN_TRAIN, true, &err) ||
            gr_plan_compile(&ep[b], &m[b], &g, GR_PLAN_EVAL, true, &err)) {
            fprintf(stderr, "  %s on %s: %s\n", c->name, gr_backend_name(be[b]), err.msg);
            ready = false;
        }
    if (!ready) x.bad = 1;
    else
        for (int i = 0; i < g.n_nodes; i++) covered[g.nodes[i].op] = true;
    const int64_t nx = gr_lg_x_numel(&g, N);
    float *xb = gr_xmalloc((size_t)nx * sizeof *xb);
    void *tb = gr_xmalloc((size_t)gr_lg_t_numel(&g, N) * 4u);
    /* a training pass (the input's gradient), then the eval plan on a partial batch */
    for (int e = 0; e < 2 && ready; e++) {
        const int64_t n = e == 0 ? N : N - 2;
        gr_plan *p = e == 0 ? tp : ep;
        gr_lg_fill(c, &g, n, gr_hash64(seed, 100u + (uint64_t)e), c->op == GR_OP_BCE_WITH_LOGITS ? 8.0f : 3.0f, xb, tb);
        gr_exec_ctx ctx = {.training = e == 0, .rng_key = 1, .grad_scale = e == 0 ? 1.0f / (float)N : 0.0f};
        float st[2][4], *gx[2] = {NULL, NULL};
        for (int b = 0; b < 2; b++) {
            gr_cmp_poison(&p[b]);
            gr_lg_upload(&p[b], &g, n, xb, tb);
            gr_plan_run(&p[b], n, &ctx);
            gr_lg_stats(&p[b], &g, st[b], st[b] + 2);
            if (e == 0) gx[b] = gr_cmp_fetch_as(be[b], gr_plan_ptr(&p[b], gx_t), g.tensors[gx_t].elem, nx);
        }
        loss_check_stats(&x, e == 0 ? "train" : "eval, partial batch", st[1], st[0]);
        if (e == 0) ops_check(&x, "input gradient", gr_cmp_nmse(gx[1], gx[0], nx), false);
        free(gx[0]);
        free(gx[1]);
    }
    for (int b = 0; b < 2; b++) {
        gr_plan_free(&ep[b]);
        gr_plan_free(&tp[b]);
        gr_model_free(&m[b]);
    }
    free(xb);
    free(tb);
    gr_graph_free(&g);
    printf("%-15s %-56s forward %-9.3g gradients %-9.3g%s\n", ps->name, c->name, x.fwd, x.bwd,
           x.bad ? "  out of bounds" : "");
    fflush(stdout);
    return x.bad;
}

/* ---- models on token ids: the embeddings ---- */

static const gr_tk_case token_cases[] = {
    {"tokens: embedding [n, 12] of 25 ids, dense head", "[{embedding: {vocab: 40, dim: 16}}, gelu, "
     "{dense: {units: 10}}]", 12, 25},
    {"tokens: wte + wpe (T == max_len), head tied to wte", "[{embedding: {vocab: 50, dim: 24, init_std: 0.5}, "
     "name: wte}, {pos_embedding: {max_len: 16, init_std: 0.5}}, tanh, {dense: {units: 50, tied: wte, bias: false}}]",
     16, 50},
    {"tokens: wte + wpe, vocab 300, dim 260", "[{embedding: {vocab: 300, dim: 260, init_std: 0.1}}, "
     "{pos_embedding: {max_len: 32, init_std: 0.1}}, tanh, {dense: {units: 7}}]", 20, 300},
    {"tokens: one id a sample", "[{embedding: {vocab: 9, dim: 5}}, {dense: {units: 4}}]", 0, 6},
};

static int token_attempt(const gr_tk_case *c, const ops_pass *ps, gr_backend *const be[2], uint64_t seed, int attempt,
                         bool covered[GR_OP_COUNT], ops_worst *worst) {
    const ops_case oc = {c->name, NULL, 0, {0}, 0.0, NULL};
    ops_ctx x = {&oc, ps, worst, 0, attempt, 0.0, 0.0, 0};
    gr_error err = {0};
    gr_tk_model tm;
    if (gr_tk_build(&tm, c, N, ps->opts.precision, &err)) {
        fprintf(stderr, "  %s: %s\n", c->name, err.msg);
        gr_tk_free(&tm);
        return 1;
    }
    const gr_graph *g = &tm.g;
    float *host = gr_cmp_init_params(g, seed);
    ops_half_params(host, g->n_params, ps->opts.precision);
    gr_model m[2];
    gr_plan tp[2], ep[2];
    memset(m, 0, sizeof m);
    memset(tp, 0, sizeof tp);
    memset(ep, 0, sizeof ep);
    bool ready = true;
    for (int b = 0; b < 2 && ready; b++) {
        if (gr_model_init(&m[b], g, be[b], 0, &err) || gr_plan_compile(&tp[b], &m[b], g, GR_PLAN_TRAIN, true, &err) ||
            gr_plan_compile(&ep[b], &m[b], g, GR_PLAN_EVAL, true, &err)) {
            fprintf(stderr, "  %s on %s: %s\n", c->name, gr_backend_name(be[b]), err.msg);
            ready = false;
            break;
        }
        gr_backend_upload(be[b], m[b].params, host, (size_t)g->n_params * sizeof(float));
        gr_backend_zero(be[b], m[b].grads, (size_t)g->n_trainable * sizeof(float));
    }
    if (!ready) x.bad = 1;
    else
        for (int i = 0; i < g->n_nodes; i++) covered[g->nodes[i].op] = true;
    const int64_t nt = gr_tk_numel(g, N);
    int32_t *ids = gr_xmalloc((size_t)nt * sizeof *ids), *next = gr_xmalloc((size_t)nt * sizeof *next);
    /* a training pass (every parameter's gradient), then the eval plan on a partial batch */
    for (int e = 0; e < 2 && ready; e++) {
        const int64_t n = e == 0 ? N : N - 2;
        gr_plan *p = e == 0 ? tp : ep;
        gr_tk_fill(c, g, n, gr_hash64(seed, 100u + (uint64_t)e), ids, next);
        gr_exec_ctx ctx = {.training = e == 0, .rng_key = 1, .grad_scale = e == 0 ? 1.0f / (float)N : 0.0f};
        double loss[2];
        for (int b = 0; b < 2; b++) {
            gr_cmp_poison(&p[b]);
            loss[b] = gr_tk_run(&p[b], n, ids, next, &ctx);
        }
        ops_check_loss(&x, e == 0 ? "train" : "eval, partial batch", loss[1], loss[0]);
    }
    if (ready) {
        float *gw[2];
        for (int b = 0; b < 2; b++) gw[b] = gr_cmp_fetch(be[b], m[b].grads, g->n_trainable);
        for (int t = 0; t < g->n_tensors; t++) {
            const gr_tensor *tt = &g->tensors[t];
            if (tt->kind == GR_TK_PARAM)
                ops_check(&x, tt->name, gr_cmp_nmse(gw[1] + tt->param_offset, gw[0] + tt->param_offset,
                                                    gr_tensor_numel(tt)), false);
        }
        free(gw[0]);
        free(gw[1]);
    }
    for (int b = 0; b < 2; b++) {
        gr_plan_free(&ep[b]);
        gr_plan_free(&tp[b]);
        gr_model_free(&m[b]);
    }
    free(ids);
    free(next);
    free(host);
    gr_tk_free(&tm);
    printf("%-15s %-56s forward %-9.3g gradients %-9.3g%s\n", ps->name, c->name, x.fwd, x.bwd,
           x.bad ? "  out of bounds" : "");
    fflush(stdout);
    return x.bad;
}

int main(void) {
    gr_error err = {0};
    gr_backend *be[2] = {NULL, NULL};
    if (gr_cmp_open_device(&passes[0].opts, &be[1], &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    CHECK(gr_backend_create("cpu", 0, &be[0], &err) == GR_OK);
    if (!be[0]) return gr_test_report();
    gr_backend *be32 = NULL; /* the half passes' fp32 runs */
    CHECK(gr_backend_create("cpu", 0, &be32, &err) == GR_OK);
    if (!be32) return gr_test_report();
    const gr_backend_opts fp32_opts = {.precision = GR_PREC_FP32};
    gr_backend_configure(be32, &fp32_opts);
    printf("%zu cases, %zu loss cases and %zu token cases, micro-batch %d, cpu vs %s\n", GR_ARRAY_LEN(cases),
           GR_ARRAY_LEN(loss_cases), GR_ARRAY_LEN(token_cases), N, gr_cmp_device_name());

    /* GR_CUDA_TEST_CASES=text: only the cases whose name holds text (to
     * rerun a failure alone; the coverage check is then skipped) */
    const char *only = getenv("GR_CUDA_TEST_CASES");
    if (only && !only[0]) only = NULL;
    bool covered[GR_OP_COUNT] = {false};
    for (size_t p = 0; p < GR_ARRAY_LEN(passes); p++) {
        const ops_pass *ps = &passes[p];
        if (p > 0) { /* a fresh backend per pass: nothing chosen under the other options carries over */
            gr_backend_free(be[1]);
            be[1] = NULL;
            gr_status st = gr_cmp_open_device(&ps->opts, &be[1], &err);
            CHECK_MSG(st == GR_OK, "%s: %s", ps->name, err.msg);
            if (st) break;
        }
        /* the reference stores at the pass's precision too (fp16/bf16 rounding) */
        gr_backend_opts cpu_opts = {.precision = ps->opts.precision};
        gr_backend_configure(be[0], &cpu_opts);
        const bool half = ps->opts.precision == GR_PREC_BF16 || ps->opts.precision == GR_PREC_FP16;
        gr_backend *ref_be = half ? be32 : NULL;
        ops_worst worst = {0.0, 0.0, "", ""};
        double t0 = gr_now();
        for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) {
            if (only && !strstr(cases[i].name, only)) continue;
            const uint64_t seed = 1000u * (uint64_t)i + 7u;
            int bad = ops_attempt(&cases[i], ps, be, ref_be, seed, 1, covered, &worst);
            if (bad) {
                fprintf(stderr, "  %s [%s]: %d comparison(s) out of bounds; once more on other inputs\n",
                        cases[i].name, ps->name, bad);
                bad = ops_attempt(&cases[i], ps, be, ref_be, seed + 500u, 2, covered, &worst);
            }
            CHECK_MSG(bad == 0, "%s [%s]: out of bounds on two sets of inputs (see above)", cases[i].name,
                      ps->name);
        }
        for (size_t i = 0; i < GR_ARRAY_LEN(loss_cases); i++) {
            if (only && !strstr(loss_cases[i].name, only)) continue;
            const uint64_t seed = 1000u * (uint64_t)i + 9u;
            int bad = loss_attempt(&loss_cases[i], ps, be, seed, 1, covered, &worst);
            if (bad) bad = loss_attempt(&loss_cases[i], ps, be, seed + 500u, 2, covered, &worst);
            CHECK_MSG(bad == 0, "%s [%s]: out of bounds on two sets of inputs (see above)", loss_cases[i].name,
                      ps->name);
        }
        for (size_t i = 0; i < GR_ARRAY_LEN(token_cases); i++) {
            if (only && !strstr(token_cases[i].name, only)) continue;
            const uint64_t seed = 1000u * (uint64_t)i + 11u;
            int bad = token_attempt(&token_cases[i], ps, be, seed, 1, covered, &worst);
            if (bad) bad = token_attempt(&token_cases[i], ps, be, seed + 500u, 2, covered, &worst);
            CHECK_MSG(bad == 0, "%s [%s]: out of bounds on two sets of inputs (see above)", token_cases[i].name,
                      ps->name);
        }
        printf("%-15s worst forward NMSE %.3g (%s)\n%-15s worst gradient NMSE %.3g (%s)\n%-15s %.1f s\n", ps->name,
               worst.fwd, worst.fwd_at, "", worst.bwd, worst.bwd_at, "", gr_now() - t0);
    }

    /* every op of ops.def ran somewhere in the table */
    for (int op = 0; op < GR_OP_COUNT && !only; op++)
        CHECK_MSG(covered[op], "op '%s' is in no case's graph: add a case that uses it", gr_op_name((gr_op)op));

    gr_backend_free(be32);
    gr_backend_free(be[1]);
    gr_backend_free(be[0]);
    return gr_test_report();
}
