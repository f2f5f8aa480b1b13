#!/usr/bin/python3
"""`rollcache check` against the real files of ../shared/testdata and bit-flipped copies.

Proves: every real file is accepted with the record count of the testdata
README (the .gz through gzip), and a ZLIB copy of the Example file through
zlib; a copy with one flipped bit (in a length, in a length CRC, in a payload,
in a payload CRC, in a gzip or zlib trailer) or cut short is
rejected with exit code 1 and a message naming FILE: offset N of the first
bad record; usage errors exit 2.  Fails with one line when RC_BIN,
RC_TESTDATA or the check command is missing (meson test sets both).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import missing  # noqa: E402

RC_BIN = os.environ.get("RC_BIN")
TESTDATA = os.environ.get("RC_TESTDATA")

COUNTS = {
    "example__pytorch_data__example.tfrecord": 4,
    "seqex__pytorch_data__sequence_example.tfrecord": 4,
    "example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz": 100,
    "raw__magenta__tfrecord_iterator_test.tfrecord": 3,
}
RAW = "raw__magenta__tfrecord_iterator_test.tfrecord"  # records at 0, 27, 48 (11, 5, 7 bytes)

failures = []


def run(*args):
    p = subprocess.run([RC_BIN, "check", *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    else:
        print("ok:", what.split("\n")[0])


def flipped_copy(tmp, name, pos, mask=0x01, out=None):
    dst = os.path.join(tmp, out or ("flip-%d-" % pos) + name)
    with open(os.path.join(TESTDATA, name), "rb") as f:
        data = bytearray(f.read())
    data[pos] ^= mask
    with open(dst, "wb") as f:
        f.write(data)
    return dst


def main():
    if not RC_BIN or not os.access(RC_BIN, os.X_OK):
        missing("RC_BIN (%s) is not the rollcache executable" % RC_BIN,
                "run the test through meson test, which sets it")
    if not TESTDATA or not os.path.isdir(TESTDATA):
        missing("RC_TESTDATA (%s) is not a directory" % TESTDATA,
                "run the test through meson test (tests/data/tensorflow holds the real "
                "TFRecord files)")
    rc, out, err = run("--help")
    if rc != 0 and "not built" in err:
        missing("rollcache check is not built", err.strip())

    # every real file, with the README's count
    for name, count in COUNTS.items():
        rc, out, err = run("-v", os.path.join(TESTDATA, name))
        expect(rc == 0, "%s accepted (rc %d, %s)" % (name, rc, err.strip()))
        expect(re.search(r": %d records," % count, out) is not None,
               "%s has %d records: %s" % (name, count, out.strip()))
    rc, out, err = run(TESTDATA)
    expect(rc == 0 and "ok: 4 files, 111 records" in out,
           "the testdata directory: 4 files, 111 records (rc %d): %s %s" % (rc, out.strip(), err.strip()))

    with tempfile.TemporaryDirectory() as tmp:
        # one flipped bit in each part of record 1 of the raw file (it starts at offset 27)
        cases = [
            (27 + 0, "length crc mismatch"),       # length field
            (27 + 3, "length crc mismatch"),       # length field, high byte
            (27 + 9, "length crc mismatch"),       # the length's CRC
            (27 + 12 + 2, "payload crc mismatch"),  # payload
            (27 + 12 + 5 + 1, "payload crc mismatch"),  # the payload's CRC
        ]
        for pos, what in cases:
            path = flipped_copy(tmp, RAW, pos)
            rc, out, err = run(path)
            expect(rc == 1, "bit flipped at byte %d: exit 1 (got %d)" % (pos, rc))
            expect("%s: offset 27: %s" % (path, what) in err,
                   "bit flipped at byte %d: names FILE: offset 27: %s\n  got: %s" % (pos, what, err.strip()))
        # a flip in the first record of the example file
        path = flipped_copy(tmp, "example__pytorch_data__example.tfrecord", 40, 0x80)
        rc, out, err = run(path)
        expect(rc == 1 and "%s: offset 0: payload crc mismatch" % path in err,
               "example file, payload bit: exit 1 naming offset 0 (rc %d): %s" % (rc, err.strip()))

        # cut short
        src = os.path.join(TESTDATA, RAW)
        cut = os.path.join(tmp, "cut.tfrecord")
        with open(src, "rb") as f, open(cut, "wb") as g:
            g.write(f.read()[:-1])
        rc, out, err = run(cut)
        expect(rc == 1 and "%s: offset 48: stream ends inside a record" % cut in err,
               "truncated file: exit 1 naming offset 48 (rc %d): %s" % (rc, err.strip()))

        # gzip: a flipped bit in the trailer's CRC32
        gz = "example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz"
        size = os.path.getsize(os.path.join(TESTDATA, gz))
        path = flipped_copy(tmp, gz, size - 6)
        rc, out, err = run(path)
        expect(rc == 1 and "corrupt gzip data" in err and path in err,
               "gzip trailer bit: exit 1 (rc %d): %s" % (rc, err.strip()))

        # ZLIB (TF's ZLIB writer output: a zlib-wrapped deflate stream, as
        # zlib.compress writes): told by its header, read; a flipped bit in its
        # Adler-32 trailer is corrupt zlib data
        import zlib
        with open(os.path.join(TESTDATA, "example__pytorch_data__example.tfrecord"), "rb") as f:
            zdata = zlib.compress(f.read())
        zpath = os.path.join(tmp, "example.tfrecord.zz")
        with open(zpath, "wb") as f:
            f.write(zdata)
        rc, out, err = run("-v", zpath)
        expect(rc == 0 and ": 4 records," in out,
               "zlib file: 4 records (rc %d): %s %s" % (rc, out.strip(), err.strip()))
        with open(zpath, "wb") as f:
            f.write(zdata[:-2] + bytes([zdata[-2] ^ 0x01]) + zdata[-1:])
        rc, out, err = run(zpath)
        expect(rc == 1 and "corrupt zlib data" in err and zpath in err,
               "zlib trailer bit: exit 1 (rc %d): %s" % (rc, err.strip()))

        # a directory with one bad file among good ones: the others are still counted
        d = os.path.join(tmp, "dir")
        os.mkdir(d)
        for name in COUNTS:
            shutil.copy(os.path.join(TESTDATA, name), d)
        flipped_copy(tmp, RAW, 27 + 12 + 2, out=os.path.join("dir", RAW))
        open(os.path.join(d, ".hidden"), "wb").write(b"not a record file")
        rc, out, err = run(d)
        expect(rc == 1 and "4 files, 110 records" in out and "1 bad files, 1 bad records" in out
               and "%s/%s: offset 27: payload crc mismatch" % (d, RAW) in err,
               "directory with one bad file: exit 1 (rc %d): %s %s" % (rc, out.strip(), err.strip()))

    # standard input, through gzip detection
    gz = os.path.join(TESTDATA, "example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz")
    with open(gz, "rb") as f:
        p = subprocess.run([RC_BIN, "check", "-"], stdin=f, capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0 and "1 files, 100 records" in p.stdout,
           "- reads standard input (rc %d): %s %s" % (p.returncode, p.stdout.strip(), p.stderr.strip()))

    # usage errors
    rc, out, err = run()
    expect(rc == 2, "no arguments: exit 2 (got %d)" % rc)
    rc, out, err = run("--bogus", TESTDATA)
    expect(rc == 2 and "unknown option" in err, "unknown option: exit 2 (got %d)" % rc)
    rc, out, err = run("--max-record", "12Q", TESTDATA)
    expect(rc == 2, "bad --max-record: exit 2 (got %d)" % rc)
    rc, out, err = run("--help")
    expect(rc == 0 and "usage: rollcache check" in out, "--help: exit 0 with usage")
    rc, out, err = run("/nonexistent/file.tfrecord")
    expect(rc == 1 and "/nonexistent/file.tfrecord" in err, "missing file: exit 1 naming it")
    # a record above --max-record
    rc, out, err = run("--max-record", "8", os.path.join(TESTDATA, RAW))
    expect(rc == 1 and "offset 0: record length 11 exceeds the cap of 8" in err,
           "--max-record 8: exit 1 at offset 0 (rc %d): %s" % (rc, err.strip()))

    if failures:
        print("%d failures" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
