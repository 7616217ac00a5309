/* test_loader_payload.c — the loader's encoded payload (data.decode gpu,
 * dataio/loader_payload.c) on an encoded split made here (JPEGs 4:2:0, a
 * grayscale JPEG, a PNG, of several sizes), against the plain loader over
 * the same split and configuration, batch for batch over two epochs, with
 * 0 and 2 workers, training (resized crops, flips) and evaluation (centre):
 *   - the labels equal the plain loader's;
 *   - each sample's bytes are the source's bytes of that sample, packed one
 *     after another (offsets and lengths), its shape the source's;
 *   - each box and flip is gr_augment_draw of (seed, epoch, sample), the
 *     draw the host decode makes;
 *   - each sample decoded on the host from the payload (gr_loader_decode_host)
 *     and each PNG (decoded by the loader, `host`) equals the plain loader's
 *     pixels bit for bit: the same sample, the same transform;
 *   - data.on_error skip with a damaged JPEG: its stand-in (pixels, label,
 *     count) is the plain loader's when the payload's host decode meets it.
 * No GPU needed: the device's side is tests/test_cuda_decode.c. */
#include "convert_images.h"
#include "../dataio/image.h"
#include "../dataio/source.h"

#define S 24
#define BATCH 5

static int host_seen, gray_seen; /* PNG samples and grayscale JPEGs checked */

static uint8_t px_wave(int x, int y, int c) { return (uint8_t)(128 + 100 * sin(0.11 * x + 0.07 * y + c)); }

/* dir/a: 14 RGB JPEGs of varying sizes; dir/b: a gray JPEG, a PNG, 3 more RGB JPEGs */
static void make_corpus(const char *dir) {
    rm_rf(dir);
    mkdir(dir, 0755);
    mkdir(join(dir, "a"), 0755);
    mkdir(join(dir, "b"), 0755);
    char name[1024];
    for (int i = 0; i < 14; i++) {
        snprintf(name, sizeof name, "%s/a/%02d.jpg", dir, i);
        write_jpeg_as(name, 30 + 7 * i, 26 + 5 * (i % 5), 3, 90, false, px_wave);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s/b/%02d.jpg", dir, i);
        write_jpeg_as(name, 64 + 9 * i, 40, 3, 85, false, px_wave);
    }
    snprintf(name, sizeof name, "%s/b/gray.jpg", dir);
    write_jpeg_as(name, 50, 37, 1, 90, false, px_wave);
    snprintf(name, sizeof name, "%s/b/pic.png", dir);
    write_png(name, 41, 33, PNG_COLOR_TYPE_RGB, 8, px_wave);
}

typedef struct ref_src {
    gr_source *src;
    gr_source_reader rd;
    gr_blob blob;
    int f_enc, f_shape;
} ref_src;

/* One payload batch pb against the plain loader's batch rb. */
static void check_batch(ref_src *r, gr_loader *pl, gr_batch *pb, const gr_batch *rb, const gr_augment *aug,
                        uint64_t seed) {
    gr_error err = {0};
    const gr_enc_batch *e = pb->enc;
    const int64_t per = 3 * S * S;
    CHECK(rb->enc == NULL && e != NULL);
    if (!e) return;
    CHECK(pb->n == rb->n && e->n == pb->n && pb->epoch == rb->epoch && pb->index == rb->index);
    CHECK(e->size == S && e->center == (aug->crop == GR_CROP_CENTER) && e->short_side == (S * 256 + 112) / 224);
    uint64_t at = 0;
    for (int64_t i = 0; i < pb->n; i++) {
        const gr_enc_sample *o = &e->s[i];
        CHECK(pb->y[i] == rb->y[i]);
        CHECK_MSG(gr_source_read_blob(&r->rd, o->index, r->f_enc, &r->blob, &err) == GR_OK, "%s", err.msg);
        uint16_t shape[3];
        CHECK(gr_source_read(&r->rd, o->index, r->f_shape, shape, &err) == GR_OK);
        CHECK(o->h == shape[0] && o->w == shape[1] && o->c == shape[2]);
        const bool png = r->blob.n >= 4 && r->blob.data[1] == 'P' && r->blob.data[2] == 'N';
        CHECK_MSG(o->host == png, "sample %lld: host %d for a %s", (long long)o->index, o->host, png ? "PNG" : "JPEG");
        host_seen += o->host;
        gray_seen += o->c == 1;
        if (!o->host) {
            CHECK_MSG(o->off == at && o->len == r->blob.n && memcmp(e->bytes + o->off, r->blob.data, r->blob.n) == 0,
                      "sample %lld: bytes differ from the source's", (long long)o->index);
            at += o->len;
        } else {
            CHECK(o->len == 0);
        }
        if (aug->crop == GR_CROP_RESIZED) {
            gr_xform t;
            gr_augment_draw(aug, o->h, o->w, seed, pb->epoch, o->index, &t);
            CHECK_MSG(o->y0 == t.y0 && o->x0 == t.x0 && o->bh == t.h && o->bw == t.w && o->flip == (int)t.flip,
                      "sample %lld epoch %lld: box (%d %d %d %d %d) but the draw is (%lld %lld %lld %lld %d)",
                      (long long)o->index, (long long)pb->epoch, o->y0, o->x0, o->bh, o->bw, o->flip,
                      (long long)t.y0, (long long)t.x0, (long long)t.h, (long long)t.w, (int)t.flip);
        }
        CHECK_MSG(gr_loader_decode_host(pl, pb, i, &err) == GR_OK, "%s", err.msg);
        CHECK_MSG(!memcmp(pb->x + i * per, rb->x + i * per, (size_t)per * sizeof(float)),
                  "sample %lld epoch %lld: the host decode of the payload differs from the plain loader's",
                  (long long)o->index, (long long)pb->epoch);
    }
    CHECK(e->nbytes == at);
}

