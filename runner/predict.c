/* predict.c — `gpurun predict JOB.yaml --checkpoint PATH [--top K] INPUT...`
 * (gr_train_predict, train.h): a trained model applied to new inputs, one
 * JSON line per sample with its top-K classes and their probabilities.
 *
 * An INPUT is an image file (JPEG or PNG, by its first bytes) or a split of
 * an HDF5 dataset, FILE.h5[:GROUP] (GROUP default /test). Image files are
 * made what the job's dataset holds, as `gpurun data imagefolder` does by
 * default: resized so the short side is the model's input side and
 * centre-cropped to it (C=1 models: their luma); for a job trained from an
 * encoded split, as its evaluation makes a sample: short side to
 * round(S * 256 / 224), centre S x S. An encoded split is read through the
 * loader as `gpurun eval` reads one. Every sample then goes
 * through the job's evaluation preprocessing: the same loader,
 * normalization and centre crop as `gpurun eval`, and the eval plan, whose
 * softmax gives the probabilities. Class names are the train split's
 * `classes` attribute (the index when it has none). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dataio/image.h"
#include "job.h"
#include "json.h"

#define GR_PREDICT_NAME_MAX 200 /* bytes of a class name in the output */

typedef struct gr_predict {
    gr_job *j;
    int top;
    char **names; /* n_names class names (0: none) */
    int n_names;
    float *probs; /* a batch's [n, classes] */
} gr_predict;

static bool gr_predict_is_h5(const char *input, char *path, size_t cap, const char **group) {
    const char *colon = strstr(input, ".h5:");
    size_t n = colon ? (size_t)(colon + 3 - input) : strlen(input);
    bool h5 = colon || (n > 3 && !strcmp(input + n - 3, ".h5")) || (n > 5 && !strcmp(input + n - 5, ".hdf5"));
    snprintf(path, cap, "%.*s", (int)n, input);
    *group = colon ? colon + 4 : "/test";
    return h5;
}

/* One sample's line: its input (and index and label within a split), its top classes. */
static void gr_predict_line(const gr_predict *p, const char *input, int64_t index, int32_t label,
                            const float *prob, int64_t classes) {
    char top[6144];
    size_t len = 0;
    bool *taken = gr_xcalloc((size_t)classes, sizeof *taken);
    top[len++] = '[';
    for (int k = 0; k < p->top && k < classes; k++) {
        int64_t best = -1;
        for (int64_t c = 0; c < classes; c++)
            if (!taken[c] && (best < 0 || prob[c] > prob[best])) best = c;
        taken[best] = true;
        char name[GR_PREDICT_NAME_MAX + 1];
        if (best < p->n_names) snprintf(name, sizeof name, "%s", p->names[best]);
        else snprintf(name, sizeof name, "%lld", (long long)best);
        gr_json e;
        gr_json_begin(&e);
        gr_json_str(&e, "class", name);
        gr_json_int(&e, "index", best);
        gr_json_num(&e, "p", prob[best]);
        len += (size_t)snprintf(top + len, sizeof top - len, "%s%s", k ? "," : "", gr_json_end(&e));
        GR_ASSERT(len < sizeof top - 2);
    }
    top[len++] = ']';
    top[len] = '\0';
    free(taken);
    gr_json js;
    gr_json_begin(&js);
    gr_json_str(&js, "input", input);
    if (index >= 0) {
        gr_json_int(&js, "index", index);
        gr_json_int(&js, "label", label);
    }
    gr_json_raw(&js, "top", top);
    printf("%s\n", gr_json_end(&js));
}

/* Every sample of ds through the eval loader and plan; names[i] the input of
 * sample i (image files), or split (a split: its samples by index). */
static gr_status gr_predict_dataset(gr_predict *p, gr_dataset *ds, const char *const *names, const char *split,
                                    gr_error *err) {
    gr_job *j = p->j;
    gr_loader_config lc;
    gr_job_loader_config(j, &lc);
    lc.aug = j->val_aug;
    gr_loader *ld = NULL;
    gr_status st = gr_loader_open(ds, &lc, &ld, err);
    if (st) return st;
    const int64_t classes = j->g.n_classes, nb = gr_loader_batches_per_epoch(ld);
    gr_exec_ctx ctx = {.training = false, .rng_key = 0, .grad_scale = 0.0f};
    int64_t at = 0;
    for (int64_t i = 0; i < nb && !st; i++) {
        gr_batch *b;
        if ((st = gr_loader_next(ld, &b, err))) break;
        gr_train_load_batch(&j->eval_plan, b);
        gr_plan_run(&j->eval_plan, b->n, &ctx);
        gr_backend_download(j->be, p->probs, gr_plan_ptr(&j->eval_plan, j->g.loss_probs),
                            (size_t)(b->n * classes) * sizeof(float));
        for (int64_t s = 0; s < b->n; s++, at++)
            gr_predict_line(p, names ? names[at] : split, names ? -1 : at, b->y[s], p->probs + s * classes, classes);
        gr_loader_release(ld, b);
    }
    gr_loader_close(ld);
    fflush(stdout);
    return st;
}

