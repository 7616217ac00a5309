/* rrc_replay.c — gpurun's RandomResizedCrop box rule (gr_augment_rrc_box)
 * on random numbers recorded from torchvision's get_params, for
 * tests/rrc_torch.py.
 *
 *   rrc_replay IN OUT
 *
 * IN, text, one case per line:
 *   H W scale0 scale1 ratio0 ratio1 T, then for each of T tries:
 *   area_fraction aspect_ratio ROW_N ROW COL_N COL
 * (ROW in [0, ROW_N), COL in [0, COL_N): the randint draws of the try whose
 * box fits, their bounds checked against the ones gpurun asks for; 0 -1 0 -1
 * for a try that missed).
 * Doubles are printed by Python's repr, so they read back exactly.
 * OUT: per case "y0 x0 h w", or "ERROR why" when gpurun asked for a draw
 * torchvision did not make (another try, or another randint bound). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataio/augment.h"

#define MAX_TRIES 10

typedef struct replay {
    int tries;
    double frac[MAX_TRIES], aspect[MAX_TRIES];
    long long row_n[MAX_TRIES], col_n[MAX_TRIES], row[MAX_TRIES], col[MAX_TRIES];
    char why[200];
} replay;

static double replay_draw(void *ctx, int k, int what, int64_t n) {
    replay *r = ctx;
    if (k >= r->tries) {
        snprintf(r->why, sizeof r->why, "asked for try %d, torchvision made %d", k + 1, r->tries);
        return what == GR_RRC_AREA ? 0.5 : what == GR_RRC_ASPECT ? 1.0 : 0.0;
    }
    switch (what) {
    case GR_RRC_AREA: return r->frac[k];
    case GR_RRC_ASPECT: return r->aspect[k];
    default: {
        const long long want = what == GR_RRC_ROW ? r->row_n[k] : r->col_n[k];
        if (want != (long long)n && !r->why[0])
            snprintf(r->why, sizeof r->why, "try %d: %s drawn in [0, %lld), torchvision's in [0, %lld)", k + 1,
                     what == GR_RRC_ROW ? "row" : "column", (long long)n, want);
        return (double)(what == GR_RRC_ROW ? r->row[k] : r->col[k]);
    }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: rrc_replay IN OUT\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "w");
    if (!in || !out) {
        fprintf(stderr, "rrc_replay: cannot open %s\n", !in ? argv[1] : argv[2]);
        return 2;
    }
    long long H, W;
    gr_augment a;
    replay r;
    while (fscanf(in, "%lld %lld %lf %lf %lf %lf %d", &H, &W, &a.scale[0], &a.scale[1], &a.ratio[0], &a.ratio[1],
                  &r.tries) == 7) {
        if (r.tries < 0 || r.tries > MAX_TRIES) {
            fprintf(stderr, "rrc_replay: %d tries\n", r.tries);
            return 2;
        }
        for (int k = 0; k < r.tries; k++)
            if (fscanf(in, "%lf %lf %lld %lld %lld %lld", &r.frac[k], &r.aspect[k], &r.row_n[k], &r.row[k],
                       &r.col_n[k], &r.col[k]) != 6) {
                fprintf(stderr, "rrc_replay: short case\n");
                return 2;
            }
        r.why[0] = '\0';
        a.crop = GR_CROP_RESIZED;
        gr_xform t;
        gr_augment_rrc_box(&a, H, W, replay_draw, &r, &t);
        if (r.why[0]) fprintf(out, "ERROR %s\n", r.why);
        else fprintf(out, "%lld %lld %lld %lld\n", (long long)t.y0, (long long)t.x0, (long long)t.h, (long long)t.w);
    }
    fclose(in);
    return fclose(out) == 0 ? 0 : 1;
}
