/* test_loader_augment.c — unit tests for the per-sample transforms of
 * dataio/augment.c, against hand computation: the loader's crops, padding
 * and flips on a tiny dataset (CenterCrop's offsets as torchvision rounds
 * them), the draws' ranges and determinism, RandomResizedCrop's bounds and its
 * fallback, gr_decode_sample's bilinear resize against a double-precision
 * reference (NCHW and NHWC, uint8 and float32), and crops that do not fit
 * refused at open. Fixtures: loader_fixture.h. */
#define LOADER_TMP_TAG "augment"
#include "loader_fixture.h"

/* ---- 4. augmentation against hand computation ---- */

/* The tiny dataset: 2x5x6 images, pixel (c, y, x) of sample i is
 * 10*y + x + 60*(i%3) + 50*c; label i. */
enum { TN = 40, TC = 2, TH = 5, TW = 6 };

static uint8_t tiny_pix(int64_t i, int64_t c, int64_t y, int64_t x) {
    return (uint8_t)(10 * y + x + 60 * (i % 3) + 50 * c);
}

static const double g_tmean[TC] = {10, 20}, g_tstd[TC] = {2, 4};

static const char *make_tiny_file(void) {
    static uint8_t pix[TN * TC * TH * TW];
    static int64_t lab[TN];
    for (int64_t i = 0; i < TN; i++) {
        lab[i] = i;
        for (int64_t c = 0; c < TC; c++)
            for (int64_t y = 0; y < TH; y++)
                for (int64_t x = 0; x < TW; x++) pix[((i * TC + c) * TH + y) * TW + x] = tiny_pix(i, c, y, x);
    }
    const char *p = tmp_path("tiny.h5");
    fixture fx = {.dtype = GR_DT_UINT8, .store = STORE_CONTIG, .n = TN, .c = TC, .h = TH, .w = TW, .pix = pix,
                  .labels = lab};
    write_fixture(p, &fx);
    return p;
}

/* torch's bilinear (align_corners=False, antialias=False) of a box of
 * planes of src (stride sh per row), flipped after resizing, in double. */
static void ref_bilinear(const double *src, int64_t sw, int64_t y0, int64_t x0, int64_t h, int64_t w, int64_t oh,
                         int64_t ow, bool flip, double *out) {
    for (int64_t y = 0; y < oh; y++) {
        double sy = ((double)y + 0.5) * (double)h / (double)oh - 0.5;
        if (sy < 0) sy = 0;
        int64_t i0 = (int64_t)floor(sy), i1 = GR_MIN(i0 + 1, h - 1);
        double ly = sy - (double)i0;
        for (int64_t x = 0; x < ow; x++) {
            int64_t xs = flip ? ow - 1 - x : x;
            double sx = ((double)xs + 0.5) * (double)w / (double)ow - 0.5;
            if (sx < 0) sx = 0;
            int64_t j0 = (int64_t)floor(sx), j1 = GR_MIN(j0 + 1, w - 1);
            double lx = sx - (double)j0;
            const double *r0 = src + (y0 + i0) * sw + x0, *r1 = src + (y0 + i1) * sw + x0;
            out[y * ow + x] = (1 - ly) * ((1 - lx) * r0[j0] + lx * r0[j1]) + ly * ((1 - lx) * r1[j0] + lx * r1[j1]);
        }
    }
}

/* What the loader must deliver for tiny sample i through t (out S x S). */
static void tiny_expected(int64_t i, const gr_xform *t, int64_t oh, int64_t ow, double *out) {
    for (int64_t c = 0; c < TC; c++) {
        double *o = out + c * oh * ow;
        if (t->h == oh && t->w == ow) { /* a window, zeros outside */
            for (int64_t y = 0; y < oh; y++)
                for (int64_t x = 0; x < ow; x++) {
                    int64_t sy = t->y0 + y, sx = t->flip ? t->x0 + ow - 1 - x : t->x0 + x;
                    double v = sy >= 0 && sy < TH && sx >= 0 && sx < TW ? tiny_pix(i, c, sy, sx) : 0.0;
                    o[y * ow + x] = (double)(float)((v - g_tmean[c]) / g_tstd[c]);
                }
        } else {
            double plane[TH * TW];
            for (int64_t y = 0; y < TH; y++)
                for (int64_t x = 0; x < TW; x++) plane[y * TW + x] = tiny_pix(i, c, y, x);
            ref_bilinear(plane, TW, t->y0, t->x0, t->h, t->w, oh, ow, t->flip, o);
            for (int64_t q = 0; q < oh * ow; q++) o[q] = (o[q] - g_tmean[c]) / g_tstd[c];
        }
    }
}

