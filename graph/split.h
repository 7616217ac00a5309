/* split.h — `split`, the one model layer item that is not an op: it cuts
 * its input along an axis into named parts, each a `slice` layer.
 *
 *   - {split: {axis: -1, sizes: [64, 64, 64], names: [q, k, v]}}
 *   - {split: {axis: 1, parts: 2}}          # equal parts: split<k>_0, split<k>_1
 *
 * axis (required) is any but the batch's, negative counting from the end;
 * sizes (each >= 1, summing to the axis's length) or parts (2 or more,
 * dividing it); names (optional) one per part, else <split name>_<i>.
 * Later layers read a part by its name (`input: k`); the layer right after
 * the split reads the last part unless it names its input. Each part's
 * gradient flows back into the input as for any tensor read several times.
 * graph/build.c expands it (gr_split_parse gives the parts). */
#ifndef GR_SPLIT_H
#define GR_SPLIT_H

#include "graph.h"

#define GR_SPLIT_MAX 64 /* parts of one split */

typedef struct gr_split {
    int n;                                  /* parts */
    int64_t axis;                           /* as given (the slices resolve it) */
    int64_t start[GR_SPLIT_MAX], end[GR_SPLIT_MAX];
    char names[GR_SPLIT_MAX][GR_NAME_MAX];  /* local layer names */
} gr_split;

/* Reads a split's attributes (attrs: the map under `split`, key its spec
 * key for errors) into sp. x: its input, whose shape the sizes or parts are
 * checked against (NULL when shapes are not known: the parse-only build);
 * base: the default names' stem (split<k>). Errors name the key (exit 2). */
gr_status gr_split_parse(const gr_cfg *attrs, const char *key, const gr_tensor *x, const char *base, gr_split *sp,
                         gr_error *err);
/* How many layers a split item expands to, read without checking (1 when
 * its attributes do not say): for the model's size bound before building. */
int gr_split_count(const gr_cfg *attrs);

#endif
