/* job.c — compiling a job and giving it what it runs on (see job.h): the
 * data and its shape and normalization, the graph, the backend, the model
 * and its plans, the loaders, and the run directory's paths and files. */
#include "job.h"
#include "parallel.h"
#include "pipe.h"
#include "tp.h"
#include "jobio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../checkpoints/gpt2_import.h"
#include "../checkpoints/weights.h"
#include "../common/env.h"
#include "../config/cfg.h"
#include "../config/schema.h"
#include "../graph/graph.h"
#include "ckptdir.h"
#include "cli.h"
#include "profile.h"

void gr_job_init(gr_job *j, const gr_job_spec *spec, bool quiet) {
    memset(j, 0, sizeof *j);
    j->spec = spec;
    j->ck_step = -1;
    j->ck_noted = -1;
    j->lock.fd = -1;
    j->ckpt_lock.fd = -1;
    j->dp.comm.world = 1;
    j->world.world = 1;
    gr_metrics_init(&j->mx, quiet);
}

void gr_job_free(gr_job *j) {
    gr_prof_free(j->prof);
    gr_pipe_free(j); /* its plans before the model, its communicators before the world's end */
    gr_tp_free(j);
    gr_parallel_unsplit(j);
    gr_saver_free(j->saver);
    gr_dp_free(&j->dp);
    free(j->pre_params);
    free(j->pre_optim);
    free(j->spec_text);
    gr_metrics_close(&j->mx);
    gr_plan_free(&j->train_plan);
    gr_plan_free(&j->eval_plan);
    gr_model_free(&j->m);
    gr_opt_groups_free(&j->og);
    gr_loader_close(j->train_ld); /* before the backend: its buffers may be the backend's */
    gr_loader_close(j->val_ld);
    gr_backend_free(j->be);
    if (j->have_graph) gr_graph_free(&j->g);
    gr_jobio_free(j->byname); /* after the loaders, which read its sources */
    free(j->decode_need);
    gr_dataset_close(j->train_ds);
    gr_dataset_close(j->val_ds);
    memset(j, 0, sizeof *j);
}

int gr_optim_slots(const gr_optim_spec *o) {
    if (o->type == GR_OPTIM_ADAMW) return 2;
    return o->momentum > 0.0 ? 1 : 0;
}

/* ---- compile ---- */

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

/* What the loader makes of ds's samples through aug: the crop size, or the
 * stored shape when there is none (an encoded split: 3 channels). */
static void gr_job_split_shape(const gr_dataset *ds, const gr_augment *aug, int64_t chw[3]) {
    int64_t stored[3];
    gr_dataset_sample_shape(ds, stored);
    chw[0] = stored[0];
    if (gr_dataset_encoded(ds)) chw[1] = chw[2] = aug->size;
    else gr_augment_out_shape(aug, stored[1], stored[2], &chw[1], &chw[2]);
}

/* An encoded split (JPEG/PNG bytes, sizes varying per image) is read only
 * through a crop of a set size: exit 2 at the key that is missing or wrong. */
static gr_status gr_job_encoded_crop(const gr_job_spec *spec, const gr_dataset *ds, gr_error *err) {
    if (!gr_dataset_encoded(ds)) return GR_OK;
    if (spec->data.crop_size <= 0)
        return gr_spec_error(err, spec, "data.augment.crop.size", "required: %s: %s is an encoded image split (JPEG/"
                             "PNG bytes) whose images vary in size; the crop size is the model's input side",
                             gr_dataset_path(ds), gr_dataset_group(ds));
    if (spec->data.crop_type != 1)
        return gr_spec_error(err, spec, "data.augment.crop.type", "must be resized: %s: %s is an encoded image "
                             "split whose images vary in size (a random crop takes a fixed window of each)",
                             gr_dataset_path(ds), gr_dataset_group(ds));
    return GR_OK;
}

