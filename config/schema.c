/* schema.c — the job-spec schema table (schema.h, DESIGN 1.4, schema v1):
 * key, type, bounds, default, target field, and for the keys this version
 * accepts but does not honour in full, the values it does. Loading, --set
 * and the dump all read this one table; only rules that relate two keys are
 * code (spec_load.c). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "schema.h"
#include "spec_input.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const char *gr_spec_check_name(const char *s) { return gr_spec_name_problem(s); }

static const char *gr_spec_check_device(const char *s) {
    if (!strcmp(s, "auto") || !strcmp(s, "cpu") || !strcmp(s, "cuda")) return NULL;
    if (!strncmp(s, "cuda:", 5) && gr_cfg_is_digits(s + 5) && strlen(s + 5) <= 4) return NULL;
    return "expected auto, cpu, cuda or cuda:N";
}

static const char *gr_spec_check_group(const char *s) {
    return s[0] == '/' ? NULL : "an HDF5 group must start with '/'";
}

#define GR_OFF(f) offsetof(gr_job_spec, f)
#define GR_FSZ(f) sizeof(((gr_job_spec *)0)->f)
#define GR_BIG ((int64_t)1 << 50)

#define SECTION(p, fl) {.path = p, .type = GR_ST_SECTION, .flags = fl}
#define INT(p, fl, lo_, hi_, d, f) \
    {.path = p, .type = GR_ST_INT, .flags = fl, .ilo = lo_, .ihi = hi_, .def = d, .off = GR_OFF(f)}
#define FLOAT(p, fl, lo_, hi_, d, w, f) \
    {.path = p, .type = GR_ST_FLOAT, .flags = fl, .lo = lo_, .hi = hi_, .def = d, .when = w, .off = GR_OFF(f)}
#define BOOL(p, d, w, f) {.path = p, .type = GR_ST_BOOL, .def = d, .when = w, .off = GR_OFF(f)}
#define STR(p, fl, d, chk, f) \
    {.path = p, .type = GR_ST_STR, .flags = fl, .def = d, .check = chk, .off = GR_OFF(f), .size = GR_FSZ(f)}
#define ENUM(p, ch, d, f) {.path = p, .type = GR_ST_ENUM, .choices = ch, .def = d, .off = GR_OFF(f)}
#define ENUMSTR(p, ch, d, f) \
    {.path = p, .type = GR_ST_ENUM, .choices = ch, .def = d, .off = GR_OFF(f), .size = GR_FSZ(f)}
#define FLOATS(p, fl, lo_, hi_, d, w, f, nf) \
    {.path = p, .type = GR_ST_FLOATS, .flags = fl, .lo = lo_, .hi = hi_, .def = d, .when = w, \
     .off = GR_OFF(f), .size = GR_FSZ(f) / sizeof(double), .n_off = GR_OFF(nf)}
#define TREE(p, fl, f) {.path = p, .type = GR_ST_TREE, .flags = fl, .off = GR_OFF(f)}
/* a directory path: at most GR_DIR_MAX bytes, whatever its field holds */
#define DIR(p, f) {.path = p, .type = GR_ST_STR, .off = GR_OFF(f), .size = GR_DIR_MAX + 1}
_Static_assert(GR_DIR_MAX < GR_FSZ(checkpoint.dir) && GR_DIR_MAX < GR_FSZ(log.dir), "directory fields hold GR_DIR_MAX");

/* Ordered so that every section is followed by its own rows (gr_spec_dump
 * writes them in this order). */
