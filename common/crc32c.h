/*
 * crc32c.h - CRC-32C (Castagnoli), as TFRecord framing uses it.
 *
 * cmn_crc32c() picks the SSE4.2 instruction path at run time when the CPU has
 * it, else a portable slicing-by-8 table path.  Both give identical results;
 * tests compare them on random buffers, lengths and alignments.
 */
#ifndef RC_COMMON_CRC32C_H
#define RC_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Extends `crc` (0 to start) with `len` bytes of `buf`; returns the new CRC.
 * cmn_crc32c(0, "123456789", 9) == 0xE3069283.  Thread-safe; no allocation.
 */
uint32_t cmn_crc32c(uint32_t crc, const void *buf, size_t len);

/* The portable path, always available (exposed for tests and benchmarks). */
uint32_t cmn_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* The hardware path; call only when cmn_crc32c_hw_available() is true. */
uint32_t cmn_crc32c_hw(uint32_t crc, const void *buf, size_t len);
int cmn_crc32c_hw_available(void);

/* TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
static inline uint32_t cmn_crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static inline uint32_t cmn_crc32c_unmask(uint32_t masked)
{
	uint32_t rot = masked - 0xa282ead8u;
	return (rot >> 17) | (rot << 15);
}

#endif