/* The samples the model sees: the stored ones, or the crop of them (chw);
 * the input shape (model.input, which must hold as many values); the val
 * split's samples must match. */
static gr_status gr_job_input_shape(gr_job *j, int64_t chw[3], gr_error *err) {
    const gr_job_spec *spec = j->spec;
    int64_t stored[3];
    gr_status st;
    gr_dataset_sample_shape(j->train_ds, stored);
    gr_job_augment(spec, &j->aug, &j->val_aug);
    if ((st = gr_job_encoded_crop(spec, j->train_ds, err)) ||
        (j->val_ds && (st = gr_job_encoded_crop(spec, j->val_ds, err))))
        return st;
    if (!gr_dataset_encoded(j->train_ds) &&
        (st = gr_augment_check(&j->aug, stored[1], stored[2], spec->data.train.path,
                               gr_dataset_images_name(j->train_ds), err)))
        return st;
    gr_job_split_shape(j->train_ds, &j->aug, chw);
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
        memcpy(j->in_shape, chw, 3 * sizeof chw[0]);
    }
    gr_job_io_default(j);
    if (j->val_ds) {
        int64_t vchw[3];
        gr_job_split_shape(j->val_ds, &j->val_aug, vchw);
        if (memcmp(vchw, chw, sizeof vchw) != 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s/images: samples are [%lld, %lld, %lld] but the "
                                "train split's are [%lld, %lld, %lld]%s", spec->data.val.path,
                                spec->data.val.group, (long long)vchw[0], (long long)vchw[1],
                                (long long)vchw[2], (long long)chw[0], (long long)chw[1], (long long)chw[2],
                                j->aug.crop != GR_CROP_NONE ? " (after the crop)" : "");
    }
    return GR_OK;
}

/* Normalization of c channels: the spec, else the dataset's attributes,
 * else [0,1] for uint8. */
static gr_status gr_job_normalization(gr_job *j, int c, gr_error *err) {
    const gr_job_spec *spec = j->spec;
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
    return GR_OK;
}

void gr_job_io_default(gr_job *j) {
    memset(&j->io, 0, sizeof j->io);
    j->io.n_inputs = 1;
    j->io.in[0] = (gr_io_tensor){.name = "input", .elem = GR_F32, .ndim = j->in_ndim};
    for (int i = 0; i < j->in_ndim; i++) j->io.in[0].shape[i] = j->in_shape[i];
    j->io.target = (gr_io_tensor){.name = "label", .elem = GR_I32, .ndim = 0};
}

gr_status gr_job_build(const gr_job_spec *spec, const gr_graph_io *io, gr_graph *g, gr_error *err) {
    gr_status st = gr_graph_build_io(spec, io, g, err);
    if (st) return st;
    gr_autodiff(g, false);
    gr_graph_recompute(g);
    gr_graph_set_precision(g, spec->precision);
    return GR_OK;
}

gr_status gr_job_graph(gr_job *j, const gr_graph_io *io, gr_error *err) {
    gr_status st = gr_job_build(j->spec, io, &j->g, err);
    if (st) return st;
    j->have_graph = true;
    gr_opt_groups_free(&j->og);
    return gr_opt_groups_make(&j->g, j->spec, &j->og, err);
}

/* Opens a split of data.<which> ("train", "val"); an error is prefixed with
 * where the spec names its file ("job.yaml:4:18: data.train.path: ..."). */
