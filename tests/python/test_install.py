#!/usr/bin/python3
"""The Python package from any interpreter, with no environment variable:

1. pip: a fresh venv (/usr/bin/python3 -m venv --system-site-packages) into
   which `pip install --no-build-isolation --no-index ./python` (offline)
   installed the package - which builds librollcache with meson and puts it
   inside the package (python/setup.py) - runs a Feeder over records in a
   temp directory with only PATH set, from a directory outside the source.
2. meson install: `meson install --destdir` of this build tree; the staged
   package, imported from there (PYTHONPATH: the staging tree is not a
   system prefix), loads the staged library through the path it recorded
   at install time (python/meson.build, _paths.py), not the system's.
3. meson install to /usr/local for real, as root, in a private mount
   namespace (/usr/local a tmpfs, /etc an overlay: nothing outside is
   touched); a C program built with `pkg-config --cflags --libs rollcache`
   runs with only PATH set (the install ran ldconfig).  Not root: this part
   is skipped and says so (the rest still runs and must pass).

usage: test_install.py FDR_GEN BUILD_DIR
Fails with one line when meson, venv/ensurepip, setuptools, wheel, unshare
or pkg-config is missing (scripts/deps.sh installs them).
"""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.abspath(os.environ.get("RC_SRCDIR", os.path.join(os.path.dirname(__file__),
                                                                 "..", "..")))
SPEC = "x:float32[2,3],y:int64"
FILES, RECS = 3, 10

CHECK = r"""
import sys, numpy as np, rollcache
f = rollcache.Feeder(sys.argv[1], schema=%r, batch_size=4, framework="numpy")
ys = sorted(int(v) // 1000 for b in f for v in np.asarray(b["y"]))
f.close()
print(rollcache.__file__)
print(rollcache._lib_handle._name)
print(" ".join(map(str, ys)))
""" % SPEC


def missing(what, fix):
    """A package scripts/deps.sh installs is absent: the machine is broken,
    so the test fails (exit 1) with one line, "FAIL: WHAT: FIX"."""
    print("FAIL: " + " ".join(("%s: %s" % (what, fix)).split()))
    sys.exit(1)


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
    if p.returncode != 0:
        sys.stdout.write(p.stdout.decode(errors="replace")[-6000:])
        raise SystemExit("FAIL: %s exited %d" % (" ".join(cmd), p.returncode))
    return p.stdout.decode()


def check_feeder(python, data, env, cwd, want_prefix, label):
    out = run([python, "-c", CHECK, data], env=env, cwd=cwd).split("\n")
    mod, lib, ys = out[0], out[1], out[2]
    want = " ".join(str(g) for g in range(FILES * RECS))
    assert ys == want, "%s: records %s, expected %s" % (label, ys, want)
    for what, path in (("package", mod), ("library", lib)):
        assert os.path.realpath(path).startswith(os.path.realpath(want_prefix)), \
            "%s: %s %s is not under %s" % (label, what, path, want_prefix)
    print("ok: %s: %d records; package %s; library %s" % (label, FILES * RECS, mod, lib))


C_PROG = r"""
#include <rollcache/feeder.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	char err[512];
	struct rc_feeder_opts o;
	rc_feeder_opts_init(&o);
	o.path = argv[1];
	o.schema = "y:int64";
	o.batch_size = 4;
	struct rc_feeder *f = rc_feeder_open(&o, err, sizeof err);
	if (!f) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	long n = 0;
	struct rc_batch *b;
	while (rc_feeder_next(f, &b) > 0) {
		n += (long)rc_batch_rows(b);
		rc_batch_release(b);
	}
	rc_feeder_close(f);
	printf("%ld records\n", n);
	return 0;
}
"""

