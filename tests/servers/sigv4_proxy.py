#!/usr/bin/python3
"""sigv4_proxy.py - an HTTP proxy in front of s3rver that checks every
request's AWS Signature Version 4 the way S3 does, with botocore's signer.

  sigv4_proxy.py UPSTREAM STATE

Listens on 127.0.0.1 (ephemeral port), prints http://127.0.0.1:PORT last
once ready, and forwards each request that passes the checks to UPSTREAM
(s3rver, http://127.0.0.1:PORT), streaming the answer back.  s3rver 3.7.1
checks the form of a v4 Authorization header and the access key id, never
the signature ("Signature version 4 calculation is unimplemented" in its
lib/middleware/authentication.js): behind this proxy, a wrong secret, a
wrong session token, or a request altered after it was signed is refused.

Accounts: $SIGV4_PROXY_ACCOUNTS, whitespace-separated ACCESS_KEY:SECRET or
ACCESS_KEY:SECRET:SESSION_TOKEN (default "S3RVER:S3RVER", s3rver's own
account).  An account with a token accepts only requests that carry exactly
that token in a signed x-amz-security-token header; one without a token
refuses any token.  A request that passes is forwarded with its Credential
access key replaced by S3RVER (s3rver knows no other account).

What is checked, in the order S3 checks it (answer: S3 XML <Error>):
  Authorization "AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/s3/aws4_request,
  SignedHeaders=..., Signature=..." well formed  400 AuthorizationHeaderMalformed
  the access key is an account                     403 InvalidAccessKeyId
  x-amz-date present, DATE its day, within 15 min  403 AccessDenied / RequestTimeTooSkewed
  host, x-amz-date, x-amz-content-sha256 and every
  x-amz-* header present are signed                403 AccessDenied
  the session token is the account's               403 InvalidToken
  x-amz-content-sha256 is the body's SHA-256
  (or UNSIGNED-PAYLOAD)                            400 XAmzContentSHA256Mismatch
  the signature equals botocore's                  403 SignatureDoesNotMatch
botocore.auth.S3SigV4Auth recomputes the signature from the request as
received: method; the path percent-decoded and re-encoded (S3's canonical
URI, quote(safe='/~')); the query decoded and re-encoded by botocore's own
canonical query (quote(safe='-_.~'), sorted); the signed headers' values;
the x-amz-content-sha256 value; the timestamp of x-amz-date; the region of
the credential scope (any region is accepted: s3rver has none).  So a client
that encodes differently from S3's rules fails here as it would on AWS.

Requests without an Authorization header (anonymous) are forwarded
unchecked and counted; presigned URLs (X-Amz-Signature in the query) are
refused (400 NotImplemented).  GET /__sigv4_proxy/stats answers
{"verified", "refused", "anonymous", "codes": {CODE: n}} (not an S3 path: no
bucket name starts with '_').  Each refusal is one line in STATE/proxy.log
(no secret: the canonical request and string to sign are public parts of the
request).  Bodies are capped at 256 MiB; aws-chunked uploads are refused.
Exits 1 with one line on stderr when botocore is missing (scripts/deps.sh
installs python3-botocore).
"""
import datetime
import hashlib
import hmac
import http.client
import http.server
import json
import os
import re
import sys
import threading
import urllib.parse
import uuid
from xml.sax.saxutils import escape

try:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    sys.exit("python3-botocore is not installed: run scripts/deps.sh "
             "(apt-get install python3-botocore)")

BODY_CAP = 256 << 20
SKEW_S = 15 * 60
HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
       "upgrade", "proxy-authorization", "proxy-authenticate"}
AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request\s*,"
    r"\s*SignedHeaders=([a-z0-9;\-]+)\s*,\s*Signature=([0-9a-f]{64})$")


def accounts():
    out = {}
    for item in os.environ.get("SIGV4_PROXY_ACCOUNTS", "S3RVER:S3RVER").split():
        parts = item.split(":")
        if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
            sys.exit("sigv4_proxy: SIGV4_PROXY_ACCOUNTS: expected AK:SECRET[:TOKEN] items")
        out[parts[0]] = (parts[1], parts[2] if len(parts) == 3 else None)
    return out


class Refusal(Exception):
    def __init__(self, status, code, message, **extra):
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


