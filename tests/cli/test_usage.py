#!/usr/bin/python3
"""cli-usage: the `rollcache` command's help, version, and usage errors;
and the help of the benchmarks' program, `rollcache-bench`.

usage: test_usage.py ROLLCACHE_BENCH

Every subcommand answers --help with exit 0 and a usage line on stdout;
`rollcache --version` prints the project version; an unknown command or a
missing argument is exit 2 with one line on stderr.  `bench` is not a
subcommand: --help does not list it, and `rollcache bench` is exit 2 with
one line that names rollcache-bench.  `rollcache-bench KIND --help` is exit
0 with a usage line for each of its four kinds.

Output that fits a terminal: no line of `rollcache --help`, of any
command's --help (through `rollcache` and `rollcache-core`), of the man
page rendered at 80 columns, or of `rollcache simulate` on small real runs
(policies, the docs' example configs, a schedule with notes) is longer than
80 columns; --help and the man page show each [section] of the keys once.
(status and report on a real mount: test_columns_fuse.py.)

A typo in a key: `--limt`, `-o limt=`, an INI `limt =` each give one short
line naming the nearest key, exit 2.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import RC, failures, missing, check, eq, run, fits  # noqa: E402


listing = run("--help")
check(listing.returncode == 0, "rollcache --help: exit %d" % listing.returncode)
commands = [line.split()[1] for line in listing.stdout.splitlines()
            if line.startswith("  rollcache ")]
check(len(commands) == 9, "rollcache --help lists %d commands: %r" % (len(commands), commands))
check("bench" not in commands, "rollcache --help lists bench: %r" % commands)
# A build with every optional feature (build/rc_config.h) builds every
# command: there, none may say it is not built.
_cfg = open(os.path.join(os.environ["RC_LIBDIR"], "rc_config.h")).read()
FULL_BUILD = all("#define %s 1" % f in _cfg
                 for f in ("RC_HAVE_CURL", "RC_HAVE_FUSE", "RC_HAVE_SAMPLER_INGEST"))


def not_built(c, p):
    """The command's own line saying this build lacks it (exit != 0)."""
    said = p.returncode != 0 and re.match(
        r"rollcache %s: (this build has no |not built in this configuration)" % re.escape(c),
        p.stderr)
    check(not (said and FULL_BUILD),
          "rollcache %s: says it is not built, in a build with every feature: %r" %
          (c, p.stderr))
    return bool(said)


for c in commands:
    p = run(c, "--help")
    if not_built(c, p):
        continue  # listed but not built here: says why
    check(p.returncode == 0, "rollcache %s --help: exit %d (%s)" % (c, p.returncode, p.stderr))
    check("usage: rollcache %s" % c in p.stdout,
          "rollcache %s --help: no usage line on stdout: %r" % (c, p.stdout[:200]))

version = run("--version")
meson_version = open(os.path.join(os.environ["RC_SRCDIR"], "meson.build")).read()
want = meson_version.split("version: '", 1)[1].split("'", 1)[0]
check(version.returncode == 0 and version.stdout.strip() == "rollcache " + want,
      "rollcache --version: %r, want 'rollcache %s'" % (version.stdout, want))

for args, words in ((("nosuchcommand",), "unknown command"),
                    ((), "usage: rollcache COMMAND"),
                    (("synth",), "synth"),
                    (("check",), "check"),
                    (("bench", "fuse"), "rollcache-bench")):
    p = run(*args)
    check(p.returncode == 2, "rollcache %s: exit %d, want 2" % (" ".join(args), p.returncode))
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(lines and words in p.stderr,
          "rollcache %s: stderr %r does not say %r" % (" ".join(args), p.stderr, words))
p = run("bench")
eq(p.stderr.count("\n"), 1, "rollcache bench: lines on stderr (%r)" % p.stderr)

# rollcache-bench: each kind's --help, its usage errors
bench = sys.argv[1]
kinds = ["fuse", "sampler", "feeder", "catalog"]
p = subprocess.run([bench, "--help"], capture_output=True, text=True, timeout=30)
check(p.returncode == 0, "rollcache-bench --help: exit %d (%s)" % (p.returncode, p.stderr))
fits("rollcache-bench --help", p.stdout + p.stderr)
eq(sorted(l.split()[0] for l in p.stdout.split("kinds:\n", 1)[-1].split("\n\n", 1)[0]
          .splitlines()), sorted(kinds), "rollcache-bench --help: kinds")
for k in kinds:
    p = subprocess.run([bench, k, "--help"], capture_output=True, text=True, timeout=30)
    fits("rollcache-bench %s --help" % k, p.stdout + p.stderr)
    said = p.returncode != 0 and re.match(
        r"rollcache-bench %s: (this build has no |not built in this configuration)" % k,
        p.stderr)
    check(not (said and FULL_BUILD),
          "rollcache-bench %s: says it is not built, in a build with every feature" % k)
    if said:
        continue
    check(p.returncode == 0, "rollcache-bench %s --help: exit %d (%s)" % (k, p.returncode,
                                                                         p.stderr))
    check("usage: rollcache-bench %s" % k in p.stdout,
          "rollcache-bench %s --help: no usage line on stdout: %r" % (k, p.stdout[:200]))
