"""pip install ./python: the rollcache package with librollcache inside it.

The package is pure Python over ctypes.  The library it loads is built here,
from the rollcache source tree around this directory, with meson in a
feeder-only configuration (no SQLite, FUSE or libcurl: the package needs
the feeder API alone), and installed as rollcache/librollcache.so.0 next to
the package's modules, where rollcache._lib looks before the system library
path: an installed package finds its library with no environment variable.
A python/ directory copied out of the source tree installs the package
alone, which then loads the library `meson install` put in ld.so's path.
The machine that runs pip needs meson, ninja, a C compiler and zlib's
headers (scripts/deps.sh installs them); with --no-build-isolation pip uses
the installed setuptools and needs no network.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MESON_OPTIONS = ["-Dcatalog=disabled", "-Dfuse=disabled", "-Dcurl=disabled",
                 "-Dsystemd=disabled", "-Dtests=disabled", "--buildtype=release",
                 "-Dwerror=false"]
SONAME = "librollcache.so.0"


class BuildPyWithLibrary(build_py):
    """build_py, then librollcache built by meson into the package."""

    def run(self):
        super().run()
        if not os.path.isfile(os.path.join(ROOT, "meson.build")) or \
                not os.path.isdir(os.path.join(ROOT, "feeder")):
            # python/ copied out of the tree: the package alone, which loads
            # the librollcache.so.0 that `meson install` put in ld.so's path
            sys.stderr.write("rollcache: no rollcache source tree around %s: installing the "
                             "package without librollcache (it loads librollcache.so.0 "
                             "through ld.so: meson install it)\n" % HERE)
            return
        meson = shutil.which("meson")
        if meson is None:
            sys.exit("rollcache: meson not found on PATH: it builds librollcache "
                     "(Debian: apt-get install meson ninja-build gcc zlib1g-dev)")
        bdir = tempfile.mkdtemp(prefix="rollcache-pip-build-")
        try:
            subprocess.check_call([meson, "setup", bdir, ROOT] + MESON_OPTIONS)
            subprocess.check_call([meson, "compile", "-C", bdir, "rollcache:shared_library"])
            dst = os.path.join(self.build_lib, "rollcache", SONAME)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(bdir, SONAME), dst)  # the file the link names
        finally:
            shutil.rmtree(bdir, ignore_errors=True)


class BinaryDistribution(Distribution):
    """A wheel with a native library: tagged for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
