#!/usr/bin/python3
"""Clients that lean on a sandbox's supervisor, for t0810-escape-net.sh; run inside a sandbox.

  netload.py flood HOST PORT N --hold SECONDS --status FILE
      opens N TCP connections that send nothing (at most SECONDS of trying), writes
      "opened A refused B" to FILE, keeps them SECONDS more, then writes "done A B C" (C: how
      many the other side had closed by then) and exits
  netload.py slow HOST PORT --every SECONDS --data BYTES [--limit SECONDS]
      sends BYTES one byte every SECONDS and prints "closed after T s, N bytes sent, got: LINE"
      when the other side ends the connection, or "open after T s" at --limit
  netload.py tunnel PROXY_PORT HOST PORT --talk SECONDS --every SECONDS [--limit SECONDS]
      CONNECTs through the HTTP proxy on 127.0.0.1:PROXY_PORT to an echo server, echoes one
      line every --every seconds for --talk seconds, then is quiet; prints "closed after T s"
      when the proxy ends the tunnel, or "open after T s" at --limit
  netload.py socks-raw PORT HOSTBYTES_HEX DPORT
      a SOCKS5 CONNECT to a domain given as raw bytes (hex); prints the reply code
  netload.py connect-raw PORT TARGET_HEX
      sends "CONNECT <raw target> HTTP/1.1" to the HTTP proxy; prints its status line and the
      body of its answer
Python standard library only; every loop is bounded.
"""
import argparse
import errno
import os
import resource
import select
import socket
import sys
import time


def flood(a):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # all at once, non-blocking: a SYN the kernel drops now and then costs no one a second
    pending, socks, refused = {}, [], 0
    for _ in range(a.n):
        s = socket.socket()
        s.setblocking(False)
        if s.connect_ex((a.host, a.port)) not in (0, errno.EINPROGRESS):
            refused += 1
            s.close()
            continue
        pending[s.fileno()] = s
    p = select.poll()
    for fd in pending:
        p.register(fd, select.POLLOUT)
    t_end = time.monotonic() + min(a.hold, 10)
    while pending and time.monotonic() < t_end:
        for fd, _ in p.poll(100):
            s = pending.pop(fd)
            p.unregister(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                socks.append(s)
            else:
                refused += 1
                s.close()
    refused += len(pending)
    with open(a.status + ".tmp", "w") as f:
        f.write("opened %d refused %d\n" % (len(socks), refused))
    os.rename(a.status + ".tmp", a.status)
    time.sleep(a.hold)
    # ended by the other side: readable (its end, or an answer, 408 or 503, before it)
    p = select.poll()
    for s in socks:
        p.register(s.fileno(), select.POLLIN)
    closed = len(p.poll(0))
    with open(a.status + ".tmp", "w") as f:
        f.write("done %d %d %d\n" % (len(socks), refused, closed))
    os.rename(a.status + ".tmp", a.status)


def slow(a):
    data = a.data.encode().decode("unicode_escape").encode("latin-1")
    s = socket.create_connection((a.host, a.port), timeout=5)
    t0, sent, got = time.monotonic(), 0, b""
    while time.monotonic() - t0 < a.limit:
        if sent < len(data):
            try:
                s.send(data[sent:sent + 1])
                sent += 1
            except OSError:
                break
        r, _, _ = select.select([s], [], [], a.every)
        if r:
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            got += chunk
    t = time.monotonic() - t0
    line = got.split(b"\r\n", 1)[0].decode("latin-1")
    if t >= a.limit:
        print("open after %.1f s, %d bytes sent" % (t, sent))
    else:
        print("closed after %.1f s, %d bytes sent, got: %s" % (t, sent, line))


def tunnel(a):
    s = socket.create_connection(("127.0.0.1", a.proxy_port), timeout=10)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
              (a.host.encode(), a.port, a.host.encode(), a.port))
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            sys.exit("tunnel: the proxy closed: %r" % head)
        head += chunk
    if b" 200 " not in head.split(b"\r\n")[0]:
        sys.exit("tunnel: %r" % head.split(b"\r\n")[0])
    t0, n = time.monotonic(), 0
    next_send = t0
    s.settimeout(None)
    while True:
        now = time.monotonic()
        if now - t0 >= a.limit:
            break
        if now - t0 < a.talk and now >= next_send:
            s.sendall(b"ping %d\n" % n)
            n += 1
            next_send = now + a.every
        r, _, _ = select.select([s], [], [], max(0.01, min(next_send - now, a.every)))
        if r:
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                print("closed after %.1f s, %d lines sent" % (time.monotonic() - t0, n))
                return
    print("open after %.1f s, %d lines sent" % (time.monotonic() - t0, n))


def socks_raw(a):
    host = bytes.fromhex(a.host_hex)
    s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        sys.exit("socks-raw: no method")
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host + a.dport.to_bytes(2, "big"))
    r = s.recv(10)
    print("reply %d" % (r[1] if len(r) > 1 else -1))


def connect_raw(a):
    target = bytes.fromhex(a.target_hex)
    s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
    s.sendall(b"CONNECT " + target + b" HTTP/1.1\r\n\r\n")
    got = b""
    for _ in range(100):
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    print(head.split(b"\r\n", 1)[0].decode("latin-1"))
    sys.stdout.write(body.decode("latin-1"))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("flood")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("n", type=int)
    p.add_argument("--hold", type=float, default=10)
    p.add_argument("--status", required=True)
    p = sub.add_parser("slow")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--every", type=float, default=2)
    p.add_argument("--data", required=True)
    p.add_argument("--limit", type=float, default=30)
    p = sub.add_parser("tunnel")
    p.add_argument("proxy_port", type=int)
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--talk", type=float, default=0)
    p.add_argument("--every", type=float, default=1)
    p.add_argument("--limit", type=float, default=10)
    p = sub.add_parser("socks-raw")
    p.add_argument("port", type=int)
    p.add_argument("host_hex")
    p.add_argument("dport", type=int)
    p = sub.add_parser("connect-raw")
    p.add_argument("port", type=int)
    p.add_argument("target_hex")
    a = ap.parse_args()
    {"flood": flood, "slow": slow, "tunnel": tunnel, "socks-raw": socks_raw,
     "connect-raw": connect_raw}[a.cmd](a)


if __name__ == "__main__":
    main()
