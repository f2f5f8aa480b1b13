"""rollcache: a native TFRecord/tf.Example feeder for PyTorch and NumPy.

    import rollcache, torch
    feeder = rollcache.Feeder("/mnt/train",
                              schema="x:float32[1000000,3],y:int64[1]",
                              batch_size=4, device="cuda:0",
                              shuffle=True, seed=0)
    for epoch in range(3):
        feeder.set_epoch(epoch)       # optional: a loop without it starts the next
        for batch in feeder:          # one epoch, len(feeder) batches
            x, y = batch["x"], batch["y"]   # torch tensors on cuda:0

Several processes (torchrun's RANK / WORLD_SIZE / LOCAL_RANK /
LOCAL_WORLD_SIZE are read when rank and world_size are not given) each
take their share of every epoch's records and get the same number of
batches; state_dict() / load_state_dict() resume mid-epoch at the same
batch (at another world size: the rest of the epoch, split among the new
ranks); rollcache.data.FeederDataset wraps a feeder for
torch.utils.data.DataLoader(ds, batch_size=None) (docs/feeder.md).

Reading, decoding, batching and the host-to-device copy run in native
threads of librollcache (ctypes); batches arrive as DLPack capsules, turned
into torch tensors (framework="torch", the default when torch is already
imported), numpy arrays ("numpy", the default otherwise) or left as
rollcache.View objects that any DLPack consumer takes ("dlpack").  Ragged
features (`ids:int64[]`, `name:bytes`) come as a (values, offsets) pair with
batch + 1 offsets.  Python never parses a record.

A batch's memory is a slot of the feeder's ring, reused once every array
made from it is gone.  Any number of batches may be kept (`list(feeder)`
works): when the batches alive would hold every slot, the new batch is
copied out of its slot into ordinary memory (host, or the device's through
torch) and the slot goes straight back to the ring (docs/feeder.md,
"Holding batches").
"""
import ctypes
import sys
import weakref

from . import _api, _lib
from ._dlpack import BatchHandle, FeederRef, View
from .control import control

__all__ = ["Feeder", "FeederError", "View", "control"]

_lib_handle = None


