#!/usr/bin/python3
"""A DNS server for the network tests, over UDP and TCP: A records for the names it is given,
with a TTL, optionally slow, dropping bursts of queries or failing (SERVFAIL), counting what
it got.

Usage: dnsfake.py --bind ADDR [--port 53] --config FILE [--ready FILE] [--stats FILE]
                  [--lifetime SECONDS]
The config, JSON, is read again whenever its mtime changes (checked at every query), so a
test switches the behaviour of a running server by rewriting it (write a temporary file and
rename it over):
  {"names": {"deb.test": "192.0.2.2", "short.test": {"ip": "192.0.2.2", "ttl": 1}},
   "ttl": 60,         the TTL of an answer whose name gives none
   "delay": 0.2,      seconds before every answer (each query waits in its own thread)
   "inflight": 4,     drop a query that arrives while this many are already waiting
   "burst": 8,        drop a query beyond this many in the same 100 ms window
   "every": 5,        drop every Kth query (the 5th, 10th, ...)
   "servfail": {"flaky.test": 2}}  SERVFAIL to the next K queries for the name (counted
                      from when this config was read), then its answer
A name of the config gets its A record, and for any other type an empty answer (NODATA);
any other name NXDOMAIN. A dropped query gets no answer at all (UDP) or a closed connection
(TCP). Names are matched without case and without a trailing dot.
--stats FILE is rewritten (atomically) after every query: {"queries": N, "answered": N,
"dropped": N, "tcp": N, "names": {NAME: N, ...}, "types": {"A": N, "AAAA": N, ...}}, the
counts since the start; --ready FILE gets "port=PORT" once both sockets listen. The process
ends on SIGTERM, or by itself after --lifetime seconds (default 300).
Python standard library only.
"""
import argparse
import json
import os
import signal
import socket
import struct
import sys
import threading
import time

TYPES = {1: "A", 28: "AAAA", 5: "CNAME", 15: "MX", 16: "TXT", 33: "SRV", 65: "HTTPS", 6: "SOA"}


class State:
    def __init__(self, config_path, stats_path):
        self.config_path, self.stats_path = config_path, stats_path
        self.lock = threading.Lock()
        self.mtime = None
        self.cfg = {}
        self.servfail = {}  # name: SERVFAILs still to give
        self.inflight = 0
        self.window, self.window_n = 0, 0
        self.stats = {"queries": 0, "answered": 0, "dropped": 0, "tcp": 0, "names": {},
                      "types": {}}

    def config(self):
        """the config, read again when its file changed (under the lock)"""
        try:
            m = os.stat(self.config_path).st_mtime_ns
        except OSError:
            return self.cfg
        if m != self.mtime:
            try:
                with open(self.config_path) as f:
                    self.cfg = json.load(f)
                self.mtime = m
                self.servfail = {k.lower().rstrip("."): int(v)
                                 for k, v in self.cfg.get("servfail", {}).items()}
            except (OSError, ValueError):
                pass  # half written: the old one until the next query
        return self.cfg

    def save(self):
        if not self.stats_path:
            return
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.stats, f, sort_keys=True)
        os.rename(tmp, self.stats_path)

    def admit(self, name, qtype, tcp):
        """counts a query; (config, True, servfail) when it is answered (with SERVFAIL when
        servfail), (config, False, False) dropped"""
        with self.lock:
            cfg = self.config()
            s = self.stats
            s["queries"] += 1
            s["tcp"] += 1 if tcp else 0
            s["names"][name] = s["names"].get(name, 0) + 1
            t = TYPES.get(qtype, str(qtype))
            s["types"][t] = s["types"].get(t, 0) + 1
            now = int(time.monotonic() * 10)
            if now != self.window:
                self.window, self.window_n = now, 0
            self.window_n += 1
            drop = False
            if cfg.get("inflight") and self.inflight >= cfg["inflight"]:
                drop = True
            if cfg.get("burst") and self.window_n > cfg["burst"]:
                drop = True
            if cfg.get("every") and s["queries"] % cfg["every"] == 0:
                drop = True
            servfail = False
            if drop:
                s["dropped"] += 1
            else:
                self.inflight += 1
                if self.servfail.get(name, 0) > 0:
                    self.servfail[name] -= 1
                    servfail = True
            self.save()
            return cfg, not drop, servfail

    def done(self):
        with self.lock:
            self.inflight -= 1
            self.stats["answered"] += 1
            self.save()


