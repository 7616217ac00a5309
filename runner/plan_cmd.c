/* plan_cmd.c — `gpurun plan` (gr_train_plan_report, see train.h): the job
 * compiled but not run; its layer table, FLOPs and memory per arena, and
 * whether it fits the device it would run on. */
#include "job.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../config/schema.h"
#include "../graph/graph.h"
#include "../graph/pipeline.h"
#include "../graph/stages.h"
#include "../graph/tensor.h"
#include "hostmem.h"
#include "memfit.h"
#include "parallel.h"

/* "nchw" / "nhwc" for an image tensor, "-" otherwise */
static const char *gr_plan_cmd_layout(const gr_tensor *t) {
    return t->ndim != 4 ? "-" : t->layout == GR_NHWC ? "nhwc" : "nchw";
}

/* The layer table (forward nodes) and the FLOPs per sample and step. */
/* A forward node's row name: its layer's, a metric's (accuracy, accuracy_top5), else "loss". */
static const char *gr_plan_cmd_node_name(const gr_graph *g, int node) {
    const gr_node *nd = &g->nodes[node];
    if (nd->layer >= 0) return g->layers[nd->layer].name;
    for (int k = 0; k < g->n_metrics; k++)
        if (g->metrics[k].node == node) return g->metrics[k].name;
    return "loss";
}

static void gr_plan_cmd_layers(const gr_job_spec *spec, const gr_graph *g, FILE *f) {
    char a[64], b[64], c[64];
    int wl = 20, wo = 22, ws = 20; /* the columns as wide as their longest entry */
    for (int i = 0; i < g->n_forward; i++) {
        const gr_node *nd = &g->nodes[i];
        wl = GR_MAX(wl, (int)strlen(gr_plan_cmd_node_name(g, i)));
        wo = GR_MAX(wo, (int)strlen(gr_op_name(nd->op)));
        ws = GR_MAX(ws, (int)strlen(gr_shape_str(&g->tensors[nd->out[0]], a, sizeof a)));
    }
    fprintf(f, "%-*s %-*s %-*s %-5s %-6s %12s %14s\n", wl, "layer", wo, "op", ws, "output", "type", "layout",
            "params", "FLOPs/sample");
    for (int i = 0; i < g->n_inputs; i++) wl = GR_MAX(wl, (int)strlen(g->tensors[g->inputs[i]].name));
    for (int i = 0; i < g->n_inputs; i++) { /* `input`, or each of model.inputs by its name */
        const gr_tensor *x = &g->tensors[g->inputs[i]];
        fprintf(f, "%-*s %-*s %-*s %-5s %-6s %12s %14s\n", wl, x->name, wo, "-", ws, gr_shape_str(x, a, sizeof a),
                gr_elem_name(x->elem), gr_plan_cmd_layout(x), "0", "0");
    }
    for (int i = 0; i < g->n_forward; i++) {
        const gr_node *nd = &g->nodes[i];
        const char *name = gr_plan_cmd_node_name(g, i);
        int64_t np = nd->layer >= 0 ? g->layers[nd->layer].n_params : 0;
        gr_fmt_count(np, b, sizeof b);
        gr_fmt_count(nd->flops, c, sizeof c);
        const gr_tensor *y = &g->tensors[nd->out[0]];
        fprintf(f, "%-*s %-*s %-*s %-5s %-6s %12s %14s\n", wl, name, wo, gr_op_name(nd->op), ws,
                gr_shape_str(y, a, sizeof a), gr_elem_name(y->elem), gr_plan_cmd_layout(y), b, c);
    }
    gr_fmt_count(g->n_weights, a, sizeof a);
    fprintf(f, "\ntotal parameters: %s\n", a);
    const int64_t train = gr_graph_flops(g, true); /* summary.json's train_flops_per_sample */
    gr_fmt_count(gr_graph_flops(g, false), a, sizeof a);
    gr_fmt_count(train, b, sizeof b);
    fprintf(f, "FLOPs per sample: forward %s, forward + backward %s\n", a, b);
    gr_fmt_count(train * spec->train.batch_size, a, sizeof a);
    fprintf(f, "FLOPs per optimizer step: %s (batch %lld)\n", a, (long long)spec->train.batch_size);
}

