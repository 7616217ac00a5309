/* generate.c — `gpurun generate JOB.yaml --checkpoint PATH [--prompt TEXT |
 * --prompt-file F] [--tokens N] [--temperature T] [--top-k K] [--seed S]`:
 * text from a trained language model, streamed to stdout.
 *
 * The job's model is built as a decoding graph (graph.h, decode_len): one
 * position of one sequence per run, at gr_exec_ctx.pos, attention keeping
 * the keys and values of the positions before it in its cache, so a token
 * costs one position's forward and nothing before it is recomputed. The
 * prompt goes in a token at a time (each filling the caches), then each new
 * token is drawn from the last position's logits and fed back.
 *
 * Text and tokens convert with the tokenizer that made the job's training
 * data (the train split's `tokens` attributes, DESIGN 1.5). The draw: the
 * first train.loss.classes logits (the vocabulary, not its padding), divided
 * by the temperature, kept to the top K, softmax, then one uniform number
 * gr_uniform(hash(seed), token index) walks the cumulative sum: the same
 * text for the same seed on every machine whose logits agree. Temperature 0
 * is greedy: the first largest logit, as torch.argmax. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/gr_half.h"
#include "../dataio/bpe.h"
#include "../dataio/dataio.h"
#include "cli.h"
#include "job.h"

typedef struct gr_gen_opts {
    const char *checkpoint, *prompt, *prompt_file, *device, *vocab_dir;
    int64_t tokens, top_k;
    uint64_t seed;
    double temperature;
    int threads;
} gr_gen_opts;

/* ---- tokenizers ---- */

/* The tokenizer of the job's training data: bytes (a token is a byte value,
 * vocabulary 256; no prompt starts at "\n"), or GPT-2's BPE (bpe.h, from
 * --vocab DIR; no prompt starts at <|endoftext|>). */
typedef struct gr_gen_tokenizer {
    char name[32];
    int64_t vocab;  /* tokens it can make */
    int32_t start;  /* the first token when there is no prompt */
    gr_bpe *bpe;    /* gpt2; NULL: bytes */
} gr_gen_tokenizer;

static gr_status gr_gen_tokenizer_open(const gr_job_spec *spec, const gr_gen_opts *o, gr_gen_tokenizer *tk,
                                       gr_error *err) {
    memset(tk, 0, sizeof *tk);
    gr_tokens_desc d;
    gr_status st = gr_tokens_desc_read(spec->data.train.path, spec->data.train.group, &d, err);
    if (st) return gr_error_prefix(err, "%s: data.train.path: ", spec->file), st;
    snprintf(tk->name, sizeof tk->name, "%s", d.tokenizer);
    if (strcmp(d.tokenizer, "bytes") == 0) {
        tk->vocab = 256;
        tk->start = '\n';
        return GR_OK;
    }
    if (strcmp(d.tokenizer, "gpt2") != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: its tokens were made by tokenizer '%s', which generate cannot "
                            "turn text into (it knows: bytes, gpt2)", spec->data.train.path, d.tokenizer);
    if (!o->vocab_dir)
        return gr_error_set(err, GR_ERR_USAGE, "generate: the job's tokens are GPT-2's (%s): give --vocab DIR, the "
                            "directory of encoder.json and vocab.bpe", spec->data.train.path);
    if ((st = gr_bpe_load(o->vocab_dir, &tk->bpe, err))) return st;
    tk->vocab = gr_bpe_vocab(tk->bpe);
    tk->start = gr_bpe_eot(tk->bpe) >= 0 ? gr_bpe_eot(tk->bpe) : 0;
    return GR_OK;
}

static void gr_gen_tokenizer_close(gr_gen_tokenizer *tk) { gr_bpe_free(tk->bpe); }

/* text's tokens into *ids (allocated), their count in *n */
static gr_status gr_gen_encode(const gr_gen_tokenizer *tk, const char *text, size_t len, int32_t **ids, int64_t *n,
                               gr_error *err) {
    if (tk->bpe) return gr_bpe_encode(tk->bpe, text, len, ids, n, err);
    *ids = gr_xmalloc((len + 1) * sizeof **ids);
    for (size_t i = 0; i < len; i++) (*ids)[i] = (unsigned char)text[i];
    *n = (int64_t)len;
    return GR_OK;
}

static void gr_gen_emit(const gr_gen_tokenizer *tk, int32_t tok, FILE *f) {
    if (!tk->bpe) {
        fputc(tok & 0xff, f);
        return;
    }
    size_t len = 0;
    const char *s = gr_bpe_token(tk->bpe, tok, &len);
    if (s) fwrite(s, 1, len, f);
}