static gr_status gr_job_open_split(const gr_job_spec *spec, const char *which, gr_cache_mode cache,
                                   gr_dataset **out, gr_error *err) {
    const gr_split_spec *d = !strcmp(which, "train") ? &spec->data.train : &spec->data.val;
    char split[64];
    snprintf(split, sizeof split, "data.%s", which);
    if (gr_source_tokens_probe(d->path, d->group) == 1) /* without model.inputs, hence without data.seq_len */
        return gr_spec_error(err, spec, split, "%s: %s is token data (a 1-D dataset tokens): token data needs "
                             "data.seq_len (the tokens of a window) and model.inputs: [tokens], model.targets: "
                             "[targets]", d->path, d->group);
    gr_status st = gr_dataset_open_cache(d->path, d->group, cache, out, err);
    if (st) {
        char key[64];
        snprintf(key, sizeof key, "data.%s.path", which);
        const gr_cfg *n = spec->root ? gr_spec_node(spec->root, key) : NULL;
        if (n) gr_error_prefix(err, "%s:%d:%d: %s: ", n->file, n->line, n->col, key);
        else gr_error_prefix(err, "%s: %s (default): ", spec->file, key);
    }
    return st;
}

/* The last item of model.layers, where a model's output width is decided. */
static gr_status gr_job_output_error(const gr_job_spec *spec, gr_error *err, const char *msg) {
    const gr_cfg *l = spec->root ? gr_spec_node(spec->root, "model.layers") : NULL;
    char key[64] = "model.layers";
    if (l && l->kind == GR_CFG_SEQ && l->n > 0) {
        snprintf(key, sizeof key, "model.layers[%d]", l->n - 1);
        l = l->items[l->n - 1];
    }
    return gr_cfg_error(err, l, key, "%s", msg);
}

/* The splits' `classes` attributes agree with each other (exit 3, naming
 * both files and the first class that differs) and with the model's output
 * width (exit 2 at the last layer). Files without the attribute are checked
 * by their labels only (gr_dataset_check_labels). */
gr_status gr_job_check_classes(const gr_job *j, const gr_dataset *train, const gr_dataset *val, gr_error *err) {
    char **tn = NULL, **vn = NULL;
    int nt = gr_dataset_classes(train, &tn), nv = val ? gr_dataset_classes(val, &vn) : 0;
    gr_status st = GR_OK;
    const gr_dataset *bad = nt < 0 ? train : nv < 0 ? val : NULL;
    if (bad) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: attribute classes: expected a list of class names (strings)",
                          gr_dataset_path(bad), gr_dataset_group(bad));
    } else if (nt > 0 && nv > 0) {
        int k = 0;
        while (k < nt && k < nv && !strcmp(tn[k], vn[k])) k++;
        if (k < nt || k < nv) {
            char what[600];
            if (k < nt && k < nv) snprintf(what, sizeof what, "class %d is '%.200s' in the one, '%.200s' in the other",
                                           k, tn[k], vn[k]);
            else snprintf(what, sizeof what, "%d classes in the one, %d in the other (class %d is '%.200s')", nt, nv,
                          k, k < nt ? tn[k] : vn[k]);
            st = gr_error_set(err, GR_ERR_DATA, "%s: %s and %s: %s: the classes differ: %s; the model would learn "
                              "one set and be scored on another", gr_dataset_path(train), gr_dataset_group(train),
                              gr_dataset_path(val), gr_dataset_group(val), what);
        }
    }
    if (!st && nt > 0 && nt != j->g.n_classes) {
        char msg[800];
        snprintf(msg, sizeof msg, "the model has %lld outputs, but %.280s: %.280s has %d classes (attribute classes): "
                 "end the model with a layer of %d outputs", (long long)j->g.n_classes, gr_dataset_path(train),
                 gr_dataset_group(train), nt, nt);
        st = gr_job_output_error(j->spec, err, msg);
    }
    gr_dataset_classes_free(tn, nt);
    gr_dataset_classes_free(vn, nv);
    return st;
}

