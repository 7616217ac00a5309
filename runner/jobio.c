/* jobio.c — see jobio.h. */
#include "jobio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../config/schema.h"

struct gr_jobio {
    gr_source *train, *val;
    gr_io_decl decl[GR_MAX_IO + 1]; /* the inputs, then the target */
    int n;
    gr_loader_field fields[GR_MAX_IO + 1];
    double *mean[GR_MAX_IO + 1], *std[GR_MAX_IO + 1];
};

void gr_jobio_free(struct gr_jobio *b) {
    if (!b) return;
    gr_source_close(b->train);
    gr_source_close(b->val);
    for (int i = 0; i < b->n; i++) {
        free(b->mean[i]);
        free(b->std[i]);
    }
    free(b);
}

_Static_assert(GR_SOURCE_TOKENS_MAX_T == 1 << 24, "data.seq_len's bound (config/schema.c) is the token source's");

/* Split `which` ("train" or "val") as a source: token windows of T =
 * data.seq_len when it holds a 1-D dataset `tokens` (dataio's
 * gr_source_tokens), else a table. Token data without data.seq_len, and
 * data.seq_len for a split that is not token data, are exit 2 at the key. */
static gr_status gr_jobio_open_split(const gr_job_spec *spec, const char *which, gr_cache_mode cache,
                                     gr_source **out, gr_error *err) {
    const gr_split_spec *d = !strcmp(which, "train") ? &spec->data.train : &spec->data.val;
    char key[64];
    snprintf(key, sizeof key, "data.%s", which);
    const int tokens = gr_source_tokens_probe(d->path, d->group);
    if (tokens == 1 && !spec->data.seq_len)
        return gr_spec_error(err, spec, key, "%s: %s is token data (a 1-D dataset tokens): token data needs "
                             "data.seq_len, the tokens of a window the model reads (llm.c's T)", d->path, d->group);
    if (tokens == 0 && spec->data.seq_len)
        return gr_spec_error(err, spec, "data.seq_len", "applies to token data, and %s: %s is not (it holds no 1-D "
                             "dataset tokens)", d->path, d->group);
    *out = tokens == 1 ? gr_source_tokens(d->path, d->group, spec->data.seq_len, cache, err)
                       : gr_source_table(d->path, d->group, cache, err);
    if (*out) return GR_OK;
    snprintf(key, sizeof key, "data.%s.path", which);
    const gr_cfg *n = spec->root ? gr_spec_node(spec->root, key) : NULL;
    if (n) gr_error_prefix(err, "%s:%d:%d: %s: ", n->file, n->line, n->col, key);
    return err->status;
}

/* "features, targets": the split's fields, for messages. */
static void gr_jobio_field_list(const gr_source *s, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int f = 0; f < s->nfields && len < n; f++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", f ? ", " : "", s->fields[f].name);
}

/* How item k is delivered: its dtype, else the field's (integers int32, the rest float32); a float
 * input with its dataset's mean/std attributes normalized by them. */
static gr_status gr_jobio_field(struct gr_jobio *b, int k, bool input, gr_error *err) {
    const gr_io_decl *d = &b->decl[k];
    const char *what = input ? "model.inputs" : "model.targets";
    char key[64];
    snprintf(key, sizeof key, "%s[%d]", what, input ? k : 0);
    const int f = gr_source_find(b->train, d->field);
    if (f < 0) {
        char list[400];
        gr_jobio_field_list(b->train, list, sizeof list);
        return gr_cfg_error(err, &d->at, key, "%s has no field '%s' (its fields: %s)", b->train->path, d->field, list);
    }
    const gr_ftype t = b->train->fields[f].type;
    const bool integer = t == GR_FT_UINT8 || t == GR_FT_UINT16 || t == GR_FT_INT32 || t == GR_FT_INT64;
    gr_loader_field *lf = &b->fields[k];
    lf->name = d->field;
    lf->as = d->dtype == GR_IO_INT32 || (d->dtype == GR_IO_FROM_FIELD && integer) ? GR_DELIVER_INT32 : GR_DELIVER_FLOAT32;
    if (!input || lf->as != GR_DELIVER_FLOAT32) return GR_OK;
    const int64_t cols = b->train->fields[f].rank ? b->train->fields[f].shape[b->train->fields[f].rank - 1] : 1;
    const int most = cols > 1 ? (int)cols : 1;
    b->mean[k] = gr_xcalloc((size_t)most, sizeof(double));
    b->std[k] = gr_xcalloc((size_t)most, sizeof(double));
    const int nm = gr_source_table_attr_floats(b->train, d->field, "mean", b->mean[k], most);
    const int ns = gr_source_table_attr_floats(b->train, d->field, "std", b->std[k], most);
    if (nm > 0 && nm == ns) {
        lf->n_norm = nm;
        lf->mean = b->mean[k];
        lf->std = b->std[k];
    }
    return GR_OK;
}

