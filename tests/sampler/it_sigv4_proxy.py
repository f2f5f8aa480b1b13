#!/usr/bin/python3
"""sampler-sigv4-proxy-s3rver: rollcache's SigV4 signatures checked by an
independent implementation (botocore, in tests/servers/sigv4_proxy.py) in
front of a real s3rver.

Proves: the proxy refuses what S3 refuses and s3rver alone accepts (a
flipped signature, a query or a Range changed after signing, an unsigned
x-amz-* header: 403), so the tests through it can fail on a wrong
signature; `rollcache ingest` signed with an access key, secret and session
token holding '+', '/' and '=' (from the environment and from a 0600
credentials file's aws_session_token) is verified and reads every record;
a wrong secret makes `ingest` and `mount` exit 1 with a line saying the signature does not match and
to check the secret key, a wrong or missing session token names the token,
an unknown access key names the key id, and no secret or token is printed.
"""
import collections
import http.client
import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402
sys.path.insert(0, rcsamp.SERVERS)
import s3put  # noqa: E402  (fails, one line, without botocore)

AK, SECRET, TOKEN = "ROLL+CACHE=KEY", "wJal+rXUtn/FEMI=K7MDENG/bPxRfiCY+EXAMPLEKEY==", \
    "FQoGZXIvYXdzE+/=IJ/tok+en/with==padding"
PLAIN_AK, PLAIN_SECRET = "PLAINKEY", "plain/secret+with=signs"


def request(url, method, target, headers):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        c.request(method, target, headers=headers)
        r = c.getresponse()
        body = r.read()
        return r.status, body
    finally:
        c.close()


def error_code(body):
    try:
        return ET.fromstring(body).findtext("Code")
    except ET.ParseError:
        return None


def stats(url):
    status, body = request(url, "GET", "/__sigv4_proxy/stats", {})
    if status != 200:
        rcsamp.fail("proxy stats: HTTP %d" % status)
    return json.loads(body)


def expect_refused(url, target, headers, code, what, method="GET"):
    status, body = request(url, method, target, headers)
    if status < 400 or error_code(body) != code:
        rcsamp.fail("%s: HTTP %d %r, want %s" % (what, status, body[:300], code))


