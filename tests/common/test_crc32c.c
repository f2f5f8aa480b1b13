/*
 * test_crc32c.c - Check suite for common/crc32c.c.
 *
 * Oracles: published CRC-32C vectors (RFC 3720 B.4, "123456789") and a
 * bit-at-a-time reference written here, independent of both table paths.
 */
#include "common/crc32c.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t ref_crc32c(uint32_t crc, const uint8_t *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return ~crc;
}

/* xorshift: deterministic random bytes without libc rand() state */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

START_TEST(test_known_vectors)
{
	uint8_t zeros[32], ones[32], inc[32], dec[32];

	memset(zeros, 0, sizeof(zeros));
	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++) {
		inc[i] = (uint8_t)i;
		dec[i] = (uint8_t)(31 - i);
	}
	ck_assert_uint_eq(cmn_crc32c(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(cmn_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(cmn_crc32c(0, zeros, 32), 0x8A9136AAu);
	ck_assert_uint_eq(cmn_crc32c_sw(0, zeros, 32), 0x8A9136AAu);
	ck_assert_uint_eq(cmn_crc32c(0, ones, 32), 0x62A8AB43u);
	ck_assert_uint_eq(cmn_crc32c_sw(0, ones, 32), 0x62A8AB43u);
	ck_assert_uint_eq(cmn_crc32c(0, inc, 32), 0x46DD794Eu);
	ck_assert_uint_eq(cmn_crc32c(0, dec, 32), 0x113FDB5Cu);
	ck_assert_uint_eq(cmn_crc32c(0, "", 0), 0u);
	ck_assert_uint_eq(ref_crc32c(0, (const uint8_t *)"123456789", 9), 0xE3069283u);
	if (cmn_crc32c_hw_available()) {
		ck_assert_uint_eq(cmn_crc32c_hw(0, "123456789", 9), 0xE3069283u);
		ck_assert_uint_eq(cmn_crc32c_hw(0, zeros, 32), 0x8A9136AAu);
		ck_assert_uint_eq(cmn_crc32c_hw(0, ones, 32), 0x62A8AB43u);
	}
}
END_TEST

/* Random lengths around the interleave thresholds (3 x 256, 3 x 8192) and alignments. */
START_TEST(test_paths_agree)
{
	size_t cap = 3 * 8192 * 3 + 64;
	uint8_t *buf = malloc(cap);
	int hw = cmn_crc32c_hw_available();

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < cap; i++)
		buf[i] = (uint8_t)rnd();
	for (int it = 0; it < 3000; it++) {
		size_t off = rnd() % 16;
		size_t len;
		uint32_t seed = it % 3 == 0 ? 0 : (uint32_t)rnd();
		switch (it % 4) {
		case 0:
			len = rnd() % 64;
			break;
		case 1:
			len = 3 * 256 - 8 + rnd() % 16;
			break;
		case 2:
			len = 3 * 8192 - 8 + rnd() % 16 + (rnd() % 2) * 3 * 8192;
			break;
		default:
			len = rnd() % (cap - 16);
			break;
		}
		uint32_t sw = cmn_crc32c_sw(seed, buf + off, len);
		uint32_t dispatch = cmn_crc32c(seed, buf + off, len);
		ck_assert_uint_eq(sw, dispatch);
		if (it % 50 == 0) /* the bitwise oracle is slow: a sample is enough */
			ck_assert_uint_eq(sw, ref_crc32c(seed, buf + off, len));
		if (hw)
			ck_assert_uint_eq(cmn_crc32c_hw(seed, buf + off, len), sw);
	}
	free(buf);
}
END_TEST

START_TEST(test_chaining)
{
	uint8_t buf[70000];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rnd();
	uint32_t whole = cmn_crc32c(0, buf, sizeof(buf));
	for (int it = 0; it < 200; it++) {
		size_t cut = rnd() % sizeof(buf);
		uint32_t a = cmn_crc32c(0, buf, cut);
		ck_assert_uint_eq(cmn_crc32c(a, buf + cut, sizeof(buf) - cut), whole);
		a = cmn_crc32c_sw(0, buf, cut);
		ck_assert_uint_eq(cmn_crc32c_sw(a, buf + cut, sizeof(buf) - cut), whole);
	}
	/* byte at a time */
	uint32_t c = 0;
	for (size_t i = 0; i < 1000; i++)
		c = cmn_crc32c(c, buf + i, 1);
	ck_assert_uint_eq(c, cmn_crc32c(0, buf, 1000));
}
END_TEST

START_TEST(test_mask)
{
	for (int it = 0; it < 1000; it++) {
		uint32_t v = (uint32_t)rnd();
		ck_assert_uint_eq(cmn_crc32c_unmask(cmn_crc32c_mask(v)), v);
	}
	/* TensorFlow's masked crc of an empty payload */
	ck_assert_uint_eq(cmn_crc32c_mask(0), 0xa282ead8u);
	ck_assert_uint_eq(cmn_crc32c_mask(0xE3069283u),
			  (((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u));
}
END_TEST

static Suite *crc_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc;

	tc = tcase_create("crc32c_known_vectors");
	tcase_add_test(tc, test_known_vectors);
	suite_add_tcase(s, tc);
	tc = tcase_create("crc32c_hw_sw_agree_random");
	tcase_add_test(tc, test_paths_agree);
	suite_add_tcase(s, tc);
	tc = tcase_create("crc32c_chaining");
	tcase_add_test(tc, test_chaining);
	suite_add_tcase(s, tc);
	tc = tcase_create("crc32c_mask");
	tcase_add_test(tc, test_mask);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(crc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