const gr_spec_row gr_spec_rows[] = {
    STR("name", 0, NULL, gr_spec_check_name, name),
    INT("seed", GR_SF_U64, 0, INT64_MAX, "0", seed),
    STR("device", 0, "auto", gr_spec_check_device, device),
    ENUM("precision", "fp32|tf32|fp16|bf16", "fp32", precision),
    {.path = "loss_scale", .type = GR_ST_LOSS_SCALE, .flags = GR_SF_LOX, .lo = 0, .hi = INFINITY},
    {.path = "deterministic", .type = GR_ST_BOOL, .def = "false", .off = GR_OFF(deterministic),
     .honoured = "false", .unhonoured_why = "this version does not enforce deterministic algorithms (leave it false)"},
    BOOL("cuda_graph", "true", NULL, cuda_graph),
    BOOL("cudnn_benchmark", "false", NULL, cudnn_benchmark),

    SECTION("data", 0),
    SECTION("data.train", 0),
    STR("data.train.path", GR_SF_REQ, NULL, NULL, data.train.path),
    STR("data.train.group", 0, "/", gr_spec_check_group, data.train.group),
    SECTION("data.val", 0),
    STR("data.val.path", GR_SF_REQ, NULL, NULL, data.val.path),
    STR("data.val.group", 0, "/", gr_spec_check_group, data.val.group),
    BOOL("data.shuffle", "true", NULL, data.shuffle),
    INT("data.prefetch", 0, 1, 64, "4", data.prefetch),
    INT("data.workers", GR_SF_AUTO_NEG, 0, 256, "auto", data.workers),
    SECTION("data.augment", 0),
    SECTION("data.augment.crop", 0),
    INT("data.augment.crop.size", GR_SF_REQ, 1, 65536, NULL, data.crop_size),
    ENUM("data.augment.crop.type", "random|resized", "random", data.crop_type),
    INT("data.augment.crop.padding", 0, 0, 65536, "0", data.crop_padding),
    {.path = "data.augment.crop.scale", .type = GR_ST_FLOATS, .flags = GR_SF_LOX | GR_SF_FIXED, .lo = 0, .hi = 1,
     .def = "[0.08, 1.0]", .when = "resized", .off = GR_OFF(data.crop_scale), .size = 2},
    {.path = "data.augment.crop.ratio", .type = GR_ST_FLOATS, .flags = GR_SF_LOX | GR_SF_FIXED, .lo = 0,
     .hi = INFINITY, .def = "[0.75, 1.3333333333333333]", .when = "resized", .off = GR_OFF(data.crop_ratio),
     .size = 2},
    BOOL("data.augment.flip", "false", NULL, data.flip),
    SECTION("data.normalize", 0),
    FLOATS("data.normalize.mean", GR_SF_REQ, -INFINITY, INFINITY, NULL, NULL, data.mean, data.n_mean),
    FLOATS("data.normalize.std", GR_SF_REQ | GR_SF_LOX, 0, INFINITY, NULL, NULL, data.std, data.n_std),
    ENUMSTR("data.cache", "auto|memory|none", "auto", data.cache),
    ENUMSTR("data.decode", "auto|cpu|gpu", "auto", data.decode),
    INT("data.seq_len", 0, 1, 1 << 24, NULL, data.seq_len),
    ENUM("data.on_error", "fail|skip", "fail", data.on_error),

    SECTION("model", GR_SF_REQ),
    {.path = "model.input", .type = GR_ST_INTS, .ilo = 1, .ihi = 1 << 30, .off = GR_OFF(model.input),
     .size = 4, .n_off = GR_OFF(model.n_input)},
    TREE("model.blocks", GR_SF_MAP, model.blocks),
    TREE("model.layers", GR_SF_REQ | GR_SF_SEQ, model.layers),
    TREE("model.inputs", GR_SF_SEQ, model.inputs),
    TREE("model.targets", GR_SF_SEQ, model.targets),
    STR("model.init_from", 0, NULL, NULL, model.init_from),

    SECTION("train", GR_SF_REQ),
    INT("train.batch_size", GR_SF_REQ, 1, GR_BIG, NULL, train.batch_size),
    INT("train.micro_batch", GR_SF_AUTO, 1, GR_BIG, NULL, train.micro_batch),
    INT("train.epochs", 0, 1, 1000000000, NULL, train.epochs),
    INT("train.steps", 0, 1, GR_BIG, NULL, train.steps),
    SECTION("train.optimizer", GR_SF_REQ),
    ENUM("train.optimizer.type", "sgd|adamw", "sgd", train.optimizer.type),
    FLOAT("train.optimizer.lr", GR_SF_REQ | GR_SF_LOX, 0, INFINITY, NULL, NULL, train.optimizer.lr),
    FLOAT("train.optimizer.momentum", GR_SF_HIX, 0, 1, "0", "sgd", train.optimizer.momentum),
    BOOL("train.optimizer.nesterov", "false", "sgd", train.optimizer.nesterov),
    FLOAT("train.optimizer.weight_decay", 0, 0, INFINITY, "0", NULL, train.optimizer.weight_decay),
    {.path = "train.optimizer.betas", .type = GR_ST_FLOATS, .flags = GR_SF_HIX | GR_SF_FIXED, .lo = 0, .hi = 1,
     .def = "[0.9, 0.999]", .when = "adamw", .off = GR_OFF(train.optimizer.betas), .size = 2},
    FLOAT("train.optimizer.eps", GR_SF_LOX, 0, INFINITY, "1e-8", "adamw", train.optimizer.eps),
    ENUM("train.optimizer.decay", "all|matrices", "all", train.optimizer.decay),
    TREE("train.optimizer.groups", GR_SF_SEQ, train.optimizer.groups),
    SECTION("train.schedule", 0),
    ENUM("train.schedule.type", "constant|step|multistep|cosine|linear", "constant", train.schedule.type),
    FLOAT("train.schedule.warmup_epochs", 0, 0, INFINITY, "0", NULL, train.schedule.warmup_epochs),
    INT("train.schedule.warmup_steps", 0, 0, GR_BIG, "0", train.schedule.warmup_steps),
    FLOAT("train.schedule.step_size", GR_SF_LOX, 0, INFINITY, "30", "step", train.schedule.step_size),
    FLOAT("train.schedule.gamma", GR_SF_LOX, 0, 1, "0.1", "step|multistep", train.schedule.gamma),
    FLOATS("train.schedule.milestones", 0, 0, INFINITY, NULL, "multistep", train.schedule.milestones,
           train.schedule.n_milestones),
    FLOAT("train.schedule.min_lr", 0, 0, INFINITY, "0", "cosine|linear", train.schedule.min_lr),
    SECTION("train.loss", 0),
    ENUMSTR("train.loss.type", "softmax_cross_entropy|mse|bce_with_logits", "softmax_cross_entropy", train.loss),
    FLOAT("train.loss.label_smoothing", GR_SF_HIX, 0, 1, "0", NULL, train.label_smoothing),
    INT("train.loss.classes", 0, 1, 1 << 24, NULL, train.loss_classes),
    TREE("train.metrics", GR_SF_LIST, train.metrics),
    FLOAT("train.grad_clip", 0, 0, INFINITY, "0", NULL, train.grad_clip),
    ENUM("train.recompute", "none|blocks", "none", train.recompute_blocks),

    SECTION("parallel", 0),
    INT("parallel.data", GR_SF_AUTO, 0, 1 << 20, "auto", parallel.data),
    ENUMSTR("parallel.backend", "auto|nccl|mpi|none", "auto", parallel.backend),
    /* at most 1 TiB: its float count (buckets.c) stays an int64_t */
    FLOAT("parallel.bucket_mb", 0, 0, 1048576, "25", NULL, parallel.bucket_mb),
    FLOAT("parallel.timeout_s", GR_SF_LOX, 0, INFINITY, "600", NULL, parallel.timeout_s),
    BOOL("parallel.sync_batchnorm", "false", NULL, parallel.sync_batchnorm),
    INT("parallel.pipeline", 0, 1, 4096, "1", parallel.pipeline),
    INT("parallel.tensor", 0, 1, 1 << 20, "1", parallel.tensor),
    INT("parallel.microbatches", 0, 1, 1 << 20, NULL, parallel.microbatches),
    ENUM("parallel.schedule", "gpipe|1f1b", "1f1b", parallel.schedule),
    /* `auto` or a non-empty list of names (gr_spec_cross); auto is stored as NULL */
    TREE("parallel.stages", 0, parallel.stages),

    SECTION("checkpoint", 0),
    DIR("checkpoint.dir", checkpoint.dir),
    INT("checkpoint.every_steps", 0, 0, GR_BIG, "0", checkpoint.every_steps),
    FLOAT("checkpoint.every_minutes", 0, 0, INFINITY, "10", NULL, checkpoint.every_minutes),
    INT("checkpoint.keep", 0, 1, 1000000, "3", checkpoint.keep),
    FLOAT("checkpoint.signal_deadline_s", GR_SF_LOX, 0, 86400, "20", NULL, checkpoint.signal_deadline_s),

    SECTION("eval", 0),
    INT("eval.every_epochs", 0, 0, 1000000000, "1", eval.every_epochs),
    INT("eval.every_steps", 0, 0, GR_BIG, "0", eval.every_steps),

    SECTION("log", 0),
    INT("log.every_steps", 0, 1, GR_BIG, "50", log.every_steps),
    DIR("log.dir", log.dir),
    BOOL("log.tensorboard", "true", NULL, log.tensorboard),
};

