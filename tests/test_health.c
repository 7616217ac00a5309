/* test_health.c — runner/health.h without a GPU driver: NVML that cannot be
 * loaded (not there, or a library that is not NVML) leaves the figures out
 * and says nothing; on the CPU a sample has the process's resident memory
 * and CPU use and no gpu_* field; the summary has the run's CPU use.
 * (tests/test_cuda_health.c reads NVML's figures where a GPU is lent.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gr_test.h"
#include "runner/health.h"

/* Runs fn with stderr sent to a file; returns what it wrote (static). */
static const char *gr_stderr_of(void (*fn)(void *), void *arg) {
    static char text[4096];
    char path[] = GR_TEST_TMP "/health_stderr_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return "(mkstemp failed)";
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return text;
}

static void open_missing(void *out) {
    void *dev = NULL;
    *(struct gr_nvml **)out = gr_nvml_open("/nonexistent/libnvidia-ml.so.1", NULL, &dev);
}
static void open_not_nvml(void *out) {
    void *dev = NULL;
    *(struct gr_nvml **)out = gr_nvml_open("libm.so.6", NULL, &dev);
}

/* This process's CPU seconds and the monotonic clock. */
static double gr_cpu_now(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct { gr_backend *be; gr_health h; gr_json line, sum; double pct; } cpu_case;
static void run_cpu(void *arg) {
    cpu_case *c = arg;
    /* the CPU use the sample should report, measured here around the same
     * window: on a loaded machine the loop gets less than a core, and the
     * sample must say as much, not clear a fixed bar */
    const double w0 = gr_cpu_now(CLOCK_MONOTONIC), c0 = gr_cpu_now(CLOCK_PROCESS_CPUTIME_ID);
    gr_health_open(&c->h, c->be, false);
    volatile double x = 0.0; /* some CPU time to measure */
    for (int i = 0; i < 20000000; i++) x += i * 1e-9;
    gr_json_begin(&c->line);
    gr_health_sample(&c->h, &c->line);
    c->pct = 100.0 * (gr_cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0) / (gr_cpu_now(CLOCK_MONOTONIC) - w0);
    gr_json_end(&c->line);
    gr_json_begin(&c->sum);
    gr_health_summary(&c->h, &c->sum);
    gr_json_end(&c->sum);
    gr_health_close(&c->h);
}

int main(void) {
    struct gr_nvml *n = (struct gr_nvml *)1;
    CHECK_MSG(gr_stderr_of(open_missing, &n)[0] == '\0', "a missing library: something was said");
    CHECK(n == NULL);
    n = (struct gr_nvml *)1;
    CHECK_MSG(gr_stderr_of(open_not_nvml, &n)[0] == '\0', "a library that is not NVML: something was said");
    CHECK(n == NULL);

    cpu_case c = {0};
    gr_error err;
    if (gr_backend_create("cpu", 1, &c.be, &err) != GR_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const char *said = gr_stderr_of(run_cpu, &c);
    CHECK_MSG(said[0] == '\0', "the CPU's health said: %s", said);
    CHECK(c.h.nvml == NULL);
    CHECK_STR_CONTAINS(c.line.buf, "\"rss_bytes\":");
    CHECK_STR_CONTAINS(c.line.buf, "\"cpu_pct\":");
    CHECK_MSG(strstr(c.line.buf, "gpu_") == NULL, "%s", c.line.buf);
    const char *p = strstr(c.line.buf, "\"rss_bytes\":");
    CHECK(p && atoll(p + 12) > (1 << 20));
    p = strstr(c.line.buf, "\"cpu_pct\":");
    const double pct = p ? atof(p + 10) : -1.0;
    CHECK_MSG(pct > 0.0 && fabs(pct - c.pct) < 10.0 + 0.2 * c.pct, "a busy loop's CPU use: %s; measured here %.1f%%",
              c.line.buf, c.pct);
    CHECK_STR_CONTAINS(c.sum.buf, "\"cpu_pct\":");
    CHECK_MSG(strstr(c.sum.buf, "gpu_") == NULL, "%s", c.sum.buf);
    gr_backend_free(c.be);
    return gr_test_report();
}
