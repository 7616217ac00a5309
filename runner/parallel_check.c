/* parallel_check.c — the ranks of a data-parallel run check at start that
 * they run one job (gr_parallel_same_job, parallel.h). Under an MPMD launch,
 * or with per-node copies of job.yaml or the data that differ, a rank with
 * another learning rate, seed or data file trained to exit 0 and a model
 * that matched neither spec; with other parameter counts the ranks sat in
 * the all-reduce until parallel.timeout_s. */
#include "parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/crc32c.h"
#include "../dist/watchdog.h"
#include "spec_diff.h"

/* The identity of a split's file, whatever its path: its samples, their
 * shape, the file's size and the crc32c of its first MiB (copies of one file
 * on every node agree; another file, or a stale copy, almost never does). */
static void gr_par_data_ident(const gr_dataset *ds, const char *key, char *buf, size_t n) {
    if (!ds) {
        snprintf(buf, n, "%s: none; ", key);
        return;
    }
    int64_t chw[3];
    gr_dataset_sample_shape(ds, chw);
    uint32_t crc = 0;
    long long size = -1;
    FILE *f = fopen(gr_dataset_path(ds), "rb");
    struct stat sb;
    if (f && fstat(fileno(f), &sb) == 0) {
        size = (long long)sb.st_size;
        enum { HEAD = 1 << 20 };
        char *head = gr_xmalloc(HEAD);
        size_t got = fread(head, 1, HEAD, f);
        crc = gr_crc32c(0, head, got);
        free(head);
    }
    if (f) fclose(f);
    snprintf(buf, n, "%s: %lld samples of %lldx%lldx%lld, a file of %lld bytes whose first MiB has crc32c 0x%08x; ",
             key, (long long)gr_dataset_len(ds), (long long)chw[0], (long long)chw[1], (long long)chw[2], size, crc);
}

/* Rank 0's text to every rank, its bytes carried as floats (the comm's
 * broadcast; exact below 2^24 bytes). *out is malloc'd. */
static gr_status gr_par_bcast_text(gr_comm *c, const char *mine, char **out, gr_error *err) {
    float len = c->rank == 0 ? (float)strlen(mine) : 0.0f;
    gr_status st = gr_comm_bcast_f32(c, &len, 1, "the ranks' job check", err);
    if (st) return st;
    const size_t n = (size_t)len;
    float *buf = gr_xmalloc((n + 1) * sizeof(float));
    for (size_t i = 0; c->rank == 0 && i < n; i++) buf[i] = (float)(unsigned char)mine[i];
    if ((st = gr_comm_bcast_f32(c, buf, (int64_t)n, "the ranks' job check", err))) {
        free(buf);
        return st;
    }
    *out = gr_xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) (*out)[i] = (char)(unsigned char)buf[i];
    (*out)[n] = '\0';
    free(buf);
    return GR_OK;
}

/* "1, 3" of the ranks whose flag is set. */
static void gr_par_rank_list(const double *flags, int world, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int r = 0; r < world && len < n; r++)
        if (flags[r] > 0.5) len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? ", " : "", r);
}

gr_status gr_parallel_same_job(gr_job *j, bool *agreed, gr_error *err) {
    gr_comm *c = &j->dp.comm;
    *agreed = false;
    if (c->world <= 1 || c->kind == GR_COMM_NONE) return GR_OK;
    char ident[1024];
    gr_par_data_ident(j->train_ds, "data.train", ident, sizeof ident);
    const size_t il = strlen(ident);
    gr_par_data_ident(j->val_ds, "data.val", ident + il, sizeof ident - il);
    ident[strlen(ident) - 2] = '\0'; /* the last "; " */
    char *spec0 = NULL, *ident0 = NULL;
    /* the job's first collectives: a rank that is gone or stuck holds the others here (the watchdog) */
    gr_wd_enter("the ranks' job check", -1);
    gr_status st = gr_par_bcast_text(c, gr_job_spec_text(j), &spec0, err);
    if (!st) st = gr_par_bcast_text(c, ident, &ident0, err);
    char diff[GR_ERROR_MSG_MAX / 2] = "";
    const int nd = st ? 0 : gr_spec_diff_ranks(spec0, gr_job_spec_text(j), c->rank, diff, sizeof diff);
    const bool data = !st && strcmp(ident0, ident) != 0;
    free(j->spec_text); /* made again once train.micro_batch: auto is resolved */
    j->spec_text = NULL;
    double *flags = gr_xcalloc((size_t)c->world, sizeof *flags);
    flags[c->rank] = nd != 0 || data ? 1.0 : 0.0;
    if (!st) st = gr_comm_sum_f64(c, flags, c->world, "the ranks' job check", err);
    gr_wd_leave();
    char ranks[256];
    gr_par_rank_list(flags, c->world, ranks, sizeof ranks);
    if (!st && ranks[0]) {
        *agreed = true; /* every rank knows: each exits 2 on its own, none aborts the others */
        if (nd != 0 || data)
            st = gr_error_set(err, GR_ERR_USAGE, "rank %d runs another job than rank 0: %s%s%s%s%s", c->rank, diff,
                              nd && data ? "; " : "", data ? "the data differ: rank 0 has " : "",
                              data ? ident0 : "", data ? "; this rank " : "");
        else
            st = gr_error_set(err, GR_ERR_USAGE, "rank%s %s of %d run%s another job than rank 0 (each says how); "
                              "every rank must run the same spec on the same data", strchr(ranks, ',') ? "s" : "",
                              ranks, c->world, strchr(ranks, ',') ? "" : "s");
        if (data && strlen(err->msg) + strlen(ident) < sizeof err->msg) strcat(err->msg, ident);
    }
    free(flags);
    free(spec0);
    free(ident0);
    return st;
}
