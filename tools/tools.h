/* tools.h — the commands over run directories, for sweeps: `gpurun
 * summarize` (summarize.c: one table of several runs) and `gpurun plot`
 * (plot.c: their curves in a PNG). Each takes the arguments after its
 * name, prints its own errors ("gpurun: ..."), and returns the process's
 * exit code (0; 2 usage; 3 a run directory or file that cannot be read;
 * 6 an output that cannot be written). */
#ifndef GR_TOOLS_H
#define GR_TOOLS_H

int gr_cmd_summarize(int argc, char **argv);
int gr_cmd_plot(int argc, char **argv);

#endif