/* The io tensor of delivered field bf, named as declared. */
static gr_status gr_jobio_tensor(const gr_batch_field *bf, const gr_io_decl *d, gr_io_tensor *t, gr_error *err) {
    if (bf->rank > GR_MAX_DIMS - 1)
        return gr_cfg_error(err, &d->at, d->name, "field '%s' has %d axes a sample; a graph's input takes at most %d",
                            d->field, bf->rank, GR_MAX_DIMS - 1);
    *t = (gr_io_tensor){.name = d->name, .elem = bf->type == GR_FT_INT32 ? GR_I32 : GR_F32, .ndim = bf->rank};
    for (int i = 0; i < bf->rank; i++) t->shape[i] = bf->shape[i];
    return GR_OK;
}

/* The delivered fields of s (a loader config listing b's fields) into out. */
static gr_status gr_jobio_describe(const struct gr_jobio *b, gr_source *s, gr_batch_field *out, gr_error *err) {
    gr_loader_config lc;
    memset(&lc, 0, sizeof lc);
    lc.batch = 1;
    lc.fields = b->fields;
    lc.nfields = b->n;
    return gr_loader_fields_describe(s, &lc, out, err);
}

gr_status gr_jobio_compile(gr_job *j, gr_cache_mode cache, bool need_val, gr_error *err) {
    const gr_job_spec *spec = j->spec;
    struct gr_jobio *b = gr_xcalloc(1, sizeof *b);
    j->byname = b;
    int nin = 0, nt = 0;
    gr_status st = gr_io_decls_read(spec, false, b->decl, &nin, err);
    if (!st) st = gr_io_decls_read(spec, true, b->decl + nin, &nt, err);
    if (st) return st;
    GR_ASSERT(nin >= 1 && nt == 1); /* spec_load refuses inputs without targets */
    b->n = nin + 1;
    if ((st = gr_jobio_open_split(spec, "train", cache, &b->train, err))) return st;
    if (need_val && spec->data.val.path[0] && (st = gr_jobio_open_split(spec, "val", cache, &b->val, err))) return st;
    const int64_t tv = gr_source_tokens_vocab(b->train), vv = gr_source_tokens_vocab(b->val);
    if (b->val && tv != vv) /* both token data (data.seq_len refuses a mix): their vocabularies differ */
        return gr_error_set(err, GR_ERR_DATA, "%s: %s/tokens: vocab_size %lld, but %s: %s/tokens has vocab_size %lld; "
                            "the model would be scored on other ids than it learns", spec->data.val.path,
                            strcmp(spec->data.val.group, "/") ? spec->data.val.group : "", (long long)vv,
                            spec->data.train.path, strcmp(spec->data.train.group, "/") ? spec->data.train.group : "",
                            (long long)tv);
    for (int k = 0; k < b->n; k++)
        if ((st = gr_jobio_field(b, k, k < nin, err))) return st;
    gr_batch_field tf[GR_MAX_IO + 1], vf[GR_MAX_IO + 1];
    if ((st = gr_jobio_describe(b, b->train, tf, err))) return st;
    memset(&j->io, 0, sizeof j->io);
    j->io.n_inputs = nin;
    for (int k = 0; k < nin; k++)
        if ((st = gr_jobio_tensor(&tf[k], &b->decl[k], &j->io.in[k], err))) return st;
    if ((st = gr_jobio_tensor(&tf[nin], &b->decl[nin], &j->io.target, err))) return st;
    if (!b->val) return GR_OK;
    if ((st = gr_jobio_describe(b, b->val, vf, err))) return st;
    for (int k = 0; k < b->n; k++)
        if (vf[k].type != tf[k].type || vf[k].rank != tf[k].rank ||
            memcmp(vf[k].shape, tf[k].shape, (size_t)tf[k].rank * sizeof tf[k].shape[0]) != 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s: field '%s' differs from the train split's (%s in %s)",
                                spec->data.val.path, spec->data.val.group, b->decl[k].field, spec->data.train.path,
                                spec->data.train.group);
    return GR_OK;
}

