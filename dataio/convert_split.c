/* convert_split.c — gr_split_stratified (convert.h): the train / val
 * assignment of `gpurun data imagefolder --val-fraction F --seed S`, a pure
 * function of the file list and the seed, stratified by class. */
#include "convert.h"
#include "../common/gr_hd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t gr_split_stratified(const int32_t *labels, int64_t n, int64_t nclasses, double fraction, uint64_t seed,
                            uint8_t *val) {
    GR_ASSERT(n >= 0 && nclasses >= 1 && fraction > 0 && fraction < 1);
    /* the files of class c, in their given order: order[start[c] .. start[c + 1]) */
    int64_t *start = gr_xcalloc((size_t)nclasses + 1, sizeof *start);
    int64_t *fill = gr_xmalloc((size_t)nclasses * sizeof *fill);
    int64_t *order = gr_xmalloc((size_t)GR_MAX(n, 1) * sizeof *order);
    for (int64_t i = 0; i < n; i++) {
        GR_ASSERT(labels[i] >= 0 && labels[i] < nclasses);
        start[labels[i] + 1]++;
    }
    for (int64_t c = 0; c < nclasses; c++) start[c + 1] += start[c];
    memcpy(fill, start, (size_t)nclasses * sizeof *fill);
    for (int64_t i = 0; i < n; i++) order[fill[labels[i]]++] = i;
    int64_t nval = 0;
    for (int64_t c = 0; c < nclasses; c++) {
        int64_t *idx = order + start[c];
        const int64_t m = start[c + 1] - start[c];
        const uint64_t key = gr_hash64_hd(seed, (uint64_t)c);
        for (int64_t i = m - 1; i > 0; i--) { /* Fisher-Yates */
            const int64_t j = (int64_t)(gr_hash64_hd(key, (uint64_t)i) % (uint64_t)(i + 1));
            const int64_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        int64_t k = (int64_t)floor(fraction * (double)m + 0.5);
        if (m >= 2) k = GR_MAX(k, 1);
        k = GR_MIN(k, m - 1);
        k = GR_MAX(k, 0);
        for (int64_t t = 0; t < m; t++) val[idx[t]] = t < k;
        nval += k;
    }
    free(start);
    free(fill);
    free(order);
    return nval;
}