class State:
    def __init__(self, upstream, state_dir):
        u = urllib.parse.urlsplit(upstream)
        self.up_host, self.up_port = u.hostname, u.port
        self.accounts = accounts()
        self.log_path = os.path.join(state_dir, "proxy.log")
        self.mu = threading.Lock()
        self.stats = {"verified": 0, "refused": 0, "anonymous": 0, "codes": {}}

    def count(self, what, code=None):
        with self.mu:
            self.stats[what] += 1
            if code:
                self.stats["codes"][code] = self.stats["codes"].get(code, 0) + 1

    def log(self, line):
        with self.mu, open(self.log_path, "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(line + "\n")


def verify(st, method, raw_path, headers, body):
    """Raises Refusal unless the request's SigV4 signature is botocore's."""
    auth = headers.get("authorization")
    m = AUTH_RE.match(auth.strip())
    if not m:
        raise Refusal(400, "AuthorizationHeaderMalformed",
                      "The authorization header is malformed.")
    ak, day, region, service, signed, provided = m.groups()
    if service != "s3":
        raise Refusal(400, "AuthorizationHeaderMalformed",
                      "The authorization header is malformed; incorrect service '%s'." % service)
    if ak not in st.accounts:
        raise Refusal(403, "InvalidAccessKeyId",
                      "The AWS Access Key Id you provided does not exist in our records.",
                      AWSAccessKeyId=ak)
    secret, token = st.accounts[ak]
    amz_date = headers.get("x-amz-date")
    if not amz_date or not re.match(r"^\d{8}T\d{6}Z$", amz_date):
        raise Refusal(403, "AccessDenied", "AWS authentication requires a valid Date or "
                      "x-amz-date header")
    if amz_date[:8] != day:
        raise Refusal(400, "AuthorizationHeaderMalformed", "The authorization header is "
                      "malformed; the credential date %s is not the day of x-amz-date %s."
                      % (day, amz_date))
    t = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
        tzinfo=datetime.timezone.utc)
    if abs((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()) > SKEW_S:
        raise Refusal(403, "RequestTimeTooSkewed", "The difference between the request time "
                      "and the current time is too large.", RequestTime=amz_date)
    signed_list = signed.split(";")
    if signed_list != sorted(set(signed_list)):
        raise Refusal(400, "AuthorizationHeaderMalformed",
                      "SignedHeaders must be sorted and unique.")
    must = {"host", "x-amz-date", "x-amz-content-sha256"}
    must.update(h for h in headers if h.startswith("x-amz-"))
    unsigned = sorted(must - set(signed_list))
    if unsigned:
        raise Refusal(403, "AccessDenied", "There were headers present in the request which "
                      "were not signed", HeadersNotSigned=",".join(unsigned))
    missing = [h for h in signed_list if h not in headers]
    if missing:
        raise Refusal(403, "AccessDenied", "A signed header is absent from the request: %s"
                      % ",".join(missing))
    got_token = headers.get("x-amz-security-token")
    if got_token != token:
        raise Refusal(403, "InvalidToken", "The provided token is malformed or otherwise "
                      "invalid." if got_token else "The request lacks the session token of "
                      "temporary credentials.")
    sha = headers.get("x-amz-content-sha256")
    if sha.startswith("STREAMING-"):
        raise Refusal(400, "NotImplemented", "aws-chunked uploads are not checked by this proxy")
    if sha != "UNSIGNED-PAYLOAD" and sha != hashlib.sha256(body).hexdigest():
        raise Refusal(400, "XAmzContentSHA256Mismatch", "The provided "
                      "'x-amz-content-sha256' header does not match what was computed.")

    # botocore's signer over the request as S3 sees it
    path, _, query = raw_path.partition("?")
    canon_path = urllib.parse.quote(urllib.parse.unquote_to_bytes(path), safe="/~")
    params = urllib.parse.parse_qsl(query, keep_blank_values=True)
    req = AWSRequest(method=method, url="http://%s%s" % (headers["host"], canon_path),
                     headers={h: headers[h] for h in signed_list}, params=params)
    req.context["timestamp"] = amz_date
    signer = S3SigV4Auth(Credentials(ak, secret, token), "s3", region)
    canonical = signer.canonical_request(req)
    sts = signer.string_to_sign(req, canonical)
    want = signer.signature(sts, req)
    if signer.signed_headers(signer.headers_to_sign(req)) != signed:
        raise Refusal(403, "SignatureDoesNotMatch", "SignedHeaders differ from botocore's.")
    if not hmac.compare_digest(want, provided):
        raise Refusal(403, "SignatureDoesNotMatch", "The request signature we calculated does "
                      "not match the signature you provided. Check your key and signing "
                      "method.", AWSAccessKeyId=ak, StringToSign=sts,
                      SignatureProvided=provided, CanonicalRequest=canonical)
    return ak


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sigv4-proxy"

    def log_message(self, fmt, *args):  # quiet: refusals go to proxy.log
        pass

    def _send(self, status, body, ctype="application/xml"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refuse(self, r):
        st = self.server.st
        st.count("refused", r.code)
        st.log("%s %s %s -> %d %s: %s" % (datetime.datetime.utcnow().isoformat(), self.command,
                                          self.path, r.status, r.code, r.message))
        rid = uuid.uuid4().hex[:16].upper()
        xml = "".join("<%s>%s</%s>" % (k, escape(str(v)), k) for k, v in r.extra.items())
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s'
                '</Message>%s<RequestId>%s</RequestId></Error>' % (
                    r.code, escape(r.message), xml, rid)).encode()
        self._send(r.status, body)

    def _upstream(self):
        st = self.server.st
        c = getattr(self.server.local, "conn", None)
        if c is None:
            c = http.client.HTTPConnection(st.up_host, st.up_port, timeout=60)
            self.server.local.conn = c
        return c

    def _drop_upstream(self):
        c = getattr(self.server.local, "conn", None)
        if c is not None:
            c.close()
        self.server.local.conn = None

    def handle_one(self):
        st = self.server.st
        if self.command == "GET" and self.path == "/__sigv4_proxy/stats":
            with st.mu:
                body = json.dumps(st.stats).encode()
            self._send(200, body, "application/json")
            return
        headers = {}
        for k, v in self.headers.items():
            k = k.lower()
            headers[k] = headers[k] + "," + v if k in headers else v
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return self._refuse(Refusal(411, "MissingContentLength",
                                        "You must provide the Content-Length HTTP header."))
        n = int(headers.get("content-length", "0") or 0)
        if n > BODY_CAP:
            return self._refuse(Refusal(400, "EntityTooLarge", "over this proxy's 256 MiB cap"))
        body = self.rfile.read(n) if n else b""
        if "X-Amz-Signature=" in self.path or "x-amz-signature=" in self.path.lower():
            return self._refuse(Refusal(400, "NotImplemented",
                                        "presigned URLs are not checked by this proxy"))
        fwd_auth = None
        if "authorization" in headers:
            try:
                ak = verify(st, self.command, self.path, headers, body)
            except Refusal as r:
                return self._refuse(r)
            st.count("verified")
            fwd_auth = headers["authorization"].replace("Credential=%s/" % ak,
                                                        "Credential=S3RVER/", 1)
        else:
            st.count("anonymous")
        out = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        if fwd_auth:
            out = {k: v for k, v in out.items() if k.lower() != "authorization"}
            out["Authorization"] = fwd_auth
        for attempt in (0, 1):
            c = self._upstream()
            try:
                c.request(self.command, self.path, body=body, headers=out)
                r = c.getresponse()
                break
            except (http.client.HTTPException, OSError):
                self._drop_upstream()
                if attempt:
                    raise
        length = r.getheader("Content-Length")
        data = None
        if length is None and self.command != "HEAD" and r.status not in (204, 304):
            data = r.read(BODY_CAP)  # no length (chunked): small answers, buffered
            length = str(len(data))
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        if length is not None:
            self.send_header("Content-Length", length)
        self.end_headers()
        if self.command == "HEAD":
            r.read()
            return
        try:
            if data is not None:
                self.wfile.write(data)
            else:
                while True:
                    chunk = r.read(1 << 16)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            self._drop_upstream()  # the rest of the body is unread: no reuse
            self.close_connection = True

    def _dispatch(self):
        try:
            self.handle_one()
        except (BrokenPipeError, ConnectionResetError):
            self._drop_upstream()
            self.close_connection = True

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _dispatch


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: sigv4_proxy.py UPSTREAM STATE")
    upstream, state_dir = sys.argv[1:]
    srv = Server(("127.0.0.1", 0), Handler)
    srv.st = State(upstream, state_dir)
    srv.local = threading.local()
    print("http://127.0.0.1:%d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
