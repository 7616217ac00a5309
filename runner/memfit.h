/* memfit.h — what a job needs in memory at a micro-batch, and the largest
 * micro-batch that fits: the planner's bytes, before anything
 * is allocated.
 *
 * A job's device memory is the model's arenas (fp32 params, grads and
 * optimizer state: independent of the micro-batch), the train and eval
 * activation arenas and the fp32 staging area of half steps (proportional
 * to it, after the memory planner's reuse). Each figure comes from the
 * same graph build, precision and layout passes and memory plan the run
 * makes, at that micro-batch, on the backend the run would use, with the
 * scratch its libraries keep (the CPU's convolution pool; a GPU's cuDNN
 * workspace is chosen at run time and not in it). What the process holds
 * besides (its data, loaders, checkpoint copies) is hostmem.h's. */
#ifndef GR_MEMFIT_H
#define GR_MEMFIT_H

#include "job.h"

typedef struct gr_mem_need {
    int64_t micro_batch;
    size_t params, grads, optim;     /* the model's arenas */
    size_t act_train, act_eval;      /* the plans' activation arenas */
    size_t stage;                    /* the fp32 staging areas (each plan holds its own) */
    size_t workspace;                /* the libraries' scratch (one, shared by the plans) */
    bool workspace_known;            /* false: chosen at run time (cuDNN), not in total */
    size_t total;                    /* all of it: what a run holds on the device */
} gr_mem_need;

/* Plans p for g without arenas (`gpurun plan`, these figures): on the
 * stub's backend when it has every kernel (which half steps are native),
 * else device-free. */
gr_status gr_memfit_compile(gr_plan *p, gr_model *stub, const gr_graph *g, gr_plan_mode mode, gr_error *err);
/* The need of graph g (the model's arenas for optim_slots) with its train
 * and eval plans tp and ep: the one sum every figure here is. */
void gr_memfit_of(const gr_graph *g, int optim_slots, const gr_plan *tp, const gr_plan *ep, gr_mem_need *out);
/* The need of job s at micro-batch m, for the inputs and target of io,
 * on be (NULL: device-free planning, every half step staged). */
gr_status gr_memfit_need(const gr_job_spec *s, const gr_graph_io *io, int64_t m, gr_backend *be,
                         gr_mem_need *out, gr_error *err);
/* Of the micro-batches that divide per (train.batch_size / processes), the
 * largest whose need is at most limit bytes (the need grows with the
 * micro-batch: a binary search over the divisors, each planned on the one
 * graph built for s: gr_graph_set_batch); *best the need (its
 * micro_batch 0 when even 1 does not fit, best->total then the need at 1). */
gr_status gr_memfit_largest(const gr_job_spec *s, const gr_graph_io *io, int64_t per, size_t limit,
                            gr_backend *be, gr_mem_need *best, gr_error *err);

/* gr_job_model (the model's arenas and plans on the device), and when
 * they do not fit (exit 4), the remedies appended to the message with the
 * planner's figures for this job on this device: the largest micro-batch
 * that fits at the job's precision, with train.recompute: blocks for a
 * model of blocks that does not recompute, and in bf16 for an fp32/tf32 job
 * (budget: GPURUN_MEMORY_LIMIT, else 90% of what was free before). */
gr_status gr_memfit_job_model(gr_job *j, gr_error *err);
/* The one place a run decides its micro-batch (the graph, built once, is
 * then planned at it: gr_graph_set_batch; nothing is rebuilt), once the
 * processes are joined and j's device is open:
 *   - given: it stays (gr_parallel_resolve checked, before the processes
 *     joined, that the global batch is a multiple of it x the processes);
 *   - unset: train.batch_size / the processes (the whole batch for one);
 *   - auto (0): the largest micro-batch dividing the batch each process
 *     takes whose need fits GPURUN_MEMORY_LIMIT, else 90% of what j's device
 *     has free (said on stderr); exit 4 when not even 1 fits, with the
 *     figures.
 * Written into rs, so into config.yaml and every checkpoint's spec. */
gr_status gr_memfit_micro_batch(gr_job *j, gr_job_spec *rs, gr_error *err);

#endif
