/* cli.h — the command line's shared ends: the command being read (what a
 * usage error's hint names), the exits of a failed command, and the
 * commands that live in their own files (data_cmd.c). Only the gpurun
 * program's commands use these: they exit the process. */
#ifndef GR_CLI_H
#define GR_CLI_H

#include "../common/gr_common.h"

#define GR_MAX_SETS 256 /* --set options on one command line */

/* The command whose options are being read ("" before one is known). */
extern const char *gr_cur_cmd;

/* "gpurun: MSG" on stderr (and a bug report request for GR_ERR_INTERNAL); exits st. */
_Noreturn void gr_die(gr_status st, const char *msg);
/* One line saying what is wrong (fmt with one %s: arg), and where the usage is; exit 2. */
_Noreturn void gr_usage_error(const char *fmt, const char *arg);

/* `gpurun data ...` with argv after "data"; the exit code (errors exit). */
int gr_cmd_data(int argc, char **argv);
/* `gpurun generate JOB.yaml --checkpoint PATH ...` (generate.c), argv after "generate". */
int gr_cmd_generate(int argc, char **argv);
/* `gpurun launch -n N JOB.yaml ...` (launch.c), argv after "launch". */
int gr_cmd_launch(int argc, char **argv);

#endif
