/* spec_load.c — the job spec's loading (spec.h): the file's tree, with
 * the `--set` overrides grafted in (spec_set.c), is walked against the
 * schema table (schema.c): unknown keys, wrong types and values out of
 * range are errors at file:line:col; the typed gr_job_spec gets the table's
 * defaults, then the rules that relate keys to each other, then the check
 * that every value given is one this version honours.
 *
 * Every error is GR_ERR_USAGE with "file:line:col: dotted.key: message". */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "schema.h"
#include "spec_input.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- typed setters ---- */

static void *gr_spec_field(gr_job_spec *spec, const gr_spec_row *r) { return (char *)spec + r->off; }

static gr_status gr_spec_set_string(const gr_spec_row *r, const gr_cfg *n, const char *key, char *dst,
                                    gr_error *err) {
    char got[300];
    if (n->kind != GR_CFG_SCALAR)
        return gr_cfg_error(err, n, key, "expected a string, got %s", gr_cfg_got(n, got, sizeof got));
    if (strlen(n->scalar) >= r->size)
        return gr_cfg_error(err, n, key, "%zu bytes long; the limit is %zu bytes", strlen(n->scalar), r->size - 1);
    const char *why = r->check ? r->check(n->scalar) : NULL;
    if (why) return gr_cfg_error(err, n, key, "%s, got '%s'", why, gr_cfg_escape(n->scalar, got, sizeof got));
    memcpy(dst, n->scalar, strlen(n->scalar) + 1);
    return GR_OK;
}