/* "bf16 1,234, fp32 567, int32 8" of the naive bytes per storage type */
static const char *gr_plan_cmd_by_elem(const gr_memplan *mp, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int e = 0; e < GR_ELEM_COUNT && len < n; e++) {
        if (!mp->naive_by_elem[e]) continue;
        char c[64];
        gr_fmt_count((int64_t)mp->naive_by_elem[e], c, sizeof c);
        len += (size_t)snprintf(buf + len, n - len, "%s%s %s", len ? ", " : "", gr_elem_name((gr_elem)e), c);
    }
    return buf;
}

/* Bytes per arena at the micro-batch (need: gr_memfit_of of the plans). */
static void gr_plan_cmd_memory(const gr_job_spec *spec, const gr_graph *g, const gr_plan *tp, const gr_mem_need *need,
                               FILE *f) {
    char a[64], b[64], c[512];
    fprintf(f, "memory at micro-batch %lld (bytes), precision %s:\n", (long long)g->micro_batch,
            gr_precision_name(spec->precision));
    gr_fmt_count((int64_t)need->params, a, sizeof a);
    fprintf(f, "  params           %14s  (fp32 master weights and state)\n", a);
    gr_fmt_count((int64_t)need->grads, a, sizeof a);
    fprintf(f, "  grads            %14s  (fp32)\n", a);
    gr_fmt_count((int64_t)need->optim, a, sizeof a);
    fprintf(f, "  optimizer state  %14s  (%s, fp32)\n", a, gr_optim_name(spec->train.optimizer.type));
    gr_fmt_count((int64_t)tp->mem.act_bytes, a, sizeof a);
    gr_fmt_count((int64_t)tp->mem.act_bytes_naive, b, sizeof b);
    fprintf(f, "  activations      %14s  (train; %s without reuse: %s)\n", a, b,
            gr_plan_cmd_by_elem(&tp->mem, c, sizeof c));
    gr_fmt_count((int64_t)need->act_eval, a, sizeof a);
    fprintf(f, "  activations      %14s  (eval)\n", a);
    if (need->stage) {
        gr_fmt_count((int64_t)need->stage, a, sizeof a);
        fprintf(f, "  fp32 staging     %14s  (half tensors of: %s)\n", a, gr_plan_staged_ops(tp, true, c, sizeof c));
    }
    gr_fmt_count((int64_t)need->workspace, a, sizeof a);
    if (need->workspace_known)
        fprintf(f, "  conv scratch     %14s  (the convolutions' workspace, shared by train and eval)\n", a);
    else
        fprintf(f, "  conv scratch     %14s  (not known before the run: a GPU's cuDNN workspace is chosen then)\n", "-");
    gr_fmt_count((int64_t)(need->params + need->grads + need->optim + need->act_train + tp->stage_bytes +
                           need->workspace), a, sizeof a);
    fprintf(f, "  total            %14s  (training)\n", a);
}

/* The process's host memory: a fresh run's peak resident set, planned. */
static void gr_plan_cmd_host(const gr_job *j, const gr_mem_need *need, FILE *f) {
    gr_host_need h;
    gr_hostmem_of(j, need, false, &h);
    const struct { const char *name; size_t v; const char *what; } rows[] = {
        {"program", h.process, "resident when gpurun started"},
        {"libraries", h.libs, "oneDNN's kernels, OpenMP threads: a measured allowance"},
        {"data", h.data, "labels, images held in memory, HDF5 chunk caches"},
        {"loaders", h.loaders, "batch buffers, workers' scratch, epoch orders"},
        {"device", h.device, "train + eval arenas and scratch when the device is this host's memory"},
        {"checkpoints", h.ckpt, "the saver's copy of params and optimizer state, the final weights"},
    };
    char a[64];
    fprintf(f, "host memory (bytes), a fresh run on %s:\n", j->be ? gr_backend_name(j->be) : "no device");
    for (size_t i = 0; i < GR_ARRAY_LEN(rows); i++) {
        gr_fmt_count((int64_t)rows[i].v, a, sizeof a);
        if (!j->train_ds && !j->byname && (i == 2 || i == 3)) { /* planned from model.input */
            fprintf(f, "  %-16s %14s  (the data file is not there: not counted)\n", rows[i].name, "-");
            continue;
        }
        fprintf(f, "  %-16s %14s  (%s)\n", rows[i].name, a, rows[i].what);
    }
    gr_fmt_count((int64_t)h.total, a, sizeof a);
    fprintf(f, "  total            %14s  (the peak resident set: summary.json's planned_host_bytes)\n", a);
    /* what is free is what this process may still take: its own pages are counted there already */
    size_t av = 0, tot = 0;
    if (gr_host_mem_info(&av, &tot) && h.total > h.process && h.total - h.process > av) {
        char b[64];
        gr_fmt_count((int64_t)(h.total - h.process), a, sizeof a);
        gr_fmt_count((int64_t)av, b, sizeof b);
        fprintf(f, "warning: a run of this job needs %s more bytes of host memory, more than the %s free: it will "
                "not fit\n", a, b);
    }
}

