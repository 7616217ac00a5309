/* main.c — the gpurun command line (DESIGN 1.1) and its exit codes (1.2).
 * The only place that calls exit(). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../common/env.h"
#include "../dataio/dataio.h"
#include "../dataio/convert.h"
#include "../graph/graph.h"
#include "../config/spec.h"
#include "../kernels/backend.h"
#include "hostmem.h"
#include "cli.h"
#include "job.h"
#include "signals.h"
#include "../tools/tools.h"
#include "train.h"


/* Each command's usage (its first line after "usage: " or its indent, the rest aligned to
 * that); `gpurun --help` prints them all, `gpurun CMD --help` its own. */
static const struct gr_cmd_help {
    const char *cmd, *text;
} gr_helps[] = {
    {"run", "gpurun [run] JOB.yaml [--set KEY=VALUE]... [--resume auto|PATH]\n"
            "                             [--run-dir DIR] [--device auto|cpu|cuda|cuda:N] [--quiet] [--threads N]\n"
            "                             [--profile [STEPS (20)]]  time every op of STEPS steps after 3 warm-up\n"
            "                                                       ones: RUN_DIR/profile.txt and trace.json\n"},
    {"plan", "gpurun plan JOB.yaml [--memory BYTES|auto] [--set KEY=VALUE]...\n"
             "                                                       compile only: layers, shapes, parameters,\n"
             "                                                       FLOPs, memory per arena; with --memory,\n"
             "                                                       whether it fits and the largest micro-batch that does\n"
             "                                                       (BYTES: 8G or 8GiB = 8 x 2^30, 8GB = 8 x 10^9)\n"},
    {"validate", "gpurun validate JOB.yaml [--set KEY=VALUE]... [--no-data]\n"
                 "                                                       check the spec and that its data files exist\n"
                 "                                                       and fit the model; print the spec resolved\n"},
    {"eval", "gpurun eval JOB.yaml --checkpoint PATH [--split val|train] [--set ...]\n"
             "                                                       loss and accuracy of a checkpoint (JSON)\n"},
    {"predict", "gpurun predict JOB.yaml --checkpoint PATH [--top K (5)] INPUT... [--set ...]\n"
                "                                                       the top K classes of each input (JSON lines): image\n"
                "                                                       files, or FILE.h5[:GROUP (/test)] splits\n"},
    {"generate", "gpurun generate JOB.yaml --checkpoint PATH [--prompt TEXT | --prompt-file F] [--tokens N (256)]\n"
                 "                             [--temperature T (1; 0 greedy)] [--top-k K (0: all)] [--seed S (0)]\n"
                 "                             [--vocab DIR (GPT-2 tokens)] [--device D] [--threads N] [--set ...]\n"
                 "                                                       a language model's text after the prompt,\n"
                 "                                                       streamed to stdout (a key/value cache: no\n"
                 "                                                       position is computed twice)\n"},
    {"data", "gpurun data fashion-mnist OUT.h5 [--from DIR] [--force]\n"
             "       gpurun data mnist OUT.h5 --from DIR [--force]\n"
             "       gpurun data cifar10 OUT.h5 --from DIR [--force]      DIR: the CIFAR-10 binary version\n"
             "       gpurun data synthetic OUT.h5 --n N --shape C,H,W [--classes K (10)] [--test M (ceil(N/10))]\n"
             "                             [--seed S (0)] [--force]\n"
             "       gpurun data imagefolder OUT.h5 --from DIR --size S [--short-side R (S)]\n"
             "                             | --store jpeg [--max-side M] [--quality Q (90)] [--restart]\n"
             "                             [--group G (/train) | --val-fraction F [--seed S (0)]]\n"
             "                             [--on-error fail|skip (fail)] [--force]   DIR/<class>/*.jpg|*.jpeg|*.png\n"
             "                             (imagefolder and imagenet add their groups to an existing OUT.h5, keeping\n"
             "                             the others; --force replaces a group there; the others' --force replaces\n"
             "                             the file)\n"
             "       gpurun data imagenet OUT.h5 --from DIR [--store jpeg (the default) [--max-side M] [--quality Q]\n"
             "                             [--restart] | --store raw --size S [--short-side R]] [--splits train,val]\n"
             "                             [--val-labels FILE] [--devkit DIR] [--on-error fail|skip] [--force]\n"
             "                             ILSVRC2012: DIR/train/<wnid>/ (or Kaggle's DIR/ILSVRC/Data/CLS-LOC/train/),\n"
             "                             val/ in class folders, or flat with LOC_val_solution.csv or the devkit's\n"
             "                             ground truth and meta.mat\n"
             "                             (--store jpeg is resumable: stopped, its finished blocks stay in\n"
             "                             OUT.h5.partial and the same command goes on from them; --restart: not)\n"
             "       gpurun data csv OUT.h5 --from FILE.csv --target COL[,COL...] [--val-fraction F [--seed S (0)]]\n"
             "                             [--force]   a numeric table: float32 features and targets by name\n"
             "       gpurun data text OUT.h5 --from FILE... [--val-fraction F (0.1)] [--tokenizer bytes|gpt2 --vocab DIR] [--force]\n"
             "                             text files (in order, as one text) to tokens; /val: the last F of them\n"
             "       gpurun data tokens OUT.h5 --from TRAIN.bin [--val VAL.bin] [--vocab-size V (50257)] [--force]\n"
             "                             llm.c / nanoGPT uint16 token files (llm.c's header or none)\n"},
    {"launch", "gpurun launch -n N [--launcher mpirun|srun] JOB.yaml [run options]...\n"
               "                                                       N processes of `gpurun run` (data parallelism);\n"
               "                                                       exits with the run's code: 75 when a signal to it\n"
               "                                                       stopped the run at a checkpoint\n"},
    {"summarize", "gpurun summarize RUN_DIR... [--csv | --json] [--sort [-]KEY]\n"
                  "                                                       one table of runs (a sweep): differing overrides,\n"
                  "                                                       status, steps, accuracy, loss, speed\n"},
    {"plot", "gpurun plot RUN_DIR... -o OUT.png [--metric loss|accuracy|lr|val_loss|samples_per_s]\n"
             "                             [--size WxH]             the runs' curves in one PNG\n"},
};

