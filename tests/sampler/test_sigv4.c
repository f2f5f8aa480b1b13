/*
 * test_sigv4.c - SigV4 known answers and S3 URI encoding (sampler/sigv4.c).
 *
 * The known answer is AWS's published example "GET Object" from the S3 API
 * reference (Signature Version 4, header-based auth): the code under test is
 * the code that signs every S3 request of the sampler.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "sampler/s3_i.h"
#include "sampler/sigv4.h"

START_TEST(aws_get_object_example)
{
	struct smp_sigv4_req r = {
	    .method = "GET",
	    .canonical_uri = "/test.txt",
	    .canonical_query = "",
	    .host = "examplebucket.s3.amazonaws.com",
	    .range = "bytes=0-9",
	    .amz_date = "20130524T000000Z",
	    .region = "us-east-1",
	    .access_key = "AKIAIOSFODNN7EXAMPLE",
	    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	};
	char sig[65], sh[128];
	ck_assert_int_eq(smp_sigv4_sign(&r, sig, sh, sizeof(sh)), 0);
	ck_assert_str_eq(sh, "host;range;x-amz-content-sha256;x-amz-date");
	ck_assert_str_eq(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}
END_TEST

/* AWS's ListObjects example (GET /?max-keys=2&prefix=J, no Range). */
START_TEST(aws_list_objects_example)
{
	struct smp_sigv4_req r = {
	    .method = "GET",
	    .canonical_uri = "/",
	    .canonical_query = "max-keys=2&prefix=J",
	    .host = "examplebucket.s3.amazonaws.com",
	    .amz_date = "20130524T000000Z",
	    .region = "us-east-1",
	    .access_key = "AKIAIOSFODNN7EXAMPLE",
	    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	};
	char sig[65], sh[128];
	ck_assert_int_eq(smp_sigv4_sign(&r, sig, sh, sizeof(sh)), 0);
	ck_assert_str_eq(sh, "host;x-amz-content-sha256;x-amz-date");
	ck_assert_str_eq(sig, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}
END_TEST

START_TEST(token_changes_signature)
{
	struct smp_sigv4_req r = {
	    .method = "GET",
	    .canonical_uri = "/test.txt",
	    .canonical_query = "",
	    .host = "examplebucket.s3.amazonaws.com",
	    .amz_date = "20130524T000000Z",
	    .region = "us-east-1",
	    .access_key = "AKIAIOSFODNN7EXAMPLE",
	    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	};
	char a[65], b[65], sh[128];
	ck_assert_int_eq(smp_sigv4_sign(&r, a, sh, sizeof(sh)), 0);
	r.session_token = "TOKEN";
	ck_assert_int_eq(smp_sigv4_sign(&r, b, sh, sizeof(sh)), 0);
	ck_assert_str_eq(sh, "host;x-amz-content-sha256;x-amz-date;x-amz-security-token");
	ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(uri_encode_rules)
{
	char out[256];
	ck_assert_int_eq(smp_uri_encode("a b+c=d%e/f~g_h-i.j", 1, out, sizeof(out)), 27);
	ck_assert_str_eq(out, "a%20b%2Bc%3Dd%25e/f~g_h-i.j");
	smp_uri_encode("a/b", 0, out, sizeof(out));
	ck_assert_str_eq(out, "a%2Fb");
	smp_uri_encode("\xc3\xa9t\xc3\xa9", 1, out, sizeof(out));
	ck_assert_str_eq(out, "%C3%A9t%C3%A9");
	ck_assert_int_eq(smp_uri_encode("abcdef", 1, out, 4), -ENAMETOOLONG);
}
END_TEST

/*
 * Keys of a ListObjectsV2 answer with encoding-type=url, read as botocore's
 * unquote_plus reads them (s3.c smp__s3_url_decode).
 */
START_TEST(list_url_decoding)
{
	char out[64];
	ck_assert_int_eq(smp__s3_url_decode("ds/ctl%01a%2Bb+c", out, sizeof(out)), 12);
	ck_assert_str_eq(out, "ds/ctl\x01"
			      "a+b c");
	ck_assert_int_eq(smp__s3_url_decode("gpj.%E2%80%aeexe", out, sizeof(out)), 10);
	ck_assert_str_eq(out, "gpj.\xe2\x80\xae"
			      "exe");
	ck_assert_int_eq(smp__s3_url_decode("a%00b", out, sizeof(out)), 3); /* NUL: length says */
	ck_assert_int_eq(out[1], 0);
	ck_assert_int_eq(smp__s3_url_decode("100%", out, sizeof(out)), -EPROTO);
	ck_assert_int_eq(smp__s3_url_decode("%4", out, sizeof(out)), -EPROTO);
	ck_assert_int_eq(smp__s3_url_decode("%G1", out, sizeof(out)), -EPROTO);
	ck_assert_int_eq(smp__s3_url_decode("abcdef", out, 4), -ENAMETOOLONG);
	/* what smp_uri_encode writes decodes back */
	char enc[128];
	ck_assert_int_gt(smp_uri_encode("k/\x01 +=%\xe2\x80\xae~", 1, enc, sizeof(enc)), 0);
	ck_assert_int_eq(smp__s3_url_decode(enc, out, sizeof(out)), 11);
	ck_assert_str_eq(out, "k/\x01 +=%\xe2\x80\xae~");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sampler-sigv4");
	TCase *t;
	t = tcase_create("aws-get-object-example");
	tcase_add_test(t, aws_get_object_example);
	suite_add_tcase(s, t);
	t = tcase_create("aws-list-objects-example");
	tcase_add_test(t, aws_list_objects_example);
	suite_add_tcase(s, t);
	t = tcase_create("session-token");
	tcase_add_test(t, token_changes_signature);
	suite_add_tcase(s, t);
	t = tcase_create("uri-encode");
	tcase_add_test(t, uri_encode_rules);
	suite_add_tcase(s, t);
	t = tcase_create("list-url-decoding");
	tcase_add_test(t, list_url_decoding);
	suite_add_tcase(s, t);
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
