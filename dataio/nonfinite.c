/* nonfinite.c — see nonfinite.h. */
#include "nonfinite.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Whether a sample holds an inf/NaN: an exponent of all ones. Branch-free
 * over the sample, so it vectorizes. */
static bool gr_sample_nonfinite(const gr_images *im, const uint8_t *p) {
    unsigned bad = 0;
    if (im->dtype == GR_DT_FLOAT32) {
        const uint32_t *u = (const uint32_t *)(const void *)p;
        #pragma omp simd reduction(| : bad)
        for (int64_t i = 0; i < im->sample_elems; i++) bad |= (u[i] & 0x7F800000u) == 0x7F800000u;
    } else if (im->dtype == GR_DT_FLOAT16) {
        const uint16_t *u = (const uint16_t *)(const void *)p;
        #pragma omp simd reduction(| : bad)
        for (int64_t i = 0; i < im->sample_elems; i++) bad |= (u[i] & 0x7C00u) == 0x7C00u;
    }
    return bad != 0;
}

/* The error for sample idx (stored at p), naming its first bad element in
 * the stored layout; `more` other samples are bad too. */
static gr_status gr_nonfinite_error(const gr_images *im, int64_t idx, const uint8_t *p, int64_t more,
                                    gr_error *err) {
    int64_t e = 0;
    bool nan = false;
    for (; e < im->sample_elems; e++) {
        if (im->dtype == GR_DT_FLOAT32) {
            uint32_t u;
            memcpy(&u, p + e * 4, 4);
            if ((u & 0x7F800000u) == 0x7F800000u) { nan = (u & 0x7FFFFFu) != 0; break; }
        } else {
            uint16_t u;
            memcpy(&u, p + e * 2, 2);
            if ((u & 0x7C00u) == 0x7C00u) { nan = (u & 0x3FFu) != 0; break; }
        }
    }
    char extra[96] = "";
    if (more > 0) snprintf(extra, sizeof extra, " (and %lld more sample%s)", (long long)more, more == 1 ? "" : "s");
    return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld holds %s at element %lld of %lld%s; float %s "
                        "must be finite: fix or drop the sample", im->path, im->name, (long long)idx,
                        nan ? "NaN" : "inf", (long long)e, (long long)im->sample_elems, extra,
                        im->kind ? im->kind : "images");
}

gr_status gr_images_check_finite(gr_images im, const uint8_t *base, int64_t n, const int64_t *ids, gr_error *err) {
    if (im.dtype == GR_DT_UINT8) return GR_OK;
    const size_t sb = (size_t)im.sample_elems * im.elem_size;
    if (ids) { /* rows just read from the file: the first bad one in file order */
        for (int64_t i = 0; i < n; i++)
            if (gr_sample_nonfinite(&im, base + (size_t)i * sb))
                return gr_nonfinite_error(&im, ids[i], base + (size_t)i * sb, 0, err);
        return GR_OK;
    }
    int64_t first = INT64_MAX, count = 0; /* the whole split: the first bad sample, and how many */
    #pragma omp parallel for reduction(min : first) reduction(+ : count) if (n * im.sample_elems >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++)
        if (gr_sample_nonfinite(&im, base + (size_t)i * sb)) {
            count++;
            if (i < first) first = i;
        }
    if (!count) return GR_OK;
    return gr_nonfinite_error(&im, first, base + (size_t)first * sb, count - 1, err);
}
