/* rundirs.h — the run directories named by the arguments of `gpurun
 * summarize` and `gpurun plot` (tools.h).
 *
 * A run directory is a directory holding config.yaml or metrics.jsonl. An
 * argument that is one stays as given. A directory that is not one stands
 * for the run directories below it (a sweep's directory), found up to
 * GR_RUNDIRS_DEPTH levels down, not below a run directory, in name order at
 * each level, as ARG/SUB/.... Among several arguments (a shell glob over
 * a sweep's directory), one that is neither a run directory nor holds any (the
 * sweep's summary.csv and PNGs) is skipped with one line on stderr,
 * "gpurun: CMD: skipped PATH (not a run directory)". An argument that does
 * not exist, or a lone argument that is not a run directory and holds none,
 * stays as given, so that the command's own check names what is wrong. */
#ifndef GR_RUNDIRS_H
#define GR_RUNDIRS_H

#define GR_RUNDIRS_DEPTH 4

/* The run directories of args[0..n): a NULL-terminated array of *n_out
 * strings; free it with gr_rundirs_free. *n_out is 0 only when every
 * argument was skipped (each said on stderr). */
char **gr_rundirs_expand(const char *cmd, const char *const *args, int n, int *n_out);
void gr_rundirs_free(char **dirs, int n);

#endif
