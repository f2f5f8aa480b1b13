/*
 * units.c - parsing and formatting of sizes and durations.
 *
 * Owns the grammar of units.h: a decimal number (digits, optionally "."
 * and more digits), optional blanks, an optional unit.  Arithmetic is done in
 * 128 bits so that overflow of the 64-bit result is detected, never wrapped.
 * Does not know which key a value belongs to: callers prefix the message
 * with the key ("limit=20X: ...").
 *
 * No state, no locking.
 */
#include "common/units.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_FRAC_DIGITS 18

typedef unsigned __int128 u128;

struct number {
	u128 whole;	  /* integer part */
	u128 frac;	  /* fraction digits as an integer */
	u128 frac_scale;  /* 10^(number of fraction digits) */
	const char *rest; /* first character after the number and blanks */
};

/*
 * Reads "digits[.digits]" then skips blanks.  Returns 0, -EINVAL (no digits,
 * sign), -ERANGE (more digits than 128 bits hold).
 */
static int read_number(const char *s, struct number *n, const char **why)
{
	const char *p = s;
	bool any = false;

	n->whole = 0;
	n->frac = 0;
	n->frac_scale = 1;
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '-') {
		*why = "negative values are not allowed";
		return -EINVAL;
	}
	if (*p == '+') {
		*why = "no sign allowed";
		return -EINVAL;
	}
	while (isdigit((unsigned char)*p)) {
		n->whole = n->whole * 10 + (unsigned)(*p - '0');
		if (n->whole > UINT64_MAX) {
			*why = "too large for 64 bits";
			return -ERANGE;
		}
		any = true;
		p++;
	}
	if (*p == '.') {
		int digits = 0;
		p++;
		while (isdigit((unsigned char)*p)) {
			if (digits < MAX_FRAC_DIGITS) {
				n->frac = n->frac * 10 + (unsigned)(*p - '0');
				n->frac_scale *= 10;
				digits++;
			}
			any = true;
			p++;
		}
	}
	if (!any) {
		*why = NULL;
		return -EINVAL;
	}
	while (isspace((unsigned char)*p))
		p++;
	n->rest = p;
	return 0;
}

/* Trailing blanks are allowed after the unit. */
static bool only_blanks(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return *p == '\0';
}

/* Length of the unit word at p (letters only). */
static size_t unit_len(const char *p)
{
	size_t n = 0;
	while (isalpha((unsigned char)p[n]))
		n++;
	return n;
}

int cmn_parse_size(const char *s, uint64_t *out, char *err, size_t errlen)
{
	struct number n;
	const char *why = NULL;
	u128 mult = 1, total;
	size_t ul;
	int rc;

	if (!s || !*s || only_blanks(s)) {
		snprintf(err, errlen, "empty value: expected a size such as 20G or 4096");
		return -EINVAL;
	}
	rc = read_number(s, &n, &why);
	if (rc) {
		if (rc == -ERANGE)
			snprintf(err, errlen, "%s: size out of range (at most 16E - 1 bytes)", s);
		else
			snprintf(err, errlen, "%s: %s%sexpected a size such as 20G, 1.5T or 4096",
				 s, why ? why : "", why ? "; " : "");
		return rc;
	}
	ul = unit_len(n.rest);
	if (ul > 0) {
		static const char letters[] = "KMGTPE";
		const char *hit = strchr(letters, toupper((unsigned char)n.rest[0]));
		const char *tail = n.rest + 1;
		bool ok;

		if (toupper((unsigned char)n.rest[0]) == 'B' && ul == 1) {
			ok = true; /* "4096B" */
		} else if (hit && n.rest[0] != '\0') {
			for (int i = 0; i <= hit - letters; i++)
				mult *= 1024;
			/* K, KB, KiB (any case) */
			ok = ul == 1 || (ul == 2 && (tail[0] == 'B' || tail[0] == 'b')) ||
			     (ul == 3 && (tail[0] == 'i' || tail[0] == 'I') &&
			      (tail[1] == 'B' || tail[1] == 'b'));
		} else {
			ok = false;
		}
		if (!ok || !only_blanks(n.rest + ul)) {
			snprintf(err, errlen,
				 "%s: unknown unit: expected a size such as 20G, 64MiB or 4096 "
				 "(units K, M, G, T, P, E; binary)",
				 s);
			return -EINVAL;
		}
	} else if (!only_blanks(n.rest)) {
		snprintf(err, errlen, "%s: expected a size such as 20G, 1.5T or 4096", s);
		return -EINVAL;
	}

	/* whole * mult + frac * mult / frac_scale, exact unless it has a fraction of a byte */
	total = n.whole * mult;
	if (n.whole != 0 && total / n.whole != mult) {
		snprintf(err, errlen, "%s: size out of range (at most 16E - 1 bytes)", s);
		return -ERANGE;
	}
	if (n.frac) {
		u128 part = n.frac * mult; /* < 10^18 * 2^60 < 2^120 */
		if (part % n.frac_scale) {
			snprintf(err, errlen,
				 "%s: not a whole number of bytes: use a smaller unit (e.g. 1536K "
				 "for 1.5M)",
				 s);
			return -EINVAL;
		}
		total += part / n.frac_scale;
	}
	if (total > UINT64_MAX) {
		snprintf(err, errlen, "%s: size out of range (at most 16E - 1 bytes)", s);
		return -ERANGE;
	}
	*out = (uint64_t)total;
	return 0;
}