gr_status gr_jobio_check_vocab(const gr_job *j, gr_error *err) {
    const int64_t v = gr_source_tokens_vocab(j->byname->train);
    if (v <= 0) return GR_OK; /* not token data */
    const gr_job_spec *spec = j->spec;
    const gr_graph *g = &j->g;
    for (int i = 0; i < g->n_forward; i++) {
        const gr_node *nd = &g->nodes[i];
        if (nd->op != GR_OP_EMBEDDING || g->tensors[nd->in[0]].kind != GR_TK_INPUT || nd->attrs.vocab >= v) continue;
        return gr_spec_error(err, spec, "model.layers", "layer '%s' (embedding) has %lld rows, but the token ids of "
                             "%s (%s) go up to vocab_size %lld: give it vocab: %lld or more", g->layers[nd->layer].name,
                             (long long)nd->attrs.vocab, spec->data.train.path, spec->data.train.group, (long long)v,
                             (long long)v);
    }
    if (g->n_classes > 0 && g->n_classes < v)
        return gr_spec_error(err, spec, "train.loss", "the loss scores %lld classes, but the targets of %s (%s) go up "
                             "to vocab_size %lld: the last layer needs %lld units or more (and train.loss.classes, "
                             "when given, as many)", (long long)g->n_classes, spec->data.train.path,
                             spec->data.train.group, (long long)v, (long long)v);
    return GR_OK;
}

int64_t gr_jobio_train_len(const gr_job *j) { return j->byname->train->n; }

bool gr_jobio_has_val(const gr_job *j) { return j->byname->val != NULL; }

gr_status gr_jobio_open_loaders(gr_job *j, gr_loader_config *tl, gr_loader_config *vl, gr_error *err) {
    struct gr_jobio *b = j->byname;
    tl->fields = vl->fields = b->fields;
    tl->nfields = vl->nfields = b->n;
    gr_status st = gr_loader_open_source(b->train, tl, &j->train_ld, err);
    if (!st && b->val) st = gr_loader_open_source(b->val, vl, &j->val_ld, err);
    return st;
}

size_t gr_jobio_host_bytes(const gr_job *j, const gr_loader_config *tl, const gr_loader_config *vl, size_t *loaders) {
    const struct gr_jobio *b = j->byname;
    gr_loader_config t = *tl, v = *vl;
    t.fields = v.fields = b->fields;
    t.nfields = v.nfields = b->n;
    *loaders = gr_loader_host_bytes_source(b->train, &t) + (b->val ? gr_loader_host_bytes_source(b->val, &v) : 0);
    return gr_source_table_host_bytes(b->train) + gr_source_tokens_host_bytes(b->train) +
           (b->val ? gr_source_table_host_bytes(b->val) + gr_source_tokens_host_bytes(b->val) : 0);
}

gr_status gr_jobio_open_eval(gr_job *j, bool val, gr_loader_config *lc, gr_error *err) {
    struct gr_jobio *b = j->byname;
    lc->fields = b->fields;
    lc->nfields = b->n;
    return gr_loader_open_source(val ? b->val : b->train, lc, &j->val_ld, err);
}
