#!/usr/bin/python3
"""A reverse proxy in front of a plain loopback registry, for the image tests: the bearer
token flow as registries really do it, and faults that no well-behaved registry makes.

Usage: authproxy.py --upstream 127.0.0.1:PORT --ready FILE [--auth none|bearer]
                    [--basic USER:PASS] [--fault NAME] [--stall SECONDS] [--alt-host HOST]
                    [--file-dir DIR]
                    [--log FILE] [--lifetime SECONDS]

Listens on 127.0.0.1 (free ports) and writes FILE, when ready, with lines port=P, alt=Q and
althost=HOST. GET and HEAD under /v2/ are forwarded to the upstream registry.

--auth bearer: a request without "Authorization: Bearer T" (T a token this proxy issued for
that repository) gets 401 with
    WWW-Authenticate: Bearer realm="http://127.0.0.1:P/token",service="test",scope="repository:REPO:pull"
GET (or POST, OAuth2 form) /token?service=test&scope=repository:REPO:pull issues a token for
REPO; with --basic, only to a request carrying those Basic credentials (else 401).

Faults, for every request (--fault) or chosen by the path: /v2/f/NAME/REPO/... has fault NAME
and is forwarded as /v2/REPO/... (the token scope is still the requested repository name,
f/NAME/REPO). NAME is one of
  m500        manifests answer 500
  b500        blobs answer 500
  notjson     manifests answer 200 with a body that is not JSON
  huge        manifests come padded past 5 MiB (an annotation), otherwise usable
  deep        manifests come with an extra key nested 1000 levels deep (under jansson's own
              limit of 2048, over the client's), otherwise usable
  mdigest     manifests come with one byte changed (the upstream Docker-Content-Digest kept)
  stall       blobs send their headers and half their bytes, then nothing for --stall seconds
              (default 60), then the connection closes
  short       blobs send half their bytes (Content-Length says all) and close at once
  baddigest   blobs come with one byte changed (same length)
  redirect    blobs answer 307 to http://ALTHOST:Q/... (--alt-host, default localhost), a
              second listener that serves the same bytes
  redirect-bad  the same, and the second listener changes one byte
  redirect-file blobs answer 307 to file://FILEDIR/HEX (--file-dir): a client that follows a
              redirect to anything but http(s) reads the blob from there
  flaky       the first GET of each blob answers 503; the next ones are forwarded
  slow        blobs come 64 KiB every 20 ms (about 3 MiB/s), so parallel pulls overlap
Each request is logged as one line "proxy METHOD PATH STATUS [fault=NAME] [auth=bearer|basic|-]"
and each one the second listener gets as "alt GET PATH auth=yes|no" (was an Authorization
header forwarded to the other host?). Ends on SIGTERM or after --lifetime seconds.
Python standard library only.
"""
import argparse
import base64
import hashlib
import http.client
import http.server
import json
import os
import re
import secrets
import signal
import socketserver
import sys
import threading
import time
import urllib.parse

FAULTS = {"m500", "b500", "notjson", "huge", "deep", "mdigest", "stall", "short",
          "baddigest", "redirect", "redirect-bad", "redirect-file", "flaky", "slow"}
V2 = re.compile(r"^/v2/(.+)/(manifests|blobs)/([^/?]+)$")
CFG = None
LOCK = threading.Lock()


def log(msg):
    with LOCK:
        CFG.logf.write(msg + "\n")
        CFG.logf.flush()


def flip(b):
    if not b:
        return b
    i = len(b) // 2
    return b[:i] + bytes([b[i] ^ 0x01]) + b[i + 1:]


def upstream(method, path, headers):
    """(status, headers, body bytes) from the upstream registry"""
    c = http.client.HTTPConnection(CFG.up_host, CFG.up_port, timeout=30)
    h = {k: v for k, v in headers.items()
         if k.lower() in ("accept", "range", "user-agent")}
    c.request(method, path, headers=h)
    r = c.getresponse()
    body = r.read() if method != "HEAD" else b""
    c.close()
    return r.status, r.getheaders(), body


class Base(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_head(self, code, length, headers=(), ctype="application/json"):
        self.send_response(code)
        hdrs = dict((k.title(), v) for k, v in headers)
        hdrs.setdefault("Content-Type", ctype)
        hdrs["Content-Length"] = str(length)
        for k, v in hdrs.items():
            if k.lower() not in ("transfer-encoding", "connection", "date", "server"):
                self.send_header(k, v)
        self.end_headers()

    def send(self, code, body=b"", headers=(), ctype="application/json"):
        self.send_head(code, len(body), headers, ctype)
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, code, what, extra=()):
        body = json.dumps({"errors": [{"code": what, "message": what.lower()}]}).encode()
        self.send(code, body, extra)