static gr_status gr_spec_set(const gr_spec_row *r, const gr_cfg *n, const char *key, gr_job_spec *spec,
                             gr_error *err) {
    void *dst = gr_spec_field(spec, r);
    char got[300];
    gr_status st = GR_OK;
    switch (r->type) {
    case GR_ST_SECTION:
        return gr_error_set(err, GR_ERR_INTERNAL, "internal error (a bug): %s set as a value", key);
    case GR_ST_INT: {
        int64_t v = 0;
        bool plain = n->kind == GR_CFG_SCALAR && !n->quoted;
        const bool autos = r->flags & (GR_SF_AUTO | GR_SF_AUTO_NEG);
        if (autos && plain && !strcmp(n->scalar, "auto")) {
            v = (r->flags & GR_SF_AUTO_NEG) ? -1 : 0;
        } else if (autos &&
                   !(plain && gr_cfg_is_digits(n->scalar + (n->scalar[0] == '+' || n->scalar[0] == '-')))) {
            return gr_cfg_error(err, n, key, "expected auto or an integer, got %s", gr_cfg_got(n, got, sizeof got));
        } else if (autos) { /* a number out of range is told that auto is there too */
            if ((st = gr_cfg_int_ex(n, key, INT64_MIN, INT64_MAX, &v, err))) return st;
            if (v < r->ilo || v > r->ihi)
                return gr_cfg_error(err, n, key, "expected auto or an integer %s %" PRId64 ", got %s",
                                    v < r->ilo ? ">=" : "<=", v < r->ilo ? r->ilo : r->ihi, n->scalar);
        } else if ((st = gr_cfg_int_ex(n, key, r->ilo, r->ihi, &v, err))) {
            return st;
        }
        if (r->flags & GR_SF_U64) {
            uint64_t u = (uint64_t)v;
            memcpy(dst, &u, sizeof u);
        } else {
            memcpy(dst, &v, sizeof v);
        }
        return GR_OK;
    }
    case GR_ST_FLOAT: {
        double v;
        if ((st = gr_cfg_float_ex(n, key, r->lo, r->hi, r->flags, &v, err))) return st;
        memcpy(dst, &v, sizeof v);
        return GR_OK;
    }
    case GR_ST_BOOL: {
        bool v;
        if ((st = gr_cfg_bool(n, key, &v, err))) return st;
        memcpy(dst, &v, sizeof v);
        return GR_OK;
    }
    case GR_ST_STR:
        return gr_spec_set_string(r, n, key, dst, err);
    case GR_ST_ENUM: {
        int i = n->kind == GR_CFG_SCALAR ? gr_spec_choice_index(r->choices, n->scalar) : -1;
        if (i < 0) {
            char list[256], buf[64];
            size_t len = 0;
            for (int k = 0; len < sizeof list; k++) {
                const char *c = gr_spec_choice(r->choices, k, buf, sizeof buf);
                if (!strcmp(c, "?")) break;
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", k ? ", " : "", c);
            }
            return gr_cfg_error(err, n, key, "expected one of %s, got %s", list, gr_cfg_got(n, got, sizeof got));
        }
        if (r->size) {
            memcpy(dst, n->scalar, strlen(n->scalar) + 1);
        } else {
            memcpy(dst, &i, sizeof i);
        }
        return GR_OK;
    }
    case GR_ST_FLOATS:
    case GR_ST_INTS: {
        if (n->kind != GR_CFG_SEQ)
            return gr_cfg_error(err, n, key, "expected a list, got %s", gr_cfg_got(n, got, sizeof got));
        bool fixed = r->flags & GR_SF_FIXED;
        if (fixed && (size_t)n->n != r->size)
            return gr_cfg_error(err, n, key, "expected a list of %zu numbers, got %d", r->size, n->n);
        if (!fixed && (n->n < 1 || (size_t)n->n > r->size))
            return gr_cfg_error(err, n, key, "expected a list of 1 to %zu numbers, got %d", r->size, n->n);
        for (int i = 0; i < n->n; i++) {
            char ikey[GR_CFG_KEY_MAX];
            snprintf(ikey, sizeof ikey, "%s[%d]", key, i);
            if (r->type == GR_ST_FLOATS) {
                double v;
                if ((st = gr_cfg_float_ex(n->items[i], ikey, r->lo, r->hi, r->flags, &v, err))) return st;
                ((double *)dst)[i] = v;
            } else {
                int64_t v;
                if ((st = gr_cfg_int_ex(n->items[i], ikey, r->ilo, r->ihi, &v, err))) return st;
                ((int64_t *)dst)[i] = v;
            }
        }
        if (!fixed) memcpy((char *)spec + r->n_off, &n->n, sizeof n->n);
        return GR_OK;
    }
    case GR_ST_TREE:
        if ((r->flags & GR_SF_SEQ) && (n->kind != GR_CFG_SEQ || n->n == 0))
            return gr_cfg_error(err, n, key, "expected a non-empty list, got %s",
                                n->kind == GR_CFG_SEQ ? "an empty list" : gr_cfg_got(n, got, sizeof got));
        if ((r->flags & GR_SF_LIST) && n->kind != GR_CFG_SEQ)
            return gr_cfg_error(err, n, key, "expected a list, got %s", gr_cfg_got(n, got, sizeof got));
        if ((r->flags & GR_SF_MAP) && n->kind != GR_CFG_MAP)
            return gr_cfg_error(err, n, key, "expected a map, got %s", gr_cfg_got(n, got, sizeof got));
        memcpy(dst, &n, sizeof n);
        return GR_OK;
    case GR_ST_LOSS_SCALE:
        if (n->kind == GR_CFG_SCALAR && !strcmp(n->scalar, "dynamic")) {
            spec->loss_scale_dynamic = true;
            spec->loss_scale = 1;
            return GR_OK;
        }
        if (n->kind == GR_CFG_SCALAR && !strcmp(n->scalar, "none")) { /* DESIGN 1.4: no scaling */
            spec->loss_scale_dynamic = false;
            spec->loss_scale = 1;
            return GR_OK;
        }
        if (n->kind == GR_CFG_SCALAR && !n->quoted) {
            double v;
            if (gr_cfg_parse_double(n->scalar, &v) != GR_NUM_NOT) {
                if ((st = gr_cfg_float_ex(n, key, r->lo, r->hi, r->flags, &v, err))) return st;
                spec->loss_scale_dynamic = false;
                spec->loss_scale = v;
                return GR_OK;
            }
        }
        return gr_cfg_error(err, n, key, "expected dynamic, none or a number, got %s", gr_cfg_got(n, got, sizeof got));
    }
    return gr_error_set(err, GR_ERR_INTERNAL, "internal error (a bug): %s has no type", key);
}

/* ---- the walk ---- */

