#!/usr/bin/python3
"""s3put.py - upload files to an S3-compatible test server (s3rver) over one
keep-alive connection.

  s3put.py ENDPOINT BUCKET ROOT [KEYPREFIX]

Every regular file under ROOT is PUT as KEYPREFIX + its relative path (keys
may hold spaces, '+', '=', '%' and UTF-8: they are percent-encoded here).
Requests carry a SigV4-shaped Authorization header for s3rver's test account
(S3RVER); s3rver checks its form, not the signature.  Loopback only.
"""
import datetime
import http.client
import os
import sys
import urllib.parse


def main():
    endpoint, bucket, root = sys.argv[1:4]
    prefix = sys.argv[4] if len(sys.argv) > 4 else ""
    u = urllib.parse.urlsplit(endpoint)
    if u.hostname not in ("127.0.0.1", "localhost"):
        sys.exit("s3put: refusing a non-loopback endpoint %s" % endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    n = 0
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            key = prefix + os.path.relpath(path, root)
            with open(path, "rb") as f:
                body = f.read()
            date = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
            hdrs = {
                "x-amz-date": date,
                "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
                "Authorization": "AWS4-HMAC-SHA256 Credential=S3RVER/%s/us-east-1/s3/aws4_request, "
                                 "SignedHeaders=host;x-amz-date, Signature=%s" % (date[:8], "0" * 64),
                "Content-Length": str(len(body)),
            }
            conn.request("PUT", "/%s/%s" % (bucket, urllib.parse.quote(key, safe="/")), body, hdrs)
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                sys.exit("s3put: PUT %s: HTTP %d %s" % (key, r.status, data[:300]))
            n += 1
    print("uploaded %d objects" % n)


if __name__ == "__main__":
    main()
