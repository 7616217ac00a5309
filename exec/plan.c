/* plan.c — the model's arenas and a plan bound to them: the memory plan
 * (graph/memplan.c), the support check, the activation arena, the steps
 * with their pointers resolved, and the backend's preparation. */
#include "exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "; 1234 bytes free of 5678 on cuda" where the backend can tell */
static const char *gr_free_str(gr_backend *be, char *buf, size_t n) {
    size_t fr = 0, tot = 0;
    buf[0] = 0;
    if (gr_backend_mem_info(be, &fr, &tot))
        snprintf(buf, n, "; %zu bytes free of %zu on %s", fr, tot, gr_backend_name(be));
    return buf;
}

gr_status gr_model_init(gr_model *m, const gr_graph *g, gr_backend *be, int optim_slots, gr_error *err) {
    memset(m, 0, sizeof *m);
    m->g = g;
    m->be = be;
    m->optim_slots = optim_slots;
    size_t pb, gb, ob;
    size_t total = gr_model_bytes(g, optim_slots, &pb, &gb, &ob);
    m->params = gr_backend_alloc(be, pb);
    m->grads = gr_backend_alloc(be, gb);
    m->optim = ob ? gr_backend_alloc(be, ob) : NULL;
    if (!m->params || !m->grads || (ob && !m->optim)) {
        gr_model_free(m);
        char fr[96];
        return gr_error_set(err, GR_ERR_OOM, "out of memory on %s: the model needs %zu bytes "
                            "(params %zu, grads %zu, optimizer state %zu)%s", gr_backend_name(be),
                            total, pb, gb, ob, gr_free_str(be, fr, sizeof fr));
    }
    /* the padding between tensors too: every whole-arena reduction (the parameters' check, a
     * group's sum) reads it, and recycled memory can hold NaN */
    gr_backend_zero(be, m->params, pb);
    gr_backend_zero(be, m->grads, gb);
    if (ob) gr_backend_zero(be, m->optim, ob);
    return GR_OK;
}

void gr_model_free(gr_model *m) {
    if (m->be) {
        gr_backend_dealloc(m->be, m->params);
        gr_backend_dealloc(m->be, m->grads);
        gr_backend_dealloc(m->be, m->optim);
    }
    memset(m, 0, sizeof *m);
}

bool gr_plan_holds(const gr_plan *p, int t) {
    const gr_tensor_kind k = p->g->tensors[t].kind;
    return k == GR_TK_PARAM || k == GR_TK_STATE || k == GR_TK_GRAD || gr_memplan_offset(&p->mem, t) >= 0;
}

void *gr_plan_ptr(const gr_plan *p, int t) {
    const gr_tensor *x = &p->g->tensors[t];
    switch (x->kind) {
    case GR_TK_PARAM:
    case GR_TK_STATE: return p->m && p->m->params ? p->m->params + x->param_offset : NULL;
    case GR_TK_GRAD: return p->m && p->m->grads ? p->m->grads + x->param_offset : NULL;
    default: {
        int64_t off = gr_memplan_offset(&p->mem, t);
        GR_ASSERT(off >= 0);
        return p->act ? (char *)p->act + off : NULL;
    }
    }
}

/* A node the backend has no kernel for: an error naming op and layer. */
static gr_status gr_plan_check_support(const gr_graph *g, int n_nodes, gr_backend *be, gr_error *err) {
    for (int i = 0; i < n_nodes; i++)
        if (gr_node_runs(&g->nodes[i]) && !gr_backend_supports_op(be, g->nodes[i].op))
            return gr_error_set(err, GR_ERR_DEVICE, "the %s backend has no kernel for op '%s' "
                                "(layer %s); this job cannot run there", gr_backend_name(be),
                                gr_op_name(g->nodes[i].op),
                                g->nodes[i].layer >= 0 ? g->layers[g->nodes[i].layer].name : "loss");
    return GR_OK;
}