const size_t gr_spec_n_rows = GR_ARRAY_LEN(gr_spec_rows);

_Static_assert(sizeof(gr_precision) == sizeof(int) && sizeof(gr_optim_type) == sizeof(int) &&
                   sizeof(gr_sched_type) == sizeof(int),
               "enum-valued rows are stored as int");

const gr_spec_row *gr_spec_row_find(const char *path) {
    for (size_t i = 0; i < gr_spec_n_rows; i++)
        if (!strcmp(gr_spec_rows[i].path, path)) return &gr_spec_rows[i];
    return NULL;
}

bool gr_spec_row_is_child(const gr_spec_row *r, const char *prefix) {
    size_t n = strlen(prefix);
    if (n && (strncmp(r->path, prefix, n) != 0 || r->path[n] != '.')) return false;
    return !strchr(r->path + (n ? n + 1 : 0), '.');
}

const char *gr_spec_row_leaf(const gr_spec_row *r) {
    const char *d = strrchr(r->path, '.');
    return d ? d + 1 : r->path;
}

const char *gr_spec_choice(const char *choices, int i, char *buf, size_t cap) {
    const char *s = choices;
    for (; i > 0 && s; i--) {
        s = strchr(s, '|');
        if (s) s++;
    }
    if (!s) return "?";
    size_t n = strcspn(s, "|");
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

int gr_spec_choice_index(const char *choices, const char *v) {
    char buf[64];
    for (int i = 0;; i++) {
        const char *c = gr_spec_choice(choices, i, buf, sizeof buf);
        if (!strcmp(c, "?")) return -1;
        if (!strcmp(c, v)) return i;
    }
}

void gr_spec_suggest(const char *prefix, const char *key, char *buf, size_t cap) {
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < gr_spec_n_rows; i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!gr_spec_row_is_child(r, prefix)) continue;
        size_t d = (size_t)gr_edit_distance(key, gr_spec_row_leaf(r));
        if (d < best_d) best_d = d, best = gr_spec_row_leaf(r);
    }
    size_t klen = strlen(key);
    if (best && best_d < klen && (best_d <= 1 || (best_d == 2 && GR_MAX(klen, strlen(best)) >= 4))) {
        snprintf(buf, cap, " (did you mean '%s'?)", best);
        return;
    }
    size_t len = (size_t)snprintf(buf, cap, " (allowed:");
    bool first = true;
    for (size_t i = 0; i < gr_spec_n_rows && len < cap; i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!gr_spec_row_is_child(r, prefix)) continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s %s", first ? "" : ",", gr_spec_row_leaf(r));
        first = false;
    }
    if (len < cap) snprintf(buf + len, cap - len, ")");
}