/* The loader threads the run gets (data.workers, auto resolved) and why. */
static void gr_plan_cmd_loader(const gr_job *j, FILE *f) {
    const char *why;
    const int workers = gr_job_data_workers(j, &why);
    fprintf(f, "data: %d loader thread%s (%s)\n", workers, workers == 1 ? "" : "s", why);
}

/* The backend the run would take (auto: GPU 0, else the cpu), configured
 * for the job's precision; NULL when it cannot be made. */
static gr_backend *gr_plan_cmd_device(const gr_job_spec *spec, const char **dev) {
    gr_backend *be = NULL;
    gr_error e2;
    *dev = spec->device;
    if (strcmp(*dev, "auto") == 0) {
        *dev = "cuda:0";
        if (gr_backend_create(*dev, 1, &be, &e2) != GR_OK) be = NULL, *dev = "cpu";
    }
    if (!be && gr_backend_create(*dev, 1, &be, &e2) != GR_OK) return NULL;
    gr_backend_opts o = {.precision = spec->precision};
    gr_backend_configure(be, &o);
    return be;
}

/* A run that will not fit is told before it starts (on a GPU the cuDNN
 * workspace comes on top, chosen when the run prepares its plans). */
static void gr_plan_cmd_fit(gr_backend *be, const char *dev, size_t need, FILE *f) {
    char a[64], b[64], c[64];
    size_t fr = 0, tot = 0;
    if (be && gr_backend_mem_info(be, &fr, &tot)) {
        gr_fmt_count((int64_t)fr, a, sizeof a);
        gr_fmt_count((int64_t)tot, b, sizeof b);
        fprintf(f, "%s: %s bytes free of %s\n", dev, a, b);
        if (need > fr) {
            gr_fmt_count((int64_t)need, c, sizeof c);
            fprintf(f, "warning: this job needs %s bytes on %s (training + eval arenas), more than is free: "
                    "it will not fit; lower train.micro_batch\n", c, dev);
        }
    }
    char what[512];
    if (be) fprintf(f, "%s: %s\n", dev, gr_backend_describe(be, what, sizeof what));
}

/* A byte count as people type it: 8589934592, 8G, 8GiB, 1.5G (K, M, G, T and KiB..TiB: powers
 * of 1024), 8GB (KB, MB, GB, TB: powers of 1000, as disk makers count); case-insensitive.
 * False when s is none of these, not at least one byte or more than 10^18 (a size_t, and an
 * int64_t where it is printed, holds it: 16777215T, 2^64 - 2^40, must not read as negative). */
static bool gr_parse_bytes(const char *s, size_t *out) {
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9' || (s[0] == '0' && (s[1] | 0x20) == 'x')) return false; /* no sign, hex, inf */
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0)) return false;
    double mult = 1;
    if (*end) {
        const char *u = strchr("KMGT", end[0] & ~0x20);
        if (!u) return false;
        const char *suffix = end + 1;
        double base = 1024;
        if ((suffix[0] | 0x20) == 'i' && (suffix[1] | 0x20) == 'b' && !suffix[2]) suffix += 2; /* GiB */
        else if ((suffix[0] | 0x20) == 'b' && !suffix[1]) base = 1000, suffix++;               /* GB */
        if (*suffix) return false;
        for (const char *k = "KMGT"; k <= u; k++) mult *= base;
    }
    v *= mult;
    if (v < 1 || v > 1e18) return false;
    *out = (size_t)v;
    return true;
}