static void run(gr_dataset *ds, ref_src *r, const gr_augment *aug, int workers, bool shuffle, bool drop_last) {
    gr_error err = {0};
    gr_loader_config lc = {.batch = BATCH, .shuffle = shuffle, .drop_last = drop_last, .seed = 11, .world = 1,
                           .n_norm = 3, .mean = {120, 115, 100}, .std = {60, 61, 62}, .prefetch = 3,
                           .workers = workers, .aug = *aug};
    gr_loader *ref = NULL, *pay = NULL;
    CHECK_MSG(gr_loader_open(ds, &lc, &ref, &err) == GR_OK, "%s", err.msg);
    lc.encoded_payload = true;
    CHECK_MSG(gr_loader_open(ds, &lc, &pay, &err) == GR_OK, "%s", err.msg);
    if (!ref || !pay) return;
    const int64_t nb = 2 * gr_loader_batches_per_epoch(ref);
    for (int64_t k = 0; k < nb; k++) {
        gr_batch *a = NULL, *b = NULL;
        CHECK_MSG(gr_loader_next(ref, &a, &err) == GR_OK, "%s", err.msg);
        CHECK_MSG(gr_loader_next(pay, &b, &err) == GR_OK, "%s", err.msg);
        if (a && b) check_batch(r, pay, b, a, aug, lc.seed);
        gr_loader_release(ref, a);
        gr_loader_release(pay, b);
    }
    gr_loader_close(ref);
    gr_loader_close(pay);
}

/* A copy of split file `in` whose first JPEG is damaged past its SOI marker. */
static void damage_first_jpeg(const char *in, const char *out) {
    FILE *f = fopen(in, "rb");
    GR_ASSERT(f);
    uint8_t *b;
    const size_t n = gr_image_read_all(f, &b);
    fclose(f);
    size_t at = 0;
    while (at + 3 < n && !(b[at] == 0xff && b[at + 1] == 0xd8 && b[at + 2] == 0xff)) at++;
    GR_ASSERT(at + 70 < n);
    memset(b + at + 2, '0', 64);
    f = fopen(out, "wb");
    GR_ASSERT(f && fwrite(b, 1, n, f) == n);
    fclose(f);
    free(b);
}

/* data.on_error skip on a split with a damaged JPEG: the payload's host
 * decode (what the runner does for a sample the device refuses) gives the
 * damaged sample's row the stand-in the plain loader gives it, pixels and
 * label, and counts it as the plain loader does. */
