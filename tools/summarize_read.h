/* summarize_read.h — what `gpurun summarize` (summarize.c) reads from one
 * run directory (DESIGN 1.3). Internal to tools/summarize*.c.
 *
 * A run is its config.yaml flattened to dotted leaf keys (sequences of
 * scalars as their flow text "[1, 8, 8]", other sequences by index:
 * model.layers.1.dense.units), its status (summary.json's, or "running" /
 * "interrupted" without one) and the figures of gr_sum_metric_rows, each
 * from summary.json when it has it, else from metrics.jsonl's lines.
 *
 * Exports: gr_sum_run_load / gr_sum_run_free, gr_sum_metric_rows (the
 * figures' columns); a run's values are json_read.h's gr_jval. */
#ifndef GR_SUMMARIZE_READ_H
#define GR_SUMMARIZE_READ_H

#include <stdbool.h>

#include "../common/gr_common.h"
#include "../common/json_read.h"

/* Where a figure comes from when summary.json lacks it (or there is none):
 * metrics.jsonl's last train line, its last val eval line, or the largest
 * value over its val eval lines. */
typedef enum gr_sum_from { GR_SUM_TRAIN_LAST, GR_SUM_EVAL_LAST, GR_SUM_EVAL_MAX } gr_sum_from;

typedef enum gr_sum_metric {
    GR_SUM_STEPS,
    GR_SUM_BEST_ACC,
    GR_SUM_LAST_ACC,
    GR_SUM_FINAL_LOSS,
    GR_SUM_SAMPLES_PER_S,
    GR_SUM_WALL_S,
    GR_SUM_N_METRICS
} gr_sum_metric;

typedef struct gr_sum_metric_row {
    const char *column;      /* the column's name */
    const char *summary_key; /* summary.json's key */
    gr_sum_from from;
    const char *line_key;    /* the key in those metrics.jsonl lines */
    int decimals;            /* in the text table */
} gr_sum_metric_row;

extern const gr_sum_metric_row gr_sum_metric_rows[GR_SUM_N_METRICS];

typedef struct gr_sum_kv {
    char *key;       /* dotted: train.optimizer.lr */
    gr_jval val; /* NUM, BOOL, STR; MISSING for a null scalar */
} gr_sum_kv;

typedef struct gr_sum_run {
    const char *dir;             /* as given on the command line */
    gr_sum_kv *cfg;              /* config.yaml's leaves, in file order */
    int n_cfg, cap_cfg;
    char status[96];             /* "finished", "stopped (75)", "running", "interrupted" */
    gr_jval metric[GR_SUM_N_METRICS];
    gr_sum_kv *evm;              /* the last val evaluation's figures beyond accuracy, keyed
                                    val_<name> (val_loss, val_accuracy_top5: the job's metrics) */
    int n_evm, cap_evm;
} gr_sum_run;

/* Reads run directory dir into *r (zeroed first; free it with
 * gr_sum_run_free either way). Exit 3 when dir is not a run directory
 * ("DIR: not a run directory (no config.yaml)"), or when its config.yaml or
 * summary.json cannot be read or parsed (naming the file and the problem).
 * A metrics.jsonl line that does not parse (a torn last line) is skipped. */
gr_status gr_sum_run_load(gr_sum_run *r, const char *dir, gr_error *err);
void gr_sum_run_free(gr_sum_run *r);

#endif
