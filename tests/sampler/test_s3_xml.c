/*
 * test_s3_xml.c - one ListObjectsV2 page parsed by sampler/s3_xml.c (the
 * parser s3.c's listing loop calls), without a server: the fields the loop
 * relies on, keys decoded when the answer says EncodingType url, keys
 * skipped and counted (outside the prefix asked for, not cut; a bad
 * %-escape; NUL; over-long; "directory" markers), an answer for another
 * prefix, an error document's Code and Message, and malformed XML.  The
 * same bytes seed fuzz-s3-xml (tests/sampler/seeds/s3_xml).
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
	ck_assert_str_eq(smp_object_etag(&l.v[0]), "\"9b2c\"");
	ck_assert_str_eq(l.v[1].key, "sub/a b&c");
	ck_assert_uint_eq(l.v[1].size, 12);
	ck_assert(pg.truncated);
	ck_assert_str_eq(pg.token, "tok/en=");
	ck_assert_str_eq(pg.code, "");
	/* no EncodingType: keys as written; the prefix itself is not counted */
	ck_assert_uint_eq(pg.skipped.outside, 2);
	ck_assert_uint_eq(pg.skipped.dirs, 1);
	ck_assert_uint_eq(pg.skipped.bad_escape + pg.skipped.nul + pg.skipped.overlong, 0);
	smp_listing_free(&l);

	/* the answer says <Prefix>train/</Prefix>: for "" it answers another prefix */
	ck_assert_int_eq(parse(body, "", &l), -EPROTO);
	ck_assert_uint_eq(l.n, 0);
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
	ck_assert_uint_eq(pg.skipped.overlong, 1);
	smp_listing_free(&l);
	free(body);
}
END_TEST

/* A page as S3 sends it for encoding-type=url (what s3.c asks for). */
static const char url_page[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>bucket</Name><Prefix>ds%2Ftrain%2F</Prefix><KeyCount>7</KeyCount>"
    "<IsTruncated>false</IsTruncated>"
    "<Contents><Key>ds/train/ctl%01a%2Bb+c</Key><Size>3</Size>"
    "<ETag>&quot;e1&quot;</ETag></Contents>"
    "<Contents><Key>ds%2Ftrain%2Fgpj.%E2%80%aeexe</Key><Size>4</Size></Contents>"
    "<Contents><Key>ds/train/bad%G1</Key><Size>5</Size></Contents>"
    "<Contents><Key>ds/train/100%</Key><Size>5</Size></Contents>"
    "<Contents><Key>ds/train/a%00b</Key><Size>6</Size></Contents>"
    "<Contents><Key>ds/other%2Fx</Key><Size>7</Size></Contents>"
    "<Contents><Key>ds/train/sub%2F</Key><Size>0</Size></Contents>"
    "<EncodingType>url</EncodingType></ListBucketResult>";

START_TEST(encoding_type_url_decoded_and_skips_counted)
{
	struct smp_listing l = {0};

	ck_assert_int_eq(parse(url_page, "ds/train/", &l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.v[0].key, "ctl\001a+b c");
	ck_assert_uint_eq(l.v[0].size, 3);
	ck_assert_str_eq(smp_object_etag(&l.v[0]), "\"e1\"");
	ck_assert_str_eq(l.v[1].key, "gpj.\xe2\x80\xae"
				     "exe");
	ck_assert_uint_eq(l.v[1].size, 4);
	ck_assert_uint_eq(pg.skipped.bad_escape, 2);
	ck_assert_uint_eq(pg.skipped.nul, 1);
	ck_assert_uint_eq(pg.skipped.outside, 1);
	ck_assert_uint_eq(pg.skipped.dirs, 1);
	ck_assert_uint_eq(pg.skipped.overlong, 0);
	ck_assert(!pg.truncated);
	smp_listing_free(&l);
}
END_TEST

START_TEST(decoded_key_over_key_max_skipped)
{
	char *body = malloc(3 * (SMP_KEY_MAX + 1) + 256), *p = body;
	struct smp_listing l = {0};

	/* 3 * 1025 bytes as written, SMP_KEY_MAX + 1 decoded: under the text cap */
	p += sprintf(p, "<L><EncodingType>url</EncodingType><Contents><Key>");
	for (int i = 0; i < SMP_KEY_MAX + 1; i++)
		p += sprintf(p, "%%41");
	sprintf(p, "</Key></Contents><Contents><Key>%%41</Key></Contents></L>");

	ck_assert_int_eq(parse(body, "", &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0].key, "A");
	ck_assert_uint_eq(pg.skipped.overlong, 1);
	smp_listing_free(&l);
	free(body);
}
END_TEST

START_TEST(prefix_of_the_answer_checked)
{
	struct smp_listing l = {0};

	/* decoded, "ds%2Ftrain%2F" is the prefix asked for (above); another is not */
	ck_assert_int_eq(parse(url_page, "ds/", &l), -EPROTO);
	ck_assert_msg(strstr(err, "another prefix") != NULL, "message: %s", err);
	ck_assert_uint_eq(l.n, 0);

	/* without EncodingType url the same prefix is taken as written */
	ck_assert_int_eq(parse("<L><Prefix>ds%2Ftrain%2F</Prefix>"
			       "<Contents><Key>ds/train/x</Key></Contents></L>",
			       "ds/train/", &l),
			 -EPROTO);
	ck_assert_uint_eq(l.n, 0);

	/* a bad escape in the answer's prefix is no match either */
	ck_assert_int_eq(parse("<L><Prefix>ds%2</Prefix><EncodingType>url</EncodingType>"
			       "<Contents><Key>ds%2x</Key></Contents></L>",
			       "ds%2", &l),
			 -EPROTO);
	ck_assert_uint_eq(l.n, 0);

	ck_assert_int_eq(parse("<L><Prefix>ds/train/</Prefix>"
			       "<Contents><Key>ds/train/x</Key></Contents></L>",
			       "ds/train/", &l),
			 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0].key, "x");
	smp_listing_free(&l);
}
END_TEST

START_TEST(error_document_and_bad_xml)
{
	struct smp_listing l = {0};

	ck_assert_int_eq(parse("<?xml version=\"1.0\"?>\n<Error><Code>AccessDenied</Code>"
			       "<Message>Access Denied</Message></Error>",
			       "", &l),
			 -EIO);
	ck_assert_str_eq(pg.code, "AccessDenied");
	ck_assert_str_eq(pg.message, "Access Denied");
	ck_assert_msg(strstr(err, "error AccessDenied") != NULL, "message: %s", err);
	ck_assert_uint_eq(l.n, 0);

	/* an error document's keys are not listed; the message is kept as sent */
	ck_assert_int_eq(parse("<Error><Code>SlowDown</Code><Message>m&#9;n</Message>"
			       "<Contents><Key>k</Key></Contents></Error>",
			       "", &l),
			 -EIO);
	ck_assert_str_eq(pg.code, "SlowDown");
	ck_assert_str_eq(pg.message, "m\tn");
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
	tcase_add_test(tc, encoding_type_url_decoded_and_skips_counted);
	tcase_add_test(tc, decoded_key_over_key_max_skipped);
	tcase_add_test(tc, prefix_of_the_answer_checked);
	tcase_add_test(tc, error_document_and_bad_xml);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
