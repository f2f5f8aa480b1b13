#!/usr/bin/python3
"""s3put.py - upload files to an S3-compatible test server (s3rver behind
sigv4_proxy.py) over one keep-alive connection.

  s3put.py ENDPOINT BUCKET ROOT [KEYPREFIX]

Every regular file under ROOT is PUT as KEYPREFIX + its relative path (keys
may hold spaces, '+', '=', '%', control characters and UTF-8: they are
percent-encoded here).  Requests are signed with botocore's SigV4 signer
(payload hash included) for $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY
(+ $AWS_SESSION_TOKEN) when both are set, else s3rver's test account
S3RVER/S3RVER; the proxy checks the signature.  Loopback only.

signed_headers() is also what tests use to send hand-made requests.
Without botocore (scripts/deps.sh installs python3-botocore) it exits 1
with one line, imported or run.
"""
import http.client
import os
import sys
import urllib.parse

try:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    sys.exit("python3-botocore is not installed: run scripts/deps.sh "
             "(apt-get install python3-botocore)")


def signed_headers(method, url, body=b"", headers=None, access_key="S3RVER", secret="S3RVER",
                   token=None, region="us-east-1"):
    """The headers of a SigV4-signed request (botocore; payload hash signed).
    url must be percent-encoded already ('/' kept)."""
    req = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    S3SigV4Auth(Credentials(access_key, secret, token), "s3", region).add_auth(req)
    return dict(req.headers.items())


def main():
    endpoint, bucket, root = sys.argv[1:4]
    prefix = sys.argv[4] if len(sys.argv) > 4 else ""
    u = urllib.parse.urlsplit(endpoint)
    if u.hostname not in ("127.0.0.1", "localhost"):
        sys.exit("s3put: refusing a non-loopback endpoint %s" % endpoint)
    ak, sk = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    cred = {"access_key": ak, "secret": sk, "token": os.environ.get("AWS_SESSION_TOKEN") or None}
    if not ak or not sk:
        cred = {}
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    n = 0
    for dirpath, _, files in os.walk(os.fsencode(root)):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            key = os.fsencode(prefix) + os.path.relpath(path, os.fsencode(root))
            with open(path, "rb") as f:
                body = f.read()
            target = "/%s/%s" % (bucket, urllib.parse.quote(key, safe="/~"))
            hdrs = signed_headers("PUT", "%s://%s%s" % (u.scheme, u.netloc, target), body,
                                  {"Content-Length": str(len(body))}, **cred)
            conn.request("PUT", target, body, hdrs)
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                sys.exit("s3put: PUT %r: HTTP %d %s" % (key, r.status, data[:300]))
            n += 1
    print("uploaded %d objects" % n)


if __name__ == "__main__":
    main()
