/* metrics.c — the metrics sinks: metrics.jsonl, TensorBoard, the console
 * and summary.json (see metrics.h). */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../dataio/dataio.h"
#include "json.h"
#include "rundir.h"

void gr_metrics_init(gr_metrics *mx, bool quiet) {
    memset(mx, 0, sizeof *mx);
    pthread_mutex_init(&mx->write_mu, NULL);
    mx->quiet = quiet;
    mx->rec.last_loss = mx->rec.last_acc = mx->rec.last_vloss = mx->rec.best_acc = NAN; /* a resume fills it */
}

void gr_metrics_close(gr_metrics *mx) {
    if (mx->jsonl) fclose(mx->jsonl);
    mx->jsonl = NULL;
    gr_tfevents_close(mx->tb, NULL);
    mx->tb = NULL;
    gr_health_close(&mx->health);
}

/* ---- the files ---- */

gr_status gr_metrics_check(gr_metrics *mx, const char *run_dir, gr_error *err) {
    snprintf(mx->path, sizeof mx->path, "%s/metrics.jsonl", run_dir);
    return gr_check_regular(mx->path, "metrics.jsonl", GR_ERR_CKPT, err);
}

gr_status gr_metrics_open(gr_metrics *mx, const char *run_dir, bool tensorboard, gr_error *err) {
    gr_status st = gr_rundir_open_append(mx->path, &mx->jsonl, err);
    if (st) return st;
    if (tensorboard) return gr_tfevents_open(run_dir, &mx->tb, err);
    return GR_OK;
}

/* Keeps the metrics.jsonl lines of steps <= step (a resumed run logs the
 * later ones again), through a temporary file and a rename. */
static gr_status gr_metrics_trim_file(gr_metrics *mx, int64_t step, gr_error *err) {
    const char *path = mx->path;
    char tmp[GR_METRICS_PATH_MAX + 80];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    fclose(mx->jsonl);
    mx->jsonl = NULL;
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
    return gr_rundir_open_append(path, &mx->jsonl, err);
}

/* metrics.jsonl and the TensorBoard files of earlier starts: nothing past
 * step, where this start continues */
gr_status gr_metrics_trim(gr_metrics *mx, const char *run_dir, int64_t step, gr_error *err) {
    gr_status st = gr_metrics_trim_file(mx, step, err);
    if (!st) st = gr_tfevents_trim(run_dir, step, mx->tb ? gr_tfevents_path(mx->tb) : NULL, err);
    return st;
}

/* ---- the lines ---- */

/* " x N processes" for data parallelism, " on S pipeline stages", " on a tensor group of T" or
 * both (" x N replicas") for a model split over processes, else "" */
static const char *gr_metrics_world_str(int world, int stages, int tensor) {
    static char buf[96];
    if (world <= 1) return "";
    const int part = GR_MAX(stages, 1) * GR_MAX(tensor, 1), replicas = world / part;
    int n = 0;
    if (part == 1) n = snprintf(buf, sizeof buf, " x %d processes", world);
    else if (stages > 1 && tensor > 1)
        n = snprintf(buf, sizeof buf, " on %d pipeline stages of a tensor group of %d each", stages, tensor);
    else if (stages > 1) n = snprintf(buf, sizeof buf, " on %d pipeline stages", stages);
    else n = snprintf(buf, sizeof buf, " on a tensor group of %d", tensor);
    if (part > 1 && replicas > 1 && n > 0 && (size_t)n < sizeof buf)
        snprintf(buf + n, sizeof buf - (size_t)n, " x %d replicas", replicas);
    return buf;
}

/* A step's micro-batches on each process: the batch over the data replicas (the processes over
 * pipeline stages and tensor groups), over the micro-batch. */
static int64_t gr_metrics_accum(const gr_metrics_run *run) {
    const int64_t part = (int64_t)GR_MAX(run->stages, 1) * GR_MAX(run->tensor, 1);
    const int64_t replicas = GR_MAX(run->world, 1) / part;
    return run->batch / (run->micro_batch * GR_MAX(replicas, 1));
}

