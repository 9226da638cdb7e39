#!/usr/bin/python3
"""A SOCKS5 client (RFC 1928, RFC 1929) that sends a line through a tunnel and checks the echo.

Usage: socks.py [--proxy URL] [--no-auth] HOST PORT MESSAGE
URL defaults to $SBX_SOCKS_PROXY (socks5h://USER:PASS@HOST:PORT); its user and password are sent
with the username/password method unless --no-auth, which offers "no authentication" only.
HOST is sent as a domain name (the proxy resolves it). Prints "reply 0xNN" on stderr when
the proxy refuses. Exit: 0 the echo came back, 1 it did not, 2 the proxy refused (method
or reply), 3 the connection to the proxy failed. Python standard library only.
"""
import argparse
import os
import socket
import struct
import sys
import urllib.parse


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("proxy closed the connection")
        buf += chunk
    return buf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", default=os.environ.get("SBX_SOCKS_PROXY", ""))
    ap.add_argument("--no-auth", action="store_true")
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("message")
    a = ap.parse_args()

    u = urllib.parse.urlsplit(a.proxy)
    if u.scheme not in ("socks5", "socks5h") or not u.hostname:
        sys.stderr.write("socks: not a socks5 URL: %r\n" % a.proxy)
        return 3
    user = urllib.parse.unquote(u.username or "")
    password = urllib.parse.unquote(u.password or "")
    try:
        s = socket.create_connection((u.hostname, u.port or 1080), timeout=a.timeout)
    except OSError as e:
        sys.stderr.write("socks: %s\n" % e)
        return 3
    try:
        method = 0x00 if a.no_auth or not user else 0x02
        s.sendall(bytes([5, 1, method]))
        ver, chosen = recv_exact(s, 2)
        if ver != 5 or chosen != method:
            sys.stderr.write("socks: method 0x%02x refused (answer 0x%02x)\n" % (method, chosen))
            return 2
        if method == 0x02:
            u8, p8 = user.encode(), password.encode()
            s.sendall(bytes([1, len(u8)]) + u8 + bytes([len(p8)]) + p8)
            _, status = recv_exact(s, 2)
            if status != 0:
                sys.stderr.write("socks: authentication refused (0x%02x)\n" % status)
                return 2
        h = a.host.encode()
        s.sendall(bytes([5, 1, 0, 3, len(h)]) + h + struct.pack("!H", a.port))
        ver, rep, _, atyp = recv_exact(s, 4)
        if rep != 0:
            sys.stderr.write("socks: reply 0x%02x\n" % rep)
            return 2
        if atyp == 1:
            recv_exact(s, 4)
        elif atyp == 4:
            recv_exact(s, 16)
        elif atyp == 3:
            recv_exact(s, recv_exact(s, 1)[0])
        recv_exact(s, 2)
        msg = a.message.encode() + b"\n"
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            chunk = s.recv(len(msg) - len(got))
            if not chunk:
                break
            got += chunk
        s.close()
    except (OSError, EOFError) as e:
        sys.stderr.write("socks: %s\n" % e)
        return 3
    print(got.decode("utf-8", "replace").rstrip("\n"))
    return 0 if got == msg else 1


if __name__ == "__main__":
    sys.exit(main())