/* Python's round() of a half-integer-or-integer, for the CenterCrop offsets. */
static int64_t py_round_half(int64_t twice) { /* round(twice / 2) */
    if (twice % 2 == 0) return twice / 2;
    int64_t lo = (twice - 1) / 2; /* twice >= 0 here */
    return lo % 2 == 0 ? lo : lo + 1;
}

static void test_augment_loader(const char *tinyf) {
    gr_dataset *ds = open_ds(tinyf, GR_CACHE_MEMORY);
    if (!ds) return;
    typedef struct acase { const char *name; gr_augment aug; double tol; } acase;
    const acase cases[] = {
        {"random 4 pad 2 flip", {.crop = GR_CROP_RANDOM, .size = 4, .padding = 2, .flip = true}, 0},
        {"random 5 pad 0", {.crop = GR_CROP_RANDOM, .size = 5, .padding = 0}, 0},
        {"random 10 pad 3 flip", {.crop = GR_CROP_RANDOM, .size = 10, .padding = 3, .flip = true}, 0},
        {"center 3 flip", {.crop = GR_CROP_CENTER, .size = 3, .flip = true}, 0},
        {"center 4", {.crop = GR_CROP_CENTER, .size = 4}, 0},
        {"center 2 flip", {.crop = GR_CROP_CENTER, .size = 2, .flip = true}, 0},
        {"center 8 (padded)", {.crop = GR_CROP_CENTER, .size = 8, .flip = true}, 0},
        {"none flip", {.crop = GR_CROP_NONE, .flip = true}, 0},
        {"resized 7 flip", {.crop = GR_CROP_RESIZED, .size = 7, .scale = {0.2, 1.0}, .ratio = {0.5, 2.0},
                            .flip = true}, 1e-4},
        {"resized 3", {.crop = GR_CROP_RESIZED, .size = 3, .scale = {0.3, 0.9}, .ratio = {0.75, 1.33}}, 1e-4},
    };
    enum { B = 7 };
    for (size_t k = 0; k < GR_ARRAY_LEN(cases); k++) {
        const gr_augment *a = &cases[k].aug;
        gr_loader_config c = base_cfg(B, true, false, 5 + k);
        c.n_norm = 2;
        memcpy(c.mean, g_tmean, sizeof g_tmean);
        memcpy(c.std, g_tstd, sizeof g_tstd);
        c.aug = *a;
        c.workers = 2;
        gr_loader *ld = open_loader(ds, &c);
        if (!ld) continue;
        int64_t chw[3];
        gr_loader_sample_shape(ld, chw);
        const int64_t oh = a->crop == GR_CROP_NONE ? TH : a->size, ow = a->crop == GR_CROP_NONE ? TW : a->size;
        CHECK(chw[0] == TC && chw[1] == oh && chw[2] == ow);
        stream s;
        const int64_t bpe = (TN + B - 1) / B;
        if (!stream_take(ld, B, 2 * bpe, &s)) {
            gr_loader_close(ld);
            continue;
        }
        double *want = gr_xmalloc((size_t)(TC * oh * ow) * sizeof *want);
        int64_t bad = 0, flips = 0, first_bad = -1;
        double worst = 0;
        for (int64_t b = 0; b < s.nb; b++)
            for (int64_t j = 0; j < s.bn[b]; j++) {
                const int64_t q = s.bstart[b] + j, id = s.y[q];
                gr_xform t;
                gr_augment_draw(a, TH, TW, c.seed, s.bepoch[b], id, &t);
                flips += t.flip;
                if (a->crop == GR_CROP_CENTER) { /* the offsets, independently */
                    const int64_t S = a->size;
                    int64_t y0 = S > TH ? -((S - TH) / 2) : py_round_half(TH - S);
                    int64_t x0 = S > TW ? -((S - TW) / 2) : py_round_half(TW - S);
                    CHECK(t.y0 == y0 && t.x0 == x0 && t.h == S && t.w == S);
                }
                tiny_expected(id, &t, oh, ow, want);
                for (int64_t e = 0; e < TC * oh * ow; e++) {
                    double d = fabs((double)s.x[q * s.elems + e] - want[e]);
                    worst = GR_MAX(worst, d);
                    if (!(d <= cases[k].tol)) {
                        if (first_bad < 0) first_bad = q;
                        bad++;
                    }
                }
            }
        CHECK_MSG(bad == 0, "%s: %lld floats differ from the hand computation (worst %g, first at sample %lld)",
                  cases[k].name, (long long)bad, worst, (long long)first_bad);
        if (a->flip) CHECK_MSG(flips > 0 && flips < s.ns, "%s: %lld of %lld flipped", cases[k].name,
                               (long long)flips, (long long)s.ns);
        else CHECK(flips == 0);
        free(want);
        stream_free(&s);
        gr_loader_close(ld);
    }
    /* explicit CenterCrop offsets on 5x6 (round half to even) */
    gr_xform t;
    gr_augment ca = {.crop = GR_CROP_CENTER, .size = 3};
    gr_augment_draw(&ca, TH, TW, 0, 0, 0, &t);
    CHECK(t.y0 == 1 && t.x0 == 2); /* round(1.0), round(1.5) */
    ca.size = 4;
    gr_augment_draw(&ca, TH, TW, 0, 0, 0, &t);
    CHECK(t.y0 == 0 && t.x0 == 1); /* round(0.5) = 0, round(1.0) */
    ca.size = 8;
    gr_augment_draw(&ca, TH, TW, 0, 0, 0, &t);
    CHECK(t.y0 == -1 && t.x0 == -1 && t.h == 8 && t.w == 8); /* pad (1, 2) and (1, 1) */
    gr_augment_draw(&ca, 10, 5, 0, 0, 0, &t);
    CHECK(t.y0 == 1 && t.x0 == -1);
    ca.size = 7;
    gr_augment_draw(&ca, 10, 12, 0, 0, 0, &t);
    CHECK(t.y0 == 2 && t.x0 == 2); /* round(1.5) = 2, round(2.5) = 2 */
    gr_augment_draw(&ca, 14, 16, 0, 0, 0, &t);
    CHECK(t.y0 == 4 && t.x0 == 4); /* round(3.5) = 4, round(4.5) = 4 */
    gr_dataset_close(ds);
}

