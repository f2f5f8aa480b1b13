/*
 * store.c - the remote-store interface: URL parsing, credentials, file://
 * listing, the retrying small GET used by every listing, and the shared
 * retry policy.
 *
 * Owns struct smp_store.  Does not parse listing formats (http_list.c, s3.c)
 * and does not run parallel transfers (fetch.c).  Secrets (S3 keys, session
 * token) are held here, wiped on free and never written to a message or log.
 */
#include "sampler/store_i.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "sampler/sigv4.h"

uint64_t smp_key_hash(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t smp__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void smp__curl_global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- retry policy ----------------------------------------------------- */

bool smp__status_retryable(long status)
{
	return status == 408 || status == 429 || status >= 500;
}

bool smp__curl_retryable(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_COULDNT_RESOLVE_HOST:
		return true;
	default:
		return false;
	}
}

void smp__count_failure(struct smp_stats *st, CURLcode c, long status)
{
	if (c == CURLE_OPERATION_TIMEDOUT)
		SMP_STAT_ADD(st, timeouts, 1);
	else if (c != CURLE_OK)
		SMP_STAT_ADD(st, net_errors, 1);
	else if (status == 408 || status == 429)
		SMP_STAT_ADD(st, http_408_429, 1);
	else if (status >= 500)
		SMP_STAT_ADD(st, http_5xx, 1);
	else if (status >= 400)
		SMP_STAT_ADD(st, http_4xx, 1);
}

/* xorshift64*, seeded per sampler; jitter does not need more. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ull;
}

/*
 * Exponential backoff with full jitter: uniform in [cap/2, cap] where cap =
 * base * 2^attempt bounded by SMP_BACKOFF_MAX_MS; a server's Retry-After
 * (bounded by SMP_RETRY_AFTER_MAX_MS) is a floor.
 */
uint64_t smp__backoff_ms(uint32_t attempt, uint64_t retry_after_ms, uint64_t *rng)
{
	uint64_t cap = SMP_BACKOFF_BASE_MS;
	for (uint32_t i = 0; i < attempt && cap < SMP_BACKOFF_MAX_MS; i++)
		cap *= 2;
	if (cap > SMP_BACKOFF_MAX_MS)
		cap = SMP_BACKOFF_MAX_MS;
	uint64_t d = cap / 2 + rng_next(rng) % (cap / 2 + 1);
	if (retry_after_ms > SMP_RETRY_AFTER_MAX_MS)
		retry_after_ms = SMP_RETRY_AFTER_MAX_MS;
	return d > retry_after_ms ? d : retry_after_ms;
}

/* ---- listing helpers -------------------------------------------------- */

int smp__listing_add(struct smp_listing *l, const char *key, size_t keylen, uint64_t size,
		     const char *etag)
{
	if (keylen == 0 || keylen > SMP_KEY_MAX || memchr(key, '\0', keylen))
		return -EINVAL;
	if (l->n >= SMP_LIST_MAX_OBJECTS)
		return -E2BIG;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 256;
		struct smp_object *v = realloc(l->v, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = nc;
	}
	struct smp_object *o = &l->v[l->n];
	o->key = strndup(key, keylen);
	o->etag = strdup(etag ? etag : "");
	o->size = size;
	if (!o->key || !o->etag) {
		free(o->key);
		free(o->etag);
		return -ENOMEM;
	}
	l->n++;
	return 0;
}

void smp_listing_free(struct smp_listing *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].etag);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int cmp_obj(const void *a, const void *b)
{
	return strcmp(((const struct smp_object *)a)->key, ((const struct smp_object *)b)->key);
}

/* ---- file:// ---------------------------------------------------------- */