gr_status gr_job_compile(gr_job *j, const gr_job_spec *spec, bool need_val, gr_error *err) {
    gr_status st;
    j->spec = spec;
    if (!spec->data.train.path[0])
        return gr_spec_error(err, spec, "data.train.path", "required to run or plan this job");
    const gr_cache_mode cache = j->no_cache                          ? GR_CACHE_NONE
                                : !strcmp(spec->data.cache, "memory") ? GR_CACHE_MEMORY
                                : !strcmp(spec->data.cache, "none")   ? GR_CACHE_NONE
                                                                      : GR_CACHE_AUTO;
    if (spec->model.inputs) { /* inputs and targets by name: the splits as tables (jobio.c) */
        if ((st = gr_jobio_compile(j, cache, need_val, err)) || (st = gr_job_graph(j, &j->io, err)) ||
            (st = gr_jobio_check_vocab(j, err)))
            return st;
    } else {
        if ((st = gr_job_open_split(spec, "train", cache, &j->train_ds, err))) return st;
        if (need_val && spec->data.val.path[0] && (st = gr_job_open_split(spec, "val", cache, &j->val_ds, err)))
            return st;
        int64_t chw[3];
        if ((st = gr_job_input_shape(j, chw, err))) return st;
        if ((st = gr_job_normalization(j, (int)chw[0], err))) return st;
        if ((st = gr_job_graph(j, &j->io, err))) return st;
        if ((st = gr_job_check_classes(j, j->train_ds, j->val_ds, err))) return st;
        if ((st = gr_dataset_check_labels(j->train_ds, j->g.n_classes, err))) return st;
        if (j->val_ds && (st = gr_dataset_check_labels(j->val_ds, j->g.n_classes, err))) return st;
    }
    if ((st = gr_job_decode_check(j, err))) return st;
    const int64_t n_train = j->byname ? gr_jobio_train_len(j) : gr_dataset_len(j->train_ds);
    if (n_train < spec->train.batch_size)
        return gr_error_set(err, GR_ERR_DATA, "%s: %s: the split has %lld samples, fewer than train.batch_size "
                            "%lld", spec->data.train.path, spec->data.train.group, (long long)n_train,
                            (long long)spec->train.batch_size);
    /* train.epochs sets the run's length; train.steps with it may only cut it short */
    const int64_t spe = n_train / spec->train.batch_size;
    if (spec->train.epochs > 0 && spec->train.steps > spec->train.epochs * spe)
        return gr_spec_error(err, spec, "train.steps", "%lld steps asked, but train.epochs: %lld ends the run at step "
                             "%lld (%lld samples in %s: %s at train.batch_size %lld are %lld steps an epoch); with "
                             "epochs, steps may only cut the run short: give one of them",
                             (long long)spec->train.steps, (long long)spec->train.epochs,
                             (long long)(spec->train.epochs * spe), (long long)n_train,
                             spec->data.train.path, spec->data.train.group, (long long)spec->train.batch_size,
                             (long long)spe);
    return GR_OK;
}

gr_status gr_job_check_data(const gr_job_spec *spec, gr_error *err) {
    if (!spec->data.train.path[0]) return GR_OK;
    gr_job j;
    gr_job_init(&j, spec, true);
    j.no_cache = true;
    gr_status st = gr_job_compile(&j, spec, true, err);
    gr_job_free(&j);
    return st;
}

/* ---- device, model, loaders ---- */

/* The default CPU thread count of a training run. A resumed run takes the
 * checkpoint's, so that it stays bit-for-bit the uninterrupted run (oneDNN's
 * rounding follows the thread count). A fresh single-process run takes the
 * CPUs of its affinity mask less those other work keeps busy as it starts
 * (measured over 50 ms): on 2 cores beside one busy process, 2 threads ran at
 * half of 1 thread's speed, each waiting at every parallel region for the one
 * the busy process preempts (bench/threads.sh). Data-parallel ranks start
 * together and would count each other, and eval and predict are compared
 * with the training run's figures: they take the whole mask. */
