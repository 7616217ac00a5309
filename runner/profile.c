/* profile.c — the step profiler (see profile.h). */
#include "profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/graph.h"
#include "json.h"
#include "pipe.h"
#include "tp.h"
#include "rundir.h"
#include "train.h"

/* One row of the table: an op step of the train plan, or a span kind. */
typedef struct gr_prof_row {
    double total_s;
    int64_t calls;
    double flops, bytes; /* summed over the calls; 0: not known */
    bool bf16;           /* an op whose kernel computed on bf16 storage, read or written (not staged): the bf16 GEMM
                            peak is its roof */
} gr_prof_row;

/* One trace event, written at the end. */
typedef struct gr_prof_event {
    int row;          /* index into rows */
    char what[128];   /* a host span's name, copied (a collective's is built on its caller's stack);
                         "": the row's */
    double ts, dur;   /* seconds: from the origin, long */
    int64_t step;
    int micro;        /* the micro-batch of the step (-1: the step's) */
    bool uncounted;   /* a host span inside an op (its time is the op's): traced, not a row's */
} gr_prof_event;

struct gr_prof {
    gr_job *j;
    gr_backend *be;
    gr_plan *plan;
    int nops, accum;
    int64_t first, end;   /* the profiled steps [first, end) */
    bool active, in_op;
    int64_t step;
    int micro, micro_done; /* the micro-batch being run, those finished this step */
    gr_mark base;          /* the step's first mark */
    gr_mark *ops;          /* [accum][nops][2]: before and after each op */
    gr_mark *spans;        /* [accum][2][2]: H2D and D2H of each micro-batch; then OPTIM's two */
    double h2d_bytes;      /* of one micro-batch's copy */
    gr_loop_hooks hooks;   /* what the loop calls (loophooks.h): j->hooks */
    gr_prof_row *rows;     /* [nops + GR_SPAN_KINDS] */
    double t_origin, t_step0, wall_s;
    int64_t steps_done;
    gr_peak peak;         /* the machine's roofline, measured after the steps (zeros: the backend does not) */
    gr_prof_event *ev;
    size_t nev, cap_ev;
    size_t ev_step; /* the events of the step being run start here; those of ended steps end here */
};

static const char *const gr_span_names[GR_SPAN_KINDS] = {
    [GR_SPAN_DATA] = "data wait", [GR_SPAN_H2D] = "copy to device", [GR_SPAN_D2H] = "copy to host",
    [GR_SPAN_OPTIM] = "optimizer", [GR_SPAN_COMM] = "collective",
};

static void gr_prof_hook_before(void *user, int step, const gr_kargs *a);
static void gr_prof_hook_after(void *user, int step, const gr_kargs *a);
static void gr_prof_step_begin(void *ctx, int64_t step);
static void gr_prof_step_end(void *ctx);
static void gr_prof_begin(void *ctx, gr_span k, double bytes);
static void gr_prof_end(void *ctx, gr_span k);
static void gr_prof_host(void *ctx, gr_span k, const char *what, double t0, double t1);
static void gr_prof_micro(void *ctx, int mb);

gr_prof *gr_prof_open(gr_job *j, int steps, int64_t start, int64_t total, bool quiet) {
    const int64_t first = start + GR_PROF_WARMUP;
    if (first >= total) {
        if (!quiet)
            fprintf(stderr, "gpurun: --profile: nothing profiled: the run has %lld steps to go, no more than the "
                    "%d warm-up steps\n", (long long)(total - start), GR_PROF_WARMUP);
        return NULL;
    }
    gr_prof *p = gr_xcalloc(1, sizeof *p);
    p->j = j;
    p->be = j->be;
    p->plan = &j->train_plan;
    p->nops = p->plan->steps.n;
    p->accum = (int)(j->spec->train.batch_size / (j->spec->train.micro_batch * j->dp.comm.world));
    p->first = first;
    p->end = first + steps < total ? first + steps : total;
    p->ops = gr_xcalloc((size_t)p->accum * (size_t)p->nops * 2, sizeof *p->ops);
    p->spans = gr_xcalloc((size_t)p->accum * 4 + 2, sizeof *p->spans);
    p->rows = gr_xcalloc((size_t)p->nops + GR_SPAN_KINDS, sizeof *p->rows);
    gr_exec_hook h = {.before = gr_prof_hook_before, .after = gr_prof_hook_after, .user = p, .inner = true};
    gr_plan_add_hook(p->plan, &h);
    /* a pipeline stage runs its steps in the plans of its micro-batches in flight (the same steps) */
    for (int i = 0; j->pp && i < j->pp->pp.k; i++) gr_plan_add_hook(&j->pp->pp.slot[i], &h);
    if (j->tp && !j->pp) gr_plan_add_hook(&j->tp->train, &h); /* a tensor group's part: the same steps */
    p->hooks = (gr_loop_hooks){.ctx = p, .step_begin = gr_prof_step_begin, .step_end = gr_prof_step_end,
                               .begin = gr_prof_begin, .end = gr_prof_end, .host = gr_prof_host,
                               .micro = gr_prof_micro};
    j->hooks = &p->hooks;
    if (!quiet && p->end - p->first < steps)
        fprintf(stderr, "gpurun: --profile: %lld steps profiled (the run has no more after the %d warm-up steps)\n",
                (long long)(p->end - p->first), GR_PROF_WARMUP);
    return p;
}

