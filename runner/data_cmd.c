/* data_cmd.c — `gpurun data NAME OUT.h5 [options]`: the converters of
 * dataio/convert.h on the command line (cli.h). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/tmpfile.h"
#include "../dataio/convert.h"
#include "cli.h"

/* Stopping a conversion (SIGTERM, SIGINT, SIGHUP, SIGUSR1; one ignored when
 * gpurun starts, as under nohup or `&` in a script, stays ignored): the
 * handler removes the temporaries held (tmpfile.h), says in one line what
 * became of OUT and exits 75. OUT is as it was unless the conversion had
 * renamed its temporary over it already: told by OUT's inode. A resumable
 * conversion's committed work stays in OUT.partial (gr_data_stop), and the
 * line says so; one with nothing committed yet has it removed. */
static const int gr_data_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
static char gr_data_out[GR_TMPFILE_NAME_MAX]; /* OUT, for the handler's line */
static struct stat gr_data_out_was;          /* OUT before the conversion */
static bool gr_data_out_existed;
static atomic_int gr_data_stopping;
static gr_conv_stop gr_data_stop;            /* where a resumable conversion stands */

/* Appends s to buf[0..cap) at *n (async-signal-safe: no stdio). */
static void gr_data_put(char *buf, size_t cap, size_t *n, const char *s) {
    while (*s && *n + 1 < cap) buf[(*n)++] = *s++;
}

/* Appends v with thousands separators (async-signal-safe). */
static void gr_data_put_count(char *buf, size_t cap, size_t *n, long long v) {
    char digits[24], out[32];
    int k = 0, m = 0;
    do digits[k++] = (char)('0' + v % 10), v /= 10; while (v > 0 && k < 20);
    while (k > 0) {
        out[m++] = digits[--k];
        if (k > 0 && k % 3 == 0) out[m++] = ',';
    }
    out[m] = '\0';
    gr_data_put(buf, cap, n, out);
}

/* The handler's part for OUT.partial: what is kept there, said; nothing
 * committed: removed (the only files then are these two). */
static void gr_data_stop_partial(char *line, size_t cap, size_t *n, bool written) {
    if (!atomic_load(&gr_data_stop.held)) return;
    const long long files = atomic_load(&gr_data_stop.files);
    if (written) {
        gr_data_put(line, cap, n, "; remove ");
        gr_data_put(line, cap, n, gr_data_stop.dir);
        gr_data_put(line, cap, n, ", which it no longer needs");
    } else if (files > 0) {
        gr_data_put(line, cap, n, "; ");
        gr_data_put_count(line, cap, n, files);
        gr_data_put(line, cap, n, " files converted so far are kept in ");
        gr_data_put(line, cap, n, gr_data_stop.dir);
        gr_data_put(line, cap, n, ": run the same command again to continue");
    } else {
        unlink(gr_data_stop.first);
        unlink(gr_data_stop.index);
        rmdir(gr_data_stop.dir);
    }
}

static void gr_data_on_signal(int sig) {
    if (atomic_exchange(&gr_data_stopping, 1)) return; /* another thread is stopping */
    const int removed = gr_tmpfile_remove_held();
    struct stat now;
    const bool exists = lstat(gr_data_out, &now) == 0;
    const bool replaced = exists && (!gr_data_out_existed || now.st_dev != gr_data_out_was.st_dev ||
                                     now.st_ino != gr_data_out_was.st_ino);
    char line[2 * GR_TMPFILE_NAME_MAX + 300];
    size_t n = 0;
    /* on a line of its own: the progress bar stops mid-line */
    gr_data_put(line, sizeof line, &n, sig == SIGTERM  ? "\ngpurun: data: stopped by SIGTERM"
                                       : sig == SIGINT ? "\ngpurun: data: stopped by SIGINT"
                                       : sig == SIGHUP ? "\ngpurun: data: stopped by SIGHUP"
                                                       : "\ngpurun: data: stopped by SIGUSR1");
    const bool written = removed == 0 && replaced;
    if (written) {
        gr_data_put(line, sizeof line, &n, " after ");
        gr_data_put(line, sizeof line, &n, gr_data_out);
        gr_data_put(line, sizeof line, &n, " was written");
    } else {
        gr_data_put(line, sizeof line, &n, "; ");
        gr_data_put(line, sizeof line, &n, gr_data_out);
        gr_data_put(line, sizeof line, &n, removed ? " not written, its temporary removed" : " not written");
        if (gr_data_out_existed) gr_data_put(line, sizeof line, &n, " (the existing file left as it was)");
    }
    gr_data_stop_partial(line, sizeof line - 1, &n, written);
    line[n++] = '\n';
    ssize_t w = write(2, line, n);
    (void)w;
    _exit(75);
}

