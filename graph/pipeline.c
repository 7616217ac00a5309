/* pipeline.c — pipeline schedules as per-stage action lists (see pipeline.h). */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

static const char *const gr_pipe_kind_names[] = {"gpipe", "1f1b"};
_Static_assert(sizeof gr_pipe_kind_names / sizeof *gr_pipe_kind_names == GR_PIPE_KIND_COUNT,
               "one name per gr_pipe_kind");

static const char *const gr_pipe_op_names[] = {
    "forward", "backward", "send_act", "recv_act", "send_grad", "recv_grad", "send_act_recv_grad",
    "send_grad_recv_act",
};
_Static_assert(sizeof gr_pipe_op_names / sizeof *gr_pipe_op_names == GR_PIPE_OP_COUNT, "one name per gr_pipe_op");

/* The list being built: all stages' actions, appended stage after stage. */
typedef struct gr_pipe_builder {
    gr_pipe_schedule *sc;
    size_t n, cap;
    int s; /* the stage being listed */
} gr_pipe_builder;

static void gr_pipe_add(gr_pipe_builder *b, gr_pipe_op op, int mb, int recv_mb, int peer) {
    GR_GROW(b->sc->actions, b->cap, b->n + 1);
    b->sc->actions[b->n++] = (gr_pipe_action){.op = op, .mb = mb, .recv_mb = recv_mb, .peer = peer};
}

/* FORWARD(mb) with its plain messages: the activation received before it
 * (not on the first stage) and sent after it (not on the last). */
static void gr_pipe_add_forward(gr_pipe_builder *b, int mb, bool recv, bool send) {
    int s = b->s, last = b->sc->p - 1;
    if (recv && s > 0) gr_pipe_add(b, GR_PIPE_RECV_ACT, mb, -1, s - 1);
    gr_pipe_add(b, GR_PIPE_FORWARD, mb, -1, -1);
    if (send && s < last) gr_pipe_add(b, GR_PIPE_SEND_ACT, mb, -1, s + 1);
}

/* BACKWARD(mb) with its plain messages: the grad received before it (not on
 * the last stage) and sent after it (not on the first). */
static void gr_pipe_add_backward(gr_pipe_builder *b, int mb, bool recv, bool send) {
    int s = b->s, last = b->sc->p - 1;
    if (recv && s < last) gr_pipe_add(b, GR_PIPE_RECV_GRAD, mb, -1, s + 1);
    gr_pipe_add(b, GR_PIPE_BACKWARD, mb, -1, -1);
    if (send && s > 0) gr_pipe_add(b, GR_PIPE_SEND_GRAD, mb, -1, s - 1);
}

static void gr_pipe_list_gpipe(gr_pipe_builder *b) {
    for (int i = 0; i < b->sc->m; i++) gr_pipe_add_forward(b, i, true, true);
    for (int i = 0; i < b->sc->m; i++) gr_pipe_add_backward(b, i, true, true);
}

/* 1F1B on stage s: w warm-up forwards, then m - w steady rounds of
 * FORWARD(w+k), BACKWARD(k), then the cool-down backwards. In the steady
 * rounds the activation sent up and the grad received next from the same
 * neighbour form one SENDRECV, as do the grad sent down and the next
 * activation received; the neighbour lists the same pair as its own
 * SENDRECV (pipeline.h's deadlock rule). */
static void gr_pipe_list_1f1b(gr_pipe_builder *b) {
    int p = b->sc->p, m = b->sc->m, s = b->s;
    int w = p - s - 1 < m ? p - s - 1 : m, steady = m - w;
    for (int i = 0; i < w; i++) gr_pipe_add_forward(b, i, true, true);
    if (steady > 0 && s > 0) gr_pipe_add(b, GR_PIPE_RECV_ACT, w, -1, s - 1);
    for (int k = 0; k < steady; k++) {
        gr_pipe_add_forward(b, w + k, false, false);
        if (s < p - 1) gr_pipe_add(b, GR_PIPE_SEND_ACT_RECV_GRAD, w + k, k, s + 1);
        gr_pipe_add_backward(b, k, false, false);
        if (s > 0 && k < steady - 1) gr_pipe_add(b, GR_PIPE_SEND_GRAD_RECV_ACT, k, w + k + 1, s - 1);
        else if (s > 0) gr_pipe_add(b, GR_PIPE_SEND_GRAD, k, -1, s - 1);
    }
    for (int k = steady; k < m; k++) gr_pipe_add_backward(b, k, true, true);
}