/* ---- the draw ---- */

static int gr_gen_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The token drawn from logits z[0..k) for the token at index i. */
static int32_t gr_gen_draw(const float *z, int64_t k, const gr_gen_opts *o, int64_t i, float *scratch) {
    int64_t best = 0;
    for (int64_t c = 1; c < k; c++)
        if (z[c] > z[best]) best = c;
    if (o->temperature == 0.0) return (int32_t)best;
    float floor = -INFINITY; /* logits below it are out (top-k) */
    if (o->top_k > 0 && o->top_k < k) {
        memcpy(scratch, z, (size_t)k * sizeof *z);
        qsort(scratch, (size_t)k, sizeof *scratch, gr_gen_desc);
        floor = scratch[o->top_k - 1];
    }
    double sum = 0.0;
    for (int64_t c = 0; c < k; c++) sum += z[c] >= floor ? exp((double)(z[c] - z[best]) / o->temperature) : 0.0;
    double u = (double)gr_uniform(gr_hash64(o->seed, 0x6E4E), (uint64_t)i) * sum, acc = 0.0;
    for (int64_t c = 0; c < k; c++) {
        if (z[c] < floor) continue;
        acc += exp((double)(z[c] - z[best]) / o->temperature);
        if (u < acc) return (int32_t)c;
    }
    return (int32_t)best; /* u at the very top of the sum: rounding */
}

/* ---- the model ---- */

/* j's decoding graph for len positions of one sequence: the job's inputs
 * and target, each one int32 token. */
static gr_status gr_gen_graph(gr_job *j, gr_job_spec *one, int64_t len, gr_error *err) {
    gr_io_decl in[GR_MAX_IO], tg[1];
    int nin = 0, nt = 0;
    gr_status st;
    if ((st = gr_io_decls_read(one, false, in, &nin, err)) || (st = gr_io_decls_read(one, true, tg, &nt, err)))
        return st;
    if (nin != 1 || nt != 1)
        return gr_spec_error(err, one, "model.inputs", "generate needs a language model: one input of token ids "
                             "(model.inputs: [tokens]) and its next-token targets (model.targets: [targets])");
    gr_graph_io io;
    memset(&io, 0, sizeof io);
    io.n_inputs = 1;
    io.in[0] = (gr_io_tensor){.name = in[0].name, .elem = GR_I32, .ndim = 1, .shape = {1}};
    io.target = (gr_io_tensor){.name = tg[0].name, .elem = GR_I32, .ndim = 1, .shape = {1}};
    io.decode_len = len;
    one->train.batch_size = one->train.micro_batch = 1;
    if ((st = gr_graph_build_io(one, &io, &j->g, err))) return st;
    j->have_graph = true;
    gr_graph_set_precision(&j->g, one->precision);
    const gr_tensor *lt = &j->g.tensors[j->g.logits];
    if (j->g.loss_probs < 0 || lt->shape[lt->ndim - 1] < 1)
        return gr_spec_error(err, one, "train.loss.type", "generate needs a model whose last layer gives "
                             "next-token logits (softmax_cross_entropy)");
    return GR_OK;
}

/* The last position's logits (the first k of them, as fp32) into z. */
static void gr_gen_logits(gr_job *j, gr_plan *p, int64_t k, float *z, void *raw) {
    const gr_tensor *lt = &j->g.tensors[j->g.logits];
    const int64_t v = lt->shape[lt->ndim - 1];
    gr_backend_download(j->be, raw, gr_plan_ptr(p, j->g.logits), (size_t)v * gr_elem_size(lt->elem));
    for (int64_t c = 0; c < k; c++)
        z[c] = lt->elem == GR_F32    ? ((const float *)raw)[c]
               : lt->elem == GR_BF16 ? gr_bf16_decode_hd(((const uint16_t *)raw)[c])
                                     : gr_fp16_decode_hd(((const uint16_t *)raw)[c]);
}

/* Runs the decoding plan over the prompt, then draws o->tokens more,
 * writing each to stdout as it comes. The caches hold len positions: when
 * they are full, the last len/2 tokens go in again from position 0 (a
 * context that slides by half; nanoGPT crops to the last block_size tokens
 * and recomputes them all at every token). A prompt longer than len starts
 * from its last len/2 tokens. */