static gr_status gr_spec_walk(const char *prefix, const gr_cfg *map, gr_job_spec *spec, gr_error *err) {
    char got[300];
    if (map->kind != GR_CFG_MAP)
        return gr_cfg_error(err, map, prefix[0] ? prefix : "job spec", "expected a map, got %s",
                            gr_cfg_got(map, got, sizeof got));
    for (int i = 0; i < map->n; i++) {
        char key[GR_CFG_KEY_MAX];
        gr_spec_join(key, sizeof key, prefix, map->keys[i]);
        const gr_spec_row *r = gr_spec_row_find(key);
        if (!r || !gr_spec_row_is_child(r, prefix)) {
            char hint[GR_ERROR_MSG_MAX / 2];
            gr_spec_suggest(prefix, map->keys[i], hint, sizeof hint);
            return gr_cfg_key_error(err, map, i, key, "unknown key%s", hint);
        }
        const gr_cfg *v = map->items[i];
        if (gr_cfg_is_null(v)) continue; /* `key:` with no value = not given */
        gr_status st = r->type == GR_ST_SECTION ? gr_spec_walk(key, v, spec, err) : gr_spec_set(r, v, key, spec, err);
        if (st) return st;
    }
    for (size_t i = 0; i < gr_spec_n_rows; i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!(r->flags & GR_SF_REQ) || !gr_spec_row_is_child(r, prefix)) continue;
        if (gr_cfg_is_null(gr_cfg_get(map, gr_spec_row_leaf(r))))
            return gr_cfg_error(err, map, r->path, "required key missing");
    }
    return GR_OK;
}

static gr_status gr_spec_defaults(gr_job_spec *spec, gr_error *err) {
    for (size_t i = 0; i < gr_spec_n_rows; i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!r->def) continue;
        gr_cfg *n;
        gr_status st = gr_cfg_parse_text(r->def, "<default>", 1, 1, &n, err);
        if (!st) st = gr_spec_set(r, n, r->path, spec, err);
        gr_cfg_free(n);
        if (st) {
            gr_error_prefix(err, "internal error (a bug): bad default in the schema table: ");
            err->status = GR_ERR_INTERNAL;
            return GR_ERR_INTERNAL;
        }
    }
    return GR_OK;
}

/* Rules that relate keys to each other; runs after the walk. */
/* parallel.stages: `auto` (stored as NULL) or a non-empty list of names; the
 * names are resolved against the built model by graph/stages.c. */
static gr_status gr_spec_stages(gr_job_spec *spec, gr_error *err) {
    const gr_cfg *n = spec->parallel.stages;
    char got[64];
    if (!n) return GR_OK;
    if (n->kind == GR_CFG_SCALAR && strcmp(n->scalar, "auto") == 0) {
        spec->parallel.stages = NULL;
        return GR_OK;
    }
    if (n->kind != GR_CFG_SEQ || n->n == 0)
        return gr_cfg_error(err, n, "parallel.stages", "expected auto or a non-empty list of the layer or block-use "
                            "names where stages 2.. begin, got %s",
                            n->kind == GR_CFG_SEQ ? "an empty list" : gr_cfg_got(n, got, sizeof got));
    for (int i = 0; i < n->n; i++)
        if (n->items[i]->kind != GR_CFG_SCALAR) {
            char key[GR_CFG_KEY_MAX];
            snprintf(key, sizeof key, "parallel.stages[%d]", i);
            return gr_cfg_error(err, n->items[i], key, "expected a layer or block-use name, got %s",
                                gr_cfg_got(n->items[i], got, sizeof got));
        }
    return GR_OK;
}