def parse_question(msg):
    """(id, flags, name, qtype, end of the question) of a query, or None"""
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if flags & 0x8000 or qd != 1:
        return None
    i, labels = 12, []
    while True:
        if i >= len(msg):
            return None
        n = msg[i]
        if n == 0:
            i += 1
            break
        if n & 0xC0 or i + 1 + n > len(msg):
            return None
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace").lower())
        i += 1 + n
    if i + 4 > len(msg):
        return None
    qtype, _ = struct.unpack("!HH", msg[i:i + 4])
    return qid, flags, ".".join(labels), qtype, i + 4


def answer(msg, q, cfg, servfail):
    qid, flags, name, qtype, end = q
    names = {k.lower().rstrip("."): v for k, v in cfg.get("names", {}).items()}
    rd = flags & 0x0100
    if servfail:
        return struct.pack("!HHHHHH", qid, 0x8080 | rd | 2, 1, 0, 0, 0) + msg[12:end]
    entry = names.get(name)
    if entry is None:
        return struct.pack("!HHHHHH", qid, 0x8080 | rd | 3, 1, 0, 0, 0) + msg[12:end]
    if isinstance(entry, str):
        entry = {"ip": entry}
    ttl = int(entry.get("ttl", cfg.get("ttl", 60)))
    if qtype != 1:
        return struct.pack("!HHHHHH", qid, 0x8480 | rd, 1, 0, 0, 0) + msg[12:end]
    rr = struct.pack("!HHHIH", 0xC00C, 1, 1, ttl, 4) + socket.inet_aton(entry["ip"])
    return struct.pack("!HHHHHH", qid, 0x8480 | rd, 1, 1, 0, 0) + msg[12:end] + rr


def handle(state, msg, tcp):
    """the answer to msg, or None (dropped, or not a query)"""
    q = parse_question(msg)
    if q is None:
        return None
    cfg, ok, servfail = state.admit(q[2], q[3], tcp)
    if not ok:
        return None
    try:
        if cfg.get("delay"):
            time.sleep(float(cfg["delay"]))
        return answer(msg, q, cfg, servfail)
    finally:
        state.done()


def serve_udp(state, sock):
    def one(msg, peer):
        r = handle(state, msg, False)
        if r is not None:
            try:
                sock.sendto(r, peer)
            except OSError:
                pass
    while True:
        msg, peer = sock.recvfrom(4096)
        threading.Thread(target=one, args=(msg, peer), daemon=True).start()


def recv_exact(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d:
            return None
        b += d
    return b


def serve_tcp(state, sock):
    def conn(c):
        try:
            c.settimeout(10)
            while True:
                h = recv_exact(c, 2)
                if h is None:
                    return
                msg = recv_exact(c, struct.unpack("!H", h)[0])
                if msg is None:
                    return
                r = handle(state, msg, True)
                if r is None:
                    return
                c.sendall(struct.pack("!H", len(r)) + r)
        except OSError:
            pass
        finally:
            c.close()
    while True:
        c, _ = sock.accept()
        threading.Thread(target=conn, args=(c,), daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--config", required=True)
    ap.add_argument("--ready")
    ap.add_argument("--stats")
    ap.add_argument("--lifetime", type=float, default=300)
    a = ap.parse_args()
    state = State(a.config, a.stats)
    with state.lock:
        state.config()
        state.save()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((a.bind, a.port))
    port = u.getsockname()[1]
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((a.bind, port))
    t.listen(128)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threading.Thread(target=serve_udp, args=(state, u), daemon=True).start()
    threading.Thread(target=serve_tcp, args=(state, t), daemon=True).start()
    if a.ready:
        with open(a.ready + ".tmp", "w") as f:
            f.write("port=%d\n" % port)
        os.rename(a.ready + ".tmp", a.ready)
    time.sleep(a.lifetime)


if __name__ == "__main__":
    sys.exit(main())