static gr_status gr_gen_loop(gr_job *j, gr_plan *p, const gr_gen_tokenizer *tk, const int32_t *prompt, int64_t np,
                             int64_t len, const gr_gen_opts *o, gr_error *err) {
    const int64_t k = j->g.n_classes, keep = len / 2 > 0 ? len / 2 : 1;
    if (tk->vocab > k)
        return gr_error_set(err, GR_ERR_USAGE, "%s: the model has %lld classes, fewer than the %lld tokens of its "
                            "data's tokenizer (%s)", j->spec->file, (long long)k, (long long)tk->vocab, tk->name);
    const gr_tensor *lt = &j->g.tensors[j->g.logits];
    float *z = gr_xmalloc((size_t)k * sizeof *z), *scratch = gr_xmalloc((size_t)k * sizeof *scratch);
    void *raw = gr_xmalloc((size_t)lt->shape[lt->ndim - 1] * sizeof(float));
    int32_t *hist = gr_xmalloc((size_t)(np + o->tokens) * sizeof *hist), zero = 0;
    memcpy(hist, prompt, (size_t)np * sizeof *hist);
    int64_t n = np, start = np > len ? np - keep : 0, pos = 0, drawn = 0;
    gr_exec_ctx ctx = {.training = false};
    for (;;) {
        gr_backend_upload(j->be, gr_plan_ptr(p, j->g.input), &hist[start + pos], sizeof *hist);
        gr_backend_upload(j->be, gr_plan_ptr(p, j->g.label), &zero, sizeof zero);
        ctx.pos = pos++;
        gr_plan_run(p, 1, &ctx);
        if (start + pos < n) continue; /* still reading the context */
        gr_gen_logits(j, p, k, z, raw);
        const int32_t tok = gr_gen_draw(z, k, o, drawn, scratch);
        if (tok >= tk->vocab) {
            gr_error_set(err, GR_ERR_DATA, "generate: the model drew token %d, which tokenizer %s has no text for "
                         "(its vocabulary is %lld; train.loss.classes?)", (int)tok, tk->name, (long long)tk->vocab);
            break;
        }
        gr_gen_emit(tk, tok, stdout);
        fflush(stdout);
        hist[n++] = tok;
        if (++drawn == o->tokens) break;
        if (pos == len) { /* the caches are full: the last keep tokens again, from position 0 */
            start = n - keep;
            pos = 0;
        }
    }
    free(z);
    free(scratch);
    free(raw);
    free(hist);
    return err->status;
}

/* The most positions the model's position tables take (min over its
 * pos_embedding layers' max_len), or all when it has none. */
static int64_t gr_gen_max_positions(const gr_job_spec *spec, int64_t all) {
    gr_job j;
    gr_job_spec one = *spec;
    gr_job_init(&j, &one, true);
    gr_error e = {0};
    int64_t m = all;
    if (!gr_gen_graph(&j, &one, 1, &e))
        for (int i = 0; i < j.g.n_nodes; i++)
            if (j.g.nodes[i].op == GR_OP_POS_EMBEDDING && j.g.nodes[i].attrs.max_len < m) m = j.g.nodes[i].attrs.max_len;
    gr_job_free(&j);
    return m;
}

/* The prompt's tokens (the tokenizer's start token when there is none). */
static gr_status gr_gen_prompt(const gr_gen_opts *o, const gr_gen_tokenizer *tk, char **text, size_t *len,
                               int32_t **toks, int64_t *n, gr_error *err) {
    *text = NULL;
    *len = 0;
    if (o->prompt_file) {
        FILE *f = fopen(o->prompt_file, "rb");
        if (!f) return gr_error_set(err, GR_ERR_DATA, "--prompt-file: %s: %s", o->prompt_file, strerror(errno));
        size_t cap = 4096;
        *text = gr_xmalloc(cap);
        size_t got;
        while ((got = fread(*text + *len, 1, cap - *len, f)) > 0) {
            *len += got;
            if (*len == cap) *text = gr_xrealloc(*text, cap *= 2);
        }
        const bool bad = ferror(f);
        fclose(f);
        if (bad) return gr_error_set(err, GR_ERR_DATA, "--prompt-file: %s: read error", o->prompt_file);
    } else if (o->prompt) {
        *len = strlen(o->prompt);
        *text = gr_xmalloc(*len + 1);
        memcpy(*text, o->prompt, *len);
    }
    gr_status st = gr_gen_encode(tk, *text ? *text : "", *len, toks, n, err);
    if (st) return st;
    *toks = gr_xrealloc(*toks, (size_t)(*n + 1) * sizeof **toks);
    if (*n == 0) (*toks)[(*n)++] = tk->start;
    return GR_OK;
}