static gr_status gr_spec_cross(gr_job_spec *spec, gr_error *err) {
    const gr_cfg *root = spec->root;
    char buf[64];
    for (size_t i = 0; i < gr_spec_n_rows; i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        const gr_cfg *n = r->when ? gr_spec_node(root, r->path) : NULL;
        if (n && !gr_spec_when(spec, r)) {
            char tpath[GR_CFG_KEY_MAX];
            snprintf(tpath, sizeof tpath, "%.*s.type", (int)(gr_spec_row_leaf(r) - 1 - r->path), r->path);
            char w[64];
            snprintf(w, sizeof w, "%s", r->when);
            for (char *c = w; *c; c++)
                if (*c == '|') *c = '/';
            return gr_cfg_error(err, n, r->path, "only valid when %s is %s (it is %s)", tpath, w,
                                gr_spec_type_of(spec, r, buf, sizeof buf));
        }
    }

    const gr_cfg *mb = gr_spec_node(root, "train.micro_batch");
    if (!mb) {
        spec->train.micro_batch = spec->train.batch_size;
    } else if (spec->train.micro_batch == 0) {
        /* auto: the runner picks the largest that fits the device (runner/memfit.h) */
    } else if (spec->train.micro_batch > spec->train.batch_size) {
        return gr_cfg_error(err, mb, "train.micro_batch", "must be <= train.batch_size (%" PRId64 "), got %" PRId64,
                            spec->train.batch_size, spec->train.micro_batch);
    } else if (spec->train.batch_size % spec->train.micro_batch) {
        return gr_cfg_error(err, mb, "train.micro_batch", "must divide train.batch_size (%" PRId64 "), got %" PRId64,
                            spec->train.batch_size, spec->train.micro_batch);
    }
    if (!spec->train.epochs && !spec->train.steps)
        return gr_cfg_error(err, gr_spec_node(root, "train"), "train", "give epochs or steps (or both)");
    const gr_status pst = gr_spec_stages(spec, err);
    if (pst) return pst;

    /* weight_decay's default is the optimizer's in PyTorch: SGD 0, AdamW 0.01 */
    if (spec->train.optimizer.type == GR_OPTIM_ADAMW && !gr_spec_node(root, "train.optimizer.weight_decay"))
        spec->train.optimizer.weight_decay = 0.01;

    {
        gr_io_decl io[GR_MAX_IO];
        int nio;
        gr_status st = gr_io_decls_read(spec, false, io, &nio, err);
        if (!st) st = gr_io_decls_read(spec, true, io, &nio, err);
        if (st) return st;
        if (spec->model.inputs && !spec->model.targets)
            return gr_cfg_error(err, spec->model.inputs, "model.inputs", "declared inputs need model.targets too "
                                "(the fields the loss compares the model's output with)");
        if (spec->data.seq_len && !spec->model.inputs)
            return gr_cfg_error(err, gr_spec_node(root, "data.seq_len"), "data.seq_len", "token windows are read by "
                                "name: declare model.inputs: [tokens] and model.targets: [targets] (a window's "
                                "first seq_len tokens and the next token of each)");
    }
    {
        gr_param_group *pg;
        int npg;
        gr_status st = gr_param_groups_read(spec, &pg, &npg, err);
        free(pg);
        if (st) return st;
    }

    const gr_cfg *nest = gr_spec_node(root, "train.optimizer.nesterov");
    if (nest && spec->train.optimizer.nesterov && !(spec->train.optimizer.momentum > 0))
        return gr_cfg_error(err, nest, "train.optimizer.nesterov", "needs train.optimizer.momentum > 0");

    const gr_sched_spec *s = &spec->train.schedule;
    if (s->type == GR_SCHED_MULTISTEP && s->n_milestones == 0)
        return gr_cfg_error(err, gr_spec_node(root, "train.schedule"), "train.schedule.milestones",
                            "required for type multistep");
    for (int i = 1; i < s->n_milestones; i++)
        if (!(s->milestones[i] > s->milestones[i - 1])) {
            char key[64], a[40], b[40];
            snprintf(key, sizeof key, "train.schedule.milestones[%d]", i);
            gr_fmt_double(a, sizeof a, s->milestones[i - 1]);
            gr_fmt_double(b, sizeof b, s->milestones[i]);
            return gr_cfg_error(err, gr_spec_node(root, "train.schedule.milestones")->items[i], key,
                                "milestones must increase, got %s after %s", b, a);
        }

    if (spec->data.crop_type == 1) {
        const gr_cfg *pad = gr_spec_node(root, "data.augment.crop.padding");
        if (pad && spec->data.crop_padding > 0)
            return gr_cfg_error(err, pad, "data.augment.crop.padding",
                                "applies to crop type random only (type resized takes scale and ratio)");
        const char *names[2] = {"data.augment.crop.scale", "data.augment.crop.ratio"};
        const double *v[2] = {spec->data.crop_scale, spec->data.crop_ratio};
        for (int i = 0; i < 2; i++)
            if (v[i][0] > v[i][1]) {
                char a[40], b[40];
                gr_fmt_double(a, sizeof a, v[i][0]);
                gr_fmt_double(b, sizeof b, v[i][1]);
                return gr_cfg_error(err, gr_spec_node(root, names[i]), names[i],
                                    "expected [low, high] with low <= high, got [%s, %s]", a, b);
            }
    }
    if (spec->data.n_mean != spec->data.n_std)
        return gr_cfg_error(err, gr_spec_node(root, "data.normalize.std"), "data.normalize.std",
                            "has %d values but data.normalize.mean has %d", spec->data.n_std, spec->data.n_mean);

    if (!gr_spec_node(root, "loss_scale")) {
        spec->loss_scale_dynamic = spec->precision == GR_PREC_FP16;
        spec->loss_scale = 1;
    }
    if (!gr_spec_node(root, "name")) {
        const char *base = strrchr(spec->file, '/');
        base = base ? base + 1 : spec->file;
        size_t len = strlen(base);
        if (len > 5 && !strcmp(base + len - 5, ".yaml")) len -= 5;
        else if (len > 4 && !strcmp(base + len - 4, ".yml")) len -= 4;
        char stem[GR_PATH_MAX], shown[300];
        memcpy(stem, base, len);
        stem[len] = 0;
        const char *why = gr_spec_name_problem(stem);
        if (why)
            return gr_error_set(err, GR_ERR_USAGE, "%s: name: not given, and the file name's stem '%s' cannot be "
                                "the run's name (a name %s); set name: in the spec, or --set name=...",
                                spec->file, gr_cfg_escape(stem, shown, sizeof shown), why);
        memcpy(spec->name, stem, len + 1);
    }
    return GR_OK;
}