/* The draws themselves, over many samples. */
static void test_augment_draws(void) {
    enum { NDRAW = 4000 };
    /* RandomCrop(28, padding 4) on 28x28: offsets -4..4, each occurring;
     * flips about half */
    gr_augment a = {.crop = GR_CROP_RANDOM, .size = 28, .padding = 4, .flip = true};
    int64_t hist_y[9] = {0}, hist_x[9] = {0}, flips = 0, out_of_range = 0;
    for (int64_t i = 0; i < NDRAW; i++) {
        gr_xform t;
        gr_augment_draw(&a, 28, 28, 1, 0, i, &t);
        if (t.y0 < -4 || t.y0 > 4 || t.x0 < -4 || t.x0 > 4 || t.h != 28 || t.w != 28) {
            out_of_range++;
            continue;
        }
        hist_y[t.y0 + 4]++, hist_x[t.x0 + 4]++;
        flips += t.flip;
    }
    CHECK(out_of_range == 0);
    bool all = true;
    for (int k = 0; k < 9; k++) all = all && hist_y[k] > NDRAW / 9 / 2 && hist_x[k] > NDRAW / 9 / 2;
    CHECK_MSG(all, "some RandomCrop offsets are (nearly) never drawn");
    CHECK_MSG(flips > NDRAW * 45 / 100 && flips < NDRAW * 55 / 100, "%lld of %d flipped", (long long)flips, NDRAW);
    /* a non-square image, 20x13 with crop 8 padding 1: y0 in [-1, 13], x0 in [-1, 6] */
    gr_augment a2 = {.crop = GR_CROP_RANDOM, .size = 8, .padding = 1};
    int64_t ymin = 99, ymax = -99, xmin = 99, xmax = -99, nflip = 0;
    for (int64_t i = 0; i < NDRAW; i++) {
        gr_xform t;
        gr_augment_draw(&a2, 20, 13, 3, 2, i, &t);
        ymin = GR_MIN(ymin, t.y0), ymax = GR_MAX(ymax, t.y0);
        xmin = GR_MIN(xmin, t.x0), xmax = GR_MAX(xmax, t.x0);
        nflip += t.flip;
    }
    CHECK(ymin == -1 && ymax == 13 && xmin == -1 && xmax == 6 && nflip == 0);

    /* pure function of (seed, epoch, sample) */
    gr_xform t1, t2;
    int64_t differ_epoch = 0, differ_seed = 0, same = 0;
    for (int64_t i = 0; i < 200; i++) {
        gr_augment_draw(&a, 28, 28, 1, 3, i, &t1);
        gr_augment_draw(&a, 28, 28, 1, 3, i, &t2);
        same += t1.y0 == t2.y0 && t1.x0 == t2.x0 && t1.h == t2.h && t1.w == t2.w && t1.flip == t2.flip;
        gr_augment_draw(&a, 28, 28, 1, 4, i, &t2);
        differ_epoch += t1.y0 != t2.y0 || t1.x0 != t2.x0 || t1.flip != t2.flip;
        gr_augment_draw(&a, 28, 28, 2, 3, i, &t2);
        differ_seed += t1.y0 != t2.y0 || t1.x0 != t2.x0 || t1.flip != t2.flip;
    }
    CHECK(same == 200 && differ_epoch > 150 && differ_seed > 150);

    /* RandomResizedCrop(scale 0.08..1, ratio 3/4..4/3) on 64x80: the box is
     * inside the image, its area fraction and aspect are within the ranges
     * up to the rounding of w and h to integers, and the ranges are used */
    const int64_t H = 64, W = 80;
    gr_augment r = {.crop = GR_CROP_RESIZED, .size = 24, .scale = {0.08, 1.0}, .ratio = {3.0 / 4.0, 4.0 / 3.0},
                    .flip = true};
    int64_t outside = 0, bad_area = 0, bad_ratio = 0, rflips = 0;
    double amin = 1e9, amax = 0, rmin = 1e9, rmax = 0;
    for (int64_t i = 0; i < NDRAW; i++) {
        gr_xform t;
        gr_augment_draw(&r, H, W, 9, 1, i, &t);
        rflips += t.flip;
        if (t.y0 < 0 || t.x0 < 0 || t.h < 1 || t.w < 1 || t.y0 + t.h > H || t.x0 + t.w > W) outside++;
        const double h = (double)t.h, w = (double)t.w, slack = 0.5 * (h + w) + 0.25;
        const double area = h * w;
        if (area < r.scale[0] * H * W - slack || area > r.scale[1] * H * W + slack) bad_area++;
        if (w + 0.5 < r.ratio[0] * (h - 0.5) || w - 0.5 > r.ratio[1] * (h + 0.5)) bad_ratio++;
        amin = GR_MIN(amin, area / (H * W)), amax = GR_MAX(amax, area / (H * W));
        rmin = GR_MIN(rmin, w / h), rmax = GR_MAX(rmax, w / h);
    }
    CHECK(outside == 0);
    CHECK_MSG(bad_area == 0 && bad_ratio == 0, "%lld boxes outside the scale range, %lld outside the ratio range",
              (long long)bad_area, (long long)bad_ratio);
    CHECK_MSG(amin < 0.12 && amax > 0.9 && rmin < 0.8 && rmax > 1.25,
              "the ranges are not covered: area %g..%g, aspect %g..%g", amin, amax, rmin, rmax);
    CHECK(rflips > NDRAW * 45 / 100 && rflips < NDRAW * 55 / 100);

    /* the fallback (no try fits): torchvision's centre box, ratio clamped */
    gr_xform t;
    gr_augment f1 = {.crop = GR_CROP_RESIZED, .size = 8, .scale = {0.9, 1.0}, .ratio = {3.0, 4.0}};
    gr_augment_draw(&f1, H, W, 1, 0, 5, &t); /* too wide: w = 80, h = round(80/3) = 27 */
    CHECK_MSG(t.h == 27 && t.w == 80 && t.y0 == 18 && t.x0 == 0, "fallback (%lld,%lld,%lld,%lld)", (long long)t.y0,
              (long long)t.x0, (long long)t.h, (long long)t.w);
    gr_augment f2 = {.crop = GR_CROP_RESIZED, .size = 8, .scale = {0.9, 1.0}, .ratio = {0.2, 0.25}};
    gr_augment_draw(&f2, H, W, 1, 0, 5, &t); /* too tall: h = 64, w = round(64/4) = 16 */
    CHECK(t.h == 64 && t.w == 16 && t.y0 == 0 && t.x0 == 32);
    gr_augment f3 = {.crop = GR_CROP_RESIZED, .size = 8, .scale = {1.5, 2.0}, .ratio = {3.0 / 4.0, 4.0 / 3.0}};
    gr_augment_draw(&f3, H, W, 1, 0, 5, &t); /* area too large, ratio fits: the whole image */
    CHECK(t.h == 64 && t.w == 80 && t.y0 == 0 && t.x0 == 0);
    gr_augment_draw(&f1, 30, 30, 4, 2, 11, &t); /* square, too wide: 30 x round(10) */
    CHECK(t.h == 10 && t.w == 30 && t.y0 == 10 && t.x0 == 0);
}

