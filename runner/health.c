/* health.c — process and GPU health figures (see health.h). */
#include "health.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "hostmem.h"

/* NVML's C API as its documentation gives it, declared here so that no
 * header or library is needed at build time. */
typedef int gr_nvml_ret; /* nvmlReturn_t: 0 NVML_SUCCESS */
typedef struct { unsigned int gpu, memory; } gr_nvml_util;
typedef struct { unsigned long long total, free, used; } gr_nvml_mem;
enum { GR_NVML_TEMPERATURE_GPU = 0, GR_NVML_CLOCK_SM = 1 };
/* nvmlClocksThrottleReason* (the same bits as nvmlClocksEventReason*) */
#define GR_NVML_SW_POWER_CAP 0x4ull
#define GR_NVML_HW_SLOWDOWN 0x8ull
#define GR_NVML_SW_THERMAL 0x20ull
#define GR_NVML_HW_THERMAL 0x40ull
#define GR_NVML_HW_POWER_BRAKE 0x80ull

struct gr_nvml {
    void *lib;
    gr_nvml_ret (*init)(void);
    gr_nvml_ret (*shutdown)(void);
    gr_nvml_ret (*by_pci)(const char *, void **);
    gr_nvml_ret (*by_index)(unsigned int, void **);
    gr_nvml_ret (*util)(void *, gr_nvml_util *);
    gr_nvml_ret (*mem)(void *, gr_nvml_mem *);
    gr_nvml_ret (*temp)(void *, int, unsigned int *);
    gr_nvml_ret (*power)(void *, unsigned int *);
    gr_nvml_ret (*clock)(void *, int, unsigned int *);
    gr_nvml_ret (*reasons)(void *, unsigned long long *);
};

/* the symbol's address in a function pointer of any type (POSIX dlsym) */
#define GR_NVML_SYM(n, field, name) (*(void **)(&(n)->field) = dlsym((n)->lib, name))

struct gr_nvml *gr_nvml_open(const char *path, const char *pci, void **dev) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return NULL;
    struct gr_nvml *n = gr_xcalloc(1, sizeof *n);
    n->lib = lib;
    bool ok = GR_NVML_SYM(n, init, "nvmlInit_v2") && GR_NVML_SYM(n, shutdown, "nvmlShutdown") &&
              GR_NVML_SYM(n, by_pci, "nvmlDeviceGetHandleByPciBusId_v2") &&
              GR_NVML_SYM(n, by_index, "nvmlDeviceGetHandleByIndex_v2") &&
              GR_NVML_SYM(n, util, "nvmlDeviceGetUtilizationRates") && GR_NVML_SYM(n, mem, "nvmlDeviceGetMemoryInfo") &&
              GR_NVML_SYM(n, temp, "nvmlDeviceGetTemperature") && GR_NVML_SYM(n, power, "nvmlDeviceGetPowerUsage") &&
              GR_NVML_SYM(n, clock, "nvmlDeviceGetClockInfo");
    /* newer drivers name it ...ClocksEventReasons; either will do, neither is needed */
    if (ok && !GR_NVML_SYM(n, reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
        GR_NVML_SYM(n, reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!ok || n->init() != 0) {
        dlclose(lib);
        free(n);
        return NULL;
    }
    if ((pci ? n->by_pci(pci, dev) : n->by_index(0, dev)) != 0) {
        gr_nvml_close(n);
        return NULL;
    }
    return n;
}

void gr_nvml_close(struct gr_nvml *n) {
    if (!n) return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}

static double gr_health_cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

void gr_health_open(gr_health *h, gr_backend *be, bool quiet) {
    memset(h, 0, sizeof *h);
    h->quiet = quiet;
    h->t0 = h->t_last = gr_now();
    h->cpu_t0 = h->cpu_last = gr_health_cpu_s();
    char pci[64];
    snprintf(h->name, sizeof h->name, "%s", gr_backend_name(be));
    if (gr_backend_pci_bus_id(be, pci, sizeof pci)) h->nvml = gr_nvml_open("libnvidia-ml.so.1", pci, &h->dev);
}

void gr_health_close(gr_health *h) {
    gr_nvml_close(h->nvml);
    h->nvml = NULL;
}

/* A slowdown for temperature or power, said once. */
static void gr_health_throttle(gr_health *h) {
    unsigned long long r = 0;
    if (h->throttle_said || !h->nvml->reasons || h->nvml->reasons(h->dev, &r) != 0) return;
    const char *why = (r & (GR_NVML_HW_THERMAL | GR_NVML_SW_THERMAL)) ? "its temperature"
                      : (r & (GR_NVML_SW_POWER_CAP | GR_NVML_HW_POWER_BRAKE)) ? "its power limit"
                      : (r & GR_NVML_HW_SLOWDOWN) ? "a hardware slowdown (temperature or power)" : NULL;
    if (!why) return;
    h->throttle_said = true;
    if (!h->quiet)
        fprintf(stderr, "gpurun: %s: the clocks are lowered for %s (NVML clock event reasons 0x%llx); steps are slower "
                "while it lasts\n", h->name, why, r);
}

void gr_health_sample(gr_health *h, gr_json *js) {
    const double now = gr_now(), cpu = gr_health_cpu_s();
    gr_json_int(js, "rss_bytes", (int64_t)gr_hostmem_rss());
    gr_json_num(js, "cpu_pct", now > h->t_last ? 100.0 * (cpu - h->cpu_last) / (now - h->t_last) : 0.0);
    h->t_last = now;
    h->cpu_last = cpu;
    if (!h->nvml) return;
    gr_nvml_util u;
    gr_nvml_mem m;
    unsigned int temp, mw, mhz;
    h->samples++;
    if (h->nvml->util(h->dev, &u) == 0) {
        gr_json_int(js, "gpu_util_pct", u.gpu);
        h->util_sum += u.gpu;
    }
    if (h->nvml->mem(h->dev, &m) == 0) {
        gr_json_int(js, "gpu_mem_used_bytes", (int64_t)m.used);
        gr_json_int(js, "gpu_mem_total_bytes", (int64_t)m.total);
        if ((double)m.used > h->mem_max) h->mem_max = (double)m.used;
    }
    if (h->nvml->temp(h->dev, GR_NVML_TEMPERATURE_GPU, &temp) == 0) {
        gr_json_int(js, "gpu_temp_c", temp);
        if (temp > h->temp_max) h->temp_max = temp;
    }
    if (h->nvml->power(h->dev, &mw) == 0) {
        gr_json_num(js, "gpu_power_w", mw / 1e3);
        if (mw / 1e3 > h->power_max) h->power_max = mw / 1e3;
    }
    if (h->nvml->clock(h->dev, GR_NVML_CLOCK_SM, &mhz) == 0) gr_json_int(js, "gpu_sm_mhz", mhz);
    gr_health_throttle(h);
}

void gr_health_summary(const gr_health *h, gr_json *js) {
    const double now = gr_now();
    gr_json_num(js, "cpu_pct", now > h->t0 ? 100.0 * (gr_health_cpu_s() - h->cpu_t0) / (now - h->t0) : 0.0);
    if (!h->nvml || !h->samples) return;
    gr_json_num(js, "gpu_util_pct_mean", h->util_sum / (double)h->samples);
    gr_json_num(js, "gpu_temp_c_max", h->temp_max);
    gr_json_num(js, "gpu_power_w_max", h->power_max);
    gr_json_int(js, "gpu_mem_used_bytes_max", (int64_t)h->mem_max);
}
