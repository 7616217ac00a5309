/* test_comm.c — data parallelism's pieces that need no second process:
 *   - gr_comm_detect: rank, world, local rank and launcher from Open MPI's,
 *     Slurm's and PMI's environment variables, in that order of preference;
 *     an sbatch script's own shell (SLURM_NTASKS without SLURM_STEP_ID) and
 *     malformed values are not a launch; nothing set is rank 0 of 1;
 *   - one process: gr_comm_open(none) and every collective leave the
 *     buffers as they are; reduce-scatter and all-gather copy send to
 *     recv (all-gather in place too); a send or receive is refused
 *     (GR_ERR_USAGE naming the operation and the peer: itself, or a rank
 *     that is not there), as is a negative color;
 *     gr_comm_split gives rank 0 of 1, on which all of these work, and
 *     gr_comm_free releases it (tests/comm_mpi.sh runs them on 2 and 3
 *     processes: tests/test_comm_mpi.c);
 *   - the gradient buckets (runner/buckets.c) of a real train plan: they
 *     tile the grads arena from 0 to n_trainable without gaps or overlaps,
 *     hold about bucket_mb each (a small size makes several, a large one
 *     one), and each is started after the last plan step that writes a
 *     gradient inside it, never before: checked against the steps' own
 *     outputs;
 *   - gr_parallel_resolve: parallel.data against the world, the per-rank
 *     micro-batch default and the batch divisibility error (exit 2, naming
 *     the key), with the launcher's environment faked (world 2 without
 *     joining MPI is refused before MPI is touched, so only the errors are
 *     driven here; tests/e2e_parallel.sh runs real launches). */
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "dist/comm.h"
#include "config/spec.h"
#include "dist/buckets.h"
#include "runner/parallel.h"

