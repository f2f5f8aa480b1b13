"""clitest.py - what the tests of tests/cli share: the rollcache under test
(RC, $RC_BIN), failures collected instead of stopping at the first, the
run of a command, a peer started from tests/servers, a free port, whether a
path is mounted, and the end of a test (every failure printed, exit 1; else
"ok").

A test skips (exit 77, skip()) only for a device or privilege the machine
lacks (/dev/fuse, root); a package scripts/deps.sh installs, or a part
meson builds, that is missing fails it at once with one line (missing())."""
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
    """Exit 77 (meson's SKIP): only for a device or privilege this machine
    lacks."""
    print("SKIP: " + reason)
    sys.exit(77)


def missing(what, fix):
    """A package scripts/deps.sh installs or a part meson builds is absent:
    the machine or the build is broken, so the test fails (exit 1) with one
    line, "FAIL: WHAT: FIX".  A finally: around it still cleans up."""
    print("FAIL: " + " ".join(("%s: %s" % (what, fix)).split()))
    sys.exit(1)


def start_peer(script, args, env=None):
    """tests/servers/SCRIPT start ARGS...: its URL (the last line it prints).
    A launcher that fails (its program missing: one line on stderr) ends the
    test with exit 1 and that line."""
    p = subprocess.run([os.path.join(SERVERS, script), "start", *args], capture_output=True,
                       text=True, timeout=60, env=env)
    if p.returncode != 0:
        print("FAIL: %s start exited %d: %s" % (script, p.returncode,
                                               (p.stdout + p.stderr).strip()))
        sys.exit(1)
    return p.stdout.strip().splitlines()[-1]


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
