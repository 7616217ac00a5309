/* parity_dump.c — runs one small model through gpurun's real pipeline
 * (graph build -> autodiff -> plan -> backend kernels -> optimizer) on
 * weights and a batch given in a file, and writes what PyTorch must match
 * (tests/parity_torch.py builds the same model in torch.nn and compares).
 *
 *   parity_dump LAYERS IN OUT [DEVICE]
 *
 * LAYERS is the model.layers YAML flow list, e.g.
 * "[flatten, {dense: {units: 32}}, relu, {dense: {units: 10}}]"; DEVICE is
 * "cpu" (default, one thread) or "cuda[:N]".
 *
 * IN (little-endian, written by parity_torch.py):
 *   char   magic[8] = "GRPDIN01"
 *   int32  n, in_ndim, in_shape[3], k_steps, pad[2]
 *   double label_smoothing
 *   double sgd[3]   = lr, momentum, weight_decay   (nesterov)
 *   double adamw[5] = lr, beta1, beta2, eps, weight_decay
 *   int64  n_params                    (must equal the graph's n_weights)
 *   float  params[n_params]            (the PARAM tensors in gpurun's order, packed:
 *                                       without the params arena's alignment gaps)
 *   float  x[n * prod(in_shape)]
 *   int32  y[n]
 *
 * A token model (tests/parity_gpt.py) writes magic "GRPDIN02" and, right
 * after the header's pad, int32 T, int32 pad, int64 classes (its loss's
 * train.loss.classes, 0: all); then x is int32 token ids [n, T] (the
 * input `tokens`, in_shape [T]) and y int32 next-token targets [n, T]
 * (`targets`), and OUT adds, after the eval stats, the eval forward's
 * logits, float [n, T, V].
 *
 * OUT:
 *   char   magic[8] = "GRPDOU01"
 *   int64  n_tensors, n_trainable, k_steps        (n_trainable: the packed count)
 *   n_tensors x { char name[192]; int64 offset, ndim, shape[4] }  (PARAM tensors, packed offsets)
 *   double train[2]  mean loss and correct count of one training micro-step
 *   double eval[2]   the same from an eval-mode forward (dropout off)
 *   float  grads[n_trainable]          from that training micro-step
 *   double sgd_loss[k];   float sgd_params[k][n_trainable]   after each step
 *   double adamw_loss[k]; float adamw_params[k][n_trainable]
 * (loss i is the mean loss of the forward pass before update i). */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "exec/exec.h"
#include "runner/train.h"

#define GR_PD_NAME GR_TNAME_MAX

typedef struct gr_pd_input {
    int32_t n, in_ndim, in_shape[3], k_steps;
    int32_t tokens;  /* GRPDIN02: x and y are int32 [n, T] (T = in_shape[0]) */
    int64_t classes;
    double label_smoothing, sgd[3], adamw[5];
    int64_t n_params, per;
    float *params, *x;
    int32_t *y;
} gr_pd_input;

static void gr_pd_die(const char *what) {
    fprintf(stderr, "parity_dump: %s\n", what);
    exit(1);
}

static void gr_pd_read(FILE *f, void *dst, size_t bytes, const char *what) {
    if (fread(dst, 1, bytes, f) != bytes) {
        fprintf(stderr, "parity_dump: input file truncated reading %s (%zu bytes)\n", what, bytes);
        exit(1);
    }
}

static void gr_pd_write(FILE *f, const void *src, size_t bytes) {
    if (fwrite(src, 1, bytes, f) != bytes) gr_pd_die("short write on the output file");
}

