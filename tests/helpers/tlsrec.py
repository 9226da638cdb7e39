#!/usr/bin/env python3
"""An HTTPS server for the --secret tests: each NAME:PORT:CERT:KEY is one listener with its own
certificate; every request is recorded as a JSON line (port, method, path, headers, body) in
--log; GET of a file under --root serves it (git's dumb protocol), anything else answers
"ok NAME". HTTP/1.1 with keep-alive."""
import argparse, json, os, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--bind", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--root", default=None)
ap.add_argument("--ready", required=True)
ap.add_argument("--lifetime", type=int, default=300)
ap.add_argument("listeners", nargs="+")
a = ap.parse_args()
lock = threading.Lock()


def handler_for(name, port):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def record(self, body):
            with lock, open(a.log, "a") as f:
                f.write(json.dumps({"name": name, "port": port, "method": self.command,
                                    "path": self.path, "headers": dict(self.headers.items()),
                                    "body": body.decode("latin-1")}) + "\n")

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(n) if n else b""

        def answer(self, data, ctype="text/plain"):
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_GET(self):
            self.record(b"")
            path = self.path.split("?")[0]
            if a.root and path.startswith("/big/"):
                return self.answer(b"x" * int(path[5:]))
            if a.root and ".." not in path:
                p = os.path.join(a.root, path.lstrip("/"))
                if os.path.isfile(p):
                    with open(p, "rb") as f:
                        return self.answer(f.read(), "application/octet-stream")
                if "/repo.git/" in path or path.startswith("/apt/"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            self.answer(("ok %s\n" % name).encode())

        def do_POST(self):
            b = self.body()
            self.record(b)
            self.answer(("ok %s %d\n" % (name, len(b))).encode())

        do_HEAD = do_GET
        do_PUT = do_POST
    return H


ready = []
for spec in a.listeners:
    name, port, cert, key = spec.split(":")
    srv = ThreadingHTTPServer((a.bind, int(port)), handler_for(name, int(port)))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    ready.append("%s=%d" % (name, srv.server_address[1]))
with open(a.ready + ".tmp", "w") as f:
    f.write("\n".join(ready) + "\n")
os.rename(a.ready + ".tmp", a.ready)
time.sleep(a.lifetime)
