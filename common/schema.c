/*
 * schema.c - parsing and formatting feature schemas (grammar in schema.h).
 *
 * Owns struct cmn_schema: the features in spec order and a small open
 * addressing table (names -> index) so that the decoder's per-entry lookup
 * is one hash and one memcmp.  Does not know about wire formats
 * (example.c does).  A parsed schema is immutable, hence thread-safe.
 *
 * The parser is a plain recursive-descent scanner over the spec string; every
 * error carries the 1-based column where the offending token starts.
 */
#include "common/schema.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cmn_dtype_name(enum cmn_dtype t)
{
	switch (t) {
	case CMN_DT_FLOAT32:
		return "float32";
	case CMN_DT_INT64:
		return "int64";
	case CMN_DT_UINT8:
		return "uint8";
	case CMN_DT_BYTES:
		return "bytes";
	}
	return "?";
}

/* FNV-1a; names are short. */
static uint32_t name_hash(const void *name, size_t len)
{
	const uint8_t *p = name;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

int cmn_schema_find(const struct cmn_schema *s, const void *name, size_t len)
{
	size_t mask = s->nslots_ - 1;
	size_t i = name_hash(name, len) & mask;
	for (;;) {
		uint16_t slot = s->slots_[i];
		if (slot == 0)
			return -1;
		const struct cmn_feature *f = &s->feature[slot - 1];
		if (f->name_len == len && memcmp(f->name, name, len) == 0)
			return slot - 1;
		i = (i + 1) & mask;
	}
}

void cmn_schema_free(struct cmn_schema *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->feature[i].name);
	free(s->feature);
	free(s->slots_);
	free(s);
}

/* ---- parser ------------------------------------------------------------ */

