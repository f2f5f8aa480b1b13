/*
 * http_list.c - listing an http(s):// source: a MANIFEST file when the server
 * has one, else nginx's JSON autoindex (`autoindex on; autoindex_format
 * json;`), walking subdirectories.
 *
 * MANIFEST lines are `name size` (split at the last blank; names may hold
 * spaces; `#` starts a comment line).  Autoindex entries are the flat JSON
 * objects nginx writes: {"name":"x","type":"file","mtime":"...","size":N}.
 * The JSON reader here accepts exactly that shape (an array of flat objects
 * with string and number values) and refuses anything else: it is not a
 * general JSON parser.  Every body is capped (SMP_LIST_BODY_CAP), nesting by
 * SMP_LIST_MAX_DEPTH, objects by SMP_LIST_MAX_OBJECTS.
 *
 * Owns nothing beyond one listing call.  Does not know the generic source
 * (source.c calls in).  No locking.
 */
#include "sampler/http_list_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/listing_i.h"
#include "sampler/sigv4.h"

/* Copies src into dst (capacity n > 0), truncating; always NUL-terminates. */
static void copy_str(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);
	if (l >= n)
		l = n - 1;
	memcpy(dst, src, l);
	dst[l] = '\0';
}

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
		char etag[32];
		snprintf(etag, sizeof(etag), "m-%llu", size);
		int rc = smp__listing_add(l, s, (size_t)(ke - s), size, etag);
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

struct jp {
	const char *p, *end;
};

static void ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
		j->p++;
}

