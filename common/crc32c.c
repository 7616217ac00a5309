/* crc32c.c — CRC-32C (see crc32c.h).
 *
 * Software: slicing-by-8 over 8 tables of 256 entries built on first use
 * (the table for k processes a byte k positions ahead). Hardware: x86-64
 * SSE4.2 crc32 on 8 bytes at a time, compiled through a target attribute
 * and chosen by __builtin_cpu_supports, so the binary still runs on CPUs
 * without it. */
#include "crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define GR_CRC32C_POLY 0x82F63B78u /* reflected 0x1EDC6F41 */

static uint32_t gr_crc32c_table[8][256];
static bool gr_crc32c_have_hw;
static pthread_once_t gr_crc32c_once = PTHREAD_ONCE_INIT;

/* Runs once (pthread_once): builds the tables and probes the CPU. */
static void gr_crc32c_setup(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (GR_CRC32C_POLY & (0u - (c & 1u)));
        gr_crc32c_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++) {
            uint32_t c = gr_crc32c_table[t - 1][i];
            gr_crc32c_table[t][i] = (c >> 8) ^ gr_crc32c_table[0][c & 0xFFu];
        }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    gr_crc32c_have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t gr_crc32c_sw(uint32_t crc, const void *data, size_t n) {
    pthread_once(&gr_crc32c_once, gr_crc32c_setup);
    const uint32_t (*t)[256] = (const uint32_t (*)[256])gr_crc32c_table;
    const unsigned char *p = data;
    uint32_t c = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
            t[3][hi & 0xFFu] ^ t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
    }
#endif
    for (; n > 0; n--, p++) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFFu];
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GR_CRC32C_HW 1

__attribute__((target("sse4.2"))) static uint32_t gr_crc32c_hw(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t c = (uint32_t)~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n > 0; n--, p++) c32 = __builtin_ia32_crc32qi(c32, *p);
    return ~c32;
}
#endif

uint32_t gr_crc32c(uint32_t crc, const void *data, size_t n) {
#ifdef GR_CRC32C_HW
    pthread_once(&gr_crc32c_once, gr_crc32c_setup);
    if (gr_crc32c_have_hw) return gr_crc32c_hw(crc, data, n);
#endif
    return gr_crc32c_sw(crc, data, n);
}