/* --memory BYTES (gr_parse_bytes): checked before anything is planned or printed. */
static gr_status gr_plan_cmd_bytes(const char *memory, size_t *limit, gr_error *err) {
    if (!gr_parse_bytes(memory, limit))
        return gr_error_set(err, GR_ERR_USAGE, "--memory: expected a number of bytes (8G or 8GiB: 8 x 2^30; 8GB: "
                            "8 x 10^9; K, M, G, T) or auto, got '%s' (at most 10^18 bytes)", memory);
    return GR_OK;
}

/* --memory: BYTES or auto (what be has free) */
static gr_status gr_plan_cmd_limit(const char *memory, gr_backend *be, const char *dev, size_t *limit, gr_error *err) {
    if (strcmp(memory, "auto") == 0) {
        size_t fr = 0, tot = 0;
        if (!be || !gr_backend_mem_info(be, &fr, &tot))
            return gr_error_set(err, GR_ERR_USAGE, "--memory auto: %s does not say how much memory it has free; give "
                                "a number of bytes", dev);
        *limit = fr;
        return GR_OK;
    }
    return gr_plan_cmd_bytes(memory, limit, err);
}

/* Whether the job (its need now, at the planned micro-batch) fits limit
 * bytes, and the largest micro-batch that does. */
static gr_status gr_plan_cmd_memfit(const gr_job *j, const gr_mem_need *now, const char *memory, const char *dev,
                                    FILE *f, gr_error *err) {
    const gr_job_spec *s = j->spec;
    size_t limit = 0;
    gr_status st = gr_plan_cmd_limit(memory, j->be, dev, &limit, err);
    if (st) return st;
    gr_mem_need best;
    if ((st = gr_memfit_largest(s, &j->io, s->train.batch_size, limit, j->be, &best, err)))
        return st;
    char a[64], b[64];
    gr_fmt_count((int64_t)limit, a, sizeof a);
    gr_fmt_count((int64_t)now->total, b, sizeof b);
    fprintf(f, "\nmemory limit %s bytes (--memory %s): micro-batch %lld needs %s bytes: %s\n", a, memory,
            (long long)now->micro_batch, b, now->total <= limit ? "fits" : "does not fit");
    gr_fmt_count((int64_t)best.total, b, sizeof b);
    if (best.micro_batch == 0)
        fprintf(f, "no micro-batch fits: micro-batch 1 needs %s bytes (the model's arenas alone: params, grads, "
                "optimizer state)\n", b);
    else
        fprintf(f, "largest micro-batch that fits: %lld (%s bytes; batch %lld = %lld x %lld micro-batches)\n",
                (long long)best.micro_batch, b, (long long)s->train.batch_size,
                (long long)(s->train.batch_size / best.micro_batch), (long long)best.micro_batch);
    if (!s->model.blocks) return GR_OK;
    /* a model of blocks: the same with the other train.recompute */
    gr_job_spec r = *s;
    r.train.recompute_blocks = !s->train.recompute_blocks;
    if ((st = gr_memfit_largest(&r, &j->io, s->train.batch_size, limit, j->be, &best, err)))
        return st;
    gr_fmt_count((int64_t)best.total, b, sizeof b);
    if (best.micro_batch == 0)
        fprintf(f, "with train.recompute: %s: no micro-batch fits\n", r.train.recompute_blocks ? "blocks" : "none");
    else
        fprintf(f, "with train.recompute: %s: largest micro-batch that fits: %lld (%s bytes)\n",
                r.train.recompute_blocks ? "blocks" : "none", (long long)best.micro_batch, b);
    return GR_OK;
}

/* The data-parallel degree the plan assumes: parallel.data, else the
 * launched world over a replica's processes, else 1. */
static int64_t gr_plan_cmd_data(const gr_job_spec *s, const gr_comm *c) {
    if (s->parallel.data > 0) return s->parallel.data;
    return c->launcher[0] ? c->world / (s->parallel.pipeline * s->parallel.tensor) : 1;
}