void gr_prof_free(gr_prof *p) {
    if (!p) return;
    if (p->j->hooks == &p->hooks) p->j->hooks = NULL;
    const size_t nops = (size_t)p->accum * (size_t)p->nops * 2, nspans = (size_t)p->accum * 4 + 2;
    for (size_t i = 0; i < nops; i++) gr_backend_mark_free(p->be, &p->ops[i]);
    for (size_t i = 0; i < nspans; i++) gr_backend_mark_free(p->be, &p->spans[i]);
    gr_backend_mark_free(p->be, &p->base);
    free(p->ops);
    free(p->spans);
    free(p->rows);
    free(p->ev);
    free(p);
}

/* ---- recording ---- */

static gr_mark *gr_prof_op_mark(gr_prof *p, int micro, int op, int end) {
    return &p->ops[((size_t)micro * (size_t)p->nops + (size_t)op) * 2 + (size_t)end];
}

/* H2D / D2H of micro-batch micro, or OPTIM (micro ignored) */
static gr_mark *gr_prof_span_mark(gr_prof *p, gr_span k, int micro, int end) {
    if (k == GR_SPAN_OPTIM) return &p->spans[(size_t)p->accum * 4 + (size_t)end];
    return &p->spans[((size_t)micro * 2 + (k == GR_SPAN_D2H)) * 2 + (size_t)end];
}

static void gr_prof_hook_before(void *user, int step, const gr_kargs *a) {
    (void)a;
    gr_prof *p = user;
    if (!p->active) return;
    p->in_op = true;
    gr_backend_mark(p->be, gr_prof_op_mark(p, p->micro, step, 0));
}

static void gr_prof_hook_after(void *user, int step, const gr_kargs *a) {
    (void)a;
    gr_prof *p = user;
    if (!p->active) return;
    gr_backend_mark(p->be, gr_prof_op_mark(p, p->micro, step, 1));
    p->in_op = false;
}

static void gr_prof_step_begin(void *ctx, int64_t step) {
    gr_prof *p = ctx;
    p->active = step >= p->first && step < p->end;
    if (!p->active) return;
    p->step = step;
    p->micro = p->micro_done = 0;
    if (p->steps_done == 0) p->t_origin = gr_now();
    p->nev = p->ev_step; /* a step that did not end (a stop, a divergence) is not profiled */
    p->t_step0 = gr_now();
    gr_backend_mark(p->be, &p->base);
}

static void gr_prof_begin(void *ctx, gr_span k, double bytes) {
    gr_prof *p = ctx;
    if (!p->active || k == GR_SPAN_DATA || k == GR_SPAN_COMM) return;
    if (k == GR_SPAN_H2D) p->h2d_bytes = bytes;
    gr_backend_mark(p->be, gr_prof_span_mark(p, k, p->micro, 0));
}

static void gr_prof_end(void *ctx, gr_span k) {
    gr_prof *p = ctx;
    if (!p->active || k == GR_SPAN_DATA || k == GR_SPAN_COMM) return;
    gr_backend_mark(p->be, gr_prof_span_mark(p, k, p->micro, 1));
    if (k == GR_SPAN_D2H) { /* the micro-batch's pass is over */
        p->micro_done = ++p->micro;
        if (p->micro == p->accum) p->micro = 0; /* the optimizer's marks are the step's */
    }
}

static void gr_prof_micro(void *ctx, int mb) {
    gr_prof *p = ctx;
    if (p->active) p->micro = mb;
}