/* gr_decode_sample's bilinear resize against ref_bilinear on a random uint8
 * 3x64x80 image, NCHW and NHWC (its own y-first path), uint8 and float32,
 * normalized by mean 127.5 and std 64 (so 1e-4 is in normalized units). */
static void test_bilinear(void) {
    enum { C = 3, H = 64, W = 80 };
    static uint8_t img[C * H * W], img_hwc[C * H * W];
    static float imgf[C * H * W];
    static double plane[H * W];
    uint64_t s = 12345;
    for (int i = 0; i < C * H * W; i++) img[i] = (uint8_t)(rng_next(&s) >> 56), imgf[i] = img[i];
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) img_hwc[(y * W + x) * C + c] = img[(c * H + y) * W + x];
    const double mean[C] = {127.5, 127.5, 127.5}, std[C] = {64, 64, 64};
    const int64_t chw[3] = {C, H, W};
    const int64_t sizes[] = {24, 7, 100};
    double worst = 0, worst_hwc = 0, layout_diff = 0;
    int64_t nbox = 0, mism_float = 0;
    for (size_t si = 0; si < GR_ARRAY_LEN(sizes); si++) {
        const int64_t S = sizes[si];
        gr_decoder d8, dh, df;
        gr_decoder_init(&d8, GR_DT_UINT8, chw, false, S, S, mean, std);
        gr_decoder_init(&dh, GR_DT_UINT8, chw, true, S, S, mean, std);
        gr_decoder_init(&df, GR_DT_FLOAT32, chw, false, S, S, mean, std);
        void *scratch = gr_xmalloc(gr_decoder_scratch_bytes(&d8));
        float *o8 = gr_xmalloc((size_t)(C * S * S) * sizeof(float)), *oh = gr_xmalloc((size_t)(C * S * S) * sizeof(float));
        float *of = gr_xmalloc((size_t)(C * S * S) * sizeof(float));
        double *want = gr_xmalloc((size_t)(S * S) * sizeof(double));
        /* drawn boxes, then hand-picked ones: tiny (upscale), whole image
         * (downscale), touching the bottom-right edge, one row, one column */
        gr_augment r = {.crop = GR_CROP_RESIZED, .size = S, .scale = {0.02, 1.0}, .ratio = {0.5, 2.0}, .flip = true};
        const gr_xform fixed[] = {{0, 0, 64, 80, false}, {10, 20, 7, 9, true}, {57, 70, 7, 10, false},
                                  {5, 5, 1, 1, false}, {30, 0, 1, 80, true}, {0, 40, 64, 1, false},
                                  {3, 4, 50, 3, true}, {0, 0, 24, 24, false}};
        for (int k = 0; k < 40 + (int)GR_ARRAY_LEN(fixed); k++) {
            gr_xform t;
            if (k < 40) gr_augment_draw(&r, H, W, 77, 0, k, &t);
            else t = fixed[k - 40];
            if (t.h == S && t.w == S) continue; /* a window, not a resize */
            nbox++;
            gr_decode_sample(&d8, img, &t, o8, scratch);
            gr_decode_sample(&dh, img_hwc, &t, oh, scratch);
            gr_decode_sample(&df, imgf, &t, of, scratch);
            for (int64_t q = 0; q < C * S * S; q++) layout_diff = GR_MAX(layout_diff, fabs(o8[q] - oh[q]));
            for (int c = 0; c < C; c++) {
                for (int q = 0; q < H * W; q++) plane[q] = img[c * H * W + q];
                ref_bilinear(plane, W, t.y0, t.x0, t.h, t.w, S, S, t.flip, want);
                for (int64_t q = 0; q < S * S; q++) {
                    double v = (want[q] - mean[c]) / std[c];
                    worst = GR_MAX(worst, fabs(o8[c * S * S + q] - v));
                    worst_hwc = GR_MAX(worst_hwc, fabs(oh[c * S * S + q] - v));
                    if (fabs(of[c * S * S + q] - o8[c * S * S + q]) > 1e-6) mism_float++;
                }
            }
        }
        free(want);
        free(o8);
        free(oh);
        free(of);
        free(scratch);
        gr_decoder_free(&d8);
        gr_decoder_free(&dh);
        gr_decoder_free(&df);
    }
    CHECK(nbox > 100);
    CHECK_MSG(worst < 1e-4, "bilinear: max |diff| %g against the double reference", worst);
    CHECK_MSG(worst_hwc < 1e-4, "bilinear, HWC (y first): max |diff| %g against the double reference", worst_hwc);
    /* the two orders of the lerps (NCHW x first, HWC y first) agree to float rounding */
    CHECK_MSG(layout_diff < 1e-5, "NCHW and NHWC differ by up to %g", layout_diff);
    printf("bilinear: max |diff| %.2g (CHW), %.2g (HWC) against double; CHW vs HWC %.2g (normalized units)\n", worst,
           worst_hwc, layout_diff);
    CHECK_MSG(mism_float == 0, "%lld floats differ between uint8 and float32 images", (long long)mism_float);
}

