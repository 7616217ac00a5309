/* launch.c — `gpurun launch -n N [--launcher mpirun|srun] JOB.yaml [run
 * options...]`: a data-parallel run under mpirun (or srun) whose exit
 * status is the run's own (cli.h).
 *
 * mpirun answers a SIGTERM sent to itself (a spot instance's shutdown, a
 * scheduler's preemption) by passing it to the ranks, which stop at one step
 * with a committed checkpoint and exit 75, and then exits 1 itself: a script
 * cannot tell a preempted run from a failed one. launch starts the launcher
 * with `gpurun run` on every rank, passes SIGTERM, SIGINT and SIGUSR1 on to
 * it, and when it ends reads the run directory's summary.json (rank 0's,
 * written after launch started): its exit_code (75 stopped, 3 a data error,
 * ...) is launch's, with one line when the launcher said otherwise. Without
 * such a summary (the ranks never got that far) the launcher's status is
 * passed on. Options of the launcher itself come from its environment
 * (Open MPI: OMPI_MCA_*, e.g. OMPI_MCA_rmaps_base_oversubscribe=1). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../config/spec.h"
#include "cli.h"
#include "job.h"
#include "../common/json_read.h"

static volatile sig_atomic_t gr_launch_child = 0;
static volatile sig_atomic_t gr_launch_signal = 0;

static void gr_launch_forward(int sig) {
    gr_launch_signal = sig;
    if (gr_launch_child > 0) kill((pid_t)gr_launch_child, sig);
}

/* The run directory the ranks will use: --run-dir, else the spec's (log.dir,
 * runs/<name>); and the spec's checkpoint.signal_deadline_s. */
static void gr_launch_run_dir(const char *job, char **args, int n, char *out, size_t cap, double *deadline_s) {
    const char *sets[GR_MAX_SETS], *run_dir = NULL;
    int nsets = 0;
    for (int i = 0; i < n; i++) {
        const char *v = i + 1 < n ? args[i + 1] : NULL;
        if (!strcmp(args[i], "--run-dir") && v) {
            run_dir = v;
            i++;
        } else if (!strncmp(args[i], "--set=", 6) && nsets < GR_MAX_SETS) {
            sets[nsets++] = args[i] + 6;
        } else if (!strcmp(args[i], "--set") && v && nsets < GR_MAX_SETS) {
            sets[nsets++] = v;
            i++;
        }
    }
    gr_job_spec spec;
    gr_error err;
    gr_status st = gr_spec_load(job, sets, nsets, &spec, &err);
    if (st) gr_die(st, err.msg); /* the ranks would say the same, N times */
    gr_run_options opt = {.run_dir = run_dir};
    gr_job j;
    gr_job_init(&j, &spec, true);
    gr_job_paths(&j, &opt);
    snprintf(out, cap, "%s", j.run_dir);
    *deadline_s = spec.checkpoint.signal_deadline_s;
    gr_job_free(&j);
    gr_spec_free(&spec);
}

/* summary.json's exit code when it was written at or after t0; -1 when none. */
static int gr_launch_outcome(const char *run_dir, time_t t0, char *status, size_t cap) {
    char path[GR_PATH_MAX + 128], text[8192], why[64];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_mtime < t0) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    gr_jobj o;
    if (!gr_json_object_read(text, n, &o, why, sizeof why)) return -1;
    const gr_jval *s = gr_jobj_get(&o, "status"), *c = gr_jobj_get(&o, "exit_code");
    int rc = -1;
    if (s && s->kind == GR_J_STR && strcmp(s->text, "running") != 0 && c && c->kind == GR_J_NUM) {
        rc = (int)c->num;
        snprintf(status, cap, "%s", s->text);
    }
    gr_jobj_free(&o);
    return rc;
}

int gr_cmd_launch(int argc, char **argv) {
    long n = 0;
    const char *launcher = getenv("SLURM_JOB_ID") ? "srun" : "mpirun", *job = NULL;
    int i = 0;
    for (; i < argc && !job; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(argv[i], "-n") || !strcmp(argv[i], "-np")) && v) {
            char *end;
            n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 65536) gr_usage_error("launch: -n: expected a process count, got '%s'", v);
            i++;
        } else if (!strcmp(argv[i], "--launcher") && v) {
            if (strcmp(v, "mpirun") != 0 && strcmp(v, "srun") != 0)
                gr_usage_error("launch: --launcher: expected mpirun or srun, got '%s'", v);
            launcher = v;
            i++;
        } else if (argv[i][0] == '-') {
            gr_usage_error("launch: unknown option '%s' (-n N and --launcher come before JOB.yaml)", argv[i]);
        } else {
            job = argv[i];
        }
    }
    if (!job) gr_usage_error("launch: expected a job spec (JOB.yaml)%s", "");
    if (n < 1) gr_usage_error("launch: -n N (the number of processes) is required%s", "");
    char run_dir[GR_PATH_MAX + 64], exe[4096], np[24];
    double deadline_s = 20.0;
    gr_launch_run_dir(job, argv + i, argc - i, run_dir, sizeof run_dir, &deadline_s);
    /* Open MPI's mpirun passes a SIGTERM on to the ranks and SIGKILLs them 1 s
     * later (odls_base_sigkill_timeout): a checkpoint that takes longer to
     * write was cut off, leaving nothing committed. The ranks get the job's
     * own deadline, and 5 s to exit after it; a value the caller set stays. */
    char grace[32];
    snprintf(grace, sizeof grace, "%.0f", ceil(deadline_s) + 5.0);
    if (!strcmp(launcher, "mpirun")) setenv("OMPI_MCA_odls_base_sigkill_timeout", grace, 0);
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el <= 0) gr_die(GR_ERR_INTERNAL, "launch: cannot find the gpurun program (/proc/self/exe)");
    exe[el] = '\0';
    snprintf(np, sizeof np, "%ld", n);
    char **cmd = gr_xcalloc((size_t)argc + 8, sizeof *cmd);
    int k = 0;
    cmd[k++] = (char *)launcher;
    cmd[k++] = !strcmp(launcher, "srun") ? "-n" : "-np";
    cmd[k++] = np;
    cmd[k++] = exe;
    cmd[k++] = "run";
    cmd[k++] = (char *)job;
    for (int a = i; a < argc; a++) cmd[k++] = argv[a];
    const time_t t0 = time(NULL);
    struct sigaction sa = {.sa_handler = gr_launch_forward};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL), sigaction(SIGINT, &sa, NULL), sigaction(SIGUSR1, &sa, NULL);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) gr_die(GR_ERR_INTERNAL, "launch: fork failed");
    if (pid == 0) {
        execvp(cmd[0], cmd);
        fprintf(stderr, "gpurun: launch: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(GR_ERR_USAGE);
    }
    gr_launch_child = pid;
    if (gr_launch_signal) kill(pid, gr_launch_signal); /* one that came before the pid was known */
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    free(cmd);
    const int lrc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    char status[64] = "";
    const int rc = gr_launch_outcome(run_dir, t0, status, sizeof status);
    if (rc < 0 || rc == lrc) return lrc;
    fprintf(stderr, "gpurun: launch: the run ended %s (exit %d, %s/summary.json); %s exited %d\n", status, rc,
            run_dir, launcher, lrc);
    return rc;
}
