/* train.c — the training loop (see train.h).
 *
 * One optimizer step = accum = batch_size / micro_batch micro-batches, each a
 * forward + backward pass of the train plan that adds into the grads arena
 * (zeroed once per step); the loss gradient is scaled by 1/batch_size so the
 * sum over micro-batches is the gradient of the whole batch's mean loss.
 * An epoch is floor(N / batch_size) steps; the micro-batches left over at
 * the end of an epoch are skipped (drop_last), like PyTorch's loop in
 * ../shared/bench/torch_ref.py. */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "../dataio/dataio.h"
#include "../graph/graph.h"
#include "../exec/exec.h"
#include "../checkpoints/weights.h"
#include "../checkpoints/ckpt.h"
#include "finite.h"
#include "json.h"
#include "saver.h"
#include "rundir.h"
#include "signals.h"
#include "spec_diff.h"
#include "schedule.h"
#include "tfevents.h"

/* ---- loss scaling (fp16/bf16) ----
 * The loss's gradient is multiplied by the scale, so that small gradients
 * survive half-precision storage, and the update divides it back out.
 * Dynamic scaling follows PyTorch's GradScaler defaults: start at 2^16; a
 * step whose gradients hold inf/NaN is skipped and halves the scale; 2000
 * finite steps in a row double it. A fixed scale (loss_scale: N) that
 * overflows is reported as divergence, since nothing would absorb it. */
#define GR_SCALE_INIT 65536.0
#define GR_SCALE_INTERVAL 2000
#define GR_SCALE_FLOOR (1.0 / 16777216.0) /* below 2^-24 no fp16 gradient is left to save */

typedef struct gr_scaler {
    double scale;
    int64_t interval;  /* GR_SCALE_INTERVAL, or GPURUN_LOSS_SCALE_INTERVAL (tests) */
    int64_t good;      /* finite steps since the scale last changed */
    int64_t skipped;   /* steps skipped so far (carried over by resume) */
    bool dynamic, check;
} gr_scaler;

static gr_scaler gr_scaler_init(const gr_job_spec *s) {
    gr_scaler sc = {.scale = 1.0, .dynamic = s->loss_scale_dynamic, .interval = GR_SCALE_INTERVAL};
    const char *iv = getenv("GPURUN_LOSS_SCALE_INTERVAL");
    if (iv && atoll(iv) > 0) sc.interval = atoll(iv);
    if (sc.dynamic) sc.scale = GR_SCALE_INIT;
    else if (s->loss_scale > 0.0) sc.scale = s->loss_scale;
    sc.check = sc.dynamic || sc.scale != 1.0;
    return sc;
}

/* After a step's gradients were looked at: finite or not. */
static void gr_scaler_update(gr_scaler *sc, bool finite) {
    if (!sc->dynamic) return;
    if (!finite) {
        sc->scale *= 0.5;
        sc->good = 0;
        sc->skipped++;
    } else if (++sc->good >= sc->interval) {
        sc->scale *= 2.0;
        sc->good = 0;
    }
}

/* Everything a job holds while it runs. */
typedef struct gr_job {
    const gr_job_spec *spec;
    gr_dataset *train_ds, *val_ds;
    gr_loader *train_ld, *val_ld;
    gr_augment aug, val_aug;  /* per-sample transforms of the two splits */
    int64_t in_shape[3];
    int in_ndim;
    double mean[GR_MAX_CHANNELS], std[GR_MAX_CHANNELS];
    int n_norm;
    gr_graph g;
    bool have_graph;
    gr_backend *be;
    gr_model m;
    gr_plan train_plan, eval_plan;
    char run_dir[GR_PATH_MAX];
    gr_rundir_lock lock; /* held from the start of `gpurun run` to its end */
    bool wrote_run_dir;  /* config.yaml written: the run directory holds this run */
    FILE *metrics;
    char metrics_path[GR_PATH_MAX + 16];
    gr_tfevents *tb; /* NULL unless log.tensorboard */
    char ckpt_dir[GR_PATH_MAX + 16];
    gr_saver *saver; /* checkpoints: host snapshot buffers + the background writer */
    char *spec_text; /* the resolved spec, stored in every checkpoint */
    bool eval_pending; /* the evaluation due at the checkpoint's step was interrupted */
    /* --resume: the checkpoint, loaded, verified and checked against the job
     * before the run directory is touched (pre_found false: none, start fresh) */
    gr_ckpt_header pre_h;
    float *pre_params, *pre_optim;
    bool pre_found;
    char pre_path[GR_PATH_MAX + 100];
    gr_scaler sc;      /* loss scaling: the scale and its history (checkpointed) */
    int64_t ck_step;   /* step of the last save started (-1: none); ck_failed: it was reported failed */
    bool ck_failed;
    /* the run's record (checkpointed: a resumed run's metrics and summary carry it on) */
    struct gr_record {
        double last_loss, last_acc, last_vloss, best_acc;
        double loss_window;   /* train losses since the last train line, and how many */
        int64_t loss_n;
        double time0;         /* training time before this process */
        double t0;            /* when this process's training began (gr_now) */
    } rec;
} gr_job;

static void gr_job_free(gr_job *j) {
    gr_saver_free(j->saver);
    free(j->pre_params);
    free(j->pre_optim);
    free(j->spec_text);
    if (j->metrics) fclose(j->metrics);
    gr_tfevents_close(j->tb, NULL);
    gr_plan_free(&j->train_plan);
    gr_plan_free(&j->eval_plan);
    gr_model_free(&j->m);
    gr_loader_close(j->train_ld); /* before the backend: its buffers may be the backend's */
    gr_loader_close(j->val_ld);
    gr_backend_free(j->be);
    if (j->have_graph) gr_graph_free(&j->g);
    gr_dataset_close(j->train_ds);
    gr_dataset_close(j->val_ds);
    memset(j, 0, sizeof *j);
}

static int gr_optim_slots(const gr_optim_spec *o) {
    if (o->type == GR_OPTIM_ADAMW) return 2;
    return o->momentum > 0.0 ? 1 : 0;
}

/* data.augment: the training transform, and the evaluation one (a centre
 * crop of the same size, which is the identity when the images are that
 * size already, as with padded random crops). */
static void gr_job_augment(const gr_job_spec *spec, gr_augment *train, gr_augment *val) {
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    train->flip = spec->data.flip;
    if (spec->data.crop_size > 0) {
        train->crop = spec->data.crop_type == 1 ? GR_CROP_RESIZED : GR_CROP_RANDOM;
        train->size = spec->data.crop_size;
        train->padding = spec->data.crop_padding;
        memcpy(train->scale, spec->data.crop_scale, sizeof train->scale);
        memcpy(train->ratio, spec->data.crop_ratio, sizeof train->ratio);
        val->crop = GR_CROP_CENTER;
        val->size = spec->data.crop_size;
    }
}

/* Opens the data, decides the input shape and normalization, builds the
 * graph with its backward pass. */
