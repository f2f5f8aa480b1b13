"""ctypes declarations of the feeder API's ABI 2 (include/rollcache/feeder.h):
the options' new fields and the functions for ranks, resuming and mounts.

_lib.py finds and loads the library and declares ABI 1; this module
completes the declarations on the loaded handle (declare()).  Once _lib.py's
FeederOpts has the ABI 2 fields this module adds none twice.
"""
import ctypes

from . import _lib

RC_FEEDER_ABI = 2

_NEW_FIELDS = [
    ("wait_ms", ctypes.c_uint32),
    ("mount_epoch", ctypes.c_int64),
]


class FeederOpts(ctypes.Structure):
    _fields_ = list(_lib.FeederOpts._fields_) + [
        f for f in _NEW_FIELDS if f[0] not in dict(_lib.FeederOpts._fields_)]


def declare(lib):
    """Declares the ABI 2 functions on lib (a loaded librollcache)."""
    P = ctypes.c_void_p
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    lib.rc_feeder_opts_init.argtypes = [ctypes.POINTER(FeederOpts)]
    lib.rc_feeder_opts_init.restype = None
    lib.rc_feeder_open.argtypes = [ctypes.POINTER(FeederOpts), ctypes.c_char_p, ctypes.c_size_t]
    lib.rc_feeder_open.restype = P
    lib.rc_feeder_batches.argtypes = [P, ctypes.POINTER(u64)]
    lib.rc_feeder_batches.restype = ctypes.c_int
    lib.rc_feeder_position.argtypes = [P]
    lib.rc_feeder_position.restype = u64
    lib.rc_feeder_split.argtypes = [P, ctypes.POINTER(u32), ctypes.POINTER(u32)]
    lib.rc_feeder_split.restype = None
    lib.rc_feeder_mount_epoch.argtypes = [P]
    lib.rc_feeder_mount_epoch.restype = ctypes.c_int64
    lib.rc_feeder_advance_to.argtypes = [P, u64]
    lib.rc_feeder_advance_to.restype = ctypes.c_int
    lib.rc_feeder_seek.argtypes = [P, u64, u64, ctypes.c_int64]
    lib.rc_feeder_seek.restype = ctypes.c_int
    lib.rc_feeder_seek_resplit.argtypes = [P, u64, u64, ctypes.c_int64, u32, u64]
    lib.rc_feeder_seek_resplit.restype = ctypes.c_int
    lib.rc_feeder_truncate.argtypes = [P, u64]
    lib.rc_feeder_truncate.restype = None
    return lib