static gr_status gr_plan_alloc_act(gr_plan *p, gr_error *err) {
    gr_model *m = p->m;
    p->act = gr_backend_alloc(m->be, p->mem.act_bytes ? p->mem.act_bytes : 64);
    if (!p->act) {
        size_t pb, gb, ob;
        gr_model_bytes(p->g, m->optim_slots, &pb, &gb, &ob);
        char fr[96];
        return gr_error_set(err, GR_ERR_OOM, "out of memory on %s: the %s activation arena needs "
                            "%zu bytes at micro-batch %lld, on top of the model's params %zu, grads %zu "
                            "and optimizer state %zu%s (lower train.micro_batch)", gr_backend_name(m->be),
                            p->mem.mode == GR_PLAN_TRAIN ? "training" : "eval", p->mem.act_bytes,
                            (long long)p->g->micro_batch, pb, gb, ob, gr_free_str(m->be, fr, sizeof fr));
    }
    gr_backend_zero(m->be, p->act, p->mem.act_bytes);
    return GR_OK;
}

/* One step per non-view node of the pass, pointers resolved when the
 * arena exists (NULL otherwise), each tensor's storage type as planned. */
static void gr_plan_bind(gr_plan *p, const uint8_t *run) {
    const gr_graph *g = p->g;
    gr_backend *be = p->m ? p->m->be : NULL;
    const int n_nodes = p->mem.n_nodes;
    gr_steps *s = &p->steps;
    s->g = g;
    s->micro_batch = g->micro_batch;
    s->step = gr_xcalloc((size_t)(n_nodes ? n_nodes : 1), sizeof *s->step);
    const bool bound = p->act != NULL;
    for (int i = 0; i < n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        if (!gr_node_runs(nd) || (run && !run[i])) continue;
        if (i < g->n_forward) p->n_fwd_steps = s->n + 1;
        gr_kargs *a = &s->step[s->n++];
        a->g = g;
        a->node = nd;
        a->be = be;
        for (int k = 0; k < nd->nin; k++) {
            a->tin[k] = &g->tensors[nd->in[k]];
            a->in[k] = bound ? gr_plan_ptr(p, nd->in[k]) : NULL;
            a->ein[k] = a->tin[k]->elem;
        }
        for (int k = 0; k < nd->nout; k++) {
            a->tout[k] = &g->tensors[nd->out[k]];
            a->out[k] = bound ? gr_plan_ptr(p, nd->out[k]) : NULL;
            a->eout[k] = a->tout[k]->elem;
        }
    }
}

static bool gr_kargs_has_half(const gr_kargs *a) {
    for (int k = 0; k < a->node->nin; k++)
        if (gr_elem_is_half(a->ein[k])) return true;
    for (int k = 0; k < a->node->nout; k++)
        if (gr_elem_is_half(a->eout[k])) return true;
    return false;
}

/* The fp32 staging copies of a's half tensors, one after another from base:
 * their bytes at the micro-batch; with base set, a's stage_in/stage_out
 * point there. */
static size_t gr_stage_layout(gr_kargs *a, char *base) {
    size_t off = 0;
    for (int k = 0; k < a->node->nin + a->node->nout; k++) {
        bool in = k < a->node->nin;
        int j = in ? k : k - a->node->nin;
        if (!gr_elem_is_half(in ? a->ein[j] : a->eout[j])) continue;
        if (base) *(in ? &a->stage_in[j] : &a->stage_out[j]) = base + off;
        off += ((size_t)gr_tensor_numel(in ? a->tin[j] : a->tout[j]) * sizeof(float) + 63) & ~(size_t)63;
    }
    return off;
}

/* Marks the steps whose half tensors their kernel does not take (all of
 * them without a backend: `gpurun plan` without a device) and sizes their
 * fp32 staging area, one for all (steps run one at a time): the largest
 * step's need. With the arena allocated, allocates it and points the
 * steps' stage_in/stage_out into it. */
