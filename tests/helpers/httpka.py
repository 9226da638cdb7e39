#!/usr/bin/python3
"""An HTTP/1.1 server that keeps connections alive, for the egress proxy's tests.

Usage: httpka.py --bind ADDR --ready FILE
FILE gets the port once it listens. Each connection is logged on stderr as "conn N", each
request as "req N METHOD PATH". GET /chunked?n=N answers N chunks of 1000 bytes (chunked);
POST /echo answers the request's body (read by its Content-Length or chunked) with a length;
GET /short answers "short" with a length and closes the connection when it has been idle
for 0.2 s. Ends on SIGTERM, or by itself after 240 s. Python standard library only.
"""
import argparse
import os
import socket
import socketserver
import sys
import threading
import time

count = [0]
lock = threading.Lock()


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        with lock:
            count[0] += 1
            n = count[0]
        log("conn %d" % n)
        idle = None
        while True:
            self.connection.settimeout(idle)
            try:
                line = self.rfile.readline()
            except OSError:
                return
            if not line:
                return
            method, path, _ = line.decode("latin-1").split(" ", 2)
            headers = {}
            while True:
                h = self.rfile.readline().decode("latin-1")
                if h in ("\r\n", "\n", ""):
                    break
                k, v = h.split(":", 1)
                headers[k.strip().lower()] = v.strip()
            log("req %d %s %s" % (n, method, path))
            body = b""
            if headers.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b""):
                            pass
                        break
                    body += self.rfile.read(size)
                    self.rfile.readline()
            elif "content-length" in headers:
                body = self.rfile.read(int(headers["content-length"]))
            idle = None
            if path.startswith("/chunked"):
                k = int(path.split("n=")[1]) if "n=" in path else 1
                out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                out += (b"3e8\r\n" + b"x" * 1000 + b"\r\n") * k + b"0\r\n\r\n"
            else:
                if path.startswith("/short"):
                    body, idle = b"short", 0.2
                out = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            self.wfile.write(out)
            self.wfile.flush()


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", required=True)
    ap.add_argument("--ready", required=True)
    a = ap.parse_args()
    s = Server((a.bind, 0), Handler)
    with open(a.ready + ".tmp", "w") as f:
        f.write(str(s.server_address[1]))
    os.rename(a.ready + ".tmp", a.ready)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    time.sleep(240)


main()