static int file_walk(int dfd, const char *rel, int depth, struct smp_listing *l, char *err,
		     size_t errlen)
{
	if (depth > SMP_LIST_MAX_DEPTH) {
		snprintf(err, errlen, "%s: directories nested deeper than %d levels", rel,
			 SMP_LIST_MAX_DEPTH);
		return -ELOOP;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		snprintf(err, errlen, "%s: cannot list: %s", *rel ? rel : ".", strerror(e));
		return -e;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char key[SMP_KEY_MAX + 1];
		int n = snprintf(key, sizeof(key), "%s%s", rel, de->d_name);
		if (n < 0 || (size_t)n >= sizeof(key)) {
			cmn_log(CMN_LOG_WARN, "file source: skipping a key longer than %d bytes",
				SMP_KEY_MAX);
			continue;
		}
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				continue;
			if ((size_t)n + 1 >= sizeof(key))
				continue;
			key[n] = '/';
			key[n + 1] = '\0';
			rc = file_walk(sub, key, depth + 1, l, err, errlen);
			if (rc)
				break;
		} else if (S_ISREG(st.st_mode)) {
			char etag[64];
			snprintf(etag, sizeof(etag), "%lld.%09ld-%lld",
				 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
				 (long long)st.st_size);
			rc = smp__listing_add(l, key, (size_t)n, (uint64_t)st.st_size, etag);
			if (rc) {
				snprintf(err, errlen, "listing: %s", strerror(-rc));
				break;
			}
		}
	}
	closedir(d);
	return rc;
}

static int file_list(struct smp_store *s, struct smp_listing *l, char *err, size_t errlen)
{
	int fd = open(s->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot open the source directory: %s", s->base,
			 strerror(e));
		return -e;
	}
	return file_walk(fd, "", 0, l, err, errlen);
}

/* ---- small GETs with retries ------------------------------------------ */

struct small_ctx {
	struct smp_buf *b;
	uint64_t retry_after_ms;
};

static size_t small_write(char *p, size_t sz, size_t n, void *ud)
{
	struct smp_buf *b = ((struct small_ctx *)ud)->b;
	size_t len = sz * n;
	if (b->len + len > b->max) {
		b->overflow = true;
		return 0;
	}
	if (b->len + len + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 65536;
		while (nc < b->len + len + 1)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np)
			return 0;
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
	b->p[b->len] = '\0';
	return len;
}

static uint64_t parse_retry_after(const char *line, size_t len)
{
	static const char name[] = "retry-after:";
	if (len < sizeof(name) - 1 || strncasecmp(line, name, sizeof(name) - 1))
		return 0;
	char tmp[32];
	size_t vl = len - (sizeof(name) - 1);
	if (vl >= sizeof(tmp))
		return 0; /* HTTP dates are ignored: the backoff applies */
	memcpy(tmp, line + sizeof(name) - 1, vl);
	tmp[vl] = '\0';
	char *end;
	unsigned long v = strtoul(tmp, &end, 10);
	while (*end == ' ' || *end == '\r' || *end == '\n')
		end++;
	if (*end || v > 3600)
		return 0;
	return (uint64_t)v * 1000u;
}

static size_t small_header(char *p, size_t sz, size_t n, void *ud)
{
	struct small_ctx *c = ud;
	uint64_t ra = parse_retry_after(p, sz * n);
	if (ra)
		c->retry_after_ms = ra;
	return sz * n;
}

uint64_t smp__retry_after_header(const char *line, size_t len)
{
	return parse_retry_after(line, len);
}

