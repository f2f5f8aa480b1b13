#!/bin/sh
# Run by `meson install` (meson.build, meson.add_install_script) with the
# prefix and the library directory: after an install to a system prefix
# (/usr, /usr/local: ld.so searches their library directories) ldconfig
# refreshes ld.so's cache, so that librollcache.so.0 loads by its soname at
# once (ctypes, dlopen, programs linked with -lrollcache).  Not under
# DESTDIR (a staging tree: the target system runs ldconfig) nor for another
# prefix, whose library directory ld.so does not search (the Python package
# finds the library there through the path it recorded, python/meson.build).
prefix=$1
libdir=$2
if [ -n "$DESTDIR" ]; then
	echo "rollcache: DESTDIR is set: ldconfig is left to the target system"
	exit 0
fi
case $prefix in
/usr | /usr/local) ;;
*)
	echo "rollcache: $prefix is not a system prefix: ldconfig not run" \
		"(other programs find librollcache.so.0 with LD_LIBRARY_PATH=$libdir)"
	exit 0
	;;
esac
if [ "$(id -u)" != 0 ]; then
	echo "rollcache: not root: run ldconfig as root, then librollcache.so.0 loads by its soname"
	exit 0
fi
PATH=$PATH:/sbin:/usr/sbin
ldconfig || exit 1
if ldconfig -p | grep -q "librollcache\.so\.0 "; then
	echo "rollcache: ldconfig: librollcache.so.0 loads by its soname"
else
	echo "rollcache: ld.so does not search $libdir: add it to /etc/ld.so.conf.d/ and run ldconfig"
fi
