"""ctypes declarations of librollcache's feeder API (include/rollcache/feeder.h).

The layouts below mirror the C structs field by field; RC_FEEDER_ABI guards
them (rc_feeder_opts_init writes it and rc_feeder_open checks it).
"""
import ctypes
import ctypes.util
import os

RC_FEEDER_ABI = 1
RC_TENSOR_MAX_DIMS = 9

DT_FLOAT32, DT_INT64, DT_UINT8, DT_BYTES = 0, 1, 2, 3


class FeederOpts(ctypes.Structure):
    _fields_ = [
        ("abi", ctypes.c_uint32),
        ("path", ctypes.c_char_p),
        ("paths", ctypes.POINTER(ctypes.c_char_p)),
        ("n_paths", ctypes.c_size_t),
        ("format", ctypes.c_int32),
        ("compression", ctypes.c_int32),
        ("schema", ctypes.c_char_p),
        ("batch_size", ctypes.c_uint64),
        ("shuffle", ctypes.c_bool),
        ("drop_last", ctypes.c_bool),
        ("verify_crc", ctypes.c_bool),
        ("seed", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("world_size", ctypes.c_uint32),
        ("threads", ctypes.c_uint32),
        ("readers", ctypes.c_uint32),
        ("ring_slots", ctypes.c_uint32),
        ("shuffle_window", ctypes.c_uint32),
        ("interleave", ctypes.c_uint32),
        ("read_size", ctypes.c_uint64),
        ("ragged_hint", ctypes.c_uint64),
        ("device", ctypes.c_int32),
        ("pin", ctypes.c_int32),
        ("consumer_stream", ctypes.c_void_p),
        ("busy_timeout_ms", ctypes.c_uint32),
    ]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * RC_TENSOR_MAX_DIMS),
        ("data", ctypes.c_void_p),
        ("device_data", ctypes.c_void_p),
        ("nbytes", ctypes.c_uint64),
        ("offsets", ctypes.c_void_p),
        ("device_offsets", ctypes.c_void_p),
        ("device", ctypes.c_int32),
        ("ragged", ctypes.c_int32),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("records", ctypes.c_uint64),
        ("batches", ctypes.c_uint64),
        ("bytes_read", ctypes.c_uint64),
        ("record_bytes", ctypes.c_uint64),
        ("wait_ns", ctypes.c_uint64),
        ("h2d_bytes", ctypes.c_uint64),
        ("h2d_ns", ctypes.c_uint64),
        ("allocations", ctypes.c_uint64),
        ("files", ctypes.c_uint32),
        ("device", ctypes.c_int32),
        ("pinned", ctypes.c_int32),
        ("ring_slots", ctypes.c_uint32),
    ]


def _candidates():
    """Where librollcache may be, in order: $ROLLCACHE_LIB, $RC_LIBDIR (a
    build tree), next to the package, where `meson install` put it
    (_paths.py: relative to the package, then absolute), the soname through
    the dynamic linker's path, ctypes.util.find_library."""
    env = os.environ.get("ROLLCACHE_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = []
    libdir = os.environ.get("RC_LIBDIR")
    if libdir:
        dirs.append(libdir)
    dirs += [here, os.path.dirname(here)]
    try:
        from . import _paths
    except ImportError:  # the source tree: no install
        _paths = None
    if _paths is not None:
        dirs += [os.path.normpath(os.path.join(here, _paths.LIBDIR_REL)), _paths.LIBDIR]
    for d in dirs:
        for n in ("librollcache.so", "librollcache.so.0"):
            yield os.path.join(d, n)
    yield "librollcache.so.0"  # the installed soname, through ld.so's path
    found = ctypes.util.find_library("rollcache")
    if found:
        yield found


def load():
    """Finds and loads librollcache (see _candidates for the order).  Raises
    OSError naming where it looked."""
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        _declare(lib)
        return lib
    raise OSError("librollcache.so not found; set ROLLCACHE_LIB to its path (tried: %s)"
                  % ", ".join(tried))


def _declare(lib):
    P = ctypes.c_void_p
    lib.rc_feeder_opts_init.argtypes = [ctypes.POINTER(FeederOpts)]
    lib.rc_feeder_opts_init.restype = None
    lib.rc_feeder_open.argtypes = [ctypes.POINTER(FeederOpts), ctypes.c_char_p, ctypes.c_size_t]
    lib.rc_feeder_open.restype = P
    lib.rc_feeder_next.argtypes = [P, ctypes.POINTER(P)]
    lib.rc_feeder_next.restype = ctypes.c_int
    lib.rc_feeder_next_epoch.argtypes = [P]
    lib.rc_feeder_next_epoch.restype = ctypes.c_int
    lib.rc_feeder_epoch.argtypes = [P]
    lib.rc_feeder_epoch.restype = ctypes.c_uint64
    lib.rc_feeder_error.argtypes = [P]
    lib.rc_feeder_error.restype = ctypes.c_char_p
    lib.rc_feeder_stats.argtypes = [P, ctypes.POINTER(Stats)]
    lib.rc_feeder_stats.restype = None
    lib.rc_feeder_close.argtypes = [P]
    lib.rc_feeder_close.restype = None
    lib.rc_batch_rows.argtypes = [P]
    lib.rc_batch_rows.restype = ctypes.c_uint64
    lib.rc_batch_epoch.argtypes = [P]
    lib.rc_batch_epoch.restype = ctypes.c_uint64
    lib.rc_batch_index.argtypes = [P]
    lib.rc_batch_index.restype = ctypes.c_uint64
    lib.rc_batch_count.argtypes = [P]
    lib.rc_batch_count.restype = ctypes.c_size_t
    lib.rc_batch_at.argtypes = [P, ctypes.c_size_t]
    lib.rc_batch_at.restype = ctypes.POINTER(Tensor)
    lib.rc_batch_get.argtypes = [P, ctypes.c_char_p]
    lib.rc_batch_get.restype = ctypes.POINTER(Tensor)
    lib.rc_batch_release.argtypes = [P]
    lib.rc_batch_release.restype = None