static int gr_job_default_threads(const gr_job *j, bool quiet) {
    const int cpus = gr_host_cpus();
    const bool say = !quiet && j->dp.comm.rank == 0;
    const int rec = j->ckpt_threads;
    if (rec > 0 && rec <= cpus) {
        const double busy = say && j->dp.comm.world == 1 && cpus > 1 ? gr_host_busy_cpus(50) : -1.0;
        const int free_cpus = busy < 0 ? cpus : GR_MAX(1, cpus - (int)floor(busy + 0.5));
        if (free_cpus < rec)
            fprintf(stderr, "gpurun: %.1f of the %d cores are busy with other work; resuming with the %d thread%s "
                    "the checkpoint was trained with, so the run stays exact (--threads %d may be faster; the last "
                    "bits would differ)\n", busy, cpus, rec, rec == 1 ? "" : "s", free_cpus);
        else if (rec < cpus && say) /* fewer than the mask's CPUs: say why */
            fprintf(stderr, "gpurun: resuming with the %d thread%s the checkpoint was trained with, of the %d CPUs "
                    "here, so the run stays exact (--threads N chooses; the last bits would differ)\n", rec,
                    rec == 1 ? "" : "s", cpus);
        return rec;
    }
    if (rec > 0 && say)
        fprintf(stderr, "gpurun: the checkpoint was trained with %d threads, but this process may use %d CPUs: the "
                "resumed run's last bits will differ from an uninterrupted run's\n", rec, cpus);
    if (j->eval_only || j->dp.comm.world > 1 || cpus == 1) return cpus;
    const double busy = gr_host_busy_cpus(50);
    int take = busy < 0 ? cpus : cpus - (int)floor(busy + 0.5);
    if (take < 1) take = 1;
    if (take < cpus && say)
        fprintf(stderr, "gpurun: %.1f of the %d cores are busy with other work: training with %d thread%s "
                "(--threads N chooses)\n", busy, cpus, take, take == 1 ? "" : "s");
    return take;
}

gr_status gr_job_backend(gr_job *j, const gr_job_spec *s, const char *device, int threads, bool quiet,
                         gr_error *err) {
    const char *dev = device;
    if (strcmp(dev, "auto") == 0) {
        dev = "cpu";
        /* the fall-back is said even with --quiet: a job meant for a GPU does
         * not run on the cpu unnoticed (a build without CUDA says so too) */
        gr_backend *cuda = NULL;
        gr_error e2;
        char first[32]; /* data parallelism: this rank's GPU */
        snprintf(first, sizeof first, "cuda:%d", j->dp.comm.local_rank);
        if (gr_backend_create(first, 0, &cuda, &e2) == GR_OK) {
            bool all = true;
            for (int i = 0; i < j->g.n_nodes; i++)
                if (gr_node_runs(&j->g.nodes[i]) && !gr_backend_supports_op(cuda, j->g.nodes[i].op)) all = false;
            if (all) j->be = cuda;
            else {
                if (j->dp.comm.rank == 0)
                    fprintf(stderr, "gpurun: device auto: the cuda backend lacks kernels this job needs; %s on "
                            "the cpu\n", j->eval_only ? "running" : "training");
                gr_backend_free(cuda);
            }
        } else if (j->dp.comm.rank == 0) { /* once, plainly; the driver's detail is for device: cuda */
            const char *why = strstr(e2.msg, "no CUDA device is available") ? "no GPU found"
                              : strstr(e2.msg, "built without CUDA")        ? "this gpurun was built without CUDA"
                                                                             : e2.msg;
            fprintf(stderr, "gpurun: device auto: %s; %s on the cpu\n", why, j->eval_only ? "running" : "training");
        }
    }
    if (!j->be && !strcmp(dev, "cpu")) {
        const int rec = j->ckpt_threads;
        if (threads <= 0) threads = gr_job_default_threads(j, quiet);
        else if (rec > 0 && threads != rec && !quiet && j->dp.comm.rank == 0)
            fprintf(stderr, "gpurun: resuming with --threads %d; the checkpoint was trained with %d: the run's last "
                    "bits will differ from an uninterrupted run's\n", threads, rec);
    }
    gr_status st = j->be ? GR_OK : gr_backend_create(dev, threads, &j->be, err);
    if (st) return st;
    /* a CUDA Graph's replay calls no hooks: --profile runs without (j->prof_steps) */
    gr_backend_opts o = {.precision = s->precision, .cudnn_benchmark = s->cudnn_benchmark,
                         .cuda_graph = s->cuda_graph && !j->prof_steps};
    gr_backend_configure(j->be, &o);
    if (s->precision == GR_PREC_TF32 && strcmp(gr_backend_name(j->be), "cpu") == 0 && !quiet)
        fprintf(stderr, "gpurun: precision tf32: the cpu computes in full fp32\n");
    return GR_OK;
}

