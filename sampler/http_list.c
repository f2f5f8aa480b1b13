/*
 * http_list.c - listing an http(s):// source: a MANIFEST file when the server
 * has one, else nginx's JSON autoindex (`autoindex on; autoindex_format
 * json;`), walking subdirectories.
 *
 * MANIFEST lines are `name size` (split at the last blank; names may hold
 * spaces; `#` starts a comment line).  Autoindex pages are JSON arrays of
 * the objects nginx writes: {"name":"x","type":"file","mtime":"...","size":N}.
 * Each entry is decoded on its own (the array's brackets and commas are
 * walked here): by a scanner of nginx's own entry shape, else by jansson
 * ("THE FAST PATH"), so memory is bounded by one entry, not by the page.  Validation is strict:
 * name a string of 1..SMP_KEY_MAX bytes, type a string, size (files) an integer >= 0, mtime
 * (optional) a string; any other shape refuses the page with a one-line message.
 *
 * Owns nothing beyond one listing call.  Does not know the generic source
 * (source.c calls in) and never turns a name into a local path (DESIGN 7).
 * Bounds: every body SMP_LIST_BODY_CAP (before parsing), an entry
 * SMP_AUTOINDEX_ENTRY_CAP, entries per page SMP_AUTOINDEX_MAX_ENTRIES,
 * nesting SMP_LIST_MAX_DEPTH, objects SMP_LIST_MAX_OBJECTS.  No locking.
 */
#include "sampler/http_list_i.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sampler/listing_i.h"
#include "sampler/sigv4.h"

bool smp__autoindex_fast = true;
/* ---- MANIFEST ------------------------------------------------------------ */