class Alt(Base):
    """the other host a redirect points at: serves /blob/REPO/DIGEST from upstream"""

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        auth = "yes" if self.headers.get("Authorization") else "no"
        log("alt GET %s auth=%s" % (url.path, auth))
        m = re.match(r"^/blob/(.+)/(sha256:[0-9a-f]{64})$", url.path)
        if not m:
            self.error(404, "NOT_FOUND")
            return
        st, hd, body = upstream("GET", "/v2/%s/blobs/%s" % (m.group(1), m.group(2)),
                                self.headers)
        if "bad=1" in url.query:
            body = flip(body)
        self.send(st, body, [("Content-Type", "application/octet-stream")])

    do_HEAD = do_GET


class Proxy(Base):
    def do_POST(self):
        if urllib.parse.urlsplit(self.path).path == "/token":
            n = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(n).decode())
            self.token(form)
            return
        self.error(405, "UNSUPPORTED")

    def do_HEAD(self):
        self.do_GET()

    def token(self, q):
        """issues a token for the scope asked, checking Basic credentials with --basic"""
        auth = "-"
        if CFG.basic:
            h = self.headers.get("Authorization", "")
            ok = False
            if h.lower().startswith("basic "):
                try:
                    ok = base64.b64decode(h[6:].strip()).decode() == CFG.basic
                except Exception:
                    ok = False
            user_pw = "%s:%s" % (q.get("username", [""])[0], q.get("password", [""])[0])
            ok = ok or user_pw == CFG.basic
            if not ok:
                log("proxy %s /token 401 auth=basic-missing" % self.command)
                self.error(401, "UNAUTHORIZED", [("WWW-Authenticate",
                                                  'Basic realm="sbx-test-token"')])
                return
            auth = "basic"
        repos = set()
        for s in q.get("scope", []):
            for one in s.split(" "):
                p = one.split(":")
                if len(p) >= 3 and p[0] == "repository":
                    repos.add(":".join(p[1:-1]))
        tok = secrets.token_hex(16)
        with LOCK:
            CFG.tokens[tok] = repos
        log("proxy %s /token 200 auth=%s scope=%s service=%s" % (
            self.command, auth, ",".join(sorted(repos)) or "-", q.get("service", ["-"])[0]))
        self.send(200, json.dumps({"token": tok, "access_token": tok, "expires_in": 300,
                                   "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ")}).encode())

    def authorized(self, repo):
        h = self.headers.get("Authorization", "")
        if not h.lower().startswith("bearer "):
            return False
        with LOCK:
            repos = CFG.tokens.get(h[7:].strip())
        return repos is not None and (repo is None or repo in repos)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/token" and self.command == "GET":
            self.token(urllib.parse.parse_qs(url.query))
            return
        m = V2.match(url.path)
        repo = m.group(1) if m else None
        if CFG.auth == "bearer" and not self.authorized(repo):
            scope = ',scope="repository:%s:pull"' % repo if repo else ""
            log("proxy %s %s 401 auth=-" % (self.command, url.path))
            self.error(401, "UNAUTHORIZED", [(
                "WWW-Authenticate",
                'Bearer realm="http://127.0.0.1:%d/token",service="test"%s' % (
                    CFG.port, scope))])
            return
        authtag = " auth=bearer" if CFG.auth == "bearer" else ""
        fault, path = CFG.fault, url.path
        if m:
            parts = repo.split("/")
            if len(parts) >= 3 and parts[0] == "f" and parts[1] in FAULTS:
                fault, repo = parts[1], "/".join(parts[2:])
            path = "/v2/%s/%s/%s" % (repo, m.group(2), m.group(3))
        kind = m.group(2) if m else None
        ftag = " fault=%s" % fault if fault and kind else ""

        def done(code):
            log("proxy %s %s %d%s%s" % (self.command, url.path, code, ftag, authtag))

        if kind == "manifests" and fault in ("m500", "notjson"):
            if fault == "m500":
                done(500)
                self.error(500, "INTERNAL_ERROR")
                return
            body = b"<html>this is not a manifest</html>\n"
            done(200)
            self.send(200, body, [
                ("Docker-Content-Digest", "sha256:" + hashlib.sha256(body).hexdigest())],
                ctype="application/vnd.oci.image.manifest.v1+json")
            return
        if kind == "blobs" and fault == "b500":
            done(500)
            self.error(500, "INTERNAL_ERROR")
            return
        if kind == "blobs" and fault in ("redirect", "redirect-bad") and self.command == "GET":
            loc = "http://%s:%d/blob/%s/%s?sig=%s%s" % (
                CFG.alt_host, CFG.alt_port, repo, m.group(3), secrets.token_hex(4),
                "&bad=1" if fault == "redirect-bad" else "")
            done(307)
            self.send(307, b"", [("Location", loc)], ctype="text/plain")
            return
        if kind == "blobs" and fault == "redirect-file" and self.command == "GET":
            done(307)
            self.send(307, b"", [("Location", "file://%s/%s" % (
                CFG.file_dir, m.group(3).split(":")[-1]))], ctype="text/plain")
            return
        if kind == "blobs" and fault == "flaky" and self.command == "GET":
            with LOCK:
                first = path not in CFG.seen
                CFG.seen.add(path)
            if first:
                done(503)
                self.error(503, "UNAVAILABLE", [("Retry-After", "0")])
                return
        st, hd, body = upstream(self.command, path, self.headers)
        head_hd = hd
        hd = [(k, v) for k, v in hd if k.lower() not in ("content-length",)]
        if st == 200 and kind == "manifests" and fault == "mdigest":
            body = body.replace(b"{", b"{ ", 1)
        if st == 200 and kind == "manifests" and fault in ("huge", "deep") and \
                self.command == "GET":
            # the real manifest, still one a client could use, made too large or too deep
            man = json.loads(body)
            if fault == "huge":
                man.setdefault("annotations", {})["pad"] = "x" * (5 << 20)
                body = json.dumps(man).encode()
            else:
                body = (json.dumps(man).encode()[:-1] + b', "deep": ' + b"[" * 1000 +
                        b"]" * 1000 + b"}")
            hd = [(k, v) for k, v in hd if k.lower() != "docker-content-digest"]
            hd.append(("Docker-Content-Digest", "sha256:" + hashlib.sha256(body).hexdigest()))
        if st == 200 and kind == "blobs" and self.command == "GET":
            if fault == "baddigest":
                body = flip(body)
            elif fault == "slow":
                done(200)
                self.send_head(200, len(body), hd)
                for i in range(0, len(body), 65536):
                    self.wfile.write(body[i:i + 65536])
                    self.wfile.flush()
                    time.sleep(0.02)
                return
            elif fault in ("stall", "short"):
                done(200)
                self.send_head(200, len(body), hd)
                self.wfile.write(body[:len(body) // 2])
                self.wfile.flush()
                if fault == "stall":
                    log("proxy stalling %s for %gs" % (url.path, CFG.stall))
                    time.sleep(CFG.stall)
                self.close_connection = True
                return
        done(st)
        if self.command == "HEAD":
            self.send_response(st)
            for k, v in head_hd:
                if k.lower() not in ("transfer-encoding", "connection", "date", "server"):
                    self.send_header(k, v)
            self.end_headers()
            return
        self.send(st, body, hd)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global CFG
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--auth", default="none", choices=["none", "bearer"])
    ap.add_argument("--basic")
    ap.add_argument("--fault", choices=sorted(FAULTS))
    ap.add_argument("--stall", type=float, default=60)
    ap.add_argument("--alt-host", default="localhost")
    ap.add_argument("--file-dir", default="/nonexistent")
    ap.add_argument("--log")
    ap.add_argument("--lifetime", type=float, default=600)
    a = ap.parse_args()

    class Cfg:
        pass
    CFG = Cfg()
    CFG.up_host, CFG.up_port = a.upstream.rsplit(":", 1)[0], int(a.upstream.rsplit(":", 1)[1])
    CFG.auth, CFG.basic, CFG.fault, CFG.stall = a.auth, a.basic, a.fault, a.stall
    CFG.alt_host, CFG.tokens, CFG.seen = a.alt_host, {}, set()
    CFG.file_dir = a.file_dir
    CFG.logf = open(a.log, "a") if a.log else sys.stderr
    main_srv = Server(("127.0.0.1", 0), Proxy)
    alt_srv = Server(("127.0.0.1", 0), Alt)
    CFG.port, CFG.alt_port = main_srv.server_address[1], alt_srv.server_address[1]
    threading.Thread(target=alt_srv.serve_forever, daemon=True).start()
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("port=%d\nalt=%d\nalthost=%s\n" % (CFG.port, CFG.alt_port, CFG.alt_host))
    os.rename(tmp, a.ready)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    t = threading.Timer(a.lifetime, lambda: os._exit(0))
    t.daemon = True
    t.start()
    main_srv.serve_forever()


if __name__ == "__main__":
    main()
