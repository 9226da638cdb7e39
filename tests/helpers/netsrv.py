#!/usr/bin/python3
"""The network tests' small internet: HTTP, HTTPS and TCP echo servers in one process.

Usage: netsrv.py --bind ADDR --ready FILE [--root DIR] [--cert PEM --key PEM]
                 [--lifetime SECONDS] NAME:KIND:PORT...
KIND is http, https or echo; PORT 0 takes a free one. When every server listens, FILE is
written (atomically) with one NAME=PORT line per server. Every server answers
GET /hello with "hello from NAME" and serves the files under DIR otherwise (a dumb-HTTP git
repository works); echo servers send back what they read until EOF. Each connection and
request is logged on stderr as "NAME conn PEER" and "NAME GET PATH", so a test can tell
that a refused request never reached a server. The process ends on SIGTERM, or by itself
after --lifetime seconds (default 300). Python standard library only.
"""
import argparse
import functools
import http.server
import os
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_name_tag = "?"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        log("%s %s %s" % (self.server_name_tag, self.command, self.path))
        if self.path.split("?", 1)[0] == "/hello":
            body = ("hello from %s\n" % self.server_name_tag).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Server", self.server_name_tag)
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def do_HEAD(self):
        log("%s %s %s" % (self.server_name_tag, self.command, self.path))
        super().do_HEAD()


class ThreadingHTTP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        # not HTTPServer's: its getfqdn() may wait for a DNS server a namespace cannot reach
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def get_request(self):
        sock, peer = super().get_request()
        log("%s conn %s:%d" % (self.tag, peer[0], peer[1]))
        return sock, peer

    def finish_request(self, request, client_address):
        # in the connection's own thread: a client that never speaks TLS blocks no one
        if self.tls is None:
            return super().finish_request(request, client_address)
        request.settimeout(10)
        try:
            tls = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            log("%s tls-error %s" % (self.tag, e))
            return None
        tls.settimeout(60)
        try:
            return super().finish_request(tls, client_address)
        finally:
            tls.close()

    def handle_error(self, request, client_address):
        pass


class EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        log("%s conn %s:%d" % (self.server.tag, *self.client_address[:2]))
        self.request.settimeout(30)
        try:
            while True:
                data = self.request.recv(65536)
                if not data:
                    break
                self.request.sendall(data)
        except OSError:
            pass


class ThreadingTCP(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--root", default=os.getcwd())
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--lifetime", type=float, default=300)
    ap.add_argument("servers", nargs="+")
    a = ap.parse_args()

    servers = []
    for spec in a.servers:
        name, kind, port = spec.split(":")
        if kind in ("http", "https"):
            # the handler reads its tag from its class: one subclass per server
            h = functools.partial(
                type("H_" + name, (Handler,), {"server_name_tag": name}), directory=a.root)
            srv = ThreadingHTTP((a.bind, int(port)), h)
            srv.tag = name
            srv.tls = None
            if kind == "https":
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain(a.cert, a.key)
                srv.tls = ctx
        elif kind == "echo":
            srv = ThreadingTCP((a.bind, int(port)), EchoHandler)
            srv.tag = name
        else:
            sys.exit("netsrv: unknown kind %r" % kind)
        servers.append((name, srv))

    for _, srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        for name, srv in servers:
            f.write("%s=%d\n" % (name, srv.server_address[1]))
    os.rename(tmp, a.ready)
    log("netsrv ready pid %d" % os.getpid())

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    deadline = time.monotonic() + a.lifetime
    while not stop.is_set() and time.monotonic() < deadline:
        stop.wait(0.5)
    log("netsrv stopping")
    os._exit(0)


if __name__ == "__main__":
    main()