def _L():
    global _lib_handle
    if _lib_handle is None:
        _lib_handle = _api.declare(_lib.load())
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
    files; in a rollcache mount, MOUNT (or MOUNT/current, MOUNT/epochs/N):
    the feeder then reads MOUNT/epochs/<N + epoch> and asks the mount for
    each next epoch once for all ranks.  schema: "name:dtype[shape],..."
    (docs/feeder.md; "sequence s:int64[10]" reads SequenceExample
    feature_lists as (values [steps, 10], step offsets), "record p:bytes"
    whole records).  device: "cpu" or "cuda:N".  format: "tfrecord" or
    "raw".  compression: "auto" (GZIP and ZLIB told by each file's first
    bytes), "none", "gzip" or "zlib".  framework: "torch", "numpy" or "dlpack"
    (default: torch if the program imported it, else numpy).

    rank, world_size: this process's share of every epoch's records.  None
    (default): from the environment - LOCAL_RANK / LOCAL_WORLD_SIZE in a
    rollcache mount (one mount per node), RANK / WORLD_SIZE elsewhere, 0 of
    1 without them.  Every rank gets len(feeder) batches: drop_last=True
    drops the remainder, False pads it by repeating the epoch's first
    records.  wait_timeout: seconds to wait for an empty first epoch of a
    mount to get data.  mount_epoch: the mount epoch that is epoch 0
    (default: the mount's current one at open).
    """

    def __init__(self, path, schema, batch_size, device="cpu", shuffle=False, seed=0,
                 rank=None, world_size=None, drop_last=False, threads=0, readers=0,
                 ring_slots=0, shuffle_window=0, interleave=0, read_size=0,
                 format="tfrecord", compression="auto", verify_crc=True, pin=None,
                 framework=None, consumer_stream=None, wait_timeout=600, mount_epoch=None):
        L = _L()
        o = _api.FeederOpts()
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
        if world_size is None and rank is not None:
            raise ValueError("rank=%r without world_size" % (rank,))
        o.rank = int(rank or 0)
        o.world_size = 0 if world_size is None else int(world_size)
        if world_size is not None and o.world_size < 1:
            raise ValueError("world_size=%r: expected at least 1" % (world_size,))
        o.wait_ms = max(1, int(wait_timeout * 1000))
        o.mount_epoch = -1 if mount_epoch is None else int(mount_epoch)
        o.drop_last = bool(drop_last)
        o.threads = int(threads)
        o.readers = int(readers)
        o.ring_slots = int(ring_slots)
        o.shuffle_window = int(shuffle_window)
        o.interleave = int(interleave)
        o.read_size = int(read_size)
        o.verify_crc = bool(verify_crc)
        o.format = {"tfrecord": 0, "raw": 1}[format]
        o.compression = {"auto": 0, "none": 1, "gzip": 2, "zlib": 3}[compression]
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
        self._fresh = True  # the next `for` reads the current epoch (else the next one)
        self._loop = None  # weak reference to the generator of the last `for`
        self._start = 0  # the batch index that `for` started at
        self._resplit = None  # (epoch, from_world_size, from_batch) of a resumed epoch
        st = _lib.Stats()
        L.rc_feeder_stats(self._f, ctypes.byref(st))
        self._slots = int(st.ring_slots)
        self.device = o.device
        self.batch_size = int(batch_size)
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        r, w = ctypes.c_uint32(), ctypes.c_uint32()
        L.rc_feeder_split(self._f, ctypes.byref(r), ctypes.byref(w))
        self.rank, self.world_size = r.value, w.value

    # -- iteration --------------------------------------------------------
    def __iter__(self):
        self._check_open()
        if not self._fresh:
            self.next_epoch()
        self._fresh = False
        it = self._epoch()
        self._loop = weakref.ref(it)
        self._start = int(_L().rc_feeder_position(self._f))
        return it

    def _in_loop(self):
        """Whether the generator of the last `for` is alive and not exhausted."""
        it = self._loop() if self._loop is not None else None
        return it is not None and it.gi_frame is not None

    def __len__(self):
        """Batches of the loop that comes next: inside a loop, the epoch it
        reads; between loops, the epoch the next `for` reads - set by
        set_epoch / load_state_dict, else the next one, which len() then
        starts as the `for` would (on a mount: asks the mount for it).  The
        same on every rank."""
        self._check_open()
        in_loop = self._in_loop()
        if not self._fresh and not in_loop:
            self.next_epoch()
        n = ctypes.c_uint64()
        if _L().rc_feeder_batches(self._f, ctypes.byref(n)) < 0:
            raise FeederError(self.error())
        # a resumed epoch's loop starts at the resume point
        start = self._start if in_loop else int(_L().rc_feeder_position(self._f))
        return max(n.value - start, 0)

    def _check_open(self):
        if self._f is None:
            raise FeederError("feeder is closed")

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
        # the batches alive now hold every slot: this one is copied out and
        # its slot returns to the ring when h is dropped below
        copy = self._ref.live >= self._slots
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
                    out[name] = (
                        self._wrap(View(h, data, t.dtype, list(t.shape[:t.ndim]), dev), copy),
                        self._wrap(View(h, offs, 1, [rows + 1], dev), copy))
                else:
                    out[name] = self._wrap(View(h, data, t.dtype, list(t.shape[:t.ndim]), dev),
                                           copy)
            return out
        finally:
            h.decref()  # the views (and arrays made from them) hold the batch now

    def _wrap(self, view, copy=False):
        """The framework's array over view; with copy, a copy in ordinary
        memory that holds no slot."""
        if self.framework == "torch":
            import torch
            t = torch.from_dlpack(view)
            return t.clone() if copy else t
        if self.framework == "numpy":
            import numpy
            a = numpy.from_dlpack(view)
            return a.copy() if copy else a
        if copy:
            return view.copy()
        return view

    # -- control ----------------------------------------------------------
    def next_epoch(self):
        """Ends the epoch, advances a rollcache mount's cache, reshuffles."""
        rc = _L().rc_feeder_next_epoch(self._f)
        self._fresh = True
        if rc < 0:
            raise FeederError(self.error())

    def set_epoch(self, epoch):
        """The next `for` reads epoch `epoch` (torch's DistributedSampler
        convention; in a mount, mount epoch base + epoch, asked for once for
        all ranks).  A no-op when that epoch is the one about to be read."""
        self._check_open()
        if int(epoch) == self.epoch and self._fresh:
            return
        self._seek(int(epoch), 0, -1)

    def _seek(self, epoch, batch, mount_epoch, resplit=None):
        if resplit is None:
            rc = _L().rc_feeder_seek(self._f, epoch, batch, mount_epoch)
        else:
            rc = _L().rc_feeder_seek_resplit(self._f, epoch, batch, mount_epoch, *resplit)
        self._fresh = True
        self._resplit = None if resplit is None else (epoch,) + tuple(resplit)
        if rc < 0:
            raise FeederError(self.error())

    def state_dict(self):
        """Where this rank is: epoch, batches handed out in it, and the
        mount epoch it reads; with the options the position depends on.
        In an epoch resumed at another world size, also the split it was
        resumed from (from_world_size, from_batch)."""
        self._check_open()
        me = self.mount_epoch
        st = {"version": 2, "epoch": self.epoch,
              "batch": int(_L().rc_feeder_position(self._f)),
              "mount_epoch": me, "seed": self.seed, "shuffle": self.shuffle,
              "rank": self.rank, "world_size": self.world_size,
              "batch_size": self.batch_size, "drop_last": self.drop_last}
        if self._resplit is not None and self._resplit[0] == self.epoch:
            st["from_world_size"], st["from_batch"] = self._resplit[1], self._resplit[2]
        return st

    def load_state_dict(self, state):
        """Resumes where state_dict() was taken (by any rank: in synchronous
        data-parallel training every rank is at the same batch): the next
        `for` yields the batches that came after it.  At the same world
        size, the same records as without the stop.  At another world size,
        the records of the epoch the old ranks had not consumed, split among
        the new ranks (docs/feeder.md, "Resume").  Raises ValueError when
        the options that shape the batches differ."""
        self._check_open()
        for k in ("seed", "shuffle", "batch_size", "drop_last"):
            if state.get(k) != getattr(self, k):
                raise ValueError("load_state_dict: %s is %r here, %r in the state"
                                 % (k, getattr(self, k), state.get(k)))
        me = state.get("mount_epoch")
        me = -1 if me is None else int(me)
        epoch, batch, world = int(state["epoch"]), int(state["batch"]), int(state["world_size"])
        if state.get("from_world_size") is not None:
            if world != self.world_size:
                raise ValueError(
                    "load_state_dict: the state was taken at world size %d in epoch %d, "
                    "itself resumed from world size %d: resume it at world size %d, or "
                    "from a state taken after that epoch" % (
                        world, epoch, state["from_world_size"], world))
            self._seek(epoch, batch, me, (int(state["from_world_size"]),
                                          int(state["from_batch"])))
        elif world != self.world_size:
            self._seek(epoch, 0, me, (world, batch))
        else:
            self._seek(epoch, batch, me)

    def advance_to(self, mount_epoch):
        """Asks the rollcache mount for epoch mount_epoch (once for all
        ranks; a no-op when it is there already).  The feeder does not move."""
        self._check_open()
        if _L().rc_feeder_advance_to(self._f, int(mount_epoch)) < 0:
            raise FeederError(self.error())

    def truncate(self, batches):
        """Ends the current epoch after `batches` batches (equalising nodes
        whose mounts hold different numbers of records; FeederDataset does
        it with an all-reduce)."""
        self._check_open()
        _L().rc_feeder_truncate(self._f, int(batches))

    @property
    def mount_epoch(self):
        """The mount epoch the current epoch reads, or None outside a mount."""
        me = int(_L().rc_feeder_mount_epoch(self._f))
        return None if me < 0 else me

    @property
    def position(self):
        """Batches handed out in the current epoch (its next batch index;
        after a resume, counted from the epoch's start)."""
        return int(_L().rc_feeder_position(self._f))

    @property
    def epoch(self):
        return int(_L().rc_feeder_epoch(self._f))

    def error(self):
        return _L().rc_feeder_error(self._f).decode(errors="replace")

    def stats(self):
        s = _lib.Stats()
        _L().rc_feeder_stats(self._f, ctypes.byref(s))
        return {k: getattr(s, k) for k, _ in _lib.Stats._fields_}

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
