/*
 * test_source.c - the remote-source layer without a server: MANIFEST and
 * autoindex parsing, retry policy, credentials handling, file:// listing and
 * the transfer engine's resume-after-bad-data path (sampler/source.c,
 * http_list.c, request.c, s3.c, s3_credentials.c, fetch.c).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sampler/fetch.h"
#include "sampler/http_list_i.h"
#include "sampler/listing_i.h"
#include "sampler/source_i.h"

START_TEST(manifest_lines)
{
	const char *m = "# comment\n"
			"a.tfrecord 100\n"
			"dir/with space.tfrecord   2048\r\n"
			"\n"
			"  x 0\n";
	struct smp_listing l = {0};
	char err[256] = "";
	ck_assert_int_eq(smp__parse_manifest(m, strlen(m), &l, err, sizeof(err)), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.v[0].key, "a.tfrecord");
	ck_assert_uint_eq(l.v[0].size, 100);
	ck_assert_str_eq(l.v[1].key, "dir/with space.tfrecord");
	ck_assert_uint_eq(l.v[1].size, 2048);
	ck_assert_str_eq(l.v[2].key, "x");
	smp_listing_free(&l);

	const char *bad = "a.tfrecord 12x\n";
	ck_assert_int_eq(smp__parse_manifest(bad, strlen(bad), &l, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "line 1") != NULL, "message: %s", err);
	smp_listing_free(&l);
}
END_TEST

START_TEST(autoindex_json)
{
	const char *j =
	    "[\n"
	    "{ \"name\":\"sub\", \"type\":\"directory\", \"mtime\":\"Sun, 22 Nov 2026 01:00:00 "
	    "GMT\" },\n"
	    "{ \"name\":\"MANIFEST\", \"type\":\"file\", \"mtime\":\"x\", \"size\":5 },\n"
	    "{ \"name\":\"q\\\"uote \\u00e9.tfrecord\", \"type\":\"file\", \"mtime\":\"m\", "
	    "\"size\":42 },\n"
	    "{ \"name\":\"..\", \"type\":\"directory\", \"mtime\":\"m\" }\n"
	    "]\n";
	struct smp_listing l = {0};
	struct smp_buf dirs = {.max = 1 << 20};
	char err[256] = "";
	ck_assert_int_eq(smp__parse_autoindex(j, strlen(j), "", &l, &dirs, err, sizeof(err)), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0].key, "q\"uote \xc3\xa9.tfrecord");
	ck_assert_uint_eq(l.v[0].size, 42);
	ck_assert_str_eq(dirs.p, "sub/");
	ck_assert_uint_eq(dirs.len, 5);
	smp_listing_free(&l);
	free(dirs.p);

	const char *html = "<html>Index of /</html>";
	struct smp_buf d2 = {.max = 1 << 20};
	ck_assert_int_eq(smp__parse_autoindex(html, strlen(html), "", &l, &d2, err, sizeof(err)),
			 -EPROTO);
	ck_assert_msg(strstr(err, "autoindex_format json") != NULL, "message: %s", err);
	free(d2.p);
}
END_TEST

/* Parses one page; returns rc, err in err (256 bytes), the listing in *l. */
static int parse_page(const char *j, struct smp_listing *l, struct smp_buf *dirs, char *err)
{
	memset(l, 0, sizeof(*l));
	*dirs = (struct smp_buf){.max = 1 << 20};
	err[0] = '\0';
	return smp__parse_autoindex(j, strlen(j), "d/", l, dirs, err, 256);
}

/*
 * The fast path (http_list.c) decodes what jansson decodes: each page below
 * parsed with it and without gives the same return, message, keys, sizes,
 * etags and directories.  Pages of nginx's own shape and of others: blanks,
 * escapes, non-ASCII bytes, keys reordered, added, repeated or missing,
 * sizes of every form JSON allows or not, names nginx never writes.
 */