/* Installs the stop handler for a conversion writing out. */
static void gr_data_signals(const char *out) {
    snprintf(gr_data_out, sizeof gr_data_out, "%s", out);
    gr_data_out_existed = lstat(out, &gr_data_out_was) == 0;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = gr_data_on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_data_sigs); i++) sigaddset(&sa.sa_mask, gr_data_sigs[i]);
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_data_sigs); i++)
        if (sigaction(gr_data_sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(gr_data_sigs[i], &sa, NULL);
}

/* `gpurun data` converters and the options each takes (letters of
 * gr_data_names' keys). */
static const char *const gr_data_names[] = {"fashion-mnist", "mnist", "cifar10", "synthetic", "imagefolder",
                                            "imagenet", "csv", "text", "tokens"};
static const char gr_data_keys[] = "fmcsintxk";
enum { GR_DOPT_FROM, GR_DOPT_N, GR_DOPT_SHAPE, GR_DOPT_CLASSES, GR_DOPT_TEST, GR_DOPT_SEED, GR_DOPT_SIZE,
       GR_DOPT_SHORT, GR_DOPT_GROUP, GR_DOPT_VAL, GR_DOPT_TARGET, GR_DOPT_TOKENIZER, GR_DOPT_VOCAB,
       GR_DOPT_VALFILE, GR_DOPT_VOCAB_SIZE, GR_DOPT_STORE, GR_DOPT_MAX_SIDE, GR_DOPT_QUALITY, GR_DOPT_ON_ERROR,
       GR_DOPT_SPLITS, GR_DOPT_VAL_LABELS, GR_DOPT_DEVKIT, GR_DOPT_COUNT };
static const struct { const char *name, *takes; } gr_data_opts[GR_DOPT_COUNT] = {
    [GR_DOPT_FROM] = {"--from", "fmcintxk"}, [GR_DOPT_N] = {"--n", "s"},       [GR_DOPT_SHAPE] = {"--shape", "s"},
    [GR_DOPT_CLASSES] = {"--classes", "s"}, [GR_DOPT_TEST] = {"--test", "s"},   [GR_DOPT_SEED] = {"--seed", "sit"},
    [GR_DOPT_SIZE] = {"--size", "in"},      [GR_DOPT_SHORT] = {"--short-side", "in"},
    [GR_DOPT_GROUP] = {"--group", "i"},     [GR_DOPT_VAL] = {"--val-fraction", "itx"},
    [GR_DOPT_TARGET] = {"--target", "t"},   [GR_DOPT_TOKENIZER] = {"--tokenizer", "x"},
    [GR_DOPT_VOCAB] = {"--vocab", "x"},     [GR_DOPT_VALFILE] = {"--val", "k"},
    [GR_DOPT_VOCAB_SIZE] = {"--vocab-size", "k"}, [GR_DOPT_STORE] = {"--store", "in"},
    [GR_DOPT_MAX_SIDE] = {"--max-side", "in"}, [GR_DOPT_QUALITY] = {"--quality", "in"},
    [GR_DOPT_ON_ERROR] = {"--on-error", "in"}, [GR_DOPT_SPLITS] = {"--splits", "n"},
    [GR_DOPT_VAL_LABELS] = {"--val-labels", "n"}, [GR_DOPT_DEVKIT] = {"--devkit", "n"},
};

/* The imagefolder and imagenet usages, for their messages (the --help table says the same). */
#define GR_DATA_IMAGEFOLDER_USAGE                                                                             \
    "gpurun data imagefolder OUT.h5 --from DIR (--size S [--short-side R] | --store jpeg [--max-side M] "    \
    "[--quality Q] [--restart]) [--group G | --val-fraction F [--seed S]] [--on-error fail|skip] [--force]"
#define GR_DATA_IMAGENET_USAGE                                                                                \
    "gpurun data imagenet OUT.h5 --from DIR [--store jpeg [--max-side M] [--quality Q] [--restart] | --store raw " \
    "--size S [--short-side R]] [--splits train,val] [--val-labels FILE] [--devkit DIR] [--on-error fail|skip] "  \
    "[--force]"

/* The csv usage, for its messages (the `data` entry of main.c's --help table is to say the same). */
#define GR_DATA_CSV_USAGE "gpurun data csv OUT.h5 --from FILE.csv --target COL[,COL...] [--val-fraction F [--seed S]] [--force]"

/* The text and tokens usages, for their messages (main.c's --help table says the same). */
#define GR_DATA_TEXT_USAGE "gpurun data text OUT.h5 --from FILE... [--val-fraction F] [--tokenizer bytes|gpt2 --vocab DIR] [--force]"
#define GR_DATA_TOKENS_USAGE "gpurun data tokens OUT.h5 --from TRAIN.bin [--val VAL.bin] [--vocab-size V] [--force]"

/* Parses a decimal integer option value (range checks are the converter's). */
static int64_t gr_data_int(const char *opt, const char *s, char **rest) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || (!rest && *end)) {
        char msg[256];
        snprintf(msg, sizeof msg, "data: %s: expected an integer, got '%s'", opt, s);
        gr_usage_error("%s", msg);
    }
    if (rest) *rest = end;
    return (int64_t)v;
}

