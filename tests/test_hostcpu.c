/* test_hostcpu.c — gr_host_cpus (common/hostcpu.c), the default CPU thread
 * count: the CPUs of the process's affinity mask, so `taskset -c 0 gpurun`
 * (or a cgroup's cpuset) runs one thread, not one per online core. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>

#include "../common/gr_common.h"
#include "gr_test.h"

int main(void) {
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    CHECK(gr_host_cpus() == CPU_COUNT(&all));
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    CHECK_MSG(gr_host_cpus() == 1, "one CPU in the mask: %d", gr_host_cpus());
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0);
    CHECK(gr_host_cpus() == CPU_COUNT(&all));
    return gr_test_report();
}