for args in (["nosuchkind"], []):
    p = subprocess.run([bench, *args], capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and (not args or "unknown kind" in p.stderr),
          "rollcache-bench %s: exit %d, want 2; stderr %r" % (args, p.returncode, p.stderr))


core = os.path.join(os.path.dirname(RC), "rollcache-core")
programs = [RC] + ([core] if os.access(core, os.X_OK) else [])
for prog in programs:
    name = os.path.basename(prog)
    p = subprocess.run([prog, "--help"], capture_output=True, text=True, timeout=30)
    fits("%s --help" % name, p.stdout + p.stderr)
    for c in commands:
        p = subprocess.run([prog, *c.split(), "--help"], capture_output=True, text=True,
                           timeout=30)
        fits("%s %s --help" % (name, c), p.stdout + p.stderr)

# each section of the keys once, in --help and in the man page
p = run("mount", "--help")
if p.returncode == 0:
    heads = re.findall(r"^\[([a-z N]+)\]", p.stdout, re.M)
    check(heads and len(heads) == len(set(heads)), "mount --help sections: %r" % heads)
    cache = re.search(r"^\[cache\]\n(.*?)^\[", p.stdout, re.M | re.S)
    check(cache and "--scrub-rate" in cache.group(1),
          "mount --help: scrub_rate is not under [cache]")
man = subprocess.run([core if os.access(core, os.X_OK) else RC, "--man"], capture_output=True,
                     text=True, timeout=30)
if man.returncode == 0:
    heads = re.findall(r"^\.SS \[(.*)\]$", man.stdout, re.M)
    check(heads and len(heads) == len(set(heads)), "man page sections: %r" % heads)
    check("ioctl" in man.stdout and "write next" not in man.stdout,
          "man page: control commands are an ioctl")
    if not shutil.which("man"):
        missing("man is not installed", "run scripts/deps.sh (apt-get install man-db)")
    tmp = tempfile.mkdtemp(prefix="rc-usage-")
    try:
        page = os.path.join(tmp, "rollcache.1")
        with open(page, "w") as f:
            f.write(man.stdout)
        r = subprocess.run(["man", "-l", page], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, MANWIDTH="80",
                                                MANPAGER="cat", PAGER="cat"))
        if r.returncode == 0:
            fits("man rollcache (80 columns)", r.stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

# simulate: small real runs, every line within 80 columns unless --wide
ex = os.path.join(os.environ["RC_SRCDIR"], "docs", "examples")
sims = [
    ["--limit", "64M", "--dataset", "512M", "--record-size", "16K", "--shard-size", "4M",
     "--epochs", "6", "--policy", "fifo,lru,uses,random,none"],
    ["--limit", "20G", "--admit", "10G", "--policy", "lru", "--min-uses", "2",
     "--dataset", "200G", "--record-size", "1M", "--epochs", "12"],
    ["--config", os.path.join(ex, "schedule.ini"), "--config", os.path.join(ex, "fifo.ini"),
     "--config", os.path.join(ex, "none.ini"), "--dataset", "200G", "--record-size", "1M",
     "--epochs", "12"],
]
for args in sims:
    p = run("simulate", *args)
    if "not built" in p.stderr:
        break
    check(p.returncode == 0, "simulate %s: exit %d (%s)" % (args, p.returncode, p.stderr))
    fits("simulate " + " ".join(args), p.stdout + p.stderr)
    check("after 12 epochs" in p.stdout or "after 6 epochs" in p.stdout,
          "simulate summary: %r" % p.stdout[-300:])
    w = run("simulate", *args, "--wide")
    check("seen/dl" in w.stdout, "simulate --wide has seen/dl")

# a typo in a key: one line naming the nearest key, exit 2, before any mount
tmp = tempfile.mkdtemp(prefix="rc-usage-")
try:
    mp = os.path.join(tmp, "mnt")
    os.makedirs(mp)
    ini = os.path.join(tmp, "typo.ini")
    with open(ini, "w") as f:
        f.write("[cache]\nlimt = 8M\n")
    for args, want in (
            (["--limt", "8M"], "unknown option --limt: did you mean --limit?"),
            (["--limit", "8M", "--shard-szie", "1M"],
             "unknown option --shard-szie: did you mean --shard-size?"),
            (["-o", "limit=8M,polcy=lru"], "unknown option -o polcy: did you mean -o policy?"),
            (["--config", ini], "%s:2: [cache] unknown key 'limt': did you mean 'limit'?" % ini)):
        p = run("mount", "file:///nowhere/", mp, *args)
        if not_built("mount", p):
            break
        eq(p.returncode, 2, "mount %s: exit" % args)
        eq(p.stderr, "rollcache mount: %s\n" % want, "mount %s: stderr" % args)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    for f in failures:
        print("FAIL:", f)
    sys.exit(1)
print("ok: %d commands" % len(commands))
