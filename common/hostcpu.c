/* hostcpu.c — the CPUs this process may use and how busy other work keeps
 * them (gr_common.h): what the default thread count is made of. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, CPU_ISSET */
#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gr_common.h"
#include "hostcpu.h"

int gr_host_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

bool gr_host_stat_busy(FILE *stat, const cpu_set_t *mask, unsigned long long *busy) {
    char line[512];
    int lines = 0;
    *busy = 0;
    while (fgets(line, sizeof line, stat)) {
        unsigned long long v[8] = {0};
        int cpu;
        if (strncmp(line, "cpu", 3) != 0) break; /* the cpu lines come first */
        if (!isdigit((unsigned char)line[3])) continue; /* the first line, all CPUs together */
        if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7]) < 6)
            continue;
        if (mask && (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, mask))) continue;
        *busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* user nice system irq softirq steal */
        lines++;
    }
    return lines > 0;
}

/* Busy ticks of the CPUs of the affinity mask, from /proc/stat. */
static bool gr_host_busy_ticks(unsigned long long *busy) {
    cpu_set_t set;
    const bool masked = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return false;
    const bool ok = gr_host_stat_busy(f, masked ? &set : NULL, busy);
    fclose(f);
    return ok;
}

/* This process's own ticks (all its threads). */
static bool gr_host_self_ticks(unsigned long long *self) {
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
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
    if (!gr_host_busy_ticks(&b0) || !gr_host_self_ticks(&s0)) return -1.0;
    struct timespec t0, t1, d = {ms / 1000, (long)(ms % 1000) * 1000000L};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (nanosleep(&d, &d) != 0) {}
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!gr_host_busy_ticks(&b1) || !gr_host_self_ticks(&s1) || b1 < b0 || s1 < s0) return -1.0;
    const double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const double others = (double)((b1 - b0) - GR_MIN(b1 - b0, s1 - s0)) / (double)sysconf(_SC_CLK_TCK);
    return secs > 0 ? others / secs : -1.0;
}
