#!/usr/bin/python3
"""The Python binding (python/rollcache) over librollcache.so, with numpy and
torch (python3-torch) as DLPack consumers.

usage: test_feeder.py FDR_GEN [--gpu | --mock]

Data comes from fdr_gen (formulas in tests/feeder/fdr_gen.h, repeated here
in numpy as the oracle).  Without python3-torch (scripts/deps.sh installs
it) the host test fails with one line.  --gpu runs the device test only: it
exits 77 where the machine has no NVIDIA device node, or where the torch
installed is built without CUDA (Debian's is: no package of deps.sh can
read the device batches back), and fails where it has a device node and
the feeder's device path does not open.
"""
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

# Under `meson test --setup=asan` librollcache.so is ASan-instrumented: the
# meson's MALLOC_PERTURB_ makes glibc fill every block at malloc and free;
# each feeder's ring of batch slots (tens of MB) made this test 14.7 s
# instead of 3.1 s.  M_PERTURB is -6 in glibc's <malloc.h>.
if "MALLOC_PERTURB_" in os.environ and not os.environ.get("RC_UNDER_ASAN"):
    import ctypes
    ctypes.CDLL(None).mallopt(-6, 0)

# ASan runtime must be loaded first, so run again with it preloaded
# (CPython's own allocations are not ours: leak checks off).
if os.environ.get("RC_UNDER_ASAN") and "libasan" not in os.environ.get("LD_PRELOAD", ""):
    libasan = subprocess.check_output(["gcc", "-print-file-name=libasan.so"]).decode().strip()
    env = dict(os.environ, LD_PRELOAD=libasan,
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import numpy as np  # noqa: E402

SRC = os.environ.get("RC_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
import rollcache  # noqa: E402

FDR_GEN = None
SPEC = "x:float32[2,3],y:int64,ids:int64[],name:bytes,m:uint8[5]"
NFILES, NREC = 4, 29
TOTAL = NFILES * NREC



def gpu_present():
    """An NVIDIA device node: without one --gpu skips before torch is
    imported (seconds, more under the sanitizers)."""
    return any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"))


torch = None
if "--mock" not in sys.argv and ("--gpu" not in sys.argv or gpu_present()):
    try:
        import torch
    except ImportError:
        print("FAIL: python3-torch is not installed: run scripts/deps.sh "
              "(apt-get install python3-torch)")
        sys.exit(1)


def o_f32(g, j, e):
    return ((g % 4096) + (e % 1024) * 0.5 + j).astype(np.float32)


def o_i64(g, j, e):
    v = g * 1000 + e + j
    return np.where(e % 2 == 1, -v, v).astype(np.int64)


def o_u8(g, j, e):
    return ((g * 7 + e + j) & 255).astype(np.uint8)


def gen(d, spec=SPEC, files=NFILES, recs=NREC, extra=None):
    args = [FDR_GEN, d, spec, str(files), str(recs)] + ([extra] if extra else [])
    rc = os.spawnv(os.P_WAIT, FDR_GEN, args)
    assert rc == 0, "fdr_gen failed: %d" % rc


def check_batch(tc, b):
    """Checks every value of a numpy batch against the oracle; returns g's."""
    y = np.asarray(b["y"])
    g = (y // 1000).astype(np.int64)
    n = len(g)
    np.testing.assert_array_equal(y, o_i64(g, 1, np.zeros(n, np.int64)))
    e = np.arange(6)
    want_x = o_f32(g[:, None], 0, e[None, :]).reshape(n, 2, 3)
    np.testing.assert_array_equal(np.asarray(b["x"]), want_x)
    m = np.asarray(b["m"])
    np.testing.assert_array_equal(m, o_u8(g[:, None], 4, np.arange(5)[None, :]))
    vals, offs = (np.asarray(a) for a in b["ids"])
    tc.assertEqual(offs.shape, (n + 1,))
    tc.assertEqual(offs[0], 0)
    for r in range(n):
        row = vals[offs[r]:offs[r + 1]]
        tc.assertEqual(len(row), (g[r] + 2) % 4)
        np.testing.assert_array_equal(row, o_i64(g[r], 2, np.arange(len(row))))
    nv, no = (np.asarray(a) for a in b["name"])
    for r in range(n):
        row = nv[no[r]:no[r + 1]]
        tc.assertEqual(len(row), (g[r] + 3) % 7)
        np.testing.assert_array_equal(row, o_u8(g[r], 3, np.arange(len(row))))
    return list(g)


def _epoch_of(tc, kw, epoch):
    """The g's of each batch of `epoch` read by a fresh feeder (reference)."""
    f = rollcache.Feeder(tc.data, **kw)
    f.set_epoch(epoch)
    out = [check_batch(tc, b) for b in f]
    f.close()
    return out


class FeederPython(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rc-feeder-py-")
        cls.data = os.path.join(cls.tmp, "data")
        os.mkdir(cls.data)
        gen(cls.data)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_numpy_exactly_once_two_epochs(self):
        f = rollcache.Feeder(self.data, schema=SPEC, batch_size=8, device="cpu",
                             shuffle=True, seed=5, framework="numpy")
        orders = []
        for epoch in range(2):
            seen = []
            for b in f:
                self.assertIsInstance(b["x"], np.ndarray)
                self.assertEqual(b["x"].dtype, np.float32)
                seen += check_batch(self, b)
            self.assertEqual(sorted(seen), list(range(TOTAL)))
            orders.append(seen)
            self.assertEqual(f.epoch, epoch)
        self.assertNotEqual(orders[0], orders[1])  # reshuffled per epoch
        f.close()

    def test_rank_split(self):
        """Records, not files, are split: equal batches, the padding repeats,
        drop_last drops; ranks disjoint but for the padding, complete."""
        for drop in (False, True):
            allg, lens = [], []
            for rank in range(3):
                f = rollcache.Feeder(self.data, schema=SPEC, batch_size=5, rank=rank,
                                     world_size=3, shuffle=True, seed=1, drop_last=drop,
                                     framework="numpy")
                self.assertEqual((f.rank, f.world_size), (rank, 3))
                n = 0
                for b in f:
                    allg += check_batch(self, b)
                    n += 1
                self.assertEqual(n, len(f))
                lens.append(n)
                f.close()
            share = TOTAL // 3 if drop else -(-TOTAL // 3)
            self.assertEqual(lens, [share // 5 if drop else -(-share // 5)] * 3)
            if drop:
                self.assertEqual(len(allg), len(set(allg)))
                self.assertEqual(len(allg), 3 * (share // 5 * 5))
            else:
                self.assertEqual(sorted(set(allg)), list(range(TOTAL)))  # complete
                self.assertEqual(len(allg), 3 * share)  # the padding: 3 * 39 - 116

    def test_env_defaults(self):
        env = dict(os.environ, RANK="1", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
        code = ("import rollcache; f = rollcache.Feeder(%r, schema=%r, batch_size=4, "
                "framework='numpy'); print(f.rank, f.world_size, len(f))" % (self.data, SPEC))
        out = subprocess.check_output([sys.executable, "-c", code], env=env,
                                      cwd=os.path.join(SRC, "python")).decode().split()
        self.assertEqual(out, ["1", "2", str(-(-(TOTAL // 2) // 4))])

    def test_len_set_epoch_state_dict(self):
        kw = dict(schema=SPEC, batch_size=4, shuffle=True, seed=9, rank=0, world_size=2,
                  framework="numpy")
        f = rollcache.Feeder(self.data, **kw)
        want = -(-(TOTAL // 2) // 4)
        self.assertEqual(len(f), want)
        epochs = []
        for e in range(2):
            f.set_epoch(e)
            epochs.append([check_batch(self, b) for b in f])
            self.assertEqual(len(epochs[-1]), want)
        # set_epoch back to 1 reads the same epoch again
        f.set_epoch(1)
        self.assertEqual([check_batch(self, b) for b in f], epochs[1])
        # state saved after 3 batches of epoch 1, resumed by a new feeder
        f.set_epoch(1)
        it = iter(f)
        for _ in range(3):
            next(it)
        st = f.state_dict()
        self.assertEqual((st["epoch"], st["batch"], st["mount_epoch"]), (1, 3, None))
        f.close()
        g = rollcache.Feeder(self.data, **kw)
        g.load_state_dict(st)
        g.set_epoch(1)  # the usual loop calls it again: keeps the resume point
        self.assertEqual([check_batch(self, b) for b in g], epochs[1][3:])
        # and the loop after it reads epoch 2, as a run without the stop does
        self.assertEqual([check_batch(self, b) for b in g], _epoch_of(self, kw, 2))
        bad = dict(st, seed=10)
        with self.assertRaises(ValueError):
            g.load_state_dict(bad)
        g.close()

    def test_list_holds_every_batch(self):
        """list(feeder) over 3,000 records in batches of 32: 94 batches held
        at once with 4 ring slots, every one intact (the batches beyond the
        slots are copies, the first ones still the slots' memory)."""
        d = os.path.join(self.tmp, "hold")
        os.mkdir(d)
        gen(d, SPEC, 4, 750)
        frameworks = ["numpy", "dlpack", "torch"]
        for fw in frameworks:
            f = rollcache.Feeder(d, schema=SPEC, batch_size=32, shuffle=True, seed=3,
                                 framework=fw)
            self.assertEqual(f.stats()["ring_slots"], 4)
            batches = list(f)
            self.assertEqual(len(batches), 94, fw)
            seen = []
            for b in batches:
                if fw == "dlpack":
                    b = {k: (tuple(np.from_dlpack(a) for a in x) if isinstance(x, tuple)
                             else np.from_dlpack(x)) for k, x in b.items()}
                elif fw == "torch":
                    b = {k: (tuple(a.numpy() for a in x) if isinstance(x, tuple)
                             else x.numpy()) for k, x in b.items()}
                seen += check_batch(self, b)
            self.assertEqual(sorted(seen), list(range(3000)), fw)
            # a second epoch while all of the first is still held
            self.assertEqual(sum(1 for _ in f), 94)
            del batches, b
            gc.collect()
            f.close()

    def test_len_is_the_next_loop(self):
        """len() before a loop is the batches that loop yields, with files
        added between epochs (a rolling mount) and no set_epoch; inside a
        loop it is the loop's own epoch (and does not end it)."""
        for world in (1, 2):
            d = os.path.join(self.tmp, "rolling-%d" % world)
            os.mkdir(d)
            gen(d, SPEC, 3, 1000)  # g 0..2999 in part-0000[0-2]
            f = rollcache.Feeder(d, schema=SPEC, batch_size=32, rank=0, world_size=world,
                                 shuffle=True, seed=4, framework="numpy")
            sizes = [(3000 + 3 * 1000 * e) // world for e in range(3)]
            for e in range(3):
                n = len(f)
                self.assertEqual(n, -(-sizes[e] // 32), (world, e))
                got = 0
                for b in f:
                    if got == 0 and e < 2:
                        # the epoch after this one lists 3 more files; the
                        # producer is at most 4 batches ahead, far from the
                        # end where it lists the next epoch
                        more = os.path.join(self.tmp, "more-%d-%d" % (world, e))
                        os.mkdir(more)
                        gen(more, SPEC, 3, 1000)
                        for k in range(3):
                            os.rename(os.path.join(more, "part-%05d.tfrecord" % k),
                                      os.path.join(d, "part-%05d-%d.tfrecord" % (k, e)))
                    if got == 5:
                        self.assertEqual(len(f), n)  # inside the loop: this epoch
                    got += 1
                self.assertEqual(got, n, (world, e))
                self.assertEqual(f.epoch, e)
            f.close()

    def test_resume_at_another_world_size(self):
        """A state taken at world size 1 after 10 batches, loaded at world
        size 2 on ranks 0 and 1: the two read the other records of the
        epoch once each, in the same number of batches; a state taken in
        that resumed epoch resumes it at world size 2."""
        kw = dict(schema=SPEC, batch_size=4, shuffle=True, seed=6, framework="numpy")
        f = rollcache.Feeder(self.data, world_size=1, rank=0, **kw)
        it = iter(f)
        consumed = []
        for _ in range(10):
            consumed += check_batch(self, next(it))
        st = f.state_dict()
        del it
        f.close()
        self.assertEqual((st["epoch"], st["batch"], st["world_size"]), (0, 10, 1))
        rest, lens, states = [], [], []
        for rank in range(2):
            g = rollcache.Feeder(self.data, world_size=2, rank=rank, **kw)
            g.load_state_dict(st)
            g.set_epoch(0)  # the usual loop calls it: keeps the resume point
            n = len(g)
            got = []
            for i, b in enumerate(g):
                got.append(check_batch(self, b))
                if i == 2:
                    states.append(g.state_dict())
            self.assertEqual(len(got), n)
            lens.append(n)
            rest.append(got)
            g.close()
        self.assertEqual(lens[0], lens[1])
        self.assertEqual(lens[0], -(-((TOTAL - 40) // 2) // 4))
        flat = [x for r in rest for bt in r for x in bt]
        self.assertEqual(sorted(consumed + flat), list(range(TOTAL)))  # once each
        # a state taken in the resumed epoch: rank 1 after 3 batches
        self.assertEqual((states[1]["from_world_size"], states[1]["from_batch"],
                          states[1]["batch"]), (1, 10, 3))
        h = rollcache.Feeder(self.data, world_size=2, rank=1, **kw)
        h.load_state_dict(states[1])
        self.assertEqual(len(h), lens[1] - 3)
        self.assertEqual([check_batch(self, b) for b in h], rest[1][3:])
        h.close()
        h = rollcache.Feeder(self.data, world_size=3, rank=0, **kw)
        with self.assertRaises(ValueError):
            h.load_state_dict(states[1])
        h.close()

    def test_feeder_dataset_dataloader(self):
        import rollcache.data
        ds = rollcache.data.FeederDataset(self.data, schema=SPEC, batch_size=8, shuffle=True,
                                          seed=2, rank=1, world_size=2)
        loader = torch.utils.data.DataLoader(ds, batch_size=None)
        for e in range(2):
            ds.set_epoch(e)
            n, ids = 0, []
            for b in loader:
                self.assertIsInstance(b["y"], torch.Tensor)
                ids += [int(v) // 1000 for v in b["y"].reshape(-1)]
                n += 1
            self.assertEqual(n, len(ds))
            self.assertEqual(len(ids), -(-TOTAL // 2))
        ds.close()

    def test_dlpack_views_hold_the_batch(self):
        f = rollcache.Feeder(self.data, schema=SPEC, batch_size=4, framework="dlpack",
                             ring_slots=3)
        it = iter(f)
        first = next(it)
        v = first["x"]
        self.assertEqual(v.__dlpack_device__(), (1, 0))
        kept = np.from_dlpack(v)
        kept_copy = kept.copy()
        del first, v
        gc.collect()
        n = 1
        for b in it:  # the rest of the epoch cycles through the other 2 slots
            check_batch(self, {k: (tuple(np.from_dlpack(a) for a in x) if isinstance(x, tuple)
                                   else np.from_dlpack(x)) for k, x in b.items()})
            n += 1
        self.assertEqual(n, (TOTAL + 3) // 4)
        np.testing.assert_array_equal(kept, kept_copy)  # the held slot was not reused
        del kept
        gc.collect()
        # all slots back: a whole second epoch runs
        self.assertEqual(sum(1 for _ in f), n)
        f.close()

    def test_close_with_live_batch(self):
        f = rollcache.Feeder(self.data, schema=SPEC, batch_size=4, framework="numpy")
        b = next(iter(f))
        want = b["x"].copy()
        f.close()  # the C feeder stays until the batch is dropped
        np.testing.assert_array_equal(b["x"], want)
        check_batch(self, b)
        del b
        gc.collect()

    def test_torch_from_dlpack(self):
        f = rollcache.Feeder(self.data, schema=SPEC, batch_size=8, framework="torch")
        seen = []
        for b in f:
            self.assertIsInstance(b["x"], torch.Tensor)
            self.assertEqual(b["x"].dtype, torch.float32)
            self.assertEqual(b["y"].dtype, torch.int64)
            self.assertEqual(tuple(b["x"].shape[1:]), (2, 3))
            nb = {k: (tuple(t.numpy() for t in v) if isinstance(v, tuple) else v.numpy())
                  for k, v in b.items()}
            seen += check_batch(self, nb)
        self.assertEqual(sorted(seen), list(range(TOTAL)))
        f.close()

    def test_errors_name_file_record_feature(self):
        with self.assertRaises(rollcache.FeederError) as cm:
            rollcache.Feeder(self.data, schema="x:float33", batch_size=2)
        self.assertIn("float33", str(cm.exception))
        f = rollcache.Feeder(self.data, schema="x:float32[2,3],zz:int64", batch_size=2,
                             framework="numpy")
        with self.assertRaises(rollcache.FeederError) as cm:
            for _ in f:
                pass
        msg = str(cm.exception)
        for needle in ("part-00000.tfrecord", "record 0", "'zz'"):
            self.assertIn(needle, msg)
        f.close()

    def test_raw_and_gzip(self):
        raw = os.path.join(self.tmp, "raw")
        os.mkdir(raw)
        gen(raw, "y:int64,x:float32[2,3],m:uint8[5]", 2, 50, "raw")
        f = rollcache.Feeder(raw, schema="y:int64,x:float32[2,3],m:uint8[5]", batch_size=16,
                             format="raw", framework="numpy")
        seen = []
        for b in f:
            g = b["y"] // 1000
            np.testing.assert_array_equal(b["x"].reshape(len(g), 6),
                                          o_f32(g[:, None], 1, np.arange(6)[None, :]))
            seen += list(g)
        self.assertEqual(sorted(seen), list(range(100)))
        f.close()
        gz = os.path.join(self.tmp, "gz")
        os.mkdir(gz)
        gen(gz, SPEC, 2, 20, "gzip")
        f = rollcache.Feeder([os.path.join(gz, n) for n in sorted(os.listdir(gz))], schema=SPEC,
                             batch_size=6, framework="numpy")
        seen = []
        for b in f:
            seen += check_batch(self, b)
        self.assertEqual(sorted(seen), list(range(40)))
        f.close()


    def test_zlib_files(self):
        """ZLIB TFRecords: zlib.compress over TFRecord framing is what TF's ZLIB
        writer writes (its ZlibOutputBuffer deflates with the zlib wrapper)."""
        import zlib
        plain = os.path.join(self.tmp, "zplain")
        zdir = os.path.join(self.tmp, "zlib")
        os.mkdir(plain)
        os.mkdir(zdir)
        gen(plain, SPEC, 2, 20)
        for n in sorted(os.listdir(plain)):
            with open(os.path.join(plain, n), "rb") as fi, \
                    open(os.path.join(zdir, n + ".zz"), "wb") as fo:
                fo.write(zlib.compress(fi.read()))
        for comp in ("auto", "zlib"):
            f = rollcache.Feeder(zdir, schema=SPEC, batch_size=6, framework="numpy",
                                 compression=comp)
            seen = []
            for b in f:
                seen += check_batch(self, b)
            self.assertEqual(sorted(seen), list(range(40)), comp)
            f.close()

    def test_real_sequence_example_and_record_payloads(self):
        td = os.environ.get("RC_TESTDATA", "")
        seqex = os.path.join(td, "seqex__pytorch_data__sequence_example.tfrecord")
        magenta = os.path.join(td, "raw__magenta__tfrecord_iterator_test.tfrecord")
        self.assertTrue(os.path.isfile(seqex) and os.path.isfile(magenta),
                        "RC_TESTDATA (%s) has no real TFRecord files" % td)
        # feature_lists: values [steps, 10], offsets count steps (row splits)
        spec = ("x_int:int64[10], sequence x_int_seq:int64[10], "
                "sequence x_float_seq:float32[10], sequence x_byte_seq:uint8[8]")
        f = rollcache.Feeder(seqex, schema=spec, batch_size=4, framework="numpy",
                             shuffle=True, seed=3)
        b = next(iter(f))
        vals, offs = b["x_int_seq"]
        self.assertEqual(vals.shape, (3 + 5 + 7 + 9, 10))
        self.assertEqual(offs.shape, (5,))
        rec = b["x_int"][:, 0] // 100  # which record each row is
        self.assertEqual(sorted(rec.tolist()), [0, 1, 2, 3])
        fv, fo = b["x_float_seq"]
        bv, bo = b["x_byte_seq"]
        np.testing.assert_array_equal(fo, offs)
        np.testing.assert_array_equal(bo, offs)
        for r, i in enumerate(rec.tolist()):
            steps = offs[r + 1] - offs[r]
            self.assertEqual(steps, 3 + 2 * i)
            want = 10 * (10 * i + np.arange(10))
            np.testing.assert_array_equal(vals[offs[r]:offs[r + 1]],
                                          np.tile(want, (steps, 1)))
            np.testing.assert_array_equal(fv[offs[r]:offs[r + 1]],
                                          np.tile(want / 10, (steps, 1)).astype(np.float32))
            self.assertEqual(bytes(bv[offs[r]:offs[r + 1]].reshape(-1)), b"test str" * steps)
        f.close()
        # the same file fed to an Example schema: an error naming SequenceExample
        f = rollcache.Feeder(seqex, schema="x_int:int64[10]", batch_size=4, framework="numpy")
        with self.assertRaises(rollcache.FeederError) as cm:
            for _ in f:
                pass
        self.assertIn("tf.SequenceExample", str(cm.exception))
        f.close()
        # any TFRecord as whole payloads: magenta's raw strings
        f = rollcache.Feeder(magenta, schema="record payload:bytes", batch_size=3,
                             framework="numpy")
        got = []
        for b in f:
            v, o = b["payload"]
            got += [bytes(v[o[k]:o[k + 1]]) for k in range(len(o) - 1)]
        self.assertEqual(sorted(got), [b"12345", b"hello world", b"success"])
        f.close()


def mock_main():
    """Device mode against tests/feeder/mock_cudart.c ($ROLLCACHE_CUDART):
    the views must describe device memory (kDLCUDA, device_data pointers),
    which the stand-in runtime keeps in host memory, so it can be read here."""
    import ctypes
    d = tempfile.mkdtemp(prefix="rc-feeder-pymock-")
    try:
        gen(d, SPEC, 2, 20)
        f = rollcache.Feeder(d, schema=SPEC, batch_size=8, device="cuda:0", framework="dlpack")
        seen = []
        for b in f:
            v = b["x"]
            assert v.__dlpack_device__() == (2, 0), v.__dlpack_device__()

            def host(view, dtype):
                n = int(np.prod(view.shape))
                buf = (ctypes.c_char * (n * np.dtype(dtype).itemsize)).from_address(view._ptr)
                return np.frombuffer(buf, dtype=dtype).reshape(view.shape).copy()
            nb = {"x": host(b["x"], np.float32), "y": host(b["y"], np.int64),
                  "m": host(b["m"], np.uint8),
                  "ids": (host(b["ids"][0], np.int64), host(b["ids"][1], np.int64)),
                  "name": (host(b["name"][0], np.uint8), host(b["name"][1], np.int64))}
            seen += check_batch(unittest.TestCase(), nb)
        assert sorted(seen) == list(range(40)), seen
        st = f.stats()
        assert st["device"] == 0 and st["pinned"] == 1 and st["h2d_bytes"] > 0, st
        f.close()
        print("ok: device views (mock runtime) equal the oracle")
        return 0
    finally:
        shutil.rmtree(d)


def gpu_main():
    if not gpu_present():
        print("skip: no NVIDIA device node (/dev/nvidiactl, /dev/nvidia0): no GPU here")
        return 77
    d = tempfile.mkdtemp(prefix="rc-feeder-pygpu-")
    try:
        gen(d, SPEC, 2, 20)
        try:
            f = rollcache.Feeder(d, schema=SPEC, batch_size=8, device="cuda:0",
                                 framework="torch")
        except rollcache.FeederError as e:
            # the machine has a GPU: a device path that does not open is broken
            print("FAIL: this machine has a GPU device node but the feeder's "
                  "device path does not open: %s" % e)
            return 1
        if not torch.cuda.is_available():
            print("skip: this torch (%s) is built without CUDA: it cannot read the device "
                  "batches back" % torch.__version__)
            return 77
        seen = []
        for b in f:
            assert b["x"].is_cuda, b["x"].device
            nb = {k: (tuple(t.cpu().numpy() for t in v) if isinstance(v, tuple)
                      else v.cpu().numpy()) for k, v in b.items()}
            seen += check_batch(unittest.TestCase(), nb)
        assert sorted(seen) == list(range(40)), seen
        f.close()
        print("ok: device batches equal the oracle")
        return 0
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    FDR_GEN = sys.argv[1]
    if "--gpu" in sys.argv:
        sys.exit(gpu_main())
    if "--mock" in sys.argv:
        sys.exit(mock_main())
    unittest.main(argv=[sys.argv[0], "-v"])
