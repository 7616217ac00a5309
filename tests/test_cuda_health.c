/* test_cuda_health.c — runner/health.h on a GPU: NVML loaded from the
 * driver, the device found by the CUDA device's PCI bus id, and a sample's
 * figures plausible (utilization 0-100%, memory used within total, a
 * temperature and power draw, an SM clock); the summary's maxima. Label
 * `gpu`: exits 77 (skipped) where no CUDA device is present. */
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "runner/health.h"

/* the integer after "key": in text, -1 when absent */
static double field(const char *text, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(text, k);
    return p ? atof(p + strlen(k)) : -1.0;
}

int main(void) {
    gr_backend *be = NULL;
    gr_error err;
    if (gr_backend_create("cuda:0", 0, &be, &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return GR_TEST_SKIP_CODE;
    }
    char pci[64];
    CHECK(gr_backend_pci_bus_id(be, pci, sizeof pci) && strlen(pci) >= 7);
    gr_health h;
    gr_health_open(&h, be, false);
    CHECK_MSG(h.nvml != NULL, "NVML (libnvidia-ml.so.1) did not load or has no device %s", pci);
    gr_json js;
    gr_json_begin(&js);
    gr_health_sample(&h, &js);
    const char *line = gr_json_end(&js);
    printf("%s\n", line);
    double util = field(line, "gpu_util_pct"), used = field(line, "gpu_mem_used_bytes");
    double total = field(line, "gpu_mem_total_bytes"), temp = field(line, "gpu_temp_c");
    double power = field(line, "gpu_power_w"), mhz = field(line, "gpu_sm_mhz");
    CHECK(util >= 0 && util <= 100);
    CHECK(total > (1 << 30) && used > 0 && used <= total);
    CHECK(temp > 5 && temp < 120);
    CHECK(power > 1 && power < 2000);
    CHECK(mhz > 100 && mhz < 5000);
    gr_json_begin(&js);
    gr_health_summary(&h, &js);
    line = gr_json_end(&js);
    printf("%s\n", line);
    CHECK(field(line, "gpu_temp_c_max") == temp && field(line, "gpu_mem_used_bytes_max") == used);
    gr_health_close(&h);
    gr_backend_free(be);
    return gr_test_report();
}
