/* tp.c — tensor parallelism, the job's side (see tp.h). */
#include "tp.h"

#include "parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../config/schema.h"
#include "../dist/watchdog.h"

gr_status gr_tp_prepare(gr_job *j, gr_error *err) {
    const gr_job_spec *s = j->spec;
    if (s->parallel.tensor <= 1) return GR_OK;
    j->world.agreed = j->dp.comm.agreed = true; /* every rank meets a refusal here alike */
    gr_tp_job *tp = gr_xcalloc(1, sizeof *tp);
    tp->t = (int)s->parallel.tensor;
    tp->rank = j->world.rank % tp->t;
    j->tp = tp;
    gr_status st = gr_tp_graph(j, err);
    if (!st) j->world.agreed = j->dp.comm.agreed = false;
    return st;
}

gr_status gr_tp_graph(gr_job *j, gr_error *err) {
    gr_tp_job *tp = j->tp;
    if (!tp) return GR_OK;
    gr_status st = gr_tp_plan_make(&j->g, j->spec, tp->t, &tp->plan, err);
    if (st) return st;
    gr_graph_io io = j->io;
    io.tp = &tp->plan;
    io.tp_rank = tp->rank;
    if ((st = gr_job_build(j->spec, &io, &tp->g, err))) return st;
    tp->have_graph = true;
    GR_ASSERT(tp->g.n_layers == j->g.n_layers); /* a layer's index is the same in both (pipe.c cuts the whole) */
    return GR_OK;
}

/* a's output (n elements) summed over the group in place; half storage: the parts summed in fp32
 * (in scratch, the backend's memory: the device's on a GPU), the sum rounded once. */
static gr_status gr_tp_sum_out(gr_tp_job *tp, const gr_kargs *a, int64_t n, const char *what, gr_error *err) {
    const gr_elem e = a->eout[0];
    if (!gr_elem_is_half(e)) return gr_comm_sum_f32(&tp->group, a->out[0], n, what, err);
    if (tp->scratch_n < n) {
        if (tp->scratch) gr_backend_dealloc(a->be, tp->scratch);
        tp->scratch = gr_backend_alloc(a->be, (size_t)n * sizeof(float));
        tp->scratch_n = tp->scratch ? n : 0;
    }
    if (!tp->scratch)
        return gr_error_set(err, GR_ERR_OOM, "%s: its %lld floats in fp32 do not fit on %s", what, (long long)n,
                            gr_backend_name(a->be));
    gr_backend_cast(a->be, tp->scratch, GR_F32, a->out[0], e, n);
    gr_status st = gr_comm_sum_f32(&tp->group, tp->scratch, n, what, err);
    gr_backend_cast(a->be, a->out[0], e, tp->scratch, GR_F32, n);
    return st;
}

/* After each step of the part's train plan: a row layer's output, or a
 * column layer's input gradient, summed over the group in place. */
static void gr_tp_hook(void *user, int step, const gr_kargs *a) {
    (void)step;
    gr_job *j = user;
    gr_tp_job *tp = j->tp;
    const gr_node *nd = a->node;
    if (nd->layer < 0 || tp->hook_st) return;
    const gr_tp_role role = tp->plan.role[nd->layer];
    const bool row_fwd = nd->op == GR_OP_DENSE && role == GR_TP_ROW;
    const bool col_bwd = nd->op == GR_OP_DENSE_BWD_DATA && (role == GR_TP_COLUMN || role == GR_TP_COLUMN_QKV);
    if (!row_fwd && !col_bwd) return;
    const int64_t n = gr_kargs_numel(a, a->tout[0]);
    char what[GR_NAME_MAX + 64];
    snprintf(what, sizeof what, "the tensor group's sum of layer %s's %s", j->g.layers[nd->layer].name,
             row_fwd ? "output" : "input gradient");
    const double t0 = gr_wd_enter(what, tp->step);
    tp->hook_st = gr_tp_sum_out(tp, a, n, what, &tp->hook_err);
    gr_wd_leave();
    const double t1 = gr_now();
    j->mx.comm_s += t1 - t0;
    gr_hooks_host(j->hooks, GR_SPAN_COMM, what, t0, t1);
}

