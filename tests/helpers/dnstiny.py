#!/usr/bin/python3
"""A nameserver for the network tests: UDP on 127.0.0.1, A records only.

Usage: dnstiny.py --ready FILE --addr ADDR [--ttl SECONDS]
Every name under .dns.test answers ADDR with the TTL; nx*.dns.test answers NXDOMAIN;
flaky*.dns.test answers SERVFAIL to its first query and ADDR after; slow*.dns.test answers
after 0.3 s; any other name NXDOMAIN. AAAA of a name that has an A record: no data. Each
query is logged on stderr as "query TYPE NAME". FILE gets the port once it listens. The
process ends on SIGTERM, or by itself after 240 s. Python standard library only.
"""
import argparse
import os
import socket
import struct
import sys
import threading
import time


def name_of(msg):
    labels, i = [], 12
    while msg[i]:
        n = msg[i]
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    return ".".join(labels).lower(), i + 1


def answer(msg, rcode, addr=None, ttl=0):
    qid = msg[:2]
    _, end = name_of(msg)
    question = msg[12:end + 4]
    an = 1 if addr else 0
    head = qid + struct.pack(">HHHHH", 0x8180 | rcode, 1, an, 0, 0)
    out = head + question
    if addr:
        out += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, ttl, 4) + socket.inet_aton(addr)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ready", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--ttl", type=int, default=60)
    a = ap.parse_args()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    with open(a.ready + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    os.rename(a.ready + ".tmp", a.ready)
    seen = set()
    end = time.time() + 240

    def reply(msg, peer, delay, data):
        time.sleep(delay)
        s.sendto(data, peer)

    while time.time() < end:
        msg, peer = s.recvfrom(4096)
        if len(msg) < 17:
            continue
        name, i = name_of(msg)
        qtype = struct.unpack(">H", msg[i:i + 2])[0]
        sys.stderr.write("query %s %s\n" % ({1: "A", 28: "AAAA"}.get(qtype, qtype), name))
        sys.stderr.flush()
        first = name.split(".")[0]
        delay = 0
        if not name.endswith(".dns.test") or first.startswith("nx"):
            data = answer(msg, 3)
        elif first.startswith("flaky") and (name, qtype) not in seen:
            data = answer(msg, 2)
        elif qtype != 1:
            data = answer(msg, 0)
        else:
            data = answer(msg, 0, a.addr, a.ttl)
            delay = 0.3 if first.startswith("slow") else 0
        seen.add((name, qtype))
        threading.Thread(target=reply, args=(msg, peer, delay, data), daemon=True).start()


main()
