#!/usr/bin/python3
"""faults.py - a fault-injecting HTTP server in front of a directory of test data.

  faults.py start ROOT STATE [options]   serve ROOT on an ephemeral 127.0.0.1
                                         port in the background; prints the URL
  faults.py stop STATE                   stop it
  faults.py serve ROOT STATE [options]   the same in the foreground

Listing: GET /MANIFEST lists every file under ROOT (`name size` lines) plus
--extra keys.  GET of a key serves its bytes with Range support (206).

Faults: each object's first --depth requests get a fault, chosen from --plan
by (index of the object in sorted order + request number) so a dataset of
several objects sees every kind.  Kinds:
  503     503 with Retry-After: --retry-after seconds
  500     500
  429     429 with Retry-After
  408     408
  reset   headers with the full length, half the body, then a TCP reset
  cut     headers with the full length, half the body, then a clean close
  short   an honest response of half the bytes asked for (a truncated object)
  flip    the full body with one byte flipped in its middle
  stall   headers and a few bytes, then silence for --stall seconds
  ok      no fault
--deny403 KEY / --deny404 KEY (repeatable): that key always answers 403/404
(and is listed in the MANIFEST).  --always KEY=KIND (repeatable): every
request of that key gets that fault, in storm mode too.  --extra FILE: `key size` lines of virtual
objects (hostile names) whose bytes are generated.

Storm: --storm P --seed S replaces the per-object plan above: every object
request (not the MANIFEST) gets a fault with probability P, its kind drawn
uniformly from --plan (default for the storm: 500,503,429,reset,cut,short,
flip,stall).  Every decision comes from one random.Random(S) taken under a
lock, so a seed gives the same sequence of decisions for the same sequence
of requests (which request comes next depends on the client's timing).
Keep --stall short in a storm (a few seconds) and the client's timeout
lower, so a stall is cut by the client.

GET /__stats returns JSON: per key the number of requests, the faults
served and the (monotonic) time of each request.  GET /__log returns a
JSON list with one entry per request served (MANIFEST included, /__stats
and /__log not), in arrival order: {"key", "range" (the Range header or
null), "fault" ("ok" or the kind), "status" (the status code sent),
"sent" (body bytes written to the socket), "flip" (object offset of the
flipped byte, or null)}.  GET /__calm: no request gets a fault from then on
(the same URL, so a client's second run is the same source).  Loopback
only: binds 127.0.0.1.
"""
import argparse
import hashlib
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args(argv):
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("state")
    p.add_argument("--plan")
    p.add_argument("--storm", type=float, default=None,
                   help="fault probability of every object request (storm mode)")
    p.add_argument("--seed", type=int, default=1, help="storm mode's random seed")
    p.add_argument("--depth", type=int, default=1)
    p.add_argument("--retry-after", type=int, default=1)
    p.add_argument("--stall", type=float, default=20.0)
    p.add_argument("--deny403", action="append", default=[])
    p.add_argument("--deny404", action="append", default=[])
    p.add_argument("--always", action="append", default=[],
                   help="KEY=KIND: every request of KEY gets fault KIND (until /__calm)")
    p.add_argument("--extra")
    a = p.parse_args(argv)
    if a.plan is None:
        a.plan = ("500,503,429,reset,cut,short,flip,stall" if a.storm is not None
                  else "503,500,429,reset,short,flip,stall,cut")
    return a


def virtual_bytes(key, size):
    out = bytearray()
    seed = key.encode("utf-8", "surrogateescape")
    i = 0
    while len(out) < size:
        out += hashlib.sha256(seed + struct.pack("<I", i)).digest()
        i += 1
    return bytes(out[:size])