static void test_crop_too_large(const char *tinyf) {
    gr_dataset *ds = open_ds(tinyf, GR_CACHE_MEMORY);
    if (!ds) return;
    gr_loader_config c = base_cfg(4, false, false, 0);
    gr_loader *ld = NULL;
    gr_error err = {0};
    /* 5x6 padded by 2 is 9x10: crop 9 fits, crop 10 does not (the height) */
    c.aug = (gr_augment){.crop = GR_CROP_RANDOM, .size = 9, .padding = 2};
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
    gr_loader_close(ld);
    ld = NULL;
    c.aug.size = 10;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_DATA && ld == NULL);
    CHECK_STR_CONTAINS(err.msg, tinyf);
    CHECK_STR_CONTAINS(err.msg, "/train/images");
    CHECK_STR_CONTAINS(err.msg, "crop 10");
    CHECK_STR_CONTAINS(err.msg, "9x10");
    c.aug = (gr_augment){.crop = GR_CROP_RANDOM, .size = 7};
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_DATA && ld == NULL);
    CHECK_STR_CONTAINS(err.msg, "crop 7");
    CHECK_STR_CONTAINS(err.msg, "5x6");
    gr_dataset_close(ds);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    /* tmp_path's buffers are reused: keep a copy */
    char *tinyf = gr_xstrdup(make_tiny_file());
    test_augment_loader(tinyf);
    test_augment_draws();
    test_bilinear();
    test_crop_too_large(tinyf);
    free(tinyf);
    return gr_test_report();
}