static void gr_prof_event_add(gr_prof *p, int row, const char *what, double t0, double dur, int micro) {
    GR_GROW(p->ev, p->cap_ev, p->nev + 1);
    gr_prof_event *e = &p->ev[p->nev++];
    *e = (gr_prof_event){.row = row, .ts = t0 - p->t_origin, .dur = dur, .step = p->step, .micro = micro};
    if (what) snprintf(e->what, sizeof e->what, "%s", what);
}

static void gr_prof_host(void *ctx, gr_span k, const char *what, double t0, double t1) {
    gr_prof *p = ctx;
    if (!p || !p->active) return;
    gr_prof_event_add(p, p->nops + (int)k, what, t0, t1 - t0, k == GR_SPAN_COMM ? -1 : p->micro);
    p->ev[p->nev - 1].uncounted = p->in_op; /* a collective inside an op is in the op's time */
}

/* ---- reading a step ---- */

/* The host-clock time of mark m (its offset from the step's first mark). */
static double gr_prof_when(gr_prof *p, const gr_mark *m) {
    return p->base.t + gr_backend_mark_seconds(p->be, &p->base, m);
}

/* The bytes op a reads and writes at its run's n. */
static double gr_prof_op_bytes(const gr_kargs *a) {
    double bytes = 0.0;
    for (int k = 0; k < a->node->nin; k++)
        bytes += (double)gr_kargs_numel(a, a->tin[k]) * (double)gr_elem_size(a->ein[k]);
    for (int k = 0; k < a->node->nout; k++)
        bytes += (double)gr_kargs_numel(a, a->tout[k]) * (double)gr_elem_size(a->eout[k]);
    return bytes;
}

/* A device span's row and event. */
static void gr_prof_read_span(gr_prof *p, gr_span k, int micro, double bytes) {
    const gr_mark *m0 = gr_prof_span_mark(p, k, micro, 0), *m1 = gr_prof_span_mark(p, k, micro, 1);
    const double t0 = gr_prof_when(p, m0), dur = gr_backend_mark_seconds(p->be, m0, m1);
    gr_prof_row *r = &p->rows[p->nops + (int)k];
    r->total_s += dur;
    r->calls++;
    r->bytes += bytes;
    gr_prof_event_add(p, p->nops + (int)k, NULL, t0, dur, k == GR_SPAN_OPTIM ? -1 : micro);
}

static void gr_prof_step_end(void *ctx) {
    gr_prof *p = ctx;
    if (!p->active) return;
    p->active = false;
    gr_backend_sync(p->be);
    p->wall_s += gr_now() - p->t_step0;
    p->steps_done++;
    for (size_t e = p->ev_step; e < p->nev; e++) /* the step's host spans, recorded as they ended */
        if (!p->ev[e].uncounted) {
            p->rows[p->ev[e].row].total_s += p->ev[e].dur;
            p->rows[p->ev[e].row].calls++;
        }
    for (int k = 0; k < p->micro_done; k++) {
        for (int i = 0; i < p->nops; i++) {
            const gr_kargs *a = &p->plan->steps.step[i];
            const gr_mark *m0 = gr_prof_op_mark(p, k, i, 0), *m1 = gr_prof_op_mark(p, k, i, 1);
            const double t0 = gr_prof_when(p, m0), dur = gr_backend_mark_seconds(p->be, m0, m1);
            gr_prof_row *r = &p->rows[i];
            r->total_s += dur;
            r->calls++;
            r->flops += (double)a->node->flops * (double)a->n;
            /* a weight gradient's GEMM reads bf16 dy and writes fp32: its roof is bf16's too */
            r->bf16 = (a->eout[0] == GR_BF16 || (a->node->nin > 0 && a->ein[0] == GR_BF16)) && !a->staged;
            r->bytes += gr_prof_op_bytes(a);
            gr_prof_event_add(p, i, NULL, t0, dur, k);
        }
        gr_prof_read_span(p, GR_SPAN_H2D, k, p->h2d_bytes);
        gr_prof_read_span(p, GR_SPAN_D2H, k, 8.0);
    }
    gr_prof_read_span(p, GR_SPAN_OPTIM, 0, 0.0);
    p->ev_step = p->nev;
}

/* ---- the files ---- */

