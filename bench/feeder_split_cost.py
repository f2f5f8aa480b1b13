#!/usr/bin/python3
"""bench/feeder_split_cost.py - what the feeder's record-level rank split
costs (docs/feeder.md, "Counting records").

  /usr/bin/python3 bench/feeder_split_cost.py DIR SCHEMA [--cold] [--reps N]

Times, on the files of DIR (a plain directory, or a mount's epochs/N):
  count   rollcache.Feeder(DIR, SCHEMA, 64, world_size=2, rank=0) + len():
          the framing pass that counts every file's records
  read    the whole epoch read and decoded with world_size=1 (no count)
--cold drops the page cache before each figure (echo 3 >
/proc/sys/vm/drop_caches: root); without it both run warm (one untimed
read first).  Prints the median of --reps runs (default 3).  Run with
RC_LIBDIR=BUILD_DIR from a checkout, or after `meson install`.
"""
import os
import statistics
import sys
import time

if os.environ.get("RC_LIBDIR"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import rollcache  # noqa: E402


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def count(path, schema):
    f = rollcache.Feeder(path, schema, 64, world_size=2, rank=0)
    n = len(f)
    f.close()
    return n


def read_all(path, schema):
    f = rollcache.Feeder(path, schema, 64, world_size=1, rank=0)
    n = sum(1 for _ in f)
    f.close()
    return n


def timed(fn, cold, *args):
    if cold:
        drop_caches()
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    path, schema = args
    cold = "--cold" in sys.argv
    reps = 3
    if "--reps" in sys.argv:
        reps = int(sys.argv[sys.argv.index("--reps") + 1])
    if not cold:
        read_all(path, schema)  # warm the page cache
    c = [timed(count, cold, path, schema) for _ in range(reps)]
    r = [timed(read_all, cold, path, schema) for _ in range(reps)]
    print("%s: count (world_size=2, len) %.3f s, whole read (world_size=1) %.3f s, %s, "
          "median of %d" % (path, statistics.median(c), statistics.median(r),
                            "cold" if cold else "warm", reps))


if __name__ == "__main__":
    main()