START_TEST(autoindex_fast_path_matches_jansson)
{
	static const char *const pages[] = {
	    "[\n{ \"name\":\"a.bin\", \"type\":\"file\", \"mtime\":\"Sun, 22 Nov 2026 01:00:00 "
	    "GMT\", "
	    "\"size\":4096 },\n{ \"name\":\"sub\", \"type\":\"directory\", \"mtime\":\"m\" },\n"
	    "{ \"name\":\"z\", \"type\":\"file\", \"mtime\":\"m\", \"size\":0 }\n]\n",
	    "[{\"name\": \"d00000\", \"type\": \"directory\", \"mtime\": \"x\"},\n"
	    " {\"name\" : \"o.bin\" , \"type\" : \"file\" , \"size\" : 17 }]",
	    "[{\"name\":\"q\\\"uote \\u00e9\",\"type\":\"file\",\"mtime\":\"m\",\"size\":1}]",
	    "[{\"name\":\"caf\xc3\xa9\",\"type\":\"file\",\"mtime\":\"m\",\"size\":2}]",
	    "[{\"name\":\"bad\xff\",\"type\":\"file\",\"mtime\":\"m\",\"size\":2}]",
	    "[{\"type\":\"file\",\"name\":\"rev\",\"size\":3}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":3,\"extra\":true}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":3,\"size\":4}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"mtime\":\"m\"}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":007}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":1.0}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":1e3}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":-1}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":999999999999999999}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":9999999999999999999}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":\"5\"}]",
	    "[{\"name\":\"x\",\"type\":\"socket\"},{\"name\":\"y\",\"type\":\"file\",\"size\":1}]",
	    "[{\"name\":\".\",\"type\":\"directory\"},{\"name\":\"..\",\"type\":\"file\",\"size\":"
	    "1},"
	    "{\"name\":\"a/"
	    "b\",\"type\":\"file\",\"size\":1},{\"name\":\"MANIFEST\",\"type\":\"file\","
	    "\"size\":1},{\"name\":\"n\\u0000ul\",\"type\":\"file\",\"size\":1}]",
	    "[{\"name\":\"\",\"type\":\"file\",\"size\":1}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":1}",
	    "[{\"name\":\"x\",\"type\":\"file\",\"size\":1},]",
	    "[{\"name\":\"x\"\n,\t\"type\":\"file\"\r,\"size\":12}]",
	    "[{\"name\":\"tab\tin\",\"type\":\"file\",\"size\":1}]",
	    "[{\"name\":\"x\",\"type\":\"file\",\"mtime\":5,\"size\":1}]",
	};
	/* the fast path takes nginx's shape, blanks included, and leaves the rest */
	static const char *const nginx[] = {
	    "{ \"name\":\"a.bin\", \"type\":\"file\", \"mtime\":\"m\", \"size\":4096 }",
	    "{\"name\": \"d\", \"type\": \"directory\", \"mtime\": \"x\"}",
	    "{ \"name\" : \"o\" , \"type\" : \"file\" , \"size\" : 0 }"};
	for (size_t k = 0; k < 3; k++)
		ck_assert_uint_eq(smp__autoindex_scan(nginx[k], strlen(nginx[k])),
				  strlen(nginx[k]));
	static const char *const other[] = {"{\"name\":\"q\\\"\",\"type\":\"file\",\"size\":1}",
					    "{\"type\":\"file\",\"name\":\"r\",\"size\":1}",
					    "{\"name\":\"x\",\"type\":\"file\",\"size\":1.5}",
					    "{\"name\":\"x\",\"type\":\"file\",\"size\":01}"};
	for (size_t k = 0; k < 4; k++)
		ck_assert_uint_eq(smp__autoindex_scan(other[k], strlen(other[k])), 0);
	for (size_t k = 0; k < sizeof(pages) / sizeof(pages[0]); k++) {
		struct smp_listing l[2];
		struct smp_buf d[2];
		char err[2][256];
		int rc[2];
		for (int fast = 0; fast < 2; fast++) {
			smp__autoindex_fast = fast;
			memset(&l[fast], 0, sizeof(l[fast]));
			d[fast] = (struct smp_buf){.max = 1 << 20};
			err[fast][0] = '\0';
			rc[fast] = smp__parse_autoindex(pages[k], strlen(pages[k]), "d/", &l[fast],
							&d[fast], err[fast], sizeof(err[fast]));
		}
		smp__autoindex_fast = true;
		ck_assert_msg(rc[0] == rc[1], "page %zu: rc %d (jansson) against %d (fast)", k,
			      rc[0], rc[1]);
		ck_assert_msg(!strcmp(err[0], err[1]), "page %zu: \"%s\" against \"%s\"", k, err[0],
			      err[1]);
		ck_assert_uint_eq(l[0].n, l[1].n);
		for (size_t i = 0; i < l[0].n; i++) {
			ck_assert_str_eq(l[0].v[i].key, l[1].v[i].key);
			ck_assert_uint_eq(l[0].v[i].size, l[1].v[i].size);
			ck_assert_str_eq(smp_object_etag(&l[0].v[i]), smp_object_etag(&l[1].v[i]));
		}
		ck_assert_uint_eq(d[0].len, d[1].len);
		ck_assert(d[0].len == 0 || !memcmp(d[0].p, d[1].p, d[0].len));
		for (int fast = 0; fast < 2; fast++) {
			smp_listing_free(&l[fast]);
			free(d[fast].p);
		}
	}
}
END_TEST