/* The pipeline's micro-batches of one step: parallel.microbatches (which
 * must split each replica's batch, and match train.micro_batch when that is
 * given), else the replica's batch over the planned micro-batch. */
static gr_status gr_plan_cmd_micro(const gr_job_spec *s, gr_graph *g, int64_t data, int64_t *m,
                                   gr_error *err) {
    const int64_t per = s->train.batch_size / data;
    if (!s->parallel.microbatches) {
        *m = per / g->micro_batch;
        return GR_OK;
    }
    *m = s->parallel.microbatches;
    if (s->train.batch_size % data || per % *m)
        return gr_spec_error(err, s, "parallel.microbatches", "%lld does not split train.batch_size %lld over "
                             "parallel.data %lld into equal micro-batches", (long long)*m,
                             (long long)s->train.batch_size, (long long)data);
    const gr_cfg *mb = gr_spec_node(s->root, "train.micro_batch");
    if (!mb) /* the micro-batch is the replica's share over them: planned there */
        return gr_graph_set_batch(g, per / *m, err);
    if (mb && s->train.micro_batch > 0 && s->train.micro_batch * *m != per)
        return gr_spec_error(err, s, "parallel.microbatches", "%lld micro-batches of train.micro_batch %lld make "
                             "%lld samples, but a replica's share of train.batch_size %lld is %lld", (long long)*m,
                             (long long)s->train.micro_batch, (long long)(*m * s->train.micro_batch),
                             (long long)s->train.batch_size, (long long)per);
    return GR_OK;
}

/* parallel.pipeline > 1: the stages cut (graph/stages.h) and the step's
 * micro-batches, checked before anything is printed. */
static gr_status gr_plan_cmd_cut(const gr_job_spec *s, gr_graph *g, gr_stage_plan *sp, int64_t *m,
                                 gr_error *err) {
    gr_comm c;
    gr_comm_detect(&c);
    gr_status st = c.launcher[0] ? gr_parallel_check_world(s, &c, err) : GR_OK;
    if (!st) st = gr_plan_cmd_micro(s, g, gr_plan_cmd_data(s, &c), m, err);
    if (!st) st = gr_stages_cut(g, s, sp, err);
    return st;
}

/* The stage table, the schedule's bubble and each stage's peak of
 * micro-batches in flight (graph/pipeline.h). */
static void gr_plan_cmd_stages(const gr_job_spec *s, const gr_graph *g, const gr_stage_plan *sp, int64_t m,
                               FILE *f) {
    const gr_pipe_kind kind = (gr_pipe_kind)s->parallel.schedule;
    const int p = sp->p, mi = (int)GR_MIN(m, GR_PIPE_MAX_MICRO);
    int wl = 12;
    for (int i = 0; i < p; i++)
        wl = GR_MAX(wl, (int)(strlen(g->layers[sp->stages[i].first].name) +
                              strlen(g->layers[sp->stages[i].last].name)) + 2);
    fprintf(f, "\npipeline: %d stages (%s), %lld micro-batch%s a step, schedule %s\n", p,
            sp->named ? "cut at parallel.stages" : "balanced by FLOPs", (long long)m, m == 1 ? "" : "es",
            gr_pipe_kind_name(kind));
    fprintf(f, "%-5s %-*s %7s %14s %12s %9s %16s\n", "stage", wl, "layers", "count", "FLOPs/sample", "params",
            "in-flight", "activations (B)");
    int64_t top = 0, all = 0;
    for (int i = 0; i < p; i++) {
        const gr_stage *sg = &sp->stages[i];
        char lay[2 * GR_NAME_MAX + 4], a[64], b[64], c[64];
        snprintf(lay, sizeof lay, "%s..%s", g->layers[sg->first].name, g->layers[sg->last].name);
        gr_fmt_count(sg->flops, a, sizeof a);
        gr_fmt_count(sg->params, b, sizeof b);
        /* the stage's part of the training pass, one arena per micro-batch in flight (dist/pp.h) */
        const int k = gr_pipe_peak_activations(kind, p, mi, i);
        gr_stage_io io;
        gr_stage_io_init(g, sp, i, &io);
        gr_memplan mp;
        gr_memplan_init_part(&mp, g, GR_PLAN_TRAIN, io.run, io.pin);
        gr_fmt_count((int64_t)k * (int64_t)mp.act_bytes, c, sizeof c);
        gr_memplan_free(&mp);
        gr_stage_io_free(&io);
        fprintf(f, "%-5d %-*s %7d %14s %12s %9d %16s\n", i + 1, wl, lay, sg->last - sg->first + 1, a, b, k, c);
        top = GR_MAX(top, sg->flops), all += sg->flops;
    }
    fprintf(f, "bubble: %.1f%% of each step idle, (p-1)/(m+p-1) = %d/%lld; largest stage %.1f%% of the FLOPs "
            "(1/%d = %.1f%%)\n", 100 * gr_pipe_bubble_fraction(p, mi), p - 1, (long long)(m + p - 1),
            all ? 100.0 * (double)top / (double)all : 0.0, p, 100.0 / p);
    size_t pb, gb, ob;
    char w[64];
    gr_fmt_count((int64_t)gr_model_bytes(g, gr_optim_slots(&s->train.optimizer), &pb, &gb, &ob), w, sizeof w);
    fprintf(f, "each stage's process also holds the whole model's params, grads and optimizer state (%s bytes; "
            "below: one process)\n", w);
}