SYSTEM_SH = r"""
set -e
# a private mount namespace: /usr/local a fresh tmpfs, /etc an overlay, so
# that the install, its ldconfig and ld.so's cache touch nothing outside
mount --make-rprivate /
mount -t tmpfs rc-prefix /usr/local
mkdir -p "$TMP/etc-up" "$TMP/etc-work"
mount -t overlay rc-etc -o lowerdir=/etc,upperdir="$TMP/etc-up",workdir="$TMP/etc-work" /etc
meson install -C "$BUILD" --no-rebuild --quiet
cd "$TMP"
cc prog.c $(pkg-config --cflags --libs rollcache) -o prog
env -i PATH=/usr/bin:/bin ./prog "$DATA"
"""


def system_install(build, data, tmp):
    """meson install to the build's prefix (/usr/local) as a user types it, in
    a private mount namespace; then `cc prog.c $(pkg-config --cflags --libs
    rollcache)` and the program run with only PATH: the library loads by its
    soname (the install ran ldconfig)."""
    if os.geteuid() != 0:
        print("skip part 3: not root (the system install needs it)")
        return
    if shutil.which("unshare") is None:
        missing("unshare is not installed", "apt-get install util-linux")
    if shutil.which("pkg-config") is None:
        missing("pkg-config is not installed", "run scripts/deps.sh (apt-get install pkg-config)")
    with open(os.path.join(tmp, "prog.c"), "w") as f:
        f.write(C_PROG)
    env = dict(os.environ, TMP=tmp, BUILD=build, DATA=data)
    out = run(["unshare", "-m", "sh", "-c", SYSTEM_SH], env=env)
    want = "%d records" % (FILES * RECS)
    assert want in out, "C program after meson install: %r, expected %r" % (out[-500:], want)
    print("ok: meson install to /usr/local, cc with pkg-config rollcache, run with only PATH: "
          + want)


def main():
    fdr_gen, build = sys.argv[1], sys.argv[2]
    if shutil.which("meson") is None:
        missing("meson is not installed (pip builds librollcache with it)",
                "run scripts/deps.sh (apt-get install meson)")
    probe = subprocess.run(["/usr/bin/python3", "-c", "import ensurepip, venv, setuptools, wheel"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if probe.returncode != 0:
        missing("/usr/bin/python3 lacks venv/ensurepip, setuptools or wheel (%s)"
                % probe.stdout.decode().strip().splitlines()[-1],
                "run scripts/deps.sh (apt-get install python3-venv python3-setuptools "
                "python3-wheel)")
    tmp = tempfile.mkdtemp(prefix="rc-install-")
    try:
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        run([fdr_gen, data, SPEC, str(FILES), str(RECS)])
        bare = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

        # 1. pip into a fresh venv, from a copy of the source tree (pip
        # builds in the tree it is given)
        src = os.path.join(tmp, "src")

        def ignore(d, names):
            top = os.path.realpath(d) == os.path.realpath(SRC)
            return [n for n in names if n in (".git", "node_modules", "__pycache__")
                    or (top and n.startswith("build"))]
        shutil.copytree(SRC, src, ignore=ignore, symlinks=True)
        venv = os.path.join(tmp, "v")
        run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
        run([os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index",
             "--no-cache-dir", "--disable-pip-version-check", os.path.join(src, "python")],
            cwd=tmp)
        shutil.rmtree(src)  # the installed package owes nothing to the tree
        check_feeder(os.path.join(venv, "bin", "python"), data, bare, tmp, venv,
                     "pip install --no-build-isolation ./python, venv, only PATH")

        # 2. meson install of this build tree, staged under DESTDIR
        dest = os.path.join(tmp, "dest")
        run(["meson", "install", "-C", build, "--no-rebuild", "--destdir", dest])
        pkgs = [os.path.join(r, "rollcache") for r, ds, _ in os.walk(dest) if "rollcache" in ds
                and os.path.exists(os.path.join(r, "rollcache", "_paths.py"))]
        assert len(pkgs) == 1, "staged packages: %s" % pkgs
        env = dict(bare, PYTHONPATH=os.path.dirname(pkgs[0]))
        check_feeder("/usr/bin/python3", data, env, tmp, dest, "meson install --destdir")

        # 3. meson install to the system prefix, then a C program built with
        # pkg-config, run with only PATH set
        system_install(build, data, tmp)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