/* The fusions the backend takes (off under GPURUN_FUSE=0 and on pipeline
 * stages, whose cut may fall between a fused pair: j->fuse_off says which;
 * dense + relu off in tensor groups: j->fuse_left), then the layout. */
void gr_job_layout(gr_job *j) {
    unsigned what = gr_backend_fusions(j->be);
    j->fuse_left = NULL;
    if (j->spec && j->spec->parallel.tensor > 1 && (what & GR_FUSE_DENSE_RELU)) {
        what &= ~(unsigned)(GR_FUSE_DENSE_RELU | GR_FUSE_DENSE_RELU_BWD);
        j->fuse_left = "dense + relu left apart in tensor groups (a row layer's output is summed after its kernel)";
    }
    j->fuse_off = j->spec && j->spec->parallel.pipeline > 1 ? "off on pipeline stages (a cut may split a pair)"
                  : !gr_env_bool(GR_ENV_FUSE, true)         ? "off (GPURUN_FUSE=0)"
                  : !what                                   ? "none on this device"
                                                            : NULL;
    if (!j->fuse_off) j->fused += gr_graph_fuse(&j->g, what);
    gr_layout_cap caps[GR_OP_COUNT];
    gr_backend_layout_caps(j->be, caps);
    gr_graph_set_layout(&j->g, caps);
}

gr_status gr_job_model(gr_job *j, gr_error *err) {
    const gr_job_spec *s = j->spec;
    gr_job_layout(j);
    gr_status st = gr_model_init(&j->m, &j->g, j->be, gr_optim_slots(&s->train.optimizer), err);
    if (st) return st;
    float *host = gr_xmalloc((size_t)j->g.n_params * sizeof(float));
    gr_graph_init_params(&j->g, host, s->seed);
    if (s->model.init_from[0] &&
        ((st = gr_check_regular(s->model.init_from, "model.init_from", GR_ERR_CKPT, err)) ||
         (st = gr_init_from_load(s->model.init_from, &j->g, host, err)))) {
        free(host);
        return st;
    }
    gr_backend_upload(j->be, j->m.params, host, (size_t)j->g.n_params * sizeof(float));
    free(host);
    if (j->tp && (st = gr_tp_model(j, err))) return st; /* a tensor group's part (tp.c) */
    if (j->pp) { /* the stage's plans (pipe.c); train_plan: their steps and figures, with no arena */
        if ((st = gr_pipe_model(j, err)) || (st = gr_pipe_whole_plan(j, &j->train_plan, err))) return st;
    } else if (j->tp) { /* the part's plan trains; train_plan: the steps' figures, no arena */
        if ((st = gr_plan_compile(&j->train_plan, &j->m, &j->g, GR_PLAN_TRAIN, false, err))) return st;
    } else if ((st = gr_plan_compile(&j->train_plan, &j->m, &j->g, GR_PLAN_TRAIN, true, err))) {
        return st;
    }
    const bool val = j->val_ds || (j->byname && gr_jobio_has_val(j));
    if (val && (st = gr_plan_compile(&j->eval_plan, &j->m, &j->g, GR_PLAN_EVAL, true, err))) return st;
    return GR_OK;
}