/* --seed: a non-negative integer. */
static uint64_t gr_data_seed(const char *s) {
    if (s[0] == '-') gr_usage_error("data: --seed: expected a non-negative integer, got '%s'", s);
    return (uint64_t)gr_data_int("--seed", s, NULL);
}

/* An option whose API value has a "default" sentinel below 1: checked here. */
static int64_t gr_data_count(const char *opt, const char *s) {
    int64_t v = gr_data_int(opt, s, NULL);
    if (v < 1) {
        char msg[256];
        snprintf(msg, sizeof msg, "data: %s: expected a count >= 1, got '%s'", opt, s);
        gr_usage_error("%s", msg);
    }
    return v;
}

/* --val-fraction F: a number in (0, 1), else a usage error naming `what`. */
static double gr_data_fraction(const char *what, const char *vf, const char *share) {
    char *end = NULL;
    errno = 0;
    const double f = strtod(vf, &end);
    if (errno || end == vf || *end || !(f > 0 && f < 1)) {
        char msg[256];
        snprintf(msg, sizeof msg, "data %s: --val-fraction: expected a number in (0, 1) (the share of %s that goes "
                 "to /val), got '%s'", what, share, vf);
        gr_usage_error("%s", msg);
    }
    return f;
}

/* The store options of imagefolder and imagenet (`what`) into *cfg: --store
 * (jpeg when jpeg_default), --size, --short-side, --max-side, --quality,
 * --on-error, --restart. */