void gr_metrics_begin(gr_metrics *mx, const gr_metrics_run *run) {
    mx->run = *run;
    snprintf(mx->device_detail, sizeof mx->device_detail, "%s", run->device_detail ? run->device_detail : "");
    mx->run.device_detail = mx->device_detail;
    snprintf(mx->staged_ops, sizeof mx->staged_ops, "%s", run->staged_ops ? run->staged_ops : "");
    mx->run.staged_ops = mx->staged_ops;
    char threads[32] = "";
    if (run->threads > 0) snprintf(threads, sizeof threads, " (%d thread%s)", run->threads, run->threads == 1 ? "" : "s");
    if (!mx->quiet)
        printf("gpurun: %s on %s%s: %lld parameters, %lld steps (%lld per epoch), batch %lld = %lld x %lld "
               "micro-batches%s, run dir %s\n", run->name, run->device, threads, (long long)run->params,
               (long long)run->total, (long long)run->spe, (long long)run->batch,
               (long long)gr_metrics_accum(run),
               (long long)run->micro_batch, gr_metrics_world_str(run->world, run->stages, run->tensor), run->run_dir);
    mx->t0 = mx->t_window = gr_now();
    mx->wait_window = 0.0;
    mx->steps_window = 0;
    mx->eval_s = 0.0;
    mx->comm_s = 0.0;
}

void gr_metrics_data_skipped(gr_metrics *mx, const struct gr_batch *b) {
    if (!b->skipped) return;
    const int64_t before = mx->data_skipped;
    mx->data_skipped += b->skipped;
    if (before >= 10) return;
    fprintf(stderr, "gpurun: data.on_error skip: %s%s\n", b->skip_first.msg,
            b->skipped > 1 ? " (and others of this batch)" : "");
    if (mx->data_skipped >= 10) fprintf(stderr, "gpurun: data.on_error skip: further skipped samples are counted "
                                        "in summary.json's data_skipped, not said\n");
}

double gr_metrics_time_s(const gr_metrics *mx) { return mx->rec.time0 + (gr_now() - mx->t0); }

void gr_metrics_loss(gr_metrics *mx, double loss) {
    mx->rec.loss_window += loss;
    mx->rec.loss_n++;
    mx->steps_window++;
}

bool gr_metrics_due(const gr_metrics *mx, int64_t step) {
    return step % mx->run.log_every == 0 || step == mx->run.total;
}

static void gr_fmt_duration(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
}

gr_status gr_metrics_step(gr_metrics *mx, int64_t step, double lr, double loss_scale, double data_wait_s,
                          gr_error *err) {
    const gr_metrics_run *r = &mx->run;
    const double epoch = (double)step / (double)r->spe;
    const double loss = mx->rec.loss_window / (double)mx->rec.loss_n;
    mx->rec.last_loss = loss; /* the final train loss is the last line's: one figure everywhere */
    double now = gr_now();
    double sps = (double)(mx->steps_window * r->batch) / (now - mx->t_window);
    double wait_pct = 100.0 * (data_wait_s - mx->wait_window) / (now - mx->t_window);
    mx->wait_window = data_wait_s;
    mx->windows++;
    mx->window_wait_pct = wait_pct;
    double eta = (now - mx->t0) / (double)(step - r->start) * (double)(r->total - step);
    if (mx->off) { /* another rank writes the line */
        mx->t_window = now;
        mx->rec.loss_window = 0.0;
        mx->rec.loss_n = 0;
        mx->steps_window = 0;
        return GR_OK;
    }
    gr_json js;
    gr_json_begin(&js);
    gr_json_str(&js, "kind", "train");
    gr_json_int(&js, "step", step);
    gr_json_num(&js, "epoch", epoch);
    gr_json_num(&js, "loss", loss);
    gr_json_num(&js, "lr", lr);
    gr_json_num(&js, "samples_per_s", sps);
    gr_json_num(&js, "loss_scale", loss_scale);
    gr_json_num(&js, "time_s", mx->rec.time0 + (now - mx->t0));
    gr_json_num(&js, "data_wait_pct", wait_pct);
    gr_health_sample(&mx->health, &js);
    fprintf(mx->jsonl, "%s\n", gr_json_end(&js));
    gr_status st = gr_rundir_flush(mx->jsonl, mx->path, err);
    if (st) return st;
    if (mx->tb) {
        double t = gr_tfevents_wall_time();
        gr_tfevents_scalar(mx->tb, "train/loss", step, t, (float)loss);
        gr_tfevents_scalar(mx->tb, "train/lr", step, t, (float)lr);
        gr_tfevents_scalar(mx->tb, "train/samples_per_s", step, t, (float)sps);
        if ((st = gr_tfevents_flush(mx->tb, err))) return st; /* live in TensorBoard, like metrics.jsonl */
    }
    if (!mx->quiet) {
        char etab[32];
        gr_fmt_duration(eta, etab, sizeof etab);
        printf("step %lld/%lld  epoch %.2f/%lld  loss %.4f  lr %.4g  %.0f samples/s  data wait %.1f%%  "
               "ETA %s\n", (long long)step, (long long)r->total, epoch,
               (long long)((r->total + r->spe - 1) / r->spe), loss, lr, sps, wait_pct, etab);
        fflush(stdout);
    }
    mx->t_window = now;
    mx->rec.loss_window = 0.0;
    mx->rec.loss_n = 0;
    mx->steps_window = 0;
    return GR_OK;
}

