/* test_hostcpu.c — the default CPU thread count's parts (common/hostcpu.c):
 * gr_host_cpus, the CPUs of the process's affinity mask, so `taskset -c 0
 * gpurun` (or a cgroup's cpuset) runs one thread, not one per online core;
 * gr_host_busy_cpus, the CPUs of that mask other processes keep busy. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/gr_common.h"
#include "../common/hostcpu.h"
#include "gr_test.h"

/* /proc/stat's text: the per-CPU lines of the mask's CPUs count, the
 * all-CPUs line and idle/iowait never do. */
static void test_stat_parse(void) {
    static const char text[] = "cpu  111 0 0 999 0 0 0 0 0 0\n"
                               "cpu0 10 1 2 500 7 3 4 5 0 0\n"  /* busy 10+1+2+3+4+5 = 25 */
                               "cpu1 100 0 0 400 9 0 0 0 0 0\n" /* busy 100 */
                               "cpu3 1000 0 0 0 0 0 0 0\n"      /* busy 1000 */
                               "intr 12345 0 0\n"
                               "cpu9 77777 0 0 0 0 0 0 0\n";  /* past the cpu lines: not one */
    FILE *f = fmemopen((void *)text, sizeof text - 1, "r");
    CHECK(f != NULL);
    unsigned long long busy = 0;
    CHECK(gr_host_stat_busy(f, NULL, &busy));
    CHECK_MSG(busy == 1125, "every CPU: %llu busy ticks, expected 1125", busy);
    cpu_set_t m;
    CPU_ZERO(&m);
    CPU_SET(1, &m);
    CPU_SET(3, &m);
    rewind(f);
    CHECK(gr_host_stat_busy(f, &m, &busy));
    CHECK_MSG(busy == 1100, "cpus 1 and 3: %llu busy ticks, expected 1100", busy);
    CPU_ZERO(&m);
    CPU_SET(2, &m); /* no line of its own */
    rewind(f);
    CHECK(!gr_host_stat_busy(f, &m, &busy));
    fclose(f);
}

/* A process spinning on a CPU of the mask is seen as about one busy CPU. */
static void test_busy_neighbour(const cpu_set_t *all) {
    int last = CPU_SETSIZE - 1;
    while (last > 0 && !CPU_ISSET(last, all)) last--;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(last, &one);
        (void)sched_setaffinity(0, sizeof one, &one);
        for (volatile unsigned long i = 0;; i++) {}
    }
    usleep(50000);
    const double busy = gr_host_busy_cpus(200);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* at least the spinner's CPU (other tests may add to it, never take from it) */
    CHECK_MSG(busy >= 0.7 && busy <= CPU_COUNT(all) + 0.3, "one spinning neighbour: %.2f busy CPUs", busy);
}

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
    test_stat_parse();
    test_busy_neighbour(&all);
    return gr_test_report();
}