void gr_tp_hook_plan(gr_job *j, gr_plan *p) {
    gr_exec_hook h = {.after = gr_tp_hook, .user = j};
    gr_plan_add_hook(p, &h);
}

gr_status gr_tp_pass_status(gr_job *j, gr_error *err) {
    if (!j->tp || !j->tp->hook_st) return GR_OK;
    *err = j->tp->hook_err;
    return j->tp->hook_st;
}

/* The part's groups: og (a row bias frozen on rank > 0) and og_norm (what
 * this process counts in the norm: its split tensors, and on rank 0 the rest). */
static void gr_tp_groups(gr_job *j, gr_opt_groups *base) {
    gr_tp_job *tp = j->tp;
    const gr_graph *g = &tp->g;
    int64_t (*keep)[2] = gr_xcalloc((size_t)g->n_tensors + 1, sizeof *keep);
    int64_t (*split)[2] = gr_xcalloc((size_t)g->n_tensors + 1, sizeof *split);
    int nk = 0, ns = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_TK_PARAM || t->alias_of >= 0) continue;
        const gr_tp_role r = t->layer >= 0 ? tp->plan.role[t->layer] : GR_TP_REPLICATED;
        const bool row_bias = r == GR_TP_ROW && strcmp(t->pname, "bias") == 0;
        const bool is_split = (r == GR_TP_COLUMN || r == GR_TP_COLUMN_QKV || r == GR_TP_ROW) && !row_bias;
        if (tp->rank == 0 || !row_bias) keep[nk][0] = t->param_offset, keep[nk++][1] = gr_tensor_numel(t);
        if (tp->rank == 0 || is_split) split[ns][0] = t->param_offset, split[ns++][1] = gr_tensor_numel(t);
    }
    const gr_opt_range whole = {0, g->n_trainable, 1.0, j->spec->train.optimizer.weight_decay, false};
    gr_opt_groups_keep(base, &whole, (const int64_t(*)[2])keep, nk, &tp->og);
    gr_opt_groups_keep(base, &whole, (const int64_t(*)[2])split, ns, &tp->og_norm);
    free(keep);
    free(split);
}

gr_status gr_tp_model(gr_job *j, gr_error *err) {
    gr_tp_job *tp = j->tp;
    if (!tp) return GR_OK;
    gr_status st = gr_graph_set_batch(&tp->g, j->g.micro_batch, err); /* the micro-batch the run decided */
    if (st || (st = gr_model_init(&tp->m, &tp->g, j->be, j->m.optim_slots, err))) return st;
    gr_tp_scatter(j);
    if (!j->pp) { /* else the pipeline stage's plans of the part (pipe.c) */
        if ((st = gr_plan_compile(&tp->train, &tp->m, &tp->g, GR_PLAN_TRAIN, true, err))) return st;
        gr_tp_hook_plan(j, &tp->train);
    }
    gr_opt_groups base;
    if ((st = gr_opt_groups_make(&tp->g, j->spec, &base, err))) return st;
    gr_tp_groups(j, &base);
    gr_opt_groups_free(&base);
    return GR_OK;
}

gr_status gr_tp_split(gr_job *j, gr_error *err) {
    gr_tp_job *tp = j->tp;
    if (!tp) return GR_OK;
    gr_status st = gr_parallel_group(j, j->world.rank / tp->t, tp->rank, &tp->group, "tensor groups", err);
    if (st) return st;
    GR_ASSERT(tp->group.world == tp->t && tp->group.rank == tp->rank);
    tp->split = true;
    return GR_OK;
}

/* gr_tp_copy between the whole model's arenas and the part's (params, then each optimizer slot),
 * to_part or back; on host memory in place, on a GPU through host copies (the source downloaded,
 * the destination uploaded). Back: the whole model's arenas hold zeros where the part has nothing. */