static void gr_pd_load(const char *path, gr_pd_input *in) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    char magic[8];
    int32_t hdr[8];
    gr_pd_read(f, magic, sizeof magic, "magic");
    in->tokens = memcmp(magic, "GRPDIN02", 8) == 0;
    if (memcmp(magic, "GRPDIN01", 8) != 0 && !in->tokens)
        gr_pd_die("bad magic (is this a parity_torch.py or parity_gpt.py input file?)");
    gr_pd_read(f, hdr, sizeof hdr, "header");
    in->n = hdr[0];
    in->in_ndim = hdr[1];
    memcpy(in->in_shape, hdr + 2, sizeof in->in_shape);
    in->k_steps = hdr[5];
    if (in->n < 1 || in->in_ndim < 1 || in->in_ndim > 3 || in->k_steps < 0) gr_pd_die("bad header");
    if (in->tokens) {
        int32_t t[2];
        gr_pd_read(f, t, sizeof t, "T");
        gr_pd_read(f, &in->classes, sizeof in->classes, "classes");
        in->in_ndim = 1;
        in->in_shape[0] = t[0];
    }
    gr_pd_read(f, &in->label_smoothing, sizeof(double), "label_smoothing");
    gr_pd_read(f, in->sgd, sizeof in->sgd, "sgd hparams");
    gr_pd_read(f, in->adamw, sizeof in->adamw, "adamw hparams");
    gr_pd_read(f, &in->n_params, sizeof in->n_params, "n_params");
    in->per = 1;
    for (int i = 0; i < in->in_ndim; i++) in->per *= in->in_shape[i];
    const int64_t ny = in->tokens ? in->n * in->per : in->n; /* x's elements are 4 bytes either way */
    in->params = malloc((size_t)in->n_params * sizeof(float));
    in->x = malloc((size_t)(in->n * in->per) * sizeof(float));
    in->y = malloc((size_t)ny * sizeof(int32_t));
    if (!in->params || !in->x || !in->y) gr_pd_die("out of memory");
    gr_pd_read(f, in->params, (size_t)in->n_params * sizeof(float), "params");
    gr_pd_read(f, in->x, (size_t)(in->n * in->per) * sizeof(float), "x");
    gr_pd_read(f, in->y, (size_t)ny * sizeof(int32_t), "y");
    fclose(f);
}

/* The arena's PARAM tensors packed one after another (the file layout). */
static void gr_pd_pack(const gr_graph *g, const float *arena, float *packed) {
    int64_t at = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_TK_PARAM) continue;
        memcpy(packed + at, arena + t->param_offset, (size_t)gr_tensor_numel(t) * sizeof *packed);
        at += gr_tensor_numel(t);
    }
}

/* A model with optim_slots slots and its compiled training plan, holding the
 * input's parameters. */
static void gr_pd_model(const gr_graph *g, gr_backend *be, int slots, const gr_pd_input *in,
                        gr_model *m, gr_plan *p) {
    gr_error err = {0};
    if (gr_model_init(m, g, be, slots, &err) || gr_plan_compile(p, m, g, GR_PLAN_TRAIN, true, &err))
        gr_pd_die(err.msg);
    /* the packed input into the arena, each tensor at its aligned offset */
    float *arena = calloc((size_t)g->n_params, sizeof *arena);
    int64_t at = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_TK_PARAM) continue;
        memcpy(arena + t->param_offset, in->params + at, (size_t)gr_tensor_numel(t) * sizeof *arena);
        at += gr_tensor_numel(t);
    }
    gr_backend_upload(be, m->params, arena, (size_t)g->n_params * sizeof(float));
    free(arena);
    if (m->optim) gr_backend_zero(be, m->optim, (size_t)slots * (size_t)g->n_trainable * sizeof(float));
}

/* The input's batch: images and labels, or a token model's two fields. */
static gr_batch gr_pd_batch(const gr_pd_input *in, gr_batch_field f[2]) {
    gr_batch b = {.x = in->x, .y = in->y, .n = in->n};
    if (!in->tokens) return b;
    const size_t bytes = (size_t)in->per * sizeof(int32_t);
    f[0] = (gr_batch_field){.name = "tokens", .data = in->x, .type = GR_FT_INT32, .bytes = bytes, .rank = 1};
    f[1] = (gr_batch_field){.name = "targets", .data = in->y, .type = GR_FT_INT32, .bytes = bytes, .rank = 1};
    f[0].shape[0] = f[1].shape[0] = in->per;
    b.x = NULL;
    b.y = NULL;
    b.nfields = 2;
    b.fields = f;
    return b;
}

/* The mean loss of a pass whose stats summed loss (over the counted tokens
 * of a token model, else the samples). */
static double gr_pd_mean(const gr_plan *p, const gr_pd_input *in, double loss) {
    if (!in->tokens) return loss / (double)in->n;
    float st[2];
    gr_backend_download(p->m->be, st, gr_plan_ptr(p, p->g->loss_stats), sizeof st);
    return (double)st[0] / (double)st[1];
}

