/* saver.c — the background checkpoint writer (saver.h). */
#include "saver.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/env.h"

struct gr_saver {
    char *dir;
    int keep;
    gr_ckpt_state state;
    gr_ckpt_header h;
    pthread_t thread;
    bool running;         /* a thread was started and not joined */
    bool done;            /* it finished; st/err not reported yet */
    pthread_mutex_t mu;
    gr_status st;
    gr_error err;
    double last_s;
    int slots;
    /* deferred snapshot (CPU backend): the thread copies these first */
    const float *src_params, *src_optim;
    bool copying;
    pthread_cond_t copied;
};

gr_status gr_saver_new(const char *dir, int keep, const gr_graph *g, int optim_slots, gr_saver **out,
                       gr_error *err) {
    const size_t pb = (size_t)(g->n_params ? g->n_params : 1) * sizeof(float);
    const size_t ob = (size_t)(optim_slots * g->n_trainable + 1) * sizeof(float);
    float *params = malloc(pb), *optim = malloc(ob);
    if (!params || !optim) {
        free(params);
        free(optim);
        size_t av = 0, tot = 0;
        char fr[96] = "";
        if (gr_host_mem_info(&av, &tot)) snprintf(fr, sizeof fr, "; %zu bytes free of %zu", av, tot);
        return gr_error_set(err, GR_ERR_OOM, "out of memory on the host: the checkpoints' copy of the parameters "
                            "and optimizer state needs %zu bytes%s (`gpurun plan` lists the host memory a run "
                            "needs)", pb + ob, fr);
    }
    gr_saver *sv = gr_xcalloc(1, sizeof *sv);
    sv->dir = gr_xstrdup(dir);
    sv->keep = keep;
    sv->state.g = g;
    sv->slots = optim_slots;
    sv->state.params = params;
    sv->state.optim = optim;
    memset(sv->state.params, 0, pb); /* first-touch faults now, not in the first save's stall */
    memset(sv->state.optim, 0, ob);
    pthread_mutex_init(&sv->mu, NULL);
    pthread_cond_init(&sv->copied, NULL);
    *out = sv;
    return GR_OK;
}

double gr_saver_last_s(const gr_saver *sv) { return sv->last_s; }

static void *gr_saver_main(void *arg) {
    gr_saver *sv = arg;
    double t0 = gr_now();
    if (sv->src_params) {
        const gr_graph *g = sv->state.g;
        memcpy(sv->state.params, sv->src_params, (size_t)g->n_trainable * sizeof(float));
        if (sv->slots)
            memcpy(sv->state.optim, sv->src_optim, (size_t)sv->slots * (size_t)g->n_trainable * sizeof(float));
        pthread_mutex_lock(&sv->mu);
        sv->src_params = sv->src_optim = NULL;
        sv->copying = false;
        pthread_cond_broadcast(&sv->copied);
        pthread_mutex_unlock(&sv->mu);
    }
    gr_error e = {0};
    const int64_t delay_ms = gr_env_int(GR_ENV_SAVE_DELAY_MS, 0); /* tests: a slow save */
    if (delay_ms > 0) nanosleep(&(struct timespec){delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L}, NULL);
    gr_status st = gr_ckpt_save(sv->dir, &sv->h, &sv->state, sv->keep, &e);
    pthread_mutex_lock(&sv->mu);
    sv->st = st;
    sv->err = e;
    sv->done = true;
    sv->last_s = gr_now() - t0;
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

void gr_saver_start(gr_saver *sv, const gr_ckpt_header *h) {
    GR_ASSERT(!sv->running);
    free(sv->h.spec);
    sv->h = *h;
    sv->h.spec = gr_xstrdup(h->spec ? h->spec : "");
    sv->done = false;
    /* the writer takes no signals: they are the training loop's */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&sv->thread, NULL, gr_saver_main, sv);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) { /* no thread: write in this one */
        gr_saver_main(sv);
        return;
    }
    sv->running = true;
}

gr_status gr_saver_wait(gr_saver *sv, gr_error *err) {
    if (sv->running) {
        pthread_join(sv->thread, NULL);
        sv->running = false;
    }
    if (!sv->done) return GR_OK;
    sv->done = false;
    if (sv->st) *err = sv->err;
    return sv->st;
}

bool gr_saver_poll(gr_saver *sv, gr_status *st, gr_error *err) {
    pthread_mutex_lock(&sv->mu);
    bool done = sv->done;
    pthread_mutex_unlock(&sv->mu);
    if (!done) return false;
    *st = gr_saver_wait(sv, err);
    return true;
}

void gr_saver_wait_copied(gr_saver *sv) {
    if (!sv) return; /* no saver: a rank that does not write checkpoints */
    pthread_mutex_lock(&sv->mu);
    while (sv->copying) pthread_cond_wait(&sv->copied, &sv->mu);
    pthread_mutex_unlock(&sv->mu);
}

gr_status gr_saver_snapshot(gr_saver *sv, gr_backend *be, const float *params, const float *optim,
                            const gr_ckpt_header *h, gr_error *err) {
    gr_status st = gr_saver_wait(sv, err);
    const gr_graph *g = sv->state.g;
    const size_t nt = (size_t)g->n_trainable, np = (size_t)g->n_params;
    if (gr_backend_host_addressable(be)) {
        memcpy(sv->state.params + nt, params + nt, (np - nt) * sizeof(float)); /* the state, now */
        sv->src_params = params;
        sv->src_optim = optim;
        sv->copying = true;
    } else {
        gr_backend_download(be, sv->state.params, params, np * sizeof(float));
        if (sv->slots) gr_backend_download(be, sv->state.optim, optim, (size_t)sv->slots * nt * sizeof(float));
    }
    gr_saver_start(sv, h);
    return st;
}

void gr_saver_free(gr_saver *sv) {
    if (!sv) return;
    gr_error e;
    (void)gr_saver_wait(sv, &e);
    pthread_cond_destroy(&sv->copied);
    pthread_mutex_destroy(&sv->mu);
    free(sv->h.spec);
    free(sv->state.params);
    free(sv->state.optim);
    free(sv->dir);
    free(sv);
}
