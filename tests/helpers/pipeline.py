#!/usr/bin/python3
"""Sends absolute-URL GETs for each URL given, all in one write, to the proxy of $http_proxy
(its credential as Proxy-Authorization), then prints the status line and body of each
response in turn, read by their Content-Length. A last argument connect:HOST:PORT then asks
for a CONNECT on the same connection and prints its status line and what an echo server
sends back for "ping". Python standard library only."""
import base64
import os
import socket
import sys
import urllib.parse

p = urllib.parse.urlsplit(os.environ["http_proxy"])
cred = base64.b64encode(f"{p.username}:{p.password}".encode()).decode()
auth = f"Proxy-Authorization: Basic {cred}\r\n"
urls = [u for u in sys.argv[1:] if not u.startswith("connect:")]
tunnel = [u[8:] for u in sys.argv[1:] if u.startswith("connect:")]
reqs = b""
for u in urls:
    host = urllib.parse.urlsplit(u).netloc
    reqs += f"GET {u} HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n".encode()
s = socket.create_connection((p.hostname, p.port), timeout=10)
s.sendall(reqs)
f = s.makefile("rb")


def head():
    status = f.readline().decode().strip()
    length = 0
    while True:
        h = f.readline().decode()
        if h in ("\r\n", ""):
            return status, length
        k, v = h.split(":", 1)
        if k.lower() == "content-length":
            length = int(v)


for _ in urls:
    status, length = head()
    print(status, f.read(length).decode().strip())
for t in tunnel:
    s.sendall(f"CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n{auth}\r\n".encode())
    status, _ = head()
    s.sendall(b"ping\n")
    print(status, f.readline().decode().strip())