static gr_status gr_job_compile(gr_job *j, const gr_job_spec *spec, bool need_val, gr_error *err) {
    gr_status st;
    j->spec = spec;
    if (!spec->data.train.path[0])
        return gr_spec_error(err, spec, "data.train.path", "required to run or plan this job");
    const gr_cache_mode cache = !strcmp(spec->data.cache, "memory") ? GR_CACHE_MEMORY
                                : !strcmp(spec->data.cache, "none") ? GR_CACHE_NONE : GR_CACHE_AUTO;
    if ((st = gr_dataset_open_cache(spec->data.train.path, spec->data.train.group, cache, &j->train_ds, err)))
        return st;
    if (need_val && spec->data.val.path[0] &&
        (st = gr_dataset_open_cache(spec->data.val.path, spec->data.val.group, cache, &j->val_ds, err)))
        return st;

    /* the samples the model sees: the stored ones, or the crop of them */
    int64_t chw[3], stored[3];
    gr_dataset_sample_shape(j->train_ds, stored);
    gr_job_augment(spec, &j->aug, &j->val_aug);
    if ((st = gr_augment_check(&j->aug, stored[1], stored[2], spec->data.train.path,
                               gr_dataset_images_name(j->train_ds), err)))
        return st;
    chw[0] = stored[0];
    gr_augment_out_shape(&j->aug, stored[1], stored[2], &chw[1], &chw[2]);
    if (spec->model.n_input > 0) {
        int64_t want = 1, have = chw[0] * chw[1] * chw[2];
        for (int i = 0; i < spec->model.n_input; i++) want *= spec->model.input[i];
        if (want != have)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s/images: samples are [%lld, %lld, %lld] but "
                                "model.input asks for %lld values per sample", spec->data.train.path,
                                spec->data.train.group, (long long)chw[0], (long long)chw[1],
                                (long long)chw[2], (long long)want);
        j->in_ndim = spec->model.n_input;
        for (int i = 0; i < j->in_ndim; i++) j->in_shape[i] = spec->model.input[i];
    } else {
        j->in_ndim = 3;
        memcpy(j->in_shape, chw, sizeof chw);
    }
    if (j->val_ds) {
        int64_t vs[3], vchw[3];
        gr_dataset_sample_shape(j->val_ds, vs);
        vchw[0] = vs[0];
        gr_augment_out_shape(&j->val_aug, vs[1], vs[2], &vchw[1], &vchw[2]);
        if (memcmp(vchw, chw, sizeof chw) != 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s/images: samples are [%lld, %lld, %lld] but the "
                                "train split's are [%lld, %lld, %lld]%s", spec->data.val.path,
                                spec->data.val.group, (long long)vchw[0], (long long)vchw[1],
                                (long long)vchw[2], (long long)chw[0], (long long)chw[1], (long long)chw[2],
                                j->aug.crop != GR_CROP_NONE ? " (after the crop)" : "");
    }

    /* normalization: the spec, else the dataset's attributes, else [0,1] for uint8 */
    int c = (int)chw[0];
    if (spec->data.n_mean > 0) {
        if (spec->data.n_mean != 1 && spec->data.n_mean != c)
            return gr_spec_error(err, spec, "data.normalize.mean", "has %d values but the images have %d "
                                 "channels", spec->data.n_mean, c);
        j->n_norm = spec->data.n_mean;
        memcpy(j->mean, spec->data.mean, sizeof j->mean);
        memcpy(j->std, spec->data.std, sizeof j->std);
    } else {
        int nm = gr_dataset_attr_floats(j->train_ds, "mean", j->mean, GR_MAX_CHANNELS);
        int ns = gr_dataset_attr_floats(j->train_ds, "std", j->std, GR_MAX_CHANNELS);
        if (nm != 0 || ns != 0) { /* the file says how to normalize: it must make sense */
            char why[160] = "";
            if (nm < 0 || ns < 0) snprintf(why, sizeof why, "%s is not a list of numbers", nm < 0 ? "mean" : "std");
            else if (nm != ns) snprintf(why, sizeof why, "mean has %d values, std %d", nm, ns);
            else if (nm != 1 && nm != c) snprintf(why, sizeof why, "%d values for %d channels", nm, c);
            for (int i = 0; !why[0] && i < nm; i++)
                if (!isfinite(j->mean[i]) || !isfinite(j->std[i]) || !(j->std[i] > 0.0))
                    snprintf(why, sizeof why, "mean[%d] = %g, std[%d] = %g", i, j->mean[i], i, j->std[i]);
            if (why[0])
                return gr_error_set(err, GR_ERR_DATA, "%s: %s: attributes mean/std (the default normalization): %s; "
                                    "fix them, or set data.normalize", spec->data.train.path, spec->data.train.group,
                                    why);
            j->n_norm = nm;
        } else {
            j->n_norm = 1;
            j->mean[0] = 0.0;
            j->std[0] = gr_dataset_dtype(j->train_ds) == GR_DT_UINT8 ? 255.0 : 1.0;
        }
    }
    if (c > GR_MAX_CHANNELS)
        return gr_error_set(err, GR_ERR_DATA, "%s: %s/images: %d channels; at most %d are supported",
                            spec->data.train.path, spec->data.train.group, c, GR_MAX_CHANNELS);
    for (int i = j->n_norm; i < c; i++) { j->mean[i] = j->mean[0]; j->std[i] = j->std[0]; }
    j->n_norm = c;

    if ((st = gr_graph_build(spec, j->in_shape, j->in_ndim, &j->g, err))) return st;
    j->have_graph = true;
    gr_autodiff(&j->g, false);
    if ((st = gr_dataset_check_labels(j->train_ds, j->g.n_classes, err))) return st;
    if (gr_dataset_len(j->train_ds) < spec->train.batch_size)
        return gr_error_set(err, GR_ERR_DATA, "%s: %s: the split has %lld samples, fewer than train.batch_size "
                            "%lld", spec->data.train.path, spec->data.train.group,
                            (long long)gr_dataset_len(j->train_ds), (long long)spec->train.batch_size);
    if (j->val_ds && (st = gr_dataset_check_labels(j->val_ds, j->g.n_classes, err))) return st;
    return GR_OK;
}

/* Batch buffers from the backend: page-locked memory on a GPU. */
static void *gr_job_host_alloc(size_t bytes, void *ctx) { return gr_backend_host_alloc(ctx, bytes); }
static void gr_job_host_free(void *p, void *ctx) { gr_backend_host_free(ctx, p); }

static gr_status gr_job_open_loaders(gr_job *j, gr_error *err) {
    const gr_job_spec *s = j->spec;
    gr_loader_config lc;
    memset(&lc, 0, sizeof lc);
    lc.batch = s->train.micro_batch;
    lc.shuffle = s->data.shuffle;
    lc.drop_last = true;
    lc.seed = s->seed;
    lc.rank = 0;
    lc.world = 1;
    lc.n_norm = j->n_norm;
    memcpy(lc.mean, j->mean, sizeof lc.mean);
    memcpy(lc.std, j->std, sizeof lc.std);
    lc.prefetch = (int)s->data.prefetch;
    lc.workers = (int)s->data.workers;
    lc.aug = j->aug;
    if (j->be) {
        lc.host_alloc = gr_job_host_alloc;
        lc.host_free = gr_job_host_free;
        lc.alloc_ctx = j->be;
    }
    gr_status st = gr_loader_open(j->train_ds, &lc, &j->train_ld, err);
    if (st) return st;
    if (j->val_ds) {
        lc.shuffle = false;
        lc.drop_last = false;
        lc.aug = j->val_aug;
        if ((st = gr_loader_open(j->val_ds, &lc, &j->val_ld, err))) return st;
    }
    return GR_OK;
}

/* ---- device ---- */
static gr_status gr_job_backend(gr_job *j, const gr_job_spec *s, const char *device, int threads, bool quiet,
                                gr_error *err) {
    const char *dev = device;
    if (strcmp(dev, "auto") == 0) {
        dev = "cpu";
#ifdef GR_HAVE_CUDA
        gr_backend *cuda = NULL;
        gr_error e2;
        if (gr_backend_create("cuda:0", 0, &cuda, &e2) == GR_OK) {
            bool all = true;
            for (int i = 0; i < j->g.n_nodes; i++)
                if (!(gr_op_flags(j->g.nodes[i].op) & GR_OPF_VIEW) &&
                    !gr_backend_supports_op(cuda, j->g.nodes[i].op)) all = false;
            if (all) j->be = cuda;
            else {
                fprintf(stderr, "gpurun: device auto: the cuda backend lacks kernels this job needs; using the cpu\n");
                gr_backend_free(cuda);
            }
        } else if (!quiet) {
            fprintf(stderr, "gpurun: device auto: %s; using the cpu\n", e2.msg);
        }
#endif
    }
    gr_status st = j->be ? GR_OK : gr_backend_create(dev, threads, &j->be, err);
    if (st) return st;
    gr_backend_opts o = {.precision = s->precision, .cudnn_benchmark = s->cudnn_benchmark, .cuda_graph = s->cuda_graph};
    gr_backend_configure(j->be, &o);
    if (s->precision == GR_PREC_TF32 && strcmp(gr_backend_name(j->be), "cpu") == 0 && !quiet)
        fprintf(stderr, "gpurun: precision tf32: the cpu computes in full fp32\n");
    return GR_OK;
}

