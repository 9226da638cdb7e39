#!/usr/bin/python3
"""A token server for docker-registry's bearer flow (auth: token:), for the image tests.

Usage: tokensrv.py --key KEY.pem --port-file FILE [--user USER:PASS]... [--anonymous-pull]
                   [--issuer NAME] [--service NAME] [--log FILE] [--lifetime SECONDS]

Listens on 127.0.0.1 (a free port, written to --port-file when ready). GET /token?service=S&
scope=repository:REPO:ACTIONS[&scope=...] answers {"token": JWT, "access_token": JWT,
"expires_in": 300, "issued_at": ...}. The JWT is RS256, signed with the RSA key in KEY.pem
(made by `openssl genrsa`, PKCS#1 or PKCS#8 PEM), and its header names the key by libtrust's
key id (the "kid" docker-registry looks up among the public keys of its rootcertbundle).

Who gets what: a request with Basic credentials that match a --user gets every action it
asks for; wrong credentials get 401; no credentials get "pull" when --anonymous-pull is
given, else 401. The service must be --service (default "sbx-test"). Each request is logged
as one line "token USER SCOPE -> GRANTED" (USER "-" when anonymous, "401" on refusal), so
a test can tell what its client asked for. Ends on SIGTERM or after --lifetime seconds.
Python standard library only: the RSA signature is computed here (PKCS#1 v1.5, SHA-256).
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import signal
import socketserver
import sys
import threading
import time
import urllib.parse


# --- a little DER, enough for RSA keys --------------------------------------------------
def der_read(buf, pos):
    """(tag, content, next position) of the DER element at pos"""
    tag = buf[pos]
    ln = buf[pos + 1]
    pos += 2
    if ln & 0x80:
        n = ln & 0x7F
        ln = int.from_bytes(buf[pos:pos + n], "big")
        pos += n
    return tag, buf[pos:pos + ln], pos + ln


def der_seq(buf):
    out, pos = [], 0
    while pos < len(buf):
        tag, content, pos = der_read(buf, pos)
        out.append((tag, content))
    return out


def der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def der(tag, content):
    return bytes([tag]) + der_len(len(content)) + content


def der_int(n):
    b = n.to_bytes(n.bit_length() // 8 + 1, "big")  # a leading 0 keeps it positive
    return der(0x02, b)


def load_rsa_key(path):
    """(n, e, d) from a PEM RSA private key, PKCS#1 or PKCS#8"""
    lines = open(path).read().strip().splitlines()
    body = base64.b64decode("".join(l for l in lines if not l.startswith("-----")))
    _, top, _ = der_read(body, 0)
    items = der_seq(top)
    if len(items) == 3 and items[1][0] == 0x30:  # PKCS#8: version, algorithm, key
        _, top, _ = der_read(items[2][1], 0)
        items = der_seq(top)
    ints = [int.from_bytes(c, "big") for t, c in items]
    return ints[1], ints[2], ints[3]


def libtrust_kid(n, e):
    """libtrust's KeyID: SHA-256 of the PKIX public key, 240 bits, base32, in groups of 4"""
    rsa_oid = der(0x06, bytes.fromhex("2a864886f70d010101"))
    alg = der(0x30, rsa_oid + der(0x05, b""))
    spki = der(0x30, alg + der(0x03, b"\x00" + der(0x30, der_int(n) + der_int(e))))
    s = base64.b32encode(hashlib.sha256(spki).digest()[:30]).decode().rstrip("=")
    return ":".join(s[i:i + 4] for i in range(0, len(s), 4))


def b64url(b):
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def rs256(key, data):
    n, _, d = key
    k = (n.bit_length() + 7) // 8
    prefix = bytes.fromhex("3031300d060960864801650304020105000420")  # DigestInfo, SHA-256
    t = prefix + hashlib.sha256(data).digest()
    em = b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t
    return pow(int.from_bytes(em, "big"), d, n).to_bytes(k, "big")


# --- the server -------------------------------------------------------------------------
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cfg = None

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, obj, extra=()):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def who(self):
        """USER, "-" for anonymous, or None for bad credentials"""
        h = self.headers.get("Authorization", "")
        if not h:
            return "-"
        if not h.lower().startswith("basic "):
            return None
        try:
            user, pw = base64.b64decode(h[6:].strip()).decode().split(":", 1)
        except Exception:
            return None
        return user if self.cfg.users.get(user) == pw else None

    def do_GET(self):
        cfg = self.cfg
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        scopes = q.get("scope", [])
        if url.path != "/token":
            self.reply(404, {"error": "not found"})
            return
        user = self.who()
        if user is None or (user == "-" and not cfg.anonymous_pull):
            cfg.log("token 401 %s -> refused" % " ".join(scopes or ["-"]))
            self.reply(401, {"errors": [{"code": "UNAUTHORIZED", "message": "credentials"}]},
                       [("WWW-Authenticate", 'Basic realm="sbx-test-token"')])
            return
        if q.get("service", [""])[0] != cfg.service:
            cfg.log("token %s service %r -> refused" % (user, q.get("service")))
            self.reply(400, {"errors": [{"code": "DENIED", "message": "unknown service"}]})
            return
        access = []
        for scope in scopes:
            for one in scope.split(" "):
                parts = one.split(":")
                if len(parts) < 3:
                    continue
                typ, name, actions = parts[0], ":".join(parts[1:-1]), parts[-1].split(",")
                granted = actions if user != "-" else [a for a in actions if a == "pull"]
                access.append({"type": typ, "name": name, "actions": granted})
        now = int(time.time())
        claims = {"iss": cfg.issuer, "sub": "" if user == "-" else user, "aud": cfg.service,
                  "exp": now + 300, "nbf": now - 10, "iat": now,
                  "jti": b64url(os.urandom(12)), "access": access}
        header = {"typ": "JWT", "alg": "RS256", "kid": cfg.kid}
        signing = (b64url(json.dumps(header).encode()) + "." +
                   b64url(json.dumps(claims).encode())).encode()
        token = signing.decode() + "." + b64url(rs256(cfg.key, signing))
        cfg.log("token %s %s -> %s" % (user, " ".join(scopes or ["-"]),
                                       json.dumps(access, separators=(",", ":"))))
        self.reply(200, {"token": token, "access_token": token, "expires_in": 300,
                         "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--key", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--user", action="append", default=[])
    ap.add_argument("--anonymous-pull", action="store_true")
    ap.add_argument("--issuer", default="sbx-test-issuer")
    ap.add_argument("--service", default="sbx-test")
    ap.add_argument("--log")
    ap.add_argument("--lifetime", type=float, default=600)
    a = ap.parse_args()

    logf = open(a.log, "a") if a.log else sys.stderr
    lock = threading.Lock()

    def log(msg):
        with lock:
            logf.write(msg + "\n")
            logf.flush()

    class Cfg:
        pass
    cfg = Cfg()
    cfg.key = load_rsa_key(a.key)
    cfg.kid = libtrust_kid(cfg.key[0], cfg.key[1])
    cfg.users = dict(u.split(":", 1) for u in a.user)
    cfg.anonymous_pull, cfg.issuer, cfg.service, cfg.log = (a.anonymous_pull, a.issuer,
                                                            a.service, log)
    Handler.cfg = cfg
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threading.Timer(a.lifetime, lambda: os._exit(0)).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
