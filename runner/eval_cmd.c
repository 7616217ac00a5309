/* eval_cmd.c — `gpurun eval` (gr_train_eval, see train.h): a checkpoint's
 * parameters and state through the evaluation plan over a whole split. */
#include "job.h"
#include "jobio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../checkpoints/weights.h"
#include "json.h"

gr_status gr_job_load_weights(gr_job *j, const char *checkpoint, int64_t *step, gr_error *err) {
    gr_ckpt_header h;
    float *p = gr_xcalloc((size_t)(j->g.n_params + 1), sizeof(float));
    float *o = gr_xcalloc((size_t)(2 * j->g.n_trainable + 1), sizeof(float));
    gr_ckpt_state cs = {&j->g, p, o};
    gr_status st;
    if (gr_weights_is_export(checkpoint)) {
        st = gr_weights_load(checkpoint, &j->g, p, err);
        *step = -1;
    } else if (!(st = gr_ckpt_load(checkpoint, &h, &cs, err))) {
        free(h.spec);
        *step = h.step;
    }
    if (!st) gr_backend_upload(j->be, j->m.params, p, (size_t)j->g.n_params * sizeof(float));
    free(p);
    free(o);
    return st;
}

/* The job compiled, its model on the backend with the checkpoint's (or
 * weights.h5's) parameters and its eval plan: what eval and predict run. */
gr_status gr_job_setup_eval(gr_job *j, const gr_job_spec *spec, const char *checkpoint, bool val,
                               const gr_run_options *opt, int64_t *step, gr_error *err) {
    gr_status st;
    j->eval_only = true;
    if ((st = gr_job_compile(j, spec, val, err))) return st;
    if ((st = gr_job_backend(j, spec, opt->device ? opt->device : spec->device, opt->threads, true, err))) return st;
    gr_job_layout(j);
    if ((st = gr_model_init(&j->m, &j->g, j->be, gr_optim_slots(&spec->train.optimizer), err))) return st;
    if ((st = gr_job_load_weights(j, checkpoint, step, err))) return st;
    return gr_plan_compile(&j->eval_plan, &j->m, &j->g, GR_PLAN_EVAL, true, err);
}

gr_status gr_train_eval(const gr_job_spec *spec, const char *checkpoint, const char *split,
                        const gr_run_options *opt, gr_error *err) {
    gr_job j;
    gr_job_init(&j, spec, true);
    gr_status st;
    const bool val = strcmp(split, "val") == 0;
    int64_t step = 0;
    if (val && !spec->data.val.path[0]) {
        st = gr_spec_error(err, spec, "data", "eval --split val needs data.val");
        goto done;
    }
    if ((st = gr_job_setup_eval(&j, spec, checkpoint, val, opt, &step, err))) goto done;
    /* the split through the evaluation loader: file order, last batch kept, centre crop */
    gr_loader_config lc;
    if ((st = gr_job_decode_setup(&j, opt->quiet, err))) goto done;
    gr_job_loader_config(&j, &lc);
    lc.aug = j.val_aug;
    if (j.byname) st = gr_jobio_open_eval(&j, val, &lc, err);
    else st = gr_loader_open(val ? j.val_ds : j.train_ds, &lc, &j.val_ld, err);
    if (st) goto done;
    gr_eval e;
    int64_t n = gr_loader_samples_per_epoch(j.val_ld);
    if ((st = gr_job_evaluate(&j, &e, err))) goto done;
    gr_json js;
    gr_json_begin(&js);
    gr_json_str(&js, "kind", "eval");
    gr_json_str(&js, "split", split);
    gr_json_str(&js, "checkpoint", checkpoint);
    if (step >= 0) gr_json_int(&js, "step", step);
    else gr_json_num(&js, "step", NAN); /* null: weights.h5 does not say */
    gr_json_int(&js, "samples", n);
    gr_json_num(&js, "loss", e.loss);
    for (int i = 0; i < e.n_metrics; i++) gr_json_num(&js, e.name[i], e.metric[i]);
    printf("%s\n", gr_json_end(&js));
done:
    gr_job_free(&j);
    return st;
}