static const char *const launch_vars[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_NTASKS", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_STEP_ID", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"};

static void clear_launch(void) {
    for (size_t i = 0; i < GR_ARRAY_LEN(launch_vars); i++) unsetenv(launch_vars[i]);
}

static void test_detect(void) {
    gr_comm c;
    clear_launch();
    gr_comm_detect(&c);
    CHECK(c.rank == 0 && c.world == 1 && c.local_rank == 0 && c.launcher[0] == '\0');

    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("SLURM_NTASKS", "8", 1); /* Open MPI's wins */
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_STEP_ID", "0", 1);
    gr_comm_detect(&c);
    CHECK(c.rank == 3 && c.world == 4 && c.local_rank == 1 && !strcmp(c.launcher, "Open MPI"));

    clear_launch();
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_LOCALID", "2", 1);
    gr_comm_detect(&c); /* sbatch's shell: no step, no launch */
    CHECK(c.world == 1 && c.rank == 0 && c.launcher[0] == '\0');
    setenv("SLURM_STEP_ID", "0", 1);
    gr_comm_detect(&c);
    CHECK(c.rank == 5 && c.world == 8 && c.local_rank == 2 && !strcmp(c.launcher, "Slurm"));

    clear_launch();
    setenv("PMI_SIZE", "2", 1);
    setenv("PMI_RANK", "1", 1);
    gr_comm_detect(&c);
    CHECK(c.rank == 1 && c.world == 2 && !strcmp(c.launcher, "PMI"));
    setenv("PMI_SIZE", "two", 1); /* malformed: not a launch */
    gr_comm_detect(&c);
    CHECK(c.world == 1 && c.launcher[0] == '\0');
    clear_launch();
}

static void test_one_process(void) {
    gr_comm c;
    gr_error err;
    clear_launch();
    gr_comm_detect(&c);
    CHECK(gr_comm_open(&c, GR_COMM_NONE, &err) == GR_OK);
    float f[3] = {1.5f, -2.0f, 3.0f};
    double d[2] = {0.25, 8.0};
    int v = 7;
    CHECK(gr_comm_sum_f32(&c, f, 3, "t", &err) == GR_OK && f[0] == 1.5f && f[1] == -2.0f && f[2] == 3.0f);
    CHECK(gr_comm_sum_f64(&c, d, 2, "t", &err) == GR_OK && d[0] == 0.25 && d[1] == 8.0);
    CHECK(gr_comm_max_int(&c, &v, "t", &err) == GR_OK && v == 7);
    CHECK(gr_comm_isum_f32(&c, f, 3, "t", &err) == GR_OK && gr_comm_wait_all(&c, &err) == GR_OK && f[1] == -2.0f);
#ifdef GR_HAVE_NCCL
    CHECK(gr_comm_built(GR_COMM_NONE) && gr_comm_built(GR_COMM_NCCL));
#else
    CHECK(gr_comm_built(GR_COMM_NONE) && !gr_comm_built(GR_COMM_NCCL));
#endif
    gr_comm_close(&c, 0);
}

/* every operation of comm.h on a world of 1 (c, opened) */
static void check_world1_ops(gr_comm *c) {
    gr_error err;
    float send[4] = {1.5f, -2.0f, 3.0f, 0.25f}, recv[4] = {0}, all[4] = {9.0f, 8.0f, 7.0f, 6.0f};
    CHECK(gr_comm_reduce_scatter_f32(c, send, recv, 4, "t", &err) == GR_OK && !memcmp(send, recv, sizeof send));
    memset(recv, 0, sizeof recv);
    CHECK(gr_comm_all_gather_f32(c, send, recv, 3, "t", &err) == GR_OK && !memcmp(send, recv, 3 * sizeof *recv) &&
          recv[3] == 0.0f);
    CHECK(gr_comm_all_gather_f32(c, all, all, 4, "t", &err) == GR_OK && all[0] == 9.0f && all[3] == 6.0f);
    CHECK(gr_comm_send_f32(c, send, 4, 0, 1, "a shard", &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "send (a shard): peer rank 0 is this rank");
    CHECK(gr_comm_recv_f32(c, recv, 4, 1, 1, "a shard", &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "receive (a shard): peer rank 1 is not a rank of this communicator (0..0)");
    CHECK(gr_comm_isend_f32(c, send, 4, -1, 1, "t", &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "started send (t): peer rank -1 is not a rank");
    CHECK(gr_comm_irecv_f32(c, recv, 4, 0, 1, "t", &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "started receive (t): peer rank 0 is this rank");
    CHECK(gr_comm_wait_all(c, &err) == GR_OK); /* nothing was started */
    double d = 2.5;
    int v = -3;
    CHECK(gr_comm_sum_f32(c, send, 4, "t", &err) == GR_OK && send[1] == -2.0f);
    CHECK(gr_comm_sum_f64(c, &d, 1, "t", &err) == GR_OK && d == 2.5);
    CHECK(gr_comm_isum_f32(c, send, 4, "t", &err) == GR_OK && gr_comm_wait_all(c, &err) == GR_OK && send[3] == 0.25f);
    CHECK(gr_comm_bcast_f32(c, send, 4, "t", &err) == GR_OK && send[0] == 1.5f);
    CHECK(gr_comm_max_int(c, &v, "t", &err) == GR_OK && v == -3);
}

static void test_one_process_more(void) {
    gr_comm c, sub, again;
    gr_error err;
    clear_launch();
    gr_comm_detect(&c);
    CHECK(gr_comm_open(&c, GR_COMM_NONE, &err) == GR_OK);
    check_world1_ops(&c);
    CHECK(gr_comm_split(&c, -1, 0, &sub, &err) == GR_ERR_USAGE && sub.world == 1 && !sub.sub);
    CHECK_STR_CONTAINS(err.msg, "color -1 (key 0) is negative");
    CHECK(gr_comm_split(&c, 5, 7, &sub, &err) == GR_OK);
    CHECK(sub.sub && sub.rank == 0 && sub.world == 1 && sub.kind == GR_COMM_NONE && !sub.nccl);
    check_world1_ops(&sub);
    CHECK(gr_comm_split(&sub, 0, 0, &again, &err) == GR_OK && again.rank == 0 && again.world == 1); /* of a sub */
    check_world1_ops(&again);
    gr_comm_free(&again);
    gr_comm_free(&sub);
    CHECK(!sub.sub && sub.world == 1);
    gr_comm_free(&c); /* the world: left as it is */
    CHECK(c.world == 1 && !c.sub);
    gr_comm_close(&c, 0);
}

/* ---- buckets of a real train plan ---- */

static const char *const mlp_spec =
    "name: t\n"
    "data: {train: {path: none.h5}}\n"
    "model: {layers: [flatten, {dense: {units: 300}}, relu, {dense: {units: 200}}, relu, {dense: {units: 10}}]}\n"
    "train: {batch_size: 8, steps: 1, optimizer: {type: sgd, lr: 0.1}}\n";

typedef struct buck_fix {
    gr_job_spec s;
    gr_graph g;
    gr_backend *be;
    gr_model m;
    gr_plan p;
} buck_fix;

static bool buck_fix_init(buck_fix *f) {
    memset(f, 0, sizeof *f);
    gr_error err;
    char path[] = GR_TEST_TMP "/comm_spec.yaml";
    FILE *fp = fopen(path, "w");
    if (!fp) return false;
    fputs(mlp_spec, fp);
    fclose(fp);
    int64_t shape[3] = {1, 12, 12};
    bool ok = gr_spec_load(path, NULL, 0, &f->s, &err) == GR_OK && gr_graph_build(&f->s, shape, 3, &f->g, &err) == GR_OK;
    CHECK_MSG(ok, "%s", err.msg);
    if (!ok) return false;
    gr_autodiff(&f->g, false);
    ok = gr_backend_create("cpu", 1, &f->be, &err) == GR_OK && gr_model_init(&f->m, &f->g, f->be, 0, &err) == GR_OK &&
         gr_plan_compile(&f->p, &f->m, &f->g, GR_PLAN_TRAIN, true, &err) == GR_OK;
    CHECK_MSG(ok, "%s", err.msg);
    return ok;
}

static void buck_fix_free(buck_fix *f) {
    gr_plan_free(&f->p);
    gr_model_free(&f->m);
    gr_backend_free(f->be);
    gr_graph_free(&f->g);
    gr_spec_free(&f->s);
}

/* The buckets of bucket_mb MiB over the plan's gradients: how many, their
 * ranges and the step each is started after (gr_buckets_get). */
static void test_buckets(double mb, int want_min, int want_max) {
    buck_fix f;
    if (!buck_fix_init(&f)) return;
    gr_comm c;
    clear_launch();
    gr_comm_detect(&c);
    gr_buckets *b = gr_buckets_new(&f.p, &c, mb, NULL);
    const int nb = gr_buckets_count(b);
    CHECK_MSG(nb >= want_min && nb <= want_max, "bucket_mb %g: %d buckets, want %d..%d", mb, nb, want_min, want_max);
    /* tiling: bucket i is [lo, hi), the first ends at n_trainable, each starts where the next ends, the last at 0 */
    int64_t lo, hi, prev_lo = f.g.n_trainable;
    int ready;
    bool tiles = true, sized = true, timely = true;
    const int64_t cap = (int64_t)(mb * 1048576.0 / 4);
    for (int i = 0; i < nb; i++) {
        gr_buckets_get(b, i, &lo, &hi, &ready);
        tiles = tiles && hi == prev_lo && lo < hi;
        prev_lo = lo;
        /* every bucket but the last (lowest) reaches cap with its last range; none is over cap by more than a range */
        if (i < nb - 1) sized = sized && hi - lo >= cap;
        /* ready: the last step writing a gradient in [lo, hi) */
        int last = -1;
        for (int s = 0; s < f.p.steps.n; s++) {
            const gr_kargs *a = &f.p.steps.step[s];
            for (int k = 0; k < a->node->nout; k++) {
                const gr_tensor *t = a->tout[k];
                if (t->kind != GR_TK_GRAD) continue;
                int64_t o = t->param_offset, e = o + gr_tensor_numel(t);
                if (o < hi && e > lo) last = s;
            }
        }
        timely = timely && last == ready;
    }
    CHECK_MSG(tiles && prev_lo == 0, "bucket_mb %g: the buckets do not tile [0, %lld)", mb, (long long)f.g.n_trainable);
    CHECK_MSG(sized, "bucket_mb %g: a bucket other than the lowest holds fewer than %lld floats", mb, (long long)cap);
    CHECK_MSG(timely, "bucket_mb %g: a bucket starts before (or long after) its last gradient is written", mb);
    gr_buckets_free(b);
    buck_fix_free(&f);
}

/* ---- resolve: the spec against the launch ---- */

static void test_resolve(void) {
    gr_job_spec s, rs;
    gr_error err;
    gr_comm c;
    char path[] = GR_TEST_TMP "/comm_spec2.yaml";
    FILE *fp = fopen(path, "w");
    if (!fp) return;
    fputs(mlp_spec, fp);
    fclose(fp);
    const char *sets[] = {"train.batch_size=128", "parallel.data=2"};
    if (gr_spec_load(path, sets, 2, &s, &err) != GR_OK) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    clear_launch();
    gr_status st = gr_parallel_resolve(&s, &rs, &c, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "parallel.data: 2 processes asked for, but this one was started as one of 1, without "
                                "a launcher");
    gr_spec_free(&s);

    /* one process: the spec as given (the micro-batch is decided later: memfit.h); a bucket size is kept */
    const char *sets1[] = {"train.batch_size=128"};
    if (gr_spec_load(path, sets1, 1, &s, &err) != GR_OK) return;
    st = gr_parallel_resolve(&s, &rs, &c, &err);
    CHECK(st == GR_OK && c.world == 1 && rs.train.micro_batch == 128 && rs.parallel.bucket_mb == 25);
    gr_comm_close(&c, 0);
    gr_spec_free(&s);
}

int main(void) {
    test_detect();
    test_one_process();
    test_one_process_more();
    /* layers of 43,500, 60,200 and 2,010 floats */
    test_buckets(25.0, 1, 1);      /* the whole 105,710-float model in one */
    test_buckets(0.2, 2, 2);       /* 52,428 floats: the last two layers, then the first */
    test_buckets(0.001, 4, 4);     /* 262 floats: a bucket per layer, the first layer's bias (300) alone */
    test_resolve();
    return gr_test_report();
}
