/* test_convert_synthetic.c — unit tests for `gpurun data synthetic`
 * (gr_data_convert_synthetic of dataio/convert.h): shapes and the default
 * test split, chunking and label width, determinism across seeds, thread
 * counts and n, learnability (nearest class mean), the statistics, and the
 * usage errors with nothing written; an output that is not a regular file and
 * a symlink planted at OUT.tmp (issue 23). */
#include "convert_fixture.h"

#include <omp.h>

static void test_synthetic(void) {
    const char *out = tmp_path("syn.h5"), *out2 = tmp_path("syn2.h5"), *out3 = tmp_path("syn3.h5");
    gr_error err = {0};
    remove(out), remove(out2), remove(out3);
    gr_synthetic_config cfg = {.n = 600, .test = -1, .c = 3, .h = 8, .w = 8, .classes = 10, .seed = 5};
    CHECK(gr_data_convert_synthetic(&cfg, out, false, false, &err) == GR_OK);
    CHECK(file_exists(out) && !tmp_exists(out));
    split_data tr, te;
    bool ok = read_split(out, "/train", &tr) & read_split(out, "/test", &te);
    CHECK(ok);
    if (ok) {
        CHECK(tr.n == 600 && te.n == 60); /* default test = ceil(n / 10) */
        CHECK(tr.chw[0] == 3 && tr.chw[1] == 8 && tr.chw[2] == 8);
        int seen[10] = {0}, out_of_range = 0;
        for (int64_t i = 0; i < tr.n; i++) {
            if (tr.y[i] < 0 || tr.y[i] >= 10) out_of_range++;
            else seen[tr.y[i]]++;
        }
        CHECK(out_of_range == 0);
        for (int k = 0; k < 10; k++) CHECK_MSG(seen[k] >= 30, "class %d: %d samples of 600", k, seen[k]);
        /* learnable: nearest class mean (fit on train) on the test split */
        enum { D = 192 };
        static double cm[10][D];
        memset(cm, 0, sizeof cm);
        for (int64_t i = 0; i < tr.n; i++)
            for (int j = 0; j < D; j++) cm[tr.y[i]][j] += tr.x[i * D + j] / seen[tr.y[i]];
        int right = 0;
        for (int64_t i = 0; i < te.n; i++) {
            int best = 0;
            double bd = 1e300;
            for (int k = 0; k < 10; k++) {
                double dist = 0;
                for (int j = 0; j < D; j++) dist += (te.x[i * D + j] - cm[k][j]) * (te.x[i * D + j] - cm[k][j]);
                if (dist < bd) bd = dist, best = k;
            }
            right += best == te.y[i];
        }
        CHECK_MSG(right > 0.9 * (double)te.n, "nearest class mean: %d of %lld right", right, (long long)te.n);
        /* not trivially separable by a constant: pixels vary within a class */
        double lo = 255, hi = 0;
        for (int j = 0; j < D; j++) lo = fmin(lo, tr.x[j]), hi = fmax(hi, tr.x[j]);
        CHECK(hi - lo > 20);
        double want_m[3], want_s[3], m[3], s[3];
        stats_of(&tr, want_m, want_s);
        CHECK(read_attr(out, "/train", "mean", m, 3) == 3 && read_attr(out, "/train", "std", s, 3) == 3);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(m[c], want_m[c], 1e-9, 1e-9);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(s[c], want_s[c], 1e-6, 1e-6);
    }
    int nf;
    size_t lsize;
    CHECK(read_chunk(out, "/train", &nf, &lsize) == 600 && nf == 0 && lsize == 1); /* 600 * 192 B < 1 MiB */

    /* same seed, one thread, another n: the same test split and train prefix */
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    cfg.n = 300;
    cfg.test = 60;
    CHECK(gr_data_convert_synthetic(&cfg, out2, false, false, &err) == GR_OK);
    omp_set_num_threads(threads);
    split_data tr2, te2;
    if (ok && read_split(out2, "/train", &tr2) && read_split(out2, "/test", &te2)) {
        CHECK(tr2.n == 300 && te2.n == 60);
        CHECK(memcmp(te2.x, te.x, 60 * 192 * sizeof(float)) == 0 && memcmp(te2.y, te.y, 60 * sizeof(int32_t)) == 0);
        CHECK(memcmp(tr2.x, tr.x, 300 * 192 * sizeof(float)) == 0 && memcmp(tr2.y, tr.y, 300 * sizeof(int32_t)) == 0);
        split_free(&tr2);
        split_free(&te2);
    }
    /* another seed: other data */
    cfg.seed = 6;
    CHECK(gr_data_convert_synthetic(&cfg, out3, false, false, &err) == GR_OK);
    if (ok && read_split(out3, "/train", &tr2)) {
        int same = 0;
        for (int64_t i = 0; i < 300 * 192; i++) same += tr2.x[i] == tr.x[i];
        CHECK_MSG(same < 300 * 192 / 4, "%d of %d values equal across seeds", same, 300 * 192);
        split_free(&tr2);
    }
    split_free(&tr);
    split_free(&te);
    CHECK(gr_data_convert_synthetic(&cfg, out3, false, false, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "already exists (pass --force to overwrite)");

    /* big samples: one per chunk; > 256 classes: uint16 labels */
    gr_synthetic_config big = {.n = 5, .test = 2, .c = 1, .h = 256, .w = 256, .classes = 300, .seed = 1};
    CHECK(gr_data_convert_synthetic(&big, out3, true, false, &err) == GR_OK);
    CHECK(read_chunk(out3, "/train", &nf, &lsize) == 1 && lsize == 2);
    {
        gr_dataset *ds = NULL;
        CHECK(gr_dataset_open(out3, "/test", &ds, &err) == GR_OK);
        if (ds) {
            CHECK(gr_dataset_len(ds) == 2 && gr_dataset_check_labels(ds, 300, &err) == GR_OK);
            gr_dataset_close(ds);
        }
    }
    remove(out), remove(out2), remove(out3);

    /* usage errors (exit 2), nothing written */
    const gr_synthetic_config good = {.n = 10, .test = -1, .c = 1, .h = 2, .w = 2, .classes = 2};
    gr_synthetic_config b;
    b = good, b.n = 0;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "--n must be in [1, ", out);
    b = good, b.test = 0;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "--test must be in", out);
    b = good, b.h = 0;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE,
                 "--shape 1,0,2: each of C,H,W must be in [1, 65536]", out);
    b = good, b.w = 65537;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "--shape 1,2,65537", out);
    b = good, b.c = 65536, b.h = 65536, b.w = 1;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "more than 1 GiB", out);
    b = good, b.classes = 1;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "--classes must be in [2, 65536]",
                 out);
    b = good, b.classes = 65537;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "got 65537", out);
    CHECK(gr_data_convert_synthetic(&good, tmp_path("no_dir/x.h5"), false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "no_dir/x.h5: cannot create a temporary file next to it: No such file or directory");
}