START_TEST(autoindex_malformed)
{
	static const char *bad[] = {
	    "[",							      /* no end */
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":1}",		      /* no ']' */
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":1},]",		      /* trailing comma */
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":1}] x",	      /* data after ']' */
	    "[] []",							      /* data after ']' */
	    "[{\"name\":\"a\" \"type\":\"file\"}]",			      /* missing ',' */
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":1} {}]",	      /* missing ',' */
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":01}]",		      /* leading zero */
	    "[{\"name\":\"a\",\"name\":\"b\",\"type\":\"file\",\"size\":1}]", /* duplicate key */
	    "[{\"name\":\"\\ud800\",\"type\":\"file\",\"size\":1}]",	      /* lone surrogate */
	    "[{\"name\":\"\xff\xfe\",\"type\":\"file\",\"size\":1}]",	      /* not UTF-8 */
	    "[{\"name\":\"a\\u0000b\",\"type\":\"file\",\"size\":1}]",	      /* NUL in a name */
	    "{\"name\":\"a\"}",						      /* not an array */
	    "[\"a\"]", /* an entry that is no object */
	};
	struct smp_listing l;
	struct smp_buf dirs;
	char err[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse_page(bad[i], &l, &dirs, err);
		ck_assert_msg(rc == -EPROTO, "case %zu (%s): rc %d, message: %s", i, bad[i], rc,
			      err);
		ck_assert_msg(err[0] && !strchr(err, '\n'), "case %zu: one-line message: %s", i,
			      err);
		ck_assert_msg(strncmp(err, "d/: ", 4) == 0, "case %zu: names the page: %s", i, err);
		smp_listing_free(&l);
		free(dirs.p);
	}
	/* an empty directory is fine */
	ck_assert_int_eq(parse_page(" [ ] \n", &l, &dirs, err), 0);
	ck_assert_uint_eq(l.n, 0);
	free(dirs.p);
}
END_TEST

START_TEST(autoindex_wrong_types)
{
	static const char *bad[] = {
	    "[[]]",
	    "[{\"name\":1,\"type\":\"file\",\"size\":1}]",
	    "[{\"name\":\"a\",\"type\":true,\"size\":1}]",
	    "[{\"name\":\"a\",\"size\":1}]",			   /* no type */
	    "[{\"type\":\"file\",\"size\":1}]",			   /* no name */
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":\"1\"}]", /* size as a string */
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":1.5}]",
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":-1}]",
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":null}]",
	    "[{\"name\":\"a\",\"type\":\"file\"}]", /* a file without size */
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":1,\"mtime\":5}]",
	    "[{\"name\":\"\",\"type\":\"file\",\"size\":1}]",
	};
	struct smp_listing l;
	struct smp_buf dirs;
	char err[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse_page(bad[i], &l, &dirs, err);
		ck_assert_msg(rc == -EPROTO, "case %zu (%s): rc %d, message: %s", i, bad[i], rc,
			      err);
		ck_assert_msg(strstr(err, "autoindex entry 0") != NULL, "case %zu: message: %s", i,
			      err);
		ck_assert_uint_eq(l.n, 0);
		smp_listing_free(&l);
		free(dirs.p);
	}
	/* types nginx may write besides file and directory are skipped, not refused */
	ck_assert_int_eq(
	    parse_page("[{\"name\":\"s\",\"type\":\"other\",\"mtime\":\"m\"}]", &l, &dirs, err), 0);
	ck_assert_uint_eq(l.n, 0);
	ck_assert_uint_eq(dirs.len, 0);
	free(dirs.p);
}
END_TEST

