#!/usr/bin/python3
"""An npm registry for the network tests: generated packages, their packuments and tarballs,
over HTTP and HTTPS (HTTP/1.1, keep-alive), so that npm's real client installs a wide tree.

Usage: npmreg.py --bind ADDR --ready FILE [--count N] [--fanout K] [--roots R]
                 [--http PORT] [--https PORT --cert PEM --key PEM] [--stats FILE]
                 [--lifetime SECONDS]
       npmreg.py --package-json [--count N] [--roots R]   prints the package.json of a
                 project that depends on the R roots (the whole tree)
Packages are sbxt-000 ... sbxt-(N-1), version 1.0.0 each: the first R (the roots) depend on
K packages each, the rest on none, so that every package is reached and npm asks for the
second level (N - R packuments, then as many tarballs) all at once. A tarball holds
package/package.json and package/index.js; its packument names it by the URL the request
came in with (scheme and Host), with its shasum (sha1) and integrity (sha512). The
packument of any other name is a 404. When every server listens, FILE is written
(atomically) with one http=PORT / https=PORT line each (PORT 0 takes a free one).
--stats FILE is rewritten after every request: {"requests": N, "connections": N,
"packuments": N, "tarballs": N, "notfound": N}. The process ends on SIGTERM, or by itself
after --lifetime seconds (default 300). Python standard library only.
"""
import argparse
import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import signal
import socketserver
import ssl
import sys
import tarfile
import threading
import time

MTIME = 1700000000
VERSION = "1.0.0"


def name_of(i):
    return "sbxt-%03d" % i


def deps_of(i, count, fanout, roots):
    """the packages package i depends on"""
    if i >= roots:
        return []
    first = roots + i * fanout
    return [name_of(j) for j in range(first, min(first + fanout, count))]


def tarball(name, deps):
    """the .tgz of a package, deterministic"""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as t:
        pj = json.dumps({"name": name, "version": VERSION, "main": "index.js",
                         "dependencies": {d: "^" + VERSION for d in deps}},
                        indent=2).encode()
        js = ("module.exports = %s;\n" % json.dumps(name)).encode()
        for path, data in (("package/package.json", pj), ("package/index.js", js)):
            i = tarfile.TarInfo(path)
            i.size, i.mtime, i.mode = len(data), MTIME, 0o644
            t.addfile(i, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as g:
        g.write(raw.getvalue())
    return out.getvalue()


class Registry:
    def __init__(self, count, fanout, roots, stats_path):
        self.count, self.fanout, self.roots = count, fanout, roots
        self.stats_path = stats_path
        self.lock = threading.Lock()
        self.stats = {"requests": 0, "connections": 0, "packuments": 0, "tarballs": 0,
                      "notfound": 0}
        self.tgz, self.deps = {}, {}
        for i in range(count):
            n = name_of(i)
            self.deps[n] = deps_of(i, count, fanout, roots)
            self.tgz[n] = tarball(n, self.deps[n])

    def count_one(self, key):
        with self.lock:
            self.stats[key] += 1
            if self.stats_path:
                tmp = self.stats_path + ".tmp.%d" % threading.get_ident()
                with open(tmp, "w") as f:
                    json.dump(self.stats, f, sort_keys=True)
                os.rename(tmp, self.stats_path)

    def packument(self, name, base):
        data = self.tgz[name]
        ver = {"name": name, "version": VERSION, "main": "index.js",
               "dependencies": {d: "^" + VERSION for d in self.deps[name]},
               "dist": {"tarball": "%s/%s/-/%s-%s.tgz" % (base, name, name, VERSION),
                        "shasum": hashlib.sha1(data).hexdigest(),
                        "integrity": "sha512-" +
                        base64.b64encode(hashlib.sha512(data).digest()).decode()}}
        return json.dumps({"name": name, "dist-tags": {"latest": VERSION},
                           "versions": {VERSION: ver},
                           "time": {"created": "2023-11-14T22:13:20.000Z",
                                    VERSION: "2023-11-14T22:13:20.000Z"}}).encode()


def make_handler(reg, scheme):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # the head and the body in one write, sent at once
        wbufsize = 1 << 16
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def setup(self):
            super().setup()
            reg.count_one("connections")

        def reply(self, code, body, ctype):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            reg.count_one("requests")
            path = self.path.split("?", 1)[0]
            if path.startswith("http://") or path.startswith("https://"):
                path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
            parts = [p for p in path.split("/") if p]
            if len(parts) == 1 and parts[0] in reg.tgz:
                reg.count_one("packuments")
                base = "%s://%s" % (scheme, self.headers.get("Host", "registry.test"))
                return self.reply(200, reg.packument(parts[0], base), "application/json")
            if (len(parts) == 3 and parts[1] == "-" and parts[0] in reg.tgz and
                    parts[2] == "%s-%s.tgz" % (parts[0], VERSION)):
                reg.count_one("tarballs")
                return self.reply(200, reg.tgz[parts[0]], "application/octet-stream")
            reg.count_one("notfound")
            self.reply(404, b'{"error":"Not found"}', "application/json")

        do_HEAD = do_GET

    return H


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 256


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--ready")
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--fanout", type=int, default=15)
    ap.add_argument("--roots", type=int, default=20)
    ap.add_argument("--http", type=int)
    ap.add_argument("--https", type=int)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--stats")
    ap.add_argument("--lifetime", type=float, default=300)
    ap.add_argument("--package-json", action="store_true")
    a = ap.parse_args()
    if a.package_json:
        print(json.dumps({"name": "sbxt-project", "version": "1.0.0", "private": True,
                          "dependencies": {name_of(i): "^" + VERSION
                                           for i in range(a.roots)}}, indent=2))
        return 0
    reg = Registry(a.count, a.fanout, a.roots, a.stats)
    ports = []
    if a.http is not None:
        s = Server((a.bind, a.http), make_handler(reg, "http"))
        ports.append(("http", s))
    if a.https is not None:
        s = Server((a.bind, a.https), make_handler(reg, "https"))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        s.socket = ctx.wrap_socket(s.socket, server_side=True,
                                   do_handshake_on_connect=False)
        ports.append(("https", s))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    for _, s in ports:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    if a.ready:
        with open(a.ready + ".tmp", "w") as f:
            for k, s in ports:
                f.write("%s=%d\n" % (k, s.server_address[1]))
        os.rename(a.ready + ".tmp", a.ready)
    time.sleep(a.lifetime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
