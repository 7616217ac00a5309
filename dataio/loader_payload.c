/* loader_payload.c — an encoded split's batches as bytes for a device to
 * decode (gr_loader_config.encoded_payload; data.decode gpu, DESIGN 1.4):
 * instead of pixels, a batch carries its JPEG samples' file bytes one after
 * another, their stored shapes and their transforms (gr_enc_batch,
 * common/gr_encbatch.h), and the labels as always.
 *
 * The transform is drawn exactly as the host decode draws it
 * (loader_encoded.c): training, gr_augment_draw of (seed, epoch, sample) on
 * the stored shape, the box in stored pixels and the flip; evaluation, no
 * draw (short side to R, centre crop). So the crop of a sample is the same
 * function of (seed, epoch, sample) whichever side decodes it. A sample that
 * is not a JPEG (a PNG: nvJPEG decodes JPEG only) is decoded here on the
 * host into its row of the batch's x, as the host path decodes it, and
 * marked `host`; the consumer uploads that row. The bytes buffer grows
 * through the loader's host_alloc (page-locked on a GPU) to the largest
 * batch seen, with a quarter's headroom. */
#include "image.h"
#include "loader_fields.h"

#include <stdlib.h>
#include <string.h>

struct gr_payload {
    gr_source *src;
    int f_enc, f_shape, f_format, f_label;
    gr_augment aug;
    uint64_t seed;
    int64_t batch, out_elems;
    const gr_decoder *dec;     /* the loader's: the host decodes */
    double mean[3], std[3];
    void *(*host_alloc)(size_t bytes, void *ctx);
    void (*host_free)(void *p, void *ctx);
    void *alloc_ctx;
    gr_enc_scratch sc;         /* the consumer's host decodes (gr_payload_decode_host) */
    bool skip;                 /* data.on_error skip: a sample that does not decode gets a stand-in */
    gr_source_reader sub;      /* the consumer's reads of stand-ins */
};

/* Sample s into row i of b on the host (bytes, hwc: its stored ones): its
 * pixels and, when it does not decode under skip, a stand-in's pixels and
 * label (gr_loader_stand_in, through rd); the row is then the host's. */
static gr_status payload_host_row(gr_payload *p, gr_batch *b, int64_t i, int64_t s, const void *bytes, size_t n,
                                  const uint16_t hwc[3], gr_source_reader *rd, gr_enc_scratch *sc, gr_error *err) {
    float *dst = b->x + i * p->out_elems;
    gr_error e;
    gr_status st = gr_loader_decode_encoded(p->dec, &p->aug, p->src, p->f_enc, bytes, n, hwc, p->seed, b->epoch, s,
                                            dst, sc, &e);
    if (st == GR_OK) return GR_OK;
    if (st != GR_ERR_DATA || !p->skip) {
        *err = e;
        return st;
    }
    const gr_enc_fields f = {p->f_enc, p->f_shape, p->f_label};
    st = gr_loader_stand_in(p->dec, &p->aug, p->src, &f, rd, p->seed, b, s, &e, dst, &b->y[i], sc, err);
    if (st == GR_OK) b->enc->s[i].host = 1; /* the stand-in's pixels are in x */
    return st;
}

static void *payload_alloc(const gr_payload *p, size_t bytes) {
    return p->host_alloc ? p->host_alloc(bytes, p->alloc_ctx) : gr_aligned_alloc(bytes);
}

static void payload_free(const gr_payload *p, void *q) {
    if (!q) return;
    if (p->host_free) p->host_free(q, p->alloc_ctx);
    else gr_aligned_free(q);
}

gr_status gr_payload_open(gr_source *src, int f_enc, int f_shape, int f_label, const gr_loader_config *cfg,
                          const gr_decoder *dec, const double *mean, const double *std, gr_payload **out,
                          gr_error *err) {
    *out = NULL;
    const int f_format = gr_source_find(src, "format");
    if (f_format < 0 || src->fields[f_format].type != GR_FT_UINT8 || src->fields[f_format].rank != 0)
        return gr_error_set(err, GR_ERR_DATA, "loader: %s has no uint8 field 'format' (an encoded split's "
                            "`formats`: 0 JPEG, 1 PNG), which decoding on a device needs", src->path);
    gr_payload *p = gr_xcalloc(1, sizeof *p);
    p->src = src;
    p->f_enc = f_enc, p->f_shape = f_shape, p->f_format = f_format, p->f_label = f_label;
    p->aug = cfg->aug;
    p->seed = cfg->seed;
    p->batch = cfg->batch;
    p->out_elems = 3 * cfg->aug.size * cfg->aug.size;
    p->dec = dec;
    for (int c = 0; c < 3; c++) p->mean[c] = mean[c], p->std[c] = std[c];
    p->skip = cfg->skip_damaged;
    gr_source_reader_init(&p->sub, src);
    p->host_alloc = cfg->host_alloc;
    p->host_free = cfg->host_free;
    p->alloc_ctx = cfg->alloc_ctx;
    *out = p;
    return GR_OK;
}