static void gr_data_images(const char *what, const char *usage, const char *const *val, bool restart,
                           bool jpeg_default, gr_imagefolder_config *cfg) {
    char msg[512];
    const char *store = val[GR_DOPT_STORE];
    if (store && strcmp(store, "raw") != 0 && strcmp(store, "jpeg") != 0) {
        snprintf(msg, sizeof msg, "data %s: --store: expected raw or jpeg, got '%%s'", what);
        gr_usage_error(msg, store);
    }
    const bool jpeg = store ? strcmp(store, "jpeg") == 0 : jpeg_default;
    const char *wrong = jpeg && val[GR_DOPT_SIZE] ? "--size" : jpeg && val[GR_DOPT_SHORT] ? "--short-side" : NULL;
    if (wrong) {
        snprintf(msg, sizeof msg, "data %s: %%s does not apply with --store jpeg, which stores each image encoded at "
                 "its own size (up to --max-side)", what);
        gr_usage_error(msg, wrong);
    }
    wrong = jpeg ? NULL : val[GR_DOPT_MAX_SIDE] ? "--max-side" : val[GR_DOPT_QUALITY] ? "--quality"
                        : restart ? "--restart" : NULL;
    if (wrong) {
        const bool r = restart && !val[GR_DOPT_MAX_SIDE] && !val[GR_DOPT_QUALITY];
        snprintf(msg, sizeof msg, "data %s: %%s applies only with --store jpeg%s", what,
                 r ? " (a raw conversion is not resumable)" : "");
        gr_usage_error(msg, wrong);
    }
    if (!jpeg && !val[GR_DOPT_SIZE]) {
        snprintf(msg, sizeof msg, "data %s: --from DIR and --size S are required for --store raw (%%s)", what);
        gr_usage_error(msg, usage);
    }
    cfg->store = jpeg ? GR_STORE_JPEG : GR_STORE_RAW;
    cfg->restart = restart;
    cfg->stop = &gr_data_stop;
    if (!jpeg) cfg->size = gr_data_int("--size", val[GR_DOPT_SIZE], NULL);
    if (val[GR_DOPT_SHORT]) cfg->short_side = gr_data_count("--short-side", val[GR_DOPT_SHORT]);
    if (val[GR_DOPT_MAX_SIDE]) {
        cfg->max_side = gr_data_count("--max-side", val[GR_DOPT_MAX_SIDE]);
        snprintf(msg, sizeof msg, "data %s: --max-side: expected 1..32768 (the largest image side decoded), got "
                 "'%%s'", what);
        if (cfg->max_side > 32768) gr_usage_error(msg, val[GR_DOPT_MAX_SIDE]);
    }
    if (val[GR_DOPT_QUALITY]) {
        const int64_t q = gr_data_int("--quality", val[GR_DOPT_QUALITY], NULL);
        snprintf(msg, sizeof msg, "data %s: --quality: expected a JPEG quality 1..100, got '%%s'", what);
        if (q < 1 || q > 100) gr_usage_error(msg, val[GR_DOPT_QUALITY]);
        cfg->quality = (int)q;
    }
    const char *on_error = val[GR_DOPT_ON_ERROR];
    if (on_error && strcmp(on_error, "skip") == 0) cfg->on_error = GR_ON_ERROR_SKIP;
    else if (on_error && strcmp(on_error, "fail") != 0) {
        snprintf(msg, sizeof msg, "data %s: --on-error: expected skip or fail, got '%%s'", what);
        gr_usage_error(msg, on_error);
    }
}

