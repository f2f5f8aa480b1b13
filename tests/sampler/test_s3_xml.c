/*
 * test_s3_xml.c - one ListObjectsV2 page parsed by sampler/s3_xml.c,
 * without a server: the fields s3.c's listing loop relies on, keys outside
 * the prefix asked for (skipped, not cut), over-long elements, an error
 * document, and malformed XML.  The same bytes seed fuzz-s3-xml
 * (tests/sampler/seeds/s3_xml).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/listing_i.h"
#include "sampler/s3_xml_i.h"

static struct smp_s3_page pg;
static char err[256];

static int parse(const char *body, const char *prefix, struct smp_listing *l)
{
	err[0] = '\0';
	return smp__s3_parse_page(body, strlen(body), prefix, l, &pg, err, sizeof(err));
}

START_TEST(page_fields_and_prefix)
{
	const char *body =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	    "<Name>bucket</Name><Prefix>train/</Prefix><IsTruncated>true</IsTruncated>"
	    "<NextContinuationToken>tok/en=</NextContinuationToken>"
	    "<Contents><Key>train/</Key><Size>0</Size></Contents>"
	    "<Contents><Key>train/part-0.tfrecord</Key><ETag>&quot;9b2c&quot;</ETag>"
	    "<Size>1048576</Size></Contents>"
	    "<Contents><Key>train/sub/a b&amp;c</Key><Size>12</Size></Contents>"
	    "<Contents><Key>train/dir/</Key><Size>0</Size></Contents>"
	    "<Contents><Key>other/outside.tfrecord</Key><Size>5</Size></Contents>"
	    "<Contents><Key>trainXpart</Key><Size>6</Size></Contents>"
	    "</ListBucketResult>";
	struct smp_listing l = {0};

	ck_assert_int_eq(parse(body, "train/", &l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.v[0].key, "part-0.tfrecord");
	ck_assert_uint_eq(l.v[0].size, 1048576);
	ck_assert_str_eq(l.v[0].etag, "\"9b2c\"");
	ck_assert_str_eq(l.v[1].key, "sub/a b&c");
	ck_assert_uint_eq(l.v[1].size, 12);
	ck_assert(pg.truncated);
	ck_assert_str_eq(pg.token, "tok/en=");
	ck_assert_str_eq(pg.code, "");
	smp_listing_free(&l);

	/* no prefix: every key but the two ending in / */
	ck_assert_int_eq(parse(body, "", &l), 0);
	ck_assert_uint_eq(l.n, 4);
	smp_listing_free(&l);
}
END_TEST

START_TEST(long_key_skipped_long_token_capped)
{
	size_t n = SMP_S3_TEXT_CAP + 100;
	char *body = malloc(2 * n + 512);
	struct smp_listing l = {0};
	int off = sprintf(body, "<L><Contents><Key>");
	memset(body + off, 'k', n);
	off += (int)n;
	off += sprintf(body + off, "</Key></Contents><Contents><Key>ok</Key></Contents>"
				   "<NextContinuationToken>");
	memset(body + off, 't', n);
	off += (int)n;
	sprintf(body + off, "</NextContinuationToken></L>");

	ck_assert_int_eq(parse(body, "", &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0].key, "ok");
	ck_assert_uint_le(strlen(pg.token), SMP_S3_TEXT_CAP);
	smp_listing_free(&l);
	free(body);
}
END_TEST

START_TEST(error_document_and_bad_xml)
{
	struct smp_listing l = {0};

	ck_assert_int_eq(parse("<?xml version=\"1.0\"?>\n<Error><Code>AccessDenied</Code>"
			       "<Message>Access Denied</Message></Error>",
			       "", &l),
			 0);
	ck_assert_str_eq(pg.code, "AccessDenied");
	ck_assert_uint_eq(l.n, 0);

	ck_assert_int_eq(parse("<L>\n<Contents><Key>a</Contents>", "", &l), -EPROTO);
	ck_assert_msg(strstr(err, "bad XML at line 2") != NULL, "message: %s", err);
	smp_listing_free(&l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sampler-s3-xml");
	TCase *tc = tcase_create("page");
	tcase_add_test(tc, page_fields_and_prefix);
	tcase_add_test(tc, long_key_skipped_long_token_capped);
	tcase_add_test(tc, error_document_and_bad_xml);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