void gr_job_say_staged(const gr_job *j, bool quiet) {
    char ops[512];
    if (quiet) return;
    /* attention on cuda says its own kernel choice (cudnn_sdpa.c), at its first step */
    if (!j->train_plan.n_staged) return;
    const char *p = gr_precision_name(j->spec->precision);
    fprintf(stderr, "gpurun: precision %s: %d of %d steps compute in fp32 on converted copies of their %s tensors "
            "(the %s backend has no native %s kernel for them, or they read an fp32 tensor): %s\n", p,
            j->train_plan.n_staged, j->train_plan.steps.n, p, gr_backend_name(j->be), p,
            gr_plan_staged_ops(&j->train_plan, true, ops, sizeof ops));
}

int gr_job_data_workers(const gr_job *j, const char **why) {
    const int64_t w = j->spec->data.workers;
    const char *r = "data.workers";
    int n = (int)w;
    if (w < 0) {
        const bool cpu = j->be && !strcmp(gr_backend_name(j->be), "cpu");
        const bool pixels = !(j->train_ds && gr_dataset_encoded(j->train_ds));
        n = cpu && pixels ? 0 : GR_DATA_WORKERS_AUTO;
        r = n == 0 ? "data.workers auto: on the cpu the training thread makes each batch of stored pixels"
                   : "data.workers auto";
    }
    if (why) *why = r;
    return n;
}

void gr_job_loader_config(const gr_job *j, gr_loader_config *lc) {
    const gr_job_spec *s = j->spec;
    memset(lc, 0, sizeof *lc);
    lc->batch = j->g.micro_batch; /* the spec's, or the one micro_batch auto picked */
    lc->seed = s->seed;
    lc->rank = j->dp.comm.rank;
    lc->world = j->dp.comm.world;
    lc->n_norm = j->n_norm;
    memcpy(lc->mean, j->mean, sizeof lc->mean);
    memcpy(lc->std, j->std, sizeof lc->std);
    lc->prefetch = (int)s->data.prefetch;
    lc->workers = gr_job_data_workers(j, NULL);
    lc->skip_damaged = s->data.on_error == 1;
    lc->encoded_payload = j->decode_gpu; /* gr_job_decode_setup */
}

/* Batch buffers from the backend: page-locked memory on a GPU. */
static void *gr_job_host_alloc(size_t bytes, void *ctx) { return gr_backend_host_alloc(ctx, bytes); }
static void gr_job_host_free(void *p, void *ctx) { gr_backend_host_free(ctx, p); }

void gr_job_loader_configs(const gr_job *j, gr_loader_config *tl, gr_loader_config *vl) {
    gr_job_loader_config(j, tl);
    tl->shuffle = j->spec->data.shuffle;
    tl->drop_last = true;
    tl->aug = j->aug;
    if (j->be) {
        tl->host_alloc = gr_job_host_alloc;
        tl->host_free = gr_job_host_free;
        tl->alloc_ctx = j->be;
    }
    *vl = *tl;
    vl->shuffle = false;
    vl->drop_last = false;
    vl->aug = j->val_aug;
    vl->rank = 0; /* every rank reads the whole split and evaluates every world-th batch (step.c) */
    vl->world = 1;
}

gr_status gr_job_open_loaders(gr_job *j, gr_error *err) {
    gr_loader_config tl, vl;
    gr_status st0 = gr_job_decode_setup(j, j->mx.quiet, err);
    if (st0) return st0;
    gr_job_loader_configs(j, &tl, &vl);
    if (j->byname) return gr_jobio_open_loaders(j, &tl, &vl, err);
    gr_status st = gr_loader_open(j->train_ds, &tl, &j->train_ld, err);
    if (st) return st;
    if (j->val_ds && (st = gr_loader_open(j->val_ds, &vl, &j->val_ld, err))) return st;
    return GR_OK;
}

/* ---- the run directory ---- */

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

const char *gr_job_spec_text(gr_job *j) {
    if (!j->spec_text) {
        size_t len = 0;
        FILE *mf = open_memstream(&j->spec_text, &len);
        GR_ASSERT(mf != NULL);
        gr_job_dump_spec(j, mf);
        fclose(mf);
    }
    return j->spec_text;
}

