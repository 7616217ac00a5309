/* pp.c — a pipeline stage's runtime (see pp.h): its slots, the walk of its
 * schedule, the messages, and the model shared between the stages. */
#include "pp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watchdog.h"

#define GR_PP_GRAD_TAG 16384 /* tags: activation tensor i is i, gradient tensor i is this + i */

gr_status gr_pp_init(gr_pp *pp, int s, const gr_stage_plan *sp, gr_model *mo, const gr_graph *g, gr_pipe_kind kind,
                     int m, gr_error *err) {
    memset(pp, 0, sizeof *pp);
    GR_ASSERT(s >= 0 && s < sp->p);
    pp->m = mo;
    const int p = sp->p;
    gr_stage_io_init(g, sp, s, &pp->io);
    pp->ranges = gr_xcalloc((size_t)p, sizeof *pp->ranges);
    gr_stages_ranges(g, sp, pp->ranges);
    gr_status st = gr_pipe_schedule_init(&pp->sched, p, m, kind, err);
    if (st) return st;
    pp->k = gr_pipe_peak_activations(kind, p, m, s);
    pp->slot = gr_xcalloc((size_t)pp->k, sizeof *pp->slot);
    pp->ctx = gr_xcalloc((size_t)pp->k, sizeof *pp->ctx);
    for (int i = 0; i < pp->k; i++) {
        if (!(st = gr_plan_compile_part(&pp->slot[i], mo, g, GR_PLAN_TRAIN, true, pp->io.run, pp->io.pin, err)))
            continue;
        char msg[GR_ERROR_MSG_MAX], head[160];
        memcpy(msg, err->msg, sizeof msg);
        int w = snprintf(head, sizeof head, "pipeline stage %d of %d (schedule %s, %d micro-batch%s in flight, each "
                         "its own activation arena): ", s + 1, p, gr_pipe_kind_name(kind), pp->k,
                         pp->k > 1 ? "es" : "");
        const size_t hn = w > 0 ? GR_MIN((size_t)w, sizeof head - 1) : 0;
        size_t mn = strnlen(msg, sizeof msg - 1); /* the stage first, then as much of the message as fits */
        if (mn > sizeof err->msg - 1 - hn) mn = sizeof err->msg - 1 - hn;
        memcpy(err->msg, head, hn);
        memcpy(err->msg + hn, msg, mn);
        err->msg[hn + mn] = '\0';
        return st;
    }
    return GR_OK;
}

size_t gr_pp_slot_bytes(const gr_pp *pp) { return pp->k ? pp->slot[0].mem.act_bytes : 0; }

void gr_pp_free(gr_pp *pp) {
    for (int i = 0; i < pp->k; i++) gr_plan_free(&pp->slot[i]);
    free(pp->slot);
    free(pp->ctx);
    free(pp->ranges);
    gr_stage_io_free(&pp->io);
    gr_pipe_schedule_free(&pp->sched);
    memset(pp, 0, sizeof *pp);
}

/* A message's tensor t at n samples, in whole floats (a root's bytes are
 * padded to 64 in its arena, so the last float never reaches another's). */
static int64_t gr_pp_words(const gr_graph *g, int t, int64_t n) {
    const gr_tensor *x = &g->tensors[t];
    const int64_t numel = x->batched ? gr_tensor_sample_numel(x) * n : gr_tensor_numel(x);
    return (numel * (int64_t)gr_elem_size(x->elem) + 3) / 4;
}

static double gr_pp_enter(gr_pp *pp, const char *what) { return gr_wd_enter(what, pp->step); }

static void gr_pp_leave(gr_pp *pp, double t0) {
    gr_wd_leave();
    const double t1 = gr_now();
    if (pp->comm_s) *pp->comm_s += t1 - t0;
    gr_hooks_host(pp->hooks ? *pp->hooks : NULL, GR_SPAN_COMM, gr_wd_what(), t0, t1);
}

