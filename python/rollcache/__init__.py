"""rollcache: a native TFRecord/tf.Example feeder for PyTorch and NumPy.

    import rollcache, torch
    feeder = rollcache.Feeder("/mnt/train/current",
                              schema="x:float32[1000000,3],y:int64[1]",
                              batch_size=4, device="cuda:0",
                              shuffle=True, seed=0, rank=0, world_size=1)
    for epoch in range(3):
        for batch in feeder:          # one epoch; the next loop starts the next
            x, y = batch["x"], batch["y"]   # torch tensors on cuda:0

Reading, decoding, batching and the host-to-device copy run in native
threads of librollcache (ctypes); batches arrive as DLPack capsules, turned
into torch tensors (framework="torch", the default when torch is already
imported), numpy arrays ("numpy", the default otherwise) or left as
rollcache.View objects that any DLPack consumer takes ("dlpack").  Ragged
features (`ids:int64[]`, `name:bytes`) come as a (values, offsets) pair with
batch + 1 offsets.  Python never parses a record.

A batch's memory is a slot of the feeder's ring: it is reused once every
array made from it is gone, so keep at most ring_slots batches alive (copy
what you keep).
"""
import ctypes
import sys

from . import _lib
from ._dlpack import BatchHandle, FeederRef, View

__all__ = ["Feeder", "FeederError", "View"]

_lib_handle = None


def _L():
    global _lib_handle
    if _lib_handle is None:
        _lib_handle = _lib.load()
    return _lib_handle


class FeederError(RuntimeError):
    """A feeder failure; the message names the file, record and feature."""


def _parse_device(device):
    if device is None or device == "cpu":
        return -1
    if isinstance(device, int):
        return device
    s = str(device)
    if s == "cuda":
        return 0
    if s.startswith("cuda:"):
        return int(s[5:])
    raise ValueError("device %r: expected 'cpu', 'cuda' or 'cuda:N'" % (device,))


def _default_framework():
    # torch when the program already imported it (importing it here would
    # cost seconds for a numpy user), else numpy
    return "torch" if "torch" in sys.modules else "numpy"


class Feeder:
    """Iterates the batches of one epoch per `for` loop.

    path: a directory (e.g. MOUNTPOINT/current), a glob, a file, or a list of
    files.  schema: "name:dtype[shape],..." (docs/feeder.md).  device: "cpu"
    or "cuda:N".  format: "tfrecord" (GZIP auto-detected) or "raw".
    framework: "torch", "numpy" or "dlpack" (default: torch if the program
    imported it, else numpy).
    """

    def __init__(self, path, schema, batch_size, device="cpu", shuffle=False, seed=0,
                 rank=0, world_size=1, drop_last=False, threads=0, readers=0,
                 ring_slots=0, shuffle_window=0, interleave=0, read_size=0,
                 format="tfrecord", compression="auto", verify_crc=True, pin=None,
                 framework=None, consumer_stream=None):
        L = _L()
        o = _lib.FeederOpts()
        L.rc_feeder_opts_init(ctypes.byref(o))
        self._keep = []
        if isinstance(path, (list, tuple)):
            arr = (ctypes.c_char_p * len(path))(*[str(p).encode() for p in path])
            self._keep.append(arr)
            o.paths = arr
            o.n_paths = len(path)
        else:
            o.path = str(path).encode()
        o.schema = schema.encode()
        o.batch_size = int(batch_size)
        o.shuffle = bool(shuffle)
        o.seed = int(seed)
        o.rank = int(rank)
        o.world_size = int(world_size)
        o.drop_last = bool(drop_last)
        o.threads = int(threads)
        o.readers = int(readers)
        o.ring_slots = int(ring_slots)
        o.shuffle_window = int(shuffle_window)
        o.interleave = int(interleave)
        o.read_size = int(read_size)
        o.verify_crc = bool(verify_crc)
        o.format = {"tfrecord": 0, "raw": 1}[format]
        o.compression = {"auto": 0, "none": 1, "gzip": 2}[compression]
        o.device = _parse_device(device)
        o.pin = -1 if pin is None else int(bool(pin))
        # cudaStream_t the consumer's kernels run on (e.g.
        # torch.cuda.current_stream().cuda_stream); None: the legacy default
        # stream.  A slot's device memory is not overwritten before the work
        # queued there when the batch was dropped has completed.
        o.consumer_stream = consumer_stream
        self.framework = framework or _default_framework()
        if self.framework not in ("torch", "numpy", "dlpack"):
            raise ValueError("framework %r: expected torch, numpy or dlpack" % (framework,))
        if self.framework == "numpy" and o.device >= 0:
            raise ValueError("framework 'numpy' holds host arrays only: use device='cpu', "
                             "or framework='torch' / 'dlpack' for %s" % (device,))
        err = ctypes.create_string_buffer(1024)
        self._opts = o
        self._f = L.rc_feeder_open(ctypes.byref(o), err, len(err))
        if not self._f:
            raise FeederError(err.value.decode(errors="replace"))
        self._ref = FeederRef(L, self._f)
        self._started = False
        self.device = o.device

    # -- iteration --------------------------------------------------------
    def __iter__(self):
        if self._f is None:
            raise FeederError("feeder is closed")
        if self._started:
            self.next_epoch()
        self._started = True
        return self._epoch()

    def _epoch(self):
        L = _L()
        b = ctypes.c_void_p()
        while self._f is not None:
            rc = L.rc_feeder_next(self._f, ctypes.byref(b))
            if rc == 0:
                return
            if rc < 0:
                raise FeederError("%s (errno %d)" % (self.error(), -rc))
            yield self._convert(b.value)

    def _convert(self, ptr):
        L = _L()
        h = BatchHandle(self._ref, ptr)
        try:
            out = {}
            rows = L.rc_batch_rows(ptr)
            for i in range(L.rc_batch_count(ptr)):
                t = L.rc_batch_at(ptr, i).contents
                name = t.name.decode()
                dev = t.device if t.device_data else -1
                data = t.device_data if dev >= 0 else t.data
                if t.ragged:
                    offs = t.device_offsets if dev >= 0 else t.offsets
                    out[name] = (self._wrap(View(h, data, t.dtype, [t.shape[0]], dev)),
                                 self._wrap(View(h, offs, 1, [rows + 1], dev)))
                else:
                    out[name] = self._wrap(View(h, data, t.dtype, list(t.shape[:t.ndim]), dev))
            return out
        finally:
            h.decref()  # the views (and arrays made from them) hold the batch now

    def _wrap(self, view):
        if self.framework == "torch":
            import torch
            return torch.from_dlpack(view)
        if self.framework == "numpy":
            import numpy
            return numpy.from_dlpack(view)
        return view

    # -- control ----------------------------------------------------------
    def next_epoch(self):
        """Ends the epoch, advances a rollcache mount's cache, reshuffles."""
        rc = _L().rc_feeder_next_epoch(self._f)
        if rc < 0:
            raise FeederError(self.error())

    @property
    def epoch(self):
        return int(_L().rc_feeder_epoch(self._f))

    def error(self):
        return _L().rc_feeder_error(self._f).decode(errors="replace")

    def stats(self):
        s = _lib.Stats()
        _L().rc_feeder_stats(self._f, ctypes.byref(s))
        return {k: getattr(s, k) for k, _ in _lib.Stats._fields_ if k != "pad_"}

    def close(self):
        """Stops the feeder.  Batches still alive keep its memory until the
        last of them is dropped."""
        if self._f:
            self._f = None
            self._ref.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