/* The row's layer, op and direction. */
static void gr_prof_row_names(const gr_prof *p, int row, const char **layer, const char **op, const char **dir) {
    if (row >= p->nops) {
        *layer = "-";
        *op = gr_span_names[row - p->nops];
        *dir = row - p->nops == GR_SPAN_DATA || row - p->nops == GR_SPAN_COMM ? "host" : "-";
        return;
    }
    const gr_graph *g = p->plan->g;
    const gr_node *nd = p->plan->steps.step[row].node;
    const int idx = (int)(nd - g->nodes);
    *layer = nd->layer >= 0 ? g->layers[nd->layer].name : "loss";
    *op = gr_op_name(nd->op);
    /* after the forward pass: backward nodes, recomputed copies, and autodiff's adds summing the gradient of a
     * tensor several nodes read (a residual stream), which are backward work */
    *dir = idx < g->n_forward ? "forward" : nd->recomputed ? "recompute" : "backward";
}

static const gr_prof *gr_prof_sorting;
static int gr_prof_cmp(const void *a, const void *b) {
    const double x = gr_prof_sorting->rows[*(const int *)a].total_s, y = gr_prof_sorting->rows[*(const int *)b].total_s;
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

static void gr_prof_table(FILE *f, const void *ctx) {
    const gr_prof *p = ctx;
    const int nrows = p->nops + GR_SPAN_KINDS;
    int *order = gr_xmalloc((size_t)nrows * sizeof *order);
    double sum = 0.0;
    for (int i = 0; i < nrows; i++) order[i] = i, sum += p->rows[i].total_s;
    gr_prof_sorting = p;
    qsort(order, (size_t)nrows, sizeof *order, gr_prof_cmp);
    const double steps = (double)p->steps_done, step_ms = 1e3 * p->wall_s / steps;
    char detail[256];
    fprintf(f, "gpurun profile: %s, steps %lld..%lld (%lld after %d warm-up), micro-batch %lld x %d per step\n",
            p->j->spec->name, (long long)p->first + 1, (long long)(p->first + p->steps_done),
            (long long)p->steps_done, GR_PROF_WARMUP, (long long)p->j->spec->train.micro_batch, p->accum);
    fprintf(f, "device %s: %s", gr_backend_name(p->be), gr_backend_describe(p->be, detail, sizeof detail));
    const gr_peak *pk = &p->peak;
    if (pk->f32_gflops > 0) /* one line still: the rows start at the table's 6th */
        fprintf(f, "; roofline, measured now on %d thread%s: GEMM fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s, memory %.1f "
                "GB/s", pk->threads, pk->threads == 1 ? "" : "s", pk->f32_gflops, pk->bf16_gflops, pk->mem_gbs);
    fprintf(f, "\n");
    fprintf(f, "measured step time %.3f ms (wall clock, mean); this table's total %.3f ms per step (%.1f%%)\n\n",
            step_ms, 1e3 * sum / steps, 100.0 * sum / p->wall_s);
    int wl = 22, wo = 22; /* the name columns as wide as their longest entry */
    for (int i = 0; i < nrows; i++) {
        const char *layer, *op, *dir;
        gr_prof_row_names(p, i, &layer, &op, &dir);
        wl = GR_MAX(wl, (int)strlen(layer)), wo = GR_MAX(wo, (int)strlen(op));
    }
    fprintf(f, "%-*s %-*s %-9s %7s %12s %11s %7s %9s %9s %6s %6s\n", wl, "layer", wo, "op", "direction", "calls",
            "total_ms", "mean_us", "share", "GFLOP/s", "GB/s", "%peak", "%bw");
    for (int i = 0; i < nrows; i++) {
        const gr_prof_row *r = &p->rows[order[i]];
        if (!r->calls) continue;
        const char *layer, *op, *dir;
        gr_prof_row_names(p, order[i], &layer, &op, &dir);
        char gf[32] = "-", gb[32] = "-", pf[32] = "-", pb[32] = "-";
        const double roof = r->bf16 && pk->bf16_gflops > 0 ? pk->bf16_gflops : pk->f32_gflops;
        if (r->flops > 0 && r->total_s > 0) snprintf(gf, sizeof gf, "%.1f", r->flops / r->total_s / 1e9);
        if (r->bytes > 0 && r->total_s > 0) snprintf(gb, sizeof gb, "%.2f", r->bytes / r->total_s / 1e9);
        if (r->flops > 0 && r->total_s > 0 && roof > 0)
            snprintf(pf, sizeof pf, "%.0f", 100 * r->flops / r->total_s / 1e9 / roof);
        if (r->bytes > 0 && r->total_s > 0 && pk->mem_gbs > 0)
            snprintf(pb, sizeof pb, "%.0f", 100 * r->bytes / r->total_s / 1e9 / pk->mem_gbs);
        fprintf(f, "%-*s %-*s %-9s %7lld %12.3f %11.1f %6.1f%% %9s %9s %6s %6s\n", wl, layer, wo, op, dir,
                (long long)r->calls, 1e3 * r->total_s, 1e6 * r->total_s / (double)r->calls,
                sum > 0 ? 100.0 * r->total_s / sum : 0.0, gf, gb, pf, pb);
    }
    free(order);
}

static void gr_prof_trace(FILE *f, const void *ctx) {
    const gr_prof *p = ctx;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": "
            "\"gpurun rank %d\"}},\n", p->j->world.rank, p->j->world.rank);
    fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"host\"}},\n",
            p->j->world.rank);
    fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 1, \"args\": {\"name\": \"%s\"}}",
            p->j->world.rank, gr_backend_name(p->be));
    for (size_t e = 0; e < p->nev; e++) {
        const gr_prof_event *v = &p->ev[e];
        const char *layer, *op, *dir;
        gr_prof_row_names(p, v->row, &layer, &op, &dir);
        const bool host = v->row >= p->nops && (v->row - p->nops == GR_SPAN_DATA || v->row - p->nops == GR_SPAN_COMM);
        gr_json js;
        gr_json_begin(&js);
        gr_json_str(&js, "name", v->row < p->nops ? layer : op);
        gr_json_str(&js, "cat", v->row < p->nops ? dir : host ? "host" : "device");
        gr_json_str(&js, "ph", "X");
        gr_json_num(&js, "ts", 1e6 * v->ts);
        gr_json_num(&js, "dur", 1e6 * v->dur);
        gr_json_int(&js, "pid", p->j->world.rank);
        gr_json_int(&js, "tid", host ? 0 : 1);
        char args[512];
        gr_json ja;
        gr_json_begin(&ja);
        gr_json_int(&ja, "step", v->step + 1);
        if (v->micro >= 0) gr_json_int(&ja, "micro_batch", v->micro);
        gr_json_str(&ja, "layer", layer);
        gr_json_str(&ja, "op", v->what[0] ? v->what : op);
        if (v->row < p->nops) gr_json_str(&ja, "direction", dir);
        snprintf(args, sizeof args, "%s", gr_json_end(&ja));
        const char *ev = gr_json_end(&js);
        /* the args object inside the event: {..., "args": {...}} */
        fprintf(f, ",\n%.*s, \"args\": %s}", (int)strlen(ev) - 1, ev, args);
    }
    fprintf(f, "\n]}\n");
}

