#!/usr/bin/python3
"""bench/scale_store.py - a synthetic HTTP store of N objects that needs no disk.

Serves, under http://127.0.0.1:PORT/data/, N objects whose keys, sizes and
bytes are computed from their index, so 10^6..10^8 keys cost no disk and no
memory per key:

  format=raw       key dNNNNN/oNNNNNNNNN.bin, S bytes each: sha256(key)
                   repeated (each object's bytes differ).
  format=tfrecord  key dNNNNN/tNNNNNNNNN.tfrecord, R records of B payload
                   bytes each, in valid TFRecord framing (length, masked
                   CRC-32C of the length, payload, masked CRC-32C of the
                   payload), and its sidecar KEY.idx (`offset size` per
                   record, size the framed size: what strategy=records
                   reads, sampler/records.h).  Every object holds the same
                   bytes (record j's payload is derived from j): the CRCs
                   are computed once per process, not per request.

The folder dNNNNN holds --folder consecutive objects (default 100000).

Listing (what sampler/http_list.c reads):
  manifest   /data/MANIFEST: `key size` lines, generated and written in
             chunks as they are sent (never all in memory), with an exact
             Content-Length.  The sampler caps one listing body at
             SMP_LIST_BODY_CAP (64 MiB, sampler/listing.h): about 2.5
             million keys of this shape, so --listing auto switches to
  autoindex  nginx's JSON autoindex (`autoindex_format json`): /data/ lists
             the folders, /data/dNNNNN/ one folder's files (a folder's page
             is built when asked; a page of 10^5 entries is about 8 MB,
             under the sampler's caps of 64 MiB and 2*10^6 entries).
             MANIFEST answers 404 then, as on nginx without one.

The MANIFEST has an ETag, as nginx gives a static file, and an
If-None-Match that matches it answers 304 (counted as
`listing_not_modified`): the keys never change while the store runs.

Objects answer GET and HEAD, with single Range requests (`bytes=a-b`,
`bytes=a-`) as sampler/source.c sends them: 206 with Content-Range; a range
past the end is 416.  Unknown paths are 404.

/.scale/stats (outside the prefix) answers JSON counters for the harness:
requests and body bytes per kind, and one row per listing: when its first
request (the MANIFEST probe) came, when its last listing page was sent and
when the first object GET (not a sidecar) after it began.  A listing starts
with a GET of MANIFEST (the sampler asks for it first, even where it is
404).

Usage:
  /usr/bin/python3 bench/scale_store.py --objects N [--format raw|tfrecord]
      [--size 4096] [--records 1000] [--record-size 256] [--folder 100000]
      [--listing auto|manifest|autoindex] [--port 0]
Prints `PORT <n>` on stdout once it listens; runs until killed.
Python standard library only.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "/data/"
MANIFEST_CAP = 64 << 20  # SMP_LIST_BODY_CAP of sampler/listing.h
MTIME = "Mon, 02 Nov 2026 10:00:00 GMT"
CHUNK_LINES = 20000

# TFRecord framing: the tests' own writer (length, masked CRC-32C of it,
# payload, masked CRC-32C of the payload)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "sampler"))
from rcsamp import frame as tfrecord  # noqa: E402


def fill(seed, n):
    """n bytes: sha256(seed) repeated."""
    h = hashlib.sha256(seed).digest()
    return (h * (n // len(h) + 1))[:n]


# ---- the dataset -----------------------------------------------------------


class Dataset:
    def __init__(self, a):
        self.n, self.fmt, self.folder = a.objects, a.format, a.folder
        self.width = max(9, len(str(max(0, self.n - 1))))
        self.fwidth = max(5, len(str(max(0, (self.n - 1) // self.folder))))
        if self.fmt == "raw":
            self.size = a.size
            self.body = None
        else:
            recs = [tfrecord(fill(b"record %d" % j, a.record_size)) for j in range(a.records)]
            self.body = b"".join(recs)
            off, lines = 0, []
            for r in recs:
                lines.append("%d %d\n" % (off, len(r)))
                off += len(r)
            self.idx = "".join(lines).encode()
            self.size = len(self.body)
        self.stem = "o" if self.fmt == "raw" else "t"
        self.ext = ".bin" if self.fmt == "raw" else ".tfrecord"
        self.key_re = re.compile(r"^d(\d{%d})/%s(\d{%d})%s(\.idx)?$"
                                 % (self.fwidth, self.stem, self.width, re.escape(self.ext)))
        if a.listing == "auto":
            a.listing = "manifest" if self.manifest_len() <= MANIFEST_CAP else "autoindex"
        self.listing = a.listing

    def dirname(self, d):
        return "d%0*d" % (self.fwidth, d)

    def base(self, i):
        return "%s%0*d%s" % (self.stem, self.width, i, self.ext)

    def key(self, i):
        return "%s/%s" % (self.dirname(i // self.folder), self.base(i))

    def entries(self, i):
        """(name relative to the folder, size) of object i and its sidecar."""
        b = self.base(i)
        yield b, self.size
        if self.fmt == "tfrecord":
            yield b + ".idx", len(self.idx)

    def manifest_lines(self, lo, hi):
        out = []
        for i in range(lo, hi):
            d = self.dirname(i // self.folder)
            for name, size in self.entries(i):
                out.append("%s/%s %d\n" % (d, name, size))
        return "".join(out).encode()

    def manifest_len(self):
        one = len(self.manifest_lines(0, 1))  # fixed-width keys: every line the same
        return one * self.n

    def folders(self):
        return (self.n + self.folder - 1) // self.folder

    def root_page(self):
        ents = [json.dumps({"name": self.dirname(d), "type": "directory", "mtime": MTIME})
                for d in range(self.folders())]
        return ("[\n" + ",\n".join(ents) + "\n]\n").encode()

    def folder_page(self, d):
        ents = []
        for i in range(d * self.folder, min(self.n, (d + 1) * self.folder)):
            for name, size in self.entries(i):
                ents.append('{"name":"%s","type":"file","mtime":"%s","size":%d}'
                            % (name, MTIME, size))
        return ("[\n" + ",\n".join(ents) + "\n]\n").encode()

    def object(self, path):
        """(body function, length) of an object path under the prefix, or None."""
        m = self.key_re.match(path)
        if not m:
            return None
        d, i, sidecar = int(m.group(1)), int(m.group(2)), m.group(3)
        if i >= self.n or d != i // self.folder or (sidecar and self.fmt != "tfrecord"):
            return None
        if sidecar:
            return "idx", len(self.idx), lambda lo, hi: self.idx[lo:hi]
        if self.fmt == "tfrecord":
            return "object", self.size, lambda lo, hi: self.body[lo:hi]
        unit = hashlib.sha256(path.encode()).digest()

        def raw(lo, hi):
            k = len(unit)
            rep = unit * ((hi - lo) // k + 2)
            return rep[lo % k:lo % k + hi - lo]
        return "object", self.size, raw


# ---- counters for the harness ---------------------------------------------


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.requests = {}
        self.bytes = {}
        self.listings = []  # [start, last page sent, first object GET after]

    def count(self, kind, nbytes):
        with self.mu:
            self.requests[kind] = self.requests.get(kind, 0) + 1
            self.bytes[kind] = self.bytes.get(kind, 0) + nbytes

    def listing_start(self, t):
        with self.mu:
            self.listings.append([t, None, None])

    def listing_sent(self, t):
        with self.mu:
            if self.listings:
                self.listings[-1][1] = t

    def object_start(self, t):
        with self.mu:
            if self.listings and self.listings[-1][2] is None:
                self.listings[-1][2] = t

    def json(self, ds):
        with self.mu:
            return json.dumps({"objects": ds.n, "format": ds.fmt, "listing": ds.listing,
                               "object_size": ds.size, "requests": self.requests,
                               "bytes": self.bytes, "listings": self.listings,
                               "now": time.time()}).encode()


RANGE_RE = re.compile(r"^bytes=(\d+)-(\d*)$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: curl reuses its connections
    server_version = "scale-store"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body=b"", ctype="application/octet-stream", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        ds, st = self.server.ds, self.server.st
        path = self.path.split("?", 1)[0]
        now = time.time()
        if path == "/.scale/stats":
            return self.reply(200, st.json(ds), "application/json")
        if not path.startswith(PREFIX):
            return self.reply(404, b"not found\n", "text/plain")
        rel = path[len(PREFIX):]
        if rel == "MANIFEST":
            st.listing_start(now)
            if ds.listing != "manifest":
                return self.reply(404, b"not found\n", "text/plain")
            etag = '"%x-%x"' % (ds.n, ds.manifest_len())
            if self.headers.get("If-None-Match") == etag:
                st.count("listing_not_modified", 0)
                st.listing_sent(time.time())
                return self.reply(304, b"", extra=[("ETag", etag)])
            return self.send_manifest(etag)
        if rel == "" or rel.endswith("/"):
            return self.send_page(rel)
        obj = ds.object(rel)
        if obj is None:
            return self.reply(404, b"not found\n", "text/plain")
        kind, size, body = obj
        if kind == "object" and self.command == "GET":
            st.object_start(now)
        lo, hi, status, extra = 0, size, 200, [("Accept-Ranges", "bytes"),
                                                ("Last-Modified", MTIME)]
        rng = self.headers.get("Range")
        if rng:
            m = RANGE_RE.match(rng.strip())
            if not m:
                return self.reply(416, b"", extra=[("Content-Range", "bytes */%d" % size)])
            lo = int(m.group(1))
            hi = min(size, int(m.group(2)) + 1) if m.group(2) else size
            if lo >= size or hi <= lo:
                return self.reply(416, b"", extra=[("Content-Range", "bytes */%d" % size)])
            status = 206
            extra.append(("Content-Range", "bytes %d-%d/%d" % (lo, hi - 1, size)))
        data = body(lo, hi)
        st.count(kind, len(data) if self.command == "GET" else 0)
        self.reply(status, data, extra=extra)

    def send_manifest(self, etag):
        ds, st = self.server.ds, self.server.st
        self.send_response(200)
        self.send_header("ETag", etag)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(ds.manifest_len()))
        self.end_headers()
        sent = 0
        if self.command == "GET":
            for lo in range(0, ds.n, CHUNK_LINES):
                chunk = ds.manifest_lines(lo, min(ds.n, lo + CHUNK_LINES))
                self.wfile.write(chunk)
                sent += len(chunk)
        st.count("listing", sent)
        st.listing_sent(time.time())

    def send_page(self, rel):
        ds, st = self.server.ds, self.server.st
        if ds.listing != "autoindex":
            return self.reply(403, b"no index\n", "text/plain")
        if rel == "":
            body = ds.root_page()
        else:
            m = re.match(r"^d(\d+)/$", rel)
            d = int(m.group(1)) if m else -1
            if not m or d >= ds.folders() or rel != ds.dirname(d) + "/":
                return self.reply(404, b"not found\n", "text/plain")
            body = ds.folder_page(d)
        st.count("listing", len(body) if self.command == "GET" else 0)
        self.reply(200, body, "application/json")
        st.listing_sent(time.time())


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # a client that hung up is no error


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--objects", type=int, required=True)
    p.add_argument("--format", choices=("raw", "tfrecord"), default="raw")
    p.add_argument("--size", type=int, default=4096, help="raw: bytes per object")
    p.add_argument("--records", type=int, default=1000, help="tfrecord: records per object")
    p.add_argument("--record-size", type=int, default=256, help="tfrecord: payload bytes")
    p.add_argument("--folder", type=int, default=100000, help="objects per folder")
    p.add_argument("--listing", choices=("auto", "manifest", "autoindex"), default="auto")
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()
    if a.objects < 1 or a.folder < 1 or a.size < 0 or a.records < 1 or a.record_size < 0:
        p.error("--objects, --folder and --records must be >= 1; sizes >= 0")
    ds = Dataset(a)
    srv = Server(("127.0.0.1", a.port), Handler)
    srv.ds, srv.st = ds, Stats()
    print("PORT %d LISTING %s" % (srv.server_address[1], ds.listing), flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