/* A message: its tensors t[0..n) in the slot of micro-batch mb, tagged tag + index. */
typedef struct gr_pp_msg {
    const int *t;
    int n, tag;
    gr_plan *slot;
    int mb;
    const char *kind; /* "activation", "gradient" */
} gr_pp_msg;

/* One exchange with peer: out's tensors sent, in's received (either NULL), one wait. */
static gr_status gr_pp_exchange(gr_pp *pp, const gr_pp_msg *out, const gr_pp_msg *in, int peer, int64_t n,
                                gr_error *err) {
    const gr_graph *g = pp->m->g;
    gr_status st = GR_OK;
    char what[160];
    const int s = pp->comm.rank + 1;
    GR_ASSERT(pp->comm.world == pp->sched.p);
    if (out && in)
        snprintf(what, sizeof what, "pipeline stage %d: sending the %s of micro-batch %d to stage %d and receiving "
                 "the %s of micro-batch %d from it", s, out->kind, out->mb, peer + 1, in->kind, in->mb);
    else
        snprintf(what, sizeof what, "pipeline stage %d: %s the %s of micro-batch %d %s stage %d", s,
                 out ? "sending" : "receiving", out ? out->kind : in->kind, out ? out->mb : in->mb,
                 out ? "to" : "from", peer + 1);
    for (int i = 0; out && i < out->n && !st; i++)
        st = gr_comm_isend_f32(&pp->comm, gr_plan_ptr(out->slot, out->t[i]), gr_pp_words(g, out->t[i], n), peer,
                               out->tag + i, what, err);
    for (int i = 0; in && i < in->n && !st; i++)
        st = gr_comm_irecv_f32(&pp->comm, gr_plan_ptr(in->slot, in->t[i]), gr_pp_words(g, in->t[i], n), peer,
                               in->tag + i, what, err);
    const double t0 = gr_pp_enter(pp, what);
    gr_error e2; /* what was started is finished, also after a failed start */
    gr_status wst = gr_comm_wait_all(&pp->comm, st ? &e2 : err);
    pp->wait_s += gr_now() - t0;
    gr_pp_leave(pp, t0);
    return st ? st : wst;
}

/* The activation ('a') or gradient ('g') message of micro-batch mb, sent or received. */
static gr_pp_msg gr_pp_msg_of(gr_pp *pp, char kind, bool send, int mb) {
    const gr_stage_io *io = &pp->io;
    if (kind == 'a')
        return (gr_pp_msg){send ? io->send_act : io->recv_act, send ? io->n_send_act : io->n_recv_act, 0,
                           &pp->slot[mb % pp->k], mb, "activation"};
    return (gr_pp_msg){send ? io->send_grad : io->recv_grad, send ? io->n_send_grad : io->n_recv_grad, GR_PP_GRAD_TAG,
                       &pp->slot[mb % pp->k], mb, "gradient"};
}

/* What each message action sends and receives: 'a' activation, 'g' gradient, 0 nothing. */
static const struct { char send, recv; } gr_pp_msgs[GR_PIPE_OP_COUNT] = {
    [GR_PIPE_SEND_ACT] = {'a', 0},           [GR_PIPE_RECV_ACT] = {0, 'a'},
    [GR_PIPE_SEND_GRAD] = {'g', 0},          [GR_PIPE_RECV_GRAD] = {0, 'g'},
    [GR_PIPE_SEND_ACT_RECV_GRAD] = {'a', 'g'}, [GR_PIPE_SEND_GRAD_RECV_ACT] = {'g', 'a'},
};

/* A message action: its sends (micro-batch mb) and receives (mb, or recv_mb beside a send). */
static gr_status gr_pp_message(gr_pp *pp, const gr_pipe_action *a, int64_t n, gr_error *err) {
    const char so = gr_pp_msgs[a->op].send, ri = gr_pp_msgs[a->op].recv;
    GR_ASSERT(so || ri);
    gr_pp_msg x = {0}, y = {0};
    if (so) x = gr_pp_msg_of(pp, so, true, a->mb);
    if (ri) y = gr_pp_msg_of(pp, ri, false, so ? a->recv_mb : a->mb);
    return gr_pp_exchange(pp, so ? &x : NULL, ri ? &y : NULL, a->peer, n, err);
}