def main():
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("sigv4")
    srv = None
    try:
        data = os.path.join(work, "data")
        want = rcsamp.make_dataset(data, 6, 10, 32, 400, seed=9,
                                   names=["k%d/obj %d+=.tfrecord" % (i % 2, i) for i in range(6)])
        want_recs = collections.Counter(p for v in want.values() for p in v)
        os.environ["SIGV4_PROXY_ACCOUNTS"] = "S3RVER:S3RVER %s:%s:%s %s:%s" % (
            AK, SECRET, TOKEN, PLAIN_AK, PLAIN_SECRET)
        srv = rcsamp.Server("s3rver.sh", ["bucket"], os.path.join(work, "s3"))
        with open(os.path.join(work, "s3", "s3rver_url")) as f:
            bare = f.read().split()[-1]  # s3rver itself, behind the proxy
        put_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        p = subprocess.run([os.path.join(rcsamp.SERVERS, "s3put.py"), srv.url, "bucket", data,
                            "ds/"], capture_output=True, text=True, timeout=60, env=put_env)
        if p.returncode:
            rcsamp.fail("upload: " + p.stderr)

        # -- hand-made requests: botocore signs, we alter, the proxy refuses --
        host = urllib.parse.urlsplit(srv.url).netloc
        lst = "/bucket?list-type=2&prefix=ds%2F"
        good = s3put.signed_headers("GET", "http://%s%s" % (host, lst))
        status, body = request(srv.url, "GET", lst, good)
        if status != 200 or b"<Key>ds/k0/obj" not in body:
            rcsamp.fail("a correctly signed listing: HTTP %d %r" % (status, body[:300]))
        bad = dict(good)
        sig = bad["Authorization"]
        bad["Authorization"] = sig[:-1] + ("0" if sig[-1] != "0" else "1")
        expect_refused(srv.url, lst, bad, "SignatureDoesNotMatch", "a flipped signature")
        # s3rver alone takes the very same request: the check is the proxy's
        status, _ = request(bare, "GET", lst, bad)
        if status != 200:
            rcsamp.fail("s3rver without the proxy refused a wrong signature (HTTP %d): "
                        "this test's premise changed, see sigv4_proxy.py" % status)
        expect_refused(srv.url, "/bucket?list-type=2&prefix=ds%2Fk1%2F", good,
                       "SignatureDoesNotMatch", "a query changed after signing")
        obj = "/bucket/" + urllib.parse.quote("ds/k0/obj 0+=.tfrecord", safe="/~")
        ranged = s3put.signed_headers("GET", "http://%s%s" % (host, obj),
                                      headers={"Range": "bytes=0-9"})
        status, body = request(srv.url, "GET", obj, ranged)
        if status != 206 or len(body) != 10:
            rcsamp.fail("a signed range GET: HTTP %d, %d bytes" % (status, len(body)))
        expect_refused(srv.url, obj, dict(ranged, Range="bytes=0-10"), "SignatureDoesNotMatch",
                       "a Range changed after signing")
        expect_refused(srv.url, obj, dict(ranged, **{"x-amz-meta-x": "1"}), "AccessDenied",
                       "an unsigned x-amz-* header")
        before = stats(srv.url)

        # -- rollcache, verified: key, secret and token with '+', '/', '=' --
        common = ["--endpoint", srv.url, "--connections", "4", "--shard-size", "1M"]
        env = {"AWS_ACCESS_KEY_ID": AK, "AWS_SECRET_ACCESS_KEY": SECRET,
               "AWS_SESSION_TOKEN": TOKEN, "AWS_PROFILE": "", "AWS_SHARED_CREDENTIALS_FILE":
               os.path.join(work, "none"), "AWS_CONFIG_FILE": os.path.join(work, "none")}
        c1 = os.path.join(work, "c-token")
        rcsamp.ingest("s3://bucket/ds/", c1, "16M", common, env=env)
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(c1), want_recs, "session token")
        after = stats(srv.url)
        if after["verified"] - before["verified"] < 1 + len(want) or \
                after["refused"] != before["refused"]:
            rcsamp.fail("proxy: %r then %r: the ingest was not verified" % (before, after))

        secrets = (SECRET, TOKEN, PLAIN_SECRET, "WRONGSECRET+/=", "WRONGTOKEN")

        def refused(extra_env, frag, what):
            code, _, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c-x"), "16M",
                                         common, env=dict(env, **extra_env), check=False)
            lines = [ln for ln in err.splitlines() if "listing refused" in ln]
            if code != 1 or not lines or frag not in lines[-1]:
                rcsamp.fail("%s: exit %d, stderr %r (want exit 1 and %r)" % (what, code, err, frag))
            if any(s in err for s in secrets):
                rcsamp.fail("%s: a secret or token is in the message: %r" % (what, err))
            shutil.rmtree(os.path.join(work, "c-x"), ignore_errors=True)
            return lines[-1]

        line = refused({"AWS_SECRET_ACCESS_KEY": "WRONGSECRET+/="},
                       "signature does not match", "wrong secret")
        if "secret key" not in line:
            rcsamp.fail("wrong secret: the line does not say to check the secret key: " + line)
        # mount lists the source before it detaches: the same refusal, exit 1, nothing mounted
        mnt = os.path.join(work, "mnt")
        os.makedirs(mnt, exist_ok=True)
        p = subprocess.run([rcsamp.rc_bin(), "mount", "s3://bucket/ds/", mnt, "--cache-dir",
                            os.path.join(work, "c-m"), "--limit", "16M"] + common,
                           env=dict(os.environ, **dict(env, AWS_SECRET_ACCESS_KEY="WRONGSECRET+/=")),
                           capture_output=True, text=True, timeout=120)
        with open("/proc/self/mountinfo") as mi:
            mounted = any(ln.split()[4] == os.path.realpath(mnt) for ln in mi)
        if mounted:
            subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        mlines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        if p.returncode != 1 or mounted or len(mlines) != 1 or \
                "signature does not match" not in mlines[0]:
            rcsamp.fail("mount with a wrong secret: exit %d, mounted %s, stderr %r (want exit 1, "
                        "one line saying the signature does not match)"
                        % (p.returncode, mounted, p.stderr))
        if any(x in p.stderr for x in secrets):
            rcsamp.fail("mount with a wrong secret: a secret is in the message: %r" % p.stderr)
        refused({"AWS_SESSION_TOKEN": "WRONGTOKEN"}, "session token", "wrong session token")
        refused({"AWS_SESSION_TOKEN": ""}, "session token", "missing session token")
        refused({"AWS_ACCESS_KEY_ID": "NOSUCHKEY"}, "access key id", "unknown access key")

        # -- the same identity from a 0600 credentials file (aws_session_token) --
        creds = os.path.join(work, "credentials")
        with open(creds, "w") as f:
            f.write("[tok]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                    "aws_session_token = %s\n[plain]\naws_access_key_id = %s\n"
                    "aws_secret_access_key = %s\n" % (AK, SECRET, TOKEN, PLAIN_AK, PLAIN_SECRET))
        os.chmod(creds, 0o600)
        fenv = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
                "AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_CONFIG_FILE": os.path.join(work, "none")}
        for profile in ("tok", "plain"):
            c = os.path.join(work, "c-" + profile)
            rcsamp.ingest("s3://bucket/ds/", c, "16M", common + ["--profile", profile],
                          env=dict(env, **fenv))
            rcsamp.expect_equal_sets(rcsamp.cache_payloads(c), want_recs, "profile " + profile)
        end = stats(srv.url)
        codes = end["codes"]
        if codes.get("SignatureDoesNotMatch", 0) < 5 or codes.get("InvalidToken") != 2 or \
                codes.get("InvalidAccessKeyId") != 1:
            rcsamp.fail("proxy refusals: %r" % end)
        print("ok: proxy verified %d requests and refused %d (%s); s3rver alone accepted a "
              "flipped signature" % (end["verified"], end["refused"],
                                     ", ".join("%s %d" % kv for kv in sorted(codes.items()))))
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
