/*
 * names.c - sanitized display names of raw objects (DESIGN invariant 7).
 *
 * Owns the mapping key -> display path described in names.h.  Does not
 * create files: display names are shown by the mount only; files are
 * objects/<id>.  Pure functions, no locking.
 *
 * A component is read one unit at a time: one ASCII byte, one well-formed
 * UTF-8 character (shortest form, no surrogates, at most U+10FFFF), or one
 * byte that starts no well-formed character.  A unit is written as itself,
 * or as "%XX" for each of its bytes when it is a control byte, '%', a C1
 * control (U+0080-U+009F), a bidi control (U+061C, U+200E, U+200F,
 * U+202A-U+202E, U+2066-U+2069), or an ill-formed byte.  So a shown name is
 * always valid UTF-8 and cannot reorder the text around it in a terminal
 * or a file manager (a key "gpj.\u202Eexe" is not shown as "exe.jpg").
 *
 * Why the result is injective: every unit maps to itself or to "%XX"
 * triples of its own bytes, and '%' itself is always escaped, so the
 * escaped text of a component decodes back uniquely (percent-decoding, as
 * rclone's encoder does); '/' separates components and never appears
 * inside one except as "%2F"; "." and ".." are escaped.  What is lossy
 * (dropped empty components, cut components) is reported so the caller
 * adds the "~<id>" suffix, and a suffix cannot be forged because a key's
 * own "~<digits>" tail is escaped as "%7E<digits>".
 */