static void gr_tp_move(gr_job *j, bool to_part) {
    gr_tp_job *tp = j->tp;
    const bool host = gr_backend_host_addressable(j->be);
    const int64_t slots = j->m.optim_slots;
    float *dev_full[2] = {j->m.params, j->m.optim}, *dev_part[2] = {tp->m.params, tp->m.optim};
    const int64_t n_full[2] = {j->g.n_params, slots * j->g.n_trainable};
    const int64_t n_part[2] = {tp->g.n_params, slots * tp->g.n_trainable};
    float *full[2], *part[2];
    for (int a = 0; a < 2; a++) {
        full[a] = host ? dev_full[a] : gr_xcalloc((size_t)n_full[a] + 1, sizeof(float));
        part[a] = host ? dev_part[a] : gr_xcalloc((size_t)n_part[a] + 1, sizeof(float));
        if (host && !to_part && n_full[a]) memset(full[a], 0, (size_t)n_full[a] * sizeof(float));
        if (!host && to_part) gr_backend_download(j->be, full[a], dev_full[a], (size_t)n_full[a] * sizeof(float));
        if (!host && !to_part) gr_backend_download(j->be, part[a], dev_part[a], (size_t)n_part[a] * sizeof(float));
    }
    gr_tp_copy(&j->g, &tp->g, &tp->plan, tp->rank, full[0], part[0], 0, 0, to_part, false);
    for (int k = 0; k < slots; k++)
        gr_tp_copy(&j->g, &tp->g, &tp->plan, tp->rank, full[1], part[1], k * j->g.n_trainable,
                   k * tp->g.n_trainable, to_part, true);
    for (int a = 0; a < 2 && !host; a++) {
        if (to_part) gr_backend_upload(j->be, dev_part[a], part[a], (size_t)n_part[a] * sizeof(float));
        else gr_backend_upload(j->be, dev_full[a], full[a], (size_t)n_full[a] * sizeof(float));
        free(full[a]);
        free(part[a]);
    }
}

void gr_tp_scatter(gr_job *j) {
    if (j->tp) gr_tp_move(j, true);
}

gr_status gr_tp_gather(gr_job *j, gr_error *err) {
    gr_tp_job *tp = j->tp;
    if (!tp) return GR_OK;
    const int64_t np = j->g.n_params, no = (int64_t)j->m.optim_slots * j->g.n_trainable;
    gr_tp_move(j, false);
    const double t0 = gr_wd_enter("gathering the tensor group's parts of the model", j->dp.step);
    gr_status st = gr_comm_sum_f32(&tp->group, j->m.params, np, "the model's parameters", err);
    if (!st && no) st = gr_comm_sum_f32(&tp->group, j->m.optim, no, "the optimizer state", err);
    gr_wd_leave();
    j->mx.comm_s += gr_now() - t0;
    return st;
}

gr_status gr_tp_sum_norm(gr_job *j, double *sumsq, gr_error *err) {
    if (!j->tp) return GR_OK;
    const double t0 = gr_wd_enter("the gradients' norm over the tensor group", j->dp.step);
    gr_status st = gr_comm_sum_f64(&j->tp->group, sumsq, 1, "the gradients' norm", err);
    gr_wd_leave();
    j->mx.comm_s += gr_now() - t0;
    return st;
}

gr_status gr_tp_apply(gr_job *j, double lr, int64_t step, double scale, bool *finite, gr_error *err) {
    gr_tp_job *tp = j->tp;
    double sumsq = gr_train_grad_sumsq(&tp->m, &tp->og_norm);
    gr_status st = gr_tp_sum_norm(j, &sumsq, err);
    if (st) return st;
    *finite = gr_train_apply_sumsq(&tp->m, j->spec, &tp->og, lr, step, scale, GR_CHECK_SKIP, &sumsq, NULL);
    return GR_OK;
}

void gr_tp_free(gr_job *j) {
    gr_tp_job *tp = j->tp;
    if (!tp) return;
    gr_plan_free(&tp->train);
    gr_model_free(&tp->m);
    gr_opt_groups_free(&tp->og);
    gr_opt_groups_free(&tp->og_norm);
    gr_tp_plan_free(&tp->plan);
    if (tp->scratch) gr_backend_dealloc(j->be, tp->scratch);
    if (tp->have_graph) gr_graph_free(&tp->g);
    if (tp->split) gr_comm_free(&tp->group);
    free(tp);
    j->tp = NULL;
}
