/*
 * units.h - sizes and durations as people write them in configs and flags.
 *
 * Sizes: plain bytes ("4096"), or a number with a binary suffix K, M, G, T, P
 * (optionally followed by "B" or "iB": 64M = 64MiB = 64MB = 64 * 2^20), with
 * an optional fraction ("1.5T").  Durations: a number with ms, s, m, h, d
 * ("30s", "5m", "250ms"); a bare number means seconds.  Garbage, negatives,
 * empty strings and values that overflow 64 bits are errors.
 */
#ifndef RC_COMMON_UNITS_H
#define RC_COMMON_UNITS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parses a size into *out bytes.  Returns 0, or -EINVAL (garbage, negative,
 * empty) / -ERANGE (overflow) with a one-line reason in err (which names the
 * input and says what is expected, e.g. "20X: expected a size such as 20G").
 * *out is unchanged on failure.
 */
int cmn_parse_size(const char *s, uint64_t *out, char *err, size_t errlen);

/* Parses a duration into *out_ms milliseconds.  Same contract as above. */
int cmn_parse_duration(const char *s, uint64_t *out_ms, char *err, size_t errlen);

/*
 * Formats bytes for people: "0 B", "512 B", "1.5 KiB", "20.0 GiB".  Always
 * NUL-terminates buf (buflen >= 16 is enough).  Returns buf.
 */
char *cmn_format_size(uint64_t bytes, char *buf, size_t buflen);

#endif