static void run_damaged(const char *path, const gr_augment *aug) {
    gr_error err = {0};
    gr_dataset *ds = NULL;
    CHECK_MSG(gr_dataset_open(path, "/train", &ds, &err) == GR_OK, "%s", err.msg);
    gr_loader_config lc = {.batch = BATCH, .shuffle = true, .drop_last = true, .seed = 11, .world = 1, .n_norm = 3,
                           .mean = {120, 115, 100}, .std = {60, 61, 62}, .prefetch = 2, .aug = *aug,
                           .skip_damaged = true};
    gr_loader *ref = NULL, *pay = NULL;
    CHECK_MSG(ds && gr_loader_open(ds, &lc, &ref, &err) == GR_OK, "%s", err.msg);
    lc.encoded_payload = true;
    CHECK_MSG(ds && gr_loader_open(ds, &lc, &pay, &err) == GR_OK, "%s", err.msg);
    int64_t skipped_ref = 0, skipped_pay = 0;
    const int64_t per = 3 * S * S;
    for (int64_t k = 0; ref && pay && k < 2 * gr_loader_batches_per_epoch(ref); k++) {
        gr_batch *a = NULL, *b = NULL;
        CHECK_MSG(gr_loader_next(ref, &a, &err) == GR_OK, "%s", err.msg);
        CHECK_MSG(gr_loader_next(pay, &b, &err) == GR_OK, "%s", err.msg);
        if (!a || !b) break;
        for (int64_t i = 0; i < b->n; i++) {
            CHECK_MSG(gr_loader_decode_host(pay, b, i, &err) == GR_OK, "%s", err.msg);
            CHECK(b->y[i] == a->y[i] && !memcmp(b->x + i * per, a->x + i * per, (size_t)per * sizeof(float)));
        }
        skipped_ref += a->skipped, skipped_pay += b->skipped;
        if (b->skipped) CHECK(strstr(b->skip_first.msg, "took its place") != NULL);
        gr_loader_release(ref, a);
        gr_loader_release(pay, b);
    }
    CHECK_MSG(skipped_ref > 0 && skipped_pay == skipped_ref, "skipped: plain %lld, payload %lld",
              (long long)skipped_ref, (long long)skipped_pay);
    gr_loader_close(ref);
    gr_loader_close(pay);
    gr_dataset_close(ds);
}

int main(void) {
    const char *dir = tmp_path("payload_pics");
    const char *out = tmp_path("payload.h5");
    make_corpus(dir);
    remove(out);
    gr_error err = {0};
    gr_imagefolder_config cfg = {.dir = dir, .store = GR_STORE_JPEG};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err) == GR_OK, "%s", err.msg);
    gr_dataset *ds = NULL;
    CHECK_MSG(gr_dataset_open(out, "/train", &ds, &err) == GR_OK, "%s", err.msg);
    ref_src r = {0};
    r.src = gr_source_encoded(out, "/train", &err);
    CHECK_MSG(r.src != NULL, "%s", err.msg);
    if (!ds || !r.src) return gr_test_report();
    r.f_enc = gr_source_find(r.src, "encoded");
    r.f_shape = gr_source_find(r.src, "shape");
    gr_source_reader_init(&r.rd, r.src);

    const gr_augment train = {.crop = GR_CROP_RESIZED, .size = S, .scale = {0.08, 1.0}, .ratio = {0.75, 4.0 / 3.0},
                              .flip = true};
    const gr_augment val = {.crop = GR_CROP_CENTER, .size = S};
    run(ds, &r, &train, 0, true, true);
    run(ds, &r, &train, 2, true, true);
    run(ds, &r, &val, 2, false, false);
    CHECK(host_seen > 0 && gray_seen > 0);
    const char *bad = tmp_path("payload_bad.h5");
    damage_first_jpeg(out, bad);
    run_damaged(bad, &train);
    remove(bad);

    /* another kind of split: the payload is not made (x as always) */
    const char *raw = tmp_path("payload_raw.h5");
    gr_synthetic_config sc = {.n = 20, .test = 4, .c = 3, .h = 8, .w = 8, .classes = 2, .seed = 3};
    CHECK(gr_data_convert_synthetic(&sc, raw, true, false, &err) == GR_OK);
    gr_dataset *rds = NULL;
    CHECK_MSG(gr_dataset_open(raw, "/train", &rds, &err) == GR_OK, "%s", err.msg);
    gr_loader_config lc = {.batch = 4, .world = 1, .prefetch = 2, .encoded_payload = true};
    gr_loader *ld = NULL;
    CHECK(rds && gr_loader_open(rds, &lc, &ld, &err) == GR_OK);
    gr_batch *b = NULL;
    if (ld) CHECK(gr_loader_next(ld, &b, &err) == GR_OK && b && b->enc == NULL && b->x != NULL);
    if (ld) gr_loader_release(ld, b);
    gr_loader_close(ld);
    gr_dataset_close(rds);

    gr_blob_free(&r.blob);
    gr_source_reader_free(&r.rd);
    gr_source_close(r.src);
    gr_dataset_close(ds);
    rm_rf(dir);
    remove(out);
    remove(raw);
    return gr_test_report();
}