int smp__get_small(struct smp_store *s, const char *url, const char *canon_uri, const char *query,
		   smp__sign_fn sign, struct smp_buf *b, char *err, size_t errlen)
{
	uint64_t rng = smp__now_ms() ^ (uintptr_t)b;
	for (uint32_t attempt = 0;; attempt++) {
		struct curl_slist *hdrs = NULL;
		struct small_ctx c = {.b = b};
		CURL *e = s->list_easy;
		long status = 0;
		int rc;

		b->len = 0;
		b->overflow = false;
		if (b->p)
			b->p[0] = '\0';
		curl_easy_reset(e);
		smp_store_easy_defaults(s, e);
		curl_easy_setopt(e, CURLOPT_URL, url);
		if (sign) {
			rc = sign(s, canon_uri, query, &hdrs, err, errlen);
			if (rc)
				return rc;
		}
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, small_write);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &c);
		curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, small_header);
		curl_easy_setopt(e, CURLOPT_HEADERDATA, &c);
		SMP_STAT_ADD(s->stats, requests, 1);
		CURLcode cc = curl_easy_perform(e);
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
		curl_slist_free_all(hdrs);
		if (cc == CURLE_WRITE_ERROR && b->overflow) {
			snprintf(err, errlen, "%s: listing response larger than %zu bytes", url,
				 b->max);
			return -EFBIG;
		}
		if (s->scheme == SMP_SCHEME_FILE && cc == CURLE_OK)
			status = 200;
		if (cc == CURLE_FILE_COULDNT_READ_FILE) {
			status = 404; /* file:// MANIFEST absent */
			cc = CURLE_OK;
		}
		if (cc == CURLE_OK && status >= 200 && status < 300) {
			SMP_STAT_ADD(s->stats, bytes_fetched, b->len);
			return 0;
		}
		smp__count_failure(s->stats, cc, status);
		bool retry =
		    cc != CURLE_OK ? smp__curl_retryable(cc) : smp__status_retryable(status);
		if (!retry || attempt >= s->retries) {
			if (cc != CURLE_OK) {
				snprintf(err, errlen, "%s: %s%s", url, curl_easy_strerror(cc),
					 retry ? " (retries exhausted; raise `retries` or check "
						 "the server)"
					       : "");
				return cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
			}
			snprintf(err, errlen, "%s: HTTP %ld%s", url, status,
				 status == 403 || status == 401
				     ? " (check the credentials and the bucket policy)"
				 : status == 404 ? " (check the source URL)"
				 : retry	 ? " (retries exhausted)"
						 : "");
			return status == 404			  ? -ENOENT
			       : (status == 401 || status == 403) ? -EACCES
								  : -EIO;
		}
		uint64_t wait = smp__backoff_ms(attempt, c.retry_after_ms, &rng);
		SMP_STAT_ADD(s->stats, retries, 1);
		SMP_STAT_ADD(s->stats, retry_wait_ms, wait);
		cmn_log(CMN_LOG_INFO, "listing: %s: %s %ld, retrying in %llu ms", url,
			cc != CURLE_OK ? curl_easy_strerror(cc) : "HTTP", status,
			(unsigned long long)wait);
		struct timespec ts = {.tv_sec = (time_t)(wait / 1000),
				      .tv_nsec = (long)(wait % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}

/* ---- credentials ------------------------------------------------------- */

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

/*
 * Reads [profile] from an AWS credentials file.  Refuses a file that group
 * or others can read (-EACCES).  A missing file is 0 with nothing set.
 */
static int read_credentials_file(struct smp_store *s, const char *path, const char *profile,
				 char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT
			   ? 0
			   : (snprintf(err, errlen, "%s: %s", path, strerror(errno)), -errno);
	struct stat st;
	if (fstat(fd, &st) != 0 || (st.st_mode & 077)) {
		close(fd);
		snprintf(err, errlen,
			 "%s: credentials file is readable by group or others (mode %03o): run "
			 "chmod 600 %s",
			 path, (unsigned)(st.st_mode & 0777), path);
		return -EACCES;
	}
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	char line[4096];
	bool in = false;
	int lines = 0;
	while (fgets(line, sizeof(line), f) && lines++ < 100000) {
		char *t = trim(line);
		if (*t == '#' || *t == ';' || !*t)
			continue;
		if (*t == '[') {
			char *e = strchr(t, ']');
			if (e)
				*e = '\0';
			char *name = trim(t + 1);
			if (!strncmp(name, "profile ", 8))
				name = trim(name + 8);
			in = !strcmp(name, profile);
			continue;
		}
		if (!in)
			continue;
		char *eq = strchr(t, '=');
		if (!eq)
			continue;
		*eq = '\0';
		char *k = trim(t), *v = trim(eq + 1);
		char **dst = !strcmp(k, "aws_access_key_id")	   ? &s->access_key
			     : !strcmp(k, "aws_secret_access_key") ? &s->secret_key
			     : !strcmp(k, "aws_session_token")	   ? &s->session_token
								   : NULL;
		if (dst) {
			free(*dst);
			*dst = strdup(v);
		}
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	return 0;
}

static int load_credentials(struct smp_store *s, const struct smp_store_opts *o, char *err,
			    size_t errlen)
{
	const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
	if (ak && *ak && sk && *sk) {
		const char *tok = getenv("AWS_SESSION_TOKEN");
		s->access_key = strdup(ak);
		s->secret_key = strdup(sk);
		s->session_token = tok && *tok ? strdup(tok) : NULL;
		return 0;
	}
	char path[4096];
	const char *p =
	    o->credentials_file ? o->credentials_file : getenv("AWS_SHARED_CREDENTIALS_FILE");
	if (!p || !*p) {
		const char *home = getenv("HOME");
		if (!home)
			return 0;
		snprintf(path, sizeof(path), "%s/.aws/credentials", home);
		p = path;
	}
	const char *profile = o->profile && *o->profile ? o->profile : getenv("AWS_PROFILE");
	int rc =
	    read_credentials_file(s, p, profile && *profile ? profile : "default", err, errlen);
	if (rc)
		return rc;
	if (!s->access_key != !s->secret_key) {
		snprintf(err, errlen,
			 "%s: profile has only one of aws_access_key_id and "
			 "aws_secret_access_key: set both",
			 p);
		return -EINVAL;
	}
	return 0;
}

/* ---- open / free ------------------------------------------------------- */

static char *with_slash(const char *s, size_t n)
{
	bool add = n == 0 || s[n - 1] != '/';
	char *r = malloc(n + 2);
	if (!r)
		return NULL;
	memcpy(r, s, n);
	if (add)
		r[n++] = '/';
	r[n] = '\0';
	return r;
}

int smp_store_open(struct smp_store **out, const struct smp_store_opts *o, char *err, size_t errlen)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, smp__curl_global_init);
	struct smp_store *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;
	const char *url = o->url;
	if (!s)
		goto fail;
	s->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
	s->retries = o->retries;
	s->stats = o->stats;
	s->region = strdup(o->region && *o->region ? o->region : "us-east-1");
	if (!s->region)
		goto fail;
	rc = -EINVAL;
	if (!url || !*url) {
		snprintf(err, errlen,
			 "no source URL: give file:///abs/dir/, http(s)://host/prefix/ or "
			 "s3://bucket/prefix/");
		goto fail;
	}
	if (!strncmp(url, "file://", 7)) {
		s->scheme = SMP_SCHEME_FILE;
		if (url[7] != '/') {
			snprintf(
			    err, errlen,
			    "%s: a file source needs an absolute path, e.g. file:///data/train/",
			    url);
			goto fail;
		}
		s->base = with_slash(url + 7, strlen(url + 7));
	} else if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8)) {
		s->scheme = SMP_SCHEME_HTTP;
		if (strchr(url, '?') || strchr(url, '#')) {
			snprintf(err, errlen, "%s: a source URL has no query or fragment", url);
			goto fail;
		}
		s->base = with_slash(url, strlen(url));
	} else if (!strncmp(url, "s3://", 5)) {
		s->scheme = SMP_SCHEME_S3;
		const char *b = url + 5, *sl = strchr(b, '/');
		size_t bl = sl ? (size_t)(sl - b) : strlen(b);
		if (bl < 1 || bl > 255) {
			snprintf(err, errlen, "%s: expected s3://bucket/prefix/", url);
			goto fail;
		}
		s->bucket = strndup(b, bl);
		const char *pfx = sl ? sl + 1 : "";
		s->prefix = *pfx ? with_slash(pfx, strlen(pfx)) : strdup("");
		if (!s->bucket || !s->prefix)
			goto nomem;
		if (o->endpoint && *o->endpoint) {
			const char *ep = o->endpoint;
			if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) {
				snprintf(err, errlen, "endpoint=%s: expected http(s)://host[:port]",
					 ep);
				goto fail;
			}
			size_t n = strlen(ep);
			while (n > 0 && ep[n - 1] == '/')
				n--;
			s->base = strndup(ep, n);
			const char *h = strstr(s->base, "://") + 3;
			if (strchr(h, '/')) {
				snprintf(
				    err, errlen,
				    "endpoint=%s: expected http(s)://host[:port] without a path",
				    ep);
				goto fail;
			}
			s->host = strdup(h);
		} else {
			char buf[512];
			s->virtual_host = true;
			snprintf(buf, sizeof(buf), "%s.s3.%s.amazonaws.com", s->bucket, s->region);
			s->host = strdup(buf);
			snprintf(buf, sizeof(buf), "https://%s.s3.%s.amazonaws.com", s->bucket,
				 s->region);
			s->base = strdup(buf);
		}
		if (!s->base || !s->host)
			goto nomem;
		rc = load_credentials(s, o, err, errlen);
		if (rc)
			goto fail;
		if (!s->access_key)
			cmn_log(CMN_LOG_INFO,
				"s3://%s/: no credentials found, sending anonymous requests",
				s->bucket);
	} else {
		snprintf(err, errlen,
			 "%s: unsupported source: use file:///abs/dir/, http(s)://host/prefix/ or "
			 "s3://bucket/prefix/",
			 url);
		goto fail;
	}
	if (!s->base)
		goto nomem;
	s->list_easy = curl_easy_init();
	if (!s->list_easy)
		goto nomem;
	*out = s;
	return 0;
