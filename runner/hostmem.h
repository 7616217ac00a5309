/* hostmem.h — what a run holds in host memory, planned before it starts
 *: the figure `gpurun plan` prints and summary.json's
 * planned_host_bytes, next to the peak resident set the run measures
 * (peak_rss_bytes).
 *
 * Each part is the byte count of what the run allocates and touches, from
 * the same functions the run's own allocations use (dataio's for the data
 * and loaders, memfit's for the device), except two measured ones: the
 * program as loaded (this process's resident bytes when main began) and
 * what the libraries add once running (GR_HOST_LIBS_BYTES). */
#ifndef GR_HOSTMEM_H
#define GR_HOSTMEM_H

#include "job.h"
#include "memfit.h"

/* What oneDNN (its generated kernels, the code pages a first step touches),
 * OpenMP's threads and glibc's per-thread heaps add to a CPU run after
 * main began, past the allocations counted here: measured at 13-16 MiB on
 * the Fashion-MNIST CNN and a CIFAR ResNet-18 (AMD EPYC, oneDNN 2.6.3). */
#define GR_HOST_LIBS_BYTES ((size_t)14 << 20)

typedef struct gr_host_need {
    size_t process; /* the program and its libraries as loaded (resident at main's start) */
    size_t libs;    /* GR_HOST_LIBS_BYTES */
    size_t data;    /* the splits: labels, images held in memory, HDF5's chunk caches */
    size_t loaders; /* the train and eval loaders: batch ring, workers' buffers, epoch orders */
    size_t device;  /* memfit's need when the device is host memory (the CPU), else 0 */
    size_t ckpt;    /* the writer's copies: the saver's params and optimizer state, the final weights */
    size_t resume;  /* the buffers a resume reads its checkpoint into */
    size_t total;
} gr_host_need;

/* Notes this process's resident bytes (main, first thing). */
void gr_hostmem_start(void);
/* This process's resident bytes now (0 where /proc is not there). */
size_t gr_hostmem_rss(void);
/* The host need of job j (its graph built, j->be the device; its datasets
 * when open) whose device need is dev; resuming: it reads a checkpoint. */
void gr_hostmem_of(const gr_job *j, const gr_mem_need *dev, bool resuming, gr_host_need *out);

#endif
