#!/usr/bin/python3
"""sampler-aws-config-s3rver-awscli: rollcache resolves ~/.aws like the AWS
CLI does, against a real s3rver, and the AWS CLI (Debian's awscli) reading
the same files agrees.

Proves: with AWS_PROFILE=train and nothing else set, `rollcache ingest`
takes the profile's credentials from ~/.aws/credentials and its region and
endpoint_url (and nested `s3 = addressing_style`) from ~/.aws/config, reads
every object, and `aws configure list` names the same profile and region
; AWS_DEFAULT_REGION overrides the file in both
tools, and AWS_REGION overrides both in rollcache (as newer AWS CLIs do;
Debian's 2.9 ignores it);
AWS_ENDPOINT_URL is used when the profile has none; s3_addressing=virtual
sends virtual-hosted-style requests (BUCKET.s3.localhost) that s3rver
answers; a config file that holds a secret and is readable by others is
refused (chmod 600 named, secret not echoed); unknown credentials fail,
the secret never printed.  (Debian's awscli 2.9 predates
endpoint_url in ~/.aws/config, so it is given --endpoint-url to list the
same bucket.)
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402

SECRET = "S3RVER"


def aws(env, *args):
    return subprocess.run(["aws", *args], env=env, capture_output=True, text=True, timeout=120)


def log_of(stderr):
    lines = [ln for ln in stderr.splitlines() if "s3://bucket/: profile" in ln]
    if not lines:
        rcsamp.fail("no resolution line in the log: %r" % stderr)
    return lines[-1]


def main():
    rcsamp.rc_bin()
    if shutil.which("aws") is None:
        rcsamp.missing("the AWS CLI is not installed", "run scripts/deps.sh (apt-get install awscli)")
    work = rcsamp.tmpdir("s3cfg")
    srv = None
    try:
        data = os.path.join(work, "data")
        want = rcsamp.synth_dataset(data, 200, 512, 5, seed=3)
        # the proxy in front of s3rver checks signatures: the key of the
        # config-file case below is an account of its own
        os.environ["SIGV4_PROXY_ACCOUNTS"] = "S3RVER:%s CONFKEY:TOPSECRETCONF" % SECRET
        srv = rcsamp.Server("s3rver.sh", ["bucket"], os.path.join(work, "s3"))
        p = subprocess.run([os.path.join(rcsamp.SERVERS, "s3put.py"), srv.url, "bucket", data,
                            "ds/"], capture_output=True, text=True, timeout=120)
        if p.returncode:
            rcsamp.fail("upload: " + p.stderr)
        port = srv.url.rsplit(":", 1)[1]
        home = os.path.join(work, "home")
        os.makedirs(os.path.join(home, ".aws"))
        cred = os.path.join(home, ".aws", "credentials")
        conf = os.path.join(home, ".aws", "config")
        with open(cred, "w") as f:
            f.write("[default]\naws_access_key_id = NOPE\naws_secret_access_key = NOPE\n"
                    "[train]\naws_access_key_id = S3RVER\naws_secret_access_key = %s\n" % SECRET)
        os.chmod(cred, 0o600)
        with open(conf, "w") as f:
            f.write("[default]\nregion = us-west-2\n\n[profile train]\nregion = eu-central-1\n"
                    "endpoint_url = %s\ns3 =\n  addressing_style = path\n" % srv.url)
        os.chmod(conf, 0o644)  # no secret in it: readable is fine
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(HOME=home, AWS_PROFILE="train", ROLLCACHE_LOG="info")
        # the AWS CLI reads the same files: same profile and region
        a = aws(env, "configure", "list")
        if a.returncode:
            rcsamp.fail("aws configure list: %s" % a.stderr)
        rows = {ln.split()[0]: ln.split()[1:] for ln in a.stdout.splitlines()[2:] if ln.split()}
        if rows.get("profile", [""])[0] != "train" or rows.get("region", [""])[0] != "eu-central-1":
            rcsamp.fail("aws configure list: %r" % a.stdout)
        if "shared-credentials-file" not in " ".join(rows.get("access_key", [])):
            rcsamp.fail("aws: credentials not from the credentials file: %r" % a.stdout)

        code, st, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c1"), "64M",
                                      env=env, check=False)
        # rcsamp.ingest passes --quiet, which keeps the info log: the line says where
        line = log_of(err) if code == 0 else rcsamp.fail("ingest: %d %s" % (code, err))
        for frag in ("profile train (AWS_PROFILE)", "region eu-central-1 (config file)",
                     "endpoint %s (config file)" % srv.url, "path-style",
                     "shared credentials file"):
            if frag not in line:
                rcsamp.fail("resolution lacks %r: %s" % (frag, line))
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(os.path.join(work, "c1")),
                                 __import__("collections").Counter(
                                     p for v in want.values() for p in v), "profile train")
        # both tools list the same objects (awscli 2.9 is told the endpoint)
        a = aws(env, "s3", "ls", "--recursive", "s3://bucket/ds/", "--endpoint-url", srv.url)
        if a.returncode:
            rcsamp.fail("aws s3 ls: %s" % a.stderr)
        if len(a.stdout.splitlines()) != st["objects_total"]:
            rcsamp.fail("aws lists %d objects, rollcache %d" % (len(a.stdout.splitlines()),
                                                                st["objects_total"]))

        # AWS_DEFAULT_REGION beats the file, in both tools; AWS_REGION beats both
        # (newer AWS CLIs agree; Debian's awscli 2.9 reads only AWS_DEFAULT_REGION)
        env2 = dict(env, AWS_DEFAULT_REGION="ap-south-1")
        code, _, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c2"), "64M",
                                     env=env2, check=False)
        if code or "region ap-south-1 (AWS_DEFAULT_REGION)" not in log_of(err):
            rcsamp.fail("AWS_DEFAULT_REGION: exit %d, %s" % (code, err))
        a = aws(env2, "configure", "list")
        region = [ln.split() for ln in a.stdout.splitlines() if ln.split()[:1] == ["region"]]
        if not region or region[0][1:3] != ["ap-south-1", "env"]:
            rcsamp.fail("aws configure list with AWS_DEFAULT_REGION: %r" % a.stdout)
        env2["AWS_REGION"] = "sa-east-1"
        code, _, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c2b"), "64M",
                                     env=env2, check=False)
        if code or "region sa-east-1 (AWS_REGION)" not in log_of(err):
            rcsamp.fail("AWS_REGION: exit %d, %s" % (code, err))

        # AWS_ENDPOINT_URL when the profile has none; virtual-hosted-style
        with open(conf, "w") as f:
            f.write("[profile train]\nregion = eu-central-1\n")
        env3 = dict(env, AWS_ENDPOINT_URL="http://s3.localhost:%s" % port)
        code, st3, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c3"), "64M",
                                       ["--s3-addressing", "virtual"], env=env3, check=False)
        line = log_of(err) if code == 0 else rcsamp.fail("virtual: %d %s" % (code, err))
        for frag in ("endpoint http://bucket.s3.localhost:%s (AWS_ENDPOINT_URL)" % port,
                     "virtual-hosted-style"):
            if frag not in line:
                rcsamp.fail("virtual: lacks %r: %s" % (frag, line))
        if st3["objects_done"] != st["objects_total"] or st3.get("http_4xx"):
            rcsamp.fail("virtual-hosted: %r" % st3)

        # unknown credentials fail (the proxy knows no such key id), the secret never printed
        with open(cred, "w") as f:
            f.write("[train]\naws_access_key_id = WRONGKEY\naws_secret_access_key = WRONGSECRET9\n")
        os.chmod(cred, 0o600)
        code, _, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c4"), "64M",
                                     ["--endpoint", srv.url], env=env, check=False)
        if code == 0 or "WRONGSECRET9" in err or "access key id" not in err:
            rcsamp.fail("unknown key id: exit %d, %r" % (code, err))

        # a config file holding a secret, readable by others: refused
        os.unlink(cred)
        with open(conf, "w") as f:
            f.write("[profile train]\naws_access_key_id = CONFKEY\n"
                    "aws_secret_access_key = TOPSECRETCONF\nendpoint_url = %s\n" % srv.url)
        os.chmod(conf, 0o644)
        code, _, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c5"), "64M",
                                     env=env, check=False)
        if code == 0 or "chmod 600" not in err or "TOPSECRETCONF" in err:
            rcsamp.fail("readable config with a secret: exit %d, %r" % (code, err))
        os.chmod(conf, 0o600)
        code, _, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c6"), "64M",
                                     env=env, check=False)
        if code or "config file" not in log_of(err) or "TOPSECRETCONF" in err:
            rcsamp.fail("credentials from ~/.aws/config: exit %d, %r" % (code, err))
        print("ok: profile, region, endpoint and addressing resolved like the AWS CLI")
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
