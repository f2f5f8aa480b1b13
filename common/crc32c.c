/*
 * crc32c.c - CRC-32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * Owns two implementations and the run-time choice between them:
 *   - cmn_crc32c_sw(): portable slicing-by-8 over eight 256-entry tables;
 *   - cmn_crc32c_hw(): the SSE4.2 crc32 instruction.  Long buffers run three
 *     independent crc32q chains over three adjacent blocks (the instruction
 *     has a latency of 3 cycles and a throughput of 1, so one chain leaves
 *     two thirds of the unit idle) and join them with "shift by N zero
 *     bytes" operators, after Mark Adler's crc32c.c.
 * Does not know about TFRecord masking (crc32c.h has the inline helpers).
 *
 * Invariants: both paths return identical values for every input (tested on
 * random buffers, lengths and alignments).  All tables are built once by
 * pthread_once() and read-only afterwards, so every function is thread-safe.
 */
#include "common/crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC_HAVE_X86 1
#include <nmmintrin.h>
#else
#define CRC_HAVE_X86 0
#endif

#define POLY 0x82f63b78u

/* Block sizes of the 3-way interleaved loop (bytes per chain). */
#define LONG_BLOCK  8192
#define SHORT_BLOCK 256

static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static uint32_t crc_table[8][256]; /* slicing-by-8 */
static uint32_t crc_long[4][256];  /* shift a crc over LONG_BLOCK zero bytes */
static uint32_t crc_short[4][256]; /* shift a crc over SHORT_BLOCK zero bytes */
static bool crc_hw;		   /* the CPU has SSE4.2 */

/* ---- GF(2) operators for "append n zero bytes" ----------------------- */

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;
	while (vec) {
		if (vec & 1)
			sum ^= *mat;
		vec >>= 1;
		mat++;
	}
	return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat)
{
	for (int n = 0; n < 32; n++)
		square[n] = gf2_times(mat, mat[n]);
}

/* Builds in `even` the operator that appends `len` zero bytes (len a power of 2). */
static void zeros_op(uint32_t *even, size_t len)
{
	uint32_t odd[32];
	uint32_t row = 1;

	odd[0] = POLY; /* one zero bit */
	for (int n = 1; n < 32; n++) {
		odd[n] = row;
		row <<= 1;
	}
	gf2_square(even, odd); /* two zero bits */
	gf2_square(odd, even); /* four zero bits */
	do {
		gf2_square(even, odd); /* first pass: one zero byte */
		len >>= 1;
		if (len == 0)
			return;
		gf2_square(odd, even);
		len >>= 1;
	} while (len);
	memcpy(even, odd, sizeof(odd));
}

static void zeros_table(uint32_t zeros[4][256], size_t len)
{
	uint32_t op[32];

	zeros_op(op, len);
	for (uint32_t n = 0; n < 256; n++) {
		zeros[0][n] = gf2_times(op, n);
		zeros[1][n] = gf2_times(op, n << 8);
		zeros[2][n] = gf2_times(op, n << 16);
		zeros[3][n] = gf2_times(op, n << 24);
	}
}

static inline uint32_t crc_shift(const uint32_t zeros[4][256], uint32_t crc)
{
	return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^
	       zeros[3][crc >> 24];
}

static void crc_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		crc_table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = crc_table[0][n];
		for (int k = 1; k < 8; k++) {
			c = crc_table[0][c & 0xff] ^ (c >> 8);
			crc_table[k][n] = c;
		}
	}
	zeros_table(crc_long, LONG_BLOCK);
	zeros_table(crc_short, SHORT_BLOCK);
#if CRC_HAVE_X86
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static inline void crc_ready(void)
{
	pthread_once(&crc_once, crc_init);
}

/* ---- portable path ----------------------------------------------------- */

static inline uint64_t load64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

uint32_t cmn_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t c;

	crc_ready();
	c = crc ^ 0xffffffffu;
	while (len && ((uintptr_t)p & 7)) {
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		len--;
	}
	while (len >= 8) {
		/* little-endian load; on big-endian hosts the bytes are swapped first */
		uint64_t w = load64(p);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		w = __builtin_bswap64(w);
#endif
		c ^= w;
		c = crc_table[7][c & 0xff] ^ crc_table[6][(c >> 8) & 0xff] ^
		    crc_table[5][(c >> 16) & 0xff] ^ crc_table[4][(c >> 24) & 0xff] ^
		    crc_table[3][(c >> 32) & 0xff] ^ crc_table[2][(c >> 40) & 0xff] ^
		    crc_table[1][(c >> 48) & 0xff] ^ crc_table[0][c >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return (uint32_t)c ^ 0xffffffffu;
}

/* ---- SSE4.2 path ------------------------------------------------------- */

#if CRC_HAVE_X86
__attribute__((target("sse4.2"))) static uint32_t crc_hw_impl(uint32_t crc, const void *buf,
							      size_t len)
{
	const unsigned char *next = buf;
	const unsigned char *end;
	uint64_t crc0, crc1, crc2;

	crc0 = crc ^ 0xffffffffu;
	while (len && ((uintptr_t)next & 7)) {
		crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
		len--;
	}
	/* Three chains of LONG_BLOCK bytes each, joined by shifting. */
	while (len >= 3 * LONG_BLOCK) {
		crc1 = 0;
		crc2 = 0;
		end = next + LONG_BLOCK;
		do {
			crc0 = _mm_crc32_u64(crc0, load64(next));
			crc1 = _mm_crc32_u64(crc1, load64(next + LONG_BLOCK));
			crc2 = _mm_crc32_u64(crc2, load64(next + 2 * LONG_BLOCK));
			next += 8;
		} while (next < end);
		crc0 = crc_shift(crc_long, (uint32_t)crc0) ^ crc1;
		crc0 = crc_shift(crc_long, (uint32_t)crc0) ^ crc2;
		next += 2 * LONG_BLOCK;
		len -= 3 * LONG_BLOCK;
	}
	while (len >= 3 * SHORT_BLOCK) {
		crc1 = 0;
		crc2 = 0;
		end = next + SHORT_BLOCK;
		do {
			crc0 = _mm_crc32_u64(crc0, load64(next));
			crc1 = _mm_crc32_u64(crc1, load64(next + SHORT_BLOCK));
			crc2 = _mm_crc32_u64(crc2, load64(next + 2 * SHORT_BLOCK));
			next += 8;
		} while (next < end);
		crc0 = crc_shift(crc_short, (uint32_t)crc0) ^ crc1;
		crc0 = crc_shift(crc_short, (uint32_t)crc0) ^ crc2;
		next += 2 * SHORT_BLOCK;
		len -= 3 * SHORT_BLOCK;
	}
	end = next + (len - (len & 7));
	while (next < end) {
		crc0 = _mm_crc32_u64(crc0, load64(next));
		next += 8;
	}
	len &= 7;
	while (len--)
		crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
	return (uint32_t)crc0 ^ 0xffffffffu;
}
#endif

int cmn_crc32c_hw_available(void)
{
	crc_ready();
	return crc_hw;
}

uint32_t cmn_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	crc_ready();
#if CRC_HAVE_X86
	if (crc_hw)
		return crc_hw_impl(crc, buf, len);
#endif
	/* Misuse on a CPU without SSE4.2: stay correct rather than fault. */
	return cmn_crc32c_sw(crc, buf, len);
}

uint32_t cmn_crc32c(uint32_t crc, const void *buf, size_t len)
{
	crc_ready();
#if CRC_HAVE_X86
	if (crc_hw)
		return crc_hw_impl(crc, buf, len);
#endif
	return cmn_crc32c_sw(crc, buf, len);
}