/* `data imagefolder`: its options to a gr_imagefolder_config, then the conversion. */
static gr_status gr_data_imagefolder(const char *from, const char *out, const char *const *val, bool restart,
                                     bool force, gr_imagefolder_report *rep, gr_error *err) {
    if (!from) gr_usage_error("data imagefolder: --from DIR is required (%s)", GR_DATA_IMAGEFOLDER_USAGE);
    gr_imagefolder_config cfg = {.dir = from, .group = val[GR_DOPT_GROUP]};
    gr_data_images("imagefolder", GR_DATA_IMAGEFOLDER_USAGE, val, restart, false, &cfg);
    const char *vf = val[GR_DOPT_VAL];
    if (vf) {
        cfg.val_fraction = gr_data_fraction("imagefolder", vf, "each class");
        if (cfg.group)
            gr_usage_error("data imagefolder: --group does not apply with --val-fraction, which writes /train and "
                           "/val (%s)", GR_DATA_IMAGEFOLDER_USAGE);
    }
    if (val[GR_DOPT_SEED]) {
        if (!vf) gr_usage_error("data imagefolder: --seed applies only with --val-fraction (%s)",
                                GR_DATA_IMAGEFOLDER_USAGE);
        cfg.seed = gr_data_seed(val[GR_DOPT_SEED]);
    }
    return gr_data_convert_imagefolder(&cfg, out, force, true, rep, err);
}

/* `data imagenet`: --splits (train, val or both, comma-separated), then the conversion. */
static gr_status gr_data_imagenet(const char *from, const char *out, const char *const *val, bool restart,
                                  bool force, gr_imagefolder_report *rep, gr_error *err) {
    if (!from) gr_usage_error("data imagenet: --from DIR is required (%s)", GR_DATA_IMAGENET_USAGE);
    gr_imagenet_config cfg = {.dir = from, .val_labels = val[GR_DOPT_VAL_LABELS], .devkit = val[GR_DOPT_DEVKIT]};
    gr_data_images("imagenet", GR_DATA_IMAGENET_USAGE, val, restart, true, &cfg.images);
    const char *sp = val[GR_DOPT_SPLITS];
    if (sp) {
        const bool t = strcmp(sp, "train") == 0 || strcmp(sp, "train,val") == 0 || strcmp(sp, "val,train") == 0;
        const bool v = strcmp(sp, "val") == 0 || strcmp(sp, "train,val") == 0 || strcmp(sp, "val,train") == 0;
        if (!t && !v) gr_usage_error("data imagenet: --splits: expected train, val or train,val, got '%s'", sp);
        cfg.no_train = !t, cfg.no_val = !v;
    }
    return gr_data_convert_imagenet(&cfg, out, force, true, rep, err);
}

/* `data csv`: --target split at commas, then the conversion. */
static gr_status gr_data_csv(const char *from, const char *out, const char *const *val, bool force,
                             gr_error *err) {
    if (!from || !val[GR_DOPT_TARGET])
        gr_usage_error("data csv: --from FILE.csv and --target COL[,COL...] are required (%s)", GR_DATA_CSV_USAGE);
    gr_csv_config cfg = {.from = from};
    if (val[GR_DOPT_VAL]) cfg.val_fraction = gr_data_fraction("csv", val[GR_DOPT_VAL], "the rows");
    if (val[GR_DOPT_SEED]) {
        if (!val[GR_DOPT_VAL]) gr_usage_error("data csv: --seed applies only with --val-fraction (%s)", GR_DATA_CSV_USAGE);
        cfg.seed = gr_data_seed(val[GR_DOPT_SEED]);
    }
    char *list = gr_xstrdup(val[GR_DOPT_TARGET]);
    const char **names = gr_xcalloc(strlen(list) / 2 + 1, sizeof *names);
    for (char *p = list, *next;; p = next + 1) {
        next = strchr(p, ',');
        if (next) *next = '\0';
        if (!*p) gr_usage_error("data csv: --target: an empty column name in '%s'", val[GR_DOPT_TARGET]);
        names[cfg.ntargets++] = p;
        if (!next) break;
    }
    cfg.targets = names;
    gr_csv_report rep;
    gr_status st = gr_data_convert_csv(&cfg, out, force, true, &rep, err);
    free(names);
    free(list);
    return st;
}