struct parser {
	const char *spec;
	const char *p;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int perr(struct parser *ps, const char *at,
						      const char *fmt, ...)
{
	if (ps->err && ps->errlen) {
		int n = snprintf(ps->err, ps->errlen,
				 "schema column %zu: ", (size_t)(at - ps->spec) + 1);
		if (n >= 0 && (size_t)n < ps->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

static void skip_blanks(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t')
		ps->p++;
}

static int is_name_byte(unsigned char c)
{
	return c > ' ' && c != 0x7f && !strchr(":,[]=\"", c);
}

/* Length of the token at p, for quoting it in a message (at most 40 bytes). */
static int token_len(const char *p)
{
	int n = 0;
	while (p[n] && p[n] != ',' && p[n] != '[' && p[n] != ']' && p[n] != '=' && p[n] != ' ' &&
	       n < 40)
		n++;
	return n;
}

static int parse_dims(struct parser *ps, struct cmn_feature *f)
{
	/* at '[' */
	ps->p++;
	skip_blanks(ps);
	if (*ps->p == ']') {
		ps->p++;
		f->ragged = true;
		return 0;
	}
	uint64_t count = 1;
	for (;;) {
		skip_blanks(ps);
		const char *at = ps->p;
		if (*at < '0' || *at > '9')
			return perr(ps, at, "expected a dimension (a positive integer) or ']'");
		uint64_t d = 0;
		while (*ps->p >= '0' && *ps->p <= '9') {
			d = d * 10 + (uint64_t)(*ps->p - '0');
			if (d > CMN_SCHEMA_MAX_ELEMS)
				return perr(ps, at, "dimension too large (at most %llu elements)",
					    (unsigned long long)CMN_SCHEMA_MAX_ELEMS);
			ps->p++;
		}
		if (d == 0)
			return perr(ps, at, "dimension 0: dimensions are >= 1 (use [] for ragged)");
		if (f->ndims == CMN_SCHEMA_MAX_DIMS)
			return perr(ps, at, "more than %d dimensions", CMN_SCHEMA_MAX_DIMS);
		if (d > CMN_SCHEMA_MAX_ELEMS / count) /* count * d would pass the cap */
			return perr(ps, at, "shape has more than %llu elements",
				    (unsigned long long)CMN_SCHEMA_MAX_ELEMS);
		f->dims[f->ndims++] = d;
		count *= d;
		skip_blanks(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == ']') {
			ps->p++;
			break;
		}
		return perr(ps, ps->p, "expected ',' or ']' in shape");
	}
	f->count = count;
	return 0;
}

static int parse_default(struct parser *ps, struct cmn_feature *f)
{
	/* after '=' */
	skip_blanks(ps);
	const char *at = ps->p;
	if (f->dtype == CMN_DT_BYTES) {
		if (at[0] == '"' && at[1] == '"') {
			ps->p += 2;
			f->has_default = true;
			return 0;
		}
		return perr(ps, at, "a bytes default can only be \"\" (no bytes)");
	}
	if (f->ragged) {
		const char *q = at;
		if (*q == '[') {
			q++;
			while (*q == ' ' || *q == '\t')
				q++;
			if (*q == ']') {
				ps->p = q + 1;
				f->has_default = true;
				return 0;
			}
		}
		return perr(ps, at, "a ragged feature's default can only be [] (no values)");
	}
	int tl = token_len(at);
	if (tl == 0)
		return perr(ps, at, "expected a default value after '='");
	char *end = NULL;
	errno = 0;
	switch (f->dtype) {
	case CMN_DT_FLOAT32: {
		double d = strtod(at, &end);
		if (end == at)
			return perr(ps, at, "default '%.*s' is not a number", tl, at);
		if (isfinite(d) && fabs(d) > 3.4028234663852886e38)
			return perr(ps, at, "default '%.*s' is out of float32 range", tl, at);
		f->def.f = (float)d;
		break;
	}
	case CMN_DT_INT64: {
		long long v = strtoll(at, &end, 10);
		if (end == at)
			return perr(ps, at, "default '%.*s' is not an integer", tl, at);
		if (errno == ERANGE)
			return perr(ps, at, "default '%.*s' is out of int64 range", tl, at);
		f->def.i = v;
		break;
	}
	case CMN_DT_UINT8: {
		long long v = strtoll(at, &end, 10);
		if (end == at)
			return perr(ps, at, "default '%.*s' is not an integer", tl, at);
		if (errno == ERANGE || v < 0 || v > 255)
			return perr(ps, at, "default '%.*s' is out of uint8 range 0..255", tl, at);
		f->def.u = (uint8_t)v;
		break;
	}
	case CMN_DT_BYTES:
		break;
	}
	ps->p = end;
	f->has_default = true;
	return 0;
}

static int parse_dtype(struct parser *ps, struct cmn_feature *f)
{
	static const struct {
		const char *name;
		enum cmn_dtype t;
	} types[] = {
	    {"float32", CMN_DT_FLOAT32}, {"float", CMN_DT_FLOAT32}, {"int64", CMN_DT_INT64},
	    {"uint8", CMN_DT_UINT8},	 {"bytes", CMN_DT_BYTES},
	};
	const char *at = ps->p;
	size_t n = 0;
	while ((at[n] >= 'a' && at[n] <= 'z') || (at[n] >= '0' && at[n] <= '9'))
		n++;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (strlen(types[i].name) == n && memcmp(types[i].name, at, n) == 0) {
			f->dtype = types[i].t;
			ps->p += n;
			return 0;
		}
	}
	int tl = token_len(at);
	if (tl == 0)
		return perr(ps, at, "expected a dtype (float32, int64, uint8 or bytes)");
	return perr(ps, at, "unknown dtype '%.*s' (expected float32, int64, uint8 or bytes)", tl,
		    at);
}

/* An optional place keyword followed by blanks; the feature name follows. */
static void parse_place(struct parser *ps, struct cmn_feature *f)
{
	static const struct {
		const char *word;
		enum cmn_place place;
	} places[] = {
	    {"context", CMN_PLACE_CONTEXT},
	    {"sequence", CMN_PLACE_SEQUENCE},
	    {"record", CMN_PLACE_RECORD},
	};
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		size_t n = strlen(places[i].word);
		if (strncmp(ps->p, places[i].word, n) == 0 &&
		    (ps->p[n] == ' ' || ps->p[n] == '\t')) {
			f->place = places[i].place;
			ps->p += n;
			skip_blanks(ps);
			return;
		}
	}
}

static int parse_feature(struct parser *ps, struct cmn_feature *f)
{
	skip_blanks(ps);
	const char *kw = ps->p;
	parse_place(ps, f);
	const char *at = ps->p;
	size_t n = 0;
	while (is_name_byte((unsigned char)at[n]))
		n++;
	if (n == 0)
		return perr(ps, at, "expected a feature name (as in x:float32[4])");
	if (n > CMN_SCHEMA_MAX_NAME)
		return perr(ps, at, "feature name longer than %d bytes", CMN_SCHEMA_MAX_NAME);
	ps->p += n;
	skip_blanks(ps);
	if (*ps->p != ':')
		return perr(ps, ps->p, "expected ':' and a dtype after feature name '%.*s'", (int)n,
			    at);
	ps->p++;
	skip_blanks(ps);
	f->name = strndup(at, n);
	if (!f->name)
		return -ENOMEM;
	f->name_len = n;
	int rc = parse_dtype(ps, f);
	if (rc)
		return rc;
	f->elem_size = f->dtype == CMN_DT_FLOAT32 ? 4 : f->dtype == CMN_DT_INT64 ? 8 : 1;
	f->count = 1;
	skip_blanks(ps);
	if (*ps->p == '[') {
		if (f->dtype == CMN_DT_BYTES) {
			const char *q = ps->p + 1;
			while (*q == ' ' || *q == '\t')
				q++;
			if (*q != ']')
				return perr(ps, ps->p,
					    "bytes features are ragged and take no shape "
					    "(write '%s:bytes', or uint8[N] for fixed-size bytes)",
					    f->name);
			ps->p = q + 1;
		} else {
			rc = parse_dims(ps, f);
			if (rc)
				return rc;
		}
	}
	if (f->place == CMN_PLACE_SEQUENCE) {
		if (f->ragged || f->dtype == CMN_DT_BYTES)
			return perr(ps, kw,
				    "sequence feature '%s': each step needs a fixed shape "
				    "(e.g. int64[10], or uint8[N] for N bytes a step); ragged "
				    "steps ([] or bytes) are not supported",
				    f->name);
		f->step_count = f->count;
		f->ragged = true; /* over steps */
		f->count = 0;
	} else if (f->place == CMN_PLACE_RECORD && f->dtype != CMN_DT_BYTES) {
		return perr(
		    ps, kw,
		    "record feature '%s': the whole record is bytes (write 'record %s:bytes')",
		    f->name, f->name);
	} else {
		if (f->dtype == CMN_DT_BYTES)
			f->ragged = true;
		if (f->ragged) {
			f->count = 0;
			f->ndims = 0;
		}
	}
	f->row_bytes = f->count * f->elem_size;
	skip_blanks(ps);
	if (*ps->p == '=') {
		if (f->place == CMN_PLACE_RECORD)
			return perr(ps, ps->p, "record feature '%s' takes no default", f->name);
		ps->p++;
		rc = parse_default(ps, f);
		if (rc)
			return rc;
	}
	skip_blanks(ps);
	return 0;
}

static int build_table(struct cmn_schema *s, struct parser *ps, const char *const *starts)
{
	size_t nslots = 4;
	while (nslots < s->n * 2)
		nslots <<= 1;
	s->slots_ = calloc(nslots, sizeof(*s->slots_));
	if (!s->slots_)
		return -ENOMEM;
	s->nslots_ = nslots;
	for (size_t k = 0; k < s->n; k++) {
		const struct cmn_feature *f = &s->feature[k];
		if (cmn_schema_find(s, f->name, f->name_len) >= 0)
			return perr(ps, starts[k], "feature '%s' is named twice", f->name);
		size_t i = name_hash(f->name, f->name_len) & (nslots - 1);
		while (s->slots_[i])
			i = (i + 1) & (nslots - 1);
		s->slots_[i] = (uint16_t)(k + 1);
	}
	return 0;
}

int cmn_schema_parse(const char *spec, struct cmn_schema **out, char *err, size_t errlen)
{
	struct parser ps = {.spec = spec, .p = spec, .err = err, .errlen = errlen};
	const char *starts[CMN_SCHEMA_MAX_FEATURES];
	int rc;

	if (err && errlen)
		err[0] = '\0';
	struct cmn_schema *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->feature = calloc(CMN_SCHEMA_MAX_FEATURES, sizeof(*s->feature));
	if (!s->feature) {
		rc = -ENOMEM;
		goto fail;
	}
	skip_blanks(&ps);
	if (*ps.p == '\0') {
		rc = perr(&ps, ps.p,
			  "empty schema (expected features such as x:float32[4],y:int64)");
		goto fail;
	}
	for (;;) {
		if (s->n == CMN_SCHEMA_MAX_FEATURES) {
			rc = perr(&ps, ps.p, "more than %d features", CMN_SCHEMA_MAX_FEATURES);
			goto fail;
		}
		skip_blanks(&ps);
		starts[s->n] = ps.p;
		struct cmn_feature *f = &s->feature[s->n++];
		rc = parse_feature(&ps, f);
		if (rc)
			goto fail;
		if (f->ragged)
			s->n_ragged++;
		else
			s->fixed_row_bytes += f->row_bytes;
		if (f->place == CMN_PLACE_CONTEXT || f->place == CMN_PLACE_SEQUENCE)
			s->sequence = true;
		if (f->place == CMN_PLACE_RECORD)
			s->record = true;
		if (*ps.p == ',') {
			ps.p++;
			continue;
		}
		if (*ps.p == '\0')
			break;
		rc = perr(&ps, ps.p, "unexpected '%c' after feature '%s' (expected ',' or the end)",
			  *ps.p, f->name);
		goto fail;
	}
	if (s->record && s->n > 1) {
		for (size_t i = 0; i < s->n; i++)
			if (s->feature[i].place == CMN_PLACE_RECORD) {
				rc = perr(&ps, starts[i],
					  "record feature '%s' is the whole record: it must be the "
					  "schema's only feature",
					  s->feature[i].name);
				goto fail;
			}
	}
	rc = build_table(s, &ps, starts);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	if (rc == -ENOMEM && err && errlen)
		snprintf(err, errlen, "schema: out of memory");
	cmn_schema_free(s);
	return rc;
}

/* ---- formatting -------------------------------------------------------- */

struct sbuf {
	char *buf;
	size_t cap, len;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *dst = b->len < b->cap ? b->buf + b->len : NULL;
	size_t room = b->len < b->cap ? b->cap - b->len : 0;
	int n = vsnprintf(dst, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->len += (size_t)n;
}

size_t cmn_schema_format(const struct cmn_schema *s, char *buf, size_t buflen)
{
	struct sbuf b = {.buf = buf, .cap = buflen, .len = 0};
	if (buflen)
		buf[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		const struct cmn_feature *f = &s->feature[i];
		static const char *const kw[] = {"", "context ", "sequence ", "record "};
		sb_printf(&b, "%s%s%s:%s", i ? "," : "", kw[f->place], f->name,
			  cmn_dtype_name(f->dtype));
		if (f->dtype != CMN_DT_BYTES) {
			if (f->ragged && f->place != CMN_PLACE_SEQUENCE) {
				sb_printf(&b, "[]");
			} else if (f->ndims) {
				for (unsigned d = 0; d < f->ndims; d++)
					sb_printf(&b, "%s%llu", d ? "," : "[",
						  (unsigned long long)f->dims[d]);
				sb_printf(&b, "]");
			}
		}
		if (f->has_default) {
			if (f->dtype == CMN_DT_BYTES)
				sb_printf(&b, "=\"\"");
			else if (f->ragged)
				sb_printf(&b, "=[]");
			else if (f->dtype == CMN_DT_FLOAT32)
				sb_printf(&b, "=%.9g", (double)f->def.f);
			else if (f->dtype == CMN_DT_INT64)
				sb_printf(&b, "=%lld", (long long)f->def.i);
			else
				sb_printf(&b, "=%u", (unsigned)f->def.u);
		}
	}
	return b.len;
}
