/* gr_hd.h — code shared by the CPU (C11) and the CUDA kernels (nvcc).
 *
 * GR_HD marks a function nvcc compiles for both host and device; plain C
 * sees a static inline function. The CUDA backend writes the per-element
 * (or per-row, per-channel) body of each custom kernel as such a function
 * of its indices (kernels/body_*.h): the .cu kernel calls it from each
 * thread, and a CPU test drives it over the whole grid and compares with the
 * CPU backend, so the logic of every custom kernel is tested on machines
 * without a GPU. */
#ifndef GR_HD_H
#define GR_HD_H

#include <stdint.h>

#ifdef __CUDACC__
#define GR_HD __host__ __device__ static inline
#else
#define GR_HD static inline
#endif

/* The counter-based hash behind every random stream (dropout masks,
 * augmentation, shuffles): a pure function of (key, counter), the
 * splitmix64 finalizer over a key-dependent start. */
GR_HD uint64_t gr_hash64_hd(uint64_t key, uint64_t counter) {
    uint64_t z = key * 0x9E3779B97F4A7C15ull + counter + 0x632BE59BD9B4E019ull;
    z += 0x9E3779B97F4A7C15ull * (counter + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform float in [0, 1) with 24 random bits. */
GR_HD float gr_uniform_hd(uint64_t key, uint64_t counter) {
    return (float)(gr_hash64_hd(key, counter) >> 40) * (1.0f / 16777216.0f);
}

#endif
