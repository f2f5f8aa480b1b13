"""DLPack (v0.x, unversioned "dltensor" capsules) in ctypes.

A View is one tensor of a batch: an object with __dlpack__ and
__dlpack_device__, so numpy.from_dlpack and torch.from_dlpack take it
without a copy.  Each capsule's DLManagedTensor holds a reference on the
batch; its deleter (called by the consumer when its array dies, or by the
capsule destructor when the capsule was never consumed) drops it.  The batch
goes back to the feeder's ring when its last view and last consumer array
are gone.  Python never touches the bytes.
"""
import ctypes
import itertools
import threading

kDLCPU, kDLCUDA = 1, 2
kDLInt, kDLUInt, kDLFloat = 0, 1, 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _Deleter),
]

_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# manager_ctx -> (DLManagedTensor, shape, strides, batch handle): kept alive
# until the deleter runs.
_live = {}
_live_lock = threading.Lock()
_ids = itertools.count(1)


def _delete(key):
    with _live_lock:
        entry = _live.pop(key, None)
    if entry is not None:
        entry[3].decref()


@_Deleter
def _deleter(mt):
    try:
        _delete(mt.contents.manager_ctx)
    except Exception:  # never raise into C
        pass


@_CapsuleDestructor
def _capsule_destructor(cap):
    try:
        if _api.PyCapsule_IsValid(cap, b"dltensor"):
            ptr = _api.PyCapsule_GetPointer(cap, b"dltensor")
            mt = ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor))
            _delete(mt.contents.manager_ctx)
    except Exception:
        pass


class FeederRef:
    """Keeps the C feeder alive while batches of it are alive: close() only
    marks it closing when batches are out; the last release closes it."""

    def __init__(self, lib, ptr):
        self.lib = lib
        self.ptr = ptr
        self.live = 0
        self.closing = False
        self.lock = threading.Lock()

    def acquire(self):
        with self.lock:
            self.live += 1

    def release(self, batch):
        with self.lock:
            self.lib.rc_batch_release(batch)
            self.live -= 1
            last = self.closing and self.live == 0 and self.ptr
            if last:
                ptr, self.ptr = self.ptr, None
        if last:
            self.lib.rc_feeder_close(ptr)

    def close(self):
        with self.lock:
            self.closing = True
            ptr = self.ptr if self.live == 0 else None
            if ptr:
                self.ptr = None
        if ptr:
            self.lib.rc_feeder_close(ptr)


class BatchHandle:
    """Counts the Python-side owners of one rc_batch; releases it at zero."""

    def __init__(self, owner, ptr):
        self._owner = owner  # FeederRef
        self._ptr = ptr
        self._n = 1  # the creator (the iterator) until its decref
        self._lock = threading.Lock()
        owner.acquire()

    def incref(self):
        with self._lock:
            self._n += 1

    def decref(self):
        with self._lock:
            self._n -= 1
            last = self._n == 0
        if last and self._ptr:
            ptr, self._ptr = self._ptr, None
            self._owner.release(ptr)


class _Owned:
    """The handle of a View over memory it owns (View.copy): no ring slot."""

    def __init__(self, buf):
        self._buf = buf

    def incref(self):
        pass

    def decref(self):
        pass


_DT = {0: (kDLFloat, 32), 1: (kDLInt, 64), 2: (kDLUInt, 8), 3: (kDLUInt, 8)}
_ITEM = {0: 4, 1: 8, 2: 1, 3: 1}
_NP = {0: "float32", 1: "int64", 2: "uint8", 3: "uint8"}


class View:
    """One array of a batch (a fixed feature, or a ragged feature's values or
    offsets).  Exposes __dlpack__ / __dlpack_device__; holds the batch until
    it and every array made from it are gone."""

    __slots__ = ("_handle", "_ptr", "_dtype", "_shape", "_device", "__weakref__")

    def __init__(self, handle, ptr, dtype, shape, device):
        self._handle = handle
        handle.incref()
        self._ptr = ptr
        self._dtype = dtype
        self._shape = tuple(int(s) for s in shape)
        self._device = device  # -1 host

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h is not None:
            self._handle = None
            h.decref()

    @property
    def shape(self):
        return self._shape

    def __len__(self):
        return self._shape[0] if self._shape else 0

    @property
    def dtype(self):
        return _NP[self._dtype]

    def __dlpack_device__(self):
        if self._device >= 0:
            return (kDLCUDA, self._device)
        return (kDLCPU, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # The feeder synchronised the copy event before handing the batch
        # out, so the data is ready for any stream: nothing to do for `stream`.
        # Newer consumers pass max_version/dl_device/copy (array API 2023):
        # we answer with a legacy "dltensor" capsule, which they accept.
        if copy:
            raise BufferError("rollcache.View cannot copy; call .copy() on the result")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("rollcache.View lives on %s" % (self.__dlpack_device__(),))
        ndim = len(self._shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self._shape)
        strides = (ctypes.c_int64 * max(ndim, 1))()
        acc = 1
        for i in range(ndim - 1, -1, -1):
            strides[i] = acc
            acc *= self._shape[i]
        mt = DLManagedTensor()
        code, bits = _DT[self._dtype]
        mt.dl_tensor.data = self._ptr
        mt.dl_tensor.device = DLDevice(*self.__dlpack_device__())
        mt.dl_tensor.ndim = ndim
        mt.dl_tensor.dtype = DLDataType(code, bits, 1)
        mt.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        mt.dl_tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        mt.dl_tensor.byte_offset = 0
        key = next(_ids)
        mt.manager_ctx = key
        mt.deleter = _deleter
        self._handle.incref()
        with _live_lock:
            _live[key] = (mt, shape, strides, self._handle)
        return _api.PyCapsule_New(ctypes.addressof(mt), b"dltensor", _capsule_destructor)

    def copy(self):
        """A View of a copy of this array in ordinary host memory, which
        holds no ring slot.  Host views only: a device view has no copy
        without a framework (torch.from_dlpack(view).clone())."""
        if self._device >= 0:
            raise BufferError("rollcache.View.copy: a device view; copy it with torch "
                              "(framework='torch'), or keep fewer than ring_slots batches")
        n = _ITEM[self._dtype]
        for d in self._shape:
            n *= d
        buf = (ctypes.c_uint8 * max(n, 1))()
        ctypes.memmove(buf, self._ptr, n)
        return View(_Owned(buf), ctypes.addressof(buf), self._dtype, self._shape, -1)

    def __repr__(self):
        return "rollcache.View(shape=%s, dtype=%s, device=%s)" % (
            self._shape, self.dtype, "cpu" if self._device < 0 else "cuda:%d" % self._device)
