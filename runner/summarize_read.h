/* summarize_read.h — what `gpurun summarize` (summarize.c) reads from one
 * run directory (DESIGN 1.3). Internal to runner/summarize*.c.
 *
 * A run is its config.yaml flattened to dotted leaf keys (sequences of
 * scalars as their flow text "[1, 8, 8]", other sequences by index:
 * model.layers.1.dense.units), its status (summary.json's, or "running" /
 * "interrupted" without one) and the figures of gr_sum_metric_rows, each
 * from summary.json when it has it, else from metrics.jsonl's lines.
 *
 * Exports: gr_sum_cell (one value: a number as written, a string, a bool
 * or nothing), gr_sum_run_load / gr_sum_run_free, gr_sum_metric_rows (the
 * figures' columns), gr_sum_is_number (JSON's number grammar). */
#ifndef GR_SUMMARIZE_READ_H
#define GR_SUMMARIZE_READ_H

#include <stdbool.h>

#include "../common/gr_common.h"

typedef enum gr_sum_kind {
    GR_SUM_MISSING, /* absent, or null */
    GR_SUM_NUM,     /* text is the number as written (a JSON number) */
    GR_SUM_STR,
    GR_SUM_BOOL,    /* text is "true" or "false" */
    GR_SUM_OTHER    /* a JSON object or array (read, not kept) */
} gr_sum_kind;

typedef struct gr_sum_cell {
    gr_sum_kind kind;
    double num; /* GR_SUM_NUM */
    char *text; /* owned; NULL when missing */
} gr_sum_cell;

/* Sets c to (kind, num, a copy of text), freeing what it held. */
void gr_sum_cell_set(gr_sum_cell *c, gr_sum_kind kind, double num, const char *text);
void gr_sum_cell_free(gr_sum_cell *c);

/* Is s, all of it, a JSON number (-?int frac? exp?)? */
bool gr_sum_is_number(const char *s);

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
    gr_sum_cell val; /* NUM, BOOL, STR; MISSING for a null scalar */
} gr_sum_kv;

typedef struct gr_sum_run {
    const char *dir;             /* as given on the command line */
    gr_sum_kv *cfg;              /* config.yaml's leaves, in file order */
    int n_cfg, cap_cfg;
    char status[96];             /* "finished", "stopped (75)", "running", "interrupted" */
    gr_sum_cell metric[GR_SUM_N_METRICS];
} gr_sum_run;

/* Reads run directory dir into *r (zeroed first; free it with
 * gr_sum_run_free either way). Exit 3 when dir is not a run directory
 * ("DIR: not a run directory (no config.yaml)"), or when its config.yaml or
 * summary.json cannot be read or parsed (naming the file and the problem).
 * A metrics.jsonl line that does not parse (a torn last line) is skipped. */
gr_status gr_sum_run_load(gr_sum_run *r, const char *dir, gr_error *err);
void gr_sum_run_free(gr_sum_run *r);

#endif