gr_status gr_metrics_eval(gr_metrics *mx, int64_t step, const gr_eval *e, gr_error *err) {
    const double epoch = (double)step / (double)mx->run.spe;
    /* the record (checkpoints, summary.json) keeps the top-1 accuracy, when the job measures it */
    double acc = NAN;
    for (int i = 0; i < e->n_metrics; i++)
        if (strcmp(e->name[i], "accuracy") == 0) acc = e->metric[i];
    mx->rec.last_vloss = e->loss;
    mx->rec.last_acc = acc;
    if (isnan(mx->rec.best_acc) || acc > mx->rec.best_acc) mx->rec.best_acc = acc;
    if (mx->off) return GR_OK;
    gr_json js;
    gr_json_begin(&js);
    gr_json_str(&js, "kind", "eval");
    gr_json_str(&js, "split", "val");
    gr_json_int(&js, "step", step);
    gr_json_num(&js, "epoch", epoch);
    gr_json_num(&js, "loss", e->loss);
    for (int i = 0; i < e->n_metrics; i++) gr_json_num(&js, e->name[i], e->metric[i]);
    fprintf(mx->jsonl, "%s\n", gr_json_end(&js));
    gr_status st = gr_rundir_flush(mx->jsonl, mx->path, err);
    if (mx->tb) {
        double t = gr_tfevents_wall_time();
        gr_tfevents_scalar(mx->tb, "val/loss", step, t, (float)e->loss);
        for (int i = 0; i < e->n_metrics; i++) {
            char tag[48];
            snprintf(tag, sizeof tag, "val/%s", e->name[i]);
            gr_tfevents_scalar(mx->tb, tag, step, t, (float)e->metric[i]);
        }
    }
    if (!mx->quiet) {
        printf("eval  step %lld  epoch %.2f  val loss %.4f", (long long)step, epoch, e->loss);
        for (int i = 0; i < e->n_metrics; i++) printf("  %s %.4f", e->name[i], e->metric[i]);
        printf("\n");
    }
    return st;
}

void gr_metrics_eval_time(gr_metrics *mx, double seconds) {
    mx->t_window += seconds;
    mx->eval_s += seconds;
}

gr_status gr_metrics_flush(gr_metrics *mx, gr_error *err) { return mx->tb ? gr_tfevents_flush(mx->tb, err) : GR_OK; }

/* ---- the end ---- */

static void gr_write_line_cb(FILE *f, const void *text) { fprintf(f, "%s\n", (const char *)text); }