START_TEST(autoindex_huge_numbers)
{
	struct smp_listing l;
	struct smp_buf dirs;
	char err[256];
	/* the largest size JSON integers carry here */
	ck_assert_int_eq(
	    parse_page("[{\"name\":\"a\",\"type\":\"file\",\"size\":9223372036854775807}]", &l,
		       &dirs, err),
	    0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_uint_eq(l.v[0].size, 9223372036854775807ull);
	smp_listing_free(&l);
	free(dirs.p);
	static const char *bad[] = {
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":9223372036854775808}]",
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":18446744073709551616}]",
	    "[{\"name\":\"a\",\"type\":\"file\",\"size\":1e30}]",
	    ("[{\"name\":\"a\",\"type\":\"file\",\"size\":"
	     "99999999999999999999999999999999999999999999999999}]"), /* one string */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse_page(bad[i], &l, &dirs, err);
		ck_assert_msg(rc == -EPROTO, "case %zu: rc %d, message: %s", i, rc, err);
		ck_assert_uint_eq(l.n, 0);
		smp_listing_free(&l);
		free(dirs.p);
	}
}
END_TEST

START_TEST(autoindex_odd_names)
{
	const char *j =
	    "[\n"
	    "{\"name\":\"sp ace,\\\"q\\\\b\",\"type\":\"file\",\"size\":1},\n"
	    "{\"name\":\"esc\\/aped\",\"type\":\"file\",\"size\":7},\n"
	    "{\"name\":\"tab\\tnl\\nctl\\u0001\",\"type\":\"file\",\"size\":2},\n"
	    "{\"name\":\"caf\xc3\xa9 \\u00e9 \\ud83d\\ude00\",\"type\":\"file\",\"size\":3},\n"
	    "{\"name\":\"..\",\"type\":\"directory\"},\n"
	    "{\"name\":\".\",\"type\":\"file\",\"size\":4},\n"
	    "{\"name\":\"a/b\",\"type\":\"file\",\"size\":5},\n"
	    "{\"name\":\"../up\",\"type\":\"directory\"},\n"
	    "{\"name\":\"MANIFEST\",\"type\":\"file\",\"size\":6},\n"
	    "{\"name\":\"sub dir\",\"type\":\"directory\",\"mtime\":\"m\"}\n"
	    "]";
	struct smp_listing l;
	struct smp_buf dirs;
	char err[256];
	ck_assert_int_eq(parse_page(j, &l, &dirs, err), 0);
	/*
	 * "/" inside a name (escaped or not), ".", ".." are never walked;
	 * MANIFEST is an object below the top
	 */
	ck_assert_uint_eq(l.n, 4);
	ck_assert_str_eq(l.v[0].key, "d/sp ace,\"q\\b");
	ck_assert_uint_eq(l.v[0].size, 1);
	ck_assert_str_eq(l.v[1].key, "d/tab\tnl\nctl\x01");
	ck_assert_str_eq(l.v[2].key, "d/caf\xc3\xa9 \xc3\xa9 \xf0\x9f\x98\x80");
	ck_assert_str_eq(l.v[3].key, "d/MANIFEST");
	ck_assert_str_eq(dirs.p, "d/sub dir/");
	ck_assert_uint_eq(dirs.len, strlen("d/sub dir/") + 1);
	smp_listing_free(&l);
	free(dirs.p);

	/* a name of SMP_KEY_MAX bytes is a key; one byte more is refused */
	size_t cap = SMP_KEY_MAX + 200;
	char *big = malloc(cap), *name = malloc(SMP_KEY_MAX + 2);
	memset(name, 'n', SMP_KEY_MAX + 1);
	name[SMP_KEY_MAX + 1] = '\0';
	snprintf(big, cap, "[{\"name\":\"%s\",\"type\":\"file\",\"size\":1}]", name);
	ck_assert_int_eq(parse_page(big, &l, &dirs, err), -EPROTO);
	ck_assert_msg(strstr(err, "1025 bytes") != NULL, "message: %s", err);
	free(dirs.p);
	name[SMP_KEY_MAX] = '\0';
	memset(&l, 0, sizeof(l));
	dirs = (struct smp_buf){.max = 1 << 20};
	snprintf(big, cap, "[{\"name\":\"%s\",\"type\":\"file\",\"size\":1}]", name);
	ck_assert_int_eq(smp__parse_autoindex(big, strlen(big), "", &l, &dirs, err, 256), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_uint_eq(strlen(l.v[0].key), SMP_KEY_MAX);
	smp_listing_free(&l);
	free(dirs.p);
	free(big);
	free(name);
}
END_TEST

START_TEST(autoindex_caps)
{
	struct smp_listing l;
	struct smp_buf dirs;
	char err[256];
	/* one entry larger than SMP_AUTOINDEX_ENTRY_CAP: refused before jansson holds it */
	size_t n = SMP_AUTOINDEX_ENTRY_CAP + 100;
	char *j = malloc(n + 64);
	int k = snprintf(j, n + 64, "[{\"name\":\"a\",\"type\":\"file\",\"size\":1,\"x\":\"");
	memset(j + k, 'x', n - (size_t)k);
	strcpy(j + n, "\"}]");
	ck_assert_int_eq(parse_page(j, &l, &dirs, err), -EFBIG);
	ck_assert_msg(strstr(err, "larger than") != NULL, "message: %s", err);
	free(dirs.p);
	/* a page over SMP_LIST_BODY_CAP is refused before parsing */
	memset(&l, 0, sizeof(l));
	dirs = (struct smp_buf){.max = 1 << 20};
	ck_assert_int_eq(
	    smp__parse_autoindex("[]", SMP_LIST_BODY_CAP + 1, "", &l, &dirs, err, sizeof(err)),
	    -EFBIG);
	free(j);
	/* directories past dirs->max */
	const char *d = "[{\"name\":\"aaaa\",\"type\":\"directory\"},"
			"{\"name\":\"bbbb\",\"type\":\"directory\"}]";
	dirs = (struct smp_buf){.max = 11}; /* "aaaa/" fits, "bbbb/" does not */
	ck_assert_int_eq(smp__parse_autoindex(d, strlen(d), "", &l, &dirs, err, sizeof(err)),
			 -E2BIG);
	ck_assert_msg(strstr(err, "too many directories") != NULL, "message: %s", err);
	free(dirs.p);
}
END_TEST

START_TEST(retry_policy)
{
	ck_assert(!smp__status_retryable(400));
	ck_assert(!smp__status_retryable(403));
	ck_assert(!smp__status_retryable(404));
	ck_assert(smp__status_retryable(408));
	ck_assert(smp__status_retryable(429));
	ck_assert(smp__status_retryable(500));
	ck_assert(smp__status_retryable(503));
	uint64_t rng = 42;
	for (uint32_t a = 0; a < 30; a++) {
		uint64_t cap = SMP_BACKOFF_BASE_MS << (a < 10 ? a : 10);
		if (cap > SMP_BACKOFF_MAX_MS)
			cap = SMP_BACKOFF_MAX_MS;
		for (int i = 0; i < 50; i++) {
			uint64_t d = smp__backoff_ms(a, 0, &rng);
			ck_assert_uint_ge(d, cap / 2);
			ck_assert_uint_le(d, cap);
		}
	}
	ck_assert_uint_ge(smp__backoff_ms(0, 3000, &rng), 3000);
	ck_assert_uint_le(smp__backoff_ms(0, 3600000, &rng), SMP_RETRY_AFTER_MAX_MS);
	ck_assert_uint_eq(smp__retry_after_header("Retry-After: 2\r\n", 16), 2000);
	ck_assert_uint_eq(smp__retry_after_header("retry-after:7\r\n", 15), 7000);
	ck_assert_uint_eq(smp__retry_after_header("X-Other: 2\r\n", 12), 0);
}
END_TEST

START_TEST(key_hash_stable)
{
	/* FNV-1a 64: the rank split must not change between releases */
	ck_assert_uint_eq(smp_key_hash("abc"),
			  0xe71fa2190541574bull /* FNV-1a 64 reference value */);
	ck_assert_uint_eq(smp_key_hash(""), 0xcbf29ce484222325ull);
}
END_TEST

/*
 * A listing keeps its share only: of 64 keys and their sidecars, rank r of
 * 3 holds exactly the keys whose hash % 3 is r, each with its "x.idx"
 * (hashed as "x"); every rank counts all 64 keys seen, no sidecar; the
 * three shares are disjoint and cover the keys; a bad key fails in or out
 * of the share.
 */
START_TEST(listing_share)
{
	size_t total = 0;
	for (uint32_t rank = 0; rank < 3; rank++) {
		struct smp_listing l = {.rank = rank, .world_size = 3};
		size_t want = 0;
		for (int i = 0; i < 64; i++) {
			char key[32], idx[40];
			snprintf(key, sizeof(key), "d%02d/obj-%03d.tfrecord", i % 7, i);
			snprintf(idx, sizeof(idx), "%s.idx", key);
			ck_assert_int_eq(smp__listing_add(&l, key, strlen(key), 10, NULL), 0);
			ck_assert_int_eq(smp__listing_add(&l, idx, strlen(idx), 1, NULL), 0);
			want += smp_key_hash(key) % 3 == rank;
		}
		ck_assert_int_eq(smp__listing_add(&l, "bad\0key", 7, 1, NULL), -EINVAL);
		ck_assert_uint_eq(l.seen, 64);
		ck_assert_uint_eq(l.n, 2 * want);
		for (size_t i = 0; i < l.n; i++) {
			const char *k = l.v[i].key;
			size_t n = strlen(k);
			if (smp_key_is_sidecar(k, n))
				n -= 4;
			char obj[40];
			memcpy(obj, k, n);
			obj[n] = '\0';
			ck_assert_uint_eq(smp_key_hash(obj) % 3, rank);
		}
		total += want;
		smp_listing_free(&l);
	}
	ck_assert_uint_eq(total, 64);
	/* world_size 0 or 1: everything */
	struct smp_listing all = {.rank = 0, .world_size = 1};
	ck_assert_int_eq(smp__listing_add(&all, "x", 1, 1, NULL), 0);
	ck_assert_int_eq(smp__listing_add(&all, "y.idx", 5, 1, NULL), 0);
	ck_assert_uint_eq(all.n, 2);
	ck_assert_uint_eq(all.seen, 1);
	smp_listing_free(&all);
}
END_TEST

static char tmpdir[256];

static void mk_tmp(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rc-test-source-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	fchmod(fd, mode);
	close(fd);
}

START_TEST(credentials_file_mode)
{
	char path[512], err[512] = "";
	struct smp_source *s = NULL;
	mk_tmp();
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	snprintf(path, sizeof(path), "%s/credentials", tmpdir);
	write_file(
	    path, "[default]\naws_access_key_id = AKIDTEST\naws_secret_access_key = SECRETSECRET\n",
	    0644);
	struct smp_source_opts o = {
	    .url = "s3://b/p/", .endpoint = "http://127.0.0.1:9", .credentials_file = path};
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), -EACCES);
	ck_assert_msg(strstr(err, "chmod 600") != NULL, "message: %s", err);
	ck_assert_msg(strstr(err, "SECRETSECRET") == NULL, "secret leaked: %s", err);
	chmod(path, 0600);
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), 0);
	ck_assert_str_eq(s->s3.access_key, "AKIDTEST");
	ck_assert_str_eq(s->s3.secret_key, "SECRETSECRET");
	smp_source_free(s);
	/* a named profile */
	write_file(
	    path,
	    "[default]\naws_access_key_id = A\naws_secret_access_key = B\n"
	    "[train]\naws_access_key_id = C\naws_secret_access_key = D\naws_session_token = T\n",
	    0600);
	o.profile = "train";
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), 0);
	ck_assert_str_eq(s->s3.access_key, "C");
	ck_assert_str_eq(s->s3.session_token, "T");
	smp_source_free(s);
	rm_tmp();
}
END_TEST