/* One training micro-step over the whole batch (grads zeroed first); returns
 * the mean loss, adds the correct count. */
static double gr_pd_step(gr_plan *p, gr_model *m, const gr_pd_input *in, double *correct) {
    gr_backend_zero(m->be, m->grads, (size_t)m->g->n_trainable * sizeof(float));
    gr_batch_field f[2];
    gr_batch b = gr_pd_batch(in, f);
    gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f / (float)in->n};
    double loss = 0.0;
    gr_train_micro_step(p, &b, &ctx, &loss, correct);
    return gr_pd_mean(p, in, loss);
}

/* K optimizer steps on the same batch; writes the losses, then the params
 * after each step. */
static void gr_pd_optimize(const gr_graph *g, gr_backend *be, gr_job_spec *spec, const gr_pd_input *in,
                           FILE *out) {
    int slots = spec->train.optimizer.type == GR_OPTIM_ADAMW ? 2 : 1;
    gr_model m;
    gr_plan p;
    gr_pd_model(g, be, slots, in, &m, &p);
    int64_t nt = g->n_weights;
    double *loss = calloc((size_t)in->k_steps + 1, sizeof *loss);
    float *w = malloc((size_t)(in->k_steps * nt + 1) * sizeof *w);
    float *arena = malloc((size_t)g->n_trainable * sizeof *arena);
    if (!loss || !w || !arena) gr_pd_die("out of memory");
    for (int k = 0; k < in->k_steps; k++) {
        double correct = 0.0;
        loss[k] = gr_pd_step(&p, &m, in, &correct);
        gr_train_apply(&m, spec, spec->train.optimizer.lr, k);
        gr_backend_download(be, arena, m.params, (size_t)g->n_trainable * sizeof(float));
        gr_pd_pack(g, arena, w + k * nt);
    }
    free(arena);
    gr_pd_write(out, loss, (size_t)in->k_steps * sizeof *loss);
    gr_pd_write(out, w, (size_t)(in->k_steps * nt) * sizeof *w);
    free(loss);
    free(w);
    gr_plan_free(&p);
    gr_model_free(&m);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: parity_dump LAYERS IN OUT [DEVICE]\n");
        return 2;
    }
    const char *device = argc == 5 ? argv[4] : "cpu";
    gr_pd_input in;
    memset(&in, 0, sizeof in);
    gr_pd_load(argv[2], &in);

    gr_error err = {0};
    gr_cfg *layers = NULL;
    if (gr_cfg_parse_text(argv[1], "layers", 1, 1, &layers, &err)) gr_pd_die(err.msg);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.file, sizeof spec.file, "parity");
    spec.model.layers = layers;
    spec.train.micro_batch = in.n;
    spec.train.batch_size = in.n;
    spec.train.label_smoothing = in.label_smoothing;
    spec.train.loss_classes = in.classes;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    int64_t shape[3] = {in.in_shape[0], in.in_shape[1], in.in_shape[2]};
    gr_graph g;
    if (in.tokens) { /* token ids in, next-token targets: the inputs by name */
        gr_graph_io io;
        memset(&io, 0, sizeof io);
        io.n_inputs = 1;
        io.in[0] = (gr_io_tensor){.name = "tokens", .elem = GR_I32, .ndim = 1, .shape = {shape[0]}};
        io.target = (gr_io_tensor){.name = "targets", .elem = GR_I32, .ndim = 1, .shape = {shape[0]}};
        if (gr_graph_build_io(&spec, &io, &g, &err)) gr_pd_die(err.msg);
    } else if (gr_graph_build(&spec, shape, in.in_ndim, &g, &err)) {
        gr_pd_die(err.msg);
    }
    gr_autodiff(&g, false);
    if (g.n_weights != in.n_params) {
        fprintf(stderr, "parity_dump: the model has %lld trainable parameters, the input file %lld\n",
                (long long)g.n_weights, (long long)in.n_params);
        return 1;
    }
    gr_backend *be;
    if (gr_backend_create(device, 1, &be, &err)) gr_pd_die(err.msg);

    FILE *out = fopen(argv[3], "wb");
    if (!out) { perror(argv[3]); return 1; }
    int64_t n_pt = 0;
    for (int i = 0; i < g.n_tensors; i++) n_pt += g.tensors[i].kind == GR_TK_PARAM;
    int64_t head[3] = {n_pt, g.n_weights, in.k_steps};
    gr_pd_write(out, "GRPDOU01", 8);
    gr_pd_write(out, head, sizeof head);
    int64_t packed_off = 0;
    for (int i = 0; i < g.n_tensors; i++) {
        const gr_tensor *t = &g.tensors[i];
        if (t->kind != GR_TK_PARAM) continue;
        char name[GR_PD_NAME] = {0};
        snprintf(name, sizeof name, "%s.%s", g.layers[t->layer].name, t->pname);
        int64_t row[6] = {packed_off, t->ndim, 0, 0, 0, 0};
        packed_off += gr_tensor_numel(t);
        for (int d = 0; d < t->ndim; d++) row[2 + d] = t->shape[d];
        gr_pd_write(out, name, sizeof name);
        gr_pd_write(out, row, sizeof row);
    }

    /* (a) one training micro-step and an eval-mode forward at the given weights */
    gr_model m;
    gr_plan p, ev;
    gr_pd_model(&g, be, 0, &in, &m, &p);
    double stats[4] = {0};
    stats[0] = gr_pd_step(&p, &m, &in, &stats[1]);
    float *arena = malloc((size_t)g.n_trainable * sizeof *arena), *grads = malloc((size_t)g.n_weights * sizeof *grads);
    if (!arena || !grads) gr_pd_die("out of memory");
    gr_backend_download(be, arena, m.grads, (size_t)g.n_trainable * sizeof *arena);
    gr_pd_pack(&g, arena, grads);
    free(arena);
    if (gr_plan_compile(&ev, &m, &g, GR_PLAN_EVAL, true, &err)) gr_pd_die(err.msg);
    gr_batch_field f[2];
    gr_batch b = gr_pd_batch(&in, f);
    gr_exec_ctx ectx = {.training = false};
    gr_train_micro_step(&ev, &b, &ectx, &stats[2], &stats[3]);
    stats[2] = gr_pd_mean(&ev, &in, stats[2]);
    gr_pd_write(out, stats, sizeof stats);
    if (in.tokens) { /* the eval forward's logits */
        const gr_tensor *lt = &g.tensors[g.logits];
        const int64_t nl = in.n * gr_tensor_sample_numel(lt);
        if (lt->elem != GR_F32) gr_pd_die("the logits are not fp32");
        float *logits = malloc((size_t)nl * sizeof *logits);
        if (!logits) gr_pd_die("out of memory");
        gr_backend_download(be, logits, gr_plan_ptr(&ev, g.logits), (size_t)nl * sizeof *logits);
        gr_pd_write(out, logits, (size_t)nl * sizeof *logits);
        free(logits);
    }
    gr_pd_write(out, grads, (size_t)g.n_weights * sizeof *grads);
    free(grads);
    gr_plan_free(&ev);
    gr_plan_free(&p);
    gr_model_free(&m);

    /* (b) K steps of SGD (nesterov momentum, weight decay), then of AdamW */
    spec.train.optimizer.type = GR_OPTIM_SGD;
    spec.train.optimizer.lr = in.sgd[0];
    spec.train.optimizer.momentum = in.sgd[1];
    spec.train.optimizer.weight_decay = in.sgd[2];
    spec.train.optimizer.nesterov = true;
    gr_pd_optimize(&g, be, &spec, &in, out);
    memset(&spec.train.optimizer, 0, sizeof spec.train.optimizer);
    spec.train.optimizer.type = GR_OPTIM_ADAMW;
    spec.train.optimizer.lr = in.adamw[0];
    spec.train.optimizer.betas[0] = in.adamw[1];
    spec.train.optimizer.betas[1] = in.adamw[2];
    spec.train.optimizer.eps = in.adamw[3];
    spec.train.optimizer.weight_decay = in.adamw[4];
    gr_pd_optimize(&g, be, &spec, &in, out);

    if (fclose(out) != 0) gr_pd_die("cannot close the output file");
    gr_backend_free(be);
    gr_graph_free(&g);
    gr_cfg_free(layers);
    free(in.params);
    free(in.x);
    free(in.y);
    return 0;
}