/* `data text`: --val-fraction in [0, 0.5] (default 0.1), the files of --from. */
static gr_status gr_data_text(const char *const *from, int nfrom, const char *out, const char *const *val, bool force,
                              gr_error *err) {
    if (nfrom == 0) gr_usage_error("data text: --from FILE... is required (%s)", GR_DATA_TEXT_USAGE);
    gr_text_config cfg = {.from = from, .nfrom = nfrom, .val_fraction = 0.1, .tokenizer = val[GR_DOPT_TOKENIZER],
                          .vocab = val[GR_DOPT_VOCAB]};
    const char *vf = val[GR_DOPT_VAL];
    if (vf) {
        char *end = NULL;
        errno = 0;
        cfg.val_fraction = strtod(vf, &end);
        if (errno || end == vf || *end || !(cfg.val_fraction >= 0 && cfg.val_fraction <= 0.5))
            gr_usage_error("data text: --val-fraction: expected a number in [0, 0.5] (the last share of the token "
                           "stream, which goes to /val; 0: no /val), got '%s'", vf);
    }
    gr_tokens_report rep;
    return gr_data_convert_text(&cfg, out, force, true, &rep, err);
}

/* `data tokens`: --vocab-size in 1..65536 (default GPT-2's 50257). */
static gr_status gr_data_tokens(const char *from, const char *out, const char *const *val, bool force,
                                gr_error *err) {
    if (!from) gr_usage_error("data tokens: --from TRAIN.bin is required (%s)", GR_DATA_TOKENS_USAGE);
    gr_bin_config cfg = {.train = from, .val = val[GR_DOPT_VALFILE]};
    if (val[GR_DOPT_VOCAB_SIZE]) {
        cfg.vocab_size = gr_data_int("--vocab-size", val[GR_DOPT_VOCAB_SIZE], NULL);
        if (cfg.vocab_size < 1 || cfg.vocab_size > 65536)
            gr_usage_error("data tokens: --vocab-size: expected 1..65536 (the tokens are uint16), got '%s'",
                           val[GR_DOPT_VOCAB_SIZE]);
    }
    gr_tokens_report rep;
    return gr_data_convert_tokens(&cfg, out, force, true, &rep, err);
}