START_TEST(bad_urls)
{
	char err[512] = "";
	struct smp_source *s = NULL;
	struct smp_source_opts o = {.url = "ftp://x/"};
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "s3://bucket/prefix/") != NULL, "message: %s", err);
	o.url = "file://relative/";
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), -EINVAL);
	o.url = "s3:///nobucket";
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(s3_urls_and_headers)
{
	char err[512] = "", url[1024];
	struct smp_source *s = NULL;
	setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SECRETEXAMPLEKEY", 1);
	setenv("AWS_SESSION_TOKEN", "TOKEN+/=", 1);
	/* AWS: virtual-hosted */
	struct smp_source_opts o = {.url = "s3://bkt/train/", .region = "eu-west-1"};
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), 0);
	ck_assert_int_eq(smp_source_url(s, "a b/c+d=%\xc3\xa9", url, sizeof(url)), 0);
	ck_assert_str_eq(url,
			 "https://bkt.s3.eu-west-1.amazonaws.com/train/a%20b/c%2Bd%3D%25%C3%A9");
	struct curl_slist *h = NULL;
	ck_assert_int_eq(smp__s3_sign(&s->s3, "/train/x", "", "bytes=0-9", &h, err, sizeof(err)),
			 0);
	int seen = 0;
	for (struct curl_slist *i = h; i; i = i->next) {
		ck_assert_msg(strstr(i->data, "SECRETEXAMPLEKEY") == NULL, "secret in a header: %s",
			      i->data);
		if (!strncmp(i->data, "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/",
			     55)) {
			ck_assert_msg(
			    strstr(i->data, "/eu-west-1/s3/aws4_request, SignedHeaders=host;range;"
					    "x-amz-content-sha256;x-amz-date;x-amz-security-token, "
					    "Signature=") != NULL,
			    "%s", i->data);
			seen |= 1;
		}
		if (!strcmp(i->data, "Host: bkt.s3.eu-west-1.amazonaws.com"))
			seen |= 2;
		if (!strcmp(i->data, "Range: bytes=0-9"))
			seen |= 4;
		if (!strcmp(i->data, "x-amz-security-token: TOKEN+/="))
			seen |= 8;
	}
	ck_assert_int_eq(seen, 15);
	curl_slist_free_all(h);
	smp_source_free(s);
	/* an S3-compatible endpoint: path-style */
	o.endpoint = "http://127.0.0.1:9000/";
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), 0);
	ck_assert_int_eq(smp_source_url(s, "k", url, sizeof(url)), 0);
	ck_assert_str_eq(url, "http://127.0.0.1:9000/bkt/train/k");
	smp_source_free(s);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
}
END_TEST

