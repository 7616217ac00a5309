/* hostcpu.c — the CPUs this process may use and how busy other work keeps
 * them (gr_common.h): what the default thread count is made of. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gr_common.h"

int gr_host_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Ticks all CPUs spent busy (not idle or iowait), and this process's own. */
static bool gr_host_ticks(unsigned long long *busy, unsigned long long *self) {
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return false;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                     &v[6], &v[7]);
    fclose(f);
    if (got < 5) return false;
    *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* user nice system irq softirq steal */
    char buf[1024];
    f = fopen("/proc/self/stat", "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* past the command name, which may hold spaces */
    unsigned long long ut = 0, st = 0;
    /* fields 3.. after it: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return false;
    *self = ut + st;
    return true;
}

double gr_host_busy_cpus(int ms) {
    unsigned long long b0, s0, b1, s1;
    if (!gr_host_ticks(&b0, &s0)) return -1.0;
    struct timespec t0, t1, d = {ms / 1000, (long)(ms % 1000) * 1000000L};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (nanosleep(&d, &d) != 0) {}
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!gr_host_ticks(&b1, &s1)) return -1.0;
    const double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const double others = (double)((b1 - b0) - GR_MIN(b1 - b0, s1 - s0)) / (double)sysconf(_SC_CLK_TCK);
    return secs > 0 ? others / secs : -1.0;
}