void gr_payload_close(gr_payload *p) {
    if (!p) return;
    gr_enc_scratch_free(&p->sc);
    gr_source_reader_free(&p->sub);
    free(p);
}

gr_enc_batch *gr_payload_batch_new(const gr_payload *p) {
    gr_enc_batch *e = gr_xcalloc(1, sizeof *e);
    e->s = gr_xcalloc((size_t)p->batch, sizeof *e->s);
    e->size = p->aug.size;
    e->center = p->aug.crop == GR_CROP_CENTER;
    e->short_side = gr_encoded_eval_short_side(p->aug.size);
    for (int c = 0; c < 3; c++) e->mean[c] = p->mean[c], e->std[c] = p->std[c];
    return e;
}

void gr_payload_batch_free(const gr_payload *p, gr_enc_batch *e) {
    if (!e) return;
    payload_free(p, e->bytes);
    free(e->s);
    free(e);
}

static bool payload_is_jpeg(const gr_payload *p, gr_source_reader *rd, int64_t s) {
    size_t nb;
    const uint8_t *fmt = gr_source_view(rd, s, p->f_format, &nb);
    return fmt[0] == 0;
}

/* Room for `need` bytes in e (its old contents are not kept). */
static gr_status payload_reserve(const gr_payload *p, gr_enc_batch *e, size_t need, gr_error *err) {
    if (need <= e->cap) return GR_OK;
    payload_free(p, e->bytes);
    e->cap = 0;
    const size_t cap = need + need / 4 + 65536;
    if (!(e->bytes = payload_alloc(p, cap)))
        return gr_error_set(err, GR_ERR_OOM, "loader: out of memory: %zu bytes for a batch's JPEG files "
                            "(data.decode gpu)", cap);
    e->cap = cap;
    return GR_OK;
}

gr_status gr_payload_fill(gr_payload *p, gr_source_reader *rd, gr_source_reader *sub, const int64_t *idx,
                          gr_batch *b, gr_enc_scratch *sc, gr_error *err) {
    gr_enc_batch *e = b->enc;
    size_t need = 0, bytes;
    for (int64_t i = 0; i < b->n; i++) {
        if (!payload_is_jpeg(p, rd, idx[i])) continue;
        (void)gr_source_view(rd, idx[i], p->f_enc, &bytes);
        need += bytes;
    }
    gr_status st = payload_reserve(p, e, need, err);
    if (st != GR_OK) return st;
    e->n = b->n;
    e->nbytes = 0;
    e->decoded = false;
    for (int64_t i = 0; i < b->n; i++) {
        const int64_t s = idx[i];
        gr_enc_sample *o = &e->s[i];
        const void *data = gr_source_view(rd, s, p->f_enc, &bytes);
        size_t sb;
        const uint16_t *hwc = gr_source_view(rd, s, p->f_shape, &sb);
        memset(o, 0, sizeof *o);
        o->index = s;
        o->h = hwc[0], o->w = hwc[1], o->c = hwc[2];
        if (!e->center) {
            gr_xform t;
            gr_augment_draw(&p->aug, hwc[0], hwc[1], p->seed, b->epoch, s, &t);
            o->y0 = (int32_t)t.y0, o->x0 = (int32_t)t.x0, o->bh = (int32_t)t.h, o->bw = (int32_t)t.w;
            o->flip = t.flip;
        }
        if (payload_is_jpeg(p, rd, s)) {
            memcpy(e->bytes + e->nbytes, data, bytes);
            o->off = e->nbytes, o->len = bytes;
            e->nbytes += bytes;
        } else {
            o->host = 1;
            memcpy(&b->y[i], gr_source_view(rd, s, p->f_label, &sb), sizeof b->y[i]);
            if ((st = payload_host_row(p, b, i, s, data, bytes, hwc, sub, sc, err)) != GR_OK) return st;
            continue;
        }
        memcpy(&b->y[i], gr_source_view(rd, s, p->f_label, &sb), sizeof b->y[i]);
    }
    return GR_OK;
}

gr_status gr_payload_decode_host(gr_payload *p, gr_batch *b, int64_t i, gr_error *err) {
    const gr_enc_batch *e = b->enc;
    GR_ASSERT(e && i >= 0 && i < e->n);
    const gr_enc_sample *o = &e->s[i];
    if (o->host) return GR_OK; /* the loader did */
    const uint16_t hwc[3] = {(uint16_t)o->h, (uint16_t)o->w, (uint16_t)o->c};
    return payload_host_row(p, b, i, o->index, e->bytes + o->off, o->len, hwc, &p->sub, &p->sc, err);
}