#include "cachefs/names.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A small append-only writer over the caller's buffer. */
struct out {
	char *buf;
	size_t len, cap;
	bool overflow;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		o->overflow = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

/*
 * Length of the well-formed UTF-8 character at p[0..n) (n > 0) and its code
 * point in *cp, or 0 when p[0] starts none (ill-formed: overlong, surrogate,
 * beyond U+10FFFF, truncated, or a stray continuation byte).  ASCII is 1.
 */
static size_t utf8_char(const unsigned char *p, size_t n, uint32_t *cp)
{
	unsigned char b = p[0];
	uint32_t c, min;
	size_t k;

	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	if (b >= 0xC2 && b <= 0xDF)
		k = 2, c = b & 0x1F, min = 0x80;
	else if (b >= 0xE0 && b <= 0xEF)
		k = 3, c = b & 0x0F, min = 0x800;
	else if (b >= 0xF0 && b <= 0xF4)
		k = 4, c = b & 0x07, min = 0x10000;
	else
		return 0;
	if (k > n)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*cp = c;
	return k;
}

/* Whether code point c is shown escaped (see the comment at the top). */
static bool needs_escape(uint32_t c)
{
	return c < 0x20 || c == 0x7f || c == '%' || (c >= 0x80 && c <= 0x9F) || c == 0x061C ||
	       c == 0x200E || c == 0x200F || (c >= 0x202A && c <= 0x202E) ||
	       (c >= 0x2066 && c <= 0x2069);
}

/* True when comp[i] is '~' followed only by digits (at least one) to the end. */
static bool suffix_like_tilde(const char *comp, size_t n, size_t i)
{
	if (comp[i] != '~' || i + 1 >= n)
		return false;
	for (size_t j = i + 1; j < n; j++)
		if (comp[j] < '0' || comp[j] > '9')
			return false;
	return true;
}

/*
 * A cut may have left a UTF-8 sequence without its tail at the end of
 * buf[start..*len): drop that partial sequence so names stay valid UTF-8
 * (sanitized text always is).  Escapes are ASCII and never touched.
 */
static void trim_partial_utf8(char *buf, size_t start, size_t *len)
{
	size_t end = *len, i = end, cont = 0;
	unsigned char lead;
	size_t need;

	while (i > start && ((unsigned char)buf[i - 1] & 0xC0) == 0x80 && cont < 3) {
		i--;
		cont++;
	}
	if (i == start)
		return;
	lead = (unsigned char)buf[i - 1];
	if (lead < 0xC0)
		return; /* ASCII (or stray continuation bytes): nothing to do */
	need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
	if (cont < need) {
		*len = i - 1;
		buf[*len] = '\0';
	}
}

/*
 * Escapes pieces[0..np) as ONE component into o: the pieces are joined by
 * "%2F" (np > 1 only for keys deeper than CFS_DEPTH_MAX).  At most
 * CFS_NAME_MAX bytes are written, never cutting inside an escape; *cut is
 * set when bytes were dropped.  `last` enables the '~' rule on the final
 * piece.
 */
static void put_component(struct out *o, const char *const *pieces, const size_t *lens, size_t np,
			  bool last, bool *cut)
{
	size_t used = 0;

	if (np == 1 && lens[0] == 1 && pieces[0][0] == '.') {
		put(o, "%2E", 3);
		return;
	}
	if (np == 1 && lens[0] == 2 && pieces[0][0] == '.' && pieces[0][1] == '.') {
		put(o, "%2E%2E", 6);
		return;
	}
	for (size_t p = 0; p < np; p++) {
		const char *comp = pieces[p];
		size_t n = lens[p];

		if (p) {
			if (used + 3 > CFS_NAME_MAX) {
				*cut = true;
				return;
			}
			put(o, "%2F", 3);
			used += 3;
		}
		for (size_t i = 0; i < n;) {
			const unsigned char *u = (const unsigned char *)comp + i;
			uint32_t cp = 0;
			size_t ulen = utf8_char(u, n - i, &cp), k;
			char esc[4 * 3 + 1];

			if (ulen == 0) { /* an ill-formed byte: escaped alone */
				ulen = 1;
				cp = 0x80; /* any escaped code point */
			}
			if (needs_escape(cp) ||
			    (last && p == np - 1 && suffix_like_tilde(comp, n, i))) {
				for (size_t j = 0; j < ulen; j++)
					snprintf(esc + 3 * j, 4, "%%%02X", u[j]);
				k = 3 * ulen;
			} else {
				memcpy(esc, u, ulen);
				k = ulen;
			}
			/* a unit is written whole or not at all: no cut escape, no
			 * half a character */
			if (used + k > CFS_NAME_MAX) {
				*cut = true;
				return;
			}
			put(o, esc, k);
			used += k;
			i += ulen;
		}
	}
}

int cfs_sanitize_key(const char *key, char *out, size_t outlen, bool *lossy)
{
	struct out o = {out, 0, outlen, false};
	/* bounded: at most CFS_DISPLAY_MAX pieces are looked at */
	const char *comps[CFS_DISPLAY_MAX];
	size_t lens[CFS_DISPLAY_MAX];
	size_t ncomp = 0;
	bool lost = false;
	const char *p = key;

	if (outlen == 0)
		return -ENAMETOOLONG;
	out[0] = '\0';
	/* Split on '/', dropping empty components. */
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0) {
			lost = true;
		} else if (ncomp < CFS_DISPLAY_MAX) {
			comps[ncomp] = p;
			lens[ncomp++] = n;
		} else {
			lost = true; /* beyond any display path: cut */
		}
		if (!slash)
			break;
		p = slash + 1;
		if (!*p)
			lost = true; /* trailing '/' */
	}
	if (ncomp == 0) {
		put(&o, "%00", 3);
		lost = true;
	}
	for (size_t c = 0; c < ncomp && c < CFS_DEPTH_MAX; c++) {
		/* the last allowed depth takes every remaining component */
		size_t np = c == CFS_DEPTH_MAX - 1 ? ncomp - c : 1;
		bool cut = false;

		if (c)
			put(&o, "/", 1);
		put_component(&o, comps + c, lens + c, np, c + np == ncomp, &cut);
		if (cut)
			lost = true;
	}
	if (lossy)
		*lossy = lost;
	if (o.overflow) {
		out[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

int cfs_display_name(const char *key, int64_t id, bool suffix, char *out, size_t outlen)
{
	char sfx[24];
	size_t slen, len, comp_start, comp_len;
	int rc = cfs_sanitize_key(key, out, outlen, NULL);

	if (rc < 0 || !suffix)
		return rc;
	slen = (size_t)snprintf(sfx, sizeof(sfx), "~%" PRId64, id);
	len = strlen(out);
	comp_start = len;
	while (comp_start > 0 && out[comp_start - 1] != '/')
		comp_start--;
	comp_len = len - comp_start;
	if (comp_len + slen > CFS_NAME_MAX) {
		/* shorten the last component, never inside an escape */
		size_t keep = CFS_NAME_MAX - slen;
		while (keep > 0 && ((keep >= 1 && out[comp_start + keep - 1] == '%') ||
				    (keep >= 2 && out[comp_start + keep - 2] == '%')))
			keep--;
		len = comp_start + keep;
		out[len] = '\0';
		trim_partial_utf8(out, comp_start, &len);
	}
	if (len + slen + 1 > outlen) {
		out[0] = '\0';
		return -ENAMETOOLONG;
	}
	memcpy(out + len, sfx, slen + 1);
	return 0;
}
