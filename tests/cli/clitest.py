"""clitest.py - what the tests of tests/cli share: the rollcache under test
(RC, $RC_BIN), failures collected instead of stopping at the first, the
run of a command, a free port, whether a path is mounted, and the end of a
test (every failure printed, exit 1; else "ok")."""
import os
import socket
import subprocess
import sys
import time

RC = os.environ.get("RC_BIN", "rollcache")
SRCDIR = os.environ.get("RC_SRCDIR", os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                                  "..", "..")))
SERVERS = os.path.join(SRCDIR, "tests", "servers")
failures = []


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(77)


def check(cond, what):
    if not cond:
        failures.append(what)


def eq(got, want, what):
    check(got == want, "%s:\n  got  %r\n  want %r" % (what, got, want))


def run(*args, env=None, timeout=60, text=True):
    """rollcache ARGS...: the CompletedProcess (str output unless text=False).
    Numbers become strings; bytes stay bytes (paths that are not UTF-8)."""
    argv = [a if isinstance(a, (str, bytes, os.PathLike)) else str(a) for a in args]
    return subprocess.run([RC, *argv], capture_output=True, text=text, env=env,
                          timeout=timeout)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def is_mounted(mp):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == mp for line in f)


def wait_for(pred, what, limit=60):
    """Polls pred() every 0.1 s for up to limit s; returns its first true
    value, or records a failure naming what it waited for and returns None."""
    for _ in range(limit * 10):
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    check(False, "not reached within %d s: %s" % (limit, what))
    return None


def fits(what, text):
    """Records a failure when a line of text is over 80 columns."""
    bad = [l for l in text.splitlines() if len(l) > 80]
    check(not bad, "%s: %d lines over 80 columns, the longest %d: %r"
          % (what, len(bad), max(map(len, bad)) if bad else 0, bad[:3]))


def finish():
    """Prints every failure and exits 1, or prints ok."""
    for f in failures:
        print("FAIL: " + f)
    if failures:
        sys.exit(1)
    print("ok")