static gr_status gr_pipe_check(int p, int m, gr_pipe_kind kind, gr_error *err) {
    if (p < 1 || p > GR_PIPE_MAX_STAGES)
        return gr_error_set(err, GR_ERR_USAGE, "pipeline: %d stages; need 1 to %d", p, GR_PIPE_MAX_STAGES);
    if (m < 1 || m > GR_PIPE_MAX_MICRO)
        return gr_error_set(err, GR_ERR_USAGE, "pipeline: %d micro-batches; need 1 to %d", m, GR_PIPE_MAX_MICRO);
    if ((int64_t)p * m > GR_PIPE_MAX_WORK)
        return gr_error_set(err, GR_ERR_USAGE, "pipeline: %d stages x %d micro-batches is over %d", p, m,
                            GR_PIPE_MAX_WORK);
    if ((int)kind < 0 || kind >= GR_PIPE_KIND_COUNT)
        return gr_error_set(err, GR_ERR_USAGE, "pipeline: schedule kind %d is none of gpipe, 1f1b", (int)kind);
    return GR_OK;
}

gr_status gr_pipe_schedule_init(gr_pipe_schedule *sc, int p, int m, gr_pipe_kind kind, gr_error *err) {
    memset(sc, 0, sizeof *sc);
    gr_status st = gr_pipe_check(p, m, kind, err);
    if (st) return st;
    sc->p = p;
    sc->m = m;
    sc->kind = kind;
    sc->start = gr_xcalloc((size_t)p + 1, sizeof *sc->start);
    gr_pipe_builder b = {.sc = sc};
    for (b.s = 0; b.s < p; b.s++) {
        sc->start[b.s] = (int)b.n;
        if (kind == GR_PIPE_GPIPE) gr_pipe_list_gpipe(&b);
        else gr_pipe_list_1f1b(&b);
    }
    sc->start[p] = (int)b.n;
    return GR_OK;
}

void gr_pipe_schedule_free(gr_pipe_schedule *sc) {
    free(sc->actions);
    free(sc->start);
    memset(sc, 0, sizeof *sc);
}

const gr_pipe_action *gr_pipe_stage(const gr_pipe_schedule *sc, int s, int *n) {
    GR_ASSERT(s >= 0 && s < sc->p);
    *n = sc->start[s + 1] - sc->start[s];
    return sc->actions + sc->start[s];
}

double gr_pipe_bubble_fraction(int p, int m) {
    if (p < 1 || m < 1) return -1.0;
    return (double)(p - 1) / ((double)m + p - 1);
}

int gr_pipe_peak_activations(gr_pipe_kind kind, int p, int m, int s) {
    if (p < 1 || m < 1 || s < 0 || s >= p) return -1;
    if (kind == GR_PIPE_1F1B) return p - s < m ? p - s : m;
    return kind == GR_PIPE_GPIPE ? m : -1;
}

gr_status gr_pipe_kind_parse(const char *name, gr_pipe_kind *kind, gr_error *err) {
    for (int k = 0; k < GR_PIPE_KIND_COUNT; k++)
        if (name && !strcmp(name, gr_pipe_kind_names[k])) {
            *kind = (gr_pipe_kind)k;
            return GR_OK;
        }
    return gr_error_set(err, GR_ERR_USAGE, "pipeline: unknown schedule '%s'; expected gpipe or 1f1b",
                        name ? name : "");
}

const char *gr_pipe_kind_name(gr_pipe_kind kind) {
    return (int)kind >= 0 && kind < GR_PIPE_KIND_COUNT ? gr_pipe_kind_names[kind] : "?";
}

const char *gr_pipe_op_name(gr_pipe_op op) {
    return (int)op >= 0 && op < GR_PIPE_OP_COUNT ? gr_pipe_op_names[op] : "?";
}