gr_status gr_prof_finish(gr_prof *p, const char *run_dir, bool quiet, gr_error *err) {
    if (!p || p->steps_done == 0) return GR_OK;
    p->nev = p->ev_step; /* the events of the steps that ended */
    gr_backend_peak(p->be, &p->peak); /* a second or two, after the timed steps */
    /* a model split over processes (pipeline stages, tensor groups): its other ranks profile their
     * parts too, profile.rank<r>.txt and trace.rank<r>.json next to rank 0's when the run directory
     * is theirs to see (else said, not an error) */
    const int rank = p->j->world.rank;
    char table[64] = "profile.txt", trace[64] = "trace.json";
    if (rank > 0) {
        snprintf(table, sizeof table, "profile.rank%d.txt", rank);
        snprintf(trace, sizeof trace, "trace.rank%d.json", rank);
    }
    gr_status st = gr_rundir_write_file(run_dir, table, gr_prof_table, p, err);
    if (!st) st = gr_rundir_write_file(run_dir, trace, gr_prof_trace, p, err);
    if (st && rank > 0) {
        fprintf(stderr, "gpurun: rank %d: --profile: its profile was not written: %s\n", rank, err->msg);
        return GR_OK;
    }
    if (!st && !quiet)
        fprintf(stderr, "gpurun: profile of %lld steps: %s/%s, %s/%s (Perfetto opens it)%s\n", (long long)p->steps_done,
                run_dir, table, run_dir, trace, p->j->pp || p->j->tp ? "; each rank r > 0 wrote "
                "profile.rank<r>.txt and trace.rank<r>.json" : "");
    return st;
}
