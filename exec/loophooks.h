/* loophooks.h — what the training loop tells whoever watches it: the
 * profiler (runner/profile.c) attaches here and through the plan's exec
 * hooks (exec.h), and the loop, the passes (runner/step.c) and the
 * collectives (dist/dp.c, dist/buckets.c) call these without
 * knowing who listens (NULL hooks or a NULL callback: nobody). At the
 * runtime's floor so that every room above it may report to it.
 *
 * Spans: a device span is between begin and end on the device's timeline
 * (the batch's copy, the stats' read-back, the optimizer update); a host
 * span is [t0, t1] on the host clock (waiting for data, a collective). */
#ifndef GR_LOOPHOOKS_H
#define GR_LOOPHOOKS_H

#include <stddef.h>
#include <stdint.h>

typedef enum gr_span {
    GR_SPAN_DATA,  /* waiting for the loader's next batch (host) */
    GR_SPAN_H2D,   /* the batch to the device (device; bytes: its size) */
    GR_SPAN_D2H,   /* the pass's stats back (device) */
    GR_SPAN_OPTIM, /* clipping and the optimizer update (device) */
    GR_SPAN_COMM,  /* a collective outside the ops (host) */
    GR_SPAN_KINDS
} gr_span;

typedef struct gr_loop_hooks {
    void *ctx;
    void (*step_begin)(void *ctx, int64_t step);   /* an optimizer step: its micro-batches, collectives, update */
    void (*step_end)(void *ctx);
    void (*begin)(void *ctx, gr_span k, double bytes);
    void (*end)(void *ctx, gr_span k);
    void (*host)(void *ctx, gr_span k, const char *what, double t0, double t1);
    /* the step's micro-batch mb (0-based) runs next: a pipeline stage runs their forwards and
     * backwards interleaved (dist/pp.c), one process in order, each after its copy */
    void (*micro)(void *ctx, int mb);
} gr_loop_hooks;

static inline void gr_hooks_step_begin(const gr_loop_hooks *h, int64_t step) {
    if (h && h->step_begin) h->step_begin(h->ctx, step);
}
static inline void gr_hooks_step_end(const gr_loop_hooks *h) {
    if (h && h->step_end) h->step_end(h->ctx);
}
static inline void gr_hooks_begin(const gr_loop_hooks *h, gr_span k, double bytes) {
    if (h && h->begin) h->begin(h->ctx, k, bytes);
}
static inline void gr_hooks_end(const gr_loop_hooks *h, gr_span k) {
    if (h && h->end) h->end(h->ctx, k);
}
static inline void gr_hooks_host(const gr_loop_hooks *h, gr_span k, const char *what, double t0, double t1) {
    if (h && h->host) h->host(h->ctx, k, what, t0, t1);
}

static inline void gr_hooks_micro(const gr_loop_hooks *h, int mb) {
    if (h && h->micro) h->micro(h->ctx, mb);
}

#endif
