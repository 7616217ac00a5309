/* test_cuda_comm.c — dist/comm.h's operations beyond the sums on GPU buffers
 * (dist/comm_nccl.c), on a communicator of one process (what one GPU
 * allows: NCCL puts one rank on each GPU). Label `gpu`: exits 77 (skipped)
 * without a device or without NCCL in the build.
 *   - reduce-scatter and all-gather (apart and in place) of device buffers
 *     give send's values, bit for bit;
 *   - a send or receive is refused (GR_ERR_USAGE: the only peer is itself);
 *   - gr_comm_split (ncclCommSplit) gives rank 0 of 1 on the GPUs, on
 *     which the started and blocking sums, the broadcast, reduce-scatter,
 *     all-gather and max leave the values as they were; a started sum on
 *     the world and one on the sub-communicator pending at once each finish
 *     at their own wait; gr_comm_free releases it and the world still
 *     works after. */
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "ops/cuda_cmp.h"

enum { N = 600 };

static void check_ops(gr_backend *be, gr_comm *c, const char *name) {
    gr_error err = {0};
    float h[N], back[2 * N];
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.37f - 100.0f;
    float *d = gr_backend_alloc(be, 2 * sizeof h), *e = d + N;
    gr_backend_upload(be, d, h, sizeof h);
    gr_backend_zero(be, e, sizeof h);
    CHECK_MSG(gr_comm_reduce_scatter_f32(c, d, e, N, "t", &err) == GR_OK, "%s: %s", name, err.msg);
    gr_backend_download(be, back, e, sizeof h);
    CHECK_MSG(memcmp(back, h, sizeof h) == 0, "%s: reduce-scatter of one changed the values", name);
    gr_backend_zero(be, e, sizeof h);
    CHECK_MSG(gr_comm_all_gather_f32(c, d, e, N, "t", &err) == GR_OK, "%s: %s", name, err.msg);
    gr_backend_download(be, back, e, sizeof h);
    CHECK_MSG(memcmp(back, h, sizeof h) == 0, "%s: all-gather of one changed the values", name);
    CHECK(gr_comm_all_gather_f32(c, d, d, N, "t", &err) == GR_OK); /* in place */
    CHECK(gr_comm_isum_f32(c, d, N, "t", &err) == GR_OK && gr_comm_wait_all(c, &err) == GR_OK);
    CHECK(gr_comm_sum_f32(c, d + 10, N - 10, "t", &err) == GR_OK);
    CHECK(gr_comm_bcast_f32(c, d, N, "t", &err) == GR_OK);
    gr_backend_download(be, back, d, sizeof h);
    CHECK_MSG(memcmp(back, h, sizeof h) == 0, "%s: a communicator of one changed the values", name);
    CHECK(gr_comm_send_f32(c, d, N, 0, 0, "t", &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "is this rank");
    CHECK(gr_comm_irecv_f32(c, d, N, 1, 0, "t", &err) == GR_ERR_USAGE);
    int v = 4;
    CHECK(gr_comm_max_int(c, &v, "t", &err) == GR_OK && v == 4);
    CHECK(!gr_comm_gpu_failed(c));
    gr_backend_dealloc(be, d);
}

static void test_split(gr_backend *be) {
    gr_comm c, sub;
    gr_error err = {0};
    gr_comm_detect(&c);
    c.world = 1;
    c.rank = 0;
    gr_status st = gr_comm_open(&c, GR_COMM_NONE, &err);
    if (!st) st = gr_comm_open_gpu(&c, gr_backend_stream(be), &err);
    CHECK_MSG(st == GR_OK && c.nccl, "%s", err.msg);
    if (st) return;
    check_ops(be, &c, "world");
    st = gr_comm_split(&c, 2, 0, &sub, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (!st) {
        CHECK(sub.sub && sub.nccl && sub.rank == 0 && sub.world == 1);
        check_ops(be, &sub, "split");
        float h[4] = {1.0f, 2.0f, 3.0f, 4.0f}, back[4];
        float *d = gr_backend_alloc(be, sizeof h);
        gr_backend_upload(be, d, h, sizeof h);
        CHECK(gr_comm_isum_f32(&c, d, 2, "world's", &err) == GR_OK &&
              gr_comm_isum_f32(&sub, d + 2, 2, "split's", &err) == GR_OK);
        CHECK(gr_comm_wait_all(&sub, &err) == GR_OK && gr_comm_wait_all(&c, &err) == GR_OK);
        gr_backend_download(be, back, d, sizeof h);
        CHECK(memcmp(back, h, sizeof h) == 0);
        gr_backend_dealloc(be, d);
        gr_comm_free(&sub);
        CHECK(!sub.sub && !sub.nccl);
    }
    check_ops(be, &c, "world after the split's free");
    gr_comm_close(&c, 0);
}

int main(void) {
    gr_backend *be = NULL;
    const int skip = gr_cmp_open_nccl(&be);
    if (skip) return skip;
    test_split(be);
    gr_backend_free(be);
    return gr_test_report();
}