/* ---- run directory ---- */

/* The job's spec as run (config.yaml, checkpoints): with what the data
 * decided filled in, so the file reproduces the run on another copy of the
 * data: model.input and data.normalize (from the file's mean/std or /255). */
static void gr_job_dump_spec(const gr_job *j, FILE *f) {
    gr_job_spec r = *j->spec; /* shallow: the dump only reads */
    if (r.model.n_input == 0) {
        r.model.n_input = j->in_ndim;
        for (int i = 0; i < j->in_ndim; i++) r.model.input[i] = j->in_shape[i];
    }
    if (r.data.n_mean == 0) {
        r.data.n_mean = r.data.n_std = j->n_norm;
        for (int i = 0; i < j->n_norm; i++) r.data.mean[i] = j->mean[i], r.data.std[i] = j->std[i];
    }
    gr_spec_dump(&r, f);
}
static void gr_job_dump_spec_cb(FILE *f, const void *j) { gr_job_dump_spec(j, f); }

/* j->spec_text: the resolved spec every checkpoint stores */
static const char *gr_job_spec_text(gr_job *j) {
    if (!j->spec_text) {
        size_t len = 0;
        FILE *mf = open_memstream(&j->spec_text, &len);
        GR_ASSERT(mf != NULL);
        gr_job_dump_spec(j, mf);
        fclose(mf);
    }
    return j->spec_text;
}

static void gr_job_ckpt_dir(gr_job *j) {
    const gr_job_spec *s = j->spec;
    if (s->checkpoint.dir[0]) snprintf(j->ckpt_dir, sizeof j->ckpt_dir, "%s", s->checkpoint.dir);
    else snprintf(j->ckpt_dir, sizeof j->ckpt_dir, "%s/checkpoints", j->run_dir);
}