static gr_status gr_plan_stage(gr_plan *p, bool alloc, gr_error *err) {
    gr_backend *be = p->m ? p->m->be : NULL;
    for (int i = 0; i < p->steps.n; i++) {
        gr_kargs *a = &p->steps.step[i];
        if (!gr_kargs_has_half(a) || (be && gr_backend_native_half(be, a))) continue;
        a->staged = true;
        p->n_staged++;
        size_t need = gr_stage_layout(a, NULL);
        if (need > p->stage_bytes) p->stage_bytes = need;
    }
    if (!alloc || !p->stage_bytes) return GR_OK;
    p->stage = gr_backend_alloc(be, p->stage_bytes);
    if (!p->stage) {
        char fr[96];
        return gr_error_set(err, GR_ERR_OOM, "out of memory on %s: the fp32 staging area of the half-precision "
                            "steps needs %zu bytes at micro-batch %lld%s (lower train.micro_batch)",
                            gr_backend_name(be), p->stage_bytes, (long long)p->g->micro_batch,
                            gr_free_str(be, fr, sizeof fr));
    }
    for (int i = 0; i < p->steps.n; i++)
        if (p->steps.step[i].staged) gr_stage_layout(&p->steps.step[i], p->stage);
    return GR_OK;
}

const char *gr_plan_staged_ops(const gr_plan *p, bool counts, char *buf, size_t n) {
    int staged[GR_OP_COUNT] = {0}, all[GR_OP_COUNT] = {0};
    for (int i = 0; i < p->steps.n; i++) {
        const gr_kargs *a = &p->steps.step[i];
        all[a->node->op]++;
        staged[a->node->op] += a->staged;
    }
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < p->steps.n; i++) {
        const int op = p->steps.step[i].node->op;
        if (!p->steps.step[i].staged || staged[op] < 0) continue;
        char part[48] = "";
        if (counts && staged[op] < all[op]) snprintf(part, sizeof part, " (%d of %d)", staged[op], all[op]);
        staged[op] = -1; /* named */
        int w = snprintf(buf + len, n - len, "%s%s%s", len ? ", " : "", gr_op_name(op), part);
        if (w < 0 || (size_t)w >= n - len) break;
        len += (size_t)w;
    }
    return buf;
}

gr_status gr_plan_compile(gr_plan *p, gr_model *m, const gr_graph *g, gr_plan_mode mode,
                          bool alloc, gr_error *err) {
    return gr_plan_compile_part(p, m, g, mode, alloc, NULL, NULL, err);
}

gr_status gr_plan_compile_part(gr_plan *p, gr_model *m, const gr_graph *g, gr_plan_mode mode, bool alloc,
                               const uint8_t *run, const uint8_t *pin, gr_error *err) {
    memset(p, 0, sizeof *p);
    p->g = g;
    p->m = m;
    const int n_nodes = mode == GR_PLAN_TRAIN ? g->n_nodes : g->n_forward;
    if (m && m->be) {
        gr_status st = gr_plan_check_support(g, n_nodes, m->be, err);
        if (st) return st;
    }
    gr_memplan_init_part(&p->mem, g, mode, run, pin);
    gr_status st = GR_OK;
    if (alloc) {
        GR_ASSERT(m && m->be);
        if ((st = gr_plan_alloc_act(p, err))) goto fail;
    }
    gr_plan_bind(p, run);
    if ((st = gr_plan_stage(p, alloc, err))) goto fail;
    if (m && m->be) p->ws_known = gr_backend_workspace(m->be, &p->steps, &p->steps.workspace);
    if (alloc && (st = gr_backend_prepare(m->be, &p->steps, err))) goto fail;
    return GR_OK;
fail:
    gr_plan_free(p);
    return st;
}

void gr_plan_free(gr_plan *p) {
    gr_backend *be = p->m ? p->m->be : NULL;
    if (p->steps.be_state && be) gr_backend_release(be, &p->steps);
    if (p->act && be) gr_backend_dealloc(be, p->act);
    if (p->stage && be) gr_backend_dealloc(be, p->stage);
    free(p->steps.step);
    free(p->hooks);
    gr_memplan_free(&p->mem);
    memset(p, 0, sizeof *p);
}