/* parallel.tensor > 1: the layers split and how (graph/tensor.h), and what each process holds and
 * all-reduces. */
static void gr_plan_cmd_tensor(const gr_graph *g, const gr_tp_plan *tp, FILE *f) {
    int wl = 12, qkv = 0;
    for (int l = 0; l < g->n_layers; l++)
        if (tp->role[l] != GR_TP_REPLICATED) wl = GR_MAX(wl, (int)strlen(g->layers[l].name));
    for (int l = 0; l < g->n_layers; l++) qkv += tp->role[l] == GR_TP_COLUMN_QKV;
    fprintf(f, "\ntensor parallelism: %d processes a group; %d column/row pair%s split (%d by attention heads), "
            "every other layer replicated\n", tp->t, tp->pairs, tp->pairs == 1 ? "" : "s", qkv);
    fprintf(f, "%-*s %-10s %s\n", wl, "layer", "op", "split");
    for (int l = 0; l < g->n_layers; l++) {
        const gr_tp_role r = tp->role[l];
        if (r == GR_TP_REPLICATED) continue;
        fprintf(f, "%-*s %-10s %s%s\n", wl, g->layers[l].name, gr_op_name(g->layers[l].op), gr_tp_role_name(r),
                r == GR_TP_ROW ? " (its output summed over the group: an all-reduce)"
                : (r == GR_TP_COLUMN || r == GR_TP_COLUMN_QKV) ? " (its input's gradient summed: an all-reduce)" : "");
    }
    char a[64], b[64], c[64], d[64];
    gr_fmt_count(tp->split_params / tp->t, a, sizeof a);
    gr_fmt_count(tp->repl_params, b, sizeof b);
    gr_fmt_count(tp->allreduce_fwd, c, sizeof c);
    gr_fmt_count(tp->allreduce_bwd, d, sizeof d);
    fprintf(f, "each process holds %s parameters of the split layers (1/%d) and the %s replicated; all-reduced "
            "per sample: %s floats forward, %s backward\n", a, tp->t, b, c, d);
}

/* "fused: batchnorm0 + relu0, ..." (graph/fuse.c: each folded forward relu
 * and the batchnorm that writes its input), or why none is */
static void gr_plan_cmd_fused(const gr_job *j, FILE *f) {
    const gr_graph *g = &j->g;
    if (!j->be || (!j->fuse_off && !j->fused && !j->fuse_left)) return;
    if (j->fuse_off || !j->fused) {
        fprintf(f, "fused: %s\n", j->fuse_off ? j->fuse_off : j->fuse_left);
        return;
    }
    fprintf(f, "fused: %d pair%s (each relu computed by the pass before it; GPURUN_FUSE=0 turns it off):", j->fused,
            j->fused == 1 ? "" : "s");
    int k = 0;
    for (int i = 0; i < g->n_forward; i++) {
        const gr_node *nd = &g->nodes[i];
        if (nd->op != GR_OP_RELU || !nd->folded) continue;
        int src = -1;
        for (int q = 0; q < i && src < 0; q++)
            if (g->nodes[q].nout > 0 && g->nodes[q].out[0] == nd->in[0]) src = q;
        fprintf(f, "%s %s + %s", k++ ? "," : "", src >= 0 ? g->layers[g->nodes[src].layer].name : "?",
                g->layers[nd->layer].name);
    }
    if (j->fuse_left) fprintf(f, "; %s", j->fuse_left);
    fprintf(f, "\n");
}