nomem:
	rc = -ENOMEM;
	snprintf(err, errlen, "out of memory opening the source");
fail:
	smp_store_free(s);
	return rc;
}

static void free_secret(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
}

void smp_store_free(struct smp_store *s)
{
	if (!s)
		return;
	if (s->list_easy)
		curl_easy_cleanup(s->list_easy);
	free(s->base);
	free(s->bucket);
	free(s->prefix);
	free(s->host);
	free(s->region);
	free_secret(s->access_key);
	free_secret(s->secret_key);
	free_secret(s->session_token);
	free(s);
}

enum smp_scheme smp_store_scheme(const struct smp_store *s)
{
	return s->scheme;
}

void smp_store_easy_defaults(const struct smp_store *s, CURL *e)
{
	long secs = (long)((s->timeout_ms + 999) / 1000);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)s->timeout_ms);
	/*
	 * A stalled server: under 1 KiB/s for `timeout` aborts the transfer (curl
	 * averages speed over a few seconds, so a trickle of bytes cannot keep a
	 * dead transfer alive much past that).
	 */
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, secs > 0 ? secs : 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	/* keys are data: "a/../b" names an object, not a path to normalize */
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "file,http,https");
	curl_easy_setopt(e, CURLOPT_USERAGENT,
			 "rollcache/"
			 "0.1");
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE,
			 1024L * 1024L); /* fewer records straddle two chunks */
}

