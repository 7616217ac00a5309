/* decode.c — data.decode (DESIGN 1.4): who decodes an encoded split's JPEGs
 * (see job.h). Decided once per job: the key checked against the data and
 * the device named in the spec when the job compiles (gr_job_decode_check),
 * then against the backend the job got (gr_job_decode_setup), which says the
 * path on stderr. On the GPU the loader ships bytes (encoded_payload) and
 * each batch is decoded into the plan's input by the backend's image
 * decoder (gr_job_decode_batch), in place of the upload of x; the samples
 * it gives back, and PNGs, are decoded on the host and their rows uploaded,
 * said once. */
#include "job.h"

#include <stdlib.h>
#include <string.h>

#include "../config/schema.h"

static bool gr_decode_encoded(const gr_job *j) { return j->train_ds && gr_dataset_encoded(j->train_ds); }

gr_status gr_job_decode_check(const gr_job *j, gr_error *err) {
    const gr_job_spec *s = j->spec;
    if (strcmp(s->data.decode, "gpu") != 0) return GR_OK;
    if (!gr_decode_encoded(j))
        return gr_spec_error(err, s, "data.decode", "gpu decodes an encoded image split's JPEGs on the GPU, and %s: %s "
                             "is not one (%s): set data.decode: auto or cpu", s->data.train.path,
                             s->data.train.group, j->byname ? "its datasets are read as a table" : "it stores pixels");
    if (!strcmp(s->device, "cpu"))
        return gr_spec_error(err, s, "data.decode", "gpu needs a CUDA device, and device is cpu: set data.decode: "
                             "auto or cpu, or device: cuda");
    return GR_OK;
}

gr_status gr_job_decode_setup(gr_job *j, bool quiet, gr_error *err) {
    const gr_job_spec *s = j->spec;
    j->decode_gpu = false;
    if (!gr_decode_encoded(j)) return GR_OK;
    const bool say = j->dp.comm.rank == 0, cuda = !strcmp(gr_backend_name(j->be), "cuda");
    const char *want = s->data.decode;
    if (!strcmp(want, "gpu") && !cuda)
        return gr_spec_error(err, s, "data.decode", "gpu needs a CUDA device, and this job runs on the %s (device: "
                             "%s): set data.decode: auto or cpu", gr_backend_name(j->be), s->device);
    char desc[640];
    gr_error e = {0};
    if (!strcmp(want, "cpu") || !cuda || gr_backend_decoder_open(j->be, desc, sizeof desc, &e) != GR_OK) {
        if (e.msg[0] && say) /* a fall-back: said even with --quiet */
            fprintf(stderr, "gpurun: data.decode %s: decoding JPEGs on the host (%lld loader workers) instead of "
                    "the GPU: %s\n", want, (long long)gr_job_data_workers(j, NULL), e.msg);
        else if (!quiet && say)
            fprintf(stderr, "gpurun: data: decoding JPEGs on the host (%lld loader workers)%s\n",
                    (long long)gr_job_data_workers(j, NULL), strcmp(want, "cpu") ? "" : " (data.decode cpu)");
        return GR_OK;
    }
    j->decode_gpu = true;
    free(j->decode_need);
    j->decode_need = gr_xcalloc((size_t)GR_MAX(j->g.micro_batch, 1), 1);
    if (!quiet && say) fprintf(stderr, "gpurun: data: decoding JPEGs on %s\n", desc);
    (void)err;
    return GR_OK;
}

gr_status gr_job_decode_batch(gr_job *j, gr_plan *p, gr_loader *ld, gr_batch *b, gr_error *err) {
    if (!b->enc) return GR_OK;
    const gr_graph *g = p->g;
    const int64_t per = gr_tensor_sample_numel(&g->tensors[g->input]);
    GR_ASSERT(j->decode_gpu && per == 3 * b->enc->size * b->enc->size && b->n <= g->micro_batch);
    float *dst = gr_plan_ptr(p, g->input);
    char why[256];
    gr_status st = gr_backend_decode_images(j->be, b->enc, dst, j->decode_need, why, sizeof why, err);
    if (st != GR_OK) return st;
    int64_t png = 0, refused = 0;
    for (int64_t i = 0; i < b->n; i++) {
        if (!b->enc->s[i].host && !j->decode_need[i]) continue;
        if (j->decode_need[i] && (st = gr_loader_decode_host(ld, b, i, err)) != GR_OK) return st;
        png += b->enc->s[i].host, refused += j->decode_need[i];
        /* after the decode's kernel on the copy stream, disjoint rows */
        gr_backend_upload_batch(j->be, dst + i * per, b->x + i * per, (size_t)per * sizeof(float));
    }
    if (j->dp.comm.rank == 0 && png && !j->decode_said_png) {
        j->decode_said_png = true;
        fprintf(stderr, "gpurun: data.decode gpu: a batch holds %lld PNG sample%s (nvJPEG decodes JPEG only): decoded "
                "on the host and uploaded (said once)\n", (long long)png, png == 1 ? "" : "s");
    }
    if (j->dp.comm.rank == 0 && refused && !j->decode_said_refused) {
        j->decode_said_refused = true;
        fprintf(stderr, "gpurun: data.decode gpu: %lld JPEG%s of a batch decoded on the host instead: %s (said "
                "once)\n", (long long)refused, refused == 1 ? "" : "s", why);
    }
    b->enc->decoded = true;
    return GR_OK;
}