static int put_utf8(char *out, size_t *o, size_t cap, unsigned cp)
{
	unsigned char b[4];
	size_t n;
	if (cp < 0x80) {
		b[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (unsigned char)(0xc0 | (cp >> 6));
		b[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (unsigned char)(0xe0 | (cp >> 12));
		b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (unsigned char)(0xf0 | (cp >> 18));
		b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	if (*o + n >= cap)
		return -1;
	memcpy(out + *o, b, n);
	*o += n;
	return 0;
}

/* Reads a JSON string into out (NUL-terminated).  -1 on bad input or overflow. */
static int jstring(struct jp *j, char *out, size_t cap)
{
	size_t o = 0;
	if (j->p >= j->end || *j->p != '"')
		return -1;
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		char c = *j->p++;
		if (c == '\\') {
			if (j->p >= j->end)
				return -1;
			c = *j->p++;
			switch (c) {
			case 'n':
				c = '\n';
				break;
			case 't':
				c = '\t';
				break;
			case 'r':
				c = '\r';
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'u': {
				if (j->end - j->p < 4)
					return -1;
				char h[5] = {j->p[0], j->p[1], j->p[2], j->p[3], 0};
				char *he;
				unsigned cp = (unsigned)strtoul(h, &he, 16);
				if (*he)
					return -1;
				j->p += 4;
				if (cp >= 0xd800 && cp < 0xdc00 && j->end - j->p >= 6 &&
				    j->p[0] == '\\' && j->p[1] == 'u') {
					char h2[5] = {j->p[2], j->p[3], j->p[4], j->p[5], 0};
					unsigned lo = (unsigned)strtoul(h2, &he, 16);
					if (!*he && lo >= 0xdc00 && lo < 0xe000) {
						cp =
						    0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
						j->p += 6;
					}
				}
				if (put_utf8(out, &o, cap, cp))
					return -1;
				continue;
			}
			default:
				break; /* \" \\ \/ */
			}
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = c;
	}
	if (j->p >= j->end)
		return -1;
	j->p++;
	out[o] = '\0';
	return (int)o;
}

struct entry {
	char name[SMP_KEY_MAX + 1];
	char type[16];
	char mtime[64];
	uint64_t size;
	int namelen;
};

static int jobject(struct jp *j, struct entry *e)
{
	memset(e, 0, sizeof(*e));
	e->namelen = -1;
	ws(j);
	if (j->p >= j->end || *j->p != '{')
		return -1;
	j->p++;
	for (int fields = 0; fields < 64; fields++) {
		char k[32], v[SMP_KEY_MAX + 1];
		ws(j);
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			return 0;
		}
		if (jstring(j, k, sizeof(k)) < 0)
			return -1;
		ws(j);
		if (j->p >= j->end || *j->p != ':')
			return -1;
		j->p++;
		ws(j);
		if (j->p < j->end && *j->p == '"') {
			int n = jstring(j, v, sizeof(v));
			if (n < 0)
				return -1;
			if (!strcmp(k, "name")) {
				memcpy(e->name, v, (size_t)n + 1);
				e->namelen = n;
			} else if (!strcmp(k, "type")) {
				copy_str(e->type, sizeof(e->type), v);
			} else if (!strcmp(k, "mtime")) {
				copy_str(e->mtime, sizeof(e->mtime), v);
			}
		} else {
			char *ne;
			unsigned long long n = strtoull(j->p, &ne, 10);
			if (ne == j->p || ne > j->end)
				return -1;
			j->p = ne;
			if (!strcmp(k, "size"))
				e->size = n;
		}
		ws(j);
		if (j->p < j->end && *j->p == ',')
			j->p++;
	}
	return -1;
}

/*
 * Parses one autoindex page.  Files are added with key prefix `rel`;
 * subdirectory names are appended to *dirs (NUL-separated) for the caller
 * to walk.
 */
int smp__parse_autoindex(const char *body, size_t len, const char *rel, struct smp_listing *l,
			 struct smp_buf *dirs, char *err, size_t errlen)
{
	struct jp j = {body, body + len};
	struct entry *e = malloc(sizeof(*e));
	int rc = 0;
	if (!e)
		return -ENOMEM;
	ws(&j);
	if (j.p >= j.end || *j.p != '[') {
		snprintf(err, errlen,
			 "%s: not an nginx JSON autoindex (set `autoindex on; "
			 "autoindex_format json;` or serve a MANIFEST)",
			 *rel ? rel : "/");
		rc = -EPROTO;
		goto out;
	}
	j.p++;
	for (;;) {
		ws(&j);
		if (j.p < j.end && *j.p == ']')
			break;
		if (jobject(&j, e) || e->namelen <= 0) {
			snprintf(err, errlen, "%s: malformed autoindex JSON near byte %zu",
				 *rel ? rel : "/", (size_t)(j.p - body));
			rc = -EPROTO;
			goto out;
		}
		ws(&j);
		if (j.p < j.end && *j.p == ',')
			j.p++;
		if (!strcmp(e->name, ".") || !strcmp(e->name, "..") ||
		    memchr(e->name, '/', (size_t)e->namelen))
			continue; /* never produced by nginx; refuse to walk them */
		char key[SMP_KEY_MAX + 1];
		int n = snprintf(key, sizeof(key), "%s%s", rel, e->name);
		if (n < 0 || (size_t)n >= sizeof(key) - 1)
			continue;
		if (!strcmp(e->type, "directory")) {
			key[n++] = '/';
			key[n] = '\0';
			if (dirs->len + (size_t)n + 1 > dirs->max) {
				snprintf(err, errlen, "autoindex: too many directories");
				rc = -E2BIG;
				goto out;
			}
			if (dirs->len + (size_t)n + 1 > dirs->cap) {
				size_t nc = dirs->cap ? dirs->cap * 2 : 4096;
				while (nc < dirs->len + (size_t)n + 1)
					nc *= 2;
				char *np = realloc(dirs->p, nc);
				if (!np) {
					rc = -ENOMEM;
					goto out;
				}
				dirs->p = np;
				dirs->cap = nc;
			}
			memcpy(dirs->p + dirs->len, key, (size_t)n + 1);
			dirs->len += (size_t)n + 1;
		} else if (!strcmp(e->type, "file")) {
			if (!*rel && !strcmp(e->name, "MANIFEST"))
				continue;
			char etag[96];
			snprintf(etag, sizeof(etag), "%s-%llu", e->mtime,
				 (unsigned long long)e->size);
			rc = smp__listing_add(l, key, (size_t)n, e->size, etag);
			if (rc) {
				snprintf(err, errlen, "autoindex: %s", strerror(-rc));
				goto out;
			}
		}
	}
out:
	free(e);
	return rc;
}

int smp__http_list(struct smp_conn *c, const char *base, struct smp_listing *l, char *err,
		   size_t errlen)
{
	struct smp_buf b = {.max = SMP_LIST_BODY_CAP};
	struct smp_buf dirs = {.max = SMP_LIST_BODY_CAP};
	char url[3 * SMP_KEY_MAX + 4096], enc[3 * SMP_KEY_MAX + 1];
	int rc;

	snprintf(url, sizeof(url), "%sMANIFEST", base);
	rc = smp__get_small(c, url, NULL, NULL, NULL, NULL, &b, err, errlen);
	if (rc == 0) {
		rc = smp__parse_manifest(b.p ? b.p : "", b.len, l, err, errlen);
		goto out;
	}
	if (rc != -ENOENT && rc != -EACCES)
		goto out;
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
		char relcopy[SMP_KEY_MAX + 2];
		copy_str(relcopy, sizeof(relcopy), rel);
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
