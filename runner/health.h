/* health.h — the device's health next to the training figures:
 * on every train line of metrics.jsonl and in summary.json.
 *
 * Always: the process's resident memory (rss_bytes) and CPU use since the
 * last line (cpu_pct: percent of one core, as top shows it). On a GPU also
 * NVML's utilization, memory used and total, temperature, power and SM
 * clock (gpu_util_pct, gpu_mem_used_bytes, gpu_mem_total_bytes,
 * gpu_temp_c, gpu_power_w, gpu_sm_mhz), with the run's mean utilization and
 * highest temperature, power and memory in summary.json. NVML is the
 * driver's libnvidia-ml.so.1, loaded at run time: a machine without a
 * driver needs nothing and is told nothing (the figures are left out). A
 * clock slowdown for temperature or power is said once on stderr. */
#ifndef GR_HEALTH_H
#define GR_HEALTH_H

#include <stdbool.h>

#include "../kernels/backend.h"
#include "json.h"

struct gr_nvml; /* the loaded library's entry points (health.c) */

typedef struct gr_health {
    struct gr_nvml *nvml; /* NULL: no GPU figures */
    void *dev;            /* its nvmlDevice_t */
    char name[32];        /* the device's name in messages ("cuda:0") */
    bool quiet, throttle_said;
    double t_last, cpu_last;       /* the clock and CPU seconds at the last sample */
    double cpu_t0, t0;             /* at open: the run's mean CPU use */
    double util_sum;               /* GPU: the samples' sum of utilization */
    int64_t samples;
    double temp_max, power_max, mem_max;
} gr_health;

/* Starts the figures of a run on be (NVML when be has a PCI bus id). */
void gr_health_open(gr_health *h, gr_backend *be, bool quiet);
void gr_health_close(gr_health *h);
/* The figures now, as fields of a metrics line. */
void gr_health_sample(gr_health *h, gr_json *js);
/* The run's figures, as fields of summary.json. */
void gr_health_summary(const gr_health *h, gr_json *js);

/* NVML from the library at path (tests: a library that is not there, or
 * is not NVML): NULL, and nothing said, when it cannot be loaded or
 * initialized; else its handle for PCI bus id pci (NULL: the first GPU). */
struct gr_nvml *gr_nvml_open(const char *path, const char *pci, void **dev);
void gr_nvml_close(struct gr_nvml *n);

#endif