static bool gr_file_exists(const char *dir, const char *name) {
    char p[GR_PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0;
}

static void gr_run_dir_path(const gr_job_spec *s, const gr_run_options *opt, char *buf, size_t n) {
    if (opt->run_dir) snprintf(buf, n, "%s", opt->run_dir);
    else if (s->log.dir[0]) snprintf(buf, n, "%s", s->log.dir);
    else snprintf(buf, n, "runs/%s", s->name);
}

/* Did the run in dir finish (summary.json written with status finished)? */
static bool gr_run_finished(const char *dir) {
    char path[GR_PATH_MAX + 64], text[4096];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return strstr(text, "\"status\":\"finished\"") != NULL;
}

/* j->run_dir (made and locked at the start) gets this run: config.yaml,
 * metrics.jsonl, TensorBoard, and the checkpoint directory j->ckpt_dir. */
static gr_status gr_job_run_dir(gr_job *j, const gr_run_options *opt, gr_error *err) {
    const gr_job_spec *s = j->spec;
    bool has_run = gr_file_exists(j->run_dir, "config.yaml") || gr_file_exists(j->run_dir, "metrics.jsonl") ||
                   gr_file_exists(j->run_dir, "summary.json");
    if (has_run && !opt->resume)
        return gr_error_set(err, GR_ERR_USAGE, "%s: already holds a run (config.yaml/metrics.jsonl); "
                            "pass --resume auto to continue it, or --run-dir to start a new one elsewhere; "
                            "nothing was changed", j->run_dir);
    /* the checkpoint directory before any file is written (exit 6 otherwise) */
    gr_status st = gr_rundir_mkdirs(j->ckpt_dir, "checkpoint directory", GR_ERR_CKPT, err);
    if (st) return st;

    /* metrics.jsonl must be a plain file before anything is written */
    snprintf(j->metrics_path, sizeof j->metrics_path, "%s/metrics.jsonl", j->run_dir);
    if ((st = gr_check_regular(j->metrics_path, "metrics.jsonl", GR_ERR_CKPT, err))) return st;
    j->wrote_run_dir = true;
    if ((st = gr_rundir_write_file(j->run_dir, "config.yaml", gr_job_dump_spec_cb, j, err))) return st;
    if ((st = gr_rundir_open_append(j->metrics_path, &j->metrics, err))) return st;
    if (s->log.tensorboard) return gr_tfevents_open(j->run_dir, &j->tb, err);
    return GR_OK;
}

static void gr_write_line_cb(FILE *f, const void *text) { fprintf(f, "%s\n", (const char *)text); }

static gr_status gr_write_summary(const char *dir, const char *text, gr_error *err) {
    return gr_rundir_write_file(dir, "summary.json", gr_write_line_cb, text, err);
}

/* ---- passes ---- */
static void gr_plan_load_batch(gr_plan *p, const gr_batch *b) {
    const gr_graph *g = p->g;
    size_t per = (size_t)gr_tensor_sample_numel(&g->tensors[g->input]);
    /* asynchronous on a GPU: the stats read-back at the end of the pass is the fence */
    gr_backend_upload_batch(p->m->be, gr_plan_ptr(p, g->input), b->x, (size_t)b->n * per * sizeof(float));
    gr_backend_upload_batch(p->m->be, gr_plan_ptr(p, g->label), b->y, (size_t)b->n * sizeof(int32_t));
}

static void gr_plan_read_stats(gr_plan *p, double *loss_sum, double *correct) {
    float stats[2];
    gr_backend_download(p->m->be, stats, gr_plan_ptr(p, p->g->loss_stats), sizeof stats);
    *loss_sum += stats[0];
    *correct += stats[1];
}

void gr_train_micro_step(gr_plan *p, const gr_batch *b, const gr_exec_ctx *ctx, double *loss_sum,
                         double *correct) {
    gr_plan_load_batch(p, b);
    gr_plan_run(p, b->n, ctx);
    gr_plan_read_stats(p, loss_sum, correct);
}

void gr_train_apply(gr_model *m, const gr_job_spec *s, double lr, int64_t step) {
    (void)gr_train_apply_scaled(m, s, lr, step, 1.0, false);
}

bool gr_train_apply_scaled(gr_model *m, const gr_job_spec *s, double lr, int64_t step, double loss_scale, bool check) {
    const gr_optim_spec *o = &s->train.optimizer;
    int64_t nt = m->g->n_trainable;
    float mult = 1.0f;
    if (s->train.grad_clip > 0.0 || check) {
        double sumsq = gr_backend_sumsq(m->be, m->grads, nt);
        if (check && !isfinite(sumsq)) return false;
        if (s->train.grad_clip > 0.0) mult = gr_clip_factor(sqrt(sumsq) / loss_scale, s->train.grad_clip);
    }
    if (loss_scale != 1.0) mult = (float)((double)mult / loss_scale);
    if (o->type == GR_OPTIM_SGD) {
        gr_sgd_hparams h = {(float)lr, (float)o->momentum, (float)o->weight_decay, mult, o->nesterov};
        gr_backend_sgd(m->be, m->params, m->grads, m->optim, nt, &h);
    } else {
        gr_adamw_hparams h = {(float)lr, (float)o->betas[0], (float)o->betas[1], (float)o->eps,
                              (float)o->weight_decay, mult, step + 1};
        gr_backend_adamw(m->be, m->params, m->grads, m->optim, m->optim + nt, nt, &h);
    }
    return true;
}

/* Mean loss and accuracy over the whole val split. */
static gr_status gr_job_evaluate(gr_job *j, double *loss, double *acc, gr_error *err) {
    /* every evaluation takes one whole epoch of the val loader, which is
     * unshuffled and unaugmented, so each starts where the last ended and
     * finds its first batches already prefetched */
    gr_status st;
    gr_exec_ctx ctx = {.training = false, .rng_key = 0, .grad_scale = 0.0f};
    double loss_sum = 0.0, correct = 0.0;
    int64_t seen = 0, nb = gr_loader_batches_per_epoch(j->val_ld);
    for (int64_t i = 0; i < nb; i++) {
        gr_batch *b;
        if (gr_signals_pending()) { /* a preemption does not wait for the evaluation */
            *loss = *acc = NAN;
            return GR_OK;
        }
        if ((st = gr_loader_next(j->val_ld, &b, err))) return st;
        GR_ASSERT(b->index == i);
        gr_train_micro_step(&j->eval_plan, b, &ctx, &loss_sum, &correct);
        seen += b->n;
        gr_loader_release(j->val_ld, b);
    }
    *loss = loss_sum / (double)(seen ? seen : 1);
    *acc = correct / (double)(seen ? seen : 1);
    return GR_OK;
}

static void gr_fmt_duration(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
}

static gr_status gr_job_log_eval(gr_job *j, int64_t step, double epoch, double loss, double acc, bool quiet,
                                 gr_error *err) {
    gr_json js;
    gr_json_begin(&js);
    gr_json_str(&js, "kind", "eval");
    gr_json_str(&js, "split", "val");
    gr_json_int(&js, "step", step);
    gr_json_num(&js, "epoch", epoch);
    gr_json_num(&js, "loss", loss);
    gr_json_num(&js, "accuracy", acc);
    fprintf(j->metrics, "%s\n", gr_json_end(&js));
    gr_status st = gr_rundir_flush(j->metrics, j->metrics_path, err);
    if (j->tb) {
        double t = gr_tfevents_wall_time();
        gr_tfevents_scalar(j->tb, "val/loss", step, t, (float)loss);
        gr_tfevents_scalar(j->tb, "val/accuracy", step, t, (float)acc);
    }
    if (!quiet) printf("eval  step %lld  epoch %.2f  val loss %.4f  accuracy %.4f\n", (long long)step, epoch, loss, acc);
    return st;
}

/* Keys of schema v1 whose features this version lacks: refused with their
 * position rather than ignored, so nobody believes a run is checkpointed or
 * augmented when it is not. */
static gr_status gr_job_unsupported(const gr_job_spec *s, gr_error *err) {
    if (s->parallel.data > 1)
        return gr_spec_error(err, s, "parallel.data", "%lld ranks asked for, but this version runs on one "
                             "device only", (long long)s->parallel.data);
    return GR_OK;
}

/* ---- checkpoints ---- */

static const char *gr_signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

/* Where step's first micro-batch comes from: epochs are whole steps. */
static void gr_job_position(const gr_job *j, int64_t step, int64_t spe, int64_t *epoch, int64_t *sample) {
    *epoch = step / spe;
    *sample = (step % spe) * j->spec->train.batch_size;
}

static void gr_job_header(const gr_job *j, int64_t step, int64_t spe, gr_ckpt_header *h) {
    const gr_job_spec *s = j->spec;
    memset(h, 0, sizeof *h);
    h->step = step;
    gr_job_position(j, step, spe, &h->epoch, &h->sample_in_epoch);
    h->world_size = 1;
    snprintf(h->precision, sizeof h->precision, "%s", gr_precision_name(s->precision));
    h->loss_scale = j->sc.scale;
    h->loss_scale_good = j->sc.good;
    h->skipped_steps = j->sc.skipped;
    h->last_train_loss = j->rec.last_loss;
    h->best_val_accuracy = j->rec.best_acc;
    h->last_val_accuracy = j->rec.last_acc;
    h->last_val_loss = j->rec.last_vloss;
    h->loss_window_sum = j->rec.loss_window;
    h->loss_window_steps = j->rec.loss_n;
    h->time_s = j->rec.time0 + (gr_now() - j->rec.t0);
    h->rng[0] = s->seed;
    h->rng[1] = (uint64_t)(step * (s->train.batch_size / s->train.micro_batch));
    snprintf(h->optimizer, sizeof h->optimizer, "%s", gr_optim_name(s->train.optimizer.type));
    h->optim_slots = gr_optim_slots(&s->train.optimizer);
    h->eval_pending = j->eval_pending;
    h->spec = j->spec_text;
}

/* Snapshots the model and starts writing it (waiting first for the save in
 * flight, whose failure is reported). */
static void gr_job_checkpoint_start(gr_job *j, int64_t step, int64_t spe) {
    gr_error e;
    gr_ckpt_header h;
    gr_job_header(j, step, spe, &h);
    j->ck_step = step;
    j->ck_failed = false;
    if (gr_saver_snapshot(j->saver, j->be, j->m.params, j->m.optim, &h, &e))
        fprintf(stderr, "gpurun: checkpoint failed (training goes on; the checkpoints committed before it stay): "
                "%s\n", e.msg);
}

/* A checkpoint that must be committed before going on (end, signal). When
 * the save of this very step is in flight or committed (a signal in the step
 * after a periodic save: that step is abandoned before its update, so the
 * model is as it was), it is waited for instead of written again, which
 * would double the time a preemption's deadline allows. *again is set then. */
static gr_status gr_job_checkpoint_sync(gr_job *j, int64_t step, int64_t spe, bool *again, gr_error *err) {
    *again = false;
    if (j->ck_step == step && !j->ck_failed && !j->eval_pending) {
        gr_status st = gr_saver_wait(j->saver, err);
        if (!st) {
            *again = true;
            return GR_OK;
        }
        fprintf(stderr, "gpurun: checkpoint failed: %s; writing it again\n", err->msg);
    }
    gr_job_checkpoint_start(j, step, spe);
    return gr_saver_wait(j->saver, err);
}

/* Keeps the metrics lines of steps <= step (a resumed run logs the later
 * ones again). */
static gr_status gr_job_trim_metrics_file(gr_job *j, int64_t step, gr_error *err);

/* metrics.jsonl and the TensorBoard files of earlier starts: nothing past
 * step, where this start continues */
static gr_status gr_job_trim_metrics(gr_job *j, int64_t step, gr_error *err) {
    gr_status st = gr_job_trim_metrics_file(j, step, err);
    if (!st) st = gr_tfevents_trim(j->run_dir, step, j->tb ? gr_tfevents_path(j->tb) : NULL, err);
    return st;
}

static gr_status gr_job_trim_metrics_file(gr_job *j, int64_t step, gr_error *err) {
    const char *path = j->metrics_path;
    char tmp[GR_PATH_MAX + 80];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    fclose(j->metrics);
    j->metrics = NULL;
    gr_status st = gr_check_regular(path, "metrics.jsonl", GR_ERR_CKPT, err);
    if (st) return st;
    unlink(tmp); /* a leftover, or a symlink planted there, is replaced rather than followed */
    FILE *in = fopen(path, "r"), *out = fopen(tmp, "wx");
    if (!in || !out) {
        int e = errno;
        if (in) fclose(in);
        if (out) fclose(out);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot rewrite: %s", path, strerror(e));
    }
    char line[8192];
    while (fgets(line, sizeof line, in)) {
        const char *p = strstr(line, "\"step\":");
        if (p && strtoll(p + 7, NULL, 10) > step) continue;
        fputs(line, out);
    }
    bool bad = ferror(in) || ferror(out) || fflush(out) != 0;
    fclose(in);
    if (fclose(out) != 0 || bad || rename(tmp, path) != 0) {
        int e = errno ? errno : EIO;
        unlink(tmp);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot rewrite: %s", path, strerror(e));
    }
    return gr_rundir_open_append(path, &j->metrics, err);
}


/* --resume: loads the newest checkpoint of the job's checkpoint directory
 * that verifies (auto) or exactly PATH, and checks it fits the job (exit 6
 * otherwise), all before the run directory is touched. */
static gr_status gr_job_pick_checkpoint(gr_job *j, const gr_run_options *opt, int64_t spe, int64_t total,
                                        gr_error *err) {
    const gr_job_spec *s = j->spec;
    j->pre_found = false;
    if (!opt->resume) return GR_OK;
    j->pre_params = gr_xmalloc((size_t)(j->g.n_params + 1) * sizeof(float));
    j->pre_optim = gr_xmalloc((size_t)(2 * j->g.n_trainable + 1) * sizeof(float));
    gr_ckpt_state cs = {&j->g, j->pre_params, j->pre_optim};
    gr_ckpt_header *h = &j->pre_h;
    gr_status st;
    if (strcmp(opt->resume, "auto") == 0) {
        if ((st = gr_ckpt_resume_auto(j->ckpt_dir, h, &cs, &j->pre_found, j->pre_path, sizeof j->pre_path, err)))
            return st;
        if (!j->pre_found) return GR_OK;
    } else {
        snprintf(j->pre_path, sizeof j->pre_path, "%s", opt->resume);
        if ((st = gr_ckpt_load(opt->resume, h, &cs, err))) return st;
        j->pre_found = true;
    }
    const char *path = j->pre_path;
    /* the checkpoint must be of this job: every key that shapes the trajectory equal */
    char diff[GR_ERROR_MSG_MAX / 2];
    int nd = h->spec ? gr_spec_diff(h->spec, gr_job_spec_text(j), diff, sizeof diff) : 0;
    free(h->spec);
    h->spec = NULL;
    if (nd != 0)
        return gr_error_set(err, GR_ERR_CKPT, "%s: written for another job: %s; nothing was changed: resume with "
                            "the spec it was written for, or start over elsewhere (another --run-dir) or after "
                            "moving %s away", path, diff, opt->resume && !strcmp(opt->resume, "auto") ? j->ckpt_dir : path);
    if (h->step > total)
        return gr_error_set(err, GR_ERR_CKPT, "%s: at step %lld, past this job's end (%lld steps): raise "
                            "train.steps or train.epochs to continue it", path, (long long)h->step, (long long)total);
    const int slots = gr_optim_slots(&s->train.optimizer);
    int64_t epoch, sample;
    gr_job_position(j, h->step, spe, &epoch, &sample);
    if (h->optim_slots != slots || strcmp(h->optimizer, gr_optim_name(s->train.optimizer.type)) != 0)
        return gr_error_set(err, GR_ERR_CKPT, "%s: optimizer %s with %d state slot(s), but the job uses %s with %d",
                            path, h->optimizer, h->optim_slots, gr_optim_name(s->train.optimizer.type), slots);
    if (h->epoch != epoch || h->sample_in_epoch != sample)
        return gr_error_set(err, GR_ERR_CKPT, "%s: step %lld was at epoch %lld sample %lld, but this job's batches "
                            "put it at epoch %lld sample %lld (train.batch_size or the data changed?)", path,
                            (long long)h->step, (long long)h->epoch, (long long)h->sample_in_epoch, (long long)epoch,
                            (long long)sample);
    return GR_OK;
}

/* Sets up the checkpoint directory and saver; with --resume, restores the
 * checkpoint gr_job_pick_checkpoint chose and returns the step to continue
 * from. */
static gr_status gr_job_resume(gr_job *j, const gr_run_options *opt, int64_t *start, gr_error *err) {
    const gr_job_spec *s = j->spec;
    *start = 0;
    gr_status st; /* j->ckpt_dir: set and made by gr_job_run_dir */
    gr_job_spec_text(j);
    const int slots = gr_optim_slots(&s->train.optimizer);
    j->saver = gr_saver_new(j->ckpt_dir, (int)s->checkpoint.keep, &j->g, slots);
    if (!opt->resume) return GR_OK;
    if (!j->pre_found) {
        if (!opt->quiet) fprintf(stderr, "gpurun: --resume auto: no checkpoint in %s; starting fresh\n", j->ckpt_dir);
        /* an earlier attempt died before its first checkpoint: its steps are redone */
        return gr_job_trim_metrics(j, 0, err);
    }
    const char *path = j->pre_path;
    gr_ckpt_header h = j->pre_h; /* loaded, verified and checked by gr_job_pick_checkpoint */
    gr_ckpt_state cs = {&j->g, j->pre_params, j->pre_optim};
    gr_backend_upload(j->be, j->m.params, cs.params, (size_t)j->g.n_params * sizeof(float));
    if (slots) gr_backend_upload(j->be, j->m.optim, cs.optim, (size_t)slots * (size_t)j->g.n_trainable * sizeof(float));
    if ((st = gr_job_trim_metrics(j, h.step, err))) return st;
    if (!opt->quiet) fprintf(stderr, "gpurun: resuming from %s at step %lld\n", path, (long long)h.step);
    *start = h.step;
    j->eval_pending = h.eval_pending != 0;
    if (j->sc.dynamic) { /* the scale carries on where it was */
        j->sc.scale = h.loss_scale;
        j->sc.good = h.loss_scale_good;
    }
    j->sc.skipped = h.skipped_steps; /* AdamW's step count is the updates applied */
    j->rec.last_loss = h.last_train_loss;
    j->rec.best_acc = h.best_val_accuracy;
    j->rec.last_acc = h.last_val_accuracy;
    j->rec.last_vloss = h.last_val_loss;
    j->rec.loss_window = h.loss_window_steps > 0 ? h.loss_window_sum : 0.0;
    j->rec.loss_n = h.loss_window_steps;
    j->rec.time0 = isfinite(h.time_s) && h.time_s > 0 ? h.time_s : 0.0;
    return GR_OK;
}

gr_status gr_train_run(const gr_job_spec *spec, const gr_run_options *opt, gr_error *err) {
    gr_job j;
    memset(&j, 0, sizeof j);
    j.ck_step = -1;
    j.lock.fd = -1;
    gr_status st;
    const gr_job_spec *s = spec;
    /* from the start: a preemption during set-up (data loading, a resumed
     * evaluation) is noted and stops the run at the first step boundary, with
     * a checkpoint and exit 75, instead of killing it (143) */
    gr_signals_install(s->checkpoint.signal_deadline_s);
    if ((st = gr_job_unsupported(s, err))) goto done;
    j.spec = s;
    gr_run_dir_path(s, opt, j.run_dir, sizeof j.run_dir);
    gr_job_ckpt_dir(&j);
    if (opt->resume && strcmp(opt->resume, "auto") == 0) {
        /* the preemptible idiom reruns every job with --resume auto: a run
         * that already finished is left as it is */
        if (gr_run_finished(j.run_dir)) {
            fprintf(stderr, "gpurun: %s: this run already finished (summary.json); nothing to do (to train it "
                    "further, start a new run with --set model.init_from=%s/weights.h5)\n", j.run_dir, j.run_dir);
            goto done;
        }
    }
    /* one writer per run directory, before anything in it is read */
    if ((st = gr_rundir_lock_take(&j.lock, j.run_dir, err))) goto done;
    if ((st = gr_job_compile(&j, s, true, err))) goto done;
    j.sc = gr_scaler_init(s);
    if ((st = gr_job_backend(&j, s, opt->device ? opt->device : s->device, opt->threads, opt->quiet, err))) goto done;
    if ((st = gr_model_init(&j.m, &j.g, j.be, gr_optim_slots(&s->train.optimizer), err))) goto done;
    {
        float *host = gr_xmalloc((size_t)j.g.n_params * sizeof(float));
        gr_graph_init_params(&j.g, host, s->seed);
        if (s->model.init_from[0] &&
            ((st = gr_check_regular(s->model.init_from, "model.init_from", GR_ERR_CKPT, err)) ||
             (st = gr_weights_load(s->model.init_from, &j.g, host, err)))) {
            free(host);
            goto done;
        }
        gr_backend_upload(j.be, j.m.params, host, (size_t)j.g.n_params * sizeof(float));
        free(host);
    }
    if ((st = gr_plan_compile(&j.train_plan, &j.m, &j.g, GR_PLAN_TRAIN, true, err))) goto done;
    if (j.val_ds && (st = gr_plan_compile(&j.eval_plan, &j.m, &j.g, GR_PLAN_EVAL, true, err))) goto done;
    if ((st = gr_job_open_loaders(&j, err))) goto done;

    int64_t per_epoch = gr_loader_samples_per_epoch(j.train_ld);
    int64_t spe = per_epoch / s->train.batch_size;
    GR_ASSERT(spe >= 1); /* gr_job_compile refused splits smaller than a batch */
    int64_t total = s->train.epochs > 0 ? s->train.epochs * spe : s->train.steps;
    if (s->train.steps > 0 && s->train.steps < total) total = s->train.steps;
    int64_t accum = s->train.batch_size / s->train.micro_batch;
    /* a checkpoint that does not verify or fit changes nothing on disk */
    if ((st = gr_job_pick_checkpoint(&j, opt, spe, total, err))) goto done;
    gr_signals_arm(); /* the run directory is written from here: a signal now ends in a checkpoint */
    if ((st = gr_job_run_dir(&j, opt, err))) goto done;
    int64_t start = 0;
    j.rec.last_loss = j.rec.last_acc = j.rec.last_vloss = j.rec.best_acc = NAN; /* nothing yet; a resume fills it */
    if ((st = gr_job_resume(&j, opt, &start, err))) goto done;
    if (start > 0) {
        int64_t e0, s0;
        gr_job_position(&j, start, spe, &e0, &s0);
        if ((st = gr_loader_seek(j.train_ld, e0, s0, err))) goto done;
    }

    if (!opt->quiet)
        printf("gpurun: %s on %s: %lld parameters, %lld steps (%lld per epoch), batch %lld = %lld x %lld "
               "micro-batches, run dir %s\n", s->name, gr_backend_name(j.be), (long long)j.g.n_weights,
               (long long)total, (long long)spe, (long long)s->train.batch_size, (long long)accum,
               (long long)s->train.micro_batch, j.run_dir);

    int64_t nt = j.g.n_trainable;
    double t0 = gr_now(), t_window = t0, wait_window = 0.0;
    int64_t steps_window = 0; /* this process's steps since the last train line (throughput) */
    double eval_s = 0.0;
    j.rec.t0 = t0;
    const char *status = "finished";
    int stop_signal = 0;
    double last_ckpt = t0;
    if (j.eval_pending && j.val_ld) { /* the evaluation a signal interrupted before the checkpoint */
        double te = gr_now();
        if ((st = gr_job_evaluate(&j, &j.rec.last_vloss, &j.rec.last_acc, err))) goto done;
        eval_s += gr_now() - te;
        t_window = gr_now();
        if (!isnan(j.rec.last_acc)) { /* NaN: a signal interrupted it again; still pending */
            if (isnan(j.rec.best_acc) || j.rec.last_acc > j.rec.best_acc) j.rec.best_acc = j.rec.last_acc;
            if ((st = gr_job_log_eval(&j, start, (double)start / (double)spe, j.rec.last_vloss, j.rec.last_acc,
                                      opt->quiet, err)))
                goto done;
            j.eval_pending = false;
        }
    }
    /* the non-trainable state (batchnorm running stats) as it was when the
     * step began: a signal in the middle of a step puts it back, since the
     * step is redone after the resume */
    const size_t state_bytes = (size_t)(j.g.n_params - nt) * sizeof(float);
    float *state0 = state_bytes ? gr_xmalloc(state_bytes) : NULL;
    int64_t step = 0;
    for (step = start; step < total; step++) {
        if ((stop_signal = gr_signals_pending())) break; /* during set-up, or the eval just done */
        if (state0) gr_backend_download(j.be, state0, j.m.params + nt, state_bytes);
        int64_t epoch = step / spe;
        if (step > 0 && step % spe == 0 && (st = gr_loader_seek(j.train_ld, epoch, 0, err))) goto done;
        gr_backend_zero(j.be, j.m.grads, (size_t)nt * sizeof(float));
        double loss_sum = 0.0, correct = 0.0;
        for (int64_t k = 0; k < accum; k++) {
            gr_batch *b;
            if ((st = gr_loader_next(j.train_ld, &b, err))) goto done;
            GR_ASSERT(b->n == s->train.micro_batch && b->epoch == epoch);
            gr_exec_ctx ctx = {.training = true,
                               .rng_key = gr_hash64(s->seed, (uint64_t)(step * accum + k)),
                               .grad_scale = j.sc.scale == 1.0 ? 1.0f / (float)s->train.batch_size
                                                               : (float)(j.sc.scale / (double)s->train.batch_size)};
            gr_train_micro_step(&j.train_plan, b, &ctx, &loss_sum, &correct);
            gr_loader_release(j.train_ld, b);
            if ((stop_signal = gr_signals_pending())) break; /* the step is redone after the resume */
        }
        if (stop_signal) {
            if (state0) gr_backend_upload(j.be, j.m.params + nt, state0, state_bytes);
            break;
        }
        double loss = loss_sum / (double)s->train.batch_size;
        if (!isfinite(loss)) {
            status = "diverged";
            st = gr_error_set(err, GR_ERR_DIVERGED, "training diverged at step %lld (epoch %lld): the loss is "
                              "%g; lower train.optimizer.lr or set train.grad_clip", (long long)step + 1,
                              (long long)epoch + 1, loss);
            break;
        }
        double lr = gr_schedule_lr(&s->train.schedule, s->train.optimizer.lr, step, total, spe);
        gr_saver_wait_copied(j.saver); /* a checkpoint's snapshot may still be reading the weights */
        const double scale = j.sc.scale;
        /* a skipped step is no optimizer step (GradScaler skips optimizer.step()) */
        /* every step looks at the gradients' norm (one reduction, finite.h): inf/NaN is a
         * skipped step under dynamic loss scaling, else divergence naming the first layer */
        bool finite = gr_train_apply_scaled(&j.m, s, lr, step - j.sc.skipped, scale, true);
        gr_scaler_update(&j.sc, finite);
        if (!finite && (!j.sc.dynamic || j.sc.scale < GR_SCALE_FLOOR)) {
            status = "diverged";
            st = gr_train_grads_diverged(&j.m, step + 1, epoch + 1, loss, scale, j.sc.check, j.sc.dynamic, err);
            break;
        }
        j.rec.loss_window += loss;
        j.rec.loss_n++;
        steps_window++;
        j.rec.last_loss = loss;

        int64_t done_steps = step + 1;
        double epoch_f = (double)done_steps / (double)spe;
        if (done_steps % s->log.every_steps == 0 || done_steps == total) {
            if ((st = gr_train_check_params(&j.m, done_steps, spe, "at the metrics line", err))) {
                status = "diverged";
                break;
            }
            double now = gr_now();
            double sps = (double)(steps_window * s->train.batch_size) / (now - t_window);
            double wait = gr_loader_wait_s(j.train_ld);
            double wait_pct = 100.0 * (wait - wait_window) / (now - t_window);
            wait_window = wait;
            double eta = (now - t0) / (double)(done_steps - start) * (double)(total - done_steps);
            gr_json js;
            gr_json_begin(&js);
            gr_json_str(&js, "kind", "train");
            gr_json_int(&js, "step", done_steps);
            gr_json_num(&js, "epoch", epoch_f);
            gr_json_num(&js, "loss", j.rec.loss_window / (double)j.rec.loss_n);
            gr_json_num(&js, "lr", lr);
            gr_json_num(&js, "samples_per_s", sps);
            gr_json_num(&js, "loss_scale", j.sc.scale);
            gr_json_num(&js, "time_s", j.rec.time0 + (now - t0));
            gr_json_num(&js, "data_wait_pct", wait_pct);
            fprintf(j.metrics, "%s\n", gr_json_end(&js));
            if ((st = gr_rundir_flush(j.metrics, j.metrics_path, err))) goto done;
            if (j.tb) {
                double t = gr_tfevents_wall_time();
                gr_tfevents_scalar(j.tb, "train/loss", done_steps, t, (float)(j.rec.loss_window / (double)j.rec.loss_n));
                gr_tfevents_scalar(j.tb, "train/lr", done_steps, t, (float)lr);
                gr_tfevents_scalar(j.tb, "train/samples_per_s", done_steps, t, (float)sps);
                if ((st = gr_tfevents_flush(j.tb, err))) goto done; /* live in TensorBoard, like metrics.jsonl */
            }
            if (!opt->quiet) {
                char etab[32];
                gr_fmt_duration(eta, etab, sizeof etab);
                printf("step %lld/%lld  epoch %.2f/%lld  loss %.4f  lr %.4g  %.0f samples/s  data wait %.1f%%  "
                       "ETA %s\n", (long long)done_steps, (long long)total, epoch_f,
                       (long long)((total + spe - 1) / spe), j.rec.loss_window / (double)j.rec.loss_n, lr, sps, wait_pct,
                       etab);
                fflush(stdout);
            }
            t_window = now;
            j.rec.loss_window = 0.0;
            j.rec.loss_n = 0;
            steps_window = 0;
        }
        bool end_of_epoch = done_steps % spe == 0;
        bool do_eval = s->eval.every_steps > 0 ? done_steps % s->eval.every_steps == 0
                                               : s->eval.every_epochs > 0 && end_of_epoch &&
                                                     (done_steps / spe) % s->eval.every_epochs == 0;
        if (done_steps == total) do_eval = true;
        if (j.val_ld && do_eval) {
            double te = gr_now();
            if ((st = gr_job_evaluate(&j, &j.rec.last_vloss, &j.rec.last_acc, err))) goto done;
            te = gr_now() - te;
            if (isnan(j.rec.last_acc)) { /* a signal interrupted it: the resumed run does it first */
                stop_signal = gr_signals_pending();
                j.eval_pending = true;
                j.rec.last_acc = j.rec.last_vloss = NAN;
                step++;
                break;
            }
            t_window += te; /* training throughput excludes eval time */
            eval_s += te;
            if (isnan(j.rec.best_acc) || j.rec.last_acc > j.rec.best_acc) j.rec.best_acc = j.rec.last_acc;
            if ((st = gr_job_log_eval(&j, done_steps, epoch_f, j.rec.last_vloss, j.rec.last_acc, opt->quiet, err)))
                goto done;
            if (j.tb && (st = gr_tfevents_flush(j.tb, err))) goto done;
        }
        /* checkpoints: report a background save that failed, start one when due */
        gr_status sst;
        gr_error se;
        if (gr_saver_poll(j.saver, &sst, &se) && sst) {
            j.ck_failed = true;
            fprintf(stderr, "gpurun: checkpoint failed (training goes on; the checkpoints committed before it stay): "
                    "%s\n", se.msg);
        }
        const double now = gr_now();
        bool due = (s->checkpoint.every_steps > 0 && done_steps % s->checkpoint.every_steps == 0) ||
                   (s->checkpoint.every_minutes > 0 && now - last_ckpt >= 60.0 * s->checkpoint.every_minutes);
        if (due && done_steps < total && !gr_signals_pending()) {
            if ((st = gr_train_check_params(&j.m, done_steps, spe, "before a checkpoint", err))) {
                status = "diverged";
                break;
            }
            gr_job_checkpoint_start(&j, done_steps, spe);
            last_ckpt = now;
        }
        if ((stop_signal = gr_signals_pending())) {
            step++;
            break;
        }
    }
    /* the last checkpoint: at the end, or where a signal stopped the run; never of inf/NaN weights */
    if (strcmp(status, "diverged") != 0 &&
        (st = gr_train_check_params(&j.m, step, spe, "before the last checkpoint and weights.h5", err)))
        status = "diverged";
    if (strcmp(status, "diverged") != 0) {
        gr_error ce;
        bool periodic = false;
        gr_status cst = gr_job_checkpoint_sync(&j, step, spe, &periodic, &ce);
        if (stop_signal) {
            status = "stopped";
            if (cst) st = cst, *err = ce;
            else {
                char name[64];
                gr_ckpt_filename(step, name, sizeof name);
                st = gr_error_set(err, GR_ERR_SIGNAL, "stopped by %s at step %lld; checkpoint %s/%s committed; "
                                  "rerun with --resume auto to continue%s", gr_signal_name(stop_signal),
                                  (long long)step, j.ckpt_dir, name,
                                  periodic ? " (the step's periodic save, waited for, not written twice)" : "");
            }
        } else if (cst) {
            status = "checkpoint_failed"; /* not finished: --resume auto completes it from the last good one */
            st = cst, *err = ce;
        }
    }
    gr_signals_restore();
    free(state0);
    double wall = gr_now() - t0;
    {
        double wait = gr_loader_wait_s(j.train_ld);
        gr_json js;
        gr_json_begin(&js);
        gr_json_str(&js, "status", status);
        gr_json_str(&js, "name", s->name);
        gr_json_str(&js, "device", gr_backend_name(j.be));
        gr_json_int(&js, "steps", step);
        gr_json_num(&js, "epochs", (double)step / (double)spe);
        gr_json_num(&js, "wall_s", wall);
        /* this process's steps over its time (a resumed run's earlier steps are not in wall) */
        const double samples = (double)((step - start) * s->train.batch_size);
        gr_json_int(&js, "start_step", start);
        gr_json_num(&js, "samples_per_s", samples / (wall > 0 ? wall : 1));
        gr_json_num(&js, "eval_s", eval_s);
        gr_json_num(&js, "train_samples_per_s",
                    samples / (wall - eval_s > 0 ? wall - eval_s : 1));
        gr_json_num(&js, "final_train_loss", j.rec.last_loss);
        gr_json_num(&js, "best_val_accuracy", j.rec.best_acc);
        gr_json_num(&js, "last_val_accuracy", j.rec.last_acc);
        gr_json_str(&js, "precision", gr_precision_name(s->precision));
        gr_json_num(&js, "loss_scale", j.sc.scale);
        gr_json_int(&js, "skipped_steps", j.sc.skipped);
        gr_json_num(&js, "last_val_loss", j.rec.last_vloss);
        gr_json_int(&js, "params", j.g.n_weights);
        gr_json_num(&js, "data_wait_s", wait);
        gr_json_num(&js, "data_wait_pct", wall - eval_s > 0 ? 100.0 * wait / (wall - eval_s) : 0.0);
        gr_error e2;
        gr_status st2 = gr_write_summary(j.run_dir, gr_json_end(&js), &e2);
        if (!st && st2) { st = st2; *err = e2; }
        if (j.tb && (st2 = gr_tfevents_flush(j.tb, &e2)) && !st) { st = st2; *err = e2; }
    }
    if (!st && strcmp(status, "finished") == 0) { /* the final weights, loadable by model.init_from */
        char path[GR_PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/weights.h5", j.run_dir);
        float *host = gr_xmalloc((size_t)j.g.n_params * sizeof(float));
        gr_backend_download(j.be, host, j.m.params, (size_t)j.g.n_params * sizeof(float));
        st = gr_weights_save(path, &j.g, host, err);
        free(host);
    }
    if (!st && !opt->quiet)
        printf("done: %lld steps in %.1f s, final train loss %.4f, val accuracy %.4f (best %.4f)\n",
               (long long)step, wall, j.rec.last_loss, j.rec.last_acc, j.rec.best_acc);
done:
    gr_signals_restore();
    gr_rundir_lock lock = j.lock;
    const bool undo = !j.wrote_run_dir;
    gr_job_free(&j);
    gr_rundir_lock_release(&lock, undo); /* after every file of the run is closed */
    return st;
}

/* ---- `gpurun eval` ---- */

gr_status gr_train_eval(const gr_job_spec *spec, const char *checkpoint, const char *split,
                        const gr_run_options *opt, gr_error *err) {
    gr_job j;
    memset(&j, 0, sizeof j);
    gr_status st;
    const bool val = strcmp(split, "val") == 0;
    if (val && !spec->data.val.path[0]) {
        st = gr_spec_error(err, spec, "data", "eval --split val needs data.val");
        goto done;
    }
    if ((st = gr_job_compile(&j, spec, val, err))) goto done;
    if ((st = gr_job_backend(&j, spec, opt->device ? opt->device : spec->device, opt->threads, true, err))) goto done;
    const int slots = gr_optim_slots(&spec->train.optimizer);
    if ((st = gr_model_init(&j.m, &j.g, j.be, slots, err))) goto done;
    gr_ckpt_header h;
    {
        float *p = gr_xmalloc((size_t)(j.g.n_params + 1) * sizeof(float));
        float *o = gr_xmalloc((size_t)(2 * j.g.n_trainable + 1) * sizeof(float));
        gr_ckpt_state cs = {&j.g, p, o};
        st = gr_ckpt_load(checkpoint, &h, &cs, err);
        if (!st) {
            free(h.spec);
            gr_backend_upload(j.be, j.m.params, p, (size_t)j.g.n_params * sizeof(float));
        }
        free(p);
        free(o);
        if (st) goto done;
    }
    if ((st = gr_plan_compile(&j.eval_plan, &j.m, &j.g, GR_PLAN_EVAL, true, err))) goto done;
    /* the split through the evaluation loader: file order, last batch kept, centre crop */
    gr_loader_config lc;
    memset(&lc, 0, sizeof lc);
    lc.batch = spec->train.micro_batch;
    lc.world = 1;
    lc.seed = spec->seed;
    lc.n_norm = j.n_norm;
    memcpy(lc.mean, j.mean, sizeof lc.mean);
    memcpy(lc.std, j.std, sizeof lc.std);
    lc.prefetch = (int)spec->data.prefetch;
    lc.workers = (int)spec->data.workers;
    lc.aug = j.val_aug;
    if ((st = gr_loader_open(val ? j.val_ds : j.train_ds, &lc, &j.val_ld, err))) goto done;
    double loss = 0.0, acc = 0.0;
    int64_t n = gr_loader_samples_per_epoch(j.val_ld);
    if ((st = gr_job_evaluate(&j, &loss, &acc, err))) goto done;
    gr_json js;
    gr_json_begin(&js);
    gr_json_str(&js, "kind", "eval");
    gr_json_str(&js, "split", split);
    gr_json_str(&js, "checkpoint", checkpoint);
    gr_json_int(&js, "step", h.step);
    gr_json_int(&js, "samples", n);
    gr_json_num(&js, "loss", loss);
    gr_json_num(&js, "accuracy", acc);
    printf("%s\n", gr_json_end(&js));
done:
    gr_job_free(&j);
    return st;
}

/* ---- `gpurun plan` ---- */
gr_status gr_train_plan_report(const gr_job_spec *spec, FILE *f, gr_error *err) {
    gr_job j;
    memset(&j, 0, sizeof j);
    gr_status st;
    /* a model with model.input can be planned before its data exists
     * (configs/resnet50.yaml names an ImageNet file most machines lack) */
    const bool no_data = spec->model.n_input > 0 && spec->data.train.path[0] &&
                         access(spec->data.train.path, R_OK) != 0;
    if (no_data) {
        j.spec = spec;
        if ((st = gr_graph_build(spec, spec->model.input, spec->model.n_input, &j.g, err))) goto done;
        j.have_graph = true;
        gr_autodiff(&j.g, false);
    } else if ((st = gr_job_compile(&j, spec, false, err))) {
        goto done;
    }
    gr_plan tp, ep;
    if ((st = gr_plan_compile(&tp, NULL, &j.g, GR_PLAN_TRAIN, false, err))) goto done;
    if ((st = gr_plan_compile(&ep, NULL, &j.g, GR_PLAN_EVAL, false, err))) { gr_plan_free(&tp); goto done; }
    const gr_graph *g = &j.g;
    char a[64], b[64], c[64];
    fprintf(f, "%s: %s, micro-batch %lld\n", spec->name, spec->file, (long long)g->micro_batch);
    if (no_data)
        fprintf(f, "(%s is not there: shapes from model.input)\n", spec->data.train.path);
    fprintf(f, "\n");
    fprintf(f, "%-20s %-22s %-20s %12s %14s\n", "layer", "op", "output", "params", "FLOPs/sample");
    fprintf(f, "%-20s %-22s %-20s %12s %14s\n", "input", "-", gr_shape_str(&g->tensors[g->input], a, sizeof a),
            "0", "0");
    int64_t fwd = 0, train = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        train += nd->flops;
        if (i >= g->n_forward) continue;
        fwd += nd->flops;
        const char *name = nd->layer >= 0 ? g->layers[nd->layer].name : "loss";
        int64_t np = nd->layer >= 0 ? g->layers[nd->layer].n_params : 0;
        gr_fmt_count(np, b, sizeof b);
        gr_fmt_count(nd->flops, c, sizeof c);
        fprintf(f, "%-20s %-22s %-20s %12s %14s\n", name, gr_op_name(nd->op),
                gr_shape_str(&g->tensors[nd->out[0]], a, sizeof a), b, c);
    }
    gr_fmt_count(g->n_weights, a, sizeof a);
    fprintf(f, "\ntotal parameters: %s\n", a);
    gr_fmt_count(fwd, a, sizeof a);
    gr_fmt_count(train, b, sizeof b);
    fprintf(f, "FLOPs per sample: forward %s, forward + backward %s\n", a, b);
    gr_fmt_count(train * spec->train.batch_size, a, sizeof a);
    fprintf(f, "FLOPs per optimizer step: %s (batch %lld)\n", a, (long long)spec->train.batch_size);
    size_t pb, gb, ob;
    gr_model_bytes(g, gr_optim_slots(&spec->train.optimizer), &pb, &gb, &ob);
    fprintf(f, "memory at micro-batch %lld (bytes):\n", (long long)g->micro_batch);
    gr_fmt_count((int64_t)pb, a, sizeof a);
    fprintf(f, "  params           %14s\n", a);
    gr_fmt_count((int64_t)gb, a, sizeof a);
    fprintf(f, "  grads            %14s\n", a);
    gr_fmt_count((int64_t)ob, a, sizeof a);
    fprintf(f, "  optimizer state  %14s  (%s)\n", a, gr_optim_name(spec->train.optimizer.type));
    gr_fmt_count((int64_t)tp.act_bytes, a, sizeof a);
    gr_fmt_count((int64_t)tp.act_bytes_naive, b, sizeof b);
    fprintf(f, "  activations      %14s  (train; %s without reuse)\n", a, b);
    gr_fmt_count((int64_t)ep.act_bytes, a, sizeof a);
    fprintf(f, "  activations      %14s  (eval)\n", a);
    gr_fmt_count((int64_t)(pb + gb + ob + tp.act_bytes), a, sizeof a);
    fprintf(f, "  total            %14s  (training)\n", a);
    /* a run that will not fit is told before it starts (on a GPU the cuDNN
     * workspace comes on top, chosen when the run prepares its plans) */
    {
        const char *dev = spec->device;
        gr_backend *be = NULL;
        gr_error e2;
        if (strcmp(dev, "auto") == 0) { /* what the run would take: GPU 0, else the cpu */
            dev = "cuda:0";
            if (gr_backend_create(dev, 1, &be, &e2) != GR_OK) be = NULL, dev = "cpu";
        }
        size_t fr = 0, tot = 0, need = pb + gb + ob + tp.act_bytes + ep.act_bytes;
        if ((be || gr_backend_create(dev, 1, &be, &e2) == GR_OK) && gr_backend_mem_info(be, &fr, &tot)) {
            gr_fmt_count((int64_t)fr, a, sizeof a);
            gr_fmt_count((int64_t)tot, b, sizeof b);
            fprintf(f, "%s: %s bytes free of %s\n", dev, a, b);
            if (need > fr) {
                gr_fmt_count((int64_t)need, c, sizeof c);
                fprintf(f, "warning: this job needs %s bytes on %s (training + eval arenas), more than is free: "
                        "it will not fit; lower train.micro_batch\n", c, dev);
            }
        }
        gr_backend_free(be);
    }
    gr_plan_free(&tp);
    gr_plan_free(&ep);
done:
    gr_job_free(&j);
    return st;
}
