#!/usr/bin/python3
"""docs-examples-install-fuse: the documentation runs as written.

1. `meson install --destdir` of the build tree into a scratch root: the
   rollcache binary, librollcache, rollcache(1) and the Python package.
2. `import rollcache` works from /tmp under /usr/bin/python3 with only
   PYTHONPATH set to the installed site directory (what a prefix that is
   not on python's path needs: the library is found through _paths.py, no
   RC_* variable), and `pip install ./python` builds the package.
3. Every ```sh and ```python block of README.md and docs/*.md preceded by
   `<!-- example -->` runs, in file order, from a scratch working
   directory, with the installed `rollcache` first on PATH and no RC_*
   variable.  The examples' fixed paths (/mnt/train, /tmp/remote,
   /tmp/rc-cache) are mapped into the scratch root, so tests can run side
   by side.
4. rollcache(1): `man -l` renders it, and it lists every key that
   `rollcache mount --help` lists; `man -M MANDIR rollcache` finds it.
5. docs/rollcache@.service passes `systemd-analyze verify`.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

RC = os.environ["RC_BIN"]
SRC = os.environ["RC_SRCDIR"]
BUILD = os.path.dirname(os.path.dirname(os.path.abspath(RC)))
PY = "/usr/bin/python3"
failures = []

MARK = re.compile(r"<!--\s*example\s*-->\s*\n```(sh|bash|python)\n(.*?)\n```", re.S)
PATHS = ("/mnt/train", "/tmp/remote", "/tmp/rc-cache")


def check(cond, what):
    if not cond:
        failures.append(what)


def clean_env(root):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RC_") and k not in ("PYTHONPATH", "ROLLCACHE_LIB",
                                                     "LD_LIBRARY_PATH")}
    env["PATH"] = os.path.join(root, "usr/local/bin") + ":/usr/sbin:/usr/bin:/sbin:/bin"
    env["PYTHONPATH"] = site_dir(root)
    env["HOME"] = os.path.join(root, "home")
    return env


def py_env(env):
    """env for /usr/bin/python3.  Under --setup=asan librollcache is
    ASan-instrumented: python3 must load the runtime first (CPython's own
    allocations are not ours: no leak check).  Only python gets it: other
    programs (troff) are not ours either."""
    if not os.environ.get("RC_UNDER_ASAN"):
        return env
    return dict(env, LD_PRELOAD=subprocess.check_output(
        ["gcc", "-print-file-name=libasan.so"]).decode().strip(),
        ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")


def site_dir(root):
    v = "%d.%d" % sys.version_info[:2]
    return os.path.join(root, "usr/local/lib/python%s/dist-packages" % v)


def examples():
    docs = [os.path.join(SRC, "README.md")] + sorted(
        os.path.join(SRC, "docs", f) for f in os.listdir(os.path.join(SRC, "docs"))
        if f.endswith(".md"))
    for path in docs:
        text = open(path, encoding="utf-8").read()
        blocks = [(m.group(1), m.group(2)) for m in MARK.finditer(text)]
        if blocks:
            yield os.path.relpath(path, SRC), blocks


def mounted(mp):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == mp for line in f)


def run_examples(root, env):
    sandbox = os.path.join(root, "sandbox")
    cwd = os.path.join(root, "cwd")
    os.makedirs(cwd)
    os.makedirs(os.path.join(sandbox, "tmp"))  # the parents of PATHS, as on a real system
    os.makedirs(os.path.join(sandbox, "mnt"))
    n = 0
    for doc, blocks in examples():
        n += len(blocks)
        for i, (lang, code) in enumerate(blocks):
            for p in PATHS:
                code = code.replace(p, sandbox + p)
            what = "%s example %d (%s)" % (doc, i + 1, lang)
            cmd = ["bash", "-euo", "pipefail", "-c", code] if lang != "python" else [PY, "-c",
                                                                                    code]
            p = subprocess.run(cmd, cwd=cwd, env=py_env(env) if lang == "python" else env,
                               capture_output=True, text=True,
                               timeout=900)
            print("== %s: exit %d\n%s%s" % (what, p.returncode, p.stdout[-1500:],
                                            p.stderr[-1500:]))
            check(p.returncode == 0, "%s: exit %d\n%s" % (what, p.returncode, p.stderr[-800:]))
            if p.returncode != 0:
                break  # the next blocks of this document build on this one
        mp = sandbox + "/mnt/train"
        if mounted(mp):
            subprocess.run([RC, "umount", mp], capture_output=True, timeout=120)
            check(False, "%s leaves /mnt/train mounted: end it with rollcache umount" % doc)
    check(n >= 4, "only %d examples found" % n)
    return n


def install(root):
    p = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet",
                        "--destdir", root], capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, "meson install: %s" % p.stderr[-800:])
    for rel in ("usr/local/bin/rollcache", "usr/local/share/man/man1/rollcache.1",
                os.path.relpath(os.path.join(site_dir(root), "rollcache/_paths.py"), root)):
        check(os.path.exists(os.path.join(root, rel)), "not installed: " + rel)
    return p.returncode == 0


def python_package(root, env):
    p = subprocess.run([PY, "-c", "import rollcache, rollcache._lib as L; lib = L.load(); "
                        "print(rollcache.__file__); print(lib._name)"],
                       cwd="/tmp", env=py_env(env), capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, "import rollcache from /tmp: %s" % p.stderr[-800:])
    lines = p.stdout.split()
    check(len(lines) == 2 and lines[0].startswith(root) and lines[1].startswith(root),
          "the installed package and library, not the tree's: %r" % p.stdout)
    # pip builds the package from python/pyproject.toml (into a target dir)
    if shutil.which("pip3") or shutil.which("pip"):
        src = os.path.join(root, "pysrc")
        shutil.copytree(os.path.join(SRC, "python"), src,
                        ignore=shutil.ignore_patterns("meson.build", "__pycache__"))
        target = os.path.join(root, "pip-target")
        p = subprocess.run([PY, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                            "--no-index", "--target", target, src], env=env,
                           capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, "pip install ./python: %s" % p.stderr[-800:])
        check(os.path.exists(os.path.join(target, "rollcache", "_lib.py")),
              "pip installed no rollcache/_lib.py")


def man_page(root, env):
    page = os.path.join(root, "usr/local/share/man/man1/rollcache.1")
    p = subprocess.run(["man", "-l", page], env=dict(env, MANWIDTH="80", MANPAGER="cat",
                                                    PAGER="cat"),
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "man -l: %s" % p.stderr)
    text = re.sub(".\b", "", p.stdout)
    for section in ("NAME", "SYNOPSIS", "CONFIGURATION", "ENVIRONMENT", "EXIT STATUS"):
        check(section in text, "man page lacks %s" % section)
    helptext = subprocess.run([RC, "mount", "--help"], capture_output=True, text=True).stdout
    flags = re.findall(r"^  --([a-z-]+) ", helptext, re.M)
    check(len(flags) >= 20, "mount --help lists %d flags" % len(flags))
    for f in flags:
        check(("--" + f) in text.replace("\u2010", "-"), "man page lacks --%s" % f)
    p = subprocess.run(["man", "-M", os.path.join(root, "usr/local/share/man"), "rollcache"],
                       env=dict(env, MANPAGER="cat", PAGER="cat"), capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 0 and "rollcache" in p.stdout, "man -M MANDIR rollcache: %s" % p.stderr)


def service(root, env):
    if not shutil.which("systemd-analyze"):
        check(False, "systemd-analyze is missing (apt-get install systemd)")
        return
    unit_dir = os.path.join(root, "units")
    os.makedirs(unit_dir)
    text = open(os.path.join(SRC, "docs", "rollcache@.service")).read()
    text = text.replace("/usr/local/bin/rollcache", os.path.join(root, "usr/local/bin/rollcache"))
    path = os.path.join(unit_dir, "rollcache@train.service")
    with open(path, "w") as f:
        f.write(text)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", path], env=env,
                       capture_output=True, text=True, timeout=120)
    # units it points to (network-online.target) may be missing in a container:
    # only complaints about our own unit count
    ours = [ln for ln in (p.stdout + p.stderr).splitlines() if "rollcache@" in ln]
    check(not ours, "systemd-analyze verify: %s" % "\n".join(ours))
    check("Type=notify" in text, "the unit is Type=notify")


def main():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("SKIP: needs root and /dev/fuse (the examples mount)")
        sys.exit(77)
    root = tempfile.mkdtemp(prefix="rc-docs-")
    try:
        os.makedirs(os.path.join(root, "home"))
        env = clean_env(root)
        if install(root):
            python_package(root, env)
            man_page(root, env)
            service(root, env)
            run_examples(root, env)
    finally:
        mp = os.path.join(root, "sandbox/mnt/train")
        if mounted(mp):
            subprocess.run([RC, "umount", mp], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    if failures:
        sys.exit(1)
    print("ok")


main()
