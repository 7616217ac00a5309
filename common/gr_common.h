/* gr_common.h — what every gpurun module shares.
 *
 * Exports: gr_status (the process exit codes of DESIGN 1.2), gr_error (the
 * message a recoverable failure carries up to runner/, which alone calls
 * exit()), GR_ASSERT for invariants (prints file:line, exit 1), and the
 * checked allocators (exit 4 with the byte count when the host is out of
 * memory). */
#ifndef GR_COMMON_H
#define GR_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gr_hd.h"

typedef enum gr_status {
    GR_OK = 0,
    GR_ERR_INTERNAL = 1, /* a bug */
    GR_ERR_USAGE = 2,    /* usage or job-spec error */
    GR_ERR_DATA = 3,     /* missing file/dataset, wrong dtype/shape, corrupt HDF5 */
    GR_ERR_OOM = 4,      /* out of memory (device or host) */
    GR_ERR_DIVERGED = 5, /* non-finite loss */
    GR_ERR_CKPT = 6,     /* checkpoint error */
    GR_ERR_DEVICE = 7,   /* device or communication error */
    GR_ERR_SIGNAL = 75   /* stopped by a signal after a checkpoint */
} gr_status;

#define GR_ERROR_MSG_MAX 1024

typedef struct gr_error {
    gr_status status;
    char msg[GR_ERROR_MSG_MAX];
} gr_error;

/* Fills *err (when err is not NULL) and returns st, so callers can write
 * `return gr_error_set(err, GR_ERR_DATA, "%s: ...", path);`. */
gr_status gr_error_set(gr_error *err, gr_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the message already in err with more context ("a: " + old). */
void gr_error_prefix(gr_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

_Noreturn void gr_assert_fail(const char *expr, const char *file, int line);
#define GR_ASSERT(c) do { if (!(c)) gr_assert_fail(#c, __FILE__, __LINE__); } while (0)

/* Allocation that cannot fail silently: on failure prints
 * "out of memory: N bytes requested" and exits 4. For bookkeeping only;
 * tensors come from the plan's arenas. */
void *gr_xmalloc(size_t n);
void *gr_xcalloc(size_t count, size_t size);
void *gr_xrealloc(void *p, size_t n);
char *gr_xstrdup(const char *s);

/* Growable arrays. GR_GROW(p, cap, need) makes room for `need` elements in
 * the array p of capacity cap (any integer type; both updated), doubling.
 * Any pointer into p is stale after a growth: keep indices across a call
 * that may append (gr_graph_add_tensor, gr_graph_add_node, gr_graph_grad...).
 *
 * Built with -DGPURUN_GROW_STRESS=ON (on in the sanitizer build), every
 * array starts at capacity 1 and grows to exactly what it needs (past
 * GR_GROW_STRESS_EXACT_BYTES, by a quarter, so a 100,000-layer graph builds
 * in seconds), and every growth (gr_xrealloc too) moves it: a new block,
 * the old one filled with 0xA5 and freed. A stale pointer then reads freed
 * memory on the first append after it was taken, which AddressSanitizer
 * reports in whichever test reaches it. */
#define GR_GROW_STRESS_EXACT_BYTES (256u << 10)
#ifdef GPURUN_GROW_STRESS
#define GR_GROW_STRESS 1
#else
#define GR_GROW_STRESS 0
#endif
size_t gr_grow_cap(size_t cap, size_t need, size_t elem);
void *gr_grow_move(void *p, size_t old_bytes, size_t new_bytes);
#define GR_GROW(p, cap, need)                                                      \
    do {                                                                           \
        size_t gr_need_ = (size_t)(need), gr_cap_ = (size_t)(cap);                 \
        if (gr_need_ > gr_cap_) {                                                  \
            size_t gr_new_ = gr_grow_cap(gr_cap_, gr_need_, sizeof *(p));          \
            (p) = gr_grow_move((p), gr_cap_ * sizeof *(p), gr_new_ * sizeof *(p)); \
            (cap) = gr_new_;                                                       \
        }                                                                          \
    } while (0)

/* Host memory this process can still take: MemAvailable, capped by the
 * headroom under RLIMIT_AS; false where /proc/meminfo cannot be read. */
bool gr_host_mem_info(size_t *avail_bytes, size_t *total_bytes);

/* CPUs this process may run on: its affinity mask (taskset, cgroups'
 * cpusets), else the online count; at least 1. */
int gr_host_cpus(void);
/* CPUs of the affinity mask kept busy by other processes over the next ms
 * milliseconds (sleeps that long): their non-idle time in /proc/stat less
 * this process's own, in CPUs; -1 when /proc cannot be read. */
double gr_host_busy_cpus(int ms);

/* 64-byte aligned allocation (arenas, batch buffers); NULL on failure. From 2 MiB up:
 * 2 MiB-aligned, whole 2 MiB pages, marked for transparent huge pages (common.c). */
void *gr_aligned_alloc(size_t bytes);
void gr_aligned_free(void *p);

/* Monotonic seconds. */
double gr_now(void);

/* Counter-based random numbers: a pure function of (key, counter), so any
 * thread can draw the i-th number of a stream without shared state. */
uint64_t gr_hash64(uint64_t key, uint64_t counter);
/* Uniform float in [0, 1) from the same stream. */
static inline float gr_uniform(uint64_t key, uint64_t counter) { return gr_uniform_hd(key, counter); }

/* Every input (spec, dataset, checkpoint, init_from) must be a regular file
 * (DESIGN 1.3): checked with stat(), which follows symlinks and never blocks
 * on a FIFO or a device. Returns GR_OK for a regular file and also when path
 * cannot be stat()ed (the caller's own open then reports the missing file);
 * otherwise sets err with `code`: "PATH: WHAT is a FIFO, not a regular file". */
gr_status gr_check_regular(const char *path, const char *what, gr_status code, gr_error *err);

/* v with thousands separators ("4,194,304", "-1,000") into buf; returns buf. */
const char *gr_fmt_count(int64_t v, char *buf, size_t cap);

/* Levenshtein distance, for "did you mean" suggestions. */
int gr_edit_distance(const char *a, const char *b);

/* Elementwise loops shorter than this run on one thread (OpenMP's fork costs
 * more than it saves below it). */
#define GR_OMP_MIN ((int64_t)1 << 15)

/* A hot loop built for AVX-512 and AVX2 as well as the baseline on x86-64
 * GCC, the build picked at load time (the library is built for baseline
 * x86-64). Only for loops whose results do not depend on the ISA: integer
 * work and single roundings (no a*b+c, which AVX2 may fuse). Not under
 * ThreadSanitizer: its runtime crashes at start on the ifunc resolver
 * target_clones makes. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define GR_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GR_ISA_CLONES
#endif

#define GR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GR_MAX(a, b) ((a) > (b) ? (a) : (b))
#define GR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