int smp_store_list(struct smp_store *s, struct smp_listing *l, char *err, size_t errlen)
{
	int rc;
	memset(l, 0, sizeof(*l));
	switch (s->scheme) {
	case SMP_SCHEME_FILE:
		rc = file_list(s, l, err, errlen);
		break;
	case SMP_SCHEME_HTTP:
		rc = smp__http_list(s, l, err, errlen);
		break;
	default:
		rc = smp__s3_list(s, l, err, errlen);
		break;
	}
	if (rc) {
		smp_listing_free(l);
		return rc;
	}
	if (l->n > 1) /* qsort(NULL, 0) is undefined: an empty listing */
		qsort(l->v, l->n, sizeof(l->v[0]), cmp_obj);
	/* A key listed twice (MANIFEST duplicates) is one object. */
	size_t w = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (w > 0 && !strcmp(l->v[w - 1].key, l->v[i].key)) {
			free(l->v[i].key);
			free(l->v[i].etag);
			continue;
		}
		l->v[w++] = l->v[i];
	}
	l->n = w;
	return 0;
}

int smp_store_url(struct smp_store *s, const char *key, char *out, size_t outlen)
{
	char enc[3 * SMP_KEY_MAX + 1];
	int n;
	if (s->scheme == SMP_SCHEME_S3)
		return smp__s3_url(s, key, out, outlen, NULL, 0);
	if (smp_uri_encode(key, 1, enc, sizeof(enc)) < 0)
		return -ENAMETOOLONG;
	if (s->scheme == SMP_SCHEME_FILE) {
		char path[3 * SMP_KEY_MAX + 4096];
		if (smp_uri_encode(s->base, 1, path, sizeof(path)) < 0)
			return -ENAMETOOLONG;
		n = snprintf(out, outlen, "file://%s%s", path, enc);
	} else {
		n = snprintf(out, outlen, "%s%s", s->base, enc);
	}
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int smp_store_prepare(struct smp_store *s, CURL *e, const char *key, uint64_t off, uint64_t len,
		      struct curl_slist **hdrs, char *err, size_t errlen)
{
	*hdrs = NULL;
	if (s->scheme == SMP_SCHEME_S3)
		return smp__s3_prepare(s, e, key, off, len, hdrs, err, errlen);
	char url[8192];
	if (smp_store_url(s, key, url, sizeof(url))) {
		snprintf(err, errlen, "key too long for a URL (%zu bytes)", strlen(key));
		return -ENAMETOOLONG;
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	if (off || len) {
		char range[64];
		if (len)
			snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off,
				 (unsigned long long)(off + len - 1));
		else
			snprintf(range, sizeof(range), "%llu-", (unsigned long long)off);
		curl_easy_setopt(e, CURLOPT_RANGE, range);
	} else {
		curl_easy_setopt(e, CURLOPT_RANGE, NULL);
	}
	return 0;
}