/* Issue 23: an existing OUT that is not a regular file is refused (exit 3)
 * with or without --force, before anything is written (it was replaced);
 * a symlink planted at OUT.tmp is not followed (its target was truncated and
 * OUT became the symlink): the target keeps its bytes, OUT is a regular file. */
static void test_output_safety(void) {
    const gr_synthetic_config cfg = {.n = 20, .test = -1, .c = 1, .h = 2, .w = 2, .classes = 2};
    gr_error err = {0};
    struct stat sb;
    const char *fifo = tmp_path("out_fifo.h5");
    remove(fifo);
    CHECK(mkfifo(fifo, 0666) == 0);
    for (int force = 0; force < 2; force++) {
        CHECK(gr_data_convert_synthetic(&cfg, fifo, force, false, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, "out_fifo.h5: the output file is a FIFO, not a regular file");
        CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode) && !tmp_exists(fifo));
    }
    remove(fifo);
    const char *out = tmp_path("planted.h5"), *victim = tmp_path("victim");
    char link[600];
    snprintf(link, sizeof link, "%s.tmp", out);
    remove(out), remove(link);
    write_bytes(victim, "precious\n", 9);
    CHECK(symlink(victim, link) == 0);
    CHECK(gr_data_convert_synthetic(&cfg, out, false, false, &err) == GR_OK);
    uint8_t buf[64];
    CHECK(read_bytes(victim, buf, sizeof buf) == 9 && memcmp(buf, "precious\n", 9) == 0);
    CHECK(lstat(out, &sb) == 0 && S_ISREG(sb.st_mode));
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode));
    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(out, "/train", &ds, &err) == GR_OK && ds && gr_dataset_len(ds) == 20);
    if (ds) gr_dataset_close(ds);
    remove(out), remove(link), remove(victim);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    test_synthetic();
    test_output_safety();
    return gr_test_report();
}