static gr_status gr_generate(const gr_job_spec *spec, const gr_gen_opts *o, gr_error *err) {
    gr_gen_tokenizer tok;
    const gr_gen_tokenizer *tk = &tok;
    gr_status st = gr_gen_tokenizer_open(spec, o, &tok, err);
    if (st) return gr_gen_tokenizer_close(&tok), st;
    char *text = NULL;
    size_t len = 0;
    int32_t *prompt = NULL;
    int64_t np = 0, step = 0;
    if ((st = gr_gen_prompt(o, tk, &text, &len, &prompt, &np, err))) goto out;
    gr_job_spec one = *spec; /* one sequence at a time */
    gr_job j;
    gr_job_init(&j, &one, true);
    j.eval_only = true;
    gr_plan p;
    memset(&p, 0, sizeof p);
    bool planned = false;
    const int64_t positions = gr_gen_max_positions(spec, np + o->tokens);
    if (!(st = gr_gen_graph(&j, &one, positions, err)) &&
        !(st = gr_job_backend(&j, &one, o->device ? o->device : one.device, o->threads, true, err))) {
        gr_job_layout(&j);
        if (!(st = gr_model_init(&j.m, &j.g, j.be, 0, err)) && !(st = gr_job_load_weights(&j, o->checkpoint, &step, err)) &&
            !(st = gr_plan_compile(&p, &j.m, &j.g, GR_PLAN_EVAL, true, err))) {
            planned = true;
            fwrite(text ? text : "", 1, len, stdout); /* the prompt as given, then what follows it */
            st = gr_gen_loop(&j, &p, tk, prompt, np, positions, o, err);
            fputc('\n', stdout);
        }
    }
    if (planned) gr_plan_free(&p);
    gr_job_free(&j);
out:
    gr_gen_tokenizer_close(&tok);
    free(text);
    free(prompt);
    return st;
}

/* A number option's value, or exit 2 naming the option. */
static double gr_gen_num(const char *opt, const char *val, double lo, double hi) {
    char *end;
    errno = 0;
    const double v = val ? strtod(val, &end) : NAN;
    if (!val || errno || end == val || *end || !(v >= lo && v <= hi)) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s: expected a number from %g to %g, got '%.100s'", opt, lo, hi, val ? val : "");
        gr_usage_error("%s", msg);
    }
    return v;
}

int gr_cmd_generate(int argc, char **argv) {
    gr_gen_opts o = {.tokens = 256, .temperature = 1.0, .top_k = 0, .seed = 0};
    const char *job = NULL, *sets[GR_MAX_SETS];
    int nsets = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            if (job) gr_usage_error("unexpected argument '%s' (one job spec)", a);
            job = a;
            continue;
        }
        if (!val) gr_usage_error("%s: expected a value", a);
        i++;
        if (strcmp(a, "--checkpoint") == 0) o.checkpoint = val;
        else if (strcmp(a, "--prompt") == 0) o.prompt = val;
        else if (strcmp(a, "--prompt-file") == 0) o.prompt_file = val;
        else if (strcmp(a, "--device") == 0) o.device = val;
        else if (strcmp(a, "--vocab") == 0) o.vocab_dir = val;
        else if (strcmp(a, "--tokens") == 0) o.tokens = (int64_t)gr_gen_num(a, val, 1, 1 << 24);
        else if (strcmp(a, "--temperature") == 0) o.temperature = gr_gen_num(a, val, 0, 1000);
        else if (strcmp(a, "--top-k") == 0) o.top_k = (int64_t)gr_gen_num(a, val, 0, 1 << 24);
        else if (strcmp(a, "--seed") == 0) o.seed = (uint64_t)gr_gen_num(a, val, 0, 9007199254740992.0);
        else if (strcmp(a, "--threads") == 0) o.threads = (int)gr_gen_num(a, val, 1, 1024);
        else if (strcmp(a, "--set") == 0) {
            if (nsets == GR_MAX_SETS) gr_usage_error("too many --set options%s", "");
            sets[nsets++] = val;
        } else gr_usage_error("unknown option '%s'", a);
    }
    if (!job) gr_usage_error("generate: expected a job spec (JOB.yaml)%s", "");
    if (!o.checkpoint) gr_usage_error("generate: --checkpoint PATH (a checkpoint or a run's weights.h5) is required%s", "");
    if (o.prompt && o.prompt_file) gr_usage_error("generate: --prompt and --prompt-file: give one%s", "");
    gr_error err = {0};
    gr_job_spec spec;
    gr_status st = gr_spec_load(job, sets, nsets, &spec, &err);
    if (!st) st = gr_generate(&spec, &o, &err);
    if (st) gr_die(st, err.msg);
    gr_spec_free(&spec);
    return 0;
}
