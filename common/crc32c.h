/* crc32c.h — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of TFRecord/tfevents files and of checkpoint tensors.
 *
 * Exports gr_crc32c(). It uses the SSE4.2 crc32 instruction when the CPU has
 * it (checked once at run time; no global -msse4.2 needed) and a
 * slicing-by-8 table otherwise; both give identical results. */
#ifndef GR_CRC32C_H
#define GR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC-32C over n more bytes of data. Start with crc = 0; the
 * usual pre/post inversion happens inside, so calls chain:
 * gr_crc32c(gr_crc32c(0, a, na), b, nb) == gr_crc32c(0, a || b, na + nb).
 * Check values: "123456789" -> 0xE3069283, 32 zero bytes -> 0x8A9136AA. */
uint32_t gr_crc32c(uint32_t crc, const void *data, size_t n);

/* The portable (table) path alone, so tests can compare it with the
 * hardware path on the same input. */
uint32_t gr_crc32c_sw(uint32_t crc, const void *data, size_t n);

#endif
