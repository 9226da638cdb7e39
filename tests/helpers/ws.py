#!/usr/bin/python3
"""A WebSocket (RFC 6455) echo server and client, Python standard library only.

  ws.py serve PORT [--bind ADDR] [--lifetime SECONDS]
      echoes every text and binary message; answers a plain GET (no Upgrade) with
      "ws echo server" so a test can wait for it with curl
  ws.py client URL [--header 'NAME: VALUE']... [--size N] MESSAGE
      URL is ws://HOST:PORT/PATH or http://...; sends MESSAGE (repeated to N bytes with
      --size) as one masked text frame, reads the echo and closes. Prints the echo (or its
      length and a digest with --size); exits 0 when the echo is the message, 1 when it is
      not, 2 when the handshake fails (the status line is printed on stderr), 3 when the
      connection fails.
"""
import argparse
import base64
import hashlib
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def accept_key(key):
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def read_head(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError("connection closed in the HTTP head")
        buf += chunk
        if len(buf) > 65536:
            raise ValueError("HTTP head too long")
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return lines[0], headers, rest


def read_frame(sock):
    """(fin, opcode, payload), unmasking a client's frame"""
    b1, b2 = recv_exact(sock, 2)
    fin, opcode = b1 & 0x80, b1 & 0x0F
    masked, n = b2 & 0x80, b2 & 0x7F
    if n == 126:
        n = struct.unpack("!H", recv_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(sock, 8))[0]
    mask = recv_exact(sock, 4) if masked else None
    payload = recv_exact(sock, n)
    if mask:
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
    return fin, opcode, payload


def frame(opcode, payload, mask):
    head = bytes([0x80 | opcode])
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if mask:
        key = os.urandom(4)
        payload = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
        head += key
    return head + payload


def log(msg):
    sys.stderr.write("ws: %s\n" % msg)
    sys.stderr.flush()


def serve_one(conn, peer):
    conn.settimeout(60)
    try:
        line, headers, _ = read_head(conn)
        log("%s %s" % (peer[0], line))
        if headers.get("upgrade", "").lower() != "websocket":
            body = b"ws echo server\n"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (len(body), body))
            return
        key = headers.get("sec-websocket-key", "")
        conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                      % accept_key(key)).encode())
        message, msg_op = b"", 0
        while True:
            fin, opcode, payload = read_frame(conn)
            if opcode == 8:
                conn.sendall(frame(8, payload[:2], False))
                return
            if opcode == 9:
                conn.sendall(frame(10, payload, False))
                continue
            if opcode in (1, 2):
                message, msg_op = payload, opcode
            elif opcode == 0:
                message += payload
            else:
                continue
            if fin:
                conn.sendall(frame(msg_op, message, False))
                message = b""
    except (OSError, EOFError, ValueError) as e:
        log("%s: %s" % (peer[0], e))
    finally:
        conn.close()


def serve(a):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.bind, a.port))
    srv.listen(64)
    srv.settimeout(0.5)
    log("listening on %s:%d" % (a.bind, srv.getsockname()[1]))
    deadline = time.monotonic() + a.lifetime
    while time.monotonic() < deadline:
        try:
            conn, peer = srv.accept()
        except socket.timeout:
            continue
        conn.settimeout(None)
        threading.Thread(target=serve_one, args=(conn, peer), daemon=True).start()


def client(a):
    u = urllib.parse.urlsplit(a.url)
    tls = u.scheme in ("wss", "https")
    if tls:
        sys.exit("ws: wss is not supported")
    port = u.port or 80
    path = (u.path or "/") + ("?" + u.query if u.query else "")
    message = a.message.encode()
    if a.size:
        message = (message * (a.size // max(len(message), 1) + 1))[:a.size]
    sock = socket.create_connection((u.hostname, port), timeout=a.timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ["GET %s HTTP/1.1" % path, "Host: %s:%d" % (u.hostname, port), "Upgrade: websocket",
           "Connection: Upgrade", "Sec-WebSocket-Key: %s" % key, "Sec-WebSocket-Version: 13"]
    req += a.header
    sock.sendall(("\r\n".join(req) + "\r\n\r\n").encode())
    line, headers, rest = read_head(sock)
    if " 101 " not in line + " ":
        sys.stderr.write("ws: handshake failed: %s\n" % line)
        return 2
    if headers.get("sec-websocket-accept") != accept_key(key):
        sys.stderr.write("ws: bad Sec-WebSocket-Accept %r\n" % headers.get("sec-websocket-accept"))
        return 2
    if rest:
        sys.stderr.write("ws: unexpected bytes after the handshake\n")
        return 2
    sock.sendall(frame(1, message, True))
    echo = b""
    while True:
        fin, opcode, payload = read_frame(sock)
        if opcode in (1, 0):
            echo += payload
            if fin:
                break
        elif opcode == 8:
            break
    sock.sendall(frame(8, struct.pack("!H", 1000), True))
    try:
        read_frame(sock)  # the server's close
    except (OSError, EOFError):
        pass
    sock.close()
    if a.size:
        print("%d %s" % (len(echo), hashlib.sha256(echo).hexdigest()))
    else:
        print(echo.decode("utf-8", "replace"))
    return 0 if echo == message else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("port", type=int)
    s.add_argument("--bind", default="127.0.0.1")
    s.add_argument("--lifetime", type=float, default=300)
    c = sub.add_parser("client")
    c.add_argument("url")
    c.add_argument("message")
    c.add_argument("--header", action="append", default=[])
    c.add_argument("--size", type=int, default=0)
    c.add_argument("--timeout", type=float, default=10)
    a = ap.parse_args()
    if a.cmd == "serve":
        serve(a)
        return 0
    try:
        return client(a)
    except (OSError, EOFError, ValueError) as e:
        sys.stderr.write("ws: %s\n" % e)
        return 3


if __name__ == "__main__":
    sys.exit(main())
