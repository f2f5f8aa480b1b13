/*
 * sigv4.c - AWS Signature Version 4 for S3 GET requests.
 *
 * Owns the canonical request, the string to sign and the HMAC chain
 * (kDate -> kRegion -> kService -> kSigning).  Does not send anything and
 * does not choose headers: s3.c decides what is sent and passes exactly that
 * here.  Signed headers are host, range (when given), x-amz-content-sha256,
 * x-amz-date and x-amz-security-token (when given), in that sorted order.
 *
 * Secrets: the secret key and derived keys live only on this stack frame and
 * are wiped before return; nothing here logs.
 */
#include "sampler/sigv4.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>

#define CANON_CAP 16384

static void hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static int sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		return -EIO;
	hex(md, 32, out);
	return 0;
}

static int hmac(const void *key, size_t keylen, const char *msg, unsigned char out[32])
{
	unsigned int outlen = 0;
	if (!HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, strlen(msg), out,
		  &outlen) ||
	    outlen != 32)
		return -EIO;
	return 0;
}

int smp_uri_encode(const char *s, int keep_slash, char *out, size_t outlen)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		int keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			   (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' ||
			   (keep_slash && c == '/');
		size_t need = keep ? 1 : 3;
		if (o + need >= outlen) {
			if (outlen)
				out[o < outlen ? o : outlen - 1] = '\0';
			return -ENAMETOOLONG;
		}
		if (keep) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = digits[c >> 4];
			out[o++] = digits[c & 15];
		}
	}
	if (outlen == 0)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return (int)o;
}

int smp_sigv4_sign(const struct smp_sigv4_req *r, char sig_hex[65], char *signed_headers,
		   size_t signed_headers_len)
{
	char canon[CANON_CAP], canon_hash[65], sts[512], date[9], key0[256];
	unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
	int n, rc = -EIO;

	snprintf(date, sizeof(date), "%.8s", r->amz_date);
	n = snprintf(signed_headers, signed_headers_len, "host%s;x-amz-content-sha256;x-amz-date%s",
		     r->range ? ";range" : "", r->session_token ? ";x-amz-security-token" : "");
	if (n < 0 || (size_t)n >= signed_headers_len)
		return -ENAMETOOLONG;
	/* keep the list sorted: host < range < x-amz-* */
	n = snprintf(
	    canon, sizeof(canon),
	    "%s\n%s\n%s\nhost:%s\n%s%s%sx-amz-content-sha256:%s\nx-amz-date:%s\n%s%s%s\n%s\n%s",
	    r->method, r->canonical_uri, r->canonical_query, r->host, r->range ? "range:" : "",
	    r->range ? r->range : "", r->range ? "\n" : "", SMP_SHA256_EMPTY, r->amz_date,
	    r->session_token ? "x-amz-security-token:" : "",
	    r->session_token ? r->session_token : "", r->session_token ? "\n" : "", signed_headers,
	    SMP_SHA256_EMPTY);
	if (n < 0 || (size_t)n >= sizeof(canon)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	if (sha256_hex(canon, (size_t)n, canon_hash))
		goto out;
	n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s",
		     r->amz_date, date, r->region, canon_hash);
	if (n < 0 || (size_t)n >= sizeof(sts)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	n = snprintf(key0, sizeof(key0), "AWS4%s", r->secret_key);
	if (n < 0 || (size_t)n >= sizeof(key0)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	if (hmac(key0, (size_t)n, date, k1) || hmac(k1, 32, r->region, k2) ||
	    hmac(k2, 32, "s3", k3) || hmac(k3, 32, "aws4_request", k4) || hmac(k4, 32, sts, sig))
		goto out;
	hex(sig, 32, sig_hex);
	rc = 0;
out:
	OPENSSL_cleanse(key0, sizeof(key0));
	OPENSSL_cleanse(k1, sizeof(k1));
	OPENSSL_cleanse(k2, sizeof(k2));
	OPENSSL_cleanse(k3, sizeof(k3));
	OPENSSL_cleanse(k4, sizeof(k4));
	OPENSSL_cleanse(canon, sizeof(canon)); /* may hold the session token */
	return rc;
}