class State:
    def __init__(self, a):
        self.a = a
        self.plan = [x for x in a.plan.split(",") if x]
        self.lock = threading.Lock()
        self.counts = {}
        self.faults = {}
        self.times = {}
        self.log = []
        self.rnd = random.Random(a.seed)
        self.always = dict(x.rsplit("=", 1) for x in a.always)
        self.extra = {}
        if a.extra:
            with open(a.extra, encoding="utf-8", errors="surrogateescape") as f:
                for line in f:
                    line = line.rstrip("\n")
                    if line:
                        k, s = line.rsplit(" ", 1)
                        self.extra[k] = int(s)
        self.files = {}
        for dp, _, fs in os.walk(a.root):
            for n in fs:
                p = os.path.join(dp, n)
                self.files[os.path.relpath(p, a.root)] = p
        self.keys = sorted(set(self.files) | set(self.extra) | set(a.deny403) | set(a.deny404))
        self.index = {k: i for i, k in enumerate(self.keys)}

    def manifest(self):
        lines = []
        for k in self.keys:
            if k in self.files:
                size = os.path.getsize(self.files[k])
            else:
                size = self.extra.get(k, 1000)
            lines.append("%s %d\n" % (k, size))
        return "".join(lines).encode("utf-8", "surrogateescape")

    def next_fault(self, key):
        with self.lock:
            n = self.counts.get(key, 0)
            self.counts[key] = n + 1
            if key in self.always:
                kind = self.always[key]
            elif self.a.storm is not None:
                kind = "ok"
                if self.plan and self.rnd.random() < self.a.storm:
                    kind = self.rnd.choice(self.plan)
            elif n >= self.a.depth or not self.plan:
                kind = "ok"
            else:
                kind = self.plan[(self.index.get(key, 0) + n) % len(self.plan)]
            self.faults.setdefault(key, []).append(kind)
            self.times.setdefault(key, []).append(time.monotonic())
            return kind

    def log_request(self, key, rng, fault):
        """A new entry of /__log; the handler fills in status, sent, flip."""
        e = {"key": key, "range": rng, "fault": fault, "status": None, "sent": 0, "flip": None}
        with self.lock:
            self.log.append(e)
        return e


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    st = None

    def log_message(self, fmt, *args):
        pass

    def send_small(self, code, body=b"", headers=(), entry=None):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if entry is not None:
            entry["status"] = code
        self.send_body(body, entry)

    def send_body(self, body, entry):
        """Writes body; its entry's "sent" counts the bytes the socket took."""
        self.wfile.write(body)
        self.wfile.flush()
        if entry is not None:
            entry["sent"] += len(body)

    def do_GET(self):
        st = self.st
        # the request line as sent: http.server rewrites a leading "//" in self.path
        raw = self.requestline.split(" ")[1] if " " in self.requestline else self.path
        path = urllib.parse.unquote(raw.split("?", 1)[0], errors="surrogateescape")
        key = path[1:]
        rng = self.headers.get("Range")
        if key == "__stats":
            with st.lock:
                body = json.dumps({"counts": st.counts, "faults": st.faults, "times": st.times},
                                  ensure_ascii=True).encode()
            return self.send_small(200, body)
        if key == "__log":
            with st.lock:
                body = json.dumps(st.log, ensure_ascii=True).encode()
            return self.send_small(200, body)
        if key == "__calm":
            with st.lock:
                st.plan = []  # no fault from now on (the storm's and the per-object plan's)
                st.always = {}
            return self.send_small(200, b"calm\n")
        if key == "MANIFEST":
            return self.send_small(200, st.manifest(), entry=st.log_request(key, rng, "ok"))
        if key in st.a.deny403:
            e = st.log_request(key, rng, st.next_fault(key))
            return self.send_small(403, b"<Error><Code>AccessDenied</Code></Error>", entry=e)
        if key in st.a.deny404:
            e = st.log_request(key, rng, st.next_fault(key))
            return self.send_small(404, b"<Error><Code>NoSuchKey</Code></Error>", entry=e)
        if key in st.files:
            with open(st.files[key], "rb") as f:
                data = f.read()
        elif key in st.extra:
            data = virtual_bytes(key, st.extra[key])
        else:
            return self.send_small(404, b"not found", entry=st.log_request(key, rng, "ok"))
        start, end = 0, len(data)
        code = 200
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a) if a else 0
            end = min(int(b) + 1, len(data)) if b else len(data)
            if start >= len(data):
                return self.send_small(416, b"", [("Content-Range", "bytes */%d" % len(data))],
                                       entry=st.log_request(key, rng, "ok"))
            code = 206
        body = data[start:end]
        kind = st.next_fault(key)
        e = st.log_request(key, rng, kind)
        ra = str(st.a.retry_after)
        if kind in ("503", "429"):
            return self.send_small(int(kind), b"slow down", [("Retry-After", ra)], entry=e)
        if kind in ("500", "408"):
            return self.send_small(int(kind), b"oops", entry=e)
        self.send_response(code)
        e["status"] = code
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, len(data)))
        if kind == "short":
            body = body[:len(body) // 2]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if kind in ("reset", "cut"):
            self.send_body(body[:len(body) // 2], e)
            if kind == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if kind == "flip" and body:
            b = bytearray(body)
            b[len(b) // 2] ^= 0x40
            body = bytes(b)
            e["flip"] = start + len(b) // 2
        if kind == "stall":
            self.send_body(body[:min(100, len(body))], e)
            time.sleep(st.a.stall)
            self.close_connection = True
            return
        self.send_body(body, e)


def serve(a):
    Handler.st = State(a)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    with open(os.path.join(a.state, "url.tmp"), "w") as f:
        f.write("http://127.0.0.1:%d/\n" % port)
    os.rename(os.path.join(a.state, "url.tmp"), os.path.join(a.state, "url"))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    srv.serve_forever()


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("start", "stop", "serve"):
        sys.exit(__doc__)
    cmd = sys.argv[1]
    if cmd == "stop":
        state = sys.argv[2]
        try:
            with open(os.path.join(state, "pid")) as f:
                pid = int(f.read())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            pass
        return
    a = parse_args(sys.argv[2:])
    os.makedirs(a.state, exist_ok=True)
    if cmd == "serve":
        return serve(a)
    try:
        os.unlink(os.path.join(a.state, "url"))
    except FileNotFoundError:
        pass
    log = open(os.path.join(a.state, "log"), "w")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve"] + sys.argv[2:],
                         stdout=log, stderr=log, start_new_session=True)
    with open(os.path.join(a.state, "pid"), "w") as f:
        f.write(str(p.pid))
    for _ in range(100):
        u = os.path.join(a.state, "url")
        if os.path.exists(u):
            with open(u) as f:
                print(f.read().strip())
            return
        if p.poll() is not None:
            sys.exit("faults.py: server exited: see %s/log" % a.state)
        time.sleep(0.1)
    p.kill()
    sys.exit("faults.py: server did not start within 10 s")


if __name__ == "__main__":
    main()