int smp__parse_manifest(const char *body, size_t len, struct smp_listing *l, char *err,
			size_t errlen)
{
	size_t lineno = 0;
	const char *p = body, *end = body + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		lineno++;
		const char *s = p;
		p = nl ? nl + 1 : end;
		while (le > s && (le[-1] == '\r' || le[-1] == ' ' || le[-1] == '\t'))
			le--;
		while (s < le && (*s == ' ' || *s == '\t'))
			s++;
		if (s == le || *s == '#')
			continue;
		const char *sp = le;
		while (sp > s && sp[-1] != ' ' && sp[-1] != '\t')
			sp--;
		const char *ke = sp;
		while (ke > s && (ke[-1] == ' ' || ke[-1] == '\t'))
			ke--;
		char num[24];
		size_t nl2 = (size_t)(le - sp);
		if (ke == s || nl2 == 0 || nl2 >= sizeof(num)) {
			snprintf(err, errlen, "MANIFEST line %zu: expected `name size`", lineno);
			return -EINVAL;
		}
		memcpy(num, sp, nl2);
		num[nl2] = '\0';
		char *ne;
		errno = 0;
		unsigned long long size = strtoull(num, &ne, 10);
		if (*ne || errno || num[0] == '-') {
			snprintf(err, errlen,
				 "MANIFEST line %zu: size `%s` is not a number of bytes", lineno,
				 num);
			return -EINVAL;
		}
		/* no etag: the size tells a change (a stored one would cost ~7 B an object) */
		int rc = smp__listing_add(l, s, (size_t)(ke - s), size, NULL);
		if (rc) {
			snprintf(err, errlen, "MANIFEST line %zu: %s", lineno,
				 rc == -EINVAL ? "bad name (empty, NUL or over 1024 bytes)"
					       : strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* ---- nginx JSON autoindex ------------------------------------------------ */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

/* Appends "rel/name/" (n bytes in key, NUL included after) to dirs. */
static int add_dir(struct smp_buf *dirs, const char *key, size_t n, char *err, size_t errlen)
{
	if (dirs->len + n + 1 > dirs->max) {
		snprintf(err, errlen, "autoindex: too many directories (over %zu bytes of names)",
			 dirs->max);
		return -E2BIG;
	}
	if (dirs->len + n + 1 > dirs->cap) {
		size_t nc = dirs->cap ? dirs->cap * 2 : 4096;
		while (nc < dirs->len + n + 1)
			nc *= 2;
		char *np = realloc(dirs->p, nc);
		if (!np)
			return -ENOMEM;
		dirs->p = np;
		dirs->cap = nc;
	}
	memcpy(dirs->p + dirs->len, key, n + 1);
	dirs->len += n + 1;
	return 0;
}

/* One autoindex entry's fields, decoded (by scan_entry() or by jansson). */
struct ai_entry {
	const char *name, *type; /* not NUL-terminated: nl, tl bytes */
	size_t nl, tl;
	const char *mtime; /* NULL when absent; ml bytes */
	size_t ml;
	bool size_ok; /* "size" is an integer >= 0 (size) */
};

/*
 * Checks one decoded entry and adds it (a file to l, a directory to dirs).
 * Entries of other types, and names nginx never writes (".", "..", with a
 * '/' or a NUL), are skipped.  Returns 0, -EPROTO with why in why[], or an
 * error of the listing or dirs with a message in err.
 */
static int add_fields(const struct ai_entry *e, uint64_t size, const char *rel,
		      struct smp_listing *l, struct smp_buf *dirs, char *why, size_t whylen,
		      char *err, size_t errlen)
{
	if (e->nl == 0 || e->nl > SMP_KEY_MAX) {
		snprintf(why, whylen, "name of %zu bytes (expected 1 to %d)", e->nl, SMP_KEY_MAX);
		return -EPROTO;
	}
	bool is_dir = e->tl == 9 && !memcmp(e->type, "directory", 9);
	bool is_file = e->tl == 4 && !memcmp(e->type, "file", 4);
	if (is_file && !e->size_ok) {
		snprintf(why, whylen, "\"size\" of a file must be an integer >= 0");
		return -EPROTO;
	}
	if (!is_dir && !is_file)
		return 0; /* "other": sockets, devices */
	if ((e->nl == 1 && e->name[0] == '.') || (e->nl == 2 && !memcmp(e->name, "..", 2)) ||
	    memchr(e->name, '/', e->nl) || memchr(e->name, '\0', e->nl))
		return 0; /* never produced by nginx (jansson refuses a \u0000 before) */
	char key[SMP_KEY_MAX + 2];
	size_t rl = strlen(rel), n = rl + e->nl;
	if (n + is_dir > SMP_KEY_MAX)
		return 0; /* the whole key (a directory's with its '/') would pass SMP_KEY_MAX */
	memcpy(key, rel, rl);
	memcpy(key + rl, e->name, e->nl);
	if (is_dir) {
		key[n++] = '/';
		key[n] = '\0';
		return add_dir(dirs, key, n, err, errlen);
	}
	key[n] = '\0';
	if (!rl && e->nl == 8 && !memcmp(e->name, "MANIFEST", 8))
		return 0;
	/* the etag: "mtime-size", mtime cut at 63 bytes */
	char etag[96];
	size_t ml = e->mtime ? strnlen(e->mtime, e->ml < 63 ? e->ml : 63) : 0;
	memcpy(etag, e->mtime ? e->mtime : "", ml);
	snprintf(etag + ml, sizeof(etag) - ml, "-%llu", (unsigned long long)size);
	int rc = smp__listing_add(l, key, n, size, etag);
	if (rc)
		snprintf(err, errlen, "autoindex: %s", strerror(-rc));
	return rc;
}

/* add_fields() for an entry jansson decoded, with the same checks of its types. */
static int add_entry(json_t *e, const char *rel, struct smp_listing *l, struct smp_buf *dirs,
		     char *why, size_t whylen, char *err, size_t errlen)
{
	if (!json_is_object(e)) {
		snprintf(why, whylen, "expected an object");
		return -EPROTO;
	}
	json_t *jn = json_object_get(e, "name"), *jt = json_object_get(e, "type");
	json_t *js = json_object_get(e, "size"), *jm = json_object_get(e, "mtime");
	if (!json_is_string(jn) || !json_is_string(jt)) {
		snprintf(why, whylen, "\"name\" and \"type\" must be strings");
		return -EPROTO;
	}
	if (jm && !json_is_string(jm)) {
		snprintf(why, whylen, "\"mtime\" must be a string");
		return -EPROTO;
	}
	struct ai_entry f = {
	    .name = json_string_value(jn),
	    .nl = json_string_length(jn),
	    .type = json_string_value(jt),
	    .tl = json_string_length(jt),
	    .mtime = jm ? json_string_value(jm) : NULL,
	    .ml = jm ? json_string_length(jm) : 0,
	    .size_ok = json_is_integer(js) && json_integer_value(js) >= 0,
	};
	return add_fields(&f, f.size_ok ? (uint64_t)json_integer_value(js) : 0, rel, l, dirs, why,
			  whylen, err, errlen);
}

/*
 * THE FAST PATH.  Decoding every entry with jansson costs about 3 us a key
 * (a tree, its strings and their frees; docs/scale.md), which is most of a
 * listing of 10^7 keys.  nginx writes each entry in one shape:
 *
 *   { "name":"...", "type":"...", "mtime":"...", "size":N }
 *
 * (mtime and size optional, blanks anywhere between tokens).  scan_entry()
 * decodes exactly that shape when its strings are printable ASCII without
 * escapes and N is a plain integer of at most 18 digits, which is what the
 * JSON means then; anything else (escapes, other bytes, another order or
 * key, a number jansson would see otherwise) returns 0 and the entry goes
 * to jansson, so what a page means does not depend on the path taken (the
 * sampler-source tests and fuzz_http_json hold both to it).
 */
static const char *scan_str(const char *p, const char *end, const char **s, size_t *n)
{
	if (p >= end || *p != '"')
		return NULL;
	const char *q = ++p;
	while (q < end && *q != '"') {
		unsigned char c = (unsigned char)*q;
		if (c < 0x20 || c >= 0x7f || c == '\\')
			return NULL; /* escapes, control bytes, non-ASCII: jansson's */
		q++;
	}
	if (q >= end)
		return NULL;
	*s = p;
	*n = (size_t)(q - p);
	return q + 1;
}

/* `"key"` then ':' with blanks around; NULL when p is not at it. */
static const char *scan_key(const char *p, const char *end, const char *key, size_t kl)
{
	p = skip_ws(p, end);
	if ((size_t)(end - p) < kl + 2 || p[0] != '"' || memcmp(p + 1, key, kl) || p[kl + 1] != '"')
		return NULL;
	p = skip_ws(p + kl + 2, end);
	return p < end && *p == ':' ? skip_ws(p + 1, end) : NULL;
}

/* Whether p is at key `"key"` (a peek: the next field's name). */
static bool at_key(const char *p, const char *end, const char *key, size_t kl)
{
	return (size_t)(end - p) >= kl + 2 && p[0] == '"' && !memcmp(p + 1, key, kl) &&
	       p[kl + 1] == '"';
}

/* Decodes one entry of nginx's shape at p; the bytes it took, or 0 (jansson's). */
static size_t scan_entry(const char *p, const char *end, struct ai_entry *e, uint64_t *size)
{
	const char *b = p;
	*e = (struct ai_entry){0};
	*size = 0;
	if (p >= end || *p != '{')
		return 0;
	if (!(p = scan_key(p + 1, end, "name", 4)) || !(p = scan_str(p, end, &e->name, &e->nl)))
		return 0;
	p = skip_ws(p, end);
	if (p >= end || *p != ',' || !(p = scan_key(p + 1, end, "type", 4)) ||
	    !(p = scan_str(p, end, &e->type, &e->tl)))
		return 0;
	p = skip_ws(p, end);
	if (p < end && *p == ',' && at_key(skip_ws(p + 1, end), end, "mtime", 5)) {
		if (!(p = scan_key(p + 1, end, "mtime", 5)) ||
		    !(p = scan_str(p, end, &e->mtime, &e->ml)))
			return 0;
		p = skip_ws(p, end);
	}
	if (p < end && *p == ',') {
		if (!(p = scan_key(p + 1, end, "size", 4)))
			return 0;
		const char *d = p;
		while (p < end && *p >= '0' && *p <= '9' && p - d <= 18)
			*size = *size * 10 + (uint64_t)(*p++ - '0');
		/* a plain integer: 1 to 18 digits, no leading 0, not a real's start */
		if (p == d || p - d > 18 || (*d == '0' && p - d > 1) ||
		    (p < end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9'))))
			return 0;
		e->size_ok = true;
		p = skip_ws(p, end);
	}
	if (p >= end || *p != '}')
		return 0;
	return (size_t)(p + 1 - b);
}

size_t smp__autoindex_scan(const char *entry, size_t len)
{
	struct ai_entry e;
	uint64_t size;
	return scan_entry(entry, entry + len, &e, &size);
}

/*
 * The idea: the page is `[ entry , entry ... ]`.  The brackets, commas and
 * blanks between entries are walked here; each entry is decoded by
 * scan_entry() or, when it is not of nginx's shape, handed to jansson alone
 * (JSON_DISABLE_EOF_CHECK stops it after the entry and reports how many
 * bytes it took), with at most SMP_AUTOINDEX_ENTRY_CAP bytes visible to
 * either, so no page can make jansson build more than one entry's tree.
 */
int smp__parse_autoindex(const char *body, size_t len, const char *rel, struct smp_listing *l,
			 struct smp_buf *dirs, char *err, size_t errlen)
{
	const char *where = *rel ? rel : "/";
	const char *p = body, *end = body + len;
	char why[200];
	if (len > SMP_LIST_BODY_CAP) {
		snprintf(err, errlen, "%s: autoindex page of %zu bytes (the cap is %zu)", where,
			 len, SMP_LIST_BODY_CAP);
		return -EFBIG;
	}
	p = skip_ws(p, end);
	if (p >= end || *p != '[') {
		snprintf(err, errlen,
			 "%s: not an nginx JSON autoindex (set `autoindex on; "
			 "autoindex_format json;` or serve a MANIFEST)",
			 where);
		return -EPROTO;
	}
	p = skip_ws(p + 1, end);
	if (p < end && *p == ']') {
		if (skip_ws(p + 1, end) == end)
			return 0;
		snprintf(err, errlen, "%s: malformed autoindex JSON: data after the final ']'",
			 where);
		return -EPROTO;
	}
	for (size_t i = 0;; i++) {
		if (i >= SMP_AUTOINDEX_MAX_ENTRIES) {
			snprintf(err, errlen, "%s: autoindex page with more than %u entries", where,
				 SMP_AUTOINDEX_MAX_ENTRIES);
			return -E2BIG;
		}
		size_t avail = (size_t)(end - p);
		bool capped = avail > SMP_AUTOINDEX_ENTRY_CAP;
		struct ai_entry fe;
		uint64_t fsize;
		size_t took =
		    smp__autoindex_fast
			? scan_entry(p, p + (capped ? SMP_AUTOINDEX_ENTRY_CAP : avail), &fe, &fsize)
			: 0;
		if (took) {
			p += took;
			int rc =
			    add_fields(&fe, fsize, rel, l, dirs, why, sizeof(why), err, errlen);
			if (rc == -EPROTO)
				snprintf(err, errlen, "%s: autoindex entry %zu: %s", where, i, why);
			if (rc)
				return rc;
			goto next;
		}
		json_error_t je;
		json_t *e = json_loadb(p, capped ? SMP_AUTOINDEX_ENTRY_CAP : avail,
				       JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &je);
		if (!e) {
			if (capped && json_error_code(&je) == json_error_premature_end_of_input) {
				snprintf(err, errlen,
					 "%s: autoindex entry %zu at byte %zu is larger than %zu "
					 "bytes",
					 where, i, (size_t)(p - body), SMP_AUTOINDEX_ENTRY_CAP);
				return -EFBIG;
			}
			snprintf(err, errlen, "%s: malformed autoindex JSON at byte %zu: %s", where,
				 (size_t)(p - body) + (size_t)(je.position > 0 ? je.position : 0),
				 je.text);
			return -EPROTO;
		}
		p += je.position;
		int rc = add_entry(e, rel, l, dirs, why, sizeof(why), err, errlen);
		json_decref(e);
		if (rc == -EPROTO)
			snprintf(err, errlen, "%s: autoindex entry %zu: %s", where, i, why);
		if (rc)
			return rc;
	next:
		p = skip_ws(p, end);
		if (p < end && *p == ',') {
			p = skip_ws(p + 1, end);
			continue;
		}
		if (p < end && *p == ']' && skip_ws(p + 1, end) == end)
			return 0;
		snprintf(err, errlen,
			 "%s: malformed autoindex JSON at byte %zu: expected ',' or a final ']'",
			 where, (size_t)(p - body));
		return -EPROTO;
	}
}

int smp__http_list(struct smp_conn *c, const char *base, const char *since, struct smp_listing *l,
		   char *err, size_t errlen)
{
	struct smp_buf b = {.max = SMP_LIST_BODY_CAP};
	struct smp_buf dirs = {.max = SMP_LIST_BODY_CAP};
	char url[3 * SMP_KEY_MAX + 4096], enc[3 * SMP_KEY_MAX + 1];
	int rc;

	snprintf(url, sizeof(url), "%sMANIFEST", base);
	c->probe = true; /* most servers have none: its 404 is no error */
	c->if_none_match = since && *since ? since : NULL;
	rc = smp__get_small(c, url, NULL, NULL, NULL, NULL, &b, err, errlen);
	c->probe = false;
	c->if_none_match = NULL;
	if (rc == 0) {
		rc = smp__parse_manifest(b.p ? b.p : "", b.len, l, err, errlen);
		if (rc == 0)
			snprintf(l->validator, sizeof(l->validator), "%s", c->etag);
		goto out;
	}
	if (rc != -ENOENT && rc != -EACCES)
		goto out; /* -EALREADY: the MANIFEST is the one of `since` */
	/* Walk directories breadth-first: dirs holds NUL-separated relative paths. */
	size_t next = 0;
	int depth_guard = 0;
	rc = smp__get_small(c, base, NULL, NULL, NULL, NULL, &b, err, errlen);
	if (rc)
		goto out;
	rc = smp__parse_autoindex(b.p ? b.p : "", b.len, "", l, &dirs, err, errlen);
	while (!rc && next < dirs.len) {
		const char *rel = dirs.p + next;
		size_t rl = strlen(rel);
		int depth = 0;
		for (const char *q = rel; *q; q++)
			depth += *q == '/';
		if (depth > SMP_LIST_MAX_DEPTH || ++depth_guard > 10000000) {
			snprintf(err, errlen, "autoindex: directories nested deeper than %d levels",
				 SMP_LIST_MAX_DEPTH);
			rc = -ELOOP;
			break;
		}
		if (smp_uri_encode(rel, 1, enc, sizeof(enc)) < 0) {
			next += rl + 1;
			continue;
		}
		snprintf(url, sizeof(url), "%s%s", base, enc);
		char relcopy[SMP_KEY_MAX + 2]; /* dirs may move while the page is parsed */
		snprintf(relcopy, sizeof(relcopy), "%s", rel);
		next += rl + 1;
		rc = smp__get_small(c, url, NULL, NULL, NULL, NULL, &b, err, errlen);
		if (rc)
			break;
		rc = smp__parse_autoindex(b.p ? b.p : "", b.len, relcopy, l, &dirs, err, errlen);
	}
out:
	free(b.p);
	free(dirs.p);
	return rc;
}