static const char gr_exit_codes[] =
    "\n"
    "exit codes: 0 finished, 1 internal error, 2 usage/job-spec error, 3 data error,\n"
    "            4 out of memory, 5 diverged, 6 checkpoint error, 7 device error,\n"
    "            75 stopped by a signal after a checkpoint (rerun with --resume auto)\n";


static int gr_cmd_index(const char *name) {
    for (int k = 0; k < (int)GR_ARRAY_LEN(gr_helps); k++)
        if (strcmp(gr_helps[k].cmd, name) == 0) return k;
    return -1;
}

/* cmd's usage (every command's when cmd is NULL) and the exit codes. */
static void gr_print_usage(FILE *f, const char *cmd) {
    bool first = true;
    for (int k = 0; k < (int)GR_ARRAY_LEN(gr_helps); k++) {
        if (cmd && strcmp(cmd, gr_helps[k].cmd) != 0) continue;
        fprintf(f, "%s%s", first ? "usage: " : "       ", gr_helps[k].text);
        first = false;
    }
    if (!cmd) fputs("       gpurun --help | --version | COMMAND --help\n", f);
    fputs(gr_exit_codes, f);
}

/* A device fault the run cannot recover from (kernels/ reports it through
 * gr_backend_fault): exit 7. */
static void gr_device_fault(const char *what) {
    fprintf(stderr, "gpurun: %s\n", what);
    exit(GR_ERR_DEVICE);
}

/* A first argument that is neither a command nor an existing file, and does not look like a
 * path: a mistyped command ('trian'), said so instead of "cannot read job spec". */
static void gr_check_command(const char *a) {
    struct stat sb;
    if (a[0] == '-' || strchr(a, '/') || strchr(a, '.') || stat(a, &sb) == 0) return;
    const char *best = NULL;
    int best_d = 3;
    char all[160] = "";
    size_t n = 0;
    for (int k = 0; k < (int)GR_ARRAY_LEN(gr_helps); k++) {
        int d = gr_edit_distance(a, gr_helps[k].cmd);
        if (d < best_d) best_d = d, best = gr_helps[k].cmd;
        n += (size_t)snprintf(all + n, sizeof all - n, "%s%s", k ? ", " : "", gr_helps[k].cmd);
    }
    if (gr_edit_distance(a, "train") < best_d) best = "run"; /* what other tools call it */
    fprintf(stderr, "gpurun: no command or file named '%s'", a);
    if (best) fprintf(stderr, " (did you mean '%s'?)", best);
    fprintf(stderr, "\ngpurun: commands: %s; or a job spec JOB.yaml to run (see 'gpurun --help')\n", all);
    exit(GR_ERR_USAGE);
}