int cmn_parse_duration(const char *s, uint64_t *out_ms, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		uint64_t ms;
	} units[] = {
	    {"ms", 1},	    {"s", 1000},    {"sec", 1000},   {"m", 60000},
	    {"min", 60000}, {"h", 3600000}, {"d", 86400000},
	};
	struct number n;
	const char *why = NULL;
	u128 mult = 1000, total;
	size_t ul;
	int rc;

	if (!s || !*s || only_blanks(s)) {
		snprintf(err, errlen, "empty value: expected a duration such as 30s, 5m or 250ms");
		return -EINVAL;
	}
	rc = read_number(s, &n, &why);
	if (rc) {
		if (rc == -ERANGE)
			snprintf(err, errlen, "%s: duration out of range", s);
		else
			snprintf(err, errlen,
				 "%s: %s%sexpected a duration such as 30s, 5m or 250ms", s,
				 why ? why : "", why ? "; " : "");
		return rc;
	}
	ul = unit_len(n.rest);
	if (ul > 0) {
		bool found = false;
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (strlen(units[i].name) == ul &&
			    strncasecmp(n.rest, units[i].name, ul) == 0) {
				mult = units[i].ms;
				found = true;
				break;
			}
		}
		if (!found || !only_blanks(n.rest + ul)) {
			snprintf(err, errlen,
				 "%s: unknown unit: expected a duration such as 30s, 5m or 250ms "
				 "(units ms, s, m, h, d)",
				 s);
			return -EINVAL;
		}
	} else if (!only_blanks(n.rest)) {
		snprintf(err, errlen, "%s: expected a duration such as 30s, 5m or 250ms", s);
		return -EINVAL;
	}
	total = n.whole * mult;
	if (n.frac) {
		u128 part = n.frac * mult;
		if (part % n.frac_scale) {
			snprintf(err, errlen, "%s: not a whole number of milliseconds", s);
			return -EINVAL;
		}
		total += part / n.frac_scale;
	}
	if (total > UINT64_MAX) {
		snprintf(err, errlen, "%s: duration out of range", s);
		return -ERANGE;
	}
	*out_ms = (uint64_t)total;
	return 0;
}

char *cmn_format_size(uint64_t bytes, char *buf, size_t buflen)
{
	static const char *const names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v;
	int i = -1;

	if (!buf || buflen == 0)
		return buf;
	if (bytes < 1024) {
		snprintf(buf, buflen, "%" PRIu64 " B", bytes);
		return buf;
	}
	v = (double)bytes;
	while (v >= 1024.0 && i < 5) {
		v /= 1024.0;
		i++;
	}
	/* 1023.96 KiB would print as "1024.0 KiB": step up instead */
	if (v >= 1023.95 && i < 5) {
		v /= 1024.0;
		i++;
	}
	snprintf(buf, buflen, "%.1f %s", v, names[i]);
	return buf;
}
