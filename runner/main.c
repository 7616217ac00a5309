/* main.c — the gpurun command line (DESIGN 1.1) and its exit codes (1.2).
 * The only place that calls exit(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dataio/dataio.h"
#include "../dataio/convert.h"
#include "../graph/graph.h"
#include "../graph/spec.h"
#include "train.h"

#define GR_MAX_SETS 256

static const char gr_usage[] =
    "usage: gpurun [run] JOB.yaml [--set KEY=VALUE]... [--resume auto|PATH]\n"
    "                             [--run-dir DIR] [--device auto|cpu|cuda|cuda:N] [--quiet] [--threads N]\n"
    "       gpurun plan JOB.yaml [--set KEY=VALUE]...      compile only: layers, shapes, parameters,\n"
    "                                                       FLOPs, memory per arena\n"
    "       gpurun validate JOB.yaml [--set KEY=VALUE]...  check the spec, print it resolved\n"
    "       gpurun data fashion-mnist OUT.h5 [--from DIR] [--force]\n"
    "       gpurun data mnist OUT.h5 --from DIR [--force]\n"
    "       gpurun --help | --version\n"
    "\n"
    "exit codes: 0 finished, 1 internal error, 2 usage/job-spec error, 3 data error,\n"
    "            4 out of memory, 5 diverged, 6 checkpoint error, 7 device error,\n"
    "            75 stopped by a signal after a checkpoint (rerun with --resume auto)\n";

static _Noreturn void gr_die(gr_status st, const char *msg) {
    fprintf(stderr, "gpurun: %s\n", msg);
    if (st == GR_ERR_INTERNAL) fprintf(stderr, "gpurun: this is a bug in gpurun; please report it\n");
    exit((int)st);
}

static _Noreturn void gr_usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "gpurun: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", gr_usage);
    exit(GR_ERR_USAGE);
}

static int gr_cmd_data(int argc, char **argv) {
    if (argc < 2) gr_usage_error("data: expected a dataset name and an output file%s", "");
    const char *what = argv[0], *out = NULL, *from = NULL;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--force") == 0) force = true;
        else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) from = argv[++i];
        else if (argv[i][0] == '-') gr_usage_error("data: unknown option '%s'", argv[i]);
        else if (!out) out = argv[i];
        else gr_usage_error("data: unexpected argument '%s'", argv[i]);
    }
    if (!out) gr_usage_error("data %s: expected an output file", what);
    gr_error err = {0};
    gr_status st;
    if (strcmp(what, "fashion-mnist") == 0) {
        st = gr_data_convert_idx("fashion-mnist", from ? from : "/usr/share/datasets/fashion-mnist", out, force,
                                 true, &err);
    } else if (strcmp(what, "mnist") == 0) {
        if (!from) gr_usage_error("data mnist: --from DIR (the folder of the four IDX files) is required%s", "");
        st = gr_data_convert_idx("mnist", from, out, force, true, &err);
    } else if (strcmp(what, "cifar10") == 0 || strcmp(what, "synthetic") == 0) {
        gr_usage_error("data %s: this converter is not available in this version yet", what);
    } else {
        gr_usage_error("data: unknown dataset '%s' (fashion-mnist, mnist)", what);
    }
    if (st) gr_die(st, err.msg);
    printf("wrote %s\n", out);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(gr_usage, stderr);
        return GR_ERR_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(gr_usage, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("gpurun %s\n", GR_VERSION);
        return 0;
    }
    int i = 1;
    const char *cmd = "run";
    if (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "plan") == 0 || strcmp(argv[1], "validate") == 0 ||
        strcmp(argv[1], "eval") == 0 || strcmp(argv[1], "data") == 0) {
        cmd = argv[1];
        i = 2;
    }
    if (strcmp(cmd, "data") == 0) return gr_cmd_data(argc - 2, argv + 2);
    if (strcmp(cmd, "eval") == 0)
        gr_die(GR_ERR_USAGE, "eval: evaluating a checkpoint needs checkpoints, which this version does not "
                             "write yet (a run evaluates on data.val as it trains)");

    const char *job = NULL;
    const char *sets[GR_MAX_SETS];
    int nsets = 0;
    gr_run_options opt = {0};
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--set") == 0 || strncmp(a, "--set=", 6) == 0) {
            const char *kv = a[5] == '=' ? a + 6 : val;
            if (!kv) gr_usage_error("%s: expected KEY=VALUE", a);
            if (a[5] != '=') i++;
            if (nsets == GR_MAX_SETS) gr_usage_error("too many --set options%s", "");
            sets[nsets++] = kv;
        } else if (strcmp(a, "--resume") == 0 || strcmp(a, "--run-dir") == 0 || strcmp(a, "--device") == 0 ||
                   strcmp(a, "--threads") == 0) {
            if (!val) gr_usage_error("%s: expected a value", a);
            i++;
            if (a[2] == 'r' && a[3] == 'e') opt.resume = val;
            else if (a[2] == 'r') opt.run_dir = val;
            else if (a[2] == 'd') opt.device = val;
            else {
                char *end;
                long t = strtol(val, &end, 10);
                if (*end || t < 1 || t > 1024) gr_usage_error("--threads: expected a count from 1 to 1024, got '%s'", val);
                opt.threads = (int)t;
            }
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            opt.quiet = true;
        } else if (a[0] == '-') {
            gr_usage_error("unknown option '%s'", a);
        } else if (!job) {
            job = a;
        } else {
            gr_usage_error("unexpected argument '%s' (one job spec per run)", a);
        }
    }
    if (!job) gr_usage_error("%s: expected a job spec (JOB.yaml)", cmd);
    if (opt.resume && strcmp(opt.resume, "auto") != 0 && strcmp(cmd, "run") != 0)
        gr_usage_error("--resume is for runs%s", "");

    gr_error err = {0};
    gr_job_spec spec;
    gr_status st = gr_spec_load(job, sets, nsets, &spec, &err);
    if (st) gr_die(st, err.msg);
    if (strcmp(cmd, "validate") == 0) {
        st = gr_graph_check(&spec, &err);
        if (!st) gr_spec_dump(&spec, stdout);
    } else if (strcmp(cmd, "plan") == 0) {
        st = gr_train_plan_report(&spec, stdout, &err);
    } else {
        st = gr_train_run(&spec, &opt, &err);
    }
    gr_spec_free(&spec);
    if (st) gr_die(st, err.msg);
    return 0;
}
