/* scaler.c — the dynamic loss scaler (see scaler.h). */
#include "scaler.h"

#include "../common/env.h"

gr_scaler gr_scaler_init(bool dynamic, double fixed) {
    gr_scaler sc = {.scale = 1.0, .dynamic = dynamic, .interval = GR_SCALE_INTERVAL};
    sc.interval = gr_env_int(GR_ENV_LOSS_SCALE_INTERVAL, GR_SCALE_INTERVAL); /* tests shorten it */
    if (sc.dynamic) sc.scale = GR_SCALE_INIT;
    else if (fixed > 0.0) sc.scale = fixed;
    sc.check = sc.dynamic || sc.scale != 1.0;
    return sc;
}

float gr_scaler_grad_scale(const gr_scaler *sc, int64_t batch) {
    return sc->scale == 1.0 ? 1.0f / (float)batch : (float)(sc->scale / (double)batch);
}

bool gr_scaler_update(gr_scaler *sc, bool finite) {
    if (!sc->dynamic) return finite;
    if (!finite) {
        sc->scale *= 0.5;
        sc->good = 0;
        sc->skipped++;
    } else if (++sc->good >= sc->interval) {
        sc->scale *= 2.0;
        sc->good = 0;
    }
    return finite || sc->scale >= GR_SCALE_FLOOR;
}