/* gr_metrics_summary under write_mu. */
static gr_status gr_metrics_summary_write(gr_metrics *mx, const char *status, int64_t steps, double loss_scale,
                                          int64_t skipped_steps, double data_wait_s, gr_error *err) {
    const gr_metrics_run *r = &mx->run;
    const gr_record *rec = &mx->rec;
    const double wall = mx->wall_s = gr_now() - mx->t0, eval_s = mx->eval_s;
    if (mx->off) return GR_OK;
    gr_json js;
    gr_json_begin(&js);
    gr_json_str(&js, "status", status);
    gr_json_int(&js, "exit_code", mx->exit_code);
    if (mx->exit_code && mx->error) gr_json_str(&js, "error", mx->error);
    gr_json_str(&js, "name", r->name);
    gr_json_str(&js, "device", r->device);
    gr_json_str(&js, "device_detail", r->device_detail);
    if (r->threads > 0) gr_json_int(&js, "threads", r->threads);
    else gr_json_raw(&js, "threads", "null");
    gr_json_str(&js, "half_staged_ops", r->staged_ops);
    gr_json_int(&js, "steps", steps);
    gr_json_num(&js, "epochs", (double)steps / (double)r->spe);
    gr_json_num(&js, "wall_s", wall);
    /* this process's steps over its time (a resumed run's earlier steps are not in wall) */
    const double samples = (double)((steps - r->start) * r->batch);
    gr_json_int(&js, "start_step", r->start);
    gr_json_num(&js, "samples_per_s", samples / (wall > 0 ? wall : 1));
    gr_json_num(&js, "eval_s", eval_s);
    const double train_sps = samples / (wall - eval_s > 0 ? wall - eval_s : 1);
    gr_json_num(&js, "train_samples_per_s", train_sps);
    gr_json_int(&js, "train_flops_per_sample", r->flops); /* forward + backward, as `gpurun plan` counts them */
    gr_json_num(&js, "train_gflops", train_sps * (double)r->flops / 1e9);
    gr_json_num(&js, "final_train_loss", rec->last_loss);
    gr_json_num(&js, "best_val_accuracy", rec->best_acc);
    gr_json_num(&js, "last_val_accuracy", rec->last_acc);
    gr_json_str(&js, "precision", r->precision);
    gr_json_num(&js, "loss_scale", loss_scale);
    gr_json_int(&js, "skipped_steps", skipped_steps);
    gr_json_num(&js, "last_val_loss", rec->last_vloss);
    gr_json_int(&js, "params", r->params);
    gr_json_num(&js, "data_wait_s", data_wait_s);
    gr_json_num(&js, "data_wait_pct", wall - eval_s > 0 ? 100.0 * data_wait_s / (wall - eval_s) : 0.0);
    gr_json_int(&js, "data_skipped", mx->data_skipped);
    gr_json_int(&js, "world_size", r->world > 1 ? r->world : 1);
    gr_json_num(&js, "comm_s", mx->comm_s);
    gr_json_int(&js, "grad_buckets", mx->grad_buckets);
    if (mx->pipe.stages > 1) {
        gr_json_int(&js, "pipeline_stages", mx->pipe.stages);
        gr_json_int(&js, "pipeline_microbatches", mx->pipe.microbatches);
        gr_json_str(&js, "pipeline_schedule", mx->pipe.schedule);
        gr_json_num(&js, "pipeline_idle_pct", mx->pipe.idle >= 0 ? 100.0 * mx->pipe.idle : NAN);
        gr_json_num(&js, "pipeline_predicted_idle_pct", 100.0 * mx->pipe.predicted);
        gr_json_int(&js, "pipeline_in_flight", mx->pipe.in_flight);
        gr_json_int(&js, "pipeline_activation_bytes", (int64_t)mx->pipe.act_bytes);
    }
    /* the planner's bytes next to what the process held at most (on the CPU they are in it, with the data
     * cache, the loader's batches, the libraries and their workspaces) */
    struct rusage ru;
    gr_json_int(&js, "planned_bytes", (int64_t)mx->planned_bytes);
    gr_json_int(&js, "device_peak_bytes", (int64_t)mx->device_peak_bytes);
    gr_json_int(&js, "planned_host_bytes", (int64_t)mx->planned_host_bytes);
    gr_json_int(&js, "peak_rss_bytes", getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_maxrss * 1024 : -1);
    gr_health_summary(&mx->health, &js);
    gr_status st = gr_rundir_write_file(r->run_dir, "summary.json", gr_write_line_cb, gr_json_end(&js), err);
    mx->summarized = st == GR_OK;
    gr_error e2;
    gr_status st2 = gr_metrics_flush(mx, &e2);
    if (!st && st2) {
        st = st2;
        *err = e2;
    }
    return st;
}