gr_status gr_train_plan_report(const gr_job_spec *spec, const char *memory, FILE *f, gr_error *err) {
    size_t bytes;
    gr_status st = memory && strcmp(memory, "auto") != 0 ? gr_plan_cmd_bytes(memory, &bytes, err) : GR_OK;
    if (st) return st;
    gr_stage_plan sp = {0};
    gr_tp_plan tsp = {0};
    int64_t m = 0;
    gr_job j;
    gr_job_init(&j, spec, true);
    /* a model with model.input can be planned before its data exists
     * (configs/resnet50.yaml names an ImageNet file most machines lack) */
    const bool no_data = spec->model.n_input > 0 && spec->data.train.path[0] &&
                         access(spec->data.train.path, R_OK) != 0;
    if (no_data) {
        j.in_ndim = spec->model.n_input;
        for (int i = 0; i < j.in_ndim; i++) j.in_shape[i] = spec->model.input[i];
        gr_job_io_default(&j);
        if ((st = gr_job_graph(&j, &j.io, err))) goto done;
    } else if ((st = gr_job_compile(&j, spec, true, err))) { /* with val: its loader is in the host plan */
        goto done;
    }
    if (spec->parallel.pipeline > 1 && (st = gr_plan_cmd_cut(spec, &j.g, &sp, &m, err))) goto done;
    if (spec->parallel.tensor > 1 && (st = gr_tp_plan_make(&j.g, spec, (int)spec->parallel.tensor, &tsp, err)))
        goto done;
    const char *dev;
    j.be = gr_plan_cmd_device(spec, &dev); /* gr_job_free frees it */
    if (j.be) gr_job_layout(&j);
    gr_model stub = {.g = &j.g, .be = j.be};
    gr_plan tp, ep;
    if ((st = gr_memfit_compile(&tp, &stub, &j.g, GR_PLAN_TRAIN, err))) goto done;
    if ((st = gr_memfit_compile(&ep, &stub, &j.g, GR_PLAN_EVAL, err))) { gr_plan_free(&tp); goto done; }
    fprintf(f, "%s: %s, micro-batch %lld\n", spec->name, spec->file, (long long)j.g.micro_batch);
    if (no_data)
        fprintf(f, "(%s is not there: shapes from model.input)\n", spec->data.train.path);
    fprintf(f, "\n");
    gr_plan_cmd_layers(spec, &j.g, f);
    gr_plan_cmd_fused(&j, f);
    if (sp.p) gr_plan_cmd_stages(spec, &j.g, &sp, m, f);
    if (tsp.t > 1) gr_plan_cmd_tensor(&j.g, &tsp, f);
    if (sp.p && tsp.t > 1)
        fprintf(f, "both: each of the %d stages is a tensor group of %d, %d processes a model replica (rank = (d x %d "
                "+ s) x %d + t); the stage table counts a whole stage, each of its processes its part of the "
                "split layers\n", sp.p, tsp.t, sp.p * tsp.t, sp.p, tsp.t);
    gr_opt_groups_print(&j.og, &j.g, spec, f);
    gr_mem_need need;
    gr_memfit_of(&j.g, gr_optim_slots(&spec->train.optimizer), &tp, &ep, &need);
    gr_plan_cmd_memory(spec, &j.g, &tp, &need, f);
    gr_plan_cmd_host(&j, &need, f);
    gr_plan_cmd_loader(&j, f);
    gr_plan_cmd_fit(j.be, dev, need.total, f);
    gr_plan_free(&tp);
    gr_plan_free(&ep);
    if (memory) st = gr_plan_cmd_memfit(&j, &need, memory, dev, f, err);
done:
    gr_tp_plan_free(&tsp);
    gr_stages_free(&sp);
    gr_job_free(&j);
    return st;
}