/* A run directory's path within GR_DIR_MAX bytes, so that nothing made in it
 * is cut to another path (a cut --run-dir can be its parent); else exit 2
 * before anything is written. main.c refuses a long --run-dir as it reads
 * it and the schema a long log.dir or checkpoint.dir: this is for callers
 * that do not (launch.c). */
static void gr_job_dir_fits(const char *what, const char *dir) {
    if (strlen(dir) <= GR_DIR_MAX) return;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: the path is %zu bytes long; the limit is %d bytes: '%.48s...'", what, strlen(dir),
             GR_DIR_MAX, dir);
    gr_die(GR_ERR_USAGE, msg);
}

void gr_job_paths(gr_job *j, const gr_run_options *opt) {
    const gr_job_spec *s = j->spec;
    if (opt->run_dir) gr_job_dir_fits("--run-dir", opt->run_dir);
    gr_job_dir_fits("log.dir", s->log.dir);
    gr_job_dir_fits("checkpoint.dir", s->checkpoint.dir);
    if (opt->run_dir) snprintf(j->run_dir, sizeof j->run_dir, "%s", opt->run_dir);
    else if (s->log.dir[0]) snprintf(j->run_dir, sizeof j->run_dir, "%s", s->log.dir);
    else snprintf(j->run_dir, sizeof j->run_dir, "runs/%s", s->name);
    if (s->checkpoint.dir[0]) snprintf(j->ckpt_dir, sizeof j->ckpt_dir, "%s", s->checkpoint.dir);
    else snprintf(j->ckpt_dir, sizeof j->ckpt_dir, "%s/checkpoints", j->run_dir);
}

static bool gr_file_exists(const char *dir, const char *name) {
    char p[GR_PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0;
}

bool gr_job_dir_holds_run(const gr_job *j) {
    return gr_file_exists(j->run_dir, "config.yaml") || gr_file_exists(j->run_dir, "metrics.jsonl") ||
           gr_file_exists(j->run_dir, "summary.json");
}

gr_status gr_job_open_run_dir(gr_job *j, const gr_run_options *opt, gr_error *err) {
    if (!gr_job_writer(j)) return GR_OK; /* rank 0's */
    if (gr_job_dir_holds_run(j) && !opt->resume)
        return gr_error_set(err, GR_ERR_USAGE, "%s: already holds a run (config.yaml/metrics.jsonl); "
                            "pass --resume auto to continue it, or --run-dir to start a new one elsewhere; "
                            "nothing was changed", j->run_dir);
    /* the checkpoint directory before any file is written (exit 6 otherwise) */
    gr_status st = gr_rundir_mkdirs(j->ckpt_dir, "checkpoint directory", GR_ERR_CKPT, err);
    if (st) return st;
    /* metrics.jsonl must be a plain file before anything is written */
    if ((st = gr_metrics_check(&j->mx, j->run_dir, err))) return st;
    j->wrote_run_dir = true;
    if ((st = gr_rundir_write_file(j->run_dir, "config.yaml", gr_job_dump_spec_cb, j, err))) return st;
    if ((st = gr_metrics_open(&j->mx, j->run_dir, j->spec->log.tensorboard, err))) return st;
    return gr_ckptdir_claim(j, err); /* last: a run refused above leaves the record as it was */
}

gr_status gr_job_save_weights(gr_job *j, gr_error *err) {
    if (!gr_job_writer(j)) return GR_OK;
    char path[GR_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/weights.h5", j->run_dir);
    float *host = gr_xmalloc((size_t)j->g.n_params * sizeof(float));
    gr_backend_download(j->be, host, j->m.params, (size_t)j->g.n_params * sizeof(float));
    gr_status st = gr_weights_save(path, &j->g, host, err);
    free(host);
    return st;
}
