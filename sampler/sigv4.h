/*
 * sigv4.h - AWS Signature Version 4 for S3 requests (private to sampler/).
 *
 * We sign requests ourselves (OpenSSL HMAC-SHA256) instead of through
 * CURLOPT_AWS_SIGV4: Debian's libcurl 7.88 signs the query string exactly as
 * written and sends no x-amz-content-sha256, so the canonical request would
 * be ours to get right anyway; computing it here means the code a known-answer
 * test checks is the code that signs every request, and the headers we sign
 * are byte for byte the headers we send.
 */
#ifndef RC_SAMPLER_SIGV4_H
#define RC_SAMPLER_SIGV4_H

#include <stddef.h>

/* SHA-256 of the empty payload, the x-amz-content-sha256 of every GET. */
#define SMP_SHA256_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* One request to sign.  All strings are borrowed for the duration of the call. */
struct smp_sigv4_req {
	const char *method;	     /* "GET" */
	const char *canonical_uri;   /* already URI-encoded path, e.g. "/test.txt" */
	const char *canonical_query; /* sorted, encoded "a=b&c=d", or "" */
	const char *host;	     /* Host header value as sent */
	const char *range;	     /* Range header value, or NULL (not signed then) */
	const char *amz_date;	     /* "20130524T000000Z" */
	const char *session_token;   /* x-amz-security-token, or NULL */
	const char *region;	     /* "us-east-1" */
	const char *access_key;
	const char *secret_key;
};

/*
 * Computes the signature (64 lowercase hex + NUL into sig_hex) and the
 * SignedHeaders list (into signed_headers, at least 96 bytes).  Returns 0, or
 * -EIO if libcrypto fails, -ENAMETOOLONG if the canonical request would not
 * fit the internal cap (16 KiB).  Never logs anything: the inputs hold secrets.
 */
int smp_sigv4_sign(const struct smp_sigv4_req *r, char sig_hex[65], char *signed_headers,
		   size_t signed_headers_len);

/*
 * Appends the S3 URI-encoding of s to out (capacity outlen): unreserved
 * characters A-Z a-z 0-9 - . _ ~ are kept, every other byte becomes %XX with
 * uppercase hex; '/' is kept when keep_slash.  Returns the length written, or
 * -ENAMETOOLONG if it does not fit (out then holds a truncated string).
 */
int smp_uri_encode(const char *s, int keep_slash, char *out, size_t outlen);

#endif
