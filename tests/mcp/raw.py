#!/usr/bin/env python3
"""The JSON-RPC layer of `sbx mcp`, byte by byte: what an SDK never sends.

Usage: raw.py SBX. Prints one line per check ("ok - ..." / "not ok - ..."); exits 1 on a
failure. Every answer is read with a deadline: a server that hangs fails, it does not stall.
"""
import json
import os
import select
import subprocess
import sys

SBX = sys.argv[1]
failed = 0


class Server:
    def __init__(self):
        self.p = subprocess.Popen([SBX, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env={"SBX_HOME": os.environ["SBX_HOME"], "PATH": "/usr/bin:/bin"})
        self.buf = b""

    def send(self, raw):
        self.p.stdin.write(raw)
        self.p.stdin.flush()

    def line(self, timeout=20):
        while b"\n" not in self.buf:
            r, _, _ = select.select([self.p.stdout], [], [], timeout)
            if not r:
                raise AssertionError("no answer within %ds" % timeout)
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError("the server closed its output")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def rpc(self, obj):
        self.send(json.dumps(obj).encode() + b"\n")
        return self.line()

    def init(self, version="2025-06-18"):
        r = self.rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": version, "capabilities": {},
                                 "clientInfo": {"name": "raw", "version": "1"}}})
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        return r

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=20)
        self.p.stdout.close()
        return rc


def check(desc):
    def wrap(fn):
        global failed
        s = Server()
        try:
            fn(s)
            print("ok - " + desc)
        except Exception as e:  # noqa: BLE001 -- any failure is the check's
            failed += 1
            print("not ok - %s: %r" % (desc, e))
        finally:
            if s.p.poll() is None:
                s.p.kill()
                s.p.wait()
        return fn
    return wrap


def err(answer, code, id_=None):
    assert "error" in answer and answer["error"]["code"] == code, answer
    assert answer["id"] == id_, answer
    assert isinstance(answer["error"]["message"], str) and answer["error"]["message"], answer


def alive(s, n=99):
    assert s.rpc({"jsonrpc": "2.0", "id": n, "method": "ping"}) == \
        {"jsonrpc": "2.0", "id": n, "result": {}}


@check("initialize: the client's revision when known, else 2025-06-18")
def _(s):
    r = s.init("2025-03-26")
    assert r["result"]["protocolVersion"] == "2025-03-26", r
    s2 = Server()
    try:
        r = s2.init("1999-01-01")
        assert r["result"]["protocolVersion"] == "2025-06-18", r
        caps = r["result"]["capabilities"]
        assert "tools" in caps and "resources" in caps, r
        assert r["result"]["serverInfo"]["name"] == "sbx", r
    finally:
        s2.close()


@check("malformed JSON: -32700 with id null, and the server goes on")
def _(s):
    s.init()
    s.send(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    err(s.line(), -32700)
    s.send(b'\xff\xfe not json\n')
    err(s.line(), -32700)
    alive(s)


@check("unknown method: -32601 with the request's id")
def _(s):
    s.init()
    err(s.rpc({"jsonrpc": "2.0", "id": "abc", "method": "no/such"}), -32601, "abc")


@check("notifications get no answer")
def _(s):
    s.init()
    s.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n')
    s.send(b'{"jsonrpc":"2.0","method":"no/such/notification"}\n')
    alive(s, 5)


@check("a batch: -32600 in 2025-06-18, answered in 2025-03-26 (control)")
def _(s):
    s.init()
    s.send(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n')
    err(s.line(), -32600)
    alive(s)
    s2 = Server()
    try:
        s2.init("2025-03-26")
        s2.send(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},'
                b'{"jsonrpc":"2.0","method":"notifications/x"},'
                b'{"jsonrpc":"2.0","id":2,"method":"no/such"}]\n')
        a = s2.line()
        assert isinstance(a, list) and len(a) == 2, a
        assert a[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}, a
        err(a[1], -32601, 2)
    finally:
        s2.close()


@check("a line over 16 MiB: -32600, the server goes on")
def _(s):
    s.init()
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"x" * (17 << 20) + b'"}}\n'
    s.send(big)
    err(s.line(timeout=60), -32600)
    alive(s)
    # a large line under the cap is read (control)
    ok = b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"' + b"x" * (8 << 20) + b'"}}\n'
    s.send(ok)
    assert s.line(timeout=60) == {"jsonrpc": "2.0", "id": 7, "result": {}}


@check("invalid requests: -32600; params not an object: -32602")
def _(s):
    s.init()
    err(s.rpc({"jsonrpc": "1.0", "id": 1, "method": "ping"}), -32600, 1)
    err(s.rpc({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}), -32600)
    err(s.rpc({"jsonrpc": "2.0", "id": 2, "method": 5}), -32600, 2)
    err(s.rpc(42), -32600)
    s.send(b"[]\n")
    err(s.line(), -32600)
    err(s.rpc({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": [1]}), -32602, 3)
    err(s.rpc({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "sandbox_ls", "arguments": "x"}}), -32602, 4)
    err(s.rpc({"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {}}), -32602, 5)
    alive(s)


@check("CRLF lines, blank lines, a last line without newline; EOF ends the server with 0")
def _(s):
    s.send(b'\n\r\n{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n')
    assert s.line() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    s.send(b'{"jsonrpc":"2.0","id":2,"method":"ping"}')
    s.p.stdin.close()
    assert s.line() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert s.p.wait(timeout=20) == 0


sys.exit(1 if failed else 0)