/* ---- file:// listing and the transfer engine ---- */

struct sink {
	char buf[4096];
	size_t len;
	int fail_once_at; /* answer -EAGAIN once when len reaches this */
	int restarts, done, rc;
	enum smp_xfer_end how;
};

static int s_data(void *ctx, const void *p, size_t n)
{
	struct sink *k = ctx;
	if (k->fail_once_at >= 0 && k->len + n > (size_t)k->fail_once_at) {
		size_t take = (size_t)k->fail_once_at - k->len;
		memcpy(k->buf + k->len, p, take);
		k->len += take;
		k->fail_once_at = -1;
		return -EAGAIN;
	}
	memcpy(k->buf + k->len, p, n);
	k->len += n;
	return 0;
}

static int s_end(void *ctx)
{
	return 0;
}

static uint64_t s_restart(void *ctx, bool final)
{
	struct sink *k = ctx;
	k->restarts++;
	return k->len; /* resume where the good bytes end */
}

static void s_done(void *ctx, int rc, enum smp_xfer_end how, const char *msg)
{
	struct sink *k = ctx;
	k->done++;
	k->rc = rc;
	k->how = how;
}

static const struct smp_xfer_ops sink_ops = {s_data, s_end, s_restart, s_done};

START_TEST(file_list_and_fetch)
{
	char path[512], err[512] = "", url[600];
	mk_tmp();
	snprintf(path, sizeof(path), "%s/sub dir", tmpdir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/sub dir/b%%2B c", tmpdir);
	write_file(path, "0123456789abcdefghij", 0644);
	snprintf(path, sizeof(path), "%s/a", tmpdir);
	write_file(path, "hello", 0644);
	snprintf(url, sizeof(url), "file://%s/", tmpdir);

	struct smp_stats st = {0};
	struct smp_source_opts o = {.url = url, .timeout_ms = 5000, .retries = 3, .stats = &st};
	struct smp_source *s = NULL;
	ck_assert_int_eq(smp_source_open(&s, &o, err, sizeof(err)), 0);
	struct smp_listing l;
	ck_assert_int_eq(smp_source_list(s, &l, err, sizeof(err)), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.v[0].key, "a");
	ck_assert_str_eq(l.v[1].key, "sub dir/b%2B c");
	ck_assert_uint_eq(l.v[1].size, 20);

	struct smp_fetch *f = NULL;
	ck_assert_int_eq(smp_fetch_new(&f, s, 2, 3, 1, err, sizeof(err)), 0);
	struct sink a = {.fail_once_at = 7}, b = {.fail_once_at = -1};
	struct smp_fetch_req ra = {.key = l.v[1].key, .size = 20, .ops = &sink_ops, .ctx = &a};
	struct smp_fetch_req rb = {
	    .key = l.v[1].key, .off = 5, .len = 4, .size = 20, .ops = &sink_ops, .ctx = &b};
	ck_assert_int_eq(smp_fetch_add(f, &ra), 0);
	ck_assert_int_eq(smp_fetch_add(f, &rb), 0);
	for (int i = 0; i < 200 && smp_fetch_pending(f); i++)
		ck_assert_int_eq(smp_fetch_step(f, 100), 0);
	ck_assert_int_eq(a.done, 1);
	ck_assert_int_eq(a.rc, 0);
	ck_assert_int_eq(a.how, SMP_XFER_ENDED);
	ck_assert_int_eq(a.restarts, 1);
	ck_assert_uint_eq(a.len, 20);
	ck_assert(memcmp(a.buf, "0123456789abcdefghij", 20) == 0);
	ck_assert_int_eq(b.rc, 0);
	ck_assert_uint_eq(b.len, 4);
	ck_assert(memcmp(b.buf, "5678", 4) == 0);
	ck_assert_uint_eq(SMP_STAT_GET(&st, retries), 1);

	/* a missing object is tried once and reported */
	struct sink c = {.fail_once_at = -1};
	struct smp_fetch_req rc = {.key = "nope", .ops = &sink_ops, .ctx = &c};
	ck_assert_int_eq(smp_fetch_add(f, &rc), 0);
	for (int i = 0; i < 200 && smp_fetch_pending(f); i++)
		ck_assert_int_eq(smp_fetch_step(f, 100), 0);
	ck_assert_int_eq(c.done, 1);
	ck_assert_int_eq(c.rc, -ENOENT);
	ck_assert_int_eq(c.how, SMP_XFER_REFUSED); /* not retried, not resumed: failed_objects */
	ck_assert_int_eq(c.restarts, 0);

	smp_fetch_free(f);
	smp_listing_free(&l);
	smp_source_free(s);
	rm_tmp();
}
END_TEST

/*
 * listing.c's string blocks: 20,000 objects fill several blocks (the first
 * of 4 KiB, then doubling), an etag longer than the largest block gets a
 * block of its own, and sorting with duplicates keeps every kept object's
 * strings where they were.
 */
START_TEST(listing_blocks)
{
	struct smp_listing l = {0};
	char key[64], etag[32];
	for (int i = 0; i < 20000; i++) {
		int kl = snprintf(key, sizeof(key), "d%03d/o%09d.bin", i % 7, 19999 - i);
		snprintf(etag, sizeof(etag), "m-%d", i);
		ck_assert_int_eq(smp__listing_add(&l, key, (size_t)kl, (uint64_t)i, etag), 0);
	}
	ck_assert_int_eq(smp__listing_add(&l, key, strlen(key), 1, NULL), 0); /* a duplicate */
	size_t big = (size_t)3 << 20;
	char *long_etag = malloc(big + 1);
	ck_assert_ptr_nonnull(long_etag);
	memset(long_etag, 'e', big);
	long_etag[big] = '\0';
	ck_assert_int_eq(smp__listing_add(&l, "zz", 2, 7, long_etag), 0);
	ck_assert_int_eq(smp__listing_add(&l, "", 0, 7, NULL), -EINVAL);
	ck_assert_uint_eq(l.n, 20002);
	smp__listing_sort_unique(&l);
	ck_assert_uint_eq(l.n, 20001);
	for (size_t i = 0; i + 1 < l.n; i++) {
		ck_assert_int_lt(strcmp(l.v[i].key, l.v[i + 1].key), 0);
		int obj, dir;
		ck_assert_int_eq(sscanf(l.v[i].key, "d%3d/o%9d.bin", &dir, &obj), 2);
		int idx = 19999 - obj;
		ck_assert_int_eq(dir, idx % 7);
		snprintf(etag, sizeof(etag), "m-%d", idx);
		ck_assert_str_eq(smp_object_etag(&l.v[i]), etag);
	}
	ck_assert_str_eq(l.v[l.n - 1].key, "zz");
	ck_assert_uint_eq(strlen(smp_object_etag(&l.v[l.n - 1])), big);
	free(long_etag);
	smp_listing_free(&l);
	ck_assert_uint_eq(l.n, 0);
	ck_assert_ptr_null(l.strs.blk);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sampler-source");
	struct {
		const char *name;
		const TTest *fn;
	} tc[] = {
	    {"manifest", manifest_lines},
	    {"listing-blocks", listing_blocks},
	    {"autoindex-json", autoindex_json},
	    {"autoindex-fast-path", autoindex_fast_path_matches_jansson},
	    {"autoindex-malformed", autoindex_malformed},
	    {"autoindex-wrong-types", autoindex_wrong_types},
	    {"autoindex-huge-numbers", autoindex_huge_numbers},
	    {"autoindex-odd-names", autoindex_odd_names},
	    {"autoindex-caps", autoindex_caps},
	    {"retry-policy", retry_policy},
	    {"key-hash", key_hash_stable},
	    {"listing-share", listing_share},
	    {"credentials-file", credentials_file_mode},
	    {"bad-urls", bad_urls},
	    {"s3-urls-and-headers", s3_urls_and_headers},
	    {"file-list-fetch-resume", file_list_and_fetch},
	};
	for (size_t i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
		TCase *t = tcase_create(tc[i].name);
		tcase_add_test(t, tc[i].fn);
		suite_add_tcase(s, t);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