/* The stage's forward or backward of micro-batch mb. */
static gr_status gr_pp_compute(gr_pp *pp, const gr_pipe_action *a, int64_t n, const gr_pp_calls *c, gr_error *err) {
    gr_plan *pl = &pp->slot[a->mb % pp->k];
    gr_exec_ctx *ctx = &pp->ctx[a->mb % pp->k];
    const bool fwd = a->op == GR_PIPE_FORWARD;
    if (fwd && c->load) {
        gr_status st = c->load(c->user, a->mb, pl, ctx, err);
        if (st) return st;
    }
    gr_hooks_micro(pp->hooks ? *pp->hooks : NULL, a->mb);
    gr_plan_run_steps(pl, n, ctx, fwd ? 0 : pl->n_fwd_steps, fwd ? pl->n_fwd_steps : pl->steps.n);
    if (fwd && c->forwarded) c->forwarded(c->user, a->mb, pl);
    return GR_OK;
}

gr_status gr_pp_step(gr_pp *pp, int64_t n, const gr_pp_calls *c, gr_error *err) {
    const int s = pp->comm.rank;
    int na;
    const gr_pipe_action *act = gr_pipe_stage(&pp->sched, s, &na);
    const double t0 = gr_now();
    pp->wait_s = 0.0;
    gr_status st = GR_OK;
    for (int i = 0; i < na && !st; i++) {
        const gr_pipe_action *a = &act[i];
        const bool compute = a->op == GR_PIPE_FORWARD || a->op == GR_PIPE_BACKWARD;
        st = compute ? gr_pp_compute(pp, a, n, c, err) : gr_pp_message(pp, a, n, err);
    }
    pp->step_s = gr_now() - t0;
    return st;
}

/* floats [off, off + n) of base from stage q to every other stage */
static gr_status gr_pp_share_range(gr_pp *pp, float *base, int64_t off, int64_t n, int q, int tag, const char *what,
                                   gr_error *err) {
    gr_status st = GR_OK;
    if (n == 0) return GR_OK;
    if (pp->comm.rank != q) return gr_comm_recv_f32(&pp->comm, base + off, n, q, tag, what, err);
    for (int r = 0; r < pp->comm.world && !st; r++)
        if (r != q) st = gr_comm_send_f32(&pp->comm, base + off, n, r, tag, what, err);
    return st;
}

gr_status gr_pp_share_model(gr_pp *pp, gr_error *err) {
    gr_model *m = pp->m;
    const int64_t nt = m->g->n_trainable;
    gr_status st = GR_OK;
    char what[96];
    for (int q = 0; q < pp->comm.world && !st; q++) {
        const gr_stage_range *r = &pp->ranges[q];
        snprintf(what, sizeof what, "sharing pipeline stage %d's weights and optimizer state", q + 1);
        const double t0 = gr_pp_enter(pp, what);
        st = gr_pp_share_range(pp, m->params, r->param_off, r->param_n, q, 0, what, err);
        if (!st) st = gr_pp_share_range(pp, m->params, r->state_off, r->state_n, q, 1, what, err);
        for (int k = 0; k < m->optim_slots && !st; k++)
            st = gr_pp_share_range(pp, m->optim + (int64_t)k * nt, r->param_off, r->param_n, q, 2 + k, what, err);
        gr_pp_leave(pp, t0);
    }
    return st;
}

gr_status gr_pp_sum(gr_pp *pp, double *v, int n, const char *what, gr_error *err) {
    const double t0 = gr_pp_enter(pp, what);
    gr_status st = gr_comm_sum_f64(&pp->comm, v, n, what, err);
    gr_pp_leave(pp, t0);
    return st;
}
