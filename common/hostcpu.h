/* hostcpu.h — the parsing under gr_host_busy_cpus (gr_common.h), for tests.
 * The includer defines _GNU_SOURCE (cpu_set_t) before any system header. */
#ifndef GR_HOSTCPU_H
#define GR_HOSTCPU_H

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>

/* Sums the busy ticks (user nice system irq softirq steal: not idle or
 * iowait) of the per-CPU lines ("cpuN ...") of a /proc/stat text whose CPU
 * is in mask (NULL: every CPU); the all-CPUs line is not counted. False when
 * no per-CPU line was counted. */
bool gr_host_stat_busy(FILE *stat, const cpu_set_t *mask, unsigned long long *busy);

#endif