void gr_spec_join(char *buf, size_t cap, const char *prefix, const char *key) {
    snprintf(buf, cap, "%s%s%s", prefix, prefix[0] ? "." : "", key);
}

const gr_cfg *gr_spec_node(const gr_cfg *root, const char *path) {
    char buf[GR_CFG_KEY_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    const gr_cfg *n = root;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && n; tok = strtok_r(NULL, ".", &save))
        n = gr_cfg_get(n, tok);
    return gr_cfg_is_null(n) ? NULL : n;
}

const char *gr_spec_type_of(const gr_job_spec *spec, const gr_spec_row *r, char *buf, size_t cap) {
    char path[GR_CFG_KEY_MAX];
    snprintf(path, sizeof path, "%.*s.type", (int)(gr_spec_row_leaf(r) - 1 - r->path), r->path);
    const gr_spec_row *t = gr_spec_row_find(path);
    GR_ASSERT(t && t->type == GR_ST_ENUM && t->size == 0);
    int v;
    memcpy(&v, (const char *)spec + t->off, sizeof v);
    return gr_spec_choice(t->choices, v, buf, cap);
}

bool gr_spec_when(const gr_job_spec *spec, const gr_spec_row *r) {
    if (!r->when) return true;
    char buf[64];
    return gr_spec_choice_index(r->when, gr_spec_type_of(spec, r, buf, sizeof buf)) >= 0;
}

const char *gr_precision_name(gr_precision p) {
    static const char *const names[] = {"fp32", "tf32", "fp16", "bf16"};
    return (unsigned)p < GR_ARRAY_LEN(names) ? names[p] : "?";
}

const char *gr_optim_name(gr_optim_type t) {
    static const char *const names[] = {"sgd", "adamw"};
    return (unsigned)t < GR_ARRAY_LEN(names) ? names[t] : "?";
}

const char *gr_sched_name(gr_sched_type t) {
    static const char *const names[] = {"constant", "step", "multistep", "cosine", "linear"};
    return (unsigned)t < GR_ARRAY_LEN(names) ? names[t] : "?";
}