/* A path option's value within max bytes: a longer one would be cut in the
 * buffers behind it (a cut --run-dir can be its parent), so it is exit 2. */
static void gr_check_path(const char *what, const char *path, size_t max) {
    size_t n = strlen(path);
    if (n <= max) return;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: the path is %zu bytes long; the limit is %zu bytes: '%.48s...'", what, n, max, path);
    gr_usage_error("%s", msg);
}

/* A count option's value: decimal digits only, within [lo, hi] (no wrap-around: 4294967297 is
 * not 1); exit 2 naming the option, what it counts ("a count") and the value otherwise. */
static int gr_count_arg(const char *opt, const char *what, const char *val, long lo, long hi) {
    char *end;
    errno = 0;
    long v = val[0] >= '0' && val[0] <= '9' ? strtol(val, &end, 10) : -1;
    if (v < 0 || errno || *end || v < lo || v > hi) {
        char msg[320];
        snprintf(msg, sizeof msg, "%s: expected %s from %ld to %ld, got '%.200s'", opt, what, lo, hi, val);
        gr_usage_error("%s", msg);
    }
    return (int)v;
}

/* The stop signals (SIGTERM, SIGINT, SIGUSR1) are held from before the shared libraries'
 * constructors run (CUDA's, oneDNN's, OpenBLAS's: most of the ~1 s a CUDA build takes to reach
 * main), so a preemption notice then stays pending instead of killing the start (143): `run`
 * takes it through signals.h (exit 75 during set-up, its line); every other command gets back
 * the mask it was started with, and a pending signal then acts as it would have. Threads those
 * constructors start (OpenBLAS's pool) keep them blocked, so none lands on one. */
static sigset_t gr_start_mask;

static void gr_hold_stop_signals(int argc, char **argv, char **envp) {
    (void)argc, (void)argv, (void)envp;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGUSR1);
    sigprocmask(SIG_BLOCK, &s, &gr_start_mask);
}

/* the executable's pre-initializers run before any shared library's constructor */
__attribute__((section(".preinit_array"), used)) static void (*const gr_preinit)(int, char **, char **) =
    gr_hold_stop_signals;