gr_status gr_metrics_summary(gr_metrics *mx, const char *status, int64_t steps, double loss_scale,
                             int64_t skipped_steps, double data_wait_s, gr_error *err) {
    pthread_mutex_lock(&mx->write_mu);
    gr_status st = GR_OK;
    if (!mx->sealed) st = gr_metrics_summary_write(mx, status, steps, loss_scale, skipped_steps, data_wait_s, err);
    pthread_mutex_unlock(&mx->write_mu);
    return st;
}

void gr_metrics_summary_last(gr_metrics *mx, const char *status, int exit_code, const char *error, int64_t steps,
                             double loss_scale, int64_t skipped_steps, double data_wait_s) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    if (pthread_mutex_timedlock(&mx->write_mu, &until) != 0) return; /* a write stuck on its storage */
    if (!mx->sealed && !mx->summarized) {
        mx->exit_code = exit_code;
        mx->error = error;
        gr_error e;
        (void)gr_metrics_summary_write(mx, status, steps, loss_scale, skipped_steps, data_wait_s, &e);
    }
    mx->sealed = true;
    pthread_mutex_unlock(&mx->write_mu);
}

/* gr_metrics_running under write_mu. */
static gr_status gr_metrics_running_write(gr_metrics *mx, int64_t committed_step, gr_error *err) {
    gr_json js;
    gr_json_begin(&js);
    gr_json_str(&js, "status", "running");
    gr_json_int(&js, "exit_code", 0);
    gr_json_str(&js, "name", mx->run.name);
    gr_json_int(&js, "steps", committed_step);
    gr_json_int(&js, "start_step", mx->run.start);
    gr_json_int(&js, "pid", (int64_t)getpid());
    return gr_rundir_write_file(mx->run.run_dir, "summary.json", gr_write_line_cb, gr_json_end(&js), err);
}

gr_status gr_metrics_running(gr_metrics *mx, int64_t committed_step, gr_error *err) {
    if (mx->off) return GR_OK;
    pthread_mutex_lock(&mx->write_mu);
    gr_status st = mx->sealed ? GR_OK : gr_metrics_running_write(mx, committed_step, err);
    pthread_mutex_unlock(&mx->write_mu);
    return st;
}

void gr_metrics_done(const gr_metrics *mx, int64_t steps) {
    if (mx->quiet) return;
    const int64_t start = mx->run.start;
    if (start > 0 && steps == start) /* resumed at the end (killed before its summary): nothing trained */
        printf("done: this attempt trained no step (the checkpoint was the run's last); the run %lld steps in %.1f s; ",
               (long long)steps, mx->rec.time0 + mx->wall_s);
    else if (start > 0) /* a resumed attempt: its own steps and time, then the run's */
        printf("done: this attempt %lld steps (%lld-%lld) in %.1f s; the run %lld steps in %.1f s; ",
               (long long)(steps - start), (long long)start + 1, (long long)steps, mx->wall_s, (long long)steps,
               mx->rec.time0 + mx->wall_s);
    else
        printf("done: %lld steps in %.1f s; ", (long long)steps, mx->wall_s);
    printf("final train loss %.4f (the last train line's), ", mx->rec.last_loss);
    if (isnan(mx->rec.last_acc) && !isnan(mx->rec.last_vloss)) /* a job without the accuracy metric */
        printf("val loss %.4f\n", mx->rec.last_vloss);
    else
        printf("val accuracy %.4f (best %.4f)\n", mx->rec.last_acc, mx->rec.best_acc);
}
