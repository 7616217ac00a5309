/* test_cuda_loader.c — the loader feeding the CUDA backend: batch buffers
 * from the backend's page-locked host memory, the ready hook copying each
 * batch to the device from the worker thread, and the device copies equal
 * to what the plain CPU loader delivers. Label `gpu`: exits 77 (skipped)
 * where no CUDA device is present. */
#include <stdlib.h>
#include <string.h>

#include "dataio/convert.h"
#include "dataio/dataio.h"
#include "gr_test.h"
#include "kernels/backend.h"

#define BATCH 16
#define NBATCH 12

typedef struct hook_ctx {
    gr_backend *be;
    float *dev[4];       /* one device buffer per prefetch slot, found by the batch's x */
    float *host_x[4];
    int calls, allocs, frees;
} hook_ctx;

/* Called at open, on the opening thread, x then y for each slot: the x
 * buffers are recorded so the hook can find a batch's device buffer. */
static void *pinned_alloc(size_t bytes, void *ctx) {
    hook_ctx *h = ctx;
    void *p = gr_backend_host_alloc(h->be, bytes);
    if (h->allocs % 2 == 0 && h->allocs / 2 < 4) h->host_x[h->allocs / 2] = p;
    h->allocs++;
    return p;
}

static void pinned_free(void *p, void *ctx) {
    hook_ctx *h = ctx;
    h->frees++;
    gr_backend_host_free(h->be, p);
}

/* Runs on a worker thread: the device copy of the batch, as the CUDA
 * backend's copy stream will do it. */
static gr_status copy_to_device(gr_batch *b, void *ctx, gr_error *err) {
    hook_ctx *h = ctx;
    (void)err;
    int slot = -1;
    for (int s = 0; s < 4; s++)
        if (h->host_x[s] == b->x) slot = s;
    GR_ASSERT(slot >= 0);
    gr_backend_upload(h->be, h->dev[slot], b->x, (size_t)b->n * 3 * 20 * 20 * sizeof(float));
    b->device = h->dev[slot];
    __atomic_add_fetch(&h->calls, 1, __ATOMIC_SEQ_CST);
    return GR_OK;
}

int main(void) {
    gr_error err = {0};
    gr_backend *cuda = NULL;
    if (gr_backend_create("cuda:0", 0, &cuda, &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    const char *path = GR_TEST_TMP "/cuda_loader.h5";
    gr_synthetic_config sc = {.n = 200, .test = 8, .c = 3, .h = 24, .w = 24, .classes = 10, .seed = 3};
    CHECK(gr_data_convert_synthetic(&sc, path, true, false, &err) == GR_OK);
    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(path, "/train", &ds, &err) == GR_OK);
    if (!ds) return gr_test_report();

    gr_loader_config lc = {.batch = BATCH, .shuffle = true, .drop_last = true, .seed = 7, .world = 1,
                           .n_norm = 1, .mean = {127.5}, .std = {64.0}, .prefetch = 4, .workers = 2};
    lc.aug = (gr_augment){.crop = GR_CROP_RESIZED, .size = 20, .scale = {0.3, 1.0}, .ratio = {0.75, 4.0 / 3.0},
                          .flip = true};
    gr_loader *ref = NULL, *gpu = NULL;
    CHECK(gr_loader_open(ds, &lc, &ref, &err) == GR_OK);

    hook_ctx h = {.be = cuda};
    const size_t xbytes = BATCH * 3 * 20 * 20 * sizeof(float);
    for (int s = 0; s < 4; s++) CHECK((h.dev[s] = gr_backend_alloc(cuda, xbytes)) != NULL);
    lc.host_alloc = pinned_alloc;
    lc.host_free = pinned_free;
    lc.alloc_ctx = &h;
    lc.ready = copy_to_device;
    lc.ready_ctx = &h;
    CHECK(gr_loader_open(ds, &lc, &gpu, &err) == GR_OK);
    CHECK(h.allocs == 2 * 4); /* x and y of each slot */

    float *back = malloc(xbytes);
    int same = 0;
    for (int i = 0; i < NBATCH && ref && gpu; i++) {
        gr_batch *a = NULL, *b = NULL;
        CHECK(gr_loader_next(ref, &a, &err) == GR_OK);
        CHECK(gr_loader_next(gpu, &b, &err) == GR_OK);
        if (!a || !b) break;
        CHECK(b->device != NULL);
        gr_backend_download(cuda, back, b->device, (size_t)b->n * 3 * 20 * 20 * sizeof(float));
        same += a->n == b->n && memcmp(a->x, back, (size_t)a->n * 3 * 20 * 20 * sizeof(float)) == 0 &&
                memcmp(a->y, b->y, (size_t)a->n * sizeof(int32_t)) == 0;
        gr_loader_release(ref, a);
        gr_loader_release(gpu, b);
    }
    CHECK_MSG(same == NBATCH, "%d of %d device batches equal the CPU loader's", same, NBATCH);
    gr_loader_close(gpu);
    gr_loader_close(ref);
    CHECK(h.calls >= NBATCH && h.frees == h.allocs);
    for (int s = 0; s < 4; s++) gr_backend_dealloc(cuda, h.dev[s]);
    free(back);
    gr_dataset_close(ds);
    gr_backend_free(cuda);
    return gr_test_report();
}