int main(int argc, char **argv) {
    gr_hostmem_start(); /* the program as loaded: part of the host memory plan */
    gr_backend_set_fault_handler(gr_device_fault);
    if (argc < 2) {
        gr_print_usage(stderr, NULL);
        return GR_ERR_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        gr_print_usage(stdout, NULL);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("gpurun %s\n", GR_VERSION);
        return 0;
    }
    gr_error env_err = {0};
    if (gr_env_check(&env_err)) gr_die(env_err.status, env_err.msg);
    int i = 1;
    const char *cmd = "run";
    if (gr_cmd_index(argv[1]) >= 0) {
        cmd = argv[1];
        i = 2;
        gr_cur_cmd = cmd;
    } else {
        gr_check_command(argv[1]);
    }
    if (strcmp(cmd, "run") != 0) sigprocmask(SIG_SETMASK, &gr_start_mask, NULL); /* as started */
    else {
        /* before anything slow (the spec, MPI_Init_thread, the device): a stop signal held since
         * the start, or sent from here on, is exit 75 with its line (signals.h), and the threads
         * MPI, CUDA and oneDNN start inherit the blocked mask */
        gr_signals_install();
        const int64_t delay_ms = gr_env_int(GR_ENV_START_DELAY_MS, 0); /* a test's slow start */
        if (delay_ms > 0)
            nanosleep(&(struct timespec){.tv_sec = delay_ms / 1000, .tv_nsec = delay_ms % 1000 * 1000000}, NULL);
    }
    for (int k = i; k < argc; k++)
        if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
            if (strcmp(cmd, "summarize") == 0 || strcmp(cmd, "plot") == 0) break; /* their own */
            gr_print_usage(stdout, cmd);
            return 0;
        }
    if (strcmp(cmd, "data") == 0) return gr_cmd_data(argc - 2, argv + 2);
    if (strcmp(cmd, "launch") == 0) return gr_cmd_launch(argc - 2, argv + 2);
    if (strcmp(cmd, "generate") == 0) return gr_cmd_generate(argc - 2, argv + 2);
    if (strcmp(argv[1], "summarize") == 0) return gr_cmd_summarize(argc - 2, argv + 2);
    if (strcmp(argv[1], "plot") == 0) return gr_cmd_plot(argc - 2, argv + 2);

    const char *job = NULL;
    const char *sets[GR_MAX_SETS];
    int nsets = 0;
    gr_run_options opt = {0};
    const char *checkpoint = NULL, *split = "val", *memory = NULL;
    bool no_data = false;
    const bool predict = strcmp(cmd, "predict") == 0;
    const char **inputs = gr_xcalloc((size_t)argc, sizeof *inputs); /* predict's */
    int n_inputs = 0, top = 5;
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
            else opt.threads = gr_count_arg("--threads", "a count", val, 1, 1024);
            if (a[2] == 'r' && a[3] == 'e' && strcmp(val, "auto") != 0) gr_check_path(a, val, GR_PATH_MAX - 1);
            else if (a[2] == 'r' && a[3] == 'u') gr_check_path(a, val, GR_DIR_MAX);
        } else if ((strcmp(a, "--checkpoint") == 0 && (predict || strcmp(cmd, "eval") == 0)) ||
                   (strcmp(a, "--split") == 0 && strcmp(cmd, "eval") == 0) || (strcmp(a, "--top") == 0 && predict)) {
            if (!val) gr_usage_error("%s: expected a value", a);
            i++;
            if (a[2] == 'c') {
                gr_check_path(a, val, GR_PATH_MAX - 1);
                checkpoint = val;
            } else if (a[2] == 't') top = gr_count_arg("--top", "a count", val, 1, 100);
            else if (a[2] == 's' && strcmp(val, "val") != 0 && strcmp(val, "train") != 0)
                gr_usage_error("--split: expected val or train, got '%s'", val);
            else if (a[2] == 's') split = val;
        } else if (strcmp(a, "--memory") == 0 && strcmp(cmd, "plan") == 0) {
            if (!val) gr_usage_error("%s: expected a value", a);
            memory = val;
            i++;
        } else if (strcmp(a, "--profile") == 0 && strcmp(cmd, "run") == 0) {
            opt.profile_steps = 20; /* STEPS, when the next argument is a count */
            if (val && strspn(val, "0123456789") == strlen(val) && *val) {
                opt.profile_steps = gr_count_arg("--profile", "a step count", val, 1, 100000);
                i++;
            }
        } else if (strcmp(a, "--no-data") == 0 && strcmp(cmd, "validate") == 0) {
            no_data = true;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            opt.quiet = true;
        } else if (a[0] == '-') {
            gr_usage_error("unknown option '%s'", a);
        } else if (!job) {
            job = a;
        } else if (predict) {
            inputs[n_inputs++] = a;
        } else {
            gr_usage_error("unexpected argument '%s' (one job spec per run)", a);
        }
    }
    if (!job) gr_usage_error("%s: expected a job spec (JOB.yaml)", cmd);
    if ((predict || strcmp(cmd, "eval") == 0) && !checkpoint)
        gr_usage_error("%s: --checkpoint PATH (a checkpoint or a run's weights.h5) is required", cmd);
    if (predict && !n_inputs) gr_usage_error("predict: expected inputs: image files or FILE.h5[:GROUP]%s", "");
    if (opt.resume && strcmp(opt.resume, "auto") != 0 && strcmp(cmd, "run") != 0)
        gr_usage_error("--resume is for runs%s", "");

    gr_error err = {0};
    gr_job_spec spec;
    gr_status st = gr_spec_load(job, sets, nsets, &spec, &err);
    if (st) gr_die(st, err.msg);
    if (strcmp(cmd, "validate") == 0) {
        st = gr_graph_check(&spec, &err);
        if (!st) st = gr_opt_groups_check(&spec, &err);
        if (!st && !no_data) st = gr_job_check_data(&spec, &err);
        if (!st) gr_spec_dump(&spec, stdout);
    } else if (strcmp(cmd, "plan") == 0) {
        st = gr_train_plan_report(&spec, memory, stdout, &err);
    } else if (strcmp(cmd, "eval") == 0) {
        st = gr_train_eval(&spec, checkpoint, split, &opt, &err);
    } else if (predict) {
        st = gr_train_predict(&spec, checkpoint, top, inputs, n_inputs, &opt, &err);
    } else {
        st = gr_train_run(&spec, &opt, &err);
    }
    gr_spec_free(&spec);
    free(inputs);
    if (st) gr_die(st, err.msg);
    return 0;
}