/* The image files inputs[0..n) as one in-memory split of the model's sample shape. */
static gr_status gr_predict_images(gr_predict *p, const char *const *inputs, int n, gr_error *err) {
    int64_t chw[3], R;
    if (gr_dataset_encoded(p->j->train_ds)) { /* what the job's evaluation makes of an encoded sample */
        chw[0] = 3, chw[1] = chw[2] = p->j->val_aug.size;
        R = gr_encoded_eval_short_side(chw[1]);
    } else {
        gr_dataset_sample_shape(p->j->train_ds, chw);
        R = chw[1];
    }
    if (chw[1] != chw[2])
        return gr_error_set(err, GR_ERR_DATA, "%s: predict: the model's samples are %lldx%lld; image files are made "
                            "square (short side resized, centre-cropped): convert them with gpurun data and pass "
                            "FILE.h5:GROUP", inputs[0], (long long)chw[1], (long long)chw[2]);
    if (chw[0] != 1 && chw[0] != 3)
        return gr_error_set(err, GR_ERR_DATA, "%s: predict: the model takes %lld channels; image files give 1 or 3",
                            inputs[0], (long long)chw[0]);
    const size_t per = (size_t)(chw[0] * chw[1] * chw[2]);
    uint8_t *img = gr_xmalloc((size_t)n * per);
    gr_status st = GR_OK;
    for (int i = 0; i < n && !st; i++)
        st = gr_image_load(inputs[i], R, chw[1], (int)chw[0], img + (size_t)i * per, err);
    if (!st) {
        gr_dataset *ds = gr_dataset_wrap(inputs[0], img, n, chw[0], chw[1], chw[2]);
        st = gr_predict_dataset(p, ds, inputs, NULL, err);
        gr_dataset_close(ds);
    }
    free(img);
    return st;
}

/* A split FILE.h5[:GROUP]: its samples must have the model's shape. */
static gr_status gr_predict_split(gr_predict *p, const char *input, const char *path, const char *group,
                                  gr_error *err) {
    gr_dataset *ds = NULL;
    gr_status st = gr_dataset_open_cache(path, group, GR_CACHE_NONE, &ds, err);
    if (st) return st;
    const bool enc = gr_dataset_encoded(ds);
    if (enc != gr_dataset_encoded(p->j->train_ds)) {
        gr_dataset_close(ds);
        return gr_error_set(err, GR_ERR_DATA, "%s: %s split, but the job trained from %s one: predict takes splits "
                            "stored as the job's train split is", input, enc ? "an encoded image" : "a decoded",
                            enc ? "a decoded" : "an encoded image");
    }
    if (gr_dataset_encoded(ds)) { /* decoded to the crop size by the loader, as `gpurun eval` does */
        st = gr_predict_dataset(p, ds, NULL, input, err);
        gr_dataset_close(ds);
        return st;
    }
    int64_t a[3], b[3];
    gr_dataset_sample_shape(ds, a);
    gr_dataset_sample_shape(p->j->train_ds, b);
    if (memcmp(a, b, sizeof a) != 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s: samples of %lldx%lldx%lld; the model takes %lldx%lldx%lld (%s)", input,
                          (long long)a[0], (long long)a[1], (long long)a[2], (long long)b[0], (long long)b[1],
                          (long long)b[2], p->j->spec->data.train.path);
    if (!st) st = gr_predict_dataset(p, ds, NULL, input, err);
    gr_dataset_close(ds);
    return st;
}

gr_status gr_train_predict(const gr_job_spec *spec, const char *checkpoint, int top, const char *const *inputs,
                           int n_inputs, const gr_run_options *opt, gr_error *err) {
    gr_job j;
    gr_job_init(&j, spec, true);
    j.no_cache = true; /* the train split is read for its shape, normalization and class names only */
    gr_predict p = {.j = &j, .top = top};
    int64_t step;
    gr_status st = GR_OK;
    if (spec->model.inputs) /* its inputs are fields of a table, which predict's image files and splits are not */
        st = gr_spec_error(err, spec, "model.inputs", "predict is for image classifiers (this job's inputs are named "
                           "fields): score a split with `gpurun eval JOB.yaml --checkpoint PATH --split val`");
    for (int i = 0; i < n_inputs && !st; i++) /* a longer one would be cut to another file's name (path[]) */
        if (strlen(inputs[i]) >= GR_PATH_MAX)
            st = gr_error_set(err, GR_ERR_USAGE, "predict: INPUT: the path is %zu bytes long; the limit is %d bytes: "
                              "'%.48s...'", strlen(inputs[i]), GR_PATH_MAX - 1, inputs[i]);
    if (!st) st = gr_job_setup_eval(&j, spec, checkpoint, false, opt, &step, err);
    if (!st) {
        p.n_names = gr_dataset_classes(j.train_ds, &p.names);
        if (p.n_names < 0) p.n_names = 0;
        p.probs = gr_xmalloc((size_t)(j.g.micro_batch * j.g.n_classes) * sizeof(float));
    }
    /* runs of image files make one split each; an HDF5 split goes on its own */
    for (int i = 0; i < n_inputs && !st;) {
        char path[GR_PATH_MAX];
        const char *group;
        if (gr_predict_is_h5(inputs[i], path, sizeof path, &group)) {
            st = gr_predict_split(&p, inputs[i], path, group, err);
            i++;
            continue;
        }
        int k = i;
        while (k < n_inputs && !gr_predict_is_h5(inputs[k], path, sizeof path, &group)) k++;
        st = gr_predict_images(&p, inputs + i, k - i, err);
        i = k;
    }
    gr_dataset_classes_free(p.names, p.n_names);
    free(p.probs);
    gr_job_free(&j);
    return st;
}