int gr_cmd_data(int argc, char **argv) {
    if (argc < 2) gr_usage_error("data: expected a dataset name and an output file%s", "");
    const char *what = argv[0], *out = NULL, *val[GR_DOPT_COUNT] = {0};
    char key = 0;
    for (size_t k = 0; k < GR_ARRAY_LEN(gr_data_names); k++)
        if (strcmp(what, gr_data_names[k]) == 0) key = gr_data_keys[k];
    if (!key)
        gr_usage_error("data: unknown dataset '%s' (fashion-mnist, mnist, cifar10, synthetic, imagefolder, imagenet, "
                       "csv, text, tokens)", what);
    bool force = false, restart = false;
    const char **files = gr_xcalloc((size_t)argc, sizeof *files); /* text: every FILE of --from */
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        int opt = -1;
        for (int k = 0; k < GR_DOPT_COUNT; k++)
            if (strcmp(argv[i], gr_data_opts[k].name) == 0) opt = k;
        if (strcmp(argv[i], "--force") == 0) {
            force = true;
        } else if (strcmp(argv[i], "--restart") == 0) {
            if (key != 'i' && key != 'n') gr_usage_error("data %s: option --restart does not apply", what);
            restart = true;
        } else if (opt >= 0) {
            char msg[256];
            if (!strchr(gr_data_opts[opt].takes, key)) {
                snprintf(msg, sizeof msg, "data %s: option %s does not apply", what, argv[i]);
                gr_usage_error("%s", msg);
            }
            if (i + 1 >= argc) gr_usage_error("data: %s: expected a value", argv[i]);
            val[opt] = argv[++i];
            if (key == 'x' && opt == GR_DOPT_FROM) /* FILE...: up to the next option; --from may repeat */
                for (files[nfiles++] = argv[i]; i + 1 < argc && argv[i + 1][0] != '-';) files[nfiles++] = argv[++i];
        } else if (argv[i][0] == '-') {
            gr_usage_error("data: unknown option '%s'", argv[i]);
        } else if (!out) {
            out = argv[i];
        } else {
            gr_usage_error("data: unexpected argument '%s'", argv[i]);
        }
    }
    if (!out) gr_usage_error("data %s: expected an output file", what);
    const char *from = val[GR_DOPT_FROM];
    gr_error err = {0};
    gr_status st;
    gr_imagefolder_report rep = {0};
    gr_data_signals(out);
    if (key == 'f') {
        st = gr_data_convert_idx("fashion-mnist", from ? from : "/usr/share/datasets/fashion-mnist", out, force,
                                 true, &err);
    } else if (key == 'm') {
        if (!from) gr_usage_error("data mnist: --from DIR (the folder of the four IDX files) is required%s", "");
        st = gr_data_convert_idx("mnist", from, out, force, true, &err);
    } else if (key == 'c') {
        if (!from) gr_usage_error("data cifar10: --from DIR (the folder of data_batch_1.bin .. test_batch.bin) is "
                                  "required%s", "");
        st = gr_data_convert_cifar10(from, GR_CIFAR10_BATCH_RECORDS, out, force, true, &err);
    } else if (key == 's') {
        if (!val[GR_DOPT_N] || !val[GR_DOPT_SHAPE])
            gr_usage_error("data synthetic: --n N and --shape C,H,W are required%s", "");
        gr_synthetic_config cfg = {.n = gr_data_int("--n", val[GR_DOPT_N], NULL), .test = -1, .classes = 10};
        char *p;
        int64_t *shape[3] = {&cfg.c, &cfg.h, &cfg.w};
        const char *s = val[GR_DOPT_SHAPE];
        for (int k = 0; k < 3; k++) {
            *shape[k] = gr_data_int("--shape", s, &p);
            if (*p != (k < 2 ? ',' : '\0')) gr_usage_error("data synthetic: --shape: expected C,H,W, got '%s'",
                                                           val[GR_DOPT_SHAPE]);
            s = p + 1;
        }
        if (val[GR_DOPT_CLASSES]) cfg.classes = gr_data_int("--classes", val[GR_DOPT_CLASSES], NULL);
        if (val[GR_DOPT_TEST]) cfg.test = gr_data_count("--test", val[GR_DOPT_TEST]);
        if (val[GR_DOPT_SEED]) cfg.seed = gr_data_seed(val[GR_DOPT_SEED]);
        st = gr_data_convert_synthetic(&cfg, out, force, true, &err);
    } else if (key == 't') {
        st = gr_data_csv(from, out, val, force, &err);
    } else if (key == 'x') {
        st = gr_data_text(files, nfiles, out, val, force, &err);
    } else if (key == 'k') {
        st = gr_data_tokens(from, out, val, force, &err);
    } else if (key == 'n') {
        st = gr_data_imagenet(from, out, val, restart, force, &rep, &err);
    } else {
        st = gr_data_imagefolder(from, out, val, restart, force, &rep, &err);
    }
    free(files);
    if (st) gr_die(st, err.msg);
    for (int64_t i = 0; i < rep.nwarnings; i++) fprintf(stderr, "gpurun data: warning: %s\n", rep.warnings[i]);
    for (int64_t i = 0; i < rep.nbad; i++)
        fprintf(stderr, "gpurun data: skipped %s: %s\n", rep.bad[i].path, rep.bad[i].why);
    if (rep.nbad > 0)
        fprintf(stderr, "gpurun data: skipped %lld images that could not be decoded (--on-error skip); %lld samples "
                        "written\n", (long long)rep.nbad, (long long)rep.samples);
    if (rep.skipped > 0)
        fprintf(stderr, "gpurun data: skipped %lld files that are not JPEG or PNG\n", (long long)rep.skipped);
    gr_imagefolder_report_free(&rep);
    printf("wrote %s\n", out);
    return 0;
}

