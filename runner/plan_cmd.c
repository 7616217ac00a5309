/* plan_cmd.c — `gpurun plan` (gr_train_plan_report, see train.h): the job
 * compiled but not run; its layer table, FLOPs and memory per arena, and
 * whether it fits the device it would run on. */
#include "job.h"

#include <string.h>
#include <unistd.h>

#include "../graph/graph.h"

/* The layer table (forward nodes) and the FLOPs per sample and step. */
static void gr_plan_cmd_layers(const gr_job_spec *spec, const gr_graph *g, FILE *f) {
    char a[64], b[64], c[64];
    fprintf(f, "%-20s %-22s %-20s %12s %14s\n", "layer", "op", "output", "params", "FLOPs/sample");
    fprintf(f, "%-20s %-22s %-20s %12s %14s\n", "input", "-", gr_shape_str(&g->tensors[g->input], a, sizeof a),
            "0", "0");
    int64_t fwd = 0, train = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        train += nd->flops;
        if (i >= g->n_forward) continue;
        fwd += nd->flops;
        const char *name = nd->layer >= 0 ? g->layers[nd->layer].name : "loss";
        int64_t np = nd->layer >= 0 ? g->layers[nd->layer].n_params : 0;
        gr_fmt_count(np, b, sizeof b);
        gr_fmt_count(nd->flops, c, sizeof c);
        fprintf(f, "%-20s %-22s %-20s %12s %14s\n", name, gr_op_name(nd->op),
                gr_shape_str(&g->tensors[nd->out[0]], a, sizeof a), b, c);
    }
    gr_fmt_count(g->n_weights, a, sizeof a);
    fprintf(f, "\ntotal parameters: %s\n", a);
    gr_fmt_count(fwd, a, sizeof a);
    gr_fmt_count(train, b, sizeof b);
    fprintf(f, "FLOPs per sample: forward %s, forward + backward %s\n", a, b);
    gr_fmt_count(train * spec->train.batch_size, a, sizeof a);
    fprintf(f, "FLOPs per optimizer step: %s (batch %lld)\n", a, (long long)spec->train.batch_size);
}

/* Bytes per arena at the micro-batch; returns what training and eval
 * together need on the device. */
static size_t gr_plan_cmd_memory(const gr_job_spec *spec, const gr_graph *g, const gr_plan *tp, const gr_plan *ep,
                                 FILE *f) {
    char a[64], b[64];
    size_t pb, gb, ob;
    gr_model_bytes(g, gr_optim_slots(&spec->train.optimizer), &pb, &gb, &ob);
    fprintf(f, "memory at micro-batch %lld (bytes):\n", (long long)g->micro_batch);
    gr_fmt_count((int64_t)pb, a, sizeof a);
    fprintf(f, "  params           %14s\n", a);
    gr_fmt_count((int64_t)gb, a, sizeof a);
    fprintf(f, "  grads            %14s\n", a);
    gr_fmt_count((int64_t)ob, a, sizeof a);
    fprintf(f, "  optimizer state  %14s  (%s)\n", a, gr_optim_name(spec->train.optimizer.type));
    gr_fmt_count((int64_t)tp->mem.act_bytes, a, sizeof a);
    gr_fmt_count((int64_t)tp->mem.act_bytes_naive, b, sizeof b);
    fprintf(f, "  activations      %14s  (train; %s without reuse)\n", a, b);
    gr_fmt_count((int64_t)ep->mem.act_bytes, a, sizeof a);
    fprintf(f, "  activations      %14s  (eval)\n", a);
    gr_fmt_count((int64_t)(pb + gb + ob + tp->mem.act_bytes), a, sizeof a);
    fprintf(f, "  total            %14s  (training)\n", a);
    return pb + gb + ob + tp->mem.act_bytes + ep->mem.act_bytes;
}

/* A run that will not fit is told before it starts (on a GPU the cuDNN
 * workspace comes on top, chosen when the run prepares its plans). */
static void gr_plan_cmd_fit(const gr_job_spec *spec, size_t need, FILE *f) {
    char a[64], b[64], c[64];
    const char *dev = spec->device;
    gr_backend *be = NULL;
    gr_error e2;
    if (strcmp(dev, "auto") == 0) { /* what the run would take: GPU 0, else the cpu */
        dev = "cuda:0";
        if (gr_backend_create(dev, 1, &be, &e2) != GR_OK) be = NULL, dev = "cpu";
    }
    size_t fr = 0, tot = 0;
    if ((be || gr_backend_create(dev, 1, &be, &e2) == GR_OK) && gr_backend_mem_info(be, &fr, &tot)) {
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
    gr_backend_free(be);
}

gr_status gr_train_plan_report(const gr_job_spec *spec, FILE *f, gr_error *err) {
    gr_job j;
    gr_job_init(&j, spec, true);
    gr_status st;
    /* a model with model.input can be planned before its data exists
     * (configs/resnet50.yaml names an ImageNet file most machines lack) */
    const bool no_data = spec->model.n_input > 0 && spec->data.train.path[0] &&
                         access(spec->data.train.path, R_OK) != 0;
    if (no_data) {
        if ((st = gr_graph_build(spec, spec->model.input, spec->model.n_input, &j.g, err))) goto done;
        j.have_graph = true;
        gr_autodiff(&j.g, false);
    } else if ((st = gr_job_compile(&j, spec, false, err))) {
        goto done;
    }
    gr_plan tp, ep;
    if ((st = gr_plan_compile(&tp, NULL, &j.g, GR_PLAN_TRAIN, false, err))) goto done;
    if ((st = gr_plan_compile(&ep, NULL, &j.g, GR_PLAN_EVAL, false, err))) { gr_plan_free(&tp); goto done; }
    fprintf(f, "%s: %s, micro-batch %lld\n", spec->name, spec->file, (long long)j.g.micro_batch);
    if (no_data)
        fprintf(f, "(%s is not there: shapes from model.input)\n", spec->data.train.path);
    fprintf(f, "\n");
    gr_plan_cmd_layers(spec, &j.g, f);
    gr_plan_cmd_fit(spec, gr_plan_cmd_memory(spec, &j.g, &tp, &ep, f), f);
    gr_plan_free(&tp);
    gr_plan_free(&ep);
done:
    gr_job_free(&j);
    return st;
}