/* Values schema v1 accepts but this version does not honour (the rows'
 * `honoured`): refused at the value, so that nobody believes a run has what
 * it asked for when it has not. */
static gr_status gr_spec_honoured(const gr_job_spec *spec, gr_error *err) {
    for (size_t i = 0; i < gr_spec_n_rows; i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        const gr_cfg *n = r->honoured ? gr_spec_node(spec->root, r->path) : NULL;
        if (!n) continue; /* not given: the default, which is honoured */
        const char *p = (const char *)spec + r->off;
        char buf[64];
        const char *v;
        if (r->type == GR_ST_BOOL) {
            bool b;
            memcpy(&b, p, sizeof b);
            v = b ? "true" : "false";
        } else if (r->type == GR_ST_ENUM && r->size) {
            v = p;
        } else if (r->type == GR_ST_ENUM) {
            int k;
            memcpy(&k, p, sizeof k);
            v = gr_spec_choice(r->choices, k, buf, sizeof buf);
        } else {
            return gr_error_set(err, GR_ERR_INTERNAL, "internal error (a bug): %s: honoured values on a row that "
                                "is neither bool nor enum", r->path);
        }
        if (gr_spec_choice_index(r->honoured, v) < 0)
            return gr_cfg_error(err, n, r->path, "%s is not supported yet: %s", v, r->unhonoured_why);
    }
    return GR_OK;
}

/* ---- entry points ---- */

gr_status gr_spec_load(const char *path, const char *const *sets, int nsets, gr_job_spec *out, gr_error *err) {
    gr_error local;
    if (!err) err = &local;
    memset(out, 0, sizeof *out);
    if (strlen(path) >= sizeof out->file)
        return gr_error_set(err, GR_ERR_USAGE, "%.64s...: the job spec's path is %zu bytes long; the limit is %zu "
                            "bytes", path, strlen(path), sizeof out->file - 1);
    memcpy(out->file, path, strlen(path) + 1);
    gr_status st = gr_cfg_parse_file(path, &out->root, err);
    for (int i = 0; !st && i < nsets; i++) st = gr_spec_apply_set(&out->root, sets[i], err);
    if (!st) st = gr_spec_defaults(out, err);
    if (!st) st = gr_spec_walk("", out->root, out, err);
    if (!st) st = gr_spec_cross(out, err);
    if (!st) st = gr_spec_honoured(out, err);
    if (st) gr_spec_free(out);
    return st;
}

void gr_spec_free(gr_job_spec *spec) {
    if (!spec) return;
    gr_cfg_free(spec->root);
    spec->root = NULL;
    spec->model.layers = NULL;
    spec->model.blocks = NULL;
}

gr_status gr_spec_error(gr_error *err, const gr_job_spec *spec, const char *key, const char *fmt, ...) {
    char msg[GR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const gr_cfg *n = spec->root ? gr_spec_node(spec->root, key) : NULL;
    if (n) return gr_cfg_error(err, n, key, "%s", msg);
    return gr_error_set(err, GR_ERR_USAGE, "%s: %s: %s", spec->file, key, msg);
}
