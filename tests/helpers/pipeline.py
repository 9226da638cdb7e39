#!/usr/bin/python3
"""Sends absolute-URL GETs for each URL given, all in one write, to the proxy of $http_proxy
(its credential as Proxy-Authorization), then prints the status line and body of each
response in turn, read by their Content-Length. Python standard library only."""
import base64
import os
import socket
import sys
import urllib.parse

p = urllib.parse.urlsplit(os.environ["http_proxy"])
cred = base64.b64encode(f"{p.username}:{p.password}".encode()).decode()
reqs = b""
for u in sys.argv[1:]:
    host = urllib.parse.urlsplit(u).netloc
    reqs += (f"GET {u} HTTP/1.1\r\nHost: {host}\r\nProxy-Authorization: Basic {cred}\r\n\r\n").encode()
s = socket.create_connection((p.hostname, p.port), timeout=10)
s.sendall(reqs)
f = s.makefile("rb")
for _ in sys.argv[1:]:
    status = f.readline().decode().strip()
    length = 0
    while True:
        h = f.readline().decode()
        if h in ("\r\n", ""):
            break
        k, v = h.split(":", 1)
        if k.lower() == "content-length":
            length = int(v)
    print(status, f.read(length).decode().strip())
