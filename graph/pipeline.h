/* pipeline.h — pipeline-parallel schedules, pure planning: which forward and
 * backward passes each of p stages runs on which of m micro-batches, in what
 * order, and the point-to-point messages between neighbouring stages that
 * they imply. No communication, threads or I/O here: the runtime that will
 * execute a schedule (issue 27) walks each stage's list in order.
 *
 * Kinds:
 *   gpipe  all m forwards (micro-batch 0..m-1), then all m backwards (0..m-1);
 *   1f1b   Megatron's one-forward-one-backward: stage s (0 = first) runs
 *          w = min(p - s - 1, m) warm-up forwards, then alternates one forward
 *          and one backward while forwards remain, then the cool-down backwards.
 *
 * Messages: activation(mb) from s to s+1 after FORWARD(mb) on s; grad(mb)
 * from s+1 to s after BACKWARD(mb) on s+1. Deadlock rule (blocking sends that
 * may wait for the matching receive, MPI_Send/MPI_Recv or NCCL): on every link
 * (s, s+1) both ends list the same exchanges in the same order, each either a
 * single message (SEND on one end, RECV on the other) or, where a stage sends
 * one message to a neighbour and next receives one from it, both as one
 * SENDRECV action that both ends post together (Megatron's batched
 * isend/irecv: MPI_Sendrecv, or two started operations and one wait, one NCCL
 * group). Each action involves one peer, so a stuck state would need two
 * neighbours waiting on each other on one link, where equal sequences make
 * them wait on the same exchange, which then completes. DESIGN 2.4 says more.
 *
 * Exports: gr_pipe_schedule_init/_free (validated: errors, exit 2, name the
 * bad value), gr_pipe_stage (a stage's actions), gr_pipe_bubble_fraction,
 * gr_pipe_peak_activations, gr_pipe_kind_parse/_name, gr_pipe_op_name. */
#ifndef GR_PIPELINE_H
#define GR_PIPELINE_H

#include "../common/gr_common.h"

#define GR_PIPE_MAX_STAGES 4096
#define GR_PIPE_MAX_MICRO (1 << 20) /* micro-batches of one step */
#define GR_PIPE_MAX_WORK (1 << 22)  /* stages x micro-batches (at most 6 actions each) */

typedef enum gr_pipe_kind { GR_PIPE_GPIPE, GR_PIPE_1F1B, GR_PIPE_KIND_COUNT } gr_pipe_kind;

typedef enum gr_pipe_op {
    GR_PIPE_FORWARD,            /* the stage's forward on micro-batch mb */
    GR_PIPE_BACKWARD,           /* its backward on mb */
    GR_PIPE_SEND_ACT,           /* activation(mb) to peer = s + 1 */
    GR_PIPE_RECV_ACT,           /* activation(mb) from peer = s - 1 */
    GR_PIPE_SEND_GRAD,          /* grad(mb) to peer = s - 1 */
    GR_PIPE_RECV_GRAD,          /* grad(mb) from peer = s + 1 */
    GR_PIPE_SEND_ACT_RECV_GRAD, /* SENDRECV with peer = s + 1: activation(mb) out, grad(recv_mb) in */
    GR_PIPE_SEND_GRAD_RECV_ACT, /* SENDRECV with peer = s - 1: grad(mb) out, activation(recv_mb) in */
    GR_PIPE_OP_COUNT
} gr_pipe_op;

typedef struct gr_pipe_action {
    gr_pipe_op op;
    int mb;      /* the micro-batch computed or sent (received, for RECV_*) */
    int recv_mb; /* the SENDRECV actions' received micro-batch; -1 otherwise */
    int peer;    /* the other stage of a message; -1 for FORWARD and BACKWARD */
} gr_pipe_action;

typedef struct gr_pipe_schedule {
    int p, m;
    gr_pipe_kind kind;
    gr_pipe_action *actions; /* all stages' lists, stage after stage */
    int *start;              /* [p + 1]: stage s owns actions[start[s] .. start[s+1]) */
} gr_pipe_schedule;

/* Builds the schedule of kind for p stages (1..GR_PIPE_MAX_STAGES) and m
 * micro-batches (1..GR_PIPE_MAX_MICRO), p x m at most GR_PIPE_MAX_WORK. A
 * bad value returns GR_ERR_USAGE with err naming it ("pipeline: 0 stages;
 * need 1 to 4096") and leaves sc empty (gr_pipe_schedule_free is safe). */
gr_status gr_pipe_schedule_init(gr_pipe_schedule *sc, int p, int m, gr_pipe_kind kind, gr_error *err);
void gr_pipe_schedule_free(gr_pipe_schedule *sc);
/* Stage s's actions in execution order; *n their count. */
const gr_pipe_action *gr_pipe_stage(const gr_pipe_schedule *sc, int s, int *n);

/* The idle fraction of p stages over one step of m micro-batches, both
 * kinds: (p - 1) / (m + p - 1), exact when every stage's forward takes the
 * same time F and backward B and messages are free (DESIGN 2); -1 for p or
 * m below 1. */
double gr_pipe_bubble_fraction(int p, int m);
/* The most micro-batches whose activations stage s holds at once (forward
 * run, backward not yet): 1f1b min(p - s, m), gpipe m; -1 for bad p, m, s. */
int gr_pipe_peak_activations(gr_pipe_kind kind, int p, int m, int s);

/* "gpipe" or "1f1b"; GR_ERR_USAGE naming the choices otherwise. */
gr_status gr_pipe_kind_parse(const char *name, gr_pipe_kind *kind, gr_error *err);
const char *gr_pipe_kind_name(gr_pipe_kind kind);
const char *gr_pipe_op_name(gr_pipe_op op);

#endif
