/* cli.c — how the command line's commands end on an error (cli.h). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

const char *gr_cur_cmd = "";

_Noreturn void gr_die(gr_status st, const char *msg) {
    fprintf(stderr, "gpurun: %s\n", msg);
    if (st == GR_ERR_INTERNAL) fprintf(stderr, "gpurun: this is a bug in gpurun; please report it\n");
    exit((int)st);
}

/* One line saying what is wrong, and where the usage is: not the whole usage. */
_Noreturn void gr_usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "gpurun: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\ngpurun: see 'gpurun %s%s--help'\n", gr_cur_cmd, gr_cur_cmd[0] ? " " : "");
    exit(GR_ERR_USAGE);
}

